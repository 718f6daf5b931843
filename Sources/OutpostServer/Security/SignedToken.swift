import Crypto
import Foundation
import OutpostCore

/// A token `generateToken` issues: who, until when, and what it is bound to, signed with the
/// users file's key (HMAC-SHA256). Nothing is kept on the server; a token is checked by its
/// signature, its expiry, its binding and its user still being in the file.
///
/// Wire form: `o1.<base64url payload>.<base64url signature>`, the payload compact JSON
/// `{"u": name, "e": expiry in epoch seconds, "b": binding}`; the binding is `ip:<address>`,
/// `ref:<referer>` or absent (a token for any client).
struct SignedToken: Equatable {
    var user: String
    var expires: Date
    var binding: String?

    static let prefix = "o1."

    func encoded(key: [UInt8]) -> String {
        var payload: [String: JSONValue] = ["u": .string(user), "e": .integer(Int64(expires.timeIntervalSince1970.rounded(.down)))]
        if let binding { payload["b"] = .string(binding) }
        let body = Self.base64URL(JSONValue.object(payload).jsonBytes)
        return Self.prefix + body + "." + Self.base64URL(Self.signature(body, key: key))
    }

    enum Failure: Error, Equatable {
        /// Not one of ours, or its signature does not match (forged or altered).
        case invalid
        case expired
    }

    /// The token a string carries, checked against the key and the clock.
    static func decode(_ text: String, key: [UInt8], now: Date) throws(Failure) -> SignedToken {
        guard text.hasPrefix(prefix) else { throw .invalid }
        let parts = text.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let signature = bytes(base64URL: String(parts[1])) else { throw .invalid }
        guard UserFile.constantTimeEqual(signature, Self.signature(String(parts[0]), key: key)) else { throw .invalid }
        guard let payload = bytes(base64URL: String(parts[0])), let json = try? JSONValue.parse(Data(payload)),
            let user = json["u"]?.stringValue, let expiry = json["e"]?.integerValue
        else { throw .invalid }
        let token = SignedToken(user: user, expires: Date(timeIntervalSince1970: TimeInterval(expiry)), binding: json["b"]?.stringValue)
        guard token.expires > now else { throw .expired }
        return token
    }

    static func signature(_ body: String, key: [UInt8]) -> [UInt8] {
        Array(HMAC<Crypto.SHA256>.authenticationCode(for: Array(body.utf8), using: SymmetricKey(data: key)))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func bytes(base64URL text: String) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map { [UInt8]($0) }
    }
}
