import Foundation
import OutpostCore
import OutpostTiles

/// Vector tiles in a vector tile package (`.vtpk`), the layout ArcGIS writes and reads (and QGIS
/// 3.26 on): a stored ZIP holding `esriinfo/iteminfo.xml` and `item.pkinfo`; `p12/root.json`, the
/// VectorTileServer description (512-pixel Web Mercator levels, `indexedVector`, the bundles'
/// storage under `resourceInfo`); `p12/resources/styles/root.json`, a Mapbox GL style of the
/// layers; the gzipped tiles in Compact Cache V2 bundles under `p12/tile/Lzz/`; and
/// `p12/tilemap/root.json`, the quadtree of the tiles present (`0` none, `1` a tile whose area
/// is drawn from it at every finer level, or the four children NW, NE, SW, SE).
///
/// Tiles go to a spool as the generator makes them and into the package bundle by bundle; the
/// package appears only when complete.
public enum VectorTilePackage {
    /// The folder of the tile bundles inside the package.
    public static let tileFolder = "p12/tile/"

    /// The package's grid: Web Mercator in 512-pixel tiles (level 0 one tile of 78,271.517 m per
    /// pixel), the grid of ArcGIS's vector basemaps; tile z/x/y is the same tile as in MBTiles.
    public static func tilingScheme(maxLevel: Int) -> TilingScheme {
        let web = TilingScheme.webMercator
        let lods = (0...max(0, maxLevel)).map { level -> LevelOfDetail in
            let resolution = 78_271.516_964 / Double(1 << level)
            return LevelOfDetail(level: level, resolution: resolution, scale: resolution * Double(web.dpi) * TilingScheme.inchesPerMetre)
        }
        return TilingScheme(spatialReference: .webMercator, originX: web.originX, originY: web.originY, tileSize: 512, dpi: web.dpi, lods: lods)
    }

    /// Writes the tiles `generator` makes over `area` (Web Mercator; the data's extent when nil)
    /// as a package at `url`, named `name` (the file's name when nil).
    @discardableResult
    public static func export(_ generator: VectorTileGenerator, area: Envelope? = nil, to url: URL, name: String? = nil) async throws -> VectorTileGenerator.Summary {
        try await VectorTileOutput.export(generator, area: area, to: url, format: .vtpk, name: name)
    }

    static func write(_ spool: TileSpool, _ d: TileSetDescription, to url: URL) throws {
        let (name, bounds) = (d.name, d.bounds)
        let p = UInt32(CompactBundle.packetSize)
        spool.sort { a, b in
            if a.level != b.level { return a.level < b.level }
            if a.row / p != b.row / p { return a.row / p < b.row / p }
            if a.col / p != b.col / p { return a.col / p < b.col / p }
            return a.row != b.row ? a.row < b.row : a.col < b.col
        }
        let info = TileCacheInfo(name: name, scheme: tilingScheme(maxLevel: d.maxZoom), minLevel: d.minZoom, maxLevel: d.maxZoom, format: "pbf", fullExtent: bounds)
        let root = rootJSON(info)
        let id = itemID(root)
        let style = d.style
        let writer = try TileCacheWriter(
            packageAt: url, info: info, tileFolder: tileFolder,
            entries: [
                ("esriinfo/", []), ("esriinfo/iteminfo.xml", itemInfoXML(info, id: id)), ("esriinfo/item.pkinfo", packageInfoXML(name: name, id: id)),
                ("p12/", []), ("p12/root.json", Array(root.jsonData)), ("p12/resources/", []), ("p12/resources/styles/", []),
                ("p12/resources/styles/root.json", Array(style.jsonData)),
            ])
        for e in spool.entries { try writer.add(e.key, data: [UInt8](try spool.read(offset: e.offset, length: e.length))) }
        let map = tileMap(spool.entries.lazy.map(\.key))
        try writer.finish(appending: [("p12/tilemap/", []), ("p12/tilemap/root.json", Array(map.utf8))])
    }

    /// A VectorTileServer's description (what `p12/root.json` holds) of tiles at zooms
    /// `minZoom`–`maxZoom` over `extent` (Web Mercator; the world when nil).
    public static func serviceDescription(name: String, minZoom: Int, maxZoom: Int, extent: Envelope?) -> JSONValue {
        rootJSON(TileCacheInfo(name: name, scheme: tilingScheme(maxLevel: maxZoom), minLevel: minZoom, maxLevel: maxZoom, format: "pbf", fullExtent: extent))
    }

    /// `p12/root.json`: the VectorTileServer description ArcGIS's readers open the package by.
    static func rootJSON(_ info: TileCacheInfo) -> JSONValue {
        let sr: JSONValue = ["wkid": 102100, "latestWkid": 3857]
        let lods = info.scheme.lods.map { lod -> JSONValue in ["level": .integer(Int64(lod.level)), "resolution": .number(lod.resolution), "scale": .number(lod.scale)] }
        let world = Envelope(xmin: info.scheme.originX, ymin: -info.scheme.originY, xmax: -info.scheme.originX, ymax: info.scheme.originY)
        let e = info.fullExtent ?? world
        let extent: JSONValue = ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax), "spatialReference": sr]
        return [
            "currentVersion": 11.1, "name": .string(info.name), "copyrightText": "", "capabilities": "TilesOnly,Tilemap", "type": "indexedVector",
            "tileMap": "tilemap", "defaultStyles": "resources/styles", "tiles": ["tile/{z}/{y}/{x}.pbf"], "exportTilesAllowed": false,
            "initialExtent": extent, "fullExtent": extent,
            "minScale": .number(info.scheme.lod(info.minLevel)?.scale ?? 0), "maxScale": .number(info.scheme.lod(info.maxLevel)?.scale ?? 0),
            "tileInfo": [
                "rows": 512, "cols": 512, "dpi": .integer(Int64(info.scheme.dpi)), "format": "pbf",
                "origin": ["x": .number(info.scheme.originX), "y": .number(info.scheme.originY)], "spatialReference": sr, "lods": .array(lods),
            ],
            "maxzoom": .integer(Int64(info.maxLevel)), "minLOD": .integer(Int64(info.minLevel)), "maxLOD": .integer(Int64(info.maxLevel)),
            "resourceInfo": [
                "styleVersion": 8, "tileCompression": "gzip",
                "cacheInfo": ["storageInfo": ["packetSize": .integer(Int64(CompactBundle.packetSize)), "storageFormat": "compactV2"]],
            ],
        ]
    }

    /// The tile map of `keys` as JSON text: `{"index": [NW, NE, SW, SE]}` below the level-0 tile,
    /// each node `0` (no tile), `1` (a tile with none finer) or its four children. A node with
    /// children may have no tile of its own (a level above a layer's first zoom, say).
    static func tileMap<Keys: Sequence<TileKey>>(_ keys: Keys) -> String {
        func pack(_ z: Int, _ x: Int, _ y: Int) -> UInt64 { UInt64(z) << 58 | UInt64(x) << 29 | UInt64(y) }
        var present = Set<UInt64>()
        var parents = Set<UInt64>()
        for k in keys {
            present.insert(pack(k.level, k.col, k.row))
            var (z, x, y) = (k.level, k.col, k.row)
            while z > 0 {
                (z, x, y) = (z - 1, x / 2, y / 2)
                guard parents.insert(pack(z, x, y)).inserted else { break }
            }
        }
        var out = "{\"index\":"
        func node(_ z: Int, _ x: Int, _ y: Int) {
            let key = pack(z, x, y)
            if parents.contains(key) { return children(z, x, y) }
            out += present.contains(key) ? "1" : "0"
        }
        func children(_ z: Int, _ x: Int, _ y: Int) {
            out += "["
            for (i, (dx, dy)) in [(0, 0), (1, 0), (0, 1), (1, 1)].enumerated() {
                if i > 0 { out += "," }
                node(z + 1, 2 * x + dx, 2 * y + dy)
            }
            out += "]"
        }
        children(0, 0, 0)
        out += "}"
        return out
    }

    /// A GUID-shaped id that is a hash of the package's description (the same export, the same bytes).
    static func itemID(_ root: JSONValue) -> String {
        let bytes = Array(root.jsonData)
        let (a, b) = bytes.withUnsafeBytes { (FastHash.hash64($0), FastHash.hash64($0, seed: 0x2545_F491_4F6C_DD1D)) }
        let d = Array(String(format: "%016llX%016llX", a, b))
        return "{\(String(d[0..<8]))-\(String(d[8..<12]))-\(String(d[12..<16]))-\(String(d[16..<20]))-\(String(d[20..<32]))}"
    }

    static func xml(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// `esriinfo/iteminfo.xml`: the item's name, id, type and extent (longitude/latitude).
    static func itemInfoXML(_ info: TileCacheInfo, id: String) -> [UInt8] {
        var extent = ""
        if let e = info.fullExtent, let g = try? WebMercator.convert(e, from: .webMercator, to: .wgs84) {
            extent = "<extent><xmin>\(g.xmin)</xmin><ymin>\(g.ymin)</ymin><xmax>\(g.xmax)</xmax><ymax>\(g.ymax)</ymax></extent>"
        }
        let name = xml(info.name)
        let text = """
            <?xml version="1.0" encoding="utf-8"?>
            <ESRI_ItemInformation Culture="en-US"><name>\(name)</name><guid>\(id)</guid><title>\(name)</title>\
            <description>Vector tiles written by outpost</description><summary></summary><tags>vector tiles</tags>\
            <type>Vector Tile Package</type><typekeywords><typekeyword>Vector Tile Package</typekeyword><typekeyword>vtpk</typekeyword></typekeywords>\
            \(extent)<spatialreference>WGS_1984_Web_Mercator_Auxiliary_Sphere</spatialreference><accessinformation></accessinformation><licenseinfo></licenseinfo>\
            </ESRI_ItemInformation>

            """
        return Array(text.utf8)
    }

    /// `esriinfo/item.pkinfo`: the package's id, name and type.
    static func packageInfoXML(name: String, id: String) -> [UInt8] {
        let text = """
            <?xml version="1.0" encoding="utf-8"?>
            <pkinfo Culture="en-US"><ID>\(id)</ID><name>\(xml(name))</name><version>2.0</version><size>-1</size>\
            <type>Vector Tile Package</type><servable>false</servable><packagelocation></packagelocation><pkinfolocation></pkinfolocation></pkinfo>

            """
        return Array(text.utf8)
    }
}

/// Reads a vector tile package, any writer's: its description, style and tile map, and its tiles
/// (gzipped, as stored) through the map.
public final class VectorTilePackageReader: Sendable {
    /// The package read.
    public let url: URL
    /// `p12/root.json`.
    public let root: JSONValue
    /// The first zoom with tiles (`minLOD`).
    public let minZoom: Int
    /// The last zoom with tiles (`maxLOD`).
    public let maxZoom: Int
    private let cache: TileCache

    /// Opens `url`.
    /// - Throws: ``VectorTileError`` `corrupt` when it is not a vector tile package.
    public init(url: URL) async throws {
        self.url = url
        let cache = TileCache(fileURL: url)
        do {
            try await cache.load()
        } catch let error as TileCacheError {
            throw VectorTileError(.corrupt, "\(url.lastPathComponent): \(error.message)")
        }
        guard cache.isVectorTilePackage, let info = cache.info, let bytes = try? cache.resource(named: "p12/root.json"),
            let root = try? JSONValue.parse(Data(bytes))
        else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) is not a vector tile package (no p12/root.json)") }
        self.cache = cache
        self.root = root
        minZoom = info.minLevel
        maxZoom = info.maxLevel
    }

    /// A JSON file of the package (`p12/resources/styles/root.json`, `p12/tilemap/root.json`).
    public func json(_ name: String) throws -> JSONValue? {
        guard let bytes = try resource(name) else { return nil }
        do { return try JSONValue.parse(Data(bytes)) } catch { throw VectorTileError(.corrupt, "\(url.lastPathComponent)/\(name) is not JSON") }
    }

    /// A file of the package, as stored.
    public func resource(_ name: String) throws -> [UInt8]? {
        do { return try cache.resource(named: name) } catch let error as TileCacheError { throw VectorTileError(.corrupt, error.message) }
    }

    /// The tile at `key` (XYZ rows), gzipped, nil when there is none.
    public func tile(_ key: TileKey) throws -> [UInt8]? {
        do { return try cache.tile(key) } catch let error as TileCacheError { throw VectorTileError(.corrupt, error.message) }
    }

    /// Every tile the tile map names, level by level down the quadtree; a leaf (`1`) the bundles
    /// lack is an error (a node with children may have no tile of its own).
    public func forEachTile(_ body: (TileKey, [UInt8]) throws -> Void) throws {
        let path = "p12/" + (root["tileMap"]?.stringValue ?? "tilemap") + "/root.json"
        guard let map = try json(path), let index = map["index"]?.arrayValue else {
            throw VectorTileError(.corrupt, "\(url.lastPathComponent) has no tile map (\(path))")
        }
        func visit(_ node: JSONValue, _ key: TileKey) throws {
            if node.integerValue == 0 { return }
            let bytes = key.level >= minZoom ? try tile(key) : nil
            if let bytes { try body(key, bytes) }
            guard let children = node.arrayValue else {
                guard bytes != nil else { throw VectorTileError(.corrupt, "the tile map names tile \(key.level)/\(key.col)/\(key.row), which no bundle holds") }
                return
            }
            try walk(children, below: key)
        }
        func walk(_ children: [JSONValue], below key: TileKey) throws {
            guard children.count == 4 else { throw VectorTileError(.corrupt, "a tile map node below \(key.level)/\(key.col)/\(key.row) has \(children.count) children, not 4") }
            for (i, child) in children.enumerated() {
                try visit(child, TileKey(level: key.level + 1, row: 2 * key.row + i / 2, col: 2 * key.col + i % 2))
            }
        }
        let top = TileKey(level: 0, row: 0, col: 0)
        if minZoom == 0, let bytes = try tile(top) { try body(top, bytes) }
        try walk(index, below: top)
    }
}
