import Foundation

#if canImport(Glibc)
    import Glibc
#endif
import Hummingbird
import NIOCore
import OutpostCore
import OutpostSQLiteService
import OutpostTiles
import OutpostVectorTiles

/// A tiled map service over a tile cache: `…/MapServer` (ArcGIS map service info with `tileInfo`)
/// and `…/MapServer/tile/{level}/{row}/{col}` (the tile's bytes; 404 when the cache has none).
struct MapServerRoutes {
    let cache: TileCache
    let name: String
    let parameters: RequestParameters
    let writing: ResponseWriting
    var metrics: ServerMetrics? = nil
    /// The layers the service lists (``MapServerOperations/layers()``).
    var layers: [JSONValue] = []

    /// `…/MapServer`: the service's description.
    func info() throws -> Response {
        _ = try parameters.format()
        guard let info = cache.info else { throw ServiceError(500, "the tile cache did not load") }
        return writing.json(try Self.info(info, layers: layers, capabilities: "Map"))
    }

    /// `…/MapServer/tile/{level}/{row}/{col}`.
    func tile(_ address: [String]) throws -> Response {
        guard address.count == 3, let level = Int(address[0]), let row = Int(address[1]), let col = Int(address[2]), level >= 0, row >= 0, col >= 0, level <= 30 else {
            throw ServiceError(400, "a tile is tile/{level}/{row}/{col} with non-negative integers, not \(address.joined(separator: "/"))")
        }
        guard let bytes = try tile(level: level, row: row, col: col) else {
            throw ServiceError(404, "no tile \(level)/\(row)/\(col) in \(name)")
        }
        metrics?.tile("cache")
        var response = writing.bytes(ByteBuffer(bytes: bytes), contentType: Self.contentType(bytes))
        response.headers[.cacheControl] = "public, max-age=86400"
        return response
    }

    private func tile(level: Int, row: Int, col: Int) throws -> [UInt8]? {
        do {
            return try cache.tile(level: level, row: row, col: col)
        } catch let error as TileCacheError {
            throw ServiceError(500, "the tile cache is damaged: \(error)")
        }
    }

    /// The map service's description: its tiling (`tileInfo`, levels), extent, layers and what
    /// it answers (`capabilities`: Map for tiles and export, Query and Data for features).
    static func info(_ info: TileCacheInfo, layers: [JSONValue], capabilities: String) throws -> JSONValue {
        let sr: JSONValue = info.scheme.spatialReference.wkid == 3857 ? ["wkid": 102100, "latestWkid": 3857] : ["wkid": .integer(Int64(info.scheme.spatialReference.wkid))]
        var out: [String: JSONValue] = [
            "currentVersion": ServiceInfo.currentVersion, "mapName": .string(info.name), "serviceDescription": "", "singleFusedMapCache": true,
            "capabilities": .string(capabilities), "spatialReference": sr, "units": "esriMeters",
            "supportedImageFormatTypes": "PNG32,PNG24,PNG,PNG8", "maxImageHeight": .integer(Int64(MapServerOperations.maxImageSize)),
            "maxImageWidth": .integer(Int64(MapServerOperations.maxImageSize)), "supportsDynamicLayers": false, "maxRecordCount": 1000,
            "tileInfo": try JSONValue.parse(info.tileInfoJSON()), "minLOD": .integer(Int64(info.minLevel)), "maxLOD": .integer(Int64(info.maxLevel)),
            "minScale": .number(info.scheme.lod(info.minLevel)?.scale ?? 0), "maxScale": .number(info.scheme.lod(info.maxLevel)?.scale ?? 0),
            "exportTilesAllowed": false, "tables": [],
            "layers": .array(layers.map { l in
                [
                    "id": l["id"] ?? 0, "name": l["name"] ?? "", "parentLayerId": -1, "defaultVisibility": true, "subLayerIds": .null,
                    "minScale": l["minScale"] ?? 0, "maxScale": l["maxScale"] ?? 0, "type": l["type"] ?? "Feature Layer", "geometryType": l["geometryType"] ?? .null,
                ]
            }),
        ]
        if let e = info.fullExtent {
            let extent: JSONValue = ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax), "spatialReference": sr]
            out["fullExtent"] = extent
            out["initialExtent"] = extent
        }
        return .object(out)
    }

    static func contentType(_ bytes: [UInt8]) -> String {
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "image/png" }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if bytes.count > 12, bytes[8...11].elementsEqual("WEBP".utf8) { return "image/webp" }
        return "application/octet-stream"
    }
}

/// `…/<feature service>/MapServer`: the service's layers drawn into PNG tiles on request. Tiles
/// are kept on disk under the service's generation, so an edit makes later requests draw anew
/// and an unchanged service answers from the files.
struct RenderedMapServerRoutes {
    let backend: SQLiteServiceBackend
    let directory: URL
    let parameters: RequestParameters
    let writing: ResponseWriting
    var metrics: ServerMetrics? = nil
    var layers: [JSONValue] = []
    static let maxLevel = 20

    /// `…/MapServer`: the service's description.
    func info() async throws -> Response {
        _ = try parameters.format()
        let info = TileCacheInfo(
            name: backend.name, scheme: .webMercator, minLevel: 0, maxLevel: Self.maxLevel, format: "PNG",
            fullExtent: try await MapRenderer(geodatabase: backend.geodatabase).extent())
        return writing.json(try MapServerRoutes.info(info, layers: layers, capabilities: "Map,Query,Data"))
    }

    /// `…/MapServer/tile/{level}/{row}/{col}`: drawn once per generation, then kept.
    func tile(_ address: [String]) async throws -> Response {
        let renderer = MapRenderer(geodatabase: backend.geodatabase)
        guard address.count == 3, let level = Int(address[0]), let row = Int(address[1]), let col = Int(address[2]), (0...Self.maxLevel).contains(level),
            row >= 0, col >= 0, row < 1 << level, col < 1 << level
        else {
            throw ServiceError(400, "a tile is tile/{level}/{row}/{col} within levels 0–\(Self.maxLevel), not \(address.joined(separator: "/"))")
        }
        let generation = try await backend.generation()
        let key = TileKey(level: level, row: row, col: col)
        // Drawn once per generation; the first tile of a new one removes the older ones' tiles.
        let cache = VersionedTiles(directory: directory.appendingPathComponent(backend.name), prefix: "g", fileExtension: "png")
        let bytes: [UInt8]
        if let kept = cache.kept(key, version: generation) {
            bytes = kept
            metrics?.tile("kept")
        } else {
            bytes = try await renderer.tile(key)
            metrics?.tile("drawn")
            cache.keep(bytes, for: key, version: generation)
        }
        var response = writing.bytes(ByteBuffer(bytes: bytes), contentType: "image/png")
        response.headers[.cacheControl] = "no-cache"
        return response
    }
}

/// `…/<vector tile file>/MapServer`: the file's tiles drawn by its style into PNG tiles on
/// request (the file does not change while it is served, so nothing is kept).
struct VectorMapServerRoutes {
    let source: VectorTileRenderSource
    let parameters: RequestParameters
    let writing: ResponseWriting
    var metrics: ServerMetrics? = nil
    var layers: [JSONValue] = []

    /// `…/MapServer`: the service's description.
    func info() async throws -> Response {
        _ = try parameters.format()
        return writing.json(try MapServerRoutes.info(try await source.cacheInfo(), layers: layers, capabilities: "Map"))
    }

    /// `…/MapServer/tile/{level}/{row}/{col}`: drawn now; 404 above the vector tiles' first zoom.
    func tile(_ address: [String]) async throws -> Response {
        guard address.count == 3, let level = Int(address[0]), let row = Int(address[1]), let col = Int(address[2]), (0...source.maxLevel).contains(level),
            row >= 0, col >= 0, row < 1 << level, col < 1 << level
        else {
            throw ServiceError(400, "a tile is tile/{level}/{row}/{col} within levels 0–\(source.maxLevel), not \(address.joined(separator: "/"))")
        }
        guard let bytes = try await MapServerOperations.drawing({ try await source.tile(TileKey(level: level, row: row, col: col)) }) else {
            throw ServiceError(404, "no tile \(level)/\(row)/\(col) in \(source.label): its vector tiles start at zoom \(source.renderer.zooms.lowerBound)")
        }
        metrics?.tile("drawn")
        var response = writing.bytes(ByteBuffer(bytes: bytes), contentType: "image/png")
        response.headers[.cacheControl] = "public, max-age=3600"
        return response
    }
}
