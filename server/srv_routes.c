/* SPDX-License-Identifier: Apache-2.0
 * server: the route table of the /v1 API (docs/api.md, server/openapi.json),
 * path matching, the bearer-token check and the dispatch to the handlers
 * (srv_h_*.c). A handler borrows a store handle from the app's pool for the
 * request, keeps request-lived data in the request arena and always replies
 * (srv_reply.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "srv_int.h"
#include "srv_web.h"

/* ---- routes ---------------------------------------------------------------------------------- */

typedef void (*route_fn)(srv_app *app, srv_req *r, route_args *a);

typedef struct route {
    const char *method;
    const char *pattern; /* segments; "{}" matches one, "{id}" one that must be an id */
    route_fn fn;
    int scope; /* 0: open, else the st_scope needed when auth is on */
    bool needs_db;
    bool slow;        /* may compute for long: runs on a handler thread (srv_req_defer) */
    const char *name; /* metrics and log label */
    const void *data; /* handed to fn as a->data: what the route serves; NULL for most */
} route;

#define R_OPEN  0
#define R_READ  ST_SCOPE_READ
#define R_WRITE ST_SCOPE_WRITE
#define R_ADMIN ST_SCOPE_ADMIN

/* the data column's values */
static const doc_kind doc_mesh = DOC_MESH, doc_rule = DOC_RULE, doc_profile = DOC_PROFILE;
static const advise_kind advise_lint = ADVISE_LINT, advise_colls = ADVISE_COLLECTIVES;

static const route routes[] = {
    {"GET", "/healthz", srv_h_healthz, R_OPEN, false, false, "healthz", NULL},
    {"GET", "/readyz", srv_h_readyz, R_OPEN, true, false, "readyz", NULL},
    {"GET", "/metrics", srv_h_metrics, R_READ, false, false, "metrics", NULL},
    {"GET", "/v1/openapi.json", srv_h_openapi, R_OPEN, false, false, "openapi", NULL},
    {"POST", "/v1/graphs", srv_h_graph_post, R_WRITE, true, false, "graphs.create", NULL},
    {"GET", "/v1/graphs", srv_h_graph_list, R_READ, true, false, "graphs.list", NULL},
    {"GET", "/v1/graphs/{id}", srv_h_graph_get, R_READ, true, false, "graphs.get", NULL},
    {"DELETE", "/v1/graphs/{id}", srv_h_graph_delete, R_WRITE, true, false, "graphs.delete", NULL},
    {"PUT", "/v1/meshes/{}", srv_h_doc_put, R_WRITE, true, false, "meshes.put", &doc_mesh},
    {"GET", "/v1/meshes", srv_h_doc_list, R_READ, true, false, "meshes.list", &doc_mesh},
    {"GET", "/v1/meshes/{}", srv_h_doc_get, R_READ, true, false, "meshes.get", &doc_mesh},
    {"DELETE", "/v1/meshes/{}", srv_h_doc_delete, R_WRITE, true, false, "meshes.delete", &doc_mesh},
    {"PUT", "/v1/rules/{}", srv_h_doc_put, R_WRITE, true, false, "rules.put", &doc_rule},
    {"GET", "/v1/rules", srv_h_doc_list, R_READ, true, false, "rules.list", &doc_rule},
    {"GET", "/v1/rules/{}", srv_h_doc_get, R_READ, true, false, "rules.get", &doc_rule},
    {"DELETE", "/v1/rules/{}", srv_h_doc_delete, R_WRITE, true, false, "rules.delete", &doc_rule},
    {"PUT", "/v1/profiles/{}", srv_h_doc_put, R_WRITE, true, false, "profiles.put", &doc_profile},
    {"GET", "/v1/profiles", srv_h_doc_list, R_READ, true, false, "profiles.list", &doc_profile},
    {"GET", "/v1/profiles/{}", srv_h_doc_get, R_READ, true, false, "profiles.get", &doc_profile},
    {"DELETE", "/v1/profiles/{}", srv_h_doc_delete, R_WRITE, true, false, "profiles.delete",
     &doc_profile},
    {"POST", "/v1/plans", srv_h_plan_post, R_WRITE, true, false, "plans.create", NULL},
    {"GET", "/v1/plans", srv_h_plan_list, R_READ, true, false, "plans.list", NULL},
    {"GET", "/v1/plans/{id}", srv_h_plan_get, R_READ, false, false, "plans.get", NULL},
    {"DELETE", "/v1/plans/{id}", srv_h_plan_delete, R_WRITE, true, false, "plans.delete", NULL},
    {"GET", "/v1/plans/{id}/lint", srv_h_plan_advise, R_READ, true, true, "plans.lint",
     &advise_lint},
    {"GET", "/v1/plans/{id}/collectives", srv_h_plan_advise, R_READ, true, true,
     "plans.collectives", &advise_colls},
    {"GET", "/v1/plans/{id}/cost", srv_h_plan_cost, R_READ, true, true, "plans.cost", NULL},
    {"GET", "/v1/plans/{id}/memory", srv_h_plan_memory, R_READ, true, true, "plans.memory", NULL},
    {"POST", "/v1/plans/{id}/whatif", srv_h_plan_whatif, R_WRITE, true, true, "plans.whatif", NULL},
    {"GET", "/v1/plans/{id}/suggest", srv_h_plan_suggest, R_READ, true, true, "plans.suggest",
     NULL},
    {"GET", "/v1/plans/{id}/sweep", srv_h_plan_sweep, R_READ, true, true, "plans.sweep", NULL},
    {"GET", "/v1/compare", srv_h_compare, R_READ, true, true, "compare", NULL},
    {"POST", "/v1/migrations", srv_h_migration_post, R_WRITE, true, true, "migrations.create",
     NULL},
    {"GET", "/v1/migrations", srv_h_migration_list, R_READ, true, false, "migrations.list", NULL},
    {"GET", "/v1/migrations/{id}", srv_h_migration_get, R_READ, true, false, "migrations.get",
     NULL},
    {"GET", "/v1/sweep", srv_h_sweep, R_READ, true, true, "sweep", NULL},
    {"POST", "/v1/runs", srv_h_run_post, R_WRITE, true, false, "runs.create", NULL},
    {"GET", "/v1/runs", srv_h_run_list, R_READ, true, false, "runs.list", NULL},
    {"GET", "/v1/runs/{id}", srv_h_run_get, R_READ, true, false, "runs.get", NULL},
    {"DELETE", "/v1/runs/{id}", srv_h_run_delete, R_WRITE, true, false, "runs.delete", NULL},
    {"POST", "/v1/benchmarks", srv_h_bench_post, R_WRITE, true, false, "benchmarks.create", NULL},
    {"GET", "/v1/benchmarks", srv_h_run_list, R_READ, true, false, "benchmarks.list", NULL},
    {"GET", "/v1/benchmarks/{id}", srv_h_run_get, R_READ, true, false, "benchmarks.get", NULL},
    {"DELETE", "/v1/benchmarks/{id}", srv_h_run_delete, R_WRITE, true, false, "benchmarks.delete",
     NULL},
    {"POST", "/v1/benchmarks/{id}/cancel", srv_h_bench_cancel, R_WRITE, true, false,
     "benchmarks.cancel", NULL},
    {"GET", "/v1/benchmarks/{id}/trace", srv_h_bench_trace, R_READ, true, false, "benchmarks.trace",
     NULL},
    {"POST", "/v1/tokens", srv_h_token_post, R_ADMIN, true, false, "tokens.create", NULL},
    {"GET", "/v1/tokens", srv_h_token_list, R_ADMIN, true, false, "tokens.list", NULL},
    {"DELETE", "/v1/tokens/{id}", srv_h_token_delete, R_ADMIN, true, false, "tokens.delete", NULL},
};

#define N_ROUTES (sizeof routes / sizeof routes[0])
#define ROUTE_NONE ((int)N_ROUTES) /* metrics slot of unmatched requests */

/* the metrics keep a slot per route and one for unmatched requests */
_Static_assert(N_ROUTES < SRV_METRIC_ROUTES, "SRV_METRIC_ROUTES too small for the route table");

size_t srv_routes_count(void)
{
    return N_ROUTES;
}

const char *srv_routes_name(size_t i)
{
    return i < N_ROUTES ? routes[i].name : "unmatched";
}

/* Matches path against pattern; fills a->seg with arena copies. */
static bool match(const char *pattern, const char *path, cm_arena *arena, route_args *a)
{
    size_t k = 0;
    const char *p = pattern, *s = path;
    while (*p != '\0') {
        if (p[0] == '{') {
            const char *end = strchr(s, '/');
            size_t n = end != NULL ? (size_t)(end - s) : strlen(s);
            if (n == 0 || k >= SRV_ROUTE_ARGS) {
                return false;
            }
            if (arena != NULL) {
                a->seg[k] = cm_arena_strndup(arena, s, n);
            }
            k++;
            s += n;
            p = strchr(p, '}') + 1;
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

/* ---- dispatch ------------------------------------------------------------------------------------------ */

/* Checks the bearer token against scope; false after replying 401/403. */
static bool authorize(srv_app *app, srv_req *r, const route *rt, st_db **db)
{
    if (!app->auth || rt->scope == R_OPEN) {
        return true;
    }
    const char *h = srv_req_header(r, "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
        srv_reply_err(app, r, E_UNAUTHORIZED, NULL,
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
        srv_reply_err(app, r, E_UNAUTHORIZED, NULL, "invalid API token");
        return false;
    }
    if (st != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    char who[40];
    snprintf(who, sizeof who, "token:%lld", (long long)id);
    srv_req_set_principal(r, cm_arena_strdup(srv_req_arena(r), who));
    if ((int)scope < rt->scope) {
        srv_reply_err(app, r, E_FORBIDDEN, NULL, "token scope '%s' does not allow this; needs '%s'",
                      st_scope_name(scope), st_scope_name((st_scope)rt->scope));
        return false;
    }
    return true;
}

/* While the start check of a big file runs (srv_app_start_check), a route
 * that needs a token or the store answers 503; false after replying. */
static bool store_checked(srv_app *app, srv_req *r, const route *rt)
{
    int state = atomic_load(&app->start_check);
    if (rt->scope == R_OPEN || state == SRV_CHECK_SOUND) {
        return true;
    }
    if (state == SRV_CHECK_DAMAGED) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "the store failed its integrity check at start; the server is stopping");
    } else {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "the store is being checked at start (%lld MiB); retry shortly",
                      (long long)app->start_check_mib);
    }
    return false;
}

const char *srv_cors_allow(const srv_app *app, const char *origin, bool *vary_out)
{
    const char *allowed = app->cfg.cors_origin;
    *vary_out = false;
    if (allowed[0] == '\0' || origin == NULL || origin[0] == '\0') {
        return NULL;
    }
    if (strcmp(allowed, "*") == 0) {
        return "*";
    }
    if (strcmp(origin, allowed) != 0) {
        return NULL;
    }
    *vary_out = true;
    return origin;
}

void srv_cors_lines(const srv_app *app, const char *origin, char *buf, size_t cap)
{
    bool vary = false;
    const char *allow = srv_cors_allow(app, origin, &vary);
    buf[0] = '\0';
    if (allow == NULL) {
        return;
    }
    int n = snprintf(buf, cap,
                     "Access-Control-Allow-Origin: %s\r\n%sAccess-Control-Expose-Headers: " SRV_CORS_EXPOSE
                     "\r\n",
                     allow, vary ? "Vary: Origin\r\n" : "");
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = '\0';
    }
}

/* CORS (--cors-origin; off when empty): a request from the allowed origin
 * gets Access-Control-Allow-Origin on whatever answers it, errors too, so a
 * browser can read them. Once per request (the early hook and the handler
 * both call it). */
static void cors_headers(const srv_app *app, srv_req *r)
{
    if (srv_req_has_resp_header(r, "Access-Control-Allow-Origin")) {
        return;
    }
    bool vary = false;
    const char *allow = srv_cors_allow(app, srv_req_header(r, "Origin"), &vary);
    if (allow == NULL) {
        return;
    }
    srv_req_add_header(r, "Access-Control-Allow-Origin", allow);
    if (vary) {
        srv_req_add_header(r, "Vary", "Origin");
    }
    srv_req_add_header(r, "Access-Control-Expose-Headers", SRV_CORS_EXPOSE);
}

/* A CORS preflight (OPTIONS with Access-Control-Request-Method from the
 * allowed origin): 204 with the methods path allows. False when r is not
 * one (then the routes answer it, 405 for OPTIONS). */
static bool cors_preflight(srv_req *r, const char *method, const char *path)
{
    if (strcmp(method, "OPTIONS") != 0 || srv_req_header(r, "Access-Control-Request-Method") == NULL ||
        !srv_req_has_resp_header(r, "Access-Control-Allow-Origin")) {
        return false;
    }
    char allow[64] = "";
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (match(routes[i].pattern, path, NULL, NULL)) {
            size_t n = strlen(allow);
            snprintf(allow + n, sizeof allow - n, "%s%s", n > 0 ? ", " : "", routes[i].method);
        }
    }
    if (allow[0] == '\0') {
        return false; /* no resource: 404 */
    }
    srv_req_add_header(r, "Access-Control-Allow-Methods", allow);
    srv_req_add_header(r, "Access-Control-Allow-Headers",
                       "Authorization, Content-Type, Accept, If-None-Match, Idempotency-Key");
    srv_req_add_header(r, "Access-Control-Max-Age", "600");
    srv_req_set_route(r, "cors", ROUTE_NONE);
    srv_req_reply(r, 204, "text/plain", "", 0);
    return true;
}

void srv_routes_handle(void *cls, srv_req *r)
{
    srv_app *app = cls;
    const char *method = srv_req_method(r);
    const char *path = srv_req_path(r);
    srv_req_set_route(r, "-", ROUTE_NONE);
    cors_headers(app, r);
    if (cors_preflight(r, method, path)) {
        return;
    }
    if (srv_req_head_error(r) != NULL) {
        srv_reply_err(app, r, E_INVALID, NULL, "%s", srv_req_head_error(r));
        return;
    }
    if (srv_req_body_too_large(r)) {
        srv_reply_err(app, r, E_TOO_LARGE, NULL, "request body over the %zu-byte limit",
                      srv_req_max_body(r));
        return;
    }
    if (srv_req_body_oom(r)) {
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory reading the body");
        return;
    }
    if (srv_req_overloaded_client(r)) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "this client has %u long requests waiting for or running on the handler "
                      "threads already (--max-long-per-client); retry once one has answered",
                      srv_handler_per_client(&app->cfg));
        return;
    }
    if (srv_req_overloaded(r)) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "every handler thread is busy and %u requests wait for one; retry later",
                      srv_handler_queue(&app->cfg));
        return;
    }
    if (srv_req_body_busy(r)) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL,
                      "the server holds too many request bodies (%zu bytes at most together); "
                      "retry later",
                      app->cfg.max_inflight_body_bytes);
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
                srv_reply_cm(app, r, &e);
            }
            return;
        }
        if (allow[0] != '\0') {
            srv_req_add_header(r, "Allow", allow);
            srv_reply_err(app, r, E_METHOD, NULL, "%s is not allowed on %s (allowed: %s)", method,
                          path, allow);
        } else {
            srv_reply_err(app, r, E_NOT_FOUND, NULL, "no resource at %s", path);
        }
        return;
    }
    if (strchr(rt->pattern, '{') != NULL && a.seg[0] == NULL) {
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return;
    }
    if (!store_checked(app, r, rt)) {
        return;
    }
    st_db *db = NULL;
    if (srv_req_authorized(r) || authorize(app, r, rt, &db)) {
        if (rt->needs_db && db == NULL) {
            db = srv_app_db_acquire(app);
        }
        a.db = db;
        a.data = rt->data;
        /* an id that is not a number cannot exist: 404 before the handler */
        if (strstr(rt->pattern, "{id}") != NULL && !srv_parse_i64(a.seg[0], 1, &a.id)) {
            srv_reply_err(app, r, E_NOT_FOUND, "/id", "no such id '%s'", a.seg[0]);
        } else if (!rt->slow || !srv_req_defer(r)) {
            rt->fn(app, r, &a); /* else it runs again on a handler thread */
        }
    }
    srv_app_db_release(app, db);
}

bool srv_routes_early(void *cls, srv_req *r)
{
    srv_app *app = cls;
    const char *method = srv_req_method(r);
    const char *path = srv_req_path(r);
    const char *cl = srv_req_header(r, "Content-Length");
    cors_headers(app, r);
    if (strcmp(method, "PUT") == 0 && strncmp(path, "/v1/meshes/", 11) == 0 && cl != NULL &&
        strtoull(cl, NULL, 10) > SRV_MESH_MAX_BYTES) {
        srv_req_set_route(r, "meshes.put", ROUTE_NONE);
        srv_reply_err(app, r, E_TOO_LARGE, NULL, "a mesh is at most %zu bytes (64 axes)",
                      SRV_MESH_MAX_BYTES);
        return false;
    }
    if (!app->auth && atomic_load(&app->start_check) == SRV_CHECK_SOUND) {
        return true;
    }
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (strcmp(routes[i].method, method) != 0 || !match(routes[i].pattern, path, NULL, NULL)) {
            continue;
        }
        srv_req_set_route(r, routes[i].name, (int)i);
        if (!store_checked(app, r, &routes[i])) {
            return false;
        }
        if (!app->auth) {
            return true;
        }
        st_db *db = NULL;
        bool ok = authorize(app, r, &routes[i], &db);
        srv_app_db_release(app, db);
        if (ok) {
            srv_req_set_authorized(r);
        }
        return ok;
    }
    return true; /* no route: the handler answers 404 or 405 */
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
