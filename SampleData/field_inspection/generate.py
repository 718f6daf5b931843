#!/usr/bin/env python3
"""Generates the field-inspection sample data (data/*.geojson) deterministically.

The features are synthetic but shaped like a small water utility's records around
Portland, Oregon: inspected assets, pipelines between them, crew service areas and a
log of inspection actions. Run from this directory: python3 generate.py
"""
import json
import math
import random
import uuid
from datetime import datetime, timedelta, timezone

rng = random.Random(20240601)
WEST, EAST, SOUTH, NORTH = -122.700, -122.600, 45.490, 45.560
START = datetime(2023, 3, 1, tzinfo=timezone.utc)


def gid():
    return "{" + str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper() + "}"


def when(days=600):
    t = START + timedelta(minutes=rng.randrange(days * 24 * 60))
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def coord(x, y):
    return [round(x, 7), round(y, 7)]


INSPECTORS = ["A. Moana", "B. Okafor", "C. Lindqvist", "D. Ramirez", "E. Tanaka", "F. Novak"]
NOTES = {
    "hydrant": ["Cap replaced", "Flow test passed", "Paint faded", "Leaking at base", ""],
    "valve": ["Exercised 12 turns", "Box filled with debris", "Stem bent", ""],
    "manhole": ["Lid rocking", "Inflow observed", "Ladder corroded", ""],
    "meter": ["Reading taken", "Glass cracked", "Register stuck", ""],
    "pole": ["Bracket loose", "Tag missing", ""],
}

# Assets sit on a street grid, as in a real network.
grid_x = [WEST + i * (EAST - WEST) / 24 for i in range(25)]
grid_y = [SOUTH + j * (NORTH - SOUTH) / 20 for j in range(21)]

points = []
for n in range(300):
    kind = rng.choice(["hydrant", "hydrant", "valve", "valve", "manhole", "meter", "pole"])
    on_x = rng.random() < 0.5
    x = rng.choice(grid_x) if on_x else rng.uniform(WEST, EAST)
    y = rng.uniform(SOUTH, NORTH) if on_x else rng.choice(grid_y)
    status = rng.choices(["open", "in_progress", "closed"], [3, 1, 6])[0]
    props = {
        "globalid": gid(),
        "asset_id": f"{kind[:2].upper()}-{1000 + n}",
        "asset_type": kind,
        "condition": rng.choices([1, 2, 3, 4, 5], [2, 5, 4, 2, 1])[0],
        "status": status,
        "inspected_at": when() if status != "open" or rng.random() < 0.3 else None,
        "inspector": rng.choice(INSPECTORS),
        "notes": rng.choice(NOTES[kind]) or None,
        "depth_m": round(rng.uniform(0.5, 4.5), 2) if kind in ("valve", "manhole") else None,
    }
    points.append({"type": "Feature", "properties": props,
                   "geometry": {"type": "Point", "coordinates": coord(x, y)}})

pipelines = []
for n in range(80):
    horizontal = rng.random() < 0.5
    if horizontal:
        y = rng.choice(grid_y)
        i = rng.randrange(0, 20)
        xs = grid_x[i:i + rng.randrange(2, 6)]
        path = [coord(x, y + rng.uniform(-0.00005, 0.00005)) for x in xs]
    else:
        x = rng.choice(grid_x)
        j = rng.randrange(0, 16)
        ys = grid_y[j:j + rng.randrange(2, 6)]
        path = [coord(x + rng.uniform(-0.00005, 0.00005), y) for y in ys]
    material = rng.choice(["ductile_iron", "pvc", "cast_iron", "hdpe", "steel"])
    props = {
        "globalid": gid(),
        "pipe_id": f"P-{5000 + n}",
        "material": material,
        "diameter_mm": rng.choice([100, 150, 200, 300, 450, 600]),
        "install_year": rng.randrange(1925 if material == "cast_iron" else 1965, 2024),
        "status": rng.choices(["open", "in_progress", "closed"], [1, 1, 8])[0],
        "last_inspected": when() if rng.random() < 0.6 else None,
    }
    pipelines.append({"type": "Feature", "properties": props,
                      "geometry": {"type": "LineString", "coordinates": path}})

areas = []
cols, rows = 4, 3
crews = ["North crew", "East crew", "South crew", "West crew", "Night crew"]
for j in range(rows):
    for i in range(cols):
        x0 = WEST + i * (EAST - WEST) / cols
        x1 = WEST + (i + 1) * (EAST - WEST) / cols
        y0 = SOUTH + j * (NORTH - SOUTH) / rows
        y1 = SOUTH + (j + 1) * (NORTH - SOUTH) / rows
        # A slightly irregular outline: zones follow streets, not a perfect lattice.
        ring = []
        for (x, y) in [(x0, y0), ((x0 + x1) / 2, y0), (x1, y0), (x1, (y0 + y1) / 2),
                       (x1, y1), ((x0 + x1) / 2, y1), (x0, y1), (x0, (y0 + y1) / 2)]:
            ring.append(coord(x + rng.uniform(-0.0006, 0.0006) * (x not in (WEST, EAST)),
                              y + rng.uniform(-0.0004, 0.0004) * (y not in (SOUTH, NORTH))))
        ring.append(ring[0])
        polygon = [ring]
        if (i + j) % 4 == 1:
            # A park inside the zone that crews do not serve: a hole.
            cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
            r = 0.002
            hole = [coord(cx + r * math.cos(a / 6 * math.pi), cy + r * 0.7 * math.sin(a / 6 * math.pi))
                    for a in range(12, 0, -1)]
            hole.append(hole[0])
            polygon.append(hole)
        props = {
            "globalid": gid(),
            "name": f"Zone {chr(65 + j)}{i + 1}",
            "crew": crews[(i + j) % len(crews)],
            "priority": rng.choice([1, 2, 2, 3, 3]),
            "last_visit": when(),
        }
        areas.append({"type": "Feature", "properties": props,
                      "geometry": {"type": "Polygon", "coordinates": polygon}})

log = []
for n in range(60):
    p = rng.choice(points)["properties"]
    log.append({"type": "Feature", "geometry": None, "properties": {
        "globalid": gid(),
        "point_globalid": p["globalid"],
        "action": rng.choice(["inspected", "photo added", "work order raised", "closed", "reopened"]),
        "logged_at": when(),
        "note": rng.choice(["", "Needs follow-up", "Crew notified", "Parts ordered"]) or None,
    }})


def write(name, features):
    with open(f"data/{name}.geojson", "w") as f:
        json.dump({"type": "FeatureCollection", "name": name, "features": features}, f, indent=None,
                  separators=(",", ":"))
        f.write("\n")


write("inspection_points", points)
write("pipelines", pipelines)
write("service_areas", areas)
write("inspection_log", log)
print(f"{len(points)} points, {len(pipelines)} pipelines, {len(areas)} areas, {len(log)} log rows")
