import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostSQLiteService
import OutpostStorage
import OutpostTiles
import OutpostVectorTiles

/// A MapServer's layers and dynamic operations, as ArcGIS's: `layers`, `{id}`, `export` (an
/// image of any area and size), `identify`, `find` and `legend`. A feature service's MapServer
/// draws its layers; a tile cache's is one raster layer whose images are mosaicked from tiles;
/// a vector tile file's is one raster layer drawn from its tiles by its style.
/// Images are Web Mercator (the services' tiling); `bboxSR`, `sr` and `imageSR` may also be 4326.
struct MapServerOperations {
    enum Source {
        case drawn(SQLiteServiceBackend)
        case cache(TileCache, name: String)
        case vector(VectorTileRenderSource)
    }

    /// What drawing from vector tiles throws, as the answer to the request: an area needing too
    /// many tiles is the caller's (400), a tile that does not decode the file's (500).
    static func drawing<T>(_ draw: () async throws -> T) async throws -> T {
        do {
            return try await draw()
        } catch let error as VectorTileError {
            throw ServiceError(error.code == .invalidArea ? 400 : 500, error.message)
        }
    }

    let source: Source
    let parameters: RequestParameters
    let writing: ResponseWriting
    let files: ResultFiles
    /// This MapServer's public URL (for the `href` of exported images).
    let mapServerURL: String

    static let maxImageSize = 4096

    /// `…/MapServer/layers`.
    func layerList() async throws -> Response {
        _ = try parameters.format()
        return writing.json(["layers": .array(try await layers()), "tables": []])
    }

    /// `…/MapServer/{id}`.
    func layer(_ id: Int) async throws -> Response {
        _ = try parameters.format()
        guard let layer = try await layers().first(where: { $0["id"]?.integerValue == Int64(id) }) else { throw ServiceError.notFound("layer \(id)") }
        return writing.json(layer)
    }

    /// `…/MapServer/legend`.
    func legendAnswer() throws -> Response {
        _ = try parameters.format()
        return writing.json(try legend())
    }

    /// `…/MapServer/exportfiles/{name}`: an image `export` kept for `f=json`'s `href`.
    func exportFile(_ name: String) throws -> Response {
        guard let file = files.file(named: name), let data = FileManager.default.contents(atPath: file.path) else {
            throw ServiceError.notFound("exported image \(name)")
        }
        return writing.bytes(ByteBuffer(bytes: data), contentType: "image/png")
    }

    // MARK: - Layers

    /// The layers `…/MapServer?f=json` lists and `…/MapServer/{id}` describes.
    func layers() async throws -> [JSONValue] {
        switch source {
        case .cache(let cache, let name):
            guard let info = cache.info else { throw ServiceError(500, "the tile cache did not load") }
            return [Self.rasterLayer(info, name: name)]
        case .vector(let source):
            return [Self.rasterLayer(try await source.cacheInfo(), name: source.label)]
        case .drawn(let backend):
            let schema = try await backend.schema()
            let renderer = MapRenderer(geodatabase: backend.geodatabase)
            var out: [JSONValue] = []
            for layer in schema.layers where layer.isSpatial {
                let sr = layer.spatialReference ?? schema.spatialReference
                let extent = try await backend.extent(layerID: layer.id).flatMap { try? WebMercator.convert($0, from: sr, to: .webMercator) }
                out.append([
                    "currentVersion": ServiceInfo.currentVersion, "id": .integer(Int64(layer.id)), "name": .string(layer.name), "type": "Feature Layer",
                    "description": .string(layer.description ?? ""), "geometryType": .string(layer.geometryType?.esriName ?? ""), "parentLayerId": -1,
                    "defaultVisibility": true, "subLayerIds": .null, "minScale": 0, "maxScale": 0,
                    "extent": ServiceInfo.envelope(extent, .webMercator), "displayField": .string(layer.displayField ?? layer.objectIDField),
                    "fields": .array(layer.fields.map { ServiceInfo.field($0, schema: schema) }), "capabilities": "Map,Query,Data",
                    "supportedQueryFormats": "JSON", "hasAttachments": false,
                    "drawingInfo": ["renderer": ["type": "simple", "symbol": Self.symbol(layer.geometryType?.type, renderer.color(ofLayer: layer.id))], "transparency": 0],
                ])
            }
            return out
        }
    }

    /// The one layer of a map service of tiles: a raster layer over the tiles' levels and extent.
    static func rasterLayer(_ info: TileCacheInfo, name: String) -> JSONValue {
        var layer: [String: JSONValue] = [
            "currentVersion": ServiceInfo.currentVersion, "id": 0, "name": .string(name), "type": "Raster Layer", "parentLayerId": -1,
            "defaultVisibility": true, "subLayerIds": .null, "minScale": .number(info.scheme.lod(info.minLevel)?.scale ?? 0),
            "maxScale": .number(info.scheme.lod(info.maxLevel)?.scale ?? 0), "capabilities": "Map",
        ]
        if let e = info.fullExtent { layer["extent"] = ServiceInfo.envelope(e, info.scheme.spatialReference) }
        return .object(layer)
    }

    /// The legend of a map service of tiles: its one raster layer, no symbols.
    static func rasterLegend(name: String, scheme: TilingScheme, levels: ClosedRange<Int>) -> JSONValue {
        [
            "layers": [[
                "layerId": 0, "layerName": .string(name), "layerType": "Raster Layer", "minScale": .number(scheme.lod(levels.lowerBound)?.scale ?? 0),
                "maxScale": .number(scheme.lod(levels.upperBound)?.scale ?? 0), "legend": [],
            ]]
        ]
    }

    /// The Esri JSON symbol of how a layer is drawn.
    static func symbol(_ type: GeometryType?, _ color: RGBA?) -> JSONValue {
        let c = color ?? RGBA(0, 0, 0)
        func rgba(_ f: Double = 1, alpha: UInt8 = 255) -> JSONValue {
            .array([Double(c.r) * f, Double(c.g) * f, Double(c.b) * f].map { .integer(Int64($0)) } + [.integer(Int64(alpha))])
        }
        switch type {
        case .point?, .multiPoint?:
            return ["type": "esriSMS", "style": "esriSMSCircle", "color": rgba(), "size": 6.75, "outline": ["color": rgba(0.6), "width": 0.75]]
        case .lineString?, .multiLineString?:
            return ["type": "esriSLS", "style": "esriSLSSolid", "color": rgba(), "width": 1.5]
        default:
            return [
                "type": "esriSFS", "style": "esriSFSSolid", "color": rgba(alpha: 110),
                "outline": ["type": "esriSLS", "style": "esriSLSSolid", "color": rgba(0.75), "width": 0.9],
            ]
        }
    }

    // MARK: - export

    /// `export`: bbox, bboxSR, size, imageSR, format (png, png8, png24, png32), transparent,
    /// layers (show:/hide:/include:/exclude: ids), f=image (the PNG) or json (an href to it).
    func export() async throws -> Response {
        let f = (parameters["f"] ?? "html").lowercased()
        guard ["image", "json", "pjson", "html"].contains(f) else { throw ServiceError.badParameter("f", "use image or json") }
        let format = (parameters["format"] ?? "png").lowercased()
        guard ["png", "png8", "png24", "png32"].contains(format) else {
            throw ServiceError.badParameter("format", "\(format.prefix(20)) is not offered; png, png8, png24 or png32")
        }
        let (width, height) = try imageSize(parameters["size"] ?? "400,400", name: "size")
        guard var box = try envelope("bbox", sr: mapSpatialReference("bboxSR") ?? .webMercator) else {
            throw ServiceError.badParameter("bbox", "give xmin,ymin,xmax,ymax")
        }
        if let imageSR = try mapSpatialReference("imageSR"), !imageSR.isWebMercator {
            throw ServiceError.badParameter("imageSR", "images are drawn in Web Mercator (3857)")
        }
        // As ArcGIS: the area grows to the image's proportions around its centre.
        let resolution = max((box.xmax - box.xmin) / Double(width), (box.ymax - box.ymin) / Double(height))
        guard resolution > 0 else { throw ServiceError.badParameter("bbox", "the box has no area") }
        let cx = (box.xmin + box.xmax) / 2, cy = (box.ymin + box.ymax) / 2
        box = Envelope(
            xmin: cx - resolution * Double(width) / 2, ymin: cy - resolution * Double(height) / 2, xmax: cx + resolution * Double(width) / 2,
            ymax: cy + resolution * Double(height) / 2)
        let transparent = try parameters.bool("transparent", default: false)
        let pixels: [UInt8]
        switch source {
        case .drawn(let backend):
            let shown = try shownLayers(all: try await backend.schema().layers.filter(\.isSpatial).map(\.id))
            pixels = try await MapRenderer(geodatabase: backend.geodatabase).render(
                envelope: box, width: width, height: height, layers: shown, transparent: transparent)
        case .cache(let cache, _):
            do {
                pixels = try TileMosaic.render(cache: cache, envelope: box, width: width, height: height)
            } catch let error as TileCacheError where error.code == .unsupported {
                throw ServiceError(400, error.message)
            }
        case .vector(let source):
            pixels = try await Self.drawing { try await source.renderer.render(envelope: box, width: width, height: height, transparent: transparent) }
        }
        let png = try PNGEncoder.encode(pixels: pixels, width: width, height: height)
        if f == "image" { return writing.bytes(ByteBuffer(bytes: png), contentType: "image/png") }
        let (name, url) = try files.newFile(extension: "png")
        try Data(png).write(to: url)
        return writing.json([
            "href": .string("\(mapServerURL)/exportfiles/\(name)"), "width": .integer(Int64(width)), "height": .integer(Int64(height)),
            "extent": ServiceInfo.envelope(box, .webMercator), "scale": .number(resolution * 96 * TilingScheme.inchesPerMetre),
        ])
    }

    func imageSize(_ text: String, name: String) throws -> (Int, Int) {
        let n = text.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard n.count >= 2, (1...Self.maxImageSize).contains(n[0]), (1...Self.maxImageSize).contains(n[1]) else {
            throw ServiceError.badParameter(name, "give width,height, each 1–\(Self.maxImageSize)")
        }
        return (n[0], n[1])
    }

    /// An envelope parameter (`xmin,ymin,xmax,ymax` or Esri JSON) in Web Mercator.
    func envelope(_ name: String, sr: SpatialReference) throws -> Envelope? {
        guard let text = parameters[name] else { return nil }
        var e: Envelope
        let n = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        if n.count == 4 {
            e = Envelope(xmin: n[0], ymin: n[1], xmax: n[2], ymax: n[3])
        } else if let json = try? JSONValue.parse(text), let a = json["xmin"]?.doubleValue, let b = json["ymin"]?.doubleValue,
            let c = json["xmax"]?.doubleValue, let d = json["ymax"]?.doubleValue
        {
            e = Envelope(xmin: a, ymin: b, xmax: c, ymax: d)
        } else {
            throw ServiceError.badParameter(name, "expected xmin,ymin,xmax,ymax")
        }
        guard e.isValid else { throw ServiceError.badParameter(name, "min must not exceed max") }
        if !sr.isWebMercator {
            do { e = try WebMercator.convert(e, from: sr, to: .webMercator) } catch { throw ServiceError.badParameter(name, "cannot project from \(sr)") }
        }
        return e
    }

    /// A spatial reference parameter (`bboxSR`, `sr`, `imageSR`): maps are drawn in Web
    /// Mercator, and 4326 and 3857 are taken; another wkid is a 400 naming the parameter.
    private func mapSpatialReference(_ name: String) throws -> SpatialReference? {
        guard let sr = try parameters.spatialReference(name) else { return nil }
        guard sr.isWebMercator || sr.isGeographic else {
            throw ServiceError.badParameter(name, "EPSG:\(sr.wkid) is not one a map service takes; use 4326 or 3857")
        }
        return sr
    }

    /// `layers=show:0,2` (only these), `hide:1` (all but these), `include:`/`exclude:` (the
    /// default visible ones, all here, plus or minus these); absent: all.
    func shownLayers(all: [Int]) throws -> Set<Int> {
        guard let text = parameters["layers"] else { return Set(all) }
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let ids = try? parts[1].split(separator: ",").map({ (part: Substring) -> Int in
            guard let id = Int(part.trimmingCharacters(in: .whitespaces)) else { throw ServiceError.badParameter("layers", "") }
            return id
        }) else {
            throw ServiceError.badParameter("layers", "expected show:, hide:, include: or exclude: and layer ids")
        }
        switch parts[0].lowercased() {
        case "show": return Set(ids)
        case "hide", "exclude": return Set(all).subtracting(ids)
        case "include": return Set(all).union(ids)
        default: throw ServiceError.badParameter("layers", "expected show:, hide:, include: or exclude:")
        }
    }

    // MARK: - identify and find

    /// The feature service behind a drawn MapServer; a cached one has no features.
    private func drawnBackend(_ operation: String) throws -> SQLiteServiceBackend {
        guard case .drawn(let backend) = source else {
            throw ServiceError(400, "\(operation) needs features; this map service draws tiles (a tile cache or a vector basemap)")
        }
        return backend
    }

    /// `identify`: the features of the layers at a point (with a tolerance in pixels of the
    /// map shown, from mapExtent and imageDisplay) or within an envelope.
    func identify() async throws -> Response {
        _ = try parameters.format()
        let backend = try drawnBackend("identify")
        let schema = try await backend.schema()
        let sr = try mapSpatialReference("sr") ?? .webMercator
        guard let text = parameters["geometry"] else { throw ServiceError.badParameter("geometry", "give the point (x,y) or envelope to identify at") }
        let numbers = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        var search: Envelope
        if numbers.count == 2 {
            guard let extent = try envelope("mapExtent", sr: sr) else { throw ServiceError.badParameter("mapExtent", "give the extent of the map shown") }
            let display = try imageSize(parameters["imageDisplay"] ?? "400,400,96", name: "imageDisplay")
            let tolerance = Double(try parameters.int("tolerance", range: 0...100) ?? 3)
            let pixel = max((extent.xmax - extent.xmin) / Double(display.0), (extent.ymax - extent.ymin) / Double(display.1))
            var point = Envelope(xmin: numbers[0], ymin: numbers[1], xmax: numbers[0], ymax: numbers[1])
            if !sr.isWebMercator { point = try WebMercator.convert(point, from: sr, to: .webMercator) }
            search = Envelope(
                xmin: point.xmin - tolerance * pixel, ymin: point.ymin - tolerance * pixel, xmax: point.xmax + tolerance * pixel,
                ymax: point.ymax + tolerance * pixel)
        } else if let e = try envelope("geometry", sr: sr) {
            search = e
        } else {
            throw ServiceError.badParameter("geometry", "expected x,y or xmin,ymin,xmax,ymax")
        }
        let option = (parameters["layers"] ?? "top").lowercased()
        let kind = option.split(separator: ":").first.map(String.init) ?? "top"
        guard ["top", "visible", "all"].contains(kind) else { throw ServiceError.badParameter("layers", "expected top, visible or all[:ids]") }
        var ids = schema.layers.filter(\.isSpatial).map(\.id)
        if let list = option.split(separator: ":", maxSplits: 1).dropFirst().first {
            ids = list.split(separator: ",").compactMap { Int($0) }
        }
        let returnGeometry = try parameters.bool("returnGeometry", default: true)
        var results: [JSONValue] = []
        // Top first: points are drawn over lines over polygons.
        let order: (LayerDefinition) -> Int = { l in
            switch l.geometryType?.type {
            case .point?, .multiPoint?: 0
            case .lineString?, .multiLineString?: 1
            default: 2
            }
        }
        for layer in schema.layers.filter({ $0.isSpatial && ids.contains($0.id) }).sorted(by: { order($0) < order($1) }) {
            let layerSR = layer.spatialReference ?? schema.spatialReference
            var query = FeatureQuery()
            query.intersecting = .polygon(try WebMercator.convert(search, from: .webMercator, to: layerSR).polygon)
            query.limit = 100
            let found = try await backend.features(layerID: layer.id, query: query)
            for feature in found { results.append(try Self.result(feature, layer: layer, layerSR: layerSR, sr: sr, returnGeometry: returnGeometry)) }
            if kind == "top", !found.isEmpty { break }
        }
        return writing.json(["results": .array(results)])
    }

    /// `find`: features whose text fields contain (or equal) `searchText`.
    func find() async throws -> Response {
        _ = try parameters.format()
        let backend = try drawnBackend("find")
        let schema = try await backend.schema()
        guard let text = parameters["searchText"] else { throw ServiceError.badParameter("searchText", "give the text to find") }
        let contains = try parameters.bool("contains", default: true)
        let sr = try mapSpatialReference("sr") ?? .webMercator
        let ids = try parameters.integers("layers").map { Set($0.map(Int.init)) }
        let fieldNames = parameters["searchFields"].map { Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }) }
        let returnGeometry = try parameters.bool("returnGeometry", default: true)
        let literal = "'" + (contains ? "%" : "") + text.replacingOccurrences(of: "'", with: "''") + (contains ? "%" : "") + "'"
        var results: [JSONValue] = []
        for layer in schema.layers where layer.isSpatial && (ids?.contains(layer.id) ?? true) {
            let layerSR = layer.spatialReference ?? schema.spatialReference
            for field in layer.fields where field.type == .string && (fieldNames?.contains(field.name.lowercased()) ?? true) {
                var query = FeatureQuery()
                query.whereClause = "\(field.name) \(contains ? "LIKE" : "=") \(literal)"
                query.limit = 200
                for feature in try await backend.features(layerID: layer.id, query: query) {
                    var result = try Self.result(feature, layer: layer, layerSR: layerSR, sr: sr, returnGeometry: returnGeometry).objectValue ?? [:]
                    result["foundFieldName"] = .string(field.name)
                    result["value"] = result["attributes"]?[field.name] ?? .null
                    results.append(.object(result))
                }
            }
        }
        return writing.json(["results": .array(results)])
    }

    /// An identify or find result: the feature's attributes and geometry (in `sr`) as the
    /// query endpoint writes them, with the layer and its display value.
    static func result(_ feature: Feature, layer: LayerDefinition, layerSR: SpatialReference, sr: SpatialReference, returnGeometry: Bool) throws -> JSONValue {
        var shown = feature
        if returnGeometry, let g = feature.geometry, sr != layerSR { shown.geometry = try WebMercator.convert(g, from: layerSR, to: sr) }
        var text = ""
        try FeatureJSON.writeEsri(shown, fields: layer.fields, includeGeometry: returnGeometry, to: &text)
        let written = try JSONValue.parse(text)
        let display = layer.displayField ?? layer.objectIDField
        var out: [String: JSONValue] = [
            "layerId": .integer(Int64(layer.id)), "layerName": .string(layer.name), "displayFieldName": .string(display),
            "value": .string(written["attributes"]?[display].map { $0.stringValue ?? $0.jsonString } ?? ""),
            "attributes": written["attributes"] ?? [:], "geometryType": .string(layer.geometryType?.esriName ?? ""),
        ]
        if returnGeometry, case .object(var geometry)? = written["geometry"] {
            geometry["spatialReference"] = ServiceInfo.spatialReference(sr)
            out["geometry"] = .object(geometry)
        }
        return .object(out)
    }

    // MARK: - legend

    func legend() throws -> JSONValue {
        switch source {
        case .cache(let cache, let name):
            guard let info = cache.info else { throw ServiceError(500, "the tile cache did not load") }
            return Self.rasterLegend(name: name, scheme: info.scheme, levels: info.minLevel...info.maxLevel)
        case .vector(let source):
            return Self.rasterLegend(name: source.label, scheme: .webMercator, levels: min(source.renderer.zooms.lowerBound, source.maxLevel)...source.maxLevel)
        case .drawn(let backend):
            let renderer = MapRenderer(geodatabase: backend.geodatabase)
            return ["layers": .array(try backend.geodatabase.schema.layers.filter(\.isSpatial).map { layer in
                let swatch = try renderer.swatch(ofLayer: layer.id)
                return [
                    "layerId": .integer(Int64(layer.id)), "layerName": .string(layer.name), "layerType": "Feature Layer", "minScale": 0, "maxScale": 0,
                    "legend": [[
                        "label": .string(layer.title ?? layer.name), "url": .string("legend/\(layer.id).png"), "imageData": .string(Data(swatch).base64EncodedString()),
                        "contentType": "image/png", "height": 20, "width": 20, "values": [],
                    ]],
                ]
            })]
        }
    }
}
