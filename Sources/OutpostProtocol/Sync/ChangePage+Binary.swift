import Foundation
import OutpostCore

/// The compact binary encoding of a change page (docs/sync.md, "Binary change pages"): what a
/// client that reads it asks for with `Accept`, so the server writes and the client reads no
/// JSON text on the download's path. JSON stays the answer to everyone else.
///
/// Layout 2 is the stored form: a page whose changes carry ``FeedRow``s (each column's value as
/// the service stores it, the geometry as its GeoPackage blob) instead of JSON attributes and an
/// Esri JSON geometry. A client names ``storedContentType`` first to get it; a server that does
/// not write it matches the layout 1 type inside that name and answers layout 1.
extension ChangePage {
    /// The media type a client names in `Accept` (before `application/json`) to get binary pages.
    public static let binaryContentType = "application/vnd.outpost.changes"
    /// The media type of the stored form (layout 2), named before ``binaryContentType``.
    public static let storedContentType = "application/vnd.outpost.changes+stored"

    /// "OPC" and the binary layout's version.
    static let binaryMagic = BinaryWireMagic(bytes: [0x4F, 0x50, 0x43, 0x01], what: "binary change page")
    static let storedMagic = BinaryWireMagic(bytes: [0x4F, 0x50, 0x43, 0x02], what: "binary change page")

    private enum Has {
        static let next: UInt8 = 1, windowRows: UInt8 = 2
    }

    /// Whether an answer's bytes are a binary page (a JSON page starts with `{`).
    public static func isBinary(_ body: Data) -> Bool { binaryMagic.marks(body) }

    /// Whether any change carries stored values (the page is then written in layout 2).
    public var isStoredForm: Bool { changes.contains { $0.stored != nil } }

    /// The page's binary bytes: layout 2 when a change carries stored values, else layout 1.
    public func binaryEncoded() -> [UInt8] {
        let stored = isStoredForm
        var w = BinaryWireWriter(capacity: 96 * changes.count + 64, magic: stored ? Self.storedMagic : Self.binaryMagic)
        w.signed(Int64(layerId))
        w.signed(since)
        w.signed(upto)
        w.byte((next != nil ? Has.next : 0) | (windowRows != nil ? Has.windowRows : 0))
        if let next { w.string(next) }
        if let windowRows { w.unsigned(UInt64(max(0, windowRows))) }
        w.unsigned(UInt64(changes.count))
        var columns: FeedColumns?
        for change in changes { change.write(to: &w, columns: &columns) }
        return w.out
    }

    /// A page from either encoding (and either binary layout), told apart by its first bytes.
    public static func decode(_ body: Data) throws -> ChangePage {
        guard isBinary(body) else { return try ChangePage(json: JSONValue.parse(body)) }
        let layout2 = storedMagic.marksLayout(of: body)
        let magic = layout2 ? storedMagic : binaryMagic
        return try body.withUnsafeBytes { raw in
            var r = try BinaryWireReader(raw, after: magic)
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
            var columns: FeedColumns?
            for _ in 0..<n { changes.append(try FeedChange(binary: &r, stored: layout2, columns: &columns)) }
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
        /// Layout 2: stored values follow (and the geometry is a GeoPackage blob).
        static let stored: UInt8 = 64
        /// Layout 2: the columns of this change's stored values, and of the next ones', follow.
        static let columns: UInt8 = 128
    }

    /// The tags of stored values (layout 2).
    private enum StoredTag: UInt8 {
        case null = 0, integer, real, text, blob
    }

    /// A flags byte (the kind, then which parts follow), the global id, the generation, then the
    /// parts. A null geometry is left out, as JSON's reader takes it for absent. In layout 2 a
    /// change with stored values writes them in its columns' order, after those columns when
    /// they are not the ones written last (`columns`).
    fileprivate func write(to w: inout BinaryWireWriter, columns: inout FeedColumns?) {
        var flags: UInt8 = kind == .leave ? Has.leave : 0
        if let stored {
            flags |= Has.stored
            if stored.geometry != nil { flags |= Has.geometry }
            if columns.map({ $0 != stored.columns }) ?? true { flags |= Has.columns }
        } else {
            if attributes != nil { flags |= Has.attributes }
            if let geometry, geometry != .null { flags |= Has.geometry }
        }
        if let inserted { flags |= Has.inserted | (inserted ? Has.insertedTrue : 0) }
        // Attachment lists are rare and short: their JSON tree, as a value.
        let attachmentTree = attachments.flatMap { try? JSONValueEncoder().encode($0) }
        if attachmentTree != nil { flags |= Has.attachments }
        w.byte(flags)
        w.string(globalId)
        w.signed(generation)
        if let stored {
            if flags & Has.columns != 0 {
                Self.write(stored.columns, to: &w)
                columns = stored.columns
            }
            for value in stored.values { Self.write(value, to: &w) }
            if let blob = stored.geometry { w.blob(blob) }
        } else {
            if let attributes { w.object(attributes) }
            if flags & Has.geometry != 0, let geometry { w.value(geometry) }
        }
        if let attachmentTree { w.value(attachmentTree) }
    }

    private static func write(_ columns: FeedColumns, to w: inout BinaryWireWriter) {
        w.unsigned(UInt64(columns.names.count))
        for (name, type) in zip(columns.names, columns.types) {
            w.string(name)
            w.string(type)
        }
        w.unsigned(UInt64(columns.globalIDFields.count))
        for name in columns.globalIDFields { w.string(name) }
        w.byte(columns.spatial ? 1 : 0)
    }

    /// A value by its tag. A REAL that is not finite goes as NULL, as the JSON form sends it.
    private static func write(_ value: StoredValue, to w: inout BinaryWireWriter) {
        switch value {
        case .null: w.byte(StoredTag.null.rawValue)
        case .integer(let i):
            w.byte(StoredTag.integer.rawValue)
            w.signed(i)
        case .real(let d):
            guard d.isFinite else { return w.byte(StoredTag.null.rawValue) }
            w.byte(StoredTag.real.rawValue)
            w.double(d)
        case .text(let s):
            w.byte(StoredTag.text.rawValue)
            w.string(s)
        case .blob(let b):
            w.byte(StoredTag.blob.rawValue)
            w.blob(b)
        }
    }

    fileprivate init(binary r: inout BinaryWireReader, stored layout2: Bool, columns: inout FeedColumns?) throws {
        let flags = try r.byte()
        let known: UInt8 = layout2 ? 0xFF : 0x3F
        guard flags & ~known == 0, flags & Has.insertedTrue == 0 || flags & Has.inserted != 0 else { throw r.invalid("a change's flags \(flags) name something unknown") }
        guard flags & Has.columns == 0 || flags & Has.stored != 0, flags & Has.stored == 0 || flags & Has.attributes == 0 else {
            throw r.invalid("a change's flags \(flags) do not go together")
        }
        self.init(kind: flags & Has.leave != 0 ? .leave : .upsert, globalId: try r.string(), generation: try r.signed())
        if flags & Has.stored != 0 {
            if flags & Has.columns != 0 { columns = try Self.readColumns(&r) }
            guard let columns else { throw r.invalid("a change has stored values before any columns") }
            var values: [StoredValue] = []
            values.reserveCapacity(columns.names.count)
            for _ in 0..<columns.names.count { values.append(try Self.readValue(&r)) }
            var geometry: [UInt8]?
            if flags & Has.geometry != 0 {
                guard columns.spatial else { throw r.invalid("a change of a layer without geometry has one") }
                geometry = try r.blob()
            }
            stored = FeedRow(columns: columns, values: values, geometry: geometry)
        } else {
            if flags & Has.attributes != 0 { attributes = try r.object() }
            if flags & Has.geometry != 0, case let value = try r.value(), value != .null { geometry = value }
        }
        if flags & Has.inserted != 0 { inserted = flags & Has.insertedTrue != 0 }
        if flags & Has.attachments != 0 { attachments = try JSONValueDecoder().decode([AttachmentInfo].self, from: try r.value()) }
    }

    private static func readColumns(_ r: inout BinaryWireReader) throws -> FeedColumns {
        // A column is at least its name's and its type's lengths.
        let n = try r.count("a page's columns", bytesEach: 2)
        var names: [String] = [], types: [String] = []
        names.reserveCapacity(n)
        types.reserveCapacity(n)
        for _ in 0..<n {
            names.append(try r.string())
            types.append(try r.string())
        }
        let g = try r.count("a page's global id fields")
        var globalIDFields: [String] = []
        for _ in 0..<g { globalIDFields.append(try r.string()) }
        let spatial = try r.byte()
        guard spatial <= 1 else { throw r.invalid("a page's columns say \(spatial) for whether the layer has geometry") }
        return FeedColumns(names: names, types: types, globalIDFields: globalIDFields, spatial: spatial == 1)
    }

    private static func readValue(_ r: inout BinaryWireReader) throws -> StoredValue {
        let tag = try r.byte()
        switch StoredTag(rawValue: tag) {
        case .null: return .null
        case .integer: return .integer(try r.signed())
        case .real: return .real(try r.double())
        case .text: return .text(try r.string())
        case .blob: return .blob(try r.blob())
        case nil: throw r.invalid("unknown stored value tag \(tag)")
        }
    }
}
