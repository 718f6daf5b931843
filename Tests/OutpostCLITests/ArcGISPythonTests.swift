import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

/// The ArcGIS API for Python (`arcgis` on PyPI) as a client of `outpost serve` over HTTPS with a
/// CA it is told to trust: it signs in with generateToken (`use_gen_token=True`: its default
/// sign-in is OAuth 2.0, which this server does not offer), reads the portal resources it needs,
/// queries a layer, edits features, and creates, synchronizes and unregisters a replica through
/// a FeatureLayerCollection.
@Suite("The ArcGIS API for Python as a client")
struct ArcGISPythonTests {
    static let script = """
        import sys, json
        from arcgis.gis import GIS
        from arcgis.features import FeatureLayer, FeatureLayerCollection
        base, ca = sys.argv[1], sys.argv[2]
        out = {}
        gis = GIS(base + "/arcgis", "crew", "a long pass phrase", ca_bundles=ca, use_gen_token=True)
        out["signedIn"] = gis.users.me.username if gis.users.me else None
        url = base + "/arcgis/rest/services/field_inspection/FeatureServer"
        layer = FeatureLayer(url + "/0", gis=gis)
        out["open"] = len(layer.query(where="status = 'open'", out_fields="asset_id,status").features)
        out["count"] = layer.query(where="1=1", return_count_only=True)
        added = layer.edit_features(adds=[{"attributes": {"asset_id": "PY-1", "asset_type": "valve", "status": "open"},
                                           "geometry": {"x": -122.65, "y": 45.52, "spatialReference": {"wkid": 4326}}}])
        out["added"] = [r["success"] for r in added["addResults"]]
        out["countAfter"] = layer.query(where="1=1", return_count_only=True)
        flc = FeatureLayerCollection(url, gis=gis)
        out["syncEnabled"] = flc.properties.get("syncEnabled")
        replica = flc.replicas.create(replica_name="python", layers="0", sync_model="perReplica", data_format="json", out_path=sys.argv[3], asynchronous=False)
        rid = replica["replicaID"]
        gen = flc.replicas.get(rid)["replicaServerGen"]
        edits = [{"id": 0, "features": {"adds": [{"attributes": {"asset_id": "PY-SYNC", "asset_type": "valve", "status": "open",
                                                                 "globalid": "{11111111-2222-4333-8444-555555555555}"},
                                                  "geometry": {"x": -122.66, "y": 45.51}}], "updates": [], "deleteIds": []}}]
        synced = flc.replicas.synchronize(replica_id=rid, transport_type="esriTransportTypeEmbedded", replica_server_gen=gen,
                                          edits=edits, sync_direction="bidirectional", rollback_on_failure=True)
        out["synced"] = [r["success"] for e in synced["edits"] for r in e["addResults"]]
        out["serverGenAdvanced"] = synced["replicaServerGen"] > gen
        out["unregistered"] = flc.replicas.unregister(rid)["success"]
        print(json.dumps(out))
        """

    @Test(.scaledTimeLimit(minutes: 3))
    func theArcGISAPIForPythonWorksWithTheServer() async throws {
        let dir = TemporaryDirectory()
        let secured = try await TLSServeTests.securedSample(in: dir, role: "editor")
        let run = try await ExternalTools.python(Self.script, [secured.server.url.absoluteString, secured.certificate.path, dir.url.path])
        #expect(run.succeeded, "\(run.stderr.suffix(3000))")
        let out = try JSONValue.parse(run.stdout.split(separator: "\n").last.map(String.init) ?? "")
        #expect(out == [
            "signedIn": "crew", "open": 82, "count": 300, "added": [true], "countAfter": 301, "syncEnabled": true, "synced": [true],
            "serverGenAdvanced": true, "unregistered": true,
        ], "\(out)")
        await secured.stop()
    }
}
