import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostTiles
import OutpostVectorTiles

/// `…/<name>/VectorTileServer/…` over a vector tile file (`.vtpk`, `.pmtiles`, MBTiles of `pbf`)
/// or a feature service's layers (tiles made on request): the service's description in ArcGIS's
/// shape (`tiles`, `tileInfo` of 512-pixel levels, `defaultStyles`, `tileMap` when there is one,
/// extents), `tile/{z}/{y}/{x}.pbf` (gzipped on the wire when the client accepts it, else
/// plain), the style, and the tile map.
struct VectorTileServerRoutes {
    let tiles: any VectorTileService
    let serviceURL: String
    let parameters: RequestParameters
    let writing: ResponseWriting
    var metrics: ServerMetrics? = nil

    static func table(service: @escaping @Sendable (RoutedRequest) throws -> VectorTileServerRoutes) -> RouteTable {
        var table = RouteTable()
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (VectorTileServerRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, by: service, answer)
        }
        on("") { r, _ in try await r.info() }
        on("tile/:z/:y/:x") { r, call in try await r.tile(try call.value("z"), try call.value("y"), try call.value("x")) }
        on("resources/styles") { r, _ in try await r.style() }
        on("resources/styles/root.json") { r, _ in try await r.style() }
        on("tilemap") { r, _ in try await r.tileMap() }
        return table
    }

    /// `…/VectorTileServer`.
    func info() async throws -> Response {
        _ = try parameters.format()
        var out = try await readable { try await tiles.serviceDescription() }.objectValue ?? [:]
        out["currentVersion"] = ServiceInfo.currentVersion
        return writing.json(.object(out))
    }

    /// `body`, its ``VectorTileError`` a 500 (the file or the data behind the tiles is damaged).
    private func readable<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as VectorTileError { throw ServiceError(500, "the vector tiles of \(tiles.name) cannot be read: \(error.message)") }
    }

    /// `…/VectorTileServer/tile/{z}/{y}/{x}.pbf`: 404 when the file has no such tile.
    func tile(_ z: String, _ y: String, _ x: String) async throws -> Response {
        let column = x.hasSuffix(".pbf") ? String(x.dropLast(4)) : x
        guard let level = Int(z), let row = Int(y), let col = Int(column), (0...30).contains(level), row >= 0, col >= 0, row < 1 << level, col < 1 << level else {
            throw ServiceError(400, "a tile is tile/{z}/{y}/{x}.pbf with z 0–30 and y, x within the level, not \(z)/\(y)/\(x)")
        }
        let stored = try await readable { try await tiles.tile(TileKey(level: level, row: row, col: col)) }
        guard let gzipped = stored else { throw ServiceError(404, "no tile \(level)/\(row)/\(col) in \(tiles.name)") }
        metrics?.tile("vector")
        var headers = HTTPFields()
        headers[.contentType] = "application/x-protobuf"
        headers[.cacheControl] = "public, max-age=86400"
        let body: [UInt8]
        if writing.gzip {
            headers[.contentEncoding] = "gzip"
            body = gzipped
        } else {
            do { body = try VectorTileCompression.plain(gzipped) } catch { throw ServiceError(500, "tile \(level)/\(row)/\(col) of \(tiles.name) does not unzip") }
        }
        headers[.contentLength] = String(body.count)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `…/VectorTileServer/resources/styles[/root.json]`: the style, its source this service.
    func style() async throws -> Response {
        writing.json(try await readable { try await tiles.style(with: ["type": "vector", "url": .string(serviceURL)]) })
    }

    /// `…/VectorTileServer/tilemap`: the quadtree of the tiles present; 404 for tiles made on
    /// request (which has none).
    func tileMap() async throws -> Response {
        guard let map = try await readable({ try await tiles.tileMap() }) else { throw ServiceError.notFound("the tile map of \(tiles.name): its tiles are made on request") }
        return writing.bytes(ByteBuffer(string: map), contentType: "application/json")
    }
}
