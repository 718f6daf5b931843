import Foundation
import OutpostCore
import OutpostStorage
import Synchronization

/// The whole checksum of each layer, as this process last knew it, with the service generation
/// it describes (docs/sync.md, "Verify"). A whole-scope verify of a layer at that generation
/// takes it instead of hashing every row.
///
/// It is made by hashing (a verify's, or one made once a new replica's export is done, off its
/// job's path) and moved forward by each batch this process applies (``Tracking``): the batch's
/// transaction lists the rows it writes, and once it commits only those rows are hashed, as
/// they were (on a reader of the data the transaction started from) and as they are; the
/// difference is XOR-ed in. The writer, the upload's one serial path, does nothing but list
/// row ids. Any other commit moves the generation past the entry, and it is not used again
/// until hashed anew; another connection's commit (`PRAGMA data_version` on the writer) drops
/// every entry at the next batch.
final class LayerChecksums: Sendable {
    struct Entry: Sendable {
        var generation: Int64
        var sum: FeatureDigest.Accumulator
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        /// The generation a layer's entry reaches once the advances being computed are applied.
        var pendingTarget: [Int: Int64] = [:]
        /// The advance of the last tracked transaction, being computed (each applies after the
        /// one before it).
        var pending: Task<Void, Never>?
        /// `PRAGMA data_version` on the writer at its last tracked transaction: another
        /// connection's commit (another process's) changes it.
        var writerDataVersion: Int64?
    }

    private let state = Locked(State())

    /// How long a batch's writer waits for its tracking reader before it gives the kept sums up
    /// (``Tracking/written(_:generation:)``); a test that needs them kept on a busy machine
    /// waits longer.
    let snapshotWaitMilliseconds = Atomic<Int>(2)

    /// Whether `query` is a layer's whole scope (a replica's layer with no filter).
    static func isWholeLayer(_ query: FeatureQuery) -> Bool { query == FeatureQuery() }

    /// The checksum of layer `id` at `generation`, when known. Call ``settled()`` first: a
    /// batch's advance is applied shortly after its commit.
    func sum(of id: Int, at generation: Int64) -> FeatureDigest.Accumulator? {
        state.withLock { s in s.entries[id].flatMap { $0.generation == generation ? $0.sum : nil } }
    }

    /// Waits until the advances of the batches committed so far are applied.
    func settled() async {
        let pending = state.withLock { $0.pending }
        await pending?.value
    }

    /// Keeps `sum`, layer `id`'s checksum hashed at `generation` (a later one known already stays).
    func keep(_ sum: FeatureDigest.Accumulator, of id: Int, at generation: Int64) {
        state.withLock { s in
            if let known = s.entries[id], known.generation > generation { return }
            s.entries[id] = Entry(generation: generation, sum: sum)
        }
    }

    /// Whether nothing is known or being computed: a write transaction then has nothing to track.
    var isEmpty: Bool { state.withLock { $0.entries.isEmpty && $0.pendingTarget.isEmpty } }

    /// Forgets everything known (a schema migration, say).
    func removeAll() {
        state.withLock { s in
            s.entries = [:]
            s.pendingTarget = [:]
        }
    }

    /// At the start of a write transaction, on the writer: the layers whose checksum at
    /// `generation` (the one the transaction starts from) is known or being computed.
    /// `dataVersion` is the writer's `PRAGMA data_version`: when another connection committed
    /// since the last tracked transaction, nothing known is kept (that commit is in no sum).
    func layers(at generation: Int64, writerDataVersion dataVersion: Int64) -> [Int] {
        state.withLock { s in
            if let last = s.writerDataVersion, last != dataVersion {
                s.entries = [:]
                s.pendingTarget = [:]
            }
            s.writerDataVersion = dataVersion
            var ids = Set(s.entries.filter { $0.value.generation == generation }.keys)
            for (id, target) in s.pendingTarget where target == generation { ids.insert(id) }
            return ids.sorted()
        }
    }

    /// A committed transaction's advance of `layers` from generation `start` to `end`, being
    /// computed by `change` (each layer's difference; nil: unknown, the layer is to be hashed).
    /// It is applied after the work registered before it, to entries of `start` only.
    func advance(_ layers: [Int], from start: Int64, to end: Int64, change: @escaping @Sendable () async -> [Int: FeatureDigest.Accumulator?]) {
        chain(layers, to: end) { _, layers in
            let changes = await change()
            return { s in
                for id in layers {
                    guard let from = s.entries[id], from.generation == start else { continue }
                    guard let change = changes[id] ?? nil else {
                        s.entries[id] = nil
                        continue
                    }
                    var sum = from.sum
                    sum.add(change)
                    s.entries[id] = Entry(generation: end, sum: sum)
                }
            }
        }
    }

    /// Layers hashed whole at `generation` by `hash` (nil: not hashed), off the caller's path: a
    /// new replica's export registers them, and a batch that starts from that generation before
    /// they are made moves them once they are. Layers whose checksum at `generation` (or later)
    /// is known or being made are left out.
    func hashing(_ layers: [Int], at generation: Int64, hash: @escaping @Sendable ([Int]) async -> [Int: FeatureDigest.Accumulator]?) {
        let wanted = state.withLock { s in
            layers.filter { id in (s.entries[id]?.generation ?? .min) < generation && (s.pendingTarget[id] ?? .min) < generation }
        }
        guard !wanted.isEmpty else { return }
        chain(wanted, to: generation) { _, layers in
            let sums = await hash(layers) ?? [:]
            return { s in
                for (id, sum) in sums where (s.entries[id]?.generation ?? .min) < generation {
                    s.entries[id] = Entry(generation: generation, sum: sum)
                }
            }
        }
    }

    /// Registers work on `layers` that brings their entries to generation `end`: `work` runs at
    /// once, beside earlier work, and what it returns is applied after the earlier work's.
    private func chain(_ layers: [Int], to end: Int64, _ work: @escaping @Sendable (LayerChecksums, [Int]) async -> @Sendable (inout State) -> Void) {
        state.withLock { s in
            let before = s.pending
            for id in layers { s.pendingTarget[id] = end }
            s.pending = Task {
                let apply = await work(self, layers)
                await before?.value
                self.state.withLock { s in
                    apply(&s)
                    for id in layers where s.pendingTarget[id] == end { s.pendingTarget[id] = nil }
                }
            }
        }
    }
}

extension LayerChecksums {
    /// One write transaction's part in keeping the checksums (see ``LayerChecksums``):
    /// ``begin(_:)`` on the writer before anything is written, ``written(_:generation:)`` after
    /// the last write and before the commit, then ``committed()`` or ``cancel()``.
    ///
    /// A reader holds the data as the transaction found them from its start to its end; the
    /// rows written are hashed there while the commit reaches the disk, and on a reader of the
    /// committed data after it, while the answer goes out.
    final class Tracking: @unchecked Sendable {
        // @unchecked: `layers` and `start` are set by the writer before the reading thread is
        // started; everything the two threads share after that is behind `shared`.
        private let checksums: LayerChecksums
        private let geodatabase: Geodatabase
        private var layers: [LayerDefinition] = []
        private var start: Int64 = 0

        private struct Shared {
            /// Whether the reader holds the start's data: nil until it knows.
            var snapshotHeld: Bool?
            /// The rows to hash there (each layer's, nil: unknown), once written; or cancelled.
            var handover: [Int: [Int64]?]?
            var cancelled = false
            var end: Int64?
        }

        private let shared = Locked(Shared())
        /// The hashes of the rows as they were, once made.
        private let before = SharedOutcome<[Int: FeatureDigest.Accumulator?]>()
        private let snapshotTaken = DispatchSemaphore(value: 0)
        private let handedOver = DispatchSemaphore(value: 0)

        init(_ checksums: LayerChecksums, geodatabase: Geodatabase) {
            self.checksums = checksums
            self.geodatabase = geodatabase
        }

        /// On the writer, in its transaction before it writes: the layer tables whose written
        /// rows the transaction lists (none when no layer's checksum is known at its start).
        func begin(_ conn: GeodatabaseConnection) throws -> [String] {
            // Nothing known: no query on the writer. Another connection's commit meanwhile is
            // still seen at the next tracked transaction (the data version kept is older).
            guard !checksums.isEmpty else { return [] }
            start = try ServiceStore.generation(conn)
            let dataVersion = try conn.query("PRAGMA data_version").first?[0].integerValue ?? 0
            let schema = conn.geodatabase.schema
            layers = checksums.layers(at: start, writerDataVersion: dataVersion).compactMap { schema.layer(id: $0) }
            guard !layers.isEmpty else { return [] }
            let layers = self.layers, start = self.start
            Self.read(
                geodatabase,
                // The write lock is held: the reader sees the start's data, which its first read
                // fixes until it ends.
                fixing: { reader in try ServiceStore.generation(reader) == start },
                reached: { [self] held in
                    shared.withLock { $0.snapshotHeld = held }
                    snapshotTaken.signal()
                },
                then: { [self] reader, held in
                    handedOver.wait()
                    guard held, let rows = shared.withLock({ $0.cancelled ? nil : $0.handover }) else { return [:] }
                    return try Self.hash(rows, layers, reader)
                },
                failing: [:], done: { [self] hashes in before.settle(.success(hashes)) })
            return layers.map(\.name)
        }

        /// On the writer after the transaction's last write, before its commit: the rows each
        /// table listed, and the generation the commit will make. The reader normally holds the
        /// start's data long before; one that does not within 2 ms (its pool's readers all busy,
        /// a batch of a few rows) is given up, and the kept checksums with it: the writer, the
        /// service's one serial path, does not wait for them.
        func written(_ rows: [String: [Int64]?], generation end: Int64) {
            guard !layers.isEmpty else { return }
            var byLayer: [Int: [Int64]?] = [:]
            for layer in layers { byLayer[layer.id] = rows[layer.name] ?? nil }
            let taken = snapshotTaken.wait(timeout: .now() + .milliseconds(checksums.snapshotWaitMilliseconds.load(ordering: .relaxed))) == .success
            shared.withLock { s in
                if taken, s.snapshotHeld == true {
                    s.handover = byLayer
                    s.end = end
                } else {
                    s.cancelled = true
                }
            }
            handedOver.signal()
        }

        /// Ends the reader without using it: the transaction rolled back, or never listed.
        func cancel() {
            guard !layers.isEmpty else { return }
            let first = shared.withLock { s -> Bool in
                defer { s.cancelled = true }
                return s.handover == nil && !s.cancelled
            }
            if first { handedOver.signal() }
        }

        /// After the commit: the advance is registered and computed off the caller's path (the
        /// rows are hashed as they are now on another reader, beside the hashes as they were).
        /// That reader takes the commit's data before this returns (within the same wait as the
        /// reader of the start's data): a reader that came after the next batch's commit would
        /// find the rows moved on and give the sums up, which a busy machine made happen to
        /// batches sent back to back.
        func committed() {
            guard !layers.isEmpty else { return }
            guard let (rows, end) = shared.withLock({ s in s.cancelled ? nil : s.handover.flatMap { h in s.end.map { (h, $0) } } }) else {
                checksums.advance(layers.map(\.id), from: start, to: start) { [layers] in Dictionary(uniqueKeysWithValues: layers.map { ($0.id, nil) }) }
                return
            }
            let layers = self.layers, geodatabase = self.geodatabase
            let after = SharedOutcome<[Int: FeatureDigest.Accumulator?]?>()
            let taken = DispatchSemaphore(value: 0)
            Self.read(
                geodatabase,
                // The commit's data, unless a later commit came first.
                fixing: { conn in try ServiceStore.generation(conn) == end },
                reached: { _ in taken.signal() },
                then: { conn, held in held ? try Self.hash(rows, layers, conn) : nil },
                failing: nil, done: { hashes in after.settle(.success(hashes)) })
            _ = taken.wait(timeout: .now() + .milliseconds(checksums.snapshotWaitMilliseconds.load(ordering: .relaxed)))
            checksums.advance(layers.map(\.id), from: start, to: end) { [self] in
                let was = (try? await self.before.value()) ?? [:]
                let now = (try? await after.value()) ?? nil
                var changes: [Int: FeatureDigest.Accumulator?] = [:]
                for layer in layers {
                    guard let old = was[layer.id] ?? nil, let new = now?[layer.id] ?? nil else {
                        changes[layer.id] = .some(nil)
                        continue
                    }
                    changes[layer.id] = FeatureDigest.Accumulator(value: old.value ^ new.value, count: new.count - old.count)
                }
                return changes
            }
        }

        /// On a thread of its own, a reader of the file: its first read (`fixing`, whether it
        /// sees the data wanted) fixes its data until it ends, and `reached` hears that answer
        /// at once (false when no reader could begin: not in WAL mode, or the read failed);
        /// `then` runs on the same reader, and `done` gets what it gave (`failing` when anything
        /// threw).
        private static func read<T>(
            _ geodatabase: Geodatabase, fixing: @escaping @Sendable (GeodatabaseConnection) throws -> Bool,
            reached: @escaping @Sendable (Bool) -> Void, then: @escaping @Sendable (GeodatabaseConnection, Bool) throws -> T,
            failing: T, done: @escaping @Sendable (T) -> Void
        ) where T: Sendable {
            Thread.detachNewThread {
                var signalled = false
                var result = failing
                do {
                    result = try geodatabase.readCommittedBlocking { reader in
                        let held = try fixing(reader)
                        signalled = true
                        reached(held)
                        return try then(reader, held)
                    } ?? failing
                } catch {
                    result = failing
                }
                if !signalled { reached(false) }
                done(result)
            }
        }

        /// The checksum of each layer's `rows` (nil for a layer whose rows are unknown), on `conn`.
        private static func hash(_ rows: [Int: [Int64]?], _ layers: [LayerDefinition], _ conn: GeodatabaseConnection) throws -> [Int: FeatureDigest.Accumulator?] {
            var sums: [Int: FeatureDigest.Accumulator?] = [:]
            for layer in layers {
                guard let ids = rows[layer.id] ?? nil else {
                    sums[layer.id] = .some(nil)
                    continue
                }
                let table = try conn.geodatabase.table(id: layer.id)
                var sum = FeatureDigest.Accumulator()
                // Sorted and unique: a row is in one chunk only.
                for chunk in stride(from: 0, to: ids.count, by: 20_000) {
                    sum.add(try table.checksum(matching: FeatureQuery(objectIDs: Array(ids[chunk..<min(chunk + 20_000, ids.count)])), in: conn))
                }
                sums[layer.id] = sum
            }
            return sums
        }
    }
}
