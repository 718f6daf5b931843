import Foundation
import Hummingbird
import OutpostCore
import OutpostSyncService
import OutpostTiles

/// The export operations of a MapServer, as ArcGIS offers them to clients that want the server to
/// build the package: `exportTiles` and `estimateExportTilesSize` start server-side jobs (status at
/// `…/MapServer/jobs/{id}`, the package at `…/MapServer/tilefiles/{name}`).
struct MapServerJobs {
    let source: any TileSource
    let services: SyncServices
    let parameters: RequestParameters
    let writing: ResponseWriting
    /// The service's name, as it is recorded for another host to run an export again.
    let serviceName: String
    /// `…/<name>/MapServer`, for the URLs in answers.
    let mapServerURL: String
    static let maxExportTilesCount = 100_000

    /// nil when `route` is not one of these operations.
    /// `…/jobs/{id}/cancel`.
    func cancel(_ id: String) async throws -> Response {
        guard try await services.jobs.cancel(id) else { throw ServiceError.notFound("job \(id)") }
        return writing.json(["success": true])
    }

    /// `…/tilefiles/{name}`: an export's package.
    func tileFile(_ name: String) throws -> Response {
        guard let file = services.files.file(named: name) else { throw ServiceError.notFound("file \(name) (files are kept for a limited time)") }
        return try ReplicaRoutes.streamFile(file, contentType: "application/octet-stream", removeAfter: false)
    }

    /// `…/jobs/{id}` and `…/jobs/{id}/status`.
    func status(_ id: String) async throws -> Response {
        _ = try parameters.format()
        guard let status = try await services.jobs.status(id) else { throw ServiceError.notFound("job \(id)") }
        return writing.json(status)
    }

    /// Parameters as the REST API names them: `levels` (IDs: `0-5,7`), `exportBy=LevelID`,
    /// `exportExtent` (`xmin,ymin,xmax,ymax` or an envelope JSON; the map's spatial reference unless
    /// it says), `areaOfInterest` (a polygon, as geometry or feature set JSON),
    /// `optimizeTilesForSize`, `tilePackage`, `storageFormatType`.
    func exportParameters() throws -> ExportTileCacheParameters { try Self.exportParameters(parameters) }

    /// ``exportParameters()`` of any parameters (a job run again on another host).
    static func exportParameters(_ parameters: RequestParameters) throws -> ExportTileCacheParameters {
        if let by = parameters["exportBy"], by.lowercased() != "levelid" {
            throw ServiceError.badParameter("exportBy", "only LevelID is offered, not \(by.prefix(20))")
        }
        guard let levelText = parameters["levels"], !levelText.isEmpty else { throw ServiceError.badParameter("levels", "give the level IDs, e.g. 0-5,7") }
        var levels: [Int] = []
        for part in levelText.split(separator: ",") {
            let bounds = part.split(separator: "-", maxSplits: 1).map { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard let low = bounds.first ?? nil, let high = bounds.last ?? nil, low >= 0, high >= low, high <= 30 else {
                throw ServiceError.badParameter("levels", "\(part.prefix(20)) is not a level or a range of levels")
            }
            levels += Array(low...high)
        }
        var area: AreaOfInterest?
        if let text = parameters["exportExtent"], !text.isEmpty {
            let numbers = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            if numbers.count == 4 {
                area = .envelope(Envelope(xmin: numbers[0], ymin: numbers[1], xmax: numbers[2], ymax: numbers[3]), .webMercator)
            } else if let json = try? JSONValue.parse(text), let e = try? EsriJSON.decodeGeometry(json), let envelope = e.envelope {
                let wkid = json["spatialReference"]?["latestWkid"]?.integerValue ?? json["spatialReference"]?["wkid"]?.integerValue ?? 3857
                area = .envelope(envelope, SpatialReference(wkid: wkid == 102100 ? 3857 : Int(wkid)))
            } else {
                throw ServiceError.badParameter("exportExtent", "give xmin,ymin,xmax,ymax or an envelope JSON")
            }
        }
        if let text = parameters["areaOfInterest"], !text.isEmpty {
            guard var json = try? JSONValue.parse(text) else { throw ServiceError.badParameter("areaOfInterest", "not JSON") }
            if let feature = json["features"]?[0] { json = feature["geometry"] ?? .null }
            guard let polygon = try? EsriJSON.decodeGeometry(json), polygon.type == .polygon || polygon.type == .multiPolygon else {
                throw ServiceError.badParameter("areaOfInterest", "give a polygon")
            }
            let wkid = json["spatialReference"]?["latestWkid"]?.integerValue ?? json["spatialReference"]?["wkid"]?.integerValue ?? 3857
            area = .polygon(polygon, SpatialReference(wkid: wkid == 102100 ? 3857 : Int(wkid)))
        }
        if let format = parameters["storageFormatType"], format != "esriMapCacheStorageModeCompactV2" {
            throw ServiceError.badParameter("storageFormatType", "only esriMapCacheStorageModeCompactV2 (.tpkx) is written")
        }
        return ExportTileCacheParameters(
            areaOfInterest: area, levelIDs: Array(Set(levels)).sorted(), maxTileCount: maxExportTilesCount,
            optimizeTilesForSize: try parameters.bool("optimizeTilesForSize", default: false),
            compressionQuality: try parameters.int("compressionQuality", range: 0...100).map(Double.init))
    }

    func exportTiles(estimateOnly: Bool) async throws -> Response {
        _ = try parameters.format()
        let export = try exportParameters()
        let source = self.source, files = services.files, base = mapServerURL
        let work: @Sendable () async throws -> JSONValue
        if estimateOnly {
            work = {
                let job = Job(EstimateTileCacheSizeJob(source: .http(base), parameters: export, environment: TileJobEnvironment(source: source)))
                let result = try await Self.run(job)
                return ["totalSize": .integer(result.fileSize), "totalTilesToExport": .integer(Int64(result.tileCount))]
            }
        } else {
            work = Self.exportWork(source: source, files: files, base: base, export: export)
        }
        // An export (not an estimate) is run again on another host of a site should this one stop.
        let resumable = estimateOnly ? nil : ResumableJob(kind: Self.resumableKind, input: ["service": .string(serviceName), "mapServerURL": .string(base), "parameters": parameters.recordable])
        let id = try await services.jobs.start(responseType: estimateOnly ? "esriEstimateExportTilesSize" : "esriExportTiles", resumable: resumable, work)
        return writing.json(["jobId": .string(id), "jobStatus": "esriJobSubmitted", "statusUrl": .string("\(base)/jobs/\(id)")])
    }

    /// The kind under which an export is recorded, so another host of a site runs it again.
    static let resumableKind = "exportTiles"

    /// Writes the tile package and answers with where to fetch it.
    static func exportWork(source: any TileSource, files: ResultFiles, base: String, export: ExportTileCacheParameters) -> ServerJobs.Work {
        return {
            let (name, url) = try files.newFile(extension: "tpkx")
            let job = Job(ExportTileCacheJob(source: .http(base), parameters: export, downloadFileURL: url, environment: TileJobEnvironment(source: source)))
            _ = try await run(job)
            return ["resultUrl": .string("\(base)/tilefiles/\(name)"), "out_service_url": .string("\(base)/tilefiles/\(name)")]
        }
    }

    /// Registers how another host's export is run again here (see ``ServerJobs``).
    static func registerResumption(source: @escaping @Sendable (String) async throws -> (any TileSource)?, sync: SyncServices) {
        sync.jobs.register(resumableKind) { input in
            guard let name = input["service"]?.stringValue, let base = input["mapServerURL"]?.stringValue,
                let parameters = RequestParameters(recorded: input["parameters"])
            else { throw ServiceError(500, "the job's record is not one of a tile export") }
            guard let tiles = try await source(name) else { throw ServiceError(500, "map service \(name) is not served here") }
            return exportWork(source: tiles, files: sync.files, base: base, export: try exportParameters(parameters))
        }
    }

    /// Runs a job to its output; cancelling the server job cancels it (and its rollback removes
    /// partial files).
    static func run<D: JobDefinition>(_ job: Job<D>) async throws -> D.Output {
        try job.start()
        return try await withTaskCancellationHandler {
            try await job.output
        } onCancel: {
            job.cancel()
        }
    }
}
