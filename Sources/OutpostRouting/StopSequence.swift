import Foundation

/// The order to visit stops in (a travelling-salesman heuristic on an asymmetric cost matrix):
/// nearest neighbour from the first stop, then 2-opt (reversing a stretch) and or-opt (moving one
/// stop elsewhere) until no move makes the tour cheaper. Kept ends stay where they are.
enum StopSequence {
    static func best(_ cost: [[Double]], preserveFirst: Bool, preserveLast: Bool) -> [Int] {
        let n = cost.count
        guard n > 2 else { return Array(0..<n) }
        // Start with each free stop first (or the kept one), keep the cheapest result.
        let starts = preserveFirst ? [0] : Array(0..<n)
        var best: (order: [Int], cost: Double)?
        for start in starts {
            var order = nearestNeighbour(cost, start: start, last: preserveLast ? n - 1 : nil)
            improve(&order, cost, fixedFirst: true, fixedLast: preserveLast)
            let c = tourCost(order, cost)
            if c < best?.cost ?? .infinity { best = (order, c) }
        }
        return best?.order ?? Array(0..<n)
    }

    static func tourCost(_ order: [Int], _ cost: [[Double]]) -> Double {
        zip(order, order.dropFirst()).reduce(0) { $0 + cost[$1.0][$1.1] }
    }

    static func nearestNeighbour(_ cost: [[Double]], start: Int, last: Int?) -> [Int] {
        var order = [start]
        var left = Set(0..<cost.count).subtracting([start])
        if let last { left.remove(last) }
        while !left.isEmpty {
            let here = order[order.count - 1]
            let next = left.min { (cost[here][$0], $0) < (cost[here][$1], $1) }!
            order.append(next)
            left.remove(next)
        }
        if let last, last != start { order.append(last) }
        return order
    }

    static func improve(_ order: inout [Int], _ cost: [[Double]], fixedFirst: Bool, fixedLast: Bool) {
        let lo = fixedFirst ? 1 : 0, hi = order.count - (fixedLast ? 2 : 1)
        guard hi > lo else { return }
        var current = tourCost(order, cost)
        var improved = true
        while improved {
            improved = false
            // 2-opt: reverse order[i...j] (costs are asymmetric: the whole tour is recosted).
            for i in lo..<hi {
                for j in (i + 1)...hi {
                    var candidate = order
                    candidate[i...j].reverse()
                    let c = tourCost(candidate, cost)
                    if c < current - 1e-9 {
                        order = candidate
                        current = c
                        improved = true
                    }
                }
            }
            // Or-opt: move one stop to another place.
            for i in lo...hi {
                for j in lo...hi where j != i {
                    var candidate = order
                    let stop = candidate.remove(at: i)
                    candidate.insert(stop, at: j)
                    let c = tourCost(candidate, cost)
                    if c < current - 1e-9 {
                        order = candidate
                        current = c
                        improved = true
                    }
                }
            }
        }
    }
}
