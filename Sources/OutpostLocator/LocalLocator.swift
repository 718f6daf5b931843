import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostGeoprocessing
import Synchronization

/// An open `.locator` file: what ``LocatorTask`` uses offline and GeocodeServer serves.
///
/// Searches run on a few read-only connections taken in turn, so concurrent requests do not
/// queue behind one another.
public final class LocalLocator: Sendable {
    /// The `.locator` file.
    public let url: URL
    /// What the locator holds and can do.
    public let info: LocatorInfo
    let queues: [DatabaseQueue]
    let geographic: Bool
    let metresPerUnit: Double
    private let next = Atomic<Int>(0)

    /// Opens `url`, checking that it is a locator of a layout this version reads and that SQLite
    /// finds it intact; it is called `name` (default: the file's name without its extension).
    /// - Throws: ``LocatorError`` `.notFound` or `.notALocator`.
    public init(url: URL, name: String? = nil, connections: Int = 2) throws {
        self.url = url
        var queues: [DatabaseQueue] = []
        for i in 0..<max(1, connections) { queues.append(try LocatorReader.openQueue(url, readOnly: true, check: i == 0)) }
        self.queues = queues
        let (info, geographic, metres) = try queues[0].read { db -> (LocatorInfo, Bool, Double) in
            let values = Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, value FROM locator_info").map { ($0[0] as String, $0[1] as String) })
            let wkid = Int(values["wkid"] ?? "") ?? 4326
            let extent = values["extent"].flatMap { text -> Envelope? in
                let v = text.split(separator: ",").compactMap { Double($0) }
                return v.count == 4 ? Envelope(xmin: v[0], ymin: v[1], xmax: v[2], ymax: v[3]) : nil
            }
            let info = LocatorInfo(
                name: name ?? url.deletingPathExtension().lastPathComponent, spatialReference: SpatialReference(wkid: wkid),
                entryCount: Int(values["entries"] ?? "") ?? 0, extent: extent,
                searchAttributeNames: ["Address", "Neighborhood", "City", "Postal"],
                resultAttributeNames: LocalLocator.attributeNames, supportsSuggestions: true, supportsReverseGeocoding: true)
            let system = try? CoordinateSystemInfo(SpatialReference(wkid: wkid))
            return (info, system?.isGeographic ?? (wkid == 4326), system?.metresPerUnit ?? 1)
        }
        self.info = info
        self.geographic = geographic
        self.metresPerUnit = metres
    }

    /// Every attribute a result can carry.
    public static let attributeNames = [
        "Match_addr", "LongLabel", "ShortLabel", "Addr_type", "Type", "PlaceName", "Place_addr", "AddNum", "StAddr",
        "StName", "City", "Postal", "Score", "X", "Y", "DisplayX", "DisplayY", "Xmin", "Xmax", "Ymin", "Ymax", "Distance",
        "Source_ID",
    ]

    /// Reads on the next connection. With `cancellation`, a cancel interrupts the statement
    /// running (`sqlite3_interrupt`) and this throws `CancellationError`.
    func read<T>(_ cancellation: BlockingCancellation?, _ body: (Database) throws -> T) throws -> T {
        let queue = queues[next.add(1, ordering: .relaxed).oldValue % queues.count]
        do {
            return try queue.read { db in
                guard let cancellation else { return try body(db) }
                let connection = Connection(pointer: db.sqliteConnection)
                return try cancellation.whileRunning(interrupt: { connection.interrupt() }) { try body(db) }
            }
        } catch let error as LocatorError {
            throw error
        } catch {
            if cancellation?.isCancelled == true { throw CancellationError() }
            throw LocatorError(.notALocator, "\(url.lastPathComponent) could not be read: \(error)")
        }
    }

    /// A connection's handle, for interrupting its statement from another thread (SQLite allows
    /// that call from any thread while the connection is open: `read` keeps it open).
    private struct Connection: @unchecked Sendable {
        let pointer: OpaquePointer?
        func interrupt() { sqlite3_interrupt(pointer) }
    }

    // MARK: - Geocode

    /// Candidates for one line of text ("Mannerheimintie 12, Helsinki"), best first.
    /// Empty, overlong or symbol-only text gives no candidates rather than an error.
    /// - Parameter cancellation: the caller's (`runBlocking(_:)`): a cancel interrupts the search.
    /// - Parameter searchText: the address or place as typed.
    /// - Parameter parameters: how many candidates, the lowest score, where to prefer and where to look.
    public func geocode(
        _ searchText: String, parameters: GeocodeParameters = GeocodeParameters(), cancellation: BlockingCancellation? = nil
    ) throws -> [GeocodeResult] {
        try check(parameters.outputSpatialReference)
        let text = String(searchText.prefix(1_000))
        let near = try parameters.preferredSearchLocation.map { try toLocator($0, from: parameters.locationSpatialReference, input: .location) }
        let area = try parameters.searchArea.map { try toLocator($0, from: parameters.searchAreaSpatialReference) }
        let scored = try read(cancellation) { db in try LocatorSearch.search(text, typing: false, in: db, geographic: geographic) }
        let kept = filter(scored, categories: parameters.categories, area: area).filter { $0.score >= parameters.minScore }
        return try LocatorSearch.ranked(kept, near: near, geographic: geographic).prefix(max(parameters.maxResults, 0)).map {
            try result($0, attributes: parameters.resultAttributeNames, outSR: parameters.outputSpatialReference)
        }
    }

    /// Candidates for an address given in parts (`Address`, `Neighborhood`, `City`, `Postal`,
    /// `Region`, `CountryCode`; ArcGIS's multi-field input).
    public func geocode(
        searchValues: [String: String], parameters: GeocodeParameters = GeocodeParameters(), cancellation: BlockingCancellation? = nil
    ) throws -> [GeocodeResult] {
        let order = ["address", "singleline", "address2", "address3", "neighborhood", "postal", "city", "subregion", "region"]
        let values = searchValues.map { ($0.key.lowercased(), $0.value) }.sorted { (order.firstIndex(of: $0.0) ?? 99) < (order.firstIndex(of: $1.0) ?? 99) }
        return try geocode(values.map(\.1).filter { !$0.isEmpty }.joined(separator: ", "), parameters: parameters, cancellation: cancellation)
    }

    /// The candidate a suggestion stands for, with score 100.
    public func geocode(magicKey: String, parameters: GeocodeParameters = GeocodeParameters(), cancellation: BlockingCancellation? = nil) throws -> [GeocodeResult] {
        guard let key = MagicKey(magicKey) else { throw LocatorError(.invalidInput, "\"\(magicKey.prefix(40))\" is not a suggestion key of this locator", input: .magicKey) }
        guard let row = try read(cancellation, { db in try Row.fetchOne(db, sql: "SELECT * FROM entries WHERE id = ?", arguments: [key.id]) }) else {
            throw LocatorError(.invalidInput, "the suggestion is no longer in this locator (it was rebuilt); search again", input: .magicKey)
        }
        let record = EntryRecord(row: row)
        var scored = LocatorSearch.score(record, id: key.id, tokens: [])
        scored.score = 100
        scored.asPlaceName = key.placeName
        scored.label = LocatorSearch.label(record, asPlaceName: key.placeName)
        scored.matchType = key.placeName && record.kind == .pointAddress ? .poi : record.kind
        return [try result(scored, attributes: parameters.resultAttributeNames, outSR: parameters.outputSpatialReference)]
    }

    // MARK: - Suggest

    /// Completions of partly typed text, best first.
    public func suggest(_ searchText: String, parameters: SuggestParameters = SuggestParameters(), cancellation: BlockingCancellation? = nil) throws -> [SuggestResult] {
        let text = String(searchText.prefix(1_000))
        let near = try parameters.preferredSearchLocation.map { try toLocator($0, from: parameters.locationSpatialReference, input: .location) }
        let area = try parameters.searchArea.map { try toLocator($0, from: parameters.searchAreaSpatialReference) }
        let scored = try read(cancellation) { db in try LocatorSearch.search(text, typing: true, in: db) }
        let kept = filter(scored, categories: parameters.categories, area: area).filter { $0.score > 0 }
        return LocatorSearch.ranked(kept, near: near, geographic: geographic).prefix(max(parameters.maxResults, 0)).map {
            SuggestResult(label: $0.label, magicKey: MagicKey(id: $0.id, placeName: $0.asPlaceName).description)
        }
    }

    // MARK: - Reverse geocode

    /// The addresses nearest `location` within `maxDistance` metres (nearest first); a street
    /// name when no address is that near; empty when nothing is.
    public func reverseGeocode(
        _ location: Position, parameters: ReverseGeocodeParameters = ReverseGeocodeParameters(), cancellation: BlockingCancellation? = nil
    ) throws -> [GeocodeResult] {
        try check(parameters.outputSpatialReference)
        let p = try toLocator(location, from: parameters.locationSpatialReference, input: .location)
        let types = Set(parameters.featureTypes.compactMap { LocatorMatchType(name: $0) })
        let wantsPoints = types.isEmpty || types.contains(.pointAddress) || types.contains(.poi)
        let wantsStreets = types.isEmpty || types.contains(.streetName) || types.contains(.streetAddress)
        let maxDistance = max(0, min(parameters.maxDistance, 50_000))
        let found = try read(cancellation) { db -> [LocatorSearch.Scored] in
            var radius = min(25, maxDistance)
            while true {
                let box = searchBox(around: p, metres: radius)
                if wantsPoints {
                    // The cells whose extent meets the box, then their points.
                    let rows = try Row.fetchAll(db, sql: """
                        SELECT e.* FROM address_cells c JOIN entries e ON e.cell = c.id
                        WHERE c.minx <= ? AND c.maxx >= ? AND c.miny <= ? AND c.maxy >= ?
                        """, arguments: [box.xmax, box.xmin, box.ymax, box.ymin])
                    var near: [LocatorSearch.Scored] = []
                    for row in rows {
                        let record = EntryRecord(row: row)
                        let named = record.street == nil
                        let type: LocatorMatchType = named ? .poi : .pointAddress
                        if !types.isEmpty, !types.contains(type) { continue }
                        let d = LocatorGeometry.distance(Position(x: record.x, y: record.y), p, geographic: geographic, metresPerUnit: metresPerUnit)
                        guard d <= radius else { continue }
                        var s = LocatorSearch.Scored(
                            record: record, id: row[0], score: 100, completeness: 1, asPlaceName: named,
                            label: LocatorSearch.label(record, asPlaceName: named), matchType: type)
                        s.distance = d
                        near.append(s)
                    }
                    if !near.isEmpty { return near }
                }
                if radius >= maxDistance { break }
                radius = min(radius * 2, maxDistance)
            }
            guard wantsStreets else { return [] }
            return try nearestStreet(to: p, within: maxDistance, types: types, in: db).map { [$0] } ?? []
        }
        var seen = Set<String>()
        let ordered = found.sorted { ($0.distance, $0.id) < ($1.distance, $1.id) }.filter { seen.insert($0.label).inserted }
        return try ordered.prefix(max(parameters.maxResults, 1)).map {
            try result($0, attributes: parameters.resultAttributeNames, outSR: parameters.outputSpatialReference)
        }
    }

    /// The nearest street line within `metres`: as a house number when the line carries ranges
    /// (and StreetAddress is wanted), else as its street.
    private func nearestStreet(to p: Position, within metres: Double, types: Set<LocatorMatchType>, in db: Database) throws -> LocatorSearch.Scored? {
        let box = searchBox(around: p, metres: metres)
        let rows = try Row.fetchAll(db, sql: """
            SELECT s.street_key, \(StreetRanges.Segment.columns.split(separator: ",").map { "s." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", "))
            FROM segment_rtree r JOIN segments s ON s.id = r.id
            WHERE r.minx <= ? AND r.maxx >= ? AND r.miny <= ? AND r.maxy >= ?
            """, arguments: [box.xmax, box.xmin, box.ymax, box.ymin])
        var best: (key: String, segment: StreetRanges.Segment, point: Position, distance: Double)?
        for row in rows {
            let segment = StreetRanges.Segment(row: row, first: 1)
            let (q, d) = LocatorGeometry.nearest(on: segment.line, to: p, geographic: geographic, metresPerUnit: metresPerUnit)
            if d <= metres, d < (best?.distance ?? .infinity) { best = (row[0], segment, q, d) }
        }
        guard let best else { return nil }
        if types.isEmpty || types.contains(.streetAddress), let house = StreetRanges.house(at: p, on: best.segment, geographic: geographic) {
            let pad = geographic ? 0.0009 : 90 / metresPerUnit
            var record = EntryRecord(kind: .streetAddress, x: best.point.x, y: best.point.y, box: (best.point.x - pad, best.point.y - pad, best.point.x + pad, best.point.y + pad))
            record.house = String(house)
            record.street = best.segment.street
            record.city = best.segment.city
            record.postal = best.segment.postal
            var s = LocatorSearch.Scored(
                record: record, id: -1, score: 100, completeness: 1, asPlaceName: false,
                label: LocatorSearch.label(record, asPlaceName: false), matchType: .streetAddress)
            s.distance = best.distance
            return s
        }
        guard types.isEmpty || types.contains(.streetName) else { return nil }
        // The street's entry: its key, or (lines without a city) the street of that name nearest.
        let part = String(best.key.prefix { $0 != "|" })
        let entries = try Row.fetchAll(
            db, sql: "SELECT * FROM entries WHERE kind = 3 AND street_key >= ? AND street_key < ?", arguments: [part + "|", part + "}"])
        guard let row = entries.first(where: { ($0[11] as String?) == best.key }) ?? entries.first else { return nil }
        var record = EntryRecord(row: row)
        record.x = best.point.x
        record.y = best.point.y
        var s = LocatorSearch.Scored(
            record: record, id: row[0], score: 100, completeness: 1, asPlaceName: false,
            label: LocatorSearch.label(record, asPlaceName: false), matchType: .streetName)
        s.distance = best.distance
        return s
    }

    // MARK: - Helpers

    /// An output spatial reference PROJ knows, checked before searching (an empty answer must not
    /// hide a bad one).
    private func check(_ reference: SpatialReference?) throws {
        guard let reference, reference != info.spatialReference else { return }
        do {
            _ = try CoordinateSystemInfo(reference)
        } catch {
            throw LocatorError(.invalidInput, "PROJ does not know the spatial reference \(reference.wkid)", input: .outputSpatialReference)
        }
    }

    private func filter(_ scored: [LocatorSearch.Scored], categories: [String], area: Envelope?) -> [LocatorSearch.Scored] {
        let types = Set(categories.compactMap { name -> LocatorMatchType? in
            name.caseInsensitiveCompare("City") == .orderedSame ? .locality : LocatorMatchType(name: name)
        })
        return scored.filter { s in
            if !types.isEmpty, !types.contains(s.matchType) { return false }
            if let area, !(s.record.x >= area.xmin && s.record.x <= area.xmax && s.record.y >= area.ymin && s.record.y <= area.ymax) { return false }
            return true
        }
    }

    func searchBox(around p: Position, metres: Double) -> Envelope {
        if geographic {
            let dy = metres / 111_320
            let dx = metres / (111_320 * max(cos(p.y * .pi / 180), 0.01))
            return Envelope(xmin: p.x - dx, ymin: p.y - dy, xmax: p.x + dx, ymax: p.y + dy)
        }
        let d = metres / metresPerUnit
        return Envelope(xmin: p.x - d, ymin: p.y - d, xmax: p.x + d, ymax: p.y + d)
    }

    /// A position given in `reference` (nil: the locator's), in the locator's system: refused,
    /// naming `input`, when it is not finite, cannot be transformed, or (in a geographic
    /// locator) is not a longitude and latitude.
    private func toLocator(_ given: Position, from reference: SpatialReference?, input: LocatorError.Input) throws -> Position {
        guard given.x.isFinite, given.y.isFinite else { throw LocatorError(.invalidInput, "the location is not a pair of finite numbers", input: input) }
        var p = given
        if let reference, reference != info.spatialReference {
            do {
                p = try CoordinateTransform(from: reference, to: info.spatialReference).transform(given)
            } catch {
                throw LocatorError(.invalidInput, "cannot take a location in EPSG:\(reference.wkid) to EPSG:\(info.spatialReference.wkid): \(error)", input: input)
            }
        }
        if geographic, !(abs(p.y) <= 90 && abs(p.x) <= 180) {
            throw LocatorError(.invalidInput, "(\(given.x), \(given.y)) is not a longitude and latitude", input: input)
        }
        return p
    }

    private func toLocator(_ e: Envelope, from reference: SpatialReference?) throws -> Envelope {
        let a = try toLocator(Position(x: e.xmin, y: e.ymin), from: reference, input: .searchArea)
        let b = try toLocator(Position(x: e.xmax, y: e.ymax), from: reference, input: .searchArea)
        return Envelope(xmin: min(a.x, b.x), ymin: min(a.y, b.y), xmax: max(a.x, b.x), ymax: max(a.y, b.y))
    }

    private func result(_ s: LocatorSearch.Scored, attributes names: [String], outSR: SpatialReference?) throws -> GeocodeResult {
        let r = s.record
        // Points get an extent of about 100 m around them; streets and areas their own.
        let pad = geographic ? 0.0009 : 90 / metresPerUnit
        var extent = Envelope(xmin: min(r.xmin, r.x - pad), ymin: min(r.ymin, r.y - pad), xmax: max(r.xmax, r.x + pad), ymax: max(r.ymax, r.y + pad))
        var location = Position(x: r.x, y: r.y)
        var reference = info.spatialReference
        if let outSR, outSR != info.spatialReference {
            do {
                let transform = try CoordinateTransform(from: info.spatialReference, to: outSR)
                location = try transform.transform(location)
                let a = try transform.transform(Position(x: extent.xmin, y: extent.ymin))
                let b = try transform.transform(Position(x: extent.xmax, y: extent.ymax))
                extent = Envelope(xmin: min(a.x, b.x), ymin: min(a.y, b.y), xmax: max(a.x, b.x), ymax: max(a.y, b.y))
                reference = outSR
            } catch {
                throw LocatorError(.invalidInput, "cannot give results in EPSG:\(outSR.wkid): \(error)", input: .outputSpatialReference)
            }
        }
        let streetAddress = r.street.map { street in r.house.map { "\(street) \($0)" } ?? street }
        var all: [String: JSONValue] = [
            "Match_addr": .string(s.label), "LongLabel": .string(s.label),
            "ShortLabel": .string(s.asPlaceName ? (r.name ?? s.label) : (streetAddress ?? s.label)),
            "Addr_type": .string(s.matchType.description), "Type": .string(s.matchType == .poi ? "POI" : ""),
            "PlaceName": r.name.map { .string($0) } ?? .string(""),
            "Place_addr": .string(LocatorSearch.label(r, asPlaceName: false)),
            "AddNum": .string(r.house ?? ""), "StAddr": .string(streetAddress ?? ""), "StName": .string(r.street ?? ""),
            "City": .string(r.city ?? ""), "Postal": .string(r.postal ?? ""), "Score": .number(s.score),
            "X": .number(location.x), "Y": .number(location.y), "DisplayX": .number(location.x), "DisplayY": .number(location.y),
            "Xmin": .number(extent.xmin), "Xmax": .number(extent.xmax), "Ymin": .number(extent.ymin), "Ymax": .number(extent.ymax),
            "Distance": .number((s.distance * 100).rounded() / 100),
            "Source_ID": r.fid.map { .integer($0) } ?? .null,
        ]
        if !names.contains("*") {
            let wanted = Set((names.isEmpty ? ["Match_addr", "Addr_type", "Score"] : names + ["Match_addr", "Addr_type", "Score"]).map { $0.lowercased() })
            all = all.filter { wanted.contains($0.key.lowercased()) }
        }
        return GeocodeResult(
            label: s.label, score: s.score, location: location, displayLocation: location, extent: extent,
            spatialReference: reference, attributes: all, matchType: s.matchType)
    }
}

/// A suggestion's key: the entry and whether it was suggested by its place name.
struct MagicKey: CustomStringConvertible {
    var id: Int64
    var placeName: Bool

    init(id: Int64, placeName: Bool) {
        self.id = id
        self.placeName = placeName
    }

    init?(_ text: String) {
        guard text.count <= 24, let first = text.first, first == "a" || first == "p", let id = Int64(text.dropFirst()), id > 0 else { return nil }
        self.id = id
        placeName = first == "p"
    }

    var description: String { "\(placeName ? "p" : "a")\(id)" }
}

/// Opening locator files.
enum LocatorReader {
    static func openQueue(_ url: URL, readOnly: Bool, check: Bool = true) throws -> DatabaseQueue {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw LocatorError(.notFound, "no locator at \(url.path)")
        }
        var config = Configuration()
        config.readonly = readOnly
        config.busyMode = .timeout(10)
        do {
            let queue = try DatabaseQueue(path: url.path, configuration: config)
            if check { try queue.read { db in try LocatorLayout.check(db, name: url.lastPathComponent) } }
            return queue
        } catch let error as LocatorError {
            throw error
        } catch {
            throw LocatorError(.notALocator, "\(url.lastPathComponent) is not a locator file: \(error)")
        }
    }
}
