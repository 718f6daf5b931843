import CZlib
import Foundation
import OutpostCore

/// A single-band raster on a north-up grid: `values` row by row from the top-left cell.
public struct GPRaster: Hashable, Sendable {
    /// Columns of cells.
    public var width: Int
    /// Rows of cells.
    public var height: Int
    /// The outer corner of the top-left cell (west edge, north edge).
    public var xmin: Double
    /// The north edge of the top row.
    public var ymax: Double
    /// The width and height of a cell, in the system's units.
    public var cellSize: Double
    /// The raster's spatial reference.
    public var spatialReference: SpatialReference
    /// Cells with this value have no data.
    public var noData: Double?
    /// The cell values, row by row from the top-left cell.
    public var values: [Double]

    /// A raster of these values (`values.count` is `width × height`).
    public init(width: Int, height: Int, xmin: Double, ymax: Double, cellSize: Double, spatialReference: SpatialReference, noData: Double? = nil, values: [Double]) {
        self.width = width
        self.height = height
        self.xmin = xmin
        self.ymax = ymax
        self.cellSize = cellSize
        self.spatialReference = spatialReference
        self.noData = noData
        self.values = values
    }

    /// The value of the cell at `row` and `column` (0-based, from the top-left).
    public subscript(row: Int, column: Int) -> Double { values[row * width + column] }

    /// The centre of a cell.
    public func centre(row: Int, column: Int) -> Position {
        Position(x: xmin + (Double(column) + 0.5) * cellSize, y: ymax - (Double(row) + 0.5) * cellSize)
    }
}

/// Reading a raster failed: not a TIFF, or a kind of TIFF this reader does not take.
public struct GeoTIFFError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// GeoTIFF (TIFF 6.0 with the GeoTIFF 1.1 tags) for single-band rasters: written as 64-bit
/// floats (an interpolation keeps its full precision) in deflate-compressed strips with the grid in ModelPixelScale/ModelTiepoint and the
/// EPSG code in the GeoKey directory (GDAL reads it, `gdalinfo` shows the system and corners);
/// read back from that and from the common simple layouts (8/16/32-bit integers, 32/64-bit
/// floats, uncompressed or deflate, strips, one band).
public enum GeoTIFF {
    static let rowsPerStrip = 16

    /// Writes `raster` as a GeoTIFF file at `url` (atomically).
    public static func write(_ raster: GPRaster, to url: URL) throws {
        try encode(raster).write(to: url, options: .atomic)
    }

    /// The raster as GeoTIFF bytes.
    public static func encode(_ raster: GPRaster) throws -> Data {
        precondition(raster.values.count == raster.width * raster.height)
        var strips: [Data] = []
        var row = 0
        while row < raster.height {
            let rows = min(rowsPerStrip, raster.height - row)
            var raw = Data(capacity: rows * raster.width * 8)
            for v in raster.values[(row * raster.width)..<((row + rows) * raster.width)] { append(v.bitPattern, to: &raw) }
            strips.append(try deflate(raw))
            row += rows
        }
        var out = Data([0x49, 0x49, 42, 0])  // "II", 42: little-endian TIFF
        var offsets: [UInt32] = []
        var position = 8
        for strip in strips {
            offsets.append(UInt32(position))
            position += strip.count
        }
        let ifdOffset = (position + 1) & ~1
        append(UInt32(ifdOffset), to: &out)
        for strip in strips { out.append(strip) }
        while out.count < ifdOffset { out.append(0) }

        let geographic = try CoordinateSystemInfo(raster.spatialReference).isGeographic
        let geoKeys: [UInt16] = [
            1, 1, 0, 3,
            1024, 0, 1, geographic ? 2 : 1,  // GTModelTypeGeoKey: projected or geographic
            1025, 0, 1, 1,  // GTRasterTypeGeoKey: PixelIsArea
            geographic ? 2048 : 3072, 0, 1, UInt16(clamping: raster.spatialReference.wkid),  // Geographic/ProjectedCSTypeGeoKey
        ]
        var entries: [Entry] = [
            .init(tag: 256, type: 4, values: .longs([UInt32(raster.width)])),
            .init(tag: 257, type: 4, values: .longs([UInt32(raster.height)])),
            .init(tag: 258, type: 3, values: .shorts([64])),
            .init(tag: 259, type: 3, values: .shorts([8])),  // deflate
            .init(tag: 262, type: 3, values: .shorts([1])),  // BlackIsZero
            .init(tag: 273, type: 4, values: .longs(offsets)),
            .init(tag: 277, type: 3, values: .shorts([1])),
            .init(tag: 278, type: 4, values: .longs([UInt32(rowsPerStrip)])),
            .init(tag: 279, type: 4, values: .longs(strips.map { UInt32($0.count) })),
            .init(tag: 284, type: 3, values: .shorts([1])),
            .init(tag: 339, type: 3, values: .shorts([3])),  // IEEE floating point
            .init(tag: 33550, type: 12, values: .doubles([raster.cellSize, raster.cellSize, 0])),
            .init(tag: 33922, type: 12, values: .doubles([0, 0, 0, raster.xmin, raster.ymax, 0])),
            .init(tag: 34735, type: 3, values: .shorts(geoKeys)),
        ]
        if let noData = raster.noData { entries.append(.init(tag: 42113, type: 2, values: .ascii(Self.number(noData)))) }
        // The IFD, then the values that do not fit in their entries.
        var extra = Data()
        let extraStart = ifdOffset + 2 + entries.count * 12 + 4
        var ifd = Data()
        append(UInt16(entries.count), to: &ifd)
        for entry in entries {
            let bytes = entry.values.bytes
            append(entry.tag, to: &ifd)
            append(entry.type, to: &ifd)
            append(UInt32(entry.values.count), to: &ifd)
            if bytes.count <= 4 {
                ifd.append(bytes)
                ifd.append(Data(count: 4 - bytes.count))
            } else {
                if extra.count % 2 == 1 { extra.append(0) }
                append(UInt32(extraStart + extra.count), to: &ifd)
                extra.append(bytes)
            }
        }
        append(UInt32(0), to: &ifd)  // no next IFD
        out.append(ifd)
        out.append(extra)
        return out
    }

    static func number(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }

    struct Entry {
        var tag: UInt16
        var type: UInt16
        var values: Values
    }

    enum Values {
        case shorts([UInt16]), longs([UInt32]), doubles([Double]), ascii(String)

        var count: Int {
            switch self {
            case .shorts(let v): v.count
            case .longs(let v): v.count
            case .doubles(let v): v.count
            case .ascii(let s): s.utf8.count + 1
            }
        }

        var bytes: Data {
            var d = Data()
            switch self {
            case .shorts(let v): for x in v { GeoTIFF.append(x, to: &d) }
            case .longs(let v): for x in v { GeoTIFF.append(x, to: &d) }
            case .doubles(let v): for x in v { GeoTIFF.append(x.bitPattern, to: &d) }
            case .ascii(let s):
                d.append(contentsOf: Array(s.utf8))
                d.append(0)
            }
            return d
        }
    }

    static func append<T: FixedWidthInteger>(_ value: T, to data: inout Data) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }

    static func deflate(_ data: Data) throws -> Data {
        var length = compressBound(uLong(data.count))
        var out = Data(count: Int(length))
        let status = out.withUnsafeMutableBytes { o in
            data.withUnsafeBytes { i in
                compress2(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &length, i.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(data.count), 6)
            }
        }
        guard status == Z_OK else { throw GeoTIFFError("deflate failed (\(status))") }
        return out.prefix(Int(length))
    }

    static func inflate(_ data: Data, expected: Int) throws -> Data {
        var length = uLongf(expected)
        var out = Data(count: expected)
        let status = out.withUnsafeMutableBytes { o in
            data.withUnsafeBytes { i in
                uncompress(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &length, i.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(data.count))
            }
        }
        guard status == Z_OK, Int(length) == expected else { throw GeoTIFFError("a deflate strip does not inflate to its size") }
        return out
    }

    // MARK: - Reading

    /// Reads the GeoTIFF file at `url`.
    /// - Throws: ``GeoTIFFError`` for a file that is not a TIFF or a layout this reader does not take.
    public static func read(_ url: URL) throws -> GPRaster {
        let data: Data
        do { data = try Data(contentsOf: url) } catch { throw GeoTIFFError("cannot read \(url.path)") }
        return try decode(data)
    }

    /// Reads a raster from GeoTIFF bytes.
    /// - Throws: ``GeoTIFFError`` for bytes that are not a TIFF or a layout this reader does not take.
    public static func decode(_ data: Data) throws -> GPRaster {
        let bytes = [UInt8](data)
        guard bytes.count >= 8, bytes[0] == 0x49, bytes[1] == 0x49, bytes[2] == 42, bytes[3] == 0 else {
            throw GeoTIFFError("not a little-endian classic TIFF")
        }
        func u16(_ at: Int) throws -> UInt16 {
            guard at >= 0, at + 2 <= bytes.count else { throw GeoTIFFError("the file ends inside a tag") }
            return UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
        }
        func u32(_ at: Int) throws -> UInt32 {
            guard at >= 0, at + 4 <= bytes.count else { throw GeoTIFFError("the file ends inside a tag") }
            return UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        func f64(_ at: Int) throws -> Double {
            Double(bitPattern: UInt64(try u32(at)) | UInt64(try u32(at + 4)) << 32)
        }
        let ifd = Int(try u32(4))
        let count = Int(try u16(ifd))
        guard count < 1000 else { throw GeoTIFFError("the first IFD is damaged") }
        var numbers: [UInt16: [Double]] = [:]
        var text: [UInt16: String] = [:]
        let sizes: [UInt16: Int] = [1: 1, 2: 1, 3: 2, 4: 4, 11: 4, 12: 8, 16: 8]
        for i in 0..<count {
            let at = ifd + 2 + i * 12
            let tag = try u16(at), type = try u16(at + 2), n = Int(try u32(at + 4))
            guard let size = sizes[type], n < 1 << 24 else { continue }
            let start = size * n <= 4 ? at + 8 : Int(try u32(at + 8))
            guard start + size * n <= bytes.count else { throw GeoTIFFError("tag \(tag) points beyond the file") }
            switch type {
            case 2: text[tag] = String(decoding: bytes[start..<(start + n)].prefix { $0 != 0 }, as: UTF8.self)
            case 1: numbers[tag] = (0..<n).map { Double(bytes[start + $0]) }
            case 3: numbers[tag] = try (0..<n).map { Double(try u16(start + 2 * $0)) }
            case 4: numbers[tag] = try (0..<n).map { Double(try u32(start + 4 * $0)) }
            case 12: numbers[tag] = try (0..<n).map { try f64(start + 8 * $0) }
            default: continue
            }
        }
        // Tags may hold doubles: a count, size or code is taken only when it is a whole number
        // (a fuzzed file gave one past Int.max).
        func whole(_ value: Double, _ tag: UInt16) throws -> Int {
            guard value.isFinite, value >= 0, value <= Double(UInt32.max), value == value.rounded() else {
                throw GeoTIFFError("tag \(tag) holds \(value), not a whole number")
            }
            return Int(value)
        }
        func first(_ tag: UInt16, default fallback: Int) throws -> Int { try numbers[tag]?.first.map { try whole($0, tag) } ?? fallback }
        let width = try first(256, default: 0), height = try first(257, default: 0)
        // Each side bounded first, so the product cannot overflow.
        guard width > 0, height > 0, width < 1 << 28, height < 1 << 28, width * height < 1 << 28 else { throw GeoTIFFError("the TIFF has no sensible size") }
        let bits = try first(258, default: 8), format = try first(339, default: 1), compression = try first(259, default: 1)
        guard (numbers[277]?.first ?? 1) == 1 else { throw GeoTIFFError("only single-band rasters are read") }
        guard compression == 1 || compression == 8 || compression == 32946 else { throw GeoTIFFError("compression \(compression) is not read (only none and deflate)") }
        guard (numbers[317]?.first ?? 1) == 1 else { throw GeoTIFFError("predictors are not read") }
        guard let offsets = numbers[273], let counts = numbers[279], offsets.count == counts.count else { throw GeoTIFFError("only striped TIFFs are read") }
        let rowsPerStrip = try first(278, default: height)
        let sampleBytes = bits / 8
        guard [1, 2, 4, 8].contains(sampleBytes) else { throw GeoTIFFError("\(bits)-bit samples are not read") }
        var values: [Double] = []
        values.reserveCapacity(width * height)
        for (index, offset) in offsets.enumerated() {
            let rows = min(rowsPerStrip, height - index * rowsPerStrip)
            guard rows > 0 else { break }
            let start = try whole(offset, 273), length = try whole(counts[index], 279)
            guard start + length <= bytes.count else { throw GeoTIFFError("strip \(index) lies beyond the file") }
            var strip = Data(bytes[start..<(start + length)])
            if compression != 1 { strip = try inflate(strip, expected: rows * width * sampleBytes) }
            guard strip.count >= rows * width * sampleBytes else { throw GeoTIFFError("strip \(index) is short") }
            strip.withUnsafeBytes { raw in
                for i in 0..<(rows * width) {
                    let p = raw.baseAddress! + i * sampleBytes
                    let v: Double
                    switch (format, sampleBytes) {
                    case (3, 4): v = Double(Float(bitPattern: UInt32(littleEndian: p.loadUnaligned(as: UInt32.self))))
                    case (3, 8): v = Double(bitPattern: UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)))
                    case (2, 1): v = Double(Int8(bitPattern: p.load(as: UInt8.self)))
                    case (2, 2): v = Double(Int16(littleEndian: p.loadUnaligned(as: Int16.self)))
                    case (2, 4): v = Double(Int32(littleEndian: p.loadUnaligned(as: Int32.self)))
                    case (_, 1): v = Double(p.load(as: UInt8.self))
                    case (_, 2): v = Double(UInt16(littleEndian: p.loadUnaligned(as: UInt16.self)))
                    default: v = Double(UInt32(littleEndian: p.loadUnaligned(as: UInt32.self)))
                    }
                    values.append(v)
                }
            }
        }
        guard values.count == width * height else { throw GeoTIFFError("the strips do not hold \(width)×\(height) cells") }
        guard let scale = numbers[33550], scale.count >= 2, let tie = numbers[33922], tie.count >= 6 else {
            throw GeoTIFFError("no georeferencing (ModelPixelScale and ModelTiepoint)")
        }
        guard abs(scale[0] - scale[1]) <= 1e-9 * abs(scale[0]) else { throw GeoTIFFError("only square cells are read") }
        guard scale[0] > 0, scale[0].isFinite, tie.prefix(6).allSatisfy(\.isFinite) else { throw GeoTIFFError("the cell size or tie point is not a finite, positive number") }
        var epsg = 0
        if let keys = numbers[34735], keys.count >= 4 {
            for k in 0..<min(try whole(keys[3], 34735), keys.count / 4) where 4 + k * 4 + 3 < keys.count {
                let id = keys[4 + k * 4], value = keys[4 + k * 4 + 3]
                if (id == 3072 || id == 2048) && keys[4 + k * 4 + 1] == 0 { epsg = try whole(value, 34735) }
            }
        }
        guard epsg > 0 else { throw GeoTIFFError("the GeoKeys name no EPSG coordinate system") }
        return GPRaster(
            width: width, height: height, xmin: tie[3] - tie[0] * scale[0], ymax: tie[4] + tie[1] * scale[1], cellSize: scale[0],
            spatialReference: SpatialReference(wkid: epsg), noData: text[42113].flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }, values: values)
    }
}
