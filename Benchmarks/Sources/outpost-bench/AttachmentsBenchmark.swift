import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostSync

#if canImport(Glibc)
    import Glibc
#endif

/// Attachment sync: one photo of `megabytes` MB (random bytes) added on replica A, uploaded by
/// `outpost sync` (content by hash in 1 MB chunks, then the batch), downloaded by replica B
/// (Range requests into a verified staging file, then applied). Next to the disk floor: the same
/// bytes copied into a file and fsynced. Each side is a child process; its peak resident memory
/// includes SQLite's memory-mapped file pages (up to mmap_size).
enum AttachmentsBenchmark {
    static func run(megabytes: Int, executable: String, workDirectory: URL) async throws {
        var schema = SyncBenchmark.schema
        schema.layers[0].hasAttachments = true
        let service = workDirectory.appendingPathComponent("attachments-service.gpkg")
        try ServerBenchmark.createService(count: 1_000, at: service, schema: schema, seed: 5)
        try? FileManager.default.removeItem(atPath: service.path + ".blobs")
        let (server, url) = try startServer(executable: executable, service: service)
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let serviceURL = URL(string: url + "/arcgis/rest/services/attachments-service/FeatureServer")!
        let a = workDirectory.appendingPathComponent("attachments-a.gpkg"), b = workDirectory.appendingPathComponent("attachments-b.gpkg")
        for replica in [a, b] { try await generate(serviceURL, to: replica) }

        let photo = workDirectory.appendingPathComponent("photo.bin")
        _ = try measure(["/bin/sh", "-c", "head -c \(megabytes << 20) /dev/urandom > '\(photo.path)'"])
        let gdb = try Geodatabase.open(at: a)
        _ = try await gdb.table(named: "points").addAttachment(toFeature: 1, name: "photo.bin", contentType: "application/octet-stream", contentsOf: photo)
        try gdb.close()

        let up = try measure([executable, "worker-sync", a.path])
        let down = try measure([executable, "worker-sync", b.path])
        let floor = try measure([
            ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3", "-c",
            "import os, shutil, sys, time\nt = time.perf_counter()\nshutil.copyfile(sys.argv[1], sys.argv[2])\nfd = os.open(sys.argv[2], os.O_RDONLY)\nos.fsync(fd)\nprint(time.perf_counter() - t)",
            photo.path, photo.path + ".copy",
        ])
        let upSeconds = try reportedSeconds(up), downSeconds = try reportedSeconds(down), floorSeconds = try reportedSeconds(floor)
        let mb = Double(megabytes)
        printTable(
            "Attachment sync: one \(megabytes) MB photo, loopback HTTP, each side a child process",
            ["", "seconds", "MB/s", "vs floor", "peak MB"],
            [
                ["Outpost upload (hash, chunks by hash, batch, verify)", format(upSeconds, 2), format(mb / upSeconds), format(floorSeconds / upSeconds, 2), format(up.peakMemoryMB)],
                ["Outpost download (ranges, verify, apply)", format(downSeconds, 2), format(mb / downSeconds), format(floorSeconds / downSeconds, 2), format(down.peakMemoryMB)],
                ["copy of the file, fsynced (floor)", format(floorSeconds, 2), format(mb / floorSeconds), "1.00", ""],
            ])
        try? FileManager.default.removeItem(at: photo)
        try? FileManager.default.removeItem(atPath: photo.path + ".copy")
    }

    static func generate(_ serviceURL: URL, to file: URL) async throws {
        Geodatabase.removeFiles(at: file)
        let task = try GeodatabaseSyncTask(url: serviceURL)
        var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
        parameters.returnAttachments = true
        parameters.attachmentSyncDirection = .bidirectional
        let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: file, faults: FaultInjector())
        try job.start()
        try await job.output.close()
    }
}
