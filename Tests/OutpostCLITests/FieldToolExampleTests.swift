import Foundation
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Examples/FieldTool, built by `./scripts/test` (with Outpost's image-codec traits off) into the
/// folder `OUTPOST_EXAMPLES_BIN` names: an app that takes only Outpost's products.
enum FieldToolBuild {
    static var binaries: URL? {
        ProcessInfo.processInfo.environment["OUTPOST_EXAMPLES_BIN"].map { URL(fileURLWithPath: $0) }
    }
}

@Suite("Examples/FieldTool: a field app on the library's products", .enabled(if: FieldToolBuild.binaries != nil))
struct FieldToolExampleTests {
    static func executable(_ name: String) throws -> String {
        let url = try #require(FieldToolBuild.binaries).appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else { throw ExternalToolError.missing(url.path) }
        return url.path
    }

    /// The sync stack with the traits off links no system library but libsqlite3 and zlib (and the
    /// C and Swift runtimes): no GEOS, PROJ, libjpeg-turbo, libwebp, libdeflate or libcrypto.
    @Test(.scaledTimeLimit(minutes: 1))
    func theSyncStackLinksOnlySQLiteAndZlib() async throws {
        let ldd = try await ExternalTools.run("/usr/bin/ldd", [try Self.executable("field-sync")])
        #expect(ldd.succeeded, "\(ldd.stderr)")
        let libraries = ldd.stdout.split(separator: "\n").compactMap { $0.split(whereSeparator: \.isWhitespace).first.map(String.init) }
        for forbidden in ["libgeos", "libproj", "libturbojpeg", "libjpeg", "libwebp", "libdeflate", "libcrypto", "libssl", "libcurl", "libxml2"] {
            #expect(!libraries.contains { $0.hasPrefix(forbidden) }, "\(forbidden) in \(libraries)")
        }
        // The two it is meant to link are there (ldd read the right file).
        #expect(libraries.contains { $0.hasPrefix("libsqlite3.so") }, "\(libraries)")
        #expect(libraries.contains { $0.hasPrefix("libz.so") }, "\(libraries)")
        // The field tool with the server in it does bring GEOS and PROJ: the check above can fail.
        let server = try await ExternalTools.run("/usr/bin/ldd", [try Self.executable("field-tool")])
        #expect(server.stdout.contains("libgeos_c"), "\(server.stdout)")
    }

    /// field-sync against `outpost serve`: generate, 600 inspections, a sync cancelled after its
    /// first batch, a second sync; the service then holds every inspection exactly once.
    @Test(.scaledTimeLimit(minutes: 3))
    func theSyncStackTakesAServiceOfflineAndSyncsExactlyOnce() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let serviceURL = server.featureServer("field_inspection")
        let before = try await Self.count(serviceURL)
        let work = TemporaryDirectory("field-sync")
        let run = try await ExternalTools.run(try Self.executable("field-sync"), [serviceURL.absoluteString, work.url.path])
        let after = try await Self.count(serviceURL)
        _ = await server.stop(signal: SIGTERM, timeout: 20)
        #expect(run.succeeded, "\(run.stdout)\n\(run.stderr)")
        // The zlib-only PNG path, and the codecs the traits left out.
        #expect(run.stdout.contains("codecs: png round trip ok, jpeg off (no JPEG codec is installed"), "\(run.stdout)")
        #expect(
            run.stdout.contains(", webp off (") && run.stdout.contains("WebP tiles cannot be written") && !run.stdout.contains("left a file"),
            "a WebP export is refused up front: \(run.stdout)")
        let report = try #require(run.stdout.split(separator: "\n").first { $0.hasPrefix("report:") }.map(String.init), "\(run.stdout)")
        #expect(report.contains("added 600") && report.contains("pending 0") && report.contains("checksums equal"), "\(report)")
        let pendingAfterCancel = Int(report.components(separatedBy: "pending after it ").last?.split(separator: ",").first ?? "") ?? 0
        #expect(pendingAfterCancel > 0, "the cancel stopped the first sync before it finished: \(report)")
        #expect(after == before + 600, "every inspection on the service exactly once: \(before) + 600 ≠ \(after)")
        withExtendedLifetime(service) {}
    }

    /// field-tool runs the same day against the server in its own process (EmbeddedServer) and
    /// stops it cleanly.
    @Test(.scaledTimeLimit(minutes: 3))
    func theFieldToolRunsTheDayAgainstItsOwnServer() async throws {
        let work = TemporaryDirectory("field-tool")
        let run = try await ExternalTools.run(try Self.executable("field-tool"), [Repository.sampleData("field_inspection").path, work.url.path])
        #expect(run.succeeded, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("second sync:") && run.stdout.contains("server stopped"), "\(run.stdout)")
        #expect(!run.stderr.contains("error"), "a clean stop logs no error: \(run.stderr)")
    }

    static func count(_ serviceURL: URL) async throws -> Int {
        var components = URLComponents(url: serviceURL.appendingPathComponent("0/query"), resolvingAgainstBaseURL: false)!
        components.queryItems = [.init(name: "where", value: "1=1"), .init(name: "returnCountOnly", value: "true"), .init(name: "f", value: "json")]
        let (body, _) = try await URLSession(configuration: .ephemeral).data(from: components.url!)
        return try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["count"] as? Int)
    }
}
