import GRDB
import OutpostCore

/// SQL that creates GeoPackage structures, following GeoPackage 1.3 Annex C (table definitions)
/// and Annex F.3 (R-tree index). Column types are upper case as r5 spells them; the validator
/// compares them case-sensitively.
enum GeoPackageDDL {
    /// `application_id` "GPKG" (r2).
    static let applicationID: Int32 = 0x4750_4B47
    /// GeoPackage 1.3.0: GDAL ≥ 3.3 opens it without a warning, and the R-tree trigger set below
    /// (update1–update4) is the one the validator expects for 1.3 (Req 75).
    static let userVersion: Int32 = 10300
    /// GDAL's own extension for non-spatial tables. A whole-file row of it (table and column
    /// NULL) tells GDAL the file registers its non-spatial tables, so with `LIST_ALL_TABLES=AUTO`
    /// it does not list tables missing from `gpkg_contents` (our `outpost_*` tables) as layers,
    /// also in a file without any `attributes` table. GDAL never warns about it.
    static let aspatialExtensionName = "gdal_aspatial"
    static let aspatialExtensionDefinition = "http://gdal.org/geopackage_aspatial.html"

    static let coreTables = """
        CREATE TABLE gpkg_spatial_ref_sys (
          srs_name TEXT NOT NULL,
          srs_id INTEGER PRIMARY KEY,
          organization TEXT NOT NULL,
          organization_coordsys_id INTEGER NOT NULL,
          definition TEXT NOT NULL,
          description TEXT
        );
        CREATE TABLE gpkg_contents (
          table_name TEXT NOT NULL PRIMARY KEY,
          data_type TEXT NOT NULL,
          identifier TEXT UNIQUE,
          description TEXT DEFAULT '',
          last_change DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
          min_x DOUBLE,
          min_y DOUBLE,
          max_x DOUBLE,
          max_y DOUBLE,
          srs_id INTEGER,
          CONSTRAINT fk_gc_r_srs_id FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys(srs_id)
        );
        CREATE TABLE gpkg_geometry_columns (
          table_name TEXT NOT NULL,
          column_name TEXT NOT NULL,
          geometry_type_name TEXT NOT NULL,
          srs_id INTEGER NOT NULL,
          z TINYINT NOT NULL,
          m TINYINT NOT NULL,
          CONSTRAINT pk_geom_cols PRIMARY KEY (table_name, column_name),
          CONSTRAINT uk_gc_table_name UNIQUE (table_name),
          CONSTRAINT fk_gc_tn FOREIGN KEY (table_name) REFERENCES gpkg_contents(table_name),
          CONSTRAINT fk_gc_srs FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys (srs_id)
        );
        CREATE TABLE gpkg_extensions (
          table_name TEXT,
          column_name TEXT,
          extension_name TEXT NOT NULL,
          definition TEXT NOT NULL,
          scope TEXT NOT NULL,
          CONSTRAINT ge_tce UNIQUE (table_name, column_name, extension_name)
        );
        """

    /// A version 4 global id in the `{UPPER}` form, from SQLite built-ins only so every writer
    /// (GDAL, QGIS, the sqlite3 shell) can evaluate it in our triggers.
    ///
    /// It is not a column DEFAULT: GDAL reads defaults as literals and writes the expression's
    /// text into rows it appends. A trigger fills the id after the insert instead.
    static let globalIDExpression = """
        printf('{%s-%s-4%s-%s%s-%s}', hex(randomblob(4)), hex(randomblob(2)), substr(hex(randomblob(2)), 2), \
        substr('89AB', 1 + (abs(random()) % 4), 1), substr(hex(randomblob(2)), 2), hex(randomblob(6)))
        """

    /// `CREATE TABLE` for a layer or table of the schema.
    static func createTable(_ layer: LayerDefinition, schema: ServiceSchema) -> String {
        var columns: [String] = []
        for field in layer.fields {
            let column = columnDefinition(field)
            columns.append(column)
            if field.type == .oid, let geometry = layer.geometryType {
                columns.append("\(quoted(LayerDefinition.defaultGeometryColumn)) \(geometry.geoPackageName)")
            }
        }
        return "CREATE TABLE \(quoted(layer.name)) (\n  \(columns.joined(separator: ",\n  "))\n)"
    }

    /// One column of a layer's table (also what a schema migration adds).
    static func columnDefinition(_ field: FieldDefinition) -> String {
        var column = "\(quoted(field.name)) \(field.type.columnType(length: field.length))"
        switch field.type {
        case .oid:
            column += " PRIMARY KEY AUTOINCREMENT NOT NULL"
        case .globalID:
            // Nullable in the DDL only so other writers can insert without it; the insert
            // trigger fills it in the same statement (see ChangeCapture). Uniqueness is a
            // separate index (globalIDIndex) so bulk loads can build it once, sorted.
            break
        default:
            if !field.nullable { column += " NOT NULL" }
            if let value = field.defaultValue, !value.isNull,
                let fv = try? FieldValue(json: value, type: field.type), let sql = defaultLiteral(fv)
            {
                column += " DEFAULT \(sql)"
            }
        }
        return column
    }

    /// The unique index on a layer's global ids.
    static func globalIDIndexName(table: String) -> String { "outpost_\(table)_globalid_index" }

    static func globalIDIndex(_ layer: LayerDefinition) -> String? {
        guard let gid = layer.globalIDField else { return nil }
        return "CREATE UNIQUE INDEX \(quoted(globalIDIndexName(table: layer.name))) ON \(quoted(layer.name)) (\(quoted(gid)))"
    }

    private static func defaultLiteral(_ value: FieldValue) -> String? {
        switch value {
        case .integer(let i): String(i)
        case .double(let d): "\(d)"
        case .string(let s): literal(s)
        case .date(let d): literal(GeoPackageDate.format(d))
        case .null, .blob: nil
        }
    }

    /// The R-tree virtual table and the GeoPackage 1.3 triggers that maintain it (Annex F.3):
    /// insert, update1–update4, delete. The text follows the standard's templates.
    static func spatialIndex(table t: String, geometry c: String, primaryKey i: String) -> [String] {
        let rtree = "rtree_\(t)_\(c)"
        let qt = quoted(t), qc = quoted(c), qi = quoted(i), qr = quoted(rtree)
        return [
            "CREATE VIRTUAL TABLE \(qr) USING rtree(id, minx, maxx, miny, maxy)",
            """
            CREATE TRIGGER \(quoted(rtree + "_insert")) AFTER INSERT ON \(qt) WHEN (new.\(qc) NOT NULL AND NOT ST_IsEmpty(NEW.\(qc))) \
            BEGIN INSERT OR REPLACE INTO \(qr) VALUES (NEW.\(qi), ST_MinX(NEW.\(qc)), ST_MaxX(NEW.\(qc)), ST_MinY(NEW.\(qc)), ST_MaxY(NEW.\(qc))); END
            """,
            """
            CREATE TRIGGER \(quoted(rtree + "_update1")) AFTER UPDATE OF \(qc) ON \(qt) WHEN OLD.\(qi) = NEW.\(qi) AND (NEW.\(qc) NOTNULL AND NOT ST_IsEmpty(NEW.\(qc))) \
            BEGIN INSERT OR REPLACE INTO \(qr) VALUES (NEW.\(qi), ST_MinX(NEW.\(qc)), ST_MaxX(NEW.\(qc)), ST_MinY(NEW.\(qc)), ST_MaxY(NEW.\(qc))); END
            """,
            """
            CREATE TRIGGER \(quoted(rtree + "_update2")) AFTER UPDATE OF \(qc) ON \(qt) WHEN OLD.\(qi) = NEW.\(qi) AND (NEW.\(qc) ISNULL OR ST_IsEmpty(NEW.\(qc))) \
            BEGIN DELETE FROM \(qr) WHERE id = OLD.\(qi); END
            """,
            """
            CREATE TRIGGER \(quoted(rtree + "_update3")) AFTER UPDATE ON \(qt) WHEN OLD.\(qi) != NEW.\(qi) AND (NEW.\(qc) NOTNULL AND NOT ST_IsEmpty(NEW.\(qc))) \
            BEGIN DELETE FROM \(qr) WHERE id = OLD.\(qi); INSERT OR REPLACE INTO \(qr) VALUES (NEW.\(qi), ST_MinX(NEW.\(qc)), ST_MaxX(NEW.\(qc)), ST_MinY(NEW.\(qc)), ST_MaxY(NEW.\(qc))); END
            """,
            """
            CREATE TRIGGER \(quoted(rtree + "_update4")) AFTER UPDATE ON \(qt) WHEN OLD.\(qi) != NEW.\(qi) AND (NEW.\(qc) ISNULL OR ST_IsEmpty(NEW.\(qc))) \
            BEGIN DELETE FROM \(qr) WHERE id IN (OLD.\(qi), NEW.\(qi)); END
            """,
            """
            CREATE TRIGGER \(quoted(rtree + "_delete")) AFTER DELETE ON \(qt) WHEN old.\(qc) NOT NULL \
            BEGIN DELETE FROM \(qr) WHERE id = OLD.\(qi); END
            """,
        ]
    }

    /// Drops the named triggers and indexes that exist and returns their SQL, to be run again
    /// (in the same transaction) once the bulk work they would slow down is done.
    static func setAside(_ names: [String], _ db: Database) throws -> [String] {
        var saved: [String] = []
        for name in names {
            guard let row = try Row.fetchOne(db, sql: "SELECT type, sql FROM sqlite_master WHERE name = ? AND type IN ('trigger', 'index')", arguments: [name]) else { continue }
            let type: String = row[0]
            saved.append(row[1])
            try db.execute(sql: "DROP \(type == "index" ? "INDEX" : "TRIGGER") \(quoted(name))")
        }
        return saved
    }

    /// Names the R-tree triggers of a table may have (to set them aside during bulk writes):
    /// GeoPackage 1.3's update1–4, and update5–7 that 1.4 writers such as GDAL 3.8+ use.
    static func spatialIndexTriggerNames(table: String, geometry: String) -> [String] {
        let rtree = "rtree_\(table)_\(geometry)"
        return ["insert", "update1", "update2", "update3", "update4", "update5", "update6", "update7", "delete"].map { "\(rtree)_\($0)" }
    }
}
