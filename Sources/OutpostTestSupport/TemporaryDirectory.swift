import Foundation

/// A fresh directory under the system temp folder, removed when the value is deinitialised.
public final class TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ label: String = "outpost-test") {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    deinit {
        if ProcessInfo.processInfo.environment["OUTPOST_KEEP_TEST_FILES"] == nil {
            try? FileManager.default.removeItem(at: url)
        }
    }
}
