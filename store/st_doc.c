/* SPDX-License-Identifier: Apache-2.0
 * store: the named JSON documents (st_db.h, "named documents"): meshes,
 * custom rules and device profiles, one table each with the same columns,
 * served by one set of functions parameterised by a doc_kind. */
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
    cm_status st = st_sql_col_dup(s, 1, &d->name, NULL, err);
    d->created_at = (int64_t)sqlite3_column_int64(s, 2);
    d->updated_at = (int64_t)sqlite3_column_int64(s, 3);
    d->body_len = (size_t)sqlite3_column_int64(s, 4);
    if (st == CM_OK && with_body) {
        st = st_sql_col_dup(s, 5, &d->body, &d->body_len, err);
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
        st = st_sql_prepare(db, sql, &s, err);
        if (st == CM_OK) {
            int64_t now = st_db_now(db);
            st = existed ? st_sql_bind(db, s, err, "ibi", id, body, body_len, now)
                         : st_sql_bind(db, s, err, "tbi", name, body, body_len, now);
        }
        if (st == CM_OK) {
            st = st_sql_step_done(db, s, err);
        }
        sqlite3_finalize(s);
        if (!existed) {
            id = (int64_t)sqlite3_last_insert_rowid(db->conn);
        }
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

static cm_status doc_get(st_db *db, const doc_kind *k, const char *name, int64_t id, st_doc *out,
                         cm_error *err)
{
    memset(out, 0, sizeof *out);
    cm_status st = name != NULL ? st_check_name(name, "/name", err) : st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT id, name, created_at, updated_at, length(body), body FROM %s WHERE %s = ?1",
             k->table, name != NULL ? "name" : "id");
    st_db_lock(db);
    sqlite3_stmt *s = NULL;
    st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = name != NULL ? st_sql_bind(db, s, err, "t", name) : st_sql_bind(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &found, err);
    }
    if (st == CM_OK && found) {
        st = doc_row(s, out, true, err);
        if (st != CM_OK) {
            st_doc_fini(out);
        }
    }
    sqlite3_finalize(s);
    st_db_unlock(db);
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
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st != CM_OK) {
        return st;
    }
    char sql[192];
    snprintf(sql, sizeof sql,
             "SELECT id, name, created_at, updated_at, length(body) FROM %s WHERE id > ?1 "
             "ORDER BY id LIMIT ?2",
             k->table);
    st_db_lock(db);
    sqlite3_stmt *s = NULL;
    st = st_sql_prepare(db, sql, &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "ii", q->after_id, (int64_t)limit + 1);
    }
    if (st == CM_OK) {
        void *items;
        st = st_sql_run_list(db, s, limit, sizeof(st_doc), doc_list_row, doc_fini_v, &items,
                             &out->n_items, &out->next_after, err);
        out->items = items;
    }
    sqlite3_finalize(s);
    st_db_unlock(db);
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
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = st_sql_prepare(db, sql, &s, err);
    }
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "t", name);
    }
    if (st == CM_OK) {
        st = st_sql_step_done(db, s, err);
    }
    if (st == CM_OK && sqlite3_changes(db->conn) == 0) {
        st = cm_error_set(err, CM_ENOTFOUND, "/name", "no %s named '%s'", k->what, name);
    }
    sqlite3_finalize(s);
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
