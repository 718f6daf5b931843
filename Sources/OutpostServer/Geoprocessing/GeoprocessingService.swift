import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostStorage
import OutpostSyncService

/// A geoprocessing service the server offers at `…/<name>/GPServer`: its definition, its jobs
/// (records in `<jobs directory>/jobs.sqlite`) and uploaded files.
public final class GeoprocessingService: Sendable {
    /// The service's definition: how its tasks run and which it offers.
    public let definition: GPServiceDefinition
    /// The service's name in URLs.
    public var name: String { definition.name }
    /// Where its job records and uploads live; they outlive the server process.
    public let directory: URL
    let queue: GPJobQueue

    /// Opens the service and takes over the jobs a previous server left (see `GPJobQueue`).
    /// - Parameters:
    ///   - url: the service definition file (`<name>.gp.json`).
    ///   - jobsDirectory: where uploads and job outputs are written, and the job records when
    ///     `jobs` is nil; default `<name>.gp-jobs/` beside the definition file. Hosts of a site
    ///     give one directory they all mount.
    ///   - jobs: where job records live (nil: `jobs.sqlite` in the jobs directory). A store
    ///     shared by several server hosts (PostgreSQL) lets any host answer a job's status and
    ///     pass a cancel to the host running it; a job whose host stops is taken over by another
    ///     once its lease ends.
    ///   - lease: how long a job stays with a host that stopped renewing it (a shared store).
    public init(contentsOf url: URL, jobsDirectory: URL? = nil, jobs: (any GPJobRecordStore)? = nil, lease: Duration = .seconds(30)) async throws {
        definition = try GPServiceDefinition(contentsOf: url)
        directory = jobsDirectory ?? url.deletingLastPathComponent().appendingPathComponent("\(definition.name).gp-jobs")
        queue = GPJobQueue(
            definition: definition, store: try jobs ?? SQLiteGPJobStore(url: directory.appendingPathComponent("jobs.sqlite")),
            files: GPFiles(uploads: directory.appendingPathComponent("uploads"), root: directory.appendingPathComponent("files")), lease: lease)
        try await queue.recover()
    }

    /// Waits for the jobs running now (tests).
    public func waitForRunningJobs() async { await queue.drain() }

    /// The server is stopping. With a shared store (a site) the jobs not yet started are handed
    /// to the other hosts and the running ones finish here first; then the store is no longer
    /// watched.
    public func close() async { await queue.close() }

    /// When a job's status last changed (epoch milliseconds), nil for an unknown job.
    public func lastUpdate(ofJob id: String) async throws -> Int64? { try await queue.store.summary(id)?.updated }

    var files: GPFiles { queue.files }

    /// Where a job's tools write their files (removed when the job does not succeed).
    public func outputDirectory(ofJob id: String) -> URL { queue.files.root.appendingPathComponent(id) }
}

/// File inputs and outputs of a geoprocessing service: an uploaded item or a file the service
/// wrote becomes a local file for the tool; a file a tool wrote becomes a URL under
/// `…/GPServer/files/` in answers. Nothing else is fetched or read.
struct GPFiles: Sendable {
    let uploads: URL
    let root: URL

    /// The file of an uploaded item, nil for an unknown one.
    func uploaded(_ id: String) -> URL? {
        guard id.range(of: "^i[0-9a-f]{32}$", options: .regularExpression) != nil else { return nil }
        let folder = uploads.appendingPathComponent(id)
        guard let name = try? FileManager.default.contentsOfDirectory(atPath: folder.path).first else { return nil }
        return folder.appendingPathComponent(name)
    }

    /// A file this service wrote, by its directory and name (as its URL names them).
    func written(_ directory: String, _ name: String) -> URL? {
        guard directory.range(of: "^[jx][0-9a-f]{32}$", options: .regularExpression) != nil, GPServerRoutes.safeName(name) == name else { return nil }
        let file = root.appendingPathComponent(directory).appendingPathComponent(name)
        return FileManager.default.fileExists(atPath: file.path) ? file : nil
    }

    /// File inputs as local files: `{"itemID"}` of an upload, or `{"url"}` of a file this
    /// service wrote (`…/GPServer/files/<dir>/<name>`). Other URLs are refused.
    func local(_ value: GPValue, parameter: String) throws -> GPValue {
        func resolve(_ file: GPFileReference) throws -> GPFileReference {
            var out = file
            if let item = file.itemID {
                guard let path = uploaded(item) else { throw GPValueError(parameter: parameter, "there is no uploaded item \(item)") }
                out.url = path.absoluteString
                out.itemID = nil
                return out
            }
            let parts = URL(string: file.url ?? "")?.path.split(separator: "/").map(String.init) ?? []
            guard parts.count >= 4, parts[parts.count - 3] == "files", parts[parts.count - 4] == "GPServer",
                let path = written(parts[parts.count - 2], parts[parts.count - 1])
            else { throw GPValueError(parameter: parameter, "give an uploaded file ({\"itemID\"}) or a file this service wrote") }
            out.url = path.absoluteString
            return out
        }
        switch value {
        case .dataFile(let f): return .dataFile(try resolve(f))
        case .rasterData(let f): return .rasterData(try resolve(f))
        case .rasterDataLayer(let f): return .rasterDataLayer(try resolve(f))
        case .multiValue(let type, let items): return .multiValue(type, try items.map { try local($0, parameter: parameter) })
        default: return value
        }
    }

    /// A result's JSON with the file URLs of files under `root` turned into `…/GPServer/files/…`.
    func published(_ json: JSONValue, serviceURL: String) -> JSONValue {
        switch json {
        case .object(var object):
            if let text = object["url"]?.stringValue, let url = URL(string: text), url.isFileURL, url.path.hasPrefix(root.path + "/") {
                object["url"] = .string(serviceURL + "/files/" + url.path.dropFirst(root.path.count + 1))
                return .object(object)
            }
            return .object(object.mapValues { published($0, serviceURL: serviceURL) })
        case .array(let items): return .array(items.map { published($0, serviceURL: serviceURL) })
        default: return json
        }
    }
}

/// Turns `{"url": …}` feature set inputs into features: only layers this server serves, read
/// with the URL's `where` (at most `limit` features).
struct GPLayerResolver {
    let services: ServiceDirectory
    /// `scheme://host[:port][/prefix]` clients reach the server at.
    let publicBase: String
    let limit: Int

    func resolve(_ value: GPValue, parameter: String) async throws -> GPValue {
        switch value {
        case .featureSet(let set) where set.url != nil: return .featureSet(try await features(set.url!, parameter: parameter, geometry: true))
        case .recordSet(let set) where set.url != nil: return .recordSet(try await features(set.url!, parameter: parameter, geometry: false))
        case .multiValue(let type, let items):
            var out: [GPValue] = []
            for item in items { out.append(try await resolve(item, parameter: parameter)) }
            return .multiValue(type, out)
        default: return value
        }
    }

    private func features(_ text: String, parameter: String, geometry: Bool) async throws -> GPFeatureSet {
        func bad(_ reason: String) -> ServiceError { .badParameter(parameter, reason) }
        guard let url = URL(string: text) else { throw bad("\(text.prefix(80)) is not a URL") }
        if url.host != nil, let base = URL(string: publicBase), url.host?.lowercased() != base.host?.lowercased() || url.port != base.port {
            throw bad("only layers of services on this server can be given by URL")
        }
        let parts = url.path.split(separator: "/").map(String.init)
        guard let at = parts.firstIndex(of: "services"), parts.count > at + 3, parts[at + 2] == "FeatureServer", let layerID = Int(parts[at + 3]),
            parts.count == at + 4 || parts.count == at + 5 && parts[at + 4] == "query"
        else { throw bad("give a layer URL like …/rest/services/<service>/FeatureServer/<layer>[/query?where=…]") }
        guard let backend = services.backend(named: parts[at + 1]) else { throw bad("there is no service \(parts[at + 1]) on this server") }
        let schema = try await backend.schema()
        guard let layer = schema.layer(id: layerID) else { throw bad("service \(backend.name) has no layer \(layerID)") }
        var query = FeatureQuery()
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        if let clause = items.first(where: { $0.name.lowercased() == "where" })?.value, !clause.isEmpty {
            do {
                _ = try WhereClause(clause, layer: layer)
            } catch let error as StorageError {
                throw bad("where: \(error.message)")
            }
            query.whereClause = clause
        }
        query.returnGeometry = geometry && layer.isSpatial
        query.limit = limit + 1
        let found = try await backend.features(layerID: layerID, query: query)
        guard found.count <= limit else { throw bad("the layer holds more than the \(limit) features a task takes (maximumRecords)") }
        return GPFeatureSet(layer: layer, spatialReference: layer.spatialReference ?? schema.spatialReference, features: found, geometry: query.returnGeometry)
    }
}

/// Feature sets made from a feature service's layers, as a task's input.
extension GPFeatureSet {
    /// A layer's features as a feature set (a record set without geometry when `geometry` is
    /// false): every field of the layer, object and global ids included.
    public init(layer: LayerDefinition, spatialReference: SpatialReference?, features: [OutpostStorage.Feature], geometry: Bool = true) {
        let fields = layer.fields
        self.init(
            geometryType: geometry ? layer.geometryType?.esriName : nil, spatialReference: spatialReference,
            fields: fields.map { GPField(name: $0.name, type: $0.type.esriName, alias: $0.alias, length: $0.length) },
            features: features.map { feature in
                var attributes: [String: JSONValue] = [:]
                for field in fields {
                    switch field.type {
                    case .oid: attributes[field.name] = feature.objectID.map { .integer($0) } ?? .null
                    case .globalID: attributes[field.name] = feature.globalID.map { .string($0) } ?? .null
                    default: attributes[field.name] = feature.attributes[field.name]?.jsonValue ?? .null
                    }
                }
                return GPFeatureSet.Feature(geometry: geometry ? feature.geometry : nil, attributes: attributes)
            })
    }
}
