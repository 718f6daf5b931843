/// Frees a large value on a background task instead of where its last use ends.
///
/// Tearing down a decoded upload batch is not cheap: every edit holds a global id, attribute
/// and base-value dictionaries of `JSONValue`s, a geometry and column lists, and freeing 16,000
/// of them took 16–22 ms, their 16,000 results another 8–9 ms (the uploading replica of
/// `outpost-bench sync`, timed between its last acknowledgement and its download). Where such a
/// value's last use is followed by work someone waits for (the server's answer, the replica's
/// next step), it is handed here: the caller gives up its reference (`consume`) and the value
/// is released by a detached task of background priority, after the waiting work was scheduled.
/// At most a batch or two is in flight this way, so memory stays bounded.
public enum BackgroundRelease {
    /// Releases `value` on a detached background task.
    public static func release<T: Sendable>(_ value: consuming T) {
        let held = value
        Task.detached(priority: .background) { withExtendedLifetime(held) {} }
    }
}
