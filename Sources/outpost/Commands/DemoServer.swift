import Foundation
import Logging
import OutpostCore
import OutpostLocator
import OutpostRouting
import OutpostSQLiteService
import OutpostSampleData
import OutpostServer
import OutpostStorage
import OutpostSyncService
import ServiceLifecycle

/// The demo's office: the bundled samples made into a services folder (three feature services, a
/// locator and a street network built from the Helsinki sample, the planning GP service, the crews'
/// map definition), as `outpost serve --service` would serve it.
struct DemoServices {
    /// The folder `outpost serve --service` takes.
    let folder: URL
    /// Every service of the folder, open.
    let directory: ServiceDirectory
    /// The feature services by name (the office imports delta files into them).
    let backends: [String: any SyncBackend]
    /// A line for each kind of service, for the demo's output.
    let summary: String

    /// Writes the services folder under `work` from the samples in `samples` (the repository's
    /// SampleData layout) and opens it.
    static func make(from samples: URL, in work: URL) async throws -> DemoServices {
        let folder = work.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var features: [String] = []
        for name in ["street_inspections", "helsinki", "planning"] {
            let sample = samples.appendingPathComponent(name)
            let counts = try SQLiteServiceBackend.create(
                at: folder.appendingPathComponent("\(name).gpkg"), schema: try ServiceSchema.load(from: sample.appendingPathComponent("service.json")),
                dataDirectory: sample.appendingPathComponent("data"), overwrite: true)
            features.append("\(name) (" + counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + ")")
        }
        try replace(folder.appendingPathComponent("planning.gp.json"), with: samples.appendingPathComponent("planning/planning.gp.json"))
        try replace(folder.appendingPathComponent("helsinki-crews.map.json"), with: samples.appendingPathComponent("maps/helsinki-crews.map.json"))

        // The address locator and the street network, as `outpost locator create` and
        // `outpost network create` build them (README's quick start).
        let helsinki = try Geodatabase.open(at: folder.appendingPathComponent("helsinki.gpkg"), readOnly: true)
        defer { try? helsinki.close() }
        let located = try LocatorBuilder.create(
            from: helsinki,
            sources: [
                LocatorSource(layer: "addresses", fields: LocatorFieldMap(house: "house_number", street: "street", city: "city", postal: "postcode", name: "name")),
                LocatorSource(layer: "streets", fields: LocatorFieldMap(street: "name")),
            ],
            at: folder.appendingPathComponent("helsinki.locator"), overwrite: true)
        let network = try NetworkBuilder.create(
            from: helsinki, layer: "streets", fields: NetworkFieldMap(name: "name", oneway: "oneway", speed: "maxspeed", roadClass: "highway"),
            at: folder.appendingPathComponent("helsinki.network"), overwrite: true)

        let files = try await ServiceDirectory.open(at: folder)
        let directory = try ServiceDirectory(checking: files)
        var backends: [String: any SyncBackend] = [:]
        for backend in files.backends { if let sync = backend as? any SyncBackend { backends[backend.name] = sync } }
        let summary = [
            "feature services " + features.joined(separator: ", "),
            "a basemap drawn from helsinki's streets",
            "a locator of \(located.entries) addresses and places",
            "a street network of \(network.edges) edges",
            "the planning GP service (\(files.geoprocessing.first?.definition.tasks.count ?? 0) tasks)",
        ].joined(separator: "; ")
        return DemoServices(folder: folder, directory: directory, backends: backends, summary: summary)
    }

    private static func replace(_ destination: URL, with source: URL) throws {
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.copyItem(at: source, to: destination)
    }
}

/// The demo's server on a loopback port: stopped to cut the crew's link, started again on the
/// same port (the offline map holds its URLs) when the link comes back.
struct DemoServer {
    let base: String
    let port: Int
    private let group: ServiceGroup
    private let running: Task<Void, any Error>

    /// Serves `services` on `port` (0: a free one) and returns once it listens. With
    /// `stopsOnSignals`, SIGINT and SIGTERM stop it gracefully (`--keep`); otherwise they end the
    /// process as usual.
    static func start(_ services: ServiceDirectory, in work: URL, port: Int = 0, stopsOnSignals: Bool = false) async throws -> DemoServer {
        let (listening, announce) = AsyncStream<String>.makeStream()
        let app = try OutpostApplication.make(
            services: services, configuration: ServerConfiguration(port: port, outputDirectory: work.appendingPathComponent("server-files"))
        ) { url in
            announce.yield(url)
            announce.finish()
        }
        let group = ServiceGroup(
            configuration: .init(services: [app], gracefulShutdownSignals: stopsOnSignals ? [.sigterm, .sigint] : [], logger: Logger(label: "outpost.demo")))
        let running = Task { try await group.run() }
        var base: String?
        for await url in listening { base = url }
        guard let base, let chosen = URL(string: base)?.port else {
            _ = try? await running.value
            throw CLIFailure(message: "the demo's server did not start")
        }
        return DemoServer(base: base, port: chosen, group: group, running: running)
    }

    /// Stops listening once the requests in flight are answered.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }

    /// Waits until the server stops (Ctrl-C, for `--keep`).
    func wait() async {
        _ = try? await running.value
    }
}
