import Foundation
import Logging
import OutpostCore
import OutpostStorage
import PostgresNIO

/// The statements that change a layer's rows, shared by applyEdits and uploaded batches. Rows
/// come checked by the layer's ``FeatureValidator``; what the table itself refuses (integrity or
/// data errors) is reported as the edit's fault, not the server's.
extension PostgresLayer {
    /// Inserts a checked row; returns its object id.
    func insert(_ row: FeatureValidator.Row, _ conn: PostgresConnection, index: Int, logger: Logger) async throws -> Int64? {
        var binds = PostgresBindings()
        let values = try bind(row, &binds)
        let sql = "INSERT INTO \(table) (\(row.columns.map(Self.q).joined(separator: ", "))) VALUES (\(values.joined(separator: ", "))) RETURNING \(pk)"
        var objectID: Int64?
        for try await id in try await execute(conn, sql, binds, index: index, logger: logger).decode(Int64.self) { objectID = id }
        return objectID
    }

    /// Sets a checked row's columns on feature `objectID` (and its geometry to null when
    /// `clearGeometry`); returns the feature as it is afterwards, nil when there is none.
    func update(objectID: Int64, _ row: FeatureValidator.Row, clearGeometry: Bool = false, _ conn: PostgresConnection, index: Int, logger: Logger) async throws -> Feature? {
        var binds = PostgresBindings()
        let values = try bind(row, &binds)
        var sets = zip(row.columns, values).map { "\(Self.q($0)) = \($1)" }
        if clearGeometry, definition.isSpatial { sets.append("\(geometryColumn) = NULL") }
        binds.append(objectID)
        let assignments = sets.isEmpty ? "\(pk) = \(pk)" : sets.joined(separator: ", ")
        let sql = "UPDATE \(table) SET \(assignments) WHERE \(pk) = $\(binds.count) RETURNING \(allColumns)"
        var after: Feature?
        for try await r in try await execute(conn, sql, binds, index: index, logger: logger) { after = try decodeAll(r) }
        return after
    }

    /// Deletes the rows matching `condition`; returns them as they were.
    func delete(where condition: String, _ binds: PostgresBindings, _ conn: PostgresConnection, index: Int, logger: Logger) async throws -> [Feature] {
        var out: [Feature] = []
        for try await r in try await execute(conn, "DELETE FROM \(table) WHERE \(condition) RETURNING \(allColumns)", binds, index: index, logger: logger) {
            out.append(try decodeAll(r))
        }
        return out
    }

    /// Runs one statement of an edit.
    func execute(_ conn: PostgresConnection, _ sql: String, _ binds: PostgresBindings, index: Int, logger: Logger) async throws -> PostgresRowSequence {
        do {
            return try await conn.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        } catch let error as PSQLError where error.code == .server {
            let state = error.serverInfo?[.sqlState] ?? ""
            guard state.hasPrefix("23") || state.hasPrefix("22") else { throw error }
            throw StorageError(.invalidEdit, "rejected by the table: \(error.serverInfo?[.message] ?? state)", table: definition.name, editIndex: index)
        }
    }
}
