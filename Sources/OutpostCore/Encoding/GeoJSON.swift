import Foundation

/// GeoJSON geometries and features (RFC 7946).
///
/// Positions are `[x, y]`, `[x, y, z]`, or `[x, y, z, m]` (the fourth ordinate is read as M, a
/// common extension; RFC 7946 §3.1.1 asks writers not to emit it, so the encoder drops M).
/// Empty geometries use empty coordinate arrays (§3.1). The encoder writes polygon rings with
/// the right-hand rule of §3.1.6 (exteriors counter-clockwise, holes clockwise).
public enum GeoJSON {
    // MARK: Decoding

    /// Decodes a GeoJSON geometry object from JSON bytes.
    public static func decodeGeometry(_ data: Data) throws -> Geometry {
        try decodeGeometry(JSONValue.parse(data))
    }

    /// Decodes a GeoJSON geometry object.
    /// - Throws: ``GeometryError`` naming the member that is wrong.
    public static func decodeGeometry(_ json: JSONValue, depth: Int = 0) throws -> Geometry {
        guard depth <= WKB.maxNesting else {
            throw GeometryError(.nestingTooDeep, "GeometryCollection nested deeper than \(WKB.maxNesting) levels")
        }
        guard let object = json.objectValue else {
            throw GeometryError(.invalidEncoding, "a GeoJSON geometry must be an object, got \(json.typeName)")
        }
        guard let typeName = object["type"]?.stringValue else {
            throw GeometryError(.invalidEncoding, "a GeoJSON geometry needs a string \"type\" member")
        }
        guard let type = GeometryType(geoJSONName: typeName) else {
            throw GeometryError(.invalidType, "\"\(typeName)\" is not a GeoJSON geometry type")
        }
        if type == .geometryCollection {
            guard let members = object["geometries"]?.arrayValue else {
                throw GeometryError(.invalidEncoding, "a GeometryCollection needs a \"geometries\" array")
            }
            let parts = try members.map { try decodeGeometry($0, depth: depth + 1) }
            let layout = widest(parts.map(\.layout))
            return .geometryCollection(try GeometryCollection(try parts.map { try conform($0, to: layout) }, layout: layout))
        }
        guard let coordinates = object["coordinates"] else {
            throw GeometryError(.invalidEncoding, "a \(typeName) needs a \"coordinates\" member")
        }
        var builder = PositionReader()
        switch type {
        case .point:
            let array = try builder.array(coordinates, "Point coordinates")
            if array.isEmpty { return .point(Point(empty: .xy)) }
            let p = try builder.position(coordinates)
            return .point(try Point(p))
        case .lineString:
            let positions = try builder.positions(coordinates, "LineString coordinates")
            return .lineString(try LineString(positions.map { $0.conformed(to: builder.layout) }, layout: builder.layout))
        case .polygon:
            let rings = try builder.rings(coordinates, "Polygon coordinates")
            return .polygon(try Polygon(rings: rings.map { $0.map { $0.conformed(to: builder.layout) } }, layout: builder.layout))
        case .multiPoint:
            let positions = try builder.positions(coordinates, "MultiPoint coordinates")
            return .multiPoint(try MultiPoint(try positions.map { try Point($0.conformed(to: builder.layout)) }, layout: builder.layout))
        case .multiLineString:
            let lines = try builder.array(coordinates, "MultiLineString coordinates").map {
                try builder.positions($0, "MultiLineString line")
            }
            let layout = builder.layout
            return .multiLineString(
                try MultiLineString(try lines.map { try LineString($0.map { $0.conformed(to: layout) }, layout: layout) }, layout: layout))
        case .multiPolygon:
            let polygons = try builder.array(coordinates, "MultiPolygon coordinates").map {
                try builder.rings($0, "MultiPolygon polygon")
            }
            let layout = builder.layout
            return .multiPolygon(
                try MultiPolygon(
                    try polygons.map { try Polygon(rings: $0.map { $0.map { $0.conformed(to: layout) } }, layout: layout) },
                    layout: layout))
        case .geometryCollection:
            preconditionFailure("handled above")
        }
    }

    static func widest(_ layouts: [CoordinateLayout]) -> CoordinateLayout {
        CoordinateLayout(hasZ: layouts.contains { $0.hasZ }, hasM: layouts.contains { $0.hasM })
    }

    static func conform(_ g: Geometry, to layout: CoordinateLayout) throws -> Geometry {
        if g.layout == layout { return g }
        if g.isEmpty { return Geometry.empty(g.type, layout: layout) }
        return try g.mapPositions { $0.conformed(to: layout) }
    }

    /// Reads coordinate arrays, tracking the widest layout seen.
    private struct PositionReader {
        var layout: CoordinateLayout = .xy

        func array(_ json: JSONValue, _ what: String) throws -> [JSONValue] {
            guard let a = json.arrayValue else {
                throw GeometryError(.invalidEncoding, "\(what) must be an array, got \(json.typeName)")
            }
            return a
        }

        mutating func position(_ json: JSONValue) throws -> Position {
            guard let a = json.arrayValue else {
                throw GeometryError(.invalidEncoding, "a position must be an array of numbers, got \(json.typeName)")
            }
            guard (2...4).contains(a.count) else {
                throw GeometryError(.invalidCoordinate, "a position has 2 to 4 numbers, got \(a.count)")
            }
            let values = try a.map { v -> Double in
                guard let d = v.doubleValue else {
                    throw GeometryError(.invalidCoordinate, "a position holds a \(v.typeName), not a number")
                }
                return d
            }
            let p = Position(x: values[0], y: values[1], z: a.count > 2 ? values[2] : nil, m: a.count > 3 ? values[3] : nil)
            if p.z != nil && !layout.hasZ { layout = CoordinateLayout(hasZ: true, hasM: layout.hasM) }
            if p.m != nil && !layout.hasM { layout = CoordinateLayout(hasZ: layout.hasZ, hasM: true) }
            return p
        }

        mutating func positions(_ json: JSONValue, _ what: String) throws -> [Position] {
            try array(json, what).map { try position($0) }
        }

        mutating func rings(_ json: JSONValue, _ what: String) throws -> [[Position]] {
            try array(json, what).map { try positions($0, "\(what) ring") }
        }
    }

    // MARK: Encoding

    /// The geometry as a GeoJSON object, compact, with `type` first.
    public static func encode(_ geometry: Geometry) -> String {
        var out = ""
        write(geometry, to: &out)
        return out
    }

    /// Appends the geometry as GeoJSON to `out`.
    public static func write(_ geometry: Geometry, to out: inout String) {
        out.appendWritten { write(geometry, to: &$0) }
    }

    /// Appends the geometry as GeoJSON, UTF-8, to `out`.
    public static func write(_ geometry: Geometry, to out: inout [UInt8]) {
        out.append(utf8: "{\"type\":\"")
        out.append(utf8: geometry.type.geoJSONName)
        out.append(utf8: "\",")
        switch geometry {
        case .point(let p):
            out.append(utf8: "\"coordinates\":")
            if let position = p.position { writePosition(position, to: &out) } else { out.append(utf8: "[]") }
        case .lineString(let l):
            out.append(utf8: "\"coordinates\":")
            writePositions(l.positions, to: &out)
        case .polygon(let p):
            out.append(utf8: "\"coordinates\":")
            writePolygon(p, to: &out)
        case .multiPoint(let m):
            out.append(utf8: "\"coordinates\":")
            writePositions(m.points.compactMap(\.position), to: &out)
        case .multiLineString(let m):
            out.append(utf8: "\"coordinates\":[")
            for (i, l) in m.lineStrings.enumerated() {
                if i > 0 { out.append(utf8: ",") }
                writePositions(l.positions, to: &out)
            }
            out.append(utf8: "]")
        case .multiPolygon(let m):
            out.append(utf8: "\"coordinates\":[")
            for (i, p) in m.polygons.enumerated() {
                if i > 0 { out.append(utf8: ",") }
                writePolygon(p, to: &out)
            }
            out.append(utf8: "]")
        case .geometryCollection(let c):
            out.append(utf8: "\"geometries\":[")
            for (i, g) in c.geometries.enumerated() {
                if i > 0 { out.append(utf8: ",") }
                write(g, to: &out)
            }
            out.append(utf8: "]")
        }
        out.append(utf8: "}")
    }

    private static func writePolygon(_ p: Polygon, to out: inout [UInt8]) {
        out.append(utf8: "[")
        for (i, ring) in p.rings.enumerated() {
            if i > 0 { out.append(utf8: ",") }
            // RFC 7946 §3.1.6: exterior counter-clockwise, holes clockwise.
            writePositions(RingOrientation.oriented(ring, clockwise: i > 0), to: &out)
        }
        out.append(utf8: "]")
    }

    private static func writePositions(_ positions: [Position], to out: inout [UInt8]) {
        CoordinateText.write(positions, measures: false, to: &out)
    }

    private static func writePosition(_ p: Position, to out: inout [UInt8]) {
        CoordinateText.write(p, measures: false, to: &out)
    }
}

/// A GeoJSON Feature (RFC 7946 §3.2).
public struct GeoJSONFeature: Hashable, Sendable {
    /// The feature's `id` member, when it has one.
    public var id: JSONValue?
    /// The feature's geometry; `nil` for a feature without one (`"geometry": null`).
    public var geometry: Geometry?
    /// The feature's `properties` member.
    public var properties: [String: JSONValue]

    /// A feature of these members.
    public init(id: JSONValue? = nil, geometry: Geometry?, properties: [String: JSONValue] = [:]) {
        self.id = id
        self.geometry = geometry
        self.properties = properties
    }

    /// Decodes a Feature object; `"geometry": null` gives a feature without geometry.
    public init(json: JSONValue) throws {
        guard let object = json.objectValue, object["type"]?.stringValue == "Feature" else {
            throw GeometryError(.invalidEncoding, "expected a GeoJSON object with \"type\": \"Feature\"")
        }
        id = object["id"]
        if let g = object["geometry"], !g.isNull {
            geometry = try GeoJSON.decodeGeometry(g)
        } else {
            geometry = nil
        }
        switch object["properties"] {
        case .object(let p)?: properties = p
        case nil, .null?: properties = [:]
        case let other?:
            throw GeometryError(.invalidEncoding, "Feature \"properties\" must be an object or null, got \(other.typeName)")
        }
    }
}
