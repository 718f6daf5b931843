import OutpostCore

/// An error from the local geodatabase: opening, schema, edits, queries, attachments.
///
/// Match the kind in `catch` clauses:
///
/// ```swift
/// do { try await table.add([feature]) }
/// catch StorageError.Code.invalidEdit { … }
/// ```
///
/// Descriptions name tables, fields and edit positions; edit values appear only where the
/// message needs them to be actionable (a value outside a domain), shortened.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case notAGeoPackage, corrupt, unsupportedContent, invalidSchema, invalidEdit, invalidWhereClause
            case invalidQuery, notFound, alreadyExists, readOnly, transactionState, io, sqlite, closed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file is not an SQLite database with the GeoPackage application id.
        public static let notAGeoPackage = Code(.notAGeoPackage)
        /// SQLite reports the file damaged, or GeoPackage tables are inconsistent.
        public static let corrupt = Code(.corrupt)
        /// A valid GeoPackage that uses something Outpost does not support (curves, unknown SRS, …).
        public static let unsupportedContent = Code(.unsupportedContent)
        /// A service schema that does not validate.
        public static let invalidSchema = Code(.invalidSchema)
        /// An edit that violates the layer's schema; nothing was written.
        public static let invalidEdit = Code(.invalidEdit)
        /// A where clause outside the accepted SQL-92 subset.
        public static let invalidWhereClause = Code(.invalidWhereClause)
        /// A query parameter that cannot be used (unknown out field, bad paging values, …).
        public static let invalidQuery = Code(.invalidQuery)
        /// A layer, feature or attachment that does not exist.
        public static let notFound = Code(.notFound)
        /// Something that must be new already exists (a file, a layer name).
        public static let alreadyExists = Code(.alreadyExists)
        /// A write to a geodatabase opened read-only.
        public static let readOnly = Code(.readOnly)
        /// commit/rollback without a transaction, or a second begin.
        public static let transactionState = Code(.transactionState)
        /// A file-system failure (reading an attachment source, renaming a finished file).
        public static let io = Code(.io)
        /// Any other SQLite failure; `cause` holds it.
        public static let sqlite = Code(.sqlite)
        /// The geodatabase was closed; open it again.
        public static let closed = Code(.closed)

        public var description: String { base.rawValue }

        /// Matches an error that is a ``StorageError`` with this code, in a `catch` pattern.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? StorageError)?.code == code
        }
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong and, where possible, how to fix it.
    public var message: String
    /// The table (layer) concerned, when there is one.
    public var table: String?
    /// The field concerned, when there is one.
    public var field: String?
    /// The 0-based position of the offending edit in a batch.
    public var editIndex: Int?
    /// The underlying error (SQLite, file system, geometry codec).
    public var cause: (any Error & Sendable)?

    /// An error of `code` with its message and where it happened.
    public init(
        _ code: Code, _ message: String, table: String? = nil, field: String? = nil, editIndex: Int? = nil,
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.table = table
        self.field = field
        self.editIndex = editIndex
        self.cause = cause
    }

    public var description: String {
        var parts: [String] = []
        if let table { parts.append("layer \(table)") }
        if let editIndex { parts.append("edit \(editIndex)") }
        if let field { parts.append("field \(field)") }
        return parts.isEmpty ? message : "\(parts.joined(separator: ", ")): \(message)"
    }
}

/// A value shortened for an error message.
func shortened(_ text: String, limit: Int = 40) -> String {
    text.count <= limit ? text : String(text.prefix(limit)) + "…"
}
