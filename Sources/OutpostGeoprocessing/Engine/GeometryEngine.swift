import CGEOS
import OutpostCore

/// Overlay, buffer, validity and measures through GEOS's reentrant C API. One engine holds one
/// GEOS context and is used by one task at a time (GEOS contexts are not thread-safe); make one
/// per task. Geometries cross into GEOS and back through coordinate sequences (WKB only for
/// M values, which GEOS 3.11 drops). An empty result (two polygons that do not meet) is `nil`.
public final class GeometryEngine {
    /// Why GEOS could not do an operation, with its message.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private let handle: GEOSContextHandle_t
    private let messages = GEOSMessages()
    private let reader: OpaquePointer

    /// An engine with a GEOS context of its own.
    public init() {
        handle = GEOS_init_r()
        GEOSContext_setErrorMessageHandler_r(
            handle,
            { message, user in
                guard let message, let user else { return }
                Unmanaged<GEOSMessages>.fromOpaque(user).takeUnretainedValue().last = String(cString: message)
            }, Unmanaged.passUnretained(messages).toOpaque())
        reader = GEOSWKBReader_create_r(handle)
    }

    deinit {
        GEOSWKBReader_destroy_r(handle, reader)
        GEOS_finish_r(handle)
    }

    /// Frees a geometry `geos(_:)` made (for tests).
    func release(_ g: OpaquePointer) { GEOSGeom_destroy_r(handle, g) }

    /// The GEOS library's version (`3.11.1`).
    public static var geosVersion: String { String(cString: GEOSversion()).split(separator: "-").first.map(String.init) ?? "" }

    // MARK: - Operations

    /// The area within `distance` of the geometry (in its own units), arcs drawn with
    /// `quadrantSegments` segments per quarter circle.
    public func buffer(_ geometry: Geometry, distance: Double, quadrantSegments: Int = 8) throws -> Geometry? {
        try unary(geometry, "buffer") { GEOSBuffer_r(handle, $0, distance, Int32(quadrantSegments)) }
    }

    /// The part `a` and `b` share; nil when they do not meet.
    public func intersection(_ a: Geometry, _ b: Geometry) throws -> Geometry? {
        try binary(a, b, "intersection") { GEOSIntersection_r(handle, $0, $1) }
    }

    /// Everything in `a` or `b`.
    public func union(_ a: Geometry, _ b: Geometry) throws -> Geometry? {
        try binary(a, b, "union") { GEOSUnion_r(handle, $0, $1) }
    }

    /// The part of `a` outside `b`; nil when nothing is left.
    public func difference(_ a: Geometry, _ b: Geometry) throws -> Geometry? {
        try binary(a, b, "difference") { GEOSDifference_r(handle, $0, $1) }
    }

    /// All the geometries merged into one (dissolve): overlapping polygons become one polygon.
    public func unaryUnion(_ geometries: [Geometry]) throws -> Geometry? {
        guard !geometries.isEmpty else { return nil }
        let collection = try makeCollection(geometries)
        defer { GEOSGeom_destroy_r(handle, collection) }
        return try result(GEOSUnaryUnion_r(handle, collection), "union")
    }

    /// Lines joined end to end where exactly two meet (`GEOSLineMerge`): contour segments
    /// become contour lines.
    public func lineMerge(_ geometry: Geometry) throws -> Geometry? {
        try unary(geometry, "line merge") { GEOSLineMerge_r(handle, $0) }
    }

    /// Whether GEOS finds the geometry valid (OGC simple features), and if not why.
    public func validity(_ geometry: Geometry) throws -> (valid: Bool, reason: String?) {
        let g = try geos(geometry)
        defer { GEOSGeom_destroy_r(handle, g) }
        switch GEOSisValid_r(handle, g) {
        case 1: return (true, nil)
        case 0:
            guard let reason = GEOSisValidReason_r(handle, g) else { return (false, nil) }
            defer { GEOSFree_r(handle, reason) }
            return (false, String(cString: reason))
        default: throw failure("validity check")
        }
    }

    /// The geometry repaired (`GEOSMakeValid`): self-intersecting rings split, and so on.
    public func makeValid(_ geometry: Geometry) throws -> Geometry? {
        try unary(geometry, "repair") { GEOSMakeValid_r(handle, $0) }
    }

    /// Planar area in the square of the geometry's units.
    public func area(_ geometry: Geometry) throws -> Double {
        try measure(geometry, "area") { GEOSArea_r(handle, $0, $1) }
    }

    /// Planar length (perimeter for polygons) in the geometry's units.
    public func length(_ geometry: Geometry) throws -> Double {
        try measure(geometry, "length") { GEOSLength_r(handle, $0, $1) }
    }

    /// The least distance between `a` and `b`, in their units.
    public func distance(_ a: Geometry, _ b: Geometry) throws -> Double {
        let ga = try geos(a)
        defer { GEOSGeom_destroy_r(handle, ga) }
        let gb = try geos(b)
        defer { GEOSGeom_destroy_r(handle, gb) }
        var value = 0.0
        guard GEOSDistance_r(handle, ga, gb, &value) == 1 else { throw failure("distance") }
        return value
    }

    /// A spatial relation between two geometries (DE-9IM named predicates).
    public enum Predicate: Sendable {
        /// They meet; the first holds the second; the first lies in the second; they meet only at their
        /// boundaries; they share part of their interiors; they do not meet.
        case intersects, contains, within, touches, overlaps, disjoint
    }

    /// Whether `a` stands in relation `predicate` to `b`.
    public func test(_ a: Geometry, _ predicate: Predicate, _ b: Geometry) throws -> Bool {
        let ga = try geos(a)
        defer { GEOSGeom_destroy_r(handle, ga) }
        let gb = try geos(b)
        defer { GEOSGeom_destroy_r(handle, gb) }
        let answer: Int8
        switch predicate {
        case .intersects: answer = GEOSIntersects_r(handle, ga, gb)
        case .contains: answer = GEOSContains_r(handle, ga, gb)
        case .within: answer = GEOSWithin_r(handle, ga, gb)
        case .touches: answer = GEOSTouches_r(handle, ga, gb)
        case .overlaps: answer = GEOSOverlaps_r(handle, ga, gb)
        case .disjoint: answer = GEOSDisjoint_r(handle, ga, gb)
        }
        guard answer == 0 || answer == 1 else { throw failure("\(predicate) test") }
        return answer == 1
    }

    // MARK: - Crossing into GEOS and back

    /// A GEOS geometry built from the coordinates directly (no WKB in between); geometries with
    /// M values go through WKB, as GEOS 3.11 keeps no M.
    func geos(_ geometry: Geometry) throws -> OpaquePointer {
        guard !geometry.layout.hasM else { return try geosFromWKB(geometry) }
        guard let g = try build(geometry) else { throw failure("building a \(geometry.type) in GEOS") }
        return g
    }

    private func geosFromWKB(_ geometry: Geometry) throws -> OpaquePointer {
        let wkb = WKB.encode(geometry)
        guard let g = wkb.withUnsafeBufferPointer({ GEOSWKBReader_read_r(handle, reader, $0.baseAddress, $0.count) }) else {
            throw failure("reading a \(geometry.type) into GEOS")
        }
        return g
    }

    /// A coordinate sequence of `positions` (x, y and, with `hasZ`, z).
    private func sequence(_ positions: [Position], hasZ: Bool) -> OpaquePointer? {
        let stride = hasZ ? 3 : 2
        var buffer = [Double](repeating: 0, count: positions.count * stride)
        for (i, p) in positions.enumerated() {
            buffer[i * stride] = p.x
            buffer[i * stride + 1] = p.y
            if hasZ { buffer[i * stride + 2] = p.z ?? .nan }
        }
        return buffer.withUnsafeBufferPointer { GEOSCoordSeq_copyFromBuffer_r(handle, $0.baseAddress, UInt32(positions.count), hasZ ? 1 : 0, 0) }
    }

    private func build(_ geometry: Geometry) throws -> OpaquePointer? {
        let hasZ = geometry.layout.hasZ
        switch geometry {
        case .point(let p):
            guard let position = p.position else { return GEOSGeom_createEmptyPoint_r(handle) }
            // A 2-D point straight from its coordinates: no sequence, no buffer.
            if !hasZ { return GEOSGeom_createPointFromXY_r(handle, position.x, position.y) }
            return sequence([position], hasZ: hasZ).flatMap { GEOSGeom_createPoint_r(handle, $0) }
        case .lineString(let l):
            guard !l.positions.isEmpty else { return GEOSGeom_createEmptyLineString_r(handle) }
            return sequence(l.positions, hasZ: hasZ).flatMap { GEOSGeom_createLineString_r(handle, $0) }
        case .polygon(let p):
            return polygon(p.rings, hasZ: hasZ)
        case .multiPoint(let m):
            return try collection(GEOS_MULTIPOINT, m.points.map { .point($0) })
        case .multiLineString(let m):
            return try collection(GEOS_MULTILINESTRING, m.lineStrings.map { .lineString($0) })
        case .multiPolygon(let m):
            return try collection(GEOS_MULTIPOLYGON, m.polygons.map { .polygon($0) })
        case .geometryCollection(let c):
            return try collection(GEOS_GEOMETRYCOLLECTION, c.geometries)
        }
    }

    private func polygon(_ rings: [[Position]], hasZ: Bool) -> OpaquePointer? {
        guard let first = rings.first else { return GEOSGeom_createEmptyPolygon_r(handle) }
        guard let shell = sequence(first, hasZ: hasZ).flatMap({ GEOSGeom_createLinearRing_r(handle, $0) }) else { return nil }
        var holes: [OpaquePointer?] = []
        for ring in rings.dropFirst() {
            guard let hole = sequence(ring, hasZ: hasZ).flatMap({ GEOSGeom_createLinearRing_r(handle, $0) }) else {
                GEOSGeom_destroy_r(handle, shell)
                for h in holes { GEOSGeom_destroy_r(handle, h) }
                return nil
            }
            holes.append(hole)
        }
        // The polygon takes ownership of its rings.
        return holes.withUnsafeMutableBufferPointer { GEOSGeom_createPolygon_r(handle, shell, $0.baseAddress, UInt32($0.count)) }
    }

    private func collection(_ type: GEOSGeomTypes, _ parts: [Geometry]) throws -> OpaquePointer? {
        var built: [OpaquePointer?] = []
        for part in parts {
            guard let g = try build(part) else {
                for b in built { GEOSGeom_destroy_r(handle, b) }
                return nil
            }
            built.append(g)
        }
        return built.withUnsafeMutableBufferPointer { GEOSGeom_createCollection_r(handle, Int32(type.rawValue), $0.baseAddress, UInt32($0.count)) }
    }

    /// A GEOS result as a geometry value, read from its coordinate sequences; nil when empty.
    func geometry(_ g: OpaquePointer) throws -> Geometry? {
        if GEOSisEmpty_r(handle, g) == 1 { return nil }
        let hasZ = GEOSHasZ_r(handle, g) == 1
        do {
            return try value(g, hasZ: hasZ)
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(description: "GEOS gave a geometry Outpost cannot hold: \(error)")
        }
    }

    private func positions(_ g: OpaquePointer, hasZ: Bool) throws -> [Position] {
        guard let seq = GEOSGeom_getCoordSeq_r(handle, g) else { throw failure("reading coordinates") }
        var size: UInt32 = 0
        guard GEOSCoordSeq_getSize_r(handle, seq, &size) == 1 else { throw failure("reading coordinates") }
        let stride = hasZ ? 3 : 2
        var buffer = [Double](repeating: 0, count: Int(size) * stride)
        guard buffer.withUnsafeMutableBufferPointer({ GEOSCoordSeq_copyToBuffer_r(handle, seq, $0.baseAddress, hasZ ? 1 : 0, 0) }) == 1 else {
            throw failure("reading coordinates")
        }
        return (0..<Int(size)).map { i in
            Position(x: buffer[i * stride], y: buffer[i * stride + 1], z: hasZ ? buffer[i * stride + 2] : nil)
        }
    }

    private func value(_ g: OpaquePointer, hasZ: Bool) throws -> Geometry {
        let layout = CoordinateLayout(hasZ: hasZ, hasM: false)
        switch Int(GEOSGeomTypeId_r(handle, g)) {
        case Int(GEOS_POINT.rawValue):
            if GEOSisEmpty_r(handle, g) == 1 { return .point(Point(empty: layout)) }
            return .point(try Point(try positions(g, hasZ: hasZ)[0]))
        case Int(GEOS_LINESTRING.rawValue), Int(GEOS_LINEARRING.rawValue):
            return .lineString(try LineString(try positions(g, hasZ: hasZ), layout: layout))
        case Int(GEOS_POLYGON.rawValue):
            return .polygon(try polygonValue(g, hasZ: hasZ))
        default:
            let count = Int(GEOSGetNumGeometries_r(handle, g))
            let parts = try (0..<count).map { i -> Geometry in
                guard let part = GEOSGetGeometryN_r(handle, g, Int32(i)) else { throw failure("reading a part") }
                return try value(part, hasZ: hasZ)
            }
            switch Int(GEOSGeomTypeId_r(handle, g)) {
            case Int(GEOS_MULTIPOINT.rawValue):
                return .multiPoint(try MultiPoint(parts.compactMap { if case .point(let p) = $0 { p } else { nil } }, layout: layout))
            case Int(GEOS_MULTILINESTRING.rawValue):
                return .multiLineString(try MultiLineString(parts.compactMap { if case .lineString(let l) = $0 { l } else { nil } }, layout: layout))
            case Int(GEOS_MULTIPOLYGON.rawValue):
                return .multiPolygon(try MultiPolygon(parts.compactMap { if case .polygon(let p) = $0 { p } else { nil } }, layout: layout))
            default:
                return .geometryCollection(try GeometryCollection(parts, layout: layout))
            }
        }
    }

    private func polygonValue(_ g: OpaquePointer, hasZ: Bool) throws -> Polygon {
        let layout = CoordinateLayout(hasZ: hasZ, hasM: false)
        if GEOSisEmpty_r(handle, g) == 1 { return Polygon(empty: layout) }
        guard let shell = GEOSGetExteriorRing_r(handle, g) else { throw failure("reading a polygon") }
        var rings = [try positions(shell, hasZ: hasZ)]
        for i in 0..<GEOSGetNumInteriorRings_r(handle, g) {
            guard let hole = GEOSGetInteriorRingN_r(handle, g, i) else { throw failure("reading a polygon") }
            rings.append(try positions(hole, hasZ: hasZ))
        }
        return try Polygon(rings: rings, layout: layout)
    }

    private func makeCollection(_ geometries: [Geometry]) throws -> OpaquePointer {
        var parts: [OpaquePointer?] = []
        do {
            for g in geometries { parts.append(try geos(g)) }
        } catch {
            for p in parts { GEOSGeom_destroy_r(handle, p) }
            throw error
        }
        // The collection takes ownership of its parts.
        guard let collection = parts.withUnsafeMutableBufferPointer({ GEOSGeom_createCollection_r(handle, Int32(GEOS_GEOMETRYCOLLECTION.rawValue), $0.baseAddress, UInt32($0.count)) })
        else {
            for p in parts { GEOSGeom_destroy_r(handle, p) }
            throw failure("collecting \(geometries.count) geometries")
        }
        return collection
    }

    private func unary(_ geometry: Geometry, _ what: String, _ operation: (OpaquePointer) -> OpaquePointer?) throws -> Geometry? {
        let g = try geos(geometry)
        defer { GEOSGeom_destroy_r(handle, g) }
        return try result(operation(g), what)
    }

    private func binary(_ a: Geometry, _ b: Geometry, _ what: String, _ operation: (OpaquePointer, OpaquePointer) -> OpaquePointer?) throws -> Geometry? {
        let ga = try geos(a)
        defer { GEOSGeom_destroy_r(handle, ga) }
        let gb = try geos(b)
        defer { GEOSGeom_destroy_r(handle, gb) }
        return try result(operation(ga, gb), what)
    }

    private func result(_ g: OpaquePointer?, _ what: String) throws -> Geometry? {
        guard let g else { throw failure(what) }
        defer { GEOSGeom_destroy_r(handle, g) }
        return try geometry(g)
    }

    private func measure(_ geometry: Geometry, _ what: String, _ operation: (OpaquePointer, UnsafeMutablePointer<Double>) -> Int32) throws -> Double {
        let g = try geos(geometry)
        defer { GEOSGeom_destroy_r(handle, g) }
        var value = 0.0
        guard operation(g, &value) == 1 else { throw failure(what) }
        return value
    }

    private func failure(_ what: String) -> Failure {
        let message = messages.last
        messages.last = ""
        return Failure(description: message.isEmpty ? "GEOS could not compute the \(what)" : "GEOS could not compute the \(what): \(message)")
    }
}

/// The last message GEOS reported through a context's handler.
private final class GEOSMessages {
    var last = ""
}
