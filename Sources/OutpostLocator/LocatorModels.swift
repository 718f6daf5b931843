import Foundation
import OutpostCore

/// How to geocode: ArcGIS `GeocodeParameters`.
public struct GeocodeParameters: Hashable, Sendable {
    /// Most candidates to return.
    public var maxResults = 6
    /// Candidates scoring below this (0–100) are left out.
    public var minScore = 0.0
    /// Among candidates that score alike, nearer ones come first.
    public var preferredSearchLocation: Position?
    /// Only candidates inside this envelope (in the locator's spatial reference unless
    /// `searchAreaSpatialReference` says otherwise).
    public var searchArea: Envelope?
    /// The spatial reference of `searchArea` (the locator's when nil).
    public var searchAreaSpatialReference: SpatialReference?
    /// The spatial reference of `preferredSearchLocation` (the locator's when nil).
    public var locationSpatialReference: SpatialReference?
    /// The spatial reference of the results (the locator's when nil).
    public var outputSpatialReference: SpatialReference?
    /// Attributes to return: `["*"]` for all; empty for `Match_addr`, `Addr_type` and `Score`.
    public var resultAttributeNames: [String] = []
    /// Only these match types (`PointAddress`, `POI`, `StreetName`, `Postal`, `Locality`); empty
    /// for all.
    public var categories: [String] = []

    /// Parameters with ArcGIS's defaults.
    public init() {}
}

/// How to reverse geocode: ArcGIS `ReverseGeocodeParameters`.
public struct ReverseGeocodeParameters: Hashable, Sendable {
    /// Metres from the location within which to look.
    public var maxDistance = 100.0
    /// Most candidates to return.
    public var maxResults = 1
    /// Only these match types; empty for addresses, places and streets.
    public var featureTypes: [String] = []
    /// The spatial reference of the location (the locator's when nil).
    public var locationSpatialReference: SpatialReference?
    /// The spatial reference of the results (the locator's when nil).
    public var outputSpatialReference: SpatialReference?
    /// Attributes to return: `["*"]` for all.
    public var resultAttributeNames: [String] = ["*"]

    /// Parameters with ArcGIS's defaults.
    public init() {}
}

/// How to suggest: ArcGIS `SuggestParameters`.
public struct SuggestParameters: Hashable, Sendable {
    /// Most suggestions to return.
    public var maxResults = 5
    /// Among suggestions that match alike, nearer ones come first.
    public var preferredSearchLocation: Position?
    /// The spatial reference of `preferredSearchLocation` (the locator's when nil).
    public var locationSpatialReference: SpatialReference?
    /// Only suggestions inside this envelope.
    public var searchArea: Envelope?
    /// The spatial reference of `searchArea` (the locator's when nil).
    public var searchAreaSpatialReference: SpatialReference?
    /// Only these match types; empty for all.
    public var categories: [String] = []

    /// Parameters with ArcGIS's defaults.
    public init() {}
}

/// A candidate: ArcGIS `GeocodeResult`.
public struct GeocodeResult: Hashable, Sendable {
    /// The full address or place name (`Match_addr`).
    public var label: String
    /// 0–100: how well the text matched (100: every word exactly).
    public var score: Double
    /// Where the address is, in `spatialReference`.
    public var location: Position
    /// Where to draw it (the same as `location` for points; a point on the street for streets).
    public var displayLocation: Position
    /// An extent to zoom to.
    public var extent: Envelope
    /// The spatial reference of `location`, `displayLocation` and `extent`.
    public var spatialReference: SpatialReference
    /// `Match_addr`, `Addr_type`, `Score` and, when asked, `LongLabel`, `ShortLabel`, `AddNum`,
    /// `StAddr`, `StName`, `City`, `Postal`, `PlaceName`, `X`, `Y`, `Distance`, …
    public var attributes: [String: JSONValue]
    /// What the candidate is (`Addr_type`).
    public var matchType: LocatorMatchType

    /// A candidate of these values.
    public init(
        label: String, score: Double, location: Position, displayLocation: Position, extent: Envelope,
        spatialReference: SpatialReference, attributes: [String: JSONValue], matchType: LocatorMatchType
    ) {
        self.label = label
        self.score = score
        self.location = location
        self.displayLocation = displayLocation
        self.extent = extent
        self.spatialReference = spatialReference
        self.attributes = attributes
        self.matchType = matchType
    }
}

/// A completion of what the user typed: ArcGIS `SuggestResult`. Geocoding it
/// (``LocatorTask/geocode(suggestResult:parameters:)``) returns exactly that candidate.
public struct SuggestResult: Hashable, Sendable {
    /// The text to show.
    public var label: String
    /// The key that finds the candidate again (ArcGIS `magicKey`).
    public var magicKey: String
    /// True for a category or area rather than one place.
    public var isCollection: Bool

    /// A suggestion of these values.
    public init(label: String, magicKey: String, isCollection: Bool = false) {
        self.label = label
        self.magicKey = magicKey
        self.isCollection = isCollection
    }
}

/// What a locator can do and how it is described (ArcGIS `LocatorInfo`).
public struct LocatorInfo: Hashable, Sendable {
    /// The locator's name.
    public var name: String
    /// The spatial reference of its locations.
    public var spatialReference: SpatialReference
    /// Address, place and street entries indexed.
    public var entryCount: Int
    /// The extent of what it holds.
    public var extent: Envelope?
    /// The fields a multi-field search takes (`Address`, `City`, `Postal`, …).
    public var searchAttributeNames: [String]
    /// The attributes a result can carry.
    public var resultAttributeNames: [String]
    /// Whether it suggests completions of partial text.
    public var supportsSuggestions: Bool
    /// Whether it finds addresses near a location.
    public var supportsReverseGeocoding: Bool
}

/// How a batch geocode grades each address (ArcGIS `Status`).
public enum BatchGeocode {
    /// The score a best candidate needs to count as matched.
    public static let matchScore = 85.0

    /// `M` matched, `T` tied (another address scored the same), `U` unmatched.
    public static func status(_ candidates: [GeocodeResult]) -> String {
        guard let best = candidates.first, best.score >= matchScore else { return "U" }
        if candidates.dropFirst().contains(where: { $0.score == best.score && $0.label != best.label }) { return "T" }
        return "M"
    }
}
