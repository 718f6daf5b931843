import Foundation
import FuzzDriver
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// The targets over OutpostCore, OutpostProtocol and OutpostStorage.
let coreTargets: [FuzzTarget] = [
    FuzzTarget(name: "json", run: { _ = try? JSONValue.parse($0) }, seeds: { jsonSeeds }),
    FuzzTarget(name: "wkb", run: { _ = try? WKB.decode($0) }, seeds: { geometries.map { Data(WKB.encode($0)) } + geometries.map { Data(WKB.encode($0, littleEndian: false)) } }),
    FuzzTarget(
        name: "gpkg-geometry", run: { _ = try? GeoPackageBinary.decode($0) },
        seeds: { geometries.map { Data(GeoPackageBinary.encode($0, srsID: 4326)) } }),
    FuzzTarget(name: "geojson", run: { _ = try? GeoJSON.decodeGeometry($0) }, seeds: { geometries.map { Data(GeoJSON.encode($0).utf8) } }),
    FuzzTarget(
        name: "esri-json",
        run: { data in
            guard let json = try? JSONValue.parse(data) else { return }
            _ = try? EsriJSON.decodeGeometry(json)
            _ = try? EsriJSON.decodeEnvelope(json)
        },
        seeds: { geometries.compactMap { try? EsriJSON.encode($0, spatialReference: .wgs84) }.map { Data($0.utf8) } }),
    FuzzTarget(
        name: "where",
        run: { data in
            guard let text = String(data: data, encoding: .utf8) else { return }
            _ = try? WhereClause(text) { name in whereFields[name.lowercased()] }
        },
        seeds: { whereSeeds.map { Data($0.utf8) } }),
    FuzzTarget(
        name: "upload-batch",
        run: { data in
            _ = try? UploadBatch.decode(data)
            // A framed body, fed in pieces as it arrives over the network.
            var reader = UploadBatch.FramedReader()
            data.withUnsafeBytes { raw in
                var start = 0
                while start < raw.count {
                    let end = min(raw.count, start + 1 + (start % 97))
                    reader.append(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
                    start = end
                    do {
                        if try reader.readHead() != nil { while try reader.nextFrame() != nil {} }
                    } catch {
                        return
                    }
                }
                try? reader.finish()
            }
        },
        seeds: { try batchSeeds() }),
    FuzzTarget(name: "change-page", run: { _ = try? ChangePage.decode($0) }, seeds: { try pageSeeds() }),
    FuzzTarget(name: "content-record", run: { _ = try? DeltaContent.parse($0) }, seeds: {
        [DeltaContent.record(sha256: String(repeating: "ab", count: 32), offset: 0, total: 5, bytes: Data("hello".utf8))]
    }),
    FuzzTarget(
        name: "delta-file",
        run: { data in
            // The reader takes a file and checks its trailing SHA-256 first: the input is the
            // file without it, written out with its hash (else nearly every mutation stops there).
            guard (try? (data + sha256(data)).write(to: deltaScratch)) != nil, let reader = try? DeltaReader(url: deltaScratch) else { return }
            while (try? reader.next()) != nil {}
        },
        seeds: { try deltaSeeds() }),
    FuzzTarget(name: "map-definition", run: { _ = try? MapDefinition.decode($0) }, seeds: { mapSeeds }),
]

// MARK: - Seeds

let geometries: [Geometry] = {
    let ring = [Position(x: 0, y: 0), Position(x: 10, y: 0), Position(x: 10, y: 10), Position(x: 0, y: 10), Position(x: 0, y: 0)]
    let hole = [Position(x: 2, y: 2), Position(x: 2, y: 4), Position(x: 4, y: 4), Position(x: 2, y: 2)]
    var out: [Geometry] = []
    out.append(try! .point(Point(x: 24.94, y: 60.17)))
    out.append(.point(try! Point(x: 1, y: 2, z: 3, m: 4)))
    out.append(try! .lineString(LineString(ring)))
    out.append(try! .polygon(Polygon(rings: [ring, hole])))
    out.append(try! .multiPoint(MultiPoint([Point(x: 1, y: 1), Point(x: 2, y: 2)])))
    out.append(try! .multiLineString(MultiLineString([LineString(ring), LineString(hole)])))
    out.append(try! .multiPolygon(MultiPolygon([Polygon(rings: [ring, hole]), Polygon(rings: [hole])])))
    out.append(try! .geometryCollection(GeometryCollection([out[0], out[2]])))
    return out
}()

let jsonSeeds: [Data] = [
    #"{"a":1,"b":[true,false,null,1.5e-3,"\u00e9\ud83d\ude00"],"c":{"d":"x\ny"}}"#, "[]", "-0.0", #""\\/\b\f\r\t""#,
].map { Data($0.utf8) }

let whereFields: [String: WhereClause.FieldInfo] = [
    "status": .init(name: "status", type: .string), "depth_m": .init(name: "depth_m", type: .double),
    "objectid": .init(name: "objectid", type: .oid), "inspected_at": .init(name: "inspected_at", type: .date),
    "condition": .init(name: "condition", type: .integer),
]

let whereSeeds = [
    "1=1", "status = 'open' AND depth_m > 2.5", "objectid IN (1, 2, 3) OR condition BETWEEN 1 AND 3",
    "UPPER(status) LIKE 'O%' ESCAPE '\\'", "inspected_at >= DATE '2024-01-01' AND NOT (status IS NULL)",
    "ROUND(depth_m, 1) <> -1.0e3 AND CHAR_LENGTH(status) < 10", "inspected_at < CURRENT_TIMESTAMP - 7",
]

func batchSeeds() throws -> [Data] {
    var batch = UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 4, schemaVersion: 2, rollbackOnFailure: true, layers: [], conflictPolicy: "lastWriterWins")
    batch.layers = [
        BatchLayer(id: 0, edits: [
            BatchEdit(op: .insert, globalId: "{00000000-0000-4000-8000-000000000001}", attributes: ["status": "open", "depth_m": 2.5],
                geometry: ["x": 24.9, "y": 60.1, "spatialReference": ["wkid": 4326]], editedAt: "2026-12-01T10:00:00Z"),
            BatchEdit(op: .update, globalId: "{00000000-0000-4000-8000-000000000002}", attributes: ["status": "closed"], changedColumns: ["status"],
                baseValues: ["status": "open"], baseGeneration: 3),
            BatchEdit(op: .delete, globalId: "{00000000-0000-4000-8000-000000000003}", baseGeneration: 3),
        ]),
        BatchLayer(id: 2, edits: [BatchEdit(op: .update, globalId: "{00000000-0000-4000-8000-000000000004}", attributes: ["n": 1], changedColumns: ["n"])]),
    ]
    var framedBody = Data()
    var head = batch
    head.layers = []
    let announced = batch.layers.map { UploadBatch.AnnouncedLayer(id: $0.id, atMost: $0.edits.count, geometryWrites: $0.edits.count { $0.carriesGeometry || $0.op == .delete }) }
    var writer = try UploadBatch.FramedWriter(header: head, layers: announced, capacity: 64, frameBytes: 64)
    for layer in batch.layers {
        writer.beginLayer(id: layer.id)
        for e in layer.edits {
            let names = e.attributes.map { $0.keys.sorted() }
            writer.edit(
                e.op, globalId: e.globalId, attributeNames: names, attribute: { e.attributes![names![$0]]! }, geometry: e.geometry,
                geometryBlob: nil, changedColumns: e.changedColumns, baseValues: e.baseValues, editedAt: e.editedAt, baseGeneration: e.baseGeneration)
        }
    }
    framedBody = writer.finish().body
    // And with the geometries as GeoPackage blobs (head flag 32).
    return [try batch.encoded(as: .json), try batch.encoded(as: .binary), framedBody, try batch.withGeometryBlobs(srsID: 4326).encoded(as: .binary)]
}

func pageSeeds() throws -> [Data] {
    let page = ChangePage(
        layerId: 0, since: 3, upto: 9,
        changes: [
            FeedChange(kind: .upsert, globalId: "{00000000-0000-4000-8000-000000000001}", generation: 4, attributes: ["status": "open", "n": 2],
                geometry: ["x": 1, "y": 2], inserted: true),
            FeedChange(kind: .leave, globalId: "{00000000-0000-4000-8000-000000000002}", generation: 5),
        ], next: "{00000000-0000-4000-8000-000000000002}")
    // The stored form: values of each storage class, a geometry blob, a second column set.
    let columns = FeedColumns(names: ["status", "n", "depth", "photo"], types: ["String", "Integer", "Double", "Blob"], globalIDFields: ["globalid"], spatial: true)
    let other = FeedColumns(names: ["label"], types: ["String"], globalIDFields: [], spatial: false)
    var stored = page
    stored.changes[0].attributes = nil
    stored.changes[0].geometry = nil
    stored.changes[0].stored = FeedRow(
        columns: columns, values: [.text("open"), .integer(2), .real(2.5), .blob([1, 2])], geometry: GeoPackageBinary.encode(.point(try Point(x: 1, y: 2)), srsID: 4326))
    var second = FeedChange(kind: .upsert, globalId: "{00000000-0000-4000-8000-000000000003}", generation: 6)
    second.stored = FeedRow(columns: other, values: [.null], geometry: nil)
    stored.changes.append(second)
    return [Data(page.binaryEncoded()), Data(page.json.jsonBytes), Data(stored.binaryEncoded())]
}

let mapSeeds: [Data] = [
    Data(#"""
    {"title":"Inspections","operationalLayers":[{"id":"points","title":"Points","url":"https://example.com/arcgis/rest/services/field_inspection/FeatureServer/0"}],
     "baseMap":{"title":"Streets","baseMapLayers":[{"id":"b","url":"https://example.com/arcgis/rest/services/streets/MapServer"}]},
     "preplannedAreas":[{"id":"centre","title":"Centre","extent":{"xmin":24.9,"ymin":60.1,"xmax":25.0,"ymax":60.2,"spatialReference":{"wkid":4326}}}]}
    """#.utf8)
]

/// Where the delta-file target writes each input (one per process).
let deltaScratch = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-\(getpid()).delta")

func deltaSeeds() throws -> [Data] {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-seed-\(getpid()).delta")
    defer { try? FileManager.default.removeItem(at: file) }
    let writer = try DeltaWriter(url: file, header: DeltaHeader(kind: .edits, service: "field_inspection", replicaId: "{R}", cursors: ["0": 3]))
    try writer.write(.batch, try batchSeeds()[1])
    try writer.write(.content, DeltaContent.record(sha256: String(repeating: "ab", count: 32), offset: 0, total: 5, bytes: Data("hello".utf8)))
    try writer.finish()
    return [try Data(contentsOf: file).dropLast(32)]
}

/// The SHA-256 of `data`, as bytes.
func sha256(_ data: Data) -> Data {
    let hex = Array(UploadBatch.hash(data).utf8)
    func value(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : c - 87 }
    return Data(stride(from: 0, to: hex.count, by: 2).map { value(hex[$0]) << 4 | value(hex[$0 + 1]) })
}
