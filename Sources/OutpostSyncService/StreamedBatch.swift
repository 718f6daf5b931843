import Foundation
import NIOCore
import OutpostCore
import OutpostDigest
import OutpostProtocol

/// An upload batch's body as it arrives (docs/sync.md, "Framed batches"): the request's task
/// feeds its bytes in (``pump(_:)``), which hashes them and, for a framed body, decodes each frame
/// as soon as it is whole; the backend's write transaction takes the frames as it applies them
/// (``nextRun()``, blocking its thread). The transaction never waits on a slow link:
/// when the next frame takes longer than `stallLimit` (or the waits add up to
/// `totalStallLimit`), ``nextRun()`` throws ``WholeBodyNeeded``, the transaction
/// rolls back, and the batch is applied once all of it has arrived.
public final class StreamedBatch: @unchecked Sendable {
    /// The batch cannot be applied as it streams (a stalled body, or a seq the ledger already
    /// holds, which only the whole body's hash decides): apply it whole.
    public struct WholeBodyNeeded: Error {
        package init() {}
    }

    /// The body is larger than the server takes.
    public struct TooLarge: Error {
        /// The most bytes the server takes.
        public let limit: Int
    }

    /// Consecutive frames of one announced layer (its place in the head's list).
    public struct Run: Sendable {
        /// The layer's place in the head's list.
        public var position: Int
        /// The edits, in order.
        public var edits: [BatchEdit]
    }

    /// A batch announcing fewer edits is applied once all of it has come: it is a frame or two,
    /// whose last arrives only after the replica's commit, so streaming it would hold the write
    /// lock through that commit for nothing (other crews' batches wait behind it).
    public static let minimumStreamedEdits = 2_000

    /// The most edits of a run the writer takes at once (unless one frame holds more): frames
    /// that arrive while it writes join the last one of their layer up to this many, and
    /// ``nextRun()`` takes them so.
    public static let runEdits = 2_000

    /// The longest wait for the next frame, and for all of them together, before the write
    /// transaction gives the body up.
    let stallLimit: Duration
    let totalStallLimit: Duration

    private let lock = NSCondition()
    // Guarded by `lock`.
    private var reader = UploadBatch.FramedReader()
    private var framed: Bool?
    private var frames: [UploadBatch.FramedReader.Frame] = []
    private var bytes: [UInt8] = []
    private var hasher = SHA256()
    private var digest: String?
    private var ended = false
    /// Why the body cannot be read on (a transport error, too many bytes, a malformed frame).
    private var failure: (any Error)?
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var stalled = Duration.zero
    private let limit: Int

    /// A batch body that will arrive.
    /// - Parameter limit: the most bytes the body may have.
    /// - Parameter stallLimit: the longest the body may go without a byte before the batch is applied whole
    ///   or refused.
    /// - Parameter totalStallLimit: the longest all stalls of the body may add up to.
    public init(limit: Int, stallLimit: Duration = .milliseconds(100), totalStallLimit: Duration = .seconds(1)) {
        self.limit = limit
        self.stallLimit = stallLimit
        self.totalStallLimit = totalStallLimit
    }

    /// Reads `body` to its end (or to the limit), feeding each piece in.
    public func pump<Body: AsyncSequence>(_ body: Body) async where Body.Element == ByteBuffer {
        do {
            for try await buffer in body {
                guard feed(buffer) else { return }
            }
            end(nil)
        } catch {
            end(error)
        }
    }

    /// Takes a piece of the body; false once the body is over its limit.
    private func feed(_ buffer: ByteBuffer) -> Bool {
        lock.lock()
        defer { signal() }
        guard bytes.count + buffer.readableBytes <= limit else {
            failure = failure ?? TooLarge(limit: limit)
            ended = true
            return false
        }
        buffer.withUnsafeReadableBytes { raw in
            hasher.update(raw)
            bytes.append(contentsOf: raw)
        }
        if framed == nil {
            guard bytes.count >= 4 else { return true }
            framed = UploadBatch.isFramed(Data(bytes.prefix(4)))
            if framed == true { bytes.withUnsafeBytes { reader.append($0) } }
        } else if framed == true, failure == nil {
            buffer.withUnsafeReadableBytes { reader.append($0) }
        }
        guard framed == true, failure == nil else { return true }
        do {
            if try reader.readHead() != nil {
                // A frame of the layer of the last one not yet taken joins it (up to a run's
                // edits), decoded in place: the writer takes it whole, without copying edits.
                while try reader.nextFrame(into: &frames, joiningUpTo: Self.runEdits) {}
            }
        } catch {
            failure = error
        }
        return true
    }

    private func end(_ error: (any Error)?) {
        lock.lock()
        defer { signal() }
        if framed == nil { framed = false }
        if let error { failure = failure ?? error }
        if framed == true, failure == nil {
            do { try reader.finish() } catch { failure = error }
        }
        digest = SHA256.hexString(hasher.finalize())
        ended = true
    }

    /// Wakes the blocked and the awaiting readers; called with `lock` held, unlocks it.
    private func signal() {
        changes += 1
        let woken = waiters
        waiters = []
        lock.broadcast()
        lock.unlock()
        for waiter in woken { waiter.resume() }
    }

    /// Waits until `probe` (run with the lock held) answers.
    private func wait<T>(_ probe: () throws -> T?) async throws -> T {
        while true {
            let (answer, version) = try poll(probe)
            if let answer { return answer }
            await withCheckedContinuation { c in
                if !enqueue(c, ifStill: version) { c.resume() }
            }
        }
    }

    /// How many times the state changed (a waiter that saw an older one looks again).
    private var changes = 0

    private func poll<T>(_ probe: () throws -> T?) throws -> (T?, Int) {
        lock.lock()
        defer { lock.unlock() }
        return (try probe(), changes)
    }

    private func enqueue(_ waiter: CheckedContinuation<Void, Never>, ifStill version: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard version == changes else { return false }
        waiters.append(waiter)
        return true
    }

    /// What the body is, by its first bytes.
    public enum Kind: Sendable {
        /// No bytes yet; a framed batch; anything else (applied whole).
        case empty, framed, other
    }

    /// What the body is, once its first bytes (or its end) have arrived.
    public func kind() async throws -> Kind {
        try await wait { () -> Kind? in
            if bytes.isEmpty { return ended ? .empty : nil }
            guard let framed else { return ended ? .other : nil }
            return framed ? .framed : .other
        }
    }

    /// The head of a framed body, once it has arrived.
    public func head() async throws -> UploadBatch.FramedReader.Head {
        try await wait {
            if let head = reader.head { return head }
            if let failure { throw failure }
            guard ended else { return nil }
            // Ended before its head: the reader says where.
            try reader.finish()
            throw WholeBodyNeeded()
        }
    }

    /// Waits until a frame has arrived (or the body has ended), so a write transaction begun
    /// then has work from the start.
    public func firstFrame() async throws {
        try await wait { frames.isEmpty && !ended ? nil : () }
    }

    /// The whole body once it has arrived (a malformed frame does not matter here: the whole
    /// body's reader refuses it again).
    public func whole() async throws -> Data {
        try await wait {
            guard ended else { return nil }
            if let failure, failure is TooLarge || !(failure is DecodingError) { throw failure }
            return Data(bytes)
        }
    }

    /// The SHA-256 of the body, once it has ended.
    public var hash: String? {
        lock.lock()
        defer { lock.unlock() }
        return digest
    }

    /// The next frames of one layer that have arrived (joined as they arrived, at most
    /// ``runEdits`` edits unless one frame holds more), waiting for them on this thread; nil once
    /// the body has ended after its end mark. Throws a malformed frame's error, the transport's,
    /// or ``WholeBodyNeeded`` when the body stalls.
    public func nextRun() throws -> Run? {
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let failure { throw failure }
            if !frames.isEmpty {
                // Moved out of the list, not copied.
                let first = frames.removeFirst()
                return Run(position: first.position, edits: first.edits)
            }
            if ended { return nil }
            let started = ContinuousClock.now
            let arrived = lock.wait(until: Date(timeIntervalSinceNow: Self.seconds(stallLimit)))
            stalled += ContinuousClock.now - started
            if !arrived || stalled > totalStallLimit { throw WholeBodyNeeded() }
        }
    }

    private static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
