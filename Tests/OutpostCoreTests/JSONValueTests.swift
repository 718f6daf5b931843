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

    /// A number is its value however it is spelled: a Double without a fraction is written as an
    /// integer and reads back as `.integer`, and must still equal what was written (a stored job's
    /// parameters against the same command's, say). Hashing agrees with equality.
    @Test func numbersEqualAcrossSpellings() throws {
        let written: JSONValue = ["extent": [.number(-12), .number(34), .number(32.5), .number(61)], "levels": [.integer(3)]]
        let read = try JSONValue.parse(written.jsonString)
        #expect(read["extent"]?[0] == .integer(-12))
        #expect(read == written)
        #expect(Set([read, written]).count == 1)
        #expect(JSONValue.integer(3) == .number(3.0) && JSONValue.number(-0.0) == .integer(0))
        #expect(JSONValue.integer(3) != .number(3.5) && JSONValue.integer(1) != .bool(true) && JSONValue.integer(1) != .string("1"))
        // Beyond 2^53 a Double stands for several integers: only the one it equals exactly matches.
        #expect(JSONValue.integer(9_007_199_254_740_993) != .number(9_007_199_254_740_992))
        #expect(JSONValue.integer(9_007_199_254_740_992) == .number(9_007_199_254_740_992))
        #expect(JSONValue.number(1e300) != .integer(.max))
    }

    /// The byte writer's text reads back as the same value, here and in Foundation's reader:
    /// escapes at the start, middle and end of strings and keys, non-ASCII text, integer limits.
    @Test func writtenTextReadsBack() throws {
        let strings = ["", "\"", "a\"b", "\\end\\", "\u{01}x\u{1F}", "tab\tnew\nline\r", "é中🌍 \"q\"", "plain text"]
        let integers: [Int64] = [0, 7, -7, 10, -10, 1_234_567_890, .max, .min]
        var object: [String: JSONValue] = [:]
        for (k, s) in strings.enumerated() { object["k\(k)\(s)"] = .string(s) }
        for (k, i) in integers.enumerated() { object["i\(k)"] = .integer(i) }
        object["n"] = .array([.number(-0.5), .number(1e-7), .number(123_456.789), .number(-1e300), .integer(0)])
        let value = JSONValue.object(object)
        let text = value.jsonString
        #expect(try JSONValue.parse(text) == value)
        #expect(value.jsonData == Data(text.utf8))
        let foundation = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        for (k, s) in strings.enumerated() { #expect(foundation["k\(k)\(s)"] as? String == s) }
        for (k, i) in integers.enumerated() { #expect((foundation["i\(k)"] as? NSNumber)?.int64Value == i) }
        // The string writers (scalars appended directly) agree with the byte writer.
        for v in [value] + strings.map(JSONValue.string) + integers.map(JSONValue.integer) + [.number(-0.5), .number(1e300), .number(.nan), .number(2), .null, .bool(true)] {
            var appended = "["
            v.write(to: &appended)
            #expect(appended == "[" + v.jsonString)
        }
    }

    @Test func invalidJSONIsAGeometryEncodingError() {
        let error = #expect(throws: GeometryError.self) { try JSONValue.parse("{\"a\":") }
        #expect(error?.code == .invalidEncoding)
    }

    /// The byte parser agrees with Foundation's decoder on valid documents.
    @Test func agreesWithJSONDecoder() throws {
        let documents = [
            #"{"a":1,"b":-0,"c":1.5e3,"d":-2.25E-2,"e":"\u00e9\ud83d\ude00 \/ \b\f\t","f":[[],{}],"g":null,"h":false}"#,
            #"  [ 1 , 2 ,"x" ]  "#, #""plain""#, "0", "-9223372036854775808", "9223372036854775807", "9223372036854775808", "123456789012345678901234",
            #"{"dup":1,"dup":2}"#, #"["tab\tquote\"backslash\\"]"#, "\"é中🌍\"",
        ]
        for d in documents {
            let ours = try JSONValue.parse(d)
            let foundation = try JSONDecoder().decode(JSONValue.self, from: Data(d.utf8))
            #expect(ours == foundation, "\(d)")
        }
        #expect(try JSONValue.parse("9223372036854775808") == .number(9_223_372_036_854_775_808))
        #expect(try JSONValue.parse(#""\ud83d\ude00""#) == .string("😀"))
    }

    @Test func malformedDocumentsAreRefused() {
        let bad = [
            "", " ", "{", "[1,]", "{\"a\"}", "{\"a\":1,}", "01", "-", "1.", ".5", "1e", "+1", "tru", "nul", "\"unterminated",
            "\"bad \\x escape\"", "\"\\ud800 lone surrogate\"", "\"ctrl \u{01}\"", "[1] 2", "{'a':1}", "NaN", "1e999",
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ]
        for d in bad {
            #expect(throws: GeometryError.self, "\(d.prefix(30))") { try JSONValue.parse(d) }
        }
        #expect(throws: GeometryError.self) { try JSONValue.parse(Data([0x22, 0xFF, 0xFE, 0x22])) }
    }

    /// A list of strings written straight is the text of the array of string values.
    @Test func stringArraysWrittenStraightMatchTheirValues() throws {
        let lists: [[String]] = [
            [], ["{6A1E2F40-1111-4C2B-9D11-0123456789AB}"], ["a", "", "quote \" and \\ back", "tab\tnew\nline\u{1}", "é 漢字 🙂"],
            (0..<1000).map { "{\(String($0, radix: 16))-\($0)}" },
        ]
        for list in lists {
            let text = JSONValue.arrayText(list)
            #expect(text == JSONValue.array(list.map { .string($0) }).jsonString)
            #expect(try JSONValue.parse(text) == .array(list.map { .string($0) }))
        }
        #expect(JSONValue.arrayText(["x", "y"].dropFirst()) == #"["y"]"#)
    }
}
