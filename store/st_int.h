/* SPDX-License-Identifier: Apache-2.0
 * store: folder-private declarations shared by the st_*.c files and the
 * store's tests. Not a public contract. Only store/ (and its tests) include
 * this header, and with it sqlite3.h: SQLite types and codes stop here.
 *
 * Locking: every helper below that takes an st_db and talks to SQLite must be
 * called with db->mu held (st_db_lock), except st_sql_get_id, _get_hash and
 * st_sql_delete_id, which are whole operations and take it themselves, and
 * st_sql_put_done, which releases it; the table files take the lock in
 * their exported functions and release it before returning. */
#ifndef ST_INT_H
#define ST_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "cm.h"
#include "st_db.h"

/* ---- the handle (st_db.c) ------------------------------------------------ */

/* A prepared statement kept for the next use of the same SQL text (SQLite
 * parses and plans a statement in about as long as a small write takes). */
typedef struct st_stmt_slot {
    char *sql;         /* owned copy of the text; NULL = free slot */
    uint64_t hash;     /* cm_hash_bytes of sql */
    sqlite3_stmt *s;   /* prepared with SQLITE_PREPARE_PERSISTENT */
    bool in_use;       /* handed out by st_sql_prepare, not yet released */
} st_stmt_slot;

#define ST_STMT_CACHE 48 /* more distinct statements than the store has */

/* Checkpoints: the WAL is copied back into the database file once it holds
 * ST_WAL_CKPT_BYTES of pages (8192 of the 4 KiB pages a new file gets), by
 * the handle's checkpoint thread, which whichever thread next releases mu
 * wakes (so no request thread copies the window and syncs the file while
 * its other connections wait): the bulk on a connection of its own
 * (ckpt, under ckpt_mu) outside mu, so requests keep reading and writing
 * meanwhile, then the frames committed during that copy on conn under mu,
 * waiting for the readers still on the WAL (SQLITE_CHECKPOINT_RESTART), so
 * that the next write restarts the WAL and its file stays that size. Past
 * ST_WAL_HARD_BYTES the committing writer checkpoints itself, under mu.
 * A wider window copies back pages that many commits rewrote (index leaves,
 * interior pages, sqlite_sequence) once instead of once per 4 MiB: at 32 MiB
 * rather than 4, distinct Flax-MLP plan puts cost about 8% less server CPU
 * per request (docs/store.md, "Performance"). */
#define ST_WAL_CKPT_BYTES (32 * 1024 * 1024)
#define ST_CKPT_WAIT_MS   20 /* how long a checkpoint waits for readers to leave the WAL */
#define ST_WAL_HARD_BYTES (256 * 1024 * 1024)

struct st_db {
    sqlite3 *conn;      /* the connection; used under mu only */
    pthread_mutex_t mu; /* serializes every call on this handle */
    int64_t fixed_now;  /* test clock, unix seconds; 0 = wall clock */
    st_stmt_slot stmts[ST_STMT_CACHE]; /* under mu, like conn */
    char *path;                  /* the file, for ckpt */
    sqlite3 *ckpt;               /* checkpointing connection, opened on first use */
    pthread_mutex_t ckpt_mu;     /* serializes checkpoints */
    _Atomic int wal_pages;       /* pages in the WAL after the last commit */
    _Atomic int64_t ckpt_at;     /* WAL bytes for the next checkpoint; 0: the window */
    _Atomic int64_t ckpt_bulk_frames;  /* frames copied outside mu (st_db_checkpoint_stats) */
    _Atomic int64_t ckpt_final_frames; /* frames copied after them, under mu */
    pthread_t ckpt_thread;       /* runs the checkpoints, started on first need */
    pthread_mutex_t ckpt_tmu;    /* guards the four below */
    pthread_cond_t ckpt_cv;      /* signalled for want and stop */
    bool ckpt_started, ckpt_want, ckpt_stop;
    int64_t page_size;           /* the file's, bytes */
    st_group *group;             /* the group commit it joined, or NULL */
    struct st_pack *pack;        /* body coding contexts (st_pack.c) */
    int list_steps; /* SQLite VM steps of the last st_sql_list (tests: was an index used) */
};

/* One schema migration: run once, in order, inside the opening transaction
 * (docs/store.md, "Migrations"). Never edit a released entry; append one. */
typedef struct st_migration {
    int64_t version;  /* 1, 2, ...; equals its index + 1 */
    const char *name; /* short description, recorded in schema_version */
    const char *sql;  /* one or more statements */
} st_migration;

extern const st_migration st_migrations[];
extern const size_t st_n_migrations;

/* Tests only: how many allocations made for the store (by SQLite or by
 * the st_*.c files) have failed since the process started. An OOM loop uses it to
 * tell "the injected failure was absorbed" from "the call made fewer
 * allocations than n". */
unsigned long st_alloc_failures(void);

/* cm_alloc that counts a failure in st_alloc_failures. */
void *st_alloc(size_t n);
/* cm_realloc likewise (on failure p is untouched and still owned). */
void *st_realloc(void *p, size_t n);

/* Translates a SQLite result code (primary or extended) to a cm_status. */
cm_status st_map_rc(int rc);
/* Reports a failed SQLite call rc, doing what, with SQLite's message (db may
 * be NULL). Never returns CM_OK. */
cm_status st_db_fail(const st_db *db, int rc, const char *what, cm_error *err);

/* The handle's clock: the test time if set, else the wall clock. */
int64_t st_db_now(const st_db *db);
void st_db_lock(st_db *db);
/* Releases mu, then checkpoints when the WAL has grown (st_db_checkpoint_maybe). */
void st_db_unlock(st_db *db);
/* Releases mu only. */
void st_db_unlock_only(st_db *db);
/* The passive checkpoint of "Checkpoints" above, when db's last commit left
 * the WAL at ST_WAL_CKPT_BYTES or more and no other thread is checkpointing.
 * Call unlocked. */
void st_db_checkpoint_maybe(st_db *db);

/* ---- body coding (st_pack.c) ------------------------------------------------
 * Graph and plan bodies of 512 bytes or more are stored zstd-compressed
 * (level 1) when that saves an eighth or more: plan documents shrink about
 * tenfold, graph documents about fivefold, so a plan put writes a few pages
 * instead of a dozen. The row's body_coding (schema 8) says how its body is
 * kept; readers select st_body(body, body_coding) and, for lengths, CASE
 * body_coding WHEN 0 THEN length(body) ELSE st_body_len(body) END, SQL
 * functions each connection of the handle registers, so what a row reader
 * gets is always the bytes as put. */

#define ST_CODING_RAW  0
#define ST_CODING_ZSTD 1
#define ST_PACK_POOL   8 /* compression contexts kept for reuse */

typedef struct st_pack st_pack;

/* A body to bind: data/len as stored, coding its body_coding, heap what to
 * free (NULL when data is the caller's). */
typedef struct st_packed {
    const char *data;
    size_t len;
    int coding;
    char *heap;
} st_packed;

/* NULL when out of memory. */
st_pack *st_pack_create(void);
void st_pack_destroy(st_pack *p);
/* Codes body (len bytes) for storage in out; never fails: on any failure,
 * or when coding would not pay, out is the body as given (coding 0). Call
 * without the handle's mutex; p may be NULL (no coding). */
void st_pack_body(st_pack *p, const char *body, size_t len, st_packed *out);
void st_packed_fini(st_packed *pk);
/* Registers st_body and st_body_len on conn; an SQLite result code. */
int st_pack_register(sqlite3 *conn, st_pack *p);

/* The SQL of a body column's stored length as put, and of its bytes. */
#define ST_BODY_LEN(col, coding)                                                                   \
    "(CASE " coding " WHEN 0 THEN length(" col ") ELSE st_body_len(" col ") END)"
#define ST_BODY(col, coding) "st_body(" col ", " coding ")"

/* ---- group commit (st_group.c) -------------------------------------------- */

/* A write run inside an open transaction on db, locked: what a put does
 * between BEGIN and COMMIT. Its results go to ctx; its error to err. */
typedef cm_status (*st_group_fn)(st_db *db, void *ctx, cm_error *err);

#define ST_GROUP_MAX_BATCH 32 /* writes one transaction takes from the queue, at most */

/* One queued write: the caller's stack, until done. */
typedef struct st_group_entry {
    st_group_fn fn;
    void *ctx;
    cm_error *err;               /* the caller's (may be NULL) */
    cm_status st;                /* set by the leader */
    bool done;                   /* under the group's mutex */
    struct st_group_entry *next; /* queue link */
} st_group_entry;

/* Runs fn(db, ctx, err) in a transaction: its own when db joined no group,
 * else one it shares with the other writes queued on db's group meanwhile
 * (st_group.c). Returns once that transaction has committed (CM_OK) or
 * failed (nothing of fn's was written). Call unlocked. */
cm_status st_group_write(st_db *db, st_group_fn fn, void *ctx, cm_error *err);

/* Runs the n writes of e in order, locked, on db: one transaction, each
 * write in a savepoint (a failing write is undone alone and keeps its
 * error); when SQLite ends the transaction early or COMMIT fails, the
 * writes that had succeeded in it fail too, and the rest go on in a new
 * transaction. Sets every e[i]->st; returns the number of transactions.
 * Exposed for the store's tests, which hand it a batch. */
size_t st_group_run(st_db *db, st_group_entry **e, size_t n);

/* ---- graph rows (st_graph.c), for puts that store a graph with a row
 * of their own in one transaction ------------------------------------------ */

/* Checks in; puts its content hash in hash. No lock needed. */
cm_status st_graph_check_in(const st_graph_in *in, char hash[ST_HASH_HEX_LEN + 1], cm_error *err);
/* Finds (adding in->name as an alias when new) or inserts the graph of a
 * checked in, with in's body as st_pack_body coded it, locked and inside the
 * caller's transaction; a new row or alias is created at now (unix s). */
cm_status st_graph_write(st_db *db, const st_graph_in *in, const st_packed *body, const char *hash,
                         int64_t now, int64_t *id, bool *existed, bool *aliased, cm_error *err);

/* ---- statements and transactions (st_sql.c) ------------------------------ */

/* Prepares sql, or hands out the statement kept from the last use of the
 * same text (reset, no bindings); on error *out is NULL. Give it back with
 * st_sql_release, never sqlite3_finalize. */
cm_status st_sql_prepare(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err);
/* Gives back a statement of st_sql_prepare (NULL is a no-op): a kept one is
 * reset and its bindings cleared for the next use, any other finalized. */
void st_sql_release(st_db *db, sqlite3_stmt *s);
/* Finalizes every kept statement (before the connection closes). */
void st_sql_cache_clear(st_db *db);
/* Runs sql (one or more statements, no parameters, no result rows). */
cm_status st_sql_exec(st_db *db, const char *sql, cm_error *err);
/* Runs one parameterless statement that returns no rows (SAVEPOINT, ...),
 * kept prepared. */
cm_status st_sql_run(st_db *db, const char *sql, cm_error *err);
/* BEGIN IMMEDIATE. */
cm_status st_sql_begin(st_db *db, cm_error *err);
/* Commits when st is CM_OK, else (or when the commit fails) rolls back
 * whatever is still open. Returns the final status. */
cm_status st_sql_finish(st_db *db, cm_status st, cm_error *err);

/* The end of every put (a write that stores a row, then answers with its id
 * and whether it was there already): st_sql_finish with st, then releases
 * the lock the put took; on success *id_out and *existed_out (either may be
 * NULL) get id and existed. Returns the final status. */
cm_status st_sql_put_done(st_db *db, cm_status st, int64_t id, bool existed, int64_t *id_out,
                          bool *existed_out, cm_error *err);

/* Binds the parameters ?1, ?2, ... of s in order, one per letter of types,
 * taking each value's arguments from the variable arguments:
 *
 *   i  int64_t v              an integer
 *   I  int64_t v              an optional id: 0 binds SQL NULL
 *   d  double v               a real
 *   t  const char *t          NUL-terminated text, not NULL
 *   T  const char *t          NUL-terminated text, or NULL for SQL NULL
 *   s  const char *t, size_t n  text of n bytes (need not be NUL-terminated)
 *   b  const void *p, size_t n  a blob of n bytes (n = 0: an empty blob, not NULL)
 *   B  const void *p, size_t n  a blob as for b, or p = NULL for SQL NULL
 *
 * The arguments must have exactly these types (variable arguments are not
 * converted): pass int64_t and size_t variables, or cast literals, e.g.
 * (int64_t)0. Values are bound SQLITE_STATIC: they must stay valid until the
 * statement is stepped for the last time. err comes before types because
 * the values follow it. Stops at the first failure and returns it (reported
 * as "bind"); CM_OK when every parameter is bound. An unknown letter is a
 * bug (assert). */
cm_status st_sql_bind(st_db *db, sqlite3_stmt *s, cm_error *err, const char *types, ...);

/* Runs one statement that returns no rows (INSERT, UPDATE, DELETE): sql,
 * its parameters bound from types and the variable arguments as st_sql_bind
 * binds them. On success *rowid_out (may be NULL) gets the rowid of the row
 * an INSERT made. */
cm_status st_sql_write(st_db *db, int64_t *rowid_out, cm_error *err, const char *sql,
                       const char *types, ...);

/* Steps s once: CM_OK with *row telling whether a row came back. */
cm_status st_sql_step(st_db *db, sqlite3_stmt *s, bool *row, cm_error *err);
/* Steps a statement that returns no row. */
cm_status st_sql_step_done(st_db *db, sqlite3_stmt *s, cm_error *err);
/* Copies column i into a new NUL-terminated heap string (NULL for SQL NULL);
 * *len_out (may be NULL) gets its length in bytes. */
cm_status st_sql_col_dup(sqlite3_stmt *s, int i, char **out, size_t *len_out, cm_error *err);
/* Copies a text column into fixed storage of cap bytes (truncating). */
void st_sql_col_copy(sqlite3_stmt *s, int i, char *dst, size_t cap);

/* Reads one result row into item (caller storage, zeroed): full, a get's
 * columns (bodies too), else a list query's (lengths, not bodies). On
 * failure the item may be half read; st_rows_fini still frees it. */
typedef cm_status (*st_row_fn)(sqlite3_stmt *s, void *item, bool full, cm_error *err);

#define ST_ROWS_MAX_OWNED 4 /* heap strings an item owns, at most */

/* How a table's rows read into its item struct (st_graph, st_plan, ...), for
 * the generic get, list and fini below. Each table file has one, static
 * const. */
typedef struct st_rows {
    size_t size;                     /* bytes of one item */
    st_row_fn row;                   /* reads one row */
    size_t owned[ST_ROWS_MAX_OWNED]; /* offsetof each char * the item owns (heap) */
    size_t n_owned;
} st_rows;

/* Frees the strings item owns and zeroes it (the table's st_*_fini); NULL is
 * a no-op. */
void st_rows_fini(const st_rows *rows, void *item);
/* Finalises the n items of rows at items and frees the array (NULL and 0:
 * nothing). */
void st_rows_free(const st_rows *rows, void *items, size_t n);

/* Runs the query sql, its parameters bound from types and the variable
 * arguments as st_sql_bind binds them, and reads its first row, if any,
 * into item (zeroed caller storage) with rows->row (full); *found tells
 * whether there was one. On error item is finalised. Call locked. */
cm_status st_sql_get(st_db *db, const st_rows *rows, void *item, bool *found, cm_error *err,
                     const char *sql, const char *types, ...);

/* Reads the row of id into item with sql, whose one parameter (?1) is the
 * id. item is zeroed first. Checks the id (CM_EINVAL at /id) and takes the
 * lock itself; CM_ENOTFOUND at /id ("no <what> <id>") when there is no such
 * row. */
cm_status st_sql_get_id(st_db *db, const st_rows *rows, const char *what, const char *sql,
                        int64_t id, void *item, cm_error *err);
/* The same for the row whose hash column matches hash (any case; CM_EINVAL
 * at /hash unless 64 hex digits), ?1 being the lower-cased hash;
 * CM_ENOTFOUND at /hash ("no <what> with that hash"). */
cm_status st_sql_get_hash(st_db *db, const st_rows *rows, const char *what, const char *sql,
                          const char *hash, void *item, cm_error *err);

/* Runs the list query sql: its parameters ?1.. are bound from types and the
 * variable arguments (as st_sql_bind), and the one after them, its LIMIT, to
 * limit + 1; its first column must be the id. Fills a heap array of up to
 * limit items read with rows->row (not full; free with st_rows_free), their
 * number and the next-page cursor (st_db.h, "Paging"). On error everything
 * read is freed and the outputs are zero. Call locked. */
cm_status st_sql_list(st_db *db, const st_rows *rows, size_t limit, void **items_out, size_t *n_out,
                      int64_t *next_out, cm_error *err, const char *sql, const char *types, ...);

/* The bound of a list page whose filters no index serves (st_db.h,
 * "Paging"): sql selects ids in order from the cursor, its parameters ?1..
 * bound from types and the variable arguments and the one after them, its
 * OFFSET, to ST_LIST_SCAN_ROWS - 1: *bound is the id it reaches, 0 when
 * fewer rows are left (no bound). Call locked. */
cm_status st_sql_scan_bound(st_db *db, int64_t *bound, cm_error *err, const char *sql,
                            const char *types, ...);

/* Deletes row id from table in its own transaction. Checks the id (CM_EINVAL
 * at /id) and takes the lock itself; CM_ENOTFOUND at /id ("no <what> <id>")
 * when absent. */
cm_status st_sql_delete_id(st_db *db, const char *table, const char *what, int64_t id,
                           cm_error *err);
/* The id of the row of table (graphs, plans or tokens) with that hash, 0
 * when there is none. */
cm_status st_sql_id_by_hash(st_db *db, const char *table, const char *hash, int64_t *id_out,
                            cm_error *err);
/* Whether row id exists in table. */
cm_status st_sql_row_exists(st_db *db, const char *table, int64_t id, bool *found, cm_error *err);

/* ---- validation (st_sql.c) ----------------------------------------------- */

/* True when s[0..n) is valid UTF-8 without control characters. */
bool st_clean_utf8(const unsigned char *s, size_t n);
/* A name or label: 1..ST_NAME_MAX_LEN bytes of clean UTF-8 (CM_EINVAL at path). */
cm_status st_check_name(const char *name, const char *path, cm_error *err);
/* Checks a 64-hex-digit hash and copies it lower-cased into out (CM_EINVAL
 * at /hash). */
cm_status st_check_hash(const char *h, char out[ST_HASH_HEX_LEN + 1], cm_error *err);
/* id > 0 (CM_EINVAL at path). */
cm_status st_check_id(int64_t id, const char *path, cm_error *err);
/* A non-empty body of at most SQLite's maximum length (CM_EINVAL at path). */
cm_status st_check_body(const char *body, size_t len, const char *path, cm_error *err);
/* Checks that text[0..len) is JSON, using SQLite's json_valid (CM_EINVAL at
 * path). Call locked. */
cm_status st_check_json(st_db *db, const char *text, size_t len, const char *path, cm_error *err);
/* A list's limit and cursor: CM_EINVAL at /limit or /after; *limit_out gets
 * the page size (ST_LIST_DEFAULT_LIMIT for 0). */
cm_status st_check_limit(size_t limit, int64_t after_id, size_t *limit_out, cm_error *err);
/* Non-negative created_after / created_before bounds. */
cm_status st_check_time_range(int64_t after, int64_t before, cm_error *err);

#endif /* ST_INT_H */
