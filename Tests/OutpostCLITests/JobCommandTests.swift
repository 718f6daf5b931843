import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("outpost copy and outpost job")
struct JobCommandTests {
    static func randomFile(_ url: URL, size: Int) throws {
        var rng = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: size)
        for i in stride(from: 0, to: size, by: 8) {
            withUnsafeBytes(of: rng.next() as UInt64) { raw in
                for k in 0..<min(8, size - i) { bytes[i + k] = raw[k] }
            }
        }
        try Data(bytes).write(to: url)
    }

    /// Starts `outpost` without waiting for it.
    static func launch(_ arguments: [String]) throws -> SpawnedProcess {
        try SpawnedProcess.spawn(Repository.outpostExecutable.path, arguments)
    }

    /// Kills `process` with SIGKILL once the only job in `directory` has checkpointed an offset
    /// of at least `minimum`, and returns that offset. The watch runs on a thread of its own:
    /// with the suite's tests sharing the two threads of the concurrency pool, a watching task
    /// could wait seconds for a turn while the copy ran to its end.
    static func killAtOffset(_ process: SpawnedProcess, in directory: URL, atLeast minimum: Int64, timeout: TimeInterval = 60) async throws -> Int64 {
        let pid = process.pid
        let outcome: Result<Int64, ReaderMismatch> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let deadline = Date().addingTimeInterval(timeout)
                while Date() < deadline {
                    if let file = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil).first(where: { $0.pathExtension == "json" }),
                        let data = try? Data(contentsOf: file), let snapshot = try? JobSnapshot.decode(data)
                    {
                        if let offset = snapshot.checkpoint?["offset"]?.integerValue, offset >= minimum {
                            kill(pid, SIGKILL)
                            return continuation.resume(returning: .success(offset))
                        }
                        if snapshot.status.isFinished || snapshot.currentStep > 0 {
                            return continuation.resume(returning: .failure(ReaderMismatch(description: "the job got past the copy step before the test could kill it")))
                        }
                    }
                    usleep(2_000)
                }
                continuation.resume(returning: .failure(ReaderMismatch(description: "the job never reached offset \(minimum)")))
            }
        }
        return try outcome.get()
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func aCopyKilledWithSIGKILLResumesInANewProcess() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("basemap.tpkx"), destination = dir.file("card/basemap.tpkx")
        try FileManager.default.createDirectory(at: dir.file("card"), withIntermediateDirectories: true)
        try Self.randomFile(source, size: 8 << 20)
        let jobs = dir.file("jobs")
        // 128 chunks, 100 ms apart: seconds in which to kill it mid-copy, even on a busy machine.
        let process = try Self.launch(["copy", source.path, destination.path, "--job-dir", jobs.path, "--chunk-kb", "64", "--throttle-ms", "100"])
        let offset = try await Self.killAtOffset(process, in: jobs, atLeast: 256 << 10)
        while process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        #expect(process.endedBySignal && process.wait() == SIGKILL)
        #expect(offset < 8 << 20, "killed before the end")
        #expect(!FileManager.default.fileExists(atPath: destination.path), "nothing appears at the destination before the copy completes")
        let listed = try await outpost(["job", "list", jobs.path, "--json"])
        #expect(try JSONValue.parse(listed.stdout).arrayValue?.first?["status"] == "started", "the JSON still says it was running")

        let resumed = try await outpost(["job", "resume", jobs.path])
        #expect(resumed.succeeded, "\(resumed.stderr)")
        #expect(try Data(contentsOf: destination) == (try Data(contentsOf: source)))
        // The same copy run without interruption gives the same file.
        let uninterrupted = dir.file("card/uninterrupted.tpkx")
        #expect(try await outpost(["copy", source.path, uninterrupted.path, "--job-dir", dir.file("jobs2").path]).succeeded)
        #expect(try Data(contentsOf: uninterrupted) == (try Data(contentsOf: destination)))
        let show = try await outpost(["job", "show", jobs.path])
        let snapshot = try JobSnapshot.decode(Data(show.stdout.utf8))
        #expect(snapshot.status == .succeeded && snapshot.messages.contains { $0.text.hasPrefix("started at step 1") })
        let again = try await outpost(["job", "resume", jobs.appendingPathComponent("\(snapshot.id).json").path])
        #expect(again.status == 1 && again.stderr.contains("already succeeded"))
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func cancellingAKilledJobRollsItBack() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("a.bin"), destination = dir.file("b.bin")
        try Self.randomFile(source, size: 4 << 20)
        let jobs = dir.file("jobs")
        let process = try Self.launch(["copy", source.path, destination.path, "--job-dir", jobs.path, "--chunk-kb", "32", "--throttle-ms", "100"])
        _ = try await Self.killAtOffset(process, in: jobs, atLeast: 64 << 10)
        while process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        #expect(FileManager.default.fileExists(atPath: destination.path + ".partial"))
        let cancel = try await outpost(["job", "cancel", jobs.path])
        #expect(cancel.succeeded, "\(cancel.stderr)")
        #expect(cancel.stdout.contains("failed (the job was cancelled)"))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let list = try await outpost(["job", "list", jobs.path])
        #expect(list.stdout.contains("failed"))
    }

    @Test func badTargetsFailInOneLine() async throws {
        let dir = TemporaryDirectory()
        for arguments in [["job", "resume", dir.file("nope").path], ["job", "show", dir.url.path], ["copy", dir.file("missing.bin").path, dir.file("x").path, "--job-dir", dir.file("j").path]] {
            let result = try await outpost(arguments)
            #expect(result.status == 1, "\(arguments)")
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.hasPrefix("outpost: "), "\(result.stderr)")
        }
    }
}
