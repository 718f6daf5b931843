import Foundation
import OutpostCore
import OutpostREST

/// Geocodes, reverse geocodes and suggests (ArcGIS `LocatorTask`): against a GeocodeServer by
/// URL, or offline against a `.locator` file by file URL — the same calls and results either way.
/// Loadable: `load()` opens the file (refusing a damaged one) or reads the service info.
///
/// ```swift
/// let task = LocatorTask(url: URL(fileURLWithPath: "helsinki.locator"))
/// let candidates = try await task.geocode(searchText: "Mannerheimintie 12, Helsinki")
/// let here = try await task.reverseGeocode(location: Position(x: 24.9407, y: 60.1680))
/// ```
public final class LocatorTask: LoadableForwarding, Sendable {
    /// The GeocodeServer or `.locator` file.
    public let url: URL
    public let loadSupport: LoadableSupport
    private let backend = Locked<Backend?>(nil)
    let transport: any RESTTransport

    enum Backend: Sendable {
        case local(LocalLocator)
        case remote(info: LocatorInfo)
    }

    /// A task for the locator at `url`.
    /// - Parameters:
    ///   - url: `…/GeocodeServer`, or a file URL of a `.locator`.
    ///   - token: sent as a bearer token to a secured service.
    /// - Parameter transport: the HTTP client for a GeocodeServer (by default one with the token and a 60 s
    ///   timeout).
    public init(url: URL, token: String? = nil, transport: (any RESTTransport)? = nil) {
        self.url = url
        let transport = transport ?? RESTClient(token: token, timeout: .seconds(60))
        self.transport = transport
        let box = backend
        loadSupport = LoadableSupport {
            if url.isFileURL {
                let locator = try await runBlocking { try LocalLocator(url: url, connections: 2) }
                box.set(.local(locator))
            } else {
                let json = try await transport.get(url)
                box.set(.remote(info: try Self.info(json, url: url)))
            }
        }
    }

    /// What the locator is and can do (after loading).
    public var locatorInfo: LocatorInfo? {
        switch backend.get() {
        case .local(let l): l.info
        case .remote(let info): info
        case nil: nil
        }
    }

    // MARK: - Operations

    /// Candidates for one line of text, best first.
    public func geocode(searchText: String, parameters: GeocodeParameters = GeocodeParameters()) async throws -> [GeocodeResult] {
        switch try await loaded() {
        case .local(let l): return try await runBlocking { try l.geocode(searchText, parameters: parameters, cancellation: $0) }
        case .remote: return try await remoteCandidates([("SingleLine", searchText)], parameters)
        }
    }

    /// Candidates for an address in parts (`Address`, `City`, `Postal`, …).
    public func geocode(searchValues: [String: String], parameters: GeocodeParameters = GeocodeParameters()) async throws -> [GeocodeResult] {
        switch try await loaded() {
        case .local(let l): return try await runBlocking { try l.geocode(searchValues: searchValues, parameters: parameters, cancellation: $0) }
        case .remote: return try await remoteCandidates(searchValues.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, parameters)
        }
    }

    /// The candidate a suggestion stands for.
    public func geocode(suggestResult: SuggestResult, parameters: GeocodeParameters = GeocodeParameters()) async throws -> [GeocodeResult] {
        switch try await loaded() {
        case .local(let l): return try await runBlocking { try l.geocode(magicKey: suggestResult.magicKey, parameters: parameters, cancellation: $0) }
        case .remote: return try await remoteCandidates([("SingleLine", suggestResult.label), ("magicKey", suggestResult.magicKey)], parameters)
        }
    }

    /// Completions of partly typed text.
    public func suggest(searchText: String, parameters: SuggestParameters = SuggestParameters()) async throws -> [SuggestResult] {
        switch try await loaded() {
        case .local(let l): return try await runBlocking { try l.suggest(searchText, parameters: parameters, cancellation: $0) }
        case .remote:
            var form = [("text", searchText), ("maxSuggestions", String(parameters.maxResults))]
            if let p = parameters.preferredSearchLocation { form.append(("location", Self.point(p, parameters.locationSpatialReference))) }
            if !parameters.categories.isEmpty { form.append(("category", parameters.categories.joined(separator: ","))) }
            let json = try await call("suggest", form)
            return (json["suggestions"]?.arrayValue ?? []).compactMap { s in
                guard let text = s["text"]?.stringValue, let key = s["magicKey"]?.stringValue else { return nil }
                return SuggestResult(label: text, magicKey: key, isCollection: s["isCollection"]?.boolValue ?? false)
            }
        }
    }

    /// The address at `location` (nearest first); empty when nothing is within reach.
    public func reverseGeocode(location: Position, parameters: ReverseGeocodeParameters = ReverseGeocodeParameters()) async throws -> [GeocodeResult] {
        switch try await loaded() {
        case .local(let l): return try await runBlocking { try l.reverseGeocode(location, parameters: parameters, cancellation: $0) }
        case .remote:
            var form = [("location", Self.point(location, parameters.locationSpatialReference)), ("distance", String(parameters.maxDistance))]
            if let sr = parameters.outputSpatialReference { form.append(("outSR", String(sr.wkid))) }
            if !parameters.featureTypes.isEmpty { form.append(("featureTypes", parameters.featureTypes.joined(separator: ","))) }
            let json: JSONValue
            do {
                json = try await call("reverseGeocode", form)
            } catch let error as ArcGISError where error.description.contains("Unable to find address") {
                return []
            }
            guard let address = json["address"]?.objectValue, let x = json["location"]?["x"]?.doubleValue, let y = json["location"]?["y"]?.doubleValue else {
                throw LocatorError(.service, "the service's reverseGeocode answer has no address and location")
            }
            let wkid = json["location"]?["spatialReference"]?["wkid"]?.doubleValue.map { Int($0) } ?? locatorInfo?.spatialReference.wkid ?? 4326
            let label = address["Match_addr"]?.stringValue ?? address["LongLabel"]?.stringValue ?? ""
            let p = Position(x: x, y: y)
            return [GeocodeResult(
                label: label, score: 100, location: p, displayLocation: p, extent: Envelope(xmin: x, ymin: y, xmax: x, ymax: y),
                spatialReference: SpatialReference(wkid: wkid), attributes: address,
                matchType: LocatorMatchType(name: address["Addr_type"]?.stringValue ?? "") ?? .pointAddress)]
        }
    }

    // MARK: - Helpers

    private func loaded() async throws -> Backend {
        try await load()
        guard let b = backend.get() else { throw LocatorError(.notALocator, "the locator did not load") }
        return b
    }

    private func call(_ operation: String, _ form: [(String, String)]) async throws -> JSONValue {
        do {
            return try await transport.post(url.appendingPathComponent(operation), form: form + [("f", "json")])
        } catch let error as ArcGISError {
            if error.description.contains("Unable to find address") { throw error }
            throw LocatorError(.service, "\(operation): \(error)")
        }
    }

    private func remoteCandidates(_ input: [(String, String)], _ p: GeocodeParameters) async throws -> [GeocodeResult] {
        var form = input + [("maxLocations", String(max(1, min(p.maxResults, 50))))]
        form.append(("outFields", p.resultAttributeNames.isEmpty ? "Match_addr,Addr_type,Score" : p.resultAttributeNames.joined(separator: ",")))
        if let sr = p.outputSpatialReference { form.append(("outSR", String(sr.wkid))) }
        if let near = p.preferredSearchLocation { form.append(("location", Self.point(near, p.locationSpatialReference))) }
        if let area = p.searchArea {
            let wkid = p.searchAreaSpatialReference.map { #","spatialReference":{"wkid":\#($0.wkid)}"# } ?? ""
            form.append(("searchExtent", #"{"xmin":\#(area.xmin),"ymin":\#(area.ymin),"xmax":\#(area.xmax),"ymax":\#(area.ymax)\#(wkid)}"#))
        }
        if !p.categories.isEmpty { form.append(("category", p.categories.joined(separator: ","))) }
        let json = try await call("findAddressCandidates", form)
        let wkid = json["spatialReference"]?["wkid"]?.doubleValue.map { Int($0) } ?? locatorInfo?.spatialReference.wkid ?? 4326
        return (json["candidates"]?.arrayValue ?? []).compactMap { c -> GeocodeResult? in
            guard let x = c["location"]?["x"]?.doubleValue, let y = c["location"]?["y"]?.doubleValue else { return nil }
            let score = c["score"]?.doubleValue ?? 0
            guard score >= p.minScore else { return nil }
            let e = c["extent"]
            let extent = Envelope(
                xmin: e?["xmin"]?.doubleValue ?? x, ymin: e?["ymin"]?.doubleValue ?? y, xmax: e?["xmax"]?.doubleValue ?? x, ymax: e?["ymax"]?.doubleValue ?? y)
            let attributes = c["attributes"]?.objectValue ?? [:]
            let position = Position(x: x, y: y)
            return GeocodeResult(
                label: c["address"]?.stringValue ?? "", score: score, location: position, displayLocation: position, extent: extent,
                spatialReference: SpatialReference(wkid: wkid), attributes: attributes,
                matchType: LocatorMatchType(name: attributes["Addr_type"]?.stringValue ?? "") ?? .pointAddress)
        }
    }

    static func point(_ p: Position, _ sr: SpatialReference?) -> String {
        guard let sr else { return "\(p.x),\(p.y)" }
        return #"{"x":\#(p.x),"y":\#(p.y),"spatialReference":{"wkid":\#(sr.wkid)}}"#
    }

    static func info(_ json: JSONValue, url: URL) throws -> LocatorInfo {
        guard json["singleLineAddressField"] != nil || json["candidateFields"] != nil else {
            throw LocatorError(.service, "\(url.absoluteString) does not answer as a GeocodeServer")
        }
        let wkid = json["spatialReference"]?["latestWkid"]?.doubleValue ?? json["spatialReference"]?["wkid"]?.doubleValue ?? 4326
        let capabilities = (json["capabilities"]?.stringValue ?? "").lowercased()
        let extent = json["fullExtent"].flatMap { e -> Envelope? in
            guard let a = e["xmin"]?.doubleValue, let b = e["ymin"]?.doubleValue, let c = e["xmax"]?.doubleValue, let d = e["ymax"]?.doubleValue else { return nil }
            return Envelope(xmin: a, ymin: b, xmax: c, ymax: d)
        }
        let name = url.deletingLastPathComponent().lastPathComponent
        return LocatorInfo(
            name: name, spatialReference: SpatialReference(wkid: Int(wkid)), entryCount: 0, extent: extent,
            searchAttributeNames: (json["addressFields"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue },
            resultAttributeNames: (json["candidateFields"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue },
            supportsSuggestions: capabilities.contains("suggest"), supportsReverseGeocoding: capabilities.contains("reversegeocode"))
    }
}
