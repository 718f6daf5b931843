import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#endif
import OutpostCore
import _CryptoExtras

/// What a caller may do with a service.
public enum Permission: String, Codable, CaseIterable, Sendable, Comparable {
    /// Service and layer descriptions, queries, attachments, tiles.
    case query
    /// applyEdits and attachment edits.
    case edit
    /// Replicas: create, synchronize, unregister, and the native sync API.
    case sync
    /// Administration (reserved for the operations that manage a service).
    case admin

    public static func < (a: Permission, b: Permission) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }
}

/// A user's role: the permissions they have on every service unless the users file says
/// otherwise for one service.
public enum Role: String, Codable, CaseIterable, Sendable {
    /// May query; may also edit and sync; may do everything.
    case viewer, editor, admin

    /// What the role may do.
    public var permissions: Set<Permission> {
        switch self {
        case .viewer: [.query]
        case .editor: [.query, .edit, .sync]
        case .admin: Set(Permission.allCases)
        }
    }
}

/// The users file (`outpost users`, `outpost serve --users`): users with salted PBKDF2-HMAC-SHA256
/// password hashes, roles and per-service permissions, and the key tokens are signed with.
/// Format version 1 validates against `Schemas/users.schema.json`. The file holds secrets: it is
/// written with mode 0600 and replaced atomically.
public struct UserFile: Codable, Sendable {
    /// A user of the file.
    public struct User: Codable, Sendable, Equatable {
        /// The user's name (matched without regard to case).
        public var name: String
        /// The user's role.
        public var role: Role
        /// Lower-case hex of 16 random bytes.
        public var salt: String
        /// PBKDF2 iterations of the hash.
        public var iterations: Int
        /// Lower-case hex of the 32-byte PBKDF2-HMAC-SHA256 of the password.
        public var hash: String
        /// Permissions by service name (case-insensitive), replacing the role's for that service.
        public var services: [String: [Permission]]?

        /// What the user may do with `service`.
        public func permissions(on service: String?) -> Set<Permission> {
            if let service, let entry = services?.first(where: { $0.key.lowercased() == service.lowercased() }) { return Set(entry.value) }
            return role.permissions
        }
    }

    /// The file format version this build writes.
    public static let formatVersion = 1
    /// OWASP's 2023 advice for PBKDF2-HMAC-SHA256.
    public static let iterations = 600_000

    /// The file's format version.
    public var formatVersion: Int
    /// Lower-case hex of the 32-byte key that signs tokens. Several server processes reading one
    /// users file accept each other's tokens.
    public var tokenKey: String
    /// The users.
    public var users: [User]

    /// A new file with a fresh token key and these users (none by default).
    public init(users: [User] = []) {
        formatVersion = Self.formatVersion
        tokenKey = Self.randomHex(32)
        self.users = users
    }

    /// Reads a users file.
    /// - Throws: ``ServiceError`` (500) naming the file when it cannot be read or is not a users file.
    public static func load(from url: URL) throws -> UserFile {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ServiceError(500, "cannot read the users file \(url.path)")
        }
        return try decode(data, source: url.path)
    }

    /// Reads the JSON of a users file from wherever it was kept (`source` names that place in
    /// errors: a path, the site's database).
    /// - Throws: ``ServiceError`` (500) when it is not a users file of this format version.
    public static func decode(_ data: Data, source: String) throws -> UserFile {
        let file: UserFile
        do {
            file = try JSONValueDecoder().decode(UserFile.self, from: data)
        } catch {
            throw ServiceError(500, "\(source) is not an Outpost users file: \(error)")
        }
        guard file.formatVersion == formatVersion, file.tokenKey.count == 64, Self.bytes(hex: file.tokenKey) != nil else {
            throw ServiceError(500, "\(source) is not an Outpost users file of format version \(formatVersion)")
        }
        return file
    }

    /// The JSON a users file holds (as ``save(to:)`` writes it).
    public func encoded() throws -> String {
        ResponseWriting.pretty(try JSONValueEncoder().encode(self)) + "\n"
    }

    /// Writes the file beside `url` with mode 0600 and renames it into place.
    public func save(to url: URL) throws {
        let text = try encoded()
        let partial = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.prefix(8))")
        guard FileManager.default.createFile(atPath: partial.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ServiceError(500, "cannot write \(partial.path)")
        }
        // rename(2) replaces the old file in one step: a reader sees the old file or the new one.
        guard rename(partial.path, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: partial)
            throw ServiceError(500, "cannot replace \(url.path): \(reason)")
        }
    }

    /// The user called `name`, in any case.
    public func user(named name: String) -> User? { users.first { $0.name.lowercased() == name.lowercased() } }

    /// Adds or replaces a user with a new password.
    /// - Throws: ``ServiceError`` (400) for an empty or over-long name or a password under 8 characters.
    public mutating func setUser(_ name: String, role: Role, password: String, services: [String: [Permission]]? = nil) throws {
        guard !name.isEmpty, name.count <= 128, !name.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw ServiceError(400, "a user name is 1–128 characters without spaces")
        }
        guard password.count >= 8 else { throw ServiceError(400, "a password has at least 8 characters") }
        let salt = Self.randomHex(16)
        let hash = try Self.derive(password, salt: salt, iterations: Self.iterations)
        let user = User(name: name, role: role, salt: salt, iterations: Self.iterations, hash: hash, services: services)
        users.removeAll { $0.name.lowercased() == name.lowercased() }
        users.append(user)
        users.sort { $0.name.lowercased() < $1.name.lowercased() }
    }

    /// The user whose name and password these are, or nil. The hash is always computed (with a
    /// stand-in for an unknown name), so an attacker cannot tell the two apart by time.
    public func authenticate(_ name: String, password: String) -> User? {
        let user = user(named: name)
        let salt = user?.salt ?? String(repeating: "0", count: 32)
        let iterations = user?.iterations ?? Self.iterations
        guard let derived = try? Self.derive(password, salt: salt, iterations: iterations), let user else { return nil }
        return Self.constantTimeEqual(Array(derived.utf8), Array(user.hash.utf8)) ? user : nil
    }

    static func derive(_ password: String, salt: String, iterations: Int) throws -> String {
        guard let saltBytes = bytes(hex: salt) else { throw ServiceError(500, "a user's salt is not hex") }
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: saltBytes, using: .sha256, outputByteCount: 32, unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { hex(Array($0)) }
    }

    static func randomHex(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return hex((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    static func bytes(hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        for i in stride(from: 0, to: chars.count, by: 2) {
            guard let a = nibble(chars[i]), let b = nibble(chars[i + 1]) else { return nil }
            out.append(a << 4 | b)
        }
        return out
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
