import HTTPTypes
import NIOCore
import Testing

@testable import OutpostServer

@Suite("Feed pages made ahead")
struct PagesAheadTests {
    private func key(_ after: String, replica: String = "a", binary: Bool = true) -> PagesAhead.Key {
        PagesAhead.Key(service: "svc", replica: replica, layer: 0, since: 1, upto: 9, after: after, limit: 1000, binary: binary, stored: false, gzip: true)
    }

    private func answer(_ text: String, next: String? = nil) -> PagesAhead.Answer {
        PagesAhead.Answer(body: ByteBuffer(string: text), headers: [.contentType: "text/plain"], next: next)
    }

    @Test func aPageIsTakenOnceByTheRequestItWasMadeFor() async throws {
        let store = PagesAhead()
        store.start(key("g1")) { self.answer("page 2", next: "g2") }
        #expect(await store.take(key("g1", binary: false)) == nil, "another encoding")
        #expect(store.count == 1)
        #expect(await store.take(key("g1", replica: "b")) == nil, "another replica")
        let made = await store.take(key("g1"))
        #expect(made.map { String(buffer: $0.body) } == "page 2" && made?.next == "g2")
        #expect(await store.take(key("g1")) == nil, "taken once")
        #expect(store.count == 0)

        // A page that could not be made is not used: the request makes it and meets the error.
        struct Failed: Error {}
        store.start(key("g2")) { throw Failed() }
        #expect(await store.take(key("g2")) == nil)
        #expect(store.count == 0)
    }

    @Test func theStoreStaysSmallAndANewerStartReplacesTheOlder() async throws {
        let store = PagesAhead()
        store.start(key("g1")) { self.answer("first") }
        store.start(key("g1")) { self.answer("second") }
        #expect(store.count == 1)
        #expect(await store.take(key("g1")).map { String(buffer: $0.body) } == "second")
        for i in 0..<(PagesAhead.capacity + 5) { store.start(key("g\(i)")) { self.answer("\(i)") } }
        #expect(store.count == PagesAhead.capacity)
        #expect(await store.take(key("g0")) == nil, "the oldest went first")
        #expect(await store.take(key("g\(PagesAhead.capacity + 4)")) != nil)
    }

    @Test func entriesOlderThanTheirLifetimeAreNotUsed() async throws {
        let store = TasksAhead<String, Int>(lifetime: .milliseconds(50), capacity: 4)
        store.start("old") { 1 }
        try await Task.sleep(for: .milliseconds(120))
        #expect(store.take("old") == nil)
        // Starting another drops those past their lifetime.
        store.start("a") { 2 }
        try await Task.sleep(for: .milliseconds(120))
        store.start("b") { 3 }
        #expect(store.count == 1)
        #expect(try await store.take("b")?.value == 3)
    }
}
