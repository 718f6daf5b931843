import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync
import OutpostTiles

/// A crew's day against a feature service: take it offline, add inspections, sync while watching
/// the progress, cancel the sync part way (the link drops, the app goes to the background),
/// sync again, and check that every inspection reached the service exactly once.
public enum FieldWork {
    public struct Report: Sendable {
        /// Features of the layer in the replica right after it was generated.
        public var generated: Int
        /// Inspections added in the field.
        public var added: Int
        /// Edits still waiting after the cancelled sync (between 1 and `added` when the cancel
        /// stopped the upload part way).
        public var pendingAfterCancel: Int
        /// Batches the first sync had uploaded when it was cancelled.
        public var batchesBeforeCancel: Int64
        /// Features in the replica at the end, and edits still waiting (0).
        public var final: Int
        public var pendingAtEnd: Int
        /// Whether every layer's checksum equals the service's after the second sync.
        public var checksumsMatch: Bool
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Runs the day against `serviceURL` (a FeatureServer), keeping the replica in `directory`.
    public static func run(serviceURL: URL, directory: URL, inspections: Int = 600, say: @escaping @Sendable (String) -> Void) async throws -> Report {
        let task = try GeodatabaseSyncTask(url: serviceURL)
        try await task.load()
        say("service loaded: \(task.serviceInfo?.layers.map(\.name).joined(separator: ", ") ?? "")")

        // 1. Take the service offline. `run()` starts the job and would cancel it with this Task.
        let parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
        let replicaURL = directory.appendingPathComponent("crew.gpkg")
        let replica = try await task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: replicaURL).run()
        defer { try? replica.close() }
        let points = try replica.table(named: "inspection_points")
        let generated = try await points.count()
        say("replica \(replicaURL.lastPathComponent): \(generated) inspection points")

        // 2. In the field: new inspections, in one transaction.
        let now = Date()
        var features: [Feature] = []
        for i in 0..<inspections {
            let attributes: [String: FieldValue] = [
                "asset_id": .string("FT-\(i)"), "asset_type": .string("hydrant"), "condition": .integer(Int64(1 + i % 5)),
                "status": .string("open"), "inspector": .string("field tool"), "inspected_at": .date(now),
            ]
            let x = -122.70 + Double(i % 40) * 0.001
            let y = 45.49 + Double(i / 40) * 0.001
            features.append(Feature(attributes: attributes, geometry: .point(try Point(x: x, y: y))))
        }
        _ = try await points.add(features)
        say("added \(inspections) inspections; pending \(try await points.pendingChanges().total)")

        // 3. Sync in small batches, watching progress, and cancel after the first batch is up.
        var syncParameters = try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: replica)
        syncParameters.maxChangesPerBatch = 50
        let first = task.makeSyncGeodatabaseJob(parameters: syncParameters, geodatabase: replica)
        let watcher = Task {
            // The stream ends when the job does.
            var seen: Int64 = 0
            for await progress in first.progressUpdates {
                guard let batches = progress.phases.first(where: { $0.name == "batches uploaded" }), batches.done > seen else { continue }
                say("sync progress: \(batches.done) batch(es) uploaded")
                if seen == 0 { first.cancel() }
                seen = batches.done
            }
            return seen
        }
        try first.start()
        let outcome = await first.waitUntilFinished()
        let batchesBeforeCancel = await watcher.value
        say("first sync: \(outcome)")
        guard outcome == .failed, first.error?.code == .cancelled else {
            throw Failure("the sync was not stopped by its cancel (it ended \(outcome): \(first.error.map { "\($0)" } ?? "no error"))")
        }
        let pendingAfterCancel = try await points.pendingChanges().total
        say("pending after the cancelled sync: \(pendingAfterCancel)")

        // 4. Sync again: what the first one uploaded is not sent twice, the rest goes up.
        let results = try await task.makeSyncGeodatabaseJob(parameters: syncParameters, geodatabase: replica).run()
        let checksumsMatch = results.allSatisfy { $0.checksumMatches == true }
        let final = try await points.count()
        let pendingAtEnd = try await points.pendingChanges().total
        say("second sync: uploaded \(results.map(\.uploaded.total).reduce(0, +)), checksums \(checksumsMatch ? "equal" : "differ"); \(final) inspection points, \(pendingAtEnd) pending")
        return Report(
            generated: generated, added: inspections, pendingAfterCancel: pendingAfterCancel, batchesBeforeCancel: batchesBeforeCancel, final: final,
            pendingAtEnd: pendingAtEnd, checksumsMatch: checksumsMatch)
    }

    /// What this process's tile codecs can do: PNG always (through zlib alone without
    /// OutpostTileCodecs); JPEG and WebP only with codecs installed, else a clear error.
    public static func codecs(directory: URL) async throws -> String {
        var pixels: [UInt8] = []
        for i in 0..<(64 * 64) {
            let x = UInt8(i % 64 * 4), y = UInt8(i / 64 * 4)
            pixels += [x, y, 128, 255]
        }
        let png = try PNGEncoder.encode(pixels: pixels, width: 64, height: 64)
        let decoded = try TileImageFormat.decode(png)
        guard decoded.pixels == pixels else { throw Failure("a PNG tile did not read back as written") }
        // Without OutpostTileCodecs, JPEG is recognised but writing one is a clear error.
        var jpeg = JPEGCodec.isAvailable ? "on" : "off"
        do {
            _ = try JPEGCodec.encode(rgba: pixels, width: 64, height: 64, quality: 80)
        } catch {
            jpeg += " (\(error))"
        }
        // And a WebP export is refused before it fetches anything (the port is closed).
        var webp = WebPCodec.isAvailable ? "on" : "off"
        let tiles = ExportTileCacheTask(source: .http("http://127.0.0.1:9/{z}/{x}/{y}.png"))
        try await tiles.load()
        var parameters = ExportTileCacheParameters(areaOfInterest: nil, levelIDs: [0])
        parameters.webp = true
        let output = directory.appendingPathComponent("webp.mbtiles")
        do {
            _ = try await tiles.makeExportTileCacheJob(parameters: parameters, downloadFileURL: output).run()
        } catch {
            webp += " (\(error))"
        }
        if FileManager.default.fileExists(atPath: output.path) { webp += " (left a file)" }
        return "png round trip ok, jpeg \(jpeg), webp \(webp)"
    }
}
