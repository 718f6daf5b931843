import Foundation
import OutpostCore

/// A content fingerprint of a feature, the same on the server and in a replica: SHA-256 of its
/// global id, every attribute (schema order, ArcGIS JSON values) and its geometry's WKB, cut to
/// 64 bits. XOR-ing the fingerprints of a layer's features gives an order-free layer checksum
/// (invariant I9: after a sync with nothing pending, client and server checksums are equal).
public enum FeatureDigest {
    public static func digest(_ feature: Feature, layer: LayerDefinition) -> UInt64 {
        var text = feature.globalID ?? ""
        for field in layer.fields where field.type != .oid && field.type != .globalID {
            text += "|\(field.name)="
            (feature.attributes[field.name] ?? .null).jsonValue.write(to: &text)
        }
        var hasher = SHA256()
        hasher.update(text)
        if layer.isSpatial {
            hasher.update("|geometry=")
            if let g = feature.geometry { hasher.update(WKB.encode(g)) }
        }
        let bytes = hasher.finalize()
        return bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Accumulates a layer checksum.
    public struct Accumulator: Sendable {
        public private(set) var value: UInt64 = 0
        public private(set) var count = 0

        public init() {}

        public mutating func add(_ feature: Feature, layer: LayerDefinition) {
            value ^= FeatureDigest.digest(feature, layer: layer)
            count += 1
        }

        public var hex: String { String(format: "%016llx", value) }
    }
}
