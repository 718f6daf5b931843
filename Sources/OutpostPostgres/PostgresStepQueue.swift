import Foundation
import Logging
import OutpostCore
import OutpostStorage
import PostgresNIO

/// The row changes of many edits, written with a few set-based statements instead of one per
/// edit: deletes by `= ANY`, updates from a `VALUES` list per set of columns, inserts as
/// multi-row `INSERT … RETURNING`. Used when a batch rolls back as a whole on failure, so edits
/// need no savepoint of their own. Rows come checked by the layer's ``FeatureValidator``.
///
/// Should a statement fail (a value the table refuses), its steps run again one at a time, each
/// under a savepoint, so the failure is reported against the edit that caused it.
struct PostgresStepQueue {
    struct Step {
        enum Kind {
            case insert(FeatureValidator.Row)
            case update(Int64, FeatureValidator.Row)
            case delete(Int64)
        }

        /// Where the edit's result is in the layer's results.
        var result: Int
        var kind: Kind
    }

    /// About a thousand rows per statement, fewer for wide rows (PostgreSQL binds at most 65,535).
    static func rowsPerStatement(columns: Int) -> Int { max(1, min(1000, 30_000 / max(columns + 1, 1))) }

    let layer: PostgresLayer
    let logger: Logger
    private(set) var steps: [Step] = []
    /// Global ids of the queued features: an edit of one of them flushes the queue first.
    private(set) var globalIDs: Set<String> = []

    init(layer: PostgresLayer, logger: Logger) {
        self.layer = layer
        self.logger = logger
    }

    var isEmpty: Bool { steps.isEmpty }

    mutating func append(_ step: Step, globalID: String?) {
        steps.append(step)
        if let globalID { globalIDs.insert(globalID) }
    }

    /// Writes the queued steps. Returns the object ids of inserted features (by global id) and
    /// the steps that failed (result index, error).
    mutating func flush(_ conn: PostgresConnection) async throws -> (inserted: [String: Int64], failed: [(Int, StorageError)]) {
        defer {
            steps = []
            globalIDs = []
        }
        guard !steps.isEmpty else { return ([:], []) }
        try await conn.query("SAVEPOINT step_queue", logger: logger)
        do {
            let inserted = try await write(steps, conn)
            try await conn.query("RELEASE SAVEPOINT step_queue", logger: logger)
            return (inserted, [])
        } catch is StorageError {
            try await conn.query("ROLLBACK TO SAVEPOINT step_queue", logger: logger)
        }
        var inserted: [String: Int64] = [:]
        var failed: [(Int, StorageError)] = []
        for step in steps {
            try await conn.query("SAVEPOINT step_queue", logger: logger)
            do {
                inserted.merge(try await write([step], conn)) { a, _ in a }
                try await conn.query("RELEASE SAVEPOINT step_queue", logger: logger)
            } catch let error as StorageError {
                try await conn.query("ROLLBACK TO SAVEPOINT step_queue", logger: logger)
                failed.append((step.result, error))
            }
        }
        return (inserted, failed)
    }

    private func write(_ steps: [Step], _ conn: PostgresConnection) async throws -> [String: Int64] {
        var deletes: [Int64] = []
        var updates: [[String]: [(Int64, FeatureValidator.Row, Int)]] = [:]
        var inserts: [[String]: [(FeatureValidator.Row, Int)]] = [:]
        for step in steps {
            switch step.kind {
            case .delete(let id): deletes.append(id)
            case .update(let id, let row): updates[row.columns, default: []].append((id, row, step.result))
            case .insert(let row): inserts[row.columns, default: []].append((row, step.result))
            }
        }
        if !deletes.isEmpty {
            var binds = PostgresBindings()
            binds.append(deletes)
            _ = try await layer.execute(conn, "DELETE FROM \(layer.table) WHERE \(layer.pk) = ANY($1)", binds, index: steps[0].result, logger: logger)
        }
        for (columns, rows) in updates where !columns.isEmpty {
            for chunk in Self.chunks(rows, columns: columns.count) {
                var binds = PostgresBindings()
                var tuples: [String] = []
                for (id, row, _) in chunk {
                    binds.append(id)
                    var values = ["$\(binds.count)::bigint"]
                    for (i, expression) in try layer.bind(row, &binds).enumerated() {
                        let geometry = row.writesGeometry && i == row.values.count - 1
                        values.append(geometry ? expression : "CAST(\(expression) AS \(PostgresLayer.castType(row.types[i])))")
                    }
                    tuples.append("(" + values.joined(separator: ", ") + ")")
                }
                let names = columns.map(PostgresLayer.q)
                let sets = names.map { "\($0) = v.\($0)" }.joined(separator: ", ")
                let sql = "UPDATE \(layer.table) AS t SET \(sets) FROM (VALUES \(tuples.joined(separator: ", "))) AS v (outpost_pk, \(names.joined(separator: ", "))) WHERE t.\(layer.pk) = v.outpost_pk"
                _ = try await layer.execute(conn, sql, binds, index: chunk.first!.2, logger: logger)
            }
        }
        var inserted: [String: Int64] = [:]
        let gid = layer.definition.globalIDField.map(PostgresLayer.q) ?? "NULL::text"
        for (columns, rows) in inserts {
            for chunk in Self.chunks(rows, columns: columns.count) {
                var binds = PostgresBindings()
                var tuples: [String] = []
                for (row, _) in chunk { tuples.append("(" + (try layer.bind(row, &binds)).joined(separator: ", ") + ")") }
                let sql = "INSERT INTO \(layer.table) (\(columns.map(PostgresLayer.q).joined(separator: ", "))) VALUES \(tuples.joined(separator: ", ")) RETURNING \(layer.pk), \(gid)"
                for try await (id, globalID) in try await layer.execute(conn, sql, binds, index: chunk.first!.1, logger: logger).decode((Int64, String?).self) {
                    if let globalID { inserted[globalID] = id }
                }
            }
        }
        return inserted
    }

    private static func chunks<T>(_ rows: [T], columns: Int) -> [ArraySlice<T>] {
        let size = rowsPerStatement(columns: columns)
        return stride(from: 0, to: rows.count, by: size).map { rows[$0..<min($0 + size, rows.count)] }
    }
}

extension PostgresLayer {
    /// The type a value of `type` is cast to in a `VALUES` list (the column's type, without
    /// length or collation: the assignment applies those).
    static func castType(_ type: FieldType) -> String {
        switch type {
        case .oid, .bigInteger: "bigint"
        case .globalID, .guid, .string: "text"
        case .smallInteger: "smallint"
        case .integer: "integer"
        case .double, .single: "double precision"
        case .date: "timestamptz"
        case .dateOnly: "date"
        case .blob: "bytea"
        }
    }
}
