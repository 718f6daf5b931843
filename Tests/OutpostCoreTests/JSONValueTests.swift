import Foundation
import Testing

@testable import OutpostCore

@Suite("JSON values")
struct JSONValueTests {
    @Test func parsesAndWritesStably() throws {
        let v = try JSONValue.parse(#"{"b":[1,2.5,"x\n\"y",null,true],"a":{"z":-3}}"#)
        #expect(v["b"]?.arrayValue?.count == 5)
        #expect(v["a"]?["z"] == .integer(-3))
        #expect(v.jsonString == #"{"a":{"z":-3},"b":[1,2.5,"x\n\"y",null,true]}"#)
        #expect(try JSONValue.parse(v.jsonString) == v)
    }

    @Test func numbersAndControlCharacters() {
        var out = ""
        JSONValue.writeNumber(3.0, to: &out)
        JSONValue.writeNumber(.nan, to: &out)
        JSONValue.writeString("\u{01}", to: &out)
        #expect(out == #"3null"\u0001""#)
        #expect(JSONValue.integer(9_007_199_254_740_993).jsonString == "9007199254740993")
    }

    @Test func invalidJSONIsAGeometryEncodingError() {
        let error = #expect(throws: GeometryError.self) { try JSONValue.parse("{\"a\":") }
        #expect(error?.code == .invalidEncoding)
    }
}
