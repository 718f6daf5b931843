import OutpostCore

/// Draws geometries and raster cells onto an image of a map extent, in the styles of
/// ``MapRenderer``: for images of things that are not in a geodatabase (a geoprocessing job's
/// outputs on a result map service).
public struct GeometryPainter: Sendable {
    /// The map extent the image covers.
    public let envelope: Envelope
    /// The image width in pixels.
    public let width: Int
    /// The image height in pixels.
    public let height: Int
    private var canvas: Canvas

    /// A painter of an empty image of `envelope`.
    /// - Parameter transparent: start from transparent pixels rather than the map background.
    /// - Parameter envelope: the map extent the image covers.
    /// - Parameter width: the image width in pixels.
    /// - Parameter height: the image height in pixels.
    public init(envelope: Envelope, width: Int, height: Int, transparent: Bool = true) {
        self.envelope = envelope
        self.width = width
        self.height = height
        canvas = Canvas(width: width, height: height, background: transparent ? RGBA(0, 0, 0, 0) : RGBA(242, 239, 233))
    }

    /// A painter of `envelope` on `background` (transparent pixels when nil).
    public init(envelope: Envelope, width: Int, height: Int, background: RGBA?) {
        self.envelope = envelope
        self.width = width
        self.height = height
        canvas = Canvas(width: width, height: height, background: background ?? RGBA(0, 0, 0, 0))
    }

    /// Where `p` (in the envelope's system) falls on the image, in pixels.
    private func pixel(_ p: Position) -> Canvas.Point {
        ((p.x - envelope.xmin) * Double(width) / (envelope.xmax - envelope.xmin), (envelope.ymax - p.y) * Double(height) / (envelope.ymax - envelope.ymin))
    }

    /// Fills polygons, each its exterior ring then its holes (in the envelope's system, either
    /// orientation), anti-aliased, blended once in `color` (its alpha kept) where any covers a
    /// pixel: pieces of one area that meet along an edge (a feature cut at tile seams) fill as
    /// one, with no seam.
    public mutating func fill(_ polygons: [[[Position]]], color: RGBA) {
        var drawn: [[Canvas.Point]] = []
        for rings in polygons {
            for (i, ring) in rings.enumerated() {
                let ccw = Canvas.counterClockwise(ring.map(pixel))
                drawn.append(i == 0 ? ccw : ccw.reversed())
            }
        }
        if !drawn.isEmpty { canvas.fill(drawn, color: color) }
    }

    /// Strokes a line `width` pixels wide.
    public mutating func stroke(_ line: [Position], width: Double, color: RGBA) {
        guard line.count >= 2, width > 0 else { return }
        canvas.stroke(line.map(pixel), width: width, color: color)
    }

    /// A disc of `radius` pixels at `center`, ringed `strokeWidth` pixels wide in `strokeColor`.
    public mutating func circle(at center: Position, radius: Double, color: RGBA, strokeWidth: Double = 0, strokeColor: RGBA? = nil) {
        let c = pixel(center)
        if let strokeColor, strokeWidth > 0 { canvas.fill([Canvas.circle(c, radius: radius + strokeWidth)], color: strokeColor) }
        canvas.fill([Canvas.circle(c, radius: radius)], color: color)
    }

    /// Draws a geometry (in the envelope's system) in the `layer`-th colour of the palette.
    public mutating func draw(_ geometry: Geometry, layer: Int) {
        let pixel = self.pixel
        MapRenderer.draw(geometry, color: MapRenderer.palette[layer % MapRenderer.palette.count], on: &canvas, pixel)
    }

    /// Colours each pixel whose centre `value` gives a number: a ramp from low (dark green) to
    /// high (pale brown) between `low` and `high`, half transparent so what lies under shows.
    public mutating func paint(low: Double, high: Double, value: (Position) -> Double?) {
        let span = high > low ? high - low : 1
        for row in 0..<height {
            for column in 0..<width {
                let p = Position(
                    x: envelope.xmin + (Double(column) + 0.5) * (envelope.xmax - envelope.xmin) / Double(width),
                    y: envelope.ymax - (Double(row) + 0.5) * (envelope.ymax - envelope.ymin) / Double(height))
                guard let v = value(p), v.isFinite else { continue }
                let t = min(max((v - low) / span, 0), 1)
                canvas.set(x: column, y: row, RGBA(UInt8(40 + t * 190), UInt8(110 + t * 100), UInt8(60 + t * 110), 200))
            }
        }
    }

    /// RGBA bytes, row by row.
    public var pixels: [UInt8] { canvas.pixels }

    /// The image as a PNG.
    public func png() throws -> [UInt8] { try PNGEncoder.encodeTile(rgba: canvas.pixels, width: width, height: height) }
}
