/* SPDX-License-Identifier: Apache-2.0
 * server: folder-private definitions shared by the server's files: the
 * srv_app body, the store handle pool, the plan cache (srv_cache.c), the
 * metrics (srv_metrics.c), the error table and reply helpers (srv_reply.c),
 * the route table's handler contract (srv_routes.c) and the handlers by area
 * (srv_h_store.c, srv_h_plans.c, srv_h_advise.c), the planning jobs
 * (srv_jobs.c). Not a public header (header-check skips *_int.h).
 * Thread contract: handlers run concurrently on the HTTP pool threads; each
 * gets its own request and store handle, and shares the app. */
#ifndef SRV_INT_H
#define SRV_INT_H

#include "sp_cost.h"
#include "sp_graph_json.h"
#include "sp_plan.h"
#include "sp_plan_json.h"
#include "srv_app.h"
#include "srv_http.h"
#include "srv_json.h"
#include "st_db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- metrics (srv_metrics.c) ------------------------------------------------ */

#define SRV_METRIC_ROUTES  56 /* route slots (srv_routes.c has fewer) */
#define SRV_METRIC_BUCKETS 12
#define SRV_METRIC_CLASSES 5 /* 1xx..5xx */
#define SRV_METRIC_CODES   17

typedef struct srv_histo {
    atomic_ullong buckets[SRV_METRIC_BUCKETS + 1]; /* last: +Inf */
    atomic_ullong count;
    atomic_ullong sum_us; /* microseconds */
} srv_histo;

typedef struct srv_metrics {
    atomic_ullong requests[SRV_METRIC_ROUTES][SRV_METRIC_CLASSES];
    srv_histo latency[SRV_METRIC_ROUTES];
    srv_histo plan_time;            /* planner runs (cache misses) */
    atomic_ullong plans_computed;
    atomic_ullong plans_deduplicated;
    atomic_ullong plans_here;      /* planner runs on the request's thread */
    atomic_ullong plans_on_worker; /* planner runs on a plan worker */
    atomic_ullong plans_moved;     /* request-thread runs past cfg.plan_here_s, moved */
    atomic_ullong errors[SRV_METRIC_CODES];
    atomic_uint in_flight;
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_histo_observe(srv_histo *h, double seconds);
/* Prometheus text format; route_names[i] labels slot i (n_routes of them),
 * error_names[i] the error counters. */
void srv_metrics_write(const srv_metrics *m, const char *const *route_names, size_t n_routes,
                       const char *const *error_names, size_t n_errors, cm_buf *out);

/* ---- the plan cache: its types (its calls: below, srv_cache.c) ------------ */

/* A reference-counted response body shared by the cache and responses. */
typedef struct srv_blob {
    atomic_uint refs;
    size_t len;
    char etag[2 * CM_SHA256_LEN + 3]; /* the quoted plan hash, or "" (plan_blob sets it) */
    char data[];                      /* len bytes + NUL */
} srv_blob;

/* A blob of len bytes copied from data, or left for the caller to fill when
 * data is NULL (NUL-terminated either way); NULL when out of memory. */
srv_blob *srv_blob_create(const char *data, size_t len);
void srv_blob_release(void *blob); /* drops one reference; frees at zero */

#define SRV_CACHE_SLOTS_MIN 64
#define SRV_IDEM_SLOTS      1024 /* Idempotency-Keys remembered (srv_h_store.c) */
#define SRV_CACHE_CHECK_US  20000 /* the store's data version is asked at most this often */

typedef struct srv_cache_slot {
    int64_t id;     /* plan id, 0 = empty */
    uint64_t epoch; /* the cache epoch it was stored in: older ones are stale */
    srv_blob *blob; /* the plan response */
} srv_cache_slot;

typedef struct srv_key_slot {
    uint8_t key[CM_SHA256_LEN]; /* hash of the raw request */
    int64_t id;                 /* plan id, 0 = empty */
    uint64_t epoch;
} srv_key_slot;

/* ---- the application ----------------------------------------------------------- */

struct srv_app {
    srv_config cfg;
    srv_http *http;
    int log_fd;      /* request log, -1 for none */
    bool own_log_fd; /* close on destroy */
    bool auth;       /* bearer tokens required */
    bool running;

    /* store handles, one per concurrent user (st_db.h recommends it) */
    pthread_mutex_t db_mu;
    pthread_cond_t db_cv;
    st_db **dbs;
    size_t n_dbs;
    size_t n_free;
    st_db **free_dbs;
    st_group *db_group; /* the handles' group commit of plan puts */

    /* plans: direct-mapped caches, id -> response body, request bytes -> id */
    pthread_mutex_t cache_mu;
    srv_cache_slot *cache;
    srv_key_slot *keys;
    size_t n_slots;
    atomic_ullong generation; /* bumped when meshes or rules change */
    /* the store's PRAGMA data_version as last seen on watch_db: when any
     * connection (another server on the file included) commits, it changes,
     * the epoch moves on and every cached entry is stale */
    st_db *watch_db;
    pthread_mutex_t watch_mu;
    int64_t data_version;
    atomic_ullong cache_epoch;
    atomic_ullong dv_checked_us; /* cm_now() of the last look, microseconds */

    /* readiness (GET /readyz): the last quick_check and when it ran */
    pthread_mutex_t ready_mu; /* guards the check state below */
    double checked_at;        /* cm_now() of the last verdict, 0: never */
    cm_error check_err;       /* code CM_OK when the file passed */
    pthread_cond_t check_cv;  /* wakes the checker: check_want or check_stop */
    pthread_t checker;        /* runs the quick_checks /readyz asks for */
    bool checker_running, check_want, check_stop;
    atomic_int start_check;  /* srv_check_state of the start check (read without ready_mu) */
    int64_t start_check_mib; /* the file's size when that check began, MiB */
    st_db *checking;      /* the handle of the check under way (interrupted at stop) */
    atomic_ullong checks; /* quick_checks run for /readyz */

    /* plan jobs */
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    unsigned jobs_running; /* jobs queued or running */
    unsigned slots_busy;   /* jobs holding a planning slot */
    /* the plan workers: up to cfg.plan_workers threads, started as jobs
     * need them and kept until srv_jobs_stop (a thread per job cost more
     * than planning a small graph) */
    struct plan_job *job_head, *job_tail; /* queued, not yet taken */
    pthread_cond_t pool_cv;               /* a job was queued, or the pool stops */
    pthread_t *workers;                   /* cfg.plan_workers slots */
    unsigned n_workers, idle_workers;
    bool pool_stop;
    atomic_bool stopping; /* shutdown's drain time is over: computations stop */

    srv_metrics metrics;

    /* POST /v1/benchmarks Idempotency-Key: the last SRV_IDEM_SLOTS keys
     * (hash of principal and key), the body's hash and the run made */
    pthread_mutex_t idem_mu;
    struct srv_idem_slot {
        uint8_t key[CM_SHA256_LEN];
        uint8_t body[CM_SHA256_LEN];
        int64_t id; /* 0: empty */
    } idem[SRV_IDEM_SLOTS];
    size_t idem_next; /* the slot overwritten next (round robin) */

    /* the benchmark supervisor (srv_bench.c), NULL when not running */
    struct srv_bench *bench;
};

typedef struct srv_bench srv_bench;

/* Store handle pool: take one for the duration of a request, give it back. */
st_db *srv_app_db_acquire(srv_app *app);
void srv_app_db_release(srv_app *app, st_db *db);

/* ---- the plan cache: its calls (srv_cache.c) --------------------------------- */

/* Sets the cache up empty (its mutex); srv_app_create calls it first, so
 * srv_cache_fini is always safe. */
void srv_cache_init(srv_app *app);
/* Allocates max(entries, SRV_CACHE_SLOTS_MIN) slots of each map; entries 0
 * leaves the cache off (every get misses, put does nothing). Errors:
 * CM_ENOMEM. */
cm_status srv_cache_alloc(srv_app *app, size_t entries, cm_error *err);
/* Releases every cached body and the slots, destroys the mutex. */
void srv_cache_fini(srv_app *app);

/* Plan cache. get returns a new reference (release with srv_blob_release) or
 * NULL; put stores blob (adds a reference); drop forgets plan id and every
 * request key that names it; clear forgets every plan and every key (a
 * graph's plans went by cascade). Thread safety: any thread. */
srv_blob *srv_cache_get(srv_app *app, int64_t id);
void srv_cache_put(srv_app *app, int64_t id, srv_blob *blob);
void srv_cache_drop(srv_app *app, int64_t id);
void srv_cache_clear(srv_app *app);
/* Request-bytes map: the plan id stored for key, 0 when none. */
int64_t srv_cache_key_get(srv_app *app, const uint8_t key[CM_SHA256_LEN]);
void srv_cache_key_put(srv_app *app, const uint8_t key[CM_SHA256_LEN], int64_t id);
void srv_cache_keys_clear(srv_app *app);

/* The built-in device profiles: the JSON files of profiles/, embedded by the Makefile
 * (build/gen/srv_profiles.c), NULL-terminated. The server reads no profile
 * file at run time: a profile is stored (PUT /v1/profiles/{name}) or one of
 * these. */
typedef struct srv_builtin_profile {
    const char *name; /* the file name without .json */
    const char *json;
    size_t len;
} srv_builtin_profile;
extern const srv_builtin_profile srv_builtin_profiles[];
extern const size_t srv_n_builtin_profiles;

/* The OpenAPI document, server/openapi.json embedded by the Makefile. */
extern const char srv_openapi_json[];
extern const size_t srv_openapi_json_len;

/* ---- errors and replies (srv_reply.c) --------------------------------------------------- */

/* Every error a reply can carry; srv_reply.c maps each to its code string
 * and HTTP status in one table (STYLE.md). */
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
    E_REQ_TIMEOUT,   /* 408: the request head did not arrive in time */
    E_URI_TOO_LONG,  /* 414 */
    E_HEADERS_LARGE, /* 431 */
    E_NOT_IMPL,      /* 501: a transfer coding other than chunked */
    E_VERSION,       /* 505 */
    E_COUNT
} srv_err;

/* The error a status answers with (CM_EINTERNAL and unknown: E_INTERNAL). */
srv_err srv_err_of_status(cm_status st);
/* The error's code string ("invalid", "not_found", ...), static. */
const char *srv_err_code(srv_err e);

/* The error document of a request srv_http refused before any handler (a
 * malformed head, too many connections, a head or body past its deadline):
 * the code of status from the table, message, an empty path; written into
 * buf (cap bytes), its length returned; the error counted. Into hdrs (hcap
 * bytes) the CORS header lines (srv_cors_lines) for origin. cls is the
 * srv_app. Any thread. */
size_t srv_reply_refusal(void *cls, unsigned status, const char *message, const char *origin,
                         char *buf, size_t cap, char *hdrs, size_t hcap);
/* Counts an answer of status that libmicrohttpd sent itself (srv_http_opts
 * library_refused) in the errors metric, under the code of status. */
void srv_reply_count_refusal(void *cls, unsigned status);

/* CORS (--cors-origin): the Access-Control-Allow-Origin value a request
 * from origin (NULL: no Origin header) gets, or NULL when CORS is off or
 * origin is not the one allowed; *vary_out tells whether the answer varies
 * with Origin (a named origin, not "*"). */
const char *srv_cors_allow(const srv_app *app, const char *origin, bool *vary_out);
/* The exposed response headers of a CORS answer. */
#define SRV_CORS_EXPOSE "ETag, Location, Retry-After, WWW-Authenticate"
/* The CORS header lines of srv_cors_allow for origin, each ending in CRLF,
 * into buf (cap bytes, NUL-terminated; "" when none or they do not fit). */
void srv_cors_lines(const srv_app *app, const char *origin, char *buf, size_t cap);

/* Replies {"error":{"code","message","path"}} with e's HTTP status; path is
 * dropped for E_INTERNAL (our data, not the client's); counts the error in
 * the metrics; adds WWW-Authenticate or Retry-After where e needs one. */
void srv_reply_err(srv_app *app, srv_req *r, srv_err e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* srv_reply_err for a cm_error (its status, path and message). */
void srv_reply_cm(srv_app *app, srv_req *r, const cm_error *e);
/* srv_reply_err for an error about our own (stored) data: 503 out_of_memory
 * for CM_ENOMEM, else 500 internal; e's message, no path. */
void srv_reply_ours(srv_app *app, srv_req *r, const cm_error *e);
/* Replies with buffer b (taken) as JSON; 503 when b ran out of memory. */
void srv_reply_buf(srv_app *app, srv_req *r, unsigned status, cm_buf *b);

/* The answer of a route that returns nothing (a delete): the error e when st
 * is not CM_OK, else 204 with an empty body. */
void srv_reply_empty(srv_app *app, srv_req *r, cm_status st, const cm_error *e);

/* Writes one element of a list reply (srv_reply_list); ctx as given. */
typedef void (*srv_item_fn)(cm_buf *b, const void *item, const void *ctx);

/* The answer of every list route, given what its store call returned: the
 * error e when st is not CM_OK, else 200 {"items": [...], "next_after": N}
 * with the n items of size bytes at items, each written by fn with ctx. */
void srv_reply_list(srv_app *app, srv_req *r, cm_status st, const cm_error *e, const void *items,
                    size_t n, size_t size, int64_t next_after, srv_item_fn fn, const void *ctx);
/* srv_reply_list for a store list l (an st_*_list: items, n_items,
 * next_after), as its list call st filled it. */
#define SRV_REPLY_LIST(app, r, st, e, l, fn, ctx)                                                  \
    srv_reply_list((app), (r), (st), (e), (l).items, (l).n_items, sizeof(l).items[0],              \
                   (l).next_after, (fn), (ctx))

/* Location: /v1/COLLECTION/ID. */
void srv_set_location(srv_req *r, const char *collection, int64_t id);

/* ---- routes (srv_routes.c) ------------------------------------------------------- */

#define SRV_ROUTE_ARGS 2 /* {} segments a pattern may have */

/* What a handler gets besides the app and the request. */
typedef struct route_args {
    const char *seg[SRV_ROUTE_ARGS]; /* path segments matched by {} or {id} (arena copies) */
    int64_t id;                      /* the {id} segment as a number (> 0), else 0 */
    st_db *db;                       /* borrowed from the pool for the request */
    const void *data;                /* the route row's data (static): what it serves */
} route_args;

/* The data of the document routes: which collection they serve. */
typedef enum doc_kind { DOC_MESH, DOC_RULE, DOC_PROFILE } doc_kind;

/* The data of GET /v1/plans/{id}/lint and /collectives: which report. */
typedef enum advise_kind { ADVISE_LINT, ADVISE_COLLECTIVES } advise_kind;

/* The request handler and completion hook given to srv_http (cls = app). */
void srv_routes_handle(void *app, srv_req *r);
void srv_routes_done(void *app, const srv_req *r, unsigned status, double dur_s);
/* The early hook (srv_http.h): checks the token of a request with a body
 * before the body is read; false after replying 401/403. */
bool srv_routes_early(void *app, srv_req *r);

/* The routes' metrics labels: srv_routes_count() of them, slot i named
 * srv_routes_name(i) (static strings); slot srv_routes_count() counts the
 * unmatched requests. */
size_t srv_routes_count(void);
const char *srv_routes_name(size_t i);

/* ---- query, path and body parsing (srv_reply.c) ----------------------------------- */

/* A decimal integer >= lo, all of s. */
bool srv_parse_i64(const char *s, int64_t lo, int64_t *out);
/* Optional integer query argument; false after replying 400. */
bool srv_query_i64(srv_app *app, srv_req *r, const char *key, int64_t lo, int64_t *out);
/* ?limit= (at most ST_LIST_MAX_LIMIT) and ?after=; false after replying 400. */
bool srv_query_paging(srv_app *app, srv_req *r, size_t *limit, int64_t *after);

typedef enum body_kind { BODY_JSON, BODY_MLIR } body_kind;

/* Classifies the body by Content-Type (sniffed when absent or curl's
 * default form type). allow_mlir: MLIR text is acceptable. False after
 * replying 415. */
bool srv_body_kind_of(srv_app *app, srv_req *r, bool allow_mlir, body_kind *out);
/* The body of a route that takes JSON only (srv_body_kind_of without MLIR),
 * its length in *len; NULL after replying 415. */
const char *srv_body_json(srv_app *app, srv_req *r, size_t *len);

/* ---- handlers --------------------------------------------------------------------------------
 * Each replies exactly once (srv_http.h) and returns; a->db is set when the
 * route needs the store, a->data is the route row's data (doc_kind for the
 * document routes, advise_kind for lint/collectives, else NULL), a->id the
 * {id} segment of the routes that have one (the router answers 404 for an id
 * that is not a positive number, so a handler sees a->id > 0). */

/* health, metrics, openapi, graphs, meshes/rules/profiles, runs and
 * benchmarks, tokens (srv_h_store.c) */
void srv_h_healthz(srv_app *app, srv_req *r, route_args *a);
void srv_h_readyz(srv_app *app, srv_req *r, route_args *a);
/* Asks the checker thread (started on first need) for a quick_check
 * unless one is asked for already; call under ready_mu. Its verdict goes to
 * check_err and checked_at, and settles start_check while that runs. */
void srv_checker_want(srv_app *app);
/* Stops and joins the thread running /readyz's quick_checks (interrupting a
 * check under way); srv_app_destroy. */
void srv_checker_stop(srv_app *app);
void srv_h_metrics(srv_app *app, srv_req *r, route_args *a);
void srv_h_openapi(srv_app *app, srv_req *r, route_args *a);
void srv_h_graph_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_graph_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_graph_get(srv_app *app, srv_req *r, route_args *a);
void srv_h_graph_delete(srv_app *app, srv_req *r, route_args *a);
void srv_h_doc_put(srv_app *app, srv_req *r, route_args *a);
void srv_h_doc_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_doc_get(srv_app *app, srv_req *r, route_args *a);
void srv_h_doc_delete(srv_app *app, srv_req *r, route_args *a);
void srv_h_run_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_bench_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_run_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_run_get(srv_app *app, srv_req *r, route_args *a);
void srv_h_run_delete(srv_app *app, srv_req *r, route_args *a);
void srv_h_bench_cancel(srv_app *app, srv_req *r, route_args *a);
void srv_h_bench_trace(srv_app *app, srv_req *r, route_args *a); /* srv_bench.c */
void srv_h_token_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_token_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_token_delete(srv_app *app, srv_req *r, route_args *a);

/* plans (srv_h_plans.c) */
void srv_h_plan_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_get(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_delete(srv_app *app, srv_req *r, route_args *a);

/* Steps 3-8 of POST /v1/plans for a decoded request (also the what-if's
 * save): the source, mesh and stored rules, decoding, the request hash (an
 * equal stored plan is the answer, *existed set), planning within the
 * deadline (cm_now() seconds), and storing graph and plan. True with *id_out
 * set; false when a reply (an error) has been sent. */
bool srv_plan_create(srv_app *app, srv_req *r, route_args *a, const srv_plan_req *pr_in,
                     double deadline, int64_t *id_out, bool *existed);

/* A stored plan's input and options, as every plan-scoped route and the
 * benchmark supervisor load it (planner/doc/sp_input.h): the input the plan
 * was made from (for plans stored before the store kept it, the plan's
 * graph), its rules document and its pass. text and io borrow from pi;
 * srv_plan_input_fini releases it. */
typedef struct srv_plan_input {
    st_plan row;      /* the stored plan */
    char *graph_body; /* heap: the graph's body, for plans stored without input */
    char pass[64];    /* the pass name from the plan's options */
    const char *text; /* the model text as planned */
    size_t len;
    sp_input_opts io; /* pass and rules */
} srv_plan_input;

/* Loads plan id's input into pi (fini it also on failure). Errors:
 * CM_ENOTFOUND (at /id) for a missing plan, CM_EINTERNAL when stored data
 * does not read, CM_ENOMEM. */
cm_status srv_plan_input_load(st_db *db, int64_t id, srv_plan_input *pi, cm_error *err);
/* The same for a request: false when a reply (the error) has been sent. */
bool srv_plan_input_get(srv_app *app, srv_req *r, route_args *a, int64_t id, srv_plan_input *pi);
void srv_plan_input_fini(srv_plan_input *pi);

/* GET /v1/plans/{id}/cost (srv_h_advise.c) */
void srv_h_plan_cost(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_memory(srv_app *app, srv_req *r, route_args *a);

/* lint, collectives, suggest, what-if, sweep, compare (srv_h_advise.c) */
void srv_h_plan_advise(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_suggest(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_sweep(srv_app *app, srv_req *r, route_args *a);
void srv_h_plan_whatif(srv_app *app, srv_req *r, route_args *a);
void srv_h_sweep(srv_app *app, srv_req *r, route_args *a);
void srv_h_compare(srv_app *app, srv_req *r, route_args *a);
/* Profile pname (NULL: none, *set false): a stored one, else a built-in
 * one; false (reply sent) when neither (srv_h_advise.c). */
bool srv_profile_by_name(srv_app *app, srv_req *r, route_args *a, const char *pname,
                         sp_profile *prof, bool *set);

/* migration reports (srv_h_migrate.c) */
void srv_h_migration_post(srv_app *app, srv_req *r, route_args *a);
void srv_h_migration_list(srv_app *app, srv_req *r, route_args *a);
void srv_h_migration_get(srv_app *app, srv_req *r, route_args *a);

/* ---- stopping long computations (srv_jobs.c) ------------------------------------------ */

/* Why a computation was told to stop. */
enum { SRV_STOP_NO = 0, SRV_STOP_DEADLINE, SRV_STOP_GONE, SRV_STOP_SHUTDOWN };

/* A computation's stop hook (the planner's cm_cancel, the advisors' cancel):
 * its deadline, its client gone (when it has a request), or the server past
 * its drain (app->stopping). Polled from the computing threads; the first
 * reason seen sticks in why. */
typedef struct srv_stop {
    srv_app *app;
    srv_req *r;      /* the request whose client is watched, or NULL */
    double deadline; /* cm_now() seconds; INFINITY: none */
    atomic_int why;  /* SRV_STOP_* */
} srv_stop;

/* A hook stopping seconds after r was ready (srv_req_ready_at: time spent
 * queued for a handler thread counts), or from now when r is NULL (0: no
 * deadline), watching r's client unless r is NULL. */
void srv_stop_init(srv_stop *s, srv_app *app, srv_req *r, double seconds);
/* The hook itself (ctx: a srv_stop): true once any reason holds. */
bool srv_stop_poll(void *ctx);

/* ---- planning jobs (srv_jobs.c) ------------------------------------------------------ */

/* A planning job: runs on its own thread so the request can give up at its
 * deadline (503 timeout) while the planner finishes in the background. The
 * job is freed by whichever of the two lets go last. */
typedef struct plan_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;
    srv_app *app;
    sp_plan *plan; /* owned: the plan being written (planner/doc/sp_plan.h) */
    cm_buf out;    /* the plan document */
    cm_error err;
    cm_status st;
    /* When the request gives up at its deadline it hands the job what
     * storing the plan needs (detach, called under mu), and the job thread
     * stores the finished plan itself (finish, then keep_free), so that a
     * retry finds it stored instead of planning again. */
    bool abandoned;
    void *(*detach)(void *ctx); /* a heap copy of ctx's store inputs, or NULL */
    void *detach_ctx;
    void (*finish)(struct plan_job *j, void *keep);
    void (*keep_free)(void *keep);
    void *keep;
    struct plan_job *qnext; /* the workers' queue (under app->job_mu) */
    /* --plan-timeout from the job's creation and shutdown past its drain;
     * not the client: a plan given up at the request's deadline goes on to
     * be stored for the retry */
    srv_stop stop;
} plan_job;

/* A job for plan (taken over: destroyed with the job), with one reference
 * held by the caller; NULL when out of memory (plan is not taken then). */
plan_job *srv_job_create(srv_app *app, sp_plan *plan);

/* Drops one reference to j; the last frees it with what it owns. */
void srv_job_unref(plan_job *j);

/* Runs the job with the request's deadline (cm_now() seconds) on a plan
 * worker thread. True when it finished in time (j->st, j->out, j->err hold
 * the result; the caller still holds its reference); false after replying
 * 503 (every worker busy until the deadline, no thread, or the deadline
 * passed while planning: the job then finishes in the background and, when
 * the caller set j->detach/finish/keep_free, stores its plan itself). */
bool srv_job_run(srv_app *app, srv_req *r, plan_job *j, double deadline);

/* Deferred requests (srv_req_defer) waiting for a handler thread, at most,
 * per thread (cfg.threads handler threads), unless cfg.handler_queue says;
 * past it 503. */
#define SRV_HANDLER_QUEUE_PER_THREAD 16u
static inline unsigned srv_handler_queue(const srv_config *c)
{
    return c->handler_queue > 0 ? c->handler_queue : c->threads * SRV_HANDLER_QUEUE_PER_THREAD;
}

/* Deferred requests one client (its token, else its address) may have
 * waiting for or running on the handler threads: cfg.long_per_client, or
 * when that is negative half of what they hold at once (their queue and
 * themselves), so that one client leaves the other half to the rest; 0:
 * no limit. */
static inline unsigned srv_handler_per_client(const srv_config *c)
{
    if (c->long_per_client >= 0) {
        return (unsigned)c->long_per_client;
    }
    unsigned half = (srv_handler_queue(c) + c->threads) / 2;
    return half > 0 ? half : 1;
}

/* Inputs up to this many bytes, without func.call ops, are planned on the
 * request's own thread when its deadline is at least SRV_PLAN_HERE_MIN_S
 * away: no hand-off to a plan worker (two thread switches and their
 * wake-ups: distinct Flax-MLP POSTs about 13% more a second, 10% less CPU
 * each). Inputs of that size plan in about 15 ms at most for the worst
 * shapes built for it (rank-32 tensors on 48-axis meshes, 250 ops) and in
 * up to about 0.2 s with a distinct user priority on every tensor (each
 * priority is one more propagation round, as in Shardy); one that runs
 * past cfg.plan_here_s all the same is stopped and planned again on a
 * worker. Calls are left to the workers because each call site costs its
 * callee again. */
#define SRV_PLAN_HERE_BYTES (64u * 1024)
#define SRV_PLAN_HERE_MIN_S 1.0

/* Runs j on the calling thread (no worker, no request deadline; j->stop
 * still applies), for plans expected to be quick, for at most
 * cfg.plan_here_s seconds. j->st, j->out, j->err hold the result
 * afterwards; returns false when it was stopped at that bound (j is then
 * spent: the caller plans again on a worker), true otherwise. */
bool srv_job_run_here(srv_app *app, plan_job *j);

/* Sets up the plan workers' state (no thread yet); srv_app_create. */
void srv_jobs_init(srv_app *app);
/* Waits for every job, then stops and joins the plan workers; a later
 * srv_job_run starts them again. Idempotent. */
void srv_jobs_stop(srv_app *app);
/* Frees what srv_jobs_init set up (after srv_jobs_stop). */
void srv_jobs_fini(srv_app *app);

#endif /* SRV_INT_H */
