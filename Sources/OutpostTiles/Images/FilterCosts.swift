/// The cost of each PNG filter on a row (the sum of the filtered bytes read as signed values'
/// magnitudes, libpng's heuristic), computed with 16-byte SIMD lanes: the cost of a byte `v` is
/// `min(v, 0 − v)` in 8-bit arithmetic, Average uses `(a & b) + ((a ^ b) >> 1)` (the floor of the
/// mean without overflow), and Paeth runs in 16-bit lanes without branches.
///
/// Debug builds (`-Onone`) sum a byte at a time instead: there every SIMD operation stays an
/// unspecialised generic call, many times slower than plain integer arithmetic, while optimised
/// builds' lanes are several times faster than it. Both give the same sums
/// (`PNGTests.bothFilterCostSumsMatchTheReference`), so a debug build writes the same PNG.
struct FilterCosts {
    private(set) var sums = [0, 0, 0, 0, 0]

    /// The cheapest filter type, the lowest on a tie (as the scalar loop chose).
    var cheapest: UInt8 {
        var best = 0
        for f in 1..<5 where sums[f] < sums[best] { best = f }
        return UInt8(best)
    }

    @inline(__always) static func cost(_ v: UInt8) -> Int { Int(min(v, 0 &- v)) }

    /// Adds the five filters' costs on `row` (above it, `up`): 16 bytes at a time in optimised
    /// builds, a byte at a time in debug builds.
    mutating func add(_ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int) {
        #if DEBUG
            addByteAtATime(row, up, bpp: bpp)
        #else
            addInLanes(row, up, bpp: bpp)
        #endif
    }

    /// The costs a byte at a time, in plain integer arithmetic.
    mutating func addByteAtATime(_ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int) {
        addBytes(row, up, bpp: bpp, in: 0..<row.count)
    }

    /// The costs of the bytes in `range`, one at a time (the first pixel's left neighbours,
    /// a and c, are 0).
    private mutating func addBytes(_ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int, in range: Range<Int>) {
        guard let r = row.baseAddress, let u = up.baseAddress else { return }
        var c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0
        for i in range {
            let x = r[i], b = u[i]
            let a: UInt8 = i >= bpp ? r[i - bpp] : 0, c: UInt8 = i >= bpp ? u[i - bpp] : 0
            c0 &+= Self.cost(x)
            c1 &+= Self.cost(x &- a)
            c2 &+= Self.cost(x &- b)
            c3 &+= Self.cost(x &- UInt8((UInt16(a) &+ UInt16(b)) >> 1))
            c4 &+= Self.cost(x &- PNGEncoder.paeth(a, b, c))
        }
        sums[0] += c0
        sums[1] += c1
        sums[2] += c2
        sums[3] += c3
        sums[4] += c4
    }

    /// The costs in 16-byte SIMD lanes.
    mutating func addInLanes(_ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int) {
        let n = row.count
        guard let r = UnsafeRawPointer(row.baseAddress), let u = UnsafeRawPointer(up.baseAddress), n > 0 else { return }
        // The first pixel has no left neighbour to load lanes from.
        let lead = min(bpp, n)
        addBytes(row, up, bpp: bpp, in: 0..<lead)
        // Lanes of 16-bit partial sums, emptied into `sums` before they can overflow.
        var s0 = SIMD16<UInt16>(), s1 = s0, s2 = s0, s3 = s0, s4 = s0
        var pending = 0
        var i = lead
        while i + 16 <= n {
            let x = r.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
            let a = r.loadUnaligned(fromByteOffset: i - bpp, as: SIMD16<UInt8>.self)
            let b = u.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
            let c = u.loadUnaligned(fromByteOffset: i - bpp, as: SIMD16<UInt8>.self)
            s0 &+= Self.cost(x)
            s1 &+= Self.cost(x &- a)
            s2 &+= Self.cost(x &- b)
            s3 &+= Self.cost(x &- ((a & b) &+ ((a ^ b) &>> 1)))
            s4 &+= Self.cost(x &- Self.paeth(a, b, c))
            pending += 1
            i += 16
            if pending == 255 { flush(&s0, &s1, &s2, &s3, &s4, &pending) }
        }
        flush(&s0, &s1, &s2, &s3, &s4, &pending)
        // Fewer than 16 bytes left.
        addBytes(row, up, bpp: bpp, in: i..<n)
    }

    private mutating func flush(
        _ s0: inout SIMD16<UInt16>, _ s1: inout SIMD16<UInt16>, _ s2: inout SIMD16<UInt16>, _ s3: inout SIMD16<UInt16>, _ s4: inout SIMD16<UInt16>,
        _ pending: inout Int
    ) {
        guard pending > 0 else { return }
        for (k, lanes) in [s0, s1, s2, s3, s4].enumerated() { sums[k] += Int(SIMD16<UInt32>(truncatingIfNeeded: lanes).wrappedSum()) }
        s0 = SIMD16<UInt16>()
        s1 = s0
        s2 = s0
        s3 = s0
        s4 = s0
        pending = 0
    }

    /// The Paeth predictor of 16 bytes: a where |b − c| is smallest, then b where |a − c| is,
    /// else c. Comparisons become sign masks (x >> 15 is all ones when x < 0), so every step is
    /// plain lane arithmetic.
    @inline(__always) static func paeth(_ a: SIMD16<UInt8>, _ b: SIMD16<UInt8>, _ c: SIMD16<UInt8>) -> SIMD16<UInt8> {
        let ia = SIMD16<Int16>(truncatingIfNeeded: a), ib = SIMD16<Int16>(truncatingIfNeeded: b), ic = SIMD16<Int16>(truncatingIfNeeded: c)
        let pa = magnitude(ib &- ic), pb = magnitude(ia &- ic), pc = magnitude(ia &+ ib &- ic &- ic)
        let notA = ((pb &- pa) &>> 15) | ((pc &- pa) &>> 15)
        let useC = (pc &- pb) &>> 15
        let bc = (ib & ~useC) | (ic & useC)
        return SIMD16<UInt8>(truncatingIfNeeded: (ia & ~notA) | (bc & notA))
    }

    @inline(__always) static func magnitude(_ v: SIMD16<Int16>) -> SIMD16<Int16> {
        let sign = v &>> 15
        return (v ^ sign) &- sign
    }

    @inline(__always) static func cost(_ v: SIMD16<UInt8>) -> SIMD16<UInt16> {
        // min(v, 0 − v) as lane arithmetic: v when v < 128, else 256 − v.
        let w = SIMD16<Int16>(truncatingIfNeeded: SIMD16<Int8>(truncatingIfNeeded: v))
        return SIMD16<UInt16>(truncatingIfNeeded: magnitude(w))
    }
}
