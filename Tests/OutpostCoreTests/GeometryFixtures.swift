import OutpostCore

/// Geometries of every type in every coordinate layout, for round-trip tests.
enum GeometryFixtures {
    static func position(_ x: Double, _ y: Double, _ layout: CoordinateLayout) -> Position {
        Position(x: x, y: y, z: layout.hasZ ? x + y : nil, m: layout.hasM ? x * 2 : nil)
    }

    static func ring(_ x0: Double, _ y0: Double, _ size: Double, _ layout: CoordinateLayout, clockwise: Bool = false) -> [Position] {
        var r = [
            position(x0, y0, layout), position(x0 + size, y0, layout), position(x0 + size, y0 + size, layout),
            position(x0, y0 + size, layout), position(x0, y0, layout),
        ]
        if clockwise { r.reverse() }
        return r
    }

    static func all(_ layout: CoordinateLayout) throws -> [Geometry] {
        let p = try Point(position(1.5, -2.25, layout))
        let line = try LineString([position(0, 0, layout), position(3, 4, layout), position(-1, 7.5, layout)])
        let polygon = try Polygon(rings: [ring(0, 0, 10, layout), ring(2, 2, 3, layout, clockwise: true)])
        return [
            .point(p),
            .point(Point(empty: layout)),
            .lineString(line),
            .lineString(LineString(empty: layout)),
            .polygon(polygon),
            .polygon(Polygon(empty: layout)),
            .multiPoint(try MultiPoint([p, try Point(position(9, 9, layout))])),
            .multiPoint(MultiPoint(empty: layout)),
            .multiLineString(try MultiLineString([line, try LineString([position(5, 5, layout), position(6, 6, layout)])])),
            .multiPolygon(try MultiPolygon([polygon, try Polygon(rings: [ring(20, 20, 1, layout)])])),
            .multiPolygon(MultiPolygon(empty: layout)),
            .geometryCollection(try GeometryCollection([.point(p), .lineString(line), .polygon(polygon)])),
            .geometryCollection(GeometryCollection(empty: layout)),
            .geometryCollection(
                try GeometryCollection([.geometryCollection(try GeometryCollection([.point(p)])), .multiPoint(try MultiPoint([p]))])),
        ]
    }
}
