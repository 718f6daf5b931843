import Foundation
import Logging
import OutpostCore
import OutpostSyncService
import PostgresNIO

/// Where a service's PostgreSQL database is: `postgres://user[:password]@host[:port]/database`
/// (also read from `OUTPOST_POSTGRES`).
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// The server's host name or address.
    public var host: String
    /// The server's port (5432 by default).
    public var port: Int
    /// The role to connect as.
    public var user: String
    /// The role's password, when it needs one.
    public var password: String?
    /// The database.
    public var database: String

    /// The location a `postgres://` (or `postgresql://`) URL gives.
    /// - Throws: ``PostgresServiceError`` for any other text.
    public init(url text: String) throws {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""), let host = url.host, !host.isEmpty else {
            throw PostgresServiceError("\(text) is not a postgres://user@host[:port]/database URL")
        }
        let database = String(url.path.drop { $0 == "/" })
        guard !database.isEmpty else { throw PostgresServiceError("\(text) names no database") }
        self.host = host
        port = url.port ?? 5432
        user = url.user ?? "postgres"
        password = url.password
        self.database = database
    }

    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// The full URL, password included (for passing on to another process).
    public var url: String {
        var c = URLComponents()
        c.scheme = "postgres"
        c.user = user
        c.password = password
        c.host = host
        c.port = port
        c.path = "/" + database
        return c.string ?? description
    }

    var configuration: PostgresClient.Configuration {
        var c = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: .disable)
        c.options.connectTimeout = .seconds(10)
        return c
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
    let client: PostgresClient
    let location: PostgresLocation
    let logger = Logger(label: "outpost.postgres")

    @discardableResult
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T) async throws -> T {
        do {
            return try await body(client, logger)
        } catch let error as PSQLError {
            throw PostgresServiceBackend.serviceError(error, location)
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
            if let psql = cause as? PSQLError { throw PostgresServiceBackend.serviceError(psql, location) }
            if let cause { throw cause }
            logger.error("PostgreSQL transaction failed: \(error)")
            throw SyncServiceError(.failed, "a PostgreSQL transaction failed")
        }
    }
}
