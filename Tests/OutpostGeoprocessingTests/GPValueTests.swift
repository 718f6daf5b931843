import Foundation
import OutpostCore
import Testing

@testable import OutpostGeoprocessing

@Suite("Geoprocessing values and parameters")
struct GPValueTests {
    static func featureSet() throws -> GPFeatureSet {
        GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 3067),
            fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID"), GPField(name: "owner", type: "esriFieldTypeString", alias: "Owner", length: 80)],
            features: [
                GPFeatureSet.Feature(
                    // Clockwise, as Esri JSON writes an exterior ring.
                    geometry: .polygon(try Polygon(rings: [[Position(x: 0, y: 0), Position(x: 0, y: 10), Position(x: 10, y: 10), Position(x: 0, y: 0)]])),
                    attributes: ["OBJECTID": .integer(1), "owner": .string("Virtanen")]),
                GPFeatureSet.Feature(geometry: nil, attributes: ["OBJECTID": .integer(2), "owner": .null]),
            ])
    }

    /// Every type, written as ArcGIS REST JSON (text) and read back as the same value.
    @Test func everyTypeRoundTripsThroughItsJSON() throws {
        let values: [GPValue] = [
            .boolean(true), .long(-42), .double(2.5), .string("Mannerheimintie 1"), .date(milliseconds: 1_199_145_600_000),
            .linearUnit(distance: 345.678, units: .esriMiles), .arealUnit(area: 12.5, units: .esriHectares), .featureSet(try Self.featureSet()),
            .featureSet(GPFeatureSet(url: "https://example.org/arcgis/rest/services/parcels/FeatureServer/0/query?where=1=1")),
            .recordSet(GPFeatureSet(fields: [GPField(name: "name", type: "esriFieldTypeString")], features: [.init(geometry: nil, attributes: ["name": .string("a")])])),
            .dataFile(GPFileReference(itemID: "i3c8e8a2b")), .dataFile(GPFileReference(url: "https://example.org/report.pdf")),
            .rasterData(GPFileReference(url: "https://example.org/dem.tif", format: "tif")), .rasterDataLayer(GPFileReference(url: "https://example.org/dem.tif", format: "tif")),
            .multiValue(.string, [.string("a"), .string("b")]), .multiValue(.linearUnit, [.linearUnit(distance: 1, units: .esriFeet)]),
        ]
        for value in values {
            var text = ""
            try value.json.write(to: &text)
            let back = try GPValue(json: try JSONValue.parse(text), as: value.dataType)
            #expect(back == value, "\(value.dataType): \(text)")
            #expect(GPDataType(name: value.dataType.description) == value.dataType)
        }
        #expect(try GPValue.linearUnit(distance: 3, units: .esriFeet).json == ["distance": .number(3), "units": "esriFeet"])
        #expect(GPDataType(name: "GPMultiValue:GPMultiValue:GPString") == nil && GPDataType(name: "GPRaster") == nil)
        #expect(LinearUnit.esriMiles.metres == 1609.344 && ArealUnit.esriAcres.squareMetres > 4046)
    }

    /// Form fields as `execute` receives them: GPString as is, booleans and numbers as text,
    /// the rest as JSON.
    @Test func formValuesReadAsTheServicesDirectorySendsThem() throws {
        #expect(try GPValue(formValue: "{\"not\": json}", as: .string) == .string("{\"not\": json}"))
        #expect(try GPValue(formValue: "TRUE", as: .boolean) == .boolean(true))
        #expect(try GPValue(formValue: "12", as: .long) == .long(12))
        #expect(try GPValue(formValue: "12", as: .double) == .double(12))
        #expect(try GPValue(formValue: "{\"distance\":5,\"units\":\"esriKilometers\"}", as: .linearUnit) == .linearUnit(distance: 5, units: .esriKilometers))
        #expect(try GPValue(formValue: "[\"a\",\"b\"]", as: .multiValue(.string)) == .multiValue(.string, [.string("a"), .string("b")]))
    }

    /// Wrong input names the parameter and says what is wrong.
    @Test(arguments: [
        ("1.5", GPDataType.long, "whole number"), ("yes", .boolean, "true or false"), ("{\"distance\":5,\"units\":\"esriFurlongs\"}", .linearUnit, "esriFurlongs"),
        ("{\"distance\":\"far\",\"units\":\"esriMeters\"}", .linearUnit, "numeric"), ("{\"fields\":[]}", .featureRecordSetLayer, "features"),
        ("{\"features\":[{\"geometry\":{\"x\":\"a\"},\"attributes\":{}}]}", .featureRecordSetLayer, "feature 0"), ("{}", .dataFile, "url"),
        ("[1, \"b\"]", .multiValue(.long), "whole number"), ("not json", .double, "not valid JSON"),
    ])
    func badValuesAreNamedErrors(_ text: String, _ type: GPDataType, _ expected: String) {
        #expect {
            try GPValue(formValue: text, as: type, parameter: "Distance")
        } throws: { error in
            let e = error as? GPValueError
            return e?.parameter == "Distance" && e?.description.contains(expected) == true
        }
    }

    /// A parameter's task-info JSON round trips; accept() applies the default, refuses a missing
    /// required value, a wrong type and a value outside the choice list.
    @Test func parameterInfoAndAcceptance() throws {
        let parameters = [
            GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input features", category: "Inputs"),
            GPParameterInfo(name: "Distance", dataType: .linearUnit, kind: .optional, defaultValue: .linearUnit(distance: 100, units: .esriMeters)),
            GPParameterInfo(name: "Dissolve", dataType: .string, kind: .optional, defaultValue: .string("NONE"), choiceList: ["NONE", "ALL"]),
            GPParameterInfo(name: "Output", dataType: .featureRecordSetLayer, direction: .output, kind: .derived),
        ]
        for p in parameters {
            var text = ""
            try p.json.write(to: &text)
            #expect(try GPParameterInfo(json: try JSONValue.parse(text)) == p, "\(text)")
        }
        #expect(try parameters[1].accept(nil) == .linearUnit(distance: 100, units: .esriMeters))
        #expect(throws: GPValueError.self) { try parameters[0].accept(nil) }
        #expect(throws: GPValueError.self) { try parameters[2].accept(.string("SOME")) }
        #expect(throws: GPValueError.self) { try parameters[2].accept(.long(1)) }
        #expect(try parameters[2].accept(.string("ALL")) == .string("ALL"))
        #expect(throws: GPValueError.self) { try GPParameterInfo(json: ["name": "x", "dataType": "GPNothing"]) }
    }
}
