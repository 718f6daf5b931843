import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles
import Synchronization

/// What an export of vector tiles takes: the area (its envelope; tiles of a polygon's envelope
/// all go in), the zooms, and the tile definition (every spatial layer when nil).
public struct ExportVectorTilesParameters: Sendable, Hashable {
    /// The area; nil for the layers' whole extent.
    public var areaOfInterest: AreaOfInterest?
    /// The first zoom (the definition's when nil).
    public var minZoom: Int?
    /// The last zoom (the definition's when nil).
    public var maxZoom: Int?
    /// Which layers, fields and zooms go in.
    public var definition: VectorTileDefinition?

    /// Parameters of these values.
    public init(areaOfInterest: AreaOfInterest? = nil, minZoom: Int? = nil, maxZoom: Int? = nil, definition: VectorTileDefinition? = nil) {
        self.areaOfInterest = areaOfInterest
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.definition = definition
    }

    /// The area as an envelope in Web Mercator (latitudes cut at its limit).
    /// - Throws: ``VectorTileError`` `invalidArea` for an empty polygon or another geometry.
    public func area() throws -> Envelope? {
        let (e, sr): (Envelope, SpatialReference)
        switch areaOfInterest {
        case nil: return nil
        case .envelope(let envelope, let reference)?: (e, sr) = (envelope, reference)
        case .polygon(let g, let reference)?:
            guard g.type == .polygon || g.type == .multiPolygon, let envelope = g.envelope else {
                throw VectorTileError(.invalidArea, "an area of interest must be a polygon or an envelope")
            }
            (e, sr) = (envelope, reference)
        }
        guard e.isValid, e.xmin < e.xmax, e.ymin < e.ymax else { throw VectorTileError(.invalidArea, "the area of interest is empty") }
        let m = WebMercator.maxLatitude
        let clamped = sr.wkid == 4326 ? Envelope(xmin: max(e.xmin, -180), ymin: max(e.ymin, -m), xmax: min(e.xmax, 180), ymax: min(e.ymax, m)) : e
        guard clamped.xmin < clamped.xmax, clamped.ymin < clamped.ymax else { throw VectorTileError(.invalidArea, "the area of interest lies outside the Web Mercator world") }
        do { return try WebMercator.convert(clamped, from: sr, to: .webMercator) } catch { throw VectorTileError(.invalidArea, "the area of interest: \(error)") }
    }

    /// The definition these parameters make of `schema`'s layers.
    public func resolvedDefinition(_ schema: ServiceSchema) -> VectorTileDefinition {
        var d = definition ?? .whole(schema)
        if let minZoom { d.minZoom = minZoom }
        if let maxZoom { d.maxZoom = maxZoom }
        return d
    }

    var json: JSONValue {
        var out: [String: JSONValue] = [:]
        switch areaOfInterest {
        case .envelope(let e, let sr)?: out["areaOfInterest"] = ["envelope": [.number(e.xmin), .number(e.ymin), .number(e.xmax), .number(e.ymax)], "wkid": .integer(Int64(sr.wkid))]
        case .polygon(let g, let sr)?:
            if let e = g.envelope { out["areaOfInterest"] = ["envelope": [.number(e.xmin), .number(e.ymin), .number(e.xmax), .number(e.ymax)], "wkid": .integer(Int64(sr.wkid))] }
        case nil: break
        }
        if let minZoom { out["minZoom"] = .integer(Int64(minZoom)) }
        if let maxZoom { out["maxZoom"] = .integer(Int64(maxZoom)) }
        if let definition, let encoded = try? JSONEncoder().encode(definition), let value = try? JSONValue.parse(encoded) { out["definition"] = value }
        return .object(out)
    }

    init(json: JSONValue) throws {
        var area: AreaOfInterest?
        if let a = json["areaOfInterest"] {
            let v = (a["envelope"]?.arrayValue ?? []).compactMap(\.doubleValue)
            guard v.count == 4, let wkid = a["wkid"]?.integerValue else { throw JobError(.invalidJSON, "areaOfInterest needs envelope and wkid") }
            area = .envelope(Envelope(xmin: v[0], ymin: v[1], xmax: v[2], ymax: v[3]), SpatialReference(wkid: Int(wkid)))
        }
        var definition: VectorTileDefinition?
        if let d = json["definition"] {
            do { definition = try JSONDecoder().decode(VectorTileDefinition.self, from: d.jsonData) } catch { throw JobError(.invalidJSON, "the definition does not read: \(error)") }
        }
        self.init(
            areaOfInterest: area, minZoom: json["minZoom"]?.integerValue.map(Int.init), maxZoom: json["maxZoom"]?.integerValue.map(Int.init), definition: definition)
    }
}

/// What vector tile jobs take besides their JSON.
public struct VectorTileJobEnvironment: Sendable {
    /// The bearer token for a secured VectorTileServer.
    public var token: String?
    /// Fault points `vtiles.afterCheckpoint` and `vtiles.afterMove` (crash tests).
    public var faults: FaultInjector
    /// The time between two durable checkpoints while tiles are made (each flushes the spool and
    /// its index and writes the job's JSON; a kill loses at most this much work).
    public var checkpointInterval: Duration
    /// Workers making tiles (the processor count by default).
    public var concurrency: Int

    /// An environment of these values (checkpoints every 2 s by default).
    public init(
        token: String? = nil, faults: FaultInjector = FaultInjector(), checkpointInterval: Duration? = nil, concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    ) {
        self.token = token
        self.faults = faults
        self.checkpointInterval = checkpointInterval ?? .seconds(2)
        self.concurrency = concurrency
    }
}

/// Where exported vector tiles come from.
public enum VectorTileExportSource: Sendable, Hashable {
    /// A geodatabase's layers, made into tiles by ``VectorTileGenerator``.
    case geodatabase(URL)
    /// A VectorTileServer's tiles (its tile map says which exist), fetched over HTTP.
    case service(URL)

    var json: JSONValue {
        switch self {
        case .geodatabase(let url): ["geodatabase": .string(url.path)]
        case .service(let url): ["service": .string(url.absoluteString)]
        }
    }

    /// The geodatabase at `url`, read-only.
    /// - Throws: ``VectorTileError`` `io` when it cannot be opened (not a geodatabase, absent).
    static func open(_ url: URL) throws -> Geodatabase {
        do { return try Geodatabase.open(at: url, readOnly: true) } catch { throw VectorTileError(.io, "cannot open \(url.lastPathComponent): \(error)") }
    }

    /// The VectorTileServer at `url`, `token` sent.
    /// - Throws: ``VectorTileError`` `io` for a URL that is not a service's.
    static func http(_ url: URL, token: String?) throws -> HTTPTileSource {
        do { return try HTTPTileSource(url: url.absoluteString, token: token) } catch let error as TileCacheError { throw VectorTileError(.io, error.message) }
    }

    init(json: JSONValue) throws {
        if let path = json["geodatabase"]?.stringValue {
            self = .geodatabase(URL(fileURLWithPath: path))
        } else if let text = json["service"]?.stringValue, let url = URL(string: text) {
            self = .service(url)
        } else {
            throw JobError(.invalidJSON, "a vector tile job's source is a geodatabase or a service")
        }
    }
}

/// Exports vector tiles of a geodatabase's layers, or of a VectorTileServer, into a `.vtpk`, PMTiles or MBTiles file (by
/// the output's extension), as a job (ArcGIS `ExportVectorTilesJob`).
///
/// Steps: `tiles` (made by the generator, or fetched from the service — the tiles its tile map
/// names in the area and zooms, eight at a time — into a durable spool beside the output, checkpointed
/// at most every interval; a job rebuilt after a kill reopens the spool at its last checkpoint
/// and makes only the tiles it lacks), `package` (the file written from the spool beside the
/// output, its tiles counted, renamed into place). A cancelled or failed job removes the spool
/// and the partial file.
public struct ExportVectorTilesJob: JobDefinition {
    public static let jobType = "outpost.exportVectorTiles"

    /// Where the tiles come from.
    public var source: VectorTileExportSource
    /// The area, zooms and definition.
    public var exportParameters: ExportVectorTilesParameters
    /// Where the file is written.
    public var downloadFileURL: URL
    let environment: VectorTileJobEnvironment

    /// An export of `parameters` from `source` into `downloadFileURL`.
    public init(source: VectorTileExportSource, parameters: ExportVectorTilesParameters, downloadFileURL: URL, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()) {
        self.source = source
        self.exportParameters = parameters
        self.downloadFileURL = downloadFileURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        ["source": source.json, "export": exportParameters.json, "downloadFile": .string(downloadFileURL.path)]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let export = parameters["export"], let file = parameters["downloadFile"]?.stringValue else {
            throw JobError(.invalidJSON, "a vector tile export needs source, export and downloadFile")
        }
        self.init(
            source: try VectorTileExportSource(json: parameters["source"] ?? .null), parameters: try ExportVectorTilesParameters(json: export), downloadFileURL: URL(fileURLWithPath: file),
            environment: environment[VectorTileJobEnvironment.self] ?? VectorTileJobEnvironment())
    }

    /// Registers the vector tile job types (export, estimate) in `registry` with what they need
    /// besides their JSON.
    public static func register(in registry: inout JobRegistry, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()) {
        registry.environment[VectorTileJobEnvironment.self] = environment
        registry.register(ExportVectorTilesJob.self)
        registry.register(EstimateVectorTilesSizeJob.self)
    }

    public var stepNames: [String] { ["tiles", "package"] }

    var format: VectorTileFormat { VectorTileFormat(url: downloadFileURL) ?? .vtpk }

    public func run(step: Int, context: JobContext) async throws {
        guard VectorTileFormat(url: downloadFileURL) != nil else {
            throw VectorTileError(.invalidDefinition, "\(downloadFileURL.lastPathComponent): the output must end in .vtpk, .pmtiles or .mbtiles")
        }
        context.onRollback { [downloadFileURL] in Self.removeWorkFiles(downloadFileURL) }
        if step == 1, !FileManager.default.fileExists(atPath: VectorTileOutput.partialURL(downloadFileURL).path),
            !FileManager.default.fileExists(atPath: TileSpool.spoolURL(beside: downloadFileURL).path), FileManager.default.fileExists(atPath: downloadFileURL.path)
        {
            // A run killed after the move and before the job recorded its end left the file in place.
            context.log("wrote \(context.recorded("tiles")?.integerValue ?? 0) tiles to \(downloadFileURL.lastPathComponent)")
            return
        }
        let area = try exportParameters.area()
        switch source {
        case .geodatabase(let url):
            let gdb = try VectorTileExportSource.open(url)
            defer { try? gdb.close() }
            let generator = try VectorTileGenerator(geodatabase: gdb, definition: exportParameters.resolvedDefinition(gdb.schema))
            if step == 0 {
                try await makeTiles(context: context) { shared, skip in
                    try await generator.generate(area: area, concurrency: environment.concurrency, skip: skip) { key, bytes in try shared.add(key, bytes) }
                }
            } else {
                var bounds = area
                if bounds == nil { bounds = try await generator.dataExtent() }
                try await package(TileSetDescription(generator, name: downloadFileURL.deletingPathExtension().lastPathComponent, bounds: bounds), context: context)
            }
        case .service(let url):
            let http = try VectorTileExportSource.http(url, token: environment.token)
            let service = try await ServiceTiles(http, parameters: exportParameters, area: area)
            if step == 0 {
                try await makeTiles(context: context) { shared, skip in try await service.fetch(into: shared, skip: skip) }
            } else {
                try await package(try await service.description(name: downloadFileURL.deletingPathExtension().lastPathComponent), context: context)
            }
        }
    }

    /// Runs `produce` (which adds tiles to the spool, passing over those `skip` names) beside the
    /// checkpoints, from the spool's last checkpoint when the step resumes.
    private func makeTiles(
        context: JobContext,
        _ produce: @escaping @Sendable (LockedSpool, @escaping @Sendable (TileKey) -> Bool) async throws -> VectorTileGenerator.Summary
    ) async throws {
        let spool: TileSpool
        if let state = context.checkpointData, let size = state["size"]?.integerValue, let count = state["count"]?.integerValue {
            spool = try TileSpool(resuming: downloadFileURL, size: UInt64(size), count: Int(count))
            context.log("resuming after \(count) tiles")
        } else {
            spool = try TileSpool(beside: downloadFileURL, durable: true)
        }
        let made = Set(spool.entries.map { Self.pack($0.key) })
        let shared = LockedSpool(spool)
        let faults = environment.faults, interval = environment.checkpointInterval
        let summary: VectorTileGenerator.Summary = try await withThrowingTaskGroup(of: VectorTileGenerator.Summary?.self) { group in
            group.addTask { try await produce(shared) { made.contains(Self.pack($0)) } }
            group.addTask {
                // Durable checkpoints while tiles arrive: at most one an interval, at once when a
                // pause or cancel waits for one (which then ends the step by throwing).
                var last = ContinuousClock.now
                while true {
                    // Cancelled once the tiles are made: nothing more to do.
                    do { try await Task.sleep(for: .milliseconds(50)) } catch { return nil }
                    guard context.isInterruptRequested || ContinuousClock.now - last >= interval else { continue }
                    last = ContinuousClock.now
                    let (size, count) = try shared.makeDurable()
                    context.reportProgress("tiles", done: Int64(count), total: nil)
                    try await context.checkpoint(["size": .integer(Int64(size)), "count": .integer(Int64(count))])
                    try faults.check("vtiles.afterCheckpoint")
                }
            }
            var result: VectorTileGenerator.Summary?
            while let next = try await group.next() {
                if let summary = next {
                    result = summary
                    group.cancelAll()
                }
            }
            return result ?? VectorTileGenerator.Summary()
        }
        let (size, count) = try shared.makeDurable()
        context.record("spool", ["size": .integer(Int64(size)), "count": .integer(Int64(count))])
        context.record("tiles", .integer(Int64(count)))
        let perLevel = shared.levels()
        context.record("levels", .object(Dictionary(uniqueKeysWithValues: perLevel.map { (String($0.key), JSONValue.integer(Int64($0.value))) })))
        context.record("features", .integer(Int64(summary.features)))
        context.record("droppedForSize", .integer(Int64(summary.droppedForSize)))
        context.record(
            "unreadable", .array(summary.unreadable.map { ["layer": .string($0.layer), "objectid": $0.objectID.map { .integer($0) } ?? .null, "reason": .string($0.reason)] }))
        context.reportProgress("tiles", done: Int64(count), total: Int64(count))
    }

    private func package(_ description: TileSetDescription, context: JobContext) async throws {
        guard let state = context.recorded("spool"), let size = state["size"]?.integerValue, let count = state["count"]?.integerValue else {
            throw VectorTileError(.corrupt, "the export job has no record of its tiles")
        }
        let spool = try TileSpool(resuming: downloadFileURL, size: UInt64(size), count: Int(count))
        let partial = VectorTileOutput.partialURL(downloadFileURL)
        do {
            try VectorTileOutput.writeFile(spool, description, format: format, to: partial)
        } catch let error as TileCacheError {
            throw VectorTileError(.io, error.message)
        }
        // The written file, read back by the format's reader, holds every tile.
        let present = try await Self.count(partial, format: format)
        guard present == Int(count) else { throw VectorTileError(.corrupt, "the written \(format.rawValue) holds \(present) tiles, not the \(count) made") }
        if FileManager.default.fileExists(atPath: downloadFileURL.path) { try FileManager.default.removeItem(at: downloadFileURL) }
        try FileManager.default.moveItem(at: partial, to: downloadFileURL)
        spool.discard()
        try environment.faults.check("vtiles.afterMove")
        context.log("wrote \(count) tiles to \(downloadFileURL.lastPathComponent)")
    }

    static func count(_ url: URL, format: VectorTileFormat) async throws -> Int {
        var n = 0
        switch format {
        case .vtpk: try await VectorTilePackageReader(url: url).forEachTile { _, _ in n += 1 }
        case .pmtiles: try PMTilesReader(url: url).forEachTile { _, _ in n += 1 }
        case .mbtiles: try VectorTileMBTilesReader(url: url).forEachTile { _, _ in n += 1 }
        }
        return n
    }

    static func pack(_ k: TileKey) -> UInt64 { UInt64(k.level) << 58 | UInt64(k.col) << 29 | UInt64(k.row) }

    static func removeWorkFiles(_ url: URL) {
        for file in [VectorTileOutput.partialURL(url), TileSpool.spoolURL(beside: url), TileSpool.indexURL(beside: url)] { try? FileManager.default.removeItem(at: file) }
    }

    public func output(context: JobContext) async throws -> ExportVectorTilesResult {
        ExportVectorTilesResult(
            fileURL: downloadFileURL, tiles: Int(context.recorded("tiles")?.integerValue ?? 0), features: Int(context.recorded("features")?.integerValue ?? 0),
            droppedForSize: Int(context.recorded("droppedForSize")?.integerValue ?? 0),
            unreadable: (context.recorded("unreadable")?.arrayValue ?? []).map { u in
                VectorTileGenerator.Unreadable(layer: u["layer"]?.stringValue ?? "", objectID: u["objectid"]?.integerValue, reason: u["reason"]?.stringValue ?? "")
            })
    }

    public func rollback(context: JobContext) async { Self.removeWorkFiles(downloadFileURL) }
}

/// What an export made.
public struct ExportVectorTilesResult: Sendable {
    /// The file written.
    public var fileURL: URL
    /// Tiles in it.
    public var tiles: Int
    /// Features over all tiles (of the last run, when it resumed).
    public var features: Int
    /// Features left out of tiles over the size limit.
    public var droppedForSize: Int
    /// Source rows left out because they cannot be read.
    public var unreadable: [VectorTileGenerator.Unreadable]
}

/// The spool behind a lock: the generator's sink and the checkpoints share it.
final class LockedSpool: @unchecked Sendable {
    private let lock = NSLock()
    private let spool: TileSpool
    init(_ spool: TileSpool) { self.spool = spool }
    func add(_ key: TileKey, _ bytes: [UInt8]) throws { try lock.withLock { try spool.add(key, data: bytes) } }
    func makeDurable() throws -> (size: UInt64, count: Int) { try lock.withLock { try spool.makeDurable() } }
    func levels() -> [Int: Int] { lock.withLock { spool.entries.reduce(into: [:]) { $0[Int($1.level), default: 0] += 1 } } }
}
