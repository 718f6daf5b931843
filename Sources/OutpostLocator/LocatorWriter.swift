import Foundation
import GRDB
import OutpostCore
import OutpostStorage

/// One row of `entries` as the writer builds it.
struct EntryRecord {
    var kind: LocatorMatchType
    var source: Int64?
    var fid: Int64?
    var fingerprint: Int64?
    var house: String?
    var street: String?
    var city: String?
    var postal: String?
    var name: String?
    var alias: String?
    var x: Double
    var y: Double
    var xmin: Double, ymin: Double, xmax: Double, ymax: Double
    var weight = 1

    /// The terms indexed for this entry: every field for addresses and places; the fields an
    /// aggregate stands for otherwise.
    var terms: [String] {
        var out: [String] = []
        let fields: [String?] =
            switch kind {
            case .streetName: [street, city]
            case .postal: [postal, city]
            case .locality: [city]
            default: [house, street, city, postal, name, alias]
            }
        for field in fields {
            guard let field else { continue }
            for token in LocatorText.tokens(field) { LocatorText.appendTerms(of: token.text, to: &out) }
        }
        return out
    }

    var streetKey: String? { LocatorWriter.key(street).map { "\($0)|\(LocatorWriter.key(city) ?? "")" } }
    var postalKey: String? { LocatorWriter.key(postal).map { "\($0)|\(LocatorWriter.key(city) ?? "")" } }
    var cityKey: String? { LocatorWriter.key(city) }

    init(row: Row) {
        kind = LocatorMatchType(rawValue: row["kind"]) ?? .pointAddress
        source = row["source"]
        fid = row["fid"]
        fingerprint = row["fingerprint"]
        house = row["house"]
        street = row["street"]
        city = row["city"]
        postal = row["postal"]
        name = row["name"]
        alias = row["alias"]
        x = row["x"]
        y = row["y"]
        xmin = row["xmin"]
        ymin = row["ymin"]
        xmax = row["xmax"]
        ymax = row["ymax"]
        weight = row["weight"]
    }

    init(kind: LocatorMatchType, x: Double, y: Double, box: (Double, Double, Double, Double)) {
        self.kind = kind
        self.x = x
        self.y = y
        (xmin, ymin, xmax, ymax) = box
    }
}

/// Writes entries, street segments, their full-text rows, R-tree rows and the vocabulary of a
/// locator inside one transaction of its connection.
final class LocatorWriter {
    let db: Database
    let geographic: Bool
    let metresPerUnit: Double
    /// Term count changes not yet written to `vocabulary`.
    private var vocabularyDelta: [String: Int] = [:]
    /// Streets (their name keys), postal keys and city keys whose rows changed.
    private(set) var touched = PlaceScope()

    private let insertEntry: Statement
    private let insertAddressText: Statement
    private let insertPlaceText: Statement
    private let insertAddressBox: Statement
    private let insertSegment: Statement
    private let insertSegmentBox: Statement

    init(_ db: Database, geographic: Bool, metresPerUnit: Double) throws {
        self.db = db
        self.geographic = geographic
        self.metresPerUnit = metresPerUnit
        insertEntry = try db.makeStatement(sql: """
            INSERT INTO entries(kind, source, fid, fingerprint, house, street, city, postal, name, alias,
                street_key, postal_key, city_key, x, y, xmin, ymin, xmax, ymax, weight)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertAddressText = try db.makeStatement(sql: "INSERT INTO address_index(rowid, terms) VALUES (?, ?)")
        insertPlaceText = try db.makeStatement(sql: "INSERT INTO place_index(rowid, terms) VALUES (?, ?)")
        insertAddressBox = try db.makeStatement(sql: "INSERT INTO address_rtree(id, minx, maxx, miny, maxy) VALUES (?, ?, ?, ?, ?)")
        insertSegment = try db.makeStatement(sql: """
            INSERT INTO segments(source, fid, fingerprint, street, city, street_key, length, line) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertSegmentBox = try db.makeStatement(sql: "INSERT INTO segment_rtree(id, minx, maxx, miny, maxy) VALUES (?, ?, ?, ?, ?)")
    }

    /// The folded tokens of `text` joined by spaces: the key that groups rows of one street,
    /// postal code or city however they are written.
    static func key(_ text: String?) -> String? {
        guard let text else { return nil }
        let tokens = LocatorText.tokens(text).map { LocatorText.fold($0.text) }
        return tokens.isEmpty ? nil : tokens.joined(separator: " ")
    }

    // MARK: - Source rows

    struct Added {
        var entries = 0
        var segments = 0
        var skipped = 0
    }

    /// Indexes one feature of a source layer.
    func index(_ feature: Feature, source: Int64, fields: LocatorFieldMap, role: String) throws -> Added {
        var added = Added()
        guard let fid = feature.objectID, let geometry = feature.geometry, !geometry.isEmpty else {
            added.skipped = 1
            return added
        }
        let values = Self.values(feature, fields)
        let fingerprint = Self.fingerprint(values, geometry)
        if role == "streets" {
            guard let street = values.street else {
                added.skipped = 1
                return added
            }
            for line in Self.lines(geometry) where line.count >= 2 {
                try addSegment(line, source: source, fid: fid, fingerprint: fingerprint, street: street, city: values.city)
                added.segments += 1
            }
            return added
        }
        guard values.street != nil || values.name != nil || values.alias != nil || values.postal != nil || values.city != nil,
              let box = geometry.envelope
        else {
            added.skipped = 1
            return added
        }
        let point = Self.representativePoint(geometry, box)
        var record = EntryRecord(
            kind: values.street == nil && values.name != nil ? .poi : .pointAddress, x: point.x, y: point.y,
            box: (box.xmin, box.ymin, box.xmax, box.ymax))
        record.source = source
        record.fid = fid
        record.fingerprint = fingerprint
        record.house = values.house
        record.street = values.street
        record.city = values.city
        record.postal = values.postal
        record.name = values.name
        record.alias = values.alias
        _ = try add(record)
        added.entries = 1
        return added
    }

    /// Compares a page of source rows (object ids in `range`, exclusive below, inclusive above)
    /// with what the locator holds for them, and indexes again only what differs.
    func merge(
        _ page: [Feature], source: Int64, fields: LocatorFieldMap, role: String, range: (Int64, Int64),
        summary: inout LocatorBuildSummary
    ) throws {
        let table = role == "streets" ? "segments" : "entries"
        var stored: [Int64: (ids: [Int64], fingerprint: Int64)] = [:]
        let rows = try Row.fetchCursor(
            db, sql: "SELECT id, fid, fingerprint FROM \(table) WHERE source = ? AND fid > ? AND fid <= ?",
            arguments: [source, range.0, range.1])
        while let row = try rows.next() {
            let fid: Int64 = row["fid"]
            stored[fid, default: ([], row["fingerprint"])].ids.append(row["id"])
        }
        for feature in page {
            guard let fid = feature.objectID else { continue }
            let previous = stored.removeValue(forKey: fid)
            if let previous, let geometry = feature.geometry,
               Self.fingerprint(Self.values(feature, fields), geometry) == previous.fingerprint
            {
                continue
            }
            if let previous {
                for id in previous.ids { try role == "streets" ? removeSegment(id) : remove(id) }
                summary.changed += 1
            }
            let added = try index(feature, source: source, fields: fields, role: role)
            summary.entries += added.entries
            summary.segments += added.segments
            summary.skipped += added.skipped
        }
        for (_, gone) in stored {
            for id in gone.ids { try role == "streets" ? removeSegment(id) : remove(id) }
            summary.removed += 1
        }
    }

    struct Values {
        var house, street, city, postal, name, alias: String?
    }

    static func values(_ feature: Feature, _ fields: LocatorFieldMap) -> Values {
        func text(_ field: String?) -> String? {
            guard let field else { return nil }
            let value = feature.attributes[field] ?? feature.attributes.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
            let string: String? =
                switch value {
                case .string(let s): s
                case .integer(let i): String(i)
                case .double(let d): d.rounded() == d && abs(d) < 1e15 ? String(Int64(d)) : String(d)
                default: nil
                }
            guard let trimmed = string?.trimmingCharacters(in: .whitespacesAndNewlines), !trimmed.isEmpty,
                  !LocatorText.tokens(trimmed).isEmpty
            else { return nil }
            return trimmed
        }
        return Values(
            house: text(fields.house), street: text(fields.street), city: text(fields.city), postal: text(fields.postal),
            name: text(fields.name), alias: text(fields.alias))
    }

    static func fingerprint(_ values: Values, _ geometry: Geometry) -> Int64 {
        var hash = Fingerprint()
        for value in [values.house, values.street, values.city, values.postal, values.name, values.alias] { hash.add(value) }
        geometry.forEachPosition { position in
            hash.add(position.x)
            hash.add(position.y)
        }
        return hash.signed
    }

    /// A point to stand for a feature: the point itself, the first of a multipoint, or the centre
    /// of a polygon's or line's envelope.
    static func representativePoint(_ geometry: Geometry, _ box: Envelope) -> Position {
        switch geometry {
        case .point(let p): if let position = p.position { return position }
        case .multiPoint(let m): if let first = m.points.first?.position { return first }
        default: break
        }
        return Position(x: (box.xmin + box.xmax) / 2, y: (box.ymin + box.ymax) / 2)
    }

    static func lines(_ geometry: Geometry) -> [[Position]] {
        switch geometry {
        case .lineString(let line): [line.positions]
        case .multiLineString(let lines): lines.lineStrings.map(\.positions)
        default: []
        }
    }

    // MARK: - Entries

    /// Inserts an entry with its full-text row (and R-tree row for points); returns its id.
    @discardableResult
    func add(_ record: EntryRecord) throws -> Int64 {
        let streetKey = record.streetKey, postalKey = record.postalKey, cityKey = record.cityKey
        try insertEntry.execute(arguments: [
            record.kind.rawValue, record.source, record.fid, record.fingerprint, record.house, record.street, record.city,
            record.postal, record.name, record.alias, streetKey, postalKey, cityKey, record.x, record.y, record.xmin,
            record.ymin, record.xmax, record.ymax, record.weight,
        ])
        let id = db.lastInsertedRowID
        let terms = record.terms
        for term in terms { vocabularyDelta[term, default: 0] += 1 }
        if record.kind.isPlace {
            try insertPlaceText.execute(arguments: [id, terms.joined(separator: " ")])
        } else {
            try insertAddressText.execute(arguments: [id, terms.joined(separator: " ")])
            try insertAddressBox.execute(arguments: [id, record.xmin, record.xmax, record.ymin, record.ymax])
            touched.note(record)
        }
        return id
    }

    /// Removes an entry and its full-text and R-tree rows.
    func remove(_ id: Int64) throws {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM entries WHERE id = ?", arguments: [id]) else { return }
        let record = EntryRecord(row: row)
        let terms = record.terms
        for term in terms { vocabularyDelta[term, default: 0] -= 1 }
        // Contentless full-text tables forget a row through the 'delete' command given its terms.
        let index = record.kind.isPlace ? "place_index" : "address_index"
        try db.execute(sql: "INSERT INTO \(index)(\(index), rowid, terms) VALUES('delete', ?, ?)", arguments: [id, terms.joined(separator: " ")])
        if !record.kind.isPlace {
            try db.execute(sql: "DELETE FROM address_rtree WHERE id = ?", arguments: [id])
            touched.note(record)
        }
        try db.execute(sql: "DELETE FROM entries WHERE id = ?", arguments: [id])
    }

    // MARK: - Street segments

    func addSegment(_ line: [Position], source: Int64, fid: Int64, fingerprint: Int64, street: String, city: String?) throws {
        var blob = [UInt8]()
        blob.reserveCapacity(line.count * 16)
        var xmin = Double.infinity, ymin = Double.infinity, xmax = -Double.infinity, ymax = -Double.infinity
        for p in line {
            withUnsafeBytes(of: p.x.bitPattern.littleEndian) { blob.append(contentsOf: $0) }
            withUnsafeBytes(of: p.y.bitPattern.littleEndian) { blob.append(contentsOf: $0) }
            xmin = min(xmin, p.x)
            ymin = min(ymin, p.y)
            xmax = max(xmax, p.x)
            ymax = max(ymax, p.y)
        }
        let length = LocatorGeometry.length(line, geographic: geographic, metresPerUnit: metresPerUnit)
        let key = "\(Self.key(street) ?? "")|\(Self.key(city) ?? "")"
        try insertSegment.execute(arguments: [source, fid, fingerprint, street, city, key, length, Data(blob)])
        try insertSegmentBox.execute(arguments: [db.lastInsertedRowID, xmin, xmax, ymin, ymax])
        touched.streets.insert(Self.key(street) ?? "")
    }

    func removeSegment(_ id: Int64) throws {
        if let street = try String.fetchOne(db, sql: "SELECT street FROM segments WHERE id = ?", arguments: [id]) {
            touched.streets.insert(Self.key(street) ?? "")
        }
        try db.execute(sql: "DELETE FROM segment_rtree WHERE id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM segments WHERE id = ?", arguments: [id])
    }

    // MARK: - Streets, postal codes and cities

    /// The streets (name keys), postal keys and city keys to recompute; `all` for a full build.
    struct PlaceScope {
        var all = false
        var streets: Set<String> = []
        var postals: Set<String> = []
        var cities: Set<String> = []

        static let all = PlaceScope(all: true)

        mutating func note(_ record: EntryRecord) {
            guard !all else { return }
            if let street = LocatorWriter.key(record.street) { streets.insert(street) }
            if let postal = record.postalKey { postals.insert(postal) }
            if let city = record.cityKey { cities.insert(city) }
        }
    }

    /// Recomputes the street, postal-code and city entries in `scope` from the address rows and
    /// street segments; returns how many there are now in that scope.
    func rebuildPlaces(_ scope: PlaceScope) throws -> Int {
        var count = 0
        // Streets: one entry per street name and city, located at the address nearest the
        // street's centre (or halfway along its longest line when it has no addresses), its
        // extent covering its addresses and lines.
        let streetFilters: [(String, StatementArguments)] =
            scope.all ? [("", [])] : scope.streets.sorted().map { (" AND street_key >= ? AND street_key < ?", ["\($0)|", "\($0)}"]) }
        for (filter, arguments) in streetFilters {
            for id in try Int64.fetchAll(db, sql: "SELECT id FROM entries WHERE kind = \(LocatorMatchType.streetName.rawValue)\(filter)", arguments: arguments) {
                try remove(id)
            }
            struct Street {
                var street: String, city: String?, count: Int, x: Double, y: Double
                var box: (Double, Double, Double, Double)
            }
            var streets: [String: Street] = [:]
            var order: [String] = []
            let points = try Row.fetchCursor(db, sql: """
                SELECT street_key, min(street), min(city), count(*), avg(x), avg(y), min(xmin), min(ymin), max(xmax), max(ymax)
                FROM entries WHERE kind IN (1, 2) AND street_key IS NOT NULL\(filter) GROUP BY street_key
                """, arguments: arguments)
            while let row = try points.next() {
                let key: String = row[0]
                streets[key] = Street(street: row[1], city: row[2], count: row[3], x: row[4], y: row[5], box: (row[6], row[7], row[8], row[9]))
                order.append(key)
            }
            let lines = try Row.fetchAll(db, sql: """
                SELECT s.street_key, min(s.street), min(s.city), min(r.minx), min(r.miny), max(r.maxx), max(r.maxy)
                FROM segments s JOIN segment_rtree r ON r.id = s.id WHERE 1\(filter.replacingOccurrences(of: "street_key", with: "s.street_key"))
                GROUP BY s.street_key
                """, arguments: arguments)
            for row in lines {
                let key: String = row[0]
                let box: (Double, Double, Double, Double) = (row[3], row[4], row[5], row[6])
                // Lines without a city join the streets of that name in every city.
                let matching = key.hasSuffix("|") ? order.filter { $0.hasPrefix(key) } : (streets[key] == nil ? [] : [key])
                if !matching.isEmpty {
                    for k in matching {
                        guard var street = streets[k] else { continue }
                        street.box = (min(street.box.0, box.0), min(street.box.1, box.1), max(street.box.2, box.2), max(street.box.3, box.3))
                        streets[k] = street
                    }
                    continue
                }
                guard let blob = try Data.fetchOne(db, sql: "SELECT line FROM segments WHERE street_key = ? ORDER BY length DESC LIMIT 1", arguments: [key]) else { continue }
                let middle = LocatorGeometry.pointAlong(LocatorGeometry.decode(blob), fraction: 0.5, geographic: geographic)
                streets[key] = Street(street: row[1], city: row[2], count: 0, x: middle.x, y: middle.y, box: box)
                order.append(key)
            }
            for key in order {
                guard var street = streets[key] else { continue }
                if street.count > 0,
                   let nearest = try Row.fetchOne(db, sql: """
                       SELECT x, y FROM entries WHERE street_key = ? AND kind IN (1, 2)
                       ORDER BY (x - ?) * (x - ?) + (y - ?) * (y - ?) LIMIT 1
                       """, arguments: [key, street.x, street.x, street.y, street.y])
                {
                    street.x = nearest[0]
                    street.y = nearest[1]
                }
                var record = EntryRecord(kind: .streetName, x: street.x, y: street.y, box: street.box)
                record.street = street.street
                record.city = street.city
                record.weight = max(street.count, 1)
                try add(record)
                count += 1
            }
        }
        count += try rebuildGroups(kind: .postal, keyColumn: "postal_key", keys: scope.all ? nil : scope.postals)
        count += try rebuildGroups(kind: .locality, keyColumn: "city_key", keys: scope.all ? nil : scope.cities)
        return count
    }

    /// Postal codes and cities: one entry per key at the centre of its addresses.
    private func rebuildGroups(kind: LocatorMatchType, keyColumn: String, keys: Set<String>?) throws -> Int {
        let filters: [(String, StatementArguments)] = keys.map { $0.sorted().map { (" AND \(keyColumn) = ?", [$0]) } } ?? [("", [])]
        var count = 0
        for (filter, arguments) in filters {
            for id in try Int64.fetchAll(db, sql: "SELECT id FROM entries WHERE kind = \(kind.rawValue)\(filter)", arguments: arguments) {
                try remove(id)
            }
            let groups = try Row.fetchAll(db, sql: """
                SELECT min(postal), min(city), count(*), avg(x), avg(y), min(xmin), min(ymin), max(xmax), max(ymax)
                FROM entries WHERE kind IN (1, 2) AND \(keyColumn) IS NOT NULL\(filter) GROUP BY \(keyColumn)
                """, arguments: arguments)
            for row in groups {
                var record = EntryRecord(kind: kind, x: row[3], y: row[4], box: (row[5], row[6], row[7], row[8]))
                record.postal = kind == .postal ? row[0] : nil
                record.city = row[1]
                record.weight = row[2]
                try add(record)
                count += 1
            }
        }
        return count
    }

    // MARK: - Vocabulary

    /// Writes the term counts gathered since the last flush, with the typo keys of new terms.
    func flushVocabulary() throws {
        let read = try db.makeStatement(sql: "SELECT count FROM vocabulary WHERE term = ?")
        let insert = try db.makeStatement(sql: "INSERT INTO vocabulary(term, count) VALUES (?, ?)")
        let update = try db.makeStatement(sql: "UPDATE vocabulary SET count = ? WHERE term = ?")
        let delete = try db.makeStatement(sql: "DELETE FROM vocabulary WHERE term = ?")
        let addKey = try db.makeStatement(sql: "INSERT OR IGNORE INTO typo_keys(key, term) VALUES (?, ?)")
        let dropKey = try db.makeStatement(sql: "DELETE FROM typo_keys WHERE key = ? AND term = ?")
        for (term, delta) in vocabularyDelta.sorted(by: { $0.key < $1.key }) where delta != 0 {
            let existing = try Int.fetchOne(read, arguments: [term])
            let count = (existing ?? 0) + delta
            let typed = term.unicodeScalars.count >= LocatorSearch.typoMinimumLength
            if existing == nil, count > 0 {
                try insert.execute(arguments: [term, count])
                if typed { for key in LocatorText.deletions(term) { try addKey.execute(arguments: [key, term]) } }
            } else if existing != nil, count <= 0 {
                try delete.execute(arguments: [term])
                if typed { for key in LocatorText.deletions(term) { try dropKey.execute(arguments: [key, term]) } }
            } else if existing != nil {
                try update.execute(arguments: [count, term])
            }
        }
        vocabularyDelta.removeAll()
    }
}

/// Lengths and positions along street lines stored in a locator.
enum LocatorGeometry {
    static func decode(_ blob: Data) -> [Position] {
        var out: [Position] = []
        out.reserveCapacity(blob.count / 16)
        blob.withUnsafeBytes { raw in
            var offset = 0
            while offset + 16 <= raw.count {
                let x = Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                let y = Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                out.append(Position(x: x, y: y))
                offset += 16
            }
        }
        return out
    }

    /// Metres between two positions: great-circle (haversine) for degrees, planar otherwise.
    static func distance(_ a: Position, _ b: Position, geographic: Bool, metresPerUnit: Double = 1) -> Double {
        guard geographic else { return hypot(a.x - b.x, a.y - b.y) * metresPerUnit }
        let r = 6_371_008.8, rad = Double.pi / 180
        let dLat = (b.y - a.y) * rad, dLon = (b.x - a.x) * rad
        let h = sin(dLat / 2) * sin(dLat / 2) + cos(a.y * rad) * cos(b.y * rad) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * r * asin(min(1, sqrt(h)))
    }

    static func length(_ line: [Position], geographic: Bool, metresPerUnit: Double) -> Double {
        zip(line, line.dropFirst()).reduce(0) { $0 + distance($1.0, $1.1, geographic: geographic, metresPerUnit: metresPerUnit) }
    }

    /// The point `fraction` of the way along `line`.
    static func pointAlong(_ line: [Position], fraction: Double, geographic: Bool) -> Position {
        guard let first = line.first else { return Position(x: 0, y: 0) }
        let total = length(line, geographic: geographic, metresPerUnit: 1)
        var remaining = total * max(0, min(1, fraction))
        for (a, b) in zip(line, line.dropFirst()) {
            let d = distance(a, b, geographic: geographic)
            if d >= remaining, d > 0 {
                let t = remaining / d
                return Position(x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t)
            }
            remaining -= d
        }
        return line.last ?? first
    }

    /// The nearest point of `line` to `p` and its distance in metres. For degrees the segment is
    /// treated in a local plane scaled by the cosine of the latitude (exact enough at street
    /// scale).
    static func nearest(on line: [Position], to p: Position, geographic: Bool, metresPerUnit: Double) -> (Position, Double) {
        let scale = geographic ? cos(p.y * .pi / 180) : 1
        var best = (line.first ?? p, Double.infinity)
        for (a, b) in zip(line, line.dropFirst()) {
            let ax = (a.x - p.x) * scale, ay = a.y - p.y, bx = (b.x - p.x) * scale, by = b.y - p.y
            let dx = bx - ax, dy = by - ay
            let len2 = dx * dx + dy * dy
            let t = len2 > 0 ? max(0, min(1, -(ax * dx + ay * dy) / len2)) : 0
            let q = Position(x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t)
            let d = distance(q, p, geographic: geographic, metresPerUnit: metresPerUnit)
            if d < best.1 { best = (q, d) }
        }
        return best
    }
}
