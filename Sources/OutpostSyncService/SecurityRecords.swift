import Foundation

/// A site's sign-in settings kept where every host of the site reads them: the users document
/// (users, roles, password hashes, the key tokens are signed with; the same JSON as a users file,
/// which the server reads and checks, so a store needs no security types), and the failed sign-ins
/// the hosts throttle together.
///
/// A host reads ``securityVersion()`` at most once a second and the document again only when
/// the version moved, so a change reaches every host within about a second.
public protocol SecurityRecordStore: Sendable {
    /// The version of the users document, bumped by every change; nil while there is none.
    func securityVersion() async throws -> Int64?

    /// The users document and its version; nil while there is none.
    func securityDocument() async throws -> (version: Int64, text: String)?

    /// Changes the users document in one transaction, writers one at a time: `change` is given
    /// the current text (nil when there is none) and returns the new one. Returns the new version.
    @discardableResult
    func changeSecurityDocument(_ change: @escaping @Sendable (String?) throws -> String) async throws -> Int64

    /// For each key (a user name, an address) with failed sign-ins at or after `since` (epoch
    /// ms): how many, and the oldest of them. Older failures may be forgotten.
    func failedSignIns(_ keys: [String], since: Int64) async throws -> [String: (count: Int, oldest: Int64)]

    /// A failed sign-in counted against each key, at `time` (epoch ms).
    func recordFailedSignIn(_ keys: [String], at time: Int64) async throws

    /// Forgets the failed sign-ins of `key` (its user signed in).
    func clearFailedSignIns(_ key: String) async throws
}
