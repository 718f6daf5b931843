import Foundation
import OutpostSyncService
import Prometheus
import OutpostCore

/// What `/metrics` reports, in the Prometheus text format: requests by route and status, their
/// latency, sync batches by outcome, edits applied, jobs running, tiles served from what was
/// already on disk or drawn anew. Routes are a short fixed list of kinds (never paths), so the
/// label sets stay few whatever the requests.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// Latency buckets from 1 ms to 30 s.
    static let buckets: [Duration] = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000].map { .milliseconds($0) }

    private static func descriptor(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "outpost", metricName: name, unitName: unit, helpText: help)
    }

    func request(route: String, method: String, status: Int, duration: Duration) {
        registry.makeCounter(
            descriptor: Self.descriptor("http_requests", "total", "HTTP requests by route kind, method and status"),
            labels: [("route", route), ("method", method), ("status", String(status))]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: Self.descriptor("http_request_duration", "seconds", "Time from a request's head to its response's head, by route kind"),
            labels: [("route", route)], buckets: Self.buckets
        ).record(duration)
    }

    /// Requests being answered, by route kind: what a server is busy with now (a long
    /// synchronous geoprocessing run shows here until it answers or its client leaves).
    func inFlight(route: String, _ change: Double) {
        registry.makeGauge(
            descriptor: Self.descriptor("http_requests_in_flight", "", "HTTP requests being answered, by route kind"), labels: [("route", route)]
        ).increment(by: change)
    }

    /// An upload batch's outcome: `applied`, `replayed` (the same batch again), `refused` (409:
    /// another batch under its number, or out of order), `rejected` (an invalid edit with rollback).
    func batch(_ outcome: String) {
        registry.makeCounter(descriptor: Self.descriptor("sync_batches", "total", "Upload batches by outcome"), labels: [("outcome", outcome)]).increment()
    }

    /// How a framed batch was applied: `streaming` (as its frames arrived) or `whole` (once all
    /// of it had come: its body stalled, its seq was in the ledger, or the backend applies whole
    /// batches only).
    func framedBatch(applied how: String) {
        registry.makeCounter(descriptor: Self.descriptor("sync_framed_batches", "total", "Framed upload batches, by how they were applied"), labels: [("applied", how)])
            .increment()
    }

    /// A replica's whole-scope checksums: `ahead` (asked for with its last batch and computed
    /// while that batch was answered) or `computed` (when asked).
    func checksums(_ source: String) {
        registry.makeCounter(descriptor: Self.descriptor("sync_checksums", "total", "Replica checksum answers, by where they came from"), labels: [("source", source)])
            .increment()
    }

    /// A change-feed page after a window's first: `ahead` (made while the page before it was
    /// answered, ``PagesAhead``) or `asked` (made when asked for).
    func feedPage(_ made: String) {
        registry.makeCounter(descriptor: Self.descriptor("sync_feed_pages", "total", "Change-feed pages after a window's first, by when they were made"), labels: [("made", made)])
            .increment()
    }

    /// Where an applied batch's time went on the server, by stage.
    func batchStages(_ stages: BatchStages) {
        for (stage, duration) in stages.named {
            registry.makeDurationHistogram(
                descriptor: Self.descriptor("sync_batch_stage_duration", "seconds", "Time an applied upload batch spent in each stage on the server"),
                labels: [("stage", stage)], buckets: Self.buckets
            ).record(duration)
        }
        if stages.commitLockHeld > .zero {
            registry.makeDurationHistogram(
                descriptor: Self.descriptor("sync_commit_lock_held", "seconds", "Time an applied upload batch held its service's commit lock, from taking it to the commit"),
                labels: [], buckets: Self.buckets
            ).record(stages.commitLockHeld)
        }
        if stages.preparedAhead > 0 {
            registry.makeCounter(
                descriptor: Self.descriptor("sync_batch_edits_prepared_ahead", "total", "Batch edits read, planned and checked off the writer, while it wrote the run before theirs"),
                labels: []
            ).increment(by: Int64(stages.preparedAhead))
        }
    }

    func editsApplied(_ count: Int, via: String) {
        guard count > 0 else { return }
        registry.makeCounter(descriptor: Self.descriptor("edits_applied", "total", "Feature edits applied, by request kind"), labels: [("via", via)])
            .increment(by: Int64(count))
    }

    func tile(_ source: String) {
        registry.makeCounter(descriptor: Self.descriptor("tiles_served", "total", "Tiles served: from a tile cache (cache), drawn earlier and kept on disk (kept), or drawn now (drawn)"), labels: [("source", source)])
            .increment()
    }

    private let jobs = Locked(0)

    func jobStarted() { setJobs(jobs.withLock { $0 += 1; return $0 }) }
    func jobFinished() { setJobs(jobs.withLock { $0 -= 1; return $0 }) }

    private func setJobs(_ value: Int) {
        registry.makeGauge(descriptor: Self.descriptor("active_jobs", "count", "Server-side jobs running (createReplica, synchronizeReplica, exportTiles)"), labels: [])
            .set(Int64(value))
    }

    func text() -> String {
        setJobs(jobs.withLock { $0 })
        return registry.emitToString()
    }

    /// The kind of a request path, for the route label.
    static func route(_ segments: [String]) -> String {
        switch segments.first {
        case "health": return "health"
        case "ready": return "ready"
        case "metrics": return "metrics"
        case "outpost":
            guard segments.count >= 6 else { return "native" }
            return "native." + (segments.dropFirst(5).first.map { ["batches", "changes", "checksums", "snapshot", "blobs", "attachments", "schema"].contains($0) ? $0 : "replica" } ?? "replica")
        case "arcgis":
            guard segments.count >= 3 else { return "other" }
            if segments[1] == "tokens" || segments.last == "generateToken" { return "tokens" }
            if segments[2] == "info" { return "info" }
            if segments[2] == "static" { return "static" }
            guard segments[2] == "services" else { return "other" }
            let rest = Array(segments.dropFirst(3))
            guard rest.count >= 2 else { return "catalog" }
            let kind = ["MapServer": "mapserver", "FeatureServer": "featureserver", "GPServer": "gpserver", "GeocodeServer": "geocodeserver", "NAServer": "naserver"][rest[1]] ?? "other"
            let route = rest.dropFirst(2)
            if kind == "gpserver" {
                // <task>/execute, <task>/submitJob, <task>/jobs/…; the rest describes.
                return "gpserver." + (route.dropFirst().first.map { ["execute", "submitJob", "jobs"].contains($0) ? $0 : "other" } ?? "other")
            }
            if kind == "geocodeserver" || kind == "naserver" { return kind }
            if kind == "mapserver" { return route.first == "tile" ? "mapserver.tile" : route.isEmpty ? "mapserver" : "mapserver.other" }
            if let last = route.last, ["query", "applyEdits", "createReplica", "synchronizeReplica", "unRegisterReplica", "attachments", "addAttachment", "deleteAttachments"].contains(last) {
                return "featureserver." + last
            }
            if route.first == "jobs" || route.first == "replicas" || route.first == "replicafiles" { return "featureserver." + route.first! }
            return route.count == 1 && Int(route.first!) != nil ? "featureserver.layer" : route.isEmpty ? kind : "featureserver.other"
        default: return "other"
        }
    }
}
