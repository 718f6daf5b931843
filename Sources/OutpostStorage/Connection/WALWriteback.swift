import Foundation

#if os(Linux)
import Glibc
#endif

/// Starts the disk's writing of a large commit's write-ahead log while SQLite is still
/// appending the commit's frames, so the commit's closing sync of the log has little left to
/// wait for.
///
/// A commit writes its frames into the log through the page cache and then syncs the file;
/// the kernel writes nothing of them before that sync (the frames are far below its dirty-page
/// thresholds). For a server batch of 16,000 edits that is 27 MB: ~55 ms of copying frames,
/// with both the disk and the other core idle, then ~70 ms of the sync with both cores idle.
/// While the commit runs, a helper thread asks the kernel every few milliseconds to start
/// writing the log's dirty pages (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`, which
/// returns without waiting for the disk), so the copying and the disk's writing overlap, as
/// PostgreSQL's `wal_writer_flush_after` and `checkpoint_flush_after` do. Durability is
/// SQLite's, unchanged: the commit still returns only after its own sync of the log.
///
/// Linux only; elsewhere ``start(walPath:)`` returns nil.
final class WALWriteback: Sendable {
    /// Rows a transaction changes from which its commit starts the writeback (a smaller
    /// commit's sync is short, and a thread would cost more than it saves).
    static let minimumChanges: Int64 = 2000
    /// How often the helper asks for writeback.
    static let interval: DispatchTimeInterval = .milliseconds(2)

    /// Signalled by ``stop()``: ends the helper's wait between requests at once (a commit
    /// returns no later for it).
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    #if os(Linux)
    /// `sync_file_range(2)`, which Glibc's Swift module does not declare.
    private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
    private static let syncFileRange: SyncFileRange? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
        return unsafeBitCast(symbol, to: SyncFileRange.self)
    }()
    /// `SYNC_FILE_RANGE_WRITE` (linux/fs.h).
    private static let write: UInt32 = 2
    #endif

    private init() {}

    /// Starts the helper on the log at `walPath` (nil where the system has no such call or
    /// the log cannot be opened); `accepted` runs after each request the kernel took.
    /// ``stop()`` must follow once the commit has returned.
    static func start(walPath: String, accepted: @escaping @Sendable () -> Void = {}) -> WALWriteback? {
        #if os(Linux)
        guard let syncFileRange else { return nil }
        let fd = open(walPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let writeback = WALWriteback()
        let thread = Thread {
            repeat {
                if syncFileRange(fd, 0, 0, Self.write) == 0 { accepted() }
            } while writeback.wake.wait(timeout: .now() + Self.interval) == .timedOut
            close(fd)
            writeback.finished.signal()
        }
        thread.name = "outpost.wal-writeback"
        thread.start()
        return writeback
        #else
        return nil
        #endif
    }

    /// Stops the helper and waits for it to let the log go (for a request in flight at most,
    /// not for its wait between requests).
    func stop() {
        wake.signal()
        finished.wait()
    }
}
