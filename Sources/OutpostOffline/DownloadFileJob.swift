import Foundation
import OutpostVectorTiles
import OutpostCore
import OutpostStorage

/// Downloads a file over HTTP into place: written beside the destination as `<name>.partial`,
/// continued where it ends after a pause or a kill (HTTP Range), moved into place when whole.
/// An offline map copies locator and network files with it, and a crew downloads a preplanned
/// package's files with it.
public struct DownloadFileJob: JobDefinition {
    public static let jobType = "outpost.downloadFile"

    /// The file to download.
    public var url: URL
    /// Where it goes (it appears only when whole).
    public var destination: URL
    /// The expected size, when known (the download is refused if it differs).
    public var expectedSize: Int64?
    let environment: OfflineJobEnvironment

    /// A download of `url` to `destination`.
    public init(url: URL, destination: URL, expectedSize: Int64? = nil, environment: OfflineJobEnvironment = OfflineJobEnvironment()) {
        self.url = url
        self.destination = destination
        self.expectedSize = expectedSize
        self.environment = environment
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = ["url": .string(url.absoluteString), "destination": .string(destination.path)]
        if let expectedSize { p["expectedSize"] = .integer(expectedSize) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let url = parameters["url"]?.stringValue.flatMap(URL.init(string:)), let path = parameters["destination"]?.stringValue else {
            throw JobError(.invalidJSON, "a download job needs url and destination")
        }
        self.init(
            url: url, destination: URL(fileURLWithPath: path), expectedSize: parameters["expectedSize"]?.integerValue,
            environment: environment[OfflineJobEnvironment.self] ?? OfflineJobEnvironment())
    }

    public var stepNames: [String] { ["download"] }

    var partialURL: URL { destination.deletingLastPathComponent().appendingPathComponent(destination.lastPathComponent + ".partial") }

    public func run(step: Int, context: JobContext) async throws {
        if FileManager.default.fileExists(atPath: destination.path), context.recorded("written") != nil { return }
        try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        // A kill between chunks leaves the partial file as long as what was written: the next
        // run asks for the rest.
        // The partial file's bytes are of the version this tag names; a changed file starts over.
        try await OfflineHTTP(token: environment.token).download(
            url, to: partialURL, validator: context.recorded("etag")?.stringValue, tagged: { context.record("etag", $0.map(JSONValue.string)) }
        ) { done, total in
            context.reportProgress("bytes", done: done, total: total ?? expectedSize)
        }
        try environment.faults.check("offline.afterDownload")
        let size = (try? FileManager.default.attributesOfItem(atPath: partialURL.path)[.size] as? Int64) ?? 0
        if let expectedSize, size != expectedSize {
            try? FileManager.default.removeItem(at: partialURL)
            throw OfflineMapError(.service, "\(url.lastPathComponent) arrived with \(size) bytes, not the \(expectedSize) announced; it is fetched again next time")
        }
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: partialURL, to: destination)
        context.record("written", true)
    }

    public func output(context: JobContext) async throws -> URL { destination }

    public func rollback(context: JobContext) async {
        try? FileManager.default.removeItem(at: partialURL)
    }
}

/// What a rebuilt offline-map job cannot keep in its JSON: the services' token and, for tests,
/// the fault points (`offline.partsStarted`, `offline.afterParts`, `offline.beforeMove`, `offline.afterDownload`, `offline.afterRegister`).
public struct OfflineJobEnvironment: Sendable {
    /// The token sent to secured services.
    public var token: String?
    /// Fault points, for tests that break a job at a chosen step.
    public var faults: FaultInjector
    /// The least time between tile-export checkpoints (nil: the export's default).
    public var tileCheckpointInterval: Duration?

    /// An environment with the services' token (nil for open services).
    public init(token: String? = nil, faults: FaultInjector = FaultInjector(), tileCheckpointInterval: Duration? = nil) {
        self.token = token
        self.faults = faults
        self.tileCheckpointInterval = tileCheckpointInterval
    }

    /// What a vector basemap's export takes from this environment.
    var vectorTiles: VectorTileJobEnvironment {
        VectorTileJobEnvironment(token: token, faults: faults, checkpointInterval: tileCheckpointInterval)
    }
}
