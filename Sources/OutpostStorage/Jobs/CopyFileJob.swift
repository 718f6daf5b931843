import Foundation
import OutpostCore

/// Copies a file in chunks, resumably, and verifies the copy: for carrying large geodatabases and
/// tile packages to removable storage in the field, where the app may be killed mid-copy.
///
/// Steps: `copy` (checkpoint after every chunk with the byte offset and the running CRC-32 of the
/// source) and `verify` (re-reads the copy and compares checksums). The copy is written to
/// `<destination>.partial` and renamed only after it verifies, so the destination appears only
/// when complete; a failed or cancelled copy removes the partial file.
public struct CopyFileJob: JobDefinition {
    public static let jobType = "outpost.copyFile"

    /// The file to copy.
    public var source: URL
    /// Where the copy goes (it appears only when complete).
    public var destination: URL
    /// Bytes per chunk (and per checkpoint).
    public var chunkSize: Int
    /// A pause after each chunk, to leave I/O to other work (0 for none).
    public var throttle: Duration

    /// A copy of `source` to `destination`, `chunkSize` bytes at a time.
    public init(source: URL, destination: URL, chunkSize: Int = 1 << 20, throttle: Duration = .zero) {
        self.source = source
        self.destination = destination
        self.chunkSize = max(chunkSize, 1)
        self.throttle = throttle
    }

    public var parameters: JSONValue {
        [
            "source": .string(source.path), "destination": .string(destination.path),
            "chunkSize": .integer(Int64(chunkSize)),
            "throttleMilliseconds": .integer(throttle.wholeMilliseconds),
        ]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let source = parameters["source"]?.stringValue, let destination = parameters["destination"]?.stringValue,
            let chunk = parameters["chunkSize"]?.integerValue, chunk > 0
        else { throw JobError(.invalidJSON, "copyFile needs source, destination and a positive chunkSize") }
        self.init(
            source: URL(fileURLWithPath: source), destination: URL(fileURLWithPath: destination), chunkSize: Int(chunk),
            throttle: .milliseconds(parameters["throttleMilliseconds"]?.integerValue ?? 0))
    }

    public var stepNames: [String] { ["copy", "verify"] }

    var partial: URL { destination.deletingLastPathComponent().appendingPathComponent(destination.lastPathComponent + ".partial") }

    public struct Output: Sendable, Hashable {
        /// Where the copy is.
        public var destination: URL
        /// How many bytes were copied.
        public var bytes: Int64
        /// The CRC-32 of the bytes copied.
        public var crc32: UInt32
    }

    public func run(step: Int, context: JobContext) async throws {
        switch step {
        case 0: try await copy(context)
        default: try await verify(context)
        }
    }

    private func copy(_ context: JobContext) async throws {
        let fm = FileManager.default
        guard let size = (try? fm.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value else {
            throw JobError(.stepFailed, "cannot read \(source.path)")
        }
        var offset = context.checkpointData?["offset"]?.integerValue ?? 0
        var crc = CRC32()
        if let saved = context.checkpointData?["crc32"]?.integerValue { crc = CRC32(resuming: UInt32(truncatingIfNeeded: saved)) }
        if offset == 0 {
            guard fm.createFile(atPath: partial.path, contents: nil) else { throw JobError(.stepFailed, "cannot create \(partial.path)") }
        }
        guard let input = FileHandle(forReadingAtPath: source.path), let output = FileHandle(forWritingAtPath: partial.path) else {
            throw JobError(.stepFailed, "cannot open \(source.path) or \(partial.path)")
        }
        context.onCleanup {
            try? input.close()
            try? output.close()
        }
        // Bytes written after the last checkpoint are written again: cut them off first.
        try output.truncate(atOffset: UInt64(offset))
        try input.seek(toOffset: UInt64(offset))
        context.reportProgress("bytes", done: offset, total: size)
        while offset < size {
            guard let chunk = try input.read(upToCount: chunkSize), !chunk.isEmpty else {
                throw JobError(.stepFailed, "\(source.path) ended at \(offset) of \(size) bytes (it changed during the copy)")
            }
            try output.write(contentsOf: chunk)
            chunk.withUnsafeBytes { crc.update($0) }
            offset += Int64(chunk.count)
            context.reportProgress("bytes", done: offset, total: size)
            if throttle > .zero { try await Task.sleep(for: throttle) }
            try output.synchronize()
            try await context.checkpoint(["offset": .integer(offset), "crc32": .integer(Int64(crc.value)), "size": .integer(size)])
        }
        try await context.checkpoint(["offset": .integer(offset), "crc32": .integer(Int64(crc.value)), "size": .integer(size), "copied": true])
    }

    private func verify(_ context: JobContext) async throws {
        var crc = CRC32()
        guard let input = FileHandle(forReadingAtPath: partial.path) else { throw JobError(.stepFailed, "\(partial.path) is missing") }
        context.onCleanup { try? input.close() }
        var done: Int64 = 0
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            chunk.withUnsafeBytes { crc.update($0) }
            done += Int64(chunk.count)
            context.reportProgress("verified bytes", done: done, total: nil)
        }
        var expected = CRC32()
        guard let original = FileHandle(forReadingAtPath: source.path) else { throw JobError(.stepFailed, "cannot read \(source.path)") }
        defer { try? original.close() }
        while let chunk = try original.read(upToCount: 1 << 20), !chunk.isEmpty { chunk.withUnsafeBytes { expected.update($0) } }
        guard crc.value == expected.value else {
            throw JobError(.stepFailed, "the copy's CRC-32 \(String(crc.value, radix: 16)) differs from the source's \(String(expected.value, radix: 16))")
        }
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: partial, to: destination)
        context.log("copied \(done) bytes to \(destination.path), CRC-32 \(String(crc.value, radix: 16))")
    }

    public func output(context: JobContext) async throws -> Output {
        let size = (try? FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? NSNumber)?.int64Value ?? 0
        var crc = CRC32()
        if let handle = FileHandle(forReadingAtPath: destination.path) {
            defer { try? handle.close() }
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { chunk.withUnsafeBytes { crc.update($0) } }
        }
        return Output(destination: destination, bytes: size, crc32: crc.value)
    }

    public func rollback(context: JobContext) async {
        try? FileManager.default.removeItem(at: partial)
    }
}

extension JobRegistry {
    /// The job types every process knows: the file copy.
    public static var standard: JobRegistry {
        var registry = JobRegistry()
        registry.register(CopyFileJob.self)
        return registry
    }
}
