import Foundation

/// Locations in the repository, for tests that read sample data and schemas.
public enum Repository {
    /// The package root (found from this source file's location).
    public static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    public static func sampleData(_ path: String) -> URL { root.appendingPathComponent("SampleData/\(path)") }
    public static func schema(_ name: String) -> URL { root.appendingPathComponent("Schemas/\(name)") }

    /// The `outpost` executable built next to the tests.
    public static var outpostExecutable: URL {
        if let explicit = ProcessInfo.processInfo.environment["OUTPOST_EXECUTABLE"] {
            return URL(fileURLWithPath: explicit)
        }
        // Test bundles live in .build/<triple>/debug/; the executable sits beside them.
        let bundle = Bundle.main.bundleURL
        for dir in [bundle, bundle.deletingLastPathComponent()] {
            let candidate = dir.appendingPathComponent("outpost")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return root.appendingPathComponent(".build/debug/outpost")
    }
}
