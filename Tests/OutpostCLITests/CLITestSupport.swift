import Foundation
import OutpostCore
import OutpostTestSupport

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

