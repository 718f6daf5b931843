/// The native sync API's routes (docs/sync.md, "Native API"), declared once: the client builds
/// its URLs from them, the server registers a handler for each (an exhaustive switch: a route
/// added here and not served does not compile) and matches its prefix by them.
///
/// Patterns are relative to a service's base, ``servicePrefix`` followed by the service's name;
/// `:name` segments are the values a route takes.
public enum NativeSyncRoute: String, CaseIterable, Sendable {
    /// How much of some content the server holds; the next chunk of it.
    case blob = "blobs/:sha256"
    /// An attachment's bytes (or its metadata with `f=json`).
    case attachment = "attachments/:globalId"
    /// The service's schema now.
    case schema
    /// Every registered replica.
    case replicas
    /// One replica: its registration; unregistering it.
    case replica = "replicas/:replica"
    /// A replica's upload batch: sending it; reading its stored answer.
    case batch = "replicas/:replica/batches/:seq"
    /// A new replica with a replica's scope at a generation (a preplanned package's copy).
    case copies = "replicas/:replica/copies"
    /// A page of a replica's change feed.
    case changes = "replicas/:replica/changes"
    /// A page of every feature in a replica's scope.
    case snapshot = "replicas/:replica/snapshot"
    /// Checksums of a replica's layers.
    case checksums = "replicas/:replica/checksums"

    /// Where the native API of every service starts, below a server's base (and any prefix):
    /// `outpost/v1/services`, then the service's name.
    public static let servicePrefix = ["outpost", "v1", "services"]

    /// The route's pattern, with `:name` for each value it takes.
    public var pattern: String { rawValue }

    /// The HTTP methods the route answers.
    public var methods: Set<String> {
        switch self {
        case .blob: ["GET", "PUT"]
        case .attachment, .schema, .replicas, .changes, .snapshot, .checksums: ["GET"]
        case .replica: ["GET", "DELETE"]
        case .batch: ["GET", "PUT"]
        case .copies: ["POST"]
        }
    }

    /// The path below the service's base with `values` in place of the route's `:name`
    /// segments, in order (as they are: the URL builder percent-encodes them).
    public func path(_ values: String...) -> String { path(values) }

    /// The path below the service's base with `values` in place of the route's `:name`
    /// segments, in order.
    public func path(_ values: [String]) -> String {
        var remaining = values[...]
        let segments = pattern.split(separator: "/").map { segment -> String in
            guard segment.hasPrefix(":") else { return String(segment) }
            precondition(!remaining.isEmpty, "route \(pattern) takes more values than \(values)")
            return remaining.removeFirst()
        }
        precondition(remaining.isEmpty, "route \(pattern) takes fewer values than \(values)")
        return segments.joined(separator: "/")
    }
}
