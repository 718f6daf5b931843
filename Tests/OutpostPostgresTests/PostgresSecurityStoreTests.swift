import Foundation
import OutpostCore
import OutpostPostgres
import OutpostServiceTestSupport
import OutpostSyncService
import OutpostTestSupport
import Testing

/// The users document and failed sign-ins a site's hosts share.
@Suite("PostgreSQL users document and sign-in throttle", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresSecurityStoreTests {
    /// Writers on separate pools change the document at once, the first two with no document
    /// yet: every change lands, one version each; a change that throws leaves the document as
    /// it was and its error as it was thrown.
    @Test(.scaledTimeLimit(minutes: 2))
    func everyWritersChangeLandsOnce() async throws {
        let location = try PostgresLocation(url: try await BackendKind.newPostgresDatabase())
        var stores: [PostgresSecurityStore] = []
        for _ in 0..<3 { stores.append(try await PostgresJobStore(location: location).security()) }
        #expect(try await stores[0].securityVersion() == nil)
        #expect(try await stores[0].securityDocument() == nil)

        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<12 {
                let store = stores[n % stores.count]
                group.addTask {
                    try await store.changeSecurityDocument { text in
                        var names = try text.map { try JSONValue.parse($0)["names"]?.arrayValue ?? [] } ?? []
                        names.append(.string("u\(n)"))
                        return JSONValue.object(["names": .array(names)]).jsonString
                    }
                }
            }
            try await group.waitForAll()
        }
        let document = try #require(try await stores[1].securityDocument())
        let seen = try await stores[2].securityVersion()
        #expect(document.version == 12 && seen == 12)
        let names = try JSONValue.parse(document.text)["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(names) == Set((0..<12).map { "u\($0)" }) && names.count == 12)

        struct Refused: Error, Equatable {}
        await #expect(throws: Refused()) { try await stores[0].changeSecurityDocument { _ in throw Refused() } }
        let after = try await stores[0].securityDocument()
        #expect(after?.text == document.text && after?.version == 12)
        await #expect(throws: SyncServiceError.self) { try await stores[0].changeSecurityDocument { _ in "not json" } }
        #expect(try await stores[0].securityVersion() == 12)
    }

    /// Failures are counted per key across hosts, only those inside the window, the oldest
    /// told; a key's success clears it alone.
    @Test(.scaledTimeLimit(minutes: 2))
    func failedSignInsAreCountedPerKeyInsideTheWindow() async throws {
        let location = try PostgresLocation(url: try await BackendKind.newPostgresDatabase())
        let a = try await PostgresJobStore(location: location).security(), b = try await PostgresJobStore(location: location).security()
        try await a.recordFailedSignIn(["user:ann", "ip:10.0.0.1"], at: 1_000)
        try await b.recordFailedSignIn(["user:ann", "ip:10.0.0.2"], at: 2_000)
        try await b.recordFailedSignIn(["user:bob", "ip:10.0.0.2"], at: 3_000)
        let all = try await a.failedSignIns(["user:ann", "ip:10.0.0.2", "user:nobody"], since: 0)
        #expect(all.count == 2 && all["user:ann"]?.count == 2 && all["user:ann"]?.oldest == 1_000)
        #expect(all["ip:10.0.0.2"]?.count == 2 && all["ip:10.0.0.2"]?.oldest == 2_000)
        // Past the window the first failure no longer counts (and is forgotten).
        let later = try await b.failedSignIns(["user:ann"], since: 1_500)
        #expect(later["user:ann"]?.count == 1 && later["user:ann"]?.oldest == 2_000)
        try await a.clearFailedSignIns("user:ann")
        #expect(try await b.failedSignIns(["user:ann"], since: 0).isEmpty)
        #expect(try await b.failedSignIns(["ip:10.0.0.2"], since: 0)["ip:10.0.0.2"]?.count == 2)
    }
}
