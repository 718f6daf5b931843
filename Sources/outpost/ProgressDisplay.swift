import Foundation
import OutpostCore

#if canImport(Glibc)
    import Glibc
#endif

/// A one-line progress bar on stderr when it is a terminal (done/total, rate, ETA); silent
/// otherwise, so scripts and logs get only the final result.
struct ProgressDisplay {
    let enabled = isatty(STDERR_FILENO) == 1
    let started = Date()

    func show(_ progress: JobProgress, label: String) {
        guard enabled else { return }
        let width = 30
        let filled = Int(progress.fraction * Double(width))
        var line = "\r\(label) [\(String(repeating: "#", count: filled))\(String(repeating: " ", count: width - filled))] \(Int(progress.fraction * 100))%"
        if let phase = progress.phases.last {
            line += " \(Self.count(phase.done, phase.name))"
            if let total = phase.total { line += "/\(Self.count(total, phase.name))" }
            let elapsed = Date().timeIntervalSince(started)
            if elapsed > 0.5, phase.done > 0 {
                let rate = Double(phase.done) / elapsed
                line += " \(Self.count(Int64(rate), phase.name))/s"
                if let total = phase.total, total > phase.done {
                    line += " ETA \(Int(Double(total - phase.done) / rate))s"
                }
            }
        }
        FileHandle.standardError.write(Data((line + "\u{1B}[K").utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }

    static func count(_ value: Int64, _ unit: String) -> String {
        guard unit.contains("bytes") else { return "\(value) \(unit)" }
        let v = Double(value)
        let kb = 1024.0
        if v >= kb * kb * kb { return String(format: "%.1f GB", v / (kb * kb * kb)) }
        if v >= kb * kb { return String(format: "%.1f MB", v / (kb * kb)) }
        if v >= kb { return String(format: "%.1f KB", v / kb) }
        return "\(value) B"
    }
}

/// Runs `job` to the end, showing progress; Ctrl-C pauses it (resume with `outpost job resume`)
/// unless `pausesOnInterrupt` is false (the caller's own signal handling stays in charge).
func runShowingProgress(_ job: any AnyJob, label: String, pausesOnInterrupt: Bool = true) async -> JobStatus {
    let display = ProgressDisplay()
    var interrupt: (any DispatchSourceSignal)?
    if pausesOnInterrupt {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            if job.status == .started {
                FileHandle.standardError.write(Data("\noutpost: pausing at the next checkpoint (Ctrl-C again to quit)\n".utf8))
                try? job.pause()
            } else {
                exit(OutpostExit.interrupted.rawValue)
            }
        }
        source.resume()
        interrupt = source
    }
    defer { interrupt?.cancel() }
    let progress = job.progressUpdates
    let watcher = Task {
        for await p in progress { display.show(p, label: label) }
    }
    var final = job.status
    for await status in job.statusUpdates {
        final = status
        if status.isFinished || status == .paused { break }
    }
    watcher.cancel()
    display.show(job.snapshot.progress, label: label)
    display.finish()
    return final
}
