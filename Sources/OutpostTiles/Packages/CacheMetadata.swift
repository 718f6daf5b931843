import Foundation
import OutpostCore

/// What a tile cache says about itself: its grid, the levels it holds, the image format and the
/// extent of its data.
public struct TileCacheInfo: Hashable, Sendable {
    /// The cache's name.
    public var name: String
    /// The tile grid.
    public var scheme: TilingScheme
    /// The coarsest level held.
    public var minLevel: Int
    /// The finest level held.
    public var maxLevel: Int
    /// `PNG`, `JPEG` or `MIXED` (ArcGIS `CacheTileFormat`); `WEBP` in MBTiles only.
    public var format: String
    /// The JPEG (or WebP) quality tiles were encoded at; 0 when not known or lossless.
    public var compressionQuality: Int = 0
    /// The data's extent, in the scheme's spatial reference.
    public var fullExtent: Envelope?

    /// Information of these values.
    public init(name: String, scheme: TilingScheme, minLevel: Int, maxLevel: Int, format: String, fullExtent: Envelope?) {
        self.name = name
        self.scheme = scheme
        self.minLevel = minLevel
        self.maxLevel = maxLevel
        self.format = format
        self.fullExtent = fullExtent
    }

    /// The levels held.
    public var levels: ClosedRange<Int> { minLevel...maxLevel }

    // MARK: - .tpkx: root.json and iteminfo.json

    /// `root.json` of a tile package. `tileBundlesPath` comes first: GDAL recognises the file by
    /// it in the first bytes (and wants at least 512 bytes, which the level list guarantees).
    func rootJSON() -> [UInt8] {
        var out = "{\"tileBundlesPath\":\"./tile\",\"name\":"
        JSONValue.writeString(name, to: &out)
        out += ",\"version\":1.0,\"serviceDescription\":\"\",\"spatialReference\":\(Self.spatialReferenceJSON(scheme.spatialReference))"
        out += ",\"units\":\"esriMeters\",\"minLOD\":\(minLevel),\"maxLOD\":\(maxLevel)"
        if let min = scheme.lod(minLevel), let max = scheme.lod(maxLevel) {
            out += ",\"minScale\":\(min.scale),\"maxScale\":\(max.scale)"
        }
        out += ",\"resampling\":false,\"tileInfo\":\(tileInfoJSON())"
        out += ",\"tileImageInfo\":{\"format\":\"\(format)\",\"compressionQuality\":\(compressionQuality),\"bandCount\":1,\"lercError\":0}"
        out += ",\"storageInfo\":{\"storageFormat\":\"esriMapCacheStorageModeCompactV2\",\"packetSize\":128}"
        out += ",\"exportTilesAllowed\":false"
        if let e = fullExtent {
            let extent = Self.extentJSON(e, scheme.spatialReference)
            out += ",\"initialExtent\":\(extent),\"fullExtent\":\(extent)"
        }
        out += "}"
        return Array(out.utf8)
    }

    /// ArcGIS `tileInfo` JSON (also what a MapServer's info carries).
    public func tileInfoJSON() -> String {
        var out = "{\"rows\":\(scheme.tileSize),\"cols\":\(scheme.tileSize),\"dpi\":\(scheme.dpi),\"format\":\"\(format)\",\"compressionQuality\":\(compressionQuality)"
        out += ",\"origin\":{\"x\":\(scheme.originX),\"y\":\(scheme.originY)},\"spatialReference\":\(Self.spatialReferenceJSON(scheme.spatialReference))"
        out += ",\"lods\":["
        out += scheme.lods.map { "{\"level\":\($0.level),\"resolution\":\($0.resolution),\"scale\":\($0.scale)}" }.joined(separator: ",")
        out += "]}"
        return out
    }

    /// A GUID-shaped item id that is a hash of the package's description, so the same export
    /// writes the same bytes (and golden files can be compared byte for byte).
    var derivedItemID: String {
        let description = rootJSON() + itemInfoJSON(id: "")
        let (a, b) = description.withUnsafeBytes { (FastHash.hash64($0), FastHash.hash64($0, seed: 0x1319_8A2E_0370_7344)) }
        let hex = String(format: "%016llX%016llX", a, b)
        let d = Array(hex)
        return "{\(String(d[0..<8]))-\(String(d[8..<12]))-\(String(d[12..<16]))-\(String(d[16..<20]))-\(String(d[20..<32]))}"
    }

    func itemInfoJSON(id: String) -> [UInt8] {
        var out = "{\"creator\":\"outpost\",\"name\":"
        JSONValue.writeString(name, to: &out)
        out += ",\"guid\":\"\(id)\",\"version\":1.0,\"created\":0,\"snippet\":\"\",\"description\":\"\",\"summary\":\"\",\"title\":"
        JSONValue.writeString(name, to: &out)
        out += ",\"tags\":\"\",\"type\":\"Compact Tile Package\",\"typeKeywords\":[\"Compact Tile Package\",\"Tile Package\",\"tpkx\"]"
        if let e = fullExtent, let geographic = try? WebMercator.convert(e, from: scheme.spatialReference, to: .wgs84) {
            out += ",\"extent\":\(Self.extentJSON(geographic, .wgs84))"
        }
        out += "}"
        return Array(out.utf8)
    }

    static func spatialReferenceJSON(_ sr: SpatialReference) -> String {
        sr.wkid == 3857 ? "{\"wkid\":102100,\"latestWkid\":3857}" : "{\"wkid\":\(sr.wkid),\"latestWkid\":\(sr.wkid)}"
    }

    static func extentJSON(_ e: Envelope, _ sr: SpatialReference) -> String {
        "{\"xmin\":\(e.xmin),\"ymin\":\(e.ymin),\"xmax\":\(e.xmax),\"ymax\":\(e.ymax),\"spatialReference\":\(spatialReferenceJSON(sr))}"
    }

    /// Reads `root.json`.
    static func fromRootJSON(_ bytes: [UInt8], name fallback: String, file: String) throws -> TileCacheInfo {
        func bad(_ message: String) -> TileCacheError { TileCacheError(.corrupt, "root.json: \(message)", file: file) }
        let json: JSONValue
        do { json = try bytes.withUnsafeBufferPointer { try JSONValue.parse($0) } } catch { throw bad("not JSON (\(error))") }
        // A tile package names its storage at the top; a vector tile package under resourceInfo.
        guard let storage = json["storageInfo"] ?? json["resourceInfo"]?["cacheInfo"]?["storageInfo"],
            ["esriMapCacheStorageModeCompactV2", "compactV2"].contains(storage["storageFormat"]?.stringValue ?? "")
        else {
            throw TileCacheError(.unsupported, "root.json: the storage format is not Compact Cache V2", file: file)
        }
        guard storage["packetSize"]?.integerValue == 128 else { throw bad("packetSize must be 128") }
        guard let tileInfo = json["tileInfo"], let rows = tileInfo["rows"]?.integerValue, let cols = tileInfo["cols"]?.integerValue, rows == cols, rows > 0, rows <= 8192
        else { throw bad("tileInfo needs square tiles (rows = cols)") }
        guard let x = tileInfo["origin"]?["x"]?.doubleValue, let y = tileInfo["origin"]?["y"]?.doubleValue else { throw bad("tileInfo has no origin") }
        let lods = (tileInfo["lods"]?.arrayValue ?? []).compactMap { lod -> LevelOfDetail? in
            guard let level = lod["level"]?.integerValue, let resolution = lod["resolution"]?.doubleValue, resolution > 0 else { return nil }
            return LevelOfDetail(level: Int(level), resolution: resolution, scale: lod["scale"]?.doubleValue ?? resolution * 96 * TilingScheme.inchesPerMetre)
        }
        guard !lods.isEmpty else { throw bad("tileInfo has no levels") }
        let sr = json["spatialReference"] ?? tileInfo["spatialReference"]
        let wkid = Int(sr?["latestWkid"]?.integerValue ?? sr?["wkid"]?.integerValue ?? 3857)
        let scheme = TilingScheme(
            spatialReference: SpatialReference(wkid: wkid == 102100 ? 3857 : wkid), originX: x, originY: y, tileSize: Int(rows),
            dpi: Int(tileInfo["dpi"]?.integerValue ?? 96), lods: lods)
        let minLevel = Int(json["minLOD"]?.integerValue ?? Int64(lods.first!.level))
        let maxLevel = Int(json["maxLOD"]?.integerValue ?? Int64(lods.last!.level))
        guard minLevel <= maxLevel else { throw bad("minLOD \(minLevel) is above maxLOD \(maxLevel)") }
        var extent: Envelope?
        if let e = json["fullExtent"], let x0 = e["xmin"]?.doubleValue, let y0 = e["ymin"]?.doubleValue, let x1 = e["xmax"]?.doubleValue, let y1 = e["ymax"]?.doubleValue {
            extent = Envelope(xmin: x0, ymin: y0, xmax: x1, ymax: y1)
        }
        var info = TileCacheInfo(
            name: json["name"]?.stringValue ?? fallback, scheme: scheme, minLevel: minLevel, maxLevel: maxLevel,
            format: json["tileImageInfo"]?["format"]?.stringValue ?? tileInfo["format"]?.stringValue ?? "MIXED", fullExtent: extent)
        info.compressionQuality = Int(json["tileImageInfo"]?["compressionQuality"]?.doubleValue ?? 0)
        return info
    }

    // MARK: - Exploded caches: conf.xml and conf.cdi

    /// `conf.xml` of an exploded Compact Cache V2, as GDAL's ESRIC driver reads it.
    func confXML() -> [UInt8] {
        var out = """
            <?xml version="1.0" encoding="utf-8" ?>
            <CacheInfo xsi:type="typens:CacheInfo" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:typens="http://www.esri.com/schemas/ArcGIS/10.0">
            <TileCacheInfo xsi:type="typens:TileCacheInfo">
            <SpatialReference xsi:type="typens:ProjectedCoordinateSystem">
            <WKT>\(Self.wkt(scheme.spatialReference))</WKT>
            <WKID>\(scheme.spatialReference.wkid == 3857 ? 102100 : scheme.spatialReference.wkid)</WKID><LatestWKID>\(scheme.spatialReference.wkid)</LatestWKID>
            </SpatialReference>
            <TileOrigin xsi:type="typens:PointN"><X>\(scheme.originX)</X><Y>\(scheme.originY)</Y></TileOrigin>
            <TileCols>\(scheme.tileSize)</TileCols><TileRows>\(scheme.tileSize)</TileRows><DPI>\(scheme.dpi)</DPI>
            <LODInfos xsi:type="typens:ArrayOfLODInfo">

            """
        // Levels are numbered from 0 in the file's folders; an exploded cache lists them all up to
        // its finest level.
        for lod in scheme.lods where lod.level <= maxLevel {
            out += "<LODInfo xsi:type=\"typens:LODInfo\"><LevelID>\(lod.level)</LevelID><Scale>\(lod.scale)</Scale><Resolution>\(lod.resolution)</Resolution></LODInfo>\n"
        }
        out += """
            </LODInfos>
            </TileCacheInfo>
            <TileImageInfo xsi:type="typens:TileImageInfo"><CacheTileFormat>\(format)</CacheTileFormat><CompressionQuality>\(compressionQuality)</CompressionQuality><Antialiasing>true</Antialiasing></TileImageInfo>
            <CacheStorageInfo xsi:type="typens:CacheStorageInfo"><StorageFormat>esriMapCacheStorageModeCompactV2</StorageFormat><PacketSize>128</PacketSize></CacheStorageInfo>
            </CacheInfo>

            """
        return Array(out.utf8)
    }

    func confCDI() -> [UInt8] {
        let e = fullExtent ?? Envelope(xmin: scheme.originX, ymin: -scheme.originY, xmax: -scheme.originX, ymax: scheme.originY)
        let text = """
            <?xml version="1.0" encoding="utf-8" ?>
            <EnvelopeN xsi:type="typens:EnvelopeN" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:typens="http://www.esri.com/schemas/ArcGIS/10.0"><XMin>\(e.xmin)</XMin><YMin>\(e.ymin)</YMin><XMax>\(e.xmax)</XMax><YMax>\(e.ymax)</YMax></EnvelopeN>

            """
        return Array(text.utf8)
    }

    static func wkt(_ sr: SpatialReference) -> String {
        guard sr.wkid == 3857 else { return "" }
        return """
            PROJCS["WGS_1984_Web_Mercator_Auxiliary_Sphere",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Mercator_Auxiliary_Sphere"],PARAMETER["False_Easting",0.0],PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",0.0],PARAMETER["Standard_Parallel_1",0.0],PARAMETER["Auxiliary_Sphere_Type",0.0],UNIT["Meter",1.0],AUTHORITY["EPSG",3857]]
            """
    }

    /// Reads `conf.xml` (and the extent from `conf.cdi` when given); the levels present are
    /// found by the caller from the folders.
    static func fromConfXML(_ text: String, cdi: String?, name: String, file: String) throws -> TileCacheInfo {
        func bad(_ message: String) -> TileCacheError { TileCacheError(.corrupt, "conf.xml: \(message)", file: file) }
        func values(_ tag: String, in text: Substring) -> [Substring] {
            var out: [Substring] = []
            var rest = text[...]
            // <tag> or <tag attributes…>, up to </tag>.
            while let open = rest.range(of: "<\(tag)") {
                let after = rest[open.upperBound...]
                guard let first = after.first, first == ">" || first == " ", let end = after.firstIndex(of: ">") else {
                    rest = after
                    continue
                }
                let body = after.index(after: end)
                guard let close = rest.range(of: "</\(tag)>", range: body..<rest.endIndex) else { break }
                out.append(rest[body..<close.lowerBound])
                rest = rest[close.upperBound...]
            }
            return out
        }
        let all = text[...]
        guard text.contains("<CacheInfo") else { throw bad("no CacheInfo element") }
        guard values("StorageFormat", in: all).first == "esriMapCacheStorageModeCompactV2" else {
            throw TileCacheError(.unsupported, "conf.xml: the storage format is not Compact Cache V2", file: file)
        }
        guard values("PacketSize", in: all).first.flatMap({ Int($0) }) == 128 else { throw bad("PacketSize must be 128") }
        guard let x = values("X", in: all).first.flatMap({ Double($0) }), let y = values("Y", in: all).first.flatMap({ Double($0) }) else {
            throw bad("no TileOrigin")
        }
        guard let size = values("TileCols", in: all).first.flatMap({ Int($0) }), size > 0, size <= 8192 else { throw bad("no TileCols") }
        let lods = values("LODInfo", in: all).compactMap { lod -> LevelOfDetail? in
            guard let level = values("LevelID", in: lod).first.flatMap({ Int($0) }), let resolution = values("Resolution", in: lod).first.flatMap({ Double($0) })
            else { return nil }
            return LevelOfDetail(level: level, resolution: resolution, scale: values("Scale", in: lod).first.flatMap { Double($0) } ?? resolution * 96 * TilingScheme.inchesPerMetre)
        }
        guard !lods.isEmpty else { throw bad("no LODInfo") }
        let wkid = values("LatestWKID", in: all).first.flatMap { Int($0) } ?? values("WKID", in: all).first.flatMap { Int($0) } ?? 3857
        let scheme = TilingScheme(
            spatialReference: SpatialReference(wkid: wkid == 102100 ? 3857 : wkid), originX: x, originY: y, tileSize: size,
            dpi: values("DPI", in: all).first.flatMap { Int($0) } ?? 96, lods: lods)
        var extent: Envelope?
        if let cdi {
            let c = cdi[...]
            if let x0 = values("XMin", in: c).first.flatMap({ Double($0) }), let y0 = values("YMin", in: c).first.flatMap({ Double($0) }),
                let x1 = values("XMax", in: c).first.flatMap({ Double($0) }), let y1 = values("YMax", in: c).first.flatMap({ Double($0) })
            {
                extent = Envelope(xmin: x0, ymin: y0, xmax: x1, ymax: y1)
            }
        }
        var info = TileCacheInfo(
            name: name, scheme: scheme, minLevel: lods.first!.level, maxLevel: lods.last!.level,
            format: values("CacheTileFormat", in: all).first.map(String.init) ?? "MIXED", fullExtent: extent)
        info.compressionQuality = values("CompressionQuality", in: all).first.flatMap { Int($0) } ?? 0
        return info
    }
}
