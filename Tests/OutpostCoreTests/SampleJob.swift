import Foundation

@testable import OutpostCore

/// What the sample job did, shared with the test through the job environment.
final class SampleJobLog: Sendable {
    private let state = Locked<(items: [String], cleanups: Int, rollbacks: Int, checkpoints: Int)>(([], 0, 0, 0))
    /// Called before the checkpoint with this 1-based number: lets a test pause or cancel there.
    let onCheckpoint: Locked<(@Sendable (Int) -> Void)?> = Locked(nil)
    let failAtItem: Locked<String?> = Locked(nil)

    var items: [String] { state.withLock { $0.items } }
    var cleanups: Int { state.withLock { $0.cleanups } }
    var rollbacks: Int { state.withLock { $0.rollbacks } }
    var checkpoints: Int { state.withLock { $0.checkpoints } }

    func append(_ item: String) { state.withLock { $0.items.append(item) } }
    func truncate(to count: Int) { state.withLock { $0.items = Array($0.items.prefix(count)) } }
    func cleanedUp() { state.withLock { $0.cleanups += 1 } }
    func rolledBack() { state.withLock { $0.rollbacks += 1 } }
    func reachCheckpoint() -> Int { state.withLock { $0.checkpoints += 1; return $0.checkpoints } }
}

/// A three-step job that appends "<step>:<item>" lines to a log and checkpoints after each
/// item with the number of lines written so far, so a resumed run cuts back to the checkpoint and
/// never writes an item twice.
struct SampleJob: JobDefinition {
    static let jobType = "test.sample"
    static let itemsPerStep = 4
    let log: SampleJobLog
    var label: String

    init(label: String, log: SampleJobLog) {
        self.label = label
        self.log = log
    }

    init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let log = environment[SampleJobLog.self], let label = parameters["label"]?.stringValue else {
            throw JobError(.invalidJSON, "sample job needs a label and a log")
        }
        self.init(label: label, log: log)
    }

    var parameters: JSONValue { ["label": .string(label)] }
    var stepNames: [String] { ["first", "second", "third"] }

    func run(step: Int, context: JobContext) async throws {
        context.onCleanup { self.log.cleanedUp() }
        context.onRollback { self.log.rolledBack() }
        let written = context.checkpointData?["written"]?.integerValue ?? Int64(log.items.count)
        log.truncate(to: Int(written))
        let start = context.checkpointData?["next"]?.integerValue ?? 0
        for item in Int(start)..<Self.itemsPerStep {
            let name = "\(stepNames[step]):\(item)"
            if log.failAtItem.withLock({ $0 }) == name { throw SampleFailure() }
            log.append(name)
            context.reportProgress("items", done: Int64(item + 1), total: Int64(Self.itemsPerStep))
            let number = log.reachCheckpoint()
            log.onCheckpoint.withLock { $0 }?(number)
            try await context.checkpoint(["next": .integer(Int64(item + 1)), "written": .integer(Int64(log.items.count))])
        }
    }

    func output(context: JobContext) async throws -> [String] { log.items }

    func rollback(context: JobContext) async { log.truncate(to: 0) }

    struct SampleFailure: Error {}
}
