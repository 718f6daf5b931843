import CPROJ
import Foundation
import OutpostCore

/// Esri Shapefile (the 1998 technical description): `.shp`, `.shx`, `.dbf` (dBASE III with
/// UTF-8 text, said in `.cpg`) and `.prj` (the system as ESRI WKT, from PROJ). One geometry
/// type per file: points, multipoints, polylines or polygons (outer rings clockwise, holes
/// counter-clockwise); a feature without a fitting geometry is a null shape. Field names are cut
/// to dBASE's 10 characters and kept apart with a number where that makes two alike.
public enum Shapefile {
    /// The files of one layer, by extension.
    public static func files(_ set: GPFeatureSet) throws -> [(ext: String, data: Data)] {
        let type: Int32
        switch set.geometryType {
        case "esriGeometryPoint": type = 1
        case "esriGeometryMultipoint": type = 8
        case "esriGeometryPolyline": type = 3
        case "esriGeometryPolygon": type = 5
        default: throw GPValueError("a shapefile needs points, multipoints, polylines or polygons (not \(set.geometryType ?? "no geometry"))")
        }
        var shp = Data(), shx = Data()
        var records: [Data] = []
        var box = Envelope.Builder()
        for feature in set.features {
            let pieces = feature.geometry.map { Self.parts($0, type: type) } ?? []
            var content = Data()
            if pieces.isEmpty || pieces.allSatisfy(\.isEmpty) {
                le32(0, &content)
            } else {
                le32(type, &content)
                let all = pieces.flatMap { $0 }
                var b = Envelope.Builder()
                for p in all { b.add(Envelope(xmin: p.x, ymin: p.y, xmax: p.x, ymax: p.y)) }
                let e = b.envelope!
                box.add(e)
                if type == 1 {
                    leDouble(all[0].x, &content)
                    leDouble(all[0].y, &content)
                } else {
                    for v in [e.xmin, e.ymin, e.xmax, e.ymax] { leDouble(v, &content) }
                    if type != 8 { le32(Int32(pieces.count), &content) }
                    le32(Int32(all.count), &content)
                    if type != 8 {
                        var start: Int32 = 0
                        for part in pieces {
                            le32(start, &content)
                            start += Int32(part.count)
                        }
                    }
                    for p in all {
                        leDouble(p.x, &content)
                        leDouble(p.y, &content)
                    }
                }
            }
            records.append(content)
        }
        let extent = box.envelope ?? Envelope(xmin: 0, ymin: 0, xmax: 0, ymax: 0)
        header(&shp, length: 50 + records.reduce(0) { $0 + 4 + $1.count / 2 }, type: type, extent: extent)
        header(&shx, length: 50 + 4 * records.count, type: type, extent: extent)
        for (i, content) in records.enumerated() {
            be32(Int32(shp.count / 2), &shx)
            be32(Int32(content.count / 2), &shx)
            be32(Int32(i + 1), &shp)
            be32(Int32(content.count / 2), &shp)
            shp.append(content)
        }
        var out: [(String, Data)] = [("shp", shp), ("shx", shx), ("dbf", dbf(set)), ("cpg", Data("UTF-8".utf8))]
        if let prj = esriWKT(set.spatialReference ?? .wgs84) { out.append(("prj", Data(prj.utf8))) }
        return out
    }

    /// Parts of a geometry as the shape type wants them (rings oriented for polygons).
    static func parts(_ g: Geometry, type: Int32) -> [[Position]] {
        switch (type, g) {
        case (1, .point(let p)): return p.position.map { [[$0]] } ?? []
        case (8, .point(let p)): return p.position.map { [[$0]] } ?? []
        case (8, .multiPoint(let m)): return [m.points.compactMap(\.position)]
        case (3, .lineString(let l)): return [l.positions]
        case (3, .multiLineString(let m)): return m.lineStrings.map(\.positions)
        case (5, .polygon(let p)): return rings(p)
        case (5, .multiPolygon(let m)): return m.polygons.flatMap(rings)
        default: return []
        }
    }

    /// Outer ring clockwise, holes counter-clockwise.
    static func rings(_ p: Polygon) -> [[Position]] {
        p.rings.enumerated().map { i, ring in
            var area = 0.0
            for (a, b) in zip(ring, ring.dropFirst()) { area += a.x * b.y - b.x * a.y }
            let clockwise = area < 0
            return (i == 0) == clockwise ? ring : ring.reversed()
        }
    }

    static func header(_ d: inout Data, length words: Int, type: Int32, extent: Envelope) {
        be32(9994, &d)
        for _ in 0..<5 { be32(0, &d) }
        be32(Int32(words), &d)
        le32(1000, &d)
        le32(type, &d)
        for v in [extent.xmin, extent.ymin, extent.xmax, extent.ymax, 0, 0, 0, 0] { leDouble(v, &d) }
    }

    /// dBASE III attributes: text as C (UTF-8, up to 254 bytes), whole numbers as N(18),
    /// other numbers as N(24,10), dates as D.
    static func dbf(_ set: GPFeatureSet) -> Data {
        struct Column {
            var source: String
            var name: String
            var type: UInt8
            var width: Int
            var decimals: Int
        }
        var used = Set<String>()
        var columns: [Column] = []
        for field in set.fields where !["esriFieldTypeGeometry", "esriFieldTypeBlob"].contains(field.type) {
            var name = String(field.name.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }.prefix(10))
            if name.isEmpty { name = "FIELD" }
            var n = 1
            while used.contains(name.uppercased()) {
                let suffix = String(n)
                name = String(name.prefix(10 - suffix.count)) + suffix
                n += 1
            }
            used.insert(name.uppercased())
            switch field.type {
            case "esriFieldTypeOID", "esriFieldTypeInteger", "esriFieldTypeSmallInteger", "esriFieldTypeBigInteger":
                columns.append(Column(source: field.name, name: name, type: UInt8(ascii: "N"), width: 18, decimals: 0))
            case "esriFieldTypeDouble", "esriFieldTypeSingle":
                columns.append(Column(source: field.name, name: name, type: UInt8(ascii: "N"), width: 24, decimals: 10))
            case "esriFieldTypeDate":
                columns.append(Column(source: field.name, name: name, type: UInt8(ascii: "D"), width: 8, decimals: 0))
            default:
                let longest = set.features.map { text($0.attributes[field.name] ?? .null).utf8.count }.max() ?? 1
                columns.append(Column(source: field.name, name: name, type: UInt8(ascii: "C"), width: min(254, max(1, longest)), decimals: 0))
            }
        }
        var d = Data([0x03, 126, 1, 1])
        le32(Int32(set.features.count), &d)
        le16(32 + 32 * columns.count + 1, &d)
        le16(1 + columns.reduce(0) { $0 + $1.width }, &d)
        d.append(Data(count: 20))
        for c in columns {
            var name = Data(c.name.utf8)
            name.append(Data(count: 11 - name.count))
            d.append(name)
            d.append(c.type)
            d.append(Data(count: 4))
            d.append(UInt8(c.width))
            d.append(UInt8(c.decimals))
            d.append(Data(count: 14))
        }
        d.append(0x0D)
        for feature in set.features {
            d.append(UInt8(ascii: " "))
            for c in columns {
                let value = feature.attributes[c.source] ?? .null
                var cell: String
                switch (c.type, value) {
                case (_, .null): cell = ""
                case (UInt8(ascii: "D"), let v):
                    let ms = v.doubleValue ?? 0
                    let f = DateFormatter()
                    f.dateFormat = "yyyyMMdd"
                    f.timeZone = TimeZone(identifier: "UTC")
                    cell = f.string(from: Date(timeIntervalSince1970: ms / 1000))
                case (UInt8(ascii: "N"), let v):
                    if c.decimals == 0, let i = v.integerValue { cell = String(i) } else if let x = v.doubleValue { cell = String(format: "%.\(c.decimals)f", x) } else { cell = "" }
                    cell = String(repeating: " ", count: max(0, c.width - cell.count)) + cell
                default:
                    cell = text(value)
                }
                var bytes = Array(cell.utf8)
                if bytes.count > c.width {
                    // Cut on a character boundary.
                    bytes = Array(bytes.prefix(c.width))
                    while !bytes.isEmpty, String(bytes: bytes, encoding: .utf8) == nil { bytes.removeLast() }
                }
                d.append(contentsOf: bytes)
                d.append(Data(repeating: UInt8(ascii: " "), count: c.width - bytes.count))
            }
        }
        d.append(0x1A)
        return d
    }

    static func text(_ v: JSONValue) -> String {
        switch v {
        case .null: ""
        case .string(let s): s
        default: v.jsonString
        }
    }

    /// The system as ESRI WKT (what `.prj` files hold), from PROJ.
    static func esriWKT(_ sr: SpatialReference) -> String? {
        guard let context = CoordinateTransform.makeContext() else { return nil }
        defer { proj_context_destroy(context) }
        guard let crs = proj_create(context, "EPSG:\(sr.wkid)") else { return nil }
        defer { proj_destroy(crs) }
        guard let text = proj_as_wkt(context, crs, PJ_WKT1_ESRI, nil) else { return nil }
        return String(cString: text)
    }

    static func le16(_ v: Int, _ d: inout Data) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { d.append(contentsOf: $0) } }
    static func le32(_ v: Int32, _ d: inout Data) { withUnsafeBytes(of: v.littleEndian) { d.append(contentsOf: $0) } }
    static func be32(_ v: Int32, _ d: inout Data) { withUnsafeBytes(of: v.bigEndian) { d.append(contentsOf: $0) } }
    static func leDouble(_ v: Double, _ d: inout Data) { withUnsafeBytes(of: v.bitPattern.littleEndian) { d.append(contentsOf: $0) } }
}
