import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import OutpostCore
import OutpostLocator
import OutpostServer
import OutpostStorage

/// Locators at scale: a synthetic country of `count` addresses (40 cities × 250 streets with
/// Finnish-style compound names, house numbers 1–100 with letters on some, postal codes, a few
/// named places), built into a locator in a worker process (time, addresses/s, file size, peak
/// memory), then searched:
/// - geocode with one random typo, suggest with half of "house street, city" typed, reverse at
///   address points — p50/p99 per library call and over HTTP (one client, `outpost serve` in its
///   own process);
/// - the floor: SQLite FTS5 alone on the same labels (one table, the words ANDed, the last one a
///   prefix), in the same run.
/// Targets (issue 23): build ≥ 50,000 addresses/s; geocode p50 ≤ 2 ms and p99 ≤ 20 ms with typos;
/// suggest p50 ≤ 1 ms; reverse p50 ≤ 0.5 ms.
enum LocatorBenchmark {
    struct Address {
        var street: String
        var house: String
        var postal: String
        var city: String
        var name: String?
        var x: Double
        var y: Double
        var label: String { "\(street) \(house), \(postal) \(city)" }
    }

    static let syllables = ["ma", "ri", "ka", "tu", "lo", "ne", "si", "vi", "ha", "ko", "pe", "ta", "no", "ru", "le", "mi", "sa", "ke", "jo", "va", "tö", "pä"]
    static let streetWords = ["katu", "tie", "kuja", "polku", "tori", "ranta", "rinne", "kaari", "aukio", "väylä"]

    /// The synthetic addresses, the same for a given count every run.
    static func addresses(_ count: Int) -> [Address] {
        var random = GeoprocessingBenchmark.FastRandom(seed: 23)
        let cities = 40
        let streetsPerCity = max(1, count / (cities * 100))
        var out: [Address] = []
        out.reserveCapacity(count)
        func word(_ n: Int, length: Int) -> String {
            var n = n, s = ""
            for _ in 0..<length {
                s += syllables[n % syllables.count]
                n /= syllables.count
            }
            return s
        }
        for c in 0..<cities {
            let city = word(c * 7 + 3, length: 2).capitalized + "la"
            let cx = 21.5 + Double(c % 8) * 1.1, cy = 60.2 + Double(c / 8) * 1.4
            for s in 0..<streetsPerCity {
                let stem = word(c * streetsPerCity + s, length: 3)
                let street = (stem + "n" + streetWords[(c + s) % streetWords.count]).capitalized
                let postal = String(format: "%05d", c * 1_000 + s / 10 * 10 + 10)
                let sx = cx + (random.unit() - 0.5) * 0.3, sy = cy + (random.unit() - 0.5) * 0.15
                let heading = random.unit() * 2 * Double.pi
                for h in 1...100 {
                    guard out.count < count else { return out }
                    var house = String(h)
                    if random.unit() < 0.08 { house += " \(["A", "B", "C"][Int(random.unit() * 3) % 3])" }
                    let d = Double(h) * 0.00012
                    let name: String? = random.unit() < 0.02 ? "Kahvila \(word(c * 131 + s * 17 + h, length: 2).capitalized)" : nil
                    out.append(Address(
                        street: street, house: house, postal: postal, city: city, name: name,
                        x: sx + cos(heading) * d * 2 + (h % 2 == 0 ? 0.00004 : -0.00004), y: sy + sin(heading) * d))
                }
            }
        }
        return out
    }

    /// The addresses as a GeoPackage layer (kept between runs).
    static func geodatabase(_ addresses: [Address], in folder: URL) async throws -> URL {
        let url = folder.appendingPathComponent("addresses-\(addresses.count).gpkg")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let fields = [
            FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "street", type: .string), FieldDefinition(name: "house", type: .string),
            FieldDefinition(name: "postal", type: .string), FieldDefinition(name: "city", type: .string), FieldDefinition(name: "name", type: .string),
        ]
        let layer = LayerDefinition(id: 0, name: "addresses", geometryType: .point, fields: fields, spatialReference: .wgs84, sync: false)
        let partial = url.appendingPathExtension("partial.gpkg")
        let gdb = try Geodatabase.create(at: partial, schema: ServiceSchema(name: "synthetic", layers: [layer], tables: []), overwrite: true, changeCapture: false)
        let table = try gdb.table(named: "addresses")
        var batch: [Feature] = []
        for a in addresses {
            var attributes: [String: FieldValue] = ["street": .string(a.street), "house": .string(a.house), "postal": .string(a.postal), "city": .string(a.city)]
            if let name = a.name { attributes["name"] = .string(name) }
            batch.append(Feature(attributes: attributes, geometry: .point(try Point(Position(x: a.x, y: a.y)))))
            if batch.count == 20_000 {
                _ = try await table.add(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { _ = try await table.add(batch) }
        try gdb.close()
        try FileManager.default.moveItem(at: partial, to: url)
        return url
    }

    /// The worker: builds the locator and prints the build's seconds and its own peak memory.
    static func build(_ gdbPath: String, _ out: String) throws {
        let gdb = try Geodatabase.open(at: URL(fileURLWithPath: gdbPath), readOnly: true)
        let summary = try LocatorBuilder.create(
            from: gdb, sources: [LocatorSource(layer: "addresses", fields: try LocatorFieldMap(parsing: "house=house,street=street,city=city,postal=postal,name=name"))],
            at: URL(fileURLWithPath: out), overwrite: true)
        try gdb.close()
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) {
            print("vmhwm-kb \(line.split(separator: " ").dropFirst().first ?? "0")")
        }
        print(summary.seconds)
    }

    static func run(count: Int, executable: String, workDirectory: URL) async throws {
        let folder = workDirectory.appendingPathComponent("locator")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        print("generating \(count) synthetic addresses…")
        let addresses = addresses(count)
        let gdb = try await geodatabase(addresses, in: folder)
        let services = folder.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let locatorURL = services.appendingPathComponent("country.locator")

        // Build, in its own process: time, rate, size, peak memory.
        let built = try measure([executable, "worker-locator-build", gdb.path, locatorURL.path])
        let seconds = try reportedSeconds(built)
        let size = (try FileManager.default.attributesOfItem(atPath: locatorURL.path)[.size] as? NSNumber)?.doubleValue ?? 0
        printTable(
            "Locator build, \(count) addresses (release build; target ≥ 50,000 addresses/s)",
            ["addresses", "seconds", "addresses/s", "file MB", "bytes/address", "peak MB"],
            [[String(count), format(seconds, 1), String(Int(Double(count) / seconds)), format(size / 1_048_576, 1), String(Int(size / Double(count))), format(built.peakMemoryMB, 0)]])

        // The queries: 2,000 addresses, each typed with one typo, half typed, and its point.
        var random = GeoprocessingBenchmark.FastRandom(seed: 5)
        let sample = (0..<2_000).map { _ in addresses[Int(random.unit() * Double(addresses.count)) % addresses.count] }
        var typos: [String] = []
        for a in sample { typos.append(typo(a.label, &random)) }
        let halves = sample.map { a -> String in
            let text = "\(a.house) \(a.street), \(a.city)"
            return String(text.prefix((text.count + 1) / 2))
        }
        let library = try librarySearches(locatorURL: locatorURL, sample: sample, typos: typos, halves: halves)
        let (floorExact, floorPrefix) = try floor(addresses, sample: sample, halves: halves, in: folder)

        // Over HTTP: one client, requests one after another, `outpost serve` in its own process.
        let (server, url) = try startServer(executable: executable, arguments: ["worker-serve-locator", services.path])
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let base = url + "/arcgis/rest/services/country/GeocodeServer/"
        func get(_ operation: String, _ query: [(String, String)]) async throws -> Double {
            var components = URLComponents(string: base + operation)!
            components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } + [URLQueryItem(name: "f", value: "json")]
            let start = ContinuousClock.now
            let response = try await client.execute(HTTPClientRequest(url: components.url!.absoluteString), timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 24)
            guard response.status == .ok else { throw BenchError("\(operation): HTTP \(response.status.code)") }
            let e = ContinuousClock.now - start
            return (Double(e.components.seconds) + Double(e.components.attoseconds) / 1e18) * 1_000
        }
        var httpGeocode: [Double] = [], httpSuggest: [Double] = [], httpReverse: [Double] = []
        for text in typos.prefix(100) { _ = try await get("findAddressCandidates", [("SingleLine", text)]) }
        for (i, a) in sample.enumerated() {
            httpGeocode.append(try await get("findAddressCandidates", [("SingleLine", typos[i]), ("maxLocations", "5"), ("outFields", "*")]))
            httpSuggest.append(try await get("suggest", [("text", halves[i])]))
            httpReverse.append(try await get("reverseGeocode", [("location", "\(a.x),\(a.y)")]))
        }

        try await client.shutdown()

        func row(_ name: String, _ library: [Double], _ http: [Double]?, _ target: String) -> [String] {
            let l = library.sorted(), h = http?.sorted()
            return [name, format(percentile(l, 0.5), 3), format(percentile(l, 0.99), 3), h.map { format(percentile($0, 0.5), 2) } ?? "–",
                    h.map { format(percentile($0, 0.99), 2) } ?? "–", target]
        }
        printTable(
            "Locator searches on \(count) addresses, 2,000 queries each (ms; library: one connection; HTTP: one client on loopback)",
            ["search", "p50", "p99", "HTTP p50", "HTTP p99", "target"],
            [
                row("geocode, one typo", library.geocode, httpGeocode, "p50 ≤ 2, p99 ≤ 20"), row("geocode, exact text", library.exact, nil, ""),
                row("suggest, half typed", library.suggest, httpSuggest, "p50 ≤ 1"), row("reverse", library.reverse, httpReverse, "p50 ≤ 0.5"),
                row("floor: FTS5 AND of the words", floorExact, nil, ""), row("floor: FTS5, last word a prefix", floorPrefix, nil, ""),
            ])
        let n = Double(sample.count)
        print(String(
            format: "accuracy on the sample: exact 100 %.1f%%; one typo top-1 %.1f%%, top-5 %.1f%%; suggest within five %.1f%%; reverse %.1f%%",
            Double(library.exactHits) / n * 100, Double(library.top1) / n * 100, Double(library.top5) / n * 100, Double(library.suggested) / n * 100,
            Double(library.reversed) / n * 100))
    }

    struct LibraryFigures {
        var geocode: [Double] = [], exact: [Double] = [], suggest: [Double] = [], reverse: [Double] = []
        var top1 = 0, top5 = 0, suggested = 0, reversed = 0, exactHits = 0
    }

    static func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let e = ContinuousClock.now - start
        return (Double(e.components.seconds) + Double(e.components.attoseconds) / 1e18) * 1_000
    }

    /// Library calls, one connection, one after another (synchronous: kept out of async code).
    static func librarySearches(locatorURL: URL, sample: [Address], typos: [String], halves: [String]) throws -> LibraryFigures {
        let locator = try LocalLocator(url: locatorURL, connections: 1)
        var f = LibraryFigures()
        // Warm the page cache once.
        for text in typos.prefix(200) { _ = try locator.geocode(text) }
        var parameters = GeocodeParameters()
        parameters.maxResults = 5
        for (i, a) in sample.enumerated() {
            var labels: [String] = []
            f.geocode.append(try timed { labels = try locator.geocode(typos[i], parameters: parameters).map(\.label) })
            if labels.first == a.label { f.top1 += 1 }
            if labels.contains(a.label) { f.top5 += 1 }
            var first: GeocodeResult?
            f.exact.append(try timed { first = try locator.geocode(a.label, parameters: parameters).first })
            if first?.label == a.label, first?.score == 100 { f.exactHits += 1 }
            var completions: [SuggestResult] = []
            f.suggest.append(try timed { completions = try locator.suggest(halves[i]) })
            if completions.contains(where: { $0.label == a.label }) { f.suggested += 1 }
            var found: [GeocodeResult] = []
            f.reverse.append(try timed { found = try locator.reverseGeocode(Position(x: a.x, y: a.y)) })
            if found.first?.label == a.label { f.reversed += 1 }
        }
        return f
    }

    /// The floor: FTS5 alone over the same labels (one table; the words ANDed; the last word of
    /// the half-typed text a prefix).
    static func floor(_ addresses: [Address], sample: [Address], halves: [String], in folder: URL) throws -> ([Double], [Double]) {
        let floorURL = folder.appendingPathComponent("floor-\(addresses.count).sqlite")
        if !FileManager.default.fileExists(atPath: floorURL.path) {
            let queue = try DatabaseQueue(path: floorURL.path)
            try queue.write { db in
                try db.execute(sql: "CREATE VIRTUAL TABLE labels USING fts5(label)")
                let insert = try db.makeStatement(sql: "INSERT INTO labels(label) VALUES (?)")
                for a in addresses { try insert.execute(arguments: [a.label]) }
                try db.execute(sql: "INSERT INTO labels(labels) VALUES('optimize')")
            }
            try queue.close()
        }
        var configuration = Configuration()
        configuration.readonly = true
        let floorDB = try DatabaseQueue(path: floorURL.path, configuration: configuration)
        var floorExact: [Double] = [], floorPrefix: [Double] = []
        try floorDB.read { db in
            func words(_ text: String) -> [String] { LocatorText.tokens(text).map { "\"\($0.text)\"" } }
            let statement = try db.makeStatement(sql: "SELECT rowid, label FROM labels WHERE labels MATCH ? LIMIT 10")
            for (i, a) in sample.enumerated() {
                let all = words(a.label).joined(separator: " AND ")
                floorExact.append(try timed { _ = try Row.fetchAll(statement, arguments: [all]) })
                let typed = words(halves[i])
                guard let last = typed.last else { continue }
                let prefix = (typed.dropLast() + [last + "*"]).joined(separator: " AND ")
                floorPrefix.append(try timed { _ = try Row.fetchAll(statement, arguments: [prefix]) })
            }
        }
        return (floorExact, floorPrefix)
    }

    /// The worker for profiling: the library searches alone on an existing locator.
    static func queries(_ locator: URL, count: Int) throws {
        let addresses = addresses(count)
        var random = GeoprocessingBenchmark.FastRandom(seed: 5)
        let sample = (0..<2_000).map { _ in addresses[Int(random.unit() * Double(addresses.count)) % addresses.count] }
        let typos = sample.map { typo($0.label, &random) }
        let halves = sample.map { a -> String in
            let text = "\(a.house) \(a.street), \(a.city)"
            return String(text.prefix((text.count + 1) / 2))
        }
        let f = try librarySearches(locatorURL: locator, sample: sample, typos: typos, halves: halves)
        for (name, values) in [("geocode", f.geocode), ("exact", f.exact), ("suggest", f.suggest), ("reverse", f.reverse)] {
            let sorted = values.sorted()
            print(name, format(percentile(sorted, 0.5), 3), format(percentile(sorted, 0.99), 3))
        }
    }

    /// The worker: serves the locators of `directory`.
    static func serve(_ directory: URL) async throws {
        let services = try await ServiceDirectory(loading: directory)
        let app = try OutpostApplication.make(services: services, configuration: ServerConfiguration(port: 0)) { url in
            FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
        }
        try await app.runService()
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

    static func typo(_ text: String, _ random: inout GeoprocessingBenchmark.FastRandom) -> String {
        var chars = Array(text)
        let letters = Array("abcdefghijklmnopqrstuvwxyzäö")
        let i = Int(random.unit() * Double(chars.count)) % chars.count
        switch Int(random.unit() * 4) % 4 {
        case 0: chars.insert(letters[Int(random.unit() * Double(letters.count)) % letters.count], at: i)
        case 1: chars.remove(at: i)
        case 2: chars[i] = letters[Int(random.unit() * Double(letters.count)) % letters.count]
        default: if i + 1 < chars.count { chars.swapAt(i, i + 1) }
        }
        return String(chars)
    }
}
