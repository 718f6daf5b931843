import Foundation

/// GeoPackage binary geometry (GeoPackage 1.3 §2.1.3, "StandardGeoPackageBinary"): a header with
/// magic `GP`, version, flags, srs id and an optional envelope, followed by ISO WKB.
///
/// Flags (bit 7→0): `R R X Y E E E B`; X = extended (unsupported), Y = empty, E = envelope kind
/// (0 none, 1 XY, 2 XYZ, 3 XYM, 4 XYZM), B = byte order of the header (1 little-endian).
/// The encoder follows GDAL's conventions so blobs stay byte-identical across tools: no envelope
/// for points, XYZ envelopes for geometries with Z, XY otherwise; empty geometries set Y with E = 0.
public enum GeoPackageBinary {
    /// The envelope stored in a header (flag bits E).
    public enum EnvelopeKind: UInt8, Sendable, CaseIterable {
        /// No envelope, or an envelope of X and Y, of X, Y and Z, of X, Y and M, or of all four (flag values
        /// 0–4).
        case none = 0, xy = 1, xyz = 2, xym = 3, xyzm = 4

        /// Number of doubles the envelope takes.
        public var doubleCount: Int { [0, 4, 6, 6, 8][Int(rawValue)] }
    }

    /// A decoded header.
    public struct Header: Hashable, Sendable {
        /// The format version byte (0 for version 1).
        public var version: UInt8
        /// The spatial reference system id (`gpkg_spatial_ref_sys.srs_id`).
        public var srsID: Int32
        /// Which envelope the header carries.
        public var envelopeKind: EnvelopeKind
        /// The envelope, when the header carries one.
        public var envelope: Envelope?
        /// Whether the empty-geometry flag is set.
        public var isEmpty: Bool
        /// Whether the header's numbers are little-endian.
        public var littleEndian: Bool
        /// Header length in bytes: where the WKB starts.
        public var size: Int
    }

    /// A decoded blob.
    public struct Decoded: Hashable, Sendable {
        /// The geometry decoded from the blob's WKB.
        public var geometry: Geometry
        /// The blob's header.
        public var header: Header
        /// The spatial reference system id of the header.
        public var srsID: Int32 { header.srsID }
    }

    /// Decodes a blob: its header and its geometry.
    public static func decode(_ bytes: [UInt8]) throws -> Decoded {
        try bytes.withUnsafeBytes { try decode(buffer: $0) }
    }

    /// Decodes a blob: its header and its geometry.
    public static func decode(_ data: Data) throws -> Decoded {
        try data.withUnsafeBytes { try decode(buffer: $0) }
    }

    /// Decodes a blob borrowed from elsewhere (an SQLite column) without copying it first.
    public static func decode(buffer: UnsafeRawBufferPointer) throws -> Decoded {
        let header = try decodeHeader(buffer: buffer)
        let geometry = try WKB.decode(buffer: buffer, from: header.size)
        return Decoded(geometry: geometry, header: header)
    }

    /// Decodes only the header of a blob (to read its envelope or SRS id without decoding the geometry).
    public static func decodeHeader(_ bytes: [UInt8]) throws -> Header {
        try bytes.withUnsafeBytes { try decodeHeader(buffer: $0) }
    }

    /// Decodes only the header of a blob borrowed from elsewhere, without copying it.
    public static func decodeHeader(buffer: UnsafeRawBufferPointer) throws -> Header {
        var r = ByteReader(buffer)
        try r.require(8, "the GeoPackage binary header")
        let magic0 = try r.readByte(), magic1 = try r.readByte()
        guard magic0 == 0x47, magic1 == 0x50 else {
            throw GeometryError(.invalidEncoding, "not GeoPackage binary: the blob does not start with 'GP'", offset: 0)
        }
        let version = try r.readByte()
        guard version == 0 else {
            throw GeometryError(.unsupported, "GeoPackage binary version \(version) is not supported (expected 0)", offset: 2)
        }
        let flags = try r.readByte()
        if flags & 0b0010_0000 != 0 {
            throw GeometryError(
                .unsupported, "ExtendedGeoPackageBinary (flag X) is not supported; it was removed from GeoPackage",
                offset: 3)
        }
        r.littleEndian = flags & 1 == 1
        let isEmpty = flags & 0b0001_0000 != 0
        guard let kind = EnvelopeKind(rawValue: (flags >> 1) & 0b111) else {
            throw GeometryError(.invalidEncoding, "envelope indicator \((flags >> 1) & 0b111) is invalid (5-7)", offset: 3)
        }
        let srsID = try r.readInt32()
        var envelope: Envelope?
        if kind != .none {
            try r.require(kind.doubleCount * 8, "the header envelope")
            var values: [Double] = []
            for _ in 0..<kind.doubleCount { values.append(try r.readDouble()) }
            // Order is minx, maxx, miny, maxy, then min/max of z and/or m.
            var e = Envelope(xmin: values[0], ymin: values[2], xmax: values[1], ymax: values[3])
            switch kind {
            case .xyz: e.zRange = ordered(values[4], values[5])
            case .xym: e.mRange = ordered(values[4], values[5])
            case .xyzm:
                e.zRange = ordered(values[4], values[5])
                e.mRange = ordered(values[6], values[7])
            default: break
            }
            envelope = e
        }
        return Header(
            version: version, srsID: srsID, envelopeKind: kind, envelope: envelope, isEmpty: isEmpty,
            littleEndian: r.littleEndian, size: r.offset)
    }

    private static func ordered(_ a: Double, _ b: Double) -> ClosedRange<Double>? {
        guard a.isFinite, b.isFinite, a <= b else { return nil }
        return a...b
    }

    /// The envelope kind GDAL writes for `geometry` (GeoPackage §2.1.3 leaves it to the writer).
    public static func defaultEnvelopeKind(for geometry: Geometry) -> EnvelopeKind {
        if geometry.isEmpty || geometry.type == .point { return .none }
        return geometry.layout.hasZ ? .xyz : .xy
    }

    /// Encodes `geometry` with `srsID`.
    ///
    /// - Parameters:
    ///   - geometry: the geometry to encode.
    ///   - srsID: the spatial reference id written in the header.
    ///   - kind: the envelope kind to store; nil picks ``defaultEnvelopeKind(for:)``. An empty
    ///     geometry always gets none. Kinds with Z or M ordinates the geometry lacks store 0…0.
    ///   - littleEndian: the byte order of the header and the WKB.
    public static func encode(
        _ geometry: Geometry, srsID: Int32, envelope kind: EnvelopeKind? = nil, littleEndian: Bool = true
    ) -> [UInt8] {
        let empty = geometry.isEmpty
        let kind = empty ? .none : (kind ?? defaultEnvelopeKind(for: geometry))
        var w = ByteWriter(capacity: 8 + kind.doubleCount * 8 + WKB.encodedSize(geometry), littleEndian: littleEndian)
        w.writeByte(0x47)
        w.writeByte(0x50)
        w.writeByte(0)
        let flags: UInt8 = (empty ? 0b0001_0000 : 0) | (kind.rawValue << 1) | (littleEndian ? 1 : 0)
        w.writeByte(flags)
        w.writeInt32(srsID)
        if kind != .none, let e = geometry.envelope {
            for v in [e.xmin, e.xmax, e.ymin, e.ymax] { w.writeDouble(v) }
            let z = e.zRange ?? 0...0, m = e.mRange ?? 0...0
            switch kind {
            case .xyz: w.writeDouble(z.lowerBound); w.writeDouble(z.upperBound)
            case .xym: w.writeDouble(m.lowerBound); w.writeDouble(m.upperBound)
            case .xyzm:
                w.writeDouble(z.lowerBound); w.writeDouble(z.upperBound)
                w.writeDouble(m.lowerBound); w.writeDouble(m.upperBound)
            default: break
            }
        }
        WKB.write(geometry, to: &w)
        return w.bytes
    }
}
