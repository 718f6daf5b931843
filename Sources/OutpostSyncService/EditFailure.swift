import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// How applyEdits reports a failed edit, whatever the backend.
public enum EditFailure {
    /// The failed edit's result; with `rollbackOnFailure`, the error that ends the request
    /// instead (`notFound` for a feature not found, else `invalidRequest`), naming the edit and why.
    public static func result(
        _ error: any Error, layer: LayerDefinition, list: String, index: Int, feature: Feature, rollbackOnFailure: Bool
    ) throws -> EditResult {
        let storage = error as? StorageError
        let code = storage?.code == .notFound ? EditResult.Code.notFound : EditResult.Code.invalidEdit
        let reason = storage.map { $0.field.map { f in "\(f): " } ?? "" } ?? ""
        let message = (storage?.message ?? "\(error)")
        let description = message.hasPrefix(reason) || reason.isEmpty ? message : reason + message
        if rollbackOnFailure {
            let target = feature.globalID ?? feature.objectID.map { "object id \($0)" } ?? "new feature"
            throw SyncServiceError(
                storage?.code == .notFound ? .notFound : .invalidRequest,
                "edit rejected: layer \(layer.name) (\(layer.id)), \(list)[\(index)] (\(target)): \(description); nothing was applied",
                details: ["layer: \(layer.id)", "\(list)[\(index)]", "globalId: \(feature.globalID ?? "")", "reason: \(description)"])
        }
        return EditResult(objectId: feature.objectID, globalId: feature.globalID, success: false, error: .init(code: code, description: description))
    }

    /// The columns an update changed (the geometry column included), for the change log.
    public static func changedColumns(_ before: Feature, _ after: Feature, _ layer: LayerDefinition) -> [String] {
        var columns = layer.fields.filter { $0.type != .oid && $0.type != .globalID }.map(\.name).filter {
            (before.attributes[$0] ?? .null) != (after.attributes[$0] ?? .null)
        }
        if layer.isSpatial, before.geometry != after.geometry { columns.append(layer.geometryColumn) }
        return columns
    }
}
