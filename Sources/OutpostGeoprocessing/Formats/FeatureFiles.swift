import CZlib
import Foundation
import OutpostCore

/// Writing feature sets to files others read: GeoJSON, CSV with WKT, and ZIP archives.
public enum FeatureFiles {
    /// A feature set as a GeoJSON FeatureCollection in WGS 84 (RFC 7946).
    public static func geoJSON(_ set: GPFeatureSet) throws -> Data {
        let wgs84 = try set.projected(to: .wgs84)
        var out = "{\"type\":\"FeatureCollection\",\"features\":["
        for (i, feature) in wgs84.features.enumerated() {
            if i > 0 { out += "," }
            out += "{\"type\":\"Feature\",\"geometry\":"
            if let g = feature.geometry { GeoJSON.write(g, to: &out) } else { out += "null" }
            out += ",\"properties\":"
            JSONValue.object(feature.attributes).write(to: &out)
            out += "}"
        }
        out += "]}"
        return Data(out.utf8)
    }

    /// A feature set as CSV (RFC 4180, UTF-8): its fields, then the geometry as WKT in a `WKT`
    /// column (GDAL's CSV driver reads it as the geometry), coordinates as they are.
    public static func csv(_ set: GPFeatureSet) -> Data {
        let names = set.fields.map(\.name)
        var out = (names + ["WKT"]).map { cell(.string($0)) }.joined(separator: ",") + "\r\n"
        for feature in set.features {
            var cells = names.map { cell(feature.attributes[$0] ?? .null) }
            cells.append(cell(.string(feature.geometry.map(wkt) ?? "")))
            out += cells.joined(separator: ",") + "\r\n"
        }
        return Data(out.utf8)
    }

    /// One CSV cell: text quoted when it holds a comma, quote or line break.
    public static func cell(_ value: JSONValue) -> String {
        let text: String
        switch value {
        case .null: return ""
        case .string(let s): text = s
        default: text = value.jsonString
        }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Well-known text (OGC simple features), with Z when the geometry has it.
    public static func wkt(_ g: Geometry) -> String {
        func position(_ p: Position) -> String {
            var s = "\(number(p.x)) \(number(p.y))"
            if let z = p.z { s += " \(number(z))" }
            return s
        }
        func list(_ ps: [Position]) -> String { "(" + ps.map(position).joined(separator: ", ") + ")" }
        func rings(_ p: Polygon) -> String { "(" + p.rings.map(list).joined(separator: ", ") + ")" }
        let z = g.layout.hasZ ? " Z" : ""
        switch g {
        case .point(let p): return p.position.map { "POINT\(z) (\(position($0)))" } ?? "POINT EMPTY"
        case .lineString(let l): return l.positions.isEmpty ? "LINESTRING EMPTY" : "LINESTRING\(z) " + list(l.positions)
        case .polygon(let p): return p.rings.isEmpty ? "POLYGON EMPTY" : "POLYGON\(z) " + rings(p)
        case .multiPoint(let m): return "MULTIPOINT\(z) (" + m.points.compactMap(\.position).map { "(\(position($0)))" }.joined(separator: ", ") + ")"
        case .multiLineString(let m): return "MULTILINESTRING\(z) (" + m.lineStrings.map { list($0.positions) }.joined(separator: ", ") + ")"
        case .multiPolygon(let m): return "MULTIPOLYGON\(z) (" + m.polygons.map(rings).joined(separator: ", ") + ")"
        case .geometryCollection(let c): return "GEOMETRYCOLLECTION (" + c.geometries.map(wkt).joined(separator: ", ") + ")"
        }
    }

    static func number(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : "\(d)" }

    /// Files into one ZIP archive (stored, CRC-32 checked; names as given, UTF-8).
    public static func zip(_ files: [(name: String, data: Data)], to url: URL) throws {
        var out = Data(), central = Data()
        func u16(_ v: Int, _ d: inout Data) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { d.append(contentsOf: $0) } }
        func u32(_ v: UInt32, _ d: inout Data) { withUnsafeBytes(of: v.littleEndian) { d.append(contentsOf: $0) } }
        guard files.count < 65_535, files.reduce(0, { $0 + $1.data.count }) < Int(UInt32.max) - 1 << 20 else {
            throw GPValueError("the archive would need ZIP64; extract fewer or smaller layers")
        }
        for file in files {
            let name = Data(file.name.utf8)
            let crc = file.data.withUnsafeBytes { UInt32(crc32(0, $0.bindMemory(to: Bytef.self).baseAddress, uInt($0.count))) }
            let offset = UInt32(out.count)
            // Local header: stored (method 0), UTF-8 names (flag bit 11).
            u32(0x0403_4b50, &out); u16(20, &out); u16(0x0800, &out); u16(0, &out); u16(0, &out); u16(0x21, &out)
            u32(crc, &out); u32(UInt32(file.data.count), &out); u32(UInt32(file.data.count), &out); u16(name.count, &out); u16(0, &out)
            out.append(name)
            out.append(file.data)
            u32(0x0201_4b50, &central); u16(20, &central); u16(20, &central); u16(0x0800, &central); u16(0, &central); u16(0, &central); u16(0x21, &central)
            u32(crc, &central); u32(UInt32(file.data.count), &central); u32(UInt32(file.data.count), &central); u16(name.count, &central)
            u16(0, &central); u16(0, &central); u16(0, &central); u16(0, &central); u32(0, &central); u32(offset, &central)
            central.append(name)
        }
        let start = UInt32(out.count)
        out.append(central)
        u32(0x0605_4b50, &out); u16(0, &out); u16(0, &out); u16(files.count, &out); u16(files.count, &out)
        u32(UInt32(central.count), &out); u32(start, &out); u16(0, &out)
        try out.write(to: url, options: .atomic)
    }
}
