import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostCore

/// A loadable resource for the tests: counts attempts, can be told to fail, and can be held
/// inside its load until released.
final class TestResource: Loadable {
    struct Failure: Error, Equatable { var attempt: Int }

    /// What the loader reads and writes, shared with the closure.
    final class State: Sendable {
        let attempts = Locked(0)
        let failNext = Locked(false)
        let gate = Gate()
        let title = Locked(Overridable<String>())
    }

    let name: String
    let support: LoadableSupport
    let state = State()
    var gate: Gate { state.gate }

    init(_ name: String, dependencies: [TestResource] = [], holdInLoad: Bool = false) {
        self.name = name
        let state = self.state
        support = LoadableSupport(dependencies: { dependencies }) {
            let n = state.attempts.withLock { $0 += 1; return $0 }
            if holdInLoad { await state.gate.wait() }
            if state.failNext.withLock({ $0 }) { throw Failure(attempt: n) }
            state.title.withLock { $0.setLoaded("loaded title") }
        }
    }

    var loadStatus: LoadStatus { support.loadStatus }
    var loadStatusUpdates: AsyncStream<LoadStatus> { support.loadStatusUpdates }
    var loadError: (any Error)? { support.loadError }
    func load() async throws { try await support.load() }
    func retryLoad() async throws { try await support.retryLoad() }
    func cancelLoad() { support.cancelLoad() }
}

/// Holds tasks until opened (ignores cancellation on purpose: a loader that does not check).
final class Gate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func wait() async {
        await withCheckedContinuation { c in
            let open = state.withLock { s -> Bool in
                if !s.open { s.waiters.append(c) }
                return s.open
            }
            if open { c.resume() }
        }
    }
    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        waiters.forEach { $0.resume() }
    }
    var waiting: Int { state.withLock { $0.waiters.count } }
}

@Suite("Loadable")
struct LoadableTests {
    @Test(.scaledTimeLimit(minutes: 1))
    func concurrentLoadsShareOneAttempt() async throws {
        let r = TestResource("r", holdInLoad: true)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<500 { group.addTask { try await r.load() } }
            while r.gate.waiting == 0 { await Task.yield() }
            #expect(r.loadStatus == .loading)
            r.gate.open()
            try await group.waitForAll()
        }
        #expect(r.state.attempts.withLock { $0 } == 1)
        #expect(r.loadStatus == .loaded)
        try await r.load()
        try await r.retryLoad()
        #expect(r.state.attempts.withLock { $0 } == 1, "loaded resources do not reload")
    }

    @Test func failedLoadsReturnThePastErrorAtOnce() async throws {
        let r = TestResource("r")
        r.state.failNext.withLock { $0 = true }
        await #expect(throws: TestResource.Failure(attempt: 1)) { try await r.load() }
        #expect(r.loadStatus == .failed && r.loadError as? TestResource.Failure == TestResource.Failure(attempt: 1))
        r.state.failNext.withLock { $0 = false }
        for _ in 0..<10 {
            await #expect(throws: TestResource.Failure(attempt: 1)) { try await r.load() }
        }
        #expect(r.state.attempts.withLock { $0 } == 1)
        try await r.retryLoad()
        #expect(r.loadStatus == .loaded && r.state.attempts.withLock { $0 } == 2 && r.loadError == nil)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func retryJoinsAnAttemptInProgress() async throws {
        let r = TestResource("r", holdInLoad: true)
        async let first: Void = r.load()
        while r.gate.waiting == 0 { await Task.yield() }
        async let retried: Void = r.retryLoad()
        await Task.yield()
        r.gate.open()
        try await first
        try await retried
        #expect(r.state.attempts.withLock { $0 } == 1)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func cancelFailsEveryWaiterWithCancellation() async throws {
        let r = TestResource("r", holdInLoad: true)
        final class Results: Sendable { let values = Locked<[Bool]>([]) }
        let box = Results()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    do {
                        try await r.load()
                        box.values.withLock { $0.append(false) }
                    } catch is CancellationError {
                        box.values.withLock { $0.append(true) }
                    } catch {
                        box.values.withLock { $0.append(false) }
                    }
                }
            }
            while r.gate.waiting == 0 { await Task.yield() }
            try? await Task.sleep(for: .milliseconds(20))
            r.cancelLoad()
        }
        #expect(box.values.withLock { $0 } == Array(repeating: true, count: 50))
        #expect(r.loadStatus == .failed && r.loadError is CancellationError)
        await #expect(throws: CancellationError.self) { try await r.load() }
        // The abandoned attempt finishing late changes nothing; a retry loads afresh.
        r.gate.open()
        try await Task.sleep(for: .milliseconds(20))
        #expect(r.loadStatus == .failed)
        try await r.retryLoad()
        #expect(r.loadStatus == .loaded && r.state.attempts.withLock { $0 } == 2)
        r.cancelLoad()  // not loading: nothing happens
        #expect(r.loadStatus == .loaded)
    }

    @Test func dependenciesCascade() async throws {
        let service = TestResource("service")
        let layer = TestResource("layer", dependencies: [service])
        service.state.failNext.withLock { $0 = true }
        await #expect(throws: TestResource.Failure(attempt: 1)) { try await layer.load() }
        #expect(layer.loadStatus == .failed && service.loadStatus == .failed)
        service.state.failNext.withLock { $0 = false }
        // load() keeps the failure; retryLoad() retries the failed dependency first.
        await #expect(throws: TestResource.Failure(attempt: 1)) { try await layer.load() }
        try await layer.retryLoad()
        #expect(layer.loadStatus == .loaded && service.loadStatus == .loaded)
        // The layer's own loading ran only once its dependency had loaded.
        #expect(service.state.attempts.withLock { $0 } == 2 && layer.state.attempts.withLock { $0 } == 1)
    }

    @Test func statusUpdatesAndOverrides() async throws {
        let r = TestResource("r")
        r.state.title.withLock { $0.set("set before loading") }
        let updates = r.loadStatusUpdates
        try await r.load()
        var seen: [LoadStatus] = []
        for await s in updates {
            seen.append(s)
            if s == .loaded { break }
        }
        #expect(seen == [.notLoaded, .loading, .loaded])
        #expect(r.state.title.withLock { $0.value } == "set before loading")
        let plain = TestResource("plain")
        try await plain.load()
        #expect(plain.state.title.withLock { $0.value } == "loaded title")
    }

    /// A load that finishes at once used to publish `loaded` before its caller published
    /// `loading` (seen once in CI as [notLoaded, loaded]); every observer sees the steps in order.
    @Test func observersSeeEveryStepInOrderWhenTheLoadIsInstant() async throws {
        for _ in 0..<500 {
            let r = TestResource("instant")
            let updates = r.loadStatusUpdates
            async let a: Void = r.load()
            async let b: Void = r.load()
            _ = try await (a, b)
            var seen: [LoadStatus] = []
            for await s in updates { seen.append(s) }  // ends: loaded is final
            #expect(seen == [.notLoaded, .loading, .loaded])
        }
    }
}
