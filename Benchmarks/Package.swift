// swift-tools-version: 6.1
import PackageDescription

// A separate package so benchmark code and its needs never reach library users.
// Run: swift run -c release --package-path Benchmarks outpost-bench [import|edits|all]
let package = Package(
    name: "OutpostBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Outpost", path: "../"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        .systemLibrary(name: "CZlibBench"),
        .systemLibrary(name: "CDeflateBench"),
        .executableTarget(
            name: "outpost-bench",
            dependencies: [
                .product(name: "OutpostCore", package: "Outpost"),
                .product(name: "OutpostStorage", package: "Outpost"),
                .product(name: "OutpostProtocol", package: "Outpost"),
                .product(name: "OutpostServer", package: "Outpost"),
                .product(name: "OutpostSyncService", package: "Outpost"),
                .product(name: "OutpostSQLiteService", package: "Outpost"),
                .product(name: "OutpostSync", package: "Outpost"),
                .product(name: "OutpostTiles", package: "Outpost"),
                .product(name: "OutpostTileCodecs", package: "Outpost"),
                .product(name: "OutpostPostgres", package: "Outpost"),
                .product(name: "OutpostLoadTesting", package: "Outpost"),
                .product(name: "OutpostGeoprocessing", package: "Outpost"),
                .product(name: "OutpostLocator", package: "Outpost"),
                .product(name: "OutpostRouting", package: "Outpost"),
                .product(name: "OutpostVectorTiles", package: "Outpost"),
                "CZlibBench",
                "CDeflateBench",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
