import Foundation
import OutpostCore
import OutpostProtocol

/// What a generate job takes offline, decided in its first step and kept in its JSON: the parts
/// (one replica per feature service, the basemap export, task file copies) and the layers that
/// already could not go offline.
struct OfflineMapPlan: Codable, Hashable, Sendable {
    struct Layer: Codable, Hashable, Sendable {
        /// The layer's id in the map.
        var mapLayer: String
        var layerID: Int
        var table: String
        var isTable: Bool
        var `where`: String
        var schemaOnly: Bool
    }

    struct Replica: Codable, Hashable, Sendable {
        var key: String
        var serviceURL: String
        var serviceName: String
        /// Relative to the offline map's folder.
        var file: String
        var layers: [Layer]
        var snapshot: Bool
        var readOnly: Bool
        var attachments: Bool
    }

    struct Basemap: Codable, Hashable, Sendable {
        var key: String
        var source: String
        var levels: [Int]
        var file: String
    }

    struct TaskFile: Codable, Hashable, Sendable {
        var key: String
        /// `locators` or `networks`.
        var kind: String
        var title: String
        var url: String
        var download: String
        var file: String
    }

    var replicas: [Replica] = []
    var basemap: Basemap?
    var tasks: [TaskFile] = []
    var layerErrors: [MapDefinition.Offline.LayerError] = []

    var keys: [String] { replicas.map(\.key) + (basemap.map { [$0.key] } ?? []) + tasks.map(\.key) }

    /// `…/rest/services/<name>/FeatureServer/<id>` split into the service URL, its name and the layer id.
    static func featureLayer(_ url: URL) -> (service: URL, name: String, layer: Int)? {
        let parts = url.path.split(separator: "/").map(String.init)
        guard parts.count >= 3, parts[parts.count - 2] == "FeatureServer", let id = Int(parts[parts.count - 1]), id >= 0 else { return nil }
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.query = nil
        components.path = "/" + parts.dropLast().joined(separator: "/")
        guard let service = components.url else { return nil }
        return (service, parts[parts.count - 3], id)
    }

    /// The Outpost download of a served locator or network file: `…/rest/services/<name>/GeocodeServer`
    /// → `…/outpost/v1/locators/<name>/file` (NAServer: `networks`).
    static func taskDownload(_ url: URL) -> (download: URL, name: String, kind: String)? {
        var parts = url.path.split(separator: "/").map(String.init)
        while let last = parts.last, last != "GeocodeServer", last != "NAServer" { parts.removeLast() }
        guard parts.count >= 4, let servicesIndex = parts.lastIndex(of: "services"), servicesIndex >= 1, parts[servicesIndex - 1] == "rest",
            servicesIndex + 3 == parts.count
        else { return nil }
        let name = parts[parts.count - 2]
        let kind = parts.last == "GeocodeServer" ? "locators" : "networks"
        var prefix = Array(parts[..<(servicesIndex - 1)])
        if prefix.last == "arcgis" { prefix.removeLast() }
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.query = nil
        components.path = "/" + (prefix + ["outpost", "v1", kind, name, "file"]).joined(separator: "/")
        guard let download = components.url else { return nil }
        return (download, name, kind)
    }
}
