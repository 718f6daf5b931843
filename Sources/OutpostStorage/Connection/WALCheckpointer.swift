import Foundation
import GRDBSQLite
import OutpostCore

/// Copies committed WAL frames back into the database file on a background thread, instead of
/// in the commit that crossed SQLite's automatic checkpoint threshold.
///
/// With SQLite's own automatic checkpoint, the commit that leaves 1,000 or more frames in the WAL
/// also writes them all into the main file and syncs it before it returns: a server answering a
/// 5,000-edit batch spent about as long on that as on the commit itself. Here the writer
/// connection's WAL hook only notes the frame count; a separate read-write connection runs a
/// passive checkpoint (it never blocks readers or the writer, and the writer keeps appending
/// while it copies). Durability is unchanged: a commit is durable once its frames are synced in
/// the WAL, and a checkpoint interrupted by a crash is completed by the next opener.
final class WALCheckpointer: Sendable {
    /// Frames in the WAL after a commit that start a checkpoint (SQLite's automatic default).
    static let frameThreshold: Int32 = 1000
    /// Frames in the WAL after which the next write transaction first waits for the checkpoint
    /// (16 MB of 4 KB pages). SQLite starts the WAL over only when a write transaction begins
    /// with every frame copied back; with back-to-back commits (the batches of a large upload)
    /// the background copy was always behind at that moment and the WAL only grew: 2.4 GB
    /// after 160,000 synced edits, on fresh blocks the file system zeroes first.
    static let writerWaitFrames: Int32 = 4000
    /// Frames in the WAL past which a checkpoint starts even while deferred (64 MB of 4 KB pages).
    static let deferredFramesLimit: Int32 = 16_000
    /// How long a checkpoint that came due during a deferral waits, once the deferral ends, for
    /// another to begin (the next step of the same sync job) before it starts.
    static let deferralGrace: DispatchTimeInterval = .milliseconds(50)

    private let path: String
    private let queue = DispatchQueue(label: "outpost.wal-checkpoint", qos: .utility)
    private let state = Locked(State())

    private struct State {
        var scheduled = false
        var closed = false
        var held = false
        /// Deferrals running (``deferCopies()``).
        var deferrals = 0
        /// The WAL's frames after the last commit.
        var frames: Int32 = 0
        /// The checkpointing connection, opened on first use (only used on `queue`).
        var handle: OpaquePointer?

        /// Marks a checkpoint scheduled when one is due and none is (a deferral lets one start
        /// only past ``deferredFramesLimit``); whether the caller starts it.
        mutating func claimStart() -> Bool {
            guard frames >= WALCheckpointer.frameThreshold, !scheduled, !closed else { return false }
            guard deferrals == 0 || frames >= WALCheckpointer.deferredFramesLimit else { return false }
            scheduled = true
            return true
        }
    }

    init(path: String) {
        self.path = path
    }

    deinit {
        state.withLock { state in
            if let handle = state.handle { sqlite3_close_v2(handle) }
        }
    }

    /// Installs the WAL hook on the writer connection (replacing SQLite's automatic checkpoint).
    /// The checkpointer must outlive the connection: the geodatabase holds both.
    func install(on connection: OpaquePointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_wal_hook(connection, { context, _, _, frames in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(frames: frames)
            return SQLITE_OK
        }, context)
    }

    /// After a commit that left `frames` frames in the WAL (called on the writer's thread).
    func committed(frames: Int32) {
        let start = state.withLock { state -> Bool in
            state.frames = frames
            return state.claimStart()
        }
        if start { queue.async { self.run() } }
    }

    private func run() {
        let handle = state.withLock { state -> OpaquePointer? in
            state.scheduled = false
            guard !state.closed else { return nil }
            if state.handle == nil {
                var opened: OpaquePointer?
                // A first read makes the new connection open the WAL (until then it checkpoints nothing).
                if sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
                    sqlite3_exec(opened, "PRAGMA schema_version", nil, nil, nil) == SQLITE_OK
                {
                    state.handle = opened
                } else {
                    sqlite3_close_v2(opened)
                }
            }
            return state.handle
        }
        // SQLITE_BUSY (another process is checkpointing) leaves the frames for the next commit.
        guard let handle else { return }
        sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }

    /// Called on the writer's thread before it begins a write transaction: when the WAL has
    /// grown past ``writerWaitFrames``, waits for the scheduled or running checkpoint, so the
    /// transaction can start the WAL over (unless a reader still uses its frames).
    func waitIfBehind() {
        let wait = state.withLock { $0.frames >= Self.writerWaitFrames && !$0.held && !$0.closed }
        if wait { queue.sync {} }
    }

    /// Defers the checkpoints that come due until ``endDeferral()`` (as many ends as defers),
    /// unless the WAL grows past ``deferredFramesLimit``. A sync job defers them while it runs:
    /// a checkpoint after its download's commit copies every page the download wrote (27 MB
    /// for 16,000 changes of 100,000 points, ~60 ms of a core and the disk's sync), and it ran
    /// beside the job's verify, which reads the whole layer on both cores. Commits are as
    /// durable as ever (their frames are synced in the WAL); readers find the pages in the WAL.
    func deferCopies() {
        state.withLock { $0.deferrals += 1 }
    }

    /// Ends a deferral; a checkpoint that came due starts after ``deferralGrace`` if no other
    /// deferral began meanwhile.
    func endDeferral() {
        let last = state.withLock { state -> Bool in
            state.deferrals = max(0, state.deferrals - 1)
            return state.deferrals == 0
        }
        guard last else { return }
        queue.asyncAfter(deadline: .now() + Self.deferralGrace) {
            if self.state.withLock({ $0.claimStart() }) { self.run() }
        }
    }

    /// Holds (true) or lets go (false) the checkpoints scheduled meanwhile; for tests that watch
    /// the main file between a commit and its checkpoint.
    func hold(_ held: Bool) {
        state.withLock { $0.held = held }
        if held { queue.suspend() } else { queue.resume() }
    }

    /// Stops (true) or restarts (false) the background copies without holding them as
    /// ``hold(_:)`` does: writers still wait for a due checkpoint. For tests of that wait.
    func suspendCopies(_ suspended: Bool) {
        if suspended { queue.suspend() } else { queue.resume() }
    }

    /// Whether a deferral is running (``deferCopies()``).
    var isDeferred: Bool { state.withLock { $0.deferrals > 0 } }

    /// Whether a checkpoint is scheduled and has not started yet.
    var isScheduled: Bool { state.withLock { $0.scheduled } }

    /// Waits for a running checkpoint and closes the checkpointing connection; later commits
    /// start none.
    func close() {
        queue.sync {
            state.withLock { state in
                state.closed = true
                if let handle = state.handle { sqlite3_close_v2(handle) }
                state.handle = nil
            }
        }
    }
}
