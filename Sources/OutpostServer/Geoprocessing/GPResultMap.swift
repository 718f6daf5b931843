import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostGeoprocessing
import OutpostTiles

/// The result map service of a geoprocessing service (`…/<name>/MapServer/jobs/<job id>`): a
/// succeeded job's feature and raster outputs as a map, each output a layer. `export` draws
/// them for a `bbox` (in `bboxSR`, by default the outputs' system) at `size`: features in the
/// renderer's palette, rasters as a colour ramp from their lowest to highest value, on a
/// transparent background, as PNG (`f=image`) or as JSON naming the image (`f=json`).
struct GPResultMap {
    let service: GeoprocessingService
    let parameters: RequestParameters
    let writing: ResponseWriting
    /// `…/<name>/MapServer`.
    let mapURL: String

    enum Output {
        case features(GPFeatureSet)
        case raster(GPRaster)
    }

    /// `…/MapServer/jobs/{id}`: the job's outputs as a map.
    func info(_ id: String) async throws -> Response {
        let outputs = try await layers(id)
        _ = try parameters.format()
        let sr = outputs.first.map(Self.spatialReference) ?? .wgs84
        return writing.json([
            "mapName": .string(id), "description": .string("The outputs of job \(id)"),
            "layers": .array(outputs.enumerated().map { i, o in
                [
                    "id": .integer(Int64(i)), "name": .string(o.name),
                    "type": .string({ if case .raster = o.output { "Raster Layer" } else { "Feature Layer" } }()),
                ]
            }),
            "spatialReference": ["wkid": .integer(Int64(sr.wkid))],
            "fullExtent": try extent(outputs, in: sr).map { e in
                ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax), "spatialReference": ["wkid": .integer(Int64(sr.wkid))]]
            } ?? .null,
            "supportedImageFormatTypes": "PNG",
        ])
    }

    /// `…/MapServer/jobs/{id}/export`: the outputs drawn.
    func export(_ id: String) async throws -> Response {
        try export(id, try await layers(id))
    }

    /// `…/MapServer/jobs/{id}/layers`.
    func layerList(_ id: String) async throws -> Response {
        let outputs = try await layers(id)
        _ = try parameters.format()
        return writing.json(["layers": .array(try outputs.indices.map { try layerInfo($0, outputs) })])
    }

    /// `…/MapServer/jobs/{id}/{layer}`.
    func layer(_ id: String, _ index: Int) async throws -> Response {
        let outputs = try await layers(id)
        _ = try parameters.format()
        guard outputs.indices.contains(index) else { throw ServiceError.notFound("layer \(index) of job \(id)") }
        return writing.json(try layerInfo(index, outputs))
    }

    /// Anything else below a job's map.
    func notFound(_ id: String, _ route: [String]) async throws -> Never {
        _ = try await layers(id)
        throw ServiceError.notFound("\(mapURL)/jobs/\(id)/\(route.joined(separator: "/"))")
    }

    /// A layer's description: its name, kind, geometry type and extent.
    private func layerInfo(_ index: Int, _ outputs: [(name: String, output: Output)]) throws -> JSONValue {
        let layer = outputs[index]
        let sr = Self.spatialReference(layer)
        var info: [String: JSONValue] = [
            "id": .integer(Int64(index)), "name": .string(layer.name), "parentLayer": .null, "subLayers": [], "defaultVisibility": true,
            "extent": try extent([layer], in: sr).map { e in
                ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax), "spatialReference": ["wkid": .integer(Int64(sr.wkid))]]
            } ?? .null,
        ]
        switch layer.output {
        case .features(let set):
            info["type"] = "Feature Layer"
            info["geometryType"] = set.geometryType.map(JSONValue.string) ?? .null
            info["fields"] = .array(set.fields.map { ["name": .string($0.name), "type": .string($0.type), "alias": .string($0.alias ?? $0.name)] })
        case .raster:
            info["type"] = "Raster Layer"
        }
        return .object(info)
    }

    /// The job's feature and raster outputs, in the task's order.
    private func layers(_ id: String) async throws -> [(name: String, output: Output)] {
        let jobs = service.queue
        guard let job = try await jobs.summary(id), let task = service.definition.task(named: job.task) else { throw ServiceError.notFound("job \(id)") }
        guard job.status == .succeeded else { throw ServiceError(400, "job \(id) is \(job.status.rawValue); its map exists once it has succeeded") }
        var out: [(String, Output)] = []
        for parameter in task.outputs {
            guard let json = try await jobs.value(id, parameter.name, result: true) else { continue }
            switch try GPValue(json: json, as: parameter.dataType, parameter: parameter.name) {
            case .featureSet(let set): out.append((parameter.name, .features(set)))
            case .rasterDataLayer(let file), .rasterData(let file):
                guard let url = file.url.flatMap(URL.init(string:)), url.isFileURL, let raster = try? GeoTIFF.read(url) else { continue }
                out.append((parameter.name, .raster(raster)))
            default: continue
            }
        }
        return out
    }

    static func spatialReference(_ layer: (name: String, output: Output)) -> SpatialReference {
        switch layer.output {
        case .features(let set): set.spatialReference ?? .wgs84
        case .raster(let raster): raster.spatialReference
        }
    }

    private func extent(_ outputs: [(name: String, output: Output)], in sr: SpatialReference) throws -> Envelope? {
        var builder = Envelope.Builder()
        for layer in outputs {
            switch layer.output {
            case .features(let set):
                for f in try set.projected(to: sr).features { if let e = f.geometry?.envelope { builder.add(e) } }
            case .raster(let r):
                let corners = [Position(x: r.xmin, y: r.ymax), Position(x: r.xmin + Double(r.width) * r.cellSize, y: r.ymax - Double(r.height) * r.cellSize)]
                let transform = r.spatialReference == sr ? nil : try CoordinateTransform(from: r.spatialReference, to: sr)
                for c in corners {
                    let p = try transform?.transform(c) ?? c
                    builder.add(Envelope(xmin: p.x, ymin: p.y, xmax: p.x, ymax: p.y))
                }
            }
        }
        return builder.envelope
    }

    private func export(_ id: String, _ outputs: [(name: String, output: Output)]) throws -> Response {
        let format = (parameters["f"] ?? "image").lowercased()
        guard ["image", "json", "pjson"].contains(format) else { throw ServiceError.badParameter("f", "answer as image or json") }
        if let type = parameters["format"], !["png", "png32", "png24", "png8"].contains(type.lowercased()) {
            throw ServiceError.badParameter("format", "the result map draws PNG only")
        }
        var sr = outputs.first.map(Self.spatialReference) ?? .wgs84
        if let given = try parameters.spatialReference("bboxSR") { sr = [102100, 102113, 900913].contains(given.wkid) ? SpatialReference(wkid: 3857) : given }
        guard (try? CoordinateSystemInfo(sr)) != nil else { throw ServiceError.badParameter("bboxSR", "PROJ does not know \(sr.wkid)") }
        var box: Envelope
        if let text = parameters["bbox"] {
            let n = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard n.count == 4, n[2] > n[0], n[3] > n[1] else { throw ServiceError.badParameter("bbox", "give xmin,ymin,xmax,ymax") }
            box = Envelope(xmin: n[0], ymin: n[1], xmax: n[2], ymax: n[3])
        } else {
            guard let full = try extent(outputs, in: sr) else { throw ServiceError.badParameter("bbox", "the job has no output to draw; give a bbox") }
            box = full
        }
        var width = 400, height = 400
        if let text = parameters["size"] {
            let n = text.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard n.count == 2, (1...4096).contains(n[0]), (1...4096).contains(n[1]) else { throw ServiceError.badParameter("size", "give width,height, each 1–4096") }
            (width, height) = (n[0], n[1])
        }
        if format != "image" {
            var query = URLComponents()
            query.queryItems = [
                URLQueryItem(name: "bbox", value: "\(box.xmin),\(box.ymin),\(box.xmax),\(box.ymax)"), URLQueryItem(name: "bboxSR", value: String(sr.wkid)),
                URLQueryItem(name: "size", value: "\(width),\(height)"), URLQueryItem(name: "f", value: "image"),
            ]
            return writing.json([
                "href": .string("\(mapURL)/jobs/\(id)/export?\(query.percentEncodedQuery ?? "")"), "width": .integer(Int64(width)), "height": .integer(Int64(height)),
                "extent": ["xmin": .number(box.xmin), "ymin": .number(box.ymin), "xmax": .number(box.xmax), "ymax": .number(box.ymax), "spatialReference": ["wkid": .integer(Int64(sr.wkid))]],
            ])
        }
        var painter = GeometryPainter(envelope: box, width: width, height: height, transparent: try parameters.bool("transparent", default: true))
        // Rasters under features.
        for layer in outputs {
            guard case .raster(let r) = layer.output else { continue }
            let valid = r.values.filter { $0.isFinite && $0 != r.noData }
            guard let low = valid.min(), let high = valid.max() else { continue }
            let transform = r.spatialReference == sr ? nil : try CoordinateTransform(from: sr, to: r.spatialReference)
            painter.paint(low: low, high: high) { p in
                guard let q = transform == nil ? p : try? transform!.transform(p) else { return nil }
                let column = Int(((q.x - r.xmin) / r.cellSize).rounded(.down)), row = Int(((r.ymax - q.y) / r.cellSize).rounded(.down))
                guard column >= 0, row >= 0, column < r.width, row < r.height else { return nil }
                let v = r[row, column]
                return v == r.noData ? nil : v
            }
        }
        for (index, layer) in outputs.enumerated() {
            guard case .features(let set) = layer.output else { continue }
            for feature in try set.projected(to: sr).features {
                if let g = feature.geometry { painter.draw(g, layer: index) }
            }
        }
        var response = writing.bytes(ByteBuffer(bytes: try painter.png()), contentType: "image/png")
        response.headers[.cacheControl] = "private, max-age=60"
        return response
    }
}
