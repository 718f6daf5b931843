import Foundation

/// What a third-party reader reported that does not match the expectation.
public struct ReaderMismatch: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Checks a GeoPackage with the readers users have: GDAL's `ogrinfo` (read-only and update opens,
/// no warnings), `pyogrio.read_info` (warnings are errors) and GDAL's validator
/// (`validate_gpkg.py -k --extra --warning-as-error`).
public enum GeoPackageReaders {
    /// - Parameter layers: expected layers by name: (pyogrio geometry type or nil for tables, count).
    /// - Parameter relatedTables: the tables of the attachments (the media table and each layer's
    ///   mapping table), which readers list too. Nothing else may be listed: no `outpost_*` table,
    ///   no empty media table in a file without attachments.
    public static func expectReadable(_ file: URL, layers: [String: (String?, Int)], relatedTables: Set<String> = []) async throws {
        let ogrinfo = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-al", file.path])
        guard ogrinfo.succeeded else { throw ReaderMismatch(description: "ogrinfo failed: \(ogrinfo.stderr)") }
        let listed = Set(ogrinfo.stdout.split(separator: "\n").compactMap { line in
            line.hasPrefix("Layer name: ") ? String(line.dropFirst("Layer name: ".count)) : nil
        })
        guard listed == Set(layers.keys).union(relatedTables) else {
            throw ReaderMismatch(description: "ogrinfo lists \(listed.sorted()), expected \(Set(layers.keys).union(relatedTables).sorted())")
        }
        for output in [ogrinfo.stdout, ogrinfo.stderr] where output.contains("Warning") || output.contains("ERROR") {
            throw ReaderMismatch(description: "ogrinfo warned: \(ogrinfo.stderr)\(ogrinfo.stdout.split(separator: "\n").filter { $0.contains("Warning") || $0.contains("ERROR") })")
        }
        for (name, (_, count)) in layers {
            guard ogrinfo.stdout.contains("Layer name: \(name)\n") else {
                throw ReaderMismatch(description: "ogrinfo does not list layer \(name)")
            }
            let section = ogrinfo.stdout.components(separatedBy: "Layer name: \(name)\n")[1]
            guard section.contains("Feature Count: \(count)\n") else {
                throw ReaderMismatch(description: "ogrinfo counts \(name) differently from \(count)")
            }
        }
        // An update open (what QGIS does when editing) must not warn either.
        let update = try await ExternalTools.run("ogrinfo", ["-so", file.path])
        guard update.succeeded, !update.stderr.contains("Warning"), !update.stderr.contains("ERROR") else {
            throw ReaderMismatch(description: "ogrinfo (update open) warned: \(update.stderr)")
        }

        let expectedJSON = "{" + layers.map { name, v in
            "\"\(name)\": {\"type\": \(v.0.map { "\"\($0)\"" } ?? "null"), \"count\": \(v.1)}"
        }.joined(separator: ", ") + "}"
        let relatedJSON = "[" + relatedTables.sorted().map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        let script = """
            import json, sys, warnings
            import pyogrio
            path, expected, related = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
            # GDAL warnings surface as Python warnings: make them failures while reading.
            warnings.simplefilter("error")
            listed = {name: kind for name, kind in pyogrio.list_layers(path)}
            for name, want in expected.items():
                info = pyogrio.read_info(path, layer=name)
                assert info["features"] == want["count"], (name, info["features"], want["count"])
                assert info["geometry_type"] == want["type"], (name, info["geometry_type"], want["type"])
            assert set(listed) == set(expected) | set(related), sorted(listed)
            for name in related:
                assert listed[name] is None, (name, listed[name])
            print("ok")
            """
        let py = try await ExternalTools.python(script, [file.path, expectedJSON, relatedJSON])
        guard py.succeeded else { throw ReaderMismatch(description: "pyogrio: \(py.stderr)") }

        guard let validator = ExternalTools.validateGPKG else { throw ExternalToolError.missing("validate_gpkg.py (OUTPOST_VALIDATE_GPKG)") }
        let check = try await ExternalTools.run("/usr/bin/python3", [validator, "-k", "--extra", "--warning-as-error", file.path])
        guard check.succeeded else {
            throw ReaderMismatch(description: "validate_gpkg.py failed: \(check.stdout)\(check.stderr)")
        }
    }
}
