import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSync

/// How a download finds the writer's field for each attribute name of its changes: the same
/// answer as the writer's own lookup (any case; nil for a name it has no field for, such as the
/// global id), whatever order the names come in from one change to the next.
@Suite("A download's attribute names")
struct AttributeColumnsTests {
    @Test func namesFindTheWritersFieldsInAnyOrder() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try await gdb.write { conn in
            let writer = ServiceRowWriter(table: table, conn: conn)
            var columns = AttributeColumns(writer.fields)
            #expect(columns.names == writer.fields.map(\.name) && columns.types == writer.fields.map(\.type))
            let known = writer.fields.map(\.name)
            let names = known + ["globalid", "GLOBALID", "no_such_field", known[0].uppercased(), known[1].lowercased()]
            var random = SystemRandomNumberGenerator()
            // The same names changing places, lists of other lengths, a name seen at a place
            // another held before.
            for round in 0..<200 {
                let list = round % 7 == 0 ? Array(names.shuffled(using: &random).prefix(3)) : names.shuffled(using: &random)
                for (position, name) in list.enumerated() {
                    #expect(columns.index(of: name, at: position) == writer.fieldIndex(named: name), "\(name) at \(position)")
                }
            }
            #expect(columns.index(of: "globalid", at: 0) == nil)
            #expect(columns.index(of: known[2], at: 0) == 2)
            #expect(columns.index(of: known[2], at: 0) == 2, "the name last seen at its place")
        }
        try gdb.close()
    }
}
