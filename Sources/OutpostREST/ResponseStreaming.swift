import AsyncHTTPClient
import Foundation

/// A response body that stopped before its end (the connection broke, a timeout), after
/// `received` bytes counted from where the write started.
public struct BodyInterrupted: Error, Sendable {
    /// The bytes that had arrived.
    public var received: Int64
    /// Why the body stopped.
    public var reason: String
}

/// A response's body written to a file as it arrives.
extension HTTPClientResponse {
    /// Streams the body into `handle` as it arrives (memory stays at one chunk), counting bytes
    /// from `received` and reporting the count after each chunk; returns the final count.
    /// - Throws: `CancellationError` when the task is cancelled, ``BodyInterrupted`` when the
    ///   stream breaks (the bytes written so far stay written).
    public func streamBody(to handle: FileHandle, from received: Int64 = 0, progress: (Int64) -> Void) async throws -> Int64 {
        var count = received
        do {
            for try await var chunk in body {
                count += Int64(chunk.readableBytes)
                if let bytes = chunk.readBytes(length: chunk.readableBytes) { try handle.write(contentsOf: bytes) }
                progress(count)
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw BodyInterrupted(received: count, reason: "\(error)")
        }
        return count
    }
}
