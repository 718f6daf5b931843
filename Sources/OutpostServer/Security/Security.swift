import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OutpostCore
import OutpostSyncService

/// The request context of the server: Hummingbird's, plus the peer's address (tokens issued
/// with `client=requestip` are bound to it).
public struct OutpostRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The request's connection, for long work to stop when its client leaves (see
    /// ``ClientDeparture``).
    let channel: any Channel
    /// The request's path segments, percent-decoded: split once, by ``RequestIDMiddleware``,
    /// for the middleware and routes after it.
    var segments: [String] = []
    /// The request's parameters, once ``RequestArgumentsMiddleware`` has read them.
    var arguments = RequestParameters(query: nil, formBody: nil)
    /// Who is calling, once ``AuthenticationMiddleware`` has found out (until then, nobody).
    var caller = Caller.anonymous

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }
}

/// Who is calling, and what they may do with each service.
enum Caller: Sendable {
    /// No security configured: anyone may do anything.
    case anyone
    /// A static token of `--token`/`--tokens`.
    case staticToken(TokenPolicy.Scope)
    /// A user, by a token from `generateToken`.
    case user(UserFile.User)
    /// No token on a server with security: may see that the server exists, nothing more.
    case anonymous

    func permissions(on service: String?) -> Set<Permission> {
        switch self {
        case .anyone: Set(Permission.allCases)
        case .anonymous: []
        case .staticToken(.read): [.query]
        case .staticToken(.edit): [.query, .edit, .sync]
        case .staticToken(.admin): Set(Permission.allCases)
        case .user(let user): user.permissions(on: service)
        }
    }
}

/// Token security like ArcGIS Server's: static tokens, users with roles whose tokens come from
/// `generateToken`, the ArcGIS error codes (499 token required, 498 invalid or expired token,
/// 403 not permitted), and failed logins throttled per user name and per address.
final class Security: Sendable {
    let staticTokens: TokenPolicy?
    let users: UserDirectory?
    let throttle: LoginThrottle
    let clock: WallClock

    init(configuration: ServerConfiguration) {
        staticTokens = configuration.tokens
        clock = configuration.clock
        if let records = configuration.securityRecords {
            users = UserDirectory(source: .records(records), clock: configuration.clock)
        } else {
            users = configuration.usersFile.map { UserDirectory(source: .file($0), clock: configuration.clock) }
        }
        throttle = LoginThrottle(clock: configuration.clock, records: configuration.securityRecords)
    }

    var isEnabled: Bool { staticTokens != nil || users != nil }

    /// The longest and the default life of a token, as ArcGIS's defaults (minutes).
    static let defaultMinutes = 60
    static let maximumMinutes = 14 * 24 * 60

    /// The token a request carries: `token=`, `Authorization: Bearer …` or
    /// `X-Esri-Authorization: Bearer …` (the ArcGIS API for Python's header).
    static func token(_ request: Request, _ parameters: RequestParameters) -> String? {
        for name in ["Authorization", "X-Esri-Authorization"] {
            if let header = request.headers[HTTPField.Name(name)!], header.lowercased().hasPrefix("bearer ") {
                let value = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
                if !value.isEmpty { return value }
            }
        }
        return parameters["token"]
    }

    /// Who the request is from. Never includes the token in an error message.
    /// - Throws: ``ServiceError`` 499 when security is on and no token came, 498 for a token that
    ///   is unknown, forged, expired, bound to another client, or whose user is gone.
    /// - Parameter anonymousAllowed: a request without a token is ``Caller/anonymous`` (the
    ///   catalog, as ArcGIS's, lists what such a caller may see: nothing) instead of a 499.
    func caller(_ request: Request, _ parameters: RequestParameters, remote: SocketAddress?, anonymousAllowed: Bool = false) async throws -> Caller {
        guard isEnabled else { return .anyone }
        guard let token = Self.token(request, parameters) else {
            if anonymousAllowed { return .anonymous }
            throw Self.tokenRequired
        }
        if let scope = staticTokens?.tokens[token] { return .staticToken(scope) }
        guard let users, token.hasPrefix(SignedToken.prefix) else { throw Self.invalidToken }
        let signed: SignedToken, file: UserFile
        do {
            (signed, file) = try await users.verify(token)
        } catch SignedToken.Failure.expired {
            throw ServiceError(401, "Invalid Token", code: 498, details: ["the token has expired"])
        } catch is SignedToken.Failure {
            throw Self.invalidToken
        }
        if let binding = signed.binding {
            let matches: Bool
            if binding.hasPrefix("ip:") {
                matches = remote?.ipAddress == String(binding.dropFirst(3))
            } else if binding.hasPrefix("ref:") {
                matches = request.headers[.referer].map { Self.sameReferer($0, String(binding.dropFirst(4))) } ?? false
            } else {
                matches = false
            }
            guard matches else { throw ServiceError(401, "Invalid Token", code: 498, details: ["the token was issued for another client"]) }
        }
        guard let user = file.user(named: signed.user) else { throw Self.invalidToken }
        return .user(user)
    }

    static let invalidToken = ServiceError(401, "Invalid Token", code: 498)
    static let tokenRequired = ServiceError(401, "Token Required", code: 499, details: ["pass token=, or Authorization: Bearer <token>"])

    /// A token bound to a referer is good for pages under it (ArcGIS compares the start).
    static func sameReferer(_ header: String, _ bound: String) -> Bool {
        header == bound || header.hasPrefix(bound.hasSuffix("/") ? bound : bound + "/") || header.hasPrefix(bound + "?")
    }

    /// Refuses a caller that lacks `permission` on `service`.
    static func require(_ permission: Permission, of caller: Caller, on service: String?) throws {
        guard caller.permissions(on: service).contains(permission) else {
            throw ServiceError(403, "You do not have permissions to access this resource or perform this operation.", details: ["\(permission.rawValue) is not granted"])
        }
    }

    /// `POST /arcgis/tokens/generateToken`: a signed token for a user's name and password.
    func generateToken(_ parameters: RequestParameters, request: Request, remote: SocketAddress?, secure: Bool) async throws -> JSONValue {
        guard let users else {
            throw ServiceError(400, "Unable to generate token.", details: ["this server has no users (outpost serve --users)"])
        }
        guard let name = parameters["username"], let password = parameters["password"] else {
            throw ServiceError(400, "Unable to generate token.", details: ["'username' and 'password' are required"])
        }
        let address = remote?.ipAddress ?? "unknown"
        let keys = ["user:" + name.lowercased(), "ip:" + address]
        try await throttle.check(keys)
        let file = try await users.current()
        guard let user = file.authenticate(name, password: password) else {
            try await throttle.failed(keys)
            throw ServiceError(400, "Unable to generate token.", details: ["Invalid username or password."])
        }
        try await throttle.succeeded("user:" + name.lowercased())
        let minutes = try parameters.int("expiration", range: 1...Self.maximumMinutes) ?? Self.defaultMinutes
        let binding: String?
        switch (parameters["client"] ?? (parameters["referer"] != nil ? "referer" : "requestip")).lowercased() {
        case "requestip": binding = remote?.ipAddress.map { "ip:" + $0 }
        case "ip":
            guard let ip = parameters["ip"] else { throw ServiceError.badParameter("ip", "client=ip needs the address in 'ip'") }
            binding = "ip:" + ip
        case "referer":
            guard let referer = parameters["referer"] else { throw ServiceError.badParameter("referer", "client=referer needs 'referer'") }
            binding = "ref:" + referer
        case "none", "anonymous": binding = nil
        case let other: throw ServiceError.badParameter("client", "\"\(other.prefix(20))\" is not requestip, ip, referer or none")
        }
        let expires = clock.now().addingTimeInterval(TimeInterval(minutes * 60))
        guard let key = UserFile.bytes(hex: file.tokenKey) else { throw ServiceError(500, "the users' token key is damaged") }
        let token = SignedToken(user: user.name, expires: expires, binding: binding).encoded(key: key)
        return ["token": .string(token), "expires": .integer(Int64(expires.timeIntervalSince1970 * 1000)), "ssl": .bool(secure)]
    }

    /// `…/rest/info`'s `authInfo`.
    func authInfo(publicBase: String) -> JSONValue {
        guard isEnabled else { return ["isTokenBasedSecurity": false] }
        return [
            "isTokenBasedSecurity": true, "tokenServicesUrl": .string("\(publicBase)/arcgis/tokens/generateToken"),
            "shortLivedTokenValidity": .integer(Int64(Self.defaultMinutes)),
        ]
    }
}

/// Where the users come from: a users file, or the site's database.
enum UserSource: Sendable {
    /// A users file (`outpost serve --users`), read again when its modification time changes.
    case file(URL)
    /// The users document of a site (`outpost users --postgres`), read again when its version
    /// changes.
    case records(any SecurityRecordStore)
}

/// The users, read again when they change (checked at most once a second), so `outpost users
/// add` takes effect on a running server (on every host of a site); and the tokens already
/// verified against them, so a token is hashed once per version of the users rather than on
/// every request.
final class UserDirectory: Sendable {
    let source: UserSource
    /// What tells one version of the users from another: the file's modification time, the
    /// document's version number.
    private enum Version: Equatable {
        case modified(Date?)
        case number(Int64?)
    }
    private struct State {
        var file: UserFile?
        var version: Version?
        var checked = Date.distantPast
        /// Bumped on every reload: a token verified against older users is not remembered.
        var generation = 0
        var verified: [String: SignedToken] = [:]
    }
    private let state = Locked(State())
    /// Verified tokens remembered at most (the memory is cleared when full).
    static let verifiedLimit = 4096

    /// Where it reads the time (tokens' expiry, when to look at the users again).
    let clock: WallClock

    init(source: UserSource, clock: WallClock = .system) {
        self.source = source
        self.clock = clock
    }

    func current() async throws -> UserFile { try await currentWithGeneration().file }

    private func currentWithGeneration() async throws -> (file: UserFile, generation: Int) {
        let now = clock.now()
        if let cached = state.withLock({ s in now.timeIntervalSince(s.checked) < 1 ? s.file.map { ($0, s.generation) } : nil }) { return cached }
        let version: Version
        switch source {
        case .file(let url): version = .modified((try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date)
        case .records(let records): version = .number(try await records.securityVersion())
        }
        if let cached = state.withLock({ s -> (UserFile, Int)? in
            s.checked = now
            return s.version == version ? s.file.map { ($0, s.generation) } : nil
        }) {
            return cached
        }
        let file: UserFile, read: Version
        switch source {
        case .file(let url): (file, read) = (try UserFile.load(from: url), version)
        case .records(let records):
            // No document yet: a site without users, where nobody signs in.
            guard let document = try await records.securityDocument() else {
                (file, read) = (UserFile(users: []), .number(nil))
                break
            }
            (file, read) = (try UserFile.decode(Data(document.text.utf8), source: "the site's users in the database"), .number(document.version))
        }
        return state.withLock { s in
            s.file = file
            s.version = read
            s.checked = now
            s.generation += 1
            s.verified.removeAll()
            return (file, s.generation)
        }
    }


    /// The token `text` signed with the current users' key, and those users. Its expiry is
    /// checked on every call; its signature once per version of the users.
    /// - Throws: ``SignedToken/Failure``, or the users' read error.
    func verify(_ text: String, now given: Date? = nil) async throws -> (token: SignedToken, file: UserFile) {
        let now = given ?? clock.now()
        let (file, generation) = try await currentWithGeneration()
        if let known = state.withLock({ $0.generation == generation ? $0.verified[text] : nil }) {
            guard known.expires > now else { throw SignedToken.Failure.expired }
            return (known, file)
        }
        guard let key = UserFile.bytes(hex: file.tokenKey) else { throw SignedToken.Failure.invalid }
        let token = try SignedToken.decode(text, key: key, now: now)
        state.withLock { s in
            guard s.generation == generation else { return }
            if s.verified.count >= Self.verifiedLimit { s.verified.removeAll() }
            s.verified[text] = token
        }
        return (token, file)
    }
}

/// Failed logins per key (a user name, an address): after 5 within 15 minutes, further attempts
/// are refused (429) until the oldest of them is 15 minutes old. Counted in this process, or
/// with the site's records in the database, by every host of the site together (an attacker
/// spreading guesses over the hosts behind a load balancer gets no more of them).
final class LoginThrottle: Sendable {
    static let limit = 5
    static let window: TimeInterval = 15 * 60
    private let failures = Locked<[String: [Date]]>([:])
    /// Where a site counts its failures (nil: in this process).
    let records: (any SecurityRecordStore)?
    /// Where it reads the time.
    let clock: WallClock

    init(clock: WallClock = .system, records: (any SecurityRecordStore)? = nil) {
        self.clock = clock
        self.records = records
    }

    func check(_ keys: [String]) async throws {
        let now = clock.now()
        var wait: TimeInterval?
        if let records {
            let since = Self.milliseconds(now.addingTimeInterval(-Self.window))
            for (_, recent) in try await records.failedSignIns(keys, since: since) where recent.count >= Self.limit {
                wait = max(wait ?? 0, Self.window - now.timeIntervalSince(Date(timeIntervalSince1970: TimeInterval(recent.oldest) / 1000)))
            }
        } else {
            wait = failures.withLock { all -> TimeInterval? in
                var longest: TimeInterval?
                for key in keys {
                    let recent = (all[key] ?? []).filter { now.timeIntervalSince($0) < Self.window }
                    all[key] = recent.isEmpty ? nil : recent
                    if recent.count >= Self.limit, let oldest = recent.first {
                        longest = max(longest ?? 0, Self.window - now.timeIntervalSince(oldest))
                    }
                }
                return longest
            }
        }
        if let wait {
            throw ServiceError(429, "Too many failed logins; try again in \(max(1, Int(wait.rounded(.up)))) seconds.")
        }
    }

    func failed(_ keys: [String]) async throws {
        let now = clock.now()
        if let records {
            try await records.recordFailedSignIn(keys, at: Self.milliseconds(now))
        } else {
            failures.withLock { all in for key in keys { all[key, default: []].append(now) } }
        }
    }

    func succeeded(_ key: String) async throws {
        if let records {
            try await records.clearFailedSignIns(key)
        } else {
            failures.withLock { _ = $0.removeValue(forKey: key) }
        }
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

}
