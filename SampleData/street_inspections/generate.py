#!/usr/bin/env python3
"""Builds the street-inspections sample (data/inspections.geojson) from the Helsinki sample.

Every 20th address of ../helsinki/data/addresses.geojson (OpenStreetMap, © OpenStreetMap
contributors, ODbL 1.0) gets an inspection of a kind, priority and status drawn from a seeded
generator; inspectors and notes are invented. Run from this directory: python3 generate.py
"""
import json
import random

KINDS = ["pavement", "light", "sign", "manhole", "bench"]
NOTES = {
    "pavement": ["cracked kerb stone", "pothole by the crossing", "loose paving slabs"],
    "light": ["lamp out", "flickering at night", "pole leaning"],
    "sign": ["faded parking sign", "sign turned by the wind", "graffiti"],
    "manhole": ["cover rattles", "cover sunk 2 cm", "water pooling around the cover"],
    "bench": ["broken slat", "loose bolts", "needs paint"],
}
INSPECTORS = ["Aino Virtanen", "Mikko Laine", "Helmi Koskinen", "Juha Nieminen"]


def main():
    rng = random.Random(20261202)
    with open("../helsinki/data/addresses.geojson", encoding="utf-8") as f:
        addresses = json.load(f)["features"]
    features = []
    for n, address in enumerate(addresses[::20], start=1):
        p = address["properties"]
        kind = rng.choice(KINDS)
        status = rng.choices(["open", "in_progress", "done"], [5, 2, 3])[0]
        day = 1 + rng.randrange(28)
        features.append({
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [round(c, 7) for c in address["geometry"]["coordinates"]]},
            "properties": {
                "inspection_id": f"INS-{n:04d}",
                "address": f"{p['street']} {p['house_number']}",
                "kind": kind,
                "priority": rng.randint(1, 3),
                "status": status,
                "inspector": rng.choice(INSPECTORS) if status != "open" else None,
                "inspected_at": f"2026-11-{day:02d}T{8 + rng.randrange(9):02d}:{rng.randrange(60):02d}:00Z" if status != "open" else None,
                "notes": rng.choice(NOTES[kind]),
            },
        })
    with open("data/inspections.geojson", "w", encoding="utf-8") as f:
        f.write('{"type": "FeatureCollection", "features": [\n')
        f.write(",\n".join(json.dumps(feature, ensure_ascii=False) for feature in features))
        f.write("\n]}\n")
    print(len(features), "inspections")


if __name__ == "__main__":
    main()
