import Foundation
import NIOCore
@testable import OutpostREST
import OutpostTestSupport
import Testing

/// multipart/form-data as the server reads it and the client writes it: what one writes the other
/// reads back, names that would break a header line are made safe, and bodies that are not the
/// format are refused with a typed error, not a crash.
@Suite("Multipart forms")
struct MultipartFormTests {
    @Test func aBodyWrittenIsReadBackFieldForFieldWithItsFile() throws {
        let boundary = "outpost-\(UUID().uuidString)"
        let photo = Data((0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }) + Data("\r\n--not-the-boundary\r\n".utf8)
        let fields = [("f", "json"), ("where", "status = 'open' AND notes LIKE '%\r\n%'"), ("empty", ""), ("nimi", "Töölönkatu 4")]
        let body = MultipartForm.body(
            fields: fields, file: MultipartForm.File(field: "attachment", filename: "kivijalka \"1\".jpg", contentType: "image/jpeg", data: photo),
            boundary: boundary)
        let form = try MultipartForm(parsing: ByteBuffer(bytes: body), boundary: boundary)
        #expect(form.fields.map(\.0) == fields.map(\.0) && form.fields.map(\.1) == fields.map(\.1))
        let file = try #require(form.part(named: "attachment"))
        #expect(file.data == photo && file.contentType == "image/jpeg" && file.filename == "kivijalka _1_.jpg")
        #expect(file.header("content-disposition")?.hasPrefix("form-data") == true)
    }

    /// A name holding a line break would end its header line and start a header of the
    /// caller's choosing; it is written with `_` in its place.
    @Test func aNameCannotAddAHeader() throws {
        let boundary = "b0undary"
        let body = MultipartForm.body(
            fields: [("a\r\nContent-Type: text/evil", "1")], file: MultipartForm.File(field: "file", filename: "x\r\nX-Evil: 1", data: Data("2".utf8)),
            boundary: boundary)
        let form = try MultipartForm(parsing: ByteBuffer(bytes: body), boundary: boundary)
        #expect(form.parts.count == 2)
        #expect(form.parts.allSatisfy { part in part.headers.allSatisfy { $0.name.lowercased() == "content-disposition" || $0.name == "Content-Type" } })
        #expect(form.parts[0].contentType == nil && form.fields.first?.1 == "1")
        #expect(form.part(named: "file")?.filename == "x__X-Evil: 1" && form.part(named: "file")?.contentType == "application/octet-stream")
    }

    /// Quoted parameters as browsers and curl write them: `;` inside the quotes is part of the
    /// name, `\"` a quote; unquoted values are read too.
    @Test func quotedFileNamesKeepTheirSemicolonsAndQuotes() throws {
        let text = """
            --b\r\nContent-Disposition: form-data; name="attachment"; filename="kerb; after \\"repair\\".jpg"\r\n\r\n1\r\n\
            --b\r\ncontent-disposition: form-data;name=plain ; filename = a.jpg;filename="second.jpg"\r\n\r\n2\r\n--b--\r\n
            """
        let form = try MultipartForm(parsing: ByteBuffer(string: text), boundary: "b")
        #expect(form.parts.map(\.filename) == ["kerb; after \"repair\".jpg", "a.jpg"] && form.parts.map(\.name) == ["attachment", "plain"])
    }

    /// Found by fuzzing (Tests/Fuzz/corpus/multipart/regression-*): the guard against the
    /// parser's crash on a non-ASCII header name read lines as LF-ended, the parser as CR LF-ended,
    /// so an LF inside a header value hid the next name from the guard and the process stopped.
    /// And a value holding the delimiter with no CR LF before it (not a delimiter to the parser)
    /// made the guard refuse a well-formed body. And the first delimiter the guard took was the
    /// first in the bytes, where the parser's may be a later one.
    @Test func theHeaderNameGuardReadsLinesAsTheParserDoes() throws {
        let b = "fuzzb0undary"
        let hidden: [UInt8] = Array("--\(b)\r\nContent-Disposition: form-data; name=\"f\"\n\r\n".utf8) + [0xC3, 0xBF] + Array(": x\r\n\r\n1\r\n--\(b)--\r\n".utf8)
        #expect {
            try MultipartForm(parsing: ByteBuffer(bytes: hidden), boundary: b)
        } throws: {
            ($0 as? MultipartFormError)?.reason == .headerNameNotASCII
        }
        let value = "-- not a part: --\(b)\r\n\u{FF}\u{D8}: 1\r\n\r\n"
        let body = MultipartForm.body(fields: [("note", value)], boundary: b)
        #expect(try MultipartForm(parsing: ByteBuffer(bytes: body), boundary: b).fields.first?.1 == value)
        // The parser's preamble matcher passes over the first "--fuzzb0undary" (it restarts
        // after "--fuzz-" without looking at that hyphen again) and takes one that follows no
        // CR LF: the guard must find the delimiter the parser finds.
        let missed: [UInt8] = Array("--fuzz--\(b)\r\nA: 1\r\n\r\nx\r\n--f\0--\(b)\r\n".utf8) + [0xC3, 0xBF] + Array(": 1\r\n\r\nx\r\n--\(b)--\r\n".utf8)
        #expect(MultipartForm.firstDelimiterEnd(ByteBuffer(bytes: missed).readableBytesView, boundary: b) == missed.firstRange(of: Array("\0--\(b)".utf8))?.upperBound)
        #expect {
            try MultipartForm(parsing: ByteBuffer(bytes: missed), boundary: b)
        } throws: {
            ($0 as? MultipartFormError)?.reason == .headerNameNotASCII
        }
        // An empty boundary (which MultipartKit's parser takes for a programming error and stops
        // the process on) is refused, whatever the body's header names.
        for name in [Array("A".utf8), [0xC3, 0xBF]] {
            #expect {
                try MultipartForm(parsing: ByteBuffer(bytes: Array("--\r\n".utf8) + name + Array(": 1\r\n\r\nx\r\n----\r\n".utf8)), boundary: "")
            } throws: {
                ($0 as? MultipartFormError)?.reason == .emptyBoundary
            }
        }
        for regression in ["regression-lf-in-a-header-value", "regression-delimiter-inside-a-value", "regression-missed-first-delimiter", "regression-slow-round-trip"] {
            // The fuzz target's first byte picks reading (even) or a round trip (odd).
            let input = try Data(contentsOf: Repository.root.appendingPathComponent("Tests/Fuzz/corpus/multipart/\(regression)"))
            _ = try? MultipartForm(parsing: Data(input.dropFirst()), boundary: b)
        }
    }

    /// The header-name guard walks the body once, state for state as MultipartKit's parser
    /// does: every part of a long body is read, empty values and a file of CRs (each a possible
    /// delimiter's start) included.
    @Test func aBodyOfManyPartsIsReadWhole() throws {
        let fields = (0..<2_000).map { ("f\($0)", $0.isMultiple(of: 7) ? "" : "value\r\n \($0)") }
        let file = MultipartForm.File(field: "file", filename: "a.bin", data: Data(repeating: 0x0D, count: 1_000) + Data("\r\n--b".utf8.dropLast()))
        let body = MultipartForm.body(fields: fields, file: file, boundary: "b")
        let form = try MultipartForm(parsing: ByteBuffer(bytes: body), boundary: "b")
        #expect(form.parts.count == fields.count + 1)
        #expect(form.fields.elementsEqual(fields) { $0 == $1 })
        #expect(form.parts.last?.data == file.data)
        // A non-ASCII header name in the last part is still found after them.
        var tampered = body
        let at = try #require(tampered.lastRange(of: Data("Content-Type".utf8)))
        tampered.replaceSubrange(at.lowerBound..<at.lowerBound + 2, with: [0xC3, 0xBF])
        #expect {
            try MultipartForm(parsing: ByteBuffer(bytes: tampered), boundary: "b")
        } throws: {
            ($0 as? MultipartFormError)?.reason == .headerNameNotASCII
        }
    }

    @Test func theBoundaryComesFromTheContentType() {
        #expect(MultipartForm.boundary(contentType: "multipart/form-data; boundary=abc") == "abc")
        #expect(MultipartForm.boundary(contentType: "Multipart/Form-Data; charset=utf-8; Boundary=\"a b c\"") == "a b c")
        #expect(MultipartForm.boundary(contentType: "multipart/form-data") == nil)
        #expect(MultipartForm.boundary(contentType: "multipart/form-data; boundary=") == nil)
        #expect(MultipartForm.boundary(contentType: "application/x-www-form-urlencoded; boundary=abc") == nil)
    }

    @Test func aBodyThatIsNotTheFormatIsRefused() {
        let boundary = "b0undary"
        let cases: [(String, MultipartFormError.Reason)] = [
            ("--b0undary\r\nContent-Disposition form-data\r\n\r\nx\r\n--b0undary--\r\n", .unreadable),
            ("--b0undary\r\nNäme: 1\r\n\r\nx\r\n--b0undary--\r\n", .headerNameNotASCII),
        ]
        for (text, reason) in cases {
            #expect(throws: MultipartFormError.self) {
                do {
                    _ = try MultipartForm(parsing: ByteBuffer(string: text), boundary: boundary)
                } catch let error as MultipartFormError {
                    #expect(error.reason == reason, "\(text)")
                    throw error
                }
            }
        }
    }
}
