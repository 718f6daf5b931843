import Foundation
import GRDB
import OutpostCore

/// House numbers along street lines that carry ranges (ArcGIS `StreetAddress` matches): a number
/// is placed at its share of the way between the range's ends, a few metres to its side of the
/// line; a point on a line is given the number its place along the line stands for.
enum StreetRanges {
    /// Metres from the centre line to the side a house number is placed on.
    static let sideOffset = 5.0

    struct Segment {
        var id: Int64
        var street: String
        var city: String?
        var postal: String?
        var line: [Position]
        /// Left from, left to, right from, right to.
        var ranges: [Int64?]

        /// From `columns` in a row, starting at column `first`.
        init(row: Row, first: Int = 0) {
            id = row[first]
            street = row[first + 1]
            city = row[first + 2]
            postal = row[first + 3]
            line = LocatorGeometry.decode(row[first + 4])
            ranges = [row[first + 5], row[first + 6], row[first + 7], row[first + 8]]
        }

        static let columns = "id, street, city, postal, line, left_from, left_to, right_from, right_to"

        /// The side (left first) whose range holds `house`, with its ends; parity is kept when both
        /// ends share it (odd numbers on one side, even on the other).
        func side(holding house: Int64) -> (left: Bool, from: Int64, to: Int64)? {
            for (left, pair) in [(true, (ranges[0], ranges[1])), (false, (ranges[2], ranges[3]))] {
                guard let from = pair.0, let to = pair.1 else { continue }
                guard min(from, to) <= house, house <= max(from, to) else { continue }
                if from % 2 == to % 2, house % 2 != abs(from % 2) { continue }
                return (left, from, to)
            }
            return nil
        }
    }

    /// Street-address candidates for the house numbers in `tokens` on the streets of the
    /// best-scoring street entries.
    static func candidates(
        _ tokens: [LocatorSearch.QueryToken], streets: [LocatorSearch.Scored], in db: Database, geographic: Bool
    ) throws -> [EntryRecord] {
        let numbers = tokens.filter(\.numeric).compactMap { Int64(LocatorSearch.leadingDigits($0.text)) }
        guard !numbers.isEmpty else { return [] }
        var out: [EntryRecord] = []
        for street in streets.prefix(3) {
            guard let key = street.record.streetKey else { continue }
            let part = String(key.prefix { $0 != "|" })
            let segments = try Row.fetchAll(
                db, sql: "SELECT \(Segment.columns) FROM segments WHERE street_key IN (?, ?) AND left_from IS NOT NULL",
                arguments: [key, part + "|"]
            ).map { Segment(row: $0) }
            for house in numbers {
                for segment in segments {
                    guard let side = segment.side(holding: house) else { continue }
                    let fraction = side.from == side.to ? 0.5 : Double(house - side.from) / Double(side.to - side.from)
                    let point = place(on: segment.line, fraction: fraction, left: side.left, geographic: geographic)
                    let pad = geographic ? 0.0009 : 90
                    var record = EntryRecord(kind: .streetAddress, x: point.x, y: point.y, box: (point.x - pad, point.y - pad, point.x + pad, point.y + pad))
                    record.house = String(house)
                    record.street = segment.street
                    record.city = segment.city ?? street.record.city
                    record.postal = segment.postal
                    out.append(record)
                    break
                }
            }
        }
        return out
    }

    /// The point `fraction` of the way along `line`, `sideOffset` metres to its left or right.
    static func place(on line: [Position], fraction: Double, left: Bool, geographic: Bool) -> Position {
        let p = LocatorGeometry.pointAlong(line, fraction: fraction, geographic: geographic)
        // The direction of the part of the line the point is on, in metres east and north.
        let total = LocatorGeometry.length(line, geographic: geographic, metresPerUnit: 1)
        var travelled = 0.0, direction = (1.0, 0.0)
        let scale = geographic ? cos(p.y * .pi / 180) * 111_320 : 1, yScale = geographic ? 111_320.0 : 1
        for (a, b) in zip(line, line.dropFirst()) {
            let d = LocatorGeometry.distance(a, b, geographic: geographic)
            direction = ((b.x - a.x) * scale, (b.y - a.y) * yScale)
            if travelled + d >= total * fraction { break }
            travelled += d
        }
        let norm = max(hypot(direction.0, direction.1), 1e-12)
        // Left of the direction of travel: rotated a quarter turn anticlockwise.
        let sign = left ? 1.0 : -1.0
        let offset = (-direction.1 / norm * sideOffset * sign, direction.0 / norm * sideOffset * sign)
        return Position(x: p.x + offset.0 / scale, y: p.y + offset.1 / yScale)
    }

    /// The house number at `point` beside `segment`, on the side it lies, or nil when the
    /// segment has no range there.
    static func house(at point: Position, on segment: Segment, geographic: Bool) -> Int64? {
        let line = segment.line
        guard line.count >= 2 else { return nil }
        // Where along the line the nearest point lies, and on which side the point is.
        var best = (distance: Double.infinity, along: 0.0, left: true)
        var travelled = 0.0
        let scale = geographic ? cos(point.y * .pi / 180) : 1
        for (a, b) in zip(line, line.dropFirst()) {
            let d = LocatorGeometry.distance(a, b, geographic: geographic)
            let ax = (a.x - point.x) * scale, ay = a.y - point.y, bx = (b.x - point.x) * scale, by = b.y - point.y
            let dx = bx - ax, dy = by - ay
            let len2 = dx * dx + dy * dy
            let t = len2 > 0 ? max(0, min(1, -(ax * dx + ay * dy) / len2)) : 0
            let qx = ax + dx * t, qy = ay + dy * t
            let distance = hypot(qx, qy)
            if distance < best.distance {
                // The point relative to the segment: positive cross product = left of travel.
                let cross = dx * (0 - ay) - dy * (0 - ax)
                best = (distance, travelled + d * t, cross > 0)
            }
            travelled += d
        }
        let fraction = travelled > 0 ? best.along / travelled : 0.5
        let ends = best.left ? (segment.ranges[0], segment.ranges[1]) : (segment.ranges[2], segment.ranges[3])
        guard let from = ends.0, let to = ends.1 else { return nil }
        var house = Int64((Double(from) + fraction * Double(to - from)).rounded())
        // Keep the side's parity, stepping toward the range.
        if from % 2 == to % 2, house % 2 != abs(from % 2) { house += house < max(from, to) ? 1 : -1 }
        return min(max(house, min(from, to)), max(from, to))
    }
}
