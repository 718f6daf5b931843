"""The storage alternatives named for the sync's speed, measured on SQLite alone before building any
(Python's sqlite3 on the system's SQLite, WAL, rows bound in C through executemany where it can):

  log     the server's change log as it is, without AUTOINCREMENT, and WITHOUT ROWID keyed by
          (layer, global id, generation, seq) with only the (layer, generation) index: 11,000 rows
          of random global ids appended to a log of 100,000
  rtree   moving points through SQLite's rtree module one by one (delete, insert) in random,
          spatial and id order, against which the packed rebuild (~1 µs a row of the table) is set
  apply   10,000 updates and 5,000 inserts into a GeoPackage-shaped table of 100,000 rows: per-row
          prepared statements, against staging them in a temporary table and applying them with
          UPDATE … FROM and INSERT … SELECT
  logkey  the change log's per-feature index on the 38-character global id (as it is), on a
          64-bit key of it, and without it: 11,000 rows appended to a log of 100,000
  batchlog what a 16,000-edit batch (10,000 updates, 1,000 deletes, 5,000 inserts) writes into
          the service's change log and tombstones, bound in C: the log rows (100 to a statement,
          as the server writes them), the deletes'
          tombstones, the inserts' tombstone drops one statement each against one statement of
          all, and the commit (the floor under the server's change_log stage)
  capture a download's 10,000 updates and 5,000 inserts on a copy of a replica (default: the one
          `outpost-bench sync` leaves, /tmp/outpost-bench/sync-b0.gpkg; OUTPOST_REPLICA names
          another) with its change-capture triggers silenced, as a download runs them, and dropped
          (the R-tree triggers dropped in both: they need the GeoPackage functions)

Usage: python3 sqlite_alternatives.py [log|rtree|apply|logkey|batchlog|capture]… (all but capture
by default). Prints milliseconds. Results and their reading: Benchmarks/RESULTS.md ("2026-11-26
(night)" and "2026-11-26, later")."""
import os
import random
import sqlite3
import struct
import sys
import tempfile
import time
import uuid

DIRECTORY = tempfile.mkdtemp(prefix="outpost-sqlite-alternatives-")


# The service's change log columns after its key (ServiceStore.schema, without the op CHECK).
LOG_COLUMNS = "generation INTEGER NOT NULL, layer_id INTEGER NOT NULL, globalid TEXT NOT NULL, op TEXT NOT NULL, changed_columns TEXT, origin_replica TEXT, origin_seq INTEGER, changed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), edited_at TEXT"

def fresh(name):
    path = os.path.join(DIRECTORY, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def gid():
    return "{%s}" % str(uuid.uuid4()).upper()


def timed(db, body):
    started = time.perf_counter()
    db.execute("BEGIN")
    body()
    db.execute("COMMIT")
    return (time.perf_counter() - started) * 1000


def log():
    origin = gid()
    columns = LOG_COLUMNS
    layouts = [
        ("as it is (AUTOINCREMENT, two indexes)", f"CREATE TABLE log (change_id INTEGER PRIMARY KEY AUTOINCREMENT, {columns})",
         ["CREATE INDEX log_feed ON log (layer_id, generation)", "CREATE INDEX log_feature ON log (layer_id, globalid, generation)"], False),
        ("without AUTOINCREMENT", f"CREATE TABLE log (change_id INTEGER PRIMARY KEY, {columns})",
         ["CREATE INDEX log_feed ON log (layer_id, generation)", "CREATE INDEX log_feature ON log (layer_id, globalid, generation)"], False),
        ("WITHOUT ROWID, one index", f"CREATE TABLE log ({columns}, seq INTEGER NOT NULL, PRIMARY KEY (layer_id, globalid, generation, seq)) WITHOUT ROWID",
         ["CREATE INDEX log_feed ON log (layer_id, generation)"], True),
    ]
    for label, table, indexes, keyed in layouts:
        db = fresh("log.db")
        db.execute(table)
        for sql in indexes:
            db.execute(sql)
        names = "generation, layer_id, globalid, op, changed_columns, origin_replica, origin_seq, edited_at" + (", seq" if keyed else "")
        insert = f"INSERT INTO log ({names}) VALUES ({', '.join('?' * len(names.split(',')))})"

        def rows(ids, generation):
            return [(generation, 0, g, "update", '["name","value"]', origin, generation, "2026-11-26T10:00:00.000Z") + ((i,) if keyed else ())
                    for i, g in enumerate(ids)]

        ids = [gid() for _ in range(100_000)]
        timed(db, lambda: db.executemany(insert, rows(ids, 1)))
        best = min(timed(db, lambda: db.executemany(insert, rows(random.sample(ids, 11_000), generation))) for generation in range(2, 5))
        print(f"log, {label}: {best:.1f} ms for 11,000 rows (best of 3)")
        db.close()


def rtree():
    db = fresh("rtree.db")
    db.execute("CREATE VIRTUAL TABLE r USING rtree(id, minx, maxx, miny, maxy)")
    points = {i: (random.uniform(-123, -122), random.uniform(45, 46)) for i in range(1, 100_001)}
    by_x = sorted(points.items(), key=lambda item: item[1])
    timed(db, lambda: db.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?)", [(i, x, x, y, y) for i, (x, y) in by_x]))

    def z_order(x, y):
        xi, yi, key = int((x + 123) * 65535), int((y - 45) * 65535), 0
        for bit in range(16):
            key |= ((xi >> bit) & 1) << (2 * bit) | ((yi >> bit) & 1) << (2 * bit + 1)
        return key

    for count in (5_000, 11_000):
        for order in ("random", "spatial", "id"):
            moves = [(i, points[i][0] + random.uniform(-1e-4, 1e-4), points[i][1] + random.uniform(-1e-4, 1e-4)) for i in random.sample(range(1, 100_001), count)]
            if order == "spatial":
                moves.sort(key=lambda m: z_order(m[1], m[2]))
            elif order == "id":
                moves.sort()

            def move():
                db.executemany("DELETE FROM r WHERE id = ?", [(i,) for i, _, _ in moves])
                db.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?)", [(i, x, x, y, y) for i, x, y in moves])

            ms = timed(db, move)
            for i, x, y in moves:
                points[i] = (x, y)
            print(f"rtree, {count} moves in {order} order: {ms:.1f} ms ({ms * 1000 / count:.1f} µs a move)")
    db.close()


def apply():
    def blob(x, y):
        # A GeoPackage point: magic, version, flags (little-endian, no envelope), SRS id, WKB.
        return b"GP\x00\x01" + struct.pack("<i", 4326) + struct.pack("<BIdd", 1, 1, x, y)

    columns = "name, value, count, status, note, geom"
    for round_ in range(3):
        db = fresh("apply.db")
        db.execute("CREATE TABLE t (fid INTEGER PRIMARY KEY AUTOINCREMENT, globalid TEXT NOT NULL, name TEXT, value REAL, count INTEGER, status TEXT, note TEXT, geom BLOB)")
        db.execute("CREATE UNIQUE INDEX t_globalid ON t (globalid)")
        db.execute("CREATE TEMP TABLE staged (globalid TEXT PRIMARY KEY, name TEXT, value REAL, count INTEGER, status TEXT, note TEXT, geom BLOB)")
        rows = [(gid(), f"n{i}", random.random(), i, "open", "x" * 20, blob(random.uniform(-123, -122), random.uniform(45, 46))) for i in range(100_000)]
        timed(db, lambda: db.executemany(f"INSERT INTO t (globalid, {columns}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows))
        ids = [r[0] for r in rows]

        def per_row(updates, inserts):
            db.executemany("UPDATE t SET name = ?, value = ?, count = ?, status = ?, note = ?, geom = ? WHERE globalid = ?", [r[1:] + r[:1] for r in updates])
            db.executemany(f"INSERT INTO t (globalid, {columns}) VALUES (?, ?, ?, ?, ?, ?, ?)", inserts)

        def set_based(updates, inserts):
            db.execute("DELETE FROM staged")
            db.executemany("INSERT INTO staged VALUES (?, ?, ?, ?, ?, ?, ?)", updates + inserts)
            db.execute("UPDATE t SET name = s.name, value = s.value, count = s.count, status = s.status, note = s.note, geom = s.geom FROM staged s WHERE t.globalid = s.globalid")
            db.execute(f"INSERT INTO t (globalid, {columns}) SELECT globalid, {columns} FROM staged s WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.globalid = s.globalid)")

        figures = {}
        for label, way in [("per-row statements", per_row), ("staged, UPDATE … FROM + INSERT … SELECT", set_based)] * 2:
            updates = [(g, "e", random.random(), 7, "closed", "y" * 20, blob(random.uniform(-123, -122), random.uniform(45, 46))) for g in random.sample(ids, 10_000)]
            inserts = [(gid(), "new", 1.0, 1, "open", "z" * 20, blob(random.uniform(-123, -122), random.uniform(45, 46))) for _ in range(5_000)]
            ids += [r[0] for r in inserts]
            figures.setdefault(label, []).append(timed(db, lambda: way(updates, inserts)))
        for label, ms in figures.items():
            print(f"apply, table {round_ + 1}, {label}: " + " / ".join(f"{m:.1f}" for m in ms) + " ms")
        db.close()


def logkey():
    origin = gid()
    columns = LOG_COLUMNS + ", gkey INTEGER"
    insert = "INSERT INTO log (generation, layer_id, globalid, op, changed_columns, origin_replica, origin_seq, edited_at, gkey) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    for label, index in [("on the global id's text (as it is)", "CREATE INDEX log_feature ON log (layer_id, globalid, generation)"),
                         ("on a 64-bit key of the global id", "CREATE INDEX log_feature ON log (layer_id, gkey, generation)"),
                         ("none", None)]:
        db = fresh("logkey.db")
        db.execute(f"CREATE TABLE log (change_id INTEGER PRIMARY KEY AUTOINCREMENT, {columns})")
        db.execute("CREATE INDEX log_feed ON log (layer_id, generation)")
        if index:
            db.execute(index)

        def rows(ids, generation):
            return [(generation, 0, g, "update", '["name","value"]', origin, generation, "2026-11-26T10:00:00.000Z", hash(g) & 0x7FFFFFFFFFFFFFFF) for g in ids]

        ids = [gid() for _ in range(100_000)]
        timed(db, lambda: db.executemany(insert, rows(ids, 1)))
        best = min(timed(db, lambda: db.executemany(insert, rows(random.sample(ids, 11_000), generation))) for generation in range(2, 5))
        print(f"log, per-feature index {label}: {best:.1f} ms for 11,000 rows (best of 3)")
        db.close()


def capture():
    import shutil
    source = os.environ.get("OUTPOST_REPLICA", "/tmp/outpost-bench/sync-b0.gpkg")
    if not os.path.exists(source):
        print(f"capture: no replica at {source} (run outpost-bench sync first, or set OUTPOST_REPLICA)")
        return

    def point(x, y):
        return b"GP\x00\x01" + struct.pack("<i", 4326) + struct.pack("<BI", 1, 1) + struct.pack("<dd", x, y)

    for round_ in range(3):
        for label, drop in [("capture triggers silenced", False), ("capture triggers dropped", True)]:
            path = os.path.join(DIRECTORY, "capture.gpkg")
            db = fresh("capture.gpkg")
            db.close()
            shutil.copyfile(source, path)
            db = sqlite3.connect(path, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND (name LIKE 'rtree_points%' OR (? AND name LIKE 'outpost_points%'))", (drop,))]
            for name in names:
                db.execute(f'DROP TRIGGER "{name}"')
            if not drop:
                db.execute("UPDATE outpost_capture SET silenced = 1 WHERE id = 1")
            updates = [(point(i * 1e-4, i * 1e-4), i + 0.25, f"e-{i}", i) for i in range(1, 100_000, 10)]
            inserts = [(point(i * 1e-4, 1.0), gid(), i, 1.5, f"n-{i}", "2024-01-01T00:00:00.000Z", gid()) for i in range(5_000)]

            def write():
                db.executemany("UPDATE points SET geom = ?, value = ?, label = ? WHERE objectid = ?", updates)
                db.executemany("INSERT INTO points (geom, globalid, id_int, value, label, observed, ref) VALUES (?, ?, ?, ?, ?, ?, ?)", inserts)

            print(f"capture, run {round_ + 1}, {label}: {timed(db, write):.1f} ms for 10,000 updates and 5,000 inserts")
            db.close()

def batchlog():
    origin = gid()
    edits = sorted([(gid(), "update") for _ in range(10_000)] + [(gid(), "delete") for _ in range(1_000)] + [(gid(), "insert") for _ in range(5_000)])
    columns = {"update": '["geom","label","value"]', "delete": "[]", "insert": '["globalid","id_int","value","label","observed","ref","geom"]'}
    rows = [(2, 0, g, op, columns[op], origin, 1, "2026-12-07T10:00:00.000Z", "2026-12-07T10:00:01.000Z") for g, op in edits]
    deletes = [(0, g, 2, '{"attributes":{"label":"x"}}') for g, op in edits if op == "delete"]
    inserts = [g for g, op in edits if op == "insert"]
    # 100 rows to a statement, as the server writes them, their values flattened before the clock.
    insert = ("INSERT INTO outpost_change_log (generation, layer_id, globalid, op, changed_columns, origin_replica, origin_seq, edited_at, changed_at) VALUES "
              + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * 100))
    chunks = [tuple(v for row in rows[k:k + 100] for v in row) for k in range(0, len(rows), 100)]
    best = {}
    for _ in range(3):
        for drops in ("one by one", "in one statement"):
            db = fresh("batchlog.db")
            db.execute(f"CREATE TABLE outpost_change_log (change_id INTEGER PRIMARY KEY AUTOINCREMENT, {LOG_COLUMNS})")
            db.execute("CREATE INDEX outpost_change_log_feed ON outpost_change_log (layer_id, generation)")
            db.execute("CREATE INDEX outpost_change_log_feature ON outpost_change_log (layer_id, globalid, generation)")
            db.execute("CREATE TABLE outpost_tombstones (layer_id INTEGER NOT NULL, globalid TEXT NOT NULL, generation INTEGER NOT NULL, row TEXT, PRIMARY KEY (layer_id, globalid))")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN")
            t0 = time.perf_counter()
            for chunk in chunks:
                db.execute(insert, chunk)
            t1 = time.perf_counter()
            db.executemany("""INSERT INTO outpost_tombstones (layer_id, globalid, generation, row) VALUES (?, ?, ?, ?)
                ON CONFLICT (layer_id, globalid) DO UPDATE SET generation = excluded.generation, row = coalesce(excluded.row, row)""", deletes)
            t2 = time.perf_counter()
            if drops == "one by one":
                db.executemany("DELETE FROM outpost_tombstones WHERE layer_id = 0 AND globalid = ?", [(g,) for g in inserts])
            else:
                db.execute("DELETE FROM outpost_tombstones WHERE layer_id = 0 AND globalid IN (SELECT value FROM json_each(?))", ("[" + ",".join(f'"{g}"' for g in inserts) + "]",))
            t3 = time.perf_counter()
            db.execute("COMMIT")
            t4 = time.perf_counter()
            db.close()
            for key, value in (("log rows", t1 - t0), ("tombstones kept", t2 - t1), (f"drops {drops}", t3 - t2), ("commit", t4 - t3)):
                best[key] = min(best.get(key, value), value)
    print("batch log, 16,000 rows: " + ", ".join(f"{key} {value * 1000:.1f} ms" for key, value in best.items()) + " (best of 3)")


if __name__ == "__main__":
    random.seed(27)
    print(f"SQLite {sqlite3.sqlite_version}")
    for name in sys.argv[1:] or ["log", "rtree", "apply", "logkey", "batchlog"]:
        {"log": log, "rtree": rtree, "apply": apply, "logkey": logkey, "batchlog": batchlog, "capture": capture}[name]()
