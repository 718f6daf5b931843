/// The ArcGIS REST error shape: `{"error": {"code": 400, "message": "…", "details": ["…"]}}`.
/// The code equals the HTTP status of the response.
public struct ArcGISErrorBody: Codable, Hashable, Sendable {
    /// The members of the `error` object.
    public struct Detail: Codable, Hashable, Sendable {
        /// The error code (the HTTP status).
        public var code: Int
        /// What went wrong, for a person.
        public var message: String
        /// More lines about it (may be empty).
        public var details: [String]
    }

    /// The `error` object.
    public var error: Detail

    /// An error body of this code, message and details.
    public init(code: Int, message: String, details: [String] = []) {
        error = Detail(code: code, message: message, details: details)
    }
}
