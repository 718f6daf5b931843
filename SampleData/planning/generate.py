#!/usr/bin/env python3
"""Generates the planning sample data (data/*.geojson) deterministically.

Synthetic but shaped like a city district's records in Kallio, Helsinki: land parcels on
blocks between real street names (owners and house numbers are invented) and surveyed spot
heights on two low hills. The geometry is laid out in ETRS-TM35FIN (EPSG:3067) metres and
written in WGS 84. Needs pyproj. Run from this directory: python3 generate.py
"""
import json
import math
import random

from pyproj import Transformer

rng = random.Random(20241125)
to_wgs84 = Transformer.from_crs(3067, 4326, always_xy=True).transform
X0, Y0 = 386_300.0, 6_673_300.0  # south-west corner of the district (Kallio)
LOT_W, LOT_D, STREET = 30.0, 45.0, 20.0
EAST_WEST = ["Helsinginkatu", "Fleminginkatu", "Vaasankatu", "Aleksis Kiven katu"]
NORTH_SOUTH = ["Porthaninkatu", "Kolmas linja", "Neljäs linja", "Toinen linja", "Castréninkatu"]
FIRST = ["Aino", "Eero", "Helmi", "Ilmari", "Kaarina", "Lauri", "Maija", "Onni", "Riikka", "Sakari", "Tuula", "Veikko"]
LAST = ["Aaltonen", "Heikkinen", "Korhonen", "Laine", "Mäkinen", "Nieminen", "Rantanen", "Salo", "Turunen", "Virtanen"]
COMPANIES = ["Kallion Asunnot Oy", "As Oy Vaasankatu", "Helsingin kaupunki", "Linjojen Kiinteistöt Oy"]


def coord(x, y):
    lon, lat = to_wgs84(x, y)
    return [round(lon, 8), round(lat, 8)]


def height(x, y):
    hill = 18 + 26 * math.exp(-((x - X0 - 260) ** 2 + (y - Y0 - 330) ** 2) / (2 * 160**2))
    return hill + 14 * math.exp(-((x - X0 - 620) ** 2 + (y - Y0 - 120) ** 2) / (2 * 130**2))


parcels = []
block_w, block_h = 4 * LOT_W, 2 * LOT_D
for bx in range(len(NORTH_SOUTH) - 1):
    for by in range(len(EAST_WEST)):
        x0 = X0 + bx * (block_w + STREET)
        y0 = Y0 + by * (block_h + STREET)
        for row in range(2):
            for lot in range(4):
                x, y = x0 + lot * LOT_W, y0 + row * LOT_D
                ring = [coord(x, y), coord(x + LOT_W, y), coord(x + LOT_W, y + LOT_D), coord(x, y + LOT_D), coord(x, y)]
                number = 2 * (bx * 4 + lot) + 1 + row
                street = EAST_WEST[by]
                owner = rng.choice(COMPANIES) if rng.random() < 0.3 else f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                parcels.append({
                    "type": "Feature",
                    "geometry": {"type": "Polygon", "coordinates": [ring]},
                    "properties": {
                        "parcel_id": f"091-011-{bx * 10 + by:04d}-{row * 4 + lot + 1:04d}",
                        "owner": owner,
                        "address": f"{street} {number}, 00530 Helsinki",
                        "land_use": rng.choice(["residential"] * 5 + ["commercial", "mixed"]),
                        "area_m2": LOT_W * LOT_D,
                    },
                })

heights = []
for i in range(120):
    x = X0 - 40 + rng.random() * 760
    y = Y0 - 40 + rng.random() * 520
    heights.append({
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": coord(x, y)},
        "properties": {"point_id": f"SH-{i + 1:03d}", "height": round(height(x, y) + rng.gauss(0, 0.2), 2), "surveyed": "2024-05-14T09:00:00.000Z"},
    })

for name, features in [("parcels", parcels), ("spot_heights", heights)]:
    with open(f"data/{name}.geojson", "w", encoding="utf-8") as f:
        json.dump({"type": "FeatureCollection", "features": features}, f, ensure_ascii=False, indent=0)
        f.write("\n")
print(len(parcels), "parcels,", len(heights), "spot heights")
