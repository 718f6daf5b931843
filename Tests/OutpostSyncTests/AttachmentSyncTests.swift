import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostLoadTesting
import OutpostServiceTestSupport
import OutpostHTTPTestSupport
import Testing

@testable import OutpostSync

/// Attachments sync with their features (docs/sync.md, "Attachments"): content by hash, in resumable
/// chunks, verified on arrival, sent once.
@Suite("Attachment sync")
struct AttachmentSyncTests {
    static func randomBytes(_ count: Int, seed: UInt64) -> Data {
        var rng = SeededGenerator(state: seed)
        var out = [UInt8](repeating: 0, count: count)
        for i in stride(from: 0, to: count, by: 8) {
            let v = rng.next()
            for k in 0..<min(8, count - i) { out[i + k] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(k))) }
        }
        return Data(out)
    }

    /// The server's attachments of a feature: global id → bytes.
    static func serverAttachments(_ h: SyncHarness, featureGlobalID: String) async throws -> [String: Data] {
        var q = FeatureQuery()
        q.globalIDs = [featureGlobalID]
        guard let id = try await h.service.backend.features(layerID: 0, query: q).first?.objectID else { return [:] }
        var out: [String: Data] = [:]
        for a in try await h.service.backend.attachments(layerID: 0, objectID: id) {
            out[a.globalID] = try await h.service.backend.attachmentBytes(layerID: 0, attachmentID: a.id, offset: 0, length: Int(a.size))
        }
        return out
    }

    static func localAttachments(_ gdb: Geodatabase, featureGlobalID: String) async throws -> [String: Data] {
        let table = try gdb.table(named: "inspection_points")
        guard let f = try await table.feature(globalID: featureGlobalID) else { return [:] }
        var out: [String: Data] = [:]
        for a in try await table.attachments(forFeature: f.objectID!) { out[a.globalID] = try await table.attachmentData(id: a.id) }
        return out
    }

    /// Counts content uploads and downloads passing a proxy, and drops chosen ones.
    final class Traffic: Sendable {
        let uploads = Locked<[String]>([])
        let downloads = Locked<[String]>([])
        let dropUpload = Locked<Set<Int>>([])
        let dropDownload = Locked<Set<Int>>([])
        let uploadCount = Locked(0)
        let downloadCount = Locked(0)

        func rule(_ method: String, _ uri: String) -> LoopbackProxy.Action {
            if method == "PUT", uri.contains("/blobs/") {
                let n = uploadCount.withLock { $0 += 1; return $0 }
                return dropUpload.withLock { $0.contains(n) } ? .dropRequest : .forward
            }
            if method == "GET", uri.contains("/attachments/") {
                let n = downloadCount.withLock { $0 += 1; return $0 }
                return dropDownload.withLock { $0.contains(n) } ? .dropResponse : .forward
            }
            return .forward
        }

        func observe(_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) {
            if method == "PUT", uri.contains("/blobs/"), status == 200 { uploads.withLock { $0.append(uri) } }
            if method == "GET", uri.contains("/attachments/") { downloads.withLock { $0.append(uri) } }
        }
    }

    /// A service, a proxy in front of it that counts and drops content transfers, and two
    /// replicas of the points syncing attachments both ways through it.
    static func twoReplicasBehindAProxy(_ kind: BackendKind) async throws -> (SyncHarness, Traffic, LoopbackProxy, URL, Geodatabase, Geodatabase) {
        let h = try await SyncHarness.start(kind)
        let traffic = Traffic()
        let proxy = try await LoopbackProxy.start(upstream: h.live.baseURL, observer: traffic.observe) { traffic.rule($0, $1) }
        let url = proxy.url(for: h.url)
        let crew = try await h.replica("crew", layers: [0], url: url, attachments: .bidirectional)
        let office = try await h.replica("office", layers: [0], url: url, attachments: .bidirectional)
        return (h, traffic, proxy, url, crew, office)
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func attachmentsTravelBothWaysOnceAndByteIdentical(kind: BackendKind) async throws {
        let (h, traffic, proxy, url, crew, office) = try await Self.twoReplicasBehindAProxy(kind)
        let points = try crew.table(named: "inspection_points")
        let one = try #require(try await points.feature(objectID: 1)), two = try #require(try await points.feature(objectID: 2))
        let photo = Self.randomBytes(300_000, seed: 1)
        let added = try await points.addAttachment(toFeature: 1, name: "valve.jpg", contentType: "image/jpeg", data: photo)
        // The same photo on a second feature: its content goes up once.
        _ = try await points.addAttachment(toFeature: 2, name: "valve-again.jpg", contentType: "image/jpeg", data: photo)
        let chunked = SyncGeodatabaseParameters(attempts: 1)
        var parameters = chunked
        parameters.attachmentChunkBytes = 64 << 10

        let up = try await h.sync(crew, parameters, url: url)
        #expect(up.first?.attachmentsUploaded == 2)
        #expect(try await Self.serverAttachments(h, featureGlobalID: one.globalID!) == [added.globalID: photo], "same id, same bytes on the server")
        #expect(try await Self.serverAttachments(h, featureGlobalID: two.globalID!).values.first == photo)
        #expect(traffic.uploads.withLock { $0.count } == 5, "300,000 bytes in 64 KB chunks, once for both attachments")

        let down = try await h.sync(office, parameters, url: url)
        #expect(down.first?.attachmentsDownloaded == 2)
        #expect(try await Self.localAttachments(office, featureGlobalID: one.globalID!) == [added.globalID: photo])
        #expect(try await Self.localAttachments(office, featureGlobalID: two.globalID!).values.first == photo)

        // The office deletes one; the crew deletes the other: both disappear everywhere.
        let officeTable = try office.table(named: "inspection_points")
        let officeOne = try #require(try await officeTable.feature(globalID: one.globalID!))
        let officeAttachment = try #require(try await officeTable.attachments(forFeature: officeOne.objectID!).first)
        try await officeTable.deleteAttachment(id: officeAttachment.id)
        let crewTwo = try #require(try await points.attachments(forFeature: 2).first)
        try await points.deleteAttachment(id: crewTwo.id)
        try await h.sync(office, parameters, url: url)
        try await h.sync(crew, parameters, url: url)
        try await h.sync(office, parameters, url: url)
        for gdb in [crew, office] {
            #expect(try await Self.localAttachments(gdb, featureGlobalID: one.globalID!).isEmpty)
            #expect(try await Self.localAttachments(gdb, featureGlobalID: two.globalID!).isEmpty)
        }
        #expect(try await Self.serverAttachments(h, featureGlobalID: one.globalID!).isEmpty)
        #expect(try await Self.serverAttachments(h, featureGlobalID: two.globalID!).isEmpty)
        try await proxy.stop()
        try await h.stop()
    }

    /// Attachments added and deleted through the service's REST operations reach replicas too.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func serviceSideAttachmentEditsReachReplicas(kind: BackendKind) async throws {
        let (h, _, proxy, url, crew, _) = try await Self.twoReplicasBehindAProxy(kind)
        let feature = try #require(try await crew.table(named: "inspection_points").feature(objectID: 4))
        var q = FeatureQuery()
        q.globalIDs = [feature.globalID!]
        let serverID = try #require(try await h.service.backend.features(layerID: 0, query: q).first?.objectID)
        let bytes = Self.randomBytes(50_000, seed: 5)
        let added = try await h.service.backend.addAttachment(layerID: 0, objectID: serverID, name: "office.jpg", contentType: "image/jpeg", data: bytes)
        try await h.sync(crew, url: url)
        #expect(try await Self.localAttachments(crew, featureGlobalID: feature.globalID!) == [added.globalID: bytes])
        let deleted = try await h.service.backend.deleteAttachments(layerID: 0, objectID: serverID, attachmentIDs: [added.id])
        #expect(deleted.first?.success == true)
        try await h.sync(crew, url: url)
        #expect(try await Self.localAttachments(crew, featureGlobalID: feature.globalID!).isEmpty)
        try await proxy.stop()
        try await h.stop()
    }

    /// Photos deleted after their batch was sealed (a sync interrupted in between), one alone (its
    /// content also attached to a feature that keeps it) and one with its feature: the resent
    /// batch cannot carry their content and the server refuses those inserts. The next sync still succeeds and settles on the deletes: with rollback the
    /// replica withdraws the refused batch and seals it again in the same sync (each insert and
    /// its delete cancel); without, the refused inserts are not kept as rejections and the next
    /// batch carries the deletes. The batch's other edit arrives either way; nothing is stuck,
    /// pending or left behind. (Found by `SyncPropertyTests`: photo, sync killed after the seal,
    /// the feature deleted, then a clean sync failed.)
    /// The reseal's rule alone: a batch refused for nothing but inserts of photos whose content
    /// was gone is sealed again, once per photo; anything else refused, or the same photo
    /// refused a second time, fails the sync.
    @Test func aBatchIsSealedAgainOnlyWhenRefusedForVanishedPhotosAloneAndOncePerPhoto() {
        let photo = "{0A0A0A0A-0000-4000-8000-00000000000A}", other = "{0B0B0B0B-0000-4000-8000-00000000000B}"
        func refused(_ attachments: [(String, BatchEdit.Operation)], feature: Bool = false) -> BatchResult {
            var result = BatchResult(
                seq: 3, batchId: "b", generation: nil,
                layers: [BatchLayerResult(id: 0, results: [BatchEditResult(globalId: other, op: .update, success: !feature)])])
            result.attachments = attachments.map { BatchEditResult(globalId: $0.0, op: $0.1, success: false) }
                + [BatchEditResult(globalId: "{00000000-0000-4000-8000-000000000009}", op: .insert, success: true)]
            return result
        }
        let vanished: Set = [photo]
        #expect(SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert)]), vanished: vanished, sealedAgainFor: []))
        #expect(SyncGeodatabaseJob.sealsAgain(refused([(String(photo.lowercased().dropFirst().dropLast()), .insert)]), vanished: vanished, sealedAgainFor: []), "global ids compare normalised")
        // Once per photo.
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert)]), vanished: vanished, sealedAgainFor: vanished))
        #expect(SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert)]), vanished: vanished, sealedAgainFor: [other]))
        // Anything else refused with it, or instead of it.
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert)], feature: true), vanished: vanished, sealedAgainFor: []))
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert), (other, .insert)]), vanished: vanished, sealedAgainFor: []))
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([(photo, .delete)]), vanished: vanished, sealedAgainFor: []))
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([], feature: true), vanished: vanished, sealedAgainFor: []))
        #expect(!SyncGeodatabaseJob.sealsAgain(refused([(photo, .insert)]), vanished: [], sealedAgainFor: []), "content that was not gone")
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [true, false])
    func anAttachmentDeletedAfterSealingDoesNotFailTheNextSync(kind: BackendKind, rollback: Bool) async throws {
        let (h, _, proxy, url, crew, office) = try await Self.twoReplicasBehindAProxy(kind)
        let points = try crew.table(named: "inspection_points")
        let six = try #require(try await points.feature(objectID: 6)), seven = try #require(try await points.feature(objectID: 7))
        let eight = try #require(try await points.feature(objectID: 8))
        // The same content on a feature that keeps it: its own record sends the bytes. The batch
        // lists attachment edits by global id, so the deleted one comes first (and its content
        // is looked for there first).
        let blurred = Self.randomBytes(30_000, seed: 9)
        let nine = try #require(try await points.feature(objectID: 9))
        let (alone, kept) = try await crew.write { conn in
            let add = { (feature: Int64, name: String, gid: String) in
                try points.addAttachment(toFeature: feature, name: name, contentType: "image/jpeg", size: Int64(blurred.count), globalID: gid, in: conn) { try $0(blurred) }
            }
            return (try add(6, "blurred.jpg", "{00000000-0000-4000-8000-000000000001}"), try add(9, "same.jpg", "{FFFFFFFF-0000-4000-8000-000000000002}"))
        }
        _ = try await points.addAttachment(toFeature: 7, name: "wrong.jpg", contentType: "image/jpeg", data: Self.randomBytes(20_000, seed: 10))
        var note = Feature(objectID: 8)
        note.attributes["notes"] = .string("checked")
        try await points.update([note])
        // The batch is sealed with the choice (a resent batch keeps it).
        var parameters = SyncGeodatabaseParameters(attempts: 1)
        parameters.shouldRollbackOnFailure = rollback
        let faults = FaultInjector()
        faults.arm("client.afterSeal")
        await #expect(throws: (any Error).self) { try await h.sync(crew, parameters, faults: faults, url: url) }
        #expect(try await crew.read { try $0.sealedBatch() } != nil, "the interrupted sync left its batch sealed")
        try await points.deleteAttachment(id: alone.id)
        try await points.delete(objectIDs: [7])

        try await h.sync(crew, parameters, url: url)
        #expect(try await Self.serverAttachments(h, featureGlobalID: six.globalID!)[alone.globalID] == nil)
        #expect(try await Self.serverAttachments(h, featureGlobalID: nine.globalID!) == [kept.globalID: blurred], "the same content, kept, went up")
        #expect(try await h.serverRows(0)[seven.globalID!] == nil, "the feature's delete went up")
        #expect(try await h.serverRows(0)[eight.globalID!]?.attributes["notes"] == .string("checked"), "the batch's other edit went up")
        #expect(try await crew.read { try $0.capturedChanges().count } == 0, "nothing pending")
        #expect(try await crew.read { try $0.sealedBatch() } == nil)
        #expect(try await crew.read { try $0.rejectedEdits() }.isEmpty, "no rejection kept for photos the crew deleted")

        try await h.sync(office, parameters, url: url)
        try await h.expectConverged(office, table: "inspection_points", layerID: 0)
        #expect(try await Self.localAttachments(office, featureGlobalID: six.globalID!).isEmpty)
        try await proxy.stop()
        try await h.stop()
    }

    /// Links that drop at random chunks, up and down: each sync fails, the next one continues
    /// where the other side's copy ends, and the bytes end identical (hash-checked on arrival).
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing, [UInt64(11), 23, 37])
    func interruptedTransfersResume(kind: BackendKind, seed: UInt64) async throws {
        var rng = SeededGenerator(state: seed)
        let (h, traffic, proxy, url, crew, office) = try await Self.twoReplicasBehindAProxy(kind)
        let size = Int.random(in: 700_000...1_300_000, using: &rng)
        let photo = Self.randomBytes(size, seed: seed)
        let feature = try #require(try await crew.table(named: "inspection_points").feature(objectID: 3))
        _ = try await crew.table(named: "inspection_points").addAttachment(toFeature: 3, name: "pipe.jpg", contentType: "image/jpeg", data: photo)
        var parameters = SyncGeodatabaseParameters(attempts: 1)
        parameters.attachmentChunkBytes = 100_000
        let chunks = (size + 99_999) / 100_000
        // Two drops at random chunks of the upload, then of the download.
        traffic.dropUpload.withLock { $0 = Set((0..<2).map { _ in Int.random(in: 1...chunks, using: &rng) }) }
        /// Syncs until one succeeds; the failures on the way.
        func syncThroughDrops(_ gdb: Geodatabase) async throws -> Int {
            for failures in 0..<5 {
                do {
                    try await h.sync(gdb, parameters, url: url)
                    return failures
                } catch { continue }
            }
            return 5
        }
        #expect(try await syncThroughDrops(crew) >= 1)
        #expect(try await Self.serverAttachments(h, featureGlobalID: feature.globalID!).values.first == photo)
        #expect(traffic.uploads.withLock { $0.count } == chunks, "no chunk was sent twice once the server had it")

        traffic.dropDownload.withLock { $0 = Set((0..<2).map { _ in Int.random(in: 1...chunks, using: &rng) }) }
        #expect(try await syncThroughDrops(office) >= 1)
        #expect(try await Self.localAttachments(office, featureGlobalID: feature.globalID!).values.first == photo)
        #expect(traffic.downloads.withLock { $0.count } <= chunks + 2, "resumed, not restarted (\(traffic.downloads.withLock { $0.count }) requests)")
        try await proxy.stop()
        try await h.stop()
    }
}
