import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Exports a replica's pending edits to a delta file as a job (``DeltaSync/exportEdits(from:to:parameters:)``):
/// the file appears at its name only when whole; the edits stay pending until the reply is
/// imported.
public struct ExportDeltaJob: JobDefinition {
    public static let jobType = "outpost.exportDelta"
    /// What the export wrote: the delta file's header and how many edits it holds.
    public typealias Output = DeltaSync.ExportSummary

    /// The replica whose pending edits are exported.
    public let geodatabase: Geodatabase
    /// Where the delta file is written (it appears only when complete).
    public var deltaFileURL: URL
    /// The batch size and direction the export follows, as an HTTP sync would.
    public var syncParameters: SyncGeodatabaseParameters

    /// An export of `geodatabase`'s pending edits to `deltaFileURL`.
    public init(geodatabase: Geodatabase, deltaFileURL: URL, syncParameters: SyncGeodatabaseParameters = SyncGeodatabaseParameters()) {
        self.geodatabase = geodatabase
        self.deltaFileURL = deltaFileURL
        self.syncParameters = syncParameters
    }

    public var parameters: JSONValue {
        ["geodatabase": .string(geodatabase.url.path), "deltaFile": .string(deltaFileURL.path), "sync": (try? JSONValueEncoder().encode(syncParameters)) ?? .null]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let path = parameters["geodatabase"]?.stringValue, let file = parameters["deltaFile"]?.stringValue else {
            throw JobError(.invalidJSON, "a delta export needs geodatabase and deltaFile")
        }
        let sync = try parameters["sync"].flatMap { $0.isNull ? nil : try JSONValueDecoder().decode(SyncGeodatabaseParameters.self, from: $0) }
        self.init(geodatabase: try DeltaJobSupport.open(path, environment), deltaFileURL: URL(fileURLWithPath: file), syncParameters: sync ?? SyncGeodatabaseParameters())
    }

    public var stepNames: [String] { ["export"] }

    public func run(step: Int, context: JobContext) async throws {
        let summary = try await DeltaSync.exportEdits(from: geodatabase, to: deltaFileURL, parameters: syncParameters)
        context.record("summary", try JSONValueEncoder().encode(summary))
        context.log("batch \(summary.header.seq.map(String.init) ?? "none") with \(summary.edits) edits written to \(deltaFileURL.lastPathComponent)")
    }

    public func output(context: JobContext) async throws -> DeltaSync.ExportSummary {
        guard let json = context.recorded("summary") else { throw JobError(.invalidJSON, "the export job has no summary") }
        return try JSONValueDecoder().decode(DeltaSync.ExportSummary.self, from: json)
    }
}

/// Imports a service's reply or an update package into a replica as a job
/// (``DeltaSync/importReply(into:from:)``): checked whole first, applied in one transaction.
public struct ImportDeltaJob: JobDefinition {
    public static let jobType = "outpost.importDelta"
    /// What the import did: acknowledged edits, rejected ones, conflicts and changes applied.
    public typealias Output = DeltaSync.ImportSummary

    /// The replica the service's reply is applied to.
    public let geodatabase: Geodatabase
    /// The reply delta file the service wrote (`outpost service import-delta`).
    public var deltaFileURL: URL

    /// An import of the reply at `deltaFileURL` into `geodatabase`.
    public init(geodatabase: Geodatabase, deltaFileURL: URL) {
        self.geodatabase = geodatabase
        self.deltaFileURL = deltaFileURL
    }

    public var parameters: JSONValue { ["geodatabase": .string(geodatabase.url.path), "deltaFile": .string(deltaFileURL.path)] }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let path = parameters["geodatabase"]?.stringValue, let file = parameters["deltaFile"]?.stringValue else {
            throw JobError(.invalidJSON, "a delta import needs geodatabase and deltaFile")
        }
        self.init(geodatabase: try DeltaJobSupport.open(path, environment), deltaFileURL: URL(fileURLWithPath: file))
    }

    public var stepNames: [String] { ["import"] }

    public func run(step: Int, context: JobContext) async throws {
        let summary = try await DeltaSync.importReply(into: geodatabase, from: deltaFileURL)
        context.record("summary", try JSONValueEncoder().encode(summary))
        context.log("\(deltaFileURL.lastPathComponent): \(summary.changes) changes applied" + (summary.acknowledged ? ", batch acknowledged" : ""))
    }

    public func output(context: JobContext) async throws -> DeltaSync.ImportSummary {
        guard let json = context.recorded("summary") else { throw JobError(.invalidJSON, "the import job has no summary") }
        return try JSONValueDecoder().decode(DeltaSync.ImportSummary.self, from: json)
    }
}

enum DeltaJobSupport {
    /// The geodatabase the environment holds for `path`, else opened.
    static func open(_ path: String, _ environment: JobEnvironment) throws -> Geodatabase {
        let url = URL(fileURLWithPath: path)
        return try environment[Geodatabase.self].flatMap { $0.url.standardizedFileURL == url.standardizedFileURL ? $0 : nil } ?? Geodatabase.open(at: url)
    }
}
