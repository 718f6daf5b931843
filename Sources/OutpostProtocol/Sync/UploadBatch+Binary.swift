import Foundation
import OutpostCore

/// The compact binary encoding of an upload batch (docs/sync.md, "Binary batch encoding"): the
/// same content as the JSON body, read by the server without parsing text. A server that accepts
/// it says so in its replica info (`batchEncodings`); JSON stays for every other client.
extension UploadBatch {
    /// How an upload batch body is encoded.
    public enum Encoding: String, Codable, Hashable, Sendable {
        /// JSON text; the compact binary encoding.
        case json, binary

        /// What a body is, by its first bytes (a JSON body starts with `{`, or white space).
        public init(of body: Data) {
            self = UploadBatch.binaryMagic.marks(body) ? .binary : .json
        }

        /// The body's `Content-Type`.
        public var contentType: String {
            switch self {
            case .json: "application/json"
            case .binary: "application/vnd.outpost.batch"
            }
        }
    }

    /// The encodings this version's server reads, as its replica info lists them.
    public static let acceptedEncodings = [Encoding.json.rawValue, Encoding.binary.rawValue, framedEncoding, geometryBlobEncoding]

    /// What a server lists in `batchEncodings` when it reads binary batches whose geometries are
    /// GeoPackage blobs (``BatchEdit/geometryBlob``) rather than Esri JSON values.
    public static let geometryBlobEncoding = "binary-gpkg-geometry"

    /// "OPB" and the binary layout's version.
    static let binaryMagic = BinaryWireMagic(bytes: [0x4F, 0x50, 0x42, 0x01], what: "binary batch")

    enum Flag {
        static let rollbackOnFailure: UInt8 = 1, conflictPolicy: UInt8 = 2, resolvedConflicts: UInt8 = 4, attachments: UInt8 = 8, compactAnswer: UInt8 = 16
        /// The edits' geometries are GeoPackage blobs.
        static let geometryBlobs: UInt8 = 32
        static let all = rollbackOnFailure | conflictPolicy | resolvedConflicts | attachments | compactAnswer | geometryBlobs
    }

    /// The batch's bytes in `encoding`.
    public func encoded(as encoding: Encoding) throws -> Data {
        switch encoding {
        case .json: try encoded()
        case .binary: try binaryEncoded()
        }
    }

    /// Geometries go as blobs when any edit carries one (the others' Esri JSON is encoded too).
    private func binaryEncoded() throws -> Data {
        let blobs = hasGeometryBlobs
        var writer = try BinaryWriter(header: self, capacity: 128 * editCount + 256, geometryBlobs: blobs)
        for layer in try blobs ? withGeometryBlobs().layers : layers {
            writer.beginLayer(id: layer.id)
            for edit in layer.edits { edit.write(to: &writer) }
            writer.endLayer()
        }
        return writer.finish()
    }

    /// Writes a binary batch body edit by edit, without the batch's edits ever held as values: the
    /// replica's seal writes each feature's current row straight into it. The bytes are those
    /// ``encoded(as:)`` gives for the batch the calls describe (it writes through this too).
    public struct BinaryWriter {
        private var w: BinaryWireWriter
        private var layerCount: BinaryWireWriter.CountMark
        private var layers = 0
        /// The open layer: where it starts, its edit count's place, and its edits so far.
        private var layer: (start: Int, count: BinaryWireWriter.CountMark, edits: Int)?
        /// Edits written, attachment edits included.
        public private(set) var editCount: Int
        /// Whether geometries are written as GeoPackage blobs.
        public let geometryBlobs: Bool

        /// A body with `header`'s fields and attachment edits; its layers are written through
        /// ``beginLayer(id:)`` and the edit calls (any in `header` itself are not written). With
        /// `geometryBlobs` (for a server that lists ``UploadBatch/geometryBlobEncoding``) every
        /// edit's geometry is given as a blob, else as Esri JSON.
        public init(header: UploadBatch, capacity: Int, geometryBlobs: Bool = false) throws {
            w = BinaryWireWriter(capacity: capacity, magic: UploadBatch.binaryMagic)
            self.geometryBlobs = geometryBlobs
            try w.batchHead(header, geometryBlobs: geometryBlobs)
            editCount = header.attachments?.count ?? 0
            layerCount = w.beginCount()
        }

        /// Starts the edits of layer `id` (the previous layer must be finished).
        public mutating func beginLayer(id: Int) {
            precondition(layer == nil, "a layer is still open")
            let start = w.out.count
            w.signed(Int64(id))
            layer = (start, w.beginCount(), 0)
        }

        /// Closes the open layer; with `droppingEmpty`, a layer without edits is left out.
        public mutating func endLayer(droppingEmpty: Bool = false) {
            guard let open = layer else { preconditionFailure("no layer is open") }
            layer = nil
            if open.edits == 0 && droppingEmpty {
                w.out.removeSubrange(open.start...)
                return
            }
            w.endCount(open.count, open.edits)
            layers += 1
        }

        /// One edit of the open layer. `attributeNames` (sorted, distinct; nil: no attributes)
        /// name the values `attribute(i)` gives; the geometry is `geometryBlob` when the body
        /// writes blobs, else `geometry` (a nil or null one is left out, as JSON's reader takes
        /// it for absent).
        public mutating func edit(
            _ op: BatchEdit.Operation, globalId: String, attributeNames: [String]?, attribute: (Int) -> JSONValue, geometry: JSONValue?,
            geometryBlob: [UInt8]?, changedColumns: [String]?, baseValues: [String: JSONValue]?, editedAt: String?, baseGeneration: Int64?
        ) {
            precondition(layer != nil, "no layer is open")
            w.batchEdit(
                op, globalId: globalId, attributeNames: attributeNames, attribute: attribute, geometry: geometry, geometryBlob: geometryBlob,
                blobs: geometryBlobs, changedColumns: changedColumns, baseValues: baseValues, editedAt: editedAt, baseGeneration: baseGeneration)
            layer!.edits += 1
            editCount += 1
        }

        /// The body; no layer may be open.
        public consuming func finish() -> Data {
            precondition(layer == nil, "a layer is still open")
            w.endCount(layerCount, layers)
            return Data(w.out)
        }
    }

    /// Reads a binary body; the caller has checked its magic.
    static func decodeBinary(_ data: Data) throws -> UploadBatch {
        if framedMagic.marksLayout(of: data) { return try decodeFramed(data) }
        return try data.withUnsafeBytes { raw in
            var r = try BinaryWireReader(raw, after: binaryMagic)
            var (batch, blobs) = try readHead(&r)
            let layerCount = try r.count("the batch's layers", bytesEach: 2)
            var layers: [BatchLayer] = []
            layers.reserveCapacity(layerCount)
            for _ in 0..<layerCount {
                guard let id = Int(exactly: try r.signed()) else { throw r.invalid("a layer id is out of range") }
                // An edit is at least its flags and its global id's length.
                let n = try r.count("a layer's edits", bytesEach: 2)
                var edits: [BatchEdit] = []
                edits.reserveCapacity(n)
                for _ in 0..<n { edits.append(try BatchEdit(binary: &r, geometryBlobs: blobs)) }
                layers.append(BatchLayer(id: id, edits: edits))
            }
            guard r.atEnd else { throw r.invalid("bytes follow the batch") }
            batch.layers = layers
            return batch
        }
    }

    /// The head both binary layouts start with (after the magic): versions, ids, flags and what
    /// they say follows, attachment edits included; and whether the edits' geometries are blobs.
    static func readHead(_ r: inout BinaryWireReader) throws -> (UploadBatch, geometryBlobs: Bool) {
        let version = try r.unsigned()
        let replicaId = try r.string(), batchId = try r.string(), seq = try r.signed(), schemaVersion = try r.signed()
        let flags = try r.byte()
        guard flags & ~Flag.all == 0 else {
            throw r.invalid("the batch's flags \(flags) name something unknown")
        }
        guard version <= UInt64(Int.max), let schema = Int(exactly: schemaVersion) else { throw r.invalid("the batch's versions are out of range") }
        let policy = flags & Flag.conflictPolicy != 0 ? try r.string() : nil
        var resolved: [Int64]?
        if flags & Flag.resolvedConflicts != 0 {
            let n = try r.count("resolvedConflicts")
            resolved = try (0..<n).map { _ in try r.signed() }
        }
        var attachments: [AttachmentEdit]?
        if flags & Flag.attachments != 0 { attachments = try JSONValueDecoder().decode([AttachmentEdit].self, from: try r.value()) }
        var batch = UploadBatch(
            replicaId: replicaId, batchId: batchId, seq: seq, schemaVersion: schema, rollbackOnFailure: flags & Flag.rollbackOnFailure != 0,
            layers: [], conflictPolicy: policy, resolvedConflicts: resolved)
        batch.formatVersion = Int(version)
        batch.attachments = attachments
        if flags & Flag.compactAnswer != 0 { batch.compactAnswer = true }
        return (batch, flags & Flag.geometryBlobs != 0)
    }
}

extension BinaryWireWriter {
    /// ``UploadBatch/readHead(_:)``'s part: `header`'s fields and attachment edits (not its
    /// layers), and whether the edits' geometries are blobs.
    mutating func batchHead(_ header: UploadBatch, geometryBlobs: Bool) throws {
        typealias Flag = UploadBatch.Flag
        unsigned(UInt64(header.formatVersion))
        string(header.replicaId)
        string(header.batchId)
        signed(header.seq)
        signed(Int64(header.schemaVersion))
        var flags: UInt8 = header.rollbackOnFailure ? Flag.rollbackOnFailure : 0
        if header.conflictPolicy != nil { flags |= Flag.conflictPolicy }
        if header.resolvedConflicts != nil { flags |= Flag.resolvedConflicts }
        if header.attachments != nil { flags |= Flag.attachments }
        if header.compactAnswer == true { flags |= Flag.compactAnswer }
        if geometryBlobs { flags |= Flag.geometryBlobs }
        byte(flags)
        if let conflictPolicy = header.conflictPolicy { string(conflictPolicy) }
        if let resolvedConflicts = header.resolvedConflicts {
            unsigned(UInt64(resolvedConflicts.count))
            for id in resolvedConflicts { signed(id) }
        }
        // Attachment edits are rare and nested: their JSON tree, as a value.
        if let attachments = header.attachments { value(try JSONValueEncoder().encode(attachments)) }
    }

    /// One edit: a flags byte (the operation in its low two bits, then which parts follow), the
    /// global id, then the parts in the order of the flags. `attributeNames` (sorted, distinct;
    /// nil: no attributes) name the values `attribute(i)` gives. The geometry is `geometryBlob`
    /// in a body of `blobs`, else `geometry` (nil or null: left out, as JSON's reader takes it
    /// for absent); the other form must be nil.
    mutating func batchEdit(
        _ op: BatchEdit.Operation, globalId: String, attributeNames: [String]?, attribute: (Int) -> JSONValue, geometry: JSONValue?,
        geometryBlob: [UInt8]?, blobs: Bool, changedColumns: [String]?, baseValues: [String: JSONValue]?, editedAt: String?, baseGeneration: Int64?
    ) {
        precondition(blobs ? geometry == nil || geometry == .null : geometryBlob == nil, "an edit's geometry is not in the body's form")
        var flags: UInt8 = op == .insert ? 0 : op == .update ? 1 : 2
        if attributeNames != nil { flags |= Has.attributes }
        if geometryBlob != nil { flags |= Has.geometry }
        if let geometry, geometry != .null { flags |= Has.geometry }
        if changedColumns != nil { flags |= Has.changedColumns }
        if baseValues != nil { flags |= Has.baseValues }
        if editedAt != nil { flags |= Has.editedAt }
        if baseGeneration != nil { flags |= Has.baseGeneration }
        byte(flags)
        string(globalId)
        if let attributeNames {
            unsigned(UInt64(attributeNames.count))
            for i in attributeNames.indices {
                name(attributeNames[i])
                value(attribute(i))
            }
        }
        if let geometryBlob {
            blob(geometryBlob)
        } else if flags & Has.geometry != 0, let geometry {
            value(geometry)
        }
        if let changedColumns {
            unsigned(UInt64(changedColumns.count))
            for name in changedColumns { self.name(name) }
        }
        if let baseValues { object(baseValues) }
        if let editedAt { string(editedAt) }
        if let baseGeneration { signed(baseGeneration) }
    }
}

/// Which parts of a binary edit follow its global id (the flags byte's upper bits).
private enum Has {
    static let attributes: UInt8 = 0x04, geometry: UInt8 = 0x08, changedColumns: UInt8 = 0x10, baseValues: UInt8 = 0x20, editedAt: UInt8 = 0x40,
        baseGeneration: UInt8 = 0x80
}

extension BatchEdit {
    private static let operations: [Operation] = [.insert, .update, .delete]

    /// A flags byte (the operation in its low two bits, then which parts follow), the global id,
    /// then the parts in the order of the flags (``UploadBatch/BinaryWriter/edit(_:globalId:attributeNames:attribute:geometry:changedColumns:baseValues:editedAt:baseGeneration:)``).
    fileprivate func write(to w: inout UploadBatch.BinaryWriter) {
        let names = attributes.map { $0.keys.sorted() }
        w.edit(
            op, globalId: globalId, attributeNames: names, attribute: { attributes![names![$0]]! }, geometry: geometry, geometryBlob: geometryBlob,
            changedColumns: changedColumns, baseValues: baseValues, editedAt: editedAt, baseGeneration: baseGeneration)
    }

    /// An edit as ``write(to:)`` writes it; its geometry a blob when the body's head says so.
    init(binary r: inout BinaryWireReader, geometryBlobs: Bool) throws {
        let flags = try r.byte()
        guard Int(flags & 3) < Self.operations.count else { throw r.invalid("an edit has an unknown op") }
        self.init(op: Self.operations[Int(flags & 3)], globalId: try r.string())
        if flags & Has.attributes != 0 { attributes = try r.object() }
        if flags & Has.geometry != 0 {
            if geometryBlobs {
                geometryBlob = try r.blob()
            } else if case let value = try r.value(), value != .null {
                geometry = value
            }
        }
        if flags & Has.changedColumns != 0 {
            let n = try r.count("changedColumns")
            changedColumns = try (0..<n).map { _ in try r.name() }
        }
        if flags & Has.baseValues != 0 { baseValues = try r.object() }
        if flags & Has.editedAt != 0 { editedAt = try r.string() }
        if flags & Has.baseGeneration != 0 { baseGeneration = try r.signed() }
    }
}
