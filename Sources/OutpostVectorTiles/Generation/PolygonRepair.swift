import OutpostCore

/// Repairs invalid source polygons before they are cut into tiles, when a geometry library is
/// installed to do it. Natural Earth's Sudan crosses itself and the United States' parts overlap;
/// cut into tiles as they are, their pieces stay invalid (shapely's `is_valid` says so). This
/// module links no geometry library (it goes into field apps beside the sync stack); the `outpost`
/// command and server install one built on GEOS (`GEOSPolygonRepair` in OutpostServer), as
/// `SystemTileCodecs` installs image codecs.
///
/// ```swift
/// PolygonRepair.install { polygon in isValid(polygon) ? nil : makeValid(polygon) }
/// ```
public enum PolygonRepair {
    /// Given a polygon or multipolygon: nil when it is valid, else the valid polygons that
    /// replace it (empty when nothing of it is an area).
    public typealias Repair = @Sendable (Geometry) -> Geometry?

    private static let installed = Locked<Repair?>(nil)

    /// Installs `repair` for every generator made afterwards (the last one installed wins).
    public static func install(_ repair: @escaping Repair) {
        installed.withLock { $0 = repair }
    }

    /// The repair installed, if any.
    public static var current: Repair? { installed.withLock { $0 } }
}

/// What one generator learned of its source polygons: each checked once, the repaired ones kept.
final class RepairedPolygons: Sendable {
    private let repair: PolygonRepair.Repair
    /// Per layer and object id: nil when valid as stored, else its repair.
    private let known = Locked<[Int: [Int64: Geometry?]]>([:])

    init(_ repair: @escaping PolygonRepair.Repair) { self.repair = repair }

    /// `geometry` (of `layer`'s row `id`), repaired when it is invalid.
    func geometry(_ geometry: Geometry, layer: Int, id: Int64?) -> Geometry {
        guard let id else { return repair(geometry) ?? geometry }
        if let seen = known.withLock({ $0[layer]?[id] }) { return seen ?? geometry }
        let fixed = repair(geometry)
        known.withLock { $0[layer, default: [:]][id] = .some(fixed) }
        return fixed ?? geometry
    }
}
