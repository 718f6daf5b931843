import ArgumentParser
import Foundation
import OutpostCore
import OutpostLocator
import OutpostStorage

/// `outpost locator create|update|info`.
struct LocatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "locator",
        abstract: "Build, update and describe locator files (offline geocoding; served as GeocodeServer).",
        subcommands: [Create.self, Update.self, Info.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Build a .locator from layers of a geodatabase.",
            discussion: """
                Each --layer takes the --fields at the same position: role=field pairs with the roles \
                house, street, city, postal, name and alias. Point (and polygon) layers give addresses \
                and places; line layers give streets (map street=…). --where LAYER:CLAUSE keeps only \
                matching rows of a layer. The file appears only when complete (docs/locator.md).
                """)
        @Argument(help: "The geodatabase (.gpkg) holding the layers.") var geodatabase: String
        @Option(help: "A layer to index (repeat for several).") var layer: [String] = []
        @Option(help: "The field map of the layer at the same position: house=…,street=…,city=…,postal=…,name=…,alias=….") var fields: [String] = []
        @Option(name: .customLong("where"), help: "LAYER:CLAUSE, an SQL where clause for one layer (repeatable).") var whereClauses: [String] = []
        @Option(help: "The locator file to write.") var out: String
        @Flag(help: "Replace an existing file.") var overwrite = false
        @Flag(help: "Print the summary as JSON.") var json = false

        func validate() throws {
            guard !layer.isEmpty else { throw ValidationError("name at least one --layer") }
            guard layer.count == fields.count else { throw ValidationError("give one --fields per --layer (\(layer.count) layers, \(fields.count) field maps)") }
        }

        func run() async throws {
            var clauses: [String: String] = [:]
            for item in whereClauses {
                guard let colon = item.firstIndex(of: ":") else { throw CLIFailure(message: "--where \(item): expected LAYER:CLAUSE") }
                clauses[String(item[..<colon])] = String(item[item.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            }
            let sources = try zip(layer, fields).map { name, spec in
                LocatorSource(layer: name, fields: try LocatorCommand.fieldMap(spec), whereClause: clauses[name])
            }
            let gdb = try LocatorCommand.open(geodatabase)
            defer { try? gdb.close() }
            let display = ProgressDisplay()
            let summary: LocatorBuildSummary
            do {
                summary = try LocatorBuilder.create(from: gdb, sources: sources, at: URL(fileURLWithPath: out), overwrite: overwrite) { rows in
                    if display.enabled { FileHandle.standardError.write(Data("\rindexed \(rows) rows\u{1B}[K".utf8)) }
                }
            } catch let error as LocatorError {
                throw CLIFailure(message: error.message)
            }
            display.finish()
            LocatorCommand.print(summary, json: json, verb: "indexed")
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring a locator up to date with its geodatabase (after edits or a sync): only changed rows are indexed again.")
        @Argument(help: "The .locator file.") var locator: String
        @Argument(help: "The geodatabase it was built from (or a replica of it).") var geodatabase: String
        @Flag(help: "Print the summary as JSON.") var json = false

        func run() async throws {
            let gdb = try LocatorCommand.open(geodatabase)
            defer { try? gdb.close() }
            do {
                LocatorCommand.print(try LocatorBuilder.update(URL(fileURLWithPath: locator), from: gdb), json: json, verb: "added")
            } catch let error as LocatorError {
                throw CLIFailure(message: error.message)
            }
        }
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Describe a locator file or GeocodeServer.")
        @Argument(help: "A .locator file or a …/GeocodeServer URL.") var locator: String
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Print as JSON.") var json = false

        func run() async throws {
            let task = try await LocatorCommand.task(locator, token: token)
            guard let info = task.locatorInfo else { throw CLIFailure(message: "the locator did not load") }
            if json {
                var out: [String: JSONValue] = [
                    "name": .string(info.name), "spatialReference": ["wkid": .integer(Int64(info.spatialReference.wkid))],
                    "entries": .integer(Int64(info.entryCount)), "supportsSuggestions": .bool(info.supportsSuggestions),
                    "supportsReverseGeocoding": .bool(info.supportsReverseGeocoding),
                    "resultAttributeNames": .array(info.resultAttributeNames.map { .string($0) }),
                ]
                if let e = info.extent { out["extent"] = ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax)] }
                printJSON(.object(out))
                return
            }
            Swift.print("\(info.name): \(info.entryCount) addresses and places, EPSG:\(info.spatialReference.wkid)")
            if let e = info.extent { Swift.print("extent \(e.xmin),\(e.ymin),\(e.xmax),\(e.ymax)") }
        }
    }

    static func fieldMap(_ spec: String) throws -> LocatorFieldMap {
        do {
            return try LocatorFieldMap(parsing: spec)
        } catch let error as LocatorError {
            throw CLIFailure(message: error.message)
        }
    }

    static func open(_ path: String) throws -> Geodatabase {
        do {
            return try Geodatabase.open(at: URL(fileURLWithPath: path), readOnly: true)
        } catch {
            throw CLIFailure(message: "\(path): \(error)")
        }
    }

    static func print(_ summary: LocatorBuildSummary, json: Bool, verb: String) {
        if json {
            printJSON([
                "entries": .integer(Int64(summary.entries)), "segments": .integer(Int64(summary.segments)),
                "places": .integer(Int64(summary.places)), "skipped": .integer(Int64(summary.skipped)),
                "changed": .integer(Int64(summary.changed)), "removed": .integer(Int64(summary.removed)), "seconds": .number(summary.seconds),
            ])
            return
        }
        var parts = ["\(verb) \(summary.entries) addresses and places", "\(summary.segments) street lines", "\(summary.places) streets, postal codes and cities"]
        if summary.changed > 0 || summary.removed > 0 { parts.append("\(summary.changed) changed, \(summary.removed) removed") }
        if summary.skipped > 0 { parts.append("\(summary.skipped) rows with nothing to search by skipped") }
        Swift.print(parts.joined(separator: ", ") + String(format: " in %.2f s", summary.seconds))
    }

    /// A locator file or a GeocodeServer URL, loaded.
    static func task(_ location: String, token: String?) async throws -> LocatorTask {
        let task: LocatorTask
        if location.hasPrefix("http://") || location.hasPrefix("https://") {
            guard let url = URL(string: location) else { throw CLIFailure(message: "\(location) is not a URL") }
            task = LocatorTask(url: url, token: serviceToken(token))
        } else {
            task = LocatorTask(url: URL(fileURLWithPath: location))
        }
        do {
            try await task.load()
        } catch let error as LocatorError {
            throw CLIFailure(message: error.message)
        } catch {
            throw CLIFailure(message: "cannot load \(location): \(error)")
        }
        return task
    }

    static func point(_ text: String, option: String) throws -> Position {
        let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite else {
            throw CLIFailure(message: "\(option) \(text): expected x,y (longitude,latitude)")
        }
        return Position(x: x, y: y)
    }

    static func json(_ r: GeocodeResult) -> JSONValue {
        [
            "address": .string(r.label), "score": .number(r.score), "type": .string(r.matchType.description),
            "location": ["x": .number(r.location.x), "y": .number(r.location.y), "spatialReference": ["wkid": .integer(Int64(r.spatialReference.wkid))]],
            "extent": ["xmin": .number(r.extent.xmin), "ymin": .number(r.extent.ymin), "xmax": .number(r.extent.xmax), "ymax": .number(r.extent.ymax)],
            "attributes": .object(r.attributes),
        ]
    }

    static func line(_ r: GeocodeResult) -> String {
        String(format: "%6.2f  %@  (%.6f, %.6f)  %@", r.score, r.label, r.location.x, r.location.y, r.matchType.description)
    }
}

/// `outpost geocode`.
struct GeocodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "geocode",
        abstract: "Find addresses and places by text, offline (a .locator) or against a GeocodeServer; --batch geocodes a CSV file.",
        discussion: """
            Prints score, address, location (x, y) and match type per candidate, best first. With \
            --batch, every row of the CSV is geocoded as a job into --out (a GeoPackage point layer \
            `matches` with match_addr, addr_type, score, status M/T/U and the row's own columns); \
            Ctrl-C pauses it and the same command continues it. Exit code 1 when nothing was found.
            """)
    @Argument(help: "A .locator file or a …/GeocodeServer URL.") var locator: String
    @Argument(help: "The address or place to find.") var text: String?
    @Option(help: "Prefer candidates near lon,lat (x,y in the locator's spatial reference).") var near: String?
    @Option(help: "Most candidates to print.") var max = 6
    @Option(help: "Leave out candidates scoring below this (0–100).") var minScore = 0.0
    @Option(help: "Give locations in this spatial reference (EPSG code).") var outSr: Int?
    @Option(help: "A CSV file to geocode row by row (needs --out).") var batch: String?
    @Option(help: "The CSV column holding the address (default: SingleLine, or Address/City/Postal).") var addressField: String?
    @Option(help: "The GeoPackage --batch writes.") var out: String?
    @Option(help: "Directory for the batch job's JSON (default: $OUTPOST_JOB_DIR or .outpost/jobs).") var jobDir: String?
    @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
    @Flag(help: "Print as JSON.") var json = false

    func validate() throws {
        if batch == nil, text == nil { throw ValidationError("give the text to find, or --batch file.csv --out file.gpkg") }
        if batch != nil, out == nil { throw ValidationError("--batch needs --out") }
        guard max > 0 else { throw ValidationError("--max must be positive") }
    }

    func run() async throws {
        if let batch, let out { return try await runBatch(batch, out) }
        let task = try await LocatorCommand.task(locator, token: token)
        var parameters = GeocodeParameters()
        parameters.maxResults = max
        parameters.minScore = minScore
        parameters.outputSpatialReference = outSr.map { SpatialReference(wkid: $0) }
        parameters.preferredSearchLocation = try near.map { try LocatorCommand.point($0, option: "--near") }
        parameters.resultAttributeNames = json ? ["*"] : []
        let results: [GeocodeResult]
        do {
            results = try await task.geocode(searchText: text ?? "", parameters: parameters)
        } catch let error as LocatorError {
            throw CLIFailure(message: error.message)
        }
        if json {
            printJSON(["candidates": .array(results.map(LocatorCommand.json))])
        } else {
            for r in results { print(LocatorCommand.line(r)) }
        }
        if results.isEmpty { throw CLIFailure(message: "no candidates for \"\(text ?? "")\"") }
    }

    private func runBatch(_ batch: String, _ out: String) async throws {
        guard FileManager.default.isReadableFile(atPath: batch) else { throw CLIFailure(message: "\(batch) does not exist or cannot be read") }
        let manager = try JobManager(directory: jobDirectory(jobDir), registry: outpostJobRegistry())
        let output = URL(fileURLWithPath: out).standardizedFileURL
        let isRemote = locator.hasPrefix("http://") || locator.hasPrefix("https://")
        let definition = BatchGeocodeJob(
            locator: isRemote ? locator : URL(fileURLWithPath: locator).standardizedFileURL.path, input: URL(fileURLWithPath: batch).standardizedFileURL,
            output: output, addressField: addressField, outputSpatialReference: outSr.map { SpatialReference(wkid: $0) }, faults: processFaults)
        let job: any AnyJob
        if let earlier = try manager.snapshots().first(where: {
            $0.jobType == BatchGeocodeJob.jobType && !$0.status.isFinished && $0.parameters == definition.parameters
        }) {
            job = try manager.job(id: earlier.id)
            FileHandle.standardError.write(Data("resuming batch geocode job \(earlier.id)\n".utf8))
        } else {
            job = try manager.add(definition)
        }
        try manager.start(job)
        let status = await runShowingProgress(job, label: "geocode")
        try report(job, status: status, json: json)
    }
}

/// `outpost reverse`.
struct ReverseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reverse",
        abstract: "Name the address at a point, offline (a .locator) or against a GeocodeServer.")
    @Argument(help: "A .locator file or a …/GeocodeServer URL.") var locator: String
    @Argument(help: "lon,lat (x,y in the locator's spatial reference, or --in-sr).") var location: String
    @Option(help: "How far to look, in metres.") var distance = 100.0
    @Option(help: "The spatial reference of the location (EPSG code).") var inSr: Int?
    @Option(help: "Only these match types, comma-separated (PointAddress, POI, StreetName).") var featureTypes: String?
    @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
    @Flag(help: "Print as JSON.") var json = false

    func run() async throws {
        let task = try await LocatorCommand.task(locator, token: token)
        var parameters = ReverseGeocodeParameters()
        parameters.maxDistance = distance
        parameters.locationSpatialReference = inSr.map { SpatialReference(wkid: $0) }
        parameters.featureTypes = featureTypes?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        let point = try LocatorCommand.point(location, option: "location")
        let results: [GeocodeResult]
        do {
            results = try await task.reverseGeocode(location: point, parameters: parameters)
        } catch let error as LocatorError {
            throw CLIFailure(message: error.message)
        }
        guard let found = results.first else { throw CLIFailure(message: "no address within \(distance) m of \(location)") }
        if json {
            printJSON(LocatorCommand.json(found))
        } else {
            let metres = found.attributes["Distance"]?.doubleValue.map { String(format: ", %.1f m away", $0) } ?? ""
            print("\(found.label)  (\(found.matchType)\(metres))")
        }
    }
}

/// `outpost suggest`.
struct SuggestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suggest",
        abstract: "Complete partly typed text into addresses and places.")
    @Argument(help: "A .locator file or a …/GeocodeServer URL.") var locator: String
    @Argument(help: "What has been typed so far.") var text: String
    @Option(help: "Most suggestions.") var max = 5
    @Option(help: "Prefer suggestions near lon,lat.") var near: String?
    @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
    @Flag(help: "Print as JSON (with each suggestion's magicKey).") var json = false

    func run() async throws {
        let task = try await LocatorCommand.task(locator, token: token)
        var parameters = SuggestParameters()
        parameters.maxResults = max
        parameters.preferredSearchLocation = try near.map { try LocatorCommand.point($0, option: "--near") }
        let suggestions: [SuggestResult]
        do {
            suggestions = try await task.suggest(searchText: text, parameters: parameters)
        } catch let error as LocatorError {
            throw CLIFailure(message: error.message)
        }
        if json {
            printJSON(["suggestions": .array(suggestions.map { ["text": .string($0.label), "magicKey": .string($0.magicKey), "isCollection": .bool($0.isCollection)] })])
        } else {
            for s in suggestions { print(s.label) }
        }
    }
}
