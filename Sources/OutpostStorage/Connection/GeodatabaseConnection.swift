import GRDB

/// Access to an open geodatabase inside a ``Geodatabase/read(_:)`` or ``Geodatabase/write(_:)``
/// closure. It wraps one SQLite connection and is valid only while the closure runs.
///
/// - Important: do not store it or let it escape the closure.
public final class GeodatabaseConnection {
    let db: Database
    let geodatabase: Geodatabase

    init(_ db: Database, _ geodatabase: Geodatabase) {
        self.db = db
        self.geodatabase = geodatabase
    }

    /// Whether writes are allowed on this connection (false inside ``Geodatabase/read(_:)``).
    public var isWritable: Bool { !db.configuration.readonly && !geodatabase.isReadOnly }
}

// The connection must be used on the serial queue of its `Database`.
@available(*, unavailable)
extension GeodatabaseConnection: Sendable {}
