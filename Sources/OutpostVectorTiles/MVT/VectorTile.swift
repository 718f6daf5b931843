import OutpostCore

/// A point in a tile's integer grid (0…extent across the tile, y down; a buffer may lie outside).
public struct TilePoint: Hashable, Sendable, CustomStringConvertible {
    /// Across, from the tile's left edge.
    public var x: Int32
    /// Down, from the tile's top edge.
    public var y: Int32

    /// The point at (`x`, `y`).
    public init(_ x: Int32, _ y: Int32) {
        self.x = x
        self.y = y
    }

    public var description: String { "(\(x), \(y))" }
}

/// A feature's geometry in tile coordinates, as Mapbox Vector Tile 2.1 carries it.
public enum VectorTileGeometry: Hashable, Sendable {
    /// One or more points.
    case points([TilePoint])
    /// One or more lines of two points or more.
    case lines([[TilePoint]])
    /// One or more polygons, each an exterior ring (positive area by the surveyor's formula in
    /// tile coordinates, so clockwise as drawn, y down) and its holes (negative); rings are not
    /// closed by repeating the first point.
    case polygons([[[TilePoint]]])

    /// The feature type number the format gives it.
    var typeNumber: UInt64 {
        switch self {
        case .points: 1
        case .lines: 2
        case .polygons: 3
        }
    }

    /// Twice the signed area of a ring (the surveyor's formula), positive for an exterior.
    public static func doubleArea(_ ring: [TilePoint]) -> Int64 {
        guard ring.count >= 3 else { return 0 }
        var sum: Int64 = 0
        var previous = ring[ring.count - 1]
        for p in ring {
            sum += Int64(previous.x) * Int64(p.y) - Int64(p.x) * Int64(previous.y)
            previous = p
        }
        return sum
    }
}

/// A value of a feature's attribute.
public enum VectorTileValue: Hashable, Sendable, CustomStringConvertible {
    /// Text.
    case string(String)
    /// A floating-point number (the format's float and double).
    case double(Double)
    /// A whole number (the format's int, uint and sint).
    case int(Int64)
    /// True or false.
    case bool(Bool)

    public var description: String {
        switch self {
        case .string(let s): s
        case .double(let d): String(d)
        case .int(let i): String(i)
        case .bool(let b): String(b)
        }
    }
}

/// A feature of a vector tile layer.
public struct VectorTileFeature: Hashable, Sendable {
    /// The feature's id (the source's object id), if it has one.
    public var id: UInt64?
    /// Its attributes, in the order written.
    public var properties: [String: VectorTileValue]
    /// Its shape in tile coordinates.
    public var geometry: VectorTileGeometry

    /// A feature of this id, attributes and geometry.
    public init(id: UInt64?, properties: [String: VectorTileValue], geometry: VectorTileGeometry) {
        self.id = id
        self.properties = properties
        self.geometry = geometry
    }
}

/// A named layer of a vector tile.
public struct VectorTileLayer: Hashable, Sendable {
    /// The layer's name (unique in its tile).
    public var name: String
    /// The grid size across the tile (4096 unless the writer chose otherwise).
    public var extent: Int
    /// Its features, in the order written.
    public var features: [VectorTileFeature]

    /// A layer of this name, grid and features.
    public init(name: String, extent: Int = 4096, features: [VectorTileFeature] = []) {
        self.name = name
        self.extent = extent
        self.features = features
    }
}

/// A Mapbox Vector Tile (2.1): layers of features with attributes and integer geometry.
///
/// ```swift
/// let tile = try VectorTile(decoding: bytes)        // bytes not gzipped
/// for layer in tile.layers { print(layer.name, layer.features.count) }
/// ```
public struct VectorTile: Hashable, Sendable {
    /// The tile's layers, in the order written.
    public var layers: [VectorTileLayer]

    /// A tile of these layers.
    public init(layers: [VectorTileLayer]) {
        self.layers = layers
    }

    /// The tile's protobuf encoding.
    public func encoded() -> [UInt8] {
        var tile = ProtobufWriter()
        for layer in layers {
            var encoder = VectorTileLayerEncoder(name: layer.name, extent: layer.extent)
            for f in layer.features { encoder.add(f) }
            encoder.write(into: &tile)
        }
        return tile.bytes
    }

    /// Decodes a tile (not gzipped: see ``VectorTileCompression``).
    /// - Throws: ``VectorTileError`` with code `corrupt` for bytes that are not a valid tile.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ProtobufReader(bytes[...])
        var layers: [VectorTileLayer] = []
        while let (field, type) = try reader.next() {
            if field == 3, type == 2 {
                layers.append(try Self.decodeLayer(try reader.lengthDelimited()))
            } else {
                try reader.skip(type)
            }
        }
        self.layers = layers
    }

    static func decodeLayer(_ bytes: ArraySlice<UInt8>) throws -> VectorTileLayer {
        var reader = ProtobufReader(bytes)
        var name: String?
        var extent = 4096
        var version: UInt64 = 1
        var keys: [String] = []
        var values: [VectorTileValue] = []
        var rawFeatures: [ArraySlice<UInt8>] = []
        while let (field, type) = try reader.next() {
            switch (field, type) {
            case (1, 2): name = String(decoding: try reader.lengthDelimited(), as: UTF8.self)
            case (2, 2): rawFeatures.append(try reader.lengthDelimited())
            case (3, 2): keys.append(String(decoding: try reader.lengthDelimited(), as: UTF8.self))
            case (4, 2): values.append(try decodeValue(try reader.lengthDelimited()))
            case (5, 0):
                let e = try reader.varint()
                guard e > 0, e <= 1 << 20 else { throw ProtobufReader.damaged("layer extent \(e)") }
                extent = Int(e)
            case (15, 0): version = try reader.varint()
            default: try reader.skip(type)
            }
        }
        guard let name else { throw ProtobufReader.damaged("a layer has no name") }
        guard version <= 2 else { throw ProtobufReader.damaged("layer \(name) has version \(version)") }
        var layer = VectorTileLayer(name: name, extent: extent)
        layer.features.reserveCapacity(rawFeatures.count)
        for raw in rawFeatures { layer.features.append(try decodeFeature(raw, keys: keys, values: values, layer: name)) }
        return layer
    }

    static func decodeValue(_ bytes: ArraySlice<UInt8>) throws -> VectorTileValue {
        var reader = ProtobufReader(bytes)
        var value: VectorTileValue?
        while let (field, type) = try reader.next() {
            switch (field, type) {
            case (1, 2): value = .string(String(decoding: try reader.lengthDelimited(), as: UTF8.self))
            case (2, 5): value = .double(Double(Float(bitPattern: try reader.fixed32())))
            case (3, 1): value = .double(Double(bitPattern: try reader.fixed64()))
            case (4, 0): value = .int(Int64(bitPattern: try reader.varint()))
            case (5, 0):
                let u = try reader.varint()
                value = u <= UInt64(Int64.max) ? .int(Int64(u)) : .double(Double(u))
            case (6, 0): value = .int(Varint.unzigzag(try reader.varint()))
            case (7, 0): value = .bool(try reader.varint() != 0)
            default: try reader.skip(type)
            }
        }
        guard let value else { throw ProtobufReader.damaged("a value has no type") }
        return value
    }

    static func decodeFeature(_ bytes: ArraySlice<UInt8>, keys: [String], values: [VectorTileValue], layer: String) throws -> VectorTileFeature {
        var reader = ProtobufReader(bytes)
        var id: UInt64?
        var tags: [UInt32] = []
        var type: UInt64 = 0
        var commands: [UInt32] = []
        while let (field, wire) = try reader.next() {
            switch (field, wire) {
            case (1, 0): id = try reader.varint()
            case (2, 2): tags = try reader.packed()
            case (3, 0): type = try reader.varint()
            case (4, 2): commands = try reader.packed()
            default: try reader.skip(wire)
            }
        }
        guard tags.count % 2 == 0 else { throw ProtobufReader.damaged("a feature of \(layer) has an odd number of tags") }
        var properties: [String: VectorTileValue] = [:]
        for i in stride(from: 0, to: tags.count, by: 2) {
            guard Int(tags[i]) < keys.count, Int(tags[i + 1]) < values.count else {
                throw ProtobufReader.damaged("a feature of \(layer) names a key or value the layer lacks")
            }
            properties[keys[Int(tags[i])]] = values[Int(tags[i + 1])]
        }
        return VectorTileFeature(id: id, properties: properties, geometry: try decodeGeometry(commands, type: type, layer: layer))
    }

    static func decodeGeometry(_ commands: [UInt32], type: UInt64, layer: String) throws -> VectorTileGeometry {
        var parts: [[TilePoint]] = []
        var current: [TilePoint] = []
        var x: Int64 = 0, y: Int64 = 0
        var i = 0
        var closed: [Bool] = []
        func damaged(_ why: String) -> VectorTileError { ProtobufReader.damaged("a feature of \(layer): \(why)") }
        while i < commands.count {
            let id = commands[i] & 7, count = Int(commands[i] >> 3)
            i += 1
            switch id {
            case 1, 2:
                guard count > 0, commands.count - i >= 2 * count else { throw damaged("a command runs past the geometry") }
                if id == 1, type != 1 {
                    guard count == 1 else { throw damaged("MoveTo with \(count) points in a line or polygon") }
                    if !current.isEmpty {
                        parts.append(current)
                        closed.append(false)
                    }
                    current = []
                } else if id == 2, current.isEmpty {
                    throw damaged("LineTo before MoveTo")
                }
                for _ in 0..<count {
                    x += Varint.unzigzag(UInt64(commands[i]))
                    y += Varint.unzigzag(UInt64(commands[i + 1]))
                    i += 2
                    guard let px = Int32(exactly: x), let py = Int32(exactly: y) else { throw damaged("a coordinate out of range") }
                    current.append(TilePoint(px, py))
                }
            case 7:
                guard count == 1, type == 3, current.count >= 3 else { throw damaged("ClosePath out of place") }
                parts.append(current)
                closed.append(true)
                current = []
            default:
                throw damaged("command \(id)")
            }
        }
        if !current.isEmpty {
            parts.append(current)
            closed.append(false)
        }
        switch type {
        case 1:
            return .points(parts.flatMap { $0 })
        case 2:
            guard parts.allSatisfy({ $0.count >= 2 }) else { throw damaged("a line of fewer than two points") }
            return .lines(parts)
        case 3:
            guard closed.allSatisfy({ $0 }) else { throw damaged("a polygon ring not closed") }
            var polygons: [[[TilePoint]]] = []
            for ring in parts {
                let area = VectorTileGeometry.doubleArea(ring)
                if area > 0 {
                    polygons.append([ring])
                } else if area < 0 {
                    guard !polygons.isEmpty else { throw damaged("a polygon starts with a hole") }
                    polygons[polygons.count - 1].append(ring)
                }
            }
            return .polygons(polygons)
        default:
            throw damaged("geometry type \(type)")
        }
    }
}

/// Writes one layer: keys and values stored once each, features as they come.
struct VectorTileLayerEncoder {
    let name: String
    let extent: Int
    private var keys = Interned<String>()
    private var values = Interned<VectorTileValue>()
    private var features = ProtobufWriter()
    private var scratch = ProtobufWriter()
    private var commands: [UInt32] = []
    private var tags: [UInt32] = []
    private(set) var count = 0

    init(name: String, extent: Int) {
        self.name = name
        self.extent = extent
    }

    mutating func add(_ f: VectorTileFeature) {
        add(id: f.id, geometry: f.geometry, properties: f.properties.sorted { $0.key < $1.key })
    }

    /// Adds a feature; a geometry with nothing to draw is left out.
    mutating func add(id: UInt64?, geometry: VectorTileGeometry, properties: [(String, VectorTileValue)]) {
        commands.removeAll(keepingCapacity: true)
        Self.commands(geometry, into: &commands)
        guard !commands.isEmpty else { return }
        tags.removeAll(keepingCapacity: true)
        for (k, v) in properties {
            tags.append(keys.index(of: k))
            tags.append(values.index(of: v))
        }
        scratch.bytes.removeAll(keepingCapacity: true)
        if let id { scratch.field(1, varint: id) }
        if !tags.isEmpty { scratch.field(2, packed: tags) }
        scratch.field(3, varint: geometry.typeNumber)
        scratch.field(4, packed: commands)
        features.field(2, bytes: scratch.bytes)
        count += 1
    }

    /// The layer as a field of a tile.
    func write(into tile: inout ProtobufWriter) {
        guard count > 0 else { return }
        var layer = ProtobufWriter()
        layer.field(15, varint: 2)
        layer.field(1, string: name)
        layer.bytes.append(contentsOf: features.bytes)
        for k in keys.list { layer.field(3, string: k) }
        for v in values.list {
            var value = ProtobufWriter()
            switch v {
            case .string(let s): value.field(1, string: s)
            case .double(let d): value.field(3, double: d)
            case .int(let i): if i >= 0 { value.field(5, varint: UInt64(i)) } else { value.field(6, varint: Varint.zigzag(i)) }
            case .bool(let b): value.field(7, varint: b ? 1 : 0)
            }
            layer.field(4, bytes: value.bytes)
        }
        layer.field(5, varint: UInt64(extent))
        tile.field(3, bytes: layer.bytes)
    }

    /// Drawing commands of a geometry: parts with fewer points than their type needs are left out.
    static func commands(_ geometry: VectorTileGeometry, into out: inout [UInt32]) {
        var cx: Int32 = 0, cy: Int32 = 0
        func command(_ id: UInt32, _ count: Int) { out.append(id | UInt32(count) << 3) }
        func point(_ p: TilePoint) {
            out.append(ProtobufWriter.zigzag(p.x &- cx))
            out.append(ProtobufWriter.zigzag(p.y &- cy))
            cx = p.x
            cy = p.y
        }
        switch geometry {
        case .points(let points):
            guard !points.isEmpty else { return }
            command(1, points.count)
            points.forEach(point)
        case .lines(let lines):
            for line in lines where line.count >= 2 {
                command(1, 1)
                point(line[0])
                command(2, line.count - 1)
                line.dropFirst().forEach(point)
            }
        case .polygons(let polygons):
            for polygon in polygons {
                for ring in polygon where ring.count >= 3 {
                    command(1, 1)
                    point(ring[0])
                    command(2, ring.count - 1)
                    ring.dropFirst().forEach(point)
                    command(7, 1)
                }
            }
        }
    }
}

/// Values stored once each, numbered in the order first seen (a layer's keys and values).
struct Interned<Value: Hashable> {
    private var indexes: [Value: UInt32] = [:]
    private(set) var list: [Value] = []

    mutating func index(of v: Value) -> UInt32 {
        if let i = indexes[v] { return i }
        let i = UInt32(list.count)
        indexes[v] = i
        list.append(v)
        return i
    }
}
