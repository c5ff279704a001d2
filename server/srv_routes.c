/* SPDX-License-Identifier: Apache-2.0
 * server: the route table, the auth check, the one status -> HTTP error table
 * and the handlers of the /v1 API (docs/api.md, server/openapi.json).
 * Handlers borrow a store handle from the app's pool for the request, keep
 * request-lived data in the request arena and always reply, with an error
 * document {"error":{"code","message","path"}} when something fails: bad
 * client data gives 4xx with a path, our own data 500 without one. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sp_compare.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_plan_json.h"
#include "sp_advise.h"
#include "sp_profile_json.h"
#include "srv_bench.h"
#include "srv_int.h"
#include "srv_json.h"
#include "srv_web.h"
#include "sp_mlir.h"

/* ---- errors ------------------------------------------------------------------------------ */

typedef enum srv_err {
    E_INVALID = 0,
    E_UNAUTHORIZED,
    E_FORBIDDEN,
    E_NOT_FOUND,
    E_METHOD,
    E_CONFLICT,
    E_TOO_LARGE,
    E_MEDIA,
    E_INTERNAL,
    E_UNAVAILABLE,
    E_TIMEOUT,
    E_NOMEM,
    E_COUNT
} srv_err;

/* The one table from error to HTTP status (STYLE.md). */
static const struct {
    const char *code;
    unsigned http;
} err_table[E_COUNT] = {
    [E_INVALID] = {"invalid", 400},
    [E_UNAUTHORIZED] = {"unauthorized", 401},
    [E_FORBIDDEN] = {"forbidden", 403},
    [E_NOT_FOUND] = {"not_found", 404},
    [E_METHOD] = {"method_not_allowed", 405},
    [E_CONFLICT] = {"conflict", 409},
    [E_TOO_LARGE] = {"too_large", 413},
    [E_MEDIA] = {"unsupported_media_type", 415},
    [E_INTERNAL] = {"internal", 500},
    [E_UNAVAILABLE] = {"unavailable", 503},
    [E_TIMEOUT] = {"timeout", 503},
    [E_NOMEM] = {"out_of_memory", 503},
};

static srv_err err_of_status(cm_status st)
{
    switch (st) {
    case CM_EINVAL:
        return E_INVALID;
    case CM_ENOTFOUND:
        return E_NOT_FOUND;
    case CM_ECONFLICT:
        return E_CONFLICT;
    case CM_ENOMEM:
        return E_NOMEM;
    case CM_EIO:
        return E_UNAVAILABLE;
    case CM_OK:
    case CM_EINTERNAL:
        break;
    }
    return E_INTERNAL;
}

static void reply_err(srv_app *app, srv_req *r, srv_err e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void reply_err(srv_app *app, srv_req *r, srv_err e, const char *path, const char *fmt, ...)
{
    char msg[CM_ERROR_MSG_LEN + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"error\":{\"code\":\"");
    cm_buf_puts(&b, err_table[e].code);
    cm_buf_puts(&b, "\",\"message\":");
    srv_json_put_str(&b, msg);
    cm_buf_puts(&b, ",\"path\":");
    srv_json_put_str(&b, e == E_INTERNAL || path == NULL ? "" : path);
    cm_buf_puts(&b, "}}\n");
    srv_req_set_error_code(r, err_table[e].code);
    atomic_fetch_add(&app->metrics.errors[e], 1);
    if (e == E_UNAUTHORIZED) {
        srv_req_add_header(r, "WWW-Authenticate", "Bearer realm=\"shardplan\"");
    }
    if (e == E_UNAVAILABLE || e == E_TIMEOUT || e == E_NOMEM) {
        srv_req_add_header(r, "Retry-After", "1");
    }
    size_t len = b.len;
    char *data = cm_buf_take(&b);
    if (data == NULL) {
        static const char oom[] =
            "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\",\"path\":\"\"}}\n";
        srv_req_reply(r, 503, "application/json", oom, sizeof oom - 1);
        return;
    }
    srv_req_reply_take(r, err_table[e].http, "application/json", data, len);
}

static void reply_cm(srv_app *app, srv_req *r, const cm_error *e)
{
    srv_err x = err_of_status(e->code);
    reply_err(app, r, x, e->path, "%s", e->msg[0] != '\0' ? e->msg : cm_status_name(e->code));
}

/* Replies with buffer b (taken) as JSON. */
static void reply_buf(srv_app *app, srv_req *r, unsigned status, cm_buf *b)
{
    if (b->oom) {
        cm_buf_fini(b);
        reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return;
    }
    size_t len = b->len;
    char *data = cm_buf_take(b);
    if (data == NULL) {
        srv_req_reply(r, status, "application/json", "{}\n", 3);
        return;
    }
    srv_req_reply_take(r, status, "application/json", data, len);
}

/* ---- routes ---------------------------------------------------------------------------------- */

#define MAX_ARGS 2

typedef struct route_args {
    const char *seg[MAX_ARGS]; /* path segments matched by {} (arena copies) */
    st_db *db;                 /* borrowed from the pool for the request */
} route_args;

typedef void (*route_fn)(srv_app *app, srv_req *r, route_args *a);

typedef struct route {
    const char *method;
    const char *pattern; /* segments; "{}" matches one */
    route_fn fn;
    int scope; /* 0: open, else the st_scope needed when auth is on */
    bool needs_db;
    const char *name; /* metrics and log label */
} route;

#define R_OPEN  0
#define R_READ  ST_SCOPE_READ
#define R_WRITE ST_SCOPE_WRITE
#define R_ADMIN ST_SCOPE_ADMIN

static void h_healthz(srv_app *, srv_req *, route_args *);
static void h_readyz(srv_app *, srv_req *, route_args *);
static void h_metrics(srv_app *, srv_req *, route_args *);
static void h_openapi(srv_app *, srv_req *, route_args *);
static void h_graph_post(srv_app *, srv_req *, route_args *);
static void h_graph_list(srv_app *, srv_req *, route_args *);
static void h_graph_get(srv_app *, srv_req *, route_args *);
static void h_graph_delete(srv_app *, srv_req *, route_args *);
static void h_doc_put(srv_app *, srv_req *, route_args *);
static void h_doc_list(srv_app *, srv_req *, route_args *);
static void h_doc_get(srv_app *, srv_req *, route_args *);
static void h_doc_delete(srv_app *, srv_req *, route_args *);
static void h_plan_post(srv_app *, srv_req *, route_args *);
static bool plan_create(srv_app *, srv_req *, route_args *, const srv_plan_req *, double,
                        int64_t *, bool *);
static void h_plan_list(srv_app *, srv_req *, route_args *);
static void h_plan_get(srv_app *, srv_req *, route_args *);
static void h_plan_delete(srv_app *, srv_req *, route_args *);
static void h_compare(srv_app *, srv_req *, route_args *);
static void h_plan_advise(srv_app *, srv_req *, route_args *);
static void h_plan_whatif(srv_app *, srv_req *, route_args *);
static void h_plan_suggest(srv_app *, srv_req *, route_args *);
static bool named_profile(srv_app *, srv_req *, route_args *, const char *, sp_profile *, bool *);
static void h_sweep(srv_app *, srv_req *, route_args *);
static bool query_profile(srv_app *, srv_req *, route_args *, sp_profile *, bool *);
static void h_run_post(srv_app *, srv_req *, route_args *);
static void h_bench_post(srv_app *, srv_req *, route_args *);
static void h_run_list(srv_app *, srv_req *, route_args *);
static void h_run_get(srv_app *, srv_req *, route_args *);
static void h_run_delete(srv_app *, srv_req *, route_args *);
static void h_bench_cancel(srv_app *, srv_req *, route_args *);
static void h_token_post(srv_app *, srv_req *, route_args *);
static void h_token_list(srv_app *, srv_req *, route_args *);
static void h_token_delete(srv_app *, srv_req *, route_args *);

static const route routes[] = {
    {"GET", "/healthz", h_healthz, R_OPEN, false, "healthz"},
    {"GET", "/readyz", h_readyz, R_OPEN, true, "readyz"},
    {"GET", "/metrics", h_metrics, R_READ, false, "metrics"},
    {"GET", "/v1/openapi.json", h_openapi, R_OPEN, false, "openapi"},
    {"POST", "/v1/graphs", h_graph_post, R_WRITE, true, "graphs.create"},
    {"GET", "/v1/graphs", h_graph_list, R_READ, true, "graphs.list"},
    {"GET", "/v1/graphs/{}", h_graph_get, R_READ, true, "graphs.get"},
    {"DELETE", "/v1/graphs/{}", h_graph_delete, R_WRITE, true, "graphs.delete"},
    {"PUT", "/v1/meshes/{}", h_doc_put, R_WRITE, true, "meshes.put"},
    {"GET", "/v1/meshes", h_doc_list, R_READ, true, "meshes.list"},
    {"GET", "/v1/meshes/{}", h_doc_get, R_READ, true, "meshes.get"},
    {"DELETE", "/v1/meshes/{}", h_doc_delete, R_WRITE, true, "meshes.delete"},
    {"PUT", "/v1/rules/{}", h_doc_put, R_WRITE, true, "rules.put"},
    {"GET", "/v1/rules", h_doc_list, R_READ, true, "rules.list"},
    {"GET", "/v1/rules/{}", h_doc_get, R_READ, true, "rules.get"},
    {"DELETE", "/v1/rules/{}", h_doc_delete, R_WRITE, true, "rules.delete"},
    {"PUT", "/v1/profiles/{}", h_doc_put, R_WRITE, true, "profiles.put"},
    {"GET", "/v1/profiles", h_doc_list, R_READ, true, "profiles.list"},
    {"GET", "/v1/profiles/{}", h_doc_get, R_READ, true, "profiles.get"},
    {"DELETE", "/v1/profiles/{}", h_doc_delete, R_WRITE, true, "profiles.delete"},
    {"POST", "/v1/plans", h_plan_post, R_WRITE, true, "plans.create"},
    {"GET", "/v1/plans", h_plan_list, R_READ, true, "plans.list"},
    {"GET", "/v1/plans/{}", h_plan_get, R_READ, false, "plans.get"},
    {"DELETE", "/v1/plans/{}", h_plan_delete, R_WRITE, true, "plans.delete"},
    {"GET", "/v1/plans/{}/lint", h_plan_advise, R_READ, true, "plans.lint"},
    {"GET", "/v1/plans/{}/collectives", h_plan_advise, R_READ, true, "plans.collectives"},
    {"POST", "/v1/plans/{}/whatif", h_plan_whatif, R_WRITE, true, "plans.whatif"},
    {"GET", "/v1/plans/{}/suggest", h_plan_suggest, R_READ, true, "plans.suggest"},
    {"GET", "/v1/compare", h_compare, R_READ, true, "compare"},
    {"GET", "/v1/sweep", h_sweep, R_READ, true, "sweep"},
    {"POST", "/v1/runs", h_run_post, R_WRITE, true, "runs.create"},
    {"GET", "/v1/runs", h_run_list, R_READ, true, "runs.list"},
    {"GET", "/v1/runs/{}", h_run_get, R_READ, true, "runs.get"},
    {"DELETE", "/v1/runs/{}", h_run_delete, R_WRITE, true, "runs.delete"},
    {"POST", "/v1/benchmarks", h_bench_post, R_WRITE, true, "benchmarks.create"},
    {"GET", "/v1/benchmarks", h_run_list, R_READ, true, "benchmarks.list"},
    {"GET", "/v1/benchmarks/{}", h_run_get, R_READ, true, "benchmarks.get"},
    {"DELETE", "/v1/benchmarks/{}", h_run_delete, R_WRITE, true, "benchmarks.delete"},
    {"POST", "/v1/benchmarks/{}/cancel", h_bench_cancel, R_WRITE, true, "benchmarks.cancel"},
    {"POST", "/v1/tokens", h_token_post, R_ADMIN, true, "tokens.create"},
    {"GET", "/v1/tokens", h_token_list, R_ADMIN, true, "tokens.list"},
    {"DELETE", "/v1/tokens/{}", h_token_delete, R_ADMIN, true, "tokens.delete"},
};

#define N_ROUTES (sizeof routes / sizeof routes[0])
#define ROUTE_NONE ((int)N_ROUTES) /* metrics slot of unmatched requests */

/* Matches path against pattern; fills a->seg with arena copies. */
static bool match(const char *pattern, const char *path, cm_arena *arena, route_args *a)
{
    size_t k = 0;
    const char *p = pattern, *s = path;
    while (*p != '\0') {
        if (p[0] == '{' && p[1] == '}') {
            const char *end = strchr(s, '/');
            size_t n = end != NULL ? (size_t)(end - s) : strlen(s);
            if (n == 0 || k >= MAX_ARGS) {
                return false;
            }
            if (arena != NULL) {
                a->seg[k] = cm_arena_strndup(arena, s, n);
            }
            k++;
            s += n;
            p += 2;
            continue;
        }
        if (*p != *s) {
            return false;
        }
        p++;
        s++;
    }
    return *s == '\0' || (s[0] == '/' && s[1] == '\0'); /* tolerate one trailing slash */
}

/* Which collection a document route serves, from its name. */
typedef enum doc_kind { DOC_MESH, DOC_RULE, DOC_PROFILE } doc_kind;

static doc_kind doc_kind_of(const srv_req *r)
{
    const char *n = srv_req_route(r);
    return n[0] == 'm' ? DOC_MESH : n[0] == 'r' ? DOC_RULE : DOC_PROFILE;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static bool parse_i64(const char *s, int64_t lo, int64_t *out)
{
    if (s == NULL || *s == '\0') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Optional integer query argument; false after replying 400. */
static bool query_i64(srv_app *app, srv_req *r, const char *key, int64_t lo, int64_t *out)
{
    const char *v = srv_req_query(r, key);
    if (v == NULL) {
        return true;
    }
    if (!parse_i64(v, lo, out)) {
        char path[64];
        snprintf(path, sizeof path, "/%s", key);
        reply_err(app, r, E_INVALID, path, "query argument %s: expected an integer >= %lld", key,
                  (long long)lo);
        return false;
    }
    return true;
}

static bool paging(srv_app *app, srv_req *r, size_t *limit, int64_t *after)
{
    int64_t l = 0, a = 0;
    if (!query_i64(app, r, "limit", 0, &l) || !query_i64(app, r, "after", 0, &a)) {
        return false;
    }
    if (l > ST_LIST_MAX_LIMIT) {
        reply_err(app, r, E_INVALID, "/limit", "limit must be at most %d", ST_LIST_MAX_LIMIT);
        return false;
    }
    *limit = (size_t)l;
    *after = a;
    return true;
}

/* The id segment; false after replying 404 (an id that is not a number
 * cannot exist). */
static bool seg_id(srv_app *app, srv_req *r, const route_args *a, int64_t *id)
{
    if (!parse_i64(a->seg[0], 1, id)) {
        reply_err(app, r, E_NOT_FOUND, "/id", "no such id '%s'", a->seg[0]);
        return false;
    }
    return true;
}

typedef enum body_kind { BODY_JSON, BODY_MLIR } body_kind;

static bool looks_json(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return s[i] == '{' || s[i] == '[' || s[i] == '"';
        }
    }
    return false;
}

static bool ctype_is(const char *ct, const char *what)
{
    size_t n = strlen(what);
    return strncasecmp(ct, what, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Classifies the body by Content-Type (sniffed when absent or curl's
 * default form type). allow_mlir: MLIR text is acceptable. False after
 * replying 415. */
static bool body_kind_of(srv_app *app, srv_req *r, bool allow_mlir, body_kind *out)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    const char *ct = srv_req_header(r, "Content-Type");
    if (ct == NULL || ctype_is(ct, "application/x-www-form-urlencoded") ||
        ctype_is(ct, "application/octet-stream")) {
        *out = allow_mlir && !looks_json(body, len) ? BODY_MLIR : BODY_JSON;
        return true;
    }
    if (ctype_is(ct, "application/json") || strstr(ct, "+json") != NULL) {
        *out = BODY_JSON;
        return true;
    }
    if (allow_mlir && (ctype_is(ct, "text/plain") || ctype_is(ct, "application/mlir") ||
                       ctype_is(ct, "text/x-mlir"))) {
        *out = BODY_MLIR;
        return true;
    }
    reply_err(app, r, E_MEDIA, NULL, "unsupported Content-Type '%s': send application/json%s",
              ct, allow_mlir ? " or text/plain (MLIR)" : "");
    return false;
}

static void put_kv_i64(cm_buf *b, const char *k, int64_t v, bool comma)
{
    cm_buf_printf(b, "%s\"%s\":%lld", comma ? "," : "", k, (long long)v);
}

static void put_kv_str(cm_buf *b, const char *k, const char *v, bool comma)
{
    cm_buf_printf(b, "%s\"%s\":", comma ? "," : "", k);
    srv_json_put_str(b, v);
}

static void set_location(srv_req *r, const char *collection, int64_t id)
{
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/%s/%lld", collection, (long long)id);
    srv_req_add_header(r, "Location", loc);
}

/* ---- health, metrics, openapi ---------------------------------------------------------------- */

static void h_healthz(srv_app *app, srv_req *r, route_args *a)
{
    (void)app;
    (void)a;
    static const char ok[] = "{\"status\":\"ok\"}\n";
    srv_req_reply(r, 200, "application/json", ok, sizeof ok - 1);
}

static void h_readyz(srv_app *app, srv_req *r, route_args *a)
{
    int64_t v = 0;
    cm_error e;
    cm_error_clear(&e);
    if (st_db_schema_version(a->db, &v, &e) != CM_OK) {
        reply_err(app, r, E_UNAVAILABLE, NULL, "store not ready: %s", e.msg);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_printf(&b, "{\"status\":\"ready\",\"schema_version\":%lld}\n", (long long)v);
    reply_buf(app, r, 200, &b);
}

static void h_metrics(srv_app *app, srv_req *r, route_args *a)
{
    (void)a;
    const char *names[N_ROUTES + 1];
    for (size_t i = 0; i < N_ROUTES; i++) {
        names[i] = routes[i].name;
    }
    names[N_ROUTES] = "unmatched";
    const char *errs[E_COUNT];
    for (size_t i = 0; i < E_COUNT; i++) {
        errs[i] = err_table[i].code;
    }
    atomic_store(&app->metrics.in_flight, app->http != NULL ? srv_http_in_flight(app->http) : 0);
    cm_buf b;
    cm_buf_init(&b);
    srv_metrics_write(&app->metrics, names, N_ROUTES + 1, errs, E_COUNT, &b);
    if (b.oom) {
        cm_buf_fini(&b);
        reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return;
    }
    size_t len = b.len;
    srv_req_reply_take(r, 200, "text/plain; version=0.0.4", cm_buf_take(&b), len);
}

static void h_openapi(srv_app *app, srv_req *r, route_args *a)
{
    (void)app;
    (void)a;
    srv_req_reply(r, 200, "application/json", srv_openapi_json, srv_openapi_json_len);
}

/* ---- graphs ------------------------------------------------------------------------------------ */

/* Validates a graph body: decodes it with the planner. */
static cm_status validate_graph(const char *body, size_t len, body_kind k, cm_error *err)
{
    if (k == BODY_JSON) {
        sp_graph *g = NULL;
        cm_status st = sp_graph_decode(body, len, NULL, &g, err);
        sp_graph_destroy(g);
        return st;
    }
    sp_module *m = NULL;
    cm_status st = sp_mlir_read(body, len, 0, &m, err);
    sp_module_destroy(m);
    return st;
}

static void graph_json(cm_buf *b, const st_graph *g, bool with_body)
{
    cm_buf_putc(b, '{');
    put_kv_i64(b, "id", g->id, false);
    put_kv_str(b, "name", g->name, true);
    put_kv_str(b, "format", st_graph_format_name(g->format), true);
    put_kv_str(b, "hash", g->hash, true);
    put_kv_i64(b, "size", (int64_t)g->body_len, true);
    put_kv_i64(b, "created_at", g->created_at, true);
    if (with_body && g->body != NULL) {
        if (g->format == ST_GRAPH_JSON) {
            cm_buf_puts(b, ",\"graph\":");
            cm_buf_append(b, g->body, g->body_len);
        } else {
            cm_buf_puts(b, ",\"mlir\":");
            srv_json_put_strn(b, g->body, g->body_len);
        }
    }
    cm_buf_putc(b, '}');
}

static void h_graph_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    body_kind k;
    if (!body_kind_of(app, r, true, &k)) {
        return;
    }
    if (len == 0) {
        reply_err(app, r, E_INVALID, "", "empty body: send a graph document or MLIR text");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (validate_graph(body, len, k, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    const char *name = srv_req_query(r, "name");
    if (name == NULL && k == BODY_JSON) {
        name = srv_json_get_name(body, len, srv_req_arena(r));
    }
    st_graph_in in = {name != NULL ? name : (k == BODY_JSON ? "graph" : "module"),
                      k == BODY_JSON ? ST_GRAPH_JSON : ST_GRAPH_MLIR, body, len, NULL};
    int64_t id = 0;
    bool existed = false;
    if (st_graph_put(a->db, &in, &id, &existed, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    st_graph g;
    memset(&g, 0, sizeof g);
    if (st_graph_get(a->db, id, &g, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    graph_json(&b, &g, false);
    cm_buf_putc(&b, '\n');
    st_graph_fini(&g);
    set_location(r, "graphs", id);
    reply_buf(app, r, existed ? 200 : 201, &b);
}

/* Writes one element of a list reply (reply_items); ctx as given. */
typedef void (*item_fn)(cm_buf *b, const void *item, const void *ctx);

/* 200 {"items": [...], "next_after": N}: the n items of size bytes at items,
 * each written by fn, as every list route answers. */
static void reply_items(srv_app *app, srv_req *r, const void *items, size_t n, size_t size,
                        int64_t next_after, item_fn fn, const void *ctx)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"items\":[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_putc(&b, ',');
        }
        fn(&b, (const char *)items + i * size, ctx);
    }
    cm_buf_printf(&b, "],\"next_after\":%lld}\n", (long long)next_after);
    reply_buf(app, r, 200, &b);
}

static void graph_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    graph_json(b, item, false);
}

static void h_graph_list(srv_app *app, srv_req *r, route_args *a)
{
    st_graph_query q;
    st_graph_query_init(&q);
    if (!paging(app, r, &q.limit, &q.after_id) ||
        !query_i64(app, r, "created_after", 0, &q.created_after) ||
        !query_i64(app, r, "created_before", 0, &q.created_before)) {
        return;
    }
    q.name = srv_req_query(r, "name");
    const char *fmt = srv_req_query(r, "format");
    if (fmt != NULL) {
        if (!st_graph_format_parse(fmt, &q.format)) {
            reply_err(app, r, E_INVALID, "/format", "format must be json or mlir");
            return;
        }
        q.has_format = true;
    }
    st_graph_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    if (st_graph_list_query(a->db, &q, &l, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, graph_item, NULL);
    st_graph_list_fini(&l);
}

static void h_graph_get(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    st_graph g;
    memset(&g, 0, sizeof g);
    cm_error e;
    cm_error_clear(&e);
    if (st_graph_get(a->db, id, &g, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    const char *raw = srv_req_query(r, "raw");
    cm_buf b;
    cm_buf_init(&b);
    if (raw != NULL && strcmp(raw, "0") != 0) {
        cm_buf_append(&b, g.body, g.body_len);
        size_t len = b.len;
        st_graph_fini(&g);
        srv_req_reply_take(r, 200, g.format == ST_GRAPH_JSON ? "application/json" : "text/plain",
                           cm_buf_take(&b), len);
        return;
    }
    graph_json(&b, &g, true);
    cm_buf_putc(&b, '\n');
    st_graph_fini(&g);
    reply_buf(app, r, 200, &b);
}

static void h_graph_delete(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (st_graph_delete(a->db, id, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    /* its plans went by cascade: forget every cached plan */
    pthread_mutex_lock(&app->cache_mu);
    for (size_t i = 0; i < app->n_slots; i++) {
        srv_blob_release(app->cache[i].blob);
        app->cache[i].blob = NULL;
        app->cache[i].id = 0;
        app->keys[i].id = 0;
    }
    pthread_mutex_unlock(&app->cache_mu);
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* ---- named documents: meshes, rules, profiles --------------------------------------------------- */

/* Validates a mesh, rule or profile body with the planner's own decoders;
 * paths are made relative to the body. */
static cm_status validate_doc(doc_kind k, const char *name, const char *body, size_t len,
                              cm_error *err)
{
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
    put_kv_i64(b, "id", d->id, false);
    put_kv_str(b, "name", d->name, true);
    put_kv_i64(b, "created_at", d->created_at, true);
    put_kv_i64(b, "updated_at", d->updated_at, true);
    if (with_body && d->body != NULL) {
        cm_buf_printf(b, ",\"%s\":", body_key[k]);
        cm_buf_append(b, d->body, d->body_len);
    }
    cm_buf_putc(b, '}');
}

static void h_doc_put(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(r);
    body_kind bk;
    if (!body_kind_of(app, r, false, &bk)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    cm_error e;
    cm_error_clear(&e);
    if (validate_doc(k, a->seg[0], body, len, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    int64_t id = 0;
    bool existed = false;
    /* If-None-Match: * asks for create-only: a different stored body is 409 */
    const char *inm = srv_req_header(r, "If-None-Match");
    bool replace = inm == NULL || strcmp(inm, "*") != 0;
    cm_status st = k == DOC_MESH
                       ? st_mesh_put(a->db, a->seg[0], body, len, replace, &id, &existed, &e)
                   : k == DOC_RULE
                       ? st_rule_put(a->db, a->seg[0], body, len, replace, &id, &existed, &e)
                       : st_profile_put(a->db, a->seg[0], body, len, replace, &id, &existed, &e);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    if (k != DOC_PROFILE) {
        atomic_fetch_add(&app->generation, 1); /* plans of raw requests may change */
    }
    st_doc d;
    memset(&d, 0, sizeof d);
    st = k == DOC_MESH   ? st_mesh_get(a->db, a->seg[0], &d, &e)
         : k == DOC_RULE ? st_rule_get(a->db, a->seg[0], &d, &e)
                         : st_profile_get(a->db, a->seg[0], &d, &e);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    doc_json(&b, &d, k, true);
    cm_buf_putc(&b, '\n');
    st_doc_fini(&d);
    reply_buf(app, r, existed ? 200 : 201, &b);
}

static void h_doc_get(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(r);
    st_doc d;
    memset(&d, 0, sizeof d);
    cm_error e;
    cm_error_clear(&e);
    cm_status st = k == DOC_MESH   ? st_mesh_get(a->db, a->seg[0], &d, &e)
                   : k == DOC_RULE ? st_rule_get(a->db, a->seg[0], &d, &e)
                                   : st_profile_get(a->db, a->seg[0], &d, &e);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    doc_json(&b, &d, k, true);
    cm_buf_putc(&b, '\n');
    st_doc_fini(&d);
    reply_buf(app, r, 200, &b);
}

static void doc_item(cm_buf *b, const void *item, const void *ctx)
{
    doc_json(b, item, *(const doc_kind *)ctx, false);
}

static void h_doc_list(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(r);
    st_doc_query q;
    st_doc_query_init(&q);
    if (!paging(app, r, &q.limit, &q.after_id)) {
        return;
    }
    st_doc_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    cm_status st = k == DOC_MESH   ? st_mesh_list(a->db, &q, &l, &e)
                   : k == DOC_RULE ? st_rule_list(a->db, &q, &l, &e)
                                   : st_profile_list(a->db, &q, &l, &e);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, doc_item, &k);
    st_doc_list_fini(&l);
}

static void h_doc_delete(srv_app *app, srv_req *r, route_args *a)
{
    doc_kind k = doc_kind_of(r);
    cm_error e;
    cm_error_clear(&e);
    cm_status st = k == DOC_MESH   ? st_mesh_delete(a->db, a->seg[0], &e)
                   : k == DOC_RULE ? st_rule_delete(a->db, a->seg[0], &e)
                                   : st_profile_delete(a->db, a->seg[0], &e);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    if (k != DOC_PROFILE) {
        atomic_fetch_add(&app->generation, 1);
    }
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* ---- plans -------------------------------------------------------------------------------------- */

/* The response for a stored plan: an envelope around the plan document. */
static srv_blob *plan_blob(const st_plan *p)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    put_kv_i64(&b, "id", p->id, false);
    put_kv_str(&b, "hash", p->hash, true);
    put_kv_i64(&b, "graph_id", p->graph_id, true);
    put_kv_i64(&b, "mesh_id", p->mesh_id, true);
    cm_buf_puts(&b, ",\"options\":");
    if (p->options != NULL) {
        cm_buf_append(&b, p->options, p->options_len);
    } else {
        cm_buf_puts(&b, "{}");
    }
    put_kv_i64(&b, "created_at", p->created_at, true);
    cm_buf_puts(&b, ",\"plan\":");
    if (p->body != NULL) {
        size_t n = p->body_len;
        while (n > 0 && (p->body[n - 1] == '\n' || p->body[n - 1] == ' ')) {
            n--;
        }
        cm_buf_append(&b, p->body, n);
    } else {
        cm_buf_puts(&b, "null");
    }
    cm_buf_puts(&b, "}\n");
    srv_blob *blob = b.oom ? NULL : srv_blob_create(b.data, b.len);
    cm_buf_fini(&b);
    return blob;
}

static void plan_list_item(cm_buf *b, const st_plan *p)
{
    cm_buf_putc(b, '{');
    put_kv_i64(b, "id", p->id, false);
    put_kv_str(b, "hash", p->hash, true);
    put_kv_i64(b, "graph_id", p->graph_id, true);
    put_kv_i64(b, "mesh_id", p->mesh_id, true);
    cm_buf_puts(b, ",\"options\":");
    if (p->options != NULL) {
        cm_buf_append(b, p->options, p->options_len);
    } else {
        cm_buf_puts(b, "{}");
    }
    put_kv_i64(b, "size", (int64_t)p->body_len, true);
    put_kv_i64(b, "created_at", p->created_at, true);
    cm_buf_putc(b, '}');
}

/* Loads plan id (cache first) and returns a new reference, or NULL with e set. */
static srv_blob *plan_load(srv_app *app, st_db *db, int64_t id, cm_error *e)
{
    srv_blob *blob = srv_cache_get(app, id);
    if (blob != NULL) {
        return blob;
    }
    bool own = db == NULL;
    if (own) {
        db = srv_app_db_acquire(app);
    }
    st_plan p;
    memset(&p, 0, sizeof p);
    if (st_plan_get(db, id, &p, e) == CM_OK) {
        blob = plan_blob(&p);
        if (blob == NULL) {
            cm_error_set(e, CM_ENOMEM, NULL, "out of memory");
        } else {
            srv_cache_put(app, id, blob);
        }
    }
    st_plan_fini(&p);
    if (own) {
        srv_app_db_release(app, db);
    }
    return blob;
}

static void reply_plan(srv_req *r, unsigned status, srv_blob *blob, int64_t id)
{
    if (status == 201) {
        set_location(r, "plans", id);
    }
    srv_req_reply_shared(r, status, "application/json", blob->data, blob->len, srv_blob_release,
                         blob);
}

static void h_plan_get(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    srv_blob *blob = plan_load(app, NULL, id, &e);
    if (blob == NULL) {
        reply_cm(app, r, &e);
        return;
    }
    reply_plan(r, 200, blob, id);
}

static void plan_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    plan_list_item(b, item);
}

static void h_plan_list(srv_app *app, srv_req *r, route_args *a)
{
    st_plan_query q;
    st_plan_query_init(&q);
    if (!paging(app, r, &q.limit, &q.after_id) || !query_i64(app, r, "graph_id", 1, &q.graph_id) ||
        !query_i64(app, r, "mesh_id", 1, &q.mesh_id) ||
        !query_i64(app, r, "created_after", 0, &q.created_after) ||
        !query_i64(app, r, "created_before", 0, &q.created_before)) {
        return;
    }
    st_plan_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    if (st_plan_list_query(a->db, &q, &l, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, plan_item, NULL);
    st_plan_list_fini(&l);
}

static void h_plan_delete(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (st_plan_delete(a->db, id, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    srv_cache_drop(app, id);
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* A planning job: runs on its own thread so the request can give up at its
 * deadline (503 timeout) while the planner finishes in the background. The
 * job is freed by whichever of the two lets go last. */
typedef struct plan_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;
    srv_app *app;
    sp_graph *g;       /* owned: the decoded document (module inside) */
    sp_module *m;      /* owned when g is NULL (MLIR input) */
    sp_graph *rules_g; /* owned: stored rules for MLIR input */
    sp_plan_opts o;
    cm_buf out;
    cm_error err;
    cm_status st;
} plan_job;

static void job_unref(plan_job *j)
{
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) {
        return;
    }
    sp_graph_destroy(j->g);
    if (j->g == NULL) {
        sp_module_destroy(j->m);
    }
    sp_graph_destroy(j->rules_g);
    cm_buf_fini(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    cm_free(j);
}

static void *job_main(void *arg)
{
    plan_job *j = arg;
    srv_app *app = j->app;
    double t0 = cm_now();
    j->st = sp_plan_run(j->m, &j->o, &j->out, &j->err);
    srv_histo_observe(&app->metrics.plan_time, cm_now() - t0);
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
    pthread_mutex_lock(&app->job_mu);
    app->slots_busy--;
    app->jobs_running--;
    pthread_cond_broadcast(&app->job_cv);
    pthread_mutex_unlock(&app->job_mu);
    return NULL;
}

static void deadline_ts(double deadline, struct timespec *ts)
{
    /* deadline is on cm_now()'s monotonic clock; condvars here use CLOCK_REALTIME */
    double left = deadline - cm_now();
    if (left < 0) {
        left = 0;
    }
    clock_gettime(CLOCK_REALTIME, ts);
    double secs = (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9 + left;
    ts->tv_sec = (time_t)secs;
    ts->tv_nsec = (long)((secs - (double)ts->tv_sec) * 1e9);
}

/* Runs the job with the request's deadline. On CM_OK *job_out holds a
 * reference to a finished job. Replies itself on timeout/busy (returns false). */
static bool run_job(srv_app *app, srv_req *r, plan_job *j, double deadline)
{
    struct timespec ts;
    deadline_ts(deadline, &ts);
    pthread_mutex_lock(&app->job_mu);
    int rc = 0;
    while (app->slots_busy >= app->cfg.plan_workers && rc == 0) {
        rc = pthread_cond_timedwait(&app->job_cv, &app->job_mu, &ts);
    }
    if (app->slots_busy >= app->cfg.plan_workers) {
        pthread_mutex_unlock(&app->job_mu);
        reply_err(app, r, E_TIMEOUT, NULL, "every plan worker stayed busy for %.1f s",
                  app->cfg.request_timeout_s);
        return false;
    }
    app->slots_busy++;
    app->jobs_running++;
    pthread_mutex_unlock(&app->job_mu);
    j->refs = 2;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, job_main, j);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        pthread_mutex_lock(&app->job_mu);
        app->slots_busy--;
        app->jobs_running--;
        pthread_cond_broadcast(&app->job_cv);
        pthread_mutex_unlock(&app->job_mu);
        j->refs = 1;
        reply_err(app, r, E_UNAVAILABLE, NULL, "cannot start a plan worker");
        return false;
    }
    pthread_mutex_lock(&j->mu);
    rc = 0;
    while (!j->done && rc == 0) {
        rc = pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (!done) {
        reply_err(app, r, E_TIMEOUT, NULL,
                  "planning did not finish within the %.1f s request limit; it continues in the "
                  "background and a retry may find it stored",
                  app->cfg.request_timeout_s);
        return false;
    }
    return true;
}

/* Reads every stored custom rule (name and body) into the arena. */
static cm_status load_rules(st_db *db, cm_arena *arena, srv_named_doc **out, size_t *n_out,
                            cm_error *e)
{
    *out = NULL;
    *n_out = 0;
    st_doc_query q;
    st_doc_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT;
    st_doc_list l;
    memset(&l, 0, sizeof l);
    cm_status st = st_rule_list(db, &q, &l, e);
    if (st != CM_OK || l.n_items == 0) {
        st_doc_list_fini(&l);
        return st;
    }
    srv_named_doc *docs = cm_arena_zalloc(arena, l.n_items * sizeof *docs);
    size_t n = 0;
    for (size_t i = 0; docs != NULL && i < l.n_items && st == CM_OK; i++) {
        st_doc d;
        memset(&d, 0, sizeof d);
        st = st_rule_get(db, l.items[i].name, &d, e);
        if (st == CM_OK) {
            docs[n].name = cm_arena_strdup(arena, d.name);
            docs[n].body = cm_arena_strndup(arena, d.body, d.body_len);
            docs[n].body_len = d.body_len;
            n++;
        } else if (st == CM_ENOTFOUND) {
            st = CM_OK; /* deleted meanwhile */
            cm_error_clear(e);
        }
        st_doc_fini(&d);
    }
    st_doc_list_fini(&l);
    if (docs == NULL) {
        return cm_error_set(e, CM_ENOMEM, NULL, "out of memory");
    }
    *out = docs;
    *n_out = n;
    return st;
}

static const char *const pass_names[] = {"sdy-propagation-pipeline", "sdy-user-priority-propagate",
                                         "sdy-op-priority-propagate", "sdy-aggressive-propagate",
                                         "sdy-basic-propagate"};

/* Hash of a raw request: everything that can change its answer. */
static void raw_key(srv_app *app, srv_req *r, const char *body, size_t len,
                    uint8_t key[CM_SHA256_LEN])
{
    cm_sha256 c;
    cm_sha256_init(&c);
    unsigned long long gen = atomic_load(&app->generation);
    cm_sha256_update(&c, &gen, sizeof gen);
    static const char *const qs[] = {"pass", "mesh", "name"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = srv_req_query(r, qs[i]);
        cm_sha256_update(&c, qs[i], strlen(qs[i]) + 1);
        if (v != NULL) {
            cm_sha256_update(&c, v, strlen(v) + 1);
        }
    }
    const char *ct = srv_req_header(r, "Content-Type");
    if (ct != NULL) {
        cm_sha256_update(&c, ct, strlen(ct) + 1);
    }
    cm_sha256_update(&c, body, len);
    cm_sha256_final(&c, key);
}

static void h_plan_post(srv_app *app, srv_req *r, route_args *a)
{
    double deadline = cm_now() + app->cfg.request_timeout_s;
    cm_arena *arena = srv_req_arena(r);
    size_t len;
    const char *body = srv_req_body(r, &len);
    body_kind bk;
    if (!body_kind_of(app, r, true, &bk)) {
        return;
    }
    if (len == 0) {
        reply_err(app, r, E_INVALID, "", "empty body: send a graph document, MLIR text or "
                                         "{\"graph\"|\"mlir\"|\"graph_id\": ...}");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    /* 1. the same bytes as an earlier request: the stored plan */
    uint8_t key[CM_SHA256_LEN];
    raw_key(app, r, body, len, key);
    int64_t known = srv_cache_key_get(app, key);
    if (known != 0) {
        srv_blob *blob = plan_load(app, a->db, known, &e);
        if (blob != NULL) {
            atomic_fetch_add(&app->metrics.plans_deduplicated, 1);
            reply_plan(r, 200, blob, known);
            return;
        }
        cm_error_clear(&e);
    }
    /* 2. the request */
    srv_plan_req pr;
    memset(&pr, 0, sizeof pr);
    if (bk == BODY_JSON && srv_json_is_plan_envelope(body, len)) {
        if (srv_json_plan_req_decode(body, len, arena, &pr, &e) != CM_OK) {
            reply_cm(app, r, &e);
            return;
        }
    } else if (bk == BODY_JSON) {
        pr.graph = body;
        pr.graph_len = len;
    } else {
        pr.mlir = body;
        pr.mlir_len = len;
    }
    if (pr.pass == NULL) {
        pr.pass = srv_req_query(r, "pass");
    }
    if (pr.mesh_name == NULL && pr.mesh == NULL) {
        pr.mesh_name = srv_req_query(r, "mesh");
    }
    if (pr.name == NULL) {
        pr.name = srv_req_query(r, "name");
    }
    int64_t id = 0;
    bool existed = false;
    if (!plan_create(app, r, a, &pr, deadline, &id, &existed)) {
        return;
    }
    srv_blob *blob = plan_load(app, a->db, id, &e);
    if (blob == NULL) {
        reply_cm(app, r, &e);
        return;
    }
    srv_cache_key_put(app, key, id);
    reply_plan(r, existed ? 200 : 201, blob, id);
}

/* Steps 3-8 of POST /v1/plans for a decoded request (also the what-if's
 * save): the source, mesh and stored rules, decoding, the request hash (an
 * equal stored plan is the answer, *existed set), planning within the
 * deadline, and storing graph and plan. True with *id set; false when a
 * reply (an error) has been sent. */
static bool plan_create(srv_app *app, srv_req *r, route_args *a, const srv_plan_req *pr_in,
                        double deadline, int64_t *id_out, bool *existed)
{
    cm_arena *arena = srv_req_arena(r);
    srv_plan_req pr = *pr_in;
    cm_error e;
    cm_error_clear(&e);
    *existed = false;
    sp_plan_pass pass = SP_PLAN_PIPELINE;
    if (pr.pass != NULL && !sp_plan_pass_parse(pr.pass, &pass)) {
        reply_err(app, r, E_INVALID, "/options/pass", "unknown pass '%s'", pr.pass);
        return false;
    }
    /* 3. the source: inline or stored graph */
    st_graph sg;
    memset(&sg, 0, sizeof sg);
    int64_t graph_id = pr.graph_id;
    if (graph_id != 0) {
        if (st_graph_get(a->db, graph_id, &sg, &e) != CM_OK) {
            if (e.code == CM_ENOTFOUND) {
                reply_err(app, r, E_NOT_FOUND, "/graph_id", "no graph %lld", (long long)graph_id);
            } else {
                reply_cm(app, r, &e);
            }
            return false;
        }
        if (sg.format == ST_GRAPH_JSON) {
            pr.graph = cm_arena_strndup(arena, sg.body, sg.body_len);
            pr.graph_len = sg.body_len;
        } else {
            pr.mlir = cm_arena_strndup(arena, sg.body, sg.body_len);
            pr.mlir_len = sg.body_len;
        }
        st_graph_fini(&sg);
        if (pr.graph == NULL && pr.mlir == NULL) {
            reply_err(app, r, E_NOMEM, NULL, "out of memory");
            return false;
        }
    }
    /* 4. mesh and stored rules */
    srv_named_doc mesh = {NULL, NULL, 0};
    int64_t mesh_id = 0;
    if (pr.mesh != NULL) {
        mesh.name = pr.mesh_name;
        mesh.body = pr.mesh;
        mesh.body_len = pr.mesh_len;
    } else if (pr.mesh_name != NULL) {
        st_doc d;
        memset(&d, 0, sizeof d);
        if (st_mesh_get(a->db, pr.mesh_name, &d, &e) != CM_OK) {
            if (e.code == CM_ENOTFOUND) {
                reply_err(app, r, E_NOT_FOUND, "/mesh", "no stored mesh '%s'", pr.mesh_name);
            } else {
                reply_cm(app, r, &e);
            }
            return false;
        }
        mesh.name = cm_arena_strdup(arena, d.name);
        mesh.body = cm_arena_strndup(arena, d.body, d.body_len);
        mesh.body_len = d.body_len;
        mesh_id = d.id;
        st_doc_fini(&d);
    }
    if (mesh.body != NULL && pr.mlir != NULL) {
        reply_err(app, r, E_INVALID, "/mesh",
                  "a mesh can be applied to graph documents only; declare sdy.mesh in MLIR");
        return false;
    }
    srv_named_doc *rules = NULL;
    size_t n_rules = 0;
    if (load_rules(a->db, arena, &rules, &n_rules, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return false;
    }
    /* 5. decode */
    plan_job *j = cm_calloc(1, sizeof *j);
    if (j == NULL) {
        reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return false;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->app = app;
    cm_buf_init(&j->out);
    sp_plan_opts_init(&j->o);
    j->o.pass = pass;
    cm_buf doc, extra;
    cm_buf_init(&doc);
    cm_buf_init(&extra); /* what the module text does not show: the rules */
    cm_status st = CM_OK;
    if (pr.graph != NULL) {
        const char *gtext = pr.graph;
        size_t glen = pr.graph_len;
        if (mesh.body != NULL || n_rules > 0) {
            st = srv_json_graph_merge(pr.graph, pr.graph_len, mesh.body != NULL ? &mesh : NULL,
                                      rules, n_rules, &doc, &e);
            gtext = doc.data;
            glen = doc.len;
        }
        if (st == CM_OK) {
            sp_graph_limits lim;
            sp_graph_limits_init(&lim);
            lim.max_bytes = app->cfg.max_body_bytes;
            st = sp_graph_decode(gtext, glen, &lim, &j->g, &e);
        }
        if (st == CM_OK) {
            j->m = sp_graph_module(j->g);
            j->o.graph = j->g;
            j->o.custom = sp_graph_custom_rules(j->g);
            j->o.functions_form = sp_graph_has_functions(j->g);
        }
        if (st == CM_OK) {
            /* the rules (the document's and the stored ones) are part of the request */
            st = srv_json_rules_canon(gtext, glen, &extra, &e);
        }
    } else {
        st = sp_mlir_read(pr.mlir, pr.mlir_len, 0, &j->m, &e);
        if (st == CM_OK && n_rules > 0) {
            cm_buf rdoc;
            cm_buf_init(&rdoc);
            st = srv_json_rules_graph(rules, n_rules, &rdoc, &e);
            if (st == CM_OK) {
                st = sp_graph_decode(rdoc.data, rdoc.len, NULL, &j->rules_g, &e);
                if (st != CM_OK) {
                    cm_error_clear(&e);
                    st = cm_error_set(&e, CM_EINTERNAL, NULL, "stored rules do not decode");
                }
            }
            if (st == CM_OK) {
                j->o.custom = sp_graph_custom_rules(j->rules_g);
                st = srv_json_rules_canon(rdoc.data, rdoc.len, &extra, &e);
            }
            cm_buf_fini(&rdoc);
        }
        if (st == CM_OK) {
            uint32_t n_funcs = 0;
            const sp_block *top = &j->m->blocks[j->m->body];
            for (uint32_t i = 0; i < top->n_ops; i++) {
                n_funcs += j->m->ops[top->ops[i]].kind == SP_OP_FUNC_FUNC;
            }
            j->o.functions_form = n_funcs != 1;
        }
    }
    cm_buf_fini(&doc);
    if (st != CM_OK) {
        cm_buf_fini(&extra);
        job_unref(j);
        if (e.code == CM_EINVAL && mesh.body != NULL && strncmp(e.path, "/meshes", 7) == 0) {
            reply_err(app, r, E_INVALID, "/mesh", "mesh does not fit the graph: %s at %s", e.msg,
                      e.path);
            return false;
        }
        reply_cm(app, r, &e);
        return false;
    }
    /* 6. the request hash: the module as MLIR (the planner's input hash),
     * the pass, and the rules the text does not show */
    char hash[2 * CM_SHA256_LEN + 1];
    {
        cm_buf txt;
        cm_buf_init(&txt);
        sp_print_opts popts = {false, false};
        sp_mlir_print(j->m, &popts, &txt);
        cm_buf_puts(&txt, "\n// pass: ");
        cm_buf_puts(&txt, pass_names[pass]);
        if (extra.len > 0) {
            uint8_t d[CM_SHA256_LEN];
            char hx[2 * CM_SHA256_LEN + 1];
            cm_sha256_hex(extra.data, extra.len, hx);
            (void)d;
            cm_buf_puts(&txt, "\n// document: ");
            cm_buf_puts(&txt, hx);
        }
        bool oom = txt.oom;
        if (!oom) {
            cm_sha256_hex(txt.data, txt.len, hash);
        }
        cm_buf_fini(&txt);
        cm_buf_fini(&extra);
        if (oom) {
            job_unref(j);
            reply_err(app, r, E_NOMEM, NULL, "out of memory hashing the module");
            return false;
        }
    }
    st_plan sp;
    memset(&sp, 0, sizeof sp);
    if (st_plan_get_by_hash(a->db, hash, &sp, &e) == CM_OK) {
        *id_out = sp.id;
        st_plan_fini(&sp);
        job_unref(j);
        atomic_fetch_add(&app->metrics.plans_deduplicated, 1);
        *existed = true;
        return true;
    }
    if (e.code != CM_ENOTFOUND) {
        job_unref(j);
        reply_cm(app, r, &e);
        return false;
    }
    cm_error_clear(&e);
    /* 7. plan, bounded by the request's deadline */
    if (!run_job(app, r, j, deadline)) {
        job_unref(j);
        return false;
    }
    if (j->st != CM_OK) {
        cm_error je = j->err;
        job_unref(j);
        reply_cm(app, r, &je);
        return false;
    }
    atomic_fetch_add(&app->metrics.plans_computed, 1);
    /* 8. store the graph (inline input) and the plan */
    if (graph_id == 0) {
        bool is_json = pr.graph != NULL;
        const char *gname = pr.name;
        if (gname == NULL && is_json) {
            gname = srv_json_get_name(pr.graph, pr.graph_len, arena);
        }
        st_graph_in gi = {gname != NULL ? gname : (is_json ? "graph" : "module"),
                          is_json ? ST_GRAPH_JSON : ST_GRAPH_MLIR, is_json ? pr.graph : pr.mlir,
                          is_json ? pr.graph_len : pr.mlir_len, NULL};
        if (st_graph_put(a->db, &gi, &graph_id, NULL, &e) != CM_OK) {
            job_unref(j);
            reply_cm(app, r, &e);
            return false;
        }
    }
    cm_buf opts;
    cm_buf_init(&opts);
    cm_buf_puts(&opts, "{\"pass\":");
    srv_json_put_str(&opts, pass_names[pass]);
    if (mesh.name != NULL) {
        cm_buf_puts(&opts, ",\"mesh\":");
        srv_json_put_str(&opts, mesh.name);
    }
    cm_buf_putc(&opts, '}');
    st_plan_in in = {hash, graph_id, mesh_id, opts.data, opts.len, j->out.data, j->out.len,
                     NULL, 0, false, NULL, 0};
    st = st_plan_put(a->db, &in, id_out, existed, &e);
    cm_buf_fini(&opts);
    job_unref(j);
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return false;
    }
    return true;
}

/* ---- compare ---------------------------------------------------------------------------------------- */

/* The stored graph plan id was made from, into p and g (the caller finis
 * both, also on failure); false (reply sent) when the plan is missing or
 * its graph cannot be read. */
static bool plan_graph(srv_app *app, srv_req *r, route_args *a, int64_t id, st_plan *p, st_graph *g)
{
    cm_error e;
    cm_error_clear(&e);
    memset(p, 0, sizeof *p);
    memset(g, 0, sizeof *g);
    if (st_plan_get(a->db, id, p, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return false;
    }
    if (st_graph_get(a->db, p->graph_id, g, &e) != CM_OK) {
        reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)id, e.msg);
        return false;
    }
    return true;
}

/* GET /v1/plans/{id}/lint and /collectives (planner/sp_advise.h, docs/advisor.md):
 * the plan's stored graph is linted (or its collectives listed) with the
 * query's profile (a stored profile by name, else a shipped one; default
 * cpu-local), mesh and min_bytes. */
static void h_plan_advise(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    bool lint = strcmp(srv_req_route(r), "plans.lint") == 0;
    cm_error e;
    cm_error_clear(&e);
    sp_profile prof;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    o.mesh = srv_req_query(r, "mesh");
    const char *mb = srv_req_query(r, "min_bytes");
    int64_t min_bytes = 0;
    if (mb != NULL && !parse_i64(mb, 0, &min_bytes)) {
        reply_err(app, r, E_INVALID, "/min_bytes", "'%s' is not a byte count", mb);
        return;
    }
    o.min_bytes = (double)min_bytes;
    st_plan p;
    st_graph g;
    sp_advise *adv = NULL;
    if (!plan_graph(app, r, a, id, &p, &g)) {
        /* replied */
    } else if (sp_advise_run(g.body, g.body_len, &o, &adv, &e) != CM_OK) {
        /* a bad mesh name is the client's; anything else about stored data is ours */
        if (e.code == CM_EINVAL && strcmp(e.path, "/mesh") == 0) {
            reply_cm(app, r, &e);
        } else {
            reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
        }
    } else {
        cm_buf b;
        cm_buf_init(&b);
        if (lint) {
            sp_advise_write_lint_json(adv, &b);
        } else {
            sp_advise_write_colls_json(adv, &b);
        }
        cm_buf_putc(&b, '\n');
        reply_buf(app, r, 200, &b);
    }
    sp_advise_destroy(adv);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* GET /v1/plans/{id}/suggest?objective=time|memory&k=5&profile=&max_candidates=
 * (planner/sp_advise.h, docs/advisor.md "Suggest"): constraints for the
 * unannotated tensors of the plan's stored graph that cut the predicted step
 * time or peak memory, each scored by a full plan + partition + cost on the
 * machine's cores. max_candidates (default 48) is capped at 256 so that one
 * request stays in the seconds. */
static void h_plan_suggest(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id, k = 5, maxc = 48;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    const char *obj = srv_req_query(r, "objective");
    if (obj != NULL && !sp_suggest_objective_parse(obj, &o.objective)) {
        reply_err(app, r, E_INVALID, "/objective", "'%s' is not time or memory", obj);
        return;
    }
    if (!query_i64(app, r, "k", 1, &k) || !query_i64(app, r, "max_candidates", 1, &maxc)) {
        return;
    }
    if (k > 100) {
        reply_err(app, r, E_INVALID, "/k", "k is at most 100");
        return;
    }
    if (maxc > 256) {
        reply_err(app, r, E_INVALID, "/max_candidates", "max_candidates is at most 256");
        return;
    }
    o.k = (uint32_t)k;
    o.max_candidates = (uint32_t)maxc;
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    cm_error e;
    cm_error_clear(&e);
    st_plan p;
    st_graph g;
    sp_suggest *sg = NULL;
    if (!plan_graph(app, r, a, id, &p, &g)) {
        /* replied */
    } else if (sp_suggest_run(g.body, g.body_len, &o, &sg, &e) != CM_OK) {
        /* the options were checked above: anything else is about stored data */
        reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
    } else {
        cm_buf b;
        cm_buf_init(&b);
        sp_suggest_write_json(sg, &b);
        cm_buf_putc(&b, '\n');
        reply_buf(app, r, 200, &b);
    }
    sp_suggest_destroy(sg);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* POST /v1/plans/{id}/whatif (planner/sp_advise.h, docs/advisor.md "What-if"):
 * the plan's stored graph with the body's edits, re-propagated incrementally
 * and diffed; with "save": true the edited module is planned and stored as
 * POST /v1/plans stores an MLIR body (201 + Location, "plan_id"). */
static void h_plan_whatif(srv_app *app, srv_req *r, route_args *a)
{
    double deadline = cm_now() + app->cfg.request_timeout_s;
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    if (len == 0) {
        reply_err(app, r, E_INVALID, "", "empty body: send {\"edits\": [...]}");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    sp_edit_list l;
    sp_edit_list_init(&l);
    bool save = false, have_prof = false;
    char pname[128];
    sp_profile prof;
    st_plan p;
    st_graph g;
    memset(&p, 0, sizeof p);
    memset(&g, 0, sizeof g);
    sp_whatif *w = NULL;
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    if (sp_whatif_request_decode(body, len, &l, &save, pname, sizeof pname, &e) != CM_OK) {
        reply_cm(app, r, &e);
        goto out;
    }
    if (!named_profile(app, r, a, pname[0] != '\0' ? pname : srv_req_query(r, "profile"), &prof,
                       &have_prof)) {
        goto out;
    }
    o.profile = have_prof ? &prof : NULL;
    if (st_plan_get(a->db, id, &p, &e) != CM_OK) {
        reply_cm(app, r, &e);
        goto out;
    }
    if (st_graph_get(a->db, p.graph_id, &g, &e) != CM_OK) {
        reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)id, e.msg);
        goto out;
    }
    if (sp_whatif_run(g.body, g.body_len, &l, &o, &w, &e) != CM_OK) {
        /* a bad edit is the client's; anything else about stored data is ours */
        if (e.code == CM_EINVAL && strncmp(e.path, "/edits", 6) == 0) {
            reply_cm(app, r, &e);
        } else {
            reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
        }
        goto out;
    }
    int64_t new_id = 0;
    bool existed = false;
    if (save) {
        srv_plan_req pr;
        memset(&pr, 0, sizeof pr);
        size_t mlen;
        const char *mlir = sp_whatif_mlir(w, &mlen);
        char name[96];
        snprintf(name, sizeof name, "what-if of plan %lld", (long long)id);
        pr.mlir = cm_arena_strndup(srv_req_arena(r), mlir, mlen);
        pr.mlir_len = mlen;
        pr.name = cm_arena_strdup(srv_req_arena(r), name);
        if (pr.mlir == NULL || pr.name == NULL) {
            reply_err(app, r, E_NOMEM, NULL, "out of memory");
            goto out;
        }
        if (!plan_create(app, r, a, &pr, deadline, &new_id, &existed)) {
            goto out;
        }
        set_location(r, "plans", new_id);
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_whatif_write_json(w, new_id, &b);
    cm_buf_putc(&b, '\n');
    reply_buf(app, r, save && !existed ? 201 : 200, &b);
out:
    sp_whatif_destroy(w);
    sp_edit_list_fini(&l);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* A stored profile by name, else a shipped one; false (reply sent) when neither. */
static bool named_profile(srv_app *app, srv_req *r, route_args *a, const char *pname,
                          sp_profile *prof, bool *set);

static bool query_profile(srv_app *app, srv_req *r, route_args *a, sp_profile *prof, bool *set)
{
    return named_profile(app, r, a, srv_req_query(r, "profile"), prof, set);
}

/* Profile pname (NULL: none, *set false): a stored one, else a shipped one;
 * false (reply sent) when neither. */
static bool named_profile(srv_app *app, srv_req *r, route_args *a, const char *pname,
                          sp_profile *prof, bool *set)
{
    *set = false;
    if (pname == NULL) {
        return true;
    }
    cm_error e;
    cm_error_clear(&e);
    st_doc d;
    memset(&d, 0, sizeof d);
    cm_status st = st_profile_get(a->db, pname, &d, &e);
    if (st == CM_OK) {
        st = sp_profile_decode(d.body, d.body_len, prof, &e);
    } else if (st == CM_ENOTFOUND && strchr(pname, '/') == NULL) {
        cm_error_clear(&e);
        st = sp_profile_load(pname, prof, &e);
    }
    st_doc_fini(&d);
    if (st != CM_OK) {
        reply_err(app, r, E_INVALID, "/profile", "profile '%s': %s", pname, e.msg);
        return false;
    }
    *set = true;
    return true;
}

/* GET /v1/sweep?devices=8&layers=4&d_model=&heads=&seq=&batch=&strategies=dp,tp&train=false
 * &profile=: `shardplan sweep` (docs/advisor.md). Sizes are capped so that one
 * request stays in the seconds: devices <= 4096, layers <= 256. */
static void h_sweep(srv_app *app, srv_req *r, route_args *a)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    static const struct {
        const char *key;
        int64_t max;
    } nums[] = {{"devices", 4096}, {"layers", 256},      {"d_model", 1 << 16},
                {"heads", 1 << 12}, {"seq", 1 << 16}, {"batch", 1 << 16}};
    int64_t *dst[] = {&o.devices, NULL, &o.d_model, &o.heads, &o.seq, &o.batch};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = srv_req_query(r, nums[i].key);
        int64_t n = 0;
        if (v == NULL) {
            continue;
        }
        if (!parse_i64(v, 1, &n) || n > nums[i].max) {
            char path[32];
            snprintf(path, sizeof path, "/%s", nums[i].key);
            reply_err(app, r, E_INVALID, path, "'%s' is not in [1, %lld]", v,
                      (long long)nums[i].max);
            return;
        }
        if (dst[i] != NULL) {
            *dst[i] = n;
        } else {
            o.layers = (uint32_t)n;
        }
    }
    const char *train = srv_req_query(r, "train");
    if (train != NULL) {
        if (strcmp(train, "true") != 0 && strcmp(train, "false") != 0) {
            reply_err(app, r, E_INVALID, "/train", "give true or false");
            return;
        }
        o.train = strcmp(train, "true") == 0;
    }
    const char *strat = srv_req_query(r, "strategies");
    if (strat != NULL) {
        static const char *const names[] = {"dp", "fsdp", "tp", "dp+tp"};
        o.strategies = 0;
        for (const char *s = strat; *s != '\0';) {
            size_t k = strcspn(s, ",");
            int j = 0;
            while (j < 4 && (strlen(names[j]) != k || strncmp(s, names[j], k) != 0)) {
                j++;
            }
            if (j == 4) {
                reply_err(app, r, E_INVALID, "/strategies", "'%.*s' is not dp, fsdp, tp or dp+tp",
                          (int)k, s);
                return;
            }
            o.strategies |= 1u << j;
            s += k + (s[k] == ',');
        }
    }
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    cm_error e;
    cm_error_clear(&e);
    sp_sweep_result res;
    if (sp_sweep_run(&o, &res, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&res, &b);
    cm_buf_putc(&b, '\n');
    sp_sweep_result_fini(&res);
    reply_buf(app, r, 200, &b);
}

static void h_compare(srv_app *app, srv_req *r, route_args *a)
{
    const char *list = srv_req_query(r, "plans");
    if (list == NULL) {
        reply_err(app, r, E_INVALID, "/plans", "give plans=ID,ID[,ID,ID]");
        return;
    }
    int64_t ids[4];
    size_t n = 0;
    const char *s = list;
    while (*s != '\0') {
        const char *comma = strchr(s, ',');
        size_t k = comma != NULL ? (size_t)(comma - s) : strlen(s);
        char tmp[32];
        if (n == 4 || k == 0 || k >= sizeof tmp) {
            reply_err(app, r, E_INVALID, "/plans", "give 2 to 4 plan ids separated by commas");
            return;
        }
        memcpy(tmp, s, k);
        tmp[k] = '\0';
        if (!parse_i64(tmp, 1, &ids[n])) {
            reply_err(app, r, E_INVALID, "/plans", "'%s' is not a plan id", tmp);
            return;
        }
        n++;
        s += k + (comma != NULL);
    }
    if (n < 2) {
        reply_err(app, r, E_INVALID, "/plans", "give 2 to 4 plan ids separated by commas");
        return;
    }
    /* the planner compares files: write each plan's graph to a temporary file */
    const char *tmpdir = getenv("TMPDIR");
    char paths[5][256];
    int n_files = 0;
    cm_error e;
    cm_error_clear(&e);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        st_plan p;
        st_graph g;
        memset(&p, 0, sizeof p);
        memset(&g, 0, sizeof g);
        if (st_plan_get(a->db, ids[i], &p, &e) != CM_OK) {
            char path[32];
            snprintf(path, sizeof path, "/plans/%zu", i);
            reply_err(app, r, err_of_status(e.code), path, "%s", e.msg);
            ok = false;
        } else if (st_graph_get(a->db, p.graph_id, &g, &e) != CM_OK) {
            reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)ids[i],
                      e.msg);
            ok = false;
        } else {
            snprintf(paths[n_files], sizeof paths[n_files], "%s/shardplan-cmp-XXXXXX",
                     tmpdir != NULL ? tmpdir : "/tmp");
            int fd = mkstemp(paths[n_files]);
            ok = fd >= 0 && write(fd, g.body, g.body_len) == (ssize_t)g.body_len;
            if (fd >= 0) {
                close(fd);
                n_files++;
            }
            if (!ok) {
                reply_err(app, r, E_UNAVAILABLE, NULL, "cannot write a temporary file");
            }
        }
        st_plan_fini(&p);
        st_graph_fini(&g);
    }
    /* a stored profile by that name is passed as a file */
    const char *profile = srv_req_query(r, "profile");
    char prof_path[256] = "";
    if (ok && profile != NULL) {
        st_doc d;
        memset(&d, 0, sizeof d);
        if (st_profile_get(a->db, profile, &d, &e) == CM_OK) {
            snprintf(prof_path, sizeof prof_path, "%s/shardplan-prof-XXXXXX",
                     tmpdir != NULL ? tmpdir : "/tmp");
            int fd = mkstemp(prof_path);
            ok = fd >= 0 && write(fd, d.body, d.body_len) == (ssize_t)d.body_len;
            if (fd >= 0) {
                close(fd);
            } else {
                prof_path[0] = '\0';
            }
            if (!ok) {
                reply_err(app, r, E_UNAVAILABLE, NULL, "cannot write a temporary file");
            }
        }
        st_doc_fini(&d);
    }
    if (ok) {
        char *argv[12];
        int argc = 0;
        char cmd[] = "compare", fmt_flag[] = "--format", fmt[] = "json", prof_flag[] = "--profile";
        argv[argc++] = cmd;
        for (int i = 0; i < n_files; i++) {
            argv[argc++] = paths[i];
        }
        argv[argc++] = fmt_flag;
        argv[argc++] = fmt;
        char *prof_arg = cm_arena_strdup(srv_req_arena(r),
                                         prof_path[0] != '\0' ? prof_path
                                         : profile != NULL    ? profile
                                                              : "");
        if (profile != NULL && prof_arg != NULL) {
            argv[argc++] = prof_flag;
            argv[argc++] = prof_arg;
        }
        argv[argc] = NULL;
        char *out_data = NULL, *err_data = NULL;
        size_t out_len = 0, err_len = 0;
        FILE *out = open_memstream(&out_data, &out_len);
        FILE *errs = open_memstream(&err_data, &err_len);
        int rc = out != NULL && errs != NULL ? sp_compare_main(argc, argv, out, errs) : -1;
        if (out != NULL) {
            fclose(out);
        }
        if (errs != NULL) {
            fclose(errs);
        }
        if (rc == 0 && out_data != NULL) {
            /* the report names its inputs by file: name them by plan instead,
             * so no server path reaches the client */
            cm_buf b;
            cm_buf_init(&b);
            const char *at = out_data, *end = out_data + out_len;
            while (at < end) {
                const char *next = end;
                int which = -1;
                size_t plen = 0;
                for (int i = 0; i < n_files; i++) {
                    size_t l = strlen(paths[i]);
                    const char *q = strstr(at, paths[i]);
                    if (q != NULL && q > at && q[-1] == '"' && q + l < end && q[l] == '"' &&
                        q < next) {
                        next = q;
                        which = i;
                        plen = l;
                    }
                }
                cm_buf_append(&b, at, (size_t)(next - at));
                if (which < 0) {
                    break;
                }
                cm_buf_printf(&b, "plans/%lld", (long long)ids[which]);
                at = next + plen;
            }
            reply_buf(app, r, 200, &b);
        } else {
            size_t k = err_len;
            while (k > 0 && err_data[k - 1] == '\n') {
                k--;
            }
            reply_err(app, r, rc == 2 ? E_INVALID : E_INTERNAL, "/plans", "compare failed: %.*s",
                      (int)(k < 200 ? k : 200), err_data != NULL ? err_data : "");
        }
        free(out_data);
        free(err_data);
    }
    for (int i = 0; i < n_files; i++) {
        unlink(paths[i]);
    }
    if (prof_path[0] != '\0') {
        unlink(prof_path);
    }
}

/* ---- benchmark runs ------------------------------------------------------------------------------------ */

static void run_json(cm_buf *b, const st_bench *x, bool full)
{
    cm_buf_putc(b, '{');
    put_kv_i64(b, "id", x->id, false);
    put_kv_i64(b, "plan_id", x->plan_id, true);
    put_kv_str(b, "status", st_bench_status_name(x->status), true);
    cm_buf_printf(b, ",\"progress\":%.4g", x->progress);
    cm_buf_puts(b, ",\"spec\":");
    if (x->spec != NULL) {
        cm_buf_append(b, x->spec, x->spec_len);
    } else {
        cm_buf_puts(b, "{}");
    }
    if (full) {
        cm_buf_puts(b, ",\"results\":");
        if (x->results != NULL) {
            cm_buf_append(b, x->results, x->results_len);
        } else {
            cm_buf_puts(b, "null");
        }
        cm_buf_puts(b, ",\"error\":");
        if (x->error != NULL) {
            srv_json_put_str(b, x->error);
        } else {
            cm_buf_puts(b, "null");
        }
    }
    if (x->webhook_url != NULL) {
        put_kv_str(b, "webhook_url", x->webhook_url, true);
    }
    put_kv_i64(b, "created_at", x->created_at, true);
    put_kv_i64(b, "updated_at", x->updated_at, true);
    cm_buf_putc(b, '}');
}

/* Stores a decoded run request queued and answers it with the run. */
static void run_create(srv_app *app, srv_req *r, route_args *a, const srv_run_req *rq,
                       const char *coll, unsigned status)
{
    cm_error e;
    cm_error_clear(&e);
    if (rq->webhook_url != NULL &&
        srv_bench_webhook_check(rq->webhook_url, "/webhook_url", &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    int64_t id = 0;
    if (st_bench_create(a->db, rq->plan_id, rq->spec, rq->spec_len, rq->webhook_url, &id, &e) !=
        CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    st_bench x;
    memset(&x, 0, sizeof x);
    cm_status st = st_bench_get(a->db, id, &x, &e);
    srv_bench_kick(app); /* after the read: the answer shows the run queued */
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    run_json(&b, &x, true);
    cm_buf_putc(&b, '\n');
    st_bench_fini(&x);
    set_location(r, coll, id);
    reply_buf(app, r, status, &b);
}

static void h_run_post(srv_app *app, srv_req *r, route_args *a)
{
    body_kind bk;
    if (!body_kind_of(app, r, false, &bk)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_run_req rq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_run_req_decode(body, len, srv_req_arena(r), &rq, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    run_create(app, r, a, &rq, "runs", 201);
}

/* POST /v1/benchmarks: the flat form, answered 202 (queued). */
static void h_bench_post(srv_app *app, srv_req *r, route_args *a)
{
    body_kind bk;
    if (!body_kind_of(app, r, false, &bk)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_run_req rq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_bench_req_decode(body, len, srv_req_arena(r), app->cfg.bench_test_faults, &rq,
                                  &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    run_create(app, r, a, &rq, "benchmarks", 202);
}

static void run_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    run_json(b, item, false);
}

static void h_run_list(srv_app *app, srv_req *r, route_args *a)
{
    st_bench_query q;
    st_bench_query_init(&q);
    if (!paging(app, r, &q.limit, &q.after_id) || !query_i64(app, r, "plan_id", 1, &q.plan_id)) {
        return;
    }
    const char *status = srv_req_query(r, "status");
    if (status != NULL) {
        if (strcmp(status, "done") == 0) {
            q.status = ST_BENCH_SUCCEEDED; /* the store's name before schema 4 */
        } else if (!st_bench_status_parse(status, &q.status)) {
            reply_err(app, r, E_INVALID, "/status", "status must be queued, running, succeeded, "
                                                    "failed or canceled");
            return;
        }
        q.has_status = true;
    }
    st_bench_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_list_query(a->db, &q, &l, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, run_item, NULL);
    st_bench_list_fini(&l);
}

static void h_run_get(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    st_bench x;
    memset(&x, 0, sizeof x);
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_get(a->db, id, &x, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    run_json(&b, &x, true);
    cm_buf_putc(&b, '\n');
    st_bench_fini(&x);
    reply_buf(app, r, 200, &b);
}

/* Kills the worker of run id if this server is executing it, and waits
 * (bounded) until the supervisor has stored the run final. */
static void run_stop(srv_app *app, int64_t id)
{
    srv_bench_cancel(app, id, 5.0);
}

/* POST /v1/benchmarks/{id}/cancel: the run is stored canceled, then its
 * worker, if one is running, is killed; a final run is a conflict. */
static void h_bench_cancel(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
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
        reply_cm(app, r, &e);
        return;
    }
    run_stop(app, id);
    h_run_get(app, r, a);
}

static void h_run_delete(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    run_stop(app, id); /* a running run's worker is killed first */
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_delete(a->db, id, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* ---- tokens ------------------------------------------------------------------------------------------- */

static void token_json(cm_buf *b, const st_token *t)
{
    cm_buf_putc(b, '{');
    put_kv_i64(b, "id", t->id, false);
    put_kv_str(b, "prefix", t->prefix, true);
    put_kv_str(b, "scope", st_scope_name(t->scope), true);
    put_kv_str(b, "label", t->label != NULL ? t->label : "", true);
    put_kv_i64(b, "created_at", t->created_at, true);
    cm_buf_putc(b, '}');
}

static void h_token_post(srv_app *app, srv_req *r, route_args *a)
{
    body_kind bk;
    if (!body_kind_of(app, r, false, &bk)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    srv_token_req tq;
    cm_error e;
    cm_error_clear(&e);
    if (srv_json_token_req_decode(body, len, srv_req_arena(r), &tq, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    st_scope scope;
    if (!st_scope_parse(tq.scope, &scope)) {
        reply_err(app, r, E_INVALID, "/scope", "scope must be read, write or admin");
        return;
    }
    char tok[ST_TOKEN_LEN + 1];
    int64_t id = 0;
    if (st_token_create(a->db, scope, tq.label, tok, &id, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    put_kv_i64(&b, "id", id, false);
    put_kv_str(&b, "token", tok, true);
    put_kv_str(&b, "scope", st_scope_name(scope), true);
    put_kv_str(&b, "label", tq.label != NULL ? tq.label : "", true);
    cm_buf_puts(&b, "}\n");
    set_location(r, "tokens", id);
    reply_buf(app, r, 201, &b);
}

static void token_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    token_json(b, item);
}

static void h_token_list(srv_app *app, srv_req *r, route_args *a)
{
    st_token_query q;
    st_token_query_init(&q);
    if (!paging(app, r, &q.limit, &q.after_id)) {
        return;
    }
    st_token_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    if (st_token_list_query(a->db, &q, &l, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, token_item, NULL);
    st_token_list_fini(&l);
}

static void h_token_delete(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (st_token_delete(a->db, id, &e) != CM_OK) {
        reply_cm(app, r, &e);
        return;
    }
    srv_req_reply(r, 204, "application/json", "", 0);
}

/* ---- dispatch ------------------------------------------------------------------------------------------ */

/* Checks the bearer token against scope; false after replying 401/403. */
static bool authorize(srv_app *app, srv_req *r, const route *rt, st_db **db)
{
    if (!app->auth || rt->scope == R_OPEN) {
        return true;
    }
    const char *h = srv_req_header(r, "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
        reply_err(app, r, E_UNAUTHORIZED, NULL,
                  "this server needs an API token: send Authorization: Bearer TOKEN");
        return false;
    }
    if (*db == NULL) {
        *db = srv_app_db_acquire(app);
    }
    st_scope scope = ST_SCOPE_READ;
    int64_t id = 0;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_token_check(*db, h + 7, &scope, &id, &e);
    if (st == CM_ENOTFOUND) {
        reply_err(app, r, E_UNAUTHORIZED, NULL, "invalid API token");
        return false;
    }
    if (st != CM_OK) {
        reply_cm(app, r, &e);
        return false;
    }
    char who[40];
    snprintf(who, sizeof who, "token:%lld", (long long)id);
    srv_req_set_principal(r, cm_arena_strdup(srv_req_arena(r), who));
    if ((int)scope < rt->scope) {
        reply_err(app, r, E_FORBIDDEN, NULL, "token scope '%s' does not allow this; needs '%s'",
                  st_scope_name(scope), st_scope_name((st_scope)rt->scope));
        return false;
    }
    return true;
}

void srv_routes_handle(void *cls, srv_req *r)
{
    srv_app *app = cls;
    const char *method = srv_req_method(r);
    const char *path = srv_req_path(r);
    srv_req_set_route(r, "-", ROUTE_NONE);
    if (srv_req_body_too_large(r)) {
        reply_err(app, r, E_TOO_LARGE, NULL, "request body over the %zu-byte limit",
                  srv_req_max_body(r));
        return;
    }
    if (srv_req_body_oom(r)) {
        reply_err(app, r, E_NOMEM, NULL, "out of memory reading the body");
        return;
    }
    route_args a;
    memset(&a, 0, sizeof a);
    const route *rt = NULL;
    char allow[64] = "";
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (!match(routes[i].pattern, path, NULL, NULL)) {
            continue;
        }
        if (strcmp(routes[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0)) {
            rt = &routes[i];
            match(rt->pattern, path, srv_req_arena(r), &a);
            srv_req_set_route(r, rt->name, (int)i);
            break;
        }
        size_t n = strlen(allow);
        snprintf(allow + n, sizeof allow - n, "%s%s", n > 0 ? ", " : "", routes[i].method);
    }
    if (rt == NULL) {
        if (allow[0] == '\0' && app->cfg.web_dir[0] != '\0' && srv_web_wants(method, path)) {
            cm_error e; /* the dashboard's static files (srv_web.h) */
            cm_error_clear(&e);
            srv_req_set_route(r, "web", ROUTE_NONE);
            if (srv_web_reply(app->cfg.web_dir, r, &e) != CM_OK) {
                reply_cm(app, r, &e);
            }
            return;
        }
        if (allow[0] != '\0') {
            srv_req_add_header(r, "Allow", allow);
            reply_err(app, r, E_METHOD, NULL, "%s is not allowed on %s (allowed: %s)", method,
                      path, allow);
        } else {
            reply_err(app, r, E_NOT_FOUND, NULL, "no resource at %s", path);
        }
        return;
    }
    for (size_t k = 0; k < MAX_ARGS; k++) {
        if (a.seg[k] == NULL && strstr(rt->pattern, "{}") != NULL && k == 0) {
            reply_err(app, r, E_NOMEM, NULL, "out of memory");
            return;
        }
    }
    st_db *db = NULL;
    if (authorize(app, r, rt, &db)) {
        if (rt->needs_db && db == NULL) {
            db = srv_app_db_acquire(app);
        }
        a.db = db;
        rt->fn(app, r, &a);
    }
    srv_app_db_release(app, db);
}

void srv_routes_done(void *cls, const srv_req *r, unsigned status, double dur_s)
{
    srv_app *app = cls;
    int i = srv_req_route_index(r);
    if (i < 0 || i > ROUTE_NONE) {
        i = ROUTE_NONE;
    }
    size_t cls_i = status >= 100 && status < 600 ? status / 100 - 1 : 4;
    atomic_fetch_add_explicit(&app->metrics.requests[i][cls_i], 1, memory_order_relaxed);
    srv_histo_observe(&app->metrics.latency[i], dur_s);
}
