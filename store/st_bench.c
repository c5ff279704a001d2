/* SPDX-License-Identifier: Apache-2.0
 * store: the bench_runs table (st_db.h, "benchmark runs"): benchmark runs
 * and their status transitions. */
#include <stddef.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

/* ---- benchmark runs ----------------------------------------------------------------------- */

static const char *const bench_names[] = {"queued", "running", "succeeded", "failed", "canceled"};
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

#define BENCH_COLS                                                                                 \
    "id, COALESCE(plan_id, 0), spec, status, progress, error, webhook_url, created_at, "           \
    "updated_at, length(results)"

/* Row: BENCH_COLS [, results]. */
static cm_status bench_row(sqlite3_stmt *s, void *item, bool with_results, cm_error *err)
{
    st_bench *b = item;
    b->id = (int64_t)sqlite3_column_int64(s, 0);
    b->plan_id = (int64_t)sqlite3_column_int64(s, 1);
    cm_status st = st_sql_col_dup(s, 2, &b->spec, &b->spec_len, err);
    const unsigned char *t = sqlite3_column_text(s, 3);
    if (st == CM_OK && (t == NULL || !st_bench_status_parse((const char *)t, &b->status))) {
        st = cm_error_set(err, CM_EINTERNAL, NULL, "benchmark run %lld has a bad status",
                          (long long)b->id);
    }
    b->progress = sqlite3_column_double(s, 4);
    if (st == CM_OK) {
        st = st_sql_col_dup(s, 5, &b->error, NULL, err);
    }
    if (st == CM_OK) {
        st = st_sql_col_dup(s, 6, &b->webhook_url, NULL, err);
    }
    b->created_at = (int64_t)sqlite3_column_int64(s, 7);
    b->updated_at = (int64_t)sqlite3_column_int64(s, 8);
    b->results_len = (size_t)sqlite3_column_int64(s, 9);
    if (st == CM_OK && with_results) {
        st = st_sql_col_dup(s, 10, &b->results, &b->results_len, err);
    }
    return st;
}

static const st_rows bench_rows = {sizeof(st_bench),
                                   bench_row,
                                   {offsetof(st_bench, spec), offsetof(st_bench, results),
                                    offsetof(st_bench, error), offsetof(st_bench, webhook_url)},
                                   4};

void st_bench_fini(st_bench *b)
{
    st_rows_fini(&bench_rows, b);
}

void st_bench_list_fini(st_bench_list *l)
{
    if (l != NULL) {
        st_rows_free(&bench_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
}

static bool is_web_url(const char *u)
{
    size_t n = strlen(u);
    if (n > 2048 || !st_clean_utf8((const unsigned char *)u, n) || strchr(u, ' ') != NULL) {
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
    st_db_lock(db);
    cm_status st = st_check_json(db, spec, spec_len, "/spec", err);
    if (st == CM_OK) {
        st = st_sql_begin(db, err);
    }
    if (st == CM_OK && plan_id != 0) {
        bool found = false;
        st = st_sql_row_exists(db, "plans", plan_id, &found, err);
        if (st == CM_OK && !found) {
            st = cm_error_set(err, CM_ENOTFOUND, "/plan_id", "no plan %lld", (long long)plan_id);
        }
    }
    if (st == CM_OK) {
        st = st_sql_write(db, &id, err,
                          "INSERT INTO bench_runs (plan_id, spec, status, progress, webhook_url, "
                          "created_at, updated_at) VALUES (?1, ?2, 'queued', 0, ?3, ?4, ?4)",
                          "IbTi", plan_id, spec, spec_len, webhook_url, st_db_now(db));
    }
    return st_sql_put_done(db, st, id, false, id_out, NULL, err);
}

cm_status st_bench_get(st_db *db, int64_t id, st_bench *out, cm_error *err)
{
    return st_sql_get_id(db, &bench_rows, "benchmark run",
                         "SELECT " BENCH_COLS ", results FROM bench_runs WHERE id = ?1", id, out,
                         err);
}

cm_status st_bench_list_query(st_db *db, const st_bench_query *q, st_bench_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st == CM_OK && q->has_status && (unsigned)q->status >= ST_BENCH_N_STATUS) {
        st = cm_error_set(err, CM_EINVAL, "/status", "unknown status");
    }
    if (st == CM_OK && q->plan_id < 0) {
        st = cm_error_set(err, CM_EINVAL, "/plan_id", "must not be negative");
    }
    if (st != CM_OK) {
        return st;
    }
    /* filters spelled only when given, so that SQLite walks bench_runs_status
     * or bench_runs_plan instead of every row after the cursor (as in
     * st_plan_list_query) */
#define BENCH_LIST(by_status, by_plan)                                                             \
    "SELECT " BENCH_COLS " FROM bench_runs WHERE id > ?1 AND " by_status " AND " by_plan           \
    " ORDER BY id LIMIT ?4"
    static const char *const sql[2][2] = {
        {BENCH_LIST("?2 IS NULL", "?3 = 0"), BENCH_LIST("?2 IS NULL", "plan_id = ?3")},
        {BENCH_LIST("status = ?2", "?3 = 0"), BENCH_LIST("status = ?2", "plan_id = ?3")},
    };
#undef BENCH_LIST
    void *items = NULL;
    st_db_lock(db);
    st = st_sql_list(db, &bench_rows, limit, &items, &out->n_items, &out->next_after, err,
                     sql[q->has_status][q->plan_id != 0], "iTi", q->after_id,
                     q->has_status ? st_bench_status_name(q->status) : NULL, q->plan_id);
    st_db_unlock(db);
    out->items = items;
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
    cm_status st = st_check_id(id, "/id", err);
    if (st != CM_OK) {
        return st;
    }
    if ((unsigned)u->status >= ST_BENCH_N_STATUS) {
        return cm_error_set(err, CM_EINVAL, "/status", "unknown status");
    }
    if (!(u->progress >= 0.0 && u->progress <= 1.0)) {
        return cm_error_set(err, CM_EINVAL, "/progress", "must be between 0 and 1");
    }
    st_db_lock(db);
    if (u->results != NULL) {
        st = st_check_json(db, u->results, u->results_len, "/results", err);
    }
    if (st == CM_OK) {
        st = st_sql_begin(db, err);
    }
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = st_sql_prepare(db, "SELECT status FROM bench_runs WHERE id = ?1", &s, err);
    }
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "i", id);
    }
    bool found = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &found, err);
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
    st_sql_release(db, s);
    if (st == CM_OK) {
        st = st_sql_write(db, NULL, err,
                          "UPDATE bench_runs SET status = ?2, progress = ?3,"
                          " results = CASE WHEN ?4 IS NULL THEN results ELSE ?4 END,"
                          " error = COALESCE(?5, error), updated_at = ?6 WHERE id = ?1",
                          "itdBTi", id, st_bench_status_name(u->status), u->progress, u->results,
                          u->results_len, u->error, st_db_now(db));
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    return st;
}

cm_status st_bench_claim(st_db *db, int64_t *id_out, cm_error *err)
{
    *id_out = 0;
    int64_t id = 0;
    st_db_lock(db);
    cm_status st = st_sql_begin(db, err);
    sqlite3_stmt *s = NULL;
    if (st == CM_OK) {
        st = st_sql_prepare(
            db, "SELECT id FROM bench_runs WHERE status = 'queued' ORDER BY id LIMIT 1", &s, err);
    }
    bool found = false;
    if (st == CM_OK) {
        st = st_sql_step(db, s, &found, err);
    }
    if (st == CM_OK && !found) {
        st = cm_error_set(err, CM_ENOTFOUND, NULL, "no queued benchmark run");
    }
    if (st == CM_OK) {
        id = (int64_t)sqlite3_column_int64(s, 0);
    }
    st_sql_release(db, s);
    if (st == CM_OK) {
        st = st_sql_write(db, NULL, err,
                          "UPDATE bench_runs SET status = 'running', updated_at = ?2 WHERE id = ?1",
                          "ii", id, st_db_now(db));
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    if (st == CM_OK) {
        *id_out = id;
    }
    return st;
}

cm_status st_bench_delete(st_db *db, int64_t id, cm_error *err)
{
    return st_sql_delete_id(db, "bench_runs", "benchmark run", id, err);
}
