import Foundation
import OutpostCore
import OutpostTiles

/// A Mapbox GL style (version 8) for a generator's tiles, drawing each tile layer as
/// `MapRenderer` draws its source layer (the MapServer's colours): areas filled with an outline,
/// lines stroked, points as circles, on the renderer's background.
public enum VectorTileStyle {
    /// The style's single source's name.
    public static let sourceName = "esri"

    /// The style, its source given as `source` (a Mapbox GL source object: `{"type": "vector",
    /// "url": …}` or `"tiles": […]`).
    public static func make(_ generator: VectorTileGenerator, name: String, source: JSONValue) -> JSONValue {
        let renderer = MapRenderer(geodatabase: generator.geodatabase)
        func css(_ c: RGBA, alpha: Double = 1) -> JSONValue { .string("rgba(\(c.r),\(c.g),\(c.b),\(alpha))") }
        func darker(_ c: RGBA, _ f: Double) -> RGBA { RGBA(UInt8(Double(c.r) * f), UInt8(Double(c.g) * f), UInt8(Double(c.b) * f)) }
        var layers: [JSONValue] = [["id": "background", "type": "background", "paint": ["background-color": css(renderer.background)]]]
        // Areas first, then lines, then points, so nothing is hidden (as the renderer orders them).
        let ordered = generator.layers.sorted { rank($0.geometryType) < rank($1.geometryType) }
        for layer in ordered {
            let color = renderer.color(ofLayer: layer.source.id) ?? RGBA(0, 0, 0)
            var entry: [String: JSONValue] = [
                "id": .string(layer.name), "source": .string(sourceName), "source-layer": .string(layer.name), "minzoom": .integer(Int64(layer.minZoom)),
                "layout": ["visibility": "visible"],
            ]
            switch layer.geometryType {
            case .point, .multiPoint:
                entry["type"] = "circle"
                entry["paint"] = ["circle-radius": 4.5, "circle-color": css(color), "circle-stroke-color": css(darker(color, 0.6)), "circle-stroke-width": 0.75]
            case .lineString, .multiLineString:
                entry["type"] = "line"
                entry["layout"] = ["visibility": "visible", "line-join": "round", "line-cap": "round"]
                entry["paint"] = ["line-color": css(color), "line-width": 1.5]
            default:
                entry["type"] = "fill"
                entry["paint"] = ["fill-color": css(color, alpha: 0.43), "fill-outline-color": css(darker(color, 0.75))]
            }
            layers.append(.object(entry))
        }
        return [
            "version": 8, "name": .string(name), "sources": .object([sourceName: source]), "layers": .array(layers),
        ]
    }

    /// A style for tile layers known by name alone (another writer's MBTiles or PMTiles): each
    /// layer drawn three ways, filtered by the features' geometry type: areas filled, lines
    /// stroked, points as circles, in the renderer's palette by the layer's position.
    public static func make(layers: [(name: String, minZoom: Int)], name: String, source: JSONValue) -> JSONValue {
        func css(_ c: RGBA, alpha: Double = 1) -> JSONValue { .string("rgba(\(c.r),\(c.g),\(c.b),\(alpha))") }
        var out: [JSONValue] = [["id": "background", "type": "background", "paint": ["background-color": css(RGBA(242, 239, 233))]]]
        var lines: [JSONValue] = [], points: [JSONValue] = []
        for (i, layer) in layers.enumerated() {
            let c = MapRenderer.palette[i % MapRenderer.palette.count]
            func entry(_ suffix: String, _ type: String, _ kind: String, _ paint: JSONValue) -> JSONValue {
                [
                    "id": .string("\(layer.name)/\(suffix)"), "type": .string(type), "source": .string(sourceName), "source-layer": .string(layer.name),
                    "minzoom": .integer(Int64(layer.minZoom)), "filter": ["==", "$type", .string(kind)], "paint": paint,
                ]
            }
            out.append(entry("areas", "fill", "Polygon", ["fill-color": css(c, alpha: 0.43), "fill-outline-color": css(c)]))
            lines.append(entry("lines", "line", "LineString", ["line-color": css(c), "line-width": 1.5]))
            points.append(entry("points", "circle", "Point", ["circle-radius": 4.5, "circle-color": css(c)]))
        }
        return ["version": 8, "name": .string(name), "sources": .object([sourceName: source]), "layers": .array(out + lines + points)]
    }

    private static func rank(_ type: GeometryType) -> Int {
        switch type {
        case .point, .multiPoint: return 2
        case .lineString, .multiLineString: return 1
        default: return 0
        }
    }
}
