/* SPDX-License-Identifier: Apache-2.0
 * server: the handlers of the stored resources: health, readiness, metrics
 * and the OpenAPI document; graphs; the named documents (meshes, rules,
 * profiles); benchmark runs; API tokens. Each validates its input with the
 * planner's decoders, talks to the store through the request's handle and
 * replies through srv_reply.c. */
#include <stdio.h>
#include <string.h>

#include "cm_json.h"
#include "sp_graph_json.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_profile_json.h"
#include "srv_bench.h"
#include "srv_int.h"
#include "srv_json.h"

/* ---- health, metrics, openapi ---------------------------------------------------------------- */

void srv_h_healthz(srv_app *app, srv_req *r, route_args *a)
{
    (void)app;
    (void)a;
    static const char ok[] = "{\"status\":\"ok\"}\n";
    srv_req_reply(r, 200, "application/json", ok, sizeof ok - 1);
}

/* One quick_check on a fresh handle (no cached pages) into *out: CM_OK
 * when the file passed. Sets app->checking while it runs (under ready_mu)
 * so that srv_checker_stop can interrupt it. */
static void check_once(srv_app *app, cm_error *out)
{
    cm_error e;
    cm_error_clear(&e);
    st_db *fresh = NULL;
    if (st_db_open(app->cfg.db_path, &fresh, &e) == CM_OK) {
        pthread_mutex_lock(&app->ready_mu);
        app->checking = fresh;
        pthread_mutex_unlock(&app->ready_mu);
        (void)st_db_quick_check(fresh, &e);
        pthread_mutex_lock(&app->ready_mu);
        app->checking = NULL;
        pthread_mutex_unlock(&app->ready_mu);
    }
    st_db_close(fresh);
    atomic_fetch_add(&app->checks, 1);
    *out = e;
}

/* The checker thread: runs a quick_check each time /readyz finds the
 * verdict older than integrity_interval_s, outside any request (on a big
 * file a check reads it all: seconds, or a minute from a cold disk). */
static void *checker_main(void *arg)
{
    srv_app *app = arg;
    pthread_mutex_lock(&app->ready_mu);
    while (!app->check_stop) {
        if (!app->check_want) {
            pthread_cond_wait(&app->check_cv, &app->ready_mu);
            continue;
        }
        pthread_mutex_unlock(&app->ready_mu);
        cm_error e;
        check_once(app, &e);
        pthread_mutex_lock(&app->ready_mu);
        if (!app->check_stop) { /* an interrupted check says nothing */
            app->check_err = e;
            app->checked_at = cm_now();
            if (atomic_load(&app->start_check) == SRV_CHECK_RUNNING) {
                atomic_store(&app->start_check,
                             e.code == CM_OK ? SRV_CHECK_SOUND : SRV_CHECK_DAMAGED);
            }
        }
        app->check_want = false;
    }
    pthread_mutex_unlock(&app->ready_mu);
    return NULL;
}

void srv_checker_want(srv_app *app)
{
    if (app->check_want || app->check_stop) {
        return;
    }
    app->check_want = true;
    if (!app->checker_running) {
        app->checker_running = pthread_create(&app->checker, NULL, checker_main, app) == 0;
        app->check_want = app->checker_running;
    }
    pthread_cond_signal(&app->check_cv);
}

void srv_checker_stop(srv_app *app)
{
    pthread_mutex_lock(&app->ready_mu);
    bool running = app->checker_running;
    app->check_stop = true;
    if (app->checking != NULL) {
        st_db_interrupt(app->checking);
    }
    pthread_cond_signal(&app->check_cv);
    pthread_mutex_unlock(&app->ready_mu);
    if (running) {
        pthread_join(app->checker, NULL);
    }
    app->checker_running = false;
}

void srv_h_readyz(srv_app *app, srv_req *r, route_args *a)
{
    if (atomic_load(&app->start_check) == SRV_CHECK_RUNNING) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "store being checked at start (%lld MiB): ready once it passes",
                      (long long)app->start_check_mib);
        return;
    }
    if (app->cfg.integrity_interval_s <= 0 && srv_req_defer(r)) {
        return; /* a check on every call: on a handler thread */
    }
    int64_t v = 0;
    cm_error e;
    cm_error_clear(&e);
    if (st_db_schema_version(a->db, &v, &e) != CM_OK) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "store not ready: %s", e.msg);
        return;
    }
    /* can we still write (read-only file, full disk)? */
    if (st_db_probe_write(a->db, &e) != CM_OK) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "store not writable: %s", e.msg);
        return;
    }
    /* is the file sound? The verdict of the last quick_check: one older
     * than integrity_interval_s asks the checker thread for a new one and
     * is answered meanwhile (0: a check on every call, here). */
    cm_error ce;
    if (app->cfg.integrity_interval_s <= 0) {
        check_once(app, &ce);
    } else {
        pthread_mutex_lock(&app->ready_mu);
        if (cm_now() - app->checked_at >= app->cfg.integrity_interval_s) {
            srv_checker_want(app);
        }
        ce = app->check_err;
        pthread_mutex_unlock(&app->ready_mu);
    }
    if (ce.code != CM_OK) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "store %s: %s",
                      ce.code == CM_EINTERNAL ? "damaged" : "not writable", ce.msg);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    cm_json_put_kv_str(&b, "status", "ready");
    cm_json_put_kv_i64(&b, "schema_version", v);
    cm_buf_puts(&b, "}\n");
    srv_reply_buf(app, r, 200, &b);
}

void srv_h_metrics(srv_app *app, srv_req *r, route_args *a)
{
    (void)a;
    const char *names[SRV_METRIC_ROUTES];
    size_t n_routes = srv_routes_count();
    for (size_t i = 0; i <= n_routes; i++) {
        names[i] = srv_routes_name(i); /* the last: "unmatched" */
    }
    const char *errs[E_COUNT];
    for (size_t i = 0; i < E_COUNT; i++) {
        errs[i] = srv_err_code((srv_err)i);
    }
    atomic_store(&app->metrics.in_flight, app->http != NULL ? srv_http_in_flight(app->http) : 0);
    cm_buf b;
    cm_buf_init(&b);
    srv_metrics_write(&app->metrics, names, n_routes + 1, errs, E_COUNT, &b);
    uint64_t commits = 0, writes = 0;
    st_group_stats(app->db_group, &commits, &writes);
    cm_buf_printf(&b,
                  "# HELP shardplan_store_commits_total Transactions of the plan puts' group "
                  "commit.\n# TYPE shardplan_store_commits_total counter\n"
                  "shardplan_store_commits_total %llu\n"
                  "# HELP shardplan_store_writes_total Plan puts run in those transactions.\n"
                  "# TYPE shardplan_store_writes_total counter\n"
                  "shardplan_store_writes_total %llu\n"
                  "# HELP shardplan_store_checks_total Integrity checks (quick_check) run for "
                  "/readyz.\n# TYPE shardplan_store_checks_total counter\n"
                  "shardplan_store_checks_total %llu\n",
                  (unsigned long long)commits, (unsigned long long)writes,
                  (unsigned long long)atomic_load(&app->checks));
    int64_t bulk = 0, final = 0;
    for (size_t i = 0; i <= app->n_dbs; i++) {
        st_db *db = i < app->n_dbs ? app->dbs[i] : st_group_writer(app->db_group);
        int64_t b1 = 0, f1 = 0;
        if (db != NULL) {
            st_db_checkpoint_stats(db, &b1, &f1);
        }
        bulk += b1;
        final += f1;
    }
    cm_buf_printf(&b,
                  "# HELP shardplan_store_checkpoint_pages_total WAL pages checkpoints copied "
                  "into the file: beside the requests (bulk), or holding the writes while the "
                  "WAL restarts (final).\n"
                  "# TYPE shardplan_store_checkpoint_pages_total counter\n"
                  "shardplan_store_checkpoint_pages_total{step=\"bulk\"} %lld\n"
                  "shardplan_store_checkpoint_pages_total{step=\"final\"} %lld\n",
                  (long long)bulk, (long long) final);
    if (b.oom) {
        cm_buf_fini(&b);
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return;
    }
    size_t len = b.len;
    srv_req_reply_take(r, 200, "text/plain; version=0.0.4", cm_buf_take(&b), len);
}

void srv_h_openapi(srv_app *app, srv_req *r, route_args *a)
{
    (void)app;
    (void)a;
    srv_req_reply(r, 200, "application/json", srv_openapi_json, srv_openapi_json_len);
}

/* ---- graphs ------------------------------------------------------------------------------------ */

/* Validates a graph body: reads and verifies it with the input loader, as
 * planning it will (no propagation). *module_name gets the module's own name
 * (`module @jit_f`, in arena), or NULL. */
static cm_status validate_graph(const char *body, size_t len, body_kind k, cm_arena *arena,
                                const char **module_name, cm_error *err)
{
    (void)k; /* the loader tells JSON from MLIR the same way */
    *module_name = NULL;
    sp_input_opts o;
    sp_input_opts_init(&o);
    o.propagate = false;
    sp_input in;
    cm_status st = sp_input_read(body, len, &o, &in, err);
    if (st == CM_OK) {
        const char *nm = in.m != NULL ? in.m->sym_name : NULL;
        if (nm != NULL && nm[0] != '\0') {
            *module_name = cm_arena_strdup(arena, nm);
        }
        sp_input_fini(&in);
    }
    return st;
}

/* "aliases":["b","c"] from st_graph.aliases (one a line). */
static void aliases_json(cm_buf *b, const char *aliases)
{
    cm_json_put_key(b, "aliases");
    cm_buf_putc(b, '[');
    for (const char *p = aliases; p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (p != aliases) {
            cm_buf_putc(b, ',');
        }
        cm_json_put_str(b, p, n);
        p = nl != NULL ? nl + 1 : p + n;
    }
    cm_buf_putc(b, ']');
}

/* A graph's object without its closing brace, so a reply can add members. */
static void graph_json_open(cm_buf *b, const st_graph *g, bool with_body)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", g->id);
    cm_json_put_kv_str(b, "name", g->name);
    aliases_json(b, g->aliases);
    cm_json_put_kv_str(b, "format", st_graph_format_name(g->format));
    cm_json_put_kv_str(b, "hash", g->hash);
    cm_json_put_kv_i64(b, "size", (int64_t)g->body_len);
    cm_json_put_kv_i64(b, "created_at", g->created_at);
    if (with_body && g->body != NULL) {
        if (g->format == ST_GRAPH_JSON) {
            cm_json_put_key(b, "graph");
            cm_buf_append(b, g->body, g->body_len);
        } else {
            cm_json_put_key(b, "mlir");
            cm_json_put_str(b, g->body, g->body_len);
        }
    }
}

static void graph_json(cm_buf *b, const st_graph *g, bool with_body)
{
    graph_json_open(b, g, with_body);
    cm_buf_putc(b, '}');
}

void srv_h_graph_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    body_kind k;
    if (!srv_body_kind_of(app, r, true, &k)) {
        return;
    }
    if (len == 0) {
        srv_reply_err(app, r, E_INVALID, "", "empty body: send a graph document or MLIR text");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    const char *module_name = NULL;
    if ((k == BODY_JSON && srv_json_mesh_sizes_check(body, len, NULL, &e) != CM_OK) ||
        validate_graph(body, len, k, srv_req_arena(r), &module_name, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    /* named after what the user gave: ?name=, the document's name, the
     * module's `module @NAME`; else what it is */
    const char *name = srv_req_query(r, "name");
    if (name == NULL && k == BODY_JSON) {
        name = srv_json_get_name(body, len, srv_req_arena(r));
    }
    if (name == NULL || name[0] == '\0') {
        name = module_name;
    }
    st_graph_in in = {name != NULL ? name : (k == BODY_JSON ? "graph" : "module"),
                      k == BODY_JSON ? ST_GRAPH_JSON : ST_GRAPH_MLIR, body, len, NULL};
    int64_t id = 0;
    bool existed = false, aliased = false;
    if (st_graph_put_named(a->db, &in, &id, &existed, &aliased, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    st_graph g;
    memset(&g, 0, sizeof g);
    if (st_graph_get(a->db, id, &g, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    graph_json_open(&b, &g, false);
    if (existed) {
        /* the reply says what became of the name it came under */
        cm_buf msg;
        cm_buf_init(&msg);
        if (aliased) {
            cm_buf_printf(&msg,
                          "this content is already stored as graph %lld \"%s\"; \"%s\" is "
                          "recorded as another name of it",
                          (long long)g.id, g.name, in.name);
        } else if (strcmp(g.name, in.name) != 0) {
            cm_buf_printf(&msg,
                          "this content is already stored as graph %lld \"%s\", which has the "
                          "name \"%s\" already",
                          (long long)g.id, g.name, in.name);
        } else {
            cm_buf_printf(&msg, "this content is already stored as graph %lld", (long long)g.id);
        }
        cm_json_put_kv_bool(&b, "existed", true);
        if (aliased) {
            cm_json_put_kv_str(&b, "alias_recorded", in.name);
        }
        cm_json_put_key(&b, "message");
        cm_json_put_str(&b, msg.data != NULL ? msg.data : "", msg.len);
        b.oom = b.oom || msg.oom;
        cm_buf_fini(&msg);
    }
    cm_buf_puts(&b, "}\n");
    st_graph_fini(&g);
    srv_set_location(r, "graphs", id);
    srv_reply_buf(app, r, existed ? 200 : 201, &b);
}

static void graph_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    graph_json(b, item, false);
}

void srv_h_graph_list(srv_app *app, srv_req *r, route_args *a)
{
    st_graph_query q;
    st_graph_query_init(&q);
    if (!srv_query_paging(app, r, &q.limit, &q.after_id) ||
        !srv_query_i64(app, r, "created_after", 0, &q.created_after) ||
        !srv_query_i64(app, r, "created_before", 0, &q.created_before)) {
        return;
    }
    q.name = srv_req_query(r, "name");
    const char *fmt = srv_req_query(r, "format");
    if (fmt != NULL) {
        if (!st_graph_format_parse(fmt, &q.format)) {
            srv_reply_err(app, r, E_INVALID, "/format", "format must be json or mlir");
            return;
        }
        q.has_format = true;
    }
    st_graph_list l;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_graph_list_query(a->db, &q, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, graph_item, NULL);
    st_graph_list_fini(&l);
}

void srv_h_graph_get(srv_app *app, srv_req *r, route_args *a)
{
    st_graph g;
    memset(&g, 0, sizeof g);
    cm_error e;
    cm_error_clear(&e);
    if (st_graph_get(a->db, a->id, &g, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    const char *raw = srv_req_query(r, "raw");
    cm_buf b;
    cm_buf_init(&b);
    if (raw != NULL && strcmp(raw, "0") != 0) {
        cm_buf_append(&b, g.body, g.body_len);
        size_t len = b.len;
        /* the type before st_graph_fini clears g */
        const char *ctype = g.format == ST_GRAPH_JSON ? "application/json" : "text/plain";
        st_graph_fini(&g);
        srv_req_reply_take(r, 200, ctype, cm_buf_take(&b), len);
        return;
    }
    graph_json(&b, &g, true);
    cm_buf_putc(&b, '\n');
    st_graph_fini(&g);
    srv_reply_buf(app, r, 200, &b);
}

void srv_h_graph_delete(srv_app *app, srv_req *r, route_args *a)
{
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_graph_delete(a->db, a->id, &e);
    if (st == CM_OK) {
        srv_cache_clear(app); /* its plans went by cascade: forget every cached plan */
    }
    srv_reply_empty(app, r, st, &e);
}

/* ---- named documents: meshes, rules, profiles --------------------------------------------------- */

/* Which collection a document route serves: its row's data (srv_routes.c). */
static doc_kind doc_kind_of(const route_args *a)
{
    return *(const doc_kind *)a->data;
}

/* The store's calls for each collection (st_db.h, "named documents"). */
static const struct {
    cm_status (*put)(st_db *db, const char *name, const char *body, size_t body_len, bool replace,
                     int64_t *id_out, bool *existed_out, cm_error *err);
    cm_status (*get)(st_db *db, const char *name, st_doc *out, cm_error *err);
    cm_status (*list)(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err);
    cm_status (*del)(st_db *db, const char *name, cm_error *err);
} doc_store[] = {
    [DOC_MESH] = {st_mesh_put, st_mesh_get, st_mesh_list, st_mesh_delete},
    [DOC_RULE] = {st_rule_put, st_rule_get, st_rule_list, st_rule_delete},
    [DOC_PROFILE] = {st_profile_put, st_profile_get, st_profile_list, st_profile_delete},
};

/* Validates a mesh, rule or profile body with the planner's own decoders;
 * paths are made relative to the body. */
static cm_status validate_doc(doc_kind k, const char *name, const char *body, size_t len,
                              cm_error *err)
{
    if (k == DOC_MESH && !srv_json_mesh_name_ok(name)) {
        return cm_error_set(err, CM_EINVAL, "/name",
                            "mesh name '%.100s' is not an MLIR identifier "
                            "([A-Za-z_][A-Za-z0-9_$.]*): plans on it would not read back",
                            name);
    }
    cm_status st = srv_json_check(body, len, k != DOC_RULE, err);
    if (st != CM_OK) {
        return st;
    }
    if (k == DOC_PROFILE) {
        sp_profile p;
        return sp_profile_decode(body, len, &p, err);
    }
    cm_buf doc;
    cm_buf_init(&doc);
    srv_named_doc rule = {name, body, len};
    st = k == DOC_MESH ? srv_json_mesh_graph(name, body, len, &doc, err)
                       : srv_json_rules_graph(&rule, 1, &doc, err);
    if (st == CM_OK) {
        cm_error e;
        cm_error_clear(&e);
        sp_graph *g = NULL;
        st = sp_graph_decode(doc.data, doc.len, NULL, &g, &e);
        sp_graph_destroy(g);
        if (st != CM_OK) {
            /* "/meshes/0/axes/1" -> "/axes/1"; "/custom_rules/NAME/x" -> "/x" */
            const char *p = e.path;
            size_t skip = 0;
            if (k == DOC_MESH && strncmp(p, "/meshes/0", 9) == 0) {
                skip = 9;
            } else if (k == DOC_RULE && strncmp(p, "/custom_rules/", 14) == 0) {
                const char *slash = strchr(p + 14, '/');
                skip = slash != NULL ? (size_t)(slash - p) : strlen(p);
            }
            st = cm_error_set(err, e.code, p + skip, "%s", e.msg);
        }
    }
    cm_buf_fini(&doc);
    return st;
}

static void doc_json(cm_buf *b, const st_doc *d, doc_kind k, bool with_body)
{
    static const char *const body_key[] = {"mesh", "rule", "profile"};
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", d->id);
    cm_json_put_kv_str(b, "name", d->name);
    cm_json_put_kv_i64(b, "created_at", d->created_at);
    cm_json_put_kv_i64(b, "updated_at", d->updated_at);
    if (with_body && d->body != NULL) {
        cm_json_put_key(b, body_key[k]);
        cm_buf_append(b, d->body, d->body_len);
    }
    cm_buf_putc(b, '}');
}

/* Replies status with the stored document the route names, body included. */
static void reply_doc(srv_app *app, srv_req *r, const route_args *a, unsigned status)
{
    doc_kind k = doc_kind_of(a);
    st_doc d;
    cm_error e;
    cm_error_clear(&e);
    if (doc_store[k].get(a->db, a->seg[0], &d, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    doc_json(&b, &d, k, true);
    cm_buf_putc(&b, '\n');
    st_doc_fini(&d);
    srv_reply_buf(app, r, status, &b);
}

void srv_h_doc_put(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(a);
    size_t len;
    const char *body = srv_body_json(app, r, &len);
    if (body == NULL) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (k == DOC_MESH && len > SRV_MESH_MAX_BYTES) {
        srv_reply_err(app, r, E_TOO_LARGE, NULL,
                      "a mesh is at most %zu bytes (64 axes); this one is %zu", SRV_MESH_MAX_BYTES,
                      len);
        return;
    }
    if (validate_doc(k, a->seg[0], body, len, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    int64_t id = 0;
    bool existed = false;
    /* If-None-Match: * asks for create-only: a different stored body is 409 */
    const char *inm = srv_req_header(r, "If-None-Match");
    bool replace = inm == NULL || strcmp(inm, "*") != 0;
    if (doc_store[k].put(a->db, a->seg[0], body, len, replace, &id, &existed, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    if (k != DOC_PROFILE) {
        atomic_fetch_add(&app->generation, 1); /* plans of raw requests may change */
    }
    reply_doc(app, r, a, existed ? 200 : 201);
}

void srv_h_doc_get(srv_app *app, srv_req *r, route_args *a)
{
    reply_doc(app, r, a, 200);
}

static void doc_item(cm_buf *b, const void *item, const void *ctx)
{
    doc_json(b, item, *(const doc_kind *)ctx, false);
}

void srv_h_doc_list(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(a);
    st_doc_query q;
    st_doc_query_init(&q);
    if (!srv_query_paging(app, r, &q.limit, &q.after_id)) {
        return;
    }
    st_doc_list l;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = doc_store[k].list(a->db, &q, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, doc_item, &k);
    st_doc_list_fini(&l);
}

void srv_h_doc_delete(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(a);
    cm_error e;
    cm_error_clear(&e);
    cm_status st = doc_store[k].del(a->db, a->seg[0], &e);
    if (st == CM_OK && k != DOC_PROFILE) {
        atomic_fetch_add(&app->generation, 1);
    }
    srv_reply_empty(app, r, st, &e);
}

/* ---- benchmark runs ------------------------------------------------------------------------------------ */

static void run_json(cm_buf *b, const st_bench *x, bool full)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", x->id);
    cm_json_put_kv_i64(b, "plan_id", x->plan_id);
    cm_json_put_kv_str(b, "status", st_bench_status_name(x->status));
    cm_json_put_key(b, "progress");
    cm_json_put_g(b, x->progress, 4);
    cm_json_put_key(b, "spec");
    if (x->spec != NULL) {
        cm_buf_append(b, x->spec, x->spec_len);
    } else {
        cm_buf_puts(b, "{}");
    }
    if (full) {
        cm_json_put_key(b, "results");
        if (x->results != NULL) {
            cm_buf_append(b, x->results, x->results_len);
        } else {
            cm_json_put_null(b);
        }
        cm_json_put_kv_str(b, "error", x->error);
    }
    if (x->webhook_url != NULL) {
        cm_json_put_kv_str(b, "webhook_url", x->webhook_url);
    }
    cm_json_put_kv_i64(b, "created_at", x->created_at);
    cm_json_put_kv_i64(b, "updated_at", x->updated_at);
    cm_buf_putc(b, '}');
}

/* Replies status with stored run id in full; with a Location in collection
 * coll unless coll is NULL. */
static void reply_run(srv_app *app, srv_req *r, st_db *db, int64_t id, unsigned status,
                      const char *coll)
{
    st_bench x;
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_get(db, id, &x, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    run_json(&b, &x, true);
    cm_buf_putc(&b, '\n');
    st_bench_fini(&x);
    if (coll != NULL) {
        srv_set_location(r, coll, id);
    }
    srv_reply_buf(app, r, status, &b);
}

/* Stores a decoded run request queued and answers it with the run. */
/* Stores the run and replies; returns its id, 0 when an error was replied. */
static int64_t run_create(srv_app *app, srv_req *r, route_args *a, const srv_run_req *rq,
                          const char *coll, unsigned status)
{
    cm_error e;
    cm_error_clear(&e);
    if (rq->webhook_url != NULL &&
        srv_bench_webhook_check(rq->webhook_url, "/webhook_url", &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return 0;
    }
    int64_t id = 0;
    if (st_bench_create(a->db, rq->plan_id, rq->spec, rq->spec_len, rq->webhook_url, &id, &e) !=
        CM_OK) {
        srv_reply_cm(app, r, &e);
        return 0;
    }
    reply_run(app, r, a->db, id, status, coll);
    srv_bench_kick(app); /* after the read: the answer shows the run queued */
    return id;
}

void srv_h_run_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_body_json(app, r, &len);
    if (body == NULL) {
        return;
    }
    srv_run_req rq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_run_req_decode(body, len, srv_req_arena(r), &rq, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    (void)run_create(app, r, a, &rq, "runs", 201);
}

/* POST /v1/benchmarks with an Idempotency-Key: a retry (the same key from
 * the same principal, with the same body) answers the run the first request
 * queued instead of queueing another; the same key with another body is a
 * 409. Keys are remembered in memory (SRV_IDEM_SLOTS of them, until the
 * server restarts). The lock is held over the run's creation, so two
 * concurrent retries queue one run. */
static void bench_post_idem(srv_app *app, srv_req *r, route_args *a, const srv_run_req *rq,
                            const char *ikey, const char *body, size_t len)
{
    uint8_t key[CM_SHA256_LEN], bh[CM_SHA256_LEN];
    cm_sha256 c;
    cm_sha256_init(&c);
    const char *who = srv_req_principal(r);
    if (who != NULL) {
        cm_sha256_update(&c, who, strlen(who));
    }
    cm_sha256_update(&c, "\n", 1);
    cm_sha256_update(&c, ikey, strlen(ikey));
    cm_sha256_final(&c, key);
    cm_sha256_init(&c);
    cm_sha256_update(&c, body, len);
    cm_sha256_final(&c, bh);
    pthread_mutex_lock(&app->idem_mu);
    for (size_t i = 0; i < SRV_IDEM_SLOTS; i++) {
        struct srv_idem_slot *s = &app->idem[i];
        if (s->id == 0 || memcmp(s->key, key, sizeof key) != 0) {
            continue;
        }
        int64_t id = s->id;
        bool same = memcmp(s->body, bh, sizeof bh) == 0;
        pthread_mutex_unlock(&app->idem_mu);
        if (!same) {
            srv_reply_err(app, r, E_CONFLICT, NULL,
                          "Idempotency-Key '%.64s' was used for another request (run %lld)", ikey,
                          (long long)id);
        } else {
            srv_req_add_header(r, "Idempotent-Replayed", "true");
            reply_run(app, r, a->db, id, 202, "benchmarks");
        }
        return;
    }
    int64_t id = run_create(app, r, a, rq, "benchmarks", 202);
    if (id != 0) {
        struct srv_idem_slot *s = &app->idem[app->idem_next];
        app->idem_next = (app->idem_next + 1) % SRV_IDEM_SLOTS;
        memcpy(s->key, key, sizeof key);
        memcpy(s->body, bh, sizeof bh);
        s->id = id;
    }
    pthread_mutex_unlock(&app->idem_mu);
}

/* POST /v1/benchmarks: the flat form, answered 202 (queued). */
void srv_h_bench_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_body_json(app, r, &len);
    if (body == NULL) {
        return;
    }
    srv_run_req rq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_bench_req_decode(body, len, srv_req_arena(r), app->cfg.bench_test_faults, &rq,
                                  &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    const char *ikey = srv_req_header(r, "Idempotency-Key");
    if (ikey == NULL) {
        (void)run_create(app, r, a, &rq, "benchmarks", 202);
    } else if (ikey[0] == '\0' || strlen(ikey) > 255) {
        srv_reply_err(app, r, E_INVALID, NULL, "Idempotency-Key must be 1 to 255 bytes");
    } else {
        bench_post_idem(app, r, a, &rq, ikey, body, len);
    }
}

static void run_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    run_json(b, item, false);
}

void srv_h_run_list(srv_app *app, srv_req *r, route_args *a)
{
    st_bench_query q;
    st_bench_query_init(&q);
    if (!srv_query_paging(app, r, &q.limit, &q.after_id) ||
        !srv_query_i64(app, r, "plan_id", 1, &q.plan_id)) {
        return;
    }
    const char *status = srv_req_query(r, "status");
    if (status != NULL) {
        if (strcmp(status, "done") == 0) {
            q.status = ST_BENCH_SUCCEEDED; /* the store's name before schema 4 */
        } else if (!st_bench_status_parse(status, &q.status)) {
            srv_reply_err(app, r, E_INVALID, "/status",
                          "status must be queued, running, succeeded, "
                          "failed or canceled");
            return;
        }
        q.has_status = true;
    }
    st_bench_list l;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_bench_list_query(a->db, &q, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, run_item, NULL);
    st_bench_list_fini(&l);
}

void srv_h_run_get(srv_app *app, srv_req *r, route_args *a)
{
    reply_run(app, r, a->db, a->id, 200, NULL);
}

/* Kills the worker of run id if this server is executing it, and waits
 * (bounded) until the supervisor has stored the run final. */
static void run_stop(srv_app *app, int64_t id)
{
    srv_bench_cancel(app, id, 5.0);
}

/* POST /v1/benchmarks/{id}/cancel: the run is stored canceled, then its
 * worker, if one is running, is killed; a final run is a conflict. */
void srv_h_bench_cancel(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id = a->id;
    cm_error e;
    cm_error_clear(&e);
    st_bench_update u = {ST_BENCH_CANCELED, 0, NULL, 0, "canceled by request"};
    st_bench x;
    memset(&x, 0, sizeof x);
    cm_status st = st_bench_get(a->db, id, &x, &e);
    if (st == CM_OK) {
        u.progress = x.progress;
        if (x.status != ST_BENCH_QUEUED && x.status != ST_BENCH_RUNNING) {
            st = cm_error_set(&e, CM_ECONFLICT, "/status",
                              "benchmark run %lld has %s; only queued or running runs can be "
                              "canceled",
                              (long long)id, st_bench_status_name(x.status));
        }
        st_bench_fini(&x);
    }
    if (st == CM_OK) {
        st = st_bench_set(a->db, id, &u, &e);
    }
    if (st != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    run_stop(app, id);
    reply_run(app, r, a->db, id, 200, NULL);
}

void srv_h_run_delete(srv_app *app, srv_req *r, route_args *a)
{
    run_stop(app, a->id); /* a running run's worker is killed first */
    cm_error e;
    cm_error_clear(&e);
    srv_reply_empty(app, r, st_bench_delete(a->db, a->id, &e), &e);
}

/* ---- tokens ------------------------------------------------------------------------------------------- */

static void token_json(cm_buf *b, const st_token *t)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", t->id);
    cm_json_put_kv_str(b, "prefix", t->prefix);
    cm_json_put_kv_str(b, "scope", st_scope_name(t->scope));
    cm_json_put_kv_str(b, "label", t->label != NULL ? t->label : "");
    cm_json_put_kv_i64(b, "created_at", t->created_at);
    cm_buf_putc(b, '}');
}

void srv_h_token_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_body_json(app, r, &len);
    if (body == NULL) {
        return;
    }
    srv_token_req tq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_token_req_decode(body, len, srv_req_arena(r), &tq, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    st_scope scope;
    if (!st_scope_parse(tq.scope, &scope)) {
        srv_reply_err(app, r, E_INVALID, "/scope", "scope must be read, write or admin");
        return;
    }
    char tok[ST_TOKEN_LEN + 1];
    int64_t id = 0;
    if (st_token_create(a->db, scope, tq.label, tok, &id, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    cm_json_put_kv_i64(&b, "id", id);
    cm_json_put_kv_str(&b, "token", tok);
    cm_json_put_kv_str(&b, "scope", st_scope_name(scope));
    cm_json_put_kv_str(&b, "label", tq.label != NULL ? tq.label : "");
    cm_buf_puts(&b, "}\n");
    srv_set_location(r, "tokens", id);
    srv_reply_buf(app, r, 201, &b);
}

static void token_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    token_json(b, item);
}

void srv_h_token_list(srv_app *app, srv_req *r, route_args *a)
{
    st_token_query q;
    st_token_query_init(&q);
    if (!srv_query_paging(app, r, &q.limit, &q.after_id)) {
        return;
    }
    st_token_list l;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_token_list_query(a->db, &q, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, token_item, NULL);
    st_token_list_fini(&l);
}

void srv_h_token_delete(srv_app *app, srv_req *r, route_args *a)
{
    cm_error e;
    cm_error_clear(&e);
    srv_reply_empty(app, r, st_token_delete(a->db, a->id, &e), &e);
}
