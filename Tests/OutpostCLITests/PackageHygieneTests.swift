import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

/// The package's module graph as `Package.swift` declares it, read with `swift package
/// dump-package`, checked against what the sources import.
@Suite("package hygiene")
struct PackageHygieneTests {
    struct Target {
        var name: String
        var kind: String
        var directory: URL
        var targets: Set<String>
        var products: Set<String>
    }

    /// Modules every target may import without declaring them: the toolchain's own.
    static let toolchainModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Glibc", "Musl", "Darwin", "Synchronization", "Testing", "XCTest",
        "_Concurrency", "_StringProcessing",
    ]

    /// A guard against a hang, not a speed check: the work takes under a second alone, but in a
    /// full run on two cores these tests wait for the concurrency pool behind other tests (250 s
    /// in the last green run), where a two-minute limit failed once.
    static let hangLimit = 10

    /// The Swift files under `folder`, a path from the repository's root, at any depth.
    static func swiftFiles(under folder: String) -> [URL] {
        let directory = Repository.root.appendingPathComponent(folder)
        return FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
    }

    /// `file`'s path from the repository's root, for messages.
    static func relativePath(_ file: URL) -> Substring { file.path.dropFirst(Repository.root.path.count + 1) }

    static func targets() async throws -> [String: Target] {
        let scratch = TemporaryDirectory("outpost-dump")
        // A scratch path of its own: never waits on the lock of the build that runs these tests.
        let dump = try await ExternalTools.run("swift", ["package", "--package-path", Repository.root.path, "--scratch-path", scratch.url.path, "dump-package"])
        guard dump.succeeded else { throw ReaderMismatch(description: "swift package dump-package failed: \(dump.stderr)") }
        var out: [String: Target] = [:]
        for t in try JSONValue.parse(dump.stdout)["targets"]?.arrayValue ?? [] {
            let name = t["name"]?.stringValue ?? "", kind = t["type"]?.stringValue ?? ""
            let path = t["path"]?.stringValue ?? (kind == "test" ? "Tests/\(name)" : "Sources/\(name)")
            var targets = Set<String>(), products = Set<String>()
            for d in t["dependencies"]?.arrayValue ?? [] {
                if let n = d["byName"]?[0]?.stringValue ?? d["target"]?[0]?.stringValue { targets.insert(n) }
                if let p = d["product"]?[0]?.stringValue { products.insert(p) }
            }
            out[name] = Target(name: name, kind: kind, directory: Repository.root.appendingPathComponent(path), targets: targets, products: products)
        }
        return out
    }

    /// An import declaration: attributes, an access level, an import kind, then the module
    /// (and a declaration path).
    static var importLine: Regex<(Substring, Substring)> { /^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|package|fileprivate|private)\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_]\w*)(?:\.[\w.]+)?\s*(?:\/\/.*)?$/ }

    /// The modules a target's Swift files import (`import X`, `@testable import X`, `import struct X.Y`),
    /// with a file that does; text inside multi-line string literals (Python scripts) is skipped.
    static func imports(of target: Target) throws -> [String: String] {
        var out: [String: String] = [:]
        // The pattern built once, and tried only on lines that name `import` (and the quotes
        // counted only on lines that have them): tried on every line of every file, in a debug
        // build, the test took 27 s of CPU alone and 360–450 s in a full run on two cores.
        let pattern = importLine
        let files = FileManager.default.enumerator(at: target.directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where file.pathExtension == "swift" {
            var inString = false
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
                if line.contains("\"\"\""), line.components(separatedBy: "\"\"\"").count % 2 == 0 { inString.toggle() }
                guard !inString, line.contains("import"), let match = String(line).wholeMatch(of: pattern) else { continue }
                let module = String(match.1)
                out[module] = out[module] ?? file.lastPathComponent
            }
        }
        return out
    }

    /// Every module a target imports is one it declares (a product's module has the product's
    /// name here): a module that only compiles because another target brought it in breaks
    /// when that other target changes.
    @Test(.scaledTimeLimit(minutes: Self.hangLimit))
    func everyImportIsDeclared() async throws {
        let all = try await Self.targets()
        // The reader finds imports (plain, @testable, and none inside a Python string).
        let server = try Self.imports(of: try #require(all["OutpostServer"]))
        #expect(server["Hummingbird"] != nil && server["OutpostStorage"] != nil)
        #expect(try Self.imports(of: try #require(all["OutpostServerTests"]))["OutpostServer"] != nil)
        for target in all.values.sorted(by: { $0.name < $1.name }) where target.kind == "regular" || target.kind == "test" || target.kind == "executable" {
            for (module, file) in try Self.imports(of: target).sorted(by: { $0.key < $1.key }) where module != target.name {
                let declared = target.targets.contains(module) || target.products.contains(module) || Self.toolchainModules.contains(module)
                #expect(declared, "\(target.name) imports \(module) (\(file)) without declaring it in Package.swift")
            }
        }
    }

    /// The targets `name` builds (itself included) and the products they take, following target
    /// dependencies.
    static func closure(_ name: String, in all: [String: Target]) -> (targets: Set<String>, products: Set<String>) {
        var seen = Set<String>(), products = Set<String>(), queue = [name]
        while let next = queue.popLast() {
            guard seen.insert(next).inserted, let target = all[next] else { continue }
            products.formUnion(target.products)
            queue += target.targets
        }
        return (seen, products)
    }

    /// A test of geometry, storage or tiles builds neither the server nor PostgreSQL.
    @Test(.scaledTimeLimit(minutes: Self.hangLimit))
    func lowerTestTargetsBuildNoServer() async throws {
        let all = try await Self.targets()
        for test in ["OutpostCoreTests", "OutpostStorageTests", "OutpostTilesTests"] {
            let (targets, products) = Self.closure(test, in: all)
            #expect(all[test] != nil)
            #expect(targets.isDisjoint(with: ["OutpostServer", "OutpostPostgres"]), "\(test) builds \(targets.intersection(["OutpostServer", "OutpostPostgres"]))")
            #expect(products.isDisjoint(with: ["Hummingbird", "PostgresNIO"]), "\(test) builds \(products.intersection(["Hummingbird", "PostgresNIO"]))")
        }
    }

    /// The sync service and the database stores (SQLite, PostgreSQL) know neither the server nor HTTP: they build
    /// without OutpostServer and Hummingbird, and say what went wrong in domain terms
    /// (`SyncServiceError`), never as an HTTP status; the server's HTTP layer alone maps them.
    @Test(.scaledTimeLimit(minutes: Self.hangLimit))
    func storesKnowNeitherTheServerNorHTTP() async throws {
        let all = try await Self.targets()
        let status = /\b(400|401|403|404|409|413|422|429|499|500|502|503)\b|\bServiceError\b|HTTPResponse/
        for store in ["OutpostSyncService", "OutpostSQLiteService", "OutpostPostgres"] {
            let (targets, products) = Self.closure(store, in: all)
            #expect(all[store] != nil)
            #expect(!targets.contains("OutpostServer"), "\(store) builds OutpostServer")
            #expect(products.filter { $0.hasPrefix("Hummingbird") }.isEmpty, "\(store) builds \(products.filter { $0.hasPrefix("Hummingbird") })")
            let files = Self.swiftFiles(under: "Sources/\(store)")
            #expect(!files.isEmpty, "\(store) has sources")
            for file in files {
                for (number, line) in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where line.contains(status) {
                    Issue.record("\(store)/\(file.lastPathComponent):\(number + 1) speaks HTTP: \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        // The check can fail: the server's own error type is what it looks for.
        let server = try String(contentsOf: Repository.root.appendingPathComponent("Sources/OutpostServer/Errors/ServiceError.swift"), encoding: .utf8)
        #expect(server.contains(status))
    }

    /// The apply-batch and feed-page steps exist once, in `SyncService`: a store runs no
    /// admission, finish or feed assembly of its own (only the primitives of `SyncTransaction`).
    @Test func theSyncStepsExistOnceInTheSyncService() throws {
        let steps = ["BatchAdmission.admit", ".finish(generation:", "ChangeFeedAssembly.changes", "ChangeFeedAssembly.reads", "ChangeFeedAssembly.windowIsEmpty"]
        var found: [String: [String]] = [:]
        for module in ["OutpostSyncService", "OutpostSQLiteService", "OutpostPostgres", "OutpostServer"] {
            let files = Self.swiftFiles(under: "Sources/\(module)")
            for file in files {
                let text = try String(contentsOf: file, encoding: .utf8)
                for step in steps where text.contains(step) { found[step, default: []].append("\(module)/\(file.lastPathComponent)") }
            }
        }
        for step in steps { #expect(found[step] == ["OutpostSyncService/SyncService.swift"], "\(step) is used in \(found[step] ?? [])") }
    }

    /// One REST client: the sync task, geoprocessing, offline maps, locators and routes reach
    /// servers through `OutpostREST` alone (no request of their own to the HTTP client), and
    /// Locator and Routing take it directly, not through geoprocessing.
    @Test(.scaledTimeLimit(minutes: Self.hangLimit))
    func clientsTalkToServersThroughTheOneRESTClient() async throws {
        let all = try await Self.targets()
        let ownRequests = /HTTPClientRequest\(|client\.execute\(|HTTPClient\.shared\.|formEncoded\(/
        for module in ["OutpostSync", "OutpostGeoprocessing", "OutpostOffline", "OutpostLocator", "OutpostRouting"] {
            #expect(all[module]?.targets.contains("OutpostREST") == true, "\(module) takes the REST client")
            let files = Self.swiftFiles(under: "Sources/\(module)")
            #expect(!files.isEmpty, "\(module) has sources")
            for file in files {
                for (number, line) in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where line.contains(ownRequests) && !line.contains("RESTClient.") {
                    Issue.record("\(module)/\(file.lastPathComponent):\(number + 1) makes its own request: \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        for module in ["OutpostLocator", "OutpostRouting"] {
            let task = try String(contentsOf: Repository.root.appendingPathComponent("Sources/\(module)/\(module == "OutpostLocator" ? "LocatorTask" : "RouteTask").swift"), encoding: .utf8)
            #expect(task.contains("import OutpostREST") && !task.contains("GPTransport"), "\(module) reaches the REST client directly")
        }
        // The check can fail: the REST client's own requests are what it looks for.
        let client = try String(contentsOf: Repository.root.appendingPathComponent("Sources/OutpostREST/RESTClient.swift"), encoding: .utf8)
        #expect(client.contains(ownRequests))
    }

    /// OutpostCore does no I/O (files, processes, the environment live in the modules above it),
    /// and no shipping library reads the environment: the CLI passes what it takes from there.
    @Test func coreDoesNoIOAndLibrariesReadNoEnvironment() throws {
        let io = ["FileManager", "FileHandle", "Data(contentsOf", "options: .atomic", "ProcessInfo", "flock(", "getpid()", "fopen("]
        let shipping = ["OutpostCore", "OutpostStorage", "OutpostProtocol", "OutpostSync", "OutpostTiles", "OutpostSyncService", "OutpostSQLiteService", "OutpostServer", "OutpostPostgres"]
        for module in shipping {
            let files = Self.swiftFiles(under: "Sources/\(module)")
            #expect(!files.isEmpty, "\(module) has sources")
            for file in files {
                let text = try String(contentsOf: file, encoding: .utf8)
                #expect(!text.contains("processInfo.environment"), "\(module)/\(file.lastPathComponent) reads the environment")
                if module == "OutpostCore" {
                    for word in io { #expect(!text.contains(word), "OutpostCore/\(file.lastPathComponent) does I/O (\(word))") }
                }
            }
        }
    }

    /// Shared state sits behind OutpostCore's `Locked` (a POSIX mutex): ThreadSanitizer cannot
    /// see the standard library's `Synchronization.Mutex` on Linux (a futex), and reported every
    /// two of its `withLock` calls on different threads as a race (`scripts/sanitize thread`).
    @Test func noLockThreadSanitizerCannotSee() throws {
        let mutex = /\bMutex\s*[<(]/
        for folder in ["Sources", "Tests", "Snippets"] {
            let files = Self.swiftFiles(under: folder)
            #expect(!files.isEmpty, "\(folder) has sources")
            for file in files {
                let text = try String(contentsOf: file, encoding: .utf8)
                #expect(text.firstMatch(of: mutex) == nil, "\(Self.relativePath(file)) uses Synchronization.Mutex; use Locked")
            }
        }
    }

    /// Every test's time limit stretches with OUTPOST_TIME_SCALE (``scaledTimeLimit(minutes:)``):
    /// a fixed one fails a sanitized run's tests for being slow, which says nothing of them.
    @Test func everyTimeLimitScales() throws {
        let fixed = /\.timeLimit\s*\(/
        let files = Self.swiftFiles(under: "Tests")
        #expect(files.count > 50, "the tests are found")
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(text.firstMatch(of: fixed) == nil, "\(Self.relativePath(file)) sets a fixed time limit; use .scaledTimeLimit(minutes:)")
        }
    }
}
