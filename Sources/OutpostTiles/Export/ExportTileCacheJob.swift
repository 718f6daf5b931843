import Foundation
import OutpostCore

/// Exports the tiles of an area and levels from a source into a `.tpkx`, an exploded cache or
/// an MBTiles file (docs/tiles.md).
///
/// Steps: `count` (the tile count, refused above ``ExportTileCacheParameters/maxTileCount`` before
/// any download), `fetch` (tiles fetched `concurrency` at a time, written in bundle order beside
/// the destination, made durable by a checkpoint at most once an interval, while tiles arrive or
/// the source stalls), `finish` (the written cache is opened and counted, then renamed into place). A job rebuilt from JSON after a kill
/// continues from its last checkpoint without fetching the tiles it has; a cancelled or failed job
/// removes its partial output.
public struct ExportTileCacheJob: JobDefinition {
    public static let jobType = "outpost.exportTileCache"

    /// Where the tiles come from.
    public var source: TileSourceDescriptor
    /// The area, levels and encoding of the export.
    public var exportParameters: ExportTileCacheParameters
    /// Where the cache is written; the extension chooses the format (`.tpkx`, `.mbtiles`, otherwise a folder).
    public var downloadFileURL: URL
    let environment: TileJobEnvironment

    /// An export of `parameters` from `source` into `downloadFileURL`.
    public init(source: TileSourceDescriptor, parameters: ExportTileCacheParameters, downloadFileURL: URL, environment: TileJobEnvironment = TileJobEnvironment()) {
        self.source = source
        self.exportParameters = parameters
        self.downloadFileURL = downloadFileURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        ["source": source.json, "export": exportParameters.json, "downloadFile": .string(downloadFileURL.path)]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let source = parameters["source"], let export = parameters["export"], let file = parameters["downloadFile"]?.stringValue else {
            throw JobError(.invalidJSON, "an export job needs source, export and downloadFile")
        }
        self.init(
            source: try TileSourceDescriptor(json: source), parameters: try ExportTileCacheParameters(json: export), downloadFileURL: URL(fileURLWithPath: file),
            environment: environment[TileJobEnvironment.self] ?? TileJobEnvironment())
    }

    public var stepNames: [String] { ["count", "fetch", "finish"] }

    var format: TileCacheWriter.Format { TileCacheWriter.Format(path: downloadFileURL.path) }
    var partialURL: URL { downloadFileURL.deletingLastPathComponent().appendingPathComponent(downloadFileURL.lastPathComponent + ".partial") }
    var journalURL: URL { downloadFileURL.deletingLastPathComponent().appendingPathComponent(downloadFileURL.lastPathComponent + ".partial-tiles") }

    func tileSource() throws -> any TileSource { try environment.source ?? source.makeSource(token: environment.token) }

    public func run(step: Int, context: JobContext) async throws {
        let source = try tileSource()
        let info = try await source.cacheInfo()
        let selection = try exportParameters.selection(info)
        switch step {
        case 0:
            if exportParameters.webp, format != .mbtiles {
                throw TileCacheError(.unsupported, "WebP tiles need an .mbtiles output: Compact Cache bundles hold PNG and JPEG tiles")
            }
            let counts = selection.counts()
            let total = counts.reduce(0) { $0 + $1.tiles }
            context.log("\(total) tiles at levels \(counts.map { "\($0.level): \($0.tiles)" }.joined(separator: ", "))")
            guard total <= exportParameters.maxTileCount else {
                throw TileCacheError(.tooManyTiles, "the export needs \(total) tiles, more than the limit of \(exportParameters.maxTileCount); choose fewer levels or a smaller area")
            }
            context.record("tileCount", .integer(Int64(total)))
        case 1:
            try await fetch(selection, info: info, source: source, context: context)
        default:
            // A run killed after the move and before the job recorded its end left the cache in
            // place: it is checked there, and the step ends as that run would have.
            let files = FileManager.default
            let moved = !files.fileExists(atPath: partialURL.path) && files.fileExists(atPath: downloadFileURL.path)
            let written = Int(context.recorded("tilesWritten")?.integerValue ?? -1)
            let cache = TileCache(fileURL: moved ? downloadFileURL : partialURL)
            try await cache.load()
            let present = try cache.tileCount()
            guard present == written else {
                throw TileCacheError(.corrupt, "the written cache holds \(present) tiles, not the \(written) written", file: cache.fileURL.path)
            }
            if !moved {
                try? files.removeItem(at: downloadFileURL)
                try files.moveItem(at: partialURL, to: downloadFileURL)
                try environment.faults.check("tiles.afterMove")
            }
            context.log("wrote \(written) tiles to \(downloadFileURL.lastPathComponent)")
        }
    }

    private func fetch(_ selection: TileSelection, info: TileCacheInfo, source: any TileSource, context: JobContext) async throws {
        context.onRollback { [partialURL, journalURL] in
            try? FileManager.default.removeItem(at: partialURL)
            try? FileManager.default.removeItem(at: journalURL)
        }
        let total = Int64(context.recorded("tileCount")?.integerValue ?? Int64(selection.tileCount))
        var outputInfo = info
        outputInfo.minLevel = selection.levels.first ?? info.minLevel
        outputInfo.maxLevel = selection.levels.last ?? info.maxLevel
        let recoding = exportParameters.recoding
        if let recoding {
            outputInfo.format = recoding.format(from: info.format)
            outputInfo.compressionQuality = recoding.quality
        }
        if case .envelope(let e, let sr)? = exportParameters.areaOfInterest, let projected = try? WebMercator.convert(e, from: sr, to: info.scheme.spatialReference) {
            outputInfo.fullExtent = projected
        }
        let resumeState = context.checkpointData
        let writer: TileCacheWriter
        var done = 0, missing = 0
        if let state = resumeState, let writerState = state["writer"] {
            writer = try TileCacheWriter(resuming: writerState, format: format, at: partialURL, info: outputInfo, journal: journalURL)
            done = Int(state["done"]?.integerValue ?? 0)
            missing = Int(state["missing"]?.integerValue ?? 0)
            context.log("resuming after \(done) of \(total) tiles")
        } else {
            writer = try TileCacheWriter(format: format, at: partialURL, info: outputInfo, journal: journalURL)
        }
        let window = max(1, exportParameters.concurrency)
        let interval = environment.checkpointInterval
        var durable = done, lastCheckpoint = ContinuousClock.now, lastProgress = done
        try await withThrowingTaskGroup(of: FetchEvent.self) { group in
            // The iterator lives here, not in a helper closure: each launch must advance it.
            var keys = selection.tiles.dropFirst(done).makeIterator()
            var launched = done, written = done, inFlight = 0, exhausted = false, ticking = false
            var ready: [Int: (TileKey, [UInt8]?)] = [:]
            while true {
                while !exhausted, inFlight + ready.count < window * 2 {
                    guard let key = keys.next() else {
                        exhausted = true
                        break
                    }
                    let index = launched
                    launched += 1
                    inFlight += 1
                    group.addTask {
                        let tile = try await source.tile(key)
                        return .tile(index, key, recoding.flatMap { recoding in tile.map { recoding.recode($0) } } ?? tile)
                    }
                }
                if exhausted, inFlight == 0 { break }
                // While tiles are written but not durable, a tick wakes the loop once the
                // interval has passed: a source that stalls (a slow link, when crews kill
                // exports) must not keep what arrived before it from a checkpoint.
                if !ticking, interval > .zero, written > durable {
                    ticking = true
                    let wake = lastCheckpoint + interval
                    group.addTask {
                        try? await Task.sleep(until: wake, clock: .continuous)
                        return .tick
                    }
                }
                guard let event = try await group.next() else { break }
                if case .tile(let index, let key, let data) = event {
                    inFlight -= 1
                    ready[index] = (key, data)
                    // Written in the enumeration's (bundle) order, whatever order they arrived in.
                    while let (k, d) = ready.removeValue(forKey: written) {
                        if let d { try writer.add(k, data: d) } else { missing += 1 }
                        written += 1
                    }
                } else {
                    ticking = false
                }
                if written - lastProgress >= 512 {
                    lastProgress = written
                    context.reportProgress("tiles", done: Int64(written), total: total)
                }
                // Durable checkpoints (two fsyncs and the job's JSON) at most once an interval,
                // as soon as one is due (with interval 0: every 512 tiles): fast sources are not
                // throttled by the disk's flush latency, slow ones lose at most an interval.
                let unsaved = written - durable
                let due = ContinuousClock.now - lastCheckpoint >= interval && (interval > .zero || unsaved >= 512)
                guard unsaved > 0, due || context.isInterruptRequested else { continue }
                lastCheckpoint = ContinuousClock.now
                durable = written
                context.reportProgress("tiles", done: Int64(written), total: total)
                try environment.faults.check("tiles.beforeCheckpoint")
                let state = try writer.checkpoint()
                try await context.checkpoint(["done": .integer(Int64(written)), "missing": .integer(Int64(missing)), "writer": state])
                try environment.faults.check("tiles.afterCheckpoint")
            }
            // A tick still asleep ends now.
            group.cancelAll()
        }
        try writer.finish()
        context.reportProgress("tiles", done: total, total: total)
        context.record("tilesWritten", .integer(Int64(writer.tilesWritten)))
        context.record("sharedTiles", .integer(Int64(writer.sharedTiles)))
        context.record("missingTiles", .integer(Int64(missing)))
        if missing > 0 { context.log("\(missing) tiles were not in the source") }
    }

    /// What wakes the fetch loop: a tile (or its absence) arriving, or the checkpoint interval
    /// passing.
    private enum FetchEvent: Sendable {
        case tile(Int, TileKey, [UInt8]?)
        case tick
    }

    public func output(context: JobContext) async throws -> TileCache {
        let cache = TileCache(fileURL: downloadFileURL)
        try await cache.load()
        return cache
    }

    public func rollback(context: JobContext) async {
        try? FileManager.default.removeItem(at: partialURL)
        try? FileManager.default.removeItem(at: journalURL)
    }
}

/// Counts the tiles of an export and estimates its size from a sample of tiles fetched from the
/// source (ArcGIS `EstimateTileCacheSizeJob`).
public struct EstimateTileCacheSizeJob: JobDefinition {
    public static let jobType = "outpost.estimateTileCacheSize"

    /// Where the tiles come from.
    public var source: TileSourceDescriptor
    /// The area and levels of the export estimated.
    public var exportParameters: ExportTileCacheParameters
    /// Tiles fetched to estimate the average size.
    public var sampleSize: Int
    let environment: TileJobEnvironment

    /// An estimate of the export of `parameters` from `source`, sampling `sampleSize` tiles.
    public init(source: TileSourceDescriptor, parameters: ExportTileCacheParameters, sampleSize: Int = 24, environment: TileJobEnvironment = TileJobEnvironment()) {
        self.source = source
        self.exportParameters = parameters
        self.sampleSize = sampleSize
        self.environment = environment
    }

    public var parameters: JSONValue { ["source": source.json, "export": exportParameters.json, "sampleSize": .integer(Int64(sampleSize))] }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let source = parameters["source"], let export = parameters["export"] else { throw JobError(.invalidJSON, "an estimate job needs source and export") }
        self.init(
            source: try TileSourceDescriptor(json: source), parameters: try ExportTileCacheParameters(json: export),
            sampleSize: Int(parameters["sampleSize"]?.integerValue ?? 24), environment: environment[TileJobEnvironment.self] ?? TileJobEnvironment())
    }

    public var stepNames: [String] { ["estimate"] }

    public func run(step: Int, context: JobContext) async throws {
        let source = try environment.source ?? source.makeSource(token: environment.token)
        let selection = try exportParameters.selection(try await source.cacheInfo())
        let counts = selection.counts()
        let total = counts.reduce(0) { $0 + $1.tiles }
        context.record("tileCount", .integer(Int64(total)))
        context.record("perLevel", .object(Dictionary(uniqueKeysWithValues: counts.map { (String($0.level), JSONValue.integer(Int64($0.tiles))) })))
        // Evenly spaced tiles of the whole selection.
        let wanted = Set((0..<min(sampleSize, total)).map { $0 * total / max(1, min(sampleSize, total)) })
        var sampled = 0, present = 0, bytes = 0
        for (index, key) in selection.tiles.enumerated() where wanted.contains(index) {
            if let data = try await source.tile(key) {
                present += 1
                bytes += data.count
            }
            sampled += 1
            context.reportProgress("samples", done: Int64(sampled), total: Int64(wanted.count))
        }
        let average = present > 0 ? Double(bytes) / Double(present) : 0
        let presentShare = sampled > 0 ? Double(present) / Double(sampled) : 1
        let bundles = selection.ranges.reduce(0) { sum, r in
            sum + (r.maxRow / CompactBundle.packetSize - r.minRow / CompactBundle.packetSize + 1) * (r.maxCol / CompactBundle.packetSize - r.minCol / CompactBundle.packetSize + 1)
        }
        let size = Int64(Double(total) * presentShare * (average + 4)) + Int64(bundles * CompactBundle.fixedSize) + 4096
        context.record("fileSize", .integer(size))
        if total > exportParameters.maxTileCount {
            context.log("\(total) tiles is more than the export limit of \(exportParameters.maxTileCount)", severity: .warning)
        }
    }

    public func output(context: JobContext) async throws -> EstimateTileCacheSizeResult {
        let perLevel = (context.recorded("perLevel")?.objectValue ?? [:]).reduce(into: [Int: Int]()) { out, item in
            if let level = Int(item.key), let n = item.value.integerValue { out[level] = Int(n) }
        }
        return EstimateTileCacheSizeResult(
            tileCount: Int(context.recorded("tileCount")?.integerValue ?? 0), fileSize: context.recorded("fileSize")?.integerValue ?? 0, perLevel: perLevel)
    }
}
