import Foundation
import OutpostCore

/// An ArcGIS REST service's answer that is an error: its `{"error": {"code", "message",
/// "details"}}` object (ArcGIS sends it with any HTTP status, 200 included), or an answer that is
/// not what a service answers (a status outside 2xx without that object, a body that is not
/// JSON), whose code is the HTTP status.
public struct ArcGISError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error object's code, or the HTTP status.
    public var code: Int
    /// What went wrong, for a person.
    public var message: String
    /// More lines about it (may be empty).
    public var details: [String]

    /// An error of this code and message.
    public init(code: Int, _ message: String, details: [String] = []) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// The message, with its details in parentheses.
    public var description: String { details.isEmpty ? message : "\(message) (\(details.joined(separator: "; ")))" }

    /// The error object of an answer's JSON, when it has one that is not null.
    public init?(json: JSONValue, status: Int) {
        guard let error = json["error"], !error.isNull else { return nil }
        self.init(
            code: Int(error["code"]?.integerValue ?? Int64(status)), error["message"]?.stringValue ?? "error",
            details: error["details"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }
}
