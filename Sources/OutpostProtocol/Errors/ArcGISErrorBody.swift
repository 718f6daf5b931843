/// The ArcGIS REST error shape: `{"error": {"code": 400, "message": "…", "details": ["…"]}}`.
/// The code equals the HTTP status of the response.
public struct ArcGISErrorBody: Codable, Hashable, Sendable {
    public struct Detail: Codable, Hashable, Sendable {
        public var code: Int
        public var message: String
        public var details: [String]
    }

    public var error: Detail

    public init(code: Int, message: String, details: [String] = []) {
        error = Detail(code: code, message: message, details: details)
    }
}
