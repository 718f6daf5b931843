import AsyncHTTPClient
import Foundation
import OutpostCore
import OutpostREST

/// The few HTTP requests an offline map makes besides those of the sync and tile tasks: map
/// definitions and service descriptions (JSON), and files downloaded with resume; failures as
/// ``OfflineMapError``.
struct OfflineHTTP: Sendable {
    let rest: RESTClient

    init(token: String?, client: HTTPClient = RESTClient.defaultClient, timeout: Duration = .seconds(120)) {
        rest = RESTClient(client: client, token: token, timeout: timeout)
    }

    /// GET with `f=json`; an ArcGIS error answer (any status) is an error.
    func json(_ url: URL, query: [(String, String)] = []) async throws -> JSONValue {
        do {
            return try await rest.json(url, query: query)
        } catch let error as ArcGISError {
            throw OfflineMapError(.service, "\(url.path): \(error.description)")
        } catch let failure as RemoteJobUnreachable {
            throw OfflineMapError(.service, "\(failure.description) for \(url.path)")
        }
    }

    /// Downloads `url` into `file`, continuing a partial file where it ends (HTTP Range) when
    /// the server allows; reports bytes held so far. `validator` is the `ETag` the partial file's
    /// bytes came with: sent as `If-Range`, so a file that changed on the server comes back whole
    /// rather than spliced; `tagged` hears the `ETag` of each answer before its bytes are written.
    func download(
        _ url: URL, to file: URL, validator: String? = nil, tagged: (String?) -> Void = { _ in }, progress: @Sendable (Int64, Int64?) -> Void
    ) async throws {
        do {
            try await rest.download(url, to: file, resume: true, validator: validator, tagged: tagged, progress: progress)
        } catch let broken as BodyInterrupted {
            throw OfflineMapError(.service, "the download of \(url.path) broke off after \(broken.received) bytes; it continues from there (\(broken.reason))")
        } catch let error as ArcGISError {
            throw OfflineMapError(.service, "\(url.path): \(error.description)")
        } catch let failure as RemoteJobUnreachable {
            throw OfflineMapError(.service, "\(failure.description) for \(url.path)")
        } catch let error as CocoaError {
            throw OfflineMapError(.service, "cannot write \(file.path) (\(error.localizedDescription))")
        }
    }
}
