import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService
import Synchronization

#if os(Linux)
import Glibc
#endif

/// Reading ahead: while the writer writes a run of a batch's edits, a helper thread reads, plans
/// and checks the next run's fresh edits on a reader of the committed data, and hands them over
/// chunk by chunk (docs/sync.md, "Speed and memory").
extension BatchApplier {
    /// Whether a layer's next run of edits is prepared ahead (read on a reader of the committed
    /// data, planned and checked) while the current run is written (on where there is a second
    /// core; `outpost-bench`'s server turns it off with `BENCH_NO_READ_AHEAD`, for comparisons).
    public static let readsAhead = Atomic<Bool>(ProcessInfo.processInfo.activeProcessorCount > 1)

    /// How the writer and the helper that prepares a run meet, for tests that need one way
    /// (a service's `SQLiteServiceBackend.readAheadPacing`): as a server does (`free`); with
    /// every fresh edit prepared ahead; with the helper's first chunk in its hands when the
    /// writer comes to the run and done when the writer comes to its first edit
    /// (`firstChunkHeld`), or still not done then (`firstChunkLate`).
    public enum HelperPacing: Int, Sendable {
        /// As a server does: the writer takes what the helper has done when it comes to it.
        case free
        /// The writer waits until the helper has prepared every fresh edit of the run.
        case writerWaitsForAll
        /// The helper holds its first chunk until the writer comes to the run, and the writer
        /// waits for that chunk at its first edit.
        case firstChunkHeld
        /// The helper holds its first chunk until the writer has come to its first edit, so the
        /// writer prepares those edits itself and the helper's work on them is dropped.
        case firstChunkLate
    }

    /// The nice value of the thread that prepares runs ahead (on Linux a thread's own: 10
    /// leaves it about a tenth of a core the writer or a request also wants, and still lets it
    /// finish a chunk it holds, and give its reader back, soon).
    static let helperNice: Int32 = 10

    /// Starts preparing `edits` (the run after the one about to be written) on a thread of its
    /// own, with a reader of the committed data: the edits that are the first of the batch to
    /// touch their feature (once in the run, in no earlier run) have their features read there,
    /// their plans made and their rows checked, a chunk at a time (``ReadAheadTask``). The batch
    /// holds the write lock, so what it has not written is as the reader sees it, and such an
    /// edit's plan rests on its own feature's values alone. `state` is what the runs before it
    /// read (a copy: the helper only reads it).
    func readAhead(_ edits: [BatchEdit], layerID: Int, _ table: FeatureTable, state: PrefetchState) -> ReadAheadTask? {
        guard table.definition.globalIDField != nil else { return nil }
        let context = self.context, geodatabase = conn.geodatabase
        let task = ReadAheadTask(edits: edits, pacing: pacing)
        Self.helper.run {
            task.prepare(seen: state.seen, othersChanged: state.othersChanged, layerID: layerID, table, context: context, geodatabase: geodatabase)
        }
        return task
    }

    /// The one thread that prepares runs ahead, for every batch of the process, in turn.
    static let helper = HelperThread()

    /// A thread that runs work handed to it in order, at a low priority. Work ahead takes
    /// little of a core something else wants (the writer, requests, other batches): the writer
    /// never waits for it and does whatever it has not done. One long-lived thread, not one a
    /// run: what it allocates, and the writer frees, goes back to one malloc arena, where a new
    /// thread a run left freed memory in several (a million-edit sync's server peaked 30–50 MB
    /// higher).
    final class HelperThread: @unchecked Sendable {
        // @unchecked: `queue` is used with `lock` held.
        private let lock = NSCondition()
        private var queue: [@Sendable () -> Void] = []

        init() {
            let thread = Thread { [self] in
                #if os(Linux)
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, BatchApplier.helperNice)
                #endif
                while true {
                    lock.lock()
                    while queue.isEmpty { lock.wait() }
                    let work = queue.removeFirst()
                    lock.unlock()
                    work()
                }
            }
            thread.name = "outpost.batch-ahead"
            thread.qualityOfService = .utility
            thread.start()
        }

        /// Runs `work` on the thread after what was handed to it before.
        func run(_ work: @escaping @Sendable () -> Void) {
            lock.lock()
            queue.append(work)
            lock.signal()
            lock.unlock()
        }
    }

    /// An edit prepared ahead of the writer: its feature's global id and object id before it, and
    /// its plan in one of two forms. Most plans are one step: their form holds only what the
    /// writer binds and answers, so the writer neither touches nor frees a plan, a checked row
    /// and their arrays made on the helper's thread for each edit (measured: the writer's time
    /// outside SQLite's steps, over its time in them, 1.17 → 0.84; Benchmarks/RESULTS.md).
    struct PreparedEdit {
        var globalID: String
        /// The feature's object id as the planner held it before the edit (its undo point).
        var objectIDBefore: Int64?
        var form: Form

        enum Form {
            /// One step, no conflict, at most one log entry: its row in the chunk's buffers.
            case simple(SimpleEdit)
            /// Any other plan (or why planning failed), with each step's row checked (or why
            /// it failed; nil for a step without one).
            case general(Result<EditPlan, any Error>, [Result<FeatureValidator.Row, any Error>?])
        }

        /// The global id, plan and rows of an edit in the general form (nil for a simple one).
        consuming func generalParts() -> (globalID: String, plan: Result<EditPlan, any Error>, rows: [Result<FeatureValidator.Row, any Error>?])? {
            guard case .general(let plan, let rows) = form else { return nil }
            return (globalID, plan, rows)
        }
    }

    /// An edit prepared ahead whose plan is one step (the common case): what the writer needs
    /// of it and nothing else, its row's values and geometry blob in buffers the chunk's edits
    /// share (``PreparedRows``) instead of a plan, a row and their arrays of its own.
    struct SimpleEdit {
        enum Kind {
            case insert(PreparedRows.Ref)
            case update(objectID: Int64, PreparedRows.Ref)
            case delete(objectID: Int64)
            /// An update whose values are all as they are (logged, nothing written).
            case nothing
        }
        var kind: Kind
        var rows: PreparedRows
        var log: ChangeLogEntry?
        var result: BatchEditResult
    }

    /// The checked rows of a chunk's simple edits: each distinct column set once, the values one
    /// after the other in one array, the geometries as GeoPackage blobs in one byte buffer. Made
    /// by the helper before it hands the chunk over (under the task's lock), then only read.
    final class PreparedRows: @unchecked Sendable {
        /// Where one row lies.
        struct Ref {
            var layout: Int32
            var valueStart: Int32
            /// The geometry blob's bytes (`blobCount` -1: none, the column is set NULL).
            var blobStart: Int32
            var blobCount: Int32
            var envelope: Envelope?
        }
        /// Each column set as a checked row without values (``FeatureTable/EditWriter`` reads
        /// its columns, types and field indices).
        private(set) var layouts: [FeatureValidator.Row] = []
        private var layoutIndex: [[Int]: Int32] = [:]
        private(set) var values: [FieldValue] = []
        private(set) var blobs: [UInt8] = []
        let srsID: Int32

        init(srsID: Int32) {
            self.srsID = srsID
        }

        /// Keeps `row`'s values and geometry; where they lie.
        func append(_ row: FeatureValidator.Row) -> Ref {
            let layout: Int32
            if let known = layoutIndex[row.fieldIndices] {
                layout = known
            } else {
                var bare = row
                bare.values = []
                bare.geometry = nil
                bare.globalID = nil
                layout = Int32(layouts.count)
                layouts.append(bare)
                layoutIndex[row.fieldIndices] = layout
            }
            let start = Int32(values.count)
            values.append(contentsOf: row.values)
            var blobStart: Int32 = 0, blobCount: Int32 = -1
            if row.writesGeometry, let geometry = row.geometry {
                let blob = GeoPackageBinary.encode(geometry, srsID: srsID)
                blobStart = Int32(blobs.count)
                blobCount = Int32(blob.count)
                blobs.append(contentsOf: blob)
            }
            return Ref(layout: layout, valueStart: start, blobStart: blobStart, blobCount: blobCount, envelope: row.geometry?.envelope)
        }

        /// The geometry blob of `ref` (nil: NULL).
        func blob(_ ref: Ref) -> ArraySlice<UInt8>? {
            ref.blobCount < 0 ? nil : blobs[Int(ref.blobStart)..<Int(ref.blobStart + ref.blobCount)]
        }
    }

    /// A run's edits being prepared on another thread while the writer writes the run before.
    /// The writer never waits for it: at ``merge(into:_:)`` it stops the helper and takes the
    /// chunks done, at ``takeInFlight(into:_:)`` the chunk the helper held if it is done by then,
    /// and reads and plans the rest itself.
    final class ReadAheadTask: @unchecked Sendable {
        // @unchecked: every field below `lock` is read and written with it held.
        /// Edits a chunk holds: a chunk is the writer's whole or not at all, so a small one
        /// leaves little to do twice when the helper is late.
        static let chunkSize = 200

        struct Chunk {
            /// Where its edits are among the fresh ones.
            var range: Range<Int>
            /// The values read for them.
            var found: BatchPlanner
            /// Its edits, each taken out (nil) when the writer takes it.
            var prepared: [PreparedEdit?]
        }
        /// Which of the run's edits are fresh, and their features' keys (``PrefetchState/key``).
        struct Split {
            var fresh: [Int]
            var keys: [UInt64]
            var globalIDs: [String]
        }

        let edits: [BatchEdit]
        private let lock = NSCondition()
        private var split: Split?
        private var claimed = 0
        /// Chunks done and not yet taken by the writer.
        private var chunks: [Chunk] = []
        /// Chunks done in all.
        private var finished = 0
        /// Chunks claimed that ended without a result (a failed read).
        private var abandoned = 0
        private var stopped = false
        /// The chunk the helper held when the writer came to the run.
        private var inFlight: Range<Int>?
        /// Whether the writer has come to the held chunk's first edit (for ``HelperPacing``).
        private var writerPassed = false
        /// Whether the helper has returned.
        private var ended = false
        /// Whether others changed the layer after a base generation, as the helper learned it.
        private var othersChanged: [Int64: Bool] = [:]

        let pacing: HelperPacing

        init(edits: [BatchEdit], pacing: HelperPacing) {
            self.edits = edits
            self.pacing = pacing
        }

        /// On the helper's thread: finds the fresh edits, then prepares them a chunk at a time
        /// until all are done or the writer has taken over.
        func prepare(
            seen: Set<UInt64>, othersChanged known: [Int64: Bool], layerID: Int, _ table: FeatureTable, context: BatchContext, geodatabase: Geodatabase
        ) {
            defer {
                lock.lock()
                ended = true
                lock.broadcast()
                lock.unlock()
            }
            // Taken over before the helper came to it (it was preparing another batch's run).
            lock.lock()
            let late = stopped
            lock.unlock()
            if late { return }
            var counts: [String: Int] = [:]
            var gids: [String?] = []
            gids.reserveCapacity(edits.count)
            for edit in edits {
                let gid = GlobalID.normalized(edit.globalId)
                gids.append(gid)
                if let gid { counts[gid, default: 0] += 1 }
            }
            var split = Split(fresh: [], keys: [], globalIDs: [])
            for (index, gid) in gids.enumerated() {
                guard let gid, counts[gid] == 1 else { continue }
                let key = PrefetchState.key(gid)
                guard !seen.contains(key) else { continue }
                split.fresh.append(index)
                split.keys.append(key)
                split.globalIDs.append(gid)
            }
            lock.lock()
            let go = !stopped && !split.fresh.isEmpty
            if !stopped { self.split = split }
            lock.unlock()
            guard go else { return }
            var changedAfter = known
            _ = try? geodatabase.readCommittedBlocking { reader in
                var scratchTemplate = context.planner(for: table.definition)
                scratchTemplate.objectIDs.reserveCapacity(Self.chunkSize)
                while let range = claim(split.fresh.count) {
                    if range.lowerBound == 0, pacing == .firstChunkHeld || pacing == .firstChunkLate {
                        let limit = Date(timeIntervalSinceNow: 10)
                        lock.lock()
                        while !(pacing == .firstChunkHeld ? stopped : writerPassed), lock.wait(until: limit) {}
                        lock.unlock()
                    }
                    let chunkEdits = split.fresh[range].map { edits[$0] }
                    do {
                        let layer = BatchLayer(id: layerID, edits: chunkEdits)
                        var scratch = scratchTemplate
                        let base = chunkEdits.compactMap(\.baseGeneration).min()
                        var changed: Bool?
                        if let base {
                            changed = try changedAfter[base] ?? BatchApplier.othersChanged(layerID, after: base, context: context, on: reader)
                            changedAfter[base] = changed
                        }
                        let chunkGIDs = Array(split.globalIDs[range])
                        try BatchApplier.read(
                            layer, gids: chunkGIDs, others: changed == true ? chunkGIDs : [], after: base ?? 0, table, context: context, on: reader, into: &scratch)
                        // Plans change the planner only by a delete's object id (``BatchPlanner/adopt``):
                        // the ids handed over are the ones read.
                        let read = scratch.objectIDs
                        var prepared: [PreparedEdit?] = []
                        prepared.reserveCapacity(chunkEdits.count)
                        let buffers = PreparedRows(srsID: table.srsID)
                        for (edit, gid) in zip(chunkEdits, chunkGIDs) {
                            prepared.append(Self.prepare(edit, globalID: gid, &scratch, table.validator, into: buffers))
                        }
                        scratch.objectIDs = read
                        finish(Chunk(range: range, found: scratch, prepared: prepared), changedAfter)
                    } catch {
                        finish(nil, changedAfter)
                        return
                    }
                }
            }
            // Not in WAL mode, or no reader: the writer reads what is left.
            lock.lock()
            stopped = true
            lock.broadcast()
            lock.unlock()
        }

        /// Plans `edit` and checks the rows its steps write. The steps keep their features'
        /// global ids only (the values are in the rows), so their memory goes here, not on the
        /// writer.
        private static func prepare(
            _ edit: BatchEdit, globalID: String, _ planner: inout BatchPlanner, _ validator: FeatureValidator, into buffers: PreparedRows
        ) -> PreparedEdit {
            let before = planner.objectIDs[globalID]
            let plan = Result { try planner.plan(edit) }
            guard case .success(var made) = plan else { return PreparedEdit(globalID: globalID, objectIDBefore: before, form: .general(plan, [])) }
            if let simple = simple(made, validator, buffers) { return PreparedEdit(globalID: globalID, objectIDBefore: before, form: .simple(simple)) }
            var rows: [Result<FeatureValidator.Row, any Error>?] = []
            rows.reserveCapacity(made.steps.count)
            for (i, step) in made.steps.enumerated() {
                switch step {
                case .insert(let feature):
                    rows.append(Result { try validator.add(feature, index: 0) })
                    made.steps[i] = .insert(Feature(globalID: feature.globalID))
                case .update(let objectID, let feature, let clearGeometry):
                    rows.append(!feature.attributes.isEmpty || feature.geometry != nil ? Result { try validator.update(feature, index: 0) } : nil)
                    made.steps[i] = .update(objectID: objectID, Feature(objectID: objectID), clearGeometry: clearGeometry)
                case .delete:
                    rows.append(nil)
                }
            }
            return PreparedEdit(globalID: globalID, objectIDBefore: before, form: .general(.success(made), rows))
        }

        /// `plan` in the simple form, its row kept in `buffers`, when it is one step without a
        /// conflict or a cleared geometry, with at most one log entry, and its row passes the
        /// checks; else nil (the general form keeps a row that fails, to fail at its step).
        private static func simple(_ plan: EditPlan, _ validator: FeatureValidator, _ buffers: PreparedRows) -> SimpleEdit? {
            guard plan.steps.count == 1, plan.log.count <= 1, plan.result.conflicts?.isEmpty ?? true else { return nil }
            let kind: SimpleEdit.Kind
            switch plan.steps[0] {
            case .insert(let feature):
                guard let row = try? validator.add(feature, index: 0) else { return nil }
                kind = .insert(buffers.append(row))
            case .update(let objectID, let feature, let clearGeometry):
                guard !clearGeometry else { return nil }
                if feature.attributes.isEmpty && feature.geometry == nil {
                    kind = .nothing
                } else {
                    guard let row = try? validator.update(feature, index: 0) else { return nil }
                    kind = .update(objectID: objectID, buffers.append(row))
                }
            case .delete(let objectID):
                kind = .delete(objectID: objectID)
            }
            return SimpleEdit(kind: kind, rows: buffers, log: plan.log.first, result: plan.result)
        }

        /// The next chunk's range among `count` fresh edits, claimed; nil once all are, or the
        /// writer took over.
        private func claim(_ count: Int) -> Range<Int>? {
            lock.lock()
            defer { lock.unlock() }
            guard !stopped, claimed * Self.chunkSize < count else { return nil }
            claimed += 1
            lock.broadcast()
            return Self.range(of: claimed - 1, count)
        }

        private func finish(_ chunk: Chunk?, _ changed: [Int64: Bool]) {
            lock.lock()
            if let chunk {
                chunks.append(chunk)
                finished += 1
            } else {
                abandoned += 1
            }
            othersChanged = changed
            lock.broadcast()
            lock.unlock()
        }

        /// On the writer, before it writes the run: stops the helper and puts what the chunks
        /// done read into `planner`. Returns the edits whose features the writer reads itself,
        /// the prepared edits by their place in the run (empty when none is), and the place of
        /// the first edit of the chunk the helper still holds (``takeInFlight(into:_:)``).
        func merge(
            into planner: inout BatchPlanner, _ state: inout PrefetchState
        ) -> (rest: [BatchEdit], prepared: [PreparedEdit?], inFlight: Int?) {
            lock.lock()
            switch pacing {
            case .writerWaitsForAll: while !ended { lock.wait() }
            case .firstChunkHeld, .firstChunkLate: while claimed == 0 && !ended { lock.wait() }
            case .free: break
            }
            stopped = true
            lock.broadcast()
            // The chunks are moved out, so their edits are moved on, not copied.
            var chunks: [Chunk] = []
            swap(&chunks, &self.chunks)
            let split = self.split, changed = othersChanged
            let held = finished + abandoned < claimed ? Self.range(of: claimed - 1, split?.fresh.count ?? 0) : nil
            inFlight = held
            lock.unlock()
            guard let split, !chunks.isEmpty || held != nil else { return (edits, [], nil) }
            for (base, value) in changed { state.othersChanged[base] = value }
            var prepared = [PreparedEdit?](repeating: nil, count: edits.count)
            while var chunk = chunks.popLast() {
                take(&chunk, split, into: &planner, &prepared)
                for j in chunk.range { state.seen.insert(split.keys[j]) }
            }
            // The chunk in the helper's hands is taken when the writer comes to its first edit
            // (``takeInFlight``); its features count as seen now, for the next run's helper.
            var waiting = IndexSet()
            if let held {
                for j in held {
                    state.seen.insert(split.keys[j])
                    waiting.insert(split.fresh[j])
                }
            }
            var rest: [BatchEdit] = []
            rest.reserveCapacity(edits.count)
            for (index, edit) in edits.enumerated() where prepared[index] == nil && !waiting.contains(index) { rest.append(edit) }
            return (rest, prepared, held.map { split.fresh[$0.lowerBound] })
        }

        /// The chunk in the helper's hands at ``merge(into:_:)``, if it is done: its reads go
        /// into `planner` and its edits into `prepared`. Returns its edits when it is not done
        /// (the writer does not wait for a helper that may get no core: it reads and plans them
        /// itself, and the helper's work on them is dropped), else none.
        func takeInFlight(into planner: inout BatchPlanner, _ prepared: inout [PreparedEdit?]) -> [BatchEdit] {
            lock.lock()
            if pacing == .firstChunkHeld {
                while finished + abandoned < claimed { lock.wait() }
            }
            let held = inFlight, split = self.split
            // Only the held chunk can have been done since `merge`.
            var last = chunks.popLast()
            writerPassed = true
            lock.broadcast()
            lock.unlock()
            guard let held, let split else { return [] }
            guard var taken = last, taken.range == held else { return split.fresh[held].map { edits[$0] } }
            last = nil
            take(&taken, split, into: &planner, &prepared)
            return []
        }

        private func take(_ chunk: inout Chunk, _ split: Split, into planner: inout BatchPlanner, _ prepared: inout [PreparedEdit?]) {
            planner.objectIDs.merge(chunk.found.objectIDs) { _, new in new }
            planner.others.merge(chunk.found.others) { old, new in old + new }
            planner.current.merge(chunk.found.current) { _, new in new }
            planner.tombstones.merge(chunk.found.tombstones) { _, new in new }
            for k in chunk.prepared.indices { prepared[split.fresh[chunk.range.lowerBound + k]] = chunk.prepared[k].take() }
        }

        /// Chunk `k`'s range among `count` fresh edits.
        private static func range(of k: Int, _ count: Int) -> Range<Int> {
            let start = k * chunkSize
            return start..<min(start + chunkSize, count)
        }
    }
}
