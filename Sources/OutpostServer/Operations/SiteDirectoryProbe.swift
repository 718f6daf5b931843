import Foundation
import OutpostCore

/// Whether a site's shared directory takes a file: a small file written, read back and removed,
/// on a thread of its own and bounded in time, as a mount that stopped answering blocks the
/// thread that touches it. Callers that come while a check runs wait for its outcome (two load
/// balancers asking at once are both told what the directory did); once a check has run past
/// the time limit, callers are told at once that the directory does not answer, and no new
/// check starts until it ends, so blocked threads do not pile up.
final class SiteDirectoryProbe: Sendable {
    /// One check of the directory: when it began, and what it found (nil for no problem),
    /// which the callers that came while it ran await.
    private final class Check: Sendable {
        let started = ContinuousClock.now
        let outcome = SharedOutcome<String?>()
    }

    private let running = Locked<Check?>(nil)
    let timeout: Duration
    /// The check itself: nil when the directory took a file, else why not.
    private let attempt: @Sendable (URL) -> String?

    init(timeout: Duration = .seconds(2), attempt: @escaping @Sendable (URL) -> String? = SiteDirectoryProbe.tryWriting(in:)) {
        self.timeout = timeout
        self.attempt = attempt
    }

    /// nil when `directory` took a file within the timeout, else why not.
    func problem(with directory: URL) async -> String? {
        let check = running.withLock { current -> Check in
            if let current { return current }
            let check = Check()
            current = check
            Thread.detachNewThread { [self] in
                let found = attempt(directory)
                // A caller that comes after this starts a check of its own.
                running.withLock { $0 = nil }
                check.outcome.settle(.success(found))
            }
            return check
        }
        let timeout = self.timeout
        if ContinuousClock.now - check.started >= timeout, !check.outcome.isSettled {
            return "an earlier check of \(directory.path) has not finished (the mount does not answer)"
        }
        // The check's finding (nil for none), or nil when the time ran out first.
        let found: String?? = await withTaskGroup(of: String??.self) { group in
            group.addTask {
                do { return .some(try await check.outcome.value()) } catch { return nil }
            }
            group.addTask {
                try? await Task.sleep(for: timeout - (ContinuousClock.now - check.started))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return found ?? "\(directory.path) did not take a file within \(timeout.wholeMilliseconds) ms"
    }

    /// Callers waiting for the check that runs now (for tests).
    var waitingCallers: Int { running.withLock { $0 }?.outcome.waiting ?? 0 }

    static func tryWriting(in directory: URL) -> String? {
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
