import OutpostCore

/// Change capture: triggers on every synced table append one row per committed edit to
/// `outpost_changes`, in the same transaction as the edit (docs/sync.md, invariant I1).
///
/// The triggers use SQLite built-in functions only, so edits made by GDAL, QGIS or the `sqlite3`
/// shell are captured exactly like Outpost's own. A flag row in `outpost_capture` silences them
/// while downloaded changes are applied; the flag is set and cleared inside one transaction, so a
/// crash can never leave capture switched off.
enum ChangeCapture {
    static let changesTable = "outpost_changes"
    static let flagTable = "outpost_capture"
    /// The `gpkg_extensions` name of Outpost's tables (GeoPackage r62: author_name).
    static let extensionName = "outpost_sync"
    static let extensionDefinition = "Outpost GeoPackage sync extension, docs/geopackage-extension.md"

    /// Our bookkeeping tables. They are registered in `gpkg_extensions` (scope write-only) and
    /// kept out of `gpkg_contents`, so GDAL neither lists them as layers nor warns.
    static let tables = """
        CREATE TABLE outpost_schema (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          format_version INTEGER NOT NULL,
          schema_version INTEGER NOT NULL,
          schema_json TEXT NOT NULL
        );
        CREATE TABLE outpost_capture (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          silenced INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO outpost_capture (id, silenced) VALUES (1, 0);
        CREATE TABLE outpost_changes (
          change_id INTEGER PRIMARY KEY AUTOINCREMENT,
          table_name TEXT NOT NULL,
          fid INTEGER NOT NULL,
          globalid TEXT,
          op TEXT NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
          changed_columns TEXT,
          old_values TEXT,
          old_geometry BLOB,
          edited_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          base_gen INTEGER
        );
        CREATE TABLE outpost_layer_cursor (
          table_name TEXT PRIMARY KEY,
          cursor INTEGER NOT NULL
        );
        """

    static let ownTables = ["outpost_schema", "outpost_capture", "outpost_changes", "outpost_layer_cursor"]

    /// The server generation the table was downloaded up to when an edit is made: the base the
    /// server detects conflicting changes against (NULL in a geodatabase that is not a replica).
    private static func baseGeneration(_ table: String) -> String {
        "(SELECT cursor FROM outpost_layer_cursor WHERE table_name = \(literal(table)))"
    }

    /// The trigger condition: capture is on.
    private static let enabled = "(SELECT silenced FROM outpost_capture WHERE id = 1) = 0"

    /// A JSON text expression for a column value of row `row` (OLD or NEW). Blobs become
    /// `"base16:…"` because `json_quote` refuses them, and an outside writer's edit must never fail
    /// in our trigger.
    private static func jsonExpression(_ row: String, _ column: String) -> String {
        let c = "\(row).\(quoted(column))"
        return "CASE typeof(\(c)) WHEN 'blob' THEN json_quote('base16:' || hex(\(c))) ELSE json_quote(\(c)) END"
    }

    /// The trigger that gives rows inserted without a global id (by GDAL, QGIS, the sqlite3
    /// shell) a new one, for layers with a GlobalID field that are not synced. Synced layers do
    /// this inside their capture insert trigger, so the change row sees the id.
    static func globalIDFillTrigger(for layer: LayerDefinition, always: Bool = false) -> [String] {
        guard let globalID = layer.globalIDField, always || !layer.sync else { return [] }
        let pk = quoted(layer.objectIDField), gid = quoted(globalID)
        return [
            """
            CREATE TRIGGER \(quoted("outpost_\(layer.name)_globalid")) AFTER INSERT ON \(quoted(layer.name)) WHEN NEW.\(gid) IS NULL
            BEGIN
              UPDATE \(quoted(layer.name)) SET \(gid) = \(GeoPackageDDL.globalIDExpression) WHERE \(pk) = NEW.\(pk);
            END
            """
        ]
    }

    /// The names of ``triggers(for:)``.
    static func triggerNames(for layer: LayerDefinition) -> [String] {
        writeTriggerNames(table: layer.name) + ["outpost_\(layer.name)_globalid_immutable"]
    }

    /// The names of the capture triggers that fire on every insert, update and delete of `table`
    /// (not the global id guard, which fires only when the id is written).
    static func writeTriggerNames(table: String) -> [String] {
        ["insert", "update", "delete"].map { "outpost_\(table)_\($0)" }
    }

    /// The capture triggers of one synced table.
    static func triggers(for layer: LayerDefinition) -> [String] {
        guard let globalID = layer.globalIDField else { return [] }
        let t = layer.name, qt = quoted(t)
        let pk = quoted(layer.objectIDField), gid = quoted(globalID)
        let geometry = layer.isSpatial ? layer.geometryColumn : nil
        let attributeColumns = layer.fields.map(\.name).filter { $0 != layer.objectIDField }
        let compared = attributeColumns + (geometry.map { [$0] } ?? [])
        let anyChange = compared.map { "OLD.\(quoted($0)) IS NOT NEW.\(quoted($0))" }.joined(separator: " OR ")
        let changedNames = compared.map {
            "CASE WHEN OLD.\(quoted($0)) IS NOT NEW.\(quoted($0)) THEN \(literal(",\"\($0)\"")) ELSE '' END"
        }.joined(separator: " || ")
        let oldChanged = attributeColumns.map {
            "CASE WHEN OLD.\(quoted($0)) IS NOT NEW.\(quoted($0)) THEN \(literal(",\"\($0)\":")) || \(jsonExpression("OLD", $0)) ELSE '' END"
        }.joined(separator: " || ")
        let oldAll = attributeColumns.map {
            "\(literal(",\"\($0)\":")) || \(jsonExpression("OLD", $0))"
        }.joined(separator: " || ")
        let oldGeometryOnUpdate = geometry.map { "CASE WHEN OLD.\(quoted($0)) IS NOT NEW.\(quoted($0)) THEN OLD.\(quoted($0)) END" } ?? "NULL"
        let oldGeometryOnDelete = geometry.map { "OLD.\(quoted($0))" } ?? "NULL"
        return [
            // One trigger fills a missing global id and records the insert, so the change row
            // always carries the id (the order in which separate triggers fire is not specified).
            """
            CREATE TRIGGER \(quoted("outpost_\(t)_insert")) AFTER INSERT ON \(qt)
            BEGIN
              UPDATE \(qt) SET \(gid) = \(GeoPackageDDL.globalIDExpression) WHERE \(pk) = NEW.\(pk) AND NEW.\(gid) IS NULL;
              INSERT INTO outpost_changes (table_name, fid, globalid, op)
              SELECT \(literal(t)), NEW.\(pk), coalesce(NEW.\(gid), (SELECT \(gid) FROM \(qt) WHERE \(pk) = NEW.\(pk))), 'insert' WHERE \(enabled);
            END
            """,
            // OLD.globalid IS NULL only for the fill above: that is part of the insert, not an edit.
            """
            CREATE TRIGGER \(quoted("outpost_\(t)_update")) AFTER UPDATE ON \(qt) WHEN \(enabled) AND OLD.\(gid) IS NOT NULL AND (\(anyChange))
            BEGIN
              INSERT INTO outpost_changes (table_name, fid, globalid, op, changed_columns, old_values, old_geometry, base_gen)
              VALUES (\(literal(t)), NEW.\(pk), NEW.\(gid), 'update',
                '[' || substr(\(changedNames), 2) || ']',
                '{' || substr(\(oldChanged.isEmpty ? "''" : oldChanged), 2) || '}',
                \(oldGeometryOnUpdate), \(baseGeneration(t)));
            END
            """,
            """
            CREATE TRIGGER \(quoted("outpost_\(t)_delete")) AFTER DELETE ON \(qt) WHEN \(enabled)
            BEGIN
              INSERT INTO outpost_changes (table_name, fid, globalid, op, old_values, old_geometry, base_gen)
              VALUES (\(literal(t)), OLD.\(pk), OLD.\(gid), 'delete', '{' || substr(\(oldAll.isEmpty ? "''" : oldAll), 2) || '}', \(oldGeometryOnDelete),
                \(baseGeneration(t)));
            END
            """,
            // A feature's global id is its identity across replicas: changing it would orphan
            // every copy. Downloads (capture silenced) and the fill above may still set it.
            """
            CREATE TRIGGER \(quoted("outpost_\(t)_globalid_immutable")) BEFORE UPDATE OF \(gid) ON \(qt)
            WHEN \(enabled) AND OLD.\(gid) IS NOT NULL AND OLD.\(gid) IS NOT NEW.\(gid)
            BEGIN
              SELECT RAISE(ABORT, 'globalid is immutable');
            END
            """,
        ]
    }
}
