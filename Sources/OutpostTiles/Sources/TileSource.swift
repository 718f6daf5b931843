import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore

/// Where an export takes tiles from. `nil` means the source has no such tile (it is skipped,
/// not an error).
public protocol TileSource: Sendable {
    /// The grid and levels the source offers.
    func cacheInfo() async throws -> TileCacheInfo
    /// The tile at `key`, nil when the source has none there.
    func tile(_ key: TileKey) async throws -> [UInt8]?
    /// What the source is, for messages (a file name, a URL).
    var label: String { get }
}

/// Tiles of a cache on disk (`.tpkx`, exploded folder, MBTiles).
public struct TileCacheSource: TileSource {
    /// The cache read.
    public let cache: TileCache

    /// A source reading `cache`.
    public init(cache: TileCache) { self.cache = cache }

    public var label: String { cache.fileURL.lastPathComponent }

    public func cacheInfo() async throws -> TileCacheInfo {
        try await cache.load()
        guard let info = cache.info else { throw TileCacheError(.io, "the cache did not load", file: cache.fileURL.path) }
        return info
    }

    public func tile(_ key: TileKey) async throws -> [UInt8]? { try cache.tile(key) }
}

/// Tiles over HTTP: an ArcGIS tiled MapServer (`…/MapServer`, tiles at `tile/{level}/{row}/{col}`)
/// or any URL template with `{z}/{x}/{y}` or `{level}/{row}/{col}` (Web Mercator assumed).
///
/// Each request has a timeout; network errors, 429 and 5xx answers are retried with exponential
/// backoff (`attempts` in all); 404 and 204 are "no tile". Concurrency is bounded by the caller.
public struct HTTPTileSource: TileSource {
    /// The tile URL template (`{z}/{x}/{y}` or `{level}/{row}/{col}`).
    public let template: String
    /// The MapServer URL when the source is an ArcGIS tiled service (its info gives the grid).
    public let mapServerURL: URL?
    /// Sent as a bearer token.
    public var token: String?
    /// The longest one tile request may take.
    public var timeout: Duration
    /// How many times a tile is asked for before its error is kept.
    public var attempts: Int
    /// The wait before the first retry, doubled after each.
    public var backoff: Duration
    let client: HTTPClient

    /// The HTTP client tile sources share unless given one (response decompression on, bounded).
    public static let sharedClient = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(decompression: .enabled(limit: .ratio(200))))

    /// A source for the tiles at `url`.
    /// - Parameter url: a MapServer URL, or a template with `{z}`/`{x}`/`{y}` or `{level}`/`{row}`/`{col}`.
    /// - Parameter token: sent as a bearer token to a secured service.
    /// - Parameter timeout: the longest one tile request may take.
    /// - Parameter attempts: how many times a tile is asked for before its error is kept.
    /// - Parameter backoff: the wait before the first retry, doubled after each.
    /// - Parameter client: the HTTP client (one shared by the process by default).
    public init(url: String, token: String? = nil, timeout: Duration = .seconds(30), attempts: Int = 4, backoff: Duration = .milliseconds(250), client: HTTPClient? = nil) throws {
        let hasTemplate = url.contains("{z}") || url.contains("{level}")
        if hasTemplate {
            guard (url.contains("{x}") && url.contains("{y}")) || (url.contains("{row}") && url.contains("{col}")) else {
                throw TileCacheError(.source, "a tile URL template needs {z}/{x}/{y} or {level}/{row}/{col}: \(url)")
            }
            template = url
            mapServerURL = nil
        } else {
            guard let base = URL(string: url), base.scheme == "http" || base.scheme == "https" else {
                throw TileCacheError(.source, "not an http(s) URL or tile template: \(url)")
            }
            let trimmed = base.absoluteString.hasSuffix("/") ? String(base.absoluteString.dropLast()) : base.absoluteString
            template = trimmed + "/tile/{level}/{row}/{col}"
            mapServerURL = URL(string: trimmed)
        }
        self.token = token
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.client = client ?? Self.sharedClient
    }

    public var label: String { mapServerURL?.absoluteString ?? template }

    func url(for key: TileKey) -> String {
        var text = template
        for (name, value) in [("{z}", key.level), ("{level}", key.level), ("{x}", key.col), ("{col}", key.col), ("{y}", key.row), ("{row}", key.row)] {
            text = text.replacingOccurrences(of: name, with: String(value))
        }
        if let token { text += (text.contains("?") ? "&" : "?") + "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token) }
        return text
    }

    public func cacheInfo() async throws -> TileCacheInfo {
        guard let mapServerURL else {
            return TileCacheInfo(name: "tiles", scheme: .webMercator, minLevel: 0, maxLevel: 23, format: "MIXED", fullExtent: nil)
        }
        var info = mapServerURL.absoluteString + "?f=json"
        if let token { info += "&token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token) }
        guard let (status, body) = try await get(info, key: nil), status == 200 else {
            throw TileCacheError(.source, "\(mapServerURL.absoluteString) has no service info")
        }
        let json: JSONValue
        do { json = try JSONValue.parse(Data(body)) } catch { throw TileCacheError(.source, "the service info is not JSON: \(error)") }
        if let error = json["error"], !error.isNull {
            throw TileCacheError(.source, "\(mapServerURL.absoluteString): \(error["message"]?.stringValue ?? "error \(error["code"]?.integerValue ?? 0)")")
        }
        guard let tileInfo = json["tileInfo"] else { throw TileCacheError(.source, "\(mapServerURL.absoluteString) is not a tiled map service (no tileInfo)") }
        // The service's info carries the same tileInfo a package's root.json does.
        var root: [String: JSONValue] = [
            "tileInfo": tileInfo, "storageInfo": ["storageFormat": "esriMapCacheStorageModeCompactV2", "packetSize": 128],
            "name": json["mapName"] ?? json["name"] ?? .string(mapServerURL.deletingLastPathComponent().lastPathComponent),
            "tileImageInfo": ["format": tileInfo["format"] ?? "MIXED"],
        ]
        if let sr = json["spatialReference"] { root["spatialReference"] = sr }
        if let e = json["fullExtent"] { root["fullExtent"] = e }
        if let min = json["minLOD"] { root["minLOD"] = min }
        if let max = json["maxLOD"] { root["maxLOD"] = max }
        return try TileCacheInfo.fromRootJSON(Array(JSONValue.object(root).jsonString.utf8), name: "tiles", file: mapServerURL.absoluteString)
    }

    /// A resource below the service's URL (a VectorTileServer's `tilemap` or
    /// `resources/styles/root.json`), with the token and retries tiles have; nil when the source
    /// is a template or the service answers 404.
    public func resource(_ path: String) async throws -> [UInt8]? {
        guard let mapServerURL else { return nil }
        var url = mapServerURL.absoluteString + "/" + path
        if let token { url += (url.contains("?") ? "&" : "?") + "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token) }
        guard let (status, body) = try await get(url, key: nil) else { return nil }
        guard status == 200 else { throw TileCacheError(.source, "\(label) answered HTTP \(status) for \(path)") }
        return body
    }

    public func tile(_ key: TileKey) async throws -> [UInt8]? {
        guard let (status, body) = try await get(url(for: key), key: key) else { return nil }
        switch status {
        case 200: return body.isEmpty ? nil : body
        default: throw TileCacheError(.source, "\(label) answered HTTP \(status) for a tile", tile: key)
        }
    }

    /// GET with retries; nil for "no tile" (404, 204).
    private func get(_ url: String, key: TileKey?) async throws -> (Int, [UInt8])? {
        var attempt = 0
        while true {
            attempt += 1
            do {
                var request = HTTPClientRequest(url: url)
                request.headers.add(name: "User-Agent", value: "outpost-tiles")
                let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)))
                let status = Int(response.status.code)
                if status == 404 || status == 204 {
                    _ = try? await response.body.collect(upTo: 1 << 20)
                    return nil
                }
                if status == 429 || status >= 500 {
                    _ = try? await response.body.collect(upTo: 1 << 20)
                    throw Retryable(description: "HTTP \(status)")
                }
                var buffer = try await response.body.collect(upTo: 64 << 20)
                return (status, buffer.readBytes(length: buffer.readableBytes) ?? [])
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                guard attempt < attempts else {
                    throw TileCacheError(.source, "\(label) failed \(attempts) times: \(error)", tile: key)
                }
                try await Task.sleep(for: backoff * (1 << min(attempt - 1, 6)))
            }
        }
    }

    struct Retryable: Error, CustomStringConvertible { let description: String }
}
