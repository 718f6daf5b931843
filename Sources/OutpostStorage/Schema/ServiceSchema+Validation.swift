import Foundation
import OutpostCore

extension ServiceSchema {
    /// Spatial references Outpost can create geodatabases in.
    public static let supportedSpatialReferences: Set<Int> = [4326, 3857]

    /// Words a field may not be named: they would read as operators in a where clause.
    static let reservedWords: Set<String> = [
        "and", "or", "not", "in", "like", "is", "null", "between", "escape", "select", "from", "where",
        "date", "timestamp", "true", "false", "order", "by", "group", "having", "union", "case", "when",
    ]

    /// The schema with implicit fields added (an OID field on every layer, a GlobalID field on
    /// synced layers), checked for consistency.
    ///
    /// - Throws: ``StorageError/Code/invalidSchema`` with the path of the first problem.
    public func normalized() throws -> ServiceSchema {
        var copy = self
        copy.layers = layers.map(Self.addImplicitFields)
        copy.tables = tables.map(Self.addImplicitFields)
        try copy.validate()
        return copy
    }

    private static func addImplicitFields(_ layer: LayerDefinition) -> LayerDefinition {
        var l = layer
        if !l.fields.contains(where: { $0.type == .oid }) {
            l.fields.insert(FieldDefinition(name: "objectid", type: .oid, nullable: false, editable: false), at: 0)
        }
        if l.sync, !l.fields.contains(where: { $0.type == .globalID }) {
            l.fields.insert(FieldDefinition(name: "globalid", type: .globalID, nullable: false, editable: false), at: 1)
        }
        return l
    }

    /// Checks names, ids, types, domains and defaults.
    public func validate() throws {
        func fail(_ path: String, _ message: String) -> StorageError {
            StorageError(.invalidSchema, "\(path): \(message)")
        }
        guard formatVersion <= Self.currentFormatVersion else {
            throw fail("formatVersion", "version \(formatVersion) is newer than this Outpost reads (\(Self.currentFormatVersion))")
        }
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
            throw fail("name", "a service name uses letters, digits, '_' and '-' only")
        }
        guard Self.supportedSpatialReferences.contains(spatialReference.wkid) else {
            throw fail("spatialReference", "wkid \(spatialReference.wkid) is not supported; use 4326 or 3857")
        }
        guard maxRecordCount > 0 else { throw fail("maxRecordCount", "must be positive") }
        guard !allLayers.isEmpty else { throw fail("layers", "a service needs at least one layer or table") }
        for (name, domain) in domains {
            try Self.validate(domain, path: "domains.\(name)")
        }
        var ids = Set<Int>(), names = Set<String>()
        for (kind, list) in [("layers", layers), ("tables", tables)] {
            for (index, layer) in list.enumerated() {
                let path = "\(kind)[\(index)]"
                guard layer.id >= 0, ids.insert(layer.id).inserted else {
                    throw fail("\(path).id", "layer id \(layer.id) is negative or used twice")
                }
                guard Self.isValidTableName(layer.name) else {
                    throw fail(
                        "\(path).name",
                        "\"\(layer.name)\" is not a valid table name: use lower case [a-z][a-z0-9_]* (at most 63 characters), not starting with gpkg_, rtree_, sqlite_ or outpost_, and not \"attachments\"")
                }
                guard names.insert(layer.name).inserted else { throw fail("\(path).name", "\"\(layer.name)\" is used twice") }
                if kind == "layers", layer.geometryType == nil {
                    throw fail("\(path).geometryType", "a layer needs a geometry type (list non-spatial tables under \"tables\")")
                }
                if layer.geometryType?.acceptsAny == true {
                    throw fail("\(path).geometryType", "a service layer has one geometry type; generic \"Geometry\" is not allowed")
                }
                if kind == "tables", layer.geometryType != nil {
                    throw fail("\(path).geometryType", "a table has no geometry; list spatial layers under \"layers\"")
                }
                if let sr = layer.spatialReference, !Self.supportedSpatialReferences.contains(sr.wkid) {
                    throw fail("\(path).spatialReference", "wkid \(sr.wkid) is not supported; use 4326 or 3857")
                }
                try validateFields(of: layer, path: path)
                for column in (layer.conflictPolicy?.fields.keys).map(Array.init) ?? [] {
                    let known = layer.field(named: column) != nil || (layer.isSpatial && column.lowercased() == layer.geometryColumn.lowercased())
                    guard known else {
                        throw fail("\(path).conflictPolicy.fields.\(column)", "\(layer.name) has no field \"\(column)\" (the geometry is \"\(layer.geometryColumn)\")")
                    }
                }
            }
        }
    }

    static func isValidTableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, ("a"..."z").contains(first), name.count <= 63 else { return false }
        guard name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
        else { return false }
        return !["gpkg_", "gpkgext_", "rtree_", "sqlite_", "outpost_"].contains { name.hasPrefix($0) }
            && name != MediaTable.name
    }

    static func isValidFieldName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.count <= 63 else { return false }
        let letter: (Unicode.Scalar) -> Bool = { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || $0 == "_" }
        guard letter(first), name.unicodeScalars.allSatisfy({ letter($0) || ("0"..."9").contains($0) }) else { return false }
        return !reservedWords.contains(name.lowercased()) && name.lowercased() != LayerDefinition.defaultGeometryColumn
    }

    private func validateFields(of layer: LayerDefinition, path: String) throws {
        func fail(_ p: String, _ message: String) -> StorageError {
            StorageError(.invalidSchema, "\(p): \(message)", table: layer.name)
        }
        var seen = Set<String>()
        for (index, field) in layer.fields.enumerated() {
            let p = "\(path).fields[\(index)]"
            guard Self.isValidFieldName(field.name) else {
                throw fail(
                    "\(p).name",
                    "\"\(field.name)\" is not a valid field name: use [A-Za-z_][A-Za-z0-9_]*, not an SQL keyword and not \"geom\"")
            }
            guard seen.insert(field.name.lowercased()).inserted else {
                throw fail("\(p).name", "\"\(field.name)\" is used twice (names are case-insensitive)")
            }
            if let length = field.length {
                guard field.type == .string, length > 0 else {
                    throw fail("\(p).length", "only String fields take a length, and it must be positive")
                }
            }
            if let spec = field.domain {
                guard let domain = domain(for: field) else {
                    if case .named(let n) = spec { throw fail("\(p).domain", "no domain named \"\(n)\" in \"domains\"") }
                    throw fail("\(p).domain", "unresolvable domain")
                }
                if case .inline(let d) = spec { try Self.validate(d, path: "\(p).domain") }
                if domain.type == .range, !field.type.isNumeric {
                    throw fail("\(p).domain", "a range domain needs a numeric field, not \(field.type.rawValue)")
                }
                for value in domain.codedValues ?? [] {
                    guard (try? FieldValue(json: value.code, type: field.type)) != nil else {
                        throw fail("\(p).domain", "code \(value.code.jsonString) is not a \(field.type.rawValue)")
                    }
                }
            }
            if let def = field.defaultValue, !def.isNull {
                guard let value = try? FieldValue(json: def, type: field.type),
                    FieldRules(field: field, domain: domain(for: field)).problem(with: value) == nil
                else {
                    throw fail("\(p).defaultValue", "default \(def.jsonString) is not a valid \(field.type.rawValue) for this field")
                }
            }
        }
        let oids = layer.fields.filter { $0.type == .oid }
        guard oids.count == 1 else { throw fail("\(path).fields", "a layer has exactly one OID field") }
        let globalIDs = layer.fields.filter { $0.type == .globalID }
        guard globalIDs.count <= 1 else { throw fail("\(path).fields", "a layer has at most one GlobalID field") }
        if let display = layer.displayField, layer.field(named: display) == nil {
            throw fail("\(path).displayField", "no field named \"\(display)\"")
        }
    }

    private static func validate(_ domain: Domain, path: String) throws {
        switch domain.type {
        case .codedValue:
            guard let values = domain.codedValues, !values.isEmpty else {
                throw StorageError(.invalidSchema, "\(path): a coded-value domain needs at least one coded value")
            }
            guard Set(values.map(\.code)).count == values.count else {
                throw StorageError(.invalidSchema, "\(path): coded values repeat a code")
            }
        case .range:
            guard let r = domain.range, r.count == 2, r[0].isFinite, r[1].isFinite, r[0] <= r[1] else {
                throw StorageError(.invalidSchema, "\(path): a range domain needs \"range\": [min, max] with min ≤ max")
            }
        }
    }
}
