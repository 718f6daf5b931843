import Foundation
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostCore

@Suite("Job manager and the copy job")
struct JobManagerTests {
    static func makeFile(_ url: URL, size: Int) throws {
        var rng = SystemRandomNumberGenerator()
        try Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }).write(to: url)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func copiesAndVerifies() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin"), destination = dir.file("copy.bin")
        try Self.makeFile(source, size: 300_000)
        let job = Job(CopyFileJob(source: source, destination: destination, chunkSize: 64 * 1024))
        try job.start()
        let output = try await job.output
        #expect(try Data(contentsOf: destination) == (try Data(contentsOf: source)))
        #expect(output.bytes == 300_000)
        #expect(output.crc32 == CRC32.checksum([UInt8](try Data(contentsOf: source))))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))
        #expect(job.progress.phases.first { $0.name == "bytes" }?.done == 300_000)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func pausedCopiesResumeWithoutRecopying() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin"), destination = dir.file("copy.bin")
        try Self.makeFile(source, size: 1_000_000)
        let job = Job(CopyFileJob(source: source, destination: destination, chunkSize: 50_000, throttle: .milliseconds(5)))
        try job.start()
        for await p in job.progressUpdates where (p.phases.first?.done ?? 0) >= 300_000 { break }
        try job.pause()
        for await s in job.statusUpdates where s == .paused { break }
        let offset = try #require(job.snapshot.checkpoint?["offset"]?.integerValue)
        #expect(offset >= 300_000 && offset < 1_000_000)
        #expect(!FileManager.default.fileExists(atPath: destination.path), "the destination appears only when complete")
        let rebuilt = try Job<CopyFileJob>.fromJSON(try job.toJSON())
        try rebuilt.start()
        _ = try await rebuilt.output
        #expect(try Data(contentsOf: destination) == (try Data(contentsOf: source)))
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aCorruptedPartialCopyFailsVerificationAndIsRemoved() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin"), destination = dir.file("copy.bin")
        try Self.makeFile(source, size: 400_000)
        let job = Job(CopyFileJob(source: source, destination: destination, chunkSize: 100_000))
        try job.start()
        for await p in job.progressUpdates where (p.phases.first?.done ?? 0) >= 100_000 { try? job.pause(); break }
        for await s in job.statusUpdates where s == .paused { break }
        // Damage what was copied so far.
        let partial = FileHandle(forUpdatingAtPath: destination.path + ".partial")!
        try partial.seek(toOffset: 10)
        try partial.write(contentsOf: Data([0xFF, 0x00, 0xFF]))
        try partial.close()
        try job.resume()
        let error = await #expect(throws: JobError.self) { try await job.output }
        #expect(error?.message.contains("CRC-32") == true)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func managerPersistsAndResumesJobs() async throws {
        let dir = TemporaryDirectory()
        let jobs = dir.file("jobs")
        let source = dir.file("source.bin"), destination = dir.file("copy.bin")
        try Self.makeFile(source, size: 600_000)
        let manager = try JobManager(directory: jobs)
        let job = try manager.add(CopyFileJob(source: source, destination: destination, chunkSize: 60_000, throttle: .milliseconds(5)))
        try manager.start(job)
        // A second manager (another process) cannot run the same job meanwhile.
        let other = try JobManager(directory: jobs)
        let busy = #expect(throws: JobError.self) { try other.start(try other.job(id: job.id)) }
        #expect(busy?.code == .busy)
        for await p in job.progressUpdates where (p.phases.first?.done ?? 0) >= 120_000 { break }
        try job.pause()
        for await s in job.statusUpdates where s == .paused { break }
        try await Task.sleep(for: .milliseconds(50))  // the lock is released as the job pauses

        let saved = try #require(try other.snapshots().first { $0.id == job.id })
        #expect(saved.status == .paused && saved.checkpoint?["offset"] != nil)
        let resumed = try other.resumeAll()
        #expect(resumed.map(\.id) == [job.id])
        #expect(await resumed[0].waitUntilFinished() == .succeeded)
        #expect(try Data(contentsOf: destination) == (try Data(contentsOf: source)))
        #expect(try other.snapshots().first?.status == .succeeded)
        #expect(try other.resumeAll().isEmpty, "finished jobs are not resumed")
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func cancelReachesAJobRunByAnotherManager() async throws {
        let dir = TemporaryDirectory()
        let jobs = dir.file("jobs")
        let source = dir.file("source.bin"), destination = dir.file("copy.bin")
        try Self.makeFile(source, size: 2_000_000)
        let runner = try JobManager(directory: jobs)
        let job = try runner.add(CopyFileJob(source: source, destination: destination, chunkSize: 20_000, throttle: .milliseconds(10)))
        try runner.start(job)
        for await p in job.progressUpdates where (p.phases.first?.done ?? 0) > 0 { break }
        let snapshot = try await JobManager(directory: jobs).cancel(id: job.id, timeout: .seconds(20))
        #expect(snapshot.status == .failed && snapshot.error?.code == .cancelled)
        #expect(job.status == .failed)
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))
        // Cancelling a paused job from JSON alone rolls it back here.
        let second = try runner.add(CopyFileJob(source: source, destination: dir.file("b.bin"), chunkSize: 20_000, throttle: .milliseconds(10)))
        try runner.start(second)
        for await p in second.progressUpdates where (p.phases.first?.done ?? 0) > 0 { try? second.pause(); break }
        for await s in second.statusUpdates where s == .paused { break }
        try await Task.sleep(for: .milliseconds(50))
        #expect(FileManager.default.fileExists(atPath: dir.file("b.bin.partial").path))
        let cancelled = try await JobManager(directory: jobs).cancel(id: second.id)
        #expect(cancelled.status == .failed)
        #expect(!FileManager.default.fileExists(atPath: dir.file("b.bin.partial").path))
    }
}
