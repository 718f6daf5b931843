/// Ring orientation and containment helpers shared by the GeoJSON and Esri JSON codecs.
public enum RingOrientation {
    /// Twice the signed area of a closed ring (shoelace formula, x/y only):
    /// positive when counter-clockwise with y pointing up, negative when clockwise.
    public static func signedArea(_ ring: [Position]) -> Double {
        guard ring.count >= 3 else { return 0 }
        var sum = 0.0
        var previous = ring[ring.count - 1]
        for p in ring {
            sum += (previous.x - p.x) * (previous.y + p.y)
            previous = p
        }
        return sum
    }

    /// Whether the ring runs clockwise (its signed area is negative).
    public static func isClockwise(_ ring: [Position]) -> Bool { signedArea(ring) < 0 }

    /// The ring with the requested winding (reversed if needed).
    public static func oriented(_ ring: [Position], clockwise: Bool) -> [Position] {
        isClockwise(ring) == clockwise ? ring : ring.reversed()
    }

    /// Even-odd point-in-ring test (a point on the boundary may go either way).
    public static func contains(_ ring: [Position], x: Double, y: Double) -> Bool {
        var inside = false
        var j = ring.count - 1
        for i in 0..<ring.count {
            let a = ring[i], b = ring[j]
            if (a.y > y) != (b.y > y) {
                let crossX = (b.x - a.x) * (y - a.y) / (b.y - a.y) + a.x
                if x < crossX { inside.toggle() }
            }
            j = i
        }
        return inside
    }
}
