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

    /// Starts `outpost serve --service <service> --port 0 <arguments>` and waits for its
    /// "listening on" line.
    public static func start(
        service: URL, arguments: [String] = [], environment: [String: String] = [:], timeout: TimeInterval = 60, errorLog: URL? = nil
    ) async throws -> ServeProcess {
        try await start(source: ["--service", service.path], arguments: arguments, environment: environment, timeout: timeout, errorLog: errorLog)
    }

    /// Starts `outpost serve <source> --port 0 <arguments>` and waits for its "listening on" line.
    /// - Parameter errorLog: a file for the server's standard error (its log), else discarded.
    public static func start(
        source: [String], arguments: [String] = [], environment: [String: String] = [:], timeout: TimeInterval = 60, errorLog: URL? = nil
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
                Repository.outpostExecutable.path, ["serve"] + source + ["--port", "0"] + arguments, environment: environment.isEmpty ? nil : environment,
                stdout: .descriptor(outWrite), stderr: log >= 0 ? .descriptor(log) : .null)
        } catch {
            close(outRead)
            throw error
        }
        let line: String? = await withCheckedContinuation { continuation in
            ExternalTools.onOwnThread {
                // read(2) itself: FileHandle.readData stops the process when a signal (a child's
                // SIGCHLD) interrupts the read, and other tests start children all the time.
                var collected = Data()
                let fd = outRead
                var byte: UInt8 = 0
                while true {
                    let n = read(fd, &byte, 1)
                    if n < 0, errno == EINTR { continue }
                    if n <= 0 {
                        continuation.resume(returning: nil)
                        return
                    }
                    if byte == UInt8(ascii: "\n") {
                        continuation.resume(returning: String(decoding: collected, as: UTF8.self))
                        return
                    }
                    collected.append(byte)
                }
            }
        }
        guard let line, line.hasPrefix("listening on "), let url = URL(string: String(line.dropFirst("listening on ".count))) else {
            process.signal(SIGKILL)
            process.wait()
            close(outRead)
            throw ReaderMismatch(description: "outpost serve did not start (first line: \(line ?? "none"))")
        }
        return ServeProcess(process: process, url: url, output: outRead)
    }

    private init(process: SpawnedProcess, url: URL, output: Int32) {
        self.process = process
        self.url = url
        self.output = output
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
