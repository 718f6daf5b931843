import Foundation
import OutpostCore

/// Whether a site's shared directory takes a file: a small file written, read back and removed,
/// on a thread of its own and bounded in time, as a mount that stopped answering blocks the
/// thread that touches it. While a probe is still blocked, the next is not started (the
/// directory is reported as not answering) so blocked threads do not pile up.
final class SiteDirectoryProbe: Sendable {
    private let inFlight = Locked(false)
    let timeout: Duration

    init(timeout: Duration = .seconds(2)) { self.timeout = timeout }

    /// nil when `directory` took a file within the timeout, else why not.
    func problem(with directory: URL) async -> String? {
        let started = inFlight.withLock { busy in
            if busy { return false }
            busy = true
            return true
        }
        guard started else { return "an earlier check of \(directory.path) has not finished (the mount does not answer)" }
        let outcome = Locked<String??>(nil)
        let done = AsyncStream<Void>.makeStream()
        Thread.detachNewThread { [self] in
            let found = Self.tryWriting(in: directory)
            outcome.set(.some(found))
            inFlight.withLock { $0 = false }
            done.continuation.finish()
        }
        let timeout = self.timeout
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for await _ in done.stream {} }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        return outcome.get() ?? "\(directory.path) did not take a file within \(timeout.wholeMilliseconds) ms"
    }

    private static func tryWriting(in directory: URL) -> String? {
        let file = directory.appendingPathComponent(".ready-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))")
        let bytes = Data("ready\n".utf8)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try bytes.write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            guard try Data(contentsOf: file) == bytes else { return "\(directory.path) gave back other bytes than were written" }
            return nil
        } catch {
            return "cannot write in \(directory.path): \((error as NSError).localizedDescription)"
        }
    }
}
