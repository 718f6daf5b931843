import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Wall time, CPU time and peak resident memory of one child process.
struct ProcessMeasurement {
    var seconds: Double
    var peakMemoryMB: Double
    var output: String
    /// User and system CPU time of the child, whole process (start-up included).
    var cpuSeconds: Double = 0
}

/// User and system CPU time of `usage`, in seconds.
func cpuSeconds(_ usage: rusage) -> Double {
    Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// A live process's CPU time so far (user and system, all its threads), in seconds; 0 when it
/// cannot be read.
func cpuSeconds(ofProcess pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Runs `arguments[0]` with the rest as arguments and measures it with wait4(2), so the peak
/// memory is the child's own (ru_maxrss), not the harness's.
func measure(_ arguments: [String]) throws -> ProcessMeasurement {
    let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).out")
    _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: outputFile) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_TRUNC, 0o644)
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let started = Date()
    let rc = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
    guard rc == 0 else { throw BenchError("cannot start \(arguments[0]) (errno \(rc))") }
    var status: Int32 = 0
    var usage = rusage()
    _ = wait4(pid, &status, 0, &usage)
    let seconds = Date().timeIntervalSince(started)
    let output = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
    guard status == 0 else { throw BenchError("\(arguments.joined(separator: " ")) failed (status \(status)): \(output)") }
    // A child's ru_maxrss starts from its parent's resident size (Linux records the mm it execs
    // away from), so workers report their own high-water mark (VmHWM) and that is used.
    let own = output.split(separator: "\n").last { $0.hasPrefix("vmhwm-kb ") }.flatMap { Double($0.dropFirst(9)) }
    return ProcessMeasurement(
        seconds: seconds, peakMemoryMB: own.map { $0 / 1024 } ?? Double(usage.ru_maxrss) / 1024, output: output, cpuSeconds: cpuSeconds(usage))
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs a worker `repeats` times and keeps the fastest run (the least disturbed by the other
/// process on a 2-core machine), with the largest peak memory seen.
func bestOf(_ repeats: Int, _ arguments: [String], before: () -> Void = {}) throws -> (seconds: Double, peakMemoryMB: Double) {
    var best = Double.infinity
    var peak = 0.0
    for _ in 0..<max(repeats, 1) {
        before()
        let m = try measure(arguments)
        best = min(best, try reportedSeconds(m))
        peak = max(peak, m.peakMemoryMB)
    }
    return (best, peak)
}

/// The seconds a worker reports for its timed section (the last line of its output).
func reportedSeconds(_ m: ProcessMeasurement) throws -> Double {
    guard let s = m.output.split(separator: "\n").reversed().lazy.compactMap({ Double($0.trimmingCharacters(in: .whitespaces)) }).first else {
        throw BenchError("worker printed no timing: \(m.output)")
    }
    return s
}

func printTable(_ title: String, _ header: [String], _ rows: [[String]]) {
    print("\n\(title)")
    let widths = header.indices.map { i in max(header[i].count, rows.map { $0[i].count }.max() ?? 0) }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { i, c in i == 0 ? c.padding(toLength: widths[i], withPad: " ", startingAt: 0) : String(repeating: " ", count: widths[i] - c.count) + c }
            .joined(separator: "  ")
    }
    print(line(header))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
    rows.forEach { print(line($0)) }
}

func format(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }

/// This process's resident high-water mark, as a worker reports it (`vmhwm-kb N`).
func printOwnPeakMemory() {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kb = line.split(separator: " ").dropFirst().first
    else { return }
    print("vmhwm-kb \(kb)")
}

/// Starts `executable worker-serve <service>` and waits for its "listening on" line; returns the
/// process and its base URL (`http://127.0.0.1:PORT`). Stop it with SIGTERM.
func startServer(executable: String, service: URL) throws -> (Process, String) {
    try startServer(executable: executable, arguments: ["worker-serve", service.path])
}

/// A server child process started with `arguments`, and the URL it printed.
func startServer(executable: String, arguments: [String]) throws -> (Process, String) {
    let server = Process()
    server.executableURL = URL(fileURLWithPath: executable)
    server.arguments = arguments
    let pipe = Pipe()
    server.standardOutput = pipe
    try server.run()
    var line = Data()
    while true {
        let b = pipe.fileHandleForReading.readData(ofLength: 1)
        if b.isEmpty || b.first == 10 { break }
        line.append(b)
    }
    return (server, String(decoding: line, as: UTF8.self).replacingOccurrences(of: "listening on ", with: ""))
}

/// Samples a live process's resident memory ten times a second, keeping the peaks of its
/// anonymous memory (heap, stacks) and of its file-backed pages (SQLite's memory-mapped reads
/// of the database, which the kernel may drop at any time) apart: VmHWM counts both.
final class MemorySampler: @unchecked Sendable {
    // @unchecked: the peaks are written by the sampling thread and read after `stop()` joins it.
    private let pid: Int32
    private var running = true
    private var peakAnonKB = 0, peakFileKB = 0
    private let done = DispatchSemaphore(value: 0)

    init(pid: Int32) {
        self.pid = pid
        Thread.detachNewThread { [self] in
            while running {
                if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
                    for line in status.split(separator: "\n") {
                        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                        guard parts.count >= 2, let kb = Int(parts[1]) else { continue }
                        if parts[0] == "RssAnon:" { peakAnonKB = max(peakAnonKB, kb) }
                        if parts[0] == "RssFile:" { peakFileKB = max(peakFileKB, kb) }
                    }
                }
                usleep(100_000)
            }
            done.signal()
        }
    }

    /// Stops sampling; the peaks in MB.
    func stop() -> (anonMB: Double, fileMB: Double) {
        running = false
        done.wait()
        return (Double(peakAnonKB) / 1024, Double(peakFileKB) / 1024)
    }
}
