import Foundation
import Testing

@testable import OutpostCore

@Suite("ISO WKB codec")
struct WKBTests {
    @Test(arguments: CoordinateLayout.allCases, [true, false])
    func roundTripsEveryTypeInBothByteOrders(layout: CoordinateLayout, littleEndian: Bool) throws {
        for g in try GeometryFixtures.all(layout) {
            let bytes = WKB.encode(g, littleEndian: littleEndian)
            #expect(bytes.count == WKB.encodedSize(g))
            #expect(bytes[0] == (littleEndian ? 1 : 0))
            let back = try WKB.decode(bytes)
            #expect(back == g, "round trip of \(g.type) \(layout)")
        }
    }

    @Test func knownBytesForAPoint() throws {
        // POINT(1 2), little-endian: 01 01000000 000000000000F03F 0000000000000040
        let bytes: [UInt8] = [
            0x01, 0x01, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0, 0, 0, 0, 0, 0, 0, 0x40,
        ]
        #expect(WKB.encode(.point(try Point(x: 1, y: 2))) == bytes)
        // Big-endian POINT Z (1 2 3): type 1001 = 0x000003E9.
        let be: [UInt8] = [0x00, 0x00, 0x00, 0x03, 0xE9] + [0x3F, 0xF0, 0, 0, 0, 0, 0, 0] + [0x40, 0, 0, 0, 0, 0, 0, 0] + [0x40, 0x08, 0, 0, 0, 0, 0, 0]
        #expect(try WKB.decode(be) == .point(try Point(x: 1, y: 2, z: 3)))
    }

    @Test func emptyPointIsNaNCoordinates() throws {
        let bytes = WKB.encode(.point(Point(empty: .xy)))
        #expect(bytes.count == 21)
        #expect(bytes[5...12].elementsEqual([0, 0, 0, 0, 0, 0, 0xF8, 0x7F]))
        #expect(try WKB.decode(bytes).isEmpty)
    }

    @Test func everyTruncationFailsCleanly() throws {
        for g in try GeometryFixtures.all(.xyzm) where !g.isEmpty {
            let bytes = WKB.encode(g)
            for length in 0..<bytes.count {
                #expect(throws: GeometryError.self) { try WKB.decode(Array(bytes.prefix(length))) }
            }
        }
    }

    @Test func absurdCountsFailBeforeAllocating() {
        // A polygon claiming 4 billion rings in a 13-byte input.
        let bytes: [UInt8] = [0x01, 0x03, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]
        let error = #expect(throws: GeometryError.self) { try WKB.decode(bytes) }
        #expect(error?.code == .invalidCount)
        // A line string claiming 2^31 positions.
        let line: [UInt8] = [0x01, 0x02, 0, 0, 0, 0, 0, 0, 0x80] + Array(repeating: 0, count: 32)
        #expect(throws: GeometryError.self) { try WKB.decode(line) }
    }

    @Test func malformedHeadersAreNamed() {
        func code(_ bytes: [UInt8]) -> GeometryError.Code? {
            do {
                _ = try WKB.decode(bytes)
                return nil
            } catch let e as GeometryError {
                return e.code
            } catch {
                return nil
            }
        }
        #expect(code([0x02, 1, 0, 0, 0]) == .invalidEncoding)  // byte order 2
        #expect(code([0x01, 99, 0, 0, 0]) == .invalidType)  // unknown type
        #expect(code([0x01, 0x09, 0, 0, 0, 0, 0, 0, 0]) == .unsupported)  // CompoundCurve
        #expect(code([0x01, 0x01, 0, 0, 0x20] + Array(repeating: 0, count: 20)) == .unsupported)  // EWKB SRID flag
        #expect(code([0x01, 0xA1, 0x0F, 0, 0] + Array(repeating: 0, count: 40)) == .invalidType)  // 4001: no family 4
        #expect(code(WKB.encode(.point(try! Point(x: 1, y: 2))) + [0]) == .invalidEncoding)  // trailing byte
    }

    @Test func partsMustMatchTheCollection() throws {
        // A MultiPoint holding a LineString.
        var bytes: [UInt8] = [0x01, 0x04, 0, 0, 0, 1, 0, 0, 0]
        bytes += WKB.encode(.lineString(try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1)])))
        #expect(throws: GeometryError.self) { try WKB.decode(bytes) }
        // A MultiPoint (XY) holding a PointZ.
        var mixed: [UInt8] = [0x01, 0x04, 0, 0, 0, 1, 0, 0, 0]
        mixed += WKB.encode(.point(try Point(x: 1, y: 2, z: 3)))
        let error = #expect(throws: GeometryError.self) { try WKB.decode(mixed) }
        #expect(error?.code == .mixedLayout)
    }

    @Test func deepNestingIsRefused() {
        // 40 GeometryCollections, each holding the next.
        var bytes: [UInt8] = []
        for _ in 0..<40 { bytes += [0x01, 0x07, 0, 0, 0, 1, 0, 0, 0] }
        bytes += WKB.encode(.point(try! Point(x: 0, y: 0)))
        let error = #expect(throws: GeometryError.self) { try WKB.decode(bytes) }
        #expect(error?.code == .nestingTooDeep)
    }

    @Test func randomBytesNeverCrash() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let n = Int.random(in: 0..<64, using: &rng)
            var bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if n > 5 { bytes[0] = 1; bytes[1] = UInt8.random(in: 1...7, using: &rng); bytes[2...4] = [0, 0, 0] }
            _ = try? WKB.decode(bytes)
        }
    }
}
