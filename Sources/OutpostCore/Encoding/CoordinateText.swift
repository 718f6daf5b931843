/// Coordinates as JSON arrays, shared by the GeoJSON and Esri JSON writers.
enum CoordinateText {
    /// `[x,y]` or `[x,y,z]`, followed by `m` when `measures` is set and the position has one.
    static func write(_ p: Position, measures: Bool, to out: inout String) {
        out += "["
        JSONValue.writeNumber(p.x, to: &out)
        out += ","
        JSONValue.writeNumber(p.y, to: &out)
        if let z = p.z {
            out += ","
            JSONValue.writeNumber(z, to: &out)
        }
        if measures, let m = p.m {
            out += ","
            JSONValue.writeNumber(m, to: &out)
        }
        out += "]"
    }

    /// An array of coordinate arrays.
    static func write(_ positions: [Position], measures: Bool, to out: inout String) {
        out += "["
        for (i, p) in positions.enumerated() {
            if i > 0 { out += "," }
            write(p, measures: measures, to: &out)
        }
        out += "]"
    }
}
