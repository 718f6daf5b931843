import Foundation
import Testing

@testable import OutpostCore

@Suite("GeoPackage binary geometry")
struct GeoPackageBinaryTests {
    @Test func pointMatchesTheStandardExample() throws {
        // GeoPackage §2.1.3 with GDAL's conventions: POINT(2.35 48.85), srs 4326, little-endian,
        // no envelope: 47 50 00 01 E6 10 00 00 + WKB (29 bytes in all).
        let bytes = GeoPackageBinary.encode(.point(try Point(x: 2.35, y: 48.85)), srsID: 4326)
        #expect(bytes.count == 29)
        #expect(Array(bytes.prefix(8)) == [0x47, 0x50, 0x00, 0x01, 0xE6, 0x10, 0x00, 0x00])
        let decoded = try GeoPackageBinary.decode(bytes)
        #expect(decoded.srsID == 4326)
        #expect(decoded.header.envelopeKind == .none)
        #expect(decoded.geometry == .point(try Point(x: 2.35, y: 48.85)))
    }

    @Test func emptyPointSetsTheEmptyFlag() throws {
        let bytes = GeoPackageBinary.encode(.point(Point(empty: .xy)), srsID: 4326)
        #expect(bytes[3] == 0x11)
        let decoded = try GeoPackageBinary.decode(bytes)
        #expect(decoded.header.isEmpty)
        #expect(decoded.geometry.isEmpty)
    }

    @Test func gdalEnvelopeConventions() throws {
        let polygon = Geometry.polygon(try Polygon(rings: [GeometryFixtures.ring(0, 0, 1, .xy)]))
        let polygonZ = Geometry.polygon(try Polygon(rings: [GeometryFixtures.ring(0, 0, 1, .xyz)]))
        #expect(GeoPackageBinary.encode(polygon, srsID: 4326)[3] == 0x03)  // E=1, little-endian
        #expect(GeoPackageBinary.encode(polygonZ, srsID: 4326)[3] == 0x05)  // E=2
        #expect(GeoPackageBinary.encode(polygon, srsID: 4326).count == 8 + 32 + WKB.encodedSize(polygon))
    }

    @Test(arguments: GeoPackageBinary.EnvelopeKind.allCases, [true, false])
    func everyEnvelopeKindDecodes(kind: GeoPackageBinary.EnvelopeKind, littleEndian: Bool) throws {
        let g = Geometry.lineString(
            try LineString([Position(x: -1, y: -2, z: 5, m: 7), Position(x: 3, y: 4, z: 6, m: 9)]))
        let bytes = GeoPackageBinary.encode(g, srsID: 3857, envelope: kind, littleEndian: littleEndian)
        let decoded = try GeoPackageBinary.decode(bytes)
        #expect(decoded.header.envelopeKind == kind)
        #expect(decoded.header.littleEndian == littleEndian)
        #expect(decoded.srsID == 3857)
        #expect(decoded.geometry == g)
        if kind != .none {
            let e = try #require(decoded.header.envelope)
            #expect(e.xmin == -1 && e.xmax == 3 && e.ymin == -2 && e.ymax == 4)
            if kind == .xyz || kind == .xyzm { #expect(e.zRange == 5...6) }
            if kind == .xym || kind == .xyzm { #expect(e.mRange == 7...9) }
        }
    }

    @Test(arguments: CoordinateLayout.allCases)
    func roundTripsEveryType(layout: CoordinateLayout) throws {
        for g in try GeometryFixtures.all(layout) {
            let back = try GeoPackageBinary.decode(GeoPackageBinary.encode(g, srsID: 4326))
            #expect(back.geometry == g)
            #expect(back.header.isEmpty == g.isEmpty)
        }
    }

    @Test func malformedHeadersAreRefused() throws {
        let good = GeoPackageBinary.encode(.point(try Point(x: 1, y: 2)), srsID: 4326)
        func code(_ bytes: [UInt8]) -> GeometryError.Code? {
            do {
                _ = try GeoPackageBinary.decode(bytes)
                return nil
            } catch let e as GeometryError {
                return e.code
            } catch {
                return nil
            }
        }
        var badMagic = good
        badMagic[0] = 0x58
        #expect(code(badMagic) == .invalidEncoding)
        var badVersion = good
        badVersion[2] = 1
        #expect(code(badVersion) == .unsupported)
        var extended = good
        extended[3] |= 0b0010_0000
        #expect(code(extended) == .unsupported)
        for e: UInt8 in 5...7 {
            var badEnvelope = good
            badEnvelope[3] = (e << 1) | 1
            #expect(code(badEnvelope) == .invalidEncoding)
        }
        for length in 0..<good.count {
            #expect(code(Array(good.prefix(length))) != nil)
        }
        // Header says XY envelope, but the blob ends inside it.
        var truncatedEnvelope = good
        truncatedEnvelope[3] = 0x03
        #expect(code(Array(truncatedEnvelope.prefix(20))) == .truncated)
    }
}
