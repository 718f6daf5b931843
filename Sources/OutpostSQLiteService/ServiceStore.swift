import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// The server-side bookkeeping a sync-enabled service keeps next to its data, in the service
/// GeoPackage (extension `outpost_sync`, write-only, not in `gpkg_contents`):
///
/// - `outpost_service_state`: the service-wide generation counter (assigned at commit: edits are
///   serialised, so generations increase in commit order) and the schema version;
/// - `outpost_change_log`: one row per changed feature per generation, with the operation, the
///   changed columns, the replica batch it came from and when the edit was made (what the
///   download feed and conflict detection read);
/// - `outpost_tombstones`: deleted global ids with the generation that deleted them and the
///   feature's last values (for `updateResurrects`);
/// - `outpost_conflicts`: conflict records, `state` `open` for an undecided `manual` one.
///
/// (Files made before 2026-11-26 also had `outpost_feature_versions`, per-feature column
/// generations written with every change and never read: conflict detection reads the change
/// log. Opening such a file drops it.)
enum ServiceStore {
    static let tables = [
        """
        CREATE TABLE outpost_service_state (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          generation INTEGER NOT NULL,
          schema_version INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE outpost_change_log (
          change_id INTEGER PRIMARY KEY AUTOINCREMENT,
          generation INTEGER NOT NULL,
          layer_id INTEGER NOT NULL,
          globalid TEXT NOT NULL,
          op TEXT NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
          changed_columns TEXT,
          origin_replica TEXT,
          origin_seq INTEGER,
          changed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          edited_at TEXT
        )
        """,
        "CREATE INDEX outpost_change_log_feed ON outpost_change_log (layer_id, generation)",
        """
        CREATE TABLE outpost_tombstones (
          layer_id INTEGER NOT NULL,
          globalid TEXT NOT NULL,
          generation INTEGER NOT NULL,
          row TEXT,
          PRIMARY KEY (layer_id, globalid)
        )
        """,
    ] + replicaTables

    /// Replicas, their batch ledger, and replayable ArcGIS synchronizeReplica answers.
    static let replicaTables = [
        "CREATE INDEX IF NOT EXISTS outpost_change_log_feature ON outpost_change_log (layer_id, globalid, generation)",
        """
        CREATE TABLE IF NOT EXISTS outpost_replicas (
          replica_id TEXT PRIMARY KEY,
          name TEXT NOT NULL,
          definition TEXT NOT NULL,
          replica_gen INTEGER NOT NULL,
          last_seq INTEGER NOT NULL DEFAULT 0,
          created_at INTEGER NOT NULL,
          last_sync_at INTEGER
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_batch_ledger (
          replica_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          batch_id TEXT NOT NULL,
          hash TEXT NOT NULL,
          result TEXT NOT NULL,
          generation INTEGER,
          applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          PRIMARY KEY (replica_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_conflicts (
          conflict_id INTEGER PRIMARY KEY AUTOINCREMENT,
          layer_id INTEGER NOT NULL,
          globalid TEXT NOT NULL,
          kind TEXT NOT NULL,
          record TEXT NOT NULL,
          replica_id TEXT,
          seq INTEGER,
          generation INTEGER NOT NULL,
          created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          state TEXT
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_attachment_hashes (
          globalid TEXT PRIMARY KEY,
          sha256 TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_schema_migrations (
          schema_version INTEGER PRIMARY KEY,
          generation INTEGER NOT NULL,
          changes TEXT NOT NULL,
          schema TEXT NOT NULL,
          created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_request_replay (
          request_key TEXT PRIMARY KEY,
          response TEXT NOT NULL,
          created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        )
        """,
    ]

    static let tableNames = [
        "outpost_service_state", "outpost_change_log", "outpost_tombstones",
        "outpost_replicas", "outpost_batch_ledger", "outpost_request_replay", "outpost_conflicts", "outpost_schema_migrations",
        "outpost_attachment_hashes",
    ]

    /// Adds the tables to a new service GeoPackage, with every existing feature at generation 1.
    static func install(_ conn: GeodatabaseConnection, schema: ServiceSchema) throws {
        for sql in tables { try conn.execute(sql) }
        for table in tableNames {
            try conn.execute(
                "INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) VALUES (?, NULL, 'outpost_sync', 'Outpost GeoPackage sync extension, docs/geopackage-extension.md', 'write-only')",
                arguments: [.text(table)])
        }
        try conn.execute("INSERT INTO outpost_service_state (id, generation, schema_version) VALUES (1, 1, ?)", arguments: [.integer(Int64(schema.schemaVersion))])
    }

    /// Columns added since the first release of these tables, added to older service files when
    /// they are opened: (table, column, declaration).
    static let addedColumns = [
        ("outpost_change_log", "edited_at", "TEXT"), ("outpost_tombstones", "row", "TEXT"), ("outpost_conflicts", "state", "TEXT"),
    ]

    /// Brings an existing service file's bookkeeping tables up to date.
    static func upgrade(_ conn: GeodatabaseConnection) throws {
        for sql in replicaTables { try conn.execute(sql) }
        try conn.execute("DROP TABLE IF EXISTS outpost_feature_versions")
        try conn.execute("DELETE FROM gpkg_extensions WHERE table_name = 'outpost_feature_versions' AND extension_name = 'outpost_sync'")
        for table in tableNames {
            try conn.execute(
                """
                INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope)
                SELECT ?, NULL, 'outpost_sync', 'Outpost GeoPackage sync extension, docs/geopackage-extension.md', 'write-only'
                WHERE NOT EXISTS (SELECT 1 FROM gpkg_extensions WHERE table_name = ? AND extension_name = 'outpost_sync')
                """,
                arguments: [.text(table), .text(table)])
        }
        for (table, column, declaration) in addedColumns {
            let columns = try conn.query("SELECT name FROM pragma_table_info(?)", arguments: [.text(table)]).compactMap { $0[0].textValue }
            if !columns.isEmpty, !columns.contains(column) {
                try conn.execute("ALTER TABLE \(quotedName(table)) ADD COLUMN \(quotedName(column)) \(declaration)")
            }
        }
        try conn.execute("CREATE INDEX IF NOT EXISTS outpost_conflicts_open ON outpost_conflicts (layer_id, globalid) WHERE state = 'open'")
    }

    static func isService(_ conn: GeodatabaseConnection) throws -> Bool {
        try !conn.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outpost_service_state'").isEmpty
    }

    static func generation(_ conn: GeodatabaseConnection) throws -> Int64 {
        try conn.query("SELECT generation FROM outpost_service_state WHERE id = 1").first?.first?.integerValue ?? 0
    }

    static func setGeneration(_ conn: GeodatabaseConnection, _ generation: Int64) throws {
        try conn.execute("UPDATE outpost_service_state SET generation = ? WHERE id = 1", arguments: [.integer(generation)])
    }

    /// Records one feature's change at `generation`, made at `changedAt` (`BatchPlanner.timestamp(_:)`).
    static func log(
        _ conn: GeodatabaseConnection, generation: Int64, layerID: Int, globalID: String, op: String, columns: [String], changedAt: String,
        origin: (replica: String, seq: Int64)? = nil
    ) throws {
        try log(conn, generation: generation, layerID: layerID, [LogEntry(globalID: globalID, op: op, columns: columns)], changedAt: changedAt, origin: origin)
    }

    /// One feature's change for ``log(_:generation:layerID:_:origin:)``.
    typealias LogEntry = ChangeLogEntry

    /// After an attachment of a feature was added or deleted outside a batch: the feature is
    /// logged at a new generation (no columns), so replicas download its attachment list again;
    /// `sha256` records a new attachment's content hash.
    static func attachmentsChanged(
        _ conn: GeodatabaseConnection, layerID: Int, featureGlobalID: String?, at changedAt: String, sha256: (globalID: String, hash: String)? = nil
    ) throws {
        if let sha256 {
            try conn.execute(
                "INSERT OR REPLACE INTO outpost_attachment_hashes (globalid, sha256) VALUES (?, ?)", arguments: [.text(sha256.globalID), .text(sha256.hash)])
        }
        guard let featureGlobalID else { return }
        let generation = try generation(conn) + 1
        try log(conn, generation: generation, layerID: layerID, [LogEntry(globalID: featureGlobalID, op: "update", columns: [])], changedAt: changedAt)
        try setGeneration(conn, generation)
    }

    /// The attachments of features, with their content hashes (computed and not stored for
    /// attachments added by other writers).
    static func attachmentInfos(_ conn: GeodatabaseConnection, layer: String, featureGlobalIDs: [String]) throws -> [String: [AttachmentInfo]] {
        let records = try conn.attachmentRecords(layer: layer, featureGlobalIDs: featureGlobalIDs)
        let ids = records.values.flatMap { $0.map(\.globalID) }
        var hashes: [String: String] = [:]
        if !ids.isEmpty {
            for row in try conn.query(
                "SELECT globalid, sha256 FROM outpost_attachment_hashes WHERE globalid IN (SELECT value FROM json_each(?))",
                arguments: [.text(JSONValue.arrayText(ids))])
            {
                if let g = row[0].textValue, let h = row[1].textValue { hashes[g] = h }
            }
        }
        return try records.mapValues { list in
            try list.map { r in
                AttachmentInfo(
                    globalId: r.globalID, name: r.name, contentType: r.contentType, size: r.size, sha256: try hashes[r.globalID] ?? conn.attachmentSHA256(id: r.id),
                    keywords: r.keywords)
            }
        }
    }

    /// Logs many changes of one layer under one generation, in order: the change log rows
    /// ``logRowsPerStatement`` to a statement, bound as they are read (the column lists repeat,
    /// so each distinct one is made once), then for each delete the tombstone (an insert drops
    /// one), in the entries' order, so the last operation on a feature decides its tombstone.
    static func log(
        _ conn: GeodatabaseConnection, generation: Int64, layerID: Int, _ entries: [LogEntry], changedAt time: String,
        origin: (replica: String, seq: Int64)? = nil
    ) throws {
        guard !entries.isEmpty else { return }
        let layer = Int64(layerID)
        let columnsSQL =
            "INSERT INTO outpost_change_log (generation, layer_id, globalid, op, changed_columns, origin_replica, origin_seq, edited_at, changed_at) VALUES "
        let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
        let insertMany = try conn.statement(columnsSQL + Array(repeating: row, count: logRowsPerStatement).joined(separator: ", "))
        let insertOne = try conn.statement(columnsSQL + row)
        // Column list -> its JSON array.
        var columnTexts: [[String]: String] = [:]
        func columnsText(_ columns: [String]) -> String {
            if let known = columnTexts[columns] { return known }
            let text = JSONValue.arrayText(columns)
            columnTexts[columns] = text
            return text
        }
        // The time is one for all the rows (the column's default would format it for each).
        func bind(_ e: LogEntry, _ p: inout SQLParameters) {
            p.bind(generation)
            p.bind(layer)
            p.bind(e.globalID)
            p.bind(e.op)
            p.bind(columnsText(e.columns))
            p.bind(e.toOrigin ? nil : origin?.replica)
            p.bind(e.toOrigin ? nil : origin?.seq)
            p.bind(e.editedAt)
            p.bind(time)
        }
        var k = 0
        while k + logRowsPerStatement <= entries.count {
            try insertMany.execute { p in
                for e in entries[k..<(k + logRowsPerStatement)] { bind(e, &p) }
            }
            k += logRowsPerStatement
        }
        for e in entries[k...] { try insertOne.execute { p in bind(e, &p) } }

        let keepTombstone = try conn.statement(
            """
            INSERT INTO outpost_tombstones (layer_id, globalid, generation, row) VALUES (?, ?, ?, ?)
            ON CONFLICT (layer_id, globalid) DO UPDATE SET generation = excluded.generation, row = coalesce(excluded.row, row)
            """)
        let dropTombstone = try conn.statement("DELETE FROM outpost_tombstones WHERE layer_id = ? AND globalid = ?")
        for e in entries {
            if e.op == "delete" {
                try keepTombstone.execute { p in
                    p.bind(layer)
                    p.bind(e.globalID)
                    p.bind(generation)
                    p.bind(e.row)
                }
            } else if e.op == "insert" {
                try dropTombstone.execute { p in
                    p.bind(layer)
                    p.bind(e.globalID)
                }
            }
        }
    }

    /// Change log rows per insert statement: a statement per row cost a step, a reset and the
    /// `AUTOINCREMENT` counter's read and write each (9 parameters a row: 900, well under
    /// SQLite's limit of 32,766).
    static let logRowsPerStatement = 100
}

/// `"name"` for SQL built from validated schema names.
func quotedName(_ name: String) -> String { quotedIdentifier(name) }
