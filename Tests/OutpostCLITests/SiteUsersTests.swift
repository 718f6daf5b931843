import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

/// A site's users in its PostgreSQL database (`outpost users --postgres`): every host signs in
/// from there, takes the others' tokens, sees a change within a second or two, and counts failed
/// sign-ins together.
@Suite("A site's users in PostgreSQL", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct SiteUsersTests {
    static let password = "a long pass phrase"

    static func users(_ arguments: [String], password: String? = nil) async throws -> CommandResult {
        try await ExternalTools.run(Repository.outpostExecutable.path, ["users"] + arguments, input: password.map { $0 + "\n" }, timeout: 60)
    }

    /// `generateToken` on a host: the token, or the whole answer when there is none.
    static func signIn(_ host: URL, _ name: String, _ password: String = Self.password) async throws -> (token: String?, answer: JSONValue) {
        let r = try await ExternalTools.run(
            "curl", ["-s", "-d", "username=\(name)", "-d", "password=\(password)", "-d", "f=json", host.appendingPathComponent("arcgis/tokens/generateToken").absoluteString])
        let answer = try JSONValue.parse(Data(r.stdout.utf8))
        return (answer["token"]?.stringValue, answer)
    }

    /// A layer query on a host with a token: the ArcGIS error code, or 200.
    static func query(_ host: URL, token: String?) async throws -> Int {
        var url = host.absoluteString + "/arcgis/rest/services/field_inspection/FeatureServer/0/query?where=1%3D1&returnCountOnly=true&f=json"
        if let token { url += "&token=\(token)" }
        let answer = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", url]).stdout.utf8))
        return Int(answer["error"]?["code"]?.integerValue ?? (answer["count"] != nil ? 200 : 0))
    }

    /// Polls `check` for up to `seconds` until it holds.
    static func within(_ seconds: Double, _ check: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await check() { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return try await check()
    }

    @Test(.scaledTimeLimit(minutes: 4))
    func hostsShareUsersTokensAndTheSignInThrottle() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        let database = try #require(service.postgres).url

        // Two administrators add users at the same moment: both land.
        async let crew = Self.users(["add", "crew", "--role", "editor", "--postgres", database, "--password-stdin"], password: Self.password)
        async let office = Self.users(["add", "office", "--role", "viewer", "--service", "field_inspection=query", "--postgres", database], password: Self.password)
        let (added1, added2) = try await (crew, office)
        #expect(added1.succeeded && added1.stdout.contains("added crew (editor)"), "\(added1.stderr)")
        #expect(added2.succeeded, "\(added2.stderr)")
        let list = try await Self.users(["list", "--postgres", database, "--json"])
        #expect(try JSONValue.parse(list.stdout) == [
            ["name": "crew", "role": "editor", "services": [:]], ["name": "office", "role": "viewer", "services": ["field_inspection": ["query"]]],
        ])
        // What the database holds is a users file: it validates against the schema, holds no password.
        let dir = TemporaryDirectory()
        let document = try await ExternalTools.run("psql", [database, "-XAtq", "-c", "SELECT document FROM outpost_security"])
        #expect(!document.stdout.contains(Self.password))
        try Data(document.stdout.utf8).write(to: dir.file("document.json"))
        let checked = try await ExternalTools.python(
            "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1]))); print('ok')",
            [Repository.schema("users.schema.json").path, dir.file("document.json").path])
        #expect(checked.succeeded, "\(checked.stderr)")
        // Refused with a message: both places at once, an unknown user, an unreachable database.
        #expect(try await Self.users(["list", "--postgres", database, "--users", "u.json"]).stderr.contains("not both"))
        let unknown = try await Self.users(["remove", "nobody", "--postgres", database])
        #expect(unknown.status == 1 && unknown.stderr.contains("has no user nobody"), "\(unknown.stderr)")
        let away = try await Self.users(["list", "--postgres", "postgres://outpost@127.0.0.1:1/none"])
        #expect(away.status == 1 && away.stderr.contains("cannot reach PostgreSQL"), "\(away.stderr)")

        // A users file beside the site's users is refused at start, not merged.
        let file = dir.file("users.json")
        #expect(try await Self.users(["add", "local", "--role", "admin", "--users", file.path], password: Self.password).succeeded)
        let log = dir.file("refused.log")
        await #expect(throws: (any Error).self) { try await ServeProcess.start(source: service.serveArguments, arguments: ["--users", file.path], errorLog: log) }
        #expect(try String(contentsOf: log, encoding: .utf8).contains("holds the site's users"))

        let a = try await ServeProcess.start(service), b = try await ServeProcess.start(service)
        defer { Task { _ = await a.stop(); _ = await b.stop() } }

        // A token from one host works on the other; a viewer may not edit there.
        let token = try #require(try await Self.signIn(a.url, "crew").token)
        #expect(try await Self.query(b.url, token: token) == 200)
        #expect(try await Self.query(b.url, token: nil) == 499)
        let officeToken = try #require(try await Self.signIn(b.url, "office").token)
        let edit = try await ExternalTools.run(
            "curl", ["-s", "-d", "token=\(officeToken)", "--data-urlencode", #"adds=[{"attributes":{"asset_id":"S-1","asset_type":"valve"}}]"#,
                     b.url.absoluteString + "/arcgis/rest/services/field_inspection/FeatureServer/0/applyEdits"])
        #expect(edit.stdout.contains("\"code\":403"), "\(edit.stdout)")

        // Changes reach both hosts: a user added later signs in on either; a removed user's
        // tokens stop working on both.
        // (Waited for through the removed user's token, not by signing in until it works: each
        // refused sign-in counts against the address, which the throttle below counts too.)
        #expect(try await Self.users(["add", "late", "--role", "viewer", "--postgres", database], password: Self.password).succeeded)
        #expect(try await Self.users(["remove", "crew", "--postgres", database]).succeeded)
        for host in [a, b] {
            #expect(try await Self.within(5) { try await Self.query(host.url, token: token) == 498 })
        }
        #expect(try await Self.signIn(b.url, "late").token != nil)

        // Failed sign-ins count across hosts: three on A and two on B, and the sixth attempt,
        // with the right password, is refused on either.
        for (host, count) in [(a, 3), (b, 2)] {
            for _ in 0..<count {
                let refused = try await Self.signIn(host.url, "office", "wrong guess").answer
                #expect(refused["error"]?["code"] == 400, "\(refused)")
            }
        }
        for host in [a, b] {
            let throttled = try await Self.signIn(host.url, "office")
            #expect(throttled.token == nil && throttled.answer["error"]?["code"] == 429, "\(throttled.answer)")
        }
    }
}
