/* SPDX-License-Identifier: Apache-2.0
 * store: st_db, the SQLite wrapper (the only file that includes sqlite3.h).
 * SQLite result codes are translated to cm_status here and go no further.
 * SQLite allocates through cm_alloc (configured once per process), so the
 * allocation test hook reaches SQLite's own allocations too and an OOM loop
 * covers them. Every write runs in one BEGIN IMMEDIATE transaction: in WAL
 * mode a deferred transaction that upgrades to a writer can fail with BUSY
 * without waiting, an immediate one waits for busy_timeout instead. */
#include "st_db.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "st_int.h"

struct st_db {
    sqlite3 *conn;      /* the connection; used under mu only */
    pthread_mutex_t mu; /* serializes every call on this handle */
    int64_t fixed_now;  /* test clock, unix seconds; 0 = wall clock */
};

/* ---- allocation ----------------------------------------------------------- */

static atomic_ulong alloc_failures;

unsigned long st_alloc_failures(void)
{
    return atomic_load(&alloc_failures);
}

static void *xalloc(size_t n)
{
    void *p = cm_alloc(n);
    if (p == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
    }
    return p;
}

/* SQLite's allocator on top of cm_alloc. Each block starts with a 16-byte
 * header holding its size (xSize needs it; 16 keeps malloc's alignment). */
#define HDR 16

static void *mem_malloc(int n)
{
    if (n <= 0) {
        return NULL;
    }
    unsigned char *p = xalloc((size_t)n + HDR);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, &n, sizeof n);
    return p + HDR;
}

static void mem_free(void *p)
{
    if (p != NULL) {
        cm_free((unsigned char *)p - HDR);
    }
}

static int mem_size(void *p)
{
    int n = 0;
    if (p != NULL) {
        memcpy(&n, (unsigned char *)p - HDR, sizeof n);
    }
    return n;
}

static void *mem_realloc(void *p, int n)
{
    if (p == NULL) {
        return mem_malloc(n);
    }
    if (n <= 0) {
        mem_free(p);
        return NULL;
    }
    unsigned char *q = cm_realloc((unsigned char *)p - HDR, (size_t)n + HDR);
    if (q == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
        return NULL;
    }
    memcpy(q, &n, sizeof n);
    return q + HDR;
}

static int mem_roundup(int n)
{
    return (n + 7) & ~7;
}

static int mem_init(void *app)
{
    (void)app;
    return SQLITE_OK;
}

static void mem_shutdown(void *app)
{
    (void)app;
}

static const sqlite3_mem_methods mem_methods = {
    mem_malloc, mem_free, mem_realloc, mem_size, mem_roundup, mem_init, mem_shutdown, NULL,
};

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* Fails (harmlessly, SQLite then keeps malloc) if SQLite was initialised
 * before the first st_db_open, e.g. by a test fixture. */
static void lib_configure(void)
{
    (void)sqlite3_config(SQLITE_CONFIG_MALLOC, &mem_methods);
}

/* ---- errors ---------------------------------------------------------------- */

static cm_status map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return CM_OK;
    case SQLITE_NOMEM:
        return CM_ENOMEM;
    case SQLITE_IOERR:
        return rc == SQLITE_IOERR_NOMEM ? CM_ENOMEM : CM_EIO;
    case SQLITE_CONSTRAINT:
        return rc == SQLITE_CONSTRAINT_CHECK || rc == SQLITE_CONSTRAINT_NOTNULL ? CM_EINVAL
                                                                                : CM_ECONFLICT;
    case SQLITE_TOOBIG:
        return CM_EINVAL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_FULL:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
    case SQLITE_AUTH:
        return CM_EIO;
    default: /* CORRUPT, ERROR (our SQL), MISUSE, ...: our own state is wrong */
        return CM_EINTERNAL;
    }
}

/* Reports a failed SQLite call rc, doing what, with SQLite's message. */
static cm_status db_fail(const st_db *db, int rc, const char *what, cm_error *err)
{
    cm_status st = map_rc(rc);
    if (st == CM_OK) {
        st = CM_EINTERNAL;
    }
    const char *m = db != NULL && db->conn != NULL ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_BUSY) {
        return cm_error_set(err, st, NULL, "%s: database busy for more than %d ms", what,
                            ST_DB_BUSY_TIMEOUT_MS);
    }
    return cm_error_set(err, st, NULL, "%s: %s", what, m);
}

static cm_status oom(cm_error *err)
{
    return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
}

/* ---- small helpers ---------------------------------------------------------- */

static int64_t db_now(const st_db *db)
{
    return db->fixed_now != 0 ? db->fixed_now : (int64_t)time(NULL);
}

static void lock(st_db *db)
{
    int rc = pthread_mutex_lock(&db->mu);
    assert(rc == 0);
    (void)rc;
}

static void unlock(st_db *db)
{
    int rc = pthread_mutex_unlock(&db->mu);
    assert(rc == 0);
    (void)rc;
}

static cm_status prepare(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err)
{
    int rc = sqlite3_prepare_v2(db->conn, sql, -1, out, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*out);
        *out = NULL;
        return db_fail(db, rc, "prepare", err);
    }
    return CM_OK;
}

static cm_status exec(st_db *db, const char *sql, cm_error *err)
{
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? CM_OK : db_fail(db, rc, sql, err);
}

static cm_status begin(st_db *db, cm_error *err)
{
    return exec(db, "BEGIN IMMEDIATE", err);
}

/* Commits when st is CM_OK, else (or when the commit fails) rolls back
 * whatever is still open. Returns the final status. */
static cm_status finish(st_db *db, cm_status st, cm_error *err)
{
    if (st == CM_OK) {
        st = exec(db, "COMMIT", err);
    }
    if (st != CM_OK && !sqlite3_get_autocommit(db->conn)) {
        (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
    }
    return st;
}

/* Binds the parameters ?1, ?2, ... of s in order, one per letter of types,
 * taking each value's arguments from the variable arguments:
 *
 *   i  int64_t v                 an integer
 *   I  int64_t v                 an optional id: 0 binds SQL NULL
 *   d  double v                  a real
 *   t  const char *t             NUL-terminated text, not NULL
 *   T  const char *t             NUL-terminated text, or NULL for SQL NULL
 *   s  const char *t, size_t n   text of n bytes (need not be NUL-terminated)
 *   b  const void *p, size_t n   a blob of n bytes (n = 0: an empty blob, not NULL)
 *   B  const void *p, size_t n   a blob as for b, or p = NULL for SQL NULL
 *
 * The arguments must have exactly these types (variable arguments are not
 * converted): pass int64_t and size_t variables, or cast literals, e.g.
 * (int64_t)0. Values are bound SQLITE_STATIC: they must stay valid until the
 * statement is stepped for the last time. err comes before types because
 * the values follow it. Stops at the first failure and returns it (reported
 * as "bind"); CM_OK when every parameter is bound. An unknown letter is a
 * bug (assert). */
static cm_status bind_values(st_db *db, sqlite3_stmt *s, cm_error *err, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
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
            assert(0 && "bind_values: unknown type letter");
            rc = SQLITE_MISUSE;
            break;
        }
    }
    va_end(ap);
    return rc == SQLITE_OK ? CM_OK : db_fail(db, rc, "bind", err);
}

/* Steps s once: CM_OK with *row telling whether a row came back. */
static cm_status step(st_db *db, sqlite3_stmt *s, bool *row, cm_error *err)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *row = true;
        return CM_OK;
    }
    *row = false;
    return rc == SQLITE_DONE ? CM_OK : db_fail(db, rc, "step", err);
}

/* Steps a statement that returns no row. */
static cm_status step_done(st_db *db, sqlite3_stmt *s, cm_error *err)
{
    bool row;
    return step(db, s, &row, err);
}

/* Copies column i into a new NUL-terminated heap string (NULL for SQL NULL). */
static cm_status col_dup(sqlite3_stmt *s, int i, char **out, size_t *len_out, cm_error *err)
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
        return oom(err); /* SQLite could not materialise the value */
    }
    char *c = xalloc((size_t)n + 1);
    if (c == NULL) {
        return oom(err);
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
static void col_copy(sqlite3_stmt *s, int i, char *dst, size_t cap)
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
static bool clean_utf8(const unsigned char *s, size_t n)
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

static cm_status check_name(const char *name, const char *path, cm_error *err)
{
    if (name == NULL || name[0] == '\0') {
        return cm_error_set(err, CM_EINVAL, path, "must be a non-empty string");
    }
    size_t n = strlen(name);
    if (n > ST_NAME_MAX_LEN) {
        return cm_error_set(err, CM_EINVAL, path, "longer than %d bytes", ST_NAME_MAX_LEN);
    }
    if (!clean_utf8((const unsigned char *)name, n)) {
        return cm_error_set(err, CM_EINVAL, path, "must be UTF-8 without control characters");
    }
    return CM_OK;
}

/* Checks a 64-hex-digit hash and copies it lower-cased into out. */
static cm_status check_hash(const char *h, char out[ST_HASH_HEX_LEN + 1], cm_error *err)
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

static cm_status check_id(int64_t id, const char *path, cm_error *err)
{
    if (id <= 0) {
        return cm_error_set(err, CM_EINVAL, path, "must be a positive id");
    }
    return CM_OK;
}

static cm_status check_body(const char *body, size_t len, const char *path, cm_error *err)
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
static cm_status check_json(st_db *db, const char *text, size_t len, const char *path,
                            cm_error *err)
{
    cm_status st = check_body(text, len, path, err);
    if (st != CM_OK) {
        return st;
    }
    if (memchr(text, '\0', len) != NULL) {
        return cm_error_set(err, CM_EINVAL, path, "is not valid JSON (contains a NUL byte)");
    }
    sqlite3_stmt *s = NULL;
    st = prepare(db, "SELECT json_valid(?1)", &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "s", text, len);
    }
    bool row = false;
    unsigned long failures = st_alloc_failures();
    if (st == CM_OK) {
        st = step(db, s, &row, err);
    }
    if (st == CM_OK && (!row || sqlite3_column_int(s, 0) != 1)) {
        /* SQLite 3.40's json_valid answers 0, not an error, when its parser
         * runs out of memory: an allocation failure meanwhile means OOM. */
        st = st_alloc_failures() != failures
                 ? oom(err)
                 : cm_error_set(err, CM_EINVAL, path, "is not valid JSON");
    }
    sqlite3_finalize(s);
    return st;
}

static cm_status check_limit(size_t limit, int64_t after_id, size_t *limit_out, cm_error *err)
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

static cm_status check_time_range(int64_t after, int64_t before, cm_error *err)
{
    if (after < 0) {
        return cm_error_set(err, CM_EINVAL, "/created_after", "must not be negative");
    }
    if (before < 0) {
        return cm_error_set(err, CM_EINVAL, "/created_before", "must not be negative");
    }
    return CM_OK;
}

/* ---- generic lists ---------------------------------------------------------------- */

/* Reads one row of a list query into item (caller storage, zeroed). */
typedef cm_status (*row_fn)(sqlite3_stmt *s, void *item, cm_error *err);
typedef void (*fini_fn)(void *item);

/* Runs a bound query whose first column is the id and which was asked for
 * limit + 1 rows; fills a heap array of up to limit items of item_size
 * bytes and the next-page cursor. On error everything read is freed. */
static cm_status run_list(st_db *db, sqlite3_stmt *s, size_t limit, size_t item_size, row_fn row,
                          fini_fn fini, void **items_out, size_t *n_out, int64_t *next_out,
                          cm_error *err)
{
    *items_out = NULL;
    *n_out = 0;
    *next_out = 0;
    unsigned char *items = NULL;
    size_t n = 0;
    size_t cap = 0;
    int64_t last_id = 0;
    cm_status st = CM_OK;
    for (;;) {
        bool has = false;
        st = step(db, s, &has, err);
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
            unsigned char *grown = cm_realloc(items, ncap * item_size);
            if (grown == NULL) {
                atomic_fetch_add(&alloc_failures, 1);
                st = oom(err);
                break;
            }
            items = grown;
            cap = ncap;
        }
        void *it = items + n * item_size;
        memset(it, 0, item_size);
        last_id = (int64_t)sqlite3_column_int64(s, 0);
        st = row(s, it, err);
        n++; /* counted even on failure: row leaves it finalisable */
        if (st != CM_OK) {
            break;
        }
    }
    if (st != CM_OK) {
        for (size_t i = 0; i < n; i++) {
            fini(items + i * item_size);
        }
        cm_free(items);
        *next_out = 0;
        return st;
    }
    *items_out = items;
    *n_out = n;
    return CM_OK;
}

/* ---- open / close ------------------------------------------------------------------ */

static cm_status pragma_expect(st_db *db, const char *sql, const char *want, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, sql, &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = step(db, s, &row, err);
    }
    if (st == CM_OK && want != NULL) {
        const unsigned char *t = row ? sqlite3_column_text(s, 0) : NULL;
        if (row && t == NULL) {
            st = oom(err); /* the integer-to-text conversion failed */
        } else if (t == NULL || strcmp((const char *)t, want) != 0) {
            st = cm_error_set(err, CM_EIO, NULL, "%s: got '%s', need '%s'", sql,
                              t != NULL ? (const char *)t : "", want);
        }
    }
    sqlite3_finalize(s);
    return st;
}

static cm_status read_version(st_db *db, int64_t *out, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version", &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = step(db, s, &row, err);
    }
    if (st == CM_OK) {
        *out = row ? (int64_t)sqlite3_column_int64(s, 0) : 0;
    }
    sqlite3_finalize(s);
    return st;
}

static cm_status migrate(st_db *db, cm_error *err)
{
    cm_status st = begin(db, err);
    if (st != CM_OK) {
        return st;
    }
    st = exec(db,
              "CREATE TABLE IF NOT EXISTS schema_version ("
              " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
              err);
    int64_t v = 0;
    if (st == CM_OK) {
        st = read_version(db, &v, err);
    }
    if (st == CM_OK && v > ST_DB_SCHEMA_VERSION) {
        st = cm_error_set(err, CM_ECONFLICT, NULL,
                          "database schema version %lld is newer than this build's (%d)",
                          (long long)v, ST_DB_SCHEMA_VERSION);
    }
    for (size_t i = 0; st == CM_OK && i < st_n_migrations; i++) {
        const st_migration *m = &st_migrations[i];
        assert(m->version == (int64_t)i + 1);
        if (m->version <= v) {
            continue;
        }
        st = exec(db, m->sql, err);
        sqlite3_stmt *s = NULL;
        if (st == CM_OK) {
            st = prepare(db,
                         "INSERT INTO schema_version (version, name, applied_at) "
                         "VALUES (?1, ?2, ?3)",
                         &s, err);
        }
        if (st == CM_OK) {
            st = bind_values(db, s, err, "iti", m->version, m->name, db_now(db));
        }
        if (st == CM_OK) {
            st = step_done(db, s, err);
        }
        sqlite3_finalize(s);
    }
    return finish(db, st, err);
}

cm_status st_db_open(const char *path, st_db **out, cm_error *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        return cm_error_set(err, CM_EINVAL, "/path", "must be a non-empty file name");
    }
    int rc = pthread_once(&lib_once, lib_configure);
    assert(rc == 0);
    rc = sqlite3_initialize();
    if (rc != SQLITE_OK) {
        return db_fail(NULL, rc, "sqlite3_initialize", err);
    }
    st_db *db = cm_calloc(1, sizeof *db);
    if (db == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
        return oom(err);
    }
    if (pthread_mutex_init(&db->mu, NULL) != 0) {
        cm_free(db);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a mutex");
    }
    /* NOMUTEX: db->mu already serializes every use of the connection. */
    rc = sqlite3_open_v2(path, &db->conn,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    cm_status st = CM_OK;
    if (rc != SQLITE_OK) {
        /* Anything but OOM means the file could not be opened. */
        st = map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        st = cm_error_set(err, st, "/path", "cannot open '%s': %s", path,
                          db->conn != NULL ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
    }
    if (st == CM_OK) {
        sqlite3_extended_result_codes(db->conn, 1);
        rc = sqlite3_busy_timeout(db->conn, ST_DB_BUSY_TIMEOUT_MS);
        st = rc == SQLITE_OK ? CM_OK : db_fail(db, rc, "busy_timeout", err);
    }
    if (st == CM_OK) {
        st = pragma_expect(db, "PRAGMA journal_mode=WAL", "wal", err);
    }
    if (st == CM_OK) {
        st = exec(db, "PRAGMA synchronous=NORMAL", err);
    }
    if (st == CM_OK) {
        st = exec(db, "PRAGMA foreign_keys=ON", err);
    }
    if (st == CM_OK) {
        st = pragma_expect(db, "PRAGMA foreign_keys", "1", err);
    }
    if (st == CM_OK) {
        st = migrate(db, err);
    }
    if (st != CM_OK) {
        st_db_close(db);
        return st;
    }
    *out = db;
    return CM_OK;
}

void st_db_close(st_db *db)
{
    if (db == NULL) {
        return;
    }
    if (db->conn != NULL) {
        int rc = sqlite3_close(db->conn);
        assert(rc == SQLITE_OK); /* every statement is finalised before return */
        (void)rc;
    }
    pthread_mutex_destroy(&db->mu);
    cm_free(db);
}

void st_db_set_time(st_db *db, int64_t unix_s)
{
    lock(db);
    db->fixed_now = unix_s;
    unlock(db);
}

cm_status st_db_schema_version(st_db *db, int64_t *version_out, cm_error *err)
{
    lock(db);
    cm_status st = read_version(db, version_out, err);
    unlock(db);
    return st;
}

cm_status st_db_integrity_check(st_db *db, cm_error *err)
{
    lock(db);
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, "PRAGMA integrity_check", &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = step(db, s, &row, err);
    }
    if (st == CM_OK) {
        const unsigned char *t = row ? sqlite3_column_text(s, 0) : NULL;
        if (t == NULL || strcmp((const char *)t, "ok") != 0) {
            st = cm_error_set(err, CM_EINTERNAL, NULL, "integrity_check: %s",
                              t != NULL ? (const char *)t : "no result");
        }
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == CM_OK) {
        st = prepare(db, "PRAGMA foreign_key_check", &s, err);
    }
    if (st == CM_OK) {
        st = step(db, s, &row, err);
    }
    if (st == CM_OK && row) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        st = cm_error_set(err, CM_EINTERNAL, NULL, "foreign_key_check: dangling row %lld in %s",
                          (long long)sqlite3_column_int64(s, 1), t != NULL ? (const char *)t : "?");
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

/* ---- graphs --------------------------------------------------------------------------- */

const char *st_graph_format_name(st_graph_format f)
{
    return f == ST_GRAPH_MLIR ? "mlir" : "json";
}

bool st_graph_format_parse(const char *s, st_graph_format *out)
{
    if (s != NULL && strcmp(s, "json") == 0) {
        *out = ST_GRAPH_JSON;
        return true;
    }
    if (s != NULL && strcmp(s, "mlir") == 0) {
        *out = ST_GRAPH_MLIR;
        return true;
    }
    return false;
}

void st_graph_query_init(st_graph_query *q)
{
    memset(q, 0, sizeof *q);
}

void st_graph_fini(st_graph *g)
{
    if (g == NULL) {
        return;
    }
    cm_free(g->name);
    cm_free(g->body);
    memset(g, 0, sizeof *g);
}

void st_graph_list_fini(st_graph_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n_items; i++) {
        st_graph_fini(&l->items[i]);
    }
    cm_free(l->items);
    memset(l, 0, sizeof *l);
}

#define GRAPH_COLS "id, name, format, hash, created_at, length(body)"

/* Row: GRAPH_COLS [, body]. */
static cm_status graph_row(sqlite3_stmt *s, st_graph *g, bool with_body, cm_error *err)
{
    g->id = (int64_t)sqlite3_column_int64(s, 0);
    cm_status st = col_dup(s, 1, &g->name, NULL, err);
    const unsigned char *f = sqlite3_column_text(s, 2);
    g->format = f != NULL && strcmp((const char *)f, "mlir") == 0 ? ST_GRAPH_MLIR : ST_GRAPH_JSON;
    col_copy(s, 3, g->hash, sizeof g->hash);
    g->created_at = (int64_t)sqlite3_column_int64(s, 4);
    g->body_len = (size_t)sqlite3_column_int64(s, 5);
    if (st == CM_OK && with_body) {
        st = col_dup(s, 6, &g->body, &g->body_len, err);
    }
    return st;
}

static cm_status graph_list_row(sqlite3_stmt *s, void *item, cm_error *err)
{
    return graph_row(s, item, false, err);
}

static void graph_fini_v(void *item)
{
    st_graph_fini(item);
}

static cm_status graph_lookup(st_db *db, const char *sql_where, int64_t id, const char *hash,
                              st_graph *out, bool with_body, bool *found, cm_error *err)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT " GRAPH_COLS "%s FROM graphs WHERE %s",
             with_body ? ", body" : "", sql_where);
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = hash != NULL ? bind_values(db, s, err, "t", hash) : bind_values(db, s, err, "i", id);
    }
    *found = false;
    if (st == CM_OK) {
        st = step(db, s, found, err);
    }
    if (st == CM_OK && *found && out != NULL) {
        st = graph_row(s, out, with_body, err);
        if (st != CM_OK) {
            st_graph_fini(out);
        }
    }
    sqlite3_finalize(s);
    return st;
}

cm_status st_graph_put(st_db *db, const st_graph_in *in, int64_t *id_out, bool *existed_out,
                       cm_error *err)
{
    int64_t id = 0;
    bool existed = false;
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    cm_status st = check_name(in->name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    if (in->format != ST_GRAPH_JSON && in->format != ST_GRAPH_MLIR) {
        return cm_error_set(err, CM_EINVAL, "/format", "must be json or mlir");
    }
    st = check_body(in->body, in->body_len, "/body", err);
    if (st != CM_OK) {
        return st;
    }
    char hash[ST_HASH_HEX_LEN + 1];
    if (in->hash != NULL) {
        st = check_hash(in->hash, hash, err);
        if (st != CM_OK) {
            return st;
        }
    } else {
        cm_sha256 c;
        cm_sha256_init(&c);
        const char *fname = st_graph_format_name(in->format);
        cm_sha256_update(&c, fname, strlen(fname) + 1);
        cm_sha256_update(&c, in->body, in->body_len);
        uint8_t d[CM_SHA256_LEN];
        cm_sha256_final(&c, d);
        cm_sha256_to_hex(d, hash);
    }
    lock(db);
    st = begin(db, err);
    if (st == CM_OK) {
        st_graph g;
        memset(&g, 0, sizeof g);
        st = graph_lookup(db, "hash = ?1", 0, hash, &g, false, &existed, err);
        id = g.id;
        st_graph_fini(&g);
    }
    if (st == CM_OK && !existed) {
        sqlite3_stmt *s = NULL;
        st = prepare(db,
                     "INSERT INTO graphs (name, format, hash, body, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)",
                     &s, err);
        if (st == CM_OK) {
            st = bind_values(db, s, err, "tttbi", in->name, st_graph_format_name(in->format), hash,
                             in->body, in->body_len, db_now(db));
        }
        if (st == CM_OK) {
            st = step_done(db, s, err);
        }
        sqlite3_finalize(s);
        id = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK) {
        if (id_out != NULL) {
            *id_out = id;
        }
        if (existed_out != NULL) {
            *existed_out = existed;
        }
    }
    return st;
}

cm_status st_graph_get(st_db *db, int64_t id, st_graph *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    lock(db);
    st = graph_lookup(db, "id = ?1", id, NULL, out, true, &found, err);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no graph %lld", (long long)id);
    }
    return st;
}

cm_status st_graph_get_by_hash(st_db *db, const char *hash, st_graph *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    char h[ST_HASH_HEX_LEN + 1];
    cm_status st = check_hash(hash, h, err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    lock(db);
    st = graph_lookup(db, "hash = ?1", 0, h, out, true, &found, err);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/hash", "no graph with that hash");
    }
    return st;
}

cm_status st_graph_list_query(st_db *db, const st_graph_query *q, st_graph_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK) {
        st = check_time_range(q->created_after, q->created_before, err);
    }
    if (st == CM_OK && q->has_format && q->format != ST_GRAPH_JSON && q->format != ST_GRAPH_MLIR) {
        st = cm_error_set(err, CM_EINVAL, "/format", "must be json or mlir");
    }
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db,
                 "SELECT " GRAPH_COLS " FROM graphs WHERE id > ?1"
                 " AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR format = ?3)"
                 " AND (?4 = 0 OR created_at >= ?4) AND (?5 = 0 OR created_at < ?5)"
                 " ORDER BY id LIMIT ?6",
                 &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "iTTiii", q->after_id, q->name,
                         q->has_format ? st_graph_format_name(q->format) : NULL, q->created_after,
                         q->created_before, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = run_list(db, s, limit, sizeof(st_graph), graph_list_row, graph_fini_v, &items,
                      &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

/* Deletes row id from table; CM_ENOTFOUND at /id when absent. Call locked. */
static cm_status delete_id(st_db *db, const char *table, const char *what, int64_t id,
                           cm_error *err)
{
    char sql[96];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = ?1", table);
    cm_status st = begin(db, err);
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db, sql, &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "i", id);
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
    }
    if (st == CM_OK && sqlite3_changes(db->conn) == 0) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no %s %lld", what, (long long)id);
    }
    sqlite3_finalize(s);
    return finish(db, st, err);
}

cm_status st_graph_delete(st_db *db, int64_t id, cm_error *err)
{
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    st = delete_id(db, "graphs", "graph", id, err);
    unlock(db);
    return st;
}

/* ---- named documents ------------------------------------------------------------------- */

typedef struct doc_kind {
    const char *table; /* SQL table */
    const char *what;  /* for messages */
} doc_kind;

static const doc_kind MESH = {"meshes", "mesh"};
static const doc_kind RULE = {"rules", "custom rule"};
static const doc_kind PROFILE = {"profiles", "device profile"};

void st_doc_query_init(st_doc_query *q)
{
    memset(q, 0, sizeof *q);
}

void st_doc_fini(st_doc *d)
{
    if (d == NULL) {
        return;
    }
    cm_free(d->name);
    cm_free(d->body);
    memset(d, 0, sizeof *d);
}

void st_doc_list_fini(st_doc_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n_items; i++) {
        st_doc_fini(&l->items[i]);
    }
    cm_free(l->items);
    memset(l, 0, sizeof *l);
}

/* Row: id, name, created_at, updated_at, length(body) [, body]. */
static cm_status doc_row(sqlite3_stmt *s, st_doc *d, bool with_body, cm_error *err)
{
    d->id = (int64_t)sqlite3_column_int64(s, 0);
    cm_status st = col_dup(s, 1, &d->name, NULL, err);
    d->created_at = (int64_t)sqlite3_column_int64(s, 2);
    d->updated_at = (int64_t)sqlite3_column_int64(s, 3);
    d->body_len = (size_t)sqlite3_column_int64(s, 4);
    if (st == CM_OK && with_body) {
        st = col_dup(s, 5, &d->body, &d->body_len, err);
    }
    return st;
}

static cm_status doc_list_row(sqlite3_stmt *s, void *item, cm_error *err)
{
    return doc_row(s, item, false, err);
}

static void doc_fini_v(void *item)
{
    st_doc_fini(item);
}

static cm_status doc_put(st_db *db, const doc_kind *k, const char *name, const char *body,
                         size_t body_len, bool replace, int64_t *id_out, bool *existed_out,
                         cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    cm_status st = check_name(name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    st = check_body(body, body_len, "/body", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[192];
    int64_t id = 0;
    bool existed = false;
    lock(db);
    st = check_json(db, body, body_len, "/body", err);
    if (st == CM_OK) {
        st = begin(db, err);
    }
    sqlite3_stmt *s = NULL;
    bool same = false;
    if (st == CM_OK) {
        snprintf(sql, sizeof sql, "SELECT id, body = ?2 FROM %s WHERE name = ?1", k->table);
        st = prepare(db, sql, &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "tb", name, body, body_len);
    }
    if (st == CM_OK) {
        st = step(db, s, &existed, err);
    }
    if (st == CM_OK && existed) {
        id = (int64_t)sqlite3_column_int64(s, 0);
        same = sqlite3_column_int(s, 1) == 1;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == CM_OK && existed && !same && !replace) {
        st = cm_error_set(err, CM_ECONFLICT, "/name", "a %s named '%s' already exists", k->what,
                          name);
    }
    if (st == CM_OK && (!existed || !same)) {
        if (existed) {
            snprintf(sql, sizeof sql, "UPDATE %s SET body = ?2, updated_at = ?3 WHERE id = ?1",
                     k->table);
        } else {
            snprintf(sql, sizeof sql,
                     "INSERT INTO %s (name, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
                     k->table);
        }
        st = prepare(db, sql, &s, err);
        if (st == CM_OK) {
            int64_t now = db_now(db);
            st = existed ? bind_values(db, s, err, "ibi", id, body, body_len, now)
                         : bind_values(db, s, err, "tbi", name, body, body_len, now);
        }
        if (st == CM_OK) {
            st = step_done(db, s, err);
        }
        sqlite3_finalize(s);
        if (!existed) {
            id = (int64_t)sqlite3_last_insert_rowid(db->conn);
        }
    }
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK) {
        if (id_out != NULL) {
            *id_out = id;
        }
        if (existed_out != NULL) {
            *existed_out = existed;
        }
    }
    return st;
}

static cm_status doc_get(st_db *db, const doc_kind *k, const char *name, int64_t id, st_doc *out,
                         cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = name != NULL ? check_name(name, "/name", err) : check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT id, name, created_at, updated_at, length(body), body FROM %s WHERE %s = ?1",
             k->table, name != NULL ? "name" : "id");
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = name != NULL ? bind_values(db, s, err, "t", name) : bind_values(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        st = doc_row(s, out, true, err);
        if (st != CM_OK) {
            st_doc_fini(out);
        }
    }
    sqlite3_finalize(s);
    unlock(db);
    if (st == CM_OK && !found) {
        st = name != NULL
                 ? cm_error_set(err, CM_ENOTFOUND, "/name", "no %s named '%s'", k->what, name)
                 : cm_error_set(err, CM_ENOTFOUND, "/id", "no %s %lld", k->what, (long long)id);
    }
    return st;
}

static cm_status doc_list(st_db *db, const doc_kind *k, const st_doc_query *q, st_doc_list *out,
                          cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = check_limit(q->limit, q->after_id, &limit, err);
    if (st != CM_OK) {
        return st;
    }
    char sql[192];
    snprintf(sql, sizeof sql,
             "SELECT id, name, created_at, updated_at, length(body) FROM %s WHERE id > ?1 "
             "ORDER BY id LIMIT ?2",
             k->table);
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "ii", q->after_id, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = run_list(db, s, limit, sizeof(st_doc), doc_list_row, doc_fini_v, &items, &out->n_items,
                      &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

static cm_status doc_delete(st_db *db, const doc_kind *k, const char *name, cm_error *err)
{
    cm_status st = check_name(name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE name = ?1", k->table);
    lock(db);
    st = begin(db, err);
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db, sql, &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "t", name);
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
    }
    if (st == CM_OK && sqlite3_changes(db->conn) == 0) {
        st = cm_error_set(err, CM_ENOTFOUND, "/name", "no %s named '%s'", k->what, name);
    }
    sqlite3_finalize(s);
    st = finish(db, st, err);
    unlock(db);
    return st;
}

cm_status st_mesh_put(st_db *db, const char *name, const char *body, size_t body_len, bool replace,
                      int64_t *id_out, bool *existed_out, cm_error *err)
{
    return doc_put(db, &MESH, name, body, body_len, replace, id_out, existed_out, err);
}

cm_status st_mesh_get(st_db *db, const char *name, st_doc *out, cm_error *err)
{
    if (name == NULL) {
        memset(out, 0, sizeof *out);
        return cm_error_set(err, CM_EINVAL, "/name", "must be a non-empty string");
    }
    return doc_get(db, &MESH, name, 0, out, err);
}

cm_status st_mesh_get_id(st_db *db, int64_t id, st_doc *out, cm_error *err)
{
    return doc_get(db, &MESH, NULL, id, out, err);
}

cm_status st_mesh_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err)
{
    return doc_list(db, &MESH, q, out, err);
}

cm_status st_mesh_delete(st_db *db, const char *name, cm_error *err)
{
    return doc_delete(db, &MESH, name, err);
}

cm_status st_rule_put(st_db *db, const char *name, const char *body, size_t body_len, bool replace,
                      int64_t *id_out, bool *existed_out, cm_error *err)
{
    return doc_put(db, &RULE, name, body, body_len, replace, id_out, existed_out, err);
}

cm_status st_rule_get(st_db *db, const char *name, st_doc *out, cm_error *err)
{
    if (name == NULL) {
        memset(out, 0, sizeof *out);
        return cm_error_set(err, CM_EINVAL, "/name", "must be a non-empty string");
    }
    return doc_get(db, &RULE, name, 0, out, err);
}

cm_status st_rule_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err)
{
    return doc_list(db, &RULE, q, out, err);
}

cm_status st_rule_delete(st_db *db, const char *name, cm_error *err)
{
    return doc_delete(db, &RULE, name, err);
}

cm_status st_profile_put(st_db *db, const char *name, const char *body, size_t body_len,
                         bool replace, int64_t *id_out, bool *existed_out, cm_error *err)
{
    return doc_put(db, &PROFILE, name, body, body_len, replace, id_out, existed_out, err);
}

cm_status st_profile_get(st_db *db, const char *name, st_doc *out, cm_error *err)
{
    if (name == NULL) {
        memset(out, 0, sizeof *out);
        return cm_error_set(err, CM_EINVAL, "/name", "must be a non-empty string");
    }
    return doc_get(db, &PROFILE, name, 0, out, err);
}

cm_status st_profile_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err)
{
    return doc_list(db, &PROFILE, q, out, err);
}

cm_status st_profile_delete(st_db *db, const char *name, cm_error *err)
{
    return doc_delete(db, &PROFILE, name, err);
}

/* ---- plans ------------------------------------------------------------------------------- */

void st_plan_query_init(st_plan_query *q)
{
    memset(q, 0, sizeof *q);
}

void st_plan_fini(st_plan *p)
{
    if (p == NULL) {
        return;
    }
    cm_free(p->options);
    cm_free(p->body);
    memset(p, 0, sizeof *p);
}

void st_plan_list_fini(st_plan_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n_items; i++) {
        st_plan_fini(&l->items[i]);
    }
    cm_free(l->items);
    memset(l, 0, sizeof *l);
}

#define PLAN_COLS "id, hash, graph_id, COALESCE(mesh_id, 0), options, created_at, length(body)"

/* Row: PLAN_COLS [, body]. */
static cm_status plan_row(sqlite3_stmt *s, st_plan *p, bool with_body, cm_error *err)
{
    p->id = (int64_t)sqlite3_column_int64(s, 0);
    col_copy(s, 1, p->hash, sizeof p->hash);
    p->graph_id = (int64_t)sqlite3_column_int64(s, 2);
    p->mesh_id = (int64_t)sqlite3_column_int64(s, 3);
    cm_status st = col_dup(s, 4, &p->options, &p->options_len, err);
    p->created_at = (int64_t)sqlite3_column_int64(s, 5);
    p->body_len = (size_t)sqlite3_column_int64(s, 6);
    if (st == CM_OK && with_body) {
        st = col_dup(s, 7, &p->body, &p->body_len, err);
    }
    return st;
}

static cm_status plan_list_row(sqlite3_stmt *s, void *item, cm_error *err)
{
    return plan_row(s, item, false, err);
}

static void plan_fini_v(void *item)
{
    st_plan_fini(item);
}

static cm_status plan_lookup(st_db *db, const char *where, int64_t id, const char *hash,
                             st_plan *out, bool *found, cm_error *err)
{
    char sql[192];
    snprintf(sql, sizeof sql, "SELECT " PLAN_COLS ", body FROM plans WHERE %s", where);
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = hash != NULL ? bind_values(db, s, err, "t", hash) : bind_values(db, s, err, "i", id);
    }
    *found = false;
    if (st == CM_OK) {
        st = step(db, s, found, err);
    }
    if (st == CM_OK && *found && out != NULL) {
        st = plan_row(s, out, true, err);
        if (st != CM_OK) {
            st_plan_fini(out);
        }
    }
    sqlite3_finalize(s);
    return st;
}

/* Whether row id exists in table. Call locked. */
static cm_status row_exists(st_db *db, const char *table, int64_t id, bool *found, cm_error *err)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE id = ?1", table);
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "i", id);
    }
    if (st == CM_OK) {
        st = step(db, s, found, err);
    }
    sqlite3_finalize(s);
    return st;
}

cm_status st_plan_put(st_db *db, const st_plan_in *in, int64_t *id_out, bool *existed_out,
                      cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    char hash[ST_HASH_HEX_LEN + 1];
    cm_status st = check_hash(in->hash, hash, err);
    if (st == CM_OK) {
        st = check_id(in->graph_id, "/graph_id", err);
    }
    if (st == CM_OK && in->mesh_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/mesh_id", "must be 0 or a positive id");
    }
    if (st == CM_OK) {
        st = check_body(in->body, in->body_len, "/body", err);
    }
    if (st != CM_OK) {
        return st;
    }
    const char *opts = in->options != NULL ? in->options : "{}";
    size_t opts_len = in->options != NULL ? in->options_len : 2;
    int64_t id = 0;
    bool existed = false;
    lock(db);
    st = check_json(db, opts, opts_len, "/options", err);
    if (st == CM_OK) {
        st = begin(db, err);
    }
    if (st == CM_OK) {
        sqlite3_stmt *s = NULL;
        st = prepare(db, "SELECT id FROM plans WHERE hash = ?1", &s, err);
        if (st == CM_OK) {
            st = bind_values(db, s, err, "t", hash);
        }
        if (st == CM_OK) {
            st = step(db, s, &existed, err);
        }
        if (st == CM_OK && existed) {
            id = (int64_t)sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
    }
    if (st == CM_OK && !existed) {
        bool found = false;
        st = row_exists(db, "graphs", in->graph_id, &found, err);
        if (st == CM_OK && !found) {
            st = cm_error_set(err, CM_ENOTFOUND, "/graph_id", "no graph %lld",
                              (long long)in->graph_id);
        }
        if (st == CM_OK && in->mesh_id != 0) {
            st = row_exists(db, "meshes", in->mesh_id, &found, err);
            if (st == CM_OK && !found) {
                st = cm_error_set(err, CM_ENOTFOUND, "/mesh_id", "no mesh %lld",
                                  (long long)in->mesh_id);
            }
        }
        sqlite3_stmt *s = NULL;
        if (st == CM_OK) {
            st = prepare(db,
                         "INSERT INTO plans (hash, graph_id, mesh_id, options, body, created_at) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                         &s, err);
        }
        if (st == CM_OK) {
            st = bind_values(db, s, err, "tiIbbi", hash, in->graph_id, in->mesh_id, opts, opts_len,
                             in->body, in->body_len, db_now(db));
        }
        if (st == CM_OK) {
            st = step_done(db, s, err);
        }
        sqlite3_finalize(s);
        id = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK) {
        if (id_out != NULL) {
            *id_out = id;
        }
        if (existed_out != NULL) {
            *existed_out = existed;
        }
    }
    return st;
}

cm_status st_plan_get(st_db *db, int64_t id, st_plan *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    lock(db);
    st = plan_lookup(db, "id = ?1", id, NULL, out, &found, err);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no plan %lld", (long long)id);
    }
    return st;
}

cm_status st_plan_get_by_hash(st_db *db, const char *hash, st_plan *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    char h[ST_HASH_HEX_LEN + 1];
    cm_status st = check_hash(hash, h, err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    lock(db);
    st = plan_lookup(db, "hash = ?1", 0, h, out, &found, err);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/hash", "no plan with that hash");
    }
    return st;
}

cm_status st_plan_list_query(st_db *db, const st_plan_query *q, st_plan_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK) {
        st = check_time_range(q->created_after, q->created_before, err);
    }
    if (st == CM_OK && q->graph_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/graph_id", "must not be negative");
    }
    if (st == CM_OK && q->mesh_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/mesh_id", "must not be negative");
    }
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db,
                 "SELECT " PLAN_COLS " FROM plans WHERE id > ?1"
                 " AND (?2 = 0 OR graph_id = ?2) AND (?3 = 0 OR mesh_id = ?3)"
                 " AND (?4 = 0 OR created_at >= ?4) AND (?5 = 0 OR created_at < ?5)"
                 " ORDER BY id LIMIT ?6",
                 &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "iiiiii", q->after_id, q->graph_id, q->mesh_id,
                         q->created_after, q->created_before, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = run_list(db, s, limit, sizeof(st_plan), plan_list_row, plan_fini_v, &items,
                      &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

cm_status st_plan_delete(st_db *db, int64_t id, cm_error *err)
{
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    st = delete_id(db, "plans", "plan", id, err);
    unlock(db);
    return st;
}

/* ---- benchmark runs ----------------------------------------------------------------------- */

static const char *const bench_names[] = {"queued", "running", "succeeded", "failed",
                                          "canceled"};
_Static_assert(sizeof bench_names / sizeof bench_names[0] == ST_BENCH_N_STATUS,
               "one name per benchmark status");

const char *st_bench_status_name(st_bench_status s)
{
    return (unsigned)s < ST_BENCH_N_STATUS ? bench_names[s] : "unknown";
}

bool st_bench_status_parse(const char *s, st_bench_status *out)
{
    for (unsigned i = 0; s != NULL && i < ST_BENCH_N_STATUS; i++) {
        if (strcmp(s, bench_names[i]) == 0) {
            *out = (st_bench_status)i;
            return true;
        }
    }
    return false;
}

void st_bench_query_init(st_bench_query *q)
{
    memset(q, 0, sizeof *q);
}

void st_bench_fini(st_bench *b)
{
    if (b == NULL) {
        return;
    }
    cm_free(b->spec);
    cm_free(b->results);
    cm_free(b->error);
    cm_free(b->webhook_url);
    memset(b, 0, sizeof *b);
}

void st_bench_list_fini(st_bench_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n_items; i++) {
        st_bench_fini(&l->items[i]);
    }
    cm_free(l->items);
    memset(l, 0, sizeof *l);
}

#define BENCH_COLS                                                                                 \
    "id, COALESCE(plan_id, 0), spec, status, progress, error, webhook_url, created_at, "           \
    "updated_at, length(results)"

/* Row: BENCH_COLS [, results]. */
static cm_status bench_row(sqlite3_stmt *s, st_bench *b, bool with_results, cm_error *err)
{
    b->id = (int64_t)sqlite3_column_int64(s, 0);
    b->plan_id = (int64_t)sqlite3_column_int64(s, 1);
    cm_status st = col_dup(s, 2, &b->spec, &b->spec_len, err);
    const unsigned char *t = sqlite3_column_text(s, 3);
    if (st == CM_OK && (t == NULL || !st_bench_status_parse((const char *)t, &b->status))) {
        st = cm_error_set(err, CM_EINTERNAL, NULL, "benchmark run %lld has a bad status",
                          (long long)b->id);
    }
    b->progress = sqlite3_column_double(s, 4);
    if (st == CM_OK) {
        st = col_dup(s, 5, &b->error, NULL, err);
    }
    if (st == CM_OK) {
        st = col_dup(s, 6, &b->webhook_url, NULL, err);
    }
    b->created_at = (int64_t)sqlite3_column_int64(s, 7);
    b->updated_at = (int64_t)sqlite3_column_int64(s, 8);
    b->results_len = (size_t)sqlite3_column_int64(s, 9);
    if (st == CM_OK && with_results) {
        st = col_dup(s, 10, &b->results, &b->results_len, err);
    }
    return st;
}

static cm_status bench_list_row(sqlite3_stmt *s, void *item, cm_error *err)
{
    return bench_row(s, item, false, err);
}

static void bench_fini_v(void *item)
{
    st_bench_fini(item);
}

static bool is_web_url(const char *u)
{
    size_t n = strlen(u);
    if (n > 2048 || !clean_utf8((const unsigned char *)u, n) || strchr(u, ' ') != NULL) {
        return false;
    }
    return (strncmp(u, "http://", 7) == 0 && n > 7) || (strncmp(u, "https://", 8) == 0 && n > 8);
}

cm_status st_bench_create(st_db *db, int64_t plan_id, const char *spec, size_t spec_len,
                          const char *webhook_url, int64_t *id_out, cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (plan_id < 0) {
        return cm_error_set(err, CM_EINVAL, "/plan_id", "must be 0 or a positive id");
    }
    if (webhook_url != NULL && !is_web_url(webhook_url)) {
        return cm_error_set(err, CM_EINVAL, "/webhook_url", "must be an http:// or https:// URL");
    }
    int64_t id = 0;
    lock(db);
    cm_status st = check_json(db, spec, spec_len, "/spec", err);
    if (st == CM_OK) {
        st = begin(db, err);
    }
    if (st == CM_OK && plan_id != 0) {
        bool found = false;
        st = row_exists(db, "plans", plan_id, &found, err);
        if (st == CM_OK && !found) {
            st = cm_error_set(err, CM_ENOTFOUND, "/plan_id", "no plan %lld", (long long)plan_id);
        }
    }
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db,
                     "INSERT INTO bench_runs (plan_id, spec, status, progress, webhook_url, "
                     "created_at, updated_at) VALUES (?1, ?2, 'queued', 0, ?3, ?4, ?4)",
                     &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "IbTi", plan_id, spec, spec_len, webhook_url, db_now(db));
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
        id = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    sqlite3_finalize(s);
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK && id_out != NULL) {
        *id_out = id;
    }
    return st;
}

cm_status st_bench_get(st_db *db, int64_t id, st_bench *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db, "SELECT " BENCH_COLS ", results FROM bench_runs WHERE id = ?1", &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        st = bench_row(s, out, true, err);
        if (st != CM_OK) {
            st_bench_fini(out);
        }
    }
    sqlite3_finalize(s);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no benchmark run %lld", (long long)id);
    }
    return st;
}

cm_status st_bench_list_query(st_db *db, const st_bench_query *q, st_bench_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK && q->has_status && (unsigned)q->status >= ST_BENCH_N_STATUS) {
        st = cm_error_set(err, CM_EINVAL, "/status", "unknown status");
    }
    if (st == CM_OK && q->plan_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/plan_id", "must not be negative");
    }
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db,
                 "SELECT " BENCH_COLS " FROM bench_runs WHERE id > ?1"
                 " AND (?2 IS NULL OR status = ?2) AND (?3 = 0 OR plan_id = ?3)"
                 " ORDER BY id LIMIT ?4",
                 &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "iTii", q->after_id,
                         q->has_status ? st_bench_status_name(q->status) : NULL, q->plan_id,
                         (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = run_list(db, s, limit, sizeof(st_bench), bench_list_row, bench_fini_v, &items,
                      &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

static bool bench_transition_ok(st_bench_status from, st_bench_status to)
{
    if (from == to) {
        return true; /* progress while live; results and error once final */
    }
    switch (from) {
    case ST_BENCH_QUEUED:
        return to == ST_BENCH_RUNNING || to == ST_BENCH_FAILED || to == ST_BENCH_CANCELED;
    case ST_BENCH_RUNNING:
        return to == ST_BENCH_SUCCEEDED || to == ST_BENCH_FAILED || to == ST_BENCH_CANCELED;
    default:
        return false;
    }
}

cm_status st_bench_set(st_db *db, int64_t id, const st_bench_update *u, cm_error *err)
{
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    if ((unsigned)u->status >= ST_BENCH_N_STATUS) {
        return cm_error_set(err, CM_EINVAL, "/status", "unknown status");
    }
    if (!(u->progress >= 0.0 && u->progress <= 1.0)) {
        return cm_error_set(err, CM_EINVAL, "/progress", "must be between 0 and 1");
    }
    lock(db);
    if (u->results != NULL) {
        st = check_json(db, u->results, u->results_len, "/results", err);
    }
    if (st == CM_OK) {
        st = begin(db, err);
    }
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db, "SELECT status FROM bench_runs WHERE id = ?1", &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no benchmark run %lld", (long long)id);
    }
    st_bench_status cur = ST_BENCH_QUEUED;
    if (st == CM_OK) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        if (t == NULL || !st_bench_status_parse((const char *)t, &cur)) {
            st = cm_error_set(err, CM_EINTERNAL, NULL, "benchmark run %lld has a bad status",
                              (long long)id);
        }
    }
    if (st == CM_OK && !bench_transition_ok(cur, u->status)) {
        st =
            cm_error_set(err, CM_ECONFLICT, "/status", "benchmark run %lld is %s, cannot become %s",
                         (long long)id, st_bench_status_name(cur), st_bench_status_name(u->status));
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == CM_OK) {
        st = prepare(db,
                     "UPDATE bench_runs SET status = ?2, progress = ?3,"
                     " results = CASE WHEN ?4 IS NULL THEN results ELSE ?4 END,"
                     " error = COALESCE(?5, error), updated_at = ?6 WHERE id = ?1",
                     &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "itdBTi", id, st_bench_status_name(u->status), u->progress,
                         u->results, u->results_len, u->error, db_now(db));
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
    }
    sqlite3_finalize(s);
    st = finish(db, st, err);
    unlock(db);
    return st;
}

cm_status st_bench_claim(st_db *db, int64_t *id_out, cm_error *err)
{
    *id_out = 0;
    int64_t id = 0;
    lock(db);
    cm_status st = begin(db, err);
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db, "SELECT id FROM bench_runs WHERE status = 'queued' ORDER BY id LIMIT 1",
                     &s, err);
    }
    bool found = false;
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, NULL, "no queued benchmark run");
    }
    if (st == CM_OK) {
        id = (int64_t)sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == CM_OK) {
        st = prepare(db, "UPDATE bench_runs SET status = 'running', updated_at = ?2 WHERE id = ?1",
                     &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "ii", id, db_now(db));
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
    }
    sqlite3_finalize(s);
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK) {
        *id_out = id;
    }
    return st;
}

cm_status st_bench_delete(st_db *db, int64_t id, cm_error *err)
{
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    st = delete_id(db, "bench_runs", "benchmark run", id, err);
    unlock(db);
    return st;
}

/* ---- API tokens ----------------------------------------------------------------------------- */

static const char *const scope_names[] = {"", "read", "write", "admin"};

const char *st_scope_name(st_scope s)
{
    return s >= ST_SCOPE_READ && s <= ST_SCOPE_ADMIN ? scope_names[s] : "unknown";
}

bool st_scope_parse(const char *s, st_scope *out)
{
    for (int i = ST_SCOPE_READ; s != NULL && i <= ST_SCOPE_ADMIN; i++) {
        if (strcmp(s, scope_names[i]) == 0) {
            *out = (st_scope)i;
            return true;
        }
    }
    return false;
}

void st_token_query_init(st_token_query *q)
{
    memset(q, 0, sizeof *q);
}

void st_token_fini(st_token *t)
{
    if (t == NULL) {
        return;
    }
    cm_free(t->label);
    memset(t, 0, sizeof *t);
}

void st_token_list_fini(st_token_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n_items; i++) {
        st_token_fini(&l->items[i]);
    }
    cm_free(l->items);
    memset(l, 0, sizeof *l);
}

/* Row: id, prefix, scope, label, created_at. */
static cm_status token_row(sqlite3_stmt *s, void *item, cm_error *err)
{
    st_token *t = item;
    t->id = (int64_t)sqlite3_column_int64(s, 0);
    col_copy(s, 1, t->prefix, sizeof t->prefix);
    const unsigned char *sc = sqlite3_column_text(s, 2);
    cm_status st = CM_OK;
    if (sc == NULL || !st_scope_parse((const char *)sc, &t->scope)) {
        st = cm_error_set(err, CM_EINTERNAL, NULL, "token %lld has a bad scope", (long long)t->id);
    }
    if (st == CM_OK) {
        st = col_dup(s, 3, &t->label, NULL, err);
    }
    t->created_at = (int64_t)sqlite3_column_int64(s, 4);
    return st;
}

static void token_fini_v(void *item)
{
    st_token_fini(item);
}

/* Constant-time comparison of n bytes. */
static bool ct_equal(const char *a, const char *b, size_t n)
{
    volatile unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(a[i] ^ b[i]);
    }
    return d == 0;
}

static void token_hash(const char *token, char hex[ST_HASH_HEX_LEN + 1])
{
    cm_sha256_hex(token, strlen(token), hex);
}

static bool token_text_ok(const char *t, size_t min_len)
{
    size_t n = t != NULL ? strlen(t) : 0;
    if (n < min_len || n > ST_TOKEN_MAX_LEN) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] <= ' ' || t[i] > '~') {
            return false;
        }
    }
    return true;
}

/* Inserts a token by text. Takes the lock itself. */
static cm_status token_insert(st_db *db, const char *token, st_scope scope, const char *label,
                              int64_t *id_out, cm_error *err)
{
    char hex[ST_HASH_HEX_LEN + 1];
    token_hash(token, hex);
    char prefix[ST_TOKEN_PREFIX_LEN + 1];
    snprintf(prefix, sizeof prefix, "%s", token);
    int64_t id = 0;
    lock(db);
    cm_status st = begin(db, err);
    bool found = false;
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = prepare(db, "SELECT 1 FROM tokens WHERE hash = ?1", &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "t", hex);
    }
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        st = cm_error_set(err, CM_ECONFLICT, "/token", "token already stored");
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == CM_OK) {
        st = prepare(db,
                     "INSERT INTO tokens (prefix, hash, scope, label, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)",
                     &s, err);
    }
    if (st == CM_OK) {
        st = bind_values(db, s, err, "tttti", prefix, hex, st_scope_name(scope),
                         label != NULL ? label : "", db_now(db));
    }
    if (st == CM_OK) {
        st = step_done(db, s, err);
        id = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    sqlite3_finalize(s);
    st = finish(db, st, err);
    unlock(db);
    if (st == CM_OK && id_out != NULL) {
        *id_out = id;
    }
    return st;
}

static cm_status check_scope_label(st_scope scope, const char *label, cm_error *err)
{
    if (scope < ST_SCOPE_READ || scope > ST_SCOPE_ADMIN) {
        return cm_error_set(err, CM_EINVAL, "/scope", "must be read, write or admin");
    }
    if (label != NULL && label[0] != '\0') {
        return check_name(label, "/label", err);
    }
    return CM_OK;
}

static cm_status random_bytes(unsigned char *buf, size_t n, cm_error *err)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return cm_error_set(err, CM_EIO, NULL, "/dev/urandom: %s", strerror(errno));
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            return cm_error_set(err, CM_EIO, NULL, "/dev/urandom: %s", strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    return CM_OK;
}

cm_status st_token_create(st_db *db, st_scope scope, const char *label,
                          char token_out[ST_TOKEN_LEN + 1], int64_t *id_out, cm_error *err)
{
    token_out[0] = '\0';
    if (id_out != NULL) {
        *id_out = 0;
    }
    cm_status st = check_scope_label(scope, label, err);
    if (st != CM_OK) {
        return st;
    }
    unsigned char rnd[20];
    st = random_bytes(rnd, sizeof rnd, err);
    if (st != CM_OK) {
        return st;
    }
    char tok[ST_TOKEN_LEN + 1];
    static const char hexd[] = "0123456789abcdef";
    memcpy(tok, "spt_", 4);
    for (size_t i = 0; i < sizeof rnd; i++) {
        tok[4 + 2 * i] = hexd[rnd[i] >> 4];
        tok[5 + 2 * i] = hexd[rnd[i] & 15];
    }
    tok[ST_TOKEN_LEN] = '\0';
    st = token_insert(db, tok, scope, label, id_out, err);
    if (st == CM_OK) {
        memcpy(token_out, tok, sizeof tok);
    }
    memset(tok, 0, sizeof tok);
    return st;
}

cm_status st_token_put(st_db *db, const char *token, st_scope scope, const char *label,
                       int64_t *id_out, cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    cm_status st = check_scope_label(scope, label, err);
    if (st != CM_OK) {
        return st;
    }
    if (!token_text_ok(token, ST_TOKEN_MIN_LEN)) {
        return cm_error_set(err, CM_EINVAL, "/token",
                            "must be %d..%d printable ASCII characters without spaces",
                            ST_TOKEN_MIN_LEN, ST_TOKEN_MAX_LEN);
    }
    return token_insert(db, token, scope, label, id_out, err);
}

cm_status st_token_check(st_db *db, const char *presented, st_scope *scope_out, int64_t *id_out,
                         cm_error *err)
{
    if (scope_out != NULL) {
        *scope_out = ST_SCOPE_READ;
    }
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (!token_text_ok(presented, ST_TOKEN_PREFIX_LEN)) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "unknown token");
    }
    char hex[ST_HASH_HEX_LEN + 1];
    token_hash(presented, hex);
    char prefix[ST_TOKEN_PREFIX_LEN + 1];
    snprintf(prefix, sizeof prefix, "%s", presented);
    lock(db);
    sqlite3_stmt *s = NULL;
    cm_status st = prepare(db, "SELECT id, hash, scope FROM tokens WHERE prefix = ?1", &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "t", prefix);
    }
    bool matched = false;
    int64_t id = 0;
    st_scope scope = ST_SCOPE_READ;
    while (st == CM_OK) {
        bool row = false;
        st = step(db, s, &row, err);
        if (st != CM_OK || !row) {
            break;
        }
        char stored[ST_HASH_HEX_LEN + 1];
        col_copy(s, 1, stored, sizeof stored);
        if (strlen(stored) == ST_HASH_HEX_LEN && ct_equal(stored, hex, ST_HASH_HEX_LEN)) {
            const unsigned char *sc = sqlite3_column_text(s, 2);
            if (sc == NULL || !st_scope_parse((const char *)sc, &scope)) {
                st = cm_error_set(err, CM_EINTERNAL, NULL, "token has a bad scope");
                break;
            }
            matched = true;
            id = (int64_t)sqlite3_column_int64(s, 0);
        }
    }
    sqlite3_finalize(s);
    unlock(db);
    if (st == CM_OK && !matched) {
        st = cm_error_set(err, CM_ENOTFOUND, NULL, "unknown token");
    }
    if (st == CM_OK) {
        if (scope_out != NULL) {
            *scope_out = scope;
        }
        if (id_out != NULL) {
            *id_out = id;
        }
    }
    return st;
}

cm_status st_token_get(st_db *db, int64_t id, st_token *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db, "SELECT id, prefix, scope, label, created_at FROM tokens WHERE id = ?1", &s,
                 err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        st = token_row(s, out, err);
        if (st != CM_OK) {
            st_token_fini(out);
        }
    }
    sqlite3_finalize(s);
    unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no token %lld", (long long)id);
    }
    return st;
}

cm_status st_token_list_query(st_db *db, const st_token_query *q, st_token_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = check_limit(q->limit, q->after_id, &limit, err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    sqlite3_stmt *s = NULL;
    st = prepare(db,
                 "SELECT id, prefix, scope, label, created_at FROM tokens WHERE id > ?1 "
                 "ORDER BY id LIMIT ?2",
                 &s, err);
    if (st == CM_OK) {
        st = bind_values(db, s, err, "ii", q->after_id, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = run_list(db, s, limit, sizeof(st_token), token_row, token_fini_v, &items,
                      &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    unlock(db);
    return st;
}

cm_status st_token_delete(st_db *db, int64_t id, cm_error *err)
{
    cm_status st = check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    lock(db);
    st = delete_id(db, "tokens", "token", id, err);
    unlock(db);
    return st;
}

/* ---- online backup ---------------------------------------------------------------------
 * Added for the container image and docs/operations.md; self-contained (its
 * one extra header is included here rather than at the top on purpose). */
#include <sys/stat.h>

/* True when a and b name the same existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a != NULL && a[0] != '\0' && stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* fsync of the directory holding path, so a rename into it is durable. */
static void sync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the backup itself is already synced */
        close(fd);
    }
}

/* Runs the page copy from db into the open connection out. One step of -1
 * pages copies everything from one read snapshot: smaller steps would restart
 * whenever another connection commits in between, and might never finish on a
 * busy server. SQLITE_BUSY/LOCKED (a WAL read lock race) is retried for up to
 * the busy timeout. Called with db->mu held. */
static cm_status backup_copy(st_db *db, sqlite3 *out, cm_error *err)
{
    sqlite3_backup *b = sqlite3_backup_init(out, "main", db->conn, "main");
    if (b == NULL) {
        int rc = sqlite3_extended_errcode(out);
        cm_status st = map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        return cm_error_set(err, st, NULL, "backup: %s", sqlite3_errmsg(out));
    }
    int rc;
    int waited_ms = 0;
    for (;;) {
        rc = sqlite3_backup_step(b, -1);
        if (((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) &&
            waited_ms < ST_DB_BUSY_TIMEOUT_MS) {
            waited_ms += sqlite3_sleep(20);
            continue;
        }
        if (rc != SQLITE_OK) {
            break;
        }
    }
    int frc = sqlite3_backup_finish(b);
    if (rc == SQLITE_DONE) {
        rc = frc;
    }
    if (rc == SQLITE_OK || rc == SQLITE_DONE) {
        return CM_OK;
    }
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
        return cm_error_set(err, CM_EIO, NULL, "backup: database busy for more than %d ms",
                            ST_DB_BUSY_TIMEOUT_MS);
    }
    cm_status st = map_rc(rc);
    return cm_error_set(err, st == CM_ENOMEM ? CM_ENOMEM : CM_EIO, NULL, "backup: %s",
                        sqlite3_errstr(rc));
}

cm_status st_db_backup(st_db *db, const char *dest, cm_error *err)
{
    if (dest == NULL || dest[0] == '\0') {
        return cm_error_set(err, CM_EINVAL, "/dest", "must be a non-empty file name");
    }
    static const char suffix[] = ".partial";
    if (strlen(dest) + sizeof suffix > PATH_MAX) {
        return cm_error_set(err, CM_EINVAL, "/dest", "file name too long");
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s%s", dest, suffix);
    lock(db);
    if (same_file(sqlite3_db_filename(db->conn, "main"), dest)) {
        unlock(db);
        return cm_error_set(err, CM_EINVAL, "/dest", "'%s' is the database itself", dest);
    }
    (void)unlink(tmp); /* left over from an interrupted backup */
    sqlite3 *out = NULL;
    cm_status st = CM_OK;
    int rc = sqlite3_open_v2(
        tmp, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        st = map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        st = cm_error_set(err, st, "/dest", "cannot create '%s': %s", tmp,
                          out != NULL ? sqlite3_errmsg(out) : sqlite3_errstr(rc));
    }
    if (st == CM_OK) {
        sqlite3_extended_result_codes(out, 1);
        st = backup_copy(db, out, err);
    }
    unlock(db);
    /* The destination connection commits with synchronous=FULL (its default in
     * rollback mode), so the pages are on disk once it closes. */
    if (out != NULL) {
        rc = sqlite3_close(out);
        if (rc != SQLITE_OK && st == CM_OK) {
            st = cm_error_set(err, CM_EIO, "/dest", "closing '%s': %s", tmp, sqlite3_errstr(rc));
        }
    }
    if (st == CM_OK && rename(tmp, dest) != 0) {
        st = cm_error_set(err, CM_EIO, "/dest", "rename to '%s': %s", dest, strerror(errno));
    }
    if (st != CM_OK) {
        char j[PATH_MAX + 16];
        snprintf(j, sizeof j, "%s-journal", tmp);
        (void)unlink(j);
        (void)unlink(tmp);
        return st;
    }
    sync_parent_dir(dest);
    return CM_OK;
}
