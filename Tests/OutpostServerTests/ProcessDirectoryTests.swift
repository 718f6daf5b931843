import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostServer

@Suite("A server's own directory goes with it, even when it is killed")
struct ProcessDirectoryTests {
    @Test func aLiveDirectoryStaysAndGoesWithItsOwner() throws {
        let parent = TemporaryDirectory()
        var owned: ProcessDirectory? = ProcessDirectory(parent.url.appendingPathComponent("outpost-serve-1-live"))
        let url = try #require(owned?.url)
        try Data("result".utf8).write(to: url.appendingPathComponent("result.gpkg"))
        ProcessDirectory.removeAbandoned(in: parent.url, prefix: "outpost-serve-")
        #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent("result.gpkg").path), "its owner holds the lock")
        owned = nil
        #expect(!FileManager.default.fileExists(atPath: url.path), "released with the services")
    }

    @Test func directoriesOfKilledServersAreRemoved() async throws {
        let parent = TemporaryDirectory()
        let fm = FileManager.default
        // A server process killed while its directory existed: the lock file stays, unlocked.
        let script = "mkdir -p '\(parent.url.path)/outpost-serve-2-killed' && exec 9>'\(parent.url.path)/outpost-serve-2-killed/.lock' && flock 9 && kill -9 $$"
        let killed = try await ExternalTools.run("sh", ["-c", script])
        #expect(!killed.succeeded)
        try Data(count: 1024).write(to: parent.url.appendingPathComponent("outpost-serve-2-killed/replica.gpkg"))
        // Made before there were locks: an old one goes, a fresh one may be another server starting.
        let old = parent.url.appendingPathComponent("outpost-serve-3-old"), fresh = parent.url.appendingPathComponent("outpost-serve-4-fresh")
        for dir in [old, fresh] { try fm.createDirectory(at: dir, withIntermediateDirectories: true) }
        try fm.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: old.path)
        let other = parent.url.appendingPathComponent("something-else")
        try fm.createDirectory(at: other, withIntermediateDirectories: true)
        let live = ProcessDirectory(parent.url.appendingPathComponent("outpost-serve-5-live"))
        ProcessDirectory.removeAbandoned(in: parent.url, prefix: "outpost-serve-")
        #expect(!fm.fileExists(atPath: parent.url.appendingPathComponent("outpost-serve-2-killed").path))
        #expect(!fm.fileExists(atPath: old.path))
        #expect(fm.fileExists(atPath: fresh.path))
        #expect(fm.fileExists(atPath: other.path))
        #expect(fm.fileExists(atPath: live.url.path))
    }
}
