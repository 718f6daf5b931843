import Foundation

/// A PostgreSQL server of a test's own (initdb in a temporary directory, a free loopback port),
/// for tests that stop and restart the database under a running Outpost server. Run by the
/// unprivileged `postgres` user when the tests run as root, as PostgreSQL requires.
public final class PostgresCluster: @unchecked Sendable {
    // @unchecked: used by the one test that owns it.
    public let directory: URL
    public let port: Int
    let bin: URL

    /// The server's binaries (the newest installed), nil when PostgreSQL is not installed.
    public static var binaries: URL? {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return versions.sorted { $0.compare($1, options: .numeric) == .orderedAscending }.last.map { root.appendingPathComponent("\($0)/bin") }
    }

    /// Creates and starts the cluster, with PostGIS in `template1` and a database `outpost`.
    public static func start() async throws -> PostgresCluster {
        guard let bin = binaries else { throw ReaderMismatch(description: "PostgreSQL is not installed (run ./scripts/test)") }
        let directory = try newDirectory("outpost-pgc-")
        let cluster = PostgresCluster(directory: directory, port: try LoopbackPort.free(), bin: bin)
        try await cluster.asOwner("\(bin.path)/initdb -D \(directory.path)/data -U outpost --auth=trust -E UTF8")
        try await cluster.startServer()
        try await cluster.psql("template1", "CREATE EXTENSION postgis")
        try await cluster.psql("postgres", "CREATE DATABASE outpost")
        return cluster
    }

    /// A new temporary directory the server's owner (`postgres`, when run as root) may write.
    private static func newDirectory(_ prefix: String) throws -> URL {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(prefix + UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        return directory
    }

    /// Runs `body` with a fresh cluster and destroys the cluster afterwards, whether or not
    /// `body` throws.
    public static func with<T: Sendable>(_ body: (PostgresCluster) async throws -> T) async throws -> T {
        let cluster = try await start()
        do {
            let result = try await body(cluster)
            await cluster.destroy()
            return result
        } catch {
            await cluster.destroy()
            throw error
        }
    }

    private init(directory: URL, port: Int, bin: URL) {
        self.directory = directory
        self.port = port
        self.bin = bin
    }

    /// `postgres://outpost@127.0.0.1:<port>/<database>`.
    public func url(database: String = "outpost") -> String { "postgres://outpost@127.0.0.1:\(port)/\(database)" }

    /// Starts the server (again), on the same port with the same data. Its output goes nowhere:
    /// the server would otherwise hold this process's pipes open for as long as it runs.
    public func startServer() async throws {
        try await asOwner(
            "\(bin.path)/pg_ctl -D \(directory.path)/data -l \(directory.path)/log -w -o '-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off' start >/dev/null 2>&1 </dev/null")
    }

    /// Stops the server at once (connections are cut, as in a crash or failover).
    public func stopServer() async throws {
        try await asOwner("\(bin.path)/pg_ctl -D \(directory.path)/data -m immediate -w stop")
    }

    /// A hot standby of this server: a base backup streamed from it (`pg_basebackup -R`),
    /// started on a port of its own and following by streaming replication. With `synchronous`,
    /// this server acknowledges a commit only once the standby has it, so a failover loses no
    /// acknowledged transaction. Returns once the standby streams.
    public func startStandby(synchronous: Bool) async throws -> PostgresCluster {
        let directory = try Self.newDirectory("outpost-pgs-")
        let standby = PostgresCluster(directory: directory, port: try LoopbackPort.free(), bin: bin)
        try await standby.asOwner("\(bin.path)/pg_basebackup -h 127.0.0.1 -p \(port) -U outpost -D \(directory.path)/data -R -X stream -c fast")
        try await standby.startServer()
        if synchronous {
            try await psql("postgres", "ALTER SYSTEM SET synchronous_standby_names = '*'")
            try await psql("postgres", "SELECT pg_reload_conf()")
        }
        let wanted = synchronous ? "sync" : "async"
        for _ in 0..<100 {
            let state = try await ExternalTools.run(
                "psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "outpost", "-d", "postgres", "-XAtq", "-c", "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"])
            if state.stdout.split(separator: "\n").contains(Substring(wanted)) { return standby }
            try await Task.sleep(for: .milliseconds(100))
        }
        await standby.destroy()
        throw ReaderMismatch(description: "the standby on port \(standby.port) did not start streaming from port \(port)")
    }

    /// Promotes this standby to a primary (`pg_ctl promote`), waiting until it takes writes.
    public func promote() async throws {
        try await asOwner("\(bin.path)/pg_ctl -D \(directory.path)/data -w promote")
    }

    /// Stops the server and removes its files.
    public func destroy() async {
        try? await asOwner("\(bin.path)/pg_ctl -D \(directory.path)/data -m immediate -w stop")
        try? FileManager.default.removeItem(at: directory)
    }

    public func psql(_ database: String, _ sql: String) async throws {
        let run = try await ExternalTools.run("psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "outpost", "-d", database, "-Xq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard run.succeeded else { throw ReaderMismatch(description: "psql: \(run.stderr)") }
    }

    /// Runs `command` as the cluster's owner. Foundation's `Process` learns that a child exited
    /// when a socket it shares with the child closes; a daemon started from the child (the
    /// postmaster) would inherit that socket and keep it open for its whole life, so the run would
    /// never end. The command therefore starts through Python's `subprocess` with `close_fds`,
    /// which closes every inherited descriptor but the standard three.
    private func asOwner(_ command: String) async throws {
        if getuid() == 0 { _ = try await ExternalTools.run("chown", ["-R", "postgres", directory.path]) }
        let argv = getuid() == 0 ? ["su", "postgres", "-s", "/bin/sh", "-c", command] : ["/bin/sh", "-c", command]
        let launcher = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:], close_fds=True))"
        let run = try await ExternalTools.run(ExternalTools.python, ["-c", launcher] + argv)
        guard run.succeeded else { throw ReaderMismatch(description: "\(command): \(run.stderr)") }
    }
}

/// Ports on 127.0.0.1 for servers a test starts itself.
public enum LoopbackPort {
    /// A free loopback port below the kernel's ephemeral range (32768 and up), so no outgoing
    /// connection or `--port 0` listener takes it between this check and the server's start.
    public static func free() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let bound = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            if bound { return port }
        }
        throw ReaderMismatch(description: "no free port")
    }
}
