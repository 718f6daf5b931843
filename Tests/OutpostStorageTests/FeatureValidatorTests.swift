import Foundation
import OutpostCore
import Testing

@testable import OutpostStorage

/// The validator finds fields through ``FieldLookup`` (tables made once) instead of scanning the
/// layer's fields per value: it must find exactly what ``LayerDefinition/field(named:)`` finds and
/// report errors against the edit's index, not the field's.
@Suite("Feature validator")
struct FeatureValidatorTests {
    static let layer = LayerDefinition(
        id: 0, name: "assets", geometryType: .point,
        fields: [
            FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "globalid", type: .globalID),
            FieldDefinition(name: "Status", type: .string, length: 8), FieldDefinition(name: "depth_m", type: .double),
            FieldDefinition(name: "audited", type: .integer, editable: false),
        ])

    @Test(arguments: ["Status", "status", "STATUS", "depth_m", "Depth_M", "globalid", "objectid", "audited", "nope", "", "status "])
    func findsWhatTheLayerFinds(name: String) {
        let lookup = FieldLookup(Self.layer.fields)
        #expect(lookup.index(of: name).map { Self.layer.fields[$0] } == Self.layer.field(named: name))
    }

    @Test func theFirstFieldOfANameWins() {
        let fields = [FieldDefinition(name: "a", type: .string), FieldDefinition(name: "A", type: .integer), FieldDefinition(name: "b", type: .double)]
        let lookup = FieldLookup(fields)
        #expect(lookup.index(of: "A") == 1)  // the exact name first
        #expect(lookup.index(of: "a") == 0)
        #expect(lookup.index(of: "B") == 2)
    }

    @Test func editsNameFieldsInAnyCaseAndErrorsCarryTheEditIndex() throws {
        let validator = FeatureValidator(layer: Self.layer, schema: ServiceSchema(name: "s", layers: [Self.layer]))
        let row = try validator.update(Feature(attributes: ["STATUS": .string("ok"), "DEPTH_M": .integer(2)]), index: 0)
        #expect(row.columns == ["Status", "depth_m"])
        #expect(row.values == [.string("ok"), .double(2)])

        func failure(_ attributes: [String: FieldValue]) -> StorageError? {
            do {
                _ = try validator.update(Feature(attributes: attributes), index: 7)
                return nil
            } catch {
                return error as? StorageError
            }
        }
        let readOnly = failure(["Audited": .integer(1)])
        #expect(readOnly?.editIndex == 7 && readOnly?.field == "audited" && readOnly?.message.contains("not editable") == true)
        let unknown = failure(["colour": .string("red")])
        #expect(unknown?.editIndex == 7 && unknown?.field == "colour")
        let tooLong = failure(["status": .string("far too long")])
        #expect(tooLong?.editIndex == 7 && tooLong?.field == "Status" && tooLong?.message.hasPrefix("Status:") == true)
        // An add checks every field, defaults included, with the same rules.
        let added = try validator.add(Feature(attributes: ["status": .string("new")]), index: 0)
        #expect(added.columns == ["globalid", "Status", "depth_m", "audited", "geom"])
    }
}
