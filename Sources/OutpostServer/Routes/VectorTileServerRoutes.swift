import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostTiles
import OutpostVectorTiles

/// `…/<name>/VectorTileServer/…` over a vector tile file (`.vtpk`, `.pmtiles`, MBTiles of `pbf`):
/// the service's description in ArcGIS's shape (`tiles`, `tileInfo` of 512-pixel levels,
/// `defaultStyles`, `tileMap`, extents), `tile/{z}/{y}/{x}.pbf` (gzipped on the wire when the
/// client accepts it, else plain), the style, and the tile map.
struct VectorTileServerRoutes {
    let archive: VectorTileArchive
    let serviceURL: String
    let parameters: RequestParameters
    let writing: ResponseWriting
    var metrics: ServerMetrics? = nil

    static func table(service: @escaping @Sendable (RoutedRequest) throws -> VectorTileServerRoutes) -> RouteTable {
        var table = RouteTable()
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (VectorTileServerRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, by: service, answer)
        }
        on("") { r, _ in try r.info() }
        on("tile/:z/:y/:x") { r, call in try r.tile(try call.value("z"), try call.value("y"), try call.value("x")) }
        on("resources/styles") { r, _ in try r.style() }
        on("resources/styles/root.json") { r, _ in try r.style() }
        on("tilemap") { r, _ in try r.tileMap() }
        return table
    }

    /// `…/VectorTileServer`.
    func info() throws -> Response {
        _ = try parameters.format()
        var out = VectorTilePackage.serviceDescription(name: archive.name, minZoom: archive.minZoom, maxZoom: archive.maxZoom, extent: archive.bounds).objectValue ?? [:]
        out["currentVersion"] = ServiceInfo.currentVersion
        return writing.json(.object(out))
    }

    /// `…/VectorTileServer/tile/{z}/{y}/{x}.pbf`: 404 when the file has no such tile.
    func tile(_ z: String, _ y: String, _ x: String) throws -> Response {
        let column = x.hasSuffix(".pbf") ? String(x.dropLast(4)) : x
        guard let level = Int(z), let row = Int(y), let col = Int(column), (0...30).contains(level), row >= 0, col >= 0, row < 1 << level, col < 1 << level else {
            throw ServiceError(400, "a tile is tile/{z}/{y}/{x}.pbf with z 0–30 and y, x within the level, not \(z)/\(y)/\(x)")
        }
        let stored: [UInt8]?
        do {
            stored = try archive.tile(TileKey(level: level, row: row, col: col))
        } catch let error as VectorTileError {
            throw ServiceError(500, "the vector tiles are damaged: \(error.message)")
        }
        guard let gzipped = stored else { throw ServiceError(404, "no tile \(level)/\(row)/\(col) in \(archive.name)") }
        metrics?.tile("vector")
        var headers = HTTPFields()
        headers[.contentType] = "application/x-protobuf"
        headers[.cacheControl] = "public, max-age=86400"
        let body: [UInt8]
        if writing.gzip {
            headers[.contentEncoding] = "gzip"
            body = gzipped
        } else {
            do { body = try VectorTileCompression.plain(gzipped) } catch { throw ServiceError(500, "tile \(level)/\(row)/\(col) of \(archive.name) does not unzip") }
        }
        headers[.contentLength] = String(body.count)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `…/VectorTileServer/resources/styles[/root.json]`: the style, its source this service.
    func style() throws -> Response {
        let style: JSONValue
        do {
            style = try archive.style(with: ["type": "vector", "url": .string(serviceURL)])
        } catch let error as VectorTileError {
            throw ServiceError(500, "the vector tiles' style cannot be read: \(error.message)")
        }
        return writing.json(style)
    }

    /// `…/VectorTileServer/tilemap`: the quadtree of the tiles present.
    func tileMap() throws -> Response {
        let map: String
        do { map = try archive.tileMap() } catch let error as VectorTileError { throw ServiceError(500, "the tile map cannot be read: \(error.message)") }
        return writing.bytes(ByteBuffer(string: map), contentType: "application/json")
    }
}
