// Running a geoprocessing tool on this device, and a model (tools chained in a JSON file).
// A task made with a GPServer task URL takes the same parameters and gives the same results.
import Foundation
import OutpostCore
import OutpostGeoprocessing

// snippet.hide
let modelPath = CommandLine.arguments.dropFirst().first
// snippet.show
// snippet.tool
let buffer = GeoprocessingTask(tool: "Buffer")
var parameters = try await buffer.makeDefaultParameters()
let hydrants = GPFeatureSet(
    geometryType: "esriGeometryPoint", spatialReference: .wgs84,
    features: [
        GPFeatureSet.Feature(geometry: .point(try Point(x: 24.9414, y: 60.1699)), attributes: ["asset_id": "HY-1"]),
        GPFeatureSet.Feature(geometry: .point(try Point(x: 24.9520, y: 60.1675)), attributes: ["asset_id": "HY-2"]),
    ])
parameters.inputs["Input_Features"] = .featureSet(hydrants)
parameters.inputs["Distance"] = .linearUnit(distance: 150, units: .esriMeters)
parameters.inputs["Method"] = .string("GEODESIC")

// `run()` ends the tool when this Task is cancelled; no output is kept.
let result = try await buffer.makeJob(parameters: parameters).run()
if case .featureSet(let areas)? = result.outputs["Output_Features"] { print(areas.features.count, "buffers") }
for message in result.messages { print(message.description) }
// snippet.end

// snippet.model
if let modelPath {
    let model = GeoprocessingTask(url: URL(fileURLWithPath: modelPath))
    try await model.load()
    print(model.taskInfo?.parameters.map(\.name) ?? [])
}
// snippet.end
