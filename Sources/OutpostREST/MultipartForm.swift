import Foundation
import MultipartKit
import NIOCore

/// A `multipart/form-data` body (RFC 7578), as ArcGIS clients post uploads and attachments (and
/// the ArcGIS API for Python every operation): read with MultipartKit's parser, written for
/// ``RESTClient/upload(_:file:)``.
public struct MultipartForm: Sendable {
    /// One part: its headers and bytes.
    public struct Part: Sendable {
        /// The part's header lines, names as sent.
        public var headers: [(name: String, value: String)]
        /// The part's bytes.
        public var data: Data

        /// A header's value, its name matched without regard to case.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        /// The form field the part fills (`Content-Disposition`'s `name`).
        public var name: String? { disposition["name"] }
        /// The file name a file part came with.
        public var filename: String? { disposition["filename"] }
        /// The part's `Content-Type`, when given.
        public var contentType: String? { header("Content-Type") }

        /// `Content-Disposition`'s parameters (`name`, `filename`).
        var disposition: [String: String] { MultipartForm.parameters(of: header("Content-Disposition") ?? "") }
    }

    /// The parts, in the order they came.
    public var parts: [Part]

    /// Reads `body`, whose parts are separated by `boundary` (``boundary(contentType:)``).
    /// - Throws: ``MultipartFormError``: an empty boundary, a part's header name that is not
    ///   ASCII, or a body the parser cannot read.
    public init(parsing body: ByteBuffer, boundary: String) throws {
        // MultipartKit's parser stops the process on an empty boundary.
        guard !boundary.isEmpty else { throw MultipartFormError(.emptyBoundary) }
        guard Self.headerNamesAreASCII(body, boundary: boundary) else { throw MultipartFormError(.headerNameNotASCII) }
        let parser = MultipartParser(boundary: boundary)
        var parts: [Part] = []
        var headers: [(name: String, value: String)] = []
        var data = Data()
        parser.onHeader = { headers.append((name: $0, value: $1)) }
        parser.onBody = { buffer in data.append(contentsOf: buffer.readableBytesView) }
        parser.onPartComplete = {
            parts.append(Part(headers: headers, data: data))
            headers = []
            data = Data()
        }
        do {
            try parser.execute(body)
        } catch {
            throw MultipartFormError(.unreadable)
        }
        self.parts = parts
    }

    /// Reads `data`, as the `ByteBuffer` form does.
    public init(parsing data: Data, boundary: String) throws {
        try self.init(parsing: ByteBuffer(bytes: data), boundary: boundary)
    }

    /// The text fields: parts with a name and no file name, as (name, value); bytes that are not
    /// UTF-8 are replaced.
    public var fields: [(String, String)] {
        parts.compactMap { part in
            guard let name = part.name, part.filename == nil else { return nil }
            return (name, String(decoding: part.data, as: UTF8.self))
        }
    }

    /// The first part filling the field `name`.
    public func part(named name: String) -> Part? { parts.first { $0.name == name } }

    /// The boundary of a `multipart/form-data` content type; nil for any other type, or none
    /// given.
    public static func boundary(contentType: String) -> String? {
        guard contentType.lowercased().hasPrefix("multipart/form-data") else { return nil }
        for piece in contentType.split(separator: ";") {
            let kv = piece.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0].lowercased() == "boundary" {
                let boundary = kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return boundary.isEmpty ? nil : boundary
            }
        }
        return nil
    }

    /// A header's parameters after its first value (`form-data; name="a"; filename="b;c.jpg"`),
    /// names lowercased. A quoted value may hold `;` and `\"` (a quote); the first of a name
    /// given twice counts.
    static func parameters(of header: String) -> [String: String] {
        let bytes = Array(header.utf8)
        let (semicolon, equals, quote, backslash) = (UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "\""), UInt8(ascii: "\\"))
        var out: [String: String] = [:]
        var i = bytes.firstIndex(of: semicolon) ?? bytes.endIndex
        while i < bytes.endIndex {
            i += 1
            let nameStart = i
            while i < bytes.endIndex, bytes[i] != equals, bytes[i] != semicolon { i += 1 }
            let name = String(decoding: bytes[nameStart..<i], as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased()
            guard i < bytes.endIndex, bytes[i] == equals else { continue }
            i += 1
            while i < bytes.endIndex, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
            var value: [UInt8] = []
            if i < bytes.endIndex, bytes[i] == quote {
                i += 1
                while i < bytes.endIndex, bytes[i] != quote {
                    if bytes[i] == backslash, i + 1 < bytes.endIndex, bytes[i + 1] == quote || bytes[i + 1] == backslash { i += 1 }
                    value.append(bytes[i])
                    i += 1
                }
                while i < bytes.endIndex, bytes[i] != semicolon { i += 1 }
            } else {
                let start = i
                while i < bytes.endIndex, bytes[i] != semicolon { i += 1 }
                value = Array(String(decoding: bytes[start..<i], as: UTF8.self).trimmingCharacters(in: .whitespaces).utf8)
            }
            if !name.isEmpty, out[name] == nil { out[name] = String(decoding: value, as: UTF8.self) }
        }
        return out
    }

    /// A file for ``body(fields:file:boundary:)``.
    public struct File: Sendable {
        /// The field it fills.
        public var field: String
        /// The file name sent with it.
        public var filename: String
        /// Its media type.
        public var contentType: String
        /// Its bytes.
        public var data: Data

        /// A file for the field `field`.
        public init(field: String, filename: String, contentType: String = "application/octet-stream", data: Data) {
            (self.field, self.filename, self.contentType, self.data) = (field, filename, contentType, data)
        }
    }

    /// A body holding `fields` as text parts, then `file`, separated by `boundary`. Quotes,
    /// backslashes and line breaks in names become `_` (a name cannot end its quotes or its
    /// header line early); a value holding the delimiter (`\r\n--` and the boundary) would end
    /// its part early, so pick a boundary no value holds (a random one does).
    public static func body(fields: [(String, String)], file: File? = nil, boundary: String) -> Data {
        func quoted(_ name: String) -> String {
            var safe = String.UnicodeScalarView()
            for scalar in name.unicodeScalars { safe.append("\"\\\r\n".unicodeScalars.contains(scalar) ? "_" : scalar) }
            return "\"" + String(safe) + "\""
        }
        var body = Data()
        for (name, value) in fields {
            body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\(quoted(name))\r\n\r\n".utf8)
            body += Data(value.utf8)
            body += Data("\r\n".utf8)
        }
        if let file {
            body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\(quoted(file.field)); filename=\(quoted(file.filename))\r\n".utf8)
            body += Data("Content-Type: \(String(file.contentType.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }))\r\n\r\n".utf8)
            body += file.data
            body += Data("\r\n".utf8)
        }
        body += Data("--\(boundary)--\r\n".utf8)
        return body
    }

    /// Whether every header name of every part is ASCII. MultipartKit looks a header name's
    /// bytes up in a 128-entry table and stops the process on any byte from 0x80 up, so such a
    /// body is refused before it is parsed. Header values (a UTF-8 file name) may hold any byte.
    ///
    /// The body is walked as MultipartKit's parser walks it, state for state, once: the preamble
    /// up to where its matcher ends the first delimiter (``firstDelimiterEnd(_:boundary:)``);
    /// then CR LF; header lines, a name up to its colon (any other byte the parser does not
    /// allow in a name ends the walk: the parser stops there with a syntax error), a value up to
    /// CR, then LF; an empty line; the part's bytes up to the next CR LF `--boundary`; after it,
    /// CR LF and the next part's headers, or `--` and the end. So the bytes it checks are the
    /// ones the parser looks up, in one pass over the body. (It walked the headers after every
    /// CR LF `--boundary` in the bytes, each found by a generic search: half the time of a read
    /// in the fuzz build, where a round trip of many parts passed libFuzzer's one-second bound.)
    static func headerNamesAreASCII(_ body: ByteBuffer, boundary: String) -> Bool {
        let delimiter = Array("\r\n--\(boundary)".utf8)
        return body.withUnsafeReadableBytes { bytes -> Bool in
            guard var i = firstDelimiterEnd(bytes, boundary: boundary) else { return true }
            let (cr, lf, colon, hyphen) = (UInt8(ascii: "\r"), UInt8(ascii: "\n"), UInt8(ascii: ":"), UInt8(ascii: "-"))
            func next() -> UInt8? {
                guard i < bytes.endIndex else { return nil }
                defer { i += 1 }
                return bytes[i]
            }
            // After a delimiter: CR LF, then the part's header lines.
            while next() == cr, next() == lf {
                headers: while true {
                    var length = 0
                    name: while true {
                        guard let byte = next() else { return true }
                        switch byte {
                        case colon where length > 0: break name
                        case cr where length == 0: break headers
                        case 0x80...: return false
                        case _ where allowedInHeaderName(byte): length += 1
                        default: return true
                        }
                    }
                    while true {
                        guard let byte = next() else { return true }
                        if byte == cr { break }
                    }
                    guard next() == lf else { return true }
                }
                guard next() == lf else { return true }
                // The part's bytes, up to the next delimiter (a CR that starts none is data).
                var matched = 0
                while matched < delimiter.count {
                    guard let byte = next() else { return true }
                    if byte == delimiter[matched] {
                        matched += 1
                    } else {
                        matched = byte == cr ? 1 : 0
                    }
                }
                // `--` ends the body; CR LF starts a part.
                guard i < bytes.endIndex, bytes[i] != hyphen else { return true }
            }
            return true
        }
    }

    /// Whether MultipartKit's parser takes `byte` (below 0x80) in a header name: a token's
    /// characters (RFC 822: printable ASCII but for the specials and space).
    private static func allowedInHeaderName(_ byte: UInt8) -> Bool { headerNameBytes[Int(byte)] }

    /// ``allowedInHeaderName(_:)`` for each byte below 0x80, made once: the guard asks for every
    /// byte of every header name.
    private static let headerNameBytes: [Bool] = (0..<0x80).map { byte in
        (0x21...0x7E).contains(byte) && !"()<>@,;:\\\"/[]?={} ".utf8.contains(UInt8(byte))
    }

    /// Where MultipartKit's preamble matcher ends its first delimiter, or nil if it finds none.
    /// The matcher is not a substring search: a hyphen at the start counts as the delimiter's
    /// CR LF and first hyphen, and a mismatch restarts it without looking at the byte again (at
    /// CR alone). So it can pass over the first "--boundary" in the bytes and take a later one
    /// that follows no CR LF; found by fuzzing (Tests/Fuzz/corpus/multipart/regression-missed-first-delimiter).
    static func firstDelimiterEnd<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, boundary: String) -> Int? where Bytes.Index == Int {
        let full = Array("\r\n--\(boundary)".utf8)
        var matched = 0
        for i in bytes.indices {
            let byte = bytes[i]
            if matched == 0, byte == full[2] {
                matched = 3
            } else if byte == full[matched] {
                matched += 1
            } else if matched > 0, byte == full[0] {
                matched = 1
            } else {
                matched = 0
            }
            if matched == full.count { return i + 1 }
        }
        return nil
    }
}

/// Why a ``MultipartForm`` could not be read.
public struct MultipartFormError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Hashable {
        /// The boundary given is empty.
        case emptyBoundary
        /// A part's header name holds a byte that is not ASCII.
        case headerNameNotASCII
        /// The body does not follow the format (no closing delimiter, a broken header line).
        case unreadable
    }

    /// What was wrong.
    public var reason: Reason

    /// An error for `reason`.
    public init(_ reason: Reason) { self.reason = reason }

    /// A sentence for the client.
    public var description: String {
        switch reason {
        case .emptyBoundary: "the multipart boundary is empty"
        case .headerNameNotASCII: "a part's header name is not ASCII"
        case .unreadable: "the multipart body cannot be read"
        }
    }
}
