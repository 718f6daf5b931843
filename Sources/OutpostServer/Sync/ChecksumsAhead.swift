import Foundation
import OutpostCore
import OutpostProtocol

/// Whole-scope checksums a replica asked for with its last upload batch
/// (`PUT …/batches/{seq}?checksums=0,1`), computed from the moment that batch commits while its
/// answer goes out and the replica acknowledges it, instead of from the replica's later
/// `GET …/checksums` (docs/sync.md, "Verify"). After uploading 16,000 edits of a 100,000-point
/// layer the replica asked, waited ~50 ms and then verified; now the layer is hashed by then.
///
/// The later request takes an entry once, and only when nothing was committed since it was
/// computed (its generation is the service's generation read by that request): otherwise, or
/// when it failed, the checksums are computed afresh, exactly as without it. Entries are few and
/// short-lived: one per replica (a newer one replaces it), dropped when taken, when older than
/// ``lifetime``, and the oldest when more than ``capacity`` are held.
final class ChecksumsAhead: Sendable {
    static let lifetime: Duration = .seconds(60)
    static let capacity = 256

    /// Checksums started for a replica, with the layers they are of.
    private struct Made: Sendable {
        var layers: [Int]
        var checksums: ReplicaChecksums
    }

    private let entries = TasksAhead<String, Made>(lifetime: ChecksumsAhead.lifetime, capacity: ChecksumsAhead.capacity)

    /// Whole-scope answers already computed, by scope (``scopeKey(service:info:layers:)``), each
    /// for the generation it was computed at: another replica with the same scope asking at the
    /// same generation gets the same answer without the layer being hashed again. After one crew
    /// uploads, the next to download one layer whole asked for exactly what the first had just
    /// been answered (`outpost-bench sync`: 100,000 points hashed again, 60–100 ms of the server's
    /// CPU beside that replica's apply). A commit moves the generation, so an answer is used only
    /// while nothing was committed since; entries live ``lifetime`` at most, ``capacity`` at once.
    private let answers = Locked<[String: (answer: ReplicaChecksums, made: ContinuousClock.Instant)]>([:])

    /// Starts computing `compute` for the replica `key` (service and replica id).
    func start(_ key: String, layers: [Int], _ compute: @escaping @Sendable () async throws -> ReplicaChecksums) {
        entries.start(key) { Made(layers: layers, checksums: try await compute()) }
    }

    /// The checksums computed ahead for `key` and exactly these layers, if they are of
    /// `generation` (the service's generation now); the entry is removed either way.
    func take(_ key: String, layers: [Int], generation: Int64) async -> ReplicaChecksums? {
        guard let task = entries.take(key) else { return nil }
        guard let made = try? await task.value, made.layers == layers, made.checksums.generation == generation else { return nil }
        return made.checksums
    }

    /// How many entries are held (for tests).
    var count: Int { entries.count }

    /// Keeps a whole-scope answer (no `since`) for others asking for the same scope.
    func remember(_ scope: String, _ answer: ReplicaChecksums) {
        guard answer.layers.allSatisfy({ $0.since == nil && $0.globalIds == nil }) else { return }
        let now = ContinuousClock.now
        answers.withLock { held in
            held = held.filter { now - $0.value.made <= Self.lifetime }
            if let current = held[scope], current.answer.generation > answer.generation { return }
            held[scope] = (answer, now)
            while held.count > Self.capacity, let oldest = held.min(by: { $0.value.made < $1.value.made }) { held.removeValue(forKey: oldest.key) }
        }
    }

    /// The answer kept for `scope`, if it is of `generation` (the service's generation now).
    func answer(_ scope: String, generation: Int64) -> ReplicaChecksums? {
        answers.withLock { held in
            guard let kept = held[scope], kept.answer.generation == generation, ContinuousClock.now - kept.made <= Self.lifetime else { return nil }
            return kept.answer
        }
    }

    /// What decides a replica's whole-scope checksums of `layers` besides the generation: the
    /// service, its schema version, and each layer's filter (the replica's geometry when a layer
    /// uses it). Replicas with equal keys hold the same features at the same generation.
    static func scopeKey(service: String, info: ReplicaInfo, layers: [Int]) -> String {
        var parts: [JSONValue] = [.string(service), .integer(Int64(info.serviceSchemaVersion ?? info.schemaVersion))]
        for id in layers {
            guard let layer = info.layers.first(where: { $0.id == id }) else {
                parts.append(.integer(Int64(id)))
                continue
            }
            parts.append(.array([
                .integer(Int64(id)), .string(layer.queryOption), layer.where.map { .string($0) } ?? .null, .bool(layer.useGeometry),
                layer.useGeometry ? info.geometry ?? .null : .null,
            ]))
        }
        return JSONValue.array(parts).jsonString
    }
}
