import OutpostProtocol
import Testing

@testable import OutpostServer

@Suite("Checksums asked for with a batch")
struct ChecksumsAheadTests {
    private func answer(_ generation: Int64, _ checksum: String = "00000000000000aa") -> ReplicaChecksums {
        ReplicaChecksums(generation: generation, layers: [.init(id: 0, count: 3, checksum: checksum)])
    }

    @Test func anEntryIsTakenOnceAtItsGenerationForItsLayers() async throws {
        let store = ChecksumsAhead()
        let made = answer(7)
        store.start("svc/a", layers: [0]) { made }
        #expect(await store.take("svc/a", layers: [0], generation: 7) == made)
        #expect(await store.take("svc/a", layers: [0], generation: 7) == nil, "taken once")

        // Something committed after it, or other layers asked: not used, and gone.
        store.start("svc/a", layers: [0]) { made }
        #expect(await store.take("svc/a", layers: [0], generation: 8) == nil)
        #expect(store.count == 0)
        store.start("svc/a", layers: [0]) { made }
        #expect(await store.take("svc/a", layers: [0, 1], generation: 7) == nil)
        #expect(await store.take("svc/b", layers: [0], generation: 7) == nil, "another replica's key")

        // A failed computation is simply not used.
        struct Failed: Error {}
        store.start("svc/a", layers: [0]) { throw Failed() }
        #expect(await store.take("svc/a", layers: [0], generation: 7) == nil)
    }

    @Test func aNewerEntryReplacesTheOlderAndTheStoreStaysSmall() async throws {
        let store = ChecksumsAhead()
        store.start("svc/a", layers: [0]) { self.answer(1, "0000000000000001") }
        store.start("svc/a", layers: [0]) { self.answer(2, "0000000000000002") }
        #expect(store.count == 1)
        #expect(await store.take("svc/a", layers: [0], generation: 2)?.layers.first?.checksum == "0000000000000002")
        for i in 0..<(ChecksumsAhead.capacity + 10) {
            store.start("svc/\(i)", layers: [0]) { self.answer(1) }
        }
        #expect(store.count == ChecksumsAhead.capacity)
        #expect(await store.take("svc/0", layers: [0], generation: 1) == nil, "the oldest went first")
        #expect(await store.take("svc/\(ChecksumsAhead.capacity + 9)", layers: [0], generation: 1) != nil)
    }

    @Test func anAnswerIsKeptByScopeForItsGeneration() {
        let store = ChecksumsAhead()
        store.remember("scope", answer(5))
        #expect(store.answer("scope", generation: 5) == answer(5))
        #expect(store.answer("scope", generation: 5) == answer(5), "kept, not taken")
        #expect(store.answer("scope", generation: 6) == nil, "something committed since")
        #expect(store.answer("other", generation: 5) == nil)
        // An older answer does not replace a newer one; a window's answer is not kept.
        store.remember("scope", answer(4, "0000000000000004"))
        #expect(store.answer("scope", generation: 5) == answer(5))
        var window = answer(6)
        window.layers[0].since = 5
        window.layers[0].globalIds = ["{0C0C0C0C-0000-4000-8000-000000000001}"]
        store.remember("scope", window)
        #expect(store.answer("scope", generation: 6) == nil)
        for i in 0..<(ChecksumsAhead.capacity + 10) { store.remember("s\(i)", answer(1)) }
        #expect(store.answer("s0", generation: 1) == nil, "the oldest went first")
        #expect(store.answer("s\(ChecksumsAhead.capacity + 9)", generation: 1) != nil)
    }
}
