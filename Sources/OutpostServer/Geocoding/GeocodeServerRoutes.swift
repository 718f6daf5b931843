import Foundation
import Hummingbird
import OutpostCore
import OutpostLocator

/// `…/<name>/GeocodeServer/…`, as the ArcGIS REST API shapes a locator: service info,
/// `findAddressCandidates`, `reverseGeocode`, `suggest` and `geocodeAddresses`, over a
/// `.locator` file served beside the services.
struct GeocodeServerRoutes {
    let locator: LocalLocator
    let parameters: RequestParameters
    let writing: ResponseWriting

    /// Most records `geocodeAddresses` takes at once.
    static let maxBatchSize = 1_000
    /// Most candidates `findAddressCandidates` returns.
    static let maxResultSize = 50

    /// The routes below `…/<name>/GeocodeServer`, for callers who may query the locator.
    static func table(locator: @escaping @Sendable (RoutedRequest) throws -> GeocodeServerRoutes) -> RouteTable {
        var table = RouteTable()
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (GeocodeServerRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, by: locator, answer)
        }
        on("") { r, _ in r.writing.json(r.serviceInfo()) }
        on("findAddressCandidates") { r, _ in r.writing.json(try await r.run { try r.findAddressCandidates() }) }
        on("reverseGeocode") { r, _ in
            guard let answer = try await r.run({ try r.reverseGeocode() }) else {
                // Nothing near is not a malformed request: ArcGIS answers it with HTTP 200 and
                // this error body, word for word (clients such as geopy look for it).
                return r.writing.json([
                    "error": [
                        "code": 400, "message": "Cannot perform query. Invalid query parameters.",
                        "details": ["Unable to find address for the specified location."],
                    ],
                ])
            }
            return r.writing.json(answer)
        }
        on("suggest") { r, _ in r.writing.json(try await r.run { try r.suggest() }) }
        on("geocodeAddresses") { r, _ in r.writing.json(try await r.run { try r.geocodeAddresses() }) }
        on("**") { _, call in throw ServiceError.notFound("GeocodeServer operation \(call.rest.joined(separator: "/"))") }
        return table
    }

    /// Searches read SQLite synchronously: off the cooperative pool, so a batch does not hold a
    /// thread other requests need.
    private func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await runBlocking {
            do {
                return try body()
            } catch let error as LocatorError {
                if error.code == .notALocator { throw ServiceError(500, error.message) }
                guard let input = error.input else { throw ServiceError(400, error.message) }
                throw ServiceError.badParameter(Self.parameter(input), error.message)
            }
        }
    }

    /// The REST parameter that carries a search input.
    static func parameter(_ input: LocatorError.Input) -> String {
        switch input {
        case .location: "location"
        case .searchArea: "searchExtent"
        case .outputSpatialReference: "outSR"
        case .magicKey: "magicKey"
        }
    }

    // MARK: - Info

    private func serviceInfo() -> JSONValue {
        let info = locator.info
        func field(_ name: String, _ alias: String, length: Int = 100) -> JSONValue {
            ["name": .string(name), "type": "esriFieldTypeString", "alias": .string(alias), "required": false, "length": .integer(Int64(length))]
        }
        let candidate: [JSONValue] = LocalLocator.attributeNames.map { name in
            let numeric = ["Score", "X", "Y", "DisplayX", "DisplayY", "Xmin", "Xmax", "Ymin", "Ymax", "Distance"].contains(name)
            return [
                "name": .string(name), "type": .string(numeric ? "esriFieldTypeDouble" : name == "Source_ID" ? "esriFieldTypeInteger" : "esriFieldTypeString"),
                "alias": .string(name), "required": false,
            ]
        }
        var answer: [String: JSONValue] = [
            "currentVersion": ServiceInfo.currentVersion,
            "serviceDescription": .string("Locator \(info.name): \(info.entryCount) addresses and places"),
            "addressFields": [
                field("Address", "Address", length: 200), field("Neighborhood", "Neighborhood"), field("City", "City"),
                field("Postal", "Postal code", length: 20),
            ],
            "singleLineAddressField": field("SingleLine", "Single Line Input", length: 200),
            "candidateFields": .array(candidate),
            "intersectionCandidateFields": [],
            "spatialReference": ["wkid": .integer(Int64(info.spatialReference.wkid)), "latestWkid": .integer(Int64(info.spatialReference.wkid))],
            "locatorProperties": [
                "MaxBatchSize": .integer(Int64(Self.maxBatchSize)), "SuggestedBatchSize": 150, "MaxResultSize": .integer(Int64(Self.maxResultSize)),
                "LoadBalancerTimeOut": 60, "UICLILocatorName": .string(info.name), "MinimumCandidateScore": 60, "MinimumMatchScore": 85,
            ],
            "categories": .array(LocatorMatchType.allCases.filter { $0 != .streetAddress }.map { ["name": .string($0.description)] }),
            "capabilities": "Geocode,ReverseGeocode,Suggest",
        ]
        if let extent = info.extent {
            answer["fullExtent"] = [
                "xmin": .number(extent.xmin), "ymin": .number(extent.ymin), "xmax": .number(extent.xmax), "ymax": .number(extent.ymax),
                "spatialReference": ["wkid": .integer(Int64(info.spatialReference.wkid))],
            ]
        }
        return .object(answer)
    }

    // MARK: - Operations

    private func findAddressCandidates() throws -> JSONValue {
        var p = GeocodeParameters()
        p.maxResults = try parameters.int("maxLocations", range: 1...Self.maxResultSize) ?? Self.maxResultSize
        p.outputSpatialReference = try parameters.knownSpatialReference("outSR")
        p.resultAttributeNames = outFields()
        let scope = try searchScope()
        p.categories = scope.categories
        (p.preferredSearchLocation, p.locationSpatialReference) = (scope.near?.0, scope.near?.1)
        (p.searchArea, p.searchAreaSpatialReference) = (scope.area?.0, scope.area?.1)
        let results: [GeocodeResult]
        if let key = parameters["magicKey"] {
            results = try locator.geocode(magicKey: key, parameters: p)
        } else if let text = parameters["SingleLine"] {
            results = try locator.geocode(text, parameters: p)
        } else {
            var values: [String: String] = [:]
            for name in ["Address", "Address2", "Address3", "Neighborhood", "City", "Subregion", "Region", "Postal"] {
                if let value = parameters[name] { values[name] = value }
            }
            guard !values.isEmpty else {
                throw ServiceError.badParameter("SingleLine", "give the address as SingleLine, in Address/City/Postal, or a suggestion's magicKey")
            }
            results = try locator.geocode(searchValues: values, parameters: p)
        }
        return [
            "spatialReference": spatialReference(p.outputSpatialReference),
            "candidates": .array(results.map { candidate($0) }),
        ]
    }

    /// The address JSON, or nil when nothing is within reach.
    private func reverseGeocode() throws -> JSONValue? {
        guard let (point, sr) = try location("location") else {
            throw ServiceError.badParameter("location", "required: x,y or {\"x\": …, \"y\": …, \"spatialReference\": …}")
        }
        var p = ReverseGeocodeParameters()
        p.locationSpatialReference = sr
        p.outputSpatialReference = try parameters.knownSpatialReference("outSR")
        if let distance = parameters["distance"] {
            guard let metres = Double(distance), metres.isFinite, metres >= 0 else {
                throw ServiceError.badParameter("distance", "expected metres, got \"\(distance.prefix(40))\"")
            }
            p.maxDistance = metres
        }
        p.featureTypes = (parameters["featureTypes"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for type in p.featureTypes where LocatorMatchType(name: type) == nil {
            throw ServiceError.badParameter("featureTypes", "\(type.prefix(40)) is not one of PointAddress, POI, StreetName")
        }
        guard let found = try locator.reverseGeocode(point, parameters: p).first else { return nil }
        var address = found.attributes
        address["Address"] = address["StAddr"]
        for key in ["Neighborhood", "Subregion", "Region", "CountryCode"] where address[key] == nil { address[key] = "" }
        return [
            "address": .object(address),
            "location": [
                "x": .number(found.location.x), "y": .number(found.location.y),
                "spatialReference": ["wkid": .integer(Int64(found.spatialReference.wkid)), "latestWkid": .integer(Int64(found.spatialReference.wkid))],
            ],
        ]
    }

    private func suggest() throws -> JSONValue {
        var p = SuggestParameters()
        p.maxResults = try parameters.int("maxSuggestions", range: 1...15) ?? 5
        let scope = try searchScope()
        p.categories = scope.categories
        (p.preferredSearchLocation, p.locationSpatialReference) = (scope.near?.0, scope.near?.1)
        (p.searchArea, p.searchAreaSpatialReference) = (scope.area?.0, scope.area?.1)
        let suggestions = try locator.suggest(parameters["text"] ?? "", parameters: p)
        return ["suggestions": .array(suggestions.map { ["text": .string($0.label), "magicKey": .string($0.magicKey), "isCollection": .bool($0.isCollection)] })]
    }

    /// Many addresses at once; each record's `ResultID` is its `OBJECTID`, and `Status` is M
    /// (matched, score ≥ 85), T (tied: two different candidates with the best score) or U.
    private func geocodeAddresses() throws -> JSONValue {
        guard let body = try parameters.json("addresses") else {
            throw ServiceError.badParameter("addresses", "required: {\"records\": [{\"attributes\": {\"OBJECTID\": 1, \"SingleLine\": \"…\"}}]}")
        }
        guard let records = body["records"]?.arrayValue else { throw ServiceError.badParameter("addresses", "has no records array") }
        guard records.count <= Self.maxBatchSize else {
            throw ServiceError.badParameter("addresses", "\(records.count) records are more than MaxBatchSize \(Self.maxBatchSize)")
        }
        var p = GeocodeParameters()
        p.maxResults = 2
        p.outputSpatialReference = try parameters.knownSpatialReference("outSR")
        p.resultAttributeNames = ["*"]
        var locations: [JSONValue] = []
        for (index, record) in records.enumerated() {
            guard let attributes = record["attributes"]?.objectValue else {
                throw ServiceError.badParameter("addresses", "record \(index) has no attributes")
            }
            let id = attributes.first { $0.key.caseInsensitiveCompare("OBJECTID") == .orderedSame }?.value ?? .integer(Int64(index + 1))
            var values: [String: String] = [:]
            for (key, value) in attributes where key.caseInsensitiveCompare("OBJECTID") != .orderedSame {
                if let text = value.stringValue ?? value.doubleValue.map({ String($0) }) { values[key] = text }
            }
            let found = values.keys.contains(where: { $0.caseInsensitiveCompare("SingleLine") == .orderedSame })
                ? try locator.geocode(values.first { $0.key.caseInsensitiveCompare("SingleLine") == .orderedSame }!.value, parameters: p)
                : try locator.geocode(searchValues: values, parameters: p)
            let status = BatchGeocode.status(found)
            if let best = found.first, status != "U" {
                var attributes = best.attributes
                attributes["ResultID"] = id
                attributes["Status"] = .string(status)
                locations.append(["address": .string(best.label), "location": ["x": .number(best.location.x), "y": .number(best.location.y)], "score": .number(best.score), "attributes": .object(attributes)])
            } else {
                locations.append(["address": "", "location": ["x": "NaN", "y": "NaN"], "score": 0, "attributes": ["ResultID": id, "Status": "U", "Score": 0, "Match_addr": ""]])
            }
        }
        return ["spatialReference": spatialReference(p.outputSpatialReference), "locations": .array(locations)]
    }

    /// `category`, `location` and `searchExtent`, as findAddressCandidates and suggest take them.
    private func searchScope() throws -> (categories: [String], near: (Position, SpatialReference?)?, area: (Envelope, SpatialReference?)?) {
        let categories = (parameters["category"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return (categories, try location("location"), try envelope("searchExtent"))
    }

    // MARK: - Encoding

    private func candidate(_ r: GeocodeResult) -> JSONValue {
        [
            "address": .string(r.label), "location": ["x": .number(r.location.x), "y": .number(r.location.y)], "score": .number(r.score),
            "attributes": .object(r.attributes),
            "extent": ["xmin": .number(r.extent.xmin), "ymin": .number(r.extent.ymin), "xmax": .number(r.extent.xmax), "ymax": .number(r.extent.ymax)],
        ]
    }

    private func spatialReference(_ outSR: SpatialReference?) -> JSONValue {
        let wkid = Int64((outSR ?? locator.info.spatialReference).wkid)
        return ["wkid": .integer(wkid), "latestWkid": .integer(wkid)]
    }

    private func outFields() -> [String] {
        guard let text = parameters["outFields"] else { return [] }
        return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `x,y` or `{"x": …, "y": …, "spatialReference": {"wkid": …}}`.
    private func location(_ name: String) throws -> (Position, SpatialReference?)? {
        guard let text = parameters[name] else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("{") {
            guard let json = try? JSONValue.parse(trimmed), let x = json["x"]?.doubleValue, let y = json["y"]?.doubleValue, x.isFinite, y.isFinite else {
                throw ServiceError.badParameter(name, "expected {\"x\": …, \"y\": …}")
            }
            return (Position(x: x, y: y), json["spatialReference"].flatMap(EsriJSON.decodeSpatialReference))
        }
        let parts = trimmed.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite else {
            throw ServiceError.badParameter(name, "expected x,y, got \"\(text.prefix(40))\"")
        }
        return (Position(x: x, y: y), nil)
    }

    /// `xmin,ymin,xmax,ymax` or an envelope JSON with its spatial reference.
    private func envelope(_ name: String) throws -> (Envelope, SpatialReference?)? {
        guard let text = parameters[name] else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("{") {
            guard let json = try? JSONValue.parse(trimmed), let xmin = json["xmin"]?.doubleValue, let ymin = json["ymin"]?.doubleValue,
                  let xmax = json["xmax"]?.doubleValue, let ymax = json["ymax"]?.doubleValue
            else { throw ServiceError.badParameter(name, "expected {\"xmin\", \"ymin\", \"xmax\", \"ymax\"}") }
            return (Envelope(xmin: xmin, ymin: ymin, xmax: xmax, ymax: ymax), json["spatialReference"].flatMap(EsriJSON.decodeSpatialReference))
        }
        let v = trimmed.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard v.count == 4, v.allSatisfy(\.isFinite) else { throw ServiceError.badParameter(name, "expected xmin,ymin,xmax,ymax") }
        return (Envelope(xmin: v[0], ymin: v[1], xmax: v[2], ymax: v[3]), nil)
    }
}
