"""GDAL (through pyogrio) writing N points with 5 attributes into a new GeoPackage with its
spatial index: the peer for `outpost-bench import`. Prints the seconds spent in the write."""
import sys
import time
import uuid

import numpy as np
from pyogrio.raw import write

n, path = int(sys.argv[1]), sys.argv[2]
i = np.arange(n, dtype=np.int64)
x = -180 + ((i * 7919) % 360000) / 1000
y = -85 + ((i * 104729) % 170000) / 1000
# ISO WKB points, little-endian: byte order, type 1, x, y.
records = np.zeros(n, dtype=[("order", "u1"), ("type", "<u4"), ("x", "<f8"), ("y", "<f8")])
records["order"], records["type"], records["x"], records["y"] = 1, 1, x, y
raw = records.tobytes()
geometry = np.array([raw[k * 21:(k + 1) * 21] for k in range(n)], dtype=object)
labels = np.array([f"feature-{k:012d}" for k in range(n)], dtype=object)
observed = (np.datetime64("2024-01-01T00:00:00", "ms") + i * 1000).astype("datetime64[ms]")
refs = np.array(["{" + str(uuid.UUID(int=(k * 0x9E3779B97F4A7C15) % (1 << 128), version=4)).upper() + "}" for k in range(n)], dtype=object)
fields = [i.astype(np.int32), i * 0.5, labels, observed, refs]

started = time.perf_counter()
write(path, geometry, fields, ["id_int", "value", "label", "observed", "ref"], layer="points", driver="GPKG",
      geometry_type="Point", crs="EPSG:4326")
print(time.perf_counter() - started)
