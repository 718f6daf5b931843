import Foundation

/// How a locator turns text into index terms and query tokens.
///
/// Both sides run through the same steps so that what the user types meets what was indexed:
/// NFC composition, lower case, a split into runs of letters and digits (everything else
/// separates; long letter runs and digit runs are split where they touch, so "Mannerheimintie12"
/// is two tokens while "12a" stays one). A token with diacritics also has a folded form
/// ("töölönkatu" → "toolonkatu") indexed beside it — an alternative, not a replacement, so an
/// exact spelling still scores higher. Compound street names ending in a common street word
/// ("Aleksanterinkatu") also index their parts ("aleksanterin", "katu").
public enum LocatorText {
    /// A token of user text.
    public struct Token: Hashable, Sendable {
        /// The token, lower-cased.
        public var text: String
        /// Written with a trailing period ("Mannerheimint."): an abbreviation, matched as a prefix.
        public var abbreviated: Bool
    }

    /// Words that end compound street names (Finnish, Swedish, English, German), longest first
    /// so that "puistotie" splits as "puisto" + "tie" only when "puistotie" itself is not a word.
    static let streetWords: [String] = [
        "puistotie", "puistikko", "rantatie", "katu", "kuja", "tie", "polku", "tori", "ranta", "puisto",
        "väylä", "kaari", "rinne", "aukio", "silta", "laituri", "portti", "piha", "linja", "kaarre",
        "gatan", "vägen", "gränd", "stigen", "torget", "strasse", "straße", "weg", "platz", "gasse",
    ].sorted { $0.count > $1.count }

    /// Abbreviation groups: a query token in a group also matches the group's other members.
    static let synonymGroups: [[String]] = [
        ["st", "street", "saint"], ["ave", "av", "avenue"], ["rd", "road"], ["blvd", "boulevard"],
        ["dr", "drive"], ["ln", "lane"], ["ct", "court"], ["pl", "place"], ["sq", "square"],
        ["hwy", "highway"], ["pkwy", "parkway"], ["mt", "mount"], ["ft", "fort"],
        ["n", "north"], ["s", "south"], ["e", "east"], ["w", "west"],
        ["k", "katu"], ["t", "tie"], ["str", "strasse", "straße"], ["g", "gatan"], ["v", "vägen"],
    ]
    static let synonyms: [String: [String]] = {
        var out: [String: [String]] = [:]
        for group in synonymGroups {
            for word in group { out[word, default: []] += group.filter { $0 != word } }
        }
        return out
    }()

    /// The tokens of `text`.
    public static func tokens(_ text: String) -> [Token] {
        if let ascii = asciiTokens(text) { return ascii }
        let composed = text.precomposedStringWithCanonicalMapping
        var out: [Token] = []
        // Runs of letters (1) or digits (2) within the current alphanumeric word.
        var runs: [(kind: Int, scalars: String.UnicodeScalarView)] = []
        func flush(abbreviated: Bool) {
            guard !runs.isEmpty else { return }
            // A one-letter run stays with the digits beside it ("12a", "a1"); longer runs of
            // letters are words of their own ("tie12" → "tie", "12").
            var pieces: [String.UnicodeScalarView] = []
            for (i, run) in runs.enumerated() {
                let previous = i > 0 ? runs[i - 1] : nil
                if !pieces.isEmpty, let previous,
                   (run.kind == 1 && run.scalars.count == 1) || (previous.kind == 1 && previous.scalars.count == 1 && run.kind == 2)
                {
                    pieces[pieces.count - 1].append(contentsOf: run.scalars)
                } else {
                    pieces.append(run.scalars)
                }
            }
            for (i, piece) in pieces.enumerated() {
                out.append(Token(text: String(piece).lowercased(), abbreviated: abbreviated && i == pieces.count - 1))
            }
            runs.removeAll(keepingCapacity: true)
        }
        for scalar in composed.unicodeScalars {
            let kind = classify(scalar)
            if kind == 0 {
                flush(abbreviated: scalar == ".")
            } else if let last = runs.last, last.kind == kind {
                runs[runs.count - 1].scalars.append(scalar)
            } else {
                var view = String.UnicodeScalarView()
                view.append(scalar)
                runs.append((kind, view))
            }
        }
        flush(abbreviated: false)
        return out
    }

    /// ``tokens(_:)`` for ASCII text, on its bytes (most addresses); nil for other text.
    static func asciiTokens(_ text: String) -> [Token]? {
        var text = text
        return text.withUTF8 { bytes -> [Token]? in
            var out: [Token] = []
            var runs: [(kind: Int, start: Int, end: Int)] = []
            func flush(abbreviated: Bool) {
                guard !runs.isEmpty else { return }
                // As for other text: one-letter runs stay with the digits beside them.
                var pieces: [(Int, Int)] = []
                for (i, run) in runs.enumerated() {
                    let previous = i > 0 ? runs[i - 1] : nil
                    if !pieces.isEmpty, let previous,
                       (run.kind == 1 && run.end - run.start == 1) || (previous.kind == 1 && previous.end - previous.start == 1 && run.kind == 2)
                    {
                        pieces[pieces.count - 1].1 = run.end
                    } else {
                        pieces.append((run.start, run.end))
                    }
                }
                for (i, piece) in pieces.enumerated() {
                    let token = String(unsafeUninitializedCapacity: piece.1 - piece.0) { buffer in
                        for j in piece.0..<piece.1 {
                            let b = bytes[j]
                            buffer[j - piece.0] = b >= 0x41 && b <= 0x5A ? b | 0x20 : b
                        }
                        return piece.1 - piece.0
                    }
                    out.append(Token(text: token, abbreviated: abbreviated && i == pieces.count - 1))
                }
                runs.removeAll(keepingCapacity: true)
            }
            for (i, b) in bytes.enumerated() {
                guard b < 0x80 else { return nil }
                let kind = b >= 0x30 && b <= 0x39 ? 2 : (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A ? 1 : 0
                if kind == 0 {
                    flush(abbreviated: b == 0x2E)
                } else if let last = runs.last, last.kind == kind, last.end == i {
                    runs[runs.count - 1].end = i + 1
                } else {
                    runs.append((kind, i, i + 1))
                }
            }
            flush(abbreviated: false)
            return out
        }
    }

    /// 1 for letters, 2 for digits, 0 for separators (what SQLite's unicode61 tokenizer also
    /// treats as separators, so index terms pass through it unchanged).
    @inline(__always) static func classify(_ scalar: Unicode.Scalar) -> Int {
        if scalar.value < 0x80 {
            let v = scalar.value
            if v >= 0x30 && v <= 0x39 { return 2 }
            if (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A) { return 1 }
            return 0
        }
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter: return 1
        case .decimalNumber, .letterNumber, .otherNumber: return 2
        default: return 0
        }
    }

    /// `token` without diacritics ("töölö" → "toolo"); the token itself when it has none.
    public static func fold(_ token: String) -> String {
        if token.utf8.allSatisfy({ $0 < 0x80 }) { return token }
        // The letters of European street names, without a round trip through NFD.
        var quick = String.UnicodeScalarView()
        for scalar in token.unicodeScalars {
            if scalar.value < 0x80 {
                quick.append(scalar)
            } else if let plain = latinFolds[scalar] {
                quick.append(contentsOf: plain.unicodeScalars)
            } else {
                return slowFold(token)
            }
        }
        return String(quick)
    }

    static let latinFolds: [Unicode.Scalar: String] = {
        var out: [Unicode.Scalar: String] = [:]
        let pairs: [(String, String)] = [
            ("àáâãäåāăą", "a"), ("çćč", "c"), ("ďđ", "d"), ("èéêëēėęě", "e"), ("ìíîïīį", "i"), ("ñńň", "n"),
            ("òóôõöøōő", "o"), ("ùúûüūůű", "u"), ("ýÿ", "y"), ("śšș", "s"), ("źżž", "z"), ("ťț", "t"), ("ł", "l"),
            ("ř", "r"), ("ğ", "g"), ("ß", "ss"), ("æ", "ae"), ("œ", "oe"), ("þ", "th"), ("ð", "d"),
        ]
        for (letters, plain) in pairs {
            for scalar in letters.unicodeScalars { out[scalar] = plain }
        }
        return out
    }()

    static func slowFold(_ token: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in token.decomposedStringWithCanonicalMapping.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .nonspacingMark, .spacingMark, .enclosingMark: continue
            default:
                switch scalar {
                case "ß": out.append(contentsOf: "ss".unicodeScalars)
                case "ø": out.append("o")
                case "æ": out.append(contentsOf: "ae".unicodeScalars)
                case "đ": out.append("d")
                case "ł": out.append("l")
                default: out.append(scalar)
                }
            }
        }
        return String(out)
    }

    /// The parts of a compound street name ("aleksanterinkatu" → ["aleksanterin", "katu"]), or
    /// nil when it is not one.
    public static func parts(_ token: String) -> [String]? {
        // The shortest street word is three letters and a stem at least three more.
        guard token.utf8.count >= 6 else { return nil }
        for word in streetWords where token.utf8.last == word.utf8.last && token.hasSuffix(word) {
            let stem = token.dropLast(word.count)
            guard stem.count >= 3 else { continue }
            return [String(stem), word]
        }
        return nil
    }

    /// The index terms of a field's text: each token, its folded form, its parts and theirs.
    public static func indexTerms(_ text: String) -> [String] {
        var out: [String] = []
        for token in tokens(text) { appendTerms(of: token.text, to: &out) }
        return out
    }

    static func appendTerms(of token: String, to out: inout [String]) {
        func add(_ term: String) { if !out.contains(term) { out.append(term) } }
        add(token)
        add(fold(token))
        if let parts = parts(token) {
            for part in parts {
                add(part)
                add(fold(part))
            }
        }
    }

    /// Whether a token is a house-number-like token (starts with a digit).
    static func isNumeric(_ token: String) -> Bool { token.unicodeScalars.first.map { classify($0) == 2 } ?? false }

    /// The variants of `token` with one character deleted (the keys of the typo index).
    static func deletions(_ token: String) -> [String] {
        let scalars = Array(token.unicodeScalars)
        guard scalars.count > 1 else { return [] }
        var out: [String] = []
        out.reserveCapacity(scalars.count)
        for i in scalars.indices {
            var v = String.UnicodeScalarView()
            v.append(contentsOf: scalars[..<i])
            v.append(contentsOf: scalars[(i + 1)...])
            let s = String(v)
            if out.last != s { out.append(s) }
        }
        return out
    }

    /// The optimal-string-alignment distance (insert, delete, substitute, swap neighbours), or
    /// `limit + 1` as soon as it is certain to exceed `limit`.
    static func editDistance(_ a: String, _ b: String, limit: Int = 1) -> Int {
        // Most pairs differ in length by more than the limit: answered from the byte counts
        // (a scalar is 1–4 bytes) before anything is allocated.
        let ua = a.utf8.count, ub = b.utf8.count
        if abs(ua - ub) > 4 * limit + 3 * min(ua, ub) / 4 { return limit + 1 }
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        if abs(x.count - y.count) > limit { return limit + 1 }
        if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
        var previous2 = [Int](repeating: 0, count: y.count + 1)
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            var rowMin = current[0]
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] { d = min(d, previous2[j - 2] + 1) }
                current[j] = d
                rowMin = min(rowMin, d)
            }
            if rowMin > limit { return limit + 1 }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return min(previous[y.count], limit + 1)
    }
}
