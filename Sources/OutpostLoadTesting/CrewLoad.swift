import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostProtocol
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostSyncService

/// Many field crews syncing with one service at once, checked against oracles.
///
/// Each crew holds a replica of its own area: a cell of a row of cells that reaches a little into
/// its left neighbour's, so neighbours share a strip of features. The crews alternate the two
/// sync models. All at once, each makes `editsPerCrew` random edits (a tenth on features of the
/// shared strips, which its neighbour edits too) and syncs `syncsPerCrew` times at random moments
/// between them, retrying a sync that fails until it succeeds. Then every crew syncs twice more.
///
/// The run then checks, and reports as ``Report/problems`` what does not hold:
/// - the server equals an oracle that applies, in generation order and by the layer's conflict
///   policy, every batch the server accepted (seen on the wire by a recording proxy in front of
///   each server process), and every value a resolution discarded has a conflict record;
/// - every crew's own edits are there (a second oracle, kept by the crews as they edit, of the
///   features only they edit): each feature it added is on the server exactly once unless it
///   deleted it, each it deleted is gone, and each it changed holds its last values;
/// - each replica equals the server within its area, with nothing left to send.
public enum CrewLoad {
    /// What a run does.
    public struct Configuration: Sendable {
        /// Crews syncing at once, each with its own replica of its own area.
        public var crews: Int
        /// Edits each crew makes.
        public var editsPerCrew = 100
        /// Syncs each crew makes during the concurrent phase.
        public var syncsPerCrew = 5
        /// Features in each crew's cell at the start; a tenth of them in the strip its right
        /// neighbour shares.
        public var featuresPerCrew = 200
        /// The seed of every random choice (a failing run replays with it).
        public var seed: UInt64 = 20_261_125
        /// Whole syncs a crew tries before giving up (each sync also retries its own requests).
        public var attempts = 30
        /// Called after each successful sync of the concurrent phase with the number of such
        /// syncs so far (all crews together): a site test times its faults by it.
        public var progress: (@Sendable (Int) -> Void)?

        /// A run of `crews` crews with the other settings at their defaults.
        public init(crews: Int) { self.crews = crews }
    }

    /// The name of the feature service a run serves.
    public static let serviceName = "crews"
    static let layerID = 0
    static let origin = (x: 24.90, y: 60.15)
    static let cellWidth = 0.01, strip = 0.001, cellHeight = 0.01

    /// The service's schema: one point layer of assets with a few fields.
    public static let schema = ServiceSchema(
        name: serviceName,
        layers: [
            LayerDefinition(
                id: layerID, name: "assets", geometryType: .point,
                fields: [
                    FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "globalid", type: .globalID),
                    FieldDefinition(name: "asset_id", type: .string, length: 32), FieldDefinition(name: "crew", type: .integer),
                    FieldDefinition(name: "status", type: .string, length: 16), FieldDefinition(name: "condition", type: .integer),
                    FieldDefinition(name: "note", type: .string, length: 64),
                ])
        ], maxRecordCount: 1_000_000)

    /// Crew `c`'s area: its cell and its left neighbour's shared strip.
    public static func area(crew c: Int) -> Envelope {
        Envelope(xmin: origin.x + Double(c) * cellWidth - strip, ymin: origin.y, xmax: origin.x + Double(c + 1) * cellWidth, ymax: origin.y + cellHeight)
    }

    /// x within crew `c`'s own part of its cell (nobody else's area), or within the strip it
    /// shares with crew `c + 1`, kept clear of the edges.
    static func x(crew c: Int, shared: Bool, _ rng: inout SeededGenerator) -> Double {
        let start = origin.x + Double(c + 1) * cellWidth - strip
        let range = shared ? (start + 0.00005)...(start + strip - 0.00005) : (origin.x + Double(c) * cellWidth + 0.00005)...(start - 0.00005)
        return (Double.random(in: range, using: &rng) * 1e6).rounded() / 1e6
    }

    static func y(_ rng: inout SeededGenerator) -> Double {
        (Double.random(in: (origin.y + 0.00005)...(origin.y + cellHeight - 0.00005), using: &rng) * 1e6).rounded() / 1e6
    }

    /// Whether a point of crew `c`'s replica is in its own part (not a shared strip).
    static func isOwn(_ x: Double, crew c: Int) -> Bool {
        x >= origin.x + Double(c) * cellWidth && x < origin.x + Double(c + 1) * cellWidth - strip
    }

    static let statuses = ["open", "in_progress", "closed"]

    /// Writes the service GeoPackage (the PostgreSQL backend loads it from there).
    public static func createService(at url: URL, _ configuration: Configuration) throws {
        Geodatabase.removeFiles(at: url)
        var rng = SeededGenerator(state: configuration.seed)
        try SQLiteServiceBackend.create(at: url, schema: schema) { conn in
            let table = try conn.geodatabase.table(named: "assets")
            var features: [Feature] = []
            for c in 0..<configuration.crews {
                for i in 0..<configuration.featuresPerCrew {
                    let shared = i % 10 == 9
                    features.append(Feature(
                        globalID: GlobalID.make(using: &rng),
                        attributes: [
                            "asset_id": .string("A\(c)-\(i)"), "crew": .integer(Int64(c)), "status": .string(statuses[i % 3]),
                            "condition": .integer(Int64(i % 5 + 1)), "note": .null,
                        ],
                        geometry: .point(try Point(x: x(crew: c, shared: shared, &rng), y: y(&rng)))))
                }
            }
            _ = try table.add(features, in: conn)
        }
    }

    /// What a run measured and what it found wrong.
    public struct Report: Sendable, Codable {
        /// Crews that ran.
        public var crews = 0
        /// Edits they made.
        public var edits = 0
        /// Syncs that succeeded during the concurrent phase (the two closing rounds excluded).
        public var syncs = 0
        /// Whole syncs that failed and were tried again.
        public var failedAttempts = 0
        /// The concurrent phase, from the first edit to the last crew's last sync.
        public var seconds = 0.0
        /// Each successful sync of the concurrent phase, retries included, in seconds, sorted.
        public var latencies: [Double] = []
        /// Upload batches the servers accepted (as the proxies saw them).
        public var acceptedBatches = 0
        /// Conflict records the servers hold.
        public var conflictRecords = 0
        /// Everything the oracles found wrong: empty when the run is correct.
        public var problems: [String] = []
        /// Crews' edits missing from the server at the end (added features not there, deleted
        /// ones still there, changed values not the crew's last), by the crews' own ledgers.
        public var lost = 0
        /// Features a crew added that the server holds more than once.
        public var duplicated = 0
        /// Every answer with a 5xx status the crews received, retried ones included.
        public var serverErrors: [ServerError] = []

        /// Successful syncs per second of the concurrent phase.
        public var syncsPerSecond: Double { seconds > 0 ? Double(syncs) / seconds : 0 }

        /// The sync latency at quantile `p` (0…1) of the concurrent phase, in seconds.
        public func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)]
        }
    }

    /// An answer with a 5xx status: when the crews' proxy saw it (seconds since 1970), the status
    /// and the request.
    public struct ServerError: Sendable, Codable, Equatable {
        /// When the answer came, in seconds since 1970.
        public var time: Double
        /// Its status.
        public var status: Int
        /// The request's method and path.
        public var request: String
        /// The start of the answer's body (who answered, and why).
        public var body: String
    }

    /// One crew: its replica and what it knows it did.
    final class Crew: Sendable {
        let index: Int
        let gdb: Geodatabase
        let area: Envelope
        let urls: [URL]
        struct Ledger {
            var own: [Int64] = []
            var shared: [Int64] = []
            /// Asset id → global id of the features it added.
            var added: [String: String] = [:]
            var deleted = Set<String>()
            /// Its last values of the features only it edits.
            var changed: [String: Oracle.Row] = [:]
            var edits = 0
        }
        let ledger: Locked<Ledger>

        init(index: Int, gdb: Geodatabase, urls: [URL], ledger: Ledger) {
            self.index = index
            self.gdb = gdb
            area = CrewLoad.area(crew: index)
            self.urls = urls
            self.ledger = Locked(ledger)
        }
    }

    /// Runs the load against the servers at `servers` (each a base URL such as
    /// `http://127.0.0.1:8080`, all serving ``serviceName`` from one store, which `backend`
    /// reads), with the replicas in `directory`.
    public static func run(
        _ configuration: Configuration, servers: [URL], backend: any FeatureServiceBackend & SyncBackend, directory: URL
    ) async throws -> Report {
        let oracle = Oracle()
        let errors = Locked<[ServerError]>([])
        let observe: LoopbackProxy.Observer = { method, uri, request, status, response in
            oracle.observe(method, uri, request, status, response)
            guard status >= 500 else { return }
            let seen = ServerError(
                time: Date().timeIntervalSince1970, status: status, request: "\(method) \(uri.split(separator: "?").first ?? "")",
                body: String(decoding: response.prefix(240), as: UTF8.self))
            errors.update { $0.append(seen) }
        }
        var proxies: [LoopbackProxy] = []
        for server in servers { proxies.append(try await LoopbackProxy.start(upstream: server, observer: observe) { _, _ in .forward }) }
        do {
            var report = try await run(configuration, oracle: oracle, proxies: proxies, servers: servers, backend: backend, directory: directory)
            report.serverErrors = errors.get()
            for proxy in proxies { try await proxy.stop() }
            return report
        } catch {
            for proxy in proxies { try? await proxy.stop() }
            throw error
        }
    }

    private static func run(
        _ configuration: Configuration, oracle: Oracle, proxies: [LoopbackProxy], servers: [URL], backend: any FeatureServiceBackend & SyncBackend,
        directory: URL
    ) async throws -> Report {
        let urls = zip(proxies, servers).map { proxy, server in
            proxy.url(for: server.appendingPathComponent("arcgis/rest/services/\(serviceName)/FeatureServer"))
        }
        let layer = try require(try await backend.schema().layer(id: layerID), "the service has no layer \(layerID)")
        var initial: [String: Oracle.Row] = [:]
        for f in try await serverFeatures(backend, query: FeatureQuery()) { initial[f.globalID!] = try Oracle.row(f, layer) }

        // Replicas, one after the other (making them is not the load).
        var crews: [Crew] = []
        for c in 0..<configuration.crews {
            let task = try GeodatabaseSyncTask(url: urls[c % urls.count])
            var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: area(crew: c))
            parameters.syncModel = c % 2 == 0 ? .geodatabase : .layer
            parameters.replicaName = "crew-\(c)"
            let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: directory.appendingPathComponent("crew-\(c).gpkg"), faults: FaultInjector())
            try job.start()
            let gdb = try await job.output
            var ledger = Crew.Ledger()
            for f in try await gdb.table(named: "assets").features() {
                guard case .point(let p)? = f.geometry, let x = p.position?.x, let id = f.objectID else { continue }
                if isOwn(x, crew: c) { ledger.own.append(id) } else { ledger.shared.append(id) }
            }
            crews.append(Crew(index: c, gdb: gdb, urls: urls, ledger: ledger))
        }

        // All at once.
        var report = Report()
        report.crews = configuration.crews
        let start = ContinuousClock.now
        let synced = Locked(0)
        let outcomes = try await withThrowingTaskGroup(of: (latencies: [Double], failures: Int).self) { group in
            for crew in crews {
                group.addTask {
                    try await work(crew, configuration) {
                        var count = 0
                        synced.update {
                            $0 += 1
                            count = $0
                        }
                        configuration.progress?(count)
                    }
                }
            }
            var all: [(latencies: [Double], failures: Int)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        report.seconds = (ContinuousClock.now - start).seconds
        report.latencies = outcomes.flatMap(\.latencies).sorted()
        report.syncs = report.latencies.count
        report.failedAttempts = outcomes.reduce(0) { $0 + $1.failures }
        report.edits = crews.reduce(0) { $0 + $1.ledger.withLock { $0.edits } }

        // Everything uploaded, then everything downloaded.
        for _ in 0..<2 {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for crew in crews { group.addTask { try await sync(crew, configuration).failures } }
                for try await failures in group { report.failedAttempts += failures }
            }
        }
        report.acceptedBatches = oracle.batchCount
        (report.problems, report.lost, report.duplicated) = try await check(crews, oracle: oracle, initial: initial, layer: layer, backend: backend)
        report.conflictRecords = try await backend.conflictRecords().count
        for crew in crews { try crew.gdb.close() }
        return report
    }

    /// A crew's edits with its syncs at random moments between them.
    static func work(_ crew: Crew, _ configuration: Configuration, synced: () -> Void) async throws -> (latencies: [Double], failures: Int) {
        var rng = SeededGenerator(state: configuration.seed &+ UInt64(crew.index + 1) &* 0x9E37_79B9)
        let count = configuration.editsPerCrew
        var moments = Set<Int>()
        while moments.count < min(configuration.syncsPerCrew - 1, max(count - 1, 0)) { moments.insert(Int.random(in: 1..<count, using: &rng)) }
        moments.insert(count)
        var latencies: [Double] = [], failures = 0
        for n in 1...count {
            try await edit(crew, n, &rng)
            if moments.contains(n) {
                let (seconds, failed) = try await sync(crew, configuration)
                latencies.append(seconds)
                failures += failed
                synced()
            } else if Int.random(in: 0..<4, using: &rng) == 0 {
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...5, using: &rng)))
            }
        }
        return (latencies, failures)
    }

    /// One sync through a server picked at random, tried again (after a growing pause) until it
    /// succeeds; returns its time, retries included, and how many tries failed.
    static func sync(_ crew: Crew, _ configuration: Configuration) async throws -> (seconds: Double, failures: Int) {
        let start = ContinuousClock.now
        var failures = 0
        while true {
            do {
                let task = try GeodatabaseSyncTask(url: crew.urls.randomElement()!)
                let job = task.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(attempts: 3), geodatabase: crew.gdb, faults: FaultInjector())
                try job.start()
                _ = try await job.output
                return ((ContinuousClock.now - start).seconds, failures)
            } catch {
                failures += 1
                guard failures < configuration.attempts else {
                    throw SyncError(.unreachable, "crew \(crew.index) could not sync after \(failures) attempts: \(error)")
                }
                try await Task.sleep(for: .milliseconds(20 * min(failures, 10) + Int.random(in: 0...20)))
            }
        }
    }

    /// One random edit, remembered in the crew's ledger.
    static func edit(_ crew: Crew, _ n: Int, _ rng: inout SeededGenerator) async throws {
        let table = try crew.gdb.table(named: "assets")
        let c = crew.index
        let roll = Int.random(in: 0..<100, using: &rng)
        var ledger = crew.ledger.withLock { $0 }
        defer { crew.ledger.withLock { $0 = ledger } }
        ledger.edits += 1
        if roll < 10, let id = ledger.shared.randomElement(using: &rng) {
            // A feature the neighbour edits too.
            var f = Feature(objectID: id)
            f.attributes = ["condition": .integer(Int64.random(in: 1...5, using: &rng)), "note": .string("crew \(c) edit \(n)")]
            try await table.update([f])
            return
        }
        if roll < 25 || ledger.own.isEmpty {
            let assetID = "C\(c)-\(n)"
            let gid = GlobalID.make(using: &rng)
            let added = try await table.add([Feature(
                globalID: gid,
                attributes: ["asset_id": .string(assetID), "crew": .integer(Int64(c)), "status": .string("open"), "condition": .integer(3), "note": .null],
                geometry: .point(try Point(x: x(crew: c, shared: false, &rng), y: y(&rng))))])
            if let id = added.first?.objectID { ledger.own.append(id) }
            ledger.added[assetID] = gid
            return
        }
        let index = Int.random(in: 0..<ledger.own.count, using: &rng)
        let id = ledger.own[index]
        var byID = FeatureQuery(returnGeometry: false)
        byID.objectIDs = [id]
        guard let gid = try await table.features(matching: byID).first?.globalID else { return }
        if roll < 33 {
            try await table.delete(objectIDs: [id])
            ledger.own.remove(at: index)
            ledger.deleted.insert(gid)
            ledger.changed[gid] = nil
            return
        }
        var f = Feature(objectID: id)
        var values: Oracle.Row = [:]
        if roll < 50 {
            let p = try Point(x: x(crew: c, shared: false, &rng), y: y(&rng))
            f.geometry = .point(p)
            values[table.definition.geometryColumn] = try JSONValue.parse(try EsriJSON.encode(.point(p)))
        } else {
            let status = statuses.randomElement(using: &rng)!, condition = Int64.random(in: 1...5, using: &rng)
            f.attributes = ["status": .string(status), "condition": .integer(condition)]
            values["status"] = .string(status)
            values["condition"] = .integer(condition)
        }
        try await table.update([f])
        ledger.changed[gid, default: [:]].merge(values) { _, new in new }
    }

    /// What the oracles find wrong.
    static func check(
        _ crews: [Crew], oracle: Oracle, initial: [String: Oracle.Row], layer: LayerDefinition, backend: any FeatureServiceBackend & SyncBackend
    ) async throws -> (problems: [String], lost: Int, duplicated: Int) {
        var problems: [String] = []
        var lost = 0
        var server: [String: Oracle.Row] = [:]
        var assetIDs: [String: Int] = [:]
        for f in try await serverFeatures(backend, query: FeatureQuery()) {
            let row = try Oracle.row(f, layer)
            server[f.globalID!] = row
            if let asset = row["asset_id"]?.stringValue { assetIDs[asset, default: 0] += 1 }
        }
        // The server against the batches it accepted.
        let (expected, discarded) = oracle.expected(from: [layerID: initial], policy: { _ in layer.conflicts }) { _ in layer.geometryColumn }
        let want = expected[layerID] ?? [:]
        let wrong = Set(server.keys).symmetricDifference(want.keys).union(server.keys.filter { want[$0] != nil && want[$0] != server[$0] })
        if !wrong.isEmpty {
            let text = { (row: Oracle.Row?) in row.map { JSONValue.object($0).jsonString } ?? "nothing" }
            let example = wrong.sorted().first.map { "\($0): server \(text(server[$0])), oracle \(text(want[$0]))" } ?? ""
            problems.append("\(wrong.count) features differ from the oracle of accepted batches, e.g. \(example)")
        }
        var recorded = Set<Oracle.Discard>()
        for r in try await backend.conflictRecords() {
            for column in r.columns { recorded.insert(Oracle.Discard(replica: r.replicaId ?? "", seq: r.seq ?? 0, globalId: r.globalId, column: column)) }
        }
        let missing = discarded.subtracting(recorded)
        if !missing.isEmpty { problems.append("\(missing.count) of \(discarded.count) discarded values have no conflict record, e.g. \(missing.first!)") }
        let duplicated = assetIDs.filter { $0.value > 1 }
        if !duplicated.isEmpty { problems.append("\(duplicated.count) asset ids are on the server more than once, e.g. \(duplicated.keys.sorted().first!)") }

        for crew in crews {
            let ledger = crew.ledger.withLock { $0 }
            let name = "crew \(crew.index)"
            // Its own edits, by its own account.
            for (asset, gid) in ledger.added where !ledger.deleted.contains(gid) {
                if assetIDs[asset] != 1 || server[gid] == nil { problems.append("\(name): added \(asset) (\(gid)), on the server \(assetIDs[asset] ?? 0) times") }
                if assetIDs[asset] == nil || server[gid] == nil { lost += 1 }
            }
            for gid in ledger.deleted where server[gid] != nil {
                problems.append("\(name): deleted \(gid), still on the server")
                lost += 1
            }
            for (gid, values) in ledger.changed {
                guard let row = server[gid] else {
                    problems.append("\(name): changed \(gid), gone from the server")
                    lost += 1
                    continue
                }
                for (column, value) in values where row[column] != value {
                    problems.append("\(name): \(gid).\(column) is \(row[column]?.jsonString ?? "missing"), it wrote \(value.jsonString)")
                    lost += 1
                }
            }
            // Its replica against the server within its area.
            var scope = FeatureQuery()
            scope.intersecting = .polygon(crew.area.polygon)
            var there: [String: Oracle.Row] = [:]
            for f in try await serverFeatures(backend, query: scope) { there[f.globalID!] = try Oracle.row(f, layer) }
            var here: [String: Oracle.Row] = [:]
            for f in try await crew.gdb.table(named: "assets").features() { here[f.globalID!] = try Oracle.row(f, layer) }
            let differing = Set(here.keys).symmetricDifference(there.keys).union(here.keys.filter { there[$0] != nil && there[$0] != here[$0] })
            if !differing.isEmpty { problems.append("\(name): \(differing.count) features differ from the server's, e.g. \(differing.sorted().first!)") }
            let pending = try await crew.gdb.read { try $0.capturedChanges().count }
            if pending > 0 { problems.append("\(name): \(pending) changes still to send") }
        }
        return (problems, lost, duplicated.count)
    }

    /// Every server feature matching `query`, a page at a time.
    static func serverFeatures(_ backend: any FeatureServiceBackend, query: FeatureQuery) async throws -> [Feature] {
        var q = query
        q.limit = 5000
        var all: [Feature] = []
        while true {
            let page = try await backend.features(layerID: layerID, query: q)
            all += page
            guard page.count == 5000, let last = page.last?.objectID else { return all }
            q.afterObjectID = last
        }
    }

    static func require<T>(_ value: T?, _ message: String) throws -> T {
        guard let value else { throw SyncError(.unsupported, message) }
        return value
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
