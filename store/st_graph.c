/* SPDX-License-Identifier: Apache-2.0
 * store: the graphs table (st_db.h, "graphs"): graph documents as posted,
 * JSON or MLIR, deduplicated by content hash. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

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

#define GRAPH_COLS                                                                                 \
    "id, name, format, hash, created_at, " ST_BODY_LEN(                                            \
        "body", "body_coding") ", (SELECT group_concat(name, char(10)) "                           \
                               "FROM graph_aliases WHERE graph_id = graphs.id)"

/* Row: GRAPH_COLS [, body]. */
static cm_status graph_row(sqlite3_stmt *s, void *item, bool with_body, cm_error *err)
{
    st_graph *g = item;
    g->id = (int64_t)sqlite3_column_int64(s, 0);
    cm_status st = st_sql_col_dup(s, 1, &g->name, NULL, err);
    const unsigned char *f = sqlite3_column_text(s, 2);
    g->format = f != NULL && strcmp((const char *)f, "mlir") == 0 ? ST_GRAPH_MLIR : ST_GRAPH_JSON;
    st_sql_col_copy(s, 3, g->hash, sizeof g->hash);
    g->created_at = (int64_t)sqlite3_column_int64(s, 4);
    g->body_len = (size_t)sqlite3_column_int64(s, 5);
    if (st == CM_OK && sqlite3_column_type(s, 6) != SQLITE_NULL) {
        st = st_sql_col_dup(s, 6, &g->aliases, NULL, err);
    }
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 7, &g->body, &g->body_len, err);
    }
    return st;
}

static const st_rows graph_rows = {
    sizeof(st_graph),
    graph_row,
    {offsetof(st_graph, name), offsetof(st_graph, aliases), offsetof(st_graph, body)},
    3};

void st_graph_fini(st_graph *g)
{
    st_rows_fini(&graph_rows, g);
}

#define GRAPH_GET "SELECT " GRAPH_COLS ", " ST_BODY("body", "body_coding") " FROM graphs WHERE "

void st_graph_list_fini(st_graph_list *l)
{
    if (l != NULL) {
        st_rows_free(&graph_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
}

cm_status st_graph_put(st_db *db, const st_graph_in *in, int64_t *id_out, bool *existed_out,
                       cm_error *err)
{
    return st_graph_put_named(db, in, id_out, existed_out, NULL, err);
}

/* Checks in and puts its content hash (in->hash folded, or computed) in
 * hash. Needs no lock. */
cm_status st_graph_check_in(const st_graph_in *in, char hash[ST_HASH_HEX_LEN + 1], cm_error *err)
{
    cm_status st = st_check_name(in->name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    if (in->format != ST_GRAPH_JSON && in->format != ST_GRAPH_MLIR) {
        return cm_error_set(err, CM_EINVAL, "/format", "must be json or mlir");
    }
    st = st_check_body(in->body, in->body_len, "/body", err);
    if (st != CM_OK) {
        return st;
    }
    if (in->hash != NULL) {
        return st_check_hash(in->hash, hash, err);
    }
    cm_sha256 c;
    cm_sha256_init(&c);
    const char *fname = st_graph_format_name(in->format);
    cm_sha256_update(&c, fname, strlen(fname) + 1);
    cm_sha256_update(&c, in->body, in->body_len);
    uint8_t d[CM_SHA256_LEN];
    cm_sha256_final(&c, d);
    cm_sha256_to_hex(d, hash);
    return CM_OK;
}

/* The graph row of a checked in with that hash, inside the caller's open
 * transaction: found by hash (then in->name, when new, becomes an alias;
 * *aliased, may be NULL, says whether it did) or inserted. */
cm_status st_graph_write(st_db *db, const st_graph_in *in, const st_packed *body, const char *hash,
                         int64_t now, int64_t *id, bool *existed, bool *aliased, cm_error *err)
{
    cm_status st = st_sql_id_by_hash(db, "graphs", hash, id, err);
    *existed = st == CM_OK && *id != 0;
    if (st == CM_OK && !*existed) {
        st = st_sql_write(db, id, err,
                          "INSERT INTO graphs (name, format, hash, body, created_at, body_coding) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                          "tttbii", in->name, st_graph_format_name(in->format), hash, body->data,
                          body->len, now, (int64_t)body->coding);
    }
    if (st == CM_OK && *existed) {
        /* a name other than the row's: kept as an alias, once */
        st = st_sql_write(db, NULL, err,
                          "INSERT OR IGNORE INTO graph_aliases (graph_id, name, created_at) "
                          "SELECT ?1, ?2, ?3 WHERE NOT EXISTS "
                          "(SELECT 1 FROM graphs WHERE id = ?1 AND name = ?2)",
                          "iti", *id, in->name, now);
        if (st == CM_OK && aliased != NULL) {
            *aliased = sqlite3_changes(db->conn) > 0;
        }
    }
    return st;
}

cm_status st_graph_put_named(st_db *db, const st_graph_in *in, int64_t *id_out, bool *existed_out,
                             bool *aliased_out, cm_error *err)
{
    int64_t id = 0;
    bool existed = false;
    if (aliased_out != NULL) {
        *aliased_out = false;
    }
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (existed_out != NULL) {
        *existed_out = false;
    }
    char hash[ST_HASH_HEX_LEN + 1];
    cm_status st = st_graph_check_in(in, hash, err);
    if (st != CM_OK) {
        return st;
    }
    st_packed body;
    st_pack_body(db->pack, in->body, in->body_len, &body);
    st_db_lock(db);
    st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_graph_write(db, in, &body, hash, st_db_now(db), &id, &existed, aliased_out, err);
    }
    st = st_sql_put_done(db, st, id, existed, id_out, existed_out, err);
    st_packed_fini(&body);
    return st;
}

cm_status st_graph_get(st_db *db, int64_t id, st_graph *out, cm_error *err)
{
    return st_sql_get_id(db, &graph_rows, "graph", GRAPH_GET "id = ?1", id, out, err);
}

cm_status st_graph_get_by_hash(st_db *db, const char *hash, st_graph *out, cm_error *err)
{
    return st_sql_get_hash(db, &graph_rows, "graph", GRAPH_GET "hash = ?1", hash, out, err);
}

cm_status st_graph_list_query(st_db *db, const st_graph_query *q, st_graph_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK) {
        st = st_check_time_range(q->created_after, q->created_before, err);
    }
    if (st == CM_OK && q->has_format && q->format != ST_GRAPH_JSON && q->format != ST_GRAPH_MLIR) {
        st = cm_error_set(err, CM_EINVAL, "/format", "must be json or mlir");
    }
    if (st != CM_OK) {
        return st;
    }
    /* no filter has an index: with one, a page examines at most
     * ST_LIST_SCAN_ROWS rows (?6, the bound: a range on id, so that the walk
     * stops there; INT64_MAX without one; st_db.h, "Paging") */
    void *items = NULL;
    int64_t bound = 0;
    st_db_lock(db);
    if (q->name != NULL || q->has_format || q->created_after != 0 || q->created_before != 0) {
        st = st_sql_scan_bound(db, &bound, err,
                               "SELECT id FROM graphs WHERE id > ?1 ORDER BY id LIMIT 1 OFFSET ?2",
                               "i", q->after_id);
    }
    if (st == CM_OK) {
        st = st_sql_list(
            db, &graph_rows, limit, &items, &out->n_items, &out->next_after, err,
            "SELECT " GRAPH_COLS " FROM graphs WHERE id > ?1"
            " AND (?2 IS NULL OR name = ?2 OR EXISTS (SELECT 1 FROM graph_aliases"
            " WHERE graph_id = graphs.id AND name = ?2)) AND (?3 IS NULL OR format = ?3)"
            " AND (?4 = 0 OR created_at >= ?4) AND (?5 = 0 OR created_at < ?5)"
            " AND id <= ?6 ORDER BY id LIMIT ?7",
            "iTTiii", q->after_id, q->name, q->has_format ? st_graph_format_name(q->format) : NULL,
            q->created_after, q->created_before, bound > 0 ? bound : INT64_MAX);
    }
    if (st == CM_OK && out->next_after == 0) {
        out->next_after = bound; /* rows past the bound are left for the next page */
    }
    st_db_unlock(db);
    out->items = items;
    return st;
}

cm_status st_graph_delete(st_db *db, int64_t id, cm_error *err)
{
    return st_sql_delete_id(db, "graphs", "graph", id, err);
}
