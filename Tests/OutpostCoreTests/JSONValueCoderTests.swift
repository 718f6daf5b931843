import Foundation
import Testing

@testable import OutpostCore

@Suite("JSON value coder")
struct JSONValueCoderTests {
    struct Sample: Codable, Hashable {
        enum Kind: String, Codable { case a, b }
        struct Inner: Codable, Hashable {
            var x: Double
            var tags: [String]
        }

        var id: Int64
        var small: Int8
        var ratio: Double
        var flag: Bool
        var name: String
        var kind: Kind
        var optional: String?
        var missing: Int?
        var attributes: [String: JSONValue]
        var tree: JSONValue
        var inner: [Inner]
        var byName: [String: Inner]
        var link: URL
    }

    static let sample = Sample(
        id: 9_007_199_254_740_993, small: -7, ratio: 0.1, flag: true, name: "café \"quoted\"\n", kind: .b, optional: "here", missing: nil,
        attributes: ["n": .integer(3), "s": .string("x"), "nul": .null, "f": .number(2.5)], tree: [1, "two", [3.5], ["k": nil]],
        inner: [Sample.Inner(x: 1.5, tags: ["p", "q"])], byName: ["one": Sample.Inner(x: -2, tags: [])], link: URL(string: "http://127.0.0.1:8080/a?b=c")!)

    @Test func roundTripsAndReadsWhatFoundationWrites() throws {
        let encoded = try JSONValueEncoder().encodeToData(Self.sample)
        #expect(try JSONValueDecoder().decode(Sample.self, from: encoded) == Self.sample)
        // Keys sorted, nil left out: the same value always gives the same bytes.
        let text = String(decoding: encoded, as: UTF8.self)
        #expect(!text.contains("missing"))
        #expect(text.hasPrefix("{\"attributes\":{\"f\":2.5,\"n\":3,\"nul\":null,\"s\":\"x\"},\"byName\""))
        // What Foundation's encoder writes (Int64 beyond 2^53 included) reads back the same.
        let foundation = try JSONEncoder().encode(Self.sample)
        #expect(try JSONValueDecoder().decode(Sample.self, from: foundation) == Self.sample)
        #expect(try JSONDecoder().decode(Sample.self, from: encoded) == Self.sample)
    }

    @Test func mismatchesAreDecodingErrorsNamingThePath() throws {
        var tree = try JSONValueEncoder().encode(Self.sample)
        guard case .object(var object) = tree else { Issue.record("not an object"); return }
        object["inner"] = [["x": "not a number", "tags": []]]
        tree = .object(object)
        do {
            _ = try JSONValueDecoder().decode(Sample.self, from: tree)
            Issue.record("decoded a string as a number")
        } catch let DecodingError.typeMismatch(_, context) {
            #expect(context.codingPath.map(\.stringValue) == ["inner", "Index 0", "x"])
        }
        object.removeValue(forKey: "name")
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Sample.self, from: .object(object)) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Int8.self, from: .integer(300)) }
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Sample.self, from: Data("{\"id\": 1,".utf8)) }
        #expect(try JSONValueDecoder().decode(Int.self, from: .number(4.0)) == 4)
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Int.self, from: .number(4.5)) }
    }
}
