// swift-tools-version: 6.1
import PackageDescription

// Module graph (README, "Modules"): dependencies point one way only.
//   OutpostCore <- OutpostStorage <- OutpostSync / OutpostTiles <- OutpostServer <- outpost
//   OutpostCore <- OutpostProtocol <- OutpostSync / OutpostServer
//   OutpostCore <- OutpostStorage <- OutpostGeoprocessing (GEOS, PROJ) <- OutpostLocator <- OutpostServer
//   OutpostTiles <- OutpostTileCodecs (libjpeg-turbo, libwebp, libdeflate) <- OutpostServer, outpost
let package = Package(
    name: "Outpost",
    // Field apps take the sync stack on iOS and iPadOS; the server and command line run on Linux
    // and macOS.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "OutpostCore", targets: ["OutpostCore"]),
        .library(name: "OutpostStorage", targets: ["OutpostStorage"]),
        .library(name: "OutpostProtocol", targets: ["OutpostProtocol"]),
        .library(name: "OutpostREST", targets: ["OutpostREST"]),
        .library(name: "OutpostSync", targets: ["OutpostSync"]),
        .library(name: "OutpostTiles", targets: ["OutpostTiles"]),
        .library(name: "OutpostTileCodecs", targets: ["OutpostTileCodecs"]),
        .library(name: "OutpostSyncService", targets: ["OutpostSyncService"]),
        .library(name: "OutpostSQLiteService", targets: ["OutpostSQLiteService"]),
        .library(name: "OutpostServer", targets: ["OutpostServer"]),
        .library(name: "OutpostGeoprocessing", targets: ["OutpostGeoprocessing"]),
        .library(name: "OutpostPostgres", targets: ["OutpostPostgres"]),
        .library(name: "OutpostLocator", targets: ["OutpostLocator"]),
        .library(name: "OutpostRouting", targets: ["OutpostRouting"]),
        .library(name: "OutpostOffline", targets: ["OutpostOffline"]),
        .library(name: "OutpostVectorTiles", targets: ["OutpostVectorTiles"]),
        // Not for applications: many crews syncing at once against an oracle, shared by the test
        // suite (a small run) and Benchmarks (`outpost-bench load`).
        .library(name: "OutpostLoadTesting", targets: ["OutpostLoadTesting"]),
        .executable(name: "outpost", targets: ["outpost"]),
    ],
    dependencies: [
        // SQLite access: serialized connections, WAL pools, closure-scoped transactions and
        // Task-cancellation-to-sqlite3_interrupt, all over the system libsqlite3.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // HTTP client for sync and tile sources: streaming bodies, timeouts, decompression, pooling.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // TLS for outpost serve --tls-cert/--tls-key (already in the graph through the HTTP client).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // HTTP field and status types the server's routes name (already in Hummingbird's graph).
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // The feature service: HTTP/1.1 server with graceful shutdown through ServiceLifecycle.
        // One trait (full Foundation) rather than the two defaults: Outpost reads no
        // swift-configuration, and SwiftPM writes two trait defines in a different order from one
        // run to the next, which recompiled Hummingbird and all that depends on it each time.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        // SHA-256 content hashes (OutpostDigest), password hashes (PBKDF2 in _CryptoExtras) and
        // token signatures (HMAC-SHA256); also in the graph through postgres-nio.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // /metrics in the Prometheus text format (its dependencies are already in the graph).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Services Directory pages: logic-less templates with HTML escaping by default (no
        // dependencies of its own).
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        // gzip response bodies over the system zlib.
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        // Property-based tests of the sync invariants (tests only): generators that shrink a
        // failing run to a short sequence, and a seed to replay it, inside Swift Testing.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        // multipart/form-data bodies (addAttachment uploads).
        .package(url: "https://github.com/vapor/multipart-kit", from: "4.7.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Graceful start and stop of in-process servers in tests (already part of Hummingbird's graph).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The PostgreSQL/PostGIS backend: the wire protocol with pooling, binds and transactions,
        // over the SwiftNIO the server already uses.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `swift package generate-documentation` for the DocC catalogues of the library products,
        // and its `snippet-extract` for their compiled snippets (Snippets/, read by scripts/docs);
        // nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // GeoPackage SQL functions (ST_IsEmpty, ST_MinX, ...) written against the SQLite C API so
        // the R-tree triggers read blob headers in place, without copying.
        .target(
            name: "COutpostSQLite",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // The system zlib: PNG deflate/inflate, and crc32/crc32_combine for stored ZIP entries.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        // libjpeg-turbo (TurboJPEG API) and libwebp: JPEG and WebP tiles.
        .systemLibrary(name: "CTurboJPEG", path: "Sources/CTurboJPEG", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CWebP", path: "Sources/CWebP", providers: [.apt(["libwebp-dev"])]),
        // libdeflate: whole-buffer inflate of PNG tiles.
        .systemLibrary(name: "CDeflate", path: "Sources/CDeflate", providers: [.apt(["libdeflate-dev"])]),
        // GEOS (reentrant C API) for overlay, buffer and validity; PROJ for coordinate systems
        // and geodesics.
        .systemLibrary(name: "CGEOS", path: "Sources/CGEOS", providers: [.apt(["libgeos-dev"])]),
        .systemLibrary(name: "CPROJ", path: "Sources/CPROJ", providers: [.apt(["libproj-dev"])]),
        // Geoprocessing: a geometry engine over GEOS and PROJ (a module of its own so that
        // OutpostCore stays free of C dependencies and only what analyses builds them).
        .target(
            name: "OutpostGeoprocessing",
            dependencies: [
                // GeoprocessingTask talks to GPServer services through the REST client.
                "OutpostCore", "OutpostStorage", "OutpostREST", "CGEOS", "CPROJ", "CZlib",
                // Select Layer By Attribute runs the where-clause parser's SQL in an in-memory SQLite.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Locators: search files over SQLite FTS5 and R-tree, LocatorTask (offline and against
        // GeocodeServer, through the REST client); coordinate transforms come from geoprocessing.
        .target(
            name: "OutpostLocator",
            dependencies: [
                "OutpostCore", "OutpostStorage", "OutpostGeoprocessing", "OutpostREST",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // Routing: networks built from street layers, shortest paths, RouteTask.
        .target(
            name: "OutpostRouting",
            dependencies: [
                "OutpostCore", "OutpostStorage", "OutpostGeoprocessing", "OutpostREST",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Offline maps: map definitions taken offline in one job, and synced in one job.
        .target(
            name: "OutpostOffline",
            dependencies: [
                "OutpostSync", "OutpostTiles", "OutpostProtocol", "OutpostStorage", "OutpostCore", "OutpostREST", "OutpostVectorTiles",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        .target(name: "OutpostCore"),
        // The one ArcGIS REST client (token, f=json, forms, the ArcGIS error JSON, timeouts,
        // retries) every client module talks to servers through, over AsyncHTTPClient; and
        // multipart forms, written for uploads and read (MultipartKit's parser) by the server.
        .target(
            name: "OutpostREST",
            dependencies: [
                "OutpostCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // SHA-256 content hashes through swift-crypto (CryptoKit on Apple platforms, its own
        // BoringSSL elsewhere): no system crypto library, so the sync stack runs on iOS.
        .target(name: "OutpostDigest", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        .target(
            name: "OutpostStorage",
            dependencies: [
                "OutpostCore", "OutpostDigest",
                "COutpostSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .target(name: "OutpostProtocol", dependencies: ["OutpostCore", "OutpostDigest", "CZlib"]),
        .target(
            name: "OutpostSync",
            dependencies: [
                "OutpostProtocol", "OutpostStorage", "OutpostCore", "OutpostDigest", "OutpostREST",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .target(
            name: "OutpostTiles",
            dependencies: [
                // PNG through zlib alone: the sync stack links libsqlite3 and zlib only (iOS).
                "OutpostStorage", "OutpostCore", "CZlib",
                // MBTiles files are SQLite (read through GRDB, bulk-written through the C API).
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Mapbox Vector Tiles from geodatabase layers and their packages; zlib for gzip.
        .target(
            name: "OutpostVectorTiles",
            dependencies: ["OutpostTiles", "OutpostStorage", "OutpostCore", "CZlib", .product(name: "GRDB", package: "GRDB.swift")]),
        // JPEG (libjpeg-turbo), WebP (libwebp) and a faster PNG DEFLATE (libdeflate) installed as
        // OutpostTiles' codecs: the server and command line take them, a field app need not.
        .target(name: "OutpostTileCodecs", dependencies: ["OutpostTiles", "CTurboJPEG", "CWebP", "CDeflate"]),
        // A feature service's side of sync apart from storage and HTTP: the store protocols, batch
        // admission and planning, feed assembly, replica scopes, job records and one domain
        // error. The server and each database backend build on it; it knows neither.
        .target(
            name: "OutpostSyncService",
            dependencies: [
                "OutpostProtocol", "OutpostStorage", "OutpostCore", "OutpostDigest",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Feature services kept in a GeoPackage on SQLite: the default store, beside
        // OutpostPostgres, and like it knowing neither the server nor HTTP.
        .target(
            name: "OutpostSQLiteService",
            dependencies: [
                "OutpostSyncService", "OutpostProtocol", "OutpostStorage", "OutpostCore", "OutpostDigest",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "OutpostServer",
            dependencies: [
                "OutpostSQLiteService", "OutpostSyncService", "OutpostProtocol", "OutpostTiles", "OutpostTileCodecs", "OutpostStorage", "OutpostCore", "OutpostDigest", "OutpostGeoprocessing",
                "OutpostLocator", "OutpostRouting", "OutpostVectorTiles", "OutpostREST",
                // Whole JSON answers gzipped by libdeflate (streamed ones through CompressNIO).
                "CDeflate",
                // Geoprocessing job records (already in the graph through OutpostStorage).
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "CompressNIO", package: "compress-nio"),
            ]
        ),
        .target(
            name: "OutpostPostgres",
            dependencies: [
                "OutpostSyncService", "OutpostProtocol", "OutpostStorage", "OutpostCore", "OutpostDigest",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The error PostgresNIO's pool throws when it gives up on a request (already in
                // its graph): the database is unreachable or moving, answered as unavailable.
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The samples `outpost demo` serves, carried beside the executable as a
        // resource bundle so the demo runs from any directory (SampleData stays its one copy).
        .target(
            name: "OutpostSampleData",
            path: "SampleData",
            exclude: ["README.md", "natural_earth", "golden-tiles", "field_inspection"],
            sources: ["BundledSamples.swift"],
            resources: [.copy("street_inspections"), .copy("helsinki"), .copy("planning"), .copy("maps")]
        ),
        .executableTarget(
            name: "outpost",
            dependencies: [
                "OutpostCore", "OutpostStorage", "OutpostProtocol", "OutpostSync", "OutpostTiles", "OutpostTileCodecs",
                "OutpostServer", "OutpostSyncService", "OutpostSQLiteService", "OutpostPostgres", "OutpostSampleData", "OutpostGeoprocessing", "OutpostLocator",
                "OutpostRouting", "OutpostOffline", "OutpostREST", "OutpostVectorTiles", "OutpostDigest",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Debug builds (the ones the tests run) read OUTPOST_FAULT for the crash tests;
            // release builds do not (Commands/TestHooks.swift).
            swiftSettings: [.define("OUTPOST_FAULTS", .when(configuration: .debug))]
        ),
        // Test support in three layers, so a test target builds only what it uses: files, sample
        // data and external readers; HTTP peers on loopback (SwiftNIO); services on every backend
        // (the server and PostgreSQL).
        .target(name: "OutpostTestSupport", dependencies: ["OutpostCore", "OutpostStorage"]),
        .target(
            name: "OutpostHTTPTestSupport",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .target(
            name: "OutpostServiceTestSupport",
            dependencies: [
                "OutpostTestSupport", "OutpostCore", "OutpostStorage", "OutpostServer", "OutpostSyncService", "OutpostSQLiteService", "OutpostPostgres",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "OutpostLoadTesting",
            dependencies: [
                "OutpostCore", "OutpostStorage", "OutpostProtocol", "OutpostSync", "OutpostServer", "OutpostSyncService", "OutpostSQLiteService",
                "OutpostHTTPTestSupport", "OutpostTestSupport", "OutpostPostgres",
            ]
        ),
        // The crews' side of a site of network namespaces (SiteLab), for the site test.
        .executableTarget(name: "outpost-site", dependencies: ["OutpostLoadTesting"]),
        .testTarget(
            name: "OutpostRoutingTests",
            dependencies: [
                "OutpostRouting", "OutpostTestSupport", "OutpostCore", "OutpostStorage", "OutpostGeoprocessing",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "OutpostLocatorTests",
            dependencies: [
                "OutpostLocator", "OutpostREST", "OutpostTestSupport", "OutpostHTTPTestSupport", "OutpostCore", "OutpostStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "OutpostRESTTests",
            dependencies: ["OutpostREST", "OutpostCore", "OutpostHTTPTestSupport", "OutpostTestSupport", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(name: "OutpostGeoprocessingTests", dependencies: ["OutpostGeoprocessing", "OutpostTestSupport", "OutpostCore"]),
        .testTarget(name: "OutpostCoreTests", dependencies: ["OutpostCore", "OutpostDigest", "OutpostStorage", "OutpostTestSupport"]),
        .testTarget(
            name: "OutpostStorageTests",
            dependencies: [
                "OutpostStorage", "OutpostTestSupport", "OutpostCore", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "OutpostCLITests",
            dependencies: [
                "OutpostTestSupport", "OutpostHTTPTestSupport", "OutpostServiceTestSupport", "OutpostCore", "OutpostStorage", "OutpostRouting", "OutpostOffline",
                "OutpostProtocol", "OutpostDigest",
            ]
        ),
        .testTarget(
            name: "OutpostTilesTests",
            dependencies: ["OutpostTiles", "OutpostTileCodecs", "OutpostTestSupport", "OutpostHTTPTestSupport", "OutpostCore", "OutpostStorage"]
        ),
        .testTarget(
            name: "OutpostVectorTilesTests",
            dependencies: [
                "OutpostVectorTiles", "OutpostTiles", "OutpostTestSupport", "OutpostCore", "OutpostStorage", "OutpostSQLiteService",
                // GEOSPolygonRepair: every suite that makes tiles here installs it, as the command and server do.
                "OutpostServer",
            ]
        ),
        .testTarget(
            name: "OutpostSyncTests",
            dependencies: [
                "OutpostSync", "OutpostTestSupport", "OutpostHTTPTestSupport", "OutpostServiceTestSupport", "OutpostLoadTesting", "OutpostCore",
                "OutpostDigest", "OutpostStorage", "OutpostServer", "OutpostSyncService", "OutpostSQLiteService", "OutpostProtocol", "OutpostPostgres",
                // A batch body fed to the server's reader piece by piece.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "OutpostPostgresTests",
            dependencies: [
                "OutpostPostgres", "OutpostServer", "OutpostSyncService", "OutpostTestSupport", "OutpostServiceTestSupport", "OutpostCore",
                "OutpostStorage", "OutpostProtocol",
            ]
        ),
        .testTarget(
            name: "OutpostServerTests",
            dependencies: [
                "OutpostServer", "OutpostSyncService", "OutpostSQLiteService", "OutpostTestSupport", "OutpostServiceTestSupport", "OutpostCore",
                "OutpostStorage",
                "OutpostProtocol", "OutpostTiles", "OutpostGeoprocessing", "OutpostREST",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
