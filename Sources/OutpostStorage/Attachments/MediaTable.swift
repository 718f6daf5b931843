/// Attachments live in one media table shared by all layers, related to each layer through the
/// OGC Related Tables Extension (OGC 18-000): a `gpkgext_relations` row with relation `media` and a
/// mapping table `<layer>_attachments` (base_id = feature OID, related_id = attachment id).
///
/// The media table is made with the first layer that has attachments (at creation or by a later
/// schema change), so a file without attachments shows readers no empty extra layer.
enum MediaTable {
    static let name = "attachments"
    static let extensionName = "gpkg_related_tables"
    static let extensionDefinition = "http://www.geopackage.org/18-000.html"

    /// RTE r12/r13: a media table has an INTEGER primary key, `data BLOB NOT NULL` and
    /// `content_type TEXT NOT NULL`. The other columns carry what ArcGIS attachment tables have.
    /// `data` comes last: SQLite keeps a `zeroblob()` in the last column of a row as a count of
    /// zeros, but materialises it in memory anywhere else — a 100 MB photo written in chunks
    /// would pass through memory whole once. (Files made before keep `data` second.)
    static let create = """
        CREATE TABLE "attachments" (
          id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
          content_type TEXT NOT NULL,
          globalid TEXT(38) NOT NULL UNIQUE,
          rel_globalid TEXT(38),
          layer TEXT NOT NULL,
          att_name TEXT NOT NULL,
          data_size INTEGER NOT NULL,
          keywords TEXT,
          data BLOB NOT NULL
        );
        CREATE INDEX attachments_rel_globalid ON attachments (rel_globalid);
        """

    static let relationsTable = """
        CREATE TABLE gpkgext_relations (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          base_table_name TEXT NOT NULL,
          base_primary_column TEXT NOT NULL DEFAULT 'id',
          related_table_name TEXT NOT NULL,
          related_primary_column TEXT NOT NULL DEFAULT 'id',
          relation_name TEXT NOT NULL,
          mapping_table_name TEXT NOT NULL UNIQUE
        )
        """

    static func mappingTableName(for layer: String) -> String { "\(layer)_attachments" }

    /// The mapping table of a layer, plus a trigger that removes a feature's attachments with it
    /// (ArcGIS deletes attachments with their feature). Built-in SQL only: it also runs for
    /// deletes made by other writers.
    static func createMapping(for layer: LayerDefinition) -> [String] {
        let mapping = mappingTableName(for: layer.name)
        let pk = quoted(layer.objectIDField)
        var statements = [
            """
            CREATE TABLE \(quoted(mapping)) (
              id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
              base_id INTEGER NOT NULL,
              related_id INTEGER NOT NULL
            )
            """,
            "CREATE INDEX \(quoted("idx_\(mapping)_base_id")) ON \(quoted(mapping)) (base_id)",
            "CREATE INDEX \(quoted("idx_\(mapping)_related_id")) ON \(quoted(mapping)) (related_id)",
        ]
        statements.append(
            """
            CREATE TRIGGER \(quoted("outpost_\(layer.name)_attachments_cascade")) AFTER DELETE ON \(quoted(layer.name))
            BEGIN
              DELETE FROM attachments WHERE id IN (SELECT related_id FROM \(quoted(mapping)) WHERE base_id = OLD.\(pk));
              DELETE FROM \(quoted(mapping)) WHERE base_id = OLD.\(pk);
            END
            """)
        return statements
    }
}
