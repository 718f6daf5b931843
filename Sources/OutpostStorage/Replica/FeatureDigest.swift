import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// A content fingerprint of a feature, the same on the server and in a replica: a 64-bit hash of
/// a canonical encoding of its global id, every attribute (schema order) and its geometry's
/// ISO WKB. XOR-ing the fingerprints of a layer's features gives an order-free layer checksum
/// (invariant I9: after a sync with nothing pending, client and server checksums are equal).
///
/// The canonical encoding does not depend on how a writer stored a value: an integral REAL in
/// an integer column, a date as text or as epoch milliseconds, a geometry with a big-endian or
/// EWKB body all encode as the values they decode to. ``FeatureTable/checksum(matching:in:)``
/// computes it straight from the stored rows (no feature is built); ``digest(_:layer:)`` from a
/// feature, for backends that hold features rather than GeoPackage rows. The two agree; tests
/// hold them to it.
public enum FeatureDigest {
    /// The fingerprint of `feature` under the schema of `layer`.
    public static func digest(_ feature: Feature, layer: LayerDefinition) -> UInt64 {
        var row = CanonicalRow()
        if let gid = feature.globalID { row.text(gid) } else { row.null() }
        for field in layer.fields where field.type != .oid && field.type != .globalID {
            row.value(feature.attributes[field.name] ?? .null)
        }
        if layer.isSpatial {
            if let g = feature.geometry { row.geometry(WKB.encode(g)) } else { row.null() }
        }
        return row.hash
    }

    /// Accumulates a layer checksum.
    public struct Accumulator: Sendable {
        /// The XOR of the digests added.
        public private(set) var value: UInt64 = 0
        /// How many digests were added.
        public private(set) var count = 0

        /// The checksum of no features.
        public init() {}

        /// A checksum known already (a stored one).
        public init(value: UInt64, count: Int) {
            self.value = value
            self.count = count
        }

        /// Adds the fingerprint of `feature`.
        public mutating func add(_ feature: Feature, layer: LayerDefinition) {
            add(digest: FeatureDigest.digest(feature, layer: layer))
        }

        /// Adds a fingerprint computed already.
        public mutating func add(digest: UInt64) {
            value ^= digest
            count += 1
        }

        /// Joins the checksum of other features (XOR is order-free: halves combine to the whole).
        public mutating func add(_ other: Accumulator) {
            value ^= other.value
            count += other.count
        }

        /// The checksum as 16 hexadecimal digits.
        public var hex: String { String(format: "%016llx", value) }
    }
}

/// The canonical bytes of one feature: a tag per value, then the value. Written into a buffer
/// it owns (grown by doubling, never shrunk): a layer checksum writes ~40 values per row for
/// every row of the layer, and an array's append checks its uniqueness and capacity on each.
struct CanonicalRow: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init() {
        capacity = 256
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    mutating func reset() { count = 0 }

    @inline(__always) private mutating func reserve(_ more: Int) {
        guard count + more > capacity else { return }
        var grown = capacity * 2
        while grown < count + more { grown *= 2 }
        let moved = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 8)
        moved.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = moved
        capacity = grown
    }

    @inline(__always) private mutating func tag(_ t: UInt8) {
        reserve(1)
        base.storeBytes(of: t, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always) private mutating func tagged64(_ t: UInt8, _ v: UInt64) {
        reserve(9)
        base.storeBytes(of: t, toByteOffset: count, as: UInt8.self)
        base.storeBytes(of: v.littleEndian, toByteOffset: count + 1, as: UInt64.self)
        count += 9
    }

    @inline(__always) private mutating func taggedBytes(_ t: UInt8, _ raw: UnsafeRawBufferPointer) {
        reserve(5 + raw.count)
        base.storeBytes(of: t, toByteOffset: count, as: UInt8.self)
        base.storeBytes(of: UInt32(truncatingIfNeeded: raw.count).littleEndian, toByteOffset: count + 1, as: UInt32.self)
        if let from = raw.baseAddress, raw.count > 0 { (base + count + 5).copyMemory(from: from, byteCount: raw.count) }
        count += 5 + raw.count
    }

    mutating func null() { tag(0) }

    mutating func integer(_ v: Int64) { tagged64(1, UInt64(bitPattern: v)) }

    mutating func double(_ d: Double) {
        guard d.isFinite else { return null() }  // as JSON carries it: null
        tagged64(2, d == 0 ? 0 : d.bitPattern)  // -0 travels as 0
    }

    mutating func date(_ d: Date) {
        tagged64(3, UInt64(bitPattern: Int64((d.timeIntervalSince1970 * 1000).rounded())))
    }

    mutating func text(_ raw: UnsafeRawBufferPointer) { taggedBytes(4, raw) }

    mutating func text(_ s: String) {
        var s = s
        s.withUTF8 { text(UnsafeRawBufferPointer($0)) }
    }

    mutating func blob(_ raw: UnsafeRawBufferPointer) { taggedBytes(5, raw) }

    mutating func geometry(_ wkb: UnsafeRawBufferPointer) { taggedBytes(6, wkb) }

    mutating func geometry(_ wkb: [UInt8]) { wkb.withUnsafeBytes { geometry($0) } }

    mutating func value(_ v: FieldValue) {
        switch v {
        case .null: null()
        case .integer(let i): integer(i)
        case .double(let d): double(d)
        case .string(let s): text(s)
        case .date(let d): date(d)
        case .blob(let b): b.withUnsafeBytes { blob($0) }
        }
    }

    var hash: UInt64 { FastHash.hash64(bytes) }
}

extension FeatureTable {
    /// The checksum of the features matching `query` (its paging and field list are ignored),
    /// hashed from the stored rows: the same value as adding each matching feature's
    /// ``FeatureDigest/digest(_:layer:)``, without building the features.
    public func checksum(matching query: FeatureQuery, in conn: GeodatabaseConnection) throws -> FeatureDigest.Accumulator {
        var candidates = query
        let shape = query.intersecting
        if let shape {
            candidates.intersecting = nil
            let envelope = intersectionEnvelope(query, shape)
            guard envelope.isValid else { return FeatureDigest.Accumulator() }
            candidates.envelope = envelope
        }
        let layer = definition
        let digester = StoredRowDigest(layer)
        var select = [layer.globalIDField.map(quoted) ?? "NULL"] + digester.fields.map { quoted($0.name) }
        if layer.isSpatial { select.append(quoted(layer.geometryColumn)) }
        let statement = try rowsStatement(selecting: select, filteredBy: candidates, conn, purpose: " for its checksum")
        let s = statement.sqliteStatement
        let geometryIndex = Int32(digester.fields.count + 1)
        var row = CanonicalRow()
        var acc = FeatureDigest.Accumulator()
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                throw StorageError(.sqlite, "reading \(name) for its checksum: \(String(cString: sqlite3_errmsg(sqlite3_db_handle(s))))", table: name)
            }
            if let shape {
                let stored = ColumnValue(s, geometryIndex)
                guard stored.type == SQLITE_BLOB, case let raw = stored.blob, raw.baseAddress != nil,
                    let g = try? GeoPackageBinary.decode(buffer: raw).geometry, GeometryRelations.intersects(g, shape)
                else { continue }
            }
            acc.add(digest: try digester.digest(&row) { ColumnValue(s, $0) })
        }
        return acc
    }

    /// Tables whose object ids span this many are hashed in two halves at once (``checksumHalves(of:in:)``).
    public static let checksumSplitSpan: Int64 = 20_000

    /// `query` cut in two by object id, for hashing the halves on two readers at once (their
    /// checksums joined are the whole's): nil when the table's object ids span fewer than
    /// ``checksumSplitSpan``. Each half is a separate read, so the caller checks that both saw
    /// the same data (a replica: nothing pending; a service: the same generation).
    public func checksumHalves(of query: FeatureQuery, in conn: GeodatabaseConnection) throws -> (FeatureQuery, FeatureQuery)? {
        let pk = quoted(definition.objectIDField), table = quoted(name)
        // Two subqueries: SQLite answers a lone min() or max() from the key.
        guard let ends = try conn.query("SELECT (SELECT min(\(pk)) FROM \(table)), (SELECT max(\(pk)) FROM \(table))").first,
            let low = ends[0].integerValue, let high = ends[1].integerValue, high - low >= Self.checksumSplitSpan
        else { return nil }
        let middle = low + (high - low) / 2
        var first = query, second = query
        first.throughObjectID = min(middle, query.throughObjectID ?? middle)
        second.afterObjectID = max(middle, query.afterObjectID ?? middle)
        return (first, second)
    }

    /// The WKB body of a GeoPackage geometry blob when it is already canonical: little-endian,
    /// an ISO point (not empty), line string or polygon, of exactly the length its counts give.
    static func canonicalWKB(_ blob: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard blob.count >= 8, blob[0] == 0x47, blob[1] == 0x50 else { return nil }
        let flags = blob[3]
        guard flags & 0b0010_0000 == 0 else { return nil }  // extended GeoPackage geometry
        let envelopeDoubles = [0, 4, 6, 6, 8]
        let kind = Int((flags >> 1) & 0b111)
        guard kind < envelopeDoubles.count else { return nil }
        let start = 8 + envelopeDoubles[kind] * 8
        guard blob.count >= start + 9, blob[start] == 1 else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: blob[start...])
        let code = Int(UInt32(littleEndian: body.loadUnaligned(fromByteOffset: 1, as: UInt32.self)))
        let family = code / 1000, base = code % 1000
        guard family <= 3 else { return nil }
        let d = (family == 0 ? 2 : family == 3 ? 4 : 3) * 8
        func count(at offset: Int) -> Int? {
            guard body.count >= offset + 4 else { return nil }
            return Int(UInt32(littleEndian: body.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
        switch base {
        case 1:
            guard body.count == 5 + d else { return nil }
            for k in 0..<(d / 8) where Double(bitPattern: UInt64(littleEndian: body.loadUnaligned(fromByteOffset: 5 + 8 * k, as: UInt64.self))).isNaN {
                return nil  // an empty point, or NaN coordinates: let the decoder say what it is
            }
            return body
        case 2:
            guard let n = count(at: 5), n <= body.count, body.count == 9 + n * d else { return nil }
            return body
        case 3:
            guard let rings = count(at: 5), rings <= body.count else { return nil }
            var offset = 9
            for _ in 0..<rings {
                guard let n = count(at: offset), n <= body.count else { return nil }
                offset += 4 + n * d
                guard offset <= body.count else { return nil }
            }
            return offset == body.count ? body : nil
        default:
            return nil
        }
    }
}

/// The ``FeatureDigest`` of a layer's rows as they are stored: the global id, the fields other
/// than the object and global ids (schema order), then the geometry's canonical WKB, each read
/// the way a feature is read. ``FeatureTable/checksum(matching:in:)`` hashes the rows it steps
/// through; ``RowChangeTracker`` the rows SQLite's pre-update hook shows it.
struct StoredRowDigest {
    let table: String
    /// The hashed fields, in order.
    let fields: [FieldDefinition]
    private let kinds: [StoredColumn]
    private let isSpatial: Bool

    init(_ layer: LayerDefinition) {
        table = layer.name
        fields = layer.fields.filter { $0.type != .oid && $0.type != .globalID }
        kinds = fields.map { StoredColumn(type: $0.type) }
        isSpatial = layer.isSpatial
    }

    /// How many values a row has: the global id, the fields, and the geometry when spatial.
    var valueCount: Int { fields.count + (isSpatial ? 2 : 1) }

    /// The digest of one stored row, written into `row`'s buffer: `value(k)` reads the row's
    /// value `k` in the order above (0 the global id).
    @inline(__always) func digest(_ row: inout CanonicalRow, _ value: (Int32) -> ColumnValue) throws -> UInt64 {
        row.reset()
        StoredColumn.text.append(value(0), to: &row)
        for (i, kind) in kinds.enumerated() { kind.append(value(Int32(i + 1)), to: &row) }
        if isSpatial {
            let stored = value(Int32(kinds.count + 1))
            if stored.type == SQLITE_BLOB, case let raw = stored.blob, raw.baseAddress != nil {
                try appendGeometry(raw, to: &row)
            } else {
                row.null()
            }
        }
        return row.hash
    }

    /// The geometry's ISO little-endian WKB: the stored body itself when it already is that (the
    /// common case: points, lines and polygons written by any GeoPackage writer on x86 or ARM),
    /// else decoded and encoded again.
    private func appendGeometry(_ blob: UnsafeRawBufferPointer, to row: inout CanonicalRow) throws {
        if let body = FeatureTable.canonicalWKB(blob) {
            row.geometry(body)
            return
        }
        do {
            row.geometry(WKB.encode(try GeoPackageBinary.decode(buffer: blob).geometry))
        } catch {
            throw StorageError(.corrupt, "a geometry of \(table) cannot be decoded: \(error)", table: table, cause: error as? GeometryError)
        }
    }
}

/// How a stored column value becomes a canonical value: the coercions of reading a feature
/// (``FeatureTable`` decodes the same way), applied to the raw SQLite value.
private enum StoredColumn {
    case integer, real, date, text

    init(type: FieldType) {
        if type.isDate {
            self = .date
        } else if type.isInteger {
            self = .integer
        } else if type.isNumeric {
            self = .real
        } else {
            self = .text
        }
    }

    /// A stored value, read through ``ColumnValue``.
    func append(_ value: ColumnValue, to row: inout CanonicalRow) {
        switch value.type {
        case SQLITE_NULL:
            row.null()
        case SQLITE_INTEGER:
            let v = value.int64
            switch self {
            case .real: row.double(Double(v))
            case .date: row.date(Date(timeIntervalSince1970: Double(v) / 1000))
            case .integer, .text: row.integer(v)
            }
        case SQLITE_FLOAT:
            let d = value.double
            if self == .integer, let exact = FieldValue.exactInteger(d) { row.integer(exact) } else { row.double(d) }
        case SQLITE_BLOB:
            row.blob(value.blob)
        default:
            let raw = UnsafeRawBufferPointer(value.text ?? UnsafeBufferPointer(start: nil, count: 0))
            guard self != .text else { return row.text(raw) }
            if self == .date, let d = GeoPackageDate.parse(utf8: raw.assumingMemoryBound(to: UInt8.self)) { return row.date(d) }
            let text = String(decoding: raw, as: UTF8.self)
            row.value(FieldValue.decodeStoredText(text, date: self == .date, integer: self == .integer, numeric: self != .date))
        }
    }
}
