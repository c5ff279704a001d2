/* SPDX-License-Identifier: Apache-2.0
 * store: the plans table (st_db.h, "plans"): plan documents keyed by the
 * caller's request hash. */
#include <stddef.h>
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

/* A plan marked input_is_graph reads its input (and format, and length)
 * from its graph's row. */
#define PLAN_OF_GRAPH(col)                                                                         \
    "CASE WHEN input_is_graph THEN (SELECT " col " FROM graphs WHERE graphs.id = plans.graph_id) "
#define PLAN_COLS                                                                                  \
    "id, hash, graph_id, COALESCE(mesh_id, 0), options, created_at, " ST_BODY_LEN(                 \
        "body", "body_coding") ", " PLAN_OF_GRAPH("format") "ELSE input_format "                   \
                                                            "END, " PLAN_OF_GRAPH(ST_BODY_LEN("bo" \
                                                                                              "d"  \
                                                                                              "y", \
                                                                                              "bo" \
                                                                                              "dy" \
                                                                                              "_c" \
                                                                                              "od" \
                                                                                              "in" \
                                                                                              "g")) "ELSE length(input) END, length(rules)"

/* Row: PLAN_COLS [, body, input, rules]. input_format, input and rules are
 * NULL for plans stored without an input (and before schema 5), so lengths
 * read 0 and the format json; an input_is_graph row reads its graph's. */
static cm_status plan_row(sqlite3_stmt *s, void *item, bool with_body, cm_error *err)
{
    st_plan *p = item;
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

static const st_rows plan_rows = {sizeof(st_plan),
                                  plan_row,
                                  {offsetof(st_plan, options), offsetof(st_plan, body),
                                   offsetof(st_plan, input), offsetof(st_plan, rules)},
                                  4};

void st_plan_fini(st_plan *p)
{
    st_rows_fini(&plan_rows, p);
}

#define PLAN_GET                                                                                   \
    "SELECT " PLAN_COLS ", " ST_BODY("body", "body_coding") ", " PLAN_OF_GRAPH(                    \
        ST_BODY("body", "body_coding")) "ELSE input END, rules FROM plans WHERE "

void st_plan_list_fini(st_plan_list *l)
{
    if (l != NULL) {
        st_rows_free(&plan_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
}

/* A checked put's writes, inside the transaction st_group_write runs. */
typedef struct plan_write_ctx {
    const st_plan_in *in;            /* NULL once the put has returned */
    char hash[ST_HASH_HEX_LEN + 1];  /* lower-cased in->hash */
    char ghash[ST_HASH_HEX_LEN + 1]; /* in->graph's content hash, when in->graph is set */
    bool input_is_graph;             /* in->input is in->graph's body, byte for byte */
    const char *opts;                /* in->options, or "{}" */
    size_t opts_len;
    st_packed body;                  /* in->body as stored */
    st_packed graph_body;            /* in->graph's body as stored, when in->graph is set */
    int64_t id;                      /* out: the plan's row */
    bool existed;                    /* out: the hash was stored already */
    int64_t graph_id;                /* out: the row's graph (when not existed) */
    int64_t created_at;              /* the time of the put, on the caller's handle's clock */
} plan_write_ctx;

static cm_status plan_write(st_db *db, void *arg, cm_error *err)
{
    plan_write_ctx *w = arg;
    const st_plan_in *in = w->in;
    const char *input = w->input_is_graph ? NULL : in->input;
    size_t input_len = w->input_is_graph ? 0 : in->input_len;
    const char *input_format = input == NULL ? NULL : (in->input_is_mlir ? "mlir" : "json");
    cm_status st = CM_OK;
    int64_t graph_id = in->graph_id;
    bool graph_known = false;
    if (in->graph != NULL) {
        bool g_existed = false;
        st = st_graph_write(db, in->graph, &w->graph_body, w->ghash, w->created_at, &graph_id,
                            &g_existed, NULL, err);
        graph_known = true;
    }
    if (st == CM_OK) {
        st = st_sql_id_by_hash(db, "plans", w->hash, &w->id, err);
        w->existed = w->id != 0;
    }
    if (st == CM_OK && !w->existed) {
        bool found = graph_known;
        if (!found) {
            st = st_sql_row_exists(db, "graphs", graph_id, &found, err);
        }
        if (st == CM_OK && !found) {
            st = cm_error_set(err, CM_ENOTFOUND, "/graph_id", "no graph %lld", (long long)graph_id);
        }
        if (st == CM_OK && in->mesh_id != 0) {
            st = st_sql_row_exists(db, "meshes", in->mesh_id, &found, err);
            if (st == CM_OK && !found) {
                st = cm_error_set(err, CM_ENOTFOUND, "/mesh_id", "no mesh %lld",
                                  (long long)in->mesh_id);
            }
        }
        w->graph_id = graph_id;
        if (st == CM_OK) {
            st = st_sql_write(db, &w->id, err,
                              "INSERT INTO plans (hash, graph_id, mesh_id, options, body, "
                              "created_at, input, input_format, rules, input_is_graph, "
                              "body_coding) "
                              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                              "tiIbbiBTBii", w->hash, graph_id, in->mesh_id, w->opts, w->opts_len,
                              w->body.data, w->body.len, w->created_at, input, input_len,
                              input_format, in->rules, in->rules_len, (int64_t)w->input_is_graph,
                              (int64_t)w->body.coding);
        }
    }
    return st;
}

/* st_plan_put, leaving in *w what its write found (for st_plan_put_row). */
static cm_status plan_put(st_db *db, const st_plan_in *in, plan_write_ctx *w, cm_error *err);

cm_status st_plan_put(st_db *db, const st_plan_in *in, int64_t *id_out, bool *existed_out,
                      cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    plan_write_ctx w;
    cm_status st = plan_put(db, in, &w, err);
    if (st == CM_OK && id_out != NULL) {
        *id_out = w.id;
    }
    if (st == CM_OK && existed_out != NULL) {
        *existed_out = w.existed;
    }
    return st;
}

cm_status st_plan_put_row(st_db *db, const st_plan_in *in, st_plan *row, bool *existed_out,
                          cm_error *err)
{
    memset(row, 0, sizeof *row);
    if (existed_out != NULL) {
        *existed_out = false;
    }
    plan_write_ctx w;
    cm_status st = plan_put(db, in, &w, err);
    if (st != CM_OK) {
        return st;
    }
    if (existed_out != NULL) {
        *existed_out = w.existed;
    }
    if (w.existed) {
        /* another put's row: read as a list reads it */
        st_plan_query q;
        st_plan_query_init(&q);
        q.after_id = w.id - 1;
        q.limit = 1;
        st_plan_list l;
        st = st_plan_list_query(db, &q, &l, err);
        if (st == CM_OK && (l.n_items != 1 || l.items[0].id != w.id)) {
            st = cm_error_set(err, CM_ENOTFOUND, "/id", "plan %lld was deleted meanwhile",
                              (long long)w.id);
        }
        if (st == CM_OK) {
            *row = l.items[0];
            memset(&l.items[0], 0, sizeof l.items[0]);
        }
        st_plan_list_fini(&l);
        return st;
    }
    /* the row just inserted, as a list item reads it back */
    const char *opts = w.opts;
    size_t opts_len = w.opts_len;
    row->options = st_alloc(opts_len + 1);
    if (row->options == NULL) {
        return cm_error_oom(err);
    }
    memcpy(row->options, opts, opts_len);
    row->options[opts_len] = '\0';
    row->options_len = opts_len;
    row->id = w.id;
    memcpy(row->hash, w.hash, sizeof row->hash);
    row->graph_id = w.graph_id;
    row->mesh_id = in->mesh_id;
    row->body_len = in->body_len;
    row->created_at = w.created_at;
    row->input_len = in->input != NULL ? in->input_len : 0;
    row->input_is_mlir = in->input != NULL && in->input_is_mlir;
    row->rules_len = in->rules != NULL ? in->rules_len : 0;
    return CM_OK;
}

static cm_status plan_put(st_db *db, const st_plan_in *in, plan_write_ctx *w, cm_error *err)
{
    memset(w, 0, sizeof *w);
    w->opts = in->options != NULL ? in->options : "{}";
    w->opts_len = in->options != NULL ? in->options_len : 2;
    cm_status st = st_check_hash(in->hash, w->hash, err);
    if (st == CM_OK && in->graph != NULL) {
        st = in->graph_id == 0
                 ? st_graph_check_in(in->graph, w->ghash, err)
                 : cm_error_set(err, CM_EINVAL, "/graph_id", "must be 0 with a graph to store");
    } else if (st == CM_OK) {
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
    if (st == CM_OK) {
        /* JSON checked on the caller's handle, outside the write queue */
        st_db_lock(db);
        st = st_check_json(db, w->opts, w->opts_len, "/options", err);
        if (st == CM_OK && in->rules != NULL) {
            st = st_check_json(db, in->rules, in->rules_len, "/rules", err);
        }
        st_db_unlock(db);
    }
    if (st != CM_OK) {
        return st;
    }
    /* before the write queue and its lock: whether the input is the inline
     * graph's own body (then kept once, in the graph row), and the coded
     * bodies (the graph's unused when that content is stored already) */
    w->in = in;
    /* the caller's clock (a test's fixed time), not that of the handle the
     * group runs the write on */
    w->created_at = st_db_now(db);
    w->input_is_graph = in->graph != NULL && in->input != NULL && in->rules == NULL &&
                        in->input_is_mlir == (in->graph->format == ST_GRAPH_MLIR) &&
                        in->input_len == in->graph->body_len &&
                        memcmp(in->input, in->graph->body, in->input_len) == 0;
    st_pack_body(db->pack, in->body, in->body_len, &w->body);
    if (in->graph != NULL) {
        st_pack_body(db->pack, in->graph->body, in->graph->body_len, &w->graph_body);
    }
    st = st_group_write(db, plan_write, w, err);
    st_packed_fini(&w->body);
    st_packed_fini(&w->graph_body);
    w->in = NULL;
    return st;
}

cm_status st_plan_get(st_db *db, int64_t id, st_plan *out, cm_error *err)
{
    return st_sql_get_id(db, &plan_rows, "plan", PLAN_GET "id = ?1", id, out, err);
}

cm_status st_plan_get_by_hash(st_db *db, const char *hash, st_plan *out, cm_error *err)
{
    return st_sql_get_hash(db, &plan_rows, "plan", PLAN_GET "hash = ?1", hash, out, err);
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
    /* A filter on graph or mesh is spelled only when given, so that SQLite
     * walks its index (plans_graph, plans_mesh: in id order within a key)
     * instead of every row after the cursor: `?2 = 0 OR graph_id = ?2`
     * cannot use an index, and a filter matching nothing scanned the whole
     * table. The time filters have no index: with one, a page examines at
     * most ST_LIST_SCAN_ROWS of the rows the others select (?6, the bound:
     * a range on id, so that the walk stops there; INT64_MAX without one). */
#define PLAN_WHERE(by_graph, by_mesh) " FROM plans WHERE id > ?1 AND " by_graph " AND " by_mesh
#define PLAN_LIST(by_graph, by_mesh)                                                               \
    "SELECT " PLAN_COLS PLAN_WHERE(by_graph,                                                       \
                                   by_mesh) " AND (?4 = 0 OR created_at >= ?4) AND (?5 = 0 OR "    \
                                            "created_at < ?5) AND id <= ?6"                        \
                                            " ORDER BY id LIMIT ?7"
#define PLAN_BOUND(by_graph, by_mesh)                                                              \
    "SELECT id" PLAN_WHERE(by_graph, by_mesh) " ORDER BY id LIMIT 1 OFFSET ?4"
    static const char *const sql[2][2] = {
        {PLAN_LIST("?2 = 0", "?3 = 0"), PLAN_LIST("?2 = 0", "mesh_id = ?3")},
        {PLAN_LIST("graph_id = ?2", "?3 = 0"), PLAN_LIST("graph_id = ?2", "mesh_id = ?3")},
    };
    static const char *const bound_sql[2][2] = {
        {PLAN_BOUND("?2 = 0", "?3 = 0"), PLAN_BOUND("?2 = 0", "mesh_id = ?3")},
        {PLAN_BOUND("graph_id = ?2", "?3 = 0"), PLAN_BOUND("graph_id = ?2", "mesh_id = ?3")},
    };
#undef PLAN_BOUND
#undef PLAN_LIST
#undef PLAN_WHERE
    int g = q->graph_id != 0, m = q->mesh_id != 0;
    void *items = NULL;
    int64_t bound = 0;
    st_db_lock(db);
    if (q->created_after != 0 || q->created_before != 0) {
        st = st_sql_scan_bound(db, &bound, err, bound_sql[g][m], "iii", q->after_id, q->graph_id,
                               q->mesh_id);
    }
    if (st == CM_OK) {
        st = st_sql_list(db, &plan_rows, limit, &items, &out->n_items, &out->next_after, err,
                         sql[g][m], "iiiiii", q->after_id, q->graph_id, q->mesh_id,
                         q->created_after, q->created_before, bound > 0 ? bound : INT64_MAX);
    }
    if (st == CM_OK && out->next_after == 0) {
        out->next_after = bound; /* rows past the bound are left for the next page */
    }
    st_db_unlock(db);
    out->items = items;
    return st;
}

cm_status st_plan_delete(st_db *db, int64_t id, cm_error *err)
{
    return st_sql_delete_id(db, "plans", "plan", id, err);
}
