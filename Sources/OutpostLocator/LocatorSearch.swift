import Foundation
import GRDB
import OutpostCore

/// Geocoding, suggestions and reverse geocoding over one connection to a locator file.
///
/// A search runs in two steps. Retrieval: each word of the text becomes a group of indexed terms
/// — itself, its folded form, its abbreviation's other forms, terms one edit away (through the
/// typo keys: every term's one-character deletions, so a lookup is a few index probes), and for
/// abbreviations ("Mannerheimint.") and the word being typed, terms it begins — and the full-text
/// indexes return the entries holding a term of every group (dropping groups one at a time when
/// nothing holds them all). Scoring: each candidate's own words are compared with the text's
/// (exact, folded, abbreviation, house number with another suffix, prefix, one edit), giving
/// 0–100 from how much of the text matched and how much of the candidate's street and house
/// number (or name) the text covered.
enum LocatorSearch {
    /// Words shorter than this are not matched with a typo ("tie" must be typed right).
    static let typoMinimumLength = 4
    /// Most words of the text looked at.
    static let maximumTokens = 16
    /// Most candidates scored per search.
    static let candidateLimit = 2_000
    /// A best score below this makes a geocode look again with each word left out.
    static let relaxBelow = 80.0

    struct QueryToken {
        var text: String
        var folded: String
        var alternatives: [String]
        /// The parts of a compound street name ("aleksanterinkatu" → "aleksanterin", "katu").
        var parts: [String]
        /// Matched as a prefix too: an abbreviation, or the word being typed in a suggestion.
        var prefix: Bool
        var numeric: Bool
        var weight: Double { Double(max(text.unicodeScalars.count, 1)) }
    }

    /// The words of `text`, with the last one a prefix when `typing` and the text does not end
    /// with a separator.
    /// The readings of `text`: its words as typed (words split by a stray space, as in "Manner
    /// heimintie", joined when only the join is a term) and, when it differs, a second reading
    /// with split house numbers joined ("1,6" → "16", "3 b" → "3b") — tried beside the first, as
    /// "2-4" is also a house number of its own.
    static func readings(_ text: String, typing: Bool, vocabulary: (Set<String>) throws -> Set<String>) throws -> [[QueryToken]] {
        let raw = Array(LocatorText.tokens(text).prefix(maximumTokens))
        guard !raw.isEmpty else { return [] }
        var probe = Set(raw.map(\.text))
        for (a, b) in zip(raw, raw.dropFirst()) { probe.insert(a.text + b.text) }
        let known = try vocabulary(probe)
        let endsTyping = typing && text.unicodeScalars.last.map { LocatorText.classify($0) != 0 } == true
        func join(numbers: Bool) -> [LocatorText.Token] {
            var joined: [LocatorText.Token] = []
            var i = 0
            while i < raw.count {
                let a = raw[i].text, b = i + 1 < raw.count ? raw[i + 1].text : ""
                let bothNumbers = LocatorText.isNumeric(a) && (LocatorText.isNumeric(b) || b.count == 1)
                // The word being typed is never joined to the one before: it is not finished.
                if i + 1 < raw.count, !(endsTyping && i + 1 == raw.count - 1), known.contains(a + b),
                   numbers ? bothNumbers : (!bothNumbers && (!known.contains(a) || !known.contains(b)))
                {
                    joined.append(LocatorText.Token(text: raw[i].text + raw[i + 1].text, abbreviated: raw[i + 1].abbreviated))
                    i += 2
                } else {
                    joined.append(raw[i])
                    i += 1
                }
            }
            return joined
        }
        func tokens(_ words: [LocatorText.Token]) -> [QueryToken] {
            words.enumerated().map { index, token in
                let letters = !LocatorText.isNumeric(token.text)
                return QueryToken(
                    text: token.text, folded: LocatorText.fold(token.text), alternatives: LocatorText.synonyms[token.text] ?? [],
                    parts: LocatorText.parts(token.text) ?? [],
                    prefix: (token.abbreviated && letters && token.text.unicodeScalars.count >= 2) || (endsTyping && index == words.count - 1),
                    numeric: !letters)
            }
        }
        let plain = join(numbers: false), numbers = join(numbers: true)
        return plain.map(\.text) == numbers.map(\.text) ? [tokens(plain)] : [tokens(plain), tokens(numbers)]
    }

    // MARK: - Retrieval

    /// What a word can stand for, as full-text phrases: the indexed terms it may be (quoted) and,
    /// for a prefix of two or more letters, the prefix itself (`"manne"*`, which FTS5 expands
    /// to every term it begins). Empty when nothing indexed matches.
    static func phrases(for token: QueryToken, in db: Database, prefixLimit: Int = 24) throws -> [String] {
        var candidates = Set([token.text, token.folded] + token.alternatives)
        if token.folded.unicodeScalars.count >= typoMinimumLength {
            let keys = [token.folded] + LocatorText.deletions(token.folded)
            let placeholders = Array(repeating: "?", count: keys.count).joined(separator: ",")
            let near = try String.fetchAll(
                db, sql: "SELECT term FROM typo_keys WHERE key IN (\(placeholders)) UNION SELECT term FROM vocabulary WHERE term IN (\(placeholders))",
                arguments: StatementArguments(keys + keys))
            for term in near where LocatorText.editDistance(token.folded, LocatorText.fold(term)) <= 1 { candidates.insert(term) }
        }
        var phrases = try known(candidates, in: db).sorted().map { "\"\($0)\"" }
        guard token.prefix else { return phrases }
        if token.folded.unicodeScalars.count >= 2 {
            for prefix in Set([token.text, token.folded]) where try String.fetchOne(
                db, sql: "SELECT term FROM vocabulary WHERE term >= ? AND term < ? LIMIT 1", arguments: [prefix, prefix + "\u{10FFFF}"]) != nil
            {
                phrases.append("\"\(prefix)\"*")
            }
        } else {
            // One letter: the terms it begins that most entries hold.
            let begun = try String.fetchAll(db, sql: """
                SELECT term FROM (SELECT term, count FROM vocabulary WHERE term >= ? AND term < ? LIMIT 2000)
                ORDER BY count DESC LIMIT ?
                """, arguments: [token.folded, token.folded + "\u{10FFFF}", prefixLimit])
            phrases += begun.filter { !candidates.contains($0) }.map { "\"\($0)\"" }
        }
        return phrases
    }

    static func known(_ terms: Set<String>, in db: Database) throws -> Set<String> {
        guard !terms.isEmpty else { return [] }
        let list = Array(terms)
        let placeholders = Array(repeating: "?", count: list.count).joined(separator: ",")
        return Set(try String.fetchAll(db, sql: "SELECT term FROM vocabulary WHERE term IN (\(placeholders))", arguments: StatementArguments(list)))
    }

    /// A full-text expression needing a phrase of every group. Terms are letters and digits
    /// only (LocatorText), quoted, so user text can never become FTS5 syntax.
    static func expression(_ groups: [[String]]) -> String {
        groups.map { "(" + $0.joined(separator: " OR ") + ")" }.joined(separator: " AND ")
    }

    /// Entries holding a term of every group, from both indexes.
    static func retrieve(_ groups: [[String]], in db: Database, limit: Int = candidateLimit) throws -> [Row] {
        guard !groups.isEmpty else { return [] }
        let match = expression(groups)
        var rows = try Row.fetchAll(
            db, sql: "SELECT e.* FROM place_index JOIN entries e ON e.id = place_index.rowid WHERE place_index MATCH ? LIMIT ?",
            arguments: [match, limit / 8])
        rows += try Row.fetchAll(
            db, sql: "SELECT e.* FROM address_index JOIN entries e ON e.id = address_index.rowid WHERE address_index MATCH ? LIMIT ?",
            arguments: [match, limit])
        return rows
    }

    /// Candidates for `tokens`: entries holding every group, and — when none does, or when
    /// `relaxAlways` — also those holding all groups but one (a mistyped house number or a stray
    /// letter still finds its street).
    static func candidates(_ tokens: [QueryToken], in db: Database, relax: (([Row]) -> Bool)? = nil) throws -> [Row] {
        var resolved: [(token: QueryToken, phrases: [String])] = []
        for token in tokens {
            let phrases = try phrases(for: token, in: db)
            if !phrases.isEmpty { resolved.append((token, phrases)) }
        }
        let groups = resolved.map(\.phrases)
        guard !groups.isEmpty else { return [] }
        var out = try retrieve(groups, in: db)
        guard groups.count > 1, out.isEmpty || relax?(out) == true else { return out }
        var seen = Set(out.map { $0[0] as Int64 })
        for left in groups.indices {
            var rest = groups
            rest.remove(at: left)
            for row in try retrieve(rest, in: db) where seen.insert(row[0]).inserted { out.append(row) }
            if out.count >= candidateLimit * 2 { break }
        }
        // Still nothing: the words alone, without numbers; then the longest word alone.
        if out.isEmpty {
            let words = resolved.filter { !$0.token.numeric }
            if words.count < groups.count, !words.isEmpty { out = try retrieve(words.map(\.phrases), in: db) }
            if out.isEmpty, let longest = words.max(by: { $0.token.weight < $1.token.weight }) { out = try retrieve([longest.phrases], in: db) }
        }
        return out
    }

    /// Every candidate for `text` scored, each entry once with its best reading's score. While
    /// `typing`, the words typed in full find the candidates and the one being typed ranks them.
    static func search(_ text: String, typing: Bool, in db: Database, geographic: Bool = true) throws -> [Scored] {
        var best: [Int64: Scored] = [:]
        for tokens in try readings(text, typing: typing, vocabulary: { try known($0, in: db) }) {
            // Each candidate is scored once per reading, however many retrievals return it.
            var cache: [Int64: Scored] = [:]
            func scored(_ rows: [Row]) -> [Scored] {
                rows.map { row in
                    let id: Int64 = row[0]
                    if let done = cache[id] { return done }
                    let s = score(EntryRecord(row: row), id: id, tokens: tokens)
                    cache[id] = s
                    return s
                }
            }
            var rows: [Row]
            if typing, tokens.count > 1 {
                // The word being typed narrows the words typed in full; when nothing holds them
                // all, the words typed in full alone.
                rows = try candidates(tokens, in: db)
                if rows.isEmpty { rows = try candidates(tokens.filter { !$0.prefix }, in: db) }
            } else {
                // A weak best match may be a stray word or a mistyped number keeping the right
                // entry out: look with each word left out too.
                rows = try candidates(tokens, in: db) { rows in (scored(rows).map(\.score).max() ?? 0) < relaxBelow }
            }
            for candidate in scored(rows) where candidate.score > (best[candidate.id]?.score ?? -1) { best[candidate.id] = candidate }
            // House numbers on streets whose lines carry ranges (negative ids: not entries).
            if !typing {
                let streets = best.values.filter { $0.record.kind == .streetName }.sorted { $0.score > $1.score }
                for record in try StreetRanges.candidates(tokens, streets: streets, in: db, geographic: geographic) {
                    let id = -Int64(best.count + 1)
                    best[id] = score(record, id: id, tokens: tokens)
                }
            }
        }
        return Array(best.values)
    }

    // MARK: - Scoring

    struct FieldToken {
        enum Role { case house, street, city, postal, name, alias }
        var text: String
        var folded: String
        var parts: [String]?
        var role: Role
        var weight: Double
        var covered = 0.0
    }

    struct Scored {
        var record: EntryRecord
        var id: Int64
        var score: Double
        /// How much of the entry the text covered (ties).
        var completeness: Double
        var asPlaceName: Bool
        var label: String
        var matchType: LocatorMatchType
        var distance = 0.0
        /// The house number's leading digits, for ordering equal candidates.
        var houseOrder: Int { Int(LocatorSearch.leadingDigits(record.house ?? "")) ?? Int.max }
    }

    static func fieldTokens(_ record: EntryRecord) -> [FieldToken] {
        var out: [FieldToken] = []
        func add(_ text: String?, _ role: FieldToken.Role) {
            guard let text else { return }
            for token in LocatorText.tokens(text) {
                out.append(FieldToken(
                    text: token.text, folded: LocatorText.fold(token.text), parts: LocatorText.parts(token.text), role: role,
                    weight: Double(max(token.text.unicodeScalars.count, 1))))
            }
        }
        switch record.kind {
        case .streetName:
            add(record.street, .street)
            add(record.city, .city)
        case .postal:
            add(record.postal, .postal)
            add(record.city, .city)
        case .locality:
            add(record.city, .city)
        default:
            add(record.house, .house)
            add(record.street, .street)
            add(record.city, .city)
            add(record.postal, .postal)
            add(record.name, .name)
            add(record.alias, .alias)
        }
        return out
    }

    /// How well a word of the text matches a word of the entry (0 for not at all) and how much
    /// of the entry's word it covers.
    static func match(_ q: QueryToken, _ f: FieldToken) -> (quality: Double, coverage: Double) {
        if q.text == f.text { return (1, 1) }
        if q.folded == f.folded { return (0.98, 1) }
        if q.alternatives.contains(f.text) || q.alternatives.contains(f.folded) { return (0.97, 1) }
        if let parts = f.parts, let part = parts.first(where: { $0 == q.text || LocatorText.fold($0) == q.folded }) {
            return (1, Double(part.unicodeScalars.count) / f.weight)
        }
        if f.role == .house, digits(q.text) == digits(f.text), !digits(q.text).isEmpty {
            return (0.8, 0.8)
        }
        if q.prefix, f.folded.hasPrefix(q.folded) {
            let share = q.weight / f.weight
            return (0.9 + 0.1 * share, 1)
        }
        // House numbers are short: one edit away is a candidate, ranked below the right number.
        if f.role == .house, q.numeric || LocatorText.isNumeric(f.text), LocatorText.editDistance(q.folded, f.folded) <= 1 {
            // A digit dropped, added or swapped is likelier than a wrong digit.
            let substituted = q.text.count == f.text.count && q.text.sorted() != f.text.sorted()
            return (substituted ? 0.68 : 0.72, 0.7)
        }
        if let part = q.parts.first(where: { $0 == f.text || LocatorText.fold($0) == f.folded }) {
            return (0.97 * Double(part.unicodeScalars.count) / q.weight, 1)
        }
        if q.folded.unicodeScalars.count >= typoMinimumLength {
            if LocatorText.editDistance(q.folded, f.folded) <= 1 { return (0.85, 0.85) }
            if let parts = f.parts, let part = parts.first(where: { LocatorText.editDistance(q.folded, LocatorText.fold($0)) <= 1 }) {
                return (0.85, 0.85 * Double(part.unicodeScalars.count) / f.weight)
            }
        }
        return (0, 0)
    }

    static func leadingDigits(_ s: String) -> Substring { s.prefix { $0.isASCII && $0.isNumber } }
    static func digits(_ s: String) -> String { String(s.filter { $0.isASCII && $0.isNumber }) }

    /// Scores `record` for `tokens`: as an address (its house number, street, city and postal
    /// code) and, when it has a name, as a named place (the name and the address); the better
    /// reading wins and decides the label.
    static func score(_ record: EntryRecord, id: Int64, tokens: [QueryToken]) -> Scored {
        let fields = fieldTokens(record)
        let core: Set<FieldToken.Role>
        switch record.kind {
        case .streetName: core = [.street]
        case .postal: core = [.postal]
        case .locality: core = [.city]
        default: core = [.house, .street]
        }
        var best = reading(fields.filter { $0.role != .name && $0.role != .alias }, core: core, tokens: tokens)
        var asPlaceName = false
        if record.kind == .pointAddress || record.kind == .poi {
            if record.alias != nil {
                let alias = reading(fields.filter { $0.role != .name }, core: [.alias], tokens: tokens)
                if alias.score > best.score { best = alias }
            }
            if record.name != nil {
                let named = reading(fields, core: [.name], tokens: tokens)
                if named.score > best.score || (record.street == nil && named.score >= best.score) {
                    best = named
                    asPlaceName = true
                }
            }
        }
        let type: LocatorMatchType = asPlaceName && record.kind == .pointAddress ? .poi : record.kind
        return Scored(
            record: record, id: id, score: (best.score * 100).rounded() / 100, completeness: best.completeness,
            asPlaceName: asPlaceName, label: label(record, asPlaceName: asPlaceName), matchType: type)
    }

    /// One reading of an entry: each word of the text takes the entry word it matches best.
    static func reading(_ entry: [FieldToken], core: Set<FieldToken.Role>, tokens: [QueryToken]) -> (score: Double, completeness: Double) {
        var fields = entry
        var queryWeight = 0.0, matched = 0.0
        for q in tokens {
            queryWeight += q.weight
            var best = (index: -1, quality: 0.0, coverage: 0.0)
            for (i, f) in fields.enumerated() where f.covered < 0.999 {
                let m = match(q, f)
                if m.quality > best.quality + 1e-9 { best = (i, m.quality, m.coverage) }
            }
            guard best.index >= 0 else { continue }
            matched += q.weight * best.quality
            fields[best.index].covered = min(1, fields[best.index].covered + best.coverage)
        }
        let coreFields = fields.filter { core.contains($0.role) }
        let coreWeight = coreFields.reduce(0) { $0 + $1.weight }
        let coverage = coreWeight > 0 ? coreFields.reduce(0) { $0 + $1.weight * $1.covered } / coreWeight : 0
        let textShare = queryWeight > 0 ? matched / queryWeight : 0
        let total = fields.reduce(0) { $0 + $1.weight }
        let completeness = total > 0 ? fields.reduce(0) { $0 + $1.weight * $1.covered } / total : 0
        return (100 * textShare * (0.6 + 0.4 * coverage), completeness)
    }

    /// `Mannerheimintie 12, 00100 Helsinki`; `Burger King, Aleksanterinkatu 11, 00100 Helsinki`;
    /// `Mannerheimintie, Helsinki`; `00100 Helsinki`; `Helsinki`.
    static func label(_ r: EntryRecord, asPlaceName: Bool) -> String {
        let area = [r.postal, r.city].compactMap { $0 }.joined(separator: " ")
        switch r.kind {
        case .streetName: return [r.street, r.city].compactMap { $0 }.joined(separator: ", ")
        case .postal, .locality: return area
        default:
            var address = r.street.map { street in r.house.map { "\(street) \($0)" } ?? street } ?? ""
            if !area.isEmpty { address = address.isEmpty ? area : "\(address), \(area)" }
            if (asPlaceName || r.street == nil), let name = r.name { return address.isEmpty ? name : "\(name), \(address)" }
            if r.street == nil, let alias = r.alias { return address.isEmpty ? alias : "\(alias), \(address)" }
            return address
        }
    }

    /// Best first: score, then nearness to the preferred location (when there is one), then how
    /// much of the entry the text covered, then house number order, then entry order.
    static func ranked(_ scored: [Scored], near: Position?, geographic: Bool) -> [Scored] {
        var items = scored
        if let near {
            for i in items.indices {
                items[i].distance = LocatorGeometry.distance(Position(x: items[i].record.x, y: items[i].record.y), near, geographic: geographic)
            }
        }
        // Sort keys computed once, not per comparison.
        var keyed = items.map { ($0, $0.houseOrder) }
        keyed.sort { x, y in
            let (a, b) = (x.0, y.0)
            if a.score != b.score { return a.score > b.score }
            if a.distance != b.distance { return a.distance < b.distance }
            if abs(a.completeness - b.completeness) > 1e-9 { return a.completeness > b.completeness }
            if x.1 != y.1 { return x.1 < y.1 }
            if a.matchType != b.matchType { return a.matchType.rawValue < b.matchType.rawValue }
            return a.id < b.id
        }
        items = keyed.map(\.0)
        var seen = Set<String>()
        return items.filter { seen.insert($0.label.lowercased()).inserted }
    }
}
