import Foundation
import OutpostCore
import OutpostStorage

/// Geocodes every row of a CSV file into a GeoPackage point layer (ArcGIS batch geocoding, as a
/// Job): each row gets its best candidate's location, `Match_addr`, `Addr_type`, `Score` and
/// `Status` (M matched, T tied, U unmatched, with no geometry), and keeps its own columns as
/// `USER_<column>`.
///
/// The address is the `addressField` column, or a `SingleLine`/`Address` column with `City`,
/// `Postal`, `Neighborhood` beside it when present. Rows are geocoded in pages of 500; each page
/// is written and checkpointed, so a paused or killed job resumes after the last page written
/// (rows written after it are removed first). The GeoPackage is written as `.<name>.partial.gpkg` and
/// appears under its name only when complete.
public struct BatchGeocodeJob: JobDefinition {
    public static let jobType = "outpost.batchGeocode"
    static let page = 500
    static let layerName = "matches"

    /// A `.locator` path or a GeocodeServer URL.
    public var locator: String
    /// The CSV file of addresses.
    public var input: URL
    /// The GeoPackage written.
    public var output: URL
    /// The column holding whole addresses (nil: `SingleLine` or `Address`, with `City`, `Postal`,
    /// `Neighborhood`).
    public var addressField: String?
    /// The spatial reference of the points written (the locator's when nil).
    public var outputSpatialReference: SpatialReference?
    /// Fault points for tests (`geocode.afterMove`); none by default, and not in the job's JSON.
    var faults = FaultInjector()

    /// A batch geocode of `input` into `output` with `locator`.
    public init(
        locator: String, input: URL, output: URL, addressField: String? = nil, outputSpatialReference: SpatialReference? = nil,
        faults: FaultInjector = FaultInjector()
    ) {
        self.locator = locator
        self.input = input
        self.output = output
        self.addressField = addressField
        self.outputSpatialReference = outputSpatialReference
        self.faults = faults
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = ["locator": .string(locator), "input": .string(input.path), "output": .string(output.path)]
        if let addressField { p["addressField"] = .string(addressField) }
        if let outputSpatialReference { p["outSR"] = .integer(Int64(outputSpatialReference.wkid)) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let locator = parameters["locator"]?.stringValue, let input = parameters["input"]?.stringValue,
              let output = parameters["output"]?.stringValue
        else { throw JobError(.invalidJSON, "batchGeocode needs locator, input and output") }
        self.init(
            locator: locator, input: URL(fileURLWithPath: input), output: URL(fileURLWithPath: output),
            addressField: parameters["addressField"]?.stringValue,
            outputSpatialReference: parameters["outSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) })
    }

    public var stepNames: [String] { ["geocode"] }

    /// Where the GeoPackage is written until complete (GeoPackage names end in `.gpkg`).
    var partial: URL { output.deletingLastPathComponent().appendingPathComponent(".\(output.deletingPathExtension().lastPathComponent).partial.gpkg") }

    public struct Output: Sendable, Hashable {
        /// The GeoPackage written.
        public var output: URL
        /// Rows read.
        public var rows = 0
        /// Rows matched (`M`).
        public var matched = 0
        /// Rows with tied candidates (`T`).
        public var tied = 0
        /// Rows without a candidate (`U`).
        public var unmatched = 0
    }

    var task: LocatorTask {
        let url = locator.hasPrefix("http://") || locator.hasPrefix("https://") ? URL(string: locator) : nil
        return LocatorTask(url: url ?? URL(fileURLWithPath: locator))
    }

    public func run(step: Int, context: JobContext) async throws {
        let task = self.task
        do {
            try await task.load()
        } catch {
            throw JobError(.stepFailed, "cannot open the locator \(locator): \(error)")
        }
        var reader = try CSVReader(url: input)
        guard let header = try reader.next(), !header.isEmpty else { throw JobError(.stepFailed, "\(input.lastPathComponent) is empty") }
        let columns = try addressColumns(header)
        let total = try CSVReader.countRows(input)
        let done = Int(context.checkpointData?["rows"]?.integerValue ?? 0)
        // Every row was written and the file moved into place by a run killed before it
        // recorded its end: the job ends as that run would have.
        if done > 0, done == total, !FileManager.default.fileExists(atPath: partial.path), FileManager.default.fileExists(atPath: output.path) {
            let counts = context.checkpointData?["counts"]?.objectValue ?? [:]
            context.record("counts", .object(counts))
            context.record("rows", .integer(Int64(done)))
            context.log("geocoded \(done) rows into \(output.path) (moved into place before the job was stopped)")
            return
        }
        let reference = outputSpatialReference ?? task.locatorInfo?.spatialReference ?? .wgs84
        let gdb: Geodatabase
        if done == 0 {
            gdb = try Geodatabase.create(at: partial, schema: schema(header, reference), overwrite: true, changeCapture: false)
        } else {
            guard FileManager.default.fileExists(atPath: partial.path) else {
                throw JobError(.stepFailed, "\(partial.lastPathComponent) is gone: the job cannot resume (start it again)")
            }
            gdb = try Geodatabase.open(at: partial)
        }
        context.onCleanup { try? gdb.close() }
        let table = try gdb.table(named: Self.layerName)
        // Rows written after the last checkpoint are written again: remove them first.
        let stale = try await table.objectIDs(matching: FeatureQuery(where: "row_number > \(done)"))
        if !stale.isEmpty { try await table.delete(objectIDs: stale) }
        var counts = context.checkpointData?["counts"]?.objectValue ?? [:]
        var row = 0
        var batch: [[String]] = []
        context.reportProgress("rows", done: Int64(done), total: Int64(total))
        func flush() async throws {
            var parameters = GeocodeParameters()
            parameters.maxResults = 2
            parameters.outputSpatialReference = reference
            parameters.resultAttributeNames = ["*"]
            var features: [Feature] = []
            for (offset, cells) in batch.enumerated() {
                let number = row - batch.count + offset + 1
                let text = columns.map { i in i < cells.count ? cells[i] : "" }.filter { !$0.isEmpty }.joined(separator: ", ")
                let found = text.isEmpty ? [] : try await task.geocode(searchText: text, parameters: parameters)
                let status = BatchGeocode.status(found)
                counts[status] = .integer((counts[status]?.integerValue ?? 0) + 1)
                var attributes: [String: FieldValue] = [
                    "row_number": .integer(Int64(number)), "input_address": .string(text), "status": .string(status),
                ]
                for (i, name) in header.enumerated() where i < cells.count { attributes[Self.userField(name, i)] = .string(cells[i]) }
                var geometry: Geometry?
                if status != "U", let best = found.first {
                    attributes["match_addr"] = .string(best.label)
                    attributes["addr_type"] = .string(best.matchType.description)
                    attributes["score"] = .double(best.score)
                    geometry = .point(try Point(best.location))
                } else {
                    attributes["score"] = .double(found.first?.score ?? 0)
                }
                features.append(Feature(attributes: attributes, geometry: geometry))
            }
            _ = try await table.add(features)
            batch.removeAll(keepingCapacity: true)
            context.reportProgress("rows", done: Int64(row), total: Int64(total))
            try await context.checkpoint(["rows": .integer(Int64(row)), "counts": .object(counts)])
        }
        while let cells = try reader.next() {
            row += 1
            if row <= done { continue }
            batch.append(cells)
            if batch.count == Self.page { try await flush() }
        }
        if !batch.isEmpty { try await flush() }
        try gdb.close()
        try? FileManager.default.removeItem(at: output)
        try FileManager.default.moveItem(at: partial, to: output)
        try faults.check("geocode.afterMove")
        context.record("counts", .object(counts))
        context.record("rows", .integer(Int64(row)))
        context.log("geocoded \(row) rows into \(output.path): \(counts["M"]?.integerValue ?? 0) matched, \(counts["T"]?.integerValue ?? 0) tied, \(counts["U"]?.integerValue ?? 0) unmatched")
    }

    public func output(context: JobContext) async throws -> Output {
        let counts = context.recorded("counts")?.objectValue ?? [:]
        return Output(
            output: output, rows: Int(context.recorded("rows")?.integerValue ?? 0), matched: Int(counts["M"]?.integerValue ?? 0),
            tied: Int(counts["T"]?.integerValue ?? 0), unmatched: Int(counts["U"]?.integerValue ?? 0))
    }

    public func rollback(context: JobContext) async {
        try? FileManager.default.removeItem(at: partial)
    }

    /// The columns that make up the address, in order.
    func addressColumns(_ header: [String]) throws -> [Int] {
        let lower = header.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if let addressField {
            guard let i = lower.firstIndex(of: addressField.lowercased()) else {
                throw JobError(.stepFailed, "\(input.lastPathComponent) has no column \(addressField) (it has \(header.joined(separator: ", ")))")
            }
            return [i]
        }
        if let single = lower.firstIndex(of: "singleline") { return [single] }
        let parts = ["address", "address2", "neighborhood", "postal", "city"].compactMap { lower.firstIndex(of: $0) }
        guard !parts.isEmpty else {
            throw JobError(.stepFailed, "\(input.lastPathComponent) has no SingleLine or Address column: name the address column")
        }
        return parts
    }

    static func userField(_ name: String, _ index: Int) -> String {
        let cleaned = String(name.map { $0.isLetter || $0.isNumber ? $0 : "_" }).prefix(50)
        return cleaned.isEmpty ? "USER_\(index + 1)" : "USER_\(cleaned)"
    }

    func schema(_ header: [String], _ reference: SpatialReference) -> ServiceSchema {
        var fields = [
            FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "row_number", type: .integer),
            FieldDefinition(name: "input_address", type: .string), FieldDefinition(name: "match_addr", type: .string),
            FieldDefinition(name: "addr_type", type: .string), FieldDefinition(name: "score", type: .double),
            FieldDefinition(name: "status", type: .string),
        ]
        var seen = Set(fields.map { $0.name.lowercased() })
        for (i, name) in header.enumerated() {
            let field = Self.userField(name, i)
            if seen.insert(field.lowercased()).inserted { fields.append(FieldDefinition(name: field, type: .string)) }
        }
        let layer = LayerDefinition(id: 0, name: Self.layerName, geometryType: .point, fields: fields, spatialReference: reference, sync: false)
        return ServiceSchema(name: "matches", layers: [layer], tables: [])
    }
}

/// Rows of an RFC 4180 CSV file (UTF-8, optional BOM, quoted fields with doubled quotes and line
/// breaks), read in 64 KB chunks.
struct CSVReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    private var position = 0
    private var finished = false

    init(url: URL) throws {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw JobError(.stepFailed, "cannot read \(url.path)") }
        self.handle = handle
        try fill()
        if buffer.starts(with: [0xEF, 0xBB, 0xBF]) { position = 3 }
    }

    private mutating func fill() throws {
        if position > 0 {
            buffer.removeFirst(position)
            position = 0
        }
        if let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty {
            buffer.append(contentsOf: chunk)
        } else {
            finished = true
        }
    }

    private mutating func byte() throws -> UInt8? {
        if position >= buffer.count {
            if finished { return nil }
            try fill()
            if position >= buffer.count { return nil }
        }
        defer { position += 1 }
        return buffer[position]
    }

    private mutating func peek() throws -> UInt8? {
        if position >= buffer.count {
            if finished { return nil }
            try fill()
            if position >= buffer.count { return nil }
        }
        return buffer[position]
    }

    /// The next row's cells, or nil at the end. Blank lines are skipped.
    mutating func next() throws -> [String]? {
        var cells: [String] = []
        var cell: [UInt8] = []
        var quoted = false
        var any = false
        while let b = try byte() {
            any = true
            if quoted {
                if b == UInt8(ascii: "\"") {
                    if try peek() == UInt8(ascii: "\"") {
                        _ = try byte()
                        cell.append(b)
                    } else {
                        quoted = false
                    }
                } else {
                    cell.append(b)
                }
                continue
            }
            switch b {
            case UInt8(ascii: "\""): quoted = true
            case UInt8(ascii: ","):
                cells.append(String(decoding: cell, as: UTF8.self))
                cell.removeAll(keepingCapacity: true)
            case UInt8(ascii: "\r"): continue
            case UInt8(ascii: "\n"):
                cells.append(String(decoding: cell, as: UTF8.self))
                if cells.count == 1, cells[0].isEmpty {
                    cells.removeAll()
                    any = false
                    continue
                }
                return cells
            default: cell.append(b)
            }
        }
        guard any else { return nil }
        cells.append(String(decoding: cell, as: UTF8.self))
        return cells.count == 1 && cells[0].isEmpty ? nil : cells
    }

    /// Data rows (after the header).
    static func countRows(_ url: URL) throws -> Int {
        var reader = try CSVReader(url: url)
        var n = -1
        while try reader.next() != nil { n += 1 }
        return max(n, 0)
    }
}
