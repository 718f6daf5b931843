import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Queries")
struct QueryTests {
    @Test func whichQueriesSelectEveryFeature() {
        #expect(FeatureQuery().selectsEveryFeature)
        #expect(FeatureQuery(where: " 1=1 ", outFields: ["status"], returnGeometry: false, limit: 10).selectsEveryFeature)
        #expect(!FeatureQuery(where: "status = 'open'").selectsEveryFeature)
        #expect(!FeatureQuery(objectIDs: [1]).selectsEveryFeature)
        #expect(!FeatureQuery(envelope: Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1)).selectsEveryFeature)
        var gids = FeatureQuery()
        gids.globalIDs = []
        #expect(!gids.selectsEveryFeature)
        var area = FeatureQuery()
        area.intersecting = .point(try! Point(x: 0, y: 0))
        #expect(!area.selectsEveryFeature)
    }

    @Test func whereClausesFilterLikeTheSameFilterInSwift() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let all = try await table.features()
        let cases: [(String, (Feature) -> Bool)] = [
            ("status = 'open'", { $0["status"] == .string("open") }),
            ("condition >= 4 AND asset_type IN ('valve', 'hydrant')", {
                ($0["condition"]?.integerValue ?? 0) >= 4 && ["valve", "hydrant"].contains($0["asset_type"]?.stringValue ?? "")
            }),
            ("notes IS NULL", { $0["notes"] == .null }),
            ("asset_id LIKE 'HY-1%'", { $0["asset_id"]?.stringValue?.hasPrefix("HY-1") == true }),
            ("depth_m BETWEEN 1 AND 2", { ($0["depth_m"]?.doubleValue).map { $0 >= 1 && $0 <= 2 } ?? false }),
            ("inspected_at >= DATE '2024-01-01'", {
                if case .date(let d)? = $0["inspected_at"] { return d >= Date(timeIntervalSince1970: 1_704_067_200) }
                return false
            }),
            ("NOT (status = 'closed') AND UPPER(inspector) LIKE '%TANAKA'", {
                $0["status"] != .string("closed") && $0["inspector"]?.stringValue?.uppercased().hasSuffix("TANAKA") == true
            }),
        ]
        for (clause, predicate) in cases {
            let got = try await table.objectIDs(matching: FeatureQuery(where: clause))
            let want = all.filter(predicate).compactMap(\.objectID)
            #expect(got == want, "\(clause)")
            #expect(!want.isEmpty, "\(clause) matches nothing in the sample: a weak test")
            #expect(try await table.count(matching: FeatureQuery(where: clause)) == want.count)
        }
        try gdb.close()
    }

    @Test func envelopeQueriesMatchABruteForceScan() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        for name in ["inspection_points", "pipelines", "service_areas"] {
            let table = try gdb.table(named: name)
            let all = try await table.features()
            for box in [
                Envelope(xmin: -122.68, ymin: 45.50, xmax: -122.64, ymax: 45.53),
                Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.70, ymax: 45.49),
                Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1),
            ] {
                let got = try await table.objectIDs(matching: FeatureQuery(envelope: box))
                let want = all.filter { $0.geometry?.envelope?.intersects(box) == true }.compactMap(\.objectID)
                #expect(got == want, "\(name) \(box)")
            }
        }
        try gdb.close()
    }

    @Test func aSampleKeepsTheRowsRankedUnderItsShareAsSwiftRanksThem() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let all = try await table.features()
        let box = Envelope(xmin: -122.68, ymin: 45.50, xmax: -122.64, ymax: 45.53)
        var previous: [Int64] = []
        for share in [0.1, 0.25, 0.5, 1.0] {
            for salt: Int64 in [0, 3] {
                // Through the R-tree (an envelope) and without it, with a where clause beside.
                var inBox = FeatureQuery(envelope: box)
                inBox.sample = FeatureQuery.Sample(share: share, salt: salt)
                let got = try await table.objectIDs(matching: inBox)
                let want = all.filter { f in
                    f.geometry?.envelope?.intersects(box) == true && FeatureQuery.Sample.rank(f.objectID!, salt: salt) < share
                }.compactMap(\.objectID)
                #expect(got == want, "share \(share) salt \(salt)")
                var open = FeatureQuery(where: "status = 'open'")
                open.sample = inBox.sample
                let wantOpen = all.filter { $0["status"] == .string("open") && FeatureQuery.Sample.rank($0.objectID!, salt: salt) < share }
                #expect(try await table.objectIDs(matching: open) == wantOpen.compactMap(\.objectID))
                #expect(try await table.count(matching: open) == wantOpen.count)
                if salt == 0 {
                    // A larger share holds the smaller one's rows.
                    #expect(Set(previous).isSubset(of: got) && (share < 1 || got.count == want.count))
                    previous = got
                }
            }
        }
        // The share is close to what it says on a few hundred rows.
        var tenth = FeatureQuery()
        tenth.sample = FeatureQuery.Sample(share: 0.1)
        let kept = try await table.count(matching: tenth)
        #expect(abs(Double(kept) / Double(all.count) - 0.1) < 0.05, "\(kept) of \(all.count)")
        #expect(previous.count > 20, "a weak test: \(previous.count) rows in the box")
        try gdb.close()
    }

    @Test func containsFeaturesSaysWhetherTheIDsQueryFindsAny() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        var queries: [FeatureQuery] = []
        for box in [
            Envelope(xmin: -122.68, ymin: 45.50, xmax: -122.64, ymax: 45.53), Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1),
        ] {
            for clause in [nil, "status = 'open'", "status = 'no such status'"] {
                for share in [nil, 0.001, 0.5] {
                    var q = FeatureQuery(envelope: box)
                    q.whereClause = clause
                    q.sample = share.map { FeatureQuery.Sample(share: $0, salt: 1) }
                    queries.append(q)
                }
            }
        }
        var exact = FeatureQuery()
        exact.intersecting = .polygon(Envelope(xmin: -122.68, ymin: 45.50, xmax: -122.64, ymax: 45.53).polygon)
        queries.append(exact)
        var found = 0
        for q in queries {
            let ids = try await table.objectIDs(matching: q)
            let any = try await gdb.read { try table.containsFeatures(matching: q, in: $0) }
            #expect(any == !ids.isEmpty, "\(q)")
            found += any ? 1 : 0
        }
        #expect(found > 3 && found < queries.count, "a weak test: \(found) of \(queries.count) found some")
        try gdb.close()
    }

    @Test func theSameQueryRunsInsideItselfAndAgainAfterAnError() async throws {
        // Statements are kept per connection and reused: one still stepping is not handed out.
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let query = FeatureQuery(where: "status = 'open'", outFields: ["asset_id"], returnGeometry: false)
        let open = try await table.objectIDs(matching: query)
        let pairs = try await gdb.read { conn in
            var pairs: [(Int64, Int64)] = []
            try table.forEach(matching: query, in: conn) { outer in
                try table.forEach(matching: query, in: conn) { inner in pairs.append((outer.objectID!, inner.objectID!)) }
            }
            // A body that throws leaves the statement ready for the next run.
            struct Stop: Error {}
            #expect(throws: Stop.self) { try table.forEach(matching: query, in: conn) { _ in throw Stop() } }
            var again: [Int64] = []
            try table.forEach(matching: query, in: conn) { again.append($0.objectID!) }
            #expect(again == open)
            #expect(try table.objectIDs(matching: query, in: conn) == open)
            return pairs
        }
        #expect(pairs.count == open.count * open.count && !open.isEmpty)
        #expect(pairs.map(\.0) == open.flatMap { id in Array(repeating: id, count: open.count) })
        try gdb.close()
    }

    @Test func fieldsOrderAndPaging() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        var q = FeatureQuery(where: "status = 'closed'", outFields: ["asset_id"], returnGeometry: false)
        q.orderBy = [.init("asset_id", ascending: false)]
        let sorted = try await table.features(matching: q)
        #expect(sorted.map { $0["asset_id"]!.stringValue! } == sorted.map { $0["asset_id"]!.stringValue! }.sorted(by: >))
        #expect(sorted.allSatisfy { $0.geometry == nil && $0.attributes.keys.sorted() == ["asset_id"] && $0.globalID != nil && $0.objectID != nil })
        var pages: [Int64] = []
        var offset = 0
        while true {
            q.offset = offset
            q.limit = 37
            let page = try await table.objectIDs(matching: q)
            pages += page
            if page.count < 37 { break }
            offset += 37
        }
        q.offset = 0
        q.limit = nil
        #expect(pages == (try await table.objectIDs(matching: q)))
        #expect(try await table.features(matching: FeatureQuery(objectIDs: [3, 1, 99_999])).map(\.objectID) == [1, 3])
        await #expect(throws: StorageError.self) { try await table.features(matching: FeatureQuery(outFields: ["nope"])) }
        var badOrder = FeatureQuery()
        badOrder.orderBy = [.init("asset_id; DROP TABLE x")]
        await #expect(throws: StorageError.self) { try await table.features(matching: badOrder) }
        try gdb.close()
    }

    @Test func hostileQueriesChangeNothing() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let before = try await SampleGeodatabases.contents(of: gdb)
        // (An empty where clause means no filter, as in ArcGIS: skip the two blank entries.)
        for text in WhereClauseTests.hostile.dropFirst(2).prefix(30) {
            let error = await #expect(throws: StorageError.self) { try await table.features(matching: FeatureQuery(where: text)) }
            #expect(error?.code == .invalidWhereClause, "\(text)")
        }
        // Injection-shaped text inside a literal is only data.
        #expect(try await table.count(matching: FeatureQuery(where: "notes = 'x''; DELETE FROM inspection_points; --'")) == 0)
        #expect(try await SampleGeodatabases.contents(of: gdb) == before)
        try gdb.close()
    }

    @Test func streamingVisitsEveryRowOnce() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "pipelines")
        let ids = try await gdb.read { conn in
            var ids: [Int64] = []
            try table.forEach(matching: .all, in: conn) { ids.append($0.objectID!) }
            return ids
        }
        #expect(ids == Array(1...80))
        #expect(try await table.extent().map { $0.xmin < $0.xmax } == true)
        try gdb.close()
    }
}
