import Foundation
import OutpostCore
import Synchronization
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("WAL checkpoints run in the background")
struct WALCheckpointerTests {
    static func mainFileSize(_ gdb: Geodatabase) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: gdb.url.path)[.size] as? Int) ?? 0
    }

    static func features(_ count: Int, from start: Int, notes: Int = 0) throws -> [Feature] {
        let note: FieldValue = notes > 0 ? .string(String(repeating: "n", count: notes)) : .null
        return try (start..<start + count).map { i in
            Feature(
                attributes: ["asset_id": .string("A-\(i)"), "asset_type": .string("valve"), "status": .string("open"), "notes": note],
                geometry: .point(try Point(x: Double(i % 360) - 180, y: Double(i % 170) - 85)))
        }
    }

    /// A commit of several megabytes (a server's upload batch) in 5,000 features: a thousand
    /// characters of notes each make as many pages as 20,000 features without, for a quarter
    /// of the per-feature work (validation, R-tree and index entries).
    static func largeCommit(from start: Int) throws -> [Feature] { try features(5_000, from: start, notes: 1_000) }

    @Test func aLargeCommitReturnsBeforeItsFramesReachTheFile() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let checkpointer = try #require(gdb.checkpointer, "a writable WAL file checkpoints in the background")
        let before = try Self.mainFileSize(gdb)
        checkpointer.hold(true)
        // Well over 1,000 pages: SQLite's own automatic checkpoint would copy them in the commit.
        _ = try await table.add(try Self.largeCommit(from: 0))
        #expect(try Self.mainFileSize(gdb) == before, "the commit left its pages in the WAL")
        // Readers see the committed rows from the WAL meanwhile.
        #expect(try await table.count() == 5_000)
        checkpointer.hold(false)
        #expect(try await Self.grows(gdb, from: before), "the background checkpoint copied the pages into the file")
        // Writes go on while checkpoints run; closing waits for a running one.
        for round in 1...3 { _ = try await table.add(try Self.features(2_000, from: 5_000 * round)) }
        try gdb.close()
        let wal = (try? FileManager.default.attributesOfItem(atPath: gdb.url.path + "-wal")[.size] as? Int) ?? 0
        #expect(wal == 0, "close leaves a self-contained file")
        // A third-party reader sees every row in the main file.
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", gdb.url.path, "inspection_points"])
        #expect(info.succeeded && info.stdout.contains("Feature Count: 11000\n"), "\(info.stdout)\(info.stderr)")
    }

    /// Back-to-back large commits (a server applying upload batches): the WAL starts over
    /// instead of growing by every commit.
    @Test func backToBackLargeCommitsKeepTheWALBounded() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        var largest = 0, first = 0
        for round in 0..<16 {
            _ = try await table.add(try Self.largeCommit(from: 5_000 * round))
            let wal = (try FileManager.default.attributesOfItem(atPath: gdb.url.path + "-wal")[.size] as? Int) ?? 0
            if round == 0 { first = wal }
            largest = max(largest, wal)
        }
        // The wait threshold's frames plus a few commits (it grew by every commit, past 130 MB,
        // without the wait); the commits together write well past that bound.
        let bound = Int(WALCheckpointer.writerWaitFrames) * (4096 + 24) + 3 * first
        #expect(16 * first > 2 * bound, "the commits are large enough to pass the bound: one is \(first >> 20) MB")
        #expect(largest < bound, "largest WAL \(largest >> 20) MB, one commit's \(first >> 20) MB")
        #expect(try await table.count() == 80_000)
        try gdb.close()
    }

    static func companions(_ url: URL) -> [String] {
        ["-wal", "-shm"].filter { FileManager.default.fileExists(atPath: url.path + $0) }
    }

    @Test func theLastCloseLeavesNoCompanionFiles() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        _ = try await gdb.table(named: "inspection_points").add(try Self.features(100, from: 0))
        let second = try Geodatabase.open(at: gdb.url)
        #expect(Self.companions(gdb.url) == ["-wal", "-shm"])
        try gdb.close()
        // Another handle still has the file open: its companions stay and it goes on working.
        #expect(Self.companions(gdb.url) == ["-wal", "-shm"])
        _ = try await second.table(named: "inspection_points").add(try Self.features(50, from: 100))
        try second.close()
        #expect(Self.companions(gdb.url).isEmpty, "the last close deletes -wal and -shm, as the sqlite3 shell and GDAL do")
        // The file opens again, read-only (no companions to create) and for writing.
        let reader = try Geodatabase.open(at: gdb.url, readOnly: true)
        #expect(try await reader.table(named: "inspection_points").count() == 150)
        try reader.close()
        let writer = try Geodatabase.open(at: gdb.url)
        #expect(try await writer.table(named: "inspection_points").count() == 150)
        try writer.close()
        #expect(Self.companions(gdb.url).isEmpty)
    }

    /// With a checkpoint due (the WAL past the wait threshold) and not yet run, a write waits
    /// for it, and a small one (bookkeeping) goes ahead.
    /// (Were the small write to wait, it would wait for good: the time limit ends it.)
    @Test(.scaledTimeLimit(minutes: 1)) func aSmallWriteDoesNotWaitForADueCheckpoint() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let checkpointer = try #require(gdb.checkpointer)
        let table = try gdb.table(named: "inspection_points")
        checkpointer.suspendCopies(true)
        // A commit of more pages than the threshold (its copy is due, and held up).
        let pages = Int(WALCheckpointer.writerWaitFrames) + 500
        try await gdb.write { conn in
            try conn.execute("CREATE TABLE scratch (b BLOB)")
            try conn.execute("INSERT INTO scratch VALUES (zeroblob(\(pages * 4096)))")
        }
        let insert = "INSERT INTO inspection_points (asset_id, asset_type, status) VALUES ('S-1', 'valve', 'open')"
        try await gdb.write(small: true) { conn in try conn.execute(insert) }
        let done = Atomic(false)
        let waiting = Task {
            try await gdb.write { conn in try conn.execute(insert) }
            done.store(true, ordering: .sequentiallyConsistent)
        }
        try await Task.sleep(for: .milliseconds(300))
        let finishedEarly = done.load(ordering: .sequentiallyConsistent)
        #expect(!finishedEarly, "the other write waits for the copy")
        checkpointer.suspendCopies(false)
        try await waiting.value
        #expect(try await table.count() == 2)
        try gdb.close()
    }

    /// Polls until the main file has grown by a megabyte (a checkpoint copied pages into it).
    static func grows(_ gdb: Geodatabase, from size: Int) async throws -> Bool {
        for _ in 0..<200 {
            if try mainFileSize(gdb) > size + 1_000_000 { return true }
            try await Task.sleep(for: .milliseconds(25))
        }
        return false
    }

    /// A deferral (a sync job's steps) keeps a due checkpoint waiting until it ends; one that
    /// begins within the grace keeps it waiting longer; a WAL past the limit is copied anyway.
    @Test func aDeferredCheckpointRunsWhenTheDeferralEnds() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let checkpointer = try #require(gdb.checkpointer)
        let before = try Self.mainFileSize(gdb)
        let first = gdb.deferCheckpoints()
        _ = try await table.add(try Self.largeCommit(from: 0))
        try await Task.sleep(for: .milliseconds(300))
        #expect(try Self.mainFileSize(gdb) == before && !checkpointer.isScheduled, "the due copy waits for the deferral")
        #expect(try await table.count() == 5_000)
        // The next step defers again within the grace: still nothing copied.
        first.end()
        let second = gdb.deferCheckpoints()
        first.end()  // a second end of the same deferral ends nothing
        try await Task.sleep(for: .milliseconds(300))
        #expect(try Self.mainFileSize(gdb) == before, "a deferral begun within the grace keeps the copy waiting")
        second.end()
        #expect(try await Self.grows(gdb, from: before), "the copy runs once the last deferral ended")
        // Past the limit the copy starts although deferred.
        let third = gdb.deferCheckpoints()
        checkpointer.hold(true)
        checkpointer.committed(frames: WALCheckpointer.frameThreshold)
        #expect(!checkpointer.isScheduled)
        checkpointer.committed(frames: WALCheckpointer.deferredFramesLimit)
        #expect(checkpointer.isScheduled)
        checkpointer.hold(false)
        third.end()
        try gdb.close()
    }

    @Test func readOnlyAndClosedGeodatabasesStartNoCheckpoints() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        try gdb.close()
        let reader = try Geodatabase.open(at: gdb.url, readOnly: true)
        #expect(reader.checkpointer == nil)
        try reader.close()
        let writer = try Geodatabase.open(at: gdb.url)
        let checkpointer = try #require(writer.checkpointer)
        try writer.close()
        // A commit hook firing after close (another handle's late commit) schedules nothing.
        checkpointer.hold(true)
        checkpointer.committed(frames: 5_000)
        #expect(!checkpointer.isScheduled)
        checkpointer.hold(false)
    }
}
