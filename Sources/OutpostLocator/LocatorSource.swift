import Foundation
import OutpostCore

/// Which fields of a layer hold the parts of an address.
public struct LocatorFieldMap: Hashable, Sendable, Codable {
    /// The house number field.
    public var house: String?
    /// The street name field.
    public var street: String?
    /// The city field.
    public var city: String?
    /// The postal code field.
    public var postal: String?
    /// A place or feature name ("Burger King", "Hydrant 2231"): searchable, and the label of a POI.
    public var name: String?
    /// Another searchable value (an asset id, an alternative name).
    public var alias: String?
    /// House number ranges of street lines (ArcGIS `L_F_ADD`, `L_T_ADD`, `R_F_ADD`, `R_T_ADD`):
    /// the numbers at the line's start and end on its left and right, for interpolation.
    public var leftFrom: String?
    /// The field of the number at the line's end on its left.
    public var leftTo: String?
    /// The field of the number at the line's start on its right.
    public var rightFrom: String?
    /// The field of the number at the line's end on its right.
    public var rightTo: String?

    /// A map of these fields (ranges are set as properties).
    public init(house: String? = nil, street: String? = nil, city: String? = nil, postal: String? = nil, name: String? = nil, alias: String? = nil) {
        self.house = house
        self.street = street
        self.city = city
        self.postal = postal
        self.name = name
        self.alias = alias
    }

    /// Parses `house=house_number,street=street,city=city,postal=postcode,name=name,alias=id`.
    public init(parsing spec: String) throws {
        self.init()
        for pair in spec.split(separator: ",", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[1].isEmpty else {
                throw LocatorError(.invalidInput, "field map entry \"\(pair)\" is not role=field")
            }
            switch parts[0].lowercased() {
            case "house": house = parts[1]
            case "street": street = parts[1]
            case "city": city = parts[1]
            case "postal": postal = parts[1]
            case "name": name = parts[1]
            case "alias": alias = parts[1]
            case "left_from": leftFrom = parts[1]
            case "left_to": leftTo = parts[1]
            case "right_from": rightFrom = parts[1]
            case "right_to": rightTo = parts[1]
            default:
                throw LocatorError(
                    .invalidInput, "unknown field role \"\(parts[0])\" (house, street, city, postal, name, alias, left_from, left_to, right_from, right_to)")
            }
        }
        guard !fieldNames.isEmpty else { throw LocatorError(.invalidInput, "the field map names no field") }
        let ranges = [leftFrom, leftTo, rightFrom, rightTo].compactMap { $0 }.count
        guard ranges == 0 || ranges == 4 else {
            throw LocatorError(.invalidInput, "house number ranges need all four of left_from, left_to, right_from and right_to")
        }
    }

    /// Whether street lines carry house number ranges.
    public var hasRanges: Bool { leftFrom != nil && leftTo != nil && rightFrom != nil && rightTo != nil }

    /// The mapped field names.
    public var fieldNames: [String] { [house, street, city, postal, name, alias, leftFrom, leftTo, rightFrom, rightTo].compactMap { $0 } }
}

/// A layer a locator is built from. Point (and polygon) layers give addresses and places; line
/// layers give streets (their names, extents and shapes for reverse geocoding).
public struct LocatorSource: Hashable, Sendable {
    /// The layer's name in the geodatabase.
    public var layer: String
    /// Which fields hold the parts of an address.
    public var fields: LocatorFieldMap
    /// Only rows matching this where clause.
    public var whereClause: String?

    /// A source of these values.
    public init(layer: String, fields: LocatorFieldMap, whereClause: String? = nil) {
        self.layer = layer
        self.fields = fields
        self.whereClause = whereClause
    }
}

/// What a build or an update did.
public struct LocatorBuildSummary: Hashable, Sendable {
    /// Address and place rows indexed (added, for an update).
    public var entries = 0
    /// Street line parts indexed (added, for an update).
    public var segments = 0
    /// Rows with nothing to search by (no street, name, alias, postal code or city), left out.
    public var skipped = 0
    /// Rows removed (updates only).
    public var removed = 0
    /// Rows whose fields or shape changed and were indexed again (updates only).
    public var changed = 0
    /// Street, postal-code and city entries made from the rows.
    public var places = 0
    /// How long it took.
    public var seconds = 0.0
}
