import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

/// Runs the built `outpost` binary, as scripts do.
func outpost(_ arguments: [String], in directory: URL? = nil) async throws -> CommandResult {
    try await ExternalTools.run(Repository.outpostExecutable.path, arguments, currentDirectory: directory)
}

/// An edit at the office: `kind` (adds, updates or deletes) of a FeatureServer layer through its
/// applyEdits, as any client posts it; the answer.
func applyEdits(_ featureServer: String, layer: Int, _ kind: String, _ json: String) async throws -> JSONValue {
    let answer = try await ExternalTools.run("curl", ["-s", "--data-urlencode", "\(kind)=\(json)", "--data-urlencode", "f=json", "\(featureServer)/\(layer)/applyEdits"])
    return try JSONValue.parse(Data(answer.stdout.utf8))
}

/// The Helsinki sample served from `directory/services`, and a crew's replica of one of its
/// layers at `directory/crew.gpkg`: the server (stop it), the FeatureServer URL, the replica path.
func helsinkiCrew(in directory: TemporaryDirectory, layer: Int) async throws -> (server: ServeProcess, url: URL, replica: String) {
    let services = directory.file("services")
    try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
    let created = try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", services.appendingPathComponent("helsinki.gpkg").path])
    #expect(created.succeeded, "\(created.stderr)")
    let server = try await ServeProcess.start(service: services)
    let url = server.featureServer("helsinki")
    let replica = directory.file("crew.gpkg").path
    let taken = try await outpost(["replica", "create", "--url", url.absoluteString, "--layers", String(layer), "--out", replica])
    #expect(taken.succeeded, "\(taken.stderr)")
    return (server, url, replica)
}

