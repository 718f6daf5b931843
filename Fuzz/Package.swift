// swift-tools-version: 6.1
import PackageDescription

// A separate package, built only by scripts/fuzz with `-sanitize=fuzzer,address` (every module
// it builds is instrumented, Outpost's included): libFuzzer's driver and AddressSanitizer never
// reach a library user or the normal build. Run: scripts/fuzz <target|all> <seconds>
let package = Package(
    name: "OutpostFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Outpost", path: "../")
    ],
    targets: [
        .executableTarget(
            name: "outpost-fuzz",
            dependencies: [
                .product(name: "OutpostCore", package: "Outpost"),
                .product(name: "OutpostProtocol", package: "Outpost"),
                .product(name: "OutpostStorage", package: "Outpost"),
            ]
        )
    ]
)
