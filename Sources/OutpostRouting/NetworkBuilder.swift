import Foundation
import GRDB
import OutpostCore
import OutpostGeoprocessing
import OutpostStorage

/// Which fields of a street layer a network reads.
public struct NetworkFieldMap: Hashable, Sendable, Codable {
    /// Street names (for directions).
    public var name: String?
    /// One-way flags: `yes`/`true`/`1` along the line, `-1`/`reverse` against it.
    public var oneway: String?
    /// Speed limits ("50", "30 mph"); road classes give the default.
    public var speed: String?
    /// Road classes (OpenStreetMap `highway`): which modes may use a street, default speeds.
    public var roadClass: String?

    /// A map of these fields.
    public init(name: String? = nil, oneway: String? = nil, speed: String? = nil, roadClass: String? = nil) {
        self.name = name
        self.oneway = oneway
        self.speed = speed
        self.roadClass = roadClass
    }

    var fieldNames: [String] { [name, oneway, speed, roadClass].compactMap { $0 } }
}

/// What a network build made.
public struct NetworkBuildSummary: Hashable, Sendable {
    /// Junctions (and line ends) made nodes.
    public var nodes = 0
    /// Street edges made.
    public var edges = 0
    /// Source lines left out (no geometry, or matching the restriction).
    public var skipped = 0
    /// Shortcuts each travel mode's contraction hierarchy added.
    public var shortcuts: [TravelMode: Int] = [:]
    /// Seconds spent building the hierarchies (part of `seconds`).
    public var hierarchySeconds = 0.0
    /// How long the build took.
    public var seconds = 0.0
}

/// The on-disk layout of a `.network` file (docs/routing.md).
enum NetworkLayout {
    /// "OPNW".
    static let applicationID: Int32 = 0x4F50_4E57
    /// Layout 2 added the `hierarchies` table; layout 1 files are read (their hierarchies
    /// built on opening).
    static let version = 2

    static let schema = """
        CREATE TABLE network_info(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE nodes(id INTEGER PRIMARY KEY, x REAL NOT NULL, y REAL NOT NULL);
        CREATE TABLE edges(
            id INTEGER PRIMARY KEY, from_node INTEGER NOT NULL, to_node INTEGER NOT NULL, length REAL NOT NULL,
            drive_seconds REAL, walk_seconds REAL, oneway INTEGER NOT NULL, name TEXT, class TEXT, fid INTEGER,
            line BLOB NOT NULL);
        CREATE VIRTUAL TABLE edge_rtree USING rtree(id, minx, maxx, miny, maxy);
        """

    static let requiredTables = ["network_info", "nodes", "edges", "edge_rtree"]

    /// Checks the file and answers its layout version.
    @discardableResult
    static func check(_ db: Database, name: String) throws -> Int {
        guard try Int32.fetchOne(db, sql: "PRAGMA application_id") == applicationID else {
            throw RoutingError(.notANetwork, "\(name) is not an Outpost network file")
        }
        let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
        guard (1...Self.version).contains(version) else {
            throw RoutingError(.notANetwork, "\(name) has network layout \(version); this version of Outpost reads layouts 1 to \(Self.version)")
        }
        let tables = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"))
        if let missing = (requiredTables + (version >= 2 ? ["hierarchies"] : [])).first(where: { !tables.contains($0) }) {
            throw RoutingError(.notANetwork, "\(name) is damaged: table \(missing) is missing")
        }
        let quick = try String.fetchAll(db, sql: "PRAGMA quick_check(1)")
        guard quick == ["ok"] else { throw RoutingError(.notANetwork, "\(name) is damaged: \(quick.joined(separator: "; "))") }
        return version
    }
}

/// Builds `.network` files from street line layers: nodes where lines meet (their ends and the
/// vertices they share, within a snapping tolerance), edges between them with their length in
/// geodesic metres, driving and walking times, one-way direction, name and class.
public enum NetworkBuilder {
    /// Builds the network of `layer` at `url`.
    /// - Parameters:
    ///   - geodatabase: the geodatabase holding the street lines.
    ///   - layer: the line layer to build from.
    ///   - fields: which fields hold the name, class, speed and one-way direction.
    ///   - whereClause: only rows matching it are read (all when nil).
    ///   - url: where the `.network` file is written.
    ///   - overwrite: replace a file already at `url` (refused otherwise).
    ///   - restrict: rows matching this where clause are left out (footways for a car network…).
    ///   - tolerance: metres within which line vertices are one node.
    @discardableResult
    public static func create(
        from geodatabase: Geodatabase, layer: String, fields: NetworkFieldMap, whereClause: String? = nil, restrict: String? = nil,
        tolerance: Double = 0.01, at url: URL, overwrite: Bool = false
    ) throws -> NetworkBuildSummary {
        let started = Date()
        guard let definition = geodatabase.schema.layer(named: layer) else {
            throw RoutingError(.invalidInput, "\(geodatabase.url.lastPathComponent) has no layer \(layer)")
        }
        guard [.lineString, .multiLineString].contains(definition.geometryType?.type) else {
            throw RoutingError(.invalidInput, "\(layer) is not a line layer")
        }
        for name in fields.fieldNames where !definition.fields.contains(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }) {
            throw RoutingError(.invalidInput, "\(layer) has no field \(name)")
        }
        if FileManager.default.fileExists(atPath: url.path), !overwrite {
            throw RoutingError(.invalidInput, "\(url.lastPathComponent) exists (overwrite it to build again)")
        }
        let wkid = definition.spatialReference?.wkid ?? 4326
        let system = try CoordinateSystemInfo(SpatialReference(wkid: wkid))
        let geographic = system.isGeographic, metresPerUnit = system.metresPerUnit ?? 1
        // The snapping grid, in coordinate units.
        let cell = geographic ? tolerance / 111_320 : tolerance / metresPerUnit
        var clauses = [whereClause.map { "(\($0))" }, restrict.map { "NOT (\($0))" }].compactMap { $0 }
        if clauses.isEmpty { clauses = ["1=1"] }
        let query = FeatureQuery(where: clauses.joined(separator: " AND "), outFields: fields.fieldNames, returnGeometry: true)
        let table = try geodatabase.table(named: layer)

        struct Key: Hashable {
            var x: Int64
            var y: Int64
        }
        func key(_ p: Position) -> Key { Key(x: Int64((p.x / cell).rounded()), y: Int64((p.y / cell).rounded())) }
        func parts(_ g: Geometry?) -> [[Position]] {
            switch g {
            case .lineString(let l)?: [l.positions]
            case .multiLineString(let m)?: m.lineStrings.map(\.positions)
            default: []
            }
        }

        // Pass 1: how often each vertex occurs (line ends count twice: they are always nodes).
        var uses: [Key: Int32] = [:]
        var read = 0, usable = 0
        do {
            try geodatabase.read { conn in
                try table.forEach(matching: query, in: conn) { feature in
                    read += 1
                    let lines = parts(feature.geometry).filter { $0.count >= 2 }
                    if !lines.isEmpty, EdgeAttributes(feature, fields).isTravelled { usable += 1 }
                    for line in lines {
                        for (i, p) in line.enumerated() { uses[key(p), default: 0] += (i == 0 || i == line.count - 1) ? 2 : 1 }
                    }
                }
            }
        } catch let error as StorageError {
            throw RoutingError(.invalidInput, "cannot read \(layer): \(error)")
        }
        // A network no mode can route on is refused before anything is written.
        guard usable > 0 else {
            let what = read == 0 ? "no features" : "\(read) features, none a line a travel mode may use"
            throw RoutingError(.invalidInput, "layer \(layer) has \(what); no network was written")
        }

        let building = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).building")
        defer { try? FileManager.default.removeItem(at: building) }
        var summary = NetworkBuildSummary()
        let queue = try DatabaseQueue(path: building.path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536")
            try db.execute(sql: "PRAGMA application_id = \(NetworkLayout.applicationID); PRAGMA user_version = \(NetworkLayout.version)")
            try db.inTransaction {
                try db.execute(sql: NetworkLayout.schema + ContractionHierarchy.schema)
                let insertNode = try db.makeStatement(sql: "INSERT INTO nodes(id, x, y) VALUES (?, ?, ?)")
                let insertEdge = try db.makeStatement(sql: """
                    INSERT INTO edges(from_node, to_node, length, drive_seconds, walk_seconds, oneway, name, class, fid, line)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                let insertBox = try db.makeStatement(sql: "INSERT INTO edge_rtree(id, minx, maxx, miny, maxy) VALUES (?, ?, ?, ?, ?)")
                var nodeIDs: [Key: Int64] = [:]
                func node(_ p: Position) throws -> Int64 {
                    let k = key(p)
                    if let id = nodeIDs[k] { return id }
                    let id = Int64(nodeIDs.count + 1)
                    nodeIDs[k] = id
                    try insertNode.execute(arguments: [id, p.x, p.y])
                    return id
                }
                try geodatabase.read { conn in
                    try table.forEach(matching: query, in: conn) { feature in
                        let lines = parts(feature.geometry).filter { $0.count >= 2 }
                        guard !lines.isEmpty else {
                            summary.skipped += 1
                            return
                        }
                        let attributes = EdgeAttributes(feature, fields)
                        for line in lines {
                            // Split at every vertex that is a node.
                            var start = 0
                            for i in 1..<line.count where i == line.count - 1 || (uses[key(line[i])] ?? 0) >= 2 {
                                let piece = Array(line[start...i])
                                start = i
                                let length = zip(piece, piece.dropFirst()).reduce(0.0) { total, pair in
                                    total + (geographic ? Geodesic.distance(pair.0, pair.1) : hypot(pair.1.x - pair.0.x, pair.1.y - pair.0.y) * metresPerUnit)
                                }
                                let from = try node(piece[0]), to = try node(piece[piece.count - 1])
                                var box = (Double.infinity, -Double.infinity, Double.infinity, -Double.infinity)
                                for p in piece { box = (min(box.0, p.x), max(box.1, p.x), min(box.2, p.y), max(box.3, p.y)) }
                                try insertEdge.execute(arguments: [
                                    from, to, length, attributes.drivable ? length / (attributes.speed / 3.6) : nil,
                                    attributes.walkable ? length / TravelMode.walkingSpeed : nil, attributes.oneway, attributes.name,
                                    attributes.roadClass, feature.objectID, PackedPositions.encode(piece),
                                ])
                                try insertBox.execute(arguments: [db.lastInsertedRowID, box.0, box.1, box.2, box.3])
                                summary.edges += 1
                            }
                        }
                    }
                }
                summary.nodes = nodeIDs.count
                let now = ISO8601DateFormatter().string(from: Date())
                for (k, v) in [
                    ("format", "outpost-network"), ("layout", "\(NetworkLayout.version)"), ("wkid", "\(wkid)"),
                    ("source", geodatabase.url.path), ("layer", layer), ("tolerance", "\(tolerance)"), ("created", now),
                    ("fields", String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)),
                ] {
                    try db.execute(sql: "INSERT INTO network_info(key, value) VALUES (?, ?)", arguments: [k, v])
                }
                // Each travel mode's contraction hierarchy, stored so opening is quick.
                let hierarchyStarted = Date()
                let graphs = try RoadNetwork.loadGraphs(db).graphs
                let hierarchies = ContractionHierarchy.build(graphs)
                for (mode, hierarchy) in hierarchies.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                    try hierarchy.write(mode: mode, to: db)
                    summary.shortcuts[mode] = hierarchy.shortcutCount
                }
                summary.hierarchySeconds = Date().timeIntervalSince(hierarchyStarted)
                return .commit
            }
        }
        try queue.close()
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
        try FileManager.default.moveItem(at: building, to: url)
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }

    /// What a street's row says about travelling on it.
    struct EdgeAttributes {
        var name: String?
        var roadClass: String?
        var oneway: Int
        var speed: Double
        var drivable: Bool
        var walkable: Bool
        /// Whether any travel mode may use the street.
        var isTravelled: Bool { drivable || walkable }

        init(_ feature: Feature, _ fields: NetworkFieldMap) {
            func text(_ field: String?) -> String? {
                guard let field else { return nil }
                let value = feature.attributes[field] ?? feature.attributes.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
                switch value {
                case .string(let s): return s.isEmpty ? nil : s
                case .integer(let i): return String(i)
                case .double(let d): return String(d)
                default: return nil
                }
            }
            name = text(fields.name)
            roadClass = text(fields.roadClass)?.lowercased()
            switch text(fields.oneway)?.lowercased() {
            case "yes", "true", "1": oneway = 1
            case "-1", "reverse": oneway = -1
            default: oneway = 0
            }
            let cls = roadClass ?? ""
            speed = TravelMode.speed(text(fields.speed)) ?? TravelMode.defaultSpeeds[cls] ?? 30
            drivable = !TravelMode.notDrivable.contains(cls)
            walkable = !TravelMode.notWalkable.contains(cls)
        }
    }
}
