import Testing

extension Trait where Self == TimeLimitTrait {
    /// A test's time limit in minutes, stretched by ``CancellationBound/timeScale``: a sanitized
    /// build runs several times slower, and a fixed limit failed tests that were only slow there
    /// (a route loop at 172 s of its 120, a paused batch at 414 s of its 180). Tests take their
    /// limits from here, never from `.timeLimit` directly (PackageHygieneTests holds them to it).
    public static func scaledTimeLimit(minutes: Int) -> Self {
        .timeLimit(.minutes(minutes * CancellationBound.timeScale))
    }
}
