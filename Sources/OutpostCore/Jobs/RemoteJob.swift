import Foundation

/// How a client reaches a server-side job: fetch its status JSON, ask it to cancel.
/// OutpostSync provides the HTTP implementation.
public protocol RemoteJobTransport: Sendable {
    /// The job's status JSON (`f=json`). Throws `RemoteJobUnreachable` for network failures
    /// (tolerated for a while), any other error for answers that will not get better.
    func status(at url: URL) async throws -> JSONValue
    /// Sends the server the request to cancel the job.
    func cancel(at url: URL) async throws
}

/// A network failure talking to a server-side job (connection refused or dropped, timeout, a
/// 502/503/504 from a proxy): the kind ``RemoteJob`` tolerates for its connection-loss window.
public struct RemoteJobUnreachable: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// A network failure, described.
    public init(_ description: String) { self.description = description }
}

/// The state of a server-side job, read from either ArcGIS shape: replica jobs
/// (`"status": "Completed"`) and geoprocessing-style jobs (`"jobStatus": "esriJobSucceeded"`).
public struct RemoteJobStatus: Hashable, Sendable {
    /// Where a server's job is.
    public enum State: String, Hashable, Sendable {
        /// Waiting, running, or ended (cancelling: ending after a cancel).
        case pending, running, succeeded, failed, cancelling, cancelled
        /// Succeeded, failed or cancelled.
        public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
    }

    /// Where the server's job is.
    public var state: State
    /// Where the result is (ArcGIS `resultUrl`), when the server gives one.
    public var resultURL: URL?
    /// The server's own words about the state or the failure.
    public var message: String?
    /// The server's whole answer.
    public var json: JSONValue

    /// The status an ArcGIS job answer (`jobStatus`, `status`) gives.
    public init(json: JSONValue) throws {
        self.json = json
        guard let object = json.objectValue else {
            throw JobError(.remoteFailed, "the job status is not a JSON object")
        }
        if let error = object["error"], !error.isNull {
            state = .failed
            message = error["message"]?.stringValue ?? error.jsonString
        } else if let status = object["jobStatus"]?.stringValue ?? object["status"]?.stringValue {
            switch status {
            case "esriJobSucceeded", "Completed": state = .succeeded
            case "esriJobFailed", "esriJobTimedOut", "Failed", "CompletedWithErrors": state = .failed
            case "esriJobCancelling", "Cancelling": state = .cancelling
            case "esriJobCancelled", "Cancelled": state = .cancelled
            case "esriJobNew", "esriJobSubmitted", "esriJobWaiting", "Pending": state = .pending
            default: state = .running  // esriJobExecuting, InProgress, ExportingData, …
            }
            let messages = object["messages"]?.arrayValue?.compactMap { $0["description"]?.stringValue ?? $0.stringValue } ?? []
            message = messages.last ?? (state == .failed ? status : nil)
        } else {
            throw JobError(.remoteFailed, "the job status has neither \"status\" nor \"jobStatus\"")
        }
        resultURL = (object["resultUrl"]?.stringValue ?? object["results"]?["url"]?.stringValue).flatMap(URL.init(string:))
    }
}

/// A client job that follows a server-side job until it ends: it polls the status URL with
/// backoff (at once, then after 150 ms, each wait half as long again up to 15 s: a job of a
/// moment is seen done within a fifth of a second, a long one costs a poll every 15 s), rides out network loss for a window (10 minutes by default, as the ArcGIS jobs do)
/// before failing with ``JobError/Code/connectionLost``, and cancelling it sends the cancel to the
/// server.
///
/// Its JSON holds the URLs and the polling policy, so a restarted process picks the remote job up
/// again; the transport comes from the ``JobEnvironment`` (`environment[(any RemoteJobTransport).self]`).
public struct RemoteJob: JobDefinition {
    public static let jobType = "outpost.remoteJob"

    /// Where the server answers the job's status.
    public var statusURL: URL
    /// Where a cancel is posted, when the server has one.
    public var cancelURL: URL?
    /// The first wait between polls.
    public var initialInterval: Duration
    /// The longest wait between polls (the wait doubles up to it).
    public var maximumInterval: Duration
    /// How long the server may be unreachable before the job fails.
    public var connectionLossWindow: Duration
    let transport: any RemoteJobTransport
    /// Where the job reads how long the server has been out of reach (the time it lost it is
    /// kept in the job's checkpoint, across restarts).
    let clock: WallClock

    /// A follower of the server job at `statusURL`; see each property.
    public init(
        statusURL: URL, cancelURL: URL? = nil, transport: any RemoteJobTransport,
        initialInterval: Duration = .milliseconds(100), maximumInterval: Duration = .seconds(15),
        connectionLossWindow: Duration = .seconds(600), clock: WallClock = .system
    ) {
        self.clock = clock
        self.statusURL = statusURL
        self.cancelURL = cancelURL
        self.transport = transport
        self.initialInterval = initialInterval
        self.maximumInterval = maximumInterval
        self.connectionLossWindow = connectionLossWindow
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = [
            "statusUrl": .string(statusURL.absoluteString),
            "initialIntervalMilliseconds": .integer(initialInterval.wholeMilliseconds),
            "maximumIntervalMilliseconds": .integer(maximumInterval.wholeMilliseconds),
            "connectionLossWindowMilliseconds": .integer(connectionLossWindow.wholeMilliseconds),
        ]
        if let cancelURL { p["cancelUrl"] = .string(cancelURL.absoluteString) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let status = parameters["statusUrl"]?.stringValue.flatMap(URL.init(string:)) else {
            throw JobError(.invalidJSON, "a remote job needs statusUrl")
        }
        guard let transport = environment[(any RemoteJobTransport).self] else {
            throw JobError(.invalidJSON, "a remote job needs a RemoteJobTransport in the job environment")
        }
        self.init(
            statusURL: status, cancelURL: parameters["cancelUrl"]?.stringValue.flatMap(URL.init(string:)), transport: transport,
            initialInterval: .milliseconds(parameters["initialIntervalMilliseconds"]?.integerValue ?? 100),
            maximumInterval: .milliseconds(parameters["maximumIntervalMilliseconds"]?.integerValue ?? 15_000),
            connectionLossWindow: .milliseconds(parameters["connectionLossWindowMilliseconds"]?.integerValue ?? 600_000),
            clock: environment[WallClock.self] ?? .system)
    }

    public var stepNames: [String] { ["wait"] }

    public func run(step: Int, context: JobContext) async throws {
        var interval = initialInterval
        var unreachableSince: Date? = (context.checkpointData?["unreachableSince"]?.doubleValue).map(Date.init(timeIntervalSince1970:))
        var lastState = context.checkpointData?["state"]?.stringValue
        while true {
            do {
                let status = try RemoteJobStatus(json: try await transport.status(at: statusURL))
                if unreachableSince != nil { context.log("the server answers again") }
                unreachableSince = nil
                if status.state.rawValue != lastState {
                    context.log("remote job \(status.state.rawValue)\(status.message.map { ": \($0)" } ?? "")")
                    lastState = status.state.rawValue
                }
                switch status.state {
                case .succeeded:
                    context.record("finalStatus", status.json)
                    return
                case .failed:
                    throw JobError(.remoteFailed, "the server's job failed: \(status.message ?? "no reason given")")
                case .cancelled:
                    throw JobError.cancelled()
                default:
                    interval = min(interval * 3 / 2, maximumInterval)
                }
            } catch let error as RemoteJobUnreachable {
                let now = clock.now()
                let since = unreachableSince ?? now
                unreachableSince = since
                let lost = now.timeIntervalSince(since)
                if lost * 1000 >= Double(connectionLossWindow.wholeMilliseconds) {
                    throw JobError(
                        .connectionLost,
                        "connection lost: the server at \(statusURL.host ?? statusURL.absoluteString) has not answered for \(Int(lost)) s (\(error))")
                }
                context.log("cannot reach the server (\(error)); retrying", severity: .warning)
                interval = min(interval * 2, maximumInterval)
            }
            var data: [String: JSONValue] = [:]
            if let lastState { data["state"] = .string(lastState) }
            if let unreachableSince { data["unreachableSince"] = .number(unreachableSince.timeIntervalSince1970) }
            try await context.checkpoint(.object(data))
            try await Task.sleep(for: interval)
        }
    }

    public func output(context: JobContext) async throws -> RemoteJobStatus {
        if let saved = context.recorded("finalStatus") { return try RemoteJobStatus(json: saved) }
        return try RemoteJobStatus(json: try await transport.status(at: statusURL))
    }

    /// Cancelling (or failing) the client job asks the server to cancel its job too.
    public func rollback(context: JobContext) async {
        guard let cancelURL else { return }
        do {
            try await transport.cancel(at: cancelURL)
            context.log("asked the server to cancel its job")
        } catch {
            context.log("could not ask the server to cancel: \(error)", severity: .warning)
        }
    }
}
