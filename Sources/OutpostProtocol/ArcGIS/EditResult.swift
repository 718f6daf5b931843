/// One entry of `addResults`/`updateResults`/`deleteResults` in an applyEdits (or sync) answer,
/// as ArcGIS writes it: `{"objectId": 7, "globalId": "{…}", "success": true}` or with
/// `"success": false, "error": {"code": 1000, "description": "…"}`.
public struct EditResult: Codable, Hashable, Sendable {
    /// Why an edit failed: an ArcGIS error code and its text.
    public struct Failure: Codable, Hashable, Sendable {
        /// The ArcGIS error code (see ``EditResult/Code``).
        public var code: Int
        /// What went wrong, for a person.
        public var description: String

        /// A failure of this code and text.
        public init(code: Int, description: String) {
            self.code = code
            self.description = description
        }
    }

    /// The feature's object id, when known.
    public var objectId: Int64?
    /// The feature's global id, when it has one.
    public var globalId: String?
    /// Whether the edit was applied.
    public var success: Bool
    /// Why not, when it was not.
    public var error: Failure?

    /// A result of these values.
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
    /// The results of the adds, in request order.
    public var addResults: [EditResult]
    /// The results of the updates, in request order.
    public var updateResults: [EditResult]
    /// The results of the deletes, in request order.
    public var deleteResults: [EditResult]

    /// An answer of these results.
    public init(addResults: [EditResult] = [], updateResults: [EditResult] = [], deleteResults: [EditResult] = []) {
        self.addResults = addResults
        self.updateResults = updateResults
        self.deleteResults = deleteResults
    }
}
