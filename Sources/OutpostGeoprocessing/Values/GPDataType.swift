import OutpostCore

/// The data types of geoprocessing parameters, by their ArcGIS REST names.
public indirect enum GPDataType: Hashable, Sendable, CustomStringConvertible {
    /// `GPBoolean`, `GPLong`, `GPDouble`, `GPString`, `GPDate`.
    case boolean, long, double, string, date
    /// `GPLinearUnit` (a distance with its unit), `GPArealUnit` (an area with its unit).
    case linearUnit, arealUnit
    /// `GPFeatureRecordSetLayer` (features), `GPRecordSet` (rows without geometry).
    case featureRecordSetLayer, recordSet
    /// `GPDataFile`, `GPRasterData`, `GPRasterDataLayer` (files by URL or item id).
    case dataFile, rasterData, rasterDataLayer
    /// `GPMultiValue:<type>`: a list of values of one type.
    case multiValue(GPDataType)

    /// `GPBoolean`, `GPMultiValue:GPString`, …
    public var description: String {
        switch self {
        case .boolean: "GPBoolean"
        case .long: "GPLong"
        case .double: "GPDouble"
        case .string: "GPString"
        case .date: "GPDate"
        case .linearUnit: "GPLinearUnit"
        case .arealUnit: "GPArealUnit"
        case .featureRecordSetLayer: "GPFeatureRecordSetLayer"
        case .recordSet: "GPRecordSet"
        case .dataFile: "GPDataFile"
        case .rasterData: "GPRasterData"
        case .rasterDataLayer: "GPRasterDataLayer"
        case .multiValue(let element): "GPMultiValue:\(element)"
        }
    }

    /// The type of an ArcGIS REST name (`GPLong`, `GPMultiValue:GPString`, …); nil for an unknown name.
    public init?(name: String) {
        if name.hasPrefix("GPMultiValue:") {
            guard let element = GPDataType(name: String(name.dropFirst("GPMultiValue:".count))) else { return nil }
            if case .multiValue = element { return nil }
            self = .multiValue(element)
            return
        }
        let all: [GPDataType] = [.boolean, .long, .double, .string, .date, .linearUnit, .arealUnit, .featureRecordSetLayer, .recordSet, .dataFile, .rasterData, .rasterDataLayer]
        guard let found = all.first(where: { $0.description == name }) else { return nil }
        self = found
    }
}

/// Units of GPLinearUnit (`esriMeters`, …) with their length in metres; decimal degrees are an
/// angle and convert only through a coordinate system.
public enum LinearUnit: String, Sendable, CaseIterable {
    /// The ArcGIS linear units.
    case esriCentimeters, esriDecimalDegrees, esriDecimeters, esriFeet, esriInches, esriKilometers, esriMeters, esriMiles, esriMillimeters,
        esriNauticalMiles, esriPoints, esriYards

    /// Metres per unit; nil for decimal degrees.
    public var metres: Double? {
        switch self {
        case .esriCentimeters: 0.01
        case .esriDecimalDegrees: nil
        case .esriDecimeters: 0.1
        case .esriFeet: 0.3048
        case .esriInches: 0.0254
        case .esriKilometers: 1000
        case .esriMeters: 1
        case .esriMiles: 1609.344
        case .esriMillimeters: 0.001
        case .esriNauticalMiles: 1852
        case .esriPoints: 0.0254 / 72
        case .esriYards: 0.9144
        }
    }
}

/// Units of GPArealUnit with their area in square metres.
public enum ArealUnit: String, Sendable, CaseIterable {
    /// The ArcGIS areal units.
    case esriAcres, esriAres, esriHectares, esriSquareCentimeters, esriSquareDecimeters, esriSquareFeet, esriSquareInches, esriSquareKilometers,
        esriSquareMeters, esriSquareMiles, esriSquareMillimeters, esriSquareYards

    /// Square metres per unit.
    public var squareMetres: Double {
        switch self {
        case .esriAcres: 4_046.856_422_4
        case .esriAres: 100
        case .esriHectares: 10_000
        case .esriSquareCentimeters: 1e-4
        case .esriSquareDecimeters: 1e-2
        case .esriSquareFeet: 0.092_903_04
        case .esriSquareInches: 0.000_645_16
        case .esriSquareKilometers: 1e6
        case .esriSquareMeters: 1
        case .esriSquareMiles: 2_589_988.110_336
        case .esriSquareMillimeters: 1e-6
        case .esriSquareYards: 0.836_127_36
        }
    }
}
