import Foundation
import HTTPTypes
import Hummingbird

/// The address clients reach the server at, for every absolute URL it writes (replica files,
/// job status and results, attachment links, replica states): what a reverse proxy in front of
/// it says, not the address the proxy connected to.
///
/// In order: the configured public URL (`outpost serve --public-url`); the first element of
/// `Forwarded` (RFC 7239: `proto`, `host`); `X-Forwarded-Proto`, `X-Forwarded-Host` and
/// `X-Forwarded-Prefix`; the request's own Host (https when the server serves TLS). A value that is not a plain host[:port], a
/// scheme other than http/https or a prefix that is not a clean path is ignored, so a header
/// cannot inject text into the URLs.
struct PublicURL {
    /// `scheme://host[:port][/prefix]`, without a trailing slash.
    let base: String

    /// - Parameter secure: the server itself serves HTTPS (the scheme when nothing says otherwise).
    init(_ request: Request, configured: URL?, secure: Bool = false) {
        if let configured {
            var text = configured.absoluteString
            while text.hasSuffix("/") { text.removeLast() }
            base = text
            return
        }
        var scheme: String?, host: String?
        if let forwarded = request.headers[HTTPField.Name("Forwarded")!] {
            let first = forwarded.split(separator: ",", maxSplits: 1).first.map(String.init) ?? ""
            for pair in first.split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard kv.count == 2 else { continue }
                let value = kv[1].hasPrefix("\"") && kv[1].hasSuffix("\"") && kv[1].count >= 2 ? String(kv[1].dropFirst().dropLast()) : kv[1]
                switch kv[0].lowercased() {
                case "proto": scheme = value
                case "host": host = value
                default: break
                }
            }
        }
        func firstValue(_ name: String) -> String? {
            request.headers[HTTPField.Name(name)!]?.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        scheme = scheme ?? firstValue("X-Forwarded-Proto")
        host = host ?? firstValue("X-Forwarded-Host")
        let prefix = firstValue("X-Forwarded-Prefix").flatMap(Self.cleanPrefix) ?? ""
        let usedScheme = scheme.map { $0.lowercased() }.flatMap { ["http", "https"].contains($0) ? $0 : nil } ?? (secure ? "https" : "http")
        let usedHost = host.flatMap(Self.cleanHost) ?? request.head.authority.flatMap(Self.cleanHost) ?? "127.0.0.1"
        base = "\(usedScheme)://\(usedHost)\(prefix)"
    }

    init(_ request: Request, configuration: ServerConfiguration) {
        self.init(request, configured: configuration.publicURL, secure: configuration.tls != nil)
    }

    /// `…/arcgis/rest/services/<name>/<kind>` as the client reaches it.
    func service(_ name: String, _ kind: String) -> String { "\(base)/arcgis/rest/services/\(name)/\(kind)" }

    /// A host name, IPv4 or bracketed IPv6 address, with an optional port; nil for anything else.
    static func cleanHost(_ text: String) -> String? {
        guard !text.isEmpty, text.count <= 255 else { return nil }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]_")
        guard text.unicodeScalars.allSatisfy(allowed.contains) else { return nil }
        return text
    }

    /// A path prefix like `/gis` (segments of unreserved characters); nil for anything else.
    static func cleanPrefix(_ text: String) -> String? {
        var path = text
        while path.hasSuffix("/") { path.removeLast() }
        guard path.isEmpty || path.hasPrefix("/") else { return nil }
        let segments = path.split(separator: "/")
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        guard segments.allSatisfy({ $0 != "." && $0 != ".." && $0.unicodeScalars.allSatisfy(allowed.contains) }) else { return nil }
        return path
    }
}
