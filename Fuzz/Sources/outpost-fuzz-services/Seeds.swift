import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostREST

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

func routePointSeeds() -> [Data] {
    [
        "24.9414,60.1712;24.95117,60.16466", " 24.94 , 60.16 ;24.95,60.17;24.96,60.18 ",
        #"{"features": [{"geometry": {"x": 2776461.6, "y": 8437654.3}, "attributes": {"Name": "Depot"}}, {"geometry": {"x": 2777000, "y": 8438000}}], "spatialReference": {"wkid": 3857}}"#,
        #"[{"geometry": {"x": 385000, "y": 6672000}, "attributes": {"name": "A"}}]"#,
        #"{"type": "features", "features": [{"geometry": {"x": 24.9, "y": 60.1, "spatialReference": {"wkid": 4326}}}], "spatialReference": {"wkid": 4326}}"#,
    ].map { Data($0.utf8) }
}

/// The boundary the multipart target reads bodies with.
var multipartBoundary: String { "fuzzb0undary" }

/// Fields made of `data` (NUL-separated name, value, name, value…; text that is not UTF-8 ends
/// it) written with a file part and read back: each name and value comes back as written. At
/// most 32 fields: each NUL of the input would otherwise be ~35 bytes of body, and the
/// instrumented parser takes ~40 µs a byte (a 2 KB input of NULs took 2.7 s; a timeout).
func multipartRoundTrip(_ data: Data) {
    guard let text = String(data: data, encoding: .utf8) else { return }
    let items = text.split(separator: "\u{0}", omittingEmptySubsequences: false).map(String.init)
    var fields: [(String, String)] = []
    var i = 0
    while i + 1 < items.count, fields.count < 32 {
        fields.append((items[i], items[i + 1]))
        i += 2
    }
    let file = MultipartForm.File(field: items.last ?? "file", filename: items.first ?? "f", data: data)
    // A value holding the delimiter ends its part there: a writer picks a boundary none holds.
    let delimiter = "\r\n--" + multipartBoundary
    guard !fields.contains(where: { ("\r\n" + $0.1).contains(delimiter) }), !("\r\n" + String(decoding: data, as: UTF8.self)).contains(delimiter) else { return }
    let body = MultipartForm.body(fields: fields, file: file, boundary: multipartBoundary)
    let form: MultipartForm
    do {
        form = try MultipartForm(parsing: body, boundary: multipartBoundary)
    } catch {
        preconditionFailure("a written body does not read: \(error)")
    }
    func safe(_ name: String) -> String { String(String.UnicodeScalarView(name.unicodeScalars.map { "\"\\\r\n".unicodeScalars.contains($0) ? "_" : $0 })) }
    let read = form.fields
    precondition(read.count == fields.count, "\(fields.count) fields written, \(read.count) read")
    for (written, back) in zip(fields, read) {
        precondition(back.0 == safe(written.0) && back.1 == written.1, "\(written) came back as \(back)")
    }
    // The file is the last part (a field may share its name).
    let part = form.parts.last
    precondition(form.parts.count == fields.count + 1 && part?.name == safe(file.field), "the file part is not last")
    precondition(part?.data == data && part?.filename == safe(file.filename), "the file part came back otherwise")
}

func multipartSeeds() -> [Data] {
    let b = multipartBoundary
    let bodies = [
        "--\(b)\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\njson\r\n--\(b)\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"kerb; 1.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n\u{FF}\u{D8}\r\n--\(b)--\r\n",
        "--\(b)\r\nContent-Disposition: form-data; name=\"adds\"\r\n\r\n[{\"attributes\": {\"name\": \"a\"}}]\r\n--\(b)--\r\n",
        "preamble\r\n--\(b)\r\ncontent-disposition: form-data;name=file; filename=\"a\\\"b.csv\"\r\n\r\nx,y\n1,2\r\n--\(b)--\r\nepilogue",
    ]
    let trips = ["f\u{0}json\u{0}where\u{0}1=1", "na\"me\r\n\u{0}val\r\nue\u{0}file", "\u{0}\u{0}"]
    return bodies.map { Data([0]) + Data($0.utf8) } + trips.map { Data([1]) + Data($0.utf8) }
}
