import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

/// The layer checksum hashed from stored rows must equal the one built from decoded features,
/// however another writer chose to store the values.
@Suite("Feature digest")
struct FeatureDigestTests {
    static func featureChecksum(_ table: FeatureTable, _ query: FeatureQuery, _ conn: GeodatabaseConnection) throws -> FeatureDigest.Accumulator {
        var acc = FeatureDigest.Accumulator()
        try table.forEach(matching: query, in: conn) { acc.add($0, layer: table.definition) }
        return acc
    }

    @Test func rowChecksumEqualsFeatureChecksumWhateverTheStorage() async throws {
        let dir = TemporaryDirectory()
        // Values as other writers store them, geometry bodies in other forms.
        let gdb = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        defer { try? gdb.close() }
        let area = Geometry.polygon(try Polygon(rings: [[
            Position(x: -123, y: 45), Position(x: -122, y: 45), Position(x: -122, y: 46), Position(x: -123, y: 46), Position(x: -123, y: 45),
        ]]))
        try await gdb.read { conn in
            for layer in conn.geodatabase.schema.allLayers {
                let table = try conn.geodatabase.table(named: layer.name)
                var queries = [FeatureQuery.all, FeatureQuery(where: "objectid > 3")]
                if layer.isSpatial {
                    var inArea = FeatureQuery()
                    inArea.intersecting = area
                    queries.append(inArea)
                }
                for query in queries {
                    let rows = try table.checksum(matching: query, in: conn)
                    let features = try Self.featureChecksum(table, query, conn)
                    #expect(rows.count == features.count, "\(layer.name)")
                    #expect(rows.hex == features.hex, "\(layer.name)")
                    #expect(rows.count > 0 || layer.name != "inspection_points")
                }
            }
        }
    }

    @Test func anyChangedValueChangesTheChecksum() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        defer { try? gdb.close() }
        let table = try gdb.table(named: "inspection_points")
        let before = try await gdb.read { conn in try table.checksum(matching: .all, in: conn) }
        for sql in [
            "UPDATE inspection_points SET depth_m = coalesce(depth_m, 0) + 0.001 WHERE objectid = 1",
            "UPDATE inspection_points SET notes = coalesce(notes, '') || 'x' WHERE objectid = 1",
            "UPDATE inspection_points SET condition = NULL WHERE objectid = 2",
            "DELETE FROM inspection_points WHERE objectid = 3",
        ] {
            var after: FeatureDigest.Accumulator?
            do {
                // The change is measured, then undone by the thrown error.
                try await gdb.write { conn in
                    try conn.execute(sql)
                    throw Undo(value: try table.checksum(matching: .all, in: conn))
                }
            } catch let undo as Undo {
                after = undo.value
            }
            let changed = try #require(after)
            #expect(changed.hex != before.hex, "\(sql)")
        }
        // A moved geometry as well, through the API.
        try await table.update([Feature(objectID: 1, geometry: .point(try Point(x: -122.6001, y: 45.5)))])
        let moved = try await gdb.read { conn in try table.checksum(matching: .all, in: conn) }
        #expect(moved.hex != before.hex && moved.count == before.count)
    }

    /// Thrown to undo a savepoint and carry a value out of it.
    struct Undo: Error { let value: FeatureDigest.Accumulator }

    @Test func storedBodyIsUsedOnlyWhenItIsTheCanonicalEncoding() throws {
        let geometries: [Geometry] = [
            .point(try Point(x: 1, y: 2)), .point(try Point(x: 1, y: 2, z: 3)), .point(try Point(x: 1, y: 2, m: 4)),
            .point(try Point(x: 1, y: 2, z: 3, m: 4)),
            .lineString(try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1)])),
            .polygon(try Polygon(rings: [[Position(x: 0, y: 0), Position(x: 1, y: 0), Position(x: 1, y: 1), Position(x: 0, y: 0)]])),
        ]
        for g in geometries {
            for kind in GeoPackageBinary.EnvelopeKind.allCases {
                let le = GeoPackageBinary.encode(g, srsID: 4326, envelope: kind)
                let body = le.withUnsafeBytes { FeatureTable.canonicalWKB($0).map { [UInt8]($0) } }
                #expect(body == WKB.encode(g), "\(g.type) \(kind)")
                let be = GeoPackageBinary.encode(g, srsID: 4326, envelope: kind, littleEndian: false)
                #expect(be.withUnsafeBytes { FeatureTable.canonicalWKB($0) } == nil)
            }
        }
        // Truncated or padded bodies are not taken as they are.
        var short = GeoPackageBinary.encode(geometries[4], srsID: 4326)
        short.removeLast()
        #expect(short.withUnsafeBytes { FeatureTable.canonicalWKB($0) } == nil)
        let padded = GeoPackageBinary.encode(geometries[5], srsID: 4326) + [0]
        #expect(padded.withUnsafeBytes { FeatureTable.canonicalWKB($0) } == nil)
    }
}
