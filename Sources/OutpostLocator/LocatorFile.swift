import Foundation
import GRDB
import OutpostCore

/// The on-disk layout of a `.locator` file (docs/locator.md): one SQLite file, identified by its
/// `application_id` and versioned by `user_version`.
enum LocatorLayout {
    /// The side of a reverse-geocoding cell: 0.002° (about 110 × 220 m in Finland) for degrees,
    /// 200 m otherwise. Points are grouped by cell; the R-tree holds each cell's extent.
    static func cellSize(geographic: Bool, metresPerUnit: Double) -> Double { geographic ? 0.002 : 200 / metresPerUnit }

    /// The cell holding (x, y): row and column packed into one integer.
    static func cell(x: Double, y: Double, size: Double) -> Int64 {
        let column = Int64((x / size).rounded(.down)) + (1 << 24), row = Int64((y / size).rounded(.down)) + (1 << 24)
        return row << 26 | column
    }

    /// "OPLC".
    static let applicationID: Int32 = 0x4F50_4C43
    static let version = 1

    /// The match types, stored as integers in `entries.kind`.
    static let schema = """
        CREATE TABLE locator_info(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE locator_sources(
            id INTEGER PRIMARY KEY, layer TEXT NOT NULL, role TEXT NOT NULL, fields TEXT NOT NULL,
            where_clause TEXT);
        CREATE TABLE entries(
            id INTEGER PRIMARY KEY,
            kind INTEGER NOT NULL,
            source INTEGER, fid INTEGER, fingerprint INTEGER,
            house TEXT, street TEXT, city TEXT, postal TEXT, name TEXT, alias TEXT,
            street_key TEXT, postal_key TEXT, city_key TEXT,
            x REAL NOT NULL, y REAL NOT NULL,
            xmin REAL NOT NULL, ymin REAL NOT NULL, xmax REAL NOT NULL, ymax REAL NOT NULL,
            weight INTEGER NOT NULL DEFAULT 1,
            cell INTEGER);
        CREATE TABLE segments(
            id INTEGER PRIMARY KEY, source INTEGER NOT NULL, fid INTEGER NOT NULL, fingerprint INTEGER NOT NULL,
            street TEXT NOT NULL, city TEXT, street_key TEXT NOT NULL, length REAL NOT NULL, line BLOB NOT NULL,
            postal TEXT, left_from INTEGER, left_to INTEGER, right_from INTEGER, right_to INTEGER);
        CREATE VIRTUAL TABLE address_index USING fts5(terms, content='', detail=none, tokenize='unicode61 remove_diacritics 0');
        CREATE VIRTUAL TABLE place_index USING fts5(terms, content='', detail=none, tokenize='unicode61 remove_diacritics 0');
        CREATE VIRTUAL TABLE address_cells USING rtree(id, minx, maxx, miny, maxy);
        CREATE VIRTUAL TABLE segment_rtree USING rtree(id, minx, maxx, miny, maxy);
        CREATE TABLE vocabulary(term TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE typo_keys(key TEXT NOT NULL, term TEXT NOT NULL, PRIMARY KEY(key, term)) WITHOUT ROWID;
        """

    /// Indexes created after a bulk build (sorting once is faster than growing them row by row).
    static let indexes = """
        CREATE INDEX IF NOT EXISTS entries_source ON entries(source, fid) WHERE fid IS NOT NULL;
        CREATE INDEX IF NOT EXISTS entries_street ON entries(street_key, kind);
        CREATE INDEX IF NOT EXISTS entries_postal ON entries(postal_key, kind);
        CREATE INDEX IF NOT EXISTS entries_city ON entries(city_key, kind);
        CREATE INDEX IF NOT EXISTS entries_cell ON entries(cell) WHERE cell IS NOT NULL;
        CREATE INDEX IF NOT EXISTS segments_source ON segments(source, fid);
        CREATE INDEX IF NOT EXISTS segments_street ON segments(street_key);
        """

    /// Tables a file must have to be searched.
    static let requiredTables = [
        "locator_info", "locator_sources", "entries", "segments", "address_index", "place_index", "address_cells",
        "segment_rtree", "vocabulary", "typo_keys",
    ]

    /// Checks that `db` is a locator this code reads; the message says what is wrong.
    static func check(_ db: Database, name: String) throws {
        let application = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
        guard application == applicationID else {
            throw LocatorError(.notALocator, "\(name) is not an Outpost locator file")
        }
        let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
        guard version == Self.version else {
            throw LocatorError(.notALocator, "\(name) has locator layout \(version); this version of Outpost reads layout \(Self.version)")
        }
        let tables = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        if let missing = requiredTables.first(where: { !tables.contains($0) }) {
            throw LocatorError(.notALocator, "\(name) is damaged: table \(missing) is missing")
        }
        let quick = try String.fetchAll(db, sql: "PRAGMA quick_check(1)")
        guard quick == ["ok"] else { throw LocatorError(.notALocator, "\(name) is damaged: \(quick.joined(separator: "; "))") }
    }
}

/// What an entry stands for: ArcGIS `Addr_type` values.
public enum LocatorMatchType: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// An address point.
    case pointAddress = 1
    /// A place or feature by name.
    case poi = 2
    /// A street, by name.
    case streetName = 3
    /// A postal code.
    case postal = 4
    /// A city or district.
    case locality = 5
    /// An address on a street line, its number interpolated along the line's range.
    case streetAddress = 6

    /// The ArcGIS name (`PointAddress`, `POI`, `StreetName`, `Postal`, `Locality`, `StreetAddress`).
    public var description: String {
        switch self {
        case .pointAddress: "PointAddress"
        case .poi: "POI"
        case .streetName: "StreetName"
        case .postal: "Postal"
        case .locality: "Locality"
        case .streetAddress: "StreetAddress"
        }
    }

    /// The match type of an ArcGIS name, in any case; nil for an unknown name.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description.caseInsensitiveCompare(name) == .orderedSame }) else { return nil }
        self = match
    }

    /// Entries searched through `place_index` (aggregates) rather than `address_index`.
    var isPlace: Bool { self == .streetName || self == .postal || self == .locality }
}

/// A stable 64-bit FNV-1a hash (Swift's `Hasher` is seeded per process; fingerprints are stored).
struct Fingerprint {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ string: String?) {
        guard let string else {
            add(byte: 0xFF)
            return
        }
        for byte in string.utf8 { add(byte: byte) }
        add(byte: 0)
    }

    mutating func add(_ double: Double) {
        var bits = double.bitPattern
        for _ in 0..<8 {
            add(byte: UInt8(truncatingIfNeeded: bits))
            bits >>= 8
        }
    }

    private mutating func add(byte: UInt8) {
        value ^= UInt64(byte)
        value = value &* 0x0000_0100_0000_01B3
    }

    var signed: Int64 { Int64(bitPattern: value) }
}
