import Foundation
import OutpostCore

/// The definition of a feature service: its layers and tables, fields, domains and spatial
/// reference. The JSON form validates against `Schemas/service.schema.json`.
///
/// ```swift
/// let schema = try ServiceSchema.load(from: URL(fileURLWithPath: "SampleData/field_inspection/service.json"))
/// let gdb = try Geodatabase.create(at: out, schema: schema)
/// ```
public struct ServiceSchema: Hashable, Sendable, Codable {
    /// The version of this JSON format that the code writes.
    public static let currentFormatVersion = 1

    /// The schema file's format version.
    public var formatVersion: Int
    /// The service's name.
    public var name: String
    /// What the service holds, in words.
    public var description: String?
    /// The spatial reference of its data.
    public var spatialReference: SpatialReference
    /// ArcGIS capabilities: `Query`, `Create`, `Update`, `Delete`, `Sync`, `Extract`.
    public var capabilities: [String]
    /// The most features one query answers.
    public var maxRecordCount: Int
    /// Increases with every migration of the service; replicas compare it.
    public var schemaVersion: Int
    /// Domains that fields refer to by name.
    public var domains: [String: Domain]
    /// The layers with geometry.
    public var layers: [LayerDefinition]
    /// The tables without geometry.
    public var tables: [LayerDefinition]

    /// A schema with the given parts.
    public init(
        name: String, layers: [LayerDefinition], tables: [LayerDefinition] = [],
        spatialReference: SpatialReference = .wgs84, domains: [String: Domain] = [:], description: String? = nil,
        capabilities: [String] = ["Query", "Create", "Update", "Delete", "Sync"], maxRecordCount: Int = 2000,
        schemaVersion: Int = 1
    ) {
        self.formatVersion = Self.currentFormatVersion
        self.name = name
        self.layers = layers
        self.tables = tables
        self.spatialReference = spatialReference
        self.domains = domains
        self.description = description
        self.capabilities = capabilities
        self.maxRecordCount = maxRecordCount
        self.schemaVersion = schemaVersion
    }

    private enum CodingKeys: String, CodingKey {
        case formatVersion, name, description, spatialReference, capabilities, maxRecordCount, schemaVersion
        case domains, layers, tables
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        formatVersion = try c.decodeIfPresent(Int.self, forKey: .formatVersion) ?? Self.currentFormatVersion
        name = try c.decode(String.self, forKey: .name)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        spatialReference = try c.decodeIfPresent(SpatialReference.self, forKey: .spatialReference) ?? .wgs84
        capabilities =
            try c.decodeIfPresent([String].self, forKey: .capabilities) ?? ["Query", "Create", "Update", "Delete", "Sync"]
        maxRecordCount = try c.decodeIfPresent(Int.self, forKey: .maxRecordCount) ?? 2000
        schemaVersion = try c.decodeIfPresent(Int.self, forKey: .schemaVersion) ?? 1
        domains = try c.decodeIfPresent([String: Domain].self, forKey: .domains) ?? [:]
        layers = try c.decodeIfPresent([LayerDefinition].self, forKey: .layers) ?? []
        tables = try c.decodeIfPresent([LayerDefinition].self, forKey: .tables) ?? []
    }

    /// All layers and tables, layers first.
    public var allLayers: [LayerDefinition] { layers + tables }

    /// The layer or table with that name.
    public func layer(named name: String) -> LayerDefinition? {
        allLayers.first { $0.name == name } ?? allLayers.first { $0.name.lowercased() == name.lowercased() }
    }

    /// The layer or table with that id.
    public func layer(id: Int) -> LayerDefinition? { allLayers.first { $0.id == id } }

    /// The domain a field uses, resolving names against ``domains``.
    public func domain(for field: FieldDefinition) -> Domain? {
        switch field.domain {
        case .inline(let d)?: d
        case .named(let n)?: domains[n]
        case nil: nil
        }
    }

    // MARK: - Loading and saving

    /// Reads and validates a schema file.
    /// - Throws: ``StorageError/Code/invalidSchema`` naming the file and the problem.
    public static func load(from url: URL) throws -> ServiceSchema {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw StorageError(.io, "cannot read schema \(url.path): \(error.localizedDescription)")
        }
        do {
            return try decode(data)
        } catch var error as StorageError {
            error.message = "\(url.lastPathComponent): \(error.message)"
            throw error
        }
    }

    /// Decodes, normalises and validates schema JSON.
    public static func decode(_ data: Data) throws -> ServiceSchema {
        let schema: ServiceSchema
        do {
            schema = try JSONDecoder().decode(ServiceSchema.self, from: data)
        } catch let error as DecodingError {
            throw StorageError(.invalidSchema, describe(error))
        } catch {
            throw StorageError(.invalidSchema, "invalid schema JSON: \(error)")
        }
        return try schema.normalized()
    }

    /// Stable, pretty JSON (sorted keys).
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
                .trimmingCharacters(in: CharacterSet(charactersIn: "."))
        }
        switch error {
        case .keyNotFound(let key, let ctx):
            let at = path(ctx.codingPath)
            return "missing \"\(key.stringValue)\"\(at.isEmpty ? "" : " in \(at)")"
        case .typeMismatch(_, let ctx), .valueNotFound(_, let ctx):
            return "wrong type at \(path(ctx.codingPath)): \(ctx.debugDescription)"
        case .dataCorrupted(let ctx):
            let at = path(ctx.codingPath)
            return at.isEmpty ? "invalid JSON: \(ctx.debugDescription)" : "\(at): \(ctx.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
