import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostCore

/// The fan-out under job status, progress and messages: one order for everyone, a late
/// subscriber starting at the present, streams ending after the last value, and no deadlock when
/// an observer is cancelled while values arrive.
@Suite("Broadcast")
struct BroadcastTests {
    @Test func valuesFromManyThreadsReachEverySubscriberInOneOrder() async throws {
        let broadcast = Broadcast<Int>(-1)
        let streams = (0..<3).map { _ in broadcast.subscribe() }
        let senders = 4, each = 500
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for t in 0..<senders {
                group.enter()
                Thread {
                    for i in 0..<each { broadcast.send(t * 10_000 + i) }
                    group.leave()
                }.start()
            }
            group.notify(queue: .global()) { done.resume() }
        }
        // A subscriber joining now starts with the latest value and sees nothing older.
        let late = broadcast.subscribe()
        broadcast.send(99_999)
        broadcast.finish()
        var orders: [[Int]] = []
        for stream in streams {
            var seen: [Int] = []
            for await v in stream { seen.append(v) }
            orders.append(seen)
        }
        #expect(orders.allSatisfy { $0 == orders[0] })
        let seen = orders[0]
        #expect(seen.first == -1 && seen.last == 99_999 && seen.count == senders * each + 2)
        for t in 0..<senders {
            let mine = seen.filter { $0 / 10_000 == t && $0 >= 0 && $0 != 99_999 }
            #expect(mine == (0..<each).map { t * 10_000 + $0 }, "sender \(t)")
        }
        var lateSeen: [Int] = []
        for await v in late { lateSeen.append(v) }
        #expect(lateSeen == [seen[seen.count - 2], 99_999])
        // After the end: the last value, then the stream ends.
        var after: [Int] = []
        for await v in broadcast.subscribe() { after.append(v) }
        #expect(after == [99_999])
    }

    /// Values sent while the task reading them is cancelled, many times over, each round with a
    /// deadline: the sending thread and the cancelling one once took the broadcast's lock and a
    /// task's status lock in opposite orders and stopped for good.
    @Test(.scaledTimeLimit(minutes: 2)) func cancellingAnObserverWhileValuesArriveNeverStops() async throws {
        let rounds = 400
        let finished: Bool = await withCheckedContinuation { continuation in
            let once = OnceFlag()
            Thread {
                for round in 0..<rounds {
                    let broadcast = Broadcast<Int>(0)
                    let stream = broadcast.subscribe()
                    let ready = DispatchSemaphore(value: 0)
                    // Waiting for values (past the first) when the sends and the cancel come.
                    let observer = Task {
                        var n = 0
                        for await _ in stream {
                            n += 1
                            if n == 1 { ready.signal() }
                        }
                        return n
                    }
                    ready.wait()
                    let sending = DispatchSemaphore(value: 0)
                    Thread {
                        for i in 0..<200 { broadcast.send(i) }
                        broadcast.finish()
                        sending.signal()
                    }.start()
                    for _ in 0..<(round % 50) * 20 { _ = DispatchTime.now() }
                    observer.cancel()
                    sending.wait()
                }
                if once.claim() { continuation.resume(returning: true) }
            }.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + 90) {
                if once.claim() { continuation.resume(returning: false) }
            }
        }
        #expect(finished, "a send and a cancellation stopped each other")
    }
}

/// True for the first caller only.
private final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false
    func claim() -> Bool {
        lock.withLock {
            defer { claimed = true }
            return !claimed
        }
    }
}
