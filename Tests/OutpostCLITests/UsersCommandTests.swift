import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `outpost users` and `outpost serve --users` as an operator runs them: users added from a
/// script, tokens from generateToken over real HTTP, tokens bound to the requesting address,
/// nothing secret in the server's log, and hostile requests refused.
@Suite("outpost users and a secured server")
struct UsersCommandTests {
    static let password = "a long pass phrase"

    static func request(_ url: URL, method: String = "GET", form: [(String, String)]? = nil, headers: [String: String] = [:]) async throws -> (Int, JSONValue?, Data) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let form {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(form.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&").utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, try? JSONValue.parse(data), data)
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func operatorsAddUsersAndClientsSignIn() async throws {
        let dir = TemporaryDirectory()
        let users = dir.file("users.json")
        let add = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["users", "add", "crew", "--role", "editor", "--users", users.path, "--password-stdin"], input: Self.password + "\n")
        #expect(add.succeeded, "\(add.stderr)")
        let viewer = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["users", "add", "office", "--role", "viewer", "--service", "field_inspection=query,sync", "--users", users.path],
            input: Self.password + "\n")
        #expect(viewer.succeeded, "\(viewer.stderr)")
        #expect((try FileManager.default.attributesOfItem(atPath: users.path)[.posixPermissions] as? Int) == 0o600)
        #expect(!(try String(contentsOf: users, encoding: .utf8)).contains(Self.password), "only a hash is stored")
        let list = try await outpost(["users", "list", "--users", users.path, "--json"])
        #expect(try JSONValue.parse(list.stdout) == [
            ["name": "crew", "role": "editor", "services": [:]], ["name": "office", "role": "viewer", "services": ["field_inspection": ["query", "sync"]]],
        ])
        let valid = try await ExternalTools.python(
            "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1]))); print('ok')",
            [Repository.schema("users.schema.json").path, users.path])
        #expect(valid.succeeded, "the users file validates against its schema: \(valid.stderr)")
        let short = try await ExternalTools.run(Repository.outpostExecutable.path, ["users", "add", "x", "--role", "admin", "--users", users.path], input: "short\n")
        #expect(short.status == 1 && short.stderr.contains("at least 8"))

        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let log = dir.file("serve.log")
        let server = try await ServeProcess.start(service: service.file, arguments: ["--users", users.path], environment: ["LOG_LEVEL": "trace"], errorLog: log)
        let tokens = server.url.appendingPathComponent("arcgis/tokens/generateToken")
        let layer = server.featureServer("field_inspection").appendingPathComponent("0")

        // client=requestip (the default): good from the address that asked for it.
        let (status, answer, _) = try await Self.request(tokens, method: "POST", form: [("username", "crew"), ("password", Self.password), ("f", "json")])
        #expect(status == 200)
        let token = try #require(answer?["token"]?.stringValue)
        let count = try await Self.request(URL(string: layer.absoluteString + "/query?where=1%3D1&returnCountOnly=true&f=json&token=\(token)")!)
        #expect(count.1 == ["count": 300])
        // Bound to another address: refused here.
        let elsewhere = try await Self.request(tokens, method: "POST", form: [("username", "crew"), ("password", Self.password), ("client", "ip"), ("ip", "10.9.9.9"), ("f", "json")])
        let foreign = try #require(elsewhere.1?["token"]?.stringValue)
        let refused = try await Self.request(URL(string: layer.absoluteString + "?f=json")!, headers: ["Authorization": "Bearer \(foreign)"])
        #expect(refused.0 == 401 && refused.1?["error"]?["code"] == 498)
        _ = try await Self.request(tokens, method: "POST", form: [("username", "crew"), ("password", "wrong " + Self.password), ("f", "json")])

        // Hostile requests: path traversal in every segment, an oversized header.
        for path in [
            "arcgis/rest/services/..%2F..%2Fetc%2Fpasswd/FeatureServer", "arcgis/rest/services/field_inspection/FeatureServer/..%2F..%2F0",
            "arcgis/rest/services/field_inspection/FeatureServer/replicafiles/..%2F..%2Fusers.json", "arcgis/rest/static/..%2F..%2Fetc%2Fpasswd",
            "arcgis/rest/services/field_inspection/MapServer/tile/..%2F1/0/0",
        ] {
            let reply = try await Self.request(URL(string: server.url.absoluteString + "/" + path + "?f=json&token=\(token)")!)
            #expect([400, 404].contains(reply.0), "\(path): \(reply.0)")
            #expect(!String(decoding: reply.2, as: UTF8.self).contains("tokenKey") && !String(decoding: reply.2, as: UTF8.self).contains("root:"))
        }
        let huge = try? await Self.request(URL(string: layer.absoluteString + "?f=json")!, headers: ["X-Padding": String(repeating: "x", count: 200_000)])
        #expect(huge == nil || [400, 413, 431].contains(huge!.0), "an oversized header is refused: \(String(describing: huge?.0))")
        #expect(try await Self.request(URL(string: server.url.absoluteString + "/health")!).0 == 200, "and the server goes on")

        await server.stop()
        let logged = try String(contentsOf: log, encoding: .utf8)
        #expect(!logged.contains(token) && !logged.contains(foreign) && !logged.contains(Self.password), "no token or password in the log")
        withExtendedLifetime(service) {}
    }
}

/// `outpost serve --tls-cert --tls-key`: HTTPS with HTTP/2 and HTTP/1.1 by ALPN, URLs written with
/// https, generateToken saying ssl, and a client that does not trust the certificate refused.
@Suite("outpost serve over TLS")
struct TLSServeTests {
    /// A self-signed certificate for 127.0.0.1 (openssl), as a CA a client can be told to trust.
    static func certificate(in dir: TemporaryDirectory) async throws -> (cert: URL, key: URL) {
        let cert = dir.file("cert.pem"), key = dir.file("key.pem")
        let made = try await ExternalTools.run("openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", key.path, "-out", cert.path, "-days", "2",
        ])
        #expect(made.succeeded, "\(made.stderr)")
        return (cert, key)
    }

    /// A secured sample server: the field-inspection service over HTTPS (a fresh self-signed
    /// certificate) with one user, `crew`, whose password is "a long pass phrase".
    struct Secured {
        let service: TestService
        let server: ServeProcess
        let certificate: URL

        func stop() async {
            await server.stop()
            withExtendedLifetime(service) {}
        }
    }

    static func securedSample(in dir: TemporaryDirectory, role: String) async throws -> Secured {
        let (cert, key) = try await certificate(in: dir)
        let users = dir.file("users.json")
        let added = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["users", "add", "crew", "--role", role, "--users", users.path, "--password-stdin"], input: "a long pass phrase\n")
        #expect(added.succeeded, "\(added.stderr)")
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file, arguments: ["--tls-cert", cert.path, "--tls-key", key.path, "--users", users.path])
        return Secured(service: service, server: server, certificate: cert)
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func httpsWithHTTP2SignInAndPublicURLs() async throws {
        let dir = TemporaryDirectory()
        let secured = try await Self.securedSample(in: dir, role: "editor")
        let (server, cert, service) = (secured.server, secured.certificate, secured.service)
        #expect(server.url.scheme == "https")
        let base = server.url.absoluteString

        // curl negotiates HTTP/2 by ALPN, and can still ask for HTTP/1.1.
        let info = try await ExternalTools.run("curl", ["-s", "--cacert", cert.path, "-w", "\n%{http_version}", "\(base)/arcgis/rest/info?f=json"])
        let lines = info.stdout.split(separator: "\n")
        #expect(lines.last == "2", "\(info.stdout) \(info.stderr)")
        let answer = try JSONValue.parse(String(lines.first ?? ""))
        #expect(answer["authInfo"]?["tokenServicesUrl"]?.stringValue == "\(base)/arcgis/tokens/generateToken", "written with https")
        let old = try await ExternalTools.run("curl", ["-s", "--http1.1", "--cacert", cert.path, "-o", "/dev/null", "-w", "%{http_version} %{http_code}", "\(base)/health"])
        #expect(old.stdout == "1.1 200")
        let untrusted = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "\(base)/health"])
        #expect(untrusted.status == 60, "a client that does not trust the certificate is refused")

        // Python's ssl module with the CA: sign in over HTTPS, query with the token.
        let script = """
            import json, ssl, sys, urllib.request, urllib.parse
            context = ssl.create_default_context(cafile=sys.argv[2])
            body = urllib.parse.urlencode({"username": "crew", "password": "a long pass phrase", "client": "requestip", "f": "json"}).encode()
            token = json.load(urllib.request.urlopen(sys.argv[1] + "/arcgis/tokens/generateToken", body, context=context))
            assert token["ssl"] is True, token
            url = sys.argv[1] + "/arcgis/rest/services/field_inspection/FeatureServer/0/query?where=1%3D1&returnCountOnly=true&f=json&token=" + token["token"]
            print(json.load(urllib.request.urlopen(url, context=context))["count"])
            """
        let python = try await ExternalTools.python(script, [base, cert.path])
        #expect(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "300", "\(python.stderr)")
        await server.stop()

        // A key that does not load stops the server at once, in one line.
        try Data("not a key".utf8).write(to: dir.file("bad.pem"))
        let bad = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["serve", "--service", service.file.path, "--port", "0", "--tls-cert", cert.path, "--tls-key", dir.file("bad.pem").path])
        #expect(bad.status == 1 && bad.stderr.contains("TLS private key"), "\(bad.stderr)")
        withExtendedLifetime(service) {}
    }
}
