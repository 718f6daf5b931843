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

    /// Draws a geometry (in the envelope's system) in the `layer`-th colour of the palette.
    public mutating func draw(_ geometry: Geometry, layer: Int) {
        let sx = Double(width) / (envelope.xmax - envelope.xmin), sy = Double(height) / (envelope.ymax - envelope.ymin)
        let (xmin, ymax) = (envelope.xmin, envelope.ymax)
        MapRenderer.draw(geometry, color: MapRenderer.palette[layer % MapRenderer.palette.count], on: &canvas) { p in
            ((p.x - xmin) * sx, (ymax - p.y) * sy)
        }
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
