import Foundation

/// The sample services the `outpost` executable carries with it (a SwiftPM resource bundle
/// beside the executable), so `outpost demo` works from any directory and as an installed binary.
///
/// The bundle is looked up by hand rather than through `Bundle.module`, whose accessor stops the
/// process when the bundle is missing: a missing sample is an ordinary error here.
public enum BundledSamples {
    /// The resource bundle SwiftPM writes beside the executable (`<package>_<target>.resources`).
    public static let bundleName = "Outpost_OutpostSampleData.resources"

    /// The field-inspection service directory (`service.json`, `data/*.geojson`), or nil when no
    /// copy is found. Looked for, in order: in the resource bundle beside the executable, and in
    /// `../share/outpost/` from the executable's directory (an install under a prefix).
    public static var fieldInspection: URL? {
        candidates(for: "field_inspection").first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("service.json").path) }
    }

    /// Where a sample is looked for, in order (for messages that say where it was not found).
    public static func candidates(for sample: String) -> [URL] {
        // Bundle.main's URL is the executable's directory, symbolic links resolved.
        let executableDirectory = Bundle.main.bundleURL
        return [
            executableDirectory.appendingPathComponent(bundleName).appendingPathComponent(sample),
            executableDirectory.deletingLastPathComponent().appendingPathComponent("share/outpost").appendingPathComponent(sample),
        ]
    }
}
