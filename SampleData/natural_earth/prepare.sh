#!/usr/bin/env bash
# Regenerates data/*.geojson from the Natural Earth 1:110m shapefiles shipped in the
# geopandas 0.14.4 wheel (geopandas/datasets/naturalearth_lowres and naturalearth_cities).
# Needs: pip install geopandas==0.14.4, and ogr2ogr from Debian's gdal-bin.
set -euo pipefail
cd "$(dirname "$0")"
datasets=$(python3 -c 'import geopandas, os; print(os.path.join(os.path.dirname(geopandas.__file__), "datasets"))')
mkdir -p data
rm -f data/countries.geojson data/populated_places.geojson
ogr2ogr -f GeoJSON -lco RFC7946=YES -lco COORDINATE_PRECISION=6 -nln countries -nlt MULTIPOLYGON \
  -sql "SELECT name, continent, iso_a3, CAST(pop_est AS integer) AS pop_est, gdp_md_est FROM naturalearth_lowres" \
  data/countries.geojson "$datasets/naturalearth_lowres/naturalearth_lowres.shp"
ogr2ogr -f GeoJSON -lco RFC7946=YES -lco COORDINATE_PRECISION=6 -nln populated_places \
  data/populated_places.geojson "$datasets/naturalearth_cities/naturalearth_cities.shp"
