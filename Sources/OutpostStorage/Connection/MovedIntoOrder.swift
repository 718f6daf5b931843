extension UnsafeMutableBufferPointer {
    /// Puts the element at `source(i)` at each place `i`, moving every element once along the
    /// permutation's cycles: no element is copied (a copy retains and releases each of its
    /// references), and no second buffer is held. `isPlaced(i)` tells whether place `i` was
    /// filled already and `markPlaced(i)` records it, so a caller can keep the marks where it
    /// has room for them.
    @inline(__always)
    func moveIntoOrder(source: (Int) -> Int, isPlaced: (Int) -> Bool, markPlaced: (Int) -> Void) {
        guard let base = baseAddress else { return }
        for start in indices where !isPlaced(start) {
            let saved = (base + start).move()
            var at = start
            while true {
                markPlaced(at)
                let from = source(at)
                if from == start {
                    (base + at).initialize(to: saved)
                    break
                }
                (base + at).moveInitialize(from: base + from, count: 1)
                at = from
            }
        }
    }
}
