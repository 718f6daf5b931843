import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// An offline map folder: `map.json` (the map definition with local files and an `offline`
/// section), the replicas in `data/`, the basemap and task files.
public struct OfflineMap: Sendable {
    /// The map definition's file name in an offline map folder.
    public static let mapFileName = "map.json"

    /// The offline map's folder.
    public let directory: URL
    /// The map definition, with its layers pointing at the local files.
    public let definition: MapDefinition
    /// What went offline: the replicas, their services, the layer errors.
    public let offline: MapDefinition.Offline

    /// Opens the offline map in `directory`.
    /// - Throws: ``OfflineMapFailure/notAnOfflineMap`` when it has no readable `map.json` with
    ///   an offline section, or a file it names is missing.
    public init(directory: URL) throws {
        let file = directory.appendingPathComponent(Self.mapFileName)
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw OfflineMapError(.notAnOfflineMap, "\(directory.path) is not an offline map (it has no map.json)")
        }
        let map: MapDefinition
        do {
            map = try MapDefinition.decode(data)
        } catch {
            throw OfflineMapError(.notAnOfflineMap, "\(file.path): \(error)")
        }
        guard let offline = map.offline else {
            throw OfflineMapError(.notAnOfflineMap, "\(file.path) is a map definition, not an offline map (it has no offline section)")
        }
        var named = offline.replicas.map(\.file) + map.operationalLayers.compactMap(\.file)
        named += [map.basemap?.file].compactMap { $0 } + (map.locators ?? []).compactMap(\.file) + (map.networks ?? []).compactMap(\.file)
        for path in named {
            guard !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
                throw OfflineMapError(.notAnOfflineMap, "\(file.path) names \(path), outside the offline map's folder")
            }
            guard FileManager.default.fileExists(atPath: directory.appendingPathComponent(path).path) else {
                throw OfflineMapError(.notAnOfflineMap, "the offline map lacks \(path), which map.json names")
            }
        }
        self.directory = directory
        self.definition = map
        self.offline = offline
    }

    /// Refuses a destination that exists and holds anything: an offline map goes into a new
    /// (or empty) folder.
    static func requireEmpty(_ directory: URL) throws {
        let files = FileManager.default
        guard files.fileExists(atPath: directory.path) else { return }
        guard ((try? files.contentsOfDirectory(atPath: directory.path)) ?? ["?"]).isEmpty else {
            throw OfflineMapError(.directoryExists, "\(directory.path) exists and is not empty; an offline map goes into a new folder")
        }
    }

    /// What could not be taken offline (the SDK's `layerErrors`).
    public var layerErrors: [MapDefinition.Offline.LayerError] { offline.layerErrors }

    /// A file of the map, from its path relative to the folder.
    public func url(_ relative: String) -> URL { directory.appendingPathComponent(relative) }

    /// The replicas that sync (snapshots excluded).
    public var syncingReplicas: [MapDefinition.Offline.Replica] { offline.replicas.filter { !$0.snapshot } }

    /// Copies every replica's write-ahead log back into its file, so each database is one file
    /// (a package served to crews, or a folder copied to a memory card).
    public func seal() throws {
        for replica in offline.replicas {
            // Opening read-write and closing checkpoints the log and truncates it.
            try Geodatabase.open(at: url(replica.file)).close()
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url(replica.file).path + suffix) }
        }
    }

    /// The basemap's tile cache, if the map has one offline.
    public var basemapURL: URL? { definition.basemap?.file.map(url) }
}
