/* SPDX-License-Identifier: Apache-2.0
 * store: the migration_reports table (st_db.h, "migration reports"): GSPMD
 * -> Shardy migration reports keyed by the caller's request hash, with the
 * module they were computed from. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

#define MIG_COLS "id, hash, name, profile, created_at, length(input), length(body)"

/* Row: MIG_COLS [, input, body]. */
static cm_status mig_row(sqlite3_stmt *s, void *item, bool with_body, cm_error *err)
{
    st_migreport *r = item;
    r->id = (int64_t)sqlite3_column_int64(s, 0);
    st_sql_col_copy(s, 1, r->hash, sizeof r->hash);
    st_sql_col_copy(s, 2, r->name, sizeof r->name);
    st_sql_col_copy(s, 3, r->profile, sizeof r->profile);
    r->created_at = (int64_t)sqlite3_column_int64(s, 4);
    r->input_len = (size_t)sqlite3_column_int64(s, 5);
    r->body_len = (size_t)sqlite3_column_int64(s, 6);
    cm_status st = CM_OK;
    if (with_body) {
        st = st_sql_col_dup(s, 7, &r->input, &r->input_len, err);
    }
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 8, &r->body, &r->body_len, err);
    }
    return st;
}

static const st_rows mig_rows = {sizeof(st_migreport),
                                 mig_row,
                                 {offsetof(st_migreport, input), offsetof(st_migreport, body)},
                                 2};

#define MIG_GET "SELECT " MIG_COLS ", input, body FROM migration_reports WHERE "

void st_migreport_fini(st_migreport *r)
{
    st_rows_fini(&mig_rows, r);
}

void st_migreport_list_fini(st_migreport_list *l)
{
    if (l != NULL) {
        st_rows_free(&mig_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
}

cm_status st_migreport_put(st_db *db, const st_migreport_in *in, int64_t *id_out, bool *existed_out,
                           cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    char hash[ST_HASH_HEX_LEN + 1];
    cm_status st = st_check_hash(in->hash, hash, err);
    if (st == CM_OK) {
        st = st_check_name(in->name, "/name", err);
    }
    if (st == CM_OK) {
        st = st_check_name(in->profile, "/profile", err);
    }
    if (st == CM_OK) {
        st = st_check_body(in->input, in->input_len, "/input", err);
    }
    if (st == CM_OK) {
        st = st_check_body(in->body, in->body_len, "/body", err);
    }
    if (st != CM_OK) {
        return st;
    }
    int64_t id = 0;
    bool existed = false;
    st_db_lock(db);
    st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_sql_id_by_hash(db, "migration_reports", hash, &id, err);
        existed = id != 0;
    }
    if (st == CM_OK && !existed) {
        st = st_sql_write(db, &id, err,
                          "INSERT INTO migration_reports (hash, name, profile, input, body, "
                          "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                          "tttbbi", hash, in->name, in->profile, in->input, in->input_len, in->body,
                          in->body_len, st_db_now(db));
    }
    return st_sql_put_done(db, st, id, existed, id_out, existed_out, err);
}

cm_status st_migreport_get(st_db *db, int64_t id, st_migreport *out, cm_error *err)
{
    return st_sql_get_id(db, &mig_rows, "migration", MIG_GET "id = ?1", id, out, err);
}

cm_status st_migreport_get_by_hash(st_db *db, const char *hash, st_migreport *out, cm_error *err)
{
    return st_sql_get_hash(db, &mig_rows, "migration", MIG_GET "hash = ?1", hash, out, err);
}

cm_status st_migreport_list_query(st_db *db, size_t limit, int64_t after_id, st_migreport_list *out,
                                  cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t lim = 0;
    cm_status st = st_check_limit(limit, after_id, &lim, err);
    if (st != CM_OK) {
        return st;
    }
    void *items = NULL;
    st_db_lock(db);
    st = st_sql_list(db, &mig_rows, lim, &items, &out->n_items, &out->next_after, err,
                     "SELECT " MIG_COLS " FROM migration_reports WHERE id > ?1 ORDER BY id "
                     "LIMIT ?2",
                     "i", after_id);
    st_db_unlock(db);
    out->items = items;
    return st;
}
