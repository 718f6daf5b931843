import Foundation
import OutpostCore

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a command and captures its output.
public struct CommandResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    public var succeeded: Bool { status == 0 }
}

public enum ExternalToolError: Error, CustomStringConvertible {
    case missing(String)
    public var description: String {
        switch self {
        case .missing(let tool):
            "\(tool) is not installed; run ./scripts/test, which installs the third-party readers the tests check against"
        }
    }
}

/// Third-party programs the tests check Outpost's outputs with (GDAL, Python readers, sqlite3).
/// The test script installs them; a missing tool fails the test that needs it.
public enum ExternalTools {
    /// Locates `name` on PATH.
    public static func which(_ name: String) -> String? {
        if name.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    public static func require(_ name: String) throws -> String {
        guard let path = which(name) else { throw ExternalToolError.missing(name) }
        return path
    }

    /// The Python with pyogrio, pygeodiff and jsonschema (`OUTPOST_PYTHON`, else `python3` on PATH).
    public static var python: String {
        ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? which("python3") ?? "/usr/bin/python3"
    }

    /// GDAL's GeoPackage validator (`OUTPOST_VALIDATE_GPKG`), run with Debian's python3-gdal.
    public static var validateGPKG: String? {
        ProcessInfo.processInfo.environment["OUTPOST_VALIDATE_GPKG"]
    }

    /// Runs `body` on a thread of its own: for blocking waits (a process, a pipe). Not on
    /// `DispatchQueue.global()`: on Linux its pool is as wide as the machine has cores (2 on CI)
    /// and only slowly adds threads while they block, so a few tools running at once (each wait
    /// and each stderr reader a blocked work item) hold back every other test's tool.
    public static func onOwnThread(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// How long a tool may run before ``run(_:_:input:environment:currentDirectory:timeout:)``
    /// stops it: `OUTPOST_TOOL_TIMEOUT` seconds, else ten minutes. A hung tool then fails its
    /// test with what it printed instead of holding the whole run until CI's limit.
    public static var defaultTimeout: TimeInterval {
        ProcessInfo.processInfo.environment["OUTPOST_TOOL_TIMEOUT"].flatMap(TimeInterval.init) ?? 600
    }

    /// The status a run stopped at its deadline reports (as coreutils' `timeout` does).
    public static let timedOutStatus: Int32 = 124

    /// Runs `executable` with `arguments`, feeding `input` on stdin. The wait happens on a
    /// thread of its own, so a test waiting for a slow tool never starves the concurrency pool
    /// (2 threads on the CI machines) that other tests' tasks run on, nor other tests' waits.
    ///
    /// The tool runs in a process group of its own. Past `timeout` the whole group is killed and
    /// the result has status ``timedOutStatus`` with a line saying so on its standard error; once
    /// the tool has exited, whatever it left running in the group (a shell's background job
    /// holding the pipes open) is killed after a few seconds, so the run always returns.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil,
        currentDirectory: URL? = nil, timeout: TimeInterval? = nil
    ) async throws -> CommandResult {
        let limit = timeout ?? defaultTimeout
        return try await withCheckedThrowingContinuation { continuation in
            onOwnThread {
                continuation.resume(with: Result {
                    try runBlocking(executable, arguments, input: input, environment: environment, currentDirectory: currentDirectory, timeout: limit)
                })
            }
        }
    }

    static func runBlocking(
        _ executable: String, _ arguments: [String], input: String?, environment: [String: String]?,
        currentDirectory: URL?, timeout: TimeInterval
    ) throws -> CommandResult {
        let (inRead, inWrite) = try SpawnedProcess.pipe()
        let (outRead, outWrite) = try SpawnedProcess.pipe()
        let (errRead, errWrite) = try SpawnedProcess.pipe()
        let process: SpawnedProcess
        do {
            defer { close(inRead); close(outWrite); close(errWrite) }
            process = try SpawnedProcess.spawn(
                try require(executable), arguments, environment: environment, currentDirectory: currentDirectory,
                stdin: .descriptor(inRead), stdout: .descriptor(outWrite), stderr: .descriptor(errWrite), ownGroup: true)
        } catch {
            close(inWrite); close(outRead); close(errRead)
            throw error
        }
        defer { close(outRead); close(errRead) }
        if let input {
            let bytes = Array(input.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { write(inWrite, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                offset += n
            }
        }
        close(inWrite)
        // Read both pipes while waiting so a chatty process cannot block on a full pipe.
        let readers = DispatchGroup()
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        readers.enter()
        onOwnThread {
            outData = readToEnd(outRead)
            readers.leave()
        }
        readers.enter()
        onOwnThread {
            errData = readToEnd(errRead)
            readers.leave()
        }
        let exited = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var status: Int32 = -1
        onOwnThread {
            status = process.wait()
            exited.signal()
        }
        var timedOut = false
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            process.signalGroup(SIGKILL)
            exited.wait()
        }
        // The pipes close when the last process holding them ends: give what the tool left
        // behind a moment, then end it.
        if readers.wait(timeout: .now() + 5) == .timedOut {
            process.signalGroup(SIGKILL)
            readers.wait()
        }
        var stderr = String(decoding: errData, as: UTF8.self)
        if timedOut {
            stderr += "\n[\(executable) killed after \(Int(timeout)) s: it had not finished]\n"
            status = timedOutStatus
        }
        return CommandResult(status: status, stdout: String(decoding: outData, as: UTF8.self), stderr: stderr)
    }

    /// Everything a pipe delivers until its writer closes it. read(2) itself, retried when a
    /// signal interrupts it: Foundation's readers stop the process on EINTR, and a child's
    /// SIGCHLD arrives whenever another test's process ends.
    public static func readToEnd(_ fd: Int32) -> Data {
        var out = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    /// Checks documents against a JSON Schema with Python's `jsonschema` (draft 2020-12): the
    /// schema itself is valid, every file in `valid` passes, every document in `invalid` fails.
    /// The result fails naming the first document that did otherwise.
    public static func checkJSONSchema(_ schema: URL, valid: [URL], invalid: [JSONValue] = []) async throws -> CommandResult {
        let script = """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema)
            bad = json.loads(sys.argv[2])
            for path in sys.argv[3:]:
                errors = [e.message for e in validator.iter_errors(json.load(open(path)))]
                assert not errors, (path, errors)
            for i, doc in enumerate(bad):
                assert list(validator.iter_errors(doc)), ("invalid document %d passed" % i, doc)
            print("ok")
            """
        return try await python(script, [schema.path, JSONValue.array(invalid).jsonString] + valid.map(\.path))
    }

    /// Runs a Python snippet with ``python``; arguments arrive in `sys.argv[1:]`.
    @discardableResult
    public static func python(_ script: String, _ arguments: [String] = []) async throws -> CommandResult {
        try await run(python, ["-c", script] + arguments)
    }
}

/// Edits made to a field-inspection geodatabase by writers other than Outpost.
public enum OtherWriters {
    /// GDAL appends valve `GD-1` (no global id: the capture trigger gives it one) with `ogr2ogr`,
    /// then closes it with an SQL UPDATE through `ogrinfo`.
    public static func gdalAppendAndUpdate(_ file: URL, scratch: TemporaryDirectory) async throws -> (append: CommandResult, update: CommandResult) {
        let newFeature = scratch.file("new.geojson")
        try #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"asset_id":"GD-1","asset_type":"valve","status":"open","depth_m":2.5},"geometry":{"type":"Point","coordinates":[-122.65,45.52]}}]}"#
            .write(to: newFeature, atomically: true, encoding: .utf8)
        let append = try await ExternalTools.run("ogr2ogr", ["-update", "-append", file.path, newFeature.path, "-nln", "inspection_points"])
        let update = try await ExternalTools.run("ogrinfo", [file.path, "-sql", "UPDATE inspection_points SET status = 'closed', condition = 4 WHERE asset_id = 'GD-1'"])
        return (append, update)
    }
}
