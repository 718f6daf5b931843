import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostTiles

/// A tiled map service over a tile cache: `…/MapServer` (ArcGIS map service info with `tileInfo`)
/// and `…/MapServer/tile/{level}/{row}/{col}` (the tile's bytes; 404 when the cache has none).
struct MapServerRoutes {
    let cache: TileCache
    let name: String
    let parameters: RequestParameters
    let writing: ResponseWriting

    func respond(_ route: [String]) throws -> Response {
        switch route.count {
        case 0:
            _ = try parameters.format()
            return writing.json(try info())
        case 4 where route[0] == "tile":
            guard let level = Int(route[1]), let row = Int(route[2]), let col = Int(route[3]), level >= 0, row >= 0, col >= 0, level <= 30 else {
                throw ServiceError(400, "a tile is tile/{level}/{row}/{col} with non-negative integers, not \(route.dropFirst().joined(separator: "/"))")
            }
            guard let bytes = try tile(level: level, row: row, col: col) else {
                throw ServiceError(404, "no tile \(level)/\(row)/\(col) in \(name)")
            }
            var response = writing.bytes(ByteBuffer(bytes: bytes), contentType: Self.contentType(bytes))
            response.headers[.cacheControl] = "public, max-age=86400"
            return response
        default:
            throw ServiceError.notFound("MapServer/\(route.joined(separator: "/"))")
        }
    }

    private func tile(level: Int, row: Int, col: Int) throws -> [UInt8]? {
        do {
            return try cache.tile(level: level, row: row, col: col)
        } catch let error as TileCacheError {
            throw ServiceError(500, "the tile cache is damaged: \(error)")
        }
    }

    private func info() throws -> JSONValue {
        guard let info = cache.info else { throw ServiceError(500, "the tile cache did not load") }
        let sr: JSONValue = info.scheme.spatialReference.wkid == 3857 ? ["wkid": 102100, "latestWkid": 3857] : ["wkid": .integer(Int64(info.scheme.spatialReference.wkid))]
        var out: [String: JSONValue] = [
            "currentVersion": ServiceInfo.currentVersion, "mapName": .string(info.name), "serviceDescription": "", "singleFusedMapCache": true,
            "capabilities": "Map,TilesOnly", "spatialReference": sr, "units": "esriMeters",
            "tileInfo": try JSONValue.parse(info.tileInfoJSON()), "minLOD": .integer(Int64(info.minLevel)), "maxLOD": .integer(Int64(info.maxLevel)),
            "minScale": .number(info.scheme.lod(info.minLevel)?.scale ?? 0), "maxScale": .number(info.scheme.lod(info.maxLevel)?.scale ?? 0),
            "exportTilesAllowed": false, "layers": [], "tables": [],
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
