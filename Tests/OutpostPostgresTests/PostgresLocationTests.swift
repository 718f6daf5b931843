import Foundation
import OutpostPostgres
import OutpostTestSupport
import Testing

/// `postgres://` URLs with one server or a primary and its standbys.
@Suite("PostgreSQL locations")
struct PostgresLocationTests {
    @Test func oneServerOrSeveralReadBackAsWritten() throws {
        let one = try PostgresLocation(url: "postgres://crew:s%40cret@db.example.org/gis")
        #expect(one.servers == [.init(host: "db.example.org", port: 5432)] && one.user == "crew" && one.password == "s@cret" && one.database == "gis")
        #expect(try PostgresLocation(url: one.url) == one)

        let site = try PostgresLocation(url: "postgresql://crew:pw@10.0.0.1:5433,10.0.0.2,standby.example.org:6432/gis")
        #expect(site.servers.map(\.description) == ["10.0.0.1:5433", "10.0.0.2:5432", "standby.example.org:6432"])
        #expect(site.user == "crew" && site.password == "pw" && site.database == "gis" && site.host == "10.0.0.1" && site.port == 5433)
        #expect(site.description == "postgres://crew@10.0.0.1:5433,10.0.0.2:5432,standby.example.org:6432/gis", "no password in what is shown")
        #expect(try PostgresLocation(url: site.url) == site, "the URL handed to another process names every server")
        #expect(site.on(site.servers[2]).servers == [site.servers[2]])
    }

    @Test(arguments: [
        "postgres://u@a,/db", "postgres://u@a,:5432/db", "postgres://u@a,b:port/db", "postgres://u@a,b:70000/db", "postgres://u@a,b:1:2/db",
        "mysql://u@a/db", "postgres://u@a,b", "postgres:///db",
    ])
    func malformedLocationsAreRefused(url: String) {
        #expect(throws: PostgresServiceError.self) { try PostgresLocation(url: url) }
    }

    /// Several servers none of which answers: the first is used (requests wait for it), and
    /// nothing answers as a primary.
    @Test func noPrimaryAmongServersThatAreDown() async throws {
        let down = try PostgresLocation(url: "postgres://u@127.0.0.1:1,127.0.0.1:2/db")
        #expect(await down.primary(within: .milliseconds(500)) == nil)
        let one = try PostgresLocation(url: "postgres://u@127.0.0.1:1/db")
        #expect(await one.primary() == one, "one server is taken as it is, unprobed")
    }

    /// A server that takes the connection, signs the client in and then falls silent (its host
    /// lost with no reset sent, a frozen process) holds no look for the primary up: it is
    /// passed over once its time is up, and the next server answers.
    @Test(.scaledTimeLimit(minutes: 1))
    func aServerThatFallsSilentIsPassedOver() async throws {
        let silent = try SilentPostgres()
        defer { silent.stop() }
        let alone = try PostgresLocation(url: "postgres://u@127.0.0.1:\(silent.port),127.0.0.1:1/db")
        #expect(await alone.primary(within: .milliseconds(300)) == nil)
        #expect(silent.signedIn >= 1, "the silent server took the connection and the sign-in")
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES"] else { return }
        let real = try PostgresLocation(url: url)
        var site = real
        site.servers = [.init(host: "127.0.0.1", port: silent.port), real.servers[0]]
        #expect(await site.primary(within: .seconds(2)) == real.on(real.servers[0]), "the PostgreSQL server after the silent one takes writes")
    }
}

/// A TCP server on 127.0.0.1 that answers a PostgreSQL client's startup as a server that
/// trusts it would (authentication ok, backend key, ready for query) and then never answers
/// again, holding each connection open until stopped.
private final class SilentPostgres: @unchecked Sendable {
    // @unchecked: `held` and `count` are guarded by `lock`; the socket is closed once, by stop().
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var held: [Int32] = []
    private var count = 0

    var signedIn: Int { lock.withLock { count } }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = fd >= 0 && withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw PostgresServiceError("cannot listen on 127.0.0.1") }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = fd
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                lock.withLock { held.append(client) }
                // The startup message: its length, then the rest.
                var header = [UInt8](repeating: 0, count: 4)
                guard recv(client, &header, 4, Int32(MSG_WAITALL)) == 4 else { continue }
                let total = header.reduce(0) { $0 << 8 | Int($1) }
                var rest = [UInt8](repeating: 0, count: max(total - 4, 0))
                guard recv(client, &rest, rest.count, Int32(MSG_WAITALL)) == rest.count else { continue }
                let answer: [UInt8] =
                    [UInt8(ascii: "R"), 0, 0, 0, 8, 0, 0, 0, 0]  // authentication ok
                    + [UInt8(ascii: "K"), 0, 0, 0, 12, 0, 0, 0, 42, 0, 0, 0, 7]  // backend key data
                    + [UInt8(ascii: "Z"), 0, 0, 0, 5, UInt8(ascii: "I")]  // ready for query
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                lock.withLock { count += 1 }
            }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for client in lock.withLock({ held }) { close(client) }
    }
}
