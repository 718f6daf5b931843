// GeoPackage SQL functions over the SQLite C API.
//
// GeoPackage 1.3 §2.1.3 (binary format) and Annex F.3 (R-tree triggers): the triggers call
// ST_IsEmpty/ST_MinX/ST_MaxX/ST_MinY/ST_MaxY, which SQLite does not provide. Each reads the
// GeoPackage header in place with sqlite3_value_blob (no copy). When the header has no envelope
// (flag E = 0, the convention for points) the WKB body is scanned for its bounds.

#include "COutpostSQLite.h"

#include <sqlite3.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    double minx, maxx, miny, maxy;
    int any;
    int depth;
} wkb_scan;

static int read_u32(wkb_scan *s, int little, uint32_t *out) {
    if (s->end - s->p < 4) return 0;
    const unsigned char *b = s->p;
    *out = little ? ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24)
                  : ((uint32_t)b[3] | (uint32_t)b[2] << 8 | (uint32_t)b[1] << 16 | (uint32_t)b[0] << 24);
    s->p += 4;
    return 1;
}

static double decode_double(const unsigned char *b, int little) {
    uint64_t v = 0;
    if (little) {
        for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    } else {
        for (int i = 0; i < 8; i++) v = (v << 8) | b[i];
    }
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static int scan_points(wkb_scan *s, int little, uint32_t count, int dims) {
    size_t stride = (size_t)dims * 8;
    if ((size_t)(s->end - s->p) / stride < count) return 0;
    for (uint32_t i = 0; i < count; i++) {
        double x = decode_double(s->p, little);
        double y = decode_double(s->p + 8, little);
        s->p += stride;
        if (isnan(x) || isnan(y)) continue;  // POINT EMPTY is encoded as NaN coordinates
        if (!s->any) {
            s->minx = s->maxx = x;
            s->miny = s->maxy = y;
            s->any = 1;
        } else {
            if (x < s->minx) s->minx = x;
            if (x > s->maxx) s->maxx = x;
            if (y < s->miny) s->miny = y;
            if (y > s->maxy) s->maxy = y;
        }
    }
    return 1;
}

static int scan_geometry(wkb_scan *s) {
    if (++s->depth > 32) return 0;
    if (s->end - s->p < 5) return 0;
    int little = s->p[0] == 1;
    if (s->p[0] > 1) return 0;
    s->p += 1;
    uint32_t type;
    if (!read_u32(s, little, &type)) return 0;
    uint32_t base = type % 1000, family = type / 1000;
    if (family > 3) return 0;
    int dims = 2 + (family == 1 || family == 2 ? 1 : 0) + (family == 3 ? 2 : 0);
    uint32_t count;
    switch (base) {
    case 1:  // Point
        if (!scan_points(s, little, 1, dims)) return 0;
        break;
    case 2:  // LineString
    case 8:  // CircularString
        if (!read_u32(s, little, &count) || !scan_points(s, little, count, dims)) return 0;
        break;
    case 3: {  // Polygon: rings without their own headers
        uint32_t rings;
        if (!read_u32(s, little, &rings)) return 0;
        if ((size_t)(s->end - s->p) / 4 < rings) return 0;
        for (uint32_t r = 0; r < rings; r++) {
            if (!read_u32(s, little, &count) || !scan_points(s, little, count, dims)) return 0;
        }
        break;
    }
    case 4: case 5: case 6: case 7: case 9: case 10: case 11: case 12: {
        // Multi*, GeometryCollection and the curve containers hold complete WKB geometries.
        uint32_t parts;
        if (!read_u32(s, little, &parts)) return 0;
        if ((size_t)(s->end - s->p) / 9 < parts) return 0;
        for (uint32_t i = 0; i < parts; i++) {
            if (!scan_geometry(s)) return 0;
        }
        break;
    }
    default:
        return 0;
    }
    s->depth--;
    return 1;
}

int outpost_gpkg_bounds(const unsigned char *blob, int size, double out[4]) {
    if (blob == NULL || size < 8 || blob[0] != 'G' || blob[1] != 'P') return -1;
    unsigned flags = blob[3];
    int little = flags & 1;
    unsigned envelope = (flags >> 1) & 7;
    int empty = (flags >> 4) & 1;
    static const int envelope_doubles[] = {0, 4, 6, 6, 8};
    if (envelope > 4) return -1;
    int header = 8 + envelope_doubles[envelope] * 8;
    if (size < header) return -1;
    if (empty) return 0;
    if (envelope > 0) {
        out[0] = decode_double(blob + 8, little);
        out[1] = decode_double(blob + 16, little);
        out[2] = decode_double(blob + 24, little);
        out[3] = decode_double(blob + 32, little);
        if (isnan(out[0]) || isnan(out[2])) return 0;
        return 1;
    }
    wkb_scan s = {blob + header, blob + size, 0, 0, 0, 0, 0, 0};
    if (!scan_geometry(&s)) return -1;
    if (!s.any) return 0;
    out[0] = s.minx;
    out[1] = s.maxx;
    out[2] = s.miny;
    out[3] = s.maxy;
    return 1;
}

static void st_is_empty(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB) {
        sqlite3_result_null(ctx);
        return;
    }
    const unsigned char *blob = sqlite3_value_blob(argv[0]);
    int size = sqlite3_value_bytes(argv[0]);
    if (blob == NULL || size < 8 || blob[0] != 'G' || blob[1] != 'P') {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_result_int(ctx, (blob[3] >> 4) & 1);
}

static void st_bound(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB) {
        sqlite3_result_null(ctx);
        return;
    }
    double bounds[4];
    int rc = outpost_gpkg_bounds(sqlite3_value_blob(argv[0]), sqlite3_value_bytes(argv[0]), bounds);
    if (rc != 1) {
        sqlite3_result_null(ctx);
        return;
    }
    intptr_t which = (intptr_t)sqlite3_user_data(ctx);
    sqlite3_result_double(ctx, bounds[which]);
}

/* outpost_sample_rank(id, salt): a share in [0, 1) fixed for each integer id and salt (splitmix64
 * of id + salt × 2^64/φ), NULL for anything else. FeatureQuery.Sample.rank computes the same in
 * Swift, so a sample taken in SQL and one taken in Swift agree. */
static void outpost_sample_rank(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_type(argv[1]) != SQLITE_INTEGER) {
        sqlite3_result_null(ctx);
        return;
    }
    uint64_t x = (uint64_t)sqlite3_value_int64(argv[0]) + (uint64_t)sqlite3_value_int64(argv[1]) * 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    sqlite3_result_double(ctx, (double)(x >> 11) / 9007199254740992.0);
}

int outpost_register_geopackage_functions(void *handle) {
    sqlite3 *db = handle;
    const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
    int rc = sqlite3_create_function_v2(db, "ST_IsEmpty", 1, flags, NULL, st_is_empty, NULL, NULL, NULL);
    static const char *names[] = {"ST_MinX", "ST_MaxX", "ST_MinY", "ST_MaxY"};
    for (intptr_t i = 0; rc == SQLITE_OK && i < 4; i++) {
        rc = sqlite3_create_function_v2(db, names[i], 1, flags, (void *)i, st_bound, NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_create_function_v2(db, "outpost_sample_rank", 2, flags, NULL, outpost_sample_rank, NULL, NULL, NULL);
    }
    return rc;
}
