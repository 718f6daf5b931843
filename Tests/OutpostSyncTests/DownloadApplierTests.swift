import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSync

/// What a download writes of the server's changes, and what it refuses: the server's values
/// and geometries, except the columns with local edits pending, which stay the replica's even
/// when what the server sent for them cannot be read.
@Suite("Applying a download's changes")
struct DownloadApplierTests {
    static let table = "inspection_points"

    static func upsert(_ gid: String, _ attributes: [String: JSONValue], geometry: JSONValue? = nil) -> FeedChange {
        FeedChange(kind: .upsert, globalId: gid, generation: 7, attributes: attributes, geometry: geometry)
    }

    /// Applies `changes` in one write transaction with capture silenced, as a download does.
    static func apply(_ changes: [FeedChange], to gdb: Geodatabase) async throws -> PendingChanges {
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                let layer = try #require(conn.geodatabase.schema.layer(named: table))
                var applier = try DownloadApplier(conn: conn, layer: layer)
                try applier.apply(changes)
                return applier.counts
            }
        }
    }

    @Test func theServersChangesAreWrittenAndRefusedOnlyWhereTheyWrite() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let points = try gdb.table(named: Self.table)
        let one = try #require(try await points.feature(objectID: 1)), two = try #require(try await points.feature(objectID: 2))
        let g1 = try #require(one.globalID), g2 = try #require(two.globalID)
        // A local edit of feature 1's notes, not yet uploaded: that column is the replica's.
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("crew")])])
        let added = "{7B2C9D10-0000-4A11-8E22-0123456789AB}"

        // Feature 1: an unreadable value for its protected column is no error (nothing writes
        // it); the rest is written. Feature 2: values and a move. A new feature is added.
        let counts = try await Self.apply(
            [
                Self.upsert(g1, ["notes": .object(["not": .string("text")]), "status": .string("closed")], geometry: .object(["x": .number(-122.61), "y": .number(45.49)])),
                Self.upsert(g2, ["condition": .integer(4), "inspected_at": .number(1_700_000_000_000)], geometry: .object(["x": .number(-122.62), "y": .number(45.48)])),
                Self.upsert(added, ["asset_id": .string("NEW-1"), "asset_type": .string("valve"), "status": .string("open")], geometry: .object(["x": .number(-122.63), "y": .number(45.47)])),
            ], to: gdb)
        #expect(counts == PendingChanges(inserts: 1, updates: 2, deletes: 0))
        let first = try #require(try await points.feature(objectID: 1))
        let p1 = Geometry.point(try Point(x: -122.61, y: 45.49)), p2 = Geometry.point(try Point(x: -122.62, y: 45.48)), p3 = Geometry.point(try Point(x: -122.63, y: 45.47))
        #expect(first["notes"] == .string("crew") && first["status"] == .string("closed"))
        #expect(first.geometry == p1)
        let second = try #require(try await points.feature(objectID: 2))
        #expect(second["condition"] == .integer(4) && second["inspected_at"] == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(second.geometry == p2)
        var byGlobalID = FeatureQuery()
        byGlobalID.globalIDs = [added]
        let new = try #require(try await points.features(matching: byGlobalID).first)
        #expect(new["asset_id"] == .string("NEW-1") && new.geometry == p3)
        // The geometries written joined the contents' extent, and the R-tree holds them.
        let indexed = try await gdb.read { conn in
            try conn.query(
                """
                SELECT min_x <= -122.63 AND min_y <= 45.47, rtreecheck('rtree_inspection_points_geom')
                FROM gpkg_contents WHERE table_name = ?
                """, arguments: [.text(Self.table)]
            ).first
        }
        #expect(indexed == [.integer(1), .text("ok")])

        // The same unreadable value for a column nobody edited here refuses the change, and
        // so does a geometry the layer cannot hold; nothing of either chunk stays.
        let before = try await points.features(matching: FeatureQuery())
        await #expect(throws: StorageError.self) {
            _ = try await Self.apply([Self.upsert(added, ["status": .string("closed")]), Self.upsert(g2, ["notes": .object([:])])], to: gdb)
        }
        await #expect(throws: StorageError.self) {
            let line: JSONValue = .object(["paths": .array([.array([.array([.number(0), .number(0)]), .array([.number(1), .number(1)])])])])
            _ = try await Self.apply([Self.upsert(added, ["status": .string("closed")]), Self.upsert(g2, [:], geometry: line)], to: gdb)
        }
        #expect(try await points.features(matching: FeatureQuery()) == before)
        try gdb.close()
    }
}
