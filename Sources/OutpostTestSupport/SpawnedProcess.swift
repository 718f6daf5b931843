import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, for the tests' external programs.
///
/// Not Foundation's `Process`: on Linux its `run()` lists `/proc/self/fd` to close the parent's
/// descriptors in the child and copies each directory entry's whole 256-byte name field, which
/// reads past glibc's buffer when an entry sits at its end before an unmapped page. The suite
/// crashed that way in three of five runs once enough tests kept files open at once. Here
/// the child closes every descriptor above standard error through glibc's
/// `posix_spawn_file_actions_addclosefrom_np` and changes directory through
/// `posix_spawn_file_actions_addchdir_np` (both glibc 2.34+, looked up by name).
public final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: `status` and `signalled` are read and written under `lock`.
    public let pid: pid_t
    private let lock = NSLock()
    /// Held while `waitpid` runs: only one thread reaps the child.
    private let reaping = NSLock()
    private var status: Int32?
    private var signalled = false

    /// What a standard stream of the child is: a descriptor of the parent (duplicated in), or
    /// nothing (`/dev/null`).
    public enum Stream {
        case descriptor(Int32)
        case null
    }

    private init(pid: pid_t) { self.pid = pid }

    /// Starts `executable` with `arguments`, the parent's environment with `environment` laid
    /// over it, in `currentDirectory` when given. With `ownGroup` the child leads a process group
    /// of its own, so ``signalGroup(_:)`` reaches whatever it started too (a shell's background
    /// jobs, a browser's helpers).
    public static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, currentDirectory: URL? = nil,
        stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null, ownGroup: Bool = false
    ) throws -> SpawnedProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
            switch stream {
            case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        guard let closeFrom = Self.closeFrom, let changeDirectory = Self.changeDirectory else {
            throw ReaderMismatch(description: "this C library has no posix_spawn_file_actions_addclosefrom_np / addchdir_np (glibc 2.34 or later is needed)")
        }
        _ = closeFrom(&actions, 3)
        if let currentDirectory { _ = currentDirectory.path.withCString { changeDirectory(&actions, $0) } }
        var merged = ProcessInfo.processInfo.environment
        if let environment { merged.merge(environment) { _, new in new } }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if ownGroup {
            _ = posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
            _ = posix_spawnattr_setpgroup(&attributes, 0)
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw ReaderMismatch(description: "cannot start \(executable): \(String(cString: strerror(rc)))") }
        return SpawnedProcess(pid: pid)
    }

    /// A pipe whose two ends are closed in children (each spawn dups what it needs; it closes
    /// every other descriptor in the child anyway).
    public static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { throw ReaderMismatch(description: "pipe failed: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    /// Whether a signal ended the child (its status is then the signal's number).
    public var endedBySignal: Bool { lock.withLock { signalled } }

    /// Waits for the child to exit: its exit status, or the number of the signal that ended it
    /// (as Foundation's `terminationStatus` says it); -1 when the wait itself failed.
    @discardableResult
    public func wait() -> Int32 {
        reaping.lock()
        defer { reaping.unlock() }
        if let known = lock.withLock({ status }) { return known }
        var raw: Int32 = 0
        var rc = waitpid(pid, &raw, 0)
        while rc < 0, errno == EINTR { rc = waitpid(pid, &raw, 0) }
        // A wait that failed says nothing of how the child ended: never a success.
        return rc == pid ? record(raw) : -1
    }

    /// Whether the child is still running (reaps it when it has exited).
    public var isRunning: Bool {
        if lock.withLock({ status }) != nil { return false }
        // Another thread waiting for it reaps it.
        guard reaping.try() else { return true }
        defer { reaping.unlock() }
        if lock.withLock({ status }) != nil { return false }
        var raw: Int32 = 0
        let rc = waitpid(pid, &raw, WNOHANG)
        if rc == pid {
            record(raw)
            return false
        }
        return rc == 0
    }

    public func signal(_ signal: Int32) { if isRunning { kill(pid, signal) } }

    /// Sends `signal` to the child's process group (spawned with `ownGroup`): the child and
    /// everything it started that stayed in the group, running or not yet reaped.
    public func signalGroup(_ signal: Int32) { kill(-pid, signal) }

    /// Keeps what `waitpid` said (the first time): the status it returns.
    @discardableResult
    private func record(_ raw: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as functions.
        let signal = raw & 0x7f
        return lock.withLock {
            if status == nil {
                status = signal == 0 ? (raw >> 8) & 0xff : signal
                signalled = signal != 0
            }
            return status!
        }
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }
    private static let changeDirectory: ChangeDirectory? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np").map {
        unsafeBitCast($0, to: ChangeDirectory.self)
    }
}
