import Foundation
import OutpostPostgres
import OutpostStorage

extension SiteLab {
    /// The crews' side of a ``SiteLab`` run, run on the crews' machine (`outpost-site`, or
    /// `outpost-bench worker-site`):
    /// - `prepare --postgres URL <load>`: writes ``CrewLoad``'s service and loads it into the
    ///   database;
    /// - `crews --url BALANCER --postgres URL <load>`: runs the crews through the balancer and
    ///   checks them against the database, printing `synced <n>` after each sync of the
    ///   concurrent phase and, last, `report <JSON of CrewLoad.Report>`.
    ///
    /// `<load>` is `--directory D --crews N --edits N --syncs N --features N --seed N
    /// --attempts N`. Returns the exit status.
    public static func driverMain(_ arguments: [String]) async -> Int32 {
        do {
            guard let mode = arguments.first else { throw Failure("usage: prepare|crews --option value …") }
            var options: [String: String] = [:]
            var rest = arguments.dropFirst()
            while let key = rest.popFirst() {
                guard key.hasPrefix("--"), let value = rest.popFirst() else { throw Failure("expected --option value, found \(key)") }
                options[String(key.dropFirst(2))] = value
            }
            func option(_ name: String) throws -> String {
                guard let value = options[name] else { throw Failure("--\(name) is missing") }
                return value
            }
            func number(_ name: String) throws -> Int {
                guard let value = Int(try option(name)) else { throw Failure("--\(name) is not a number") }
                return value
            }
            var load = CrewLoad.Configuration(crews: try number("crews"))
            load.editsPerCrew = try number("edits")
            load.syncsPerCrew = try number("syncs")
            load.featuresPerCrew = try number("features")
            load.attempts = try number("attempts")
            guard let seed = UInt64(try option("seed")) else { throw Failure("--seed is not a number") }
            load.seed = seed
            let directory = URL(fileURLWithPath: try option("directory"))
            let location = try PostgresLocation(url: try option("postgres"))
            switch mode {
            case "prepare":
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let file = directory.appendingPathComponent("\(CrewLoad.serviceName).gpkg")
                try CrewLoad.createService(at: file, load)
                let source = try Geodatabase.open(at: file)
                _ = try await PostgresServiceStore.createService(named: CrewLoad.serviceName, from: source, at: location)
                try source.close()
            case "crews":
                guard let url = URL(string: try option("url")) else { throw Failure("--url is not a URL") }
                load.progress = { count in FileHandle.standardOutput.write(Data("synced \(count)\n".utf8)) }
                let backend = try await PostgresServiceBackend.open(service: CrewLoad.serviceName, at: location)
                let report: CrewLoad.Report
                do {
                    report = try await CrewLoad.run(load, servers: [url], backend: backend, directory: directory)
                } catch {
                    try? await backend.close()
                    throw error
                }
                try await backend.close()
                FileHandle.standardOutput.write(Data("report ".utf8) + (try JSONEncoder().encode(report)) + Data("\n".utf8))
            default:
                throw Failure("unknown mode \(mode): prepare or crews")
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("outpost-site: \(error)\n".utf8))
            return 1
        }
    }
}
