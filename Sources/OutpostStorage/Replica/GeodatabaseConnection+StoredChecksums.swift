import Foundation
import GRDB
import OutpostCore

/// The replica's layer checksums kept from one verify to the next (``ReplicaState/StoredChecksum``).
extension GeodatabaseConnection {
    /// What a checksum hashed now is stored against: the capture's sequence (a local edit moves
    /// it) and how many times server values were written (``ReplicaState/serverWrites``).
    public struct ChecksumStamp: Hashable, Sendable {
        /// The capture's sequence when the checksum was hashed.
        public var changeSequence: Int64
        /// The count of server writes when the checksum was hashed.
        public var serverWrites: Int64
    }

    /// The capture's sequence: the last change id `outpost_changes` ever gave (0 before the
    /// first). AUTOINCREMENT never gives one again, even after acknowledged rows are deleted.
    public func changeSequence() throws -> Int64 {
        guard try db.tableExists("sqlite_sequence") else { return 0 }
        return try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [ChangeCapture.changesTable]) ?? 0
    }

    /// The stamp of the data this connection sees now (nil when the geodatabase is not a replica).
    public func checksumStamp() throws -> ChecksumStamp? {
        guard let state = try replicaState() else { return nil }
        return ChecksumStamp(changeSequence: try changeSequence(), serverWrites: state.serverWrites ?? 0)
    }

    /// The stored checksum of layer `table`, when it still holds: none was captured since
    /// (nothing edited it locally). Nil otherwise: the layer is to be hashed.
    public func storedChecksum(of table: String) throws -> FeatureDigest.Accumulator? {
        guard let stored = try replicaState()?.layers.first(where: { $0.table == table })?.checksum,
            stored.changeSequence == (try changeSequence())
        else { return nil }
        return stored.accumulator
    }

    /// Stores `sum`, layer `table`'s checksum hashed when the data had `stamp`, unless something
    /// was written since (then it would not describe the layer). Whether it was stored.
    @discardableResult
    public func storeChecksum(_ sum: FeatureDigest.Accumulator, of table: String, hashedAt stamp: ChecksumStamp) throws -> Bool {
        guard var state = try replicaState(), try keepChecksum(sum, of: table, hashedAt: stamp, in: &state) else { return false }
        try setReplicaState(state)
        return true
    }

    /// ``storeChecksum(_:of:hashedAt:)`` into `state` (this connection's current replica state,
    /// which the caller records): whether it was kept.
    public func keepChecksum(_ sum: FeatureDigest.Accumulator, of table: String, hashedAt stamp: ChecksumStamp, in state: inout ReplicaState) throws -> Bool {
        guard let i = state.layers.firstIndex(where: { $0.table == table }),
            ChecksumStamp(changeSequence: try changeSequence(), serverWrites: state.serverWrites ?? 0) == stamp
        else { return false }
        state.layers[i].checksum = ReplicaState.StoredChecksum(sum, changeSequence: stamp.changeSequence)
        return true
    }

    /// Hashes each layer of the replica and stores its checksum (a replica's new file: its first
    /// verify then starts from them). The caller holds the write transaction.
    public func storeLayerChecksums() throws {
        guard var state = try replicaState() else { return }
        let sequence = try changeSequence()
        for i in state.layers.indices {
            let table = try geodatabase.table(named: state.layers[i].table)
            state.layers[i].checksum = ReplicaState.StoredChecksum(try table.checksum(matching: .all, in: self), changeSequence: sequence)
        }
        try setReplicaState(state)
    }

    /// Forgets layer `table`'s stored checksum: it is about to be written in a way no hook follows
    /// (a bulk import with capture silenced).
    func forgetStoredChecksum(of table: String) throws {
        guard var state = try replicaState(), let i = state.layers.firstIndex(where: { $0.table == table }) else { return }
        state.layers[i].checksum = nil
        state.serverWrites = (state.serverWrites ?? 0) + 1
        try setReplicaState(state)
    }

    /// Runs `body`, which writes server values with capture silenced, keeping the layers'
    /// stored checksums current: SQLite's pre-update hook shows every row `body` writes in the
    /// replica's layers (``RowChangeTracker``), whose digests before and after are folded into
    /// them once it returns; a layer whose writes the hook could not describe loses its
    /// checksum. A transaction that changed a layer counts in ``ReplicaState/serverWrites`` (one
    /// that wrote nothing, or only the values a row had, does not). The outermost of nested
    /// calls does the work.
    func keepingStoredChecksums<T>(_ body: () throws -> T) throws -> T {
        guard let state = try replicaState(), !RowChangeTracker.watchesDigests(on: db) else { return try body() }
        let schema = geodatabase.schema
        let watched = state.layers.compactMap { layer in schema.layer(named: layer.table).map { (layer.table, $0) } }
        var started: [LayerDefinition] = []
        let result: T
        do {
            for (_, layer) in watched {
                try RowChangeTracker.watchDigests(of: layer, db)
                started.append(layer)
            }
            result = try body()
        } catch {
            // No watch outlives the call: a later one would otherwise take this one for an outer call.
            for layer in started { _ = RowChangeTracker.endDigests(of: layer.name, db) }
            throw error
        }
        var changes: [String: (digest: UInt64, countChange: Int)] = [:]
        for (table, layer) in watched { changes[table] = RowChangeTracker.endDigests(of: layer.name, db) }
        guard var current = try replicaState() else { return result }
        var changed = false
        for i in current.layers.indices {
            let table = current.layers[i].table
            guard let change = changes[table] else {
                // Written in a way the hook could not describe (or not watched): unknown.
                changed = true
                current.layers[i].checksum = nil
                continue
            }
            guard change.digest != 0 || change.countChange != 0 else { continue }
            changed = true
            if let stored = current.layers[i].checksum, var sum = stored.accumulator {
                sum.add(FeatureDigest.Accumulator(value: change.digest, count: change.countChange))
                current.layers[i].checksum = ReplicaState.StoredChecksum(sum, changeSequence: stored.changeSequence)
            }
        }
        guard changed else { return result }
        current.serverWrites = (current.serverWrites ?? 0) + 1
        try setReplicaState(current)
        return result
    }
}
