import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import OutpostCore

/// Builds responses: JSON (compact, or indented for `f=pjson`), gzip when the client accepts it,
/// and streamed bodies flushed in chunks.
struct ResponseWriting {
    let gzip: Bool
    let pretty: Bool
    /// For a browser (`f=html`): the Services Directory page the JSON is shown as.
    var directory: (view: DirectoryView, page: DirectoryPage)?

    init(request: Request, pretty: Bool = false) {
        gzip = request.headers[.acceptEncoding].map { $0.lowercased().contains("gzip") } ?? false
        self.pretty = pretty
    }

    static let jsonContentType = "application/json; charset=utf-8"

    func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        if let directory { return html(directory.view.page(directory.page, json: value), status: status) }
        let body = pretty ? ByteBuffer(string: Self.pretty(value)) : ByteBuffer(bytes: value.jsonBytes)
        return bytes(body, status: status, contentType: Self.jsonContentType)
    }

    func bytes(_ buffer: ByteBuffer, status: HTTPResponse.Status = .ok, contentType: String) -> Response {
        let (body, headers) = Self.encoded(buffer, contentType: contentType, gzip: gzip)
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// A body as it goes out, gzipped (at `level`) when `gzip` (the client accepts it) and worth
    /// it, with its headers.
    static func encoded(_ buffer: ByteBuffer, contentType: String, gzip: Bool, level: Int32 = Gzip.level) -> (ByteBuffer, HTTPFields) {
        var headers: HTTPFields = [.contentType: contentType]
        if gzip, buffer.readableBytes > 512, let compressed = Gzip.compress(buffer, level: level) {
            headers[.contentEncoding] = "gzip"
            return (compressed, headers)
        }
        return (buffer, headers)
    }

    /// A streamed body: `produce` appends text to a ``ChunkedText``, which sends it in chunks of
    /// about 64 KB (gzip-compressed on the way when the client accepts it), so a large answer
    /// never sits whole in memory.
    func stream(contentType: String, _ produce: @escaping @Sendable (inout ChunkedText) async throws -> Void) -> Response {
        var headers: HTTPFields = [.contentType: contentType]
        if gzip { headers[.contentEncoding] = "gzip" }
        let gzip = self.gzip
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                var chunked = ChunkedText(writer: writer, gzip: gzip)
                try await produce(&chunked)
                try await chunked.finish()
            })
    }

    static func pretty(_ value: JSONValue, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .array(let a) where !a.isEmpty:
            return "[\n" + a.map { inner + pretty($0, indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let o) where !o.isEmpty:
            return "{\n" + o.keys.sorted().map { key in
                var k = ""
                JSONValue.writeString(key, to: &k)
                return inner + k + " : " + pretty(o[key]!, indent: inner)
            }.joined(separator: ",\n") + "\n\(indent)}"
        default:
            return value.jsonString
        }
    }
}

/// Text written by a streaming handler, sent to the client in chunks.
struct ChunkedText {
    private var writer: any ResponseBodyWriter
    private var bytes: [UInt8] = []
    private let compressor: (any NIOCompressor)?
    static let chunkSize = 64 * 1024

    init(writer: any ResponseBodyWriter, gzip: Bool) {
        self.writer = writer
        if gzip {
            let c = CompressionAlgorithm.gzip().compressor
            try? c.startStream()
            compressor = c
        } else {
            compressor = nil
        }
    }

    mutating func append(_ s: String) { bytes.append(utf8: s) }

    /// Lets a byte writer (a feature's JSON) append in place.
    mutating func write<Failure: Error>(_ body: (inout [UInt8]) throws(Failure) -> Void) throws(Failure) { try body(&bytes) }

    /// Sends the accumulated text once it reaches the chunk size.
    mutating func flushIfNeeded() async throws {
        if bytes.count >= Self.chunkSize { try await send(final: false) }
    }

    mutating func finish() async throws {
        try await send(final: true)
        try await writer.finish(nil)
    }

    private mutating func send(final: Bool) async throws {
        var buffer = ByteBuffer(bytes: bytes)
        bytes.removeAll(keepingCapacity: true)
        if let compressor {
            let out = try buffer.compressStream(with: compressor, flush: final ? .finish : .sync, allocator: ByteBufferAllocator())
            if final { try? compressor.finishStream() }
            if out.readableBytes > 0 { try await writer.write(out) }
        } else if buffer.readableBytes > 0 {
            try await writer.write(buffer)
        }
    }
}
