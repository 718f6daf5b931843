import Foundation
import Logging
import PostgresNIO

/// A file every host of a site serves from the site directory, registered in the site's database
/// by `outpost site publish`: a locator (a GeocodeServer), a street network (an NAServer) or a map
/// definition with its preplanned areas' packages.
public struct SiteFile: Sendable, Hashable, Codable {
    /// What the file is served as.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// A `.locator` file: a GeocodeServer.
        case locator
        /// A `.network` file: an NAServer.
        case network
        /// A `.map.json` map definition (`/arcgis/rest/maps/<name>.json`), its preplanned areas'
        /// packages in the `.preplanned` folder beside it.
        case map
    }

    /// What the file is served as.
    public var kind: Kind
    /// The service's name (unique per kind, whatever its case).
    public var name: String
    /// The file's path below the site directory.
    public var path: String
    /// Its size in bytes when it was published.
    public var bytes: Int64
    /// Its SHA-256 when it was published, in lower-case hexadecimal.
    public var sha256: String
    /// When it was published (epoch milliseconds).
    public var publishedAt: Int64

    /// An entry of these values.
    public init(kind: Kind, name: String, path: String, bytes: Int64, sha256: String, publishedAt: Int64) {
        self.kind = kind
        self.name = name
        self.path = path
        self.bytes = bytes
        self.sha256 = sha256
        self.publishedAt = publishedAt
    }
}

/// The site's registry of published files (`outpost_site_files`, migration 11): what every
/// `outpost serve --postgres --site-directory` host serves from the site directory besides its
/// `--service` files, picked up while it runs. Made by ``PostgresJobStore/siteFiles()``, over that
/// store's connections.
public final class PostgresSiteFiles: Sendable {
    /// The store whose connections the registry uses, kept open while it is.
    let jobs: PostgresJobStore
    var database: PostgresConnections { jobs.database }

    init(jobs: PostgresJobStore) { self.jobs = jobs }

    /// Every published file, by kind and name.
    public func files() async throws -> [SiteFile] {
        try await database.run { client, logger in
            var files: [SiteFile] = []
            for try await (kind, name, path, bytes, sha256, at) in try await client.query(
                "SELECT kind, name, path, bytes, sha256, published_at FROM outpost_site_files ORDER BY kind, lower(name)", logger: logger
            ).decode((String, String, String, Int64, String, Int64).self) {
                guard let kind = SiteFile.Kind(rawValue: kind) else { continue }
                files.append(SiteFile(kind: kind, name: name, path: path, bytes: bytes, sha256: sha256, publishedAt: at))
            }
            return files
        }
    }

    /// Publishes `file`; false (nothing changed) when one of its kind and name, in any case, is
    /// published already.
    public func publish(_ file: SiteFile) async throws -> Bool {
        try await database.run { client, logger in
            var inserted = false
            for try await _ in try await client.query(
                """
                INSERT INTO outpost_site_files (kind, name, path, bytes, sha256, published_at)
                VALUES (\(file.kind.rawValue), \(file.name), \(file.path), \(file.bytes), \(file.sha256), \(file.publishedAt))
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger
            ).decode(Int32.self) {
                inserted = true
            }
            return inserted
        }
    }

    /// Withdraws the file of `kind` named `name` (in any case); the entry withdrawn, nil when none was
    /// published.
    public func withdraw(_ kind: SiteFile.Kind, name: String) async throws -> SiteFile? {
        try await database.run { client, logger in
            for try await (name, path, bytes, sha256, at) in try await client.query(
                """
                DELETE FROM outpost_site_files WHERE kind = \(kind.rawValue) AND lower(name) = lower(\(name))
                RETURNING name, path, bytes, sha256, published_at
                """, logger: logger
            ).decode((String, String, Int64, String, Int64).self) {
                return SiteFile(kind: kind, name: name, path: path, bytes: bytes, sha256: sha256, publishedAt: at)
            }
            return nil
        }
    }
}

extension PostgresJobStore {
    /// The site's registry of published files, over this store's connections.
    public func siteFiles() -> PostgresSiteFiles { PostgresSiteFiles(jobs: self) }
}
