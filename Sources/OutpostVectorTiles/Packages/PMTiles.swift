import Foundation
import OutpostCore
import OutpostTiles

/// PMTiles version 3: one file of tiles addressed by Hilbert tile ids through gzipped
/// directories (a root within the first 16 KB, leaves when there are many tiles), served over
/// HTTP range requests by static hosts. The layout and fields follow the PMTiles v3
/// specification (protomaps/PMTiles `spec/v3/spec.md`).
public enum PMTiles {
    /// Tile types in the header.
    public enum TileType: UInt8, Sendable {
        /// Not said.
        case unknown = 0
        /// Mapbox Vector Tiles.
        case mvt = 1
        /// PNG images.
        case png = 2
        /// JPEG images.
        case jpeg = 3
        /// WebP images.
        case webp = 4
        /// AVIF images.
        case avif = 5
    }

    /// Compression codes in the header.
    public enum Compression: UInt8, Sendable {
        /// Not said.
        case unknown = 0
        /// Stored as they are.
        case none = 1
        /// gzip.
        case gzip = 2
        /// Brotli.
        case brotli = 3
        /// Zstandard.
        case zstd = 4
    }

    /// The header's fixed size.
    static let headerSize = 127
    /// Header and root directory fit in the first 16 KB.
    static let rootLimit = 16_384 - headerSize

    /// The Hilbert id of tile z/x/y (XYZ rows): the tiles of all lower zooms, then the tile's
    /// place along the Hilbert curve of its zoom.
    public static func tileID(z: Int, x: Int, y: Int) -> UInt64 {
        var id = ((UInt64(1) << (2 * UInt64(z))) - 1) / 3
        var x = UInt64(x), y = UInt64(y)
        var a = z - 1
        while a >= 0 {
            let s = UInt64(1) << UInt64(a)
            let rx: UInt64 = x & s != 0 ? 1 : 0, ry: UInt64 = y & s != 0 ? 1 : 0
            id += s * s * ((3 * rx) ^ ry)
            if ry == 0 {
                if rx == 1 {
                    x = s - 1 - (x & (s - 1))
                    y = s - 1 - (y & (s - 1))
                } else {
                    x &= s - 1
                    y &= s - 1
                }
                swap(&x, &y)
            } else {
                x &= s - 1
                y &= s - 1
            }
            a -= 1
        }
        return id
    }

    /// Ids below this name tiles of zooms 0–31, all a 64-bit id can hold.
    public static let idLimit = UInt64.max / 3

    /// The tile a Hilbert id names (an id of ``idLimit`` or more is taken as one of zoom 31).
    public static func tile(id: UInt64) -> TileKey {
        var z = 0
        var acc: UInt64 = 0
        while z < 31 {
            let count = UInt64(1) << (2 * UInt64(z))
            if id < acc + count { break }
            acc += count
            z += 1
        }
        var t = id - acc
        var x: UInt64 = 0, y: UInt64 = 0
        var s: UInt64 = 1
        let n = UInt64(1) << UInt64(z)
        while s < n {
            let rx = 1 & (t / 2), ry = 1 & (t ^ rx)
            if ry == 0 {
                if rx == 1 {
                    x = s - 1 - x
                    y = s - 1 - y
                }
                swap(&x, &y)
            }
            x += s * rx
            y += s * ry
            t /= 4
            s *= 2
        }
        return TileKey(level: z, row: Int(y), col: Int(x))
    }

    /// A directory entry: tiles `tileID ..< tileID + runLength` share the bytes at `offset`
    /// (run length 0: a leaf directory).
    struct Entry: Equatable {
        var tileID: UInt64
        var offset: UInt64
        var length: UInt32
        var runLength: UInt32
    }

    static func serialize(_ entries: [Entry]) -> [UInt8] {
        var out: [UInt8] = []
        Varint.append(UInt64(entries.count), to: &out)
        var last: UInt64 = 0
        for e in entries {
            Varint.append(e.tileID - last, to: &out)
            last = e.tileID
        }
        for e in entries { Varint.append(UInt64(e.runLength), to: &out) }
        for e in entries { Varint.append(UInt64(e.length), to: &out) }
        for (i, e) in entries.enumerated() {
            if i > 0, e.offset == entries[i - 1].offset + UInt64(entries[i - 1].length) {
                Varint.append(0, to: &out)
            } else {
                Varint.append(e.offset + 1, to: &out)
            }
        }
        return VectorTileCompression.gzip(out)
    }

    static func deserialize(_ stored: [UInt8]) throws -> [Entry] {
        let bytes = try VectorTileCompression.plain(stored)
        var reader = ProtobufReader(bytes[...])
        func damaged(_ why: String) -> VectorTileError { VectorTileError(.corrupt, "not a PMTiles directory: \(why)") }
        let n = try reader.varint()
        guard n <= UInt64(bytes.count) else { throw damaged("\(n) entries in \(bytes.count) bytes") }
        var entries = [Entry](repeating: Entry(tileID: 0, offset: 0, length: 0, runLength: 0), count: Int(n))
        var id: UInt64 = 0
        for i in entries.indices {
            let (sum, overflow) = id.addingReportingOverflow(try reader.varint())
            guard !overflow else { throw damaged("tile ids overflow") }
            id = sum
            entries[i].tileID = id
        }
        for i in entries.indices {
            guard let r = UInt32(exactly: try reader.varint()) else { throw damaged("a run length over 32 bits") }
            entries[i].runLength = r
        }
        for i in entries.indices {
            guard let l = UInt32(exactly: try reader.varint()), l > 0 else { throw damaged("a length of 0 or over 32 bits") }
            entries[i].length = l
        }
        for i in entries.indices {
            let v = try reader.varint()
            if v == 0 {
                guard i > 0 else { throw damaged("the first offset refers to a previous entry") }
                let (next, overflow) = entries[i - 1].offset.addingReportingOverflow(UInt64(entries[i - 1].length))
                guard !overflow else { throw damaged("offsets overflow") }
                entries[i].offset = next
            } else {
                entries[i].offset = v - 1
            }
        }
        return entries
    }
}

/// Writes a PMTiles v3 archive: tiles in any order go to a spool file beside the output
/// (identical tiles once); `finish()` writes the header, directories and metadata and then the
/// tiles in tile-id order (a clustered archive), and renames the file into place.
public final class PMTilesWriter {
    /// The archive written.
    public let url: URL
    private let partialURL: URL
    private let spool: TileSpool
    /// Whether the spool is the writer's own (removed when the archive is written).
    private let ownsSpool: Bool
    private let tileType: PMTiles.TileType
    private let tileCompression: PMTiles.Compression
    /// Tiles added.
    public var tilesWritten: Int { spool.entries.count }

    /// A writer of `url`; tiles of `tileType` stored with `tileCompression` (gzip for vector
    /// tiles as the generator makes them).
    /// - Throws: ``VectorTileError`` `io` when the spool cannot be created.
    public init(at url: URL, tileType: PMTiles.TileType, tileCompression: PMTiles.Compression) throws {
        self.url = url
        self.tileType = tileType
        self.tileCompression = tileCompression
        partialURL = url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + ".partial")
        spool = try TileSpool(beside: url)
        ownsSpool = true
    }

    /// A writer of `url` over tiles already in `spool`.
    init(at url: URL, tileType: PMTiles.TileType, tileCompression: PMTiles.Compression, spool: TileSpool) {
        self.url = url
        self.tileType = tileType
        self.tileCompression = tileCompression
        partialURL = url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + ".partial")
        self.spool = spool
        ownsSpool = false
    }

    deinit {
        try? FileManager.default.removeItem(at: partialURL)
    }

    /// Adds a tile (XYZ rows).
    public func add(_ key: TileKey, data: [UInt8]) throws { try spool.add(key, data: data) }

    /// Writes the archive with `metadata` (a JSON object; `vector_layers` for vector tiles),
    /// the zooms, bounds and centre (longitude/latitude), and moves it into place.
    public func finish(metadata: JSONValue, minZoom: Int, maxZoom: Int, bounds: Envelope, center: (lon: Double, lat: Double, zoom: Int)) throws {
        // Tiles in id order, identical contents once, at their new offsets; runs of one content
        // at consecutive ids become one entry.
        let entries = spool.entries.map { e in
            PMTiles.Entry(tileID: PMTiles.tileID(z: Int(e.level), x: Int(e.col), y: Int(e.row)), offset: e.offset, length: e.length, runLength: 1)
        }.sorted { $0.tileID < $1.tileID }
        var placed: [UInt64: UInt64] = [:]
        var order: [(spoolOffset: UInt64, length: UInt32)] = []
        var dataSize: UInt64 = 0
        var final: [PMTiles.Entry] = []
        for e in entries {
            let offset: UInt64
            if let o = placed[e.offset] {
                offset = o
            } else {
                offset = dataSize
                placed[e.offset] = offset
                order.append((e.offset, e.length))
                dataSize += UInt64(e.length)
            }
            if var last = final.last, last.offset == offset, last.tileID + UInt64(last.runLength) == e.tileID {
                last.runLength += 1
                final[final.count - 1] = last
            } else {
                final.append(PMTiles.Entry(tileID: e.tileID, offset: offset, length: e.length, runLength: 1))
            }
        }
        // A root alone when it fits; else leaves, larger until the root does.
        var root = PMTiles.serialize(final)
        var leaves: [UInt8] = []
        if root.count > PMTiles.rootLimit {
            var size = 4_096
            while true {
                var rootEntries: [PMTiles.Entry] = []
                leaves = []
                var start = 0
                while start < final.count {
                    let chunk = Array(final[start..<min(start + size, final.count)])
                    let leaf = PMTiles.serialize(chunk)
                    rootEntries.append(PMTiles.Entry(tileID: chunk[0].tileID, offset: UInt64(leaves.count), length: UInt32(leaf.count), runLength: 0))
                    leaves += leaf
                    start += size
                }
                root = PMTiles.serialize(rootEntries)
                if root.count <= PMTiles.rootLimit { break }
                size *= 2
            }
        }
        let meta = VectorTileCompression.gzip(Array(metadata.jsonData))
        var header = [UInt8](repeating: 0, count: PMTiles.headerSize)
        func put<T: FixedWidthInteger>(_ v: T, at offset: Int) {
            withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { header[offset + i] = b } }
        }
        header.replaceSubrange(0..<7, with: Array("PMTiles".utf8))
        header[7] = 3
        let rootOffset = UInt64(PMTiles.headerSize)
        let metaOffset = rootOffset + UInt64(root.count)
        let leafOffset = metaOffset + UInt64(meta.count)
        let tileOffset = leafOffset + UInt64(leaves.count)
        put(rootOffset, at: 8)
        put(UInt64(root.count), at: 16)
        put(metaOffset, at: 24)
        put(UInt64(meta.count), at: 32)
        put(leafOffset, at: 40)
        put(UInt64(leaves.count), at: 48)
        put(tileOffset, at: 56)
        put(dataSize, at: 64)
        put(UInt64(entries.count), at: 72)
        put(UInt64(final.count), at: 80)
        put(UInt64(order.count), at: 88)
        header[96] = 1  // clustered: tiles in id order
        header[97] = PMTiles.Compression.gzip.rawValue
        header[98] = tileCompression.rawValue
        header[99] = tileType.rawValue
        header[100] = UInt8(clamping: minZoom)
        header[101] = UInt8(clamping: maxZoom)
        func e7(_ v: Double) -> Int32 { Int32((v * 10_000_000).rounded()) }
        put(e7(bounds.xmin), at: 102)
        put(e7(bounds.ymin), at: 106)
        put(e7(bounds.xmax), at: 110)
        put(e7(bounds.ymax), at: 114)
        header[118] = UInt8(clamping: center.zoom)
        put(e7(center.lon), at: 119)
        put(e7(center.lat), at: 123)
        do {
            _ = FileManager.default.createFile(atPath: partialURL.path, contents: nil)
            let out = try FileHandle(forWritingTo: partialURL)
            defer { try? out.close() }
            try out.write(contentsOf: header + root + meta + leaves)
            // The tiles in id order, read back from the spool a run at a time.
            var buffer: [UInt8] = []
            buffer.reserveCapacity(1 << 20)
            for (spoolOffset, length) in order {
                buffer += try spool.read(offset: spoolOffset, length: length)
                if buffer.count >= 1 << 20 {
                    try out.write(contentsOf: buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            try out.write(contentsOf: buffer)
            try out.synchronize()
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            try FileManager.default.moveItem(at: partialURL, to: url)
            if ownsSpool { spool.discard() }
        } catch let error as VectorTileError {
            throw error
        } catch {
            throw VectorTileError(.io, "cannot write \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }
}

/// Two independent 64-bit hashes and the size: tiles equal by this are taken as one content.
struct ContentPrint: Hashable {
    var a: UInt64
    var b: UInt64
    var size: Int

    init(_ bytes: UnsafeRawBufferPointer) {
        a = FastHash.hash64(bytes)
        b = FastHash.hash64(bytes, seed: 0x1357_9BDF_2468_ACE0)
        size = bytes.count
    }
}

/// Reads a PMTiles v3 archive: the header, and tiles through the directories.
public final class PMTilesReader: Sendable {
    /// The archive read.
    public let url: URL
    private let data: Data
    /// The header's tile type.
    public let tileType: PMTiles.TileType
    /// How tiles are compressed.
    public let tileCompression: PMTiles.Compression
    /// The first zoom the header names.
    public let minZoom: Int
    /// The last zoom the header names.
    public let maxZoom: Int
    /// The bounds the header names, longitude/latitude.
    public let bounds: Envelope
    private let rootOffset: UInt64, rootLength: UInt64, metadataOffset: UInt64, metadataLength: UInt64
    private let leafOffset: UInt64, tileOffset: UInt64

    /// Opens `url` (mapped, not read whole).
    /// - Throws: ``VectorTileError`` `corrupt` for a file that is not PMTiles v3.
    public init(url: URL) throws {
        self.url = url
        do {
            // Too short for a header: refused before mapping (Foundation maps an empty file by
            // allocating a page it never frees).
            let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
            guard size >= PMTiles.headerSize else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) is not a PMTiles archive") }
            data = try Data(contentsOf: url, options: .alwaysMapped)
        } catch let error as VectorTileError {
            throw error
        } catch {
            throw VectorTileError(.io, "cannot read \(url.lastPathComponent): \(error.localizedDescription)")
        }
        guard data.count >= PMTiles.headerSize, data.prefix(7) == Data("PMTiles".utf8) else {
            throw VectorTileError(.corrupt, "\(url.lastPathComponent) is not a PMTiles archive")
        }
        guard data[data.startIndex + 7] == 3 else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) is PMTiles version \(data[data.startIndex + 7]), not 3") }
        let d = data
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(d[d.startIndex + at + $1]) << (8 * UInt64($1)) } }
        rootOffset = u64(8)
        rootLength = u64(16)
        metadataOffset = u64(24)
        metadataLength = u64(32)
        leafOffset = u64(40)
        tileOffset = u64(56)
        tileCompression = PMTiles.Compression(rawValue: d[d.startIndex + 98]) ?? .unknown
        tileType = PMTiles.TileType(rawValue: d[d.startIndex + 99]) ?? .unknown
        minZoom = Int(d[d.startIndex + 100])
        maxZoom = Int(d[d.startIndex + 101])
        func e7(_ at: Int) -> Double { Double(Int32(truncatingIfNeeded: (0..<4).reduce(UInt32(0)) { $0 | UInt32(d[d.startIndex + at + $1]) << (8 * UInt32($1)) })) / 10_000_000 }
        bounds = Envelope(xmin: e7(102), ymin: e7(106), xmax: e7(110), ymax: e7(114))
        for (offset, length) in [(rootOffset, rootLength), (metadataOffset, metadataLength)] {
            guard offset <= UInt64(d.count), length <= UInt64(d.count) - offset else {
                throw VectorTileError(.corrupt, "\(url.lastPathComponent): a section runs past the end of the file")
            }
        }
    }

    /// A section's offset plus an entry's, refused when the sum overflows (a fuzzed file's did).
    private func at(_ base: UInt64, _ offset: UInt64) throws -> UInt64 {
        let (sum, overflow) = base.addingReportingOverflow(offset)
        guard !overflow else { throw VectorTileError(.corrupt, "\(url.lastPathComponent): an entry points past the end of the file") }
        return sum
    }

    private func bytes(_ offset: UInt64, _ length: UInt64) throws -> [UInt8] {
        guard offset <= UInt64(data.count), length <= UInt64(data.count) - offset else {
            throw VectorTileError(.corrupt, "\(url.lastPathComponent): an entry points past the end of the file")
        }
        let start = data.startIndex + Int(offset)
        return [UInt8](data[start..<(start + Int(length))])
    }

    /// The metadata JSON.
    public func metadata() throws -> JSONValue {
        try JSONValue.parse(Data(try VectorTileCompression.plain(try bytes(metadataOffset, metadataLength))))
    }

    /// A tile as stored, nil when absent.
    public func tile(_ key: TileKey) throws -> [UInt8]? {
        let id = PMTiles.tileID(z: key.level, x: key.col, y: key.row)
        var entries = try PMTiles.deserialize(try bytes(rootOffset, rootLength))
        for _ in 0..<4 {
            var low = 0, high = entries.count - 1, found: PMTiles.Entry?
            while low <= high {
                let mid = (low + high) / 2
                if entries[mid].tileID <= id {
                    found = entries[mid]
                    low = mid + 1
                } else {
                    high = mid - 1
                }
            }
            guard let e = found else { return nil }
            if e.runLength == 0 {
                entries = try PMTiles.deserialize(try bytes(try at(leafOffset, e.offset), UInt64(e.length)))
                continue
            }
            return id - e.tileID < UInt64(e.runLength) ? try bytes(try at(tileOffset, e.offset), UInt64(e.length)) : nil
        }
        throw VectorTileError(.corrupt, "\(url.lastPathComponent): directories nest too deep")
    }

    /// Every tile, in id order.
    public func forEachTile(_ body: (TileKey, [UInt8]) throws -> Void) throws {
        try forEachEntry { e in
            let tile = try bytes(try at(tileOffset, e.offset), UInt64(e.length))
            for i in 0..<UInt64(e.runLength) { try body(PMTiles.tile(id: e.tileID + i), tile) }
        }
    }

    /// Every tile's address, in id order, from the directories alone (no tile is read).
    public func forEachKey(_ body: (TileKey) throws -> Void) throws {
        try forEachEntry { e in
            for i in 0..<UInt64(e.runLength) { try body(PMTiles.tile(id: e.tileID + i)) }
        }
    }

    /// Every directory entry that points at tile data, leaf directories followed.
    private func forEachEntry(_ body: (PMTiles.Entry) throws -> Void) throws {
        func walk(_ entries: [PMTiles.Entry], depth: Int) throws {
            guard depth < 4 else { throw VectorTileError(.corrupt, "\(url.lastPathComponent): directories nest too deep") }
            for e in entries {
                if e.runLength == 0 {
                    try walk(try PMTiles.deserialize(try bytes(try at(leafOffset, e.offset), UInt64(e.length))), depth: depth + 1)
                } else {
                    // A run must name tiles of zooms a 64-bit id holds (a fuzzed one overflowed).
                    guard e.tileID < PMTiles.idLimit, UInt64(e.runLength) <= PMTiles.idLimit - e.tileID else {
                        throw VectorTileError(.corrupt, "\(url.lastPathComponent): an entry names tiles past zoom 31")
                    }
                    try body(e)
                }
            }
        }
        try walk(try PMTiles.deserialize(try bytes(rootOffset, rootLength)), depth: 0)
    }
}
