/// One entry of `addResults`/`updateResults`/`deleteResults` in an applyEdits (or sync) answer,
/// as ArcGIS writes it: `{"objectId": 7, "globalId": "{…}", "success": true}` or with
/// `"success": false, "error": {"code": 1000, "description": "…"}`.
public struct EditResult: Codable, Hashable, Sendable {
    public struct Failure: Codable, Hashable, Sendable {
        public var code: Int
        public var description: String

        public init(code: Int, description: String) {
            self.code = code
            self.description = description
        }
    }

    public var objectId: Int64?
    public var globalId: String?
    public var success: Bool
    public var error: Failure?

    public init(objectId: Int64?, globalId: String?, success: Bool, error: Failure? = nil) {
        self.objectId = objectId
        self.globalId = globalId
        self.success = success
        self.error = error
    }

    /// ArcGIS edit error codes used in per-edit results.
    public enum Code {
        /// The edit violates the layer's schema (ArcGIS 1000, "Internal error during object insert").
        public static let invalidEdit = 1000
        /// The feature to update or delete does not exist (ArcGIS 1019, "Object is missing").
        public static let notFound = 1019
    }
}

/// The answer to applyEdits.
public struct ApplyEditsResponse: Codable, Hashable, Sendable {
    public var addResults: [EditResult]
    public var updateResults: [EditResult]
    public var deleteResults: [EditResult]

    public init(addResults: [EditResult] = [], updateResults: [EditResult] = [], deleteResults: [EditResult] = []) {
        self.addResults = addResults
        self.updateResults = updateResults
        self.deleteResults = deleteResults
    }
}
