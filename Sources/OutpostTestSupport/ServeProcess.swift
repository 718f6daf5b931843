import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost serve` running as its own process, for tests that use real HTTP from other programs
/// (GDAL, esridump, curl) or that stop it with a signal.
public final class ServeProcess: @unchecked Sendable {
    // @unchecked: the process is only touched from the test that owns this value.
    public let process: SpawnedProcess
    public let url: URL
    /// The read end of the server's standard output (its "listening on" line).
    private let output: Int32
    /// The lines of standard output read while waiting for the URL.
    public let transcript: String

    /// Starts `outpost serve --service <service> --port 0 <arguments>` and waits for its
    /// "listening on" line.
    public static func start(
        service: URL, arguments: [String] = [], environment: [String: String] = [:], timeout: TimeInterval = 120, errorLog: URL? = nil
    ) async throws -> ServeProcess {
        try await start(source: ["--service", service.path], arguments: arguments, environment: environment, timeout: timeout, errorLog: errorLog)
    }

    /// Starts `outpost serve <source> --port 0 <arguments>` and waits for its "listening on" line.
    /// - Parameter errorLog: a file for the server's standard error (its log), else discarded.
    public static func start(
        source: [String], arguments: [String] = [], environment: [String: String] = [:], timeout: TimeInterval = 120, errorLog: URL? = nil
    ) async throws -> ServeProcess {
        try await launch(["serve"] + source + ["--port", "0"] + arguments, environment: environment, errorLog: errorLog, what: "outpost serve", timeout: timeout) { lines in
            // The first line says where it listens.
            guard let line = lines.first else { return .more }
            guard line.hasPrefix("listening on "), let url = URL(string: String(line.dropFirst("listening on ".count))) else { return .failed }
            return .found(url)
        }
    }

    /// What a launched process's output has shown so far.
    public enum Sighting: Sendable {
        /// The URL the caller waits for.
        case found(URL)
        /// Not yet: read another line.
        case more
        /// Never: stop the process.
        case failed
    }

    /// Starts `outpost <arguments>` (a command that serves, like `outpost demo --keep`) and reads
    /// its standard output line by line until `sighting` finds the URL it serves at; the lines read
    /// are kept in ``transcript``. A process that shows no URL within `timeout` seconds is killed
    /// and the launch fails.
    public static func launch(
        _ arguments: [String], currentDirectory: URL? = nil, environment: [String: String] = [:], errorLog: URL? = nil, what: String = "outpost",
        timeout: TimeInterval = 120, sighting: @escaping @Sendable ([String]) -> Sighting
    ) async throws -> ServeProcess {
        let (outRead, outWrite) = try SpawnedProcess.pipe()
        var log: Int32 = -1
        if let errorLog {
            log = open(errorLog.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard log >= 0 else {
                close(outRead); close(outWrite)
                throw ReaderMismatch(description: "cannot open \(errorLog.path): \(String(cString: strerror(errno)))")
            }
        }
        let process: SpawnedProcess
        do {
            defer {
                close(outWrite)
                if log >= 0 { close(log) }
            }
            process = try SpawnedProcess.spawn(
                Repository.outpostExecutable.path, arguments, environment: environment.isEmpty ? nil : environment, currentDirectory: currentDirectory,
                stdout: .descriptor(outWrite), stderr: log >= 0 ? .descriptor(log) : .null)
        } catch {
            close(outRead)
            throw error
        }
        // Past the deadline the process is killed: its output ends and the read below returns.
        let sighted = NSLock()
        nonisolated(unsafe) var done = false
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            sighted.withLock { if !done { process.signal(SIGKILL) } }
        }
        let (url, lines): (URL?, [String]) = await withCheckedContinuation { continuation in
            ExternalTools.onOwnThread {
                // read(2) itself: FileHandle.readData stops the process when a signal (a child's
                // SIGCHLD) interrupts the read, and other tests start children all the time.
                var lines: [String] = []
                var collected = Data()
                let fd = outRead
                var byte: UInt8 = 0
                while true {
                    let n = read(fd, &byte, 1)
                    if n < 0, errno == EINTR { continue }
                    if n <= 0 {
                        continuation.resume(returning: (nil, lines))
                        return
                    }
                    guard byte == UInt8(ascii: "\n") else {
                        collected.append(byte)
                        continue
                    }
                    lines.append(String(decoding: collected, as: UTF8.self))
                    collected.removeAll()
                    switch sighting(lines) {
                    case .found(let url): return continuation.resume(returning: (url, lines))
                    case .failed: return continuation.resume(returning: (nil, lines))
                    case .more: continue
                    }
                }
            }
        }
        sighted.withLock { done = true }
        guard let url else {
            process.signal(SIGKILL)
            process.wait()
            close(outRead)
            throw ReaderMismatch(description: "\(what) did not start (its output: \(lines.isEmpty ? "none" : lines.joined(separator: "\n")))")
        }
        return ServeProcess(process: process, url: url, output: outRead, transcript: lines.joined(separator: "\n"))
    }

    private init(process: SpawnedProcess, url: URL, output: Int32, transcript: String) {
        self.process = process
        self.url = url
        self.output = output
        self.transcript = transcript
    }

    /// The FeatureServer URL of a service.
    public func featureServer(_ name: String) -> URL {
        url.appendingPathComponent("arcgis/rest/services/\(name)/FeatureServer")
    }

    /// Sends `signal` (SIGTERM by default) and waits for the process to exit; returns its exit
    /// status, or the number of the signal that ended it.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 30) async -> Int32 {
        process.signal(signal)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            process.signal(SIGKILL)
            while process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        }
        return process.wait()
    }

    deinit {
        if process.isRunning {
            process.signal(SIGKILL)
            process.wait()
        }
        close(output)
    }
}
