/// How long a test lets a cancelled wait take. The library promises 250 ms; on a 2-core machine
/// running the whole suite, the Task that observes the cancel can wait its turn on a cooperative
/// pool that other tests' work occupies (2 s was seen for a cancel that takes milliseconds alone),
/// so the bound is far above the promise and still far below "never".
public enum CancellationBound {
    public static let loaded: Duration = .seconds(5)
}
