/* SPDX-License-Identifier: Apache-2.0
 * store: the named JSON documents (st_db.h, "named documents"): meshes,
 * custom rules and device profiles, one table each with the same columns,
 * served by one set of functions parameterised by a doc_kind. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

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

#define DOC_COLS "id, name, created_at, updated_at, length(body)"

/* Row: DOC_COLS [, body]. */
static cm_status doc_row(sqlite3_stmt *s, void *item, bool with_body, cm_error *err)
{
    st_doc *d = item;
    d->id = (int64_t)sqlite3_column_int64(s, 0);
    cm_status st = st_sql_col_dup(s, 1, &d->name, NULL, err);
    d->created_at = (int64_t)sqlite3_column_int64(s, 2);
    d->updated_at = (int64_t)sqlite3_column_int64(s, 3);
    d->body_len = (size_t)sqlite3_column_int64(s, 4);
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 5, &d->body, &d->body_len, err);
    }
    return st;
}

static const st_rows doc_rows = {
    sizeof(st_doc), doc_row, {offsetof(st_doc, name), offsetof(st_doc, body)}, 2};

void st_doc_fini(st_doc *d)
{
    st_rows_fini(&doc_rows, d);
}

void st_doc_list_fini(st_doc_list *l)
{
    if (l != NULL) {
        st_rows_free(&doc_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
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
    cm_status st = st_check_name(name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    st = st_check_body(body, body_len, "/body", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[192];
    int64_t id = 0;
    bool existed = false;
    st_db_lock(db);
    st = st_check_json(db, body, body_len, "/body", err);
    if (st == CM_OK) {
        st = st_sql_begin(db, err);
    }
    sqlite3_stmt *s = NULL;
    bool same = false;
    if (st == CM_OK) {
        snprintf(sql, sizeof sql, "SELECT id, body = ?2 FROM %s WHERE name = ?1", k->table);
        st = st_sql_prepare(db, sql, &s, err);
    }
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "tb", name, body, body_len);
    }
    if (st == CM_OK) {
        st = st_sql_step(db, s, &existed, err);
    }
    if (st == CM_OK && existed) {
        id = (int64_t)sqlite3_column_int64(s, 0);
        same = sqlite3_column_int(s, 1) == 1;
    }
    st_sql_release(db, s);
    if (st == CM_OK && existed && !same && !replace) {
        st = cm_error_set(err, CM_ECONFLICT, "/name", "a %s named '%s' already exists", k->what,
                          name);
    }
    if (st == CM_OK && existed && !same) {
        snprintf(sql, sizeof sql, "UPDATE %s SET body = ?2, updated_at = ?3 WHERE id = ?1",
                 k->table);
        st = st_sql_write(db, NULL, err, sql, "ibi", id, body, body_len, st_db_now(db));
    } else if (st == CM_OK && !existed) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO %s (name, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
                 k->table);
        st = st_sql_write(db, &id, err, sql, "tbi", name, body, body_len, st_db_now(db));
    }
    return st_sql_put_done(db, st, id, existed, id_out, existed_out, err);
}

static cm_status doc_get(st_db *db, const doc_kind *k, const char *name, int64_t id, st_doc *out,
                         cm_error *err)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT " DOC_COLS ", body FROM %s WHERE %s = ?1", k->table,
             name != NULL ? "name" : "id");
    if (name == NULL) {
        return st_sql_get_id(db, &doc_rows, k->what, sql, id, out, err);
    }
    memset(out, 0, sizeof *out);
    cm_status st = st_check_name(name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    bool found = false;
    st_db_lock(db);
    st = st_sql_get(db, &doc_rows, out, &found, err, sql, "t", name);
    st_db_unlock(db);
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, "/name", "no %s named '%s'", k->what, name);
    }
    return st;
}

static cm_status doc_list(st_db *db, const doc_kind *k, const st_doc_query *q, st_doc_list *out,
                          cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st != CM_OK) {
        return st;
    }
    char sql[192];
    snprintf(sql, sizeof sql, "SELECT " DOC_COLS " FROM %s WHERE id > ?1 ORDER BY id LIMIT ?2",
             k->table);
    void *items = NULL;
    st_db_lock(db);
    st = st_sql_list(db, &doc_rows, limit, &items, &out->n_items, &out->next_after, err, sql, "i",
                     q->after_id);
    st_db_unlock(db);
    out->items = items;
    return st;
}

static cm_status doc_delete(st_db *db, const doc_kind *k, const char *name, cm_error *err)
{
    cm_status st = st_check_name(name, "/name", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE name = ?1", k->table);
    st_db_lock(db);
    st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_sql_write(db, NULL, err, sql, "t", name);
    }
    if (st == CM_OK && sqlite3_changes(db->conn) == 0) {
        st = cm_error_set(err, CM_ENOTFOUND, "/name", "no %s named '%s'", k->what, name);
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
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
