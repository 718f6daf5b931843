import CZlib
import Foundation
import OutpostCore
import OutpostDigest

/// A delta file: sync without a link (docs/sync.md, "Delta files"). Edits of a replica travel to
/// the service in one, the service's answer and the changes the replica needs come back in
/// another; both go through the same ledger and cursors as HTTP sync.
///
/// Layout (version 1), little-endian:
///
///     "OUTPOST-DELTA\n"                 14 bytes
///     header length                     UInt32
///     header                            JSON (``DeltaHeader``), uncompressed: readable without inflating
///     records                           one zlib stream of records: kind UInt8, length UInt32, bytes
///     SHA-256                           32 bytes over everything before it
///
/// Record kinds: 1 the batch (its canonical bytes, as sent over HTTP), 2 the service's answer to
/// it (JSON text, as stored in its ledger), 3 a page of a layer's changes (JSON), 4 the batch's
/// rejection (JSON: rolled back as a whole), 5 attachment content (JSON head, then the bytes).
public enum DeltaFile {
    /// The bytes every delta file starts with.
    public static let magic = Array("OUTPOST-DELTA\n".utf8)
    /// The format version this build writes and reads.
    public static let version = 1

    /// What a delta file carries.
    public enum Kind: String, Codable, Sendable {
        /// A replica's edits (or none: a request for changes) for its service.
        case edits
        /// The service's answer to an `edits` file.
        case reply
        /// Changes since a generation, for any read-only replica at or after it.
        case updates
    }

    /// The kind byte of a record.
    public enum RecordKind: UInt8, Sendable {
        /// The upload batch, its canonical bytes.
        case batch = 1
        /// The service's answer to the batch (JSON).
        case batchAnswer = 2
        /// A page of a layer's changes (JSON).
        case changes = 3
        /// The batch's rejection (JSON): it was rolled back as a whole.
        case rejection = 4
        /// A chunk of an attachment's bytes: ``DeltaContent``.
        case content = 5
        /// `edits`: the global ids of the attachments the replica holds (a JSON array), so the
        /// reply carries only content the replica lacks.
        case heldAttachments = 6
    }
}

/// An attachment's bytes in a delta file travel as `content` records of at most ``chunkSize``
/// bytes: 64 ASCII hex digits of the content's SHA-256, the chunk's offset and the content's
/// total size (each 8 bytes, little-endian), then the bytes. Chunks of one content come in order.
public enum DeltaContent {
    /// The largest chunk of content a record carries (1 MiB).
    public static let chunkSize = 1 << 20

    /// A content record of one chunk: `bytes` at `offset` of a content of `total` bytes whose SHA-256 is
    /// `sha256`.
    public static func record(sha256: String, offset: Int64, total: Int64, bytes: Data) -> Data {
        var out = Data(sha256.utf8)
        withUnsafeBytes(of: UInt64(offset).littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt64(total).littleEndian) { out.append(contentsOf: $0) }
        out.append(bytes)
        return out
    }

    /// The hash, offset, total size and bytes of a content record.
    /// - Throws: ``DeltaError`` for a record that is not a content chunk.
    public static func parse(_ body: Data) throws -> (sha256: String, offset: Int64, total: Int64, bytes: Data) {
        guard body.count >= 80, let sha = String(data: body.prefix(64), encoding: .ascii), sha.allSatisfy(\.isHexDigit) else {
            throw DeltaError("an attachment content record is damaged")
        }
        let numbers = body.dropFirst(64).prefix(16).withUnsafeBytes { raw in
            (Int64(bitPattern: UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))),
             Int64(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))))
        }
        let bytes = Data(body.dropFirst(80))
        guard numbers.0 >= 0, numbers.1 >= numbers.0 + Int64(bytes.count) else { throw DeltaError("an attachment content record is damaged") }
        return (sha.lowercased(), numbers.0, numbers.1, bytes)
    }
}

/// What a delta file says about itself.
public struct DeltaHeader: Codable, Sendable, Equatable {
    /// Always `outpost-delta`.
    public var format = "outpost-delta"
    /// The file's format version.
    public var version = DeltaFile.version
    /// What the file carries.
    public var kind: DeltaFile.Kind
    /// The name of the feature service.
    public var service: String
    /// The replica's id (`edits`, `reply`).
    public var replicaId: String?
    /// The replica's name, for people.
    public var replicaName: String?
    /// The batch an `edits` file carries (nil: nothing to upload) and its content hash.
    public var seq: Int64?
    /// The batch's id.
    public var batchId: String?
    /// The SHA-256 of the batch's bytes.
    public var batchHash: String?
    /// The last batch the replica had acknowledged when the file was made.
    public var lastAckedSeq: Int64?
    /// Each downloading layer's cursor: the generation its changes are wanted from (`edits`), or
    /// the generation the changes start at (`reply`, `updates`).
    public var cursors: [String: Int64]
    /// `reply`, `updates`: the generation the changes reach.
    public var upto: Int64?
    /// The service schema version the changes are in.
    public var schemaVersion: Int?
    /// `updates`: the area the changes were taken within (xmin, ymin, xmax, ymax in the
    /// service's spatial reference; nil: everywhere).
    public var area: [Double]?
    /// How many edits the batch holds.
    public var edits: Int?
    /// How many changes the file holds.
    public var changes: Int?
    /// How many attachments' content the file carries.
    public var attachments: Int?
    /// When the file was made (ISO 8601).
    public var created: String

    /// A header of this kind; the other members are filled in as the file is written.
    public init(kind: DeltaFile.Kind, service: String, replicaId: String?, cursors: [String: Int64]) {
        self.kind = kind
        self.service = service
        self.replicaId = replicaId
        self.cursors = cursors
        created = ISO8601DateFormatter().string(from: Date())
    }
}

extension DeltaWriter {
    /// Writes `total` bytes of content `sha256` as content records, each chunk from
    /// `read(offset, length)`; nil from `read` (the content is gone) stops it.
    /// - Returns: whether the content was written whole.
    public func writeContent(sha256: String, total: Int64, read: (Int64, Int) async throws -> Data?) async throws -> Bool {
        var offset: Int64 = 0
        repeat {
            guard let bytes = try await read(offset, DeltaContent.chunkSize), bytes.count > 0 || total == 0 else { return false }
            try write(.content, DeltaContent.record(sha256: sha256, offset: offset, total: total, bytes: bytes))
            offset += Int64(bytes.count)
        } while offset < total
        return true
    }
}

/// Why a delta file cannot be read or applied.
public struct DeltaError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// An error saying `message`.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Writes a delta file: the header, then records streamed through one deflate stream (nothing
/// is held but the current record), then the hash; the file appears at its name only when
/// complete.
public final class DeltaWriter {
    private let url: URL
    private let partial: URL
    private let handle: FileHandle
    private var stream = z_stream()
    private var hasher = SHA256()
    private var out = [UInt8](repeating: 0, count: 1 << 16)
    private var finished = false

    /// Starts a delta file at `url` (written beside it as a hidden partial file until finished).
    public init(url: URL, header: DeltaHeader) throws {
        self.url = url
        partial = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).partial")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil) else { throw DeltaError("cannot write \(url.path)") }
        handle = try FileHandle(forWritingTo: partial)
        let rc = deflateInit_(&stream, 6, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw DeltaError("zlib failed to start (\(rc))") }
        let json = try JSONEncoder.sorted.encode(header)
        var head = DeltaFile.magic
        head += withUnsafeBytes(of: UInt32(json.count).littleEndian) { Array($0) }
        head += json
        try emit(head)
    }

    deinit {
        if !finished {
            deflateEnd(&stream)
            try? handle.close()
            try? FileManager.default.removeItem(at: partial)
        }
    }

    /// Appends a record.
    public func write(_ kind: DeltaFile.RecordKind, _ bytes: Data) throws {
        var prefix = [kind.rawValue]
        prefix += withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { Array($0) }
        try compress(Data(prefix), flush: Z_NO_FLUSH)
        try compress(bytes, flush: Z_NO_FLUSH)
    }

    /// Ends the stream, appends the hash and moves the file into place.
    public func finish() throws {
        try compress(Data(), flush: Z_FINISH)
        deflateEnd(&stream)
        let digest = hasher.finalize()
        try handle.write(contentsOf: digest)
        try handle.synchronize()
        try handle.close()
        finished = true
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
        try FileManager.default.moveItem(at: partial, to: url)
    }

    private func emit(_ bytes: [UInt8]) throws {
        bytes.withUnsafeBytes { hasher.update($0) }
        try handle.write(contentsOf: bytes)
    }

    private func compress(_ data: Data, flush: Int32) throws {
        try ZlibLoop.run(&stream, input: [UInt8](data), chunk: &out) { stream in
            let rc = CZlib.deflate(&stream, flush)
            guard rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR else { throw DeltaError("zlib failed (\(rc))") }
            return stream.avail_out == 0 || (flush == Z_FINISH && stream.avail_in > 0)
        } sink: { try emit(Array($0)) }
    }
}

/// One zlib stream driven over an input: the step (deflate or inflate) runs with a fresh output
/// chunk until it says stop, each chunk's output handed on.
enum ZlibLoop {
    static func run(
        _ stream: inout z_stream, input: [UInt8], chunk: inout [UInt8], step: (inout z_stream) throws -> Bool, sink: (ArraySlice<UInt8>) throws -> Void
    ) throws {
        var input = input
        try input.withUnsafeMutableBufferPointer { src in
            // An empty input leaves what the stream still holds from before.
            if !src.isEmpty {
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
            }
            var again = true
            while again {
                let produced: Int = try chunk.withUnsafeMutableBufferPointer { dst in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = uInt(dst.count)
                    again = try step(&stream)
                    return dst.count - Int(stream.avail_out)
                }
                if produced > 0 { try sink(chunk[0..<produced]) }
            }
        }
    }
}

/// Reads a delta file: checks its hash over the whole file first (a damaged or cut file is
/// refused before anything is applied), then hands out its records one at a time.
public final class DeltaReader {
    /// The file's header.
    public let header: DeltaHeader
    private let handle: FileHandle
    private var stream = z_stream()
    private var remaining: Int
    private var pending: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var streamEnded = false

    /// Opens the delta file at `url` after checking its hash.
    /// - Throws: ``DeltaError`` for a missing, damaged or cut file.
    public init(url: URL) throws {
        guard let handle = try? FileHandle(forReadingFrom: url) else { throw DeltaError("no delta file at \(url.path)") }
        self.handle = handle
        let size = Int((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0)
        let name = url.lastPathComponent
        guard size > DeltaFile.magic.count + 4 + 32 else { throw DeltaError("\(name) is not a delta file (too short)") }
        // The hash first, streamed.
        var hasher = SHA256()
        var left = size - 32
        while left > 0 {
            let chunk = try handle.read(upToCount: min(left, 1 << 20)) ?? Data()
            guard !chunk.isEmpty else { throw DeltaError("\(name) is cut short") }
            chunk.withUnsafeBytes { hasher.update($0) }
            left -= chunk.count
        }
        let stored = try handle.read(upToCount: 32) ?? Data()
        try handle.seek(toOffset: 0)
        let magic = try handle.read(upToCount: DeltaFile.magic.count) ?? Data()
        guard [UInt8](magic) == DeltaFile.magic else { throw DeltaError("\(name) is not a delta file") }
        guard [UInt8](stored) == hasher.finalize() else { throw DeltaError("\(name) is damaged: its content does not match its hash") }
        let lengthBytes = try handle.read(upToCount: 4) ?? Data()
        let length = Int(lengthBytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }.littleEndian)
        guard length > 0, length < size else { throw DeltaError("\(name) is damaged: bad header length") }
        let json = try handle.read(upToCount: length) ?? Data()
        let decoded: DeltaHeader
        do {
            decoded = try JSONDecoder().decode(DeltaHeader.self, from: json)
        } catch {
            throw DeltaError("\(name) has an unreadable header: \(error)")
        }
        guard decoded.format == "outpost-delta" else { throw DeltaError("\(name) is not an Outpost delta file") }
        guard decoded.version <= DeltaFile.version else {
            throw DeltaError("\(name) is delta format \(decoded.version); this version of Outpost reads format \(DeltaFile.version)")
        }
        header = decoded
        remaining = size - 32 - DeltaFile.magic.count - 4 - length
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw DeltaError("zlib failed to start") }
    }

    deinit {
        inflateEnd(&stream)
        try? handle.close()
    }

    /// The next record, or nil at the end.
    public func next() throws -> (DeltaFile.RecordKind, Data)? {
        guard let prefix = try take(5) else { return nil }
        guard let kind = DeltaFile.RecordKind(rawValue: prefix[0]) else { throw DeltaError("unknown record kind \(prefix[0])") }
        let length = Int(UInt32(prefix[1]) | UInt32(prefix[2]) << 8 | UInt32(prefix[3]) << 16 | UInt32(prefix[4]) << 24)
        guard let body = try take(length) else { throw DeltaError("a record is cut short") }
        return (kind, Data(body))
    }

    /// Exactly `count` inflated bytes, or nil at a clean end of the stream.
    private func take(_ count: Int) throws -> [UInt8]? {
        while pending.count - start < count {
            guard !streamEnded else {
                if pending.count == start { return nil }
                throw DeltaError("a record is cut short")
            }
            try inflateMore()
        }
        let out = Array(pending[start..<(start + count)])
        start += count
        if start > 1 << 16, start * 2 > pending.count {
            pending.removeFirst(start)
            start = 0
        }
        return out
    }

    private func inflateMore() throws {
        var input = [UInt8]()
        if stream.avail_in == 0, remaining > 0 {
            input = [UInt8](try handle.read(upToCount: min(remaining, 1 << 16)) ?? Data())
            remaining -= input.count
        }
        try ZlibLoop.run(&stream, input: input, chunk: &chunk) { stream in
            let rc = inflate(&stream, Z_NO_FLUSH)
            if rc == Z_STREAM_END {
                streamEnded = true
            } else if rc != Z_OK && rc != Z_BUF_ERROR {
                throw DeltaError("the records are damaged (zlib \(rc))")
            } else if rc == Z_BUF_ERROR, stream.avail_in == 0, remaining == 0 {
                throw DeltaError("the records are cut short")
            }
            return stream.avail_in > 0 && !streamEnded
        } sink: { pending += $0 }
    }
}

extension JSONEncoder {
    static var sorted: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }
}
