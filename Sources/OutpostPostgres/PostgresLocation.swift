import Foundation
import Logging
import OutpostCore
import OutpostSyncService
import PostgresNIO
import _ConnectionPoolModule

/// Where a service's PostgreSQL database is: `postgres://user[:password]@host[:port]/database`
/// (also read from `OUTPOST_POSTGRES`). A site whose database fails over to a standby lists
/// every server, `postgres://user@primary:5432,standby:5432/database`: Outpost connects to the one
/// that takes writes (not in recovery) and moves there when that changes.
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// One server of the database: a host name or address and a port.
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        /// The server's host name or address.
        public var host: String
        /// The server's port (5432 by default).
        public var port: Int

        /// A server at `host`:`port`.
        public init(host: String, port: Int = 5432) {
            self.host = host
            self.port = port
        }

        public var description: String { "\(host):\(port)" }
    }

    /// Every server listed, the first tried first: one, or a primary and its standbys.
    public var servers: [Server]
    /// The role to connect as.
    public var user: String
    /// The role's password, when it needs one.
    public var password: String?
    /// The database.
    public var database: String

    /// The first server's host name or address.
    public var host: String { servers[0].host }
    /// The first server's port.
    public var port: Int { servers[0].port }

    /// The location a `postgres://` (or `postgresql://`) URL gives, with one host or several
    /// separated by commas.
    /// - Throws: ``PostgresServiceError`` for any other text.
    public init(url text: String) throws {
        let invalid = PostgresServiceError("\(text) is not a postgres://user@host[:port][,host[:port]…]/database URL")
        // URLComponents reads one host: the others are taken out of the authority first.
        var single = text
        var others: [Server] = []
        if let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let authority = rest[..<(rest.firstIndex(of: "/") ?? rest.endIndex)]
            let hostsStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
            let hosts = authority[hostsStart...].split(separator: ",", omittingEmptySubsequences: false)
            if hosts.count > 1 {
                for piece in hosts.dropFirst() {
                    let parts = piece.split(separator: ":", omittingEmptySubsequences: false)
                    guard !piece.isEmpty, parts.count <= 2, !parts[0].isEmpty else { throw invalid }
                    guard let port = parts.count == 2 ? Int(parts[1]) : 5432, (1...65535).contains(port) else { throw invalid }
                    others.append(Server(host: String(parts[0]), port: port))
                }
                single = String(text[..<hostsStart]) + String(hosts[0]) + String(rest[authority.endIndex...])
            }
        }
        guard let url = URLComponents(string: single), ["postgres", "postgresql"].contains(url.scheme ?? ""), let host = url.host, !host.isEmpty else {
            throw invalid
        }
        let database = String(url.path.drop { $0 == "/" })
        guard !database.isEmpty else { throw PostgresServiceError("\(text) names no database") }
        servers = [Server(host: host, port: url.port ?? 5432)] + others
        user = url.user ?? "postgres"
        password = url.password
        self.database = database
    }

    public var description: String { "postgres://\(user)@\(servers.map(\.description).joined(separator: ","))/\(database)" }

    /// The full URL, password included (for passing on to another process).
    public var url: String {
        var c = URLComponents()
        c.scheme = "postgres"
        c.user = user
        c.password = password
        c.host = host
        c.port = port
        c.path = "/" + database
        guard let text = c.string else { return description }
        guard servers.count > 1, let path = text.range(of: "/" + database, options: .backwards) else { return text }
        return String(text[..<path.lowerBound]) + servers.dropFirst().map { ",\($0)" }.joined() + String(text[path.lowerBound...])
    }

    /// This location on one of its servers alone.
    public func on(_ server: Server) -> PostgresLocation {
        var one = self
        one.servers = [server]
        return one
    }

    /// A pool's configuration for the first server.
    var configuration: PostgresClient.Configuration {
        var c = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: .disable)
        c.options.connectTimeout = .seconds(10)
        return c
    }

    /// The first listed server that takes writes (is not a standby in recovery), as a location
    /// of its own; the location itself when it lists one server; nil when none answers as a
    /// primary (they are down, or a standby is not promoted yet). Each server gets `limit` to
    /// connect and answer: one that accepted the connection and then went silent (its host
    /// lost, no reset sent) must not hold the look up.
    public func primary(within limit: Duration = .seconds(3)) async -> PostgresLocation? {
        guard servers.count > 1 else { return self }
        for server in servers where await takesWrites(server, within: limit) {
            return on(server)
        }
        return nil
    }

    /// Whether `server` answered within `limit`, connecting included, that it takes writes
    /// (false when it failed, is in recovery, or did not answer in time; a connection it left
    /// open is then closed).
    func takesWrites(_ server: Server, within limit: Duration) async -> Bool {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: user, password: password, database: database, tls: .disable)
        configuration.options.connectTimeout = .init(limit)
        let opened = Locked<PostgresConnection?>(nil)
        let logger = Logger(label: "outpost.postgres")
        let answer = try? await PostgresPool.answer(within: limit) { [configuration] in
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            opened.withLock { $0 = connection }
            var inRecovery = true
            for try await value in try await connection.query("SELECT pg_is_in_recovery()", logger: logger).decode(Bool.self) { inRecovery = value }
            try? await connection.close()
            return !inRecovery
        }
        if answer == nil, let connection = opened.withLock({ $0 }) {
            Task { try? await connection.close() }
        }
        return answer == true
    }
}

/// A PostgreSQL backend failure, with a message for people.
public struct PostgresServiceError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for a person.
    public var message: String
    /// An error saying `message`.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A pool of connections to one database with where it is, running statements so that
/// PostgreSQL's failures come out as the service says them (``SyncServiceError``: unavailable
/// while the server or connection is the trouble, failed otherwise). The job stores share one.
struct PostgresConnections: Sendable {
    let pool: PostgresPool
    var location: PostgresLocation { pool.location }
    let logger = Logger(label: "outpost.postgres")

    /// The longest a statement waits before it is answered `unavailable`.
    static let timeout: Duration = .seconds(30)

    @discardableResult
    func run<T: Sendable>(timeout: Duration = Self.timeout, _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T) async throws -> T {
        let client = pool.client, logger = logger
        do {
            return try await pool.within(timeout) { try await body(client, logger) }
        } catch let error as PSQLError {
            throw pool.failure(error)
        } catch let error as ConnectionPoolError {
            throw pool.failure(error)
        }
    }

    /// Runs `body` in a transaction on one connection: committed when it returns, rolled back
    /// when it throws. Its own errors come out as it threw them; PostgreSQL's as ``run(_:)``
    /// says them.
    @discardableResult
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        let logger = logger
        do {
            return try await run { client, logger in try await client.withTransaction(logger: logger) { try await body($0, logger) } }
        } catch let error as PostgresTransactionError {
            let cause = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError
            if let psql = cause as? PSQLError { throw pool.failure(psql) }
            if let pooled = cause as? ConnectionPoolError { throw pool.failure(pooled) }
            if let cause { throw cause }
            logger.error("PostgreSQL transaction failed: \(error)")
            throw SyncServiceError(.failed, "a PostgreSQL transaction failed")
        }
    }
}
