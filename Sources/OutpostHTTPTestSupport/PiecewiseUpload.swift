import AsyncHTTPClient
import Foundation
import NIOCore

/// Sends a request body in pieces, as a client that makes it while it sends does (chunked, no
/// length): each piece after a pause, or the body broken off after some of them (the client
/// gone mid-request). For tests of a server that reads bodies as they arrive.
public enum PiecewiseUpload {
    public struct BrokenOff: Error {}

    /// `PUT`s `pieces` to `url`, waiting `pause(i)` before piece `i`; with `breakAfter`, the
    /// body ends in an error after that many pieces. The status and body of the answer (nil when
    /// the request failed, as a broken-off one does).
    public static func put(
        _ url: URL, pieces: [Data], contentType: String, pause: @escaping @Sendable (Int) -> Duration = { _ in .zero }, breakAfter: Int? = nil
    ) async -> (status: Int, body: Data)? {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
        let feeder = Task {
            for (i, piece) in pieces.enumerated() {
                if let breakAfter, i == breakAfter {
                    continuation.finish(throwing: BrokenOff())
                    return
                }
                let wait = pause(i)
                if wait > .zero { try? await Task.sleep(for: wait) }
                continuation.yield(ByteBuffer(bytes: piece))
            }
            continuation.finish()
        }
        defer { feeder.cancel() }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .PUT
        request.headers.add(name: "Content-Type", value: contentType)
        request.body = .stream(stream, length: .unknown)
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            var body = try await response.body.collect(upTo: 64 << 20)
            return (Int(response.status.code), Data(body.readBytes(length: body.readableBytes) ?? []))
        } catch {
            return nil
        }
    }

    /// `body` cut into `count` pieces of about the same size.
    public static func pieces(of body: Data, count: Int) -> [Data] {
        let size = max(1, (body.count + count - 1) / count)
        return stride(from: 0, to: body.count, by: size).map { body.subdata(in: $0..<min($0 + size, body.count)) }
    }
}
