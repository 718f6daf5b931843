// SQLite's pre-update hook, reached from Swift. Debian builds SQLite with
// SQLITE_ENABLE_PREUPDATE_HOOK (as the session extension needs), but sqlite3.h declares the
// hook's functions only when that macro is defined where it is included: here.

#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include "COutpostSQLite.h"

#include <sqlite3.h>

void *outpost_preupdate_hook(void *db, outpost_preupdate_callback callback, void *context) {
    return sqlite3_preupdate_hook((sqlite3 *)db, (void (*)(void *, sqlite3 *, int, const char *, const char *, sqlite3_int64, sqlite3_int64))callback, context);
}

int outpost_preupdate_old(void *db, int column, void **value) {
    return sqlite3_preupdate_old((sqlite3 *)db, column, (sqlite3_value **)value);
}

int outpost_preupdate_new(void *db, int column, void **value) {
    return sqlite3_preupdate_new((sqlite3 *)db, column, (sqlite3_value **)value);
}

int outpost_preupdate_blobwrite(void *db) {
    return sqlite3_preupdate_blobwrite((sqlite3 *)db);
}
