/// Esri JSON geometry objects, as the ArcGIS REST API uses them (the "Geometry objects" page of
/// the REST reference): `{x, y[, z][, m]}`, `{points}`, `{paths}`, `{rings}`, envelopes
/// `{xmin, ymin, xmax, ymax}`, with `hasZ`/`hasM` flags and an optional `spatialReference`.
///
/// Esri rings are grouped by winding: a clockwise ring starts a new polygon, counter-clockwise
/// rings are holes of the exterior that contains them. The encoder writes exteriors clockwise and
/// holes counter-clockwise. GeometryCollection has no Esri JSON form.
public enum EsriJSON {
    /// `esriGeometryPoint`, `esriGeometryMultipoint`, `esriGeometryPolyline`, `esriGeometryPolygon`.
    public static func geometryTypeName(for type: GeometryType) -> String? {
        switch type {
        case .point: "esriGeometryPoint"
        case .multiPoint: "esriGeometryMultipoint"
        case .lineString, .multiLineString: "esriGeometryPolyline"
        case .polygon, .multiPolygon: "esriGeometryPolygon"
        case .geometryCollection: nil
        }
    }

    // MARK: Decoding

    /// Decodes an Esri JSON geometry. One path or one polygon decodes to the single-part type.
    /// - Throws: ``GeometryError`` naming the member that is wrong.
    public static func decodeGeometry(_ json: JSONValue) throws -> Geometry {
        guard let o = json.objectValue else {
            throw GeometryError(.invalidEncoding, "an Esri JSON geometry must be an object, got \(json.typeName)")
        }
        let m = Members(o)
        if m.curves {
            throw GeometryError(.unsupported, "Esri curve geometries (curvePaths, curveRings) are not supported")
        }
        let declared = (hasZ: m.hasZ?.boolValue, hasM: m.hasM?.boolValue)
        if let x = m.x {
            return .point(try decodePoint(x: x, m))
        }
        if let points = m.points {
            let layout = try layoutFor(declared, sample: points, depth: 1)
            let positions = try positions(points, layout, "points")
            return .multiPoint(try MultiPoint(try positions.map(Point.init), layout: layout))
        }
        if let paths = m.paths {
            let layout = try layoutFor(declared, sample: paths, depth: 2)
            let lines = try array(paths, "paths").map { try LineString(try positions($0, layout, "path"), layout: layout) }
            if lines.count == 1 { return .lineString(lines[0]) }
            return .multiLineString(try MultiLineString(lines, layout: layout))
        }
        if let rings = m.rings {
            let layout = try layoutFor(declared, sample: rings, depth: 2)
            let all = try array(rings, "rings").map { try positions($0, layout, "ring") }
            let polygons = try groupRings(all, layout: layout)
            if polygons.count == 1 { return .polygon(polygons[0]) }
            return .multiPolygon(try MultiPolygon(polygons, layout: layout))
        }
        if m.xmin != nil {
            return .polygon(try decodeEnvelope(json).polygon)
        }
        throw GeometryError(
            .invalidEncoding, "an Esri JSON geometry needs one of x/y, points, paths, rings or xmin/ymin/xmax/ymax")
    }

    /// Decodes `{xmin, ymin, xmax, ymax}` (z/m ranges are read when present).
    public static func decodeEnvelope(_ json: JSONValue) throws -> Envelope {
        guard let o = json.objectValue else {
            throw GeometryError(.invalidEncoding, "an envelope must be an object, got \(json.typeName)")
        }
        func number(_ key: String) throws -> Double {
            guard let v = o[key]?.doubleValue, v.isFinite else {
                throw GeometryError(.invalidCoordinate, "envelope member \"\(key)\" must be a finite number")
            }
            return v
        }
        let e = Envelope(xmin: try number("xmin"), ymin: try number("ymin"), xmax: try number("xmax"), ymax: try number("ymax"))
        guard e.xmin <= e.xmax, e.ymin <= e.ymax else {
            throw GeometryError(.invalidCoordinate, "envelope has xmin > xmax or ymin > ymax")
        }
        return e
    }

    /// The `spatialReference` member of a geometry or envelope, when it has a wkid.
    public static func spatialReference(of json: JSONValue) -> SpatialReference? {
        decodeSpatialReference(json["spatialReference"])
    }

    /// Reads `{"wkid": 102100, "latestWkid": 3857}` and friends (latestWkid wins).
    public static func decodeSpatialReference(_ json: JSONValue?) -> SpatialReference? {
        guard let json else { return nil }
        if let wkid = json["latestWkid"]?.integerValue ?? json["wkid"]?.integerValue {
            return SpatialReference(wkid: Int(wkid))
        }
        if let i = json.integerValue { return SpatialReference(wkid: Int(i)) }
        return nil
    }

    /// The members a geometry object is read by, found in one pass over it: a point was eleven
    /// hashed lookups (every possible member asked for by name), a fifth of the server's planning
    /// of a batch of moved points (`outpost-bench codec`).
    private struct Members {
        var x, y, z, m, hasZ, hasM, points, paths, rings, xmin: JSONValue?
        var curves = false

        init(_ o: [String: JSONValue]) {
            for (key, value) in o {
                switch key {
                case "x": x = value
                case "y": y = value
                case "z": z = value
                case "m": m = value
                case "hasZ": hasZ = value
                case "hasM": hasM = value
                case "points": points = value
                case "paths": paths = value
                case "rings": rings = value
                case "xmin": xmin = value
                case "curvePaths", "curveRings": curves = true
                default: break
                }
            }
        }
    }

    private static func decodePoint(x: JSONValue, _ o: Members) throws -> Point {
        let hasZ = o.z.map { !$0.isNull } ?? false
        let hasM = o.m.map { !$0.isNull } ?? false
        let layout = CoordinateLayout(hasZ: hasZ, hasM: hasM)
        if x.isNull || x.stringValue == "NaN" { return Point(empty: layout) }
        func ordinate(_ key: String, _ value: JSONValue?) throws -> Double? {
            guard let v = value, !v.isNull else { return nil }
            guard let d = v.doubleValue else {
                throw GeometryError(.invalidCoordinate, "point member \"\(key)\" must be a number, got \(v.typeName)")
            }
            return d
        }
        guard let xv = try ordinate("x", o.x), let yv = try ordinate("y", o.y) else {
            throw GeometryError(.invalidCoordinate, "a point needs numeric \"x\" and \"y\"")
        }
        return try Point(Position(x: xv, y: yv, z: try ordinate("z", o.z), m: try ordinate("m", o.m)))
    }

    private static func array(_ json: JSONValue, _ what: String) throws -> [JSONValue] {
        guard let a = json.arrayValue else {
            throw GeometryError(.invalidEncoding, "\"\(what)\" must be an array, got \(json.typeName)")
        }
        return a
    }

    /// The layout from hasZ/hasM, or from the length of the first coordinate when the flags are absent.
    private static func layoutFor(_ declared: (hasZ: Bool?, hasM: Bool?), sample: JSONValue, depth: Int) throws
        -> CoordinateLayout
    {
        if declared.hasZ != nil || declared.hasM != nil {
            return CoordinateLayout(hasZ: declared.hasZ ?? false, hasM: declared.hasM ?? false)
        }
        var probe: JSONValue? = sample
        for _ in 0..<depth { probe = probe?.arrayValue?.first }
        let count = probe?.arrayValue?.count ?? 2
        return count >= 4 ? .xyzm : (count == 3 ? .xyz : .xy)
    }

    private static func positions(_ json: JSONValue, _ layout: CoordinateLayout, _ what: String) throws -> [Position] {
        try array(json, what).map { coordinate in
            guard let a = coordinate.arrayValue else {
                throw GeometryError(.invalidEncoding, "a \(what) coordinate must be an array, got \(coordinate.typeName)")
            }
            guard a.count >= layout.dimension || (a.count >= 2 && !layout.hasZ && !layout.hasM) else {
                throw GeometryError(
                    .invalidCoordinate, "a \(what) coordinate has \(a.count) numbers; \(layout.rawValue) needs \(layout.dimension)")
            }
            let values = try a.prefix(layout.dimension).map { v -> Double in
                guard let d = v.doubleValue else {
                    throw GeometryError(.invalidCoordinate, "a \(what) coordinate holds a \(v.typeName), not a number")
                }
                return d
            }
            return Position(
                x: values[0], y: values[1],
                z: layout.hasZ ? values[2] : nil,
                m: layout.hasM ? values[layout.hasZ ? 3 : 2] : nil)
        }
    }

    /// Groups Esri rings into polygons: clockwise rings are exteriors; each counter-clockwise ring
    /// joins the smallest exterior containing its first vertex (or becomes an exterior itself).
    static func groupRings(_ rings: [[Position]], layout: CoordinateLayout) throws -> [Polygon] {
        var exteriors: [(ring: [Position], area: Double, holes: [[Position]])] = []
        var holes: [[Position]] = []
        for ring in rings {
            if RingOrientation.isClockwise(ring) {
                exteriors.append((ring, abs(RingOrientation.signedArea(ring)), []))
            } else {
                holes.append(ring)
            }
        }
        for hole in holes {
            // A ring with no positions bounds nothing (a client's malformed polygon).
            guard let probe = hole.first else { throw GeometryError(.invalidEncoding, "an Esri JSON ring has no positions") }
            let owner = exteriors.indices
                .filter { RingOrientation.contains(exteriors[$0].ring, x: probe.x, y: probe.y) }
                .min { exteriors[$0].area < exteriors[$1].area }
            if let owner {
                exteriors[owner].holes.append(hole)
            } else {
                exteriors.append((hole.reversed(), abs(RingOrientation.signedArea(hole)), []))
            }
        }
        return try exteriors.map { try Polygon(rings: [$0.ring] + $0.holes, layout: layout) }
    }

    // MARK: Encoding

    /// Writes `geometry` as an Esri JSON object, with `spatialReference` when given.
    /// - Throws: ``GeometryError/Code/unsupported`` for a GeometryCollection.
    /// The Esri JSON of `geometry` as a value: what parsing ``encode(_:spatialReference:)`` gives,
    /// built directly for a point (the commonest geometry on the sync paths, where a text round
    /// trip per feature showed in profiles).
    public static func value(_ geometry: Geometry) throws -> JSONValue {
        guard case .point(let p) = geometry, let position = p.position else { return try JSONValue.parse(try encode(geometry)) }
        var object: [String: JSONValue] = ["x": number(position.x), "y": number(position.y)]
        if let z = position.z { object["z"] = number(z) }
        if let m = position.m { object["m"] = number(m) }
        return .object(object)
    }

    /// A coordinate as ``JSONValue/writeNumber(_:to:)`` writes it and the parser reads it back.
    private static func number(_ d: Double) -> JSONValue {
        guard d.isFinite else { return .null }
        // The parser keeps integral values that fit 64 bits as integers, however written.
        return d.rounded() == d && d >= -9.223_372_036_854_775_808e18 && d < 9.223_372_036_854_775_808e18 ? .integer(Int64(d)) : .number(d)
    }

    /// The geometry as an Esri JSON object, with `spatialReference` when one is given.
    public static func encode(_ geometry: Geometry, spatialReference: SpatialReference? = nil) throws -> String {
        var out = ""
        try write(geometry, spatialReference: spatialReference, to: &out)
        return out
    }

    /// Appends the geometry as Esri JSON to `out`.
    public static func write(_ geometry: Geometry, spatialReference: SpatialReference? = nil, to out: inout String) throws {
        try out.appendWritten { try write(geometry, spatialReference: spatialReference, to: &$0) }
    }

    /// Appends the geometry as Esri JSON, UTF-8, to `out`.
    public static func write(_ geometry: Geometry, spatialReference: SpatialReference? = nil, to out: inout [UInt8]) throws {
        let layout = geometry.layout
        out.append(utf8: "{")
        switch geometry {
        case .point(let p):
            if let position = p.position {
                out.append(utf8: "\"x\":")
                JSONValue.writeNumber(position.x, to: &out)
                out.append(utf8: ",\"y\":")
                JSONValue.writeNumber(position.y, to: &out)
                if let z = position.z {
                    out.append(utf8: ",\"z\":")
                    JSONValue.writeNumber(z, to: &out)
                }
                if let m = position.m {
                    out.append(utf8: ",\"m\":")
                    JSONValue.writeNumber(m, to: &out)
                }
            } else {
                out.append(utf8: "\"x\":null,\"y\":null")
            }
        case .multiPoint(let m):
            writeFlags(layout, to: &out)
            out.append(utf8: "\"points\":")
            writePositions(m.points.compactMap(\.position), to: &out)
        case .lineString(let l):
            writeFlags(layout, to: &out)
            out.append(utf8: "\"paths\":[")
            if !l.positions.isEmpty { writePositions(l.positions, to: &out) }
            out.append(utf8: "]")
        case .multiLineString(let m):
            writeFlags(layout, to: &out)
            out.append(utf8: "\"paths\":[")
            for (i, l) in m.lineStrings.enumerated() {
                if i > 0 { out.append(utf8: ",") }
                writePositions(l.positions, to: &out)
            }
            out.append(utf8: "]")
        case .polygon(let p):
            writeFlags(layout, to: &out)
            out.append(utf8: "\"rings\":[")
            var separate = false
            writeRings(p, separate: &separate, to: &out)
            out.append(utf8: "]")
        case .multiPolygon(let m):
            writeFlags(layout, to: &out)
            out.append(utf8: "\"rings\":[")
            var separate = false
            for p in m.polygons { writeRings(p, separate: &separate, to: &out) }
            out.append(utf8: "]")
        case .geometryCollection:
            throw GeometryError(.unsupported, "a GeometryCollection has no Esri JSON representation")
        }
        if let spatialReference {
            out.append(utf8: ",\"spatialReference\":")
            writeSpatialReference(spatialReference, to: &out)
        }
        out.append(utf8: "}")
    }

    /// `{"wkid":4326}`, or `{"wkid":102100,"latestWkid":3857}` for Web Mercator as ArcGIS writes it.
    public static func writeSpatialReference(_ sr: SpatialReference, to out: inout String) {
        out.appendWritten { writeSpatialReference(sr, to: &$0) }
    }

    /// ``writeSpatialReference(_:to:)-(_,String)`` for a byte buffer.
    public static func writeSpatialReference(_ sr: SpatialReference, to out: inout [UInt8]) {
        if sr.isWebMercator {
            out.append(utf8: "{\"wkid\":102100,\"latestWkid\":3857}")
        } else {
            out.append(utf8: "{\"wkid\":")
            JSONValue.writeInteger(Int64(sr.wkid), to: &out)
            out.append(utf8: ",\"latestWkid\":")
            JSONValue.writeInteger(Int64(sr.wkid), to: &out)
            out.append(utf8: "}")
        }
    }

    /// The envelope as an Esri JSON envelope (`xmin`, `ymin`, `xmax`, `ymax`, and the Z and M ranges when it
    /// has them).
    public static func encodeEnvelope(_ e: Envelope, spatialReference: SpatialReference? = nil) -> String {
        var out = "{\"xmin\":"
        JSONValue.writeNumber(e.xmin, to: &out)
        out += ",\"ymin\":"
        JSONValue.writeNumber(e.ymin, to: &out)
        out += ",\"xmax\":"
        JSONValue.writeNumber(e.xmax, to: &out)
        out += ",\"ymax\":"
        JSONValue.writeNumber(e.ymax, to: &out)
        if let spatialReference {
            out += ",\"spatialReference\":"
            writeSpatialReference(spatialReference, to: &out)
        }
        out += "}"
        return out
    }

    private static func writeFlags(_ layout: CoordinateLayout, to out: inout [UInt8]) {
        if layout.hasZ { out.append(utf8: "\"hasZ\":true,") }
        if layout.hasM { out.append(utf8: "\"hasM\":true,") }
    }

    private static func writeRings(_ p: Polygon, separate: inout Bool, to out: inout [UInt8]) {
        for (i, ring) in p.rings.enumerated() {
            if separate { out.append(utf8: ",") }
            separate = true
            // Esri winding: exteriors clockwise, holes counter-clockwise.
            writePositions(RingOrientation.oriented(ring, clockwise: i == 0), to: &out)
        }
    }

    private static func writePositions(_ positions: [Position], to out: inout [UInt8]) {
        CoordinateText.write(positions, measures: true, to: &out)
    }
}
