import FieldWork
import Foundation
import OutpostOffline

// field-sync <FeatureServer URL> [work directory]
// The field day against a service elsewhere, built from the products a field app takes.
let arguments = CommandLine.arguments.dropFirst()
guard let service = arguments.first, let url = URL(string: service) else {
    FileHandle.standardError.write(Data("usage: field-sync <FeatureServer URL> [work directory]\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: arguments.dropFirst().first ?? NSTemporaryDirectory() + "field-sync-\(ProcessInfo.processInfo.processIdentifier)")
do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    print("codecs: \(try await FieldWork.codecs(directory: directory))")
    // Offline maps come with the same system libraries (named so that the linker keeps them).
    print("offline maps: \(OfflineMapTask.self)")
    let report = try await FieldWork.run(serviceURL: url, directory: directory) { print($0) }
    print("report: generated \(report.generated), added \(report.added), batches before the cancel \(report.batchesBeforeCancel), pending after it \(report.pendingAfterCancel), final \(report.final), pending \(report.pendingAtEnd), checksums \(report.checksumsMatch ? "equal" : "differ")")
    guard report.final == report.generated + report.added, report.pendingAtEnd == 0, report.checksumsMatch else { exit(1) }
} catch {
    FileHandle.standardError.write(Data("field-sync: \(error)\n".utf8))
    exit(1)
}
