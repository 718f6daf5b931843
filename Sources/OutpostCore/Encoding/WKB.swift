import Foundation

/// ISO Well-Known Binary (OGC 06-103r4 §8.2, ISO 13249-3): the geometry body of GeoPackage blobs.
///
/// Type codes are ISO: Z adds 1000, M 2000, ZM 3000 (PointZ = 1001). Both byte orders are read;
/// the writer emits little-endian unless asked otherwise. `POINT EMPTY` is a point with NaN
/// coordinates (GeoPackage §2.1.3.1.1). Counts are checked against the bytes left before any
/// allocation, so a hostile count fails fast with ``GeometryError/Code/invalidCount``.
///
/// ```swift
/// let bytes = WKB.encode(.point(try Point(x: 1, y: 2)))
/// let back = try WKB.decode(bytes)
/// ```
public enum WKB {
    /// Deepest nesting of collections the decoder accepts.
    public static let maxNesting = 32

    /// Decodes one geometry; trailing bytes are an error.
    /// - Throws: ``GeometryError`` naming what is wrong and the byte offset.
    public static func decode(_ bytes: [UInt8]) throws -> Geometry {
        try bytes.withUnsafeBytes { try decode(buffer: $0) }
    }

    /// Decodes ISO (or extended) WKB bytes into a geometry.
    public static func decode(_ data: Data) throws -> Geometry {
        try data.withUnsafeBytes { try decode(buffer: $0) }
    }

    static func decode(buffer: UnsafeRawBufferPointer, from start: Int = 0) throws -> Geometry {
        var reader = ByteReader(buffer, offset: start)
        let geometry = try readGeometry(&reader, depth: 0, expected: nil)
        guard reader.remaining == 0 else {
            throw GeometryError(
                .invalidEncoding, "\(reader.remaining) unexpected bytes after the geometry", offset: reader.offset)
        }
        return geometry
    }

    /// Encodes `geometry` as ISO WKB.
    public static func encode(_ geometry: Geometry, littleEndian: Bool = true) -> [UInt8] {
        var writer = ByteWriter(capacity: encodedSize(geometry), littleEndian: littleEndian)
        write(geometry, to: &writer)
        return writer.bytes
    }

    /// Exact size of the WKB encoding of `geometry`, in bytes.
    public static func encodedSize(_ geometry: Geometry) -> Int {
        let d = geometry.layout.dimension * 8
        switch geometry {
        case .point: return 5 + d
        case .lineString(let l): return 9 + l.positions.count * d
        case .polygon(let p): return 9 + p.rings.reduce(0) { $0 + 4 + $1.count * d }
        case .multiPoint(let m): return 9 + m.points.count * (5 + d)
        case .multiLineString(let m): return 9 + m.lineStrings.reduce(0) { $0 + 9 + $1.positions.count * d }
        case .multiPolygon(let m):
            return 9 + m.polygons.reduce(0) { $0 + 9 + $1.rings.reduce(0) { $0 + 4 + $1.count * d } }
        case .geometryCollection(let c): return 9 + c.geometries.reduce(0) { $0 + encodedSize($1) }
        }
    }

    // MARK: - Reading

    private static func readHeader(_ r: inout ByteReader) throws -> (GeometryType, CoordinateLayout) {
        let start = r.offset
        let order = try r.readByte()
        guard order <= 1 else {
            throw GeometryError(.invalidEncoding, "byte order marker \(order) is neither 0 nor 1", offset: start)
        }
        r.littleEndian = order == 1
        let code = try r.readUInt32()
        if code & 0xE000_0000 != 0 {
            throw GeometryError(
                .unsupported, "EWKB type flags (0x\(String(code, radix: 16))) are not ISO WKB", offset: start + 1)
        }
        let family = code / 1000
        let base = code % 1000
        guard family <= 3 else {
            throw GeometryError(.invalidType, "WKB type code \(code) is not an ISO geometry type", offset: start + 1)
        }
        guard let type = GeometryType(rawValue: base) else {
            if (8...17).contains(base) {
                throw GeometryError(
                    .unsupported,
                    "curve and surface geometries (WKB type \(code)) are not supported; convert them to linear geometries",
                    offset: start + 1)
            }
            throw GeometryError(.invalidType, "WKB type code \(code) is not a known geometry type", offset: start + 1)
        }
        let layout: CoordinateLayout = [.xy, .xyz, .xym, .xyzm][Int(family)]
        return (type, layout)
    }

    private static func readPosition(_ r: inout ByteReader, _ layout: CoordinateLayout) throws -> Position {
        let x = try r.readDouble()
        let y = try r.readDouble()
        let z = layout.hasZ ? try r.readDouble() : nil
        let m = layout.hasM ? try r.readDouble() : nil
        return Position(x: x, y: y, z: z, m: m)
    }

    /// Reads a count and checks that `count × minimumBytes` fits in what is left.
    private static func readCount(_ r: inout ByteReader, minimumBytes: Int, _ what: String) throws -> Int {
        let at = r.offset
        let count = Int(try r.readUInt32())
        guard count <= r.remaining / max(minimumBytes, 1) else {
            throw GeometryError(
                .invalidCount, "\(what) count \(count) exceeds what the remaining \(r.remaining) bytes can hold",
                offset: at)
        }
        return count
    }

    private static func readPositions(_ r: inout ByteReader, _ layout: CoordinateLayout, _ what: String) throws
        -> [Position]
    {
        let count = try readCount(&r, minimumBytes: layout.dimension * 8, what)
        var positions: [Position] = []
        positions.reserveCapacity(count)
        for _ in 0..<count { positions.append(try readPosition(&r, layout)) }
        return positions
    }

    private static func readGeometry(_ r: inout ByteReader, depth: Int, expected: CoordinateLayout?) throws
        -> Geometry
    {
        guard depth <= maxNesting else {
            throw GeometryError(.nestingTooDeep, "collections nested deeper than \(maxNesting) levels", offset: r.offset)
        }
        let start = r.offset
        let (type, layout) = try readHeader(&r)
        if let expected, expected != layout {
            throw GeometryError(
                .mixedLayout, "a \(layout.rawValue) part inside a \(expected.rawValue) collection", offset: start)
        }
        do {
            switch type {
            case .point:
                let p = try readPosition(&r, layout)
                if p.x.isNaN && p.y.isNaN { return .point(Point(empty: layout)) }
                return .point(try Point(p))
            case .lineString:
                return .lineString(try LineString(try readPositions(&r, layout, "line string position"), layout: layout))
            case .polygon:
                return .polygon(try readPolygonBody(&r, layout))
            case .multiPoint, .multiLineString, .multiPolygon, .geometryCollection:
                let count = try readCount(&r, minimumBytes: 5 + (type == .multiPoint ? 16 : 4), "part")
                var parts: [Geometry] = []
                parts.reserveCapacity(count)
                for _ in 0..<count {
                    let part = try readGeometry(&r, depth: depth + 1, expected: layout)
                    if let partType = type.partType, part.type != partType {
                        throw GeometryError(
                            .invalidType, "a \(part.type.geoJSONName) inside a \(type.geoJSONName)", offset: start)
                    }
                    parts.append(part)
                }
                return try assemble(type, parts, layout)
            }
        } catch var error as GeometryError {
            if error.offset == nil { error.offset = start }
            throw error
        }
    }

    private static func readPolygonBody(_ r: inout ByteReader, _ layout: CoordinateLayout) throws -> Polygon {
        let ringCount = try readCount(&r, minimumBytes: 4, "ring")
        var rings: [[Position]] = []
        rings.reserveCapacity(ringCount)
        for _ in 0..<ringCount { rings.append(try readPositions(&r, layout, "ring position")) }
        return try Polygon(rings: rings, layout: layout)
    }

    static func assemble(_ type: GeometryType, _ parts: [Geometry], _ layout: CoordinateLayout) throws -> Geometry {
        switch type {
        case .multiPoint:
            return .multiPoint(try MultiPoint(parts.map { if case .point(let p) = $0 { p } else { Point(empty: layout) } }, layout: layout))
        case .multiLineString:
            return .multiLineString(
                try MultiLineString(parts.compactMap { if case .lineString(let l) = $0 { l } else { nil } }, layout: layout))
        case .multiPolygon:
            return .multiPolygon(
                try MultiPolygon(parts.compactMap { if case .polygon(let p) = $0 { p } else { nil } }, layout: layout))
        default:
            return .geometryCollection(try GeometryCollection(parts, layout: layout))
        }
    }

    // MARK: - Writing

    static func write(_ geometry: Geometry, to w: inout ByteWriter) {
        let layout = geometry.layout
        w.writeByte(w.littleEndian ? 1 : 0)
        let family: UInt32 = layout.hasZ ? (layout.hasM ? 3000 : 1000) : (layout.hasM ? 2000 : 0)
        w.writeUInt32(geometry.type.rawValue + family)
        switch geometry {
        case .point(let p):
            if let position = p.position {
                writePosition(position, layout, &w)
            } else {
                for _ in 0..<layout.dimension { w.writeDouble(Double.nan) }
            }
        case .lineString(let l):
            writePositions(l.positions, layout, &w)
        case .polygon(let p):
            w.writeUInt32(UInt32(p.rings.count))
            for ring in p.rings { writePositions(ring, layout, &w) }
        case .multiPoint(let m):
            w.writeUInt32(UInt32(m.points.count))
            for p in m.points { write(.point(p), to: &w) }
        case .multiLineString(let m):
            w.writeUInt32(UInt32(m.lineStrings.count))
            for l in m.lineStrings { write(.lineString(l), to: &w) }
        case .multiPolygon(let m):
            w.writeUInt32(UInt32(m.polygons.count))
            for p in m.polygons { write(.polygon(p), to: &w) }
        case .geometryCollection(let c):
            w.writeUInt32(UInt32(c.geometries.count))
            for g in c.geometries { write(g, to: &w) }
        }
    }

    private static func writePositions(_ positions: [Position], _ layout: CoordinateLayout, _ w: inout ByteWriter) {
        w.writeUInt32(UInt32(positions.count))
        for p in positions { writePosition(p, layout, &w) }
    }

    private static func writePosition(_ p: Position, _ layout: CoordinateLayout, _ w: inout ByteWriter) {
        w.writeDouble(p.x)
        w.writeDouble(p.y)
        if layout.hasZ { w.writeDouble(p.z ?? 0) }
        if layout.hasM { w.writeDouble(p.m ?? 0) }
    }
}
