import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost serve` running as its own process, for tests that use real HTTP from other programs
/// (GDAL, esridump, curl) or that stop it with a signal.
public final class ServeProcess: @unchecked Sendable {
    // @unchecked: the Process is only touched from the test that owns this value.
    public let process: Process
    public let url: URL
    private let output: Pipe

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
        let process = Process()
        process.executableURL = Repository.outpostExecutable
        process.arguments = ["serve"] + source + ["--port", "0"] + arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
        let output = Pipe()
        process.standardOutput = output
        if let errorLog {
            _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: errorLog)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        let line: String? = await withCheckedContinuation { continuation in
            ExternalTools.onOwnThread {
                // read(2) itself: FileHandle.readData stops the process when a signal (a child's
                // SIGCHLD) interrupts the read, and other tests start children all the time.
                var collected = Data()
                let fd = output.fileHandleForReading.fileDescriptor
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
            process.terminate()
            throw ReaderMismatch(description: "outpost serve did not start (first line: \(line ?? "none"))")
        }
        return ServeProcess(process: process, url: url, output: output)
    }

    private init(process: Process, url: URL, output: Pipe) {
        self.process = process
        self.url = url
        self.output = output
    }

    /// The FeatureServer URL of a service.
    public func featureServer(_ name: String) -> URL {
        url.appendingPathComponent("arcgis/rest/services/\(name)/FeatureServer")
    }

    /// Sends `signal` (SIGTERM by default) and waits for the process to exit; returns its status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 30) async -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            while process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
