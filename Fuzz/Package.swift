// swift-tools-version: 6.1
import PackageDescription

// A separate package, built only by scripts/fuzz with `-sanitize=fuzzer,address` (every module
// it builds is instrumented, Outpost's included): libFuzzer's driver and AddressSanitizer never
// reach a library user or the normal build. Run: scripts/fuzz <target|all|tiles> <seconds>
let package = Package(
    name: "OutpostFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Outpost", path: "../")
    ],
    targets: [
        // The command line and libFuzzer's entry point both executables share.
        .target(name: "FuzzDriver"),
        // Geometry codecs, JSON, where clauses, the sync wire: what the test command fuzzes.
        .executableTarget(
            name: "outpost-fuzz",
            dependencies: [
                "FuzzDriver",
                .product(name: "OutpostCore", package: "Outpost"),
                .product(name: "OutpostProtocol", package: "Outpost"),
                .product(name: "OutpostStorage", package: "Outpost"),
            ]
        ),
        // PNG, tile packages and vector tiles (tiles, PMTiles archives, styles): OutpostTiles
        // brings SwiftNIO into the instrumented build.
        .executableTarget(
            name: "outpost-fuzz-tiles",
            dependencies: [
                "FuzzDriver", .product(name: "OutpostTiles", package: "Outpost"), .product(name: "OutpostVectorTiles", package: "Outpost"),
                .product(name: "OutpostCore", package: "Outpost"),
            ]
        ),
        // Geoprocessing, locator and routing parsers and multipart forms: GEOS, PROJ and the
        // REST client come into the instrumented build.
        .executableTarget(
            name: "outpost-fuzz-services",
            dependencies: [
                "FuzzDriver", .product(name: "OutpostGeoprocessing", package: "Outpost"), .product(name: "OutpostLocator", package: "Outpost"),
                .product(name: "OutpostRouting", package: "Outpost"), .product(name: "OutpostREST", package: "Outpost"),
                .product(name: "OutpostCore", package: "Outpost"),
            ]
        ),
    ]
)
