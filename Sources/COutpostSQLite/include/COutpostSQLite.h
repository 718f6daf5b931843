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

#endif
