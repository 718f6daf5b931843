import OutpostStorage

/// The generator of randomised tests and load runs: SplitMix64 from a fixed seed, so a failing
/// seed can be replayed (the same generator bulk global ids use, seeded instead of random).
public typealias SeededGenerator = FastRandomGenerator

extension FastRandomGenerator {
    /// A generator starting from `state` (the same as `init(seed:)`).
    public init(state: UInt64) { self.init(seed: state) }
}
