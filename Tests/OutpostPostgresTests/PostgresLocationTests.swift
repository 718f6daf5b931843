import Foundation
import OutpostPostgres
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
        #expect(await down.primary(connectTimeout: .milliseconds(500)) == nil)
        let one = try PostgresLocation(url: "postgres://u@127.0.0.1:1/db")
        #expect(await one.primary() == one, "one server is taken as it is, unprobed")
    }
}
