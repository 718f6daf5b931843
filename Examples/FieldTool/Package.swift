// swift-tools-version: 6.1
import PackageDescription

// A field-data tool as an app developer writes one: it depends on Outpost by path and imports
// only Outpost's products. `field-sync` takes the sync stack alone (not OutpostTileCodecs), so it
// links no system library but libsqlite3 and zlib; `field-tool` adds the server, which brings
// GEOS, PROJ and the image codecs.
//
//   swift run --package-path Examples/FieldTool field-tool SampleData/field_inspection
//   swift run --package-path Examples/FieldTool field-sync <FeatureServer URL>
let package = Package(
    name: "FieldTool",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "Outpost", path: "../..")
    ],
    targets: [
        // The field work itself: take the service offline, edit, sync while watching progress,
        // cancel the sync part way, sync again, and check that nothing was lost or doubled.
        .target(
            name: "FieldWork",
            dependencies: [
                .product(name: "OutpostCore", package: "Outpost"),
                .product(name: "OutpostStorage", package: "Outpost"),
                .product(name: "OutpostSync", package: "Outpost"),
                .product(name: "OutpostTiles", package: "Outpost"),
            ]
        ),
        // Against a service somewhere else: only the products a field app takes.
        .executableTarget(
            name: "field-sync",
            dependencies: [
                "FieldWork",
                .product(name: "OutpostOffline", package: "Outpost"),
            ]
        ),
        // The same work against the server running in this process.
        .executableTarget(
            name: "field-tool",
            dependencies: [
                "FieldWork",
                .product(name: "OutpostStorage", package: "Outpost"),
                .product(name: "OutpostServer", package: "Outpost"),
                .product(name: "OutpostSQLiteService", package: "Outpost"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
