import Foundation
import Hummingbird
import OutpostCore
import OutpostSQLiteService
import OutpostSyncService

/// `…/<name>/FeatureServer/…`: the service and its layers, query, applyEdits and attachments
/// (read with `query`, changed with `edit`), and the replica operations (`sync`).
extension FeatureServerResponder {
    func featureServerTable() -> RouteTable {
        var table = RouteTable()
        let responder = self
        /// A route answered by ``ServiceRoutes`` over the service the path names.
        func on(_ path: RouterPath, _ permission: Permission, _ answer: @escaping @Sendable (ServiceRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, access: .granted(permission)) { call in try await answer(try responder.featureService(call), call) }
        }
        /// A replica operation, answered by ``ReplicaRoutes``.
        func onReplicas(_ path: RouterPath, _ answer: @escaping @Sendable (ReplicaRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, access: .granted(.sync)) { call in try await responder.replicaRoute(call) { try await answer($0, call) } }
        }
        on("", .query) { r, _ in try await r.serviceInfo() }
        on("layers", .query) { r, _ in try await r.allLayers() }
        on(":layer", .query) { r, call in try await r.layerInfo(try call.layer) }
        on(":layer/query", .query) { r, call in
            if let view = call.directoryView() { return try await r.queryPage(try call.layer, view: view) }
            return try await r.query(try call.layer)
        }
        on(":layer/applyEdits", .edit) { r, call in
            if let view = call.directoryView(), ["adds", "updates", "deletes"].allSatisfy({ call.parameters[$0] == nil }) {
                let layer = try r.layer(try call.layer, in: try await r.backend.schema())
                return r.operationForm(
                    DirectoryForms.applyEdits, title: "Apply Edits: \(layer.name) (\(layer.id))", description: "Add, update and delete features of this layer in one request.",
                    view: view)
            }
            return try await r.applyEdits(try call.layer)
        }
        on(":layer/:feature/attachments", .query) { r, call in try await r.attachments(try call.layer, try call.feature("feature")) }
        on(":layer/:feature/addAttachment", .edit) { r, call in
            try await r.addAttachment(try call.layer, try call.feature("feature"))
        }
        on(":layer/:feature/deleteAttachments", .edit) { r, call in try await r.deleteAttachments(try call.layer, try call.feature("feature")) }
        on(":layer/:feature/attachments/:attachment", .query) { r, call in
            try await r.attachment(try call.layer, try call.feature("feature"), try call.feature("attachment"))
        }
        table.on("createReplica", access: .granted(.sync)) { call in
            // A browser with no layers named gets the operation's form.
            if let view = call.directoryView(), call.parameters["layers"] == nil {
                let r = try responder.featureService(call)
                return r.operationForm(
                    DirectoryForms.createReplica, title: "Create Replica: \(r.backend.name)",
                    description: "Take layers of this service offline as a replica (a JSON file or a GeoPackage).", view: view)
            }
            return try await responder.replicaRoute(call) { try await $0.createReplica() }
        }
        onReplicas("synchronizeReplica") { r, _ in try await r.synchronizeReplica() }
        onReplicas("unRegisterReplica") { r, _ in try await r.unregisterReplica() }
        onReplicas("replicas") { r, _ in try await r.replicas() }
        onReplicas("replicas/:replica") { r, call in try await r.replica(try call.value("replica")) }
        onReplicas("jobs/:job") { r, call in try await r.job(try call.value("job")) }
        onReplicas("jobs/:job/status") { r, call in try await r.job(try call.value("job")) }
        onReplicas("jobs/:job/cancel") { r, call in try await r.cancelJob(try call.value("job")) }
        onReplicas("replicafiles/:file") { r, call in try r.resultFile(try call.value("file")) }
        return table
    }

    /// The service the path names, answering for this request; in a browser, as the Services
    /// Directory's page for its route.
    func featureService(_ call: RoutedRequest) throws -> ServiceRoutes {
        let name = try call.service
        guard let backend = services.backend(named: name) else { throw services.notServed(name, types: ["FeatureServer"], described: "service \(name)") }
        var writing = call.writing
        if let view = call.directoryView() {
            writing.directory = (view, Self.directoryPage(Array(call.segments.dropFirst(5)), drawn: backend is SQLiteServiceBackend))
        }
        return ServiceRoutes(
            backend: backend, parameters: call.parameters, writing: writing, request: call.request, configuration: configuration, metrics: metrics)
    }

    /// A replica operation on the service the path names, when its store syncs.
    private func replicaRoute(_ call: RoutedRequest, _ answer: (ReplicaRoutes) async throws -> Response) async throws -> Response {
        let handler = try featureService(call)
        guard let sync = handler.backend as? any SyncBackend else { throw ServiceError(400, "service \(handler.backend.name) does not support sync") }
        return try await answer(ReplicaRoutes(backend: handler.backend, sync: sync, parameters: call.parameters, writing: handler.writing, request: call.request, services: self.sync))
    }

    /// The directory page of a FeatureServer route.
    static func directoryPage(_ route: [String], drawn: Bool) -> DirectoryPage {
        switch route.count {
        case 0: return .featureServer(drawn: drawn)
        case 1 where Int(route[0]) != nil: return .layer
        case 1 where route[0] == "createReplica":
            return .operation(description: "The replica was created.", form: nil)
        case 2 where route[1] == "applyEdits":
            return .operation(description: "The edits were applied (see each result).", form: nil)
        default: return .resource
        }
    }
}

extension RoutedRequest {
    /// The layer the path names (`:layer`): 404 unless a non-negative integer.
    var layer: Int {
        get throws {
            let text = try value("layer")
            guard let id = Int(text), id >= 0 else { throw ServiceError.notFound("layer \(text)") }
            return id
        }
    }

    /// A feature's or an attachment's id the path names: 404 unless an integer.
    func feature(_ name: String) throws -> Int64 {
        let text = try value(name)
        guard let id = Int64(text) else { throw ServiceError.notFound("feature \(text)") }
        return id
    }
}
