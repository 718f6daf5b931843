import Foundation
import OutpostCore
import OutpostLocator
import OutpostStorage
import OutpostTestSupport

/// The Helsinki sample (OpenStreetMap, ODbL) as a geodatabase and a locator built from its
/// addresses and streets, made once per test process.
enum HelsinkiLocator {
    struct Address: Sendable {
        var label: String
        var houseFirst: String
        var x: Double
        var y: Double
    }

    static let fields = "house=house_number,street=street,city=city,postal=postcode,name=name"

    /// The directory, the geodatabase and the built locator.
    static func build(in directory: TemporaryDirectory) throws -> (Geodatabase, URL) {
        let (gdb, _) = try ServiceDirectoryImport.createGeodatabase(from: Repository.sampleData("helsinki"), at: directory.file("helsinki.gpkg"))
        let url = directory.file("helsinki.locator")
        try LocatorBuilder.create(
            from: gdb,
            sources: [
                LocatorSource(layer: "addresses", fields: try LocatorFieldMap(parsing: fields)),
                LocatorSource(layer: "streets", fields: try LocatorFieldMap(parsing: "street=name"), whereClause: "name IS NOT NULL"),
            ], at: url)
        return (gdb, url)
    }

    /// Every address of the sample as a field crew would write it: "Mannerheimintie 12, 00100
    /// Helsinki" (no postal code where the data has none), and house number first.
    static func addresses() throws -> [Address] {
        let data = try Data(contentsOf: Repository.sampleData("helsinki/data/addresses.geojson"))
        let collection = try JSONValue.parse(data)
        return (collection["features"]?.arrayValue ?? []).compactMap { feature in
            let p = feature["properties"]
            guard let street = p?["street"]?.stringValue, let house = p?["house_number"]?.stringValue,
                  let c = feature["geometry"]?["coordinates"]?.arrayValue, c.count == 2
            else { return nil }
            let area = [p?["postcode"]?.stringValue, p?["city"]?.stringValue].compactMap { $0 }.joined(separator: " ")
            let label = area.isEmpty ? "\(street) \(house)" : "\(street) \(house), \(area)"
            let first = area.isEmpty ? "\(house) \(street)" : "\(house) \(street), \(area)"
            return Address(label: label, houseFirst: first, x: c[0].doubleValue ?? 0, y: c[1].doubleValue ?? 0)
        }
    }
}

/// One random typo: a letter inserted, deleted, substituted, or two neighbours swapped.
func typo(_ text: String, using rng: inout FastRandomGenerator) -> String {
    var chars = Array(text)
    let letters = Array("abcdefghijklmnopqrstuvwxyzäö")
    switch Int.random(in: 0..<4, using: &rng) {
    case 0: chars.insert(letters.randomElement(using: &rng)!, at: Int.random(in: 0...chars.count, using: &rng))
    case 1: chars.remove(at: Int.random(in: 0..<chars.count, using: &rng))
    case 2:
        let i = Int.random(in: 0..<chars.count, using: &rng)
        var c = letters.randomElement(using: &rng)!
        while c == chars[i] { c = letters.randomElement(using: &rng)! }
        chars[i] = c
    default:
        let candidates = chars.indices.dropLast().filter { chars[$0] != chars[$0 + 1] }
        if let i = candidates.randomElement(using: &rng) { chars.swapAt(i, i + 1) }
    }
    return String(chars)
}
