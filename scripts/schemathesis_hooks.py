"""schemathesis hooks for scripts/schemathesis: a refused write changes nothing.

Before each request that may write (POST, PUT, DELETE, PATCH) the rows of every service file are
digested; when the answer refuses it (4xx or 5xx), they are digested again and must be the same.
The script runs the pass that uses this with one worker, so no other request runs in between.
"""
import glob
import hashlib
import os
import sqlite3

import schemathesis

SERVICES = os.environ["OUTPOST_SERVICES"]
WRITES = {"POST", "PUT", "DELETE", "PATCH"}
_before = {}


def rows():
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(SERVICES, "*.gpkg"))):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for (table,) in db.execute("SELECT table_name FROM gpkg_contents ORDER BY table_name"):
                digest.update(f"{path}:{table}".encode())
                for row in db.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                    digest.update(repr(row).encode())
        finally:
            db.close()
    return digest.hexdigest()


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.method.upper() in WRITES:
        _before[id(case)] = rows()


@schemathesis.check
def refused_writes_change_nothing(ctx, response, case):
    before = _before.pop(id(case), None)
    if before is None or response.status_code < 400:
        return
    if rows() != before:
        raise AssertionError(f"{case.method} {case.path} was refused ({response.status_code}) but changed the service files")
