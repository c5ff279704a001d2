/* SPDX-License-Identifier: Apache-2.0
 * store: the st_db handle: open, close, schema migrations (the list is in
 * st_migrate.c), the allocator hookup and the SQLite error map. The store
 * folder is the only one that includes sqlite3.h; SQLite result codes are
 * translated to cm_status here (st_map_rc) and go no further. SQLite
 * allocates through cm_alloc (configured once per process), so the
 * allocation test hook reaches SQLite's own allocations too and an OOM loop
 * covers them. Every write runs in one BEGIN IMMEDIATE transaction
 * (st_sql.c). */
#include "st_db.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "st_int.h"

/* ---- allocation ----------------------------------------------------------- */

static atomic_ulong alloc_failures;

unsigned long st_alloc_failures(void)
{
    return atomic_load(&alloc_failures);
}

void *st_alloc(size_t n)
{
    void *p = cm_alloc(n);
    if (p == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
    }
    return p;
}

void *st_realloc(void *p, size_t n)
{
    void *q = cm_realloc(p, n);
    if (q == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
    }
    return q;
}

/* SQLite's allocator on top of cm_alloc. Each block starts with a 16-byte
 * header holding its size (xSize needs it; 16 keeps malloc's alignment). */
#define HDR 16

static void *mem_malloc(int n)
{
    if (n <= 0) {
        return NULL;
    }
    unsigned char *p = st_alloc((size_t)n + HDR);
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
    unsigned char *q = st_realloc((unsigned char *)p - HDR, (size_t)n + HDR);
    if (q == NULL) {
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

cm_status st_map_rc(int rc)
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
cm_status st_db_fail(const st_db *db, int rc, const char *what, cm_error *err)
{
    cm_status st = st_map_rc(rc);
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

/* ---- small helpers ---------------------------------------------------------- */

int64_t st_db_now(const st_db *db)
{
    return db->fixed_now != 0 ? db->fixed_now : (int64_t)time(NULL);
}

void st_db_lock(st_db *db)
{
    int rc = pthread_mutex_lock(&db->mu);
    assert(rc == 0);
    (void)rc;
}

/* The WAL hook of conn: notes the WAL's size for st_db_unlock; checkpoints
 * inline only past the hard limit (then no other writer is running, so the
 * copy completes and the next write starts the WAL over), waiting for
 * readers as long as the regular checkpoint does, not the handle's busy
 * timeout: a long reader then costs each commit past the limit
 * ST_CKPT_WAIT_MS, and the WAL stays put only while it reads. */
static int on_wal_commit(void *arg, sqlite3 *conn, const char *name, int pages)
{
    st_db *db = arg;
    atomic_store(&db->wal_pages, pages);
    if ((int64_t)pages * db->page_size >= ST_WAL_HARD_BYTES) {
        (void)sqlite3_busy_timeout(conn, ST_CKPT_WAIT_MS);
        int rc = sqlite3_wal_checkpoint_v2(conn, name, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
        (void)sqlite3_busy_timeout(conn, ST_DB_BUSY_TIMEOUT_MS);
        if (rc == SQLITE_OK) {
            atomic_store(&db->wal_pages, 0);
        }
    }
    return SQLITE_OK;
}

/* Whether the WAL, *wal bytes after db's last commit, has reached the next
 * checkpoint (the window, or a retry's mark) on a file. */
static bool checkpoint_due(st_db *db, int64_t *wal)
{
    *wal = (int64_t)atomic_load(&db->wal_pages) * db->page_size;
    int64_t at = atomic_load(&db->ckpt_at);
    return *wal >= (at > 0 ? at : ST_WAL_CKPT_BYTES) && db->path != NULL;
}

/* The checkpoint of st_int.h, "Checkpoints", when one is due and no other
 * thread is checkpointing: the bulk on db->ckpt outside mu, the rest and
 * the WAL's restart under mu. Failures only delay it (the next unlock tries
 * again; the hard limit bounds the WAL). */
static void checkpoint_run(st_db *db)
{
    int64_t wal = 0;
    if (!checkpoint_due(db, &wal) || pthread_mutex_trylock(&db->ckpt_mu) != 0) {
        return;
    }
    if (db->ckpt == NULL) {
        /* a checkpoint does nothing on a connection that has not yet read
         * the file (its pager is not in WAL mode until then): read the
         * schema once */
        if (sqlite3_open_v2(db->path, &db->ckpt, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                            NULL) != SQLITE_OK ||
            sqlite3_exec(db->ckpt, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL) !=
                SQLITE_OK) {
            sqlite3_close(db->ckpt);
            db->ckpt = NULL;
        }
    }
    if (db->ckpt != NULL) {
        /* the bulk of the copy, beside the requests; then, under mu (no
         * write of this handle can be running), the few frames committed
         * meanwhile, waiting (busy handler) for the readers still on the
         * WAL to finish, so that the next write starts the WAL over. A
         * passive copy alone almost never found every reader gone under
         * load, and the WAL grew past 250 MiB in 15 s of plan puts. */
        int bulk = 0;
        if (sqlite3_wal_checkpoint_v2(db->ckpt, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, &bulk) ==
                SQLITE_OK &&
            bulk > 0) {
            atomic_fetch_add(&db->ckpt_bulk_frames, bulk);
        }
        int rc = pthread_mutex_lock(&db->mu);
        assert(rc == 0);
        /* the wait is short: a reader in a long transaction (a backup, a
         * big list) must not hold up this handle's requests; when it could
         * not finish, another try once the WAL has grown an eighth of the
         * window more */
        (void)sqlite3_busy_timeout(db->conn, ST_CKPT_WAIT_MS);
        int log = 0, copied = 0;
        int ck =
            sqlite3_wal_checkpoint_v2(db->conn, NULL, SQLITE_CHECKPOINT_RESTART, &log, &copied);
        if (copied > 0) {
            atomic_fetch_add(&db->ckpt_final_frames, copied - (bulk < copied ? bulk : copied));
        }
        (void)sqlite3_busy_timeout(db->conn, ST_DB_BUSY_TIMEOUT_MS);
        atomic_store(&db->ckpt_at, ck == SQLITE_OK ? 0 : wal + ST_WAL_CKPT_BYTES / 8);
        atomic_store(&db->wal_pages, 0);
        rc = pthread_mutex_unlock(&db->mu);
        assert(rc == 0);
        (void)rc;
    }
    int rc = pthread_mutex_unlock(&db->ckpt_mu);
    assert(rc == 0);
    (void)rc;
}

/* The handle's checkpoint thread: runs checkpoint_run each time it is
 * asked, until the handle closes. */
static void *checkpoint_main(void *arg)
{
    st_db *db = arg;
    pthread_mutex_lock(&db->ckpt_tmu);
    for (;;) {
        while (!db->ckpt_want && !db->ckpt_stop) {
            pthread_cond_wait(&db->ckpt_cv, &db->ckpt_tmu);
        }
        if (db->ckpt_stop) {
            break;
        }
        db->ckpt_want = false;
        pthread_mutex_unlock(&db->ckpt_tmu);
        checkpoint_run(db);
        pthread_mutex_lock(&db->ckpt_tmu);
    }
    pthread_mutex_unlock(&db->ckpt_tmu);
    return NULL;
}

/* Hands the checkpoint to the handle's thread (started on first need), so
 * that the request thread whose commit crossed the window does not copy
 * 32 MiB and sync the file while its other connections wait; inline when
 * no thread can be started. */
void st_db_checkpoint_maybe(st_db *db)
{
    int64_t wal = 0;
    if (!checkpoint_due(db, &wal)) {
        return;
    }
    pthread_mutex_lock(&db->ckpt_tmu);
    if (!db->ckpt_started && !db->ckpt_stop) {
        db->ckpt_started = pthread_create(&db->ckpt_thread, NULL, checkpoint_main, db) == 0;
    }
    bool started = db->ckpt_started;
    if (started) {
        db->ckpt_want = true;
        pthread_cond_signal(&db->ckpt_cv);
    }
    pthread_mutex_unlock(&db->ckpt_tmu);
    if (!started) {
        checkpoint_run(db);
    }
}

void st_db_checkpoint_stats(st_db *db, int64_t *bulk_out, int64_t *final_out)
{
    *bulk_out = atomic_load(&db->ckpt_bulk_frames);
    *final_out = atomic_load(&db->ckpt_final_frames);
}

void st_db_unlock_only(st_db *db)
{
    int rc = pthread_mutex_unlock(&db->mu);
    assert(rc == 0);
    (void)rc;
}

void st_db_unlock(st_db *db)
{
    st_db_unlock_only(db);
    st_db_checkpoint_maybe(db);
}

/* ---- open / close ------------------------------------------------------------------ */

static cm_status pragma_expect(st_db *db, const char *sql, const char *want, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK && want != NULL) {
        const unsigned char *t = row ? sqlite3_column_text(s, 0) : NULL;
        if (row && t == NULL) {
            st = cm_error_oom(err); /* the integer-to-text conversion failed */
        } else if (t == NULL || strcmp((const char *)t, want) != 0) {
            st = cm_error_set(err, CM_EIO, NULL, "%s: got '%s', need '%s'", sql,
                              t != NULL ? (const char *)t : "", want);
        }
    }
    st_sql_release(db, s);
    return st;
}

static cm_status read_version(st_db *db, int64_t *out, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st =
        st_sql_prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version", &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK) {
        *out = row ? (int64_t)sqlite3_column_int64(s, 0) : 0;
    }
    st_sql_release(db, s);
    return st;
}

/* The file's page size into db->page_size (a new file got 4096 bytes,
 * an older one keeps its own). */
static cm_status read_page_size(st_db *db, cm_error *err)
{
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, "PRAGMA page_size", &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK) {
        db->page_size = row ? (int64_t)sqlite3_column_int64(s, 0) : 0;
        if (db->page_size <= 0) {
            st = cm_error_set(err, CM_EINTERNAL, NULL, "PRAGMA page_size: no size");
        }
    }
    st_sql_release(db, s);
    return st;
}

static cm_status migrate(st_db *db, cm_error *err)
{
    cm_status st = st_sql_begin(db, err);
    if (st != CM_OK) {
        return st;
    }
    st = st_sql_exec(
        db,
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
        st = st_sql_exec(db, m->sql, err);
        sqlite3_stmt *s = NULL;
        if (st == CM_OK) {
            st = st_sql_prepare(db,
                                "INSERT INTO schema_version (version, name, applied_at) "
                                "VALUES (?1, ?2, ?3)",
                                &s, err);
        }
        if (st == CM_OK) {
            st = st_sql_bind(db, s, err, "iti", m->version, m->name, st_db_now(db));
        }
        if (st == CM_OK) {
            st = st_sql_step_done(db, s, err);
        }
        st_sql_release(db, s);
    }
    return st_sql_finish(db, st, err);
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
        return st_db_fail(NULL, rc, "sqlite3_initialize", err);
    }
    st_db *db = cm_calloc(1, sizeof *db);
    if (db == NULL) {
        atomic_fetch_add(&alloc_failures, 1);
        return cm_error_oom(err);
    }
    if (pthread_mutex_init(&db->mu, NULL) != 0) {
        cm_free(db);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a mutex");
    }
    if (pthread_mutex_init(&db->ckpt_mu, NULL) != 0) {
        pthread_mutex_destroy(&db->mu);
        cm_free(db);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a mutex");
    }
    if (pthread_mutex_init(&db->ckpt_tmu, NULL) != 0) {
        pthread_mutex_destroy(&db->ckpt_mu);
        pthread_mutex_destroy(&db->mu);
        cm_free(db);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a mutex");
    }
    if (pthread_cond_init(&db->ckpt_cv, NULL) != 0) {
        pthread_mutex_destroy(&db->ckpt_tmu);
        pthread_mutex_destroy(&db->ckpt_mu);
        pthread_mutex_destroy(&db->mu);
        cm_free(db);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a condition variable");
    }
    size_t plen = strlen(path);
    db->path = st_alloc(plen + 1);
    if (db->path == NULL) {
        st_db_close(db);
        return cm_error_oom(err);
    }
    memcpy(db->path, path, plen + 1);
    /* NOMUTEX: db->mu already serializes every use of the connection. */
    rc = sqlite3_open_v2(path, &db->conn,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    cm_status st = CM_OK;
    if (rc != SQLITE_OK) {
        /* Anything but OOM means the file could not be opened. */
        st = st_map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        st = cm_error_set(err, st, "/path", "cannot open '%s': %s", path,
                          db->conn != NULL ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
    }
    if (st == CM_OK) {
        db->pack = st_pack_create();
        st = db->pack != NULL ? CM_OK : cm_error_oom(err);
    }
    if (st == CM_OK) {
        rc = st_pack_register(db->conn, db->pack);
        st = rc == SQLITE_OK ? CM_OK : st_db_fail(db, rc, "registering st_body", err);
    }
    if (st == CM_OK) {
        sqlite3_extended_result_codes(db->conn, 1);
        rc = sqlite3_busy_timeout(db->conn, ST_DB_BUSY_TIMEOUT_MS);
        st = rc == SQLITE_OK ? CM_OK : st_db_fail(db, rc, "busy_timeout", err);
    }
    if (st == CM_OK) {
        /* takes effect on a new file only (before its first table) */
        st = st_sql_exec(db, "PRAGMA page_size=4096", err);
    }
    if (st == CM_OK) {
        st = pragma_expect(db, "PRAGMA journal_mode=WAL", "wal", err);
    }
    if (st == CM_OK) {
        /* replaces SQLite's automatic checkpoint (st_int.h, "Checkpoints") */
        sqlite3_wal_hook(db->conn, on_wal_commit, db);
    }
    if (st == CM_OK) {
        st = st_sql_exec(db, "PRAGMA synchronous=NORMAL", err);
    }
    if (st == CM_OK) {
        /* statement journals (a group commit's savepoints) and temporary
         * b-trees in memory, not in temporary files: they never outlive
         * the transaction, so durability does not depend on them */
        st = st_sql_exec(db, "PRAGMA temp_store=MEMORY", err);
    }
    if (st == CM_OK) {
        st = st_sql_exec(db, "PRAGMA foreign_keys=ON", err);
    }
    if (st == CM_OK) {
        st = pragma_expect(db, "PRAGMA foreign_keys", "1", err);
    }
    if (st == CM_OK) {
        st = migrate(db, err);
    }
    if (st == CM_OK) {
        st = read_page_size(db, err);
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
    pthread_mutex_lock(&db->ckpt_tmu);
    bool started = db->ckpt_started;
    db->ckpt_stop = true;
    pthread_cond_signal(&db->ckpt_cv);
    pthread_mutex_unlock(&db->ckpt_tmu);
    if (started) {
        pthread_join(db->ckpt_thread, NULL); /* after any checkpoint it was running */
    }
    if (db->ckpt != NULL) {
        int rc = sqlite3_close(db->ckpt);
        assert(rc == SQLITE_OK);
        (void)rc;
    }
    if (db->conn != NULL) {
        st_sql_cache_clear(db);
        /* the last connection to close checkpoints the WAL and removes it */
        int rc = sqlite3_close(db->conn);
        assert(rc == SQLITE_OK); /* every statement is finalised before return */
        (void)rc;
    }
    st_pack_destroy(db->pack);
    cm_free(db->path);
    pthread_cond_destroy(&db->ckpt_cv);
    pthread_mutex_destroy(&db->ckpt_tmu);
    pthread_mutex_destroy(&db->ckpt_mu);
    pthread_mutex_destroy(&db->mu);
    cm_free(db);
}

void st_db_set_time(st_db *db, int64_t unix_s)
{
    st_db_lock(db);
    db->fixed_now = unix_s;
    st_db_unlock(db);
}

cm_status st_db_schema_version(st_db *db, int64_t *version_out, cm_error *err)
{
    st_db_lock(db);
    cm_status st = read_version(db, version_out, err);
    st_db_unlock(db);
    return st;
}

/* Runs sql, "PRAGMA quick_check" or "PRAGMA integrity_check" (the caller
 * holds the lock), and fails with its first row unless that row is "ok";
 * the message is named after the pragma. */
static cm_status pragma_ok(st_db *db, const char *sql, cm_error *err)
{
    const char *name = sql + sizeof "PRAGMA " - 1u;
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK) {
        const unsigned char *t = row ? sqlite3_column_text(s, 0) : NULL;
        if (t == NULL || strcmp((const char *)t, "ok") != 0) {
            st = cm_error_set(err, CM_EINTERNAL, NULL, "%s: %s", name,
                              t != NULL ? (const char *)t : "no result");
        }
    }
    st_sql_release(db, s);
    return st;
}

cm_status st_db_quick_check(st_db *db, cm_error *err)
{
    st_db_lock(db);
    cm_status st = pragma_ok(db, "PRAGMA quick_check", err);
    st_db_unlock(db);
    return st;
}

void st_db_interrupt(st_db *db)
{
    sqlite3_interrupt(db->conn); /* thread-safe: it only sets a flag */
}

cm_status st_db_probe_write(st_db *db, cm_error *err)
{
    st_db_lock(db);
    cm_status st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_sql_exec(db,
                         "UPDATE schema_version SET applied_at = applied_at "
                         "WHERE version = (SELECT MAX(version) FROM schema_version)",
                         err);
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    return st;
}

cm_status st_db_data_version(st_db *db, int64_t *out, cm_error *err)
{
    st_db_lock(db);
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, "PRAGMA data_version", &s, err);
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    *out = st == CM_OK && row ? (int64_t)sqlite3_column_int64(s, 0) : 0;
    st_sql_release(db, s);
    st_db_unlock(db);
    return st;
}

cm_status st_db_integrity_check(st_db *db, cm_error *err)
{
    st_db_lock(db);
    cm_status st = pragma_ok(db, "PRAGMA integrity_check", err);
    sqlite3_stmt *s = NULL;
    bool row = false;
    if (st == CM_OK) {
        st = st_sql_prepare(db, "PRAGMA foreign_key_check", &s, err);
    }
    if (st == CM_OK) {
        st = st_sql_step(db, s, &row, err);
    }
    if (st == CM_OK && row) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        st = cm_error_set(err, CM_EINTERNAL, NULL, "foreign_key_check: dangling row %lld in %s",
                          (long long)sqlite3_column_int64(s, 1), t != NULL ? (const char *)t : "?");
    }
    st_sql_release(db, s);
    st_db_unlock(db);
    return st;
}
