import Foundation
import GRDB
import OutpostCore

/// One entry of a 2-D SQLite R-tree: a row id and its bounds as 32-bit floats.
struct RTreeEntry {
    var id: Int64
    var minX: Float
    var maxX: Float
    var minY: Float
    var maxY: Float

    /// Bounds rounded outward to float, as SQLite's rtree module stores them, so the float box
    /// always contains the exact one.
    init(id: Int64, _ e: Envelope) {
        self.id = id
        minX = Self.down(e.xmin)
        maxX = Self.up(e.xmax)
        minY = Self.down(e.ymin)
        maxY = Self.up(e.ymax)
    }

    init(id: Int64, minX: Float, maxX: Float, minY: Float, maxY: Float) {
        self.id = id
        self.minX = minX
        self.maxX = maxX
        self.minY = minY
        self.maxY = maxY
    }

    static func down(_ d: Double) -> Float {
        let f = Float(d)
        return Double(f) > d ? f.nextDown : f
    }

    static func up(_ d: Double) -> Float {
        let f = Float(d)
        return Double(f) < d ? f.nextUp : f
    }

    var centerX: Float { minX / 2 + maxX / 2 }
    var centerY: Float { minY / 2 + maxY / 2 }
}

/// Builds an SQLite R-tree in one pass by Sort-Tile-Recursive packing, writing the module's
/// shadow tables (`<name>_node`, `<name>_rowid`, `<name>_parent`) directly instead of inserting
/// row by row (which splits and reinserts nodes: several times slower). GDAL fills GeoPackage
/// indexes the same way since 3.8.
///
/// Node format (SQLite `ext/rtree/rtree.c`): a 4-byte header (tree depth in the root, big-endian
/// u16; cell count, big-endian u16), then cells of an 8-byte big-endian id and 4 big-endian float
/// coordinates (minx, maxx, miny, maxy), zero-padded to the node size. The node size is read from
/// the empty root that `CREATE VIRTUAL TABLE` made, so it always matches what SQLite expects.
enum RTreeBulkLoader {
    /// Nodes below the root are filled to this share of their cells (in percent), leaving room
    /// for the entries that later edits add through the GeoPackage triggers: SQLite's rtree
    /// module splits a full node on its next insert (and inserts part of its cells again), so in
    /// an index packed full nearly every insert paid a split. After a packed rebuild of 100,000
    /// points, 1,000 inserts through the triggers took 114–206 ms with full nodes and 28–46 ms
    /// with 85% (the server's last, insert-only batch of `outpost-bench sync`, timed by hand in
    /// the server; alternating `worker-sync` runs at 1,000,000 points: upload 31–34 s full, 25–28 s
    /// at 85%); the index is about 15% larger and packing costs the same.
    static let fillPercent = 85

    /// How many cells a node below the root gets when packing nodes of `capacity` cells.
    static func packedCells(capacity: Int) -> Int { max(2, capacity * fillPercent / 100) }

    /// Loads `entries` into the empty R-tree `rtree`. The caller holds the write transaction.
    static func load(_ entries: inout [RTreeEntry], into rtree: String, _ db: Database) throws {
        guard !entries.isEmpty else { return }
        let node = quoted(rtree + "_node"), rowid = quoted(rtree + "_rowid"), parent = quoted(rtree + "_parent")
        guard let nodeSize = try Int.fetchOne(db, sql: "SELECT length(data) FROM \(node) WHERE nodeno = 1"), nodeSize > 28 else {
            throw StorageError(.corrupt, "R-tree \(rtree) has no root node")
        }
        guard try Int.fetchOne(db, sql: "SELECT count(*) FROM \(rowid)") == 0 else {
            throw StorageError(.corrupt, "R-tree \(rtree) is not empty; bulk loading needs an empty index")
        }
        let capacity = (nodeSize - 4) / 24
        let insertNode = try RawStatement(db, "INSERT INTO \(node) (nodeno, data) VALUES (?, ?)")
        let insertParent = try PairInserter(db, table: parent, columns: ("nodeno", "parentnode"))
        // Leaf entries' (row id, node) pairs are written in row id order, so the `_rowid` table
        // is filled by appends instead of random B-tree inserts.
        var leafOf = LeafMap(entries)
        // `level` takes the only reference to the entries: sorting it does not copy them.
        var level = entries
        entries = []
        var depth = 0
        var nextNode: Int64 = 2
        var buffer = [UInt8](repeating: 0, count: nodeSize)
        while level.count > capacity {
            let groups = strGroups(&level, capacity: packedCells(capacity: capacity))
            var upper: [RTreeEntry] = []
            upper.reserveCapacity(groups.count)
            for group in groups {
                let nodeno = nextNode
                nextNode += 1
                let cells = level[group]
                encode(cells, depth: 0, into: &buffer)
                try insertNode.run(nodeno, buffer)
                for cell in cells {
                    if depth == 0 {
                        leafOf.set(cell.id, nodeno)
                    } else {
                        try insertParent.add(cell.id, nodeno)
                    }
                }
                upper.append(bounds(of: cells, id: nodeno))
            }
            level = upper
            depth += 1
        }
        encode(level[...], depth: depth, into: &buffer)
        try db.execute(sql: "UPDATE \(node) SET data = ? WHERE nodeno = 1", arguments: [Data(buffer)])
        for cell in level {
            if depth == 0 {
                leafOf.set(cell.id, 1)
            } else {
                try insertParent.add(cell.id, 1)
            }
        }
        try insertParent.finish()
        let insertRowID = try PairInserter(db, table: rowid, columns: ("rowid", "nodeno"))
        try leafOf.forEachInRowIDOrder { id, nodeno in try insertRowID.add(id, nodeno) }
        try insertRowID.finish()
    }

    /// The leaf node of each row id. Row ids of an import are nearly always dense (1…N): then a
    /// 4-byte node number per id, indexed by row id, needs no sort; otherwise (id, node) pairs
    /// sorted at the end. For 6.25 million features that is 25 MB instead of 100 MB of pairs.
    struct LeafMap {
        private let minID: Int64
        private var dense: [Int32]
        private var pairs: [(Int64, Int64)] = []
        private let isDense: Bool

        init(_ entries: [RTreeEntry]) {
            var lo = Int64.max, hi = Int64.min
            for e in entries {
                lo = min(lo, e.id)
                hi = max(hi, e.id)
            }
            minID = lo
            // Dense when the id range is at most twice the count and node numbers fit 32 bits.
            let span = hi >= lo ? hi - lo + 1 : 0
            isDense = span > 0 && span <= 2 * Int64(entries.count) && entries.count < Int(Int32.max)
            dense = isDense ? [Int32](repeating: 0, count: Int(span)) : []
            if !isDense { pairs.reserveCapacity(entries.count) }
        }

        mutating func set(_ id: Int64, _ node: Int64) {
            if isDense { dense[Int(id - minID)] = Int32(node) } else { pairs.append((id, node)) }
        }

        mutating func forEachInRowIDOrder(_ body: (Int64, Int64) throws -> Void) rethrows {
            if isDense {
                for (offset, node) in dense.enumerated() where node != 0 { try body(minID + Int64(offset), Int64(node)) }
            } else {
                pairs.sort { $0.0 < $1.0 }
                for (id, node) in pairs { try body(id, node) }
            }
        }
    }

    /// Sort-Tile-Recursive: sorts `items` into vertical slices by x, each slice by y, and returns
    /// index ranges of at most `capacity` items per node.
    static func strGroups(_ items: inout [RTreeEntry], capacity: Int) -> [Range<Int>] {
        let nodeCount = (items.count + capacity - 1) / capacity
        let sliceCount = Int(Double(nodeCount).squareRoot().rounded(.up))
        let sliceSize = sliceCount * capacity
        sortInPlace(&items, 0..<items.count, by: ByCenterX.self)
        var groups: [Range<Int>] = []
        groups.reserveCapacity(nodeCount)
        var start = 0
        while start < items.count {
            let end = min(start + sliceSize, items.count)
            sortInPlace(&items, start..<end, by: ByCenterY.self)
            var s = start
            while s < end {
                let e = min(s + capacity, end)
                groups.append(s..<e)
                s = e
            }
            start = end
        }
        return groups
    }

    /// Sorts `range` of `items` by `key`: ranges up to ``radixLimit`` by ``radixSort(_:_:_:)``,
    /// larger ones (and any given `splits`) in place, without extra memory: quicksort (median of
    /// three, recursion on the shorter side, insertion sort for short runs) that turns to
    /// heapsort on a range it has split too often, so no input makes it quadratic. The standard
    /// sort is stable and allocates a scratch buffer of half the array, 75 MB for 6.25 million
    /// entries.
    /// `splits` (tests) bounds the quicksort splits before heapsort takes over. The key is a type,
    /// not a closure, so each sort is compiled for its key: through a closure every comparison
    /// was an indirect call, and sorting was a third of packing 100,000 entries.
    static func sortInPlace<K: EntrySortKey>(_ items: inout [RTreeEntry], _ range: Range<Int>, splits: Int? = nil, by _: K.Type) {
        guard range.count > 1 else { return }
        if splits == nil, range.count <= radixLimit {
            radixSort(&items, range, K.self)
            return
        }
        let depth = splits ?? 2 * (Int.bitWidth - range.count.leadingZeroBitCount)
        items.withUnsafeMutableBufferPointer { buffer in quicksort(buffer, range.lowerBound, range.upperBound - 1, depth, K.self) }
    }

    /// Ranges up to this many entries are sorted by ``radixSort(_:_:_:)``, which holds 16 bytes
    /// an entry while it sorts (32 MB at the limit); larger ones in place.
    static let radixLimit = 2_000_000

    /// Sorts `range` of `items` by `key`: (key, position) pairs sorted by the key's bits in three
    /// counting passes, then the entries moved into that order along the permutation's cycles.
    /// Packing 100,000 points sorted twice as fast as by comparisons (a `perf` profile of the
    /// server's batch apply: the comparison sort was a third of the CPU spent in Outpost's code).
    private static func radixSort<K: EntrySortKey>(_ items: inout [RTreeEntry], _ range: Range<Int>, _: K.Type) {
        let n = range.count, low = range.lowerBound
        // A float's bits made to order as unsigned integers: negatives flipped whole, positives
        // with the sign bit set. The key sits in the high half, the position in the low half.
        var pairs = [UInt64](unsafeUninitializedCapacity: n) { buffer, count in
            items.withUnsafeBufferPointer { source in
                for i in 0..<n {
                    let bits = K.key(source[low + i]).bitPattern
                    let ordered = bits & 0x8000_0000 != 0 ? ~bits : bits | 0x8000_0000
                    buffer[i] = UInt64(ordered) << 32 | UInt64(i)
                }
            }
            count = n
        }
        var scratch = [UInt64](repeating: 0, count: n)
        var counts = [Int](repeating: 0, count: 2_048)
        for shift: UInt64 in [32, 43, 54] {
            let mask: UInt64 = shift == 54 ? 0x3FF : 0x7FF
            for k in counts.indices { counts[k] = 0 }
            for p in pairs { counts[Int((p >> shift) & mask)] += 1 }
            var total = 0
            for k in counts.indices {
                let c = counts[k]
                counts[k] = total
                total += c
            }
            for p in pairs {
                let digit = Int((p >> shift) & mask)
                scratch[counts[digit]] = p
                counts[digit] += 1
            }
            swap(&pairs, &scratch)
        }
        // pairs[i]'s low half is the position whose entry belongs at i; the positions it fills
        // are marked with bit 31 (positions are below 2^31: `radixLimit`).
        items.withUnsafeMutableBufferPointer { a in
            UnsafeMutableBufferPointer(rebasing: a[low..<(low + n)]).moveIntoOrder(
                source: { Int(pairs[$0] & 0x7FFF_FFFF) }, isPlaced: { pairs[$0] & 0x8000_0000 != 0 }, markPlaced: { pairs[$0] |= 0x8000_0000 })
        }
    }

    /// What entries are sorted by.
    protocol EntrySortKey { static func key(_ entry: RTreeEntry) -> Float }
    enum ByCenterX: EntrySortKey { static func key(_ e: RTreeEntry) -> Float { e.centerX } }
    enum ByCenterY: EntrySortKey { static func key(_ e: RTreeEntry) -> Float { e.centerY } }
    enum ByMinX: EntrySortKey { static func key(_ e: RTreeEntry) -> Float { e.minX } }

    private static func quicksort<K: EntrySortKey>(_ a: UnsafeMutableBufferPointer<RTreeEntry>, _ low: Int, _ high: Int, _ depth: Int, _ k: K.Type) {
        @inline(__always) func key(_ e: RTreeEntry) -> Float { K.key(e) }
        var lo = low, hi = high, depth = depth
        while hi - lo > 16 {
            if depth == 0 {
                heapsort(a, lo, hi, k)
                return
            }
            depth -= 1
            let mid = lo + (hi - lo) / 2
            if key(a[mid]) < key(a[lo]) { a.swapAt(mid, lo) }
            if key(a[hi]) < key(a[lo]) { a.swapAt(hi, lo) }
            if key(a[hi]) < key(a[mid]) { a.swapAt(hi, mid) }
            let pivot = key(a[mid])
            var i = lo, j = hi
            // Hoare partition: both scans stop on keys equal to the pivot, so runs of equal keys
            // split evenly instead of degrading to quadratic time.
            while i <= j {
                while key(a[i]) < pivot { i += 1 }
                while key(a[j]) > pivot { j -= 1 }
                if i <= j {
                    a.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if j - lo < hi - i {
                quicksort(a, lo, j, depth, k)
                lo = i
            } else {
                quicksort(a, i, hi, depth, k)
                hi = j
            }
        }
        guard hi > lo else { return }
        for k in (lo + 1)...hi {
            let value = a[k], v = key(value)
            var m = k - 1
            while m >= lo, key(a[m]) > v {
                a[m + 1] = a[m]
                m -= 1
            }
            a[m + 1] = value
        }
    }

    private static func heapsort<K: EntrySortKey>(_ a: UnsafeMutableBufferPointer<RTreeEntry>, _ lo: Int, _ hi: Int, _: K.Type) {
        @inline(__always) func key(_ e: RTreeEntry) -> Float { K.key(e) }
        let count = hi - lo + 1
        func siftDown(_ start: Int, _ end: Int) {
            var root = start
            while 2 * root + 1 < end {
                var child = 2 * root + 1
                if child + 1 < end, key(a[lo + child]) < key(a[lo + child + 1]) { child += 1 }
                guard key(a[lo + root]) < key(a[lo + child]) else { return }
                a.swapAt(lo + root, lo + child)
                root = child
            }
        }
        for start in stride(from: count / 2 - 1, through: 0, by: -1) { siftDown(start, count) }
        for end in stride(from: count - 1, to: 0, by: -1) {
            a.swapAt(lo, lo + end)
            siftDown(0, end)
        }
    }

    static func bounds(of cells: ArraySlice<RTreeEntry>, id: Int64) -> RTreeEntry {
        var b = RTreeEntry(id: id, minX: .infinity, maxX: -.infinity, minY: .infinity, maxY: -.infinity)
        for c in cells {
            b.minX = min(b.minX, c.minX)
            b.maxX = max(b.maxX, c.maxX)
            b.minY = min(b.minY, c.minY)
            b.maxY = max(b.maxY, c.maxY)
        }
        return b
    }

    /// Reads one node (the format ``encode(_:depth:into:)`` writes): its depth (meaningful in the
    /// root only), how many cells it has, whether they fit in it; each cell is given to `cell`.
    static func decode(_ bytes: UnsafeRawBufferPointer, _ cell: (RTreeEntry) -> Void) -> (depth: Int, cells: Int, valid: Bool) {
        guard bytes.count >= 4 else { return (0, 0, false) }
        let depth = Int(bytes[0]) << 8 | Int(bytes[1]), count = Int(bytes[2]) << 8 | Int(bytes[3])
        guard 4 + count * 24 <= bytes.count else { return (depth, count, false) }
        @inline(__always) func float(_ at: Int) -> Float { Float(bitPattern: UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        for k in 0..<count {
            let at = 4 + k * 24
            let id = Int64(bigEndian: bytes.loadUnaligned(fromByteOffset: at, as: Int64.self))
            cell(RTreeEntry(id: id, minX: float(at + 8), maxX: float(at + 12), minY: float(at + 16), maxY: float(at + 20)))
        }
        return (depth, count, true)
    }

    /// Writes one node into `bytes` (its length is the node size).
    static func encode(_ cells: ArraySlice<RTreeEntry>, depth: Int, into bytes: inout [UInt8]) {
        for k in bytes.indices { bytes[k] = 0 }
        bytes[0] = UInt8(truncatingIfNeeded: depth >> 8)
        bytes[1] = UInt8(truncatingIfNeeded: depth)
        bytes[2] = UInt8(truncatingIfNeeded: cells.count >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: cells.count)
        var offset = 4
        func put64(_ v: UInt64) {
            for k in 0..<8 { bytes[offset + k] = UInt8(truncatingIfNeeded: v >> UInt64(56 - 8 * k)) }
            offset += 8
        }
        func put32(_ v: UInt32) {
            for k in 0..<4 { bytes[offset + k] = UInt8(truncatingIfNeeded: v >> UInt32(24 - 8 * k)) }
            offset += 4
        }
        for c in cells {
            put64(UInt64(bitPattern: c.id))
            put32(c.minX.bitPattern)
            put32(c.maxX.bitPattern)
            put32(c.minY.bitPattern)
            put32(c.maxY.bitPattern)
        }
    }
}
