/// Coordinates as JSON arrays, shared by the GeoJSON and Esri JSON writers.
enum CoordinateText {
    /// `[x,y]` or `[x,y,z]`, followed by `m` when `measures` is set and the position has one.
    static func write(_ p: Position, measures: Bool, to out: inout [UInt8]) {
        out.append(utf8: "[")
        JSONValue.writeNumber(p.x, to: &out)
        out.append(utf8: ",")
        JSONValue.writeNumber(p.y, to: &out)
        if let z = p.z {
            out.append(utf8: ",")
            JSONValue.writeNumber(z, to: &out)
        }
        if measures, let m = p.m {
            out.append(utf8: ",")
            JSONValue.writeNumber(m, to: &out)
        }
        out.append(utf8: "]")
    }

    /// An array of coordinate arrays.
    static func write(_ positions: [Position], measures: Bool, to out: inout [UInt8]) {
        out.append(utf8: "[")
        for (i, p) in positions.enumerated() {
            if i > 0 { out.append(utf8: ",") }
            write(p, measures: measures, to: &out)
        }
        out.append(utf8: "]")
    }
}
