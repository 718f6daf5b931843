import Foundation
import OutpostTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The network of a ``SiteLab``: a Linux network namespace per machine, each with one veth link
/// to a bridge in a switch namespace of its own, so every packet between the machines stays
/// inside the namespaces (none crosses this machine's own network). It also starts the machines'
/// processes, and removes the namespaces and stops the processes it started in ``tearDown()``.
final class SiteNetwork: @unchecked Sendable {
    // @unchecked: `namespaces` and `processes` are behind `lock`.
    /// The first three parts of every machine's IPv4 address (a /24).
    static let subnet = "10.90.0"
    /// Names every namespace of this network begins with (unique to this process and run).
    let prefix: String
    private let lock = NSLock()
    private var namespaces: [String] = []
    private var processes: [SpawnedProcess] = []

    init() {
        prefix = "outpost-site-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
    }

    /// A machine's namespace.
    func namespace(_ machine: String) -> String { "\(prefix)-\(machine)" }

    /// A machine's address.
    static func address(_ host: Int) -> String { "\(subnet).\(host)" }

    /// Makes the switch and a namespace with an address for each machine.
    func build(_ machines: [(name: String, host: Int)]) async throws {
        let hub = namespace("switch")
        try await add(hub)
        try await ip(["-n", hub, "link", "add", "br0", "type", "bridge"])
        try await ip(["-n", hub, "link", "set", "br0", "up"])
        for (index, machine) in machines.enumerated() {
            let ns = namespace(machine.name)
            try await add(ns)
            // The switch's end of the link is named by its port; the machine's end is eth0.
            let port = "port\(index)"
            try await ip(["link", "add", port, "netns", hub, "type", "veth", "peer", "name", "eth0", "netns", ns])
            try await ip(["-n", hub, "link", "set", port, "master", "br0", "up"])
            try await ip(["-n", ns, "addr", "add", "\(Self.address(machine.host))/24", "dev", "eth0"])
            try await ip(["-n", ns, "link", "set", "eth0", "up"])
            try await ip(["-n", ns, "link", "set", "lo", "up"])
        }
    }

    private func add(_ ns: String) async throws {
        try await ip(["netns", "add", ns])
        lock.withLock { namespaces.append(ns) }
    }

    private func ip(_ arguments: [String]) async throws {
        let run = try await ExternalTools.run("ip", arguments, timeout: 30)
        guard run.succeeded else { throw SiteLab.Failure("ip \(arguments.joined(separator: " ")): \(run.stderr.trimmingCharacters(in: .whitespacesAndNewlines))") }
    }

    /// Runs a command on `machine` to its end.
    func run(_ machine: String, _ command: [String], as user: String? = nil, timeout: TimeInterval = 120) async throws -> CommandResult {
        try await ExternalTools.run("ip", ["netns", "exec", namespace(machine)] + Self.asUser(user) + command, timeout: timeout)
    }

    /// Runs a command on `machine` and throws with its output when it fails.
    @discardableResult
    func must(_ machine: String, _ command: [String], as user: String? = nil, timeout: TimeInterval = 120) async throws -> String {
        let run = try await run(machine, command, as: user, timeout: timeout)
        guard run.succeeded else {
            throw SiteLab.Failure("on \(machine): \(command.joined(separator: " ")): \(run.stderr.trimmingCharacters(in: .whitespacesAndNewlines)) \(run.stdout.suffix(400))")
        }
        return run.stdout
    }

    /// Starts a long-running command on `machine` (not a daemon: it stays this process's child),
    /// its standard output and error appended to `log`. `ip netns exec` and `setpriv` replace
    /// themselves with the command, so the process returned is the command itself: a signal sent
    /// to it reaches the server.
    func start(_ machine: String, _ command: [String], as user: String? = nil, log: URL, stdout: Int32? = nil) throws -> SpawnedProcess {
        let fd = open(log.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw SiteLab.Failure("cannot open \(log.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let process = try SpawnedProcess.spawn(
            try ExternalTools.require("ip"), ["netns", "exec", namespace(machine)] + Self.asUser(user) + command,
            stdout: .descriptor(stdout ?? fd), stderr: .descriptor(fd))
        lock.withLock { processes.append(process) }
        return process
    }

    /// `setpriv` to run as `user` without a process in between (PostgreSQL refuses root).
    private static func asUser(_ user: String?) -> [String] {
        guard let user else { return [] }
        return ["setpriv", "--reuid=\(user)", "--regid=\(user)", "--init-groups", "--"]
    }

    /// Answers `GET url` from `machine` with its status (0: no answer within `seconds`).
    func status(from machine: String, _ url: String, seconds: Int = 2) async -> Int {
        guard let run = try? await run(machine, ["curl", "-s", "--noproxy", "*", "-m", "\(seconds)", "-o", "/dev/null", "-w", "%{http_code}", url], timeout: Double(seconds) + 10) else { return 0 }
        return Int(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// Waits until `condition` holds, checking every 200 ms, for at most `seconds`.
    func wait(_ what: String, seconds: Double, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw SiteLab.Failure("\(what): not within \(Int(seconds)) s")
    }

    /// Stops every process it started (SIGKILL: the run is over) and removes the namespaces.
    func tearDown() async {
        let (started, made) = lock.withLock { (processes, namespaces) }
        for process in started where process.isRunning { process.signal(SIGKILL) }
        for process in started { process.wait() }
        for ns in made.reversed() { _ = try? await ExternalTools.run("ip", ["netns", "delete", ns], timeout: 30) }
        lock.withLock {
            processes = []
            namespaces = []
        }
    }
}
