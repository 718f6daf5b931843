import Foundation
import FuzzDriver
import OutpostCore
import OutpostGeoprocessing
import OutpostLocator
import OutpostREST
import OutpostRouting

// The geoprocessing, locator and routing parsers: GeoTIFF rasters (uploaded, or a tool's input
// file), GP parameter values as clients send them, the locator's text handling, route stops and
// barriers, and multipart form bodies (uploads, attachments, any operation from Python). Kept
// apart from outpost-fuzz because GEOS, PROJ and the REST client come into the instrumented
// build (scripts/fuzz services).
try runFuzzer(targets: [
    FuzzTarget(
        name: "geotiff",
        run: { data in
            guard let raster = try? GeoTIFF.decode(data) else { return }
            // What decodes has the cells it says it has, and encodes again.
            precondition(raster.values.count == raster.width * raster.height, "a raster of \(raster.width)×\(raster.height) with \(raster.values.count) cells")
            _ = try? GeoTIFF.encode(raster)
        },
        seeds: { try geotiffSeeds() }),
    FuzzTarget(
        name: "gp-value",
        run: { data in
            // The first byte picks the parameter's type, the rest is the JSON a client sent.
            guard let first = data.first, let json = try? JSONValue.parse(data.dropFirst()) else { return }
            guard let value = try? GPValue(json: json, as: gpTypes()[Int(first) % gpTypes().count], parameter: "p") else { return }
            _ = try? value.json
        },
        seeds: { gpSeeds() }),
    FuzzTarget(
        name: "locator-text",
        run: { data in
            guard let text = String(data: data, encoding: .utf8) else { return }
            _ = LocatorText.tokens(text)
            _ = try? LocatorFieldMap(parsing: text)
        },
        seeds: {
            ["Mannerheimintie 12 B 4, 00100 Helsinki", "Pohjoisesplanadi 11-13", "Unioninkatu 29a", "house=nro,street=katu,city=kunta", "St. Mary's Rd. N", "ÅSTRÖMINKATU 1 A"]
                .map { Data($0.utf8) }
        }),
    FuzzTarget(
        name: "route-points",
        run: { data in
            guard let text = String(data: data, encoding: .utf8), let points = try? RoutePoints(parsing: text, as: .stops) else { return }
            precondition(points.stops.count <= RouteOptions.maximumStops, "\(points.stops.count) stops")
            precondition(points.stops.allSatisfy { $0.location.x.isFinite && $0.location.y.isFinite }, "a stop that is not a finite number")
            // Into a network's system (ETRS-TM35FIN), as the NAServer takes them.
            if let moved = try? points.stops(in: SpatialReference(wkid: 3067), as: .stops) { precondition(moved.count == points.stops.count) }
        },
        seeds: { routePointSeeds() }),
    FuzzTarget(
        name: "multipart",
        run: { data in
            // The first byte picks: read the rest as a body, or write fields made of it and read
            // them back.
            guard let first = data.first else { return }
            let rest = data.dropFirst()
            if first & 1 == 0 {
                guard let form = try? MultipartForm(parsing: Data(rest), boundary: multipartBoundary) else { return }
                _ = form.fields
                for part in form.parts { _ = (part.name, part.filename, part.contentType) }
            } else {
                multipartRoundTrip(rest)
            }
        },
        seeds: { multipartSeeds() }),
])
