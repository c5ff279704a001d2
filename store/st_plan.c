/* SPDX-License-Identifier: Apache-2.0
 * store: the plans table (st_db.h, "plans"): plan documents keyed by the
 * caller's request hash. */
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

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
    cm_free(p->input);
    cm_free(p->rules);
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

#define PLAN_COLS                                                                                  \
    "id, hash, graph_id, COALESCE(mesh_id, 0), options, created_at, length(body), input_format, "  \
    "length(input), length(rules)"

/* Row: PLAN_COLS [, body, input, rules]. input_format, input and rules are
 * NULL for plans stored without an input (and before schema 5), so lengths
 * read 0 and the format json. */
static cm_status plan_row(sqlite3_stmt *s, st_plan *p, bool with_body, cm_error *err)
{
    p->id = (int64_t)sqlite3_column_int64(s, 0);
    st_sql_col_copy(s, 1, p->hash, sizeof p->hash);
    p->graph_id = (int64_t)sqlite3_column_int64(s, 2);
    p->mesh_id = (int64_t)sqlite3_column_int64(s, 3);
    cm_status st = st_sql_col_dup(s, 4, &p->options, &p->options_len, err);
    p->created_at = (int64_t)sqlite3_column_int64(s, 5);
    p->body_len = (size_t)sqlite3_column_int64(s, 6);
    const unsigned char *f = sqlite3_column_text(s, 7);
    p->input_is_mlir = f != NULL && strcmp((const char *)f, "mlir") == 0;
    p->input_len = (size_t)sqlite3_column_int64(s, 8);
    p->rules_len = (size_t)sqlite3_column_int64(s, 9);
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 10, &p->body, &p->body_len, err);
    }
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 11, &p->input, &p->input_len, err);
    }
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 12, &p->rules, &p->rules_len, err);
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
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT " PLAN_COLS ", body, input, rules FROM plans WHERE %s",
             where);
    sqlite3_stmt *s = NULL;
    cm_status st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = hash != NULL ? st_sql_bind(db, s, err, "t", hash) : st_sql_bind(db, s, err, "i", id);
    }
    *found = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, found, err);
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
    cm_status st = st_check_hash(in->hash, hash, err);
    if (st == CM_OK) {
        st = st_check_id(in->graph_id, "/graph_id", err);
    }
    if (st == CM_OK && in->mesh_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/mesh_id", "must be 0 or a positive id");
    }
    if (st == CM_OK) {
        st = st_check_body(in->body, in->body_len, "/body", err);
    }
    if (st == CM_OK && in->input != NULL) {
        st = st_check_body(in->input, in->input_len, "/input", err);
    }
    if (st == CM_OK && in->rules != NULL && in->input == NULL) {
        st = cm_error_set(err, CM_EINVAL, "/rules", "needs an input");
    }
    if (st == CM_OK && in->rules != NULL && !in->input_is_mlir) {
        st = cm_error_set(err, CM_EINVAL, "/rules",
                          "only for an MLIR input (a graph document has its rules merged in)");
    }
    if (st != CM_OK) {
        return st;
    }
    const char *input_format = in->input == NULL ? NULL : (in->input_is_mlir ? "mlir" : "json");
    const char *opts = in->options != NULL ? in->options : "{}";
    size_t opts_len = in->options != NULL ? in->options_len : 2;
    int64_t id = 0;
    bool existed = false;
    st_db_lock(db);
    st = st_check_json(db, opts, opts_len, "/options", err);
    if (st == CM_OK && in->rules != NULL) {
        st = st_check_json(db, in->rules, in->rules_len, "/rules", err);
    }
    if (st == CM_OK) {
        st = st_sql_begin(db, err);
    }
    if (st == CM_OK) {
        sqlite3_stmt *s = NULL;
        st = st_sql_prepare(db, "SELECT id FROM plans WHERE hash = ?1", &s, err);
        if (st == CM_OK) {
            st = st_sql_bind(db, s, err, "t", hash);
        }
        if (st == CM_OK) {
            st = st_sql_step(db, s, &existed, err);
        }
        if (st == CM_OK && existed) {
            id = (int64_t)sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
    }
    if (st == CM_OK && !existed) {
        bool found = false;
        st = st_sql_row_exists(db, "graphs", in->graph_id, &found, err);
        if (st == CM_OK && !found) {
            st = cm_error_set(err, CM_ENOTFOUND, "/graph_id", "no graph %lld",
                              (long long)in->graph_id);
        }
        if (st == CM_OK && in->mesh_id != 0) {
            st = st_sql_row_exists(db, "meshes", in->mesh_id, &found, err);
            if (st == CM_OK && !found) {
                st = cm_error_set(err, CM_ENOTFOUND, "/mesh_id", "no mesh %lld",
                                  (long long)in->mesh_id);
            }
        }
        sqlite3_stmt *s = NULL;
        if (st == CM_OK) {
            st = st_sql_prepare(db,
                                "INSERT INTO plans (hash, graph_id, mesh_id, options, body, "
                                "created_at, input, input_format, rules) "
                                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                &s, err);
        }
        if (st == CM_OK) {
            st = st_sql_bind(db, s, err, "tiIbbiBTB", hash, in->graph_id, in->mesh_id, opts,
                             opts_len, in->body, in->body_len, st_db_now(db), in->input,
                             in->input_len, input_format, in->rules, in->rules_len);
        }
        if (st == CM_OK) {
            st = st_sql_step_done(db, s, err);
        }
        sqlite3_finalize(s);
        id = (int64_t)sqlite3_last_insert_rowid(db->conn);
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
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
    cm_status st = st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    st_db_lock(db);
    st = plan_lookup(db, "id = ?1", id, NULL, out, &found, err);
    st_db_unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/id", "no plan %lld", (long long)id);
    }
    return st;
}

cm_status st_plan_get_by_hash(st_db *db, const char *hash, st_plan *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    char h[ST_HASH_HEX_LEN + 1];
    cm_status st = st_check_hash(hash, h, err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    st_db_lock(db);
    st = plan_lookup(db, "hash = ?1", 0, h, out, &found, err);
    st_db_unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/hash", "no plan with that hash");
    }
    return st;
}

cm_status st_plan_list_query(st_db *db, const st_plan_query *q, st_plan_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK) {
        st = st_check_time_range(q->created_after, q->created_before, err);
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
    st_db_lock(db);
    sqlite3_stmt *s = NULL;
    st = st_sql_prepare(db,
                        "SELECT " PLAN_COLS " FROM plans WHERE id > ?1"
                        " AND (?2 = 0 OR graph_id = ?2) AND (?3 = 0 OR mesh_id = ?3)"
                        " AND (?4 = 0 OR created_at >= ?4) AND (?5 = 0 OR created_at < ?5)"
                        " ORDER BY id LIMIT ?6",
                        &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "iiiiii", q->after_id, q->graph_id, q->mesh_id,
                         q->created_after, q->created_before, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = st_sql_run_list(db, s, limit, sizeof(st_plan), plan_list_row, plan_fini_v, &items,
                             &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    st_db_unlock(db);
    return st;
}

cm_status st_plan_delete(st_db *db, int64_t id, cm_error *err)
{
    cm_status st = st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    st_db_lock(db);
    st = st_sql_delete_id(db, "plans", "plan", id, err);
    st_db_unlock(db);
    return st;
}
