import Foundation
import HTTPTypes
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

@testable import OutpostServer

/// Security like ArcGIS Server's: users with roles sign in with generateToken and get signed,
/// expiring tokens; `rest/info` says so; missing and bad tokens answer ArcGIS's 499 and 498;
/// each role is held to its permissions; failed logins are throttled.
@Suite("Users, roles and tokens")
struct UserTokenTests {
    static let password = "correct horse battery"

    /// A users file: a viewer, an editor, an admin, and a viewer who may edit one service.
    static func usersFile(_ directory: TemporaryDirectory) throws -> URL {
        let url = directory.file("users.json")
        try users.get().save(to: url)
        return url
    }

    /// The users, made once for the suite, each with 1,000 rounds of PBKDF2 recorded in the file
    /// instead of `setUser`'s 600,000 (held by `tokensRoundTripAndFailClosed`): a sign-in
    /// derives the key with the rounds the user's entry names, and at 600,000 the suite's
    /// hundred sign-ins were 84% of its CPU (PBKDF2 in the debug build's unoptimised BoringSSL).
    static let users = Result<UserFile, any Error> {
        let entries: [(String, Role, [String: [Permission]]?)] = [
            ("vera", .viewer, nil), ("ed", .editor, nil), ("ada", .admin, nil),
            ("fieldcrew", .viewer, ["field_inspection": [.query, .edit]]), ("outsider", .editor, ["field_inspection": []]),
        ]
        return UserFile(users: try entries.map { name, role, services in
            let salt = UserFile.randomHex(16)
            let hash = try UserFile.derive(password, salt: salt, iterations: 1_000)
            return UserFile.User(name: name, role: role, salt: salt, iterations: 1_000, hash: hash, services: services)
        })
    }

    func withSecuredServer(
        _ kind: BackendKind, maps: [URL] = [], publicMetrics: Bool = false, clock: WallClock = .system,
        _ body: @Sendable (Client, TestService, URL) async throws -> Void
    ) async throws {
        let directory = TemporaryDirectory()
        let users = try Self.usersFile(directory)
        var configuration = ServerConfiguration(port: 0, tokens: TokenPolicy(tokens: ["static-reader": .read, "static-admin": .admin]))
        configuration.usersFile = users
        configuration.publicMetrics = publicMetrics
        configuration.clock = clock
        try await withServer(kind, configuration: configuration, maps: maps) { client, service in try await body(client, service, users) }
        withExtendedLifetime(directory) {}
    }

    /// The routes docs/cli.md ("Security") lists as open answer without a token, and only what
    /// it says: `/metrics` needs an admin, `/ready` gives its status alone, the map list (like
    /// the catalog) lists what the caller may read; each asked with no token, a forged one, a
    /// viewer's and an admin's. `--public-metrics` opens `/metrics` alone.
    @Test func theRoutesOpenWithoutATokenAreTheDocumentedOnes() async throws {
        let maps = [Repository.schema("examples/field-crews.map.json")]
        try await withSecuredServer(.sqlite, maps: maps) { client, _, _ in
            let forged = "outpost1.eyJ1IjoiYWRhIn0.Zm9yZ2Vk"
            let vera = try await Self.token(client, "vera"), ada = try await Self.token(client, "ada"), outsider = try await Self.token(client, "outsider")
            func get(_ path: String, _ token: String?) async throws -> Client.Reply {
                try await client.get(path + (token.map { (path.contains("?") ? "&" : "?") + "token=\($0)" } ?? ""))
            }
            // /metrics: 499, 498, 403, then 200 for an admin (a user or a static admin token).
            #expect(try await get("/metrics", nil).errorCode == 499)
            #expect(try await get("/metrics", forged).errorCode == 498)
            #expect(try await get("/metrics", vera).status == 403)
            let metrics = try await get("/metrics", ada)
            #expect(metrics.status == 200 && metrics.text.contains("outpost_http_requests_total"))
            #expect(try await get("/metrics", "static-admin").status == 200)
            #expect(try await get("/metrics", "static-reader").status == 403)
            // /ready: its status to anyone, no service names but to an admin; a forged token 498.
            #expect(try await get("/ready", nil).json() == ["status": "ready", "services": 1])
            #expect(try await get("/ready", vera).json() == ["status": "ready", "services": 1])
            #expect(try await get("/ready", forged).errorCode == 498)
            // The map list: none without a token, 498 forged, the map for a viewer, not for a
            // user who may not query one of its services; the map itself likewise.
            #expect(try await get("/arcgis/rest/maps?f=json", nil).json() == ["maps": []])
            #expect(try await get("/arcgis/rest/maps?f=json", forged).errorCode == 498)
            #expect(try await get("/arcgis/rest/maps?f=json", vera).json()["maps"]?[0]?["name"] == "field-crews")
            #expect(try await get("/arcgis/rest/maps?f=json", outsider).json() == ["maps": []])
            #expect(try await get("/arcgis/rest/maps/field-crews.json", nil).errorCode == 499)
            #expect(try await get("/arcgis/rest/maps/field-crews.json", outsider).status == 403)
            #expect(try await get("/arcgis/rest/maps/field-crews.json", vera).status == 200)
            #expect(try await get("/arcgis/rest/maps/field-crews/areas?f=json", outsider).status == 403)
            // And the rest stay as they were: open to anyone, or behind a token.
            #expect(try await get("/health", nil).status == 200)
            #expect(try await get("/arcgis/rest/info?f=json", nil).status == 200)
            #expect(try await get("/arcgis/rest/services?f=json", nil).json()["services"] == [])
            #expect(try await get("\(base)?f=json", nil).errorCode == 499)
        }
        try await withSecuredServer(.sqlite, publicMetrics: true) { client, _, _ in
            let open = try await client.get("/metrics"), guarded = try await client.get("\(base)?f=json")
            #expect(open.status == 200 && guarded.errorCode == 499)
        }
    }

    /// Reading a replica's feed changes nothing for a viewer (no `last_sync_at`, no generation
    /// recorded) and records what the replica holds for a caller that may sync it; a window
    /// reaching past the service's generation is a 400 naming `since` or `upto`.
    @Test(arguments: BackendKind.available)
    func readingTheFeedChangesNothingAndAWindowPastTheServiceIsRefused(kind: BackendKind) async throws {
        try await withSecuredServer(kind) { client, _, _ in
            let ed = try await Self.token(client, "ed"), vera = try await Self.token(client, "vera")
            let created = try await client.post("\(base)/createReplica", ["layers": "0", "dataFormat": "json", "token": ed]).json()
            let id = try #require(created["replicaID"]?.stringValue, "\(created)")
            let native = "/outpost/v1/services/field_inspection/replicas/\(id)"
            // An edit, so the window 0…generation holds a change.
            let adds = #"[{"attributes":{"asset_id":"R-9","asset_type":"valve"},"geometry":{"x":-122.65,"y":45.52}}]"#
            #expect(try await client.post("\(base)/0/applyEdits", ["adds": adds, "token": ed]).status == 200)
            let before = try await client.get("\(native)?token=\(ed)").json()
            let generation = try #require(before["serviceGeneration"]?.integerValue)
            let since = try #require(before["replicaServerGen"]?.integerValue)
            #expect(since < generation)

            let read = try await client.get("\(native)/changes?layer=0&since=\(since)&upto=\(generation)&limit=10&token=\(vera)")
            #expect(read.status == 200, "\(read.text)")
            let unchanged = try await client.get("\(native)?token=\(ed)").json()
            #expect(unchanged["lastSyncDate"] == before["lastSyncDate"] && unchanged["replicaServerGen"] == before["replicaServerGen"], "\(unchanged)")

            for (query, parameter) in [
                ("since=0&upto=9223372036854775807", "upto"), ("since=\(generation + 1)&upto=\(generation + 1)", "since"),
                ("since=\(since)&upto=\(generation + 5)", "upto"),
            ] {
                for token in [vera, ed] {
                    let past = try await client.get("\(native)/changes?layer=0&\(query)&limit=10&token=\(token)")
                    #expect(past.status == 400 && past.text.contains("'\(parameter)'"), "\(query): \(past.text)")
                }
            }
            #expect(try await client.get("\(native)?token=\(ed)").json()["lastSyncDate"] == before["lastSyncDate"])

            // The replica's own sync records it.
            #expect(try await client.get("\(native)/changes?layer=0&since=\(generation)&upto=\(generation)&limit=10&token=\(ed)").status == 200)
            let synced = try await client.get("\(native)?token=\(ed)").json()
            #expect(synced["replicaServerGen"]?.integerValue == generation && synced["lastSyncDate"] != before["lastSyncDate"], "\(synced)")
        }
    }


    static func signIn(_ client: Client, _ name: String, password: String = password, extra: [String: String] = [:]) async throws -> Client.Reply {
        try await client.post("/arcgis/tokens/generateToken", ["username": name, "password": password, "client": "none", "f": "json"].merging(extra) { $1 })
    }

    static func token(_ client: Client, _ name: String) async throws -> String {
        let reply = try await signIn(client, name)
        return try #require(try reply.json()["token"]?.stringValue, "\(reply.text)")
    }

    @Test(arguments: BackendKind.available)
    func rolesGetWhatTheyAreAllowed(kind: BackendKind) async throws {
        try await withSecuredServer(kind) { client, service, _ in
            let info = try await client.get("/arcgis/rest/info?f=json").json()
            #expect(info["authInfo"]?["isTokenBasedSecurity"] == true)
            #expect(info["authInfo"]?["tokenServicesUrl"]?.stringValue?.hasSuffix("/arcgis/tokens/generateToken") == true)

            let missing = try await client.get("\(base)?f=json")
            #expect(missing.status == 401 && missing.errorCode == 499)
            // The catalog answers without a token, with what an anonymous caller may see: nothing.
            #expect(try await client.get("/arcgis/rest/services?f=json").json() == ["currentVersion": 11.1, "folders": [], "services": []])
            // The portal resources portal-minded clients read first say what this server is.
            let sharing = try await client.get("/arcgis/sharing/rest/info?f=json").json()
            #expect(sharing["authInfo"]?["isTokenBasedSecurity"] == true && sharing["owningSystemUrl"]?.stringValue?.hasSuffix("/arcgis") == true)
            let portal = try await client.get("/arcgis/sharing/rest/portals/self?f=json").json()
            #expect(portal["supportsHostedServices"] == false && portal["user"] == nil)
            #expect(try await client.get("/arcgis/sharing/rest/community/self?f=json").errorCode == 499)
            let signed = try await Self.signIn(client, "vera", extra: ["expiration": "30"])
            let expires = try #require(try signed.json()["expires"]?.integerValue)
            #expect(abs(Double(expires) / 1000 - Date().addingTimeInterval(1800).timeIntervalSince1970) < 60)

            let vera = try await Self.token(client, "vera"), ed = try await Self.token(client, "ed"), crew = try await Self.token(client, "fieldcrew")
            let outsider = try await Self.token(client, "outsider")
            let adds = #"[{"attributes":{"asset_id":"R-1","asset_type":"valve"},"geometry":{"x":-122.65,"y":45.52}}]"#
            let before = try await service.snapshot()

            #expect(try await client.get("\(base)/0/query?where=1%3D1&returnCountOnly=true&token=\(vera)").json() == ["count": 300])
            let viewerEdit = try await client.post("\(base)/0/applyEdits", ["adds": adds, "token": vera])
            #expect(viewerEdit.status == 403 && viewerEdit.errorCode == 403, "\(viewerEdit.text)")
            let viewerSync = try await client.post("\(base)/createReplica", ["layers": "0", "token": vera])
            #expect(viewerSync.status == 403, "a viewer cannot take a replica")
            let staticReader = try await client.post("\(base)/0/applyEdits", ["adds": adds, "token": "static-reader"])
            #expect(staticReader.status == 403, "static tokens keep their scopes")
            #expect(try await service.snapshot() == before, "refused requests changed nothing")

            // The same header the ArcGIS API for Python sends.
            let edited = try await client.post("\(base)/0/applyEdits", ["adds": adds], headers: [HTTPField.Name("X-Esri-Authorization")!: "Bearer \(ed)"])
            #expect(try edited.json()["addResults"]?[0]?["success"] == true, "\(edited.text)")
            #expect(try await client.post("\(base)/createReplica", ["layers": "0", "dataFormat": "json", "token": ed]).status == 200)
            // Per-service permissions replace the role's.
            #expect(try await client.post("\(base)/0/applyEdits", ["adds": adds, "token": crew]).status == 200)
            #expect(try await client.post("\(base)/createReplica", ["layers": "0", "token": crew]).status == 403)
            #expect(try await client.get("\(base)?f=json&token=\(outsider)").status == 403)
            #expect(try await client.get("/arcgis/rest/services?f=json&token=\(outsider)").json()["services"] == [], "the catalog lists only what a caller may see")
            #expect(try await client.get("/arcgis/rest/services?f=json&token=\(vera)").json()["services"]?.arrayValue?.count == 1)
            let me = try await client.get("/arcgis/sharing/rest/community/self?f=json&token=\(ed)").json()
            #expect(me["username"] == "ed" && me["role"] == "org_publisher")
            #expect(try await client.get("/arcgis/sharing/rest/community/users/vera?f=json&token=\(ed)").status == 403, "only oneself")
        }
    }

    @Test(arguments: BackendKind.available)
    func badTokensAndSignInsAreRefused(kind: BackendKind) async throws {
        let time = ManualClock()
        try await withSecuredServer(kind, clock: time.clock) { client, _, usersURL in
            let file = try UserFile.load(from: usersURL)
            let key = try #require(UserFile.bytes(hex: file.tokenKey))
            func status(_ token: String, headers: HTTPFields = [:]) async throws -> (Int, JSONValue?) {
                let reply = try await client.get("\(base)?f=json&token=\(q(token))", headers: headers)
                return (reply.status, try? reply.json()["error"]?["code"])
            }
            let expired = SignedToken(user: "ed", expires: time.clock.now().addingTimeInterval(-5), binding: nil).encoded(key: key)
            #expect(try await status(expired) == (401, 498))
            let otherKey = SignedToken(user: "ada", expires: Date().addingTimeInterval(600), binding: nil).encoded(key: Array(repeating: 7, count: 32))
            #expect(try await status(otherKey) == (401, 498), "a token signed with another key is forged")
            var altered = SignedToken(user: "ed", expires: Date().addingTimeInterval(600), binding: nil).encoded(key: key)
            altered = altered.replacingOccurrences(of: "o1.", with: "o1.e")
            #expect(try await status(altered) == (401, 498))
            #expect(try await status("nonsense") == (401, 498))

            let referer = try await Self.signIn(client, "ed", extra: ["client": "referer", "referer": "https://maps.example.org/app"])
            let bound = try #require(try referer.json()["token"]?.stringValue)
            #expect(try await status(bound, headers: [.referer: "https://maps.example.org/app/index.html"]).0 == 200)
            #expect(try await status(bound, headers: [.referer: "https://evil.example/app"]) == (401, 498))
            #expect(try await status(bound) == (401, 498), "a referer-bound token without the referer")

            // A removed user's tokens stop working (the file is read again when it changes).
            let ada = try await Self.token(client, "ada")
            #expect(try await status(ada).0 == 200)
            var changed = try UserFile.load(from: usersURL)
            changed.users.removeAll { $0.name == "ada" }
            try changed.save(to: usersURL)
            time.advance(by: 1.1)
            #expect(try await status(ada) == (401, 498))

            // Sign-in: POST only, the password never in the URL, wrong ones throttled.
            #expect(try await client.get("/arcgis/tokens/generateToken?username=ed&password=x&f=json").status == 405)
            let inURL = try await client.post("/arcgis/tokens/generateToken?password=\(q(Self.password))", ["username": "ed", "f": "json"])
            #expect(inURL.status == 400)
            for _ in 0..<LoginThrottle.limit {
                let wrong = try await Self.signIn(client, "vera", password: "not the password")
                #expect(wrong.status == 400 && (try? wrong.json())?["error"]?["details"]?[0] == "Invalid username or password.")
            }
            let throttled = try await Self.signIn(client, "vera")
            #expect(throttled.status == 429, "the right password is refused too until the window passes: \(throttled.text)")
            #expect(try await Self.signIn(client, "nobody", password: "whatever-it-is").status == 429, "the address is throttled too")
        }
    }

    @Test func tokensRoundTripAndFailClosed() throws {
        let key = Array(repeating: UInt8(3), count: 32)
        let token = SignedToken(user: "ann", expires: Date(timeIntervalSince1970: 4_000_000_000), binding: "ip:10.0.0.1")
        let text = token.encoded(key: key)
        let before = Date(timeIntervalSince1970: 3_999_999_999)
        #expect(try SignedToken.decode(text, key: key, now: before) == token)
        #expect(throws: SignedToken.Failure.expired) { try SignedToken.decode(text, key: key, now: Date(timeIntervalSince1970: 4_000_000_001)) }
        #expect(throws: SignedToken.Failure.invalid) { try SignedToken.decode(text + "A", key: key, now: before) }
        #expect(throws: SignedToken.Failure.invalid) { try SignedToken.decode(String(text.dropLast(2)), key: key, now: before) }

        var file = UserFile()
        try file.setUser("ann", role: .editor, password: "long enough")
        #expect(file.authenticate("ANN", password: "long enough")?.name == "ann")
        #expect(file.authenticate("ann", password: "long enougH") == nil && file.authenticate("bob", password: "long enough") == nil)
        #expect(throws: ServiceError.self) { try file.setUser("bob", role: .viewer, password: "short") }
        #expect(file.users[0].hash.count == 64 && file.users[0].iterations >= 600_000, "salted PBKDF2-HMAC-SHA256")
    }

    /// A token is hashed once per users-file version; its expiry still counts on every use, and a
    /// file written again with a new key forgets every token verified against the old one.
    @Test func verifiedTokensAreRememberedPerFileVersion() async throws {
        let directory = TemporaryDirectory()
        let url = directory.url.appendingPathComponent("users.json")
        var file = UserFile()
        try file.setUser("ann", role: .viewer, password: "long enough")
        try file.save(to: url)
        let time = ManualClock()
        let users = UserDirectory(source: .file(url), clock: time.clock)
        let key = try #require(UserFile.bytes(hex: file.tokenKey))
        let expiry = time.clock.now().addingTimeInterval(3600)
        let text = SignedToken(user: "ann", expires: expiry, binding: nil).encoded(key: key)

        #expect(try await users.verify(text).token.user == "ann")
        #expect(try await users.verify(text).token.user == "ann", "the remembered token")
        await #expect(throws: SignedToken.Failure.expired) { try await users.verify(text, now: expiry.addingTimeInterval(1)) }
        await #expect(throws: SignedToken.Failure.invalid) { try await users.verify(text + "A") }

        var rotated = UserFile()
        try rotated.setUser("ann", role: .viewer, password: "long enough")
        try rotated.save(to: url)
        // The file is looked at again at most once a second; its time must differ from the first.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(5)], ofItemAtPath: url.path)
        time.advance(by: 1.1)
        await #expect(throws: SignedToken.Failure.invalid, "signed with the old key") { try await users.verify(text) }
    }
}

/// A clock that moves only when told: time passes in a test without sleeping.
final class ManualClock: Sendable {
    private let time = Locked(Date(timeIntervalSince1970: 1_796_212_800))

    /// The clock to hand to what is tested.
    var clock: WallClock { WallClock { [self] in self.time.withLock { $0 } } }

    /// Moves the clock `seconds` on.
    func advance(by seconds: TimeInterval) { time.withLock { $0 += seconds } }
}
