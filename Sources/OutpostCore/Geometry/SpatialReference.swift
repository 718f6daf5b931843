/// A spatial reference identified by its well-known id (EPSG code, or an Esri alias).
///
/// Outpost knows two systems well: WGS 84 longitude/latitude (4326) and Web Mercator (3857,
/// which Esri writes as 102100 with `latestWkid` 3857). Others are carried by id.
public struct SpatialReference: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The EPSG or Esri well-known id.
    public let wkid: Int

    /// The spatial reference with that well-known id.
    public init(wkid: Int) {
        // Esri's historical codes for Web Mercator all mean EPSG:3857.
        self.wkid = [102100, 102113, 900913].contains(wkid) ? 3857 : wkid
    }

    /// Longitude and latitude on WGS 84 (EPSG:4326).
    public static let wgs84 = SpatialReference(wkid: 4326)
    /// Web Mercator (EPSG:3857; 102100 is read as the same).
    public static let webMercator = SpatialReference(wkid: 3857)

    /// Whether coordinates are degrees of longitude and latitude.
    public var isGeographic: Bool { wkid == 4326 }
    /// Whether it is Web Mercator.
    public var isWebMercator: Bool { wkid == 3857 }

    /// A human name for the systems Outpost knows.
    public var name: String {
        switch wkid {
        case 4326: "WGS 84"
        case 3857: "WGS 84 / Pseudo-Mercator"
        default: "EPSG:\(wkid)"
        }
    }

    public var description: String { "EPSG:\(wkid)" }

    private enum CodingKeys: String, CodingKey { case wkid, latestWkid }

    /// Reads `{"wkid": 102100, "latestWkid": 3857}` (latestWkid wins) and normalises Esri aliases.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let latest = try c.decodeIfPresent(Int.self, forKey: .latestWkid) {
            self.init(wkid: latest)
        } else {
            self.init(wkid: try c.decode(Int.self, forKey: .wkid))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(wkid, forKey: .wkid)
    }
}
