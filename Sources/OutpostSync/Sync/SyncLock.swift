import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One sync per geodatabase at a time, across processes: an exclusive `flock` on
/// `<file>-synclock` beside it. The kernel drops the lock when the holder dies, so a killed sync
/// never blocks the next one. (Not a lock on the database file itself: closing any descriptor of
/// that file would drop SQLite's own POSIX locks.)
final class SyncLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    static func acquire(for database: URL) throws -> SyncLock {
        let path = database.path + "-synclock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SyncError(.unsupported, "cannot create \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw SyncError(.busy, "another sync of \(database.lastPathComponent) is running")
        }
        return SyncLock(descriptor: fd)
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
