import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostStorage

/// One row of `entries` as the writer builds it.
struct EntryRecord: Sendable {
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

    /// The terms indexed for this entry (every field for addresses and places; the fields an
    /// aggregate stands for otherwise) and its street, postal and city keys, from one
    /// tokenisation of each field.
    var analysis: (terms: [String], streetKey: String?, postalKey: String?, cityKey: String?) {
        func tokens(_ field: String?) -> [String] { field.map { LocatorText.tokens($0).map(\.text) } ?? [] }
        let h = tokens(house), s = tokens(street), c = tokens(city), p = tokens(postal), n = tokens(name), a = tokens(alias)
        let fields: [[String]] =
            switch kind {
            case .streetName: [s, c]
            case .postal: [p, c]
            case .locality: [c]
            default: [h, s, c, p, n, a]
            }
        var terms: [String] = []
        for field in fields {
            for token in field { LocatorText.appendTerms(of: token, to: &terms) }
        }
        func key(_ tokens: [String]) -> String? { tokens.isEmpty ? nil : tokens.map(LocatorText.fold).joined(separator: " ") }
        let cityKey = key(c)
        return (terms, key(s).map { "\($0)|\(cityKey ?? "")" }, key(p).map { "\($0)|\(cityKey ?? "")" }, cityKey)
    }

    var terms: [String] { analysis.terms }
    var streetKey: String? { analysis.streetKey }
    var postalKey: String? { analysis.postalKey }
    var cityKey: String? { analysis.cityKey }

    /// A row of `SELECT * FROM entries`, read by position (layout 1's column order: id, kind,
    /// source, fid, fingerprint, house, street, city, postal, name, alias, street_key,
    /// postal_key, city_key, x, y, xmin, ymin, xmax, ymax, weight, cell): searches read
    /// thousands of candidates, and looking columns up by name cost a third of that.
    init(row: Row) {
        kind = LocatorMatchType(rawValue: row[1]) ?? .pointAddress
        source = row[2]
        fid = row[3]
        fingerprint = row[4]
        house = row[5]
        street = row[6]
        city = row[7]
        postal = row[8]
        name = row[9]
        alias = row[10]
        x = row[14]
        y = row[15]
        xmin = row[16]
        ymin = row[17]
        xmax = row[18]
        ymax = row[19]
        weight = row[20]
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
    /// False for a build from scratch: every place is computed anyway.
    var tracksChanges = true

    private let insertEntry: Statement
    private let insertAddressText: Statement
    private let insertPlaceText: Statement
    private let readCell: Statement
    private let writeCell: Statement
    /// The side of the reverse-geocoding cells.
    let cellSize: Double
    private let insertSegment: Statement
    private let insertSegmentBox: Statement

    init(_ db: Database, geographic: Bool, metresPerUnit: Double) throws {
        self.db = db
        self.geographic = geographic
        self.metresPerUnit = metresPerUnit
        insertEntry = try db.makeStatement(sql: """
            INSERT INTO entries(kind, source, fid, fingerprint, house, street, city, postal, name, alias,
                street_key, postal_key, city_key, x, y, xmin, ymin, xmax, ymax, weight, cell)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertAddressText = try db.makeStatement(sql: "INSERT INTO address_index(rowid, terms) VALUES (?, ?)")
        insertPlaceText = try db.makeStatement(sql: "INSERT INTO place_index(rowid, terms) VALUES (?, ?)")
        readCell = try db.makeStatement(sql: "SELECT minx, maxx, miny, maxy FROM address_cells WHERE id = ?")
        writeCell = try db.makeStatement(sql: "INSERT OR REPLACE INTO address_cells(id, minx, maxx, miny, maxy) VALUES (?, ?, ?, ?, ?)")
        cellSize = LocatorLayout.cellSize(geographic: geographic, metresPerUnit: metresPerUnit)
        insertSegment = try db.makeStatement(sql: """
            INSERT INTO segments(source, fid, fingerprint, street, city, street_key, length, line, postal, left_from, left_to, right_from, right_to)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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

    /// A source row made ready to write: everything but the SQL, so that a bulk build computes
    /// it on another thread while this one writes.
    struct PreparedRow: Sendable {
        var entry: (record: EntryRecord, terms: [String], streetKey: String?, postalKey: String?, cityKey: String?)?
        var lines: [[Position]] = []
        var street: String?
        var city: String?
        var postal: String?
        /// Left from, left to, right from, right to.
        var ranges: [Int64?] = [nil, nil, nil, nil]
        var source: Int64 = 0
        var fid: Int64 = 0
        var fingerprint: Int64 = 0
        var skipped = false
    }

    /// Indexes one feature of a source layer.
    func index(_ feature: Feature, source: Int64, fields: LocatorFieldMap, role: String) throws -> Added {
        try write(Self.prepare(feature, source: source, fields: fields, role: role))
    }

    /// The values, fingerprint, terms and keys of one feature.
    static func prepare(_ feature: Feature, source: Int64, fields: LocatorFieldMap, role: String) -> PreparedRow {
        var prepared = PreparedRow()
        guard let fid = feature.objectID, let geometry = feature.geometry, !geometry.isEmpty else {
            prepared.skipped = true
            return prepared
        }
        let values = Self.values(feature, fields)
        prepared.source = source
        prepared.fid = fid
        prepared.fingerprint = Self.fingerprint(values, geometry)
        if role == "streets" {
            guard let street = values.street else {
                prepared.skipped = true
                return prepared
            }
            prepared.street = street
            prepared.city = values.city
            prepared.postal = values.postal
            prepared.ranges = values.ranges
            prepared.lines = Self.lines(geometry).filter { $0.count >= 2 }
            return prepared
        }
        guard values.street != nil || values.name != nil || values.alias != nil || values.postal != nil || values.city != nil,
              let box = geometry.envelope
        else {
            prepared.skipped = true
            return prepared
        }
        let point = Self.representativePoint(geometry, box)
        var record = EntryRecord(
            kind: values.street == nil && values.name != nil ? .poi : .pointAddress, x: point.x, y: point.y,
            box: (box.xmin, box.ymin, box.xmax, box.ymax))
        record.source = source
        record.fid = fid
        record.fingerprint = prepared.fingerprint
        record.house = values.house
        record.street = values.street
        record.city = values.city
        record.postal = values.postal
        record.name = values.name
        record.alias = values.alias
        let analysis = record.analysis
        prepared.entry = (record, analysis.terms, analysis.streetKey, analysis.postalKey, analysis.cityKey)
        return prepared
    }

    /// Writes a prepared row.
    func write(_ row: PreparedRow) throws -> Added {
        var added = Added()
        if row.skipped {
            added.skipped = 1
        } else if let entry = row.entry {
            try add(entry.record, analysis: (entry.terms, entry.streetKey, entry.postalKey, entry.cityKey))
            added.entries = 1
        } else if let street = row.street {
            for line in row.lines {
                try addSegment(line, row: row, street: street)
                added.segments += 1
            }
        }
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
            let indexed = try index(feature, source: source, fields: fields, role: role)
            summary.skipped += indexed.skipped
            // A changed row is counted as changed, not as added (docs/cli.md, `locator update`).
            if previous == nil {
                summary.entries += indexed.entries
                summary.segments += indexed.segments
            }
        }
        for (_, gone) in stored {
            for id in gone.ids { try role == "streets" ? removeSegment(id) : remove(id) }
            summary.removed += 1
        }
    }

    struct Values {
        var house, street, city, postal, name, alias: String?
        /// Left from, left to, right from, right to: whole numbers, or nil.
        var ranges: [Int64?] = [nil, nil, nil, nil]
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
            // Text with a letter or digit, without the spaces around it.
            guard let string, string.unicodeScalars.contains(where: { LocatorText.classify($0) != 0 }) else { return nil }
            let scalars = string.unicodeScalars
            guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
                  let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
            else { return nil }
            return first == scalars.startIndex && last == scalars.index(before: scalars.endIndex) ? string : String(scalars[first...last])
        }
        var values = Values(
            house: text(fields.house), street: text(fields.street), city: text(fields.city), postal: text(fields.postal),
            name: text(fields.name), alias: text(fields.alias))
        if fields.hasRanges {
            values.ranges = [fields.leftFrom, fields.leftTo, fields.rightFrom, fields.rightTo].map { field in
                text(field).flatMap { Int64(LocatorSearch.leadingDigits($0)) }
            }
        }
        return values
    }

    static func fingerprint(_ values: Values, _ geometry: Geometry) -> Int64 {
        var hash = Fingerprint()
        for value in [values.house, values.street, values.city, values.postal, values.name, values.alias] { hash.add(value) }
        for range in values.ranges { hash.add(range.map(String.init)) }
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
    func add(
        _ record: EntryRecord, analysis: (terms: [String], streetKey: String?, postalKey: String?, cityKey: String?)? = nil
    ) throws -> Int64 {
        let (terms, streetKey, postalKey, cityKey) = analysis ?? record.analysis
        let cell = record.kind.isPlace ? nil : LocatorLayout.cell(x: record.x, y: record.y, size: cellSize)
        // Bound through the C API: a million rows pass here, and GRDB's argument arrays cost
        // more than SQLite's own work on them.
        let entry = RawStatement(insertEntry)
        entry.bind(1, Int64(record.kind.rawValue))
        entry.bind(2, record.source)
        entry.bind(3, record.fid)
        entry.bind(4, record.fingerprint)
        for (i, text) in [record.house, record.street, record.city, record.postal, record.name, record.alias, streetKey, postalKey, cityKey].enumerated() {
            entry.bind(Int32(5 + i), text)
        }
        for (i, value) in [record.x, record.y, record.xmin, record.ymin, record.xmax, record.ymax].enumerated() { entry.bind(Int32(14 + i), value) }
        entry.bind(20, Int64(record.weight))
        entry.bind(21, cell)
        try entry.run(db)
        let id = db.lastInsertedRowID
        for term in terms { vocabularyDelta[term, default: 0] += 1 }
        if record.kind.isPlace {
            try insertPlaceText.execute(arguments: [id, terms.joined(separator: " ")])
        } else {
            let text = RawStatement(insertAddressText)
            text.bind(1, id)
            text.bind(2, terms.joined(separator: " "))
            try text.run(db)
            // A bulk build fills the cells once at the end (fillCells); an update grows the
            // entry's cell to cover it.
            if tracksChanges, let cell {
                var box = (record.xmin, record.xmax, record.ymin, record.ymax)
                if let old = try Row.fetchOne(readCell, arguments: [cell]) {
                    box = (min(box.0, old[0]), max(box.1, old[1]), min(box.2, old[2]), max(box.3, old[3]))
                }
                try writeCell.execute(arguments: [cell, box.0, box.1, box.2, box.3])
                touched.note(street: streetKey, postal: postalKey, city: cityKey)
            }
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
            // The cell keeps its extent: a cell's box may cover more than its points, never less.
            let keys = record.analysis
            touched.note(street: keys.streetKey, postal: keys.postalKey, city: keys.cityKey)
        }
        try db.execute(sql: "DELETE FROM entries WHERE id = ?", arguments: [id])
    }

    /// Fills the R-tree of cells from the entries: one row per cell holding addresses (an R-tree
    /// takes 8 µs a row to grow, so a million points would cost seconds where ten thousand cells
    /// cost milliseconds).
    func fillCells() throws {
        try db.execute(sql: """
            INSERT INTO address_cells(id, minx, maxx, miny, maxy)
            SELECT cell, min(xmin), max(xmax), min(ymin), max(ymax) FROM entries WHERE cell IS NOT NULL GROUP BY cell
            """)
    }

    // MARK: - Street segments

    func addSegment(_ line: [Position], row: PreparedRow, street: String) throws {
        let city = row.city
        let blob = PackedPositions.encode(line)
        var xmin = Double.infinity, ymin = Double.infinity, xmax = -Double.infinity, ymax = -Double.infinity
        for p in line {
            xmin = min(xmin, p.x)
            ymin = min(ymin, p.y)
            xmax = max(xmax, p.x)
            ymax = max(ymax, p.y)
        }
        let length = LocatorGeometry.length(line, geographic: geographic, metresPerUnit: metresPerUnit)
        let key = "\(Self.key(street) ?? "")|\(Self.key(city) ?? "")"
        try insertSegment.execute(arguments: [
            row.source, row.fid, row.fingerprint, street, city, key, length, blob, row.postal, row.ranges[0], row.ranges[1], row.ranges[2],
            row.ranges[3],
        ])
        try insertSegmentBox.execute(arguments: [db.lastInsertedRowID, xmin, xmax, ymin, ymax])
        if tracksChanges { touched.streets.insert(Self.key(street) ?? "") }
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

        /// Notes an entry's keys (its street by name: the part of the street key before `|`).
        mutating func note(street: String?, postal: String?, city: String?) {
            guard !all else { return }
            if let street { streets.insert(String(street.prefix { $0 != "|" })) }
            if let postal { postals.insert(postal) }
            if let city { cities.insert(city) }
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
            // The address nearest each street's centre: one pass over every address for a full
            // build (ten thousand streets queried one by one took seconds), a query per street
            // for an update.
            var nearestAll: [String: (d2: Double, x: Double, y: Double)] = [:]
            if scope.all {
                let cursor = try Row.fetchCursor(db, sql: "SELECT street_key, x, y FROM entries WHERE kind IN (1, 2) AND street_key IS NOT NULL")
                while let row = try cursor.next() {
                    let key: String = row[0]
                    guard let street = streets[key] else { continue }
                    let x: Double = row[1], y: Double = row[2]
                    let d2 = (x - street.x) * (x - street.x) + (y - street.y) * (y - street.y)
                    if d2 < nearestAll[key]?.d2 ?? .infinity { nearestAll[key] = (d2, x, y) }
                }
            }
            for key in order {
                guard var street = streets[key] else { continue }
                if let nearest = nearestAll[key] {
                    street.x = nearest.x
                    street.y = nearest.y
                } else if !scope.all, street.count > 0,
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
    static func decode(_ blob: Data) -> [Position] { PackedPositions.decode(blob) }

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

/// A GRDB statement bound and stepped through SQLite's C API (for the bulk build's hot loop).
struct RawStatement {
    let pointer: OpaquePointer
    /// SQLite copies bound text before the call returns (the C macro SQLITE_TRANSIENT).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ statement: Statement) { pointer = statement.sqliteStatement }

    func bind(_ index: Int32, _ value: String?) {
        guard var text = value else {
            sqlite3_bind_null(pointer, index)
            return
        }
        text.withUTF8 { bytes in
            _ = bytes.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(pointer, index, $0.baseAddress, Int32(bytes.count), Self.transient) }
        }
    }

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(pointer, index, value) } else { sqlite3_bind_null(pointer, index) }
    }

    func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(pointer, index, value) }

    /// Steps the statement once and resets it.
    func run(_ db: Database) throws {
        let code = sqlite3_step(pointer)
        sqlite3_reset(pointer)
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
    }
}

/// A bounded hand-over of batches from one thread to another: the sender waits while
/// `capacity` batches are queued, so memory stays bounded whatever the layer size.
final class BatchChannel<Batch: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [Batch] = []
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// False when the receiver has gone (stop producing).
    func send(_ batch: Batch) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= capacity, !cancelled { condition.wait() }
        guard !cancelled else { return false }
        queue.append(batch)
        condition.broadcast()
        return true
    }

    /// No more batches; `error` when the sender failed.
    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The receiver stops: a waiting sender returns.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next batch, nil when the sender finished; rethrows the sender's error.
    func receive() throws -> Batch? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty, !finished { condition.wait() }
        if !queue.isEmpty {
            let batch = queue.removeFirst()
            condition.broadcast()
            return batch
        }
        if let failure { throw failure }
        return nil
    }
}
