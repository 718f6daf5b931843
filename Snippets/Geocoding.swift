// Finding places: suggestions while the user types, the address they pick, and what is near a
// point. The same calls work on a `.locator` file offline and on a GeocodeServer.
import Foundation
import OutpostCore
import OutpostLocator

// snippet.hide
guard let locatorPath = CommandLine.arguments.dropFirst().first else {
    print("usage: Geocoding <file.locator or GeocodeServer URL>")
    exit(2)
}
let locatorURL = locatorPath.hasPrefix("http") ? URL(string: locatorPath)! : URL(fileURLWithPath: locatorPath)
// snippet.show
let locator = LocatorTask(url: locatorURL)
try await locator.load()

// Suggestions as the user types; each keystroke's Task is cancelled by the next one, which
// interrupts the search underneath.
let suggestions = try await locator.suggest(searchText: "Mannerheimintie 1")
if let picked = suggestions.first {
    let candidates = try await locator.geocode(suggestResult: picked)
    print(candidates.first.map { "\($0.label) \($0.score) \($0.location)" } ?? "no match")
}

var parameters = GeocodeParameters()
parameters.maxResults = 3
parameters.minScore = 80
for result in try await locator.geocode(searchText: "Aleksanterinkatu 52, Helsinki", parameters: parameters) {
    print(result.label, result.score)
}

let nearby = try await locator.reverseGeocode(location: Position(x: 24.9414, y: 60.1699))
print(nearby.first?.label ?? "nothing within reach")
