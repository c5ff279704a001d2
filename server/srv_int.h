/* SPDX-License-Identifier: Apache-2.0
 * server: folder-private definitions shared by srv_app.c, srv_routes.c and
 * srv_metrics.c: the srv_app body, the store handle pool, the plan cache and
 * the metrics. Not a public header (header-check skips *_int.h). */
#ifndef SRV_INT_H
#define SRV_INT_H

#include "srv_app.h"
#include "srv_http.h"
#include "st_db.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- metrics (srv_metrics.c) ------------------------------------------------ */

#define SRV_METRIC_ROUTES  48 /* route slots (srv_routes.c has fewer) */
#define SRV_METRIC_BUCKETS 12
#define SRV_METRIC_CLASSES 5 /* 1xx..5xx */
#define SRV_METRIC_CODES   12

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
    atomic_ullong errors[SRV_METRIC_CODES];
    atomic_uint in_flight;
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_histo_observe(srv_histo *h, double seconds);
/* Prometheus text format; route_names[i] labels slot i (n_routes of them),
 * error_names[i] the error counters. */
void srv_metrics_write(const srv_metrics *m, const char *const *route_names, size_t n_routes,
                       const char *const *error_names, size_t n_errors, cm_buf *out);

/* ---- the plan cache ---------------------------------------------------------- */

/* A reference-counted response body shared by the cache and responses. */
typedef struct srv_blob {
    atomic_uint refs;
    size_t len;
    char data[]; /* len bytes + NUL */
} srv_blob;

srv_blob *srv_blob_create(const char *data, size_t len);
void srv_blob_release(void *blob); /* drops one reference; frees at zero */

#define SRV_CACHE_SLOTS_MIN 64

typedef struct srv_cache_slot {
    int64_t id;     /* plan id, 0 = empty */
    srv_blob *blob; /* the plan response */
} srv_cache_slot;

typedef struct srv_key_slot {
    uint8_t key[CM_SHA256_LEN]; /* hash of the raw request */
    int64_t id;                 /* plan id, 0 = empty */
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

    /* plans: direct-mapped caches, id -> response body, request bytes -> id */
    pthread_mutex_t cache_mu;
    srv_cache_slot *cache;
    srv_key_slot *keys;
    size_t n_slots;
    atomic_ullong generation; /* bumped when meshes or rules change */

    /* plan jobs */
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    unsigned jobs_running; /* threads alive */
    unsigned slots_busy;   /* jobs holding a planning slot */

    srv_metrics metrics;

    /* the benchmark supervisor (srv_bench.c), NULL when not running */
    struct srv_bench *bench;
};

typedef struct srv_bench srv_bench;

/* Store handle pool: take one for the duration of a request, give it back. */
st_db *srv_app_db_acquire(srv_app *app);
void srv_app_db_release(srv_app *app, st_db *db);

/* Plan cache. get returns a new reference (release with srv_blob_release) or
 * NULL; put stores blob (adds a reference). */
srv_blob *srv_cache_get(srv_app *app, int64_t id);
void srv_cache_put(srv_app *app, int64_t id, srv_blob *blob);
void srv_cache_drop(srv_app *app, int64_t id);
int64_t srv_cache_key_get(srv_app *app, const uint8_t key[CM_SHA256_LEN]);
void srv_cache_key_put(srv_app *app, const uint8_t key[CM_SHA256_LEN], int64_t id);
void srv_cache_keys_clear(srv_app *app);

/* The OpenAPI document, server/openapi.json embedded by the Makefile. */
extern const char srv_openapi_json[];
extern const size_t srv_openapi_json_len;

/* ---- routes (srv_routes.c) ------------------------------------------------------- */

/* The request handler and completion hook given to srv_http (cls = app). */
void srv_routes_handle(void *app, srv_req *r);
void srv_routes_done(void *app, const srv_req *r, unsigned status, double dur_s);

#endif /* SRV_INT_H */
