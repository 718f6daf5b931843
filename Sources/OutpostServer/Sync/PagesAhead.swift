import Foundation
import HTTPTypes
import NIOCore

/// The change-feed page a replica will ask for next, made while the page before it travels
/// (docs/sync.md, "Download"). A page's `next` names the following page's cursor before the
/// replica has read a byte of it, so the server starts on that page at once instead of waiting
/// for the request: on two cores the server made each page of a 16,000-change download
/// (~10 ms of reads and encoding, ~3 ms of gzip) while the replica applied the one before
/// (~13 ms), and idled while a page crossed and the next request came back, so the replica
/// waited 3–7 ms for every page.
///
/// A page made ahead is the page a request made then would have got: feed pages are reads, each
/// of its own snapshot (pages of one window are never one snapshot, and a feature changed after
/// the window's `upto` comes again in the next sync), and only pages after the first are made
/// ahead, so the first page's bookkeeping write stays with its request. A request takes an entry
/// once, only with exactly the parameters and encoding it was made for; otherwise the page is
/// made as it always is. Entries are few and short-lived: dropped when taken, when older than
/// ``lifetime``, and the oldest when more than ``capacity`` are held (a download that stops
/// leaves one page made for nothing).
final class PagesAhead: Sendable {
    static let lifetime: Duration = .seconds(30)
    static let capacity = 64

    /// What a page request asks for: the page, and the encoding of its answer.
    struct Key: Hashable, Sendable {
        var service: String
        var replica: String
        var layer: Int
        var since: Int64
        var upto: Int64
        var after: String
        var limit: Int
        var binary: Bool
        /// Pages in the stored form (layout 2).
        var stored: Bool
        var gzip: Bool

        /// The same request for the page after `cursor`.
        func continuing(after cursor: String) -> Key {
            var next = self
            next.after = cursor
            return next
        }
    }

    /// A page's answer as it goes out, and the cursor of the page after it.
    struct Answer: Sendable {
        var body: ByteBuffer
        var headers: HTTPFields
        var next: String?
    }

    private let entries = TasksAhead<Key, Answer>(lifetime: PagesAhead.lifetime, capacity: PagesAhead.capacity)

    /// Starts making the page of `key` with `make`.
    func start(_ key: Key, _ make: @escaping @Sendable () async throws -> Answer) {
        entries.start(key, make)
    }

    /// The answer made ahead for `key`, waiting for it if it is still being made; nil when none
    /// was started, it is too old, or making it failed (the caller makes the page itself, and
    /// meets any error then). The entry is removed either way.
    func take(_ key: Key) async -> Answer? {
        try? await entries.take(key)?.value
    }

    /// How many entries are held (for tests).
    var count: Int { entries.count }
}
