import Foundation

/// The samples the `outpost` executable carries with it (a SwiftPM resource bundle beside the
/// executable), so `outpost demo` works from any directory and as an installed binary.
///
/// The bundle is looked up by hand rather than through `Bundle.module`, whose accessor stops the
/// process when the bundle is missing: a missing sample is an ordinary error here.
public enum BundledSamples {
    /// The resource bundle SwiftPM writes beside the executable (`<package>_<target>.resources`).
    public static let bundleName = "Outpost_OutpostSampleData.resources"

    /// What a samples folder holds, as the repository's `SampleData` does: three service
    /// directories (`service.json`, `data/*.geojson`), the planning GP service and the crews' map.
    public static let required = [
        "street_inspections/service.json", "helsinki/service.json", "planning/service.json", "planning/planning.gp.json",
        "maps/helsinki-crews.map.json",
    ]

    /// The folder of bundled samples, or nil when no complete copy is found. Looked for, in order:
    /// the resource bundle beside the executable, and `../share/outpost/` from the executable's
    /// directory (an install under a prefix).
    public static var directory: URL? {
        candidates.first { missing(in: $0) == nil }
    }

    /// Where the samples are looked for, in order (for messages that say where they were not found).
    public static var candidates: [URL] {
        // Bundle.main's URL is the executable's directory, symbolic links resolved.
        let executableDirectory = Bundle.main.bundleURL
        return [
            executableDirectory.appendingPathComponent(bundleName),
            executableDirectory.deletingLastPathComponent().appendingPathComponent("share/outpost"),
        ]
    }

    /// The first file of ``required`` that `folder` lacks, or nil when it has them all.
    public static func missing(in folder: URL) -> String? {
        required.first { !FileManager.default.fileExists(atPath: folder.appendingPathComponent($0).path) }
    }
}
