import Foundation
import OutpostCore

/// Imports GeoJSON FeatureCollections (RFC 7946: WGS 84 longitude/latitude) into layers.
public enum GeoJSONImport {
    /// Streams the features of `file` into `table` inside `conn`'s write transaction.
    ///
    /// Properties map to fields by name (case-insensitively); a `globalid` property becomes the
    /// feature's global id; the OID property is ignored (object ids are assigned anew). Geometries
    /// are projected when the layer is in Web Mercator.
    /// - Parameter ignoreUnknownProperties: skip properties that are not fields instead of failing.
    /// - Parameter file: a GeoJSON FeatureCollection, read as a stream.
    /// - Parameter table: the feature table to fill.
    /// - Parameter conn: a connection inside a write transaction.
    /// - Parameter captureChanges: record the rows as local edits to sync (off: an import is base data).
    /// - Returns: the number of features imported.
    /// - Throws: ``StorageError`` naming the feature (1-based) and the problem; the caller's
    ///   transaction then rolls back.
    @discardableResult
    public static func importFile(
        _ file: URL, into table: FeatureTable, in conn: GeodatabaseConnection, ignoreUnknownProperties: Bool = false,
        captureChanges: Bool = false
    ) throws -> Int {
        var reader: GeoJSONFeatureReader
        do {
            reader = try GeoJSONFeatureReader(contentsOf: file)
        } catch let error as GeometryError {
            throw StorageError(.invalidEdit, "\(file.lastPathComponent): \(error)", table: table.name, cause: error)
        } catch {
            throw StorageError(.io, "cannot read \(file.path): \(error.localizedDescription)", table: table.name)
        }
        let definition = table.definition
        let target = table.spatialReference ?? .wgs84
        var fieldsByName: [String: FieldDefinition] = [:]
        for f in definition.fields { fieldsByName[f.name.lowercased()] = f }
        return try table.importFeatures(in: conn, captureChanges: captureChanges) { importer in
            while true {
                let next: GeoJSONFeature?
                do {
                    next = try reader.next()
                } catch let error as GeometryError {
                    throw StorageError(.invalidEdit, "\(file.lastPathComponent): \(error)", table: table.name, cause: error)
                }
                guard let source = next else { break }
                let number = reader.featureIndex
                do {
                    var feature = Feature()
                    for (key, json) in source.properties {
                        guard let field = fieldsByName[key.lowercased()] else {
                            if ignoreUnknownProperties { continue }
                            throw StorageError(
                                .invalidEdit, "property \"\(shortened(key))\" is not a field of \(table.name)", table: table.name, field: key)
                        }
                        switch field.type {
                        case .oid: continue
                        case .globalID:
                            if let s = json.stringValue { feature.globalID = s }
                        default:
                            do {
                                feature.attributes[field.name] = try FieldValue(json: json, type: field.type)
                            } catch var error as StorageError {
                                error.field = field.name
                                throw error
                            }
                        }
                    }
                    if let g = source.geometry {
                        feature.geometry = try WebMercator.convert(g, from: .wgs84, to: target)
                    }
                    try importer.add(feature)
                } catch var error as StorageError {
                    error.message = "\(file.lastPathComponent) feature \(number): \(error.message)"
                    error.editIndex = nil
                    error.table = table.name
                    throw error
                } catch let error as GeometryError {
                    throw StorageError(.invalidEdit, "\(file.lastPathComponent) feature \(number): \(error)", table: table.name, cause: error)
                }
            }
        }
    }
}

/// Creates a geodatabase from a sample-data directory: `service.json` (the schema) and
/// `data/<layer name>.geojson` for each layer that has data (docs/cli.md, "Sample data").
public enum ServiceDirectoryImport {
    /// Creates a geodatabase from a sample-data directory and imports its layers.
    /// - Parameters:
    ///   - directory: the sample-data directory.
    ///   - output: where the geodatabase is created.
    ///   - overwrite: replace a file already at `output` (refused otherwise).
    ///   - schemaURL: a schema to use instead of `<directory>/service.json`.
    /// - Returns: the geodatabase and the number of features imported per layer.
    public static func createGeodatabase(
        from directory: URL, schema schemaURL: URL? = nil, at output: URL, overwrite: Bool = false
    ) throws -> (Geodatabase, [String: Int]) {
        let schemaFile = schemaURL ?? directory.appendingPathComponent("service.json")
        let schema = try ServiceSchema.load(from: schemaFile)
        if FileManager.default.fileExists(atPath: output.path), !overwrite {
            throw StorageError(.alreadyExists, "\(output.path) already exists (use --overwrite to replace it)")
        }
        let dataDirectory = directory.appendingPathComponent("data")
        var counts: [String: Int] = [:]
        let gdb = try Geodatabase.create(at: output, schema: schema, overwrite: overwrite) { conn in
            for table in conn.geodatabase.tables {
                let file = dataDirectory.appendingPathComponent("\(table.name).geojson")
                guard FileManager.default.fileExists(atPath: file.path) else {
                    counts[table.name] = 0
                    continue
                }
                counts[table.name] = try GeoJSONImport.importFile(file, into: table, in: conn)
            }
        }
        return (gdb, counts)
    }
}

extension GeoJSONFeatureReader {
    /// Memory-maps `url` and positions the reader at its first feature.
    /// - Throws: `GeometryError.Code.invalidEncoding` when the file is not a FeatureCollection.
    public init(contentsOf url: URL) throws {
        // An empty file is not mapped (Foundation maps one by allocating a page it never frees).
        let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
        try self.init(data: size == 0 ? Data() : try Data(contentsOf: url, options: .alwaysMapped))
    }
}
