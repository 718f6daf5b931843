import Foundation
import OutpostCore
import OutpostDigest

/// One sealed, numbered upload of a replica's local edits (docs/sync.md, "Upload"): the body of
/// `PUT /outpost/v1/services/{service}/replicas/{replica}/batches/{seq}`.
///
/// A batch is sealed once and resent byte for byte until acknowledged; the server applies a
/// `(replica, seq)` at most once, replaying the stored result for the same content hash.
public struct UploadBatch: Codable, Hashable, Sendable {
    /// The format version this build writes (and the newest it reads).
    public static let currentFormatVersion = 1

    /// The batch's format version.
    public var formatVersion: Int
    /// The uploading replica's id.
    public var replicaId: String
    /// The batch's own id (a UUID), unchanged when it is resent.
    public var batchId: String
    /// The batch's sequence number in its replica: 1, 2, … with no gaps.
    public var seq: Int64
    /// The schema version the edits were made against.
    public var schemaVersion: Int
    /// true: any invalid edit rejects the whole batch; false: valid edits apply, invalid ones
    /// come back with errors.
    public var rollbackOnFailure: Bool
    /// The edits, layer by layer.
    public var layers: [BatchLayer]
    /// The rule this sync asks for when the same column changed on both sides (`clientWins`,
    /// `serverWins`, `latestEditWins`, `manual`); per-field rules of the service still apply.
    /// nil: each layer's own rule.
    public var conflictPolicy: String?
    /// Ids of server conflict records resolved on the replica since the last batch (closed by
    /// the server when the batch applies).
    public var resolvedConflicts: [Int64]?
    /// Attachment edits (the replica's attachment sync direction allows uploads).
    public var attachments: [AttachmentEdit]?
    /// true: the answer lists only the edits with something to say (failed, merged, in
    /// conflict…) and counts the rest per layer (``BatchLayerResult/applied``); nil: one result
    /// per edit. Part of the body, so a resent batch is answered in the form it asked for.
    public var compactAnswer: Bool?

    /// A batch of these values, in the current format version.
    public init(
        replicaId: String, batchId: String, seq: Int64, schemaVersion: Int, rollbackOnFailure: Bool, layers: [BatchLayer], conflictPolicy: String? = nil,
        resolvedConflicts: [Int64]? = nil
    ) {
        self.conflictPolicy = conflictPolicy
        self.resolvedConflicts = resolvedConflicts
        self.formatVersion = Self.currentFormatVersion
        self.replicaId = replicaId
        self.batchId = batchId
        self.seq = seq
        self.schemaVersion = schemaVersion
        self.rollbackOnFailure = rollbackOnFailure
        self.layers = layers
    }

    /// How many edits the batch holds, attachment edits included.
    public var editCount: Int { layers.reduce(0) { $0 + $1.edits.count } + (attachments?.count ?? 0) }

    /// Whether any edit carries its geometry as a GeoPackage blob.
    public var hasGeometryBlobs: Bool { layers.contains { $0.edits.contains { $0.geometryBlob != nil } } }

    /// The batch with every geometry as Esri JSON (``BatchEdit/esriGeometry()``).
    public func withEsriGeometries() throws -> UploadBatch {
        guard hasGeometryBlobs else { return self }
        var out = self
        for i in out.layers.indices { out.layers[i].edits = try out.layers[i].edits.map { try $0.withEsriGeometry() } }
        return out
    }

    /// The batch with every geometry as a GeoPackage blob (``BatchEdit/withGeometryBlob(srsID:)``).
    public func withGeometryBlobs(srsID: Int32 = 0) throws -> UploadBatch {
        var out = self
        for i in out.layers.indices { out.layers[i].edits = try out.layers[i].edits.map { try $0.withGeometryBlob(srsID: srsID) } }
        return out
    }

    /// Canonical bytes (sorted keys): what is stored, sent and hashed. The same bytes as the
    /// Codable encoding and as ``json``'s text, written straight from the edits: building the
    /// tree first and writing it was about two thirds of sealing a batch. Geometry blobs are
    /// written as their Esri JSON.
    public func encoded() throws -> Data {
        if hasGeometryBlobs { return try withEsriGeometries().encoded() }
        // Attachment edits are rare and nested: their batches take the tree.
        guard attachments == nil else { return json.jsonData }
        var out: [UInt8] = []
        out.reserveCapacity(256 * editCount + 256)
        // Keys in sorted order, as JSONValue writes an object.
        out.append(UInt8(ascii: "{"))
        var keys = JSONObjectKeys()
        keys.next("batchId", &out)
        JSONValue.writeString(batchId, to: &out)
        if let compactAnswer {
            keys.next("compactAnswer", &out)
            JSONValue.bool(compactAnswer).write(to: &out)
        }
        if let conflictPolicy {
            keys.next("conflictPolicy", &out)
            JSONValue.writeString(conflictPolicy, to: &out)
        }
        keys.next("formatVersion", &out)
        JSONValue.writeInteger(Int64(formatVersion), to: &out)
        keys.next("layers", &out)
        out.append(UInt8(ascii: "["))
        for (i, layer) in layers.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            var layerKeys = JSONObjectKeys()
            layerKeys.next("edits", &out)
            out.append(UInt8(ascii: "["))
            for (j, edit) in layer.edits.enumerated() {
                if j > 0 { out.append(UInt8(ascii: ",")) }
                edit.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
            layerKeys.next("id", &out)
            JSONValue.writeInteger(Int64(layer.id), to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        keys.next("replicaId", &out)
        JSONValue.writeString(replicaId, to: &out)
        if let resolvedConflicts {
            keys.next("resolvedConflicts", &out)
            JSONValue.array(resolvedConflicts.map { .integer($0) }).write(to: &out)
        }
        keys.next("rollbackOnFailure", &out)
        JSONValue.bool(rollbackOnFailure).write(to: &out)
        keys.next("schemaVersion", &out)
        JSONValue.writeInteger(Int64(schemaVersion), to: &out)
        keys.next("seq", &out)
        JSONValue.writeInteger(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return Data(out)
    }

    /// A batch from its bytes in either encoding (told apart by their first bytes).
    public static func decode(_ data: Data) throws -> UploadBatch {
        switch Encoding(of: data) {
        case .binary: try decodeBinary(data)
        case .json: try UploadBatch(json: JSONValue.parse(data))
        }
    }

    /// The content hash of encoded batch bytes (lower-case hex SHA-256).
    public static func hash(_ body: Data) -> String { SHA256.hex(body) }
}

/// The edits of one layer in a batch.
public struct BatchLayer: Codable, Hashable, Sendable {
    /// The service layer id.
    public var id: Int
    /// The layer's edits, one per feature.
    public var edits: [BatchEdit]

    /// A layer of these edits.
    public init(id: Int, edits: [BatchEdit]) {
        self.id = id
        self.edits = edits
    }
}

/// One feature's net change since the last acknowledged batch (captured changes coalesced).
public struct BatchEdit: Codable, Hashable, Sendable {
    /// What an edit does to its feature.
    public enum Operation: String, Codable, Hashable, Sendable {
        /// Adds it; changes it; deletes it.
        case insert, update, delete
    }

    /// What the edit does.
    public var op: Operation
    /// The feature's global id.
    public var globalId: String
    /// insert: every attribute; update: the changed ones (by field name; dates in epoch ms).
    public var attributes: [String: JSONValue]?
    /// Esri JSON geometry: insert, or an update that changed it (`null` clears it).
    public var geometry: JSONValue?
    /// The same geometry as its GeoPackage binary blob, in place of ``geometry`` (never both):
    /// what a binary batch whose head says so carries (docs/sync.md, "Binary batch encoding"),
    /// read by the server as it would read the Esri JSON. JSON has no place for it: the JSON
    /// forms write its Esri JSON (``esriGeometry()``).
    public var geometryBlob: [UInt8]?
    /// update: the columns that changed, the geometry column included when it did.
    public var changedColumns: [String]?
    /// update/delete: the values before the first local change (for conflict records).
    public var baseValues: [String: JSONValue]?
    /// When the (last) local edit was made, UTC ISO 8601.
    public var editedAt: String?
    /// update/delete: the server generation the replica had when the feature was first edited;
    /// server changes after it to the same columns are conflicts.
    public var baseGeneration: Int64?

    private enum CodingKeys: String, CodingKey {
        case op, globalId, attributes, geometry, changedColumns, baseValues, editedAt, baseGeneration
    }

    /// Whether the edit carries a geometry (as Esri JSON or as a blob; a `null` counts).
    public var carriesGeometry: Bool { geometry != nil || geometryBlob != nil }

    /// The edit's geometry as Esri JSON: ``geometry``, or ``geometryBlob`` decoded (the empty
    /// geometry of a blob flagged empty is `null`).
    /// - Throws: `GeometryError` for a blob that is not a readable GeoPackage geometry.
    public func esriGeometry() throws -> JSONValue? {
        guard let geometryBlob else { return geometry }
        return try EsriJSON.value(GeoPackageBinary.decode(geometryBlob).geometry)
    }

    /// The edit with its geometry as Esri JSON (``esriGeometry()``).
    public func withEsriGeometry() throws -> BatchEdit {
        guard geometryBlob != nil else { return self }
        var out = self
        out.geometry = try esriGeometry()
        out.geometryBlob = nil
        return out
    }

    /// The edit with its geometry as a GeoPackage blob (`srsID` in its header; readers of a
    /// batch take the layer's spatial reference, as they do for Esri JSON). A `null` geometry
    /// stays as it is: binary leaves it out either way.
    /// - Throws: `GeometryError` for Esri JSON that is not a geometry.
    public func withGeometryBlob(srsID: Int32 = 0) throws -> BatchEdit {
        guard let geometry, geometry != .null else { return self }
        var out = self
        out.geometryBlob = GeoPackageBinary.encode(try EsriJSON.decodeGeometry(geometry), srsID: srsID)
        out.geometry = nil
        return out
    }

    /// Encodes the edit as its JSON form, the geometry as Esri JSON.
    public func encode(to encoder: any Encoder) throws {
        let edit = try withEsriGeometry()
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(edit.op, forKey: .op)
        try c.encode(edit.globalId, forKey: .globalId)
        try c.encodeIfPresent(edit.attributes, forKey: .attributes)
        try c.encodeIfPresent(edit.geometry, forKey: .geometry)
        try c.encodeIfPresent(edit.changedColumns, forKey: .changedColumns)
        try c.encodeIfPresent(edit.baseValues, forKey: .baseValues)
        try c.encodeIfPresent(edit.editedAt, forKey: .editedAt)
        try c.encodeIfPresent(edit.baseGeneration, forKey: .baseGeneration)
    }

    /// An edit of these values.
    public init(
        op: Operation, globalId: String, attributes: [String: JSONValue]? = nil, geometry: JSONValue? = nil,
        changedColumns: [String]? = nil, baseValues: [String: JSONValue]? = nil, editedAt: String? = nil, baseGeneration: Int64? = nil
    ) {
        self.baseGeneration = baseGeneration
        self.op = op
        self.globalId = globalId
        self.attributes = attributes
        self.geometry = geometry
        self.changedColumns = changedColumns
        self.baseValues = baseValues
        self.editedAt = editedAt
    }
}

/// The server's answer to a batch, stored in its ledger and replayed for a resent batch.
public struct BatchResult: Codable, Hashable, Sendable {
    /// The batch's sequence number.
    public var seq: Int64
    /// The batch's id.
    public var batchId: String
    /// The generation the batch was applied under (nil when nothing applied).
    public var generation: Int64?
    /// The results, layer by layer.
    public var layers: [BatchLayerResult]
    /// true when this answer is a replay of an earlier application.
    public var replayed: Bool?
    /// The batch's attachment edits, in order (op `insert` or `delete`).
    public var attachments: [BatchEditResult]?

    /// An answer of these values.
    public init(seq: Int64, batchId: String, generation: Int64?, layers: [BatchLayerResult], replayed: Bool? = nil) {
        self.seq = seq
        self.batchId = batchId
        self.generation = generation
        self.layers = layers
        self.replayed = replayed
    }

    /// How many edits of the layers applied (attachments left out): counted in place. Filtering
    /// the results copied each one, 8 ms for 16,000 on the answer's path.
    public var appliedEditCount: Int {
        var count = 0
        for layer in layers {
            if let applied = layer.applied {
                count += applied.inserts + applied.updates + applied.deletes
            } else {
                for result in layer.results where result.success { count += 1 }
            }
        }
        return count
    }

    /// The edits that failed, of every layer and the attachments.
    public var rejected: [BatchEditResult] { layers.flatMap { $0.results.filter { !$0.success } } + (attachments ?? []).filter { !$0.success } }

    /// The answer in compact form (``UploadBatch/compactAnswer``): each layer's plain successes
    /// counted instead of listed (attachment results stay listed: they are few).
    public var compacted: BatchResult {
        var out = self
        out.layers = layers.map(\.compacted)
        return out
    }
}

/// The server's answer for one layer of a batch.
public struct BatchLayerResult: Codable, Hashable, Sendable {
    /// The service layer id.
    public var id: Int
    /// One result per edit; in a compact answer, only the edits that failed or whose application
    /// says more than "applied as sent" (``BatchEditResult/isPlain`` false).
    public var results: [BatchEditResult]
    /// In a compact answer (``UploadBatch/compactAnswer``): every edit of the layer that applied,
    /// by operation, listed or not. An edit of the batch not in ``results`` applied as sent.
    public var applied: Applied?

    /// Edits applied, by operation.
    public struct Applied: Codable, Hashable, Sendable {
        /// Features added.
        public var inserts = 0
        /// Features changed.
        public var updates = 0
        /// Features deleted.
        public var deletes = 0

        /// Counts of these values.
        public init(inserts: Int = 0, updates: Int = 0, deletes: Int = 0) {
            self.inserts = inserts
            self.updates = updates
            self.deletes = deletes
        }

        /// The successful results of `results`, counted.
        public init(counting results: [BatchEditResult]) {
            for r in results where r.success {
                switch r.op {
                case .insert: inserts += 1
                case .update: updates += 1
                case .delete: deletes += 1
                }
            }
        }
    }

    /// A layer answer of these values.
    public init(id: Int, results: [BatchEditResult], applied: Applied? = nil) {
        self.id = id
        self.results = results
        self.applied = applied
    }

    /// Whether the edit of `globalId` applied: its listed result, else (compact answer) yes.
    public func succeeded(_ globalId: String) -> Bool {
        if let listed = results.first(where: { $0.globalId == globalId }) { return listed.success }
        return applied != nil
    }

    /// This layer's answer in compact form: the successes counted, only the others listed.
    public var compacted: BatchLayerResult {
        BatchLayerResult(id: id, results: results.filter { !$0.isPlain }, applied: applied ?? Applied(counting: results))
    }
}

/// What became of one edit of a batch.
public struct BatchEditResult: Codable, Hashable, Sendable {
    /// The feature's global id.
    public var globalId: String
    /// What the edit did.
    public var op: BatchEdit.Operation
    /// Whether it applied.
    public var success: Bool
    /// The feature's object id on the server.
    public var objectId: Int64?
    /// Why it did not apply, when it did not.
    public var error: EditResult.Failure?
    /// What happened beyond a plain apply: `merged` (the server had changed other columns since
    /// the client's base, both kept), `conflict` (see ``conflicts``), `alreadyApplied`,
    /// `alreadyDeleted`.
    public var resolution: String?
    /// The values the edit's application discarded, one record per rule and winner.
    public var conflicts: [ConflictRecord]?

    /// Applied as sent: nothing to say beyond success (a compact answer leaves it out).
    public var isPlain: Bool { success && error == nil && resolution == nil && conflicts == nil }

    /// A result of these values.
    public init(
        globalId: String, op: BatchEdit.Operation, success: Bool, objectId: Int64? = nil, error: EditResult.Failure? = nil, resolution: String? = nil,
        conflicts: [ConflictRecord]? = nil
    ) {
        self.conflicts = conflicts
        self.globalId = globalId
        self.op = op
        self.success = success
        self.objectId = objectId
        self.error = error
        self.resolution = resolution
    }
}

// MARK: - Direct JSON

// Batches are read and written through `JSONValue` directly (see ``WireJSON``): the result
// equals the Codable form above (the tests compare them), at a fraction of the generic coder's
// cost per edit.

extension UploadBatch {
    /// A batch from its parsed JSON, checked like the Codable decoding.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "the batch")
        let version = try o.integer("formatVersion")
        guard let layers = try? o.array("layers") else { throw WireJSON.invalid("the batch has no layers") }
        self.init(
            replicaId: try o.string("replicaId"), batchId: try o.string("batchId"), seq: try o.integer("seq"), schemaVersion: Int(try o.integer("schemaVersion")),
            rollbackOnFailure: try o.bool("rollbackOnFailure"), layers: try layers.map(BatchLayer.init(json:)), conflictPolicy: try o.optionalString("conflictPolicy"))
        formatVersion = Int(version)
        if !o.absent("compactAnswer") { compactAnswer = try o.bool("compactAnswer") }
        if !o.absent("resolvedConflicts") {
            resolvedConflicts = try o.array("resolvedConflicts").map {
                guard let id = $0.integerValue else { throw WireJSON.invalid("resolvedConflicts holds a non-integer") }
                return id
            }
        }
        if let list = o.object["attachments"], list != .null { attachments = try JSONValueDecoder().decode([AttachmentEdit].self, from: list) }
    }

    /// The batch as JSON (what the Codable encoding gives).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "formatVersion": .integer(Int64(formatVersion)), "replicaId": .string(replicaId), "batchId": .string(batchId), "seq": .integer(seq),
            "schemaVersion": .integer(Int64(schemaVersion)), "rollbackOnFailure": .bool(rollbackOnFailure), "layers": .array(layers.map(\.json)),
        ]
        if let conflictPolicy { o["conflictPolicy"] = .string(conflictPolicy) }
        if let compactAnswer { o["compactAnswer"] = .bool(compactAnswer) }
        if let resolvedConflicts { o["resolvedConflicts"] = .array(resolvedConflicts.map { .integer($0) }) }
        if let attachments { o["attachments"] = (try? JSONValueEncoder().encode(attachments)) ?? .null }
        return .object(o)
    }
}

extension BatchLayer {
    /// A layer from its parsed JSON.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "a batch layer")
        self.init(id: Int(try o.integer("id")), edits: try o.array("edits").map(BatchEdit.init(json:)))
    }

    /// The layer as JSON.
    public var json: JSONValue { .object(["id": .integer(Int64(id)), "edits": .array(edits.map(\.json))]) }
}

extension BatchEdit {
    /// An edit from its parsed JSON.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "an edit")
        guard let op = Operation(rawValue: try o.string("op")) else { throw WireJSON.invalid("an edit has an unknown op") }
        var columns: [String]?
        if !o.absent("changedColumns") {
            columns = try o.array("changedColumns").map {
                guard let name = $0.stringValue else { throw WireJSON.invalid("changedColumns holds a non-string") }
                return name
            }
        }
        self.init(
            op: op, globalId: try o.string("globalId"), attributes: try o.optionalObject("attributes"), geometry: o.absent("geometry") ? nil : o.object["geometry"],
            changedColumns: columns, baseValues: try o.optionalObject("baseValues"), editedAt: try o.optionalString("editedAt"),
            baseGeneration: try o.optionalInteger("baseGeneration"))
    }

    /// ``json``'s text, appended to `out` (for an edit without a geometry blob:
    /// ``UploadBatch/encoded()`` converts them first).
    func write(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var keys = JSONObjectKeys()
        if let attributes {
            keys.next("attributes", &out)
            JSONValue.object(attributes).write(to: &out)
        }
        if let baseGeneration {
            keys.next("baseGeneration", &out)
            JSONValue.writeInteger(baseGeneration, to: &out)
        }
        if let baseValues {
            keys.next("baseValues", &out)
            JSONValue.object(baseValues).write(to: &out)
        }
        if let changedColumns {
            keys.next("changedColumns", &out)
            out.append(UInt8(ascii: "["))
            for (i, name) in changedColumns.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(name, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        if let editedAt {
            keys.next("editedAt", &out)
            JSONValue.writeString(editedAt, to: &out)
        }
        if let geometry {
            keys.next("geometry", &out)
            geometry.write(to: &out)
        }
        keys.next("globalId", &out)
        JSONValue.writeString(globalId, to: &out)
        keys.next("op", &out)
        JSONValue.writeString(op.rawValue, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The edit as JSON (a geometry blob as its Esri JSON; one that cannot be read is left
    /// out: ``UploadBatch/encoded()`` converts, and throws for it, first).
    public var json: JSONValue {
        var o: [String: JSONValue] = ["op": .string(op.rawValue), "globalId": .string(globalId)]
        if let attributes { o["attributes"] = .object(attributes) }
        if let geometry = (try? esriGeometry()) ?? nil { o["geometry"] = geometry }
        if let changedColumns { o["changedColumns"] = .array(changedColumns.map { .string($0) }) }
        if let baseValues { o["baseValues"] = .object(baseValues) }
        if let editedAt { o["editedAt"] = .string(editedAt) }
        if let baseGeneration { o["baseGeneration"] = .integer(baseGeneration) }
        return .object(o)
    }
}

extension BatchResult {
    /// An answer from its parsed JSON.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "the batch result")
        self.init(
            seq: try o.integer("seq"), batchId: try o.string("batchId"), generation: try o.optionalInteger("generation"),
            layers: try o.array("layers").map(BatchLayerResult.init(json:)))
        if !o.absent("replayed") { replayed = try o.bool("replayed") }
        if !o.absent("attachments") { attachments = try o.array("attachments").map(BatchEditResult.init(json:)) }
    }

    /// The answer as JSON.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["seq": .integer(seq), "batchId": .string(batchId), "layers": .array(layers.map(\.json))]
        if let generation { o["generation"] = .integer(generation) }
        if let replayed { o["replayed"] = .bool(replayed) }
        if let attachments { o["attachments"] = .array(attachments.map(\.json)) }
        return .object(o)
    }
}

extension BatchLayerResult {
    /// A layer answer from its parsed JSON.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "a layer result")
        self.init(id: Int(try o.integer("id")), results: try o.array("results").map(BatchEditResult.init(json:)))
        if let value = o.object["applied"], value != .null { applied = try JSONValueDecoder().decode(Applied.self, from: value) }
    }

    /// The layer answer as JSON.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["id": .integer(Int64(id)), "results": .array(results.map(\.json))]
        if let applied { o["applied"] = (try? JSONValueEncoder().encode(applied)) ?? .null }
        return .object(o)
    }
}

extension BatchEditResult {
    /// A result from its parsed JSON.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "an edit result")
        guard let op = BatchEdit.Operation(rawValue: try o.string("op")) else { throw WireJSON.invalid("an edit result has an unknown op") }
        self.init(globalId: try o.string("globalId"), op: op, success: try o.bool("success"), objectId: try o.optionalInteger("objectId"), resolution: try o.optionalString("resolution"))
        // Failures and conflict records are rare and nested: the generic decoder reads them.
        if let value = o.object["error"], value != .null { error = try JSONValueDecoder().decode(EditResult.Failure.self, from: value) }
        if let value = o.object["conflicts"], value != .null { conflicts = try JSONValueDecoder().decode([ConflictRecord].self, from: value) }
    }

    /// The result as JSON.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["globalId": .string(globalId), "op": .string(op.rawValue), "success": .bool(success)]
        if let objectId { o["objectId"] = .integer(objectId) }
        if let resolution { o["resolution"] = .string(resolution) }
        if let error { o["error"] = (try? JSONValueEncoder().encode(error)) ?? .null }
        if let conflicts { o["conflicts"] = (try? JSONValueEncoder().encode(conflicts)) ?? .null }
        return .object(o)
    }
}

// MARK: - Batch results written straight to text

extension BatchResult {
    /// ``json``'s compact text (keys sorted, as the tree writes them), written without building
    /// the tree: a server answers every applied batch with one result per edit, and the tree
    /// of an 11,000-edit answer was a dictionary per edit, made to be written once.
    public var jsonText: String {
        var out: [UInt8] = []
        out.reserveCapacity(64 + layers.reduce(0) { $0 + $1.results.count } * 80)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func write(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var keys = JSONObjectKeys()
        if let attachments {
            keys.next("attachments", &out)
            BatchEditResult.write(attachments, to: &out)
        }
        keys.next("batchId", &out)
        JSONValue.writeString(batchId, to: &out)
        if let generation {
            keys.next("generation", &out)
            JSONValue.writeInteger(generation, to: &out)
        }
        keys.next("layers", &out)
        out.append(UInt8(ascii: "["))
        for (i, layer) in layers.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            var layerKeys = JSONObjectKeys()
            if let applied = layer.applied {
                layerKeys.next("applied", &out)
                out.append(contentsOf: "{\"deletes\":\(applied.deletes),\"inserts\":\(applied.inserts),\"updates\":\(applied.updates)}".utf8)
            }
            layerKeys.next("id", &out)
            JSONValue.writeInteger(Int64(layer.id), to: &out)
            layerKeys.next("results", &out)
            BatchEditResult.write(layer.results, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if let replayed {
            keys.next("replayed", &out)
            out.append(contentsOf: (replayed ? "true" : "false").utf8)
        }
        keys.next("seq", &out)
        JSONValue.writeInteger(seq, to: &out)
        out.append(UInt8(ascii: "}"))
    }
}

extension BatchEditResult {
    static func write(_ results: [BatchEditResult], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (i, result) in results.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            result.write(to: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// ``json``'s text, appended to `out`; the rare nested parts (a failure, conflict records)
    /// go through the tree as ``json`` writes them.
    func write(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var keys = JSONObjectKeys()
        if let conflicts {
            keys.next("conflicts", &out)
            ((try? JSONValueEncoder().encode(conflicts)) ?? .null).write(to: &out)
        }
        if let error {
            keys.next("error", &out)
            ((try? JSONValueEncoder().encode(error)) ?? .null).write(to: &out)
        }
        keys.next("globalId", &out)
        JSONValue.writeString(globalId, to: &out)
        if let objectId {
            keys.next("objectId", &out)
            JSONValue.writeInteger(objectId, to: &out)
        }
        keys.next("op", &out)
        JSONValue.writeString(op.rawValue, to: &out)
        if let resolution {
            keys.next("resolution", &out)
            JSONValue.writeString(resolution, to: &out)
        }
        keys.next("success", &out)
        out.append(contentsOf: (success ? "true" : "false").utf8)
        out.append(UInt8(ascii: "}"))
    }
}

/// The keys of a JSON object written straight to text: `"name":`, after a comma unless it is
/// the object's first key. Every direct writer of a batch and its answer writes keys this way.
struct JSONObjectKeys {
    private var first = true

    mutating func next(_ name: StaticString, _ out: inout [UInt8]) {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }
}
