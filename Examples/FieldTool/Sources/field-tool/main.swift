import FieldWork
import Foundation
import OutpostSQLiteService
import OutpostServer
import OutpostStorage

// field-tool <service directory: service.json and data/> [work directory]
// Creates a feature service from the sample, serves it in this process, and runs the field day
// against it: take it offline, edit, watch the sync, cancel it part way, sync again, check.
let arguments = CommandLine.arguments.dropFirst()
guard let sample = arguments.first else {
    FileHandle.standardError.write(Data("usage: field-tool <service directory> [work directory]\n".utf8))
    exit(2)
}
let sampleURL = URL(fileURLWithPath: sample)
let directory = URL(fileURLWithPath: arguments.dropFirst().first ?? NSTemporaryDirectory() + "field-tool-\(ProcessInfo.processInfo.processIdentifier)")
do {
    let services = directory.appendingPathComponent("services")
    try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
    _ = try SQLiteServiceBackend.create(
        at: services.appendingPathComponent("field_inspection.gpkg"), schema: try ServiceSchema.load(from: sampleURL.appendingPathComponent("service.json")),
        dataDirectory: sampleURL.appendingPathComponent("data"), overwrite: true)
    let server = try await EmbeddedServer.start(services: try await ServiceDirectory(loading: services))
    print("serving \(server.url)")
    let report: FieldWork.Report
    do {
        report = try await FieldWork.run(serviceURL: server.featureServiceURL(named: "field_inspection"), directory: directory) { print($0) }
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
    print("server stopped")
    guard report.final == report.generated + report.added, report.pendingAtEnd == 0, report.checksumsMatch else { exit(1) }
} catch {
    FileHandle.standardError.write(Data("field-tool: \(error)\n".utf8))
    exit(1)
}
