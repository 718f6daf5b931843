import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// A preplanned area of a served map (the SDK's `PreplannedMapArea`): prepared ahead by the
/// server (`outpost offline prepare`) when ``isReady``, so a crew downloads the package rather than
/// waiting for a generation.
public struct PreplannedMapArea: Sendable, Hashable {
    /// A file of the area's package.
    public struct File: Sendable, Hashable {
        /// The file's path inside the package.
        public var path: String
        /// Its size in bytes.
        public var size: Int64
    }

    /// The area's id in the map.
    public var id: String
    /// The area's name shown to people.
    public var title: String
    /// The area.
    public var extent: MapDefinition.Extent
    /// Whether the server has prepared its package.
    public var isReady: Bool
    /// The package's bytes.
    public var size: Int64
    /// `…/arcgis/rest/maps/<name>/areas/<id>`.
    public var url: URL

    init(json: JSONValue) throws {
        guard let id = json["id"]?.stringValue, let url = json["url"]?.stringValue.flatMap(URL.init(string:)), let extent = json["extent"] else {
            throw OfflineMapError(.service, "the server's preplanned area lacks id, url or extent")
        }
        self.id = id
        self.url = url
        title = json["title"]?.stringValue ?? id
        self.extent = try JSONDecoder().decode(MapDefinition.Extent.self, from: extent.jsonData)
        isReady = json["ready"]?.boolValue ?? false
        size = json["size"]?.integerValue ?? 0
    }
}

extension OfflineMapTask {
    /// `…/arcgis/rest/maps/<name>.json` → `…/arcgis/rest/maps/<name>/areas`.
    var areasURL: URL? {
        guard let source, source.hasPrefix("http"), let url = URL(string: source), url.lastPathComponent.hasSuffix(".json") else { return nil }
        return url.deletingLastPathComponent().appendingPathComponent(String(url.lastPathComponent.dropLast(5))).appendingPathComponent("areas")
    }

    /// The map's preplanned areas as its server has them, with whether each is prepared.
    /// - Throws: ``OfflineMapFailure/invalidMap`` for a map that is not served (a file).
    public func preplannedMapAreas() async throws -> [PreplannedMapArea] {
        guard let areasURL else { throw OfflineMapError(.invalidMap, "only a served map (…/arcgis/rest/maps/<name>.json) has prepared areas") }
        let answer = try await OfflineHTTP(token: token).json(areasURL)
        return try (answer["areas"]?.arrayValue ?? []).map(PreplannedMapArea.init(json:))
    }

    /// A job that downloads a prepared area's package into `downloadDirectory` and registers its
    /// replicas as replicas of their own.
    public func makeDownloadPreplannedOfflineMapJob(
        area: PreplannedMapArea, downloadDirectory: URL, faults: FaultInjector = FaultInjector(), store: (any JobStore)? = nil
    ) -> Job<DownloadPreplannedOfflineMapJob> {
        Job(
            DownloadPreplannedOfflineMapJob(
                areaURL: area.url, mapSource: source, downloadDirectory: downloadDirectory, environment: OfflineJobEnvironment(token: token, faults: faults)),
            store: store)
    }
}
