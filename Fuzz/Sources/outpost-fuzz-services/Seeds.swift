import Foundation
import OutpostCore
import OutpostGeoprocessing

/// Every type a GP parameter takes, and lists of two of them.
func gpTypes() -> [GPDataType] {
    [
    .boolean, .long, .double, .string, .date, .linearUnit, .arealUnit, .featureRecordSetLayer, .recordSet, .dataFile, .rasterData,
    .rasterDataLayer, .multiValue(.string), .multiValue(.double),
    ]
}

func geotiffSeeds() throws -> [Data] {
    let small = GPRaster(
        width: 3, height: 2, xmin: 24.9, ymax: 60.2, cellSize: 0.01, spatialReference: SpatialReference(wkid: 4326), noData: -9999,
        values: [1, 2, 3, -9999, 5.5, 6])
    let mercator = GPRaster(
        width: 4, height: 4, xmin: 2_776_000, ymax: 8_440_000, cellSize: 25, spatialReference: SpatialReference(wkid: 3857), values: (0..<16).map(Double.init))
    return [try GeoTIFF.encode(small), try GeoTIFF.encode(mercator)]
}

func gpSeeds() -> [Data] {
    func seed(_ type: GPDataType, _ json: String) -> Data {
        Data([UInt8(gpTypes().firstIndex(of: type)!)]) + Data(json.utf8)
    }
    return [
        seed(.boolean, "true"), seed(.long, "42"), seed(.double, "2.5"), seed(.string, "\"text\""), seed(.date, "1700000000000"),
        seed(.linearUnit, #"{"distance": 250, "units": "esriMeters"}"#), seed(.arealUnit, #"{"area": 3, "units": "esriSquareKilometers"}"#),
        seed(.featureRecordSetLayer, #"{"geometryType": "esriGeometryPoint", "spatialReference": {"wkid": 4326}, "features": [{"geometry": {"x": 24.9, "y": 60.1}, "attributes": {"name": "a"}}]}"#),
        seed(.recordSet, #"{"fields": [{"name": "n", "type": "esriFieldTypeInteger"}], "features": [{"attributes": {"n": 1}}]}"#),
        seed(.dataFile, #"{"url": "http://127.0.0.1/file.csv"}"#), seed(.rasterData, #"{"itemID": "i1"}"#),
        seed(.multiValue(.string), #"["a", "b"]"#), seed(.multiValue(.double), "[1, 2.5]"),
    ]
}
