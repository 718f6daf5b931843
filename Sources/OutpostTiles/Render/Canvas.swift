import Foundation

/// A colour with straight (not premultiplied) alpha.
public struct RGBA: Hashable, Sendable {
    /// Red, green, blue and alpha, 0–255.
    public var r: UInt8, g: UInt8, b: UInt8, a: UInt8

    /// A colour of these components (opaque by default).
    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8, _ a: UInt8 = 255) {
        self.r = r
        self.g = g
        self.b = b
        self.a = a
    }

    func darker(_ f: Double = 0.6) -> RGBA { RGBA(UInt8(Double(r) * f), UInt8(Double(g) * f), UInt8(Double(b) * f), 255) }
    func withAlpha(_ alpha: UInt8) -> RGBA { RGBA(r, g, b, alpha) }
}

/// An RGBA raster with anti-aliased filling: each path's edges add their exact signed area to a
/// coverage buffer, a running sum along each row gives every pixel's coverage (non-zero winding),
/// and the colour is blended in by it. Outlines and lines are filled as polygons; everything
/// outside the canvas is clipped on the way in.
struct Canvas {
    let width: Int
    let height: Int
    private(set) var pixels: [UInt8]
    private var accumulation: [Float]

    init(width: Int, height: Int, background: RGBA) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 4)
        for i in 0..<(width * height) {
            pixels[4 * i] = background.r
            pixels[4 * i + 1] = background.g
            pixels[4 * i + 2] = background.b
            pixels[4 * i + 3] = background.a
        }
        accumulation = [Float](repeating: 0, count: (width + 2) * height)
    }

    typealias Point = (x: Double, y: Double)

    /// Sets one pixel (no blending).
    mutating func set(x: Int, y: Int, _ color: RGBA) {
        guard x >= 0, y >= 0, x < width, y < height else { return }
        let i = 4 * (y * width + x)
        pixels[i] = color.r
        pixels[i + 1] = color.g
        pixels[i + 2] = color.b
        pixels[i + 3] = color.a
    }

    /// Fills closed rings (pixel coordinates) with non-zero winding; rings meant as holes must
    /// wind the other way.
    mutating func fill(_ rings: [[Point]], color: RGBA) {
        guard color.a > 0 else { return }
        var minY = height, maxY = -1
        for ring in rings where ring.count >= 3 {
            for i in 0..<ring.count {
                let p0 = ring[i], p1 = ring[(i + 1) % ring.count]
                addEdge(p0, p1)
                let low = Int(Self.lesser(p0.y, p1.y).rounded(.down)), high = Int(Self.greater(p0.y, p1.y).rounded(.up))
                if low < minY { minY = low }
                if high > maxY { maxY = high }
            }
        }
        minY = max(0, minY)
        maxY = min(height - 1, maxY)
        guard minY <= maxY else { return }
        let width = self.width, stride = width + 2
        let alpha = Float(color.a) / 255
        let red = Float(color.r), green = Float(color.g), blue = Float(color.b)
        // Through buffer pointers and concrete arithmetic rather than the generic min and abs:
        // a debug build (every test and the servers they start) runs this loop for each pixel
        // of each filled path, and calls those unspecialised.
        accumulation.withUnsafeMutableBufferPointer { cells in
            pixels.withUnsafeMutableBufferPointer { pixels in
                for y in minY...maxY {
                    var sum: Float = 0
                    let row = y * stride
                    for x in 0..<width {
                        sum += cells[row + x]
                        cells[row + x] = 0
                        let magnitude = sum.magnitude
                        let coverage = (magnitude < 1 ? magnitude : 1) * alpha
                        guard coverage > 0.002 else { continue }
                        let i = (y * width + x) * 4
                        // "Over" with straight alpha: on an opaque background this is the plain
                        // blend; on a transparent one (an export with transparent=true) colours
                        // keep their value.
                        let keep = 1 - coverage
                        let below = Float(pixels[i + 3]) / 255 * keep
                        let out = coverage + below
                        pixels[i] = Self.channel((red * coverage + Float(pixels[i]) * below) / out + 0.5)
                        pixels[i + 1] = Self.channel((green * coverage + Float(pixels[i + 1]) * below) / out + 0.5)
                        pixels[i + 2] = Self.channel((blue * coverage + Float(pixels[i + 2]) * below) / out + 0.5)
                        pixels[i + 3] = Self.channel(out * 255 + 0.5)
                    }
                    cells[row + width] = 0
                    cells[row + width + 1] = 0
                }
            }
        }
    }

    /// A blended channel value, at most 255 (what `UInt8(min(255, v))` gives).
    @inline(__always) private static func channel(_ v: Float) -> UInt8 { UInt8(v < 255 ? v : 255) }

    /// Adds an edge, clipped to the canvas columns: what lies left of the canvas becomes a
    /// vertical edge on its left side (it still winds the row), what lies right is dropped.
    private mutating func addEdge(_ a: Point, _ b: Point) {
        guard a.y != b.y, a.x.isFinite, a.y.isFinite, b.x.isFinite, b.y.isFinite else { return }
        // Split at x = 0, then each piece at x = width (without an array of pieces per edge: a
        // debug build allocated three for every edge of every path drawn).
        if let m = Self.crossing(a, b, x: 0) {
            addPiece(a, m)
            addPiece(m, b)
        } else {
            addPiece(a, b)
        }
    }

    /// An edge's piece on one side of x = 0, split at x = width.
    private mutating func addPiece(_ p: Point, _ q: Point) {
        if let m = Self.crossing(p, q, x: Double(width)) {
            addColumnPiece(p, m)
            addColumnPiece(m, q)
        } else {
            addColumnPiece(p, q)
        }
    }

    /// Where the segment from `p` to `q` crosses the vertical line at `edge` (nil when both ends
    /// lie on one side of it, or on it).
    private static func crossing(_ p: Point, _ q: Point, x edge: Double) -> Point? {
        guard (p.x - edge) * (q.x - edge) < 0 else { return nil }
        let t = (edge - p.x) / (q.x - p.x)
        return (x: edge, y: p.y + t * (q.y - p.y))
    }

    /// A piece left of, inside or right of the columns: right of them it adds nothing, left of
    /// them it runs down column 0 (its winding still counts for every pixel to the right).
    private mutating func addColumnPiece(_ p: Point, _ q: Point) {
        let mid = (p.x + q.x) / 2
        if mid >= Double(width) { return }
        if mid <= 0 {
            line((x: 0, y: p.y), (x: 0, y: q.y))
        } else {
            line(p, q)
        }
    }

    /// Accumulates the signed area one edge (inside the columns) adds to the cells it crosses.
    private mutating func line(_ pIn: Point, _ qIn: Point) {
        // Split points carry rounding error; keep every x inside the columns.
        let w = Double(width), height = self.height, stride = width + 2
        let p = (x: Self.clamped(pIn.x, to: w), y: pIn.y), q = (x: Self.clamped(qIn.x, to: w), y: qIn.y)
        guard p.y != q.y else { return }
        let (direction, p0, p1): (Float, Point, Point) = p.y < q.y ? (1, p, q) : (-1, q, p)
        let dxdy = (p1.x - p0.x) / (p1.y - p0.y)
        // An edge of no height to speak of covers nothing.
        guard dxdy.isFinite else { return }
        var x = p0.x
        if p0.y < 0 { x -= p0.y * dxdy }
        let yStart = Swift.max(0, Int(p0.y.rounded(.down)))
        let yEnd = Swift.min(height, Int(p1.y.rounded(.up)))
        guard yStart < yEnd else { return }
        // Through a buffer pointer and concrete min/max, as in `fill`: a debug build runs this
        // for every row every edge crosses.
        accumulation.withUnsafeMutableBufferPointer { cells in
            for y in yStart..<yEnd {
                let row = y * stride
                let dy = Self.lesser(Double(y + 1), p1.y) - Self.greater(Double(y), p0.y)
                let xNext = x + dxdy * dy
                let d = Float(dy) * direction
                // The edge lies within the columns, but a steep run of rows (a nearly level edge, a
                // start far above the canvas) carries rounding error: keep each row's crossing there.
                let xa = Self.clamped(x, to: w), xb = Self.clamped(xNext, to: w)
                let (x0, x1) = xa < xb ? (xa, xb) : (xb, xa)
                let x0Floor = x0.rounded(.down)
                let x0i = Int(x0Floor)
                let x1Ceil = x1.rounded(.up)
                let x1i = Int(x1Ceil)
                if x1i <= x0i + 1 {
                    let xmf = Float(0.5 * (xa + xb) - x0Floor)
                    cells[row + x0i] += d - d * xmf
                    cells[row + x0i + 1] += d * xmf
                } else {
                    let s = Float(1 / (x1 - x0))
                    let x0f = Float(x0 - x0Floor)
                    let a0 = 0.5 * s * (1 - x0f) * (1 - x0f)
                    let x1f = Float(x1 - x1Ceil + 1)
                    let am = 0.5 * s * x1f * x1f
                    cells[row + x0i] += d * a0
                    if x1i == x0i + 2 {
                        cells[row + x0i + 1] += d * (1 - a0 - am)
                    } else {
                        let a1 = s * (1.5 - x0f)
                        cells[row + x0i + 1] += d * (a1 - a0)
                        if x0i + 2 < x1i - 1 {
                            for xi in (x0i + 2)..<(x1i - 1) { cells[row + xi] += d * s }
                        }
                        let a2 = a1 + Float(x1i - x0i - 3) * s
                        cells[row + x1i - 1] += d * (1 - a2 - am)
                    }
                    cells[row + x1i] += d * am
                }
                x = xNext
            }
        }
    }

    /// `Swift.min(x, y)` and `Swift.max(x, y)` of two doubles, the same values (NaN and signed
    /// zeros included) without a generic call.
    @inline(__always) private static func lesser(_ x: Double, _ y: Double) -> Double { y < x ? y : x }
    @inline(__always) private static func greater(_ x: Double, _ y: Double) -> Double { y >= x ? y : x }
    /// `min(max(x, 0), upper)`: an x kept within the columns.
    @inline(__always) private static func clamped(_ x: Double, to upper: Double) -> Double { lesser(greater(x, 0), upper) }

    /// Strokes a polyline `width` pixels wide (each segment and each joint a polygon of the same
    /// winding, so overlaps do not cancel).
    mutating func stroke(_ line: [Point], width: Double, color: RGBA) {
        guard line.count >= 2 else { return }
        let h = width / 2
        var rings: [[Point]] = []
        for i in 0..<(line.count - 1) {
            let p = line[i], q = line[i + 1]
            let dx = q.x - p.x, dy = q.y - p.y
            let length = (dx * dx + dy * dy).squareRoot()
            guard length > 1e-9 else { continue }
            let nx = -dy / length * h, ny = dx / length * h
            rings.append(Self.counterClockwise([(p.x + nx, p.y + ny), (q.x + nx, q.y + ny), (q.x - nx, q.y - ny), (p.x - nx, p.y - ny)]))
        }
        if h > 0.75 { for p in line.dropFirst().dropLast() { rings.append(Self.circle(p, radius: h, sides: 8)) } }
        fill(rings, color: color)
    }

    /// A regular polygon approximating a circle, counter-clockwise in pixel space.
    static func circle(_ c: Point, radius: Double, sides: Int = 16) -> [Point] {
        (0..<sides).map { i in
            let t = Double(i) / Double(sides) * 2 * .pi
            return (c.x + radius * cos(t), c.y + radius * sin(t))
        }
    }

    static func signedArea(_ ring: [Point]) -> Double {
        var area = 0.0
        for i in 0..<ring.count {
            let p = ring[i], q = ring[(i + 1) % ring.count]
            area += p.x * q.y - q.x * p.y
        }
        return area / 2
    }

    static func counterClockwise(_ ring: [Point]) -> [Point] { signedArea(ring) >= 0 ? ring : ring.reversed() }
}
