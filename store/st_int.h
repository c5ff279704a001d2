/* SPDX-License-Identifier: Apache-2.0
 * store: folder-private declarations shared by the st_*.c files and the
 * store's tests. Not a public contract. Only store/ (and its tests) include
 * this header, and with it sqlite3.h: SQLite types and codes stop here.
 *
 * Locking: every helper below that takes an st_db and talks to SQLite must be
 * called with db->mu held (st_db_lock); the table files take the lock in
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

struct st_db {
    sqlite3 *conn;      /* the connection; used under mu only */
    pthread_mutex_t mu; /* serializes every call on this handle */
    int64_t fixed_now;  /* test clock, unix seconds; 0 = wall clock */
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
void st_db_unlock(st_db *db);

/* ---- statements and transactions (st_sql.c) ------------------------------ */

/* Prepares sql; on error *out is NULL. */
cm_status st_sql_prepare(st_db *db, const char *sql, sqlite3_stmt **out, cm_error *err);
/* Runs sql (one or more statements, no parameters, no result rows). */
cm_status st_sql_exec(st_db *db, const char *sql, cm_error *err);
/* BEGIN IMMEDIATE. */
cm_status st_sql_begin(st_db *db, cm_error *err);
/* Commits when st is CM_OK, else (or when the commit fails) rolls back
 * whatever is still open. Returns the final status. */
cm_status st_sql_finish(st_db *db, cm_status st, cm_error *err);

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

/* Steps s once: CM_OK with *row telling whether a row came back. */
cm_status st_sql_step(st_db *db, sqlite3_stmt *s, bool *row, cm_error *err);
/* Steps a statement that returns no row. */
cm_status st_sql_step_done(st_db *db, sqlite3_stmt *s, cm_error *err);
/* Copies column i into a new NUL-terminated heap string (NULL for SQL NULL);
 * *len_out (may be NULL) gets its length in bytes. */
cm_status st_sql_col_dup(sqlite3_stmt *s, int i, char **out, size_t *len_out, cm_error *err);
/* Copies a text column into fixed storage of cap bytes (truncating). */
void st_sql_col_copy(sqlite3_stmt *s, int i, char *dst, size_t cap);

/* Reads one row of a list query into item (caller storage, zeroed). */
typedef cm_status (*st_row_fn)(sqlite3_stmt *s, void *item, cm_error *err);
typedef void (*st_fini_fn)(void *item);

/* Runs a bound query whose first column is the id and which was asked for
 * limit + 1 rows; fills a heap array of up to limit items of item_size
 * bytes and the next-page cursor. On error everything read is freed. */
cm_status st_sql_run_list(st_db *db, sqlite3_stmt *s, size_t limit, size_t item_size, st_row_fn row,
                          st_fini_fn fini, void **items_out, size_t *n_out, int64_t *next_out,
                          cm_error *err);
/* Deletes row id from table in its own transaction; CM_ENOTFOUND at /id
 * ("no <what> <id>") when absent. */
cm_status st_sql_delete_id(st_db *db, const char *table, const char *what, int64_t id,
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
