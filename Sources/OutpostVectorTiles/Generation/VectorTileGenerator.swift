import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

/// Makes Mapbox Vector Tiles from a geodatabase's layers, as a definition says: each tile's
/// features are read through the layers' R-trees, projected to the tile's grid, cut to the tile
/// and its buffer, simplified, rounded and encoded; tiles are gzipped. Points thin out below the
/// last zoom, and a tile over the size limit sheds its least visible features until it fits.
///
/// ```swift
/// let generator = try VectorTileGenerator(geodatabase: gdb)        // every layer, z0–14
/// let summary = try await generator.generate { key, gzipped in try writer.add(key, data: gzipped) }
/// ```
public struct VectorTileGenerator: Sendable {
    /// The geodatabase read.
    public let geodatabase: Geodatabase
    /// What goes into the tiles.
    public let definition: VectorTileDefinition
    let layers: [ResolvedLayer]
    /// Source polygons repaired (when ``PolygonRepair`` has a repair installed), each checked once.
    let repaired: RepairedPolygons?

    /// Half the Web Mercator world's width, metres.
    static let halfWorld = 20_037_508.342789244

    /// A generator of `geodatabase`'s tiles by `definition` (every spatial layer, all fields,
    /// z0–14 when nil).
    /// - Throws: ``VectorTileError`` `invalidDefinition` when the definition does not fit the data
    ///   (or, with no definition, when no layer has geometry).
    public init(geodatabase: Geodatabase, definition: VectorTileDefinition? = nil) throws {
        self.geodatabase = geodatabase
        if definition == nil, !geodatabase.schema.layers.contains(where: \.isSpatial) {
            throw VectorTileError(.invalidDefinition, "\(geodatabase.schema.name) has no layer with geometry")
        }
        let definition = definition ?? .whole(geodatabase.schema)
        self.definition = definition
        layers = try definition.resolved(against: geodatabase.schema)
        repaired = PolygonRepair.current.map(RepairedPolygons.init)
    }

    /// The tile layers: name, geometry, fields, zooms (for metadata and styles).
    public var tileLayers: [TileLayerInfo] {
        layers.map { l in
            TileLayerInfo(
                name: l.name, source: l.source.name, geometryType: l.geometryType, minZoom: l.minZoom, maxZoom: l.maxZoom,
                fields: l.fields.map { f in (f, l.source.field(named: f)?.type ?? .string) } + (l.clusterCells == nil ? [] : [(Self.pointCountField, .integer)]))
        }
    }

    /// The union of the layers' extents, in Web Mercator (nil when every layer is empty).
    public func dataExtent() async throws -> Envelope? {
        var builder = Envelope.Builder()
        for l in layers {
            guard let e = try await geodatabase.table(id: l.source.id).extent() else { continue }
            builder.add(try WebMercator.convert(e, from: l.spatialReference, to: .webMercator))
        }
        return builder.envelope
    }

    /// What making one tile found.
    public struct Made: Sendable {
        /// The tile gzipped; nil when nothing falls in it.
        public var bytes: [UInt8]?
        /// Features written.
        public var features: Int
        /// Features left out to keep under the size limit.
        public var droppedForSize: Int
        /// Whether any feature touches the tile (so deeper tiles may hold some).
        public var touched: Bool
        /// Rows whose geometry or values could not be read, left out.
        public var unreadable: [Unreadable] = []
    }

    /// A source row left out because it cannot be read (another writer's degenerate geometry).
    public struct Unreadable: Hashable, Sendable {
        /// The geodatabase layer.
        public var layer: String
        /// The row's object id, when it could be read.
        public var objectID: Int64?
        /// Why it cannot be read.
        public var reason: String
    }

    /// One tile, gzipped; nil when nothing falls in it.
    public func tile(_ key: TileKey) async throws -> [UInt8]? {
        try await geodatabase.read { conn in try self.make(key, in: conn, gzip: GzipCompressor()).bytes }
    }

    /// What a run made.
    public struct Summary: Sendable {
        /// Tiles written (empty tiles are not).
        public var tiles = 0
        /// Their bytes, gzipped.
        public var bytes = 0
        /// Features written, over all tiles.
        public var features = 0
        /// Features left out of tiles over the size limit.
        public var droppedForSize = 0
        /// The largest tile and its size.
        public var largest: (key: TileKey, bytes: Int)?
        /// Tiles and bytes per zoom.
        public var levels: [Int: (tiles: Int, bytes: Int)] = [:]
        /// Source rows left out because they cannot be read (each once, however many tiles
        /// they touch).
        public var unreadable: [Unreadable] = []

        mutating func add(_ made: Made, key: TileKey) {
            for u in made.unreadable where !unreadable.contains(u) { unreadable.append(u) }
            guard let bytes = made.bytes else { return }
            tiles += 1
            self.bytes += bytes.count
            features += made.features
            droppedForSize += made.droppedForSize
            levels[key.level, default: (0, 0)].tiles += 1
            levels[key.level, default: (0, 0)].bytes += bytes.count
            if bytes.count > largest?.bytes ?? -1 { largest = (key, bytes.count) }
        }

        mutating func merge(_ other: Summary) {
            tiles += other.tiles
            bytes += other.bytes
            features += other.features
            droppedForSize += other.droppedForSize
            for (level, v) in other.levels {
                levels[level, default: (0, 0)].tiles += v.tiles
                levels[level, default: (0, 0)].bytes += v.bytes
            }
            if let l = other.largest, l.bytes > largest?.bytes ?? -1 { largest = l }
            for u in other.unreadable where !unreadable.contains(u) { unreadable.append(u) }
        }
    }

    /// Makes every tile of `definition`'s zooms over `area` (Web Mercator; the data's extent when
    /// nil) that holds a feature, visiting a tile's four children only when it had features, and
    /// hands each to `sink` (depth first, so memory stays flat at any zoom). `skip` passes over a
    /// tile (its children are still visited) — how a resumed export avoids work done.
    ///
    /// The first zooms are made here; below them the subtrees are shared among `concurrency`
    /// workers (the processor count by default), each reading the file through a connection of
    /// its own. `sink` is called for one tile at a time, in no fixed order.
    /// - Throws: ``VectorTileError`` `invalidArea` for an area outside the world; `CancellationError`.
    public func generate(
        area: Envelope? = nil, concurrency: Int = ProcessInfo.processInfo.activeProcessorCount, skip: @escaping @Sendable (TileKey) -> Bool = { _ in false },
        _ sink: @escaping @Sendable (TileKey, [UInt8]) throws -> Void
    ) async throws -> Summary {
        var wanted = area
        if wanted == nil { wanted = try await dataExtent() }
        guard let area = wanted else { return Summary() }
        try Self.checkInWorld(area)
        let d = definition
        let output = Locked(())
        let serialSink: @Sendable (TileKey, [UInt8]) throws -> Void = { key, bytes in try output.withLock { _ in try sink(key, bytes) } }
        // Subtrees from this zoom on go to the workers.
        let split = concurrency > 1 ? min(d.maxZoom, d.minZoom + 3) : Int.max
        let top: [TileKey] = TilingScheme.webMercator.tileRange(level: d.minZoom, covering: area).map { Array($0.keys) } ?? []
        var (summary, pending) = try await geodatabase.read { conn in
            var walk = Walk(generator: self, area: area, split: split, skip: skip, sink: serialSink)
            for key in top { try walk.visit(key, conn) }
            return (walk.summary, walk.pending)
        }
        guard !pending.isEmpty else { return summary }
        let next = TicketCounter()
        let queue = pending
        let url = geodatabase.url
        pending = []
        try await withThrowingTaskGroup(of: Summary.self) { group in
            for _ in 0..<min(concurrency, queue.count) {
                group.addTask {
                    let gdb = try Geodatabase.open(at: url, readOnly: true)
                    defer { try? gdb.close() }
                    return try gdb.read { conn in
                        var walk = Walk(generator: self, area: area, split: Int.max, skip: skip, sink: serialSink)
                        while true {
                            let i = next.take()
                            guard i < queue.count else { break }
                            try walk.visit(queue[i], conn)
                        }
                        return walk.summary
                    }
                }
            }
            for try await part in group { summary.merge(part) }
        }
        return summary
    }

    /// Hands out 0, 1, 2 … to workers taking turns.
    final class TicketCounter: Sendable {
        private let value = Locked(0)
        func take() -> Int { value.withLock { v in defer { v += 1 }; return v } }
    }

    /// A depth-first walk over tiles on one connection, with its own compressor and tallies.
    struct Walk {
        let generator: VectorTileGenerator
        let area: Envelope
        /// Tiles at this zoom are not made but kept in `pending` for the workers.
        let split: Int
        let skip: @Sendable (TileKey) -> Bool
        let sink: @Sendable (TileKey, [UInt8]) throws -> Void
        let compressor = GzipCompressor()
        var summary = Summary()
        var pending: [TileKey] = []

        init(generator: VectorTileGenerator, area: Envelope, split: Int, skip: @escaping @Sendable (TileKey) -> Bool, sink: @escaping @Sendable (TileKey, [UInt8]) throws -> Void) {
            self.generator = generator
            self.area = area
            self.split = split
            self.skip = skip
            self.sink = sink
        }

        mutating func visit(_ key: TileKey, _ conn: GeodatabaseConnection) throws {
            try Task.checkCancellation()
            guard VectorTileGenerator.envelope(of: key).intersects(area) else { return }
            if key.level == split {
                pending.append(key)
                return
            }
            let touched: Bool
            if skip(key) {
                touched = true
            } else {
                let made = try generator.make(key, in: conn, gzip: compressor)
                touched = made.touched
                summary.add(made, key: key)
                if let bytes = made.bytes { try sink(key, bytes) }
            }
            guard touched, key.level < generator.definition.maxZoom else { return }
            for dr in 0..<2 {
                for dc in 0..<2 { try visit(TileKey(level: key.level + 1, row: key.row * 2 + dr, col: key.col * 2 + dc), conn) }
            }
        }
    }

    /// A tile's envelope in Web Mercator (XYZ: row 0 at the top).
    public static func envelope(of key: TileKey) -> Envelope {
        let span = 2 * halfWorld / Double(1 << key.level)
        let xmin = -halfWorld + Double(key.col) * span, ymax = halfWorld - Double(key.row) * span
        return Envelope(xmin: xmin, ymin: ymax - span, xmax: xmin + span, ymax: ymax)
    }

    /// A feature ready to encode, with how much it shows (what size limits keep first).
    struct Candidate {
        var layer: Int
        /// The source's object id (the feature's id when the definition asks for ids).
        var id: UInt64?
        /// Where it comes in its layer (``zOrder(_:buffer:)``).
        var order: UInt64
        var geometry: VectorTileGeometry
        var properties: [(String, VectorTileValue)]
        var weight: Double
    }

    /// Makes one tile inside a read.
    func make(_ key: TileKey, in conn: GeodatabaseConnection, gzip: GzipCompressor) throws -> Made {
        let d = definition
        let z = key.level
        let extent = Double(d.extent)
        let envelope = Self.envelope(of: key)
        let span = envelope.xmax - envelope.xmin
        let margin = span * Double(d.buffer) / extent
        let buffered = Envelope(xmin: envelope.xmin - margin, ymin: envelope.ymin - margin, xmax: envelope.xmax + margin, ymax: envelope.ymax + margin)
        let clipper = TileClipper(extent: d.extent, buffer: d.buffer)
        let scale = extent / span
        var candidates: [Candidate] = []
        var touched = false
        var unreadable: [Unreadable] = []
        // Points kept at this zoom: a share 1/rate per zoom above the last.
        let pointShare = z >= d.maxZoom ? 1.0 : Foundation.pow(d.pointDropRate, -Double(d.maxZoom - z))
        // Layers that start deeper: is anything of theirs here (so the children are visited)?
        for layer in layers where z < layer.minZoom && !touched {
            var query = FeatureQuery(returnGeometry: false)
            query.envelope = try WebMercator.convert(buffered, from: .webMercator, to: layer.spatialReference)
            touched = try conn.geodatabase.table(id: layer.source.id).containsFeatures(matching: query, in: conn)
        }
        for (index, layer) in layers.enumerated() where (layer.minZoom...layer.maxZoom).contains(z) {
            let geographic = layer.spatialReference.isGeographic
            let project: (Position) -> TileCoordinate = { p in
                var mx = p.x, my = p.y
                if geographic {
                    mx = p.x * .pi / 180 * 6_378_137
                    // Past ±85.05° a position lies beyond the square world; the clipper cuts it
                    // there (clamping instead would fold rings such as Antarctica's onto the edge).
                    let lat = min(max(p.y, -89.9), 89.9) * .pi / 180
                    my = Foundation.log(Foundation.tan(.pi / 4 + lat / 2)) * 6_378_137
                }
                return TileCoordinate((mx - envelope.xmin) * scale, (envelope.ymax - my) * scale)
            }
            if let cells = layer.clusterCells, z < d.maxZoom {
                let (found, lost) = try cluster(layer, index: index, cells: cells, tile: envelope, project: project, in: conn)
                touched = touched || !found.isEmpty
                candidates += found
                unreadable += lost
                continue
            }
            var query = FeatureQuery()
            query.envelope = try WebMercator.convert(buffered, from: .webMercator, to: layer.spatialReference)
            query.outFields = layer.fields
            // Points are thinned in the query: the rows left out are never read.
            let sampled = layer.isPoints && pointShare < 1
            if sampled { query.sample = FeatureQuery.Sample(share: pointShare, salt: Int64(index)) }
            try conn.geodatabase.table(id: layer.source.id).forEach(matching: query, in: conn, unreadable: { id, error in
                unreadable.append(Unreadable(layer: layer.source.name, objectID: id, reason: String(describing: error)))
            }) { feature in
                guard var g = feature.geometry else { return }
                touched = true
                if layer.isPolygons, let repaired { g = repaired.geometry(g, layer: index, id: feature.objectID) }
                // Points kept by the sample's rank are dropped for size in the reverse order.
                var weight = layer.isPoints ? 1 - FeatureQuery.Sample.rank(feature.objectID ?? 0, salt: Int64(index)) : 0
                guard let geometry = Self.tileGeometry(g, project: project, clipper: clipper, tolerance: d.simplification, weight: &weight) else { return }
                var properties: [(String, VectorTileValue)] = []
                properties.reserveCapacity(layer.fields.count)
                for name in layer.fields {
                    if let v = feature.attributes[name].flatMap(Self.value) { properties.append((name, v)) }
                }
                candidates.append(
                    Candidate(
                        layer: index, id: feature.objectID.map { UInt64(bitPattern: $0) }, order: Self.zOrder(geometry, buffer: d.buffer), geometry: geometry,
                        properties: properties, weight: weight))
            }
            // Thinned out entirely here, points may still be below: deeper tiles keep more.
            if sampled, !touched {
                query.sample = nil
                touched = try conn.geodatabase.table(id: layer.source.id).containsFeatures(matching: query, in: conn)
            }
        }
        guard !candidates.isEmpty else { return Made(bytes: nil, features: 0, droppedForSize: 0, touched: touched, unreadable: unreadable) }
        var kept = candidates.count
        var bytes = encode(candidates, count: kept, gzip: gzip)
        if bytes.count > d.maxTileBytes {
            // The least visible go first: sort once, then keep shrinking shares until it fits.
            candidates.sort { $0.weight > $1.weight }
            while bytes.count > d.maxTileBytes, kept > 0 {
                kept = min(kept - 1, Int(Double(kept) * 0.9 * Double(d.maxTileBytes) / Double(bytes.count)))
                kept = max(kept, 0)
                bytes = encode(candidates, count: kept, gzip: gzip)
            }
            if kept == 0 { return Made(bytes: nil, features: 0, droppedForSize: candidates.count, touched: touched, unreadable: unreadable) }
        }
        return Made(bytes: bytes, features: kept, droppedForSize: candidates.count - kept, touched: touched, unreadable: unreadable)
    }

    /// A clustered layer's features in one tile: the points in each of `cells`×`cells` squares
    /// of the tile (squares of the zoom's grid, the same seen from every tile) drawn as one point
    /// at their mean position, with the attributes of the point the thinning ranks first and the
    /// count as `point_count`. The squares in the buffer are read whole, so a tile's neighbours
    /// draw the same clusters there; a cluster whose point falls beyond the buffer is left out.
    /// Memory goes with the squares, not the points.
    private func cluster(
        _ layer: ResolvedLayer, index: Int, cells: Int, tile: Envelope, project: (Position) -> TileCoordinate, in conn: GeodatabaseConnection
    ) throws -> (candidates: [Candidate], unreadable: [Unreadable]) {
        let d = definition
        let extent = Double(d.extent), cell = extent / Double(cells)
        // Whole squares over the buffer.
        let reach = (Double(d.buffer) / cell).rounded(.up) * cell
        let margin = (tile.xmax - tile.xmin) * reach / extent
        var query = FeatureQuery()
        query.envelope = try WebMercator.convert(
            Envelope(xmin: tile.xmin - margin, ymin: tile.ymin - margin, xmax: tile.xmax + margin, ymax: tile.ymax + margin), from: .webMercator, to: layer.spatialReference)
        query.outFields = layer.fields
        struct Square {
            var x = 0.0, y = 0.0, count = 0
            var rank = Double.infinity
            var first: Feature?
        }
        var squares: [Int64: Square] = [:]
        let side = Int64(cells) + 2 * Int64(reach / cell) + 2
        var unreadable: [Unreadable] = []
        try conn.geodatabase.table(id: layer.source.id).forEach(matching: query, in: conn, unreadable: { id, error in
            unreadable.append(Unreadable(layer: layer.source.name, objectID: id, reason: String(describing: error)))
        }) { feature in
            guard case .point(let point)? = feature.geometry, let position = point.position else { return }
            let at = project(position)
            guard at.x >= -reach, at.y >= -reach, at.x < extent + reach, at.y < extent + reach else { return }
            let key = Int64(((at.y + reach) / cell).rounded(.down)) * side + Int64(((at.x + reach) / cell).rounded(.down))
            let rank = FeatureQuery.Sample.rank(feature.objectID ?? 0, salt: Int64(index))
            var square = squares[key] ?? Square()
            square.x += at.x
            square.y += at.y
            square.count += 1
            if rank < square.rank { (square.rank, square.first) = (rank, feature) }
            squares[key] = square
        }
        let limit = Double(d.buffer)
        let candidates = squares.values.compactMap { square -> Candidate? in
            guard let first = square.first else { return nil }
            let n = Double(square.count)
            let x = square.x / n, y = square.y / n
            guard x >= -limit, y >= -limit, x <= extent + limit, y <= extent + limit else { return nil }
            let geometry = VectorTileGeometry.points([TileGrid.round(TileCoordinate(x, y))])
            var properties: [(String, VectorTileValue)] = []
            for name in layer.fields {
                if let v = first.attributes[name].flatMap(Self.value) { properties.append((name, v)) }
            }
            properties.append((Self.pointCountField, .int(Int64(square.count))))
            return Candidate(
                layer: index, id: first.objectID.map { UInt64(bitPattern: $0) }, order: Self.zOrder(geometry, buffer: d.buffer), geometry: geometry,
                properties: properties, weight: 1 - square.rank)
        }
        return (candidates, unreadable)
    }

    /// The attribute a clustered layer's features carry: how many points each stands for.
    public static let pointCountField = "point_count"

    /// The first `count` candidates encoded (layers in the definition's order) and gzipped.
    private func encode(_ candidates: [Candidate], count: Int, gzip: GzipCompressor) -> [UInt8] {
        var encoders = layers.map { VectorTileLayerEncoder(name: $0.name, extent: definition.extent) }
        // Within a layer, features in Z order of their first point (neighbours' coordinates and
        // values alike, so gzip finds more repeats: 3–7% smaller tiles than in object id order),
        // whatever the dropping did; the object id breaks ties.
        let ordered = candidates.prefix(count).sorted { ($0.layer, $0.order, $0.id ?? 0) < ($1.layer, $1.order, $1.id ?? 0) }
        let ids = definition.featureIDs
        for c in ordered { encoders[c.layer].add(id: ids ? c.id : nil, geometry: c.geometry, properties: c.properties) }
        var tile = ProtobufWriter()
        for e in encoders { e.write(into: &tile) }
        return gzip.gzip(tile.bytes)
    }

    /// The Z-order (Morton) key of a geometry's first point, the buffer's negative coordinates
    /// moved to zero.
    static func zOrder(_ geometry: VectorTileGeometry, buffer: Int) -> UInt64 {
        let first: TilePoint?
        switch geometry {
        case .points(let p): first = p.first
        case .lines(let l): first = l.first?.first
        case .polygons(let p): first = p.first?.first?.first
        }
        guard let first else { return 0 }
        func spread(_ v: Int) -> UInt64 {
            var x = UInt64(UInt32(truncatingIfNeeded: max(0, v + buffer)))
            x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
            x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
            x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F
            x = (x | x << 2) & 0x3333_3333_3333_3333
            x = (x | x << 1) & 0x5555_5555_5555_5555
            return x
        }
        return spread(Int(first.x)) | spread(Int(first.y)) << 1
    }

    static func value(_ v: FieldValue) -> VectorTileValue? {
        switch v {
        case .null, .blob: nil
        case .integer(let i): .int(i)
        case .double(let d): d.isFinite ? .double(d) : nil
        case .string(let s): .string(s)
        case .date(let date): .string(date.ISO8601Format())
        }
    }

    /// A geometry on the tile's grid, cut to the tile; nil when nothing of it is left. `weight`
    /// becomes its length or area in grid units (points keep theirs).
    static func tileGeometry(
        _ g: Geometry, project: (Position) -> TileCoordinate, clipper: TileClipper, tolerance: Double, weight: inout Double
    ) -> VectorTileGeometry? {
        switch g {
        case .point, .multiPoint:
            var points: [TileCoordinate] = []
            g.forEachPosition { points.append(project($0)) }
            let kept = clipper.points(points).map(TileGrid.round)
            return kept.isEmpty ? nil : .points(kept)
        case .lineString(let l):
            return lines([l], project: project, clipper: clipper, tolerance: tolerance, weight: &weight)
        case .multiLineString(let m):
            return lines(m.lineStrings, project: project, clipper: clipper, tolerance: tolerance, weight: &weight)
        case .polygon(let p):
            return polygons([p], project: project, clipper: clipper, tolerance: tolerance, weight: &weight)
        case .multiPolygon(let m):
            return polygons(m.polygons, project: project, clipper: clipper, tolerance: tolerance, weight: &weight)
        case .geometryCollection:
            return nil
        }
    }

    static func lines(
        _ lines: [LineString], project: (Position) -> TileCoordinate, clipper: TileClipper, tolerance: Double, weight: inout Double
    ) -> VectorTileGeometry? {
        var out: [[TilePoint]] = []
        var length = 0.0
        for line in lines {
            for part in clipper.line(line.positions.map(project)) {
                guard let q = TileGrid.line(TileGrid.simplify(part, tolerance: tolerance)) else { continue }
                for i in 1..<q.count {
                    let dx = Double(q[i].x - q[i - 1].x), dy = Double(q[i].y - q[i - 1].y)
                    length += (dx * dx + dy * dy).squareRoot()
                }
                out.append(q)
            }
        }
        weight = length
        return out.isEmpty ? nil : .lines(out)
    }

    static func polygons(
        _ polygons: [Polygon], project: (Position) -> TileCoordinate, clipper: TileClipper, tolerance: Double, weight: inout Double
    ) -> VectorTileGeometry? {
        var out: [[[TilePoint]]] = []
        var area = 0.0
        for polygon in polygons {
            // Rings without their closing point, exterior positive and holes negative on the grid.
            let rings = polygon.rings.enumerated().compactMap { i, ring -> [TileCoordinate]? in
                var r = ring.map(project)
                if r.count > 1, r.first == r.last { r.removeLast() }
                guard r.count >= 3 else { return nil }
                let a = TileClipper.doubleArea(r)
                if (i == 0) != (a > 0) { r.reverse() }
                return r
            }
            guard let first = rings.first, TileClipper.doubleArea(first) > 0 else { continue }
            for piece in clipper.polygon(rings) {
                guard let exterior = TileGrid.ring(TileGrid.simplifyRing(piece[0], tolerance: tolerance), exterior: true) else { continue }
                // A pinched or crossing exterior is several exteriors (touching at points, which
                // is valid): split where it crosses itself, then at repeated points. A loop
                // turning the other way is a hole where an exterior holds it, else a lobe of
                // its own (a bow tie's other half); an exterior inside another covers nothing new.
                let loops = TileGrid.loops(TileGrid.noded(exterior))
                let outward = loops.filter { VectorTileGeometry.doubleArea($0) > 0 }.sorted { VectorTileGeometry.doubleArea($0) > VectorTileGeometry.doubleArea($1) }
                guard !outward.isEmpty else { continue }
                func probe(_ ring: [TilePoint]) -> TileCoordinate {
                    TileCoordinate(Double(ring[0].x) + 0.5 * Double(ring[1].x - ring[0].x), Double(ring[0].y) + 0.5 * Double(ring[1].y - ring[0].y))
                }
                func inside(_ ring: [TilePoint], _ shell: [TilePoint]) -> Bool {
                    TileClipper.contains(shell.map { TileCoordinate(Double($0.x), Double($0.y)) }, probe(ring))
                }
                var shells: [[TilePoint]] = []
                for loop in outward where !shells.contains(where: { inside(loop, $0) }) { shells.append(loop) }
                var holes: [[TilePoint]] = []
                for loop in loops where VectorTileGeometry.doubleArea(loop) < 0 {
                    if shells.contains(where: { inside(loop, $0) }) { holes.append(loop) } else { shells.append(loop.reversed()) }
                }
                for hole in piece.dropFirst() {
                    if let h = TileGrid.ring(TileGrid.simplifyRing(hole, tolerance: tolerance), exterior: false) {
                        holes += TileGrid.loops(TileGrid.noded(h)).filter { VectorTileGeometry.doubleArea($0) < 0 }
                    }
                }
                var polygons = shells.map { [$0] }
                for hole in holes {
                    let owner = polygons.firstIndex { inside(hole, $0[0]) } ?? 0
                    polygons[owner].append(hole)
                }
                for p in polygons {
                    area += Double(p.reduce(0) { $0 + VectorTileGeometry.doubleArea($1) }) / 2
                    out.append(p)
                }
            }
        }
        weight = area
        return out.isEmpty ? nil : .polygons(out)
    }
}

/// A tile layer as metadata and styles describe it.
public struct TileLayerInfo: Sendable {
    /// The tile layer's name.
    public var name: String
    /// The geodatabase layer it comes from.
    public var source: String
    /// The source's geometry type.
    public var geometryType: GeometryType
    /// The first zoom the layer is in.
    public var minZoom: Int
    /// The last zoom the layer is in.
    public var maxZoom: Int
    /// Attribute names and their field types.
    public var fields: [(name: String, type: FieldType)]
}
