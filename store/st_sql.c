/* SPDX-License-Identifier: Apache-2.0
 * store: statement, transaction and column helpers, argument validation and
 * the generic get, list and delete used by every table file (declared in
 * st_int.h). Every write runs in one BEGIN IMMEDIATE transaction: in WAL
 * mode a deferred transaction that upgrades to a writer can fail with BUSY
 * without waiting, an immediate one waits for busy_timeout instead. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "cm_map.h"
#include "st_int.h"

/* ---- statements and transactions ----------------------------------------- */

cm_status st_sql_prepare(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err)
{
    size_t len = strlen(sql);
    uint64_t h = cm_hash_bytes(sql, len);
    st_stmt_slot *free_slot = NULL;
    bool busy = false; /* the text is kept but its statement is in use */
    for (size_t i = 0; i < ST_STMT_CACHE; i++) {
        st_stmt_slot *e = &db->stmts[i];
        if (e->sql == NULL) {
            free_slot = free_slot != NULL ? free_slot : e;
        } else if (e->hash == h && strcmp(e->sql, sql) == 0) {
            if (!e->in_use) {
                e->in_use = true;
                *out = e->s;
                return CM_OK;
            }
            busy = true;
        }
    }
    /* Only texts that fit the cache and are not kept already are kept; a
     * second user of the same text gets a statement of its own. */
    bool keep = free_slot != NULL && !busy;
    int rc = sqlite3_prepare_v3(db->conn, sql, (int)len, keep ? SQLITE_PREPARE_PERSISTENT : 0, out,
                                NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*out);
        *out = NULL;
        return st_db_fail(db, rc, "prepare", err);
    }
    char *copy = keep ? st_alloc(len + 1) : NULL;
    if (copy != NULL) {
        memcpy(copy, sql, len + 1);
        *free_slot = (st_stmt_slot){.sql = copy, .hash = h, .s = *out, .in_use = true};
    }
    return CM_OK;
}

void st_sql_release(st_db *db, sqlite3_stmt *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < ST_STMT_CACHE; i++) {
        st_stmt_slot *e = &db->stmts[i];
        if (e->sql != NULL && e->s == s) {
            (void)sqlite3_reset(s); /* its error was reported by the step */
            (void)sqlite3_clear_bindings(s);
            e->in_use = false;
            return;
        }
    }
    sqlite3_finalize(s);
}

void st_sql_cache_clear(st_db *db)
{
    for (size_t i = 0; i < ST_STMT_CACHE; i++) {
        st_stmt_slot *e = &db->stmts[i];
        if (e->sql != NULL) {
            assert(!e->in_use);
            sqlite3_finalize(e->s);
            cm_free(e->sql);
            *e = (st_stmt_slot){0};
        }
    }
}

/* Runs one parameterless statement that returns no rows, kept prepared. */
cm_status st_sql_run(st_db *db, const char *sql, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        int rc = sqlite3_step(s);
        st = rc == SQLITE_DONE ? CM_OK : st_db_fail(db, rc, sql, err);
    }
    st_sql_release(db, s);
    return st;
}

cm_status st_sql_exec(st_db *db, const char *sql, cm_error *err)
{
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? CM_OK : st_db_fail(db, rc, sql, err);
}

cm_status st_sql_begin(st_db *db, cm_error *err)
{
    return st_sql_run(db, "BEGIN IMMEDIATE", err);
}

/* Commits when st is CM_OK, else (or when the commit fails) rolls back
 * whatever is still open. Returns the final status. */
cm_status st_sql_finish(st_db *db, cm_status st, cm_error *err)
{
    if (st == CM_OK) {
        st = st_sql_run(db, "COMMIT", err);
    }
    if (st != CM_OK && !sqlite3_get_autocommit(db->conn)) {
        (void)st_sql_run(db, "ROLLBACK", NULL);
    }
    return st;
}

/* st_sql_bind with the values in ap (consumed). */
static cm_status sql_vbind(st_db *db, sqlite3_stmt *s, cm_error *err, const char *types, va_list ap)
{
    int rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && types[i] != '\0'; i++) {
        int at = i + 1; /* SQLite numbers parameters from 1 */
        char type = types[i];
        switch (type) {
        case 'i':
            rc = sqlite3_bind_int64(s, at, (sqlite3_int64)va_arg(ap, int64_t));
            break;
        case 'I': {
            int64_t v = va_arg(ap, int64_t);
            rc = v != 0 ? sqlite3_bind_int64(s, at, (sqlite3_int64)v) : sqlite3_bind_null(s, at);
            break;
        }
        case 'd':
            rc = sqlite3_bind_double(s, at, va_arg(ap, double));
            break;
        case 't':
        case 'T': {
            const char *t = va_arg(ap, const char *);
            assert(t != NULL || type == 'T');
            rc = t != NULL ? sqlite3_bind_text(s, at, t, -1, SQLITE_STATIC)
                           : sqlite3_bind_null(s, at);
            break;
        }
        case 's': {
            const char *t = va_arg(ap, const char *);
            size_t n = va_arg(ap, size_t);
            rc = sqlite3_bind_text64(s, at, t, (sqlite3_uint64)n, SQLITE_STATIC, SQLITE_UTF8);
            break;
        }
        case 'b':
        case 'B': {
            const void *p = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            assert(p != NULL || n == 0 || type == 'B');
            if (p == NULL && type == 'B') {
                rc = sqlite3_bind_null(s, at);
            } else {
                /* A zero-length blob with a NULL pointer would bind SQL NULL. */
                rc = sqlite3_bind_blob64(s, at, n > 0 ? p : "", (sqlite3_uint64)n, SQLITE_STATIC);
            }
            break;
        }
        default:
            assert(0 && "st_sql_bind: unknown type letter");
            rc = SQLITE_MISUSE;
            break;
        }
    }
    return rc == SQLITE_OK ? CM_OK : st_db_fail(db, rc, "bind", err);
}

/* Binds ?1, ?2, ... in order, one parameter per letter of types; the
 * letters and the argument contract are documented in st_int.h. */
cm_status st_sql_bind(st_db *db, sqlite3_stmt *s, cm_error *err, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    cm_status st = sql_vbind(db, s, err, types, ap);
    va_end(ap);
    return st;
}

/* Prepares sql and binds types from ap; on error *out is NULL. */
static cm_status sql_vprepare(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err,
                              const char *types, va_list ap)
{
    cm_status st = st_sql_prepare(db, sql, out, err);
    if (st == CM_OK) {
        st = sql_vbind(db, *out, err, types, ap);
    }
    if (st != CM_OK) {
        st_sql_release(db, *out);
        *out = NULL;
    }
    return st;
}

/* The end of a write that stores a row (st_int.h). */
cm_status st_sql_put_done(st_db *db, cm_status st, int64_t id, bool existed, int64_t *id_out,
                          bool *existed_out, cm_error *err)
{
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    if (st == CM_OK && id_out != NULL) {
        *id_out = id;
    }
    if (st == CM_OK && existed_out != NULL) {
        *existed_out = existed;
    }
    return st;
}

/* Runs one statement that returns no rows (st_int.h). */
cm_status st_sql_write(st_db *db, int64_t *rowid_out, cm_error *err, const char *sql,
                       const char *types, ...)
{
    sqlite3_stmt *s = NULL;
    va_list ap;
    va_start(ap, types);
    cm_status st = sql_vprepare(db, sql, &s, err, types, ap);
    va_end(ap);
    if (st == CM_OK) {
        st = st_sql_step_done(db, s, err);
    }
    st_sql_release(db, s);
    if (st == CM_OK && rowid_out != NULL) {
        *rowid_out = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    return st;
}

/* Steps s once: CM_OK with *row telling whether a row came back. */
cm_status st_sql_step(st_db *db, sqlite3_stmt *s, bool *row, cm_error *err)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *row = true;
        return CM_OK;
    }
    *row = false;
    return rc == SQLITE_DONE ? CM_OK : st_db_fail(db, rc, "step", err);
}

/* Steps a statement that returns no row. */
cm_status st_sql_step_done(st_db *db, sqlite3_stmt *s, cm_error *err)
{
    bool row;
    return st_sql_step(db, s, &row, err);
}

/* Copies column i into a new NUL-terminated heap string (NULL for SQL NULL). */
cm_status st_sql_col_dup(sqlite3_stmt *s, int i, char **out, size_t *len_out, cm_error *err)
{
    *out = NULL;
    if (len_out != NULL) {
        *len_out = 0;
    }
    if (sqlite3_column_type(s, i) == SQLITE_NULL) {
        return CM_OK;
    }
    const void *p = sqlite3_column_blob(s, i);
    int n = sqlite3_column_bytes(s, i);
    if (p == NULL && n > 0) {
        return cm_error_oom(err); /* SQLite could not materialise the value */
    }
    char *c = st_alloc((size_t)n + 1);
    if (c == NULL) {
        return cm_error_oom(err);
    }
    if (n > 0) {
        memcpy(c, p, (size_t)n);
    }
    c[n] = '\0';
    *out = c;
    if (len_out != NULL) {
        *len_out = (size_t)n;
    }
    return CM_OK;
}

/* Copies a text column into fixed storage of cap bytes (truncating). */
void st_sql_col_copy(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    int n = sqlite3_column_bytes(s, i);
    size_t k = t != NULL && n > 0 ? (size_t)n : 0;
    if (k >= cap) {
        k = cap - 1;
    }
    if (k > 0) {
        memcpy(dst, t, k);
    }
    dst[k] = '\0';
}

/* ---- validation ---------------------------------------------------------------- */

/* True when s[0..n) is valid UTF-8 without control characters. */
bool st_clean_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x20 || c == 0x7f) {
            return false;
        }
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned min;
        unsigned cp;
        if ((c & 0xe0) == 0xc0) {
            k = 1, min = 0x80, cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, min = 0x800, cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, min = 0x10000, cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= k) {
            return false;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (s[i + j] & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += k + 1;
    }
    return true;
}

cm_status st_check_name(const char *name, const char *path, cm_error *err)
{
    if (name == NULL || name[0] == '\0') {
        return cm_error_set(err, CM_EINVAL, path, "must be a non-empty string");
    }
    size_t n = strlen(name);
    if (n > ST_NAME_MAX_LEN) {
        return cm_error_set(err, CM_EINVAL, path, "longer than %d bytes", ST_NAME_MAX_LEN);
    }
    if (!st_clean_utf8((const unsigned char *)name, n)) {
        return cm_error_set(err, CM_EINVAL, path, "must be UTF-8 without control characters");
    }
    return CM_OK;
}

/* Checks a 64-hex-digit hash and copies it lower-cased into out. */
cm_status st_check_hash(const char *h, char out[ST_HASH_HEX_LEN + 1], cm_error *err)
{
    size_t n = h != NULL ? strlen(h) : 0;
    if (n != ST_HASH_HEX_LEN) {
        return cm_error_set(err, CM_EINVAL, "/hash", "must be %d hex digits", ST_HASH_HEX_LEN);
    }
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return cm_error_set(err, CM_EINVAL, "/hash", "must be %d hex digits", ST_HASH_HEX_LEN);
        }
        out[i] = c;
    }
    out[n] = '\0';
    return CM_OK;
}

cm_status st_check_id(int64_t id, const char *path, cm_error *err)
{
    if (id <= 0) {
        return cm_error_set(err, CM_EINVAL, path, "must be a positive id");
    }
    return CM_OK;
}

cm_status st_check_body(const char *body, size_t len, const char *path, cm_error *err)
{
    if (body == NULL || len == 0) {
        return cm_error_set(err, CM_EINVAL, path, "must not be empty");
    }
    if (len > 1000000000u) { /* SQLITE_MAX_LENGTH */
        return cm_error_set(err, CM_EINVAL, path, "larger than 10^9 bytes");
    }
    return CM_OK;
}

/* Checks that text[0..len) is JSON, using SQLite's json_valid. Call locked. */
cm_status st_check_json(st_db *db, const char *text, size_t len, const char *path, cm_error *err)
{
    cm_status st = st_check_body(text, len, path, err);
    if (st != CM_OK) {
        return st;
    }
    if (memchr(text, '\0', len) != NULL) {
        return cm_error_set(err, CM_EINVAL, path, "is not valid JSON (contains a NUL byte)");
    }
    sqlite3_stmt *s = NULL;
    st = st_sql_prepare(db, "SELECT json_valid(?1)", &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "s", text, len);
    }
    bool row = false;
    unsigned long failures = st_alloc_failures();
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK && (!row || sqlite3_column_int(s, 0) != 1)) {
        /* SQLite 3.40's json_valid answers 0, not an error, when its parser
         * runs out of memory: an allocation failure meanwhile means OOM. */
        st = st_alloc_failures() != failures
                 ? cm_error_oom(err)
                 : cm_error_set(err, CM_EINVAL, path, "is not valid JSON");
    }
    st_sql_release(db, s);
    return st;
}

cm_status st_check_limit(size_t limit, int64_t after_id, size_t *limit_out, cm_error *err)
{
    if (limit > ST_LIST_MAX_LIMIT) {
        return cm_error_set(err, CM_EINVAL, "/limit", "must be at most %d", ST_LIST_MAX_LIMIT);
    }
    if (after_id < 0) {
        return cm_error_set(err, CM_EINVAL, "/after", "must not be negative");
    }
    *limit_out = limit == 0 ? ST_LIST_DEFAULT_LIMIT : limit;
    return CM_OK;
}

cm_status st_check_time_range(int64_t after, int64_t before, cm_error *err)
{
    if (after < 0) {
        return cm_error_set(err, CM_EINVAL, "/created_after", "must not be negative");
    }
    if (before < 0) {
        return cm_error_set(err, CM_EINVAL, "/created_before", "must not be negative");
    }
    return CM_OK;
}

/* ---- generic rows: get, list, delete ------------------------------------------ */

void st_rows_fini(const st_rows *rows, void *item)
{
    if (item == NULL) {
        return;
    }
    for (size_t i = 0; i < rows->n_owned; i++) {
        char **p = (char **)(void *)((unsigned char *)item + rows->owned[i]);
        cm_free(*p);
    }
    memset(item, 0, rows->size);
}

void st_rows_free(const st_rows *rows, void *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        st_rows_fini(rows, (unsigned char *)items + i * rows->size);
    }
    cm_free(items);
}

cm_status st_sql_get(st_db *db, const st_rows *rows, void *item, bool *found, cm_error *err,
                     const char *sql, const char *types, ...)
{
    *found = false;
    sqlite3_stmt *s = NULL;
    va_list ap;
    va_start(ap, types);
    cm_status st = sql_vprepare(db, sql, &s, err, types, ap);
    va_end(ap);
    if (st == CM_OK) {
        st = st_sql_step(db, s, found, err);
    }
    if (st == CM_OK && *found) {
        st = rows->row(s, item, true, err);
        if (st != CM_OK) {
            st_rows_fini(rows, item);
        }
    }
    st_sql_release(db, s);
    return st;
}

cm_status st_sql_get_id(st_db *db, const st_rows *rows, const char *what, const char *sql,
                        int64_t id, void *item, cm_error *err)
{
    memset(item, 0, rows->size);
    cm_status st = st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    st_db_lock(db);
    st = st_sql_get(db, rows, item, &found, err, sql, "i", id);
    st_db_unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no %s %lld", what, (long long)id);
    }
    return st;
}

cm_status st_sql_get_hash(st_db *db, const st_rows *rows, const char *what, const char *sql,
                          const char *hash, void *item, cm_error *err)
{
    memset(item, 0, rows->size);
    char h[ST_HASH_HEX_LEN + 1];
    cm_status st = st_check_hash(hash, h, err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    st_db_lock(db);
    st = st_sql_get(db, rows, item, &found, err, sql, "t", h);
    st_db_unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/hash", "no %s with that hash", what);
    }
    return st;
}

/* Steps s, a query whose first column is the id and which was asked for
 * limit + 1 rows, into a heap array of up to limit items and the next-page
 * cursor. On error everything read is freed. */
static cm_status run_list(st_db *db, sqlite3_stmt *s, const st_rows *rows, size_t limit,
                          void **items_out, size_t *n_out, int64_t *next_out, cm_error *err)
{
    unsigned char *items = NULL;
    size_t n = 0;
    size_t cap = 0;
    int64_t last_id = 0;
    cm_status st = CM_OK;
    for (;;) {
        bool has = false;
        st = st_sql_step(db, s, &has, err);
        if (st != CM_OK || !has) {
            break;
        }
        if (n == limit) {
            *next_out = last_id;
            break;
        }
        if (n == cap) {
            size_t ncap = cap == 0 ? 8 : cap * 2;
            if (ncap > limit) {
                ncap = limit;
            }
            unsigned char *grown = st_realloc(items, ncap * rows->size);
            if (grown == NULL) {
                st = cm_error_oom(err);
                break;
            }
            items = grown;
            cap = ncap;
        }
        void *it = items + n * rows->size;
        memset(it, 0, rows->size);
        last_id = (int64_t)sqlite3_column_int64(s, 0);
        st = rows->row(s, it, false, err);
        n++; /* counted even on failure: row leaves it finalisable */
        if (st != CM_OK) {
            break;
        }
    }
    if (st != CM_OK) {
        st_rows_free(rows, items, n);
        *next_out = 0;
        return st;
    }
    *items_out = items;
    *n_out = n;
    return CM_OK;
}

/* sql_vprepare, then the parameter after the caller's bound to tail (a
 * LIMIT or an OFFSET). */
static cm_status sql_vprepare_tail(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err,
                                   int64_t tail, const char *types, va_list ap)
{
    cm_status st = sql_vprepare(db, sql, out, err, types, ap);
    if (st == CM_OK) {
        int rc = sqlite3_bind_int64(*out, (int)strlen(types) + 1, (sqlite3_int64)tail);
        st = rc == SQLITE_OK ? CM_OK : st_db_fail(db, rc, "bind", err);
    }
    return st;
}

cm_status st_sql_list(st_db *db, const st_rows *rows, size_t limit, void **items_out, size_t *n_out,
                      int64_t *next_out, cm_error *err, const char *sql, const char *types, ...)
{
    *items_out = NULL;
    *n_out = 0;
    *next_out = 0;
    sqlite3_stmt *s = NULL;
    va_list ap;
    va_start(ap, types);
    /* LIMIT: one more row than a page */
    cm_status st = sql_vprepare_tail(db, sql, &s, err, (int64_t)limit + 1, types, ap);
    va_end(ap);
    if (st == CM_OK) {
        (void)sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
        st = run_list(db, s, rows, limit, items_out, n_out, next_out, err);
        db->list_steps = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
    }
    st_sql_release(db, s);
    return st;
}

/* The first column of s's first row into *id (left as it is when there is
 * none), when st (how preparing s went) is CM_OK; releases s. */
static cm_status first_id(st_db *db, sqlite3_stmt *s, cm_status st, int64_t *id, cm_error *err)
{
    bool found = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        *id = (int64_t)sqlite3_column_int64(s, 0);
    }
    st_sql_release(db, s);
    return st;
}

cm_status st_sql_scan_bound(st_db *db, int64_t *bound, cm_error *err, const char *sql,
                            const char *types, ...)
{
    *bound = 0;
    sqlite3_stmt *s = NULL;
    va_list ap;
    va_start(ap, types);
    cm_status st = sql_vprepare_tail(db, sql, &s, err, ST_LIST_SCAN_ROWS - 1, types, ap);
    va_end(ap);
    return first_id(db, s, st, bound, err);
}

/* Deletes row id from table in its own transaction (st_int.h). */
cm_status st_sql_delete_id(st_db *db, const char *table, const char *what, int64_t id,
                           cm_error *err)
{
    cm_status st = st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = ?1", table);
    st_db_lock(db);
    st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_sql_write(db, NULL, err, sql, "i", id);
    }
    if (st == CM_OK && sqlite3_changes(db->conn) == 0) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no %s %lld", what, (long long)id);
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    return st;
}

/* The id of table's row with that hash, 0 when none. Call locked. */
cm_status st_sql_id_by_hash(st_db *db, const char *table, const char *hash, int64_t *id_out,
                            cm_error *err)
{
    *id_out = 0;
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT id FROM %s WHERE hash = ?1", table);
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "t", hash);
    }
    return first_id(db, s, st, id_out, err);
}

/* Whether row id exists in table. Call locked. */
cm_status st_sql_row_exists(st_db *db, const char *table, int64_t id, bool *found, cm_error *err)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE id = ?1", table);
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "i", id);
    }
    if (st == CM_OK) {
        st = st_sql_step(db, s, found, err);
    }
    st_sql_release(db, s);
    return st;
}
