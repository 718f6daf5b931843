#ifndef COUTPOST_SQLITE_H
#define COUTPOST_SQLITE_H

/// Registers the SQL functions the GeoPackage R-tree triggers call (GeoPackage 1.3 Annex F.3):
/// ST_IsEmpty, ST_MinX, ST_MaxX, ST_MinY, ST_MaxY. They read the GeoPackage binary header in place
/// (and scan the WKB only when the header carries no envelope). Returns an SQLite result code.
/// `db` is a `sqlite3 *` connection handle (declared as void * so this header does not re-export
/// sqlite3.h next to the module that already does).
int outpost_register_geopackage_functions(void *db);

/// Computes the XY bounds of a GeoPackage binary geometry blob.
/// Returns 1 and fills out[0..3] = minx, maxx, miny, maxy for a non-empty geometry,
/// 0 for an empty geometry, and -1 for a blob that is not valid GeoPackage binary.
int outpost_gpkg_bounds(const unsigned char *blob, int size, double out[4]);

/// The pre-update hook's callback: `context`, the connection, the operation (SQLITE_INSERT,
/// SQLITE_DELETE, SQLITE_UPDATE), the database and table names, and the row ids before and after.
typedef void (*outpost_preupdate_callback)(void *context, void *db, int op, const char *database, const char *table,
                                           long long rowidBefore, long long rowidAfter);

/// `sqlite3_preupdate_hook`: installs `callback` (or removes the hook with NULL) on `db`; returns
/// the context of the hook it replaced.
void *outpost_preupdate_hook(void *db, outpost_preupdate_callback callback, void *context);

/// `sqlite3_preupdate_old` and `sqlite3_preupdate_new`: inside the callback, column `column` of
/// the row before (update, delete) or after (insert, update) the change, as an `sqlite3_value *`
/// valid until the callback returns. Return an SQLite result code.
int outpost_preupdate_old(void *db, int column, void **value);
int outpost_preupdate_new(void *db, int column, void **value);

/// `sqlite3_preupdate_blobwrite`: inside the callback, the column an incremental blob write
/// changes, or -1 for a change of the whole row.
int outpost_preupdate_blobwrite(void *db);

#endif
