import Foundation
import OutpostCore

/// The compact binary encoding of a change page (docs/sync.md, "Binary change pages"): what a
/// client that reads it asks for with `Accept`, so the server writes and the client reads no
/// JSON text on the download's path. JSON stays the answer to everyone else.
extension ChangePage {
    /// The media type a client names in `Accept` (before `application/json`) to get binary pages.
    public static let binaryContentType = "application/vnd.outpost.changes"

    /// "OPC" and the binary layout's version.
    static let binaryMagic = BinaryWireMagic(bytes: [0x4F, 0x50, 0x43, 0x01], what: "binary change page")

    private enum Has {
        static let next: UInt8 = 1, windowRows: UInt8 = 2
    }

    /// Whether an answer's bytes are a binary page (a JSON page starts with `{`).
    public static func isBinary(_ body: Data) -> Bool { binaryMagic.marks(body) }

    /// The page's binary bytes.
    public func binaryEncoded() -> [UInt8] {
        var w = BinaryWireWriter(capacity: 96 * changes.count + 64, magic: Self.binaryMagic)
        w.signed(Int64(layerId))
        w.signed(since)
        w.signed(upto)
        w.byte((next != nil ? Has.next : 0) | (windowRows != nil ? Has.windowRows : 0))
        if let next { w.string(next) }
        if let windowRows { w.unsigned(UInt64(max(0, windowRows))) }
        w.unsigned(UInt64(changes.count))
        for change in changes { change.write(to: &w) }
        return w.out
    }

    /// A page from either encoding, told apart by its first bytes.
    public static func decode(_ body: Data) throws -> ChangePage {
        guard isBinary(body) else { return try ChangePage(json: JSONValue.parse(body)) }
        return try body.withUnsafeBytes { raw in
            var r = try BinaryWireReader(raw, after: binaryMagic)
            guard let layer = Int(exactly: try r.signed()) else { throw r.invalid("the layer id is out of range") }
            let since = try r.signed(), upto = try r.signed()
            let flags = try r.byte()
            guard flags & ~(Has.next | Has.windowRows) == 0 else { throw r.invalid("the page's flags \(flags) name something unknown") }
            let next = flags & Has.next != 0 ? try r.string() : nil
            let windowRows = flags & Has.windowRows != 0 ? Int(clamping: try r.unsigned()) : nil
            // A change is at least its flags, its global id's length and its generation.
            let n = try r.count("the page's changes", bytesEach: 3)
            var changes: [FeedChange] = []
            changes.reserveCapacity(n)
            for _ in 0..<n { changes.append(try FeedChange(binary: &r)) }
            guard r.atEnd else { throw r.invalid("bytes follow the page") }
            var page = ChangePage(layerId: layer, since: since, upto: upto, changes: changes, next: next)
            page.windowRows = windowRows
            return page
        }
    }
}

extension FeedChange {
    private enum Has {
        static let leave: UInt8 = 1, attributes: UInt8 = 2, geometry: UInt8 = 4, inserted: UInt8 = 8, insertedTrue: UInt8 = 16, attachments: UInt8 = 32
    }

    /// A flags byte (the kind, then which parts follow), the global id, the generation, then the
    /// parts. A null geometry is left out, as JSON's reader takes it for absent.
    fileprivate func write(to w: inout BinaryWireWriter) {
        var flags: UInt8 = kind == .leave ? Has.leave : 0
        if attributes != nil { flags |= Has.attributes }
        if let geometry, geometry != .null { flags |= Has.geometry }
        if let inserted { flags |= Has.inserted | (inserted ? Has.insertedTrue : 0) }
        // Attachment lists are rare and short: their JSON tree, as a value.
        let attachmentTree = attachments.flatMap { try? JSONValueEncoder().encode($0) }
        if attachmentTree != nil { flags |= Has.attachments }
        w.byte(flags)
        w.string(globalId)
        w.signed(generation)
        if let attributes { w.object(attributes) }
        if flags & Has.geometry != 0, let geometry { w.value(geometry) }
        if let attachmentTree { w.value(attachmentTree) }
    }

    fileprivate init(binary r: inout BinaryWireReader) throws {
        let flags = try r.byte()
        guard flags & 0xC0 == 0, flags & Has.insertedTrue == 0 || flags & Has.inserted != 0 else { throw r.invalid("a change's flags \(flags) name something unknown") }
        self.init(kind: flags & Has.leave != 0 ? .leave : .upsert, globalId: try r.string(), generation: try r.signed())
        if flags & Has.attributes != 0 { attributes = try r.object() }
        if flags & Has.geometry != 0, case let value = try r.value(), value != .null { geometry = value }
        if flags & Has.inserted != 0 { inserted = flags & Has.insertedTrue != 0 }
        if flags & Has.attachments != 0 { attachments = try JSONValueDecoder().decode([AttachmentInfo].self, from: try r.value()) }
    }
}
