import Foundation
import OutpostCore
import Logging
import OutpostSyncService

/// How `outpost serve` runs: address, body limit, and who may call it.
public struct ServerConfiguration: Sendable {
    /// The address to listen on.
    public var host: String
    /// 0 picks a free port.
    public var port: Int
    /// Largest request body accepted (larger ones get 413).
    public var maxBodyBytes: Int
    /// Largest page a query returns (ArcGIS `maxRecordCount` caps it further per service).
    public var maxRecordCount: Int?
    /// Static tokens (`--token`, `--tokens`). With these or a users file, every endpoint needs a
    /// token but /health, /ready (its status only), /arcgis/rest/info, the token service, the
    /// directory's assets, `sharing/rest`, and the catalog and map list (which list only what the
    /// caller may see).
    public var tokens: TokenPolicy?
    /// A users file (`outpost users`): users sign in with `generateToken` and get signed,
    /// expiring tokens with their role's permissions.
    public var usersFile: URL?
    /// A site's users and failed sign-ins in its database (`outpost users --postgres`), read by
    /// every host; instead of ``usersFile``. The hosts accept each other's tokens and throttle
    /// failed sign-ins together.
    public var securityRecords: (any SecurityRecordStore)?
    /// Where replica files and synchronizeReplica answers are written for download (nil: a new
    /// directory under the system's temporary directory).
    public var outputDirectory: URL?
    /// A directory every host of a site mounts (`outpost serve --site-directory`): the output
    /// directory is `results/` in it, and `/ready` answers 503 while a file cannot be written
    /// there.
    public var siteDirectory: URL?
    /// How long result files are kept after they were written or last fetched, and identical
    /// synchronizeReplica requests are answered from the stored response.
    public var resultRetention: Duration
    /// Where job records live (nil: in this process). Several processes serving one database
    /// share a store there, so any of them answers a job's status.
    public var jobStore: (any JobRecordStore)?
    /// With a shared ``jobStore``: how long a job stays with a process that stopped renewing its
    /// lease (it died) before another process fails it. Leases are renewed every third of it.
    public var jobLease: Duration = .seconds(30)
    /// The address clients reach the server at (`https://gis.example.org/prefix`), when a proxy
    /// in front of it does not say so in `Forwarded`/`X-Forwarded-*` headers. Every absolute URL
    /// the server writes starts with it.
    public var publicURL: URL?
    /// Serve HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with this certificate chain and private key
    /// (PEM files); nil: plain HTTP.
    public var tls: TLSFiles?
    /// Whether `generateToken` also takes a name and password in the URL (a GET, as geopy and
    /// other ArcGIS Online clients send it), over HTTPS only. Off by default: a URL can end up in
    /// a proxy's or browser's history where a POST body does not.
    public var tokenRequestsInURL = false
    /// Whether `/metrics` answers anyone on a server with tokens (a scraper on a private
    /// network); otherwise it needs the admin permission there.
    public var publicMetrics = false
    /// The server's log level: `info` logs a line per request (`outpost serve` takes it from
    /// `LOG_LEVEL`).
    public var logLevel: Logger.Level = .warning
    /// Where the server reads the time: tokens' expiry, the sign-in throttle, when the users
    /// file is read again, replicas' and jobs' dates (a test may hand in a clock of its own).
    public var clock: WallClock = .system

    /// A configuration of these values; the others take their defaults.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, maxBodyBytes: Int = 64 << 20, tokens: TokenPolicy? = nil,
        outputDirectory: URL? = nil, resultRetention: Duration = .seconds(600)
    ) {
        self.host = host
        self.port = port
        self.maxBodyBytes = maxBodyBytes
        self.tokens = tokens
        self.outputDirectory = outputDirectory
        self.resultRetention = resultRetention
    }
}

/// A PEM certificate chain and its private key.
public struct TLSFiles: Sendable {
    /// The PEM file of the certificate chain, the server's first.
    public var certificateChain: URL
    /// The PEM file of the private key.
    public var privateKey: URL

    /// A certificate chain and key of these files.
    public init(certificateChain: URL, privateKey: URL) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }
}

/// Tokens and what each may do. Requests carry one as `token=` or `Authorization: Bearer`.
public struct TokenPolicy: Sendable {
    /// What a token may do.
    public enum Scope: String, Sendable {
        /// Queries, downloads, service info.
        case read
        /// Queries, edits and sync.
        case edit
        /// Everything, the server's own metrics and readiness details included.
        case admin
    }

    /// Each token's scope.
    public var tokens: [String: Scope]

    /// A policy of these tokens.
    public init(tokens: [String: Scope]) { self.tokens = tokens }

    /// One token that may do everything (`--token`: the operator's).
    public init(token: String) { tokens = [token: .admin] }

    /// Reads a tokens file: one token per line, optionally followed by `read`, `edit` or `admin`
    /// (default `edit`); blank lines and `#` comments are ignored.
    public init(contentsOf url: URL) throws {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw ServiceError(500, "cannot read the tokens file \(url.path)")
        }
        var tokens: [String: Scope] = [:]
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)?
                .trimmingCharacters(in: .whitespaces) ?? ""
            if line.isEmpty { continue }
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard parts.count <= 2, let scope = parts.count == 2 ? Scope(rawValue: parts[1]) : .edit else {
                throw ServiceError(500, "\(url.lastPathComponent) line \(number + 1): expected \"<token> [read|edit|admin]\"")
            }
            tokens[parts[0]] = scope
        }
        guard !tokens.isEmpty else { throw ServiceError(500, "\(url.lastPathComponent) holds no token") }
        self.tokens = tokens
    }
}
