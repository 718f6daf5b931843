import CGEOS
import OutpostCore

/// Overlay, buffer, validity and measures through GEOS's reentrant C API. One engine holds one
/// GEOS context and is used by one task at a time (GEOS contexts are not thread-safe); make one
/// per task. Geometries cross into GEOS and back as WKB. An empty result (two polygons that do
/// not meet) is `nil`.
public final class GeometryEngine {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private let handle: GEOSContextHandle_t
    private let messages = GEOSMessages()
    private let reader: OpaquePointer
    private let writer: OpaquePointer

    public init() {
        handle = GEOS_init_r()
        GEOSContext_setErrorMessageHandler_r(
            handle,
            { message, user in
                guard let message, let user else { return }
                Unmanaged<GEOSMessages>.fromOpaque(user).takeUnretainedValue().last = String(cString: message)
            }, Unmanaged.passUnretained(messages).toOpaque())
        reader = GEOSWKBReader_create_r(handle)
        writer = GEOSWKBWriter_create_r(handle)
    }

    deinit {
        GEOSWKBReader_destroy_r(handle, reader)
        GEOSWKBWriter_destroy_r(handle, writer)
        GEOS_finish_r(handle)
    }

    /// The GEOS library's version (`3.11.1`).
    public static var geosVersion: String { String(cString: GEOSversion()).split(separator: "-").first.map(String.init) ?? "" }

    // MARK: - Operations

    /// The area within `distance` of the geometry (in its own units), arcs drawn with
    /// `quadrantSegments` segments per quarter circle.
    public func buffer(_ geometry: Geometry, distance: Double, quadrantSegments: Int = 8) throws -> Geometry? {
        try unary(geometry, "buffer") { GEOSBuffer_r(handle, $0, distance, Int32(quadrantSegments)) }
    }

    public func intersection(_ a: Geometry, _ b: Geometry) throws -> Geometry? {
        try binary(a, b, "intersection") { GEOSIntersection_r(handle, $0, $1) }
    }

    public func union(_ a: Geometry, _ b: Geometry) throws -> Geometry? {
        try binary(a, b, "union") { GEOSUnion_r(handle, $0, $1) }
    }

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

    public func distance(_ a: Geometry, _ b: Geometry) throws -> Double {
        let ga = try geos(a)
        defer { GEOSGeom_destroy_r(handle, ga) }
        let gb = try geos(b)
        defer { GEOSGeom_destroy_r(handle, gb) }
        var value = 0.0
        guard GEOSDistance_r(handle, ga, gb, &value) == 1 else { throw failure("distance") }
        return value
    }

    public enum Predicate: Sendable {
        case intersects, contains, within, touches, overlaps, disjoint
    }

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

    func geos(_ geometry: Geometry) throws -> OpaquePointer {
        let wkb = WKB.encode(geometry)
        guard let g = wkb.withUnsafeBufferPointer({ GEOSWKBReader_read_r(handle, reader, $0.baseAddress, $0.count) }) else {
            throw failure("reading a \(geometry.type) into GEOS")
        }
        return g
    }

    func geometry(_ g: OpaquePointer) throws -> Geometry? {
        if GEOSisEmpty_r(handle, g) == 1 { return nil }
        let dimension: Int32 = GEOSHasZ_r(handle, g) == 1 ? 3 : 2
        GEOSWKBWriter_setOutputDimension_r(handle, writer, dimension)
        var size = 0
        guard let bytes = GEOSWKBWriter_write_r(handle, writer, g, &size) else { throw failure("writing a GEOS result") }
        defer { GEOSFree_r(handle, bytes) }
        do {
            return try WKB.decode(Array(UnsafeBufferPointer(start: bytes, count: size)))
        } catch {
            throw Failure(description: "GEOS gave a geometry Outpost cannot hold: \(error)")
        }
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
