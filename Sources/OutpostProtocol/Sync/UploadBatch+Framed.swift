import Foundation
import OutpostCore

/// The framed binary layout of an upload batch (docs/sync.md, "Framed batches"): the binary
/// encoding's head and edits, cut into length-prefixed frames, so the replica sends a batch while
/// it seals it and the server applies each frame as it arrives. No count of the whole batch comes
/// before its edits; the head announces each layer with the most edits and geometry writes it can
/// hold (what the server sizes its work by), and a zero length ends the batch.
extension UploadBatch {
    /// "OPB" and layout 2.
    static let framedMagic = BinaryWireMagic(bytes: [0x4F, 0x50, 0x42, 0x02], what: "binary batch")

    /// Whether `body` starts as a framed batch.
    public static func isFramed(_ body: Data) -> Bool { framedMagic.marksLayout(of: body) }

    /// What a server lists in `batchEncodings` when it reads framed batches.
    public static let framedEncoding = "binary-framed"

    /// A layer the head of a framed batch announces.
    public struct AnnouncedLayer: Sendable, Hashable {
        /// The service layer id.
        public var id: Int
        /// The most edits its frames hold (the features with pending changes when it was sealed).
        public var atMost: Int
        /// The most of them that write a geometry (inserts, deletes, updates of the geometry).
        public var geometryWrites: Int

        /// An announcement of these values.
        public init(id: Int, atMost: Int, geometryWrites: Int) {
            self.id = id
            self.atMost = atMost
            self.geometryWrites = geometryWrites
        }
    }

    /// The most bytes one part (the head or a frame) of a framed batch may take.
    public static let maximumFrameBytes = 64 << 20

    /// Writes a framed body edit by edit. Each frame is handed to `ready` as soon as it is
    /// complete (the head at once, the last frame by ``finish()``), which gives the whole body and
    /// where the bytes not handed out begin: the end mark, which a replica sends only once the
    /// batch is stored.
    public struct FramedWriter {
        private var w: BinaryWireWriter
        private let layers: [AnnouncedLayer]
        private var written: [Int]
        /// The announced layer whose edits are written now.
        private var position = -1
        /// The open frame: its length's place, its edit count's place, its edits so far.
        private var frame: (length: BinaryWireWriter.CountMark, count: BinaryWireWriter.CountMark, edits: Int)?
        private var handedOut = 0
        private let frameBytes: Int
        private let ready: ((ArraySlice<UInt8>) -> Void)?
        /// Edits written, attachment edits included.
        public private(set) var editCount: Int
        /// Whether geometries are written as GeoPackage blobs.
        public let geometryBlobs: Bool

        /// Starts a framed body: the head (`header` without edits, and `layers`) is written and handed to
        /// `ready` at once.
        /// - Parameters:
        ///   - header: the batch's fields; its layers' edits are ignored.
        ///   - layers: the layers whose edits follow, in order.
        ///   - capacity: bytes to reserve.
        ///   - frameBytes: the size at which a frame is closed and handed out.
        ///   - ready: takes each complete part (nil: the whole body is taken at the end).
        ///   - geometryBlobs: every edit's geometry is given as a GeoPackage blob (for a server
        ///     that lists ``UploadBatch/geometryBlobEncoding``), else as Esri JSON.
        public init(
            header: UploadBatch, layers: [AnnouncedLayer], capacity: Int, frameBytes: Int = 48 << 10, ready: ((ArraySlice<UInt8>) -> Void)? = nil,
            geometryBlobs: Bool = false
        ) throws {
            w = BinaryWireWriter(capacity: capacity, magic: UploadBatch.framedMagic)
            self.geometryBlobs = geometryBlobs
            let head = w.beginCount()
            try w.batchHead(header, geometryBlobs: geometryBlobs)
            w.unsigned(UInt64(layers.count))
            for layer in layers {
                w.signed(Int64(layer.id))
                w.unsigned(UInt64(layer.atMost))
                w.unsigned(UInt64(layer.geometryWrites))
            }
            w.endLength(head)
            self.layers = layers
            written = Array(repeating: 0, count: layers.count)
            self.frameBytes = frameBytes
            self.ready = ready
            editCount = header.attachments?.count ?? 0
            handOut()
        }

        /// The edits that follow are of layer `id`, announced after the layers written so far.
        public mutating func beginLayer(id: Int) {
            closeFrame()
            guard let next = layers.indices.first(where: { $0 > position && layers[$0].id == id }) else {
                preconditionFailure("layer \(id) is not announced after the layers written")
            }
            position = next
        }

        /// One edit of the current layer (see ``UploadBatch/BinaryWriter/edit(_:globalId:attributeNames:attribute:geometry:geometryBlob:changedColumns:baseValues:editedAt:baseGeneration:)``).
        public mutating func edit(
            _ op: BatchEdit.Operation, globalId: String, attributeNames: [String]?, attribute: (Int) -> JSONValue, geometry: JSONValue?,
            geometryBlob: [UInt8]?, changedColumns: [String]?, baseValues: [String: JSONValue]?, editedAt: String?, baseGeneration: Int64?
        ) {
            precondition(position >= 0 && written[position] < layers[position].atMost, "more edits than the layer announced")
            if frame == nil {
                let length = w.beginCount()
                w.unsigned(UInt64(position))
                frame = (length, w.beginCount(), 0)
            }
            w.batchEdit(
                op, globalId: globalId, attributeNames: attributeNames, attribute: attribute, geometry: geometry, geometryBlob: geometryBlob,
                blobs: geometryBlobs, changedColumns: changedColumns, baseValues: baseValues, editedAt: editedAt, baseGeneration: baseGeneration)
            frame!.edits += 1
            written[position] += 1
            editCount += 1
            if let open = frame, w.out.count - w.offset(of: open.length) >= frameBytes {
                closeFrame()
                handOut()
            }
        }

        private mutating func closeFrame() {
            guard let open = frame else { return }
            frame = nil
            w.endCount(open.count, open.edits)
            w.endLength(open.length)
        }

        private mutating func handOut() {
            guard let ready, handedOut < w.out.count else { return }
            ready(w.out[handedOut...])
            handedOut = w.out.count
        }

        /// The body (its last frame closed and handed out, the end mark written), and the offset
        /// of its first byte not handed to `ready`.
        public consuming func finish() -> (body: Data, unsentFrom: Int) {
            closeFrame()
            handOut()
            w.unsigned(0)
            return (Data(w.out), handedOut)
        }
    }

    /// Reads a framed body as its bytes arrive: ``append(_:)`` what came, then take the head and
    /// each complete frame. Malformed input throws the `DecodingError` the whole-body reader
    /// throws (with the byte offset); nothing is decoded twice.
    public struct FramedReader: Sendable {
        /// The head: the batch without its edits, and the layers it announces.
        public struct Head: Sendable {
            /// The batch's fields; its layers have no edits.
            public var batch: UploadBatch
            /// The layers the frames will carry, in order.
            public var layers: [AnnouncedLayer]
            /// Whether the edits' geometries are GeoPackage blobs (``BatchEdit/geometryBlob``).
            public var geometryBlobs = false
        }

        /// One frame's edits, of one announced layer.
        public struct Frame: Sendable {
            /// Its place in the head's list of layers.
            public var position: Int
            /// The service layer id.
            public var layerID: Int
            /// The frame's edits, in order.
            public var edits: [BatchEdit]
        }

        private var buffer: [UInt8] = []
        /// Bytes of `buffer` read already, and those dropped before it (for offsets in errors).
        private var start = 0
        private var dropped = 0
        private var names: [String] = []
        /// The head, once read.
        public private(set) var head: Head?
        private var position = 0
        private var written: [Int] = []
        /// The end mark was read.
        public private(set) var ended = false

        /// A reader that has seen nothing yet.
        public init() {}

        /// Adds bytes that arrived.
        public mutating func append(_ bytes: UnsafeRawBufferPointer) {
            if start > 1 << 20, start * 2 > buffer.count {
                buffer.removeFirst(start)
                dropped += start
                start = 0
            }
            buffer.append(contentsOf: bytes)
        }

        private func invalid(_ message: String, at offset: Int) -> DecodingError {
            WireJSON.invalid("\(message) (byte \(dropped + offset))")
        }

        /// The next length-prefixed part, once all its bytes are here; its range in `buffer`.
        private mutating func part() throws -> Range<Int>? {
            var length: UInt64 = 0
            var shift: UInt64 = 0
            var at = start
            while true {
                guard at < buffer.count else { return nil }
                let b = buffer[at]
                at += 1
                guard shift < 63 else { throw invalid("a frame's length is too long", at: at) }
                length |= UInt64(b & 0x7F) << shift
                if b < 0x80 { break }
                shift += 7
            }
            guard length <= UInt64(UploadBatch.maximumFrameBytes) else { throw invalid("a frame of \(length) bytes is larger than allowed", at: start) }
            guard buffer.count - at >= Int(length) else { return nil }
            start = at + Int(length)
            return at..<start
        }

        /// The head, once its bytes are here (nil: not yet).
        public mutating func readHead() throws -> Head? {
            if let head { return head }
            let magic = UploadBatch.framedMagic.bytes
            if start == 0 {
                guard buffer.count >= magic.count else { return nil }
                guard buffer.starts(with: magic) else { throw invalid("not a framed batch", at: 0) }
                start = magic.count
            }
            guard let range = try part() else { return nil }
            let read = try buffer.withUnsafeBytes { raw -> Head in
                var r = BinaryWireReader(part: UnsafeRawBufferPointer(rebasing: raw[range]), names: [])
                let (batch, blobs) = try UploadBatch.readHead(&r)
                let n = try r.count("the batch's layers", bytesEach: 3)
                var layers: [AnnouncedLayer] = []
                for _ in 0..<n {
                    guard let id = Int(exactly: try r.signed()), case let atMost = try r.unsigned(), case let writes = try r.unsigned(),
                        atMost <= UInt64(Int.max), writes <= atMost
                    else { throw r.invalid("an announced layer is out of range") }
                    guard !layers.contains(where: { $0.id == id }) else { throw r.invalid("layer \(id) is announced twice") }
                    layers.append(AnnouncedLayer(id: id, atMost: Int(atMost), geometryWrites: Int(writes)))
                }
                guard r.atEnd else { throw r.invalid("bytes follow the batch's head") }
                names = r.names
                return Head(batch: batch, layers: layers, geometryBlobs: blobs)
            }
            head = read
            written = Array(repeating: 0, count: read.layers.count)
            return read
        }

        /// The next frame whose bytes are all here; nil when more bytes are needed, or when the
        /// batch has ended (``ended``).
        public mutating func nextFrame() throws -> Frame? {
            var frames: [Frame] = []
            guard try nextFrame(into: &frames, joiningUpTo: 0) else { return nil }
            return frames.removeLast()
        }

        /// Reads the next frame whose bytes are all here into `frames`: its edits decoded onto
        /// the last frame's when that one is of the same layer and would hold at most
        /// `joiningUpTo` edits with them, else as a frame of its own. False when more bytes are
        /// needed, or when the batch has ended (``ended``). Edits decoded where they stay are
        /// never copied: a copy retains and a drop releases each of their strings, arrays and
        /// dictionaries.
        public mutating func nextFrame(into frames: inout [Frame], joiningUpTo maxEdits: Int) throws -> Bool {
            guard let head, !ended, let range = try part() else { return false }
            guard !range.isEmpty else {
                ended = true
                guard start == buffer.count else { throw invalid("bytes follow the batch", at: start) }
                return false
            }
            let (place, n) = try buffer.withUnsafeBytes { raw -> (Int, Int) in
                var r = BinaryWireReader(part: UnsafeRawBufferPointer(rebasing: raw[range]), names: names)
                let at = try r.unsigned()
                guard at < UInt64(head.layers.count), Int(at) >= position else { throw r.invalid("a frame names layer \(at) out of the head's order") }
                let place = Int(at)
                // An edit is at least its flags and its global id's length.
                let n = try r.count("a frame's edits", bytesEach: 2)
                guard n > 0, written[place] + n <= head.layers[place].atMost else {
                    throw r.invalid("a frame holds \(n) edits of layer \(head.layers[place].id), past the \(head.layers[place].atMost) announced")
                }
                // Compared in place (a copy of the last frame would share its edits, and the
                // appends below would copy them all). A frame of its own starts empty; either way
                // a malformed frame leaves the list as it was.
                let joins = frames.last.map { $0.position == place && $0.edits.count + n <= maxEdits } ?? false
                if !joins {
                    frames.append(Frame(position: place, layerID: head.layers[place].id, edits: []))
                    frames[frames.count - 1].edits.reserveCapacity(n)
                }
                let last = frames.count - 1, before = frames[last].edits.count
                do {
                    for _ in 0..<n { frames[last].edits.append(try BatchEdit(binary: &r, geometryBlobs: head.geometryBlobs)) }
                    guard r.atEnd else { throw r.invalid("bytes follow a frame's edits") }
                } catch {
                    if joins { frames[last].edits.removeSubrange(before...) } else { frames.removeLast() }
                    throw error
                }
                names = r.names
                return (place, n)
            }
            position = place
            written[place] += n
            return true
        }

        /// The body has ended: refuses one cut before its end mark (or with bytes after it).
        public func finish() throws {
            guard ended else { throw invalid("the body ends early", at: buffer.count) }
            guard start == buffer.count else { throw invalid("bytes follow the batch", at: start) }
        }
    }

    /// A whole framed body: its frames' edits gathered per layer (the layers with edits, in the
    /// head's order).
    static func decodeFramed(_ data: Data) throws -> UploadBatch {
        var reader = FramedReader()
        data.withUnsafeBytes { reader.append($0) }
        guard var batch = try reader.readHead()?.batch else { throw WireJSON.invalid("the body ends early (byte \(data.count))") }
        var layers: [BatchLayer] = []
        var last = -1
        while let frame = try reader.nextFrame() {
            if frame.position == last {
                layers[layers.count - 1].edits += frame.edits
            } else {
                layers.append(BatchLayer(id: frame.layerID, edits: frame.edits))
                last = frame.position
            }
        }
        try reader.finish()
        batch.layers = layers
        return batch
    }
}

/// What writes a batch's edits one by one: both binary layouts' writers.
public protocol BatchEditWriting {
    /// Whether geometries are given as GeoPackage blobs (else as Esri JSON).
    var geometryBlobs: Bool { get }

    /// One edit of the current layer: `attributeNames` (sorted, distinct; nil: no attributes)
    /// name the values `attribute(i)` gives; the geometry is `geometryBlob` when the writer
    /// writes blobs, else `geometry` (nil or null: left out).
    mutating func edit(
        _ op: BatchEdit.Operation, globalId: String, attributeNames: [String]?, attribute: (Int) -> JSONValue, geometry: JSONValue?,
        geometryBlob: [UInt8]?, changedColumns: [String]?, baseValues: [String: JSONValue]?, editedAt: String?, baseGeneration: Int64?)
}

extension UploadBatch.BinaryWriter: BatchEditWriting {}
extension UploadBatch.FramedWriter: BatchEditWriting {}
