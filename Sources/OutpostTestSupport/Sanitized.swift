import Foundation

/// The sanitizer this test process runs under, as `scripts/sanitize` names it in
/// `OUTPOST_SANITIZER` (`address` or `thread`), or nil for the plain suite.
public enum Sanitized {
    public static let by: String? = ProcessInfo.processInfo.environment["OUTPOST_SANITIZER"]

    /// Whether a process's anonymous memory, read from /proc, is Outpost's own. Under a
    /// sanitizer it is not: ThreadSanitizer's shadow is several times the memory it shadows and
    /// AddressSanitizer holds freed blocks back in quarantine, so a 100 MB attachment's sync,
    /// 38 MB of heap up and 42 MB down in the plain build, measured 86 MB and 187 MB under TSan.
    /// Tests of a memory bound still run there and check everything else.
    public static var memoryIsMeasurable: Bool { by == nil }
}
