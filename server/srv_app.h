/* SPDX-License-Identifier: Apache-2.0
 * server: the application context of `shardplan serve`: configuration (from
 * flags, SHARDPLAN_* environment variables and a key = value file), the
 * store handles, the plan cache, metrics and the HTTP server. One srv_app
 * per server; it is libmicrohttpd's closure, so nothing mutable is global.
 * Ownership: srv_app_create returns an app freed by srv_app_destroy.
 * Thread contract: create/start/stop/destroy from one thread; requests are
 * served concurrently on the pool threads. */
#ifndef SRV_APP_H
#define SRV_APP_H

#include "cm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_HOST_LEN 64
#define SRV_PATH_LEN 1024
/* A store file this big or bigger is checked at start while the server
 * listens, a smaller one before (srv_app_create, srv_app_start_check). */
#define SRV_CHECK_BESIDE_BYTES ((int64_t)256 << 20)

typedef enum srv_auth_mode {
    SRV_AUTH_AUTO = 0, /* tokens required when listening beyond loopback */
    SRV_AUTH_ON,       /* tokens always required */
    SRV_AUTH_OFF       /* never; beyond loopback only with insecure */
} srv_auth_mode;

typedef struct srv_config {
    char host[SRV_HOST_LEN];   /* numeric listen address */
    uint16_t port;             /* 0: any free port */
    char db_path[SRV_PATH_LEN];
    char log_path[SRV_PATH_LEN]; /* "-": stderr, "": no request log, else a file (appended) */
    unsigned threads;          /* HTTP polling threads */
    unsigned plan_workers;     /* plans computed at once */
    size_t max_body_bytes;     /* request body limit, bytes */
    double request_timeout_s;  /* a plan not done by then answers 503 "timeout" */
    unsigned idle_timeout_s;   /* idle connections closed after, seconds */
    double drain_s;            /* graceful shutdown: wait for in-flight requests, seconds */
    size_t max_inflight_body_bytes; /* all request bodies held at once; past it 503 */
    unsigned max_connections;  /* open connections in total */
    unsigned max_per_ip;       /* open connections per client address */
    double head_timeout_s;     /* a request head must be complete within, seconds (0: none) */
    size_t min_body_rate;      /* bytes/s a body must average after head_timeout_s (0: any) */
    double compute_timeout_s;  /* suggest, what-if, sweep, compare stop after, seconds */
    double plan_timeout_s;     /* a plan stops computing after, seconds (0: never) */
    double plan_here_s;        /* a plan run on its request's thread (SRV_PLAN_HERE_BYTES)
                                * that is not done after this many seconds moves to a plan
                                * worker; not an option (tests set it) */
    unsigned handler_queue;    /* requests waiting for a handler thread, at most (0: 16 per
                                * thread); past it 503; not an option (tests set it) */
    int long_per_client;       /* long requests (on handler threads, waiting or running) of
                                * one client at most: its token, else its address (-1: half
                                * of what the handler threads hold, 0: no limit) */
    double integrity_interval_s; /* /readyz runs quick_check at most this often (0: always) */
    int64_t check_beside_bytes;  /* a store file of this many bytes or more is checked at
                                  * start beside listening (SRV_CHECK_BESIDE_BYTES); not an
                                  * option (tests set it) */
    size_t cache_entries;      /* plans kept in memory */
    srv_auth_mode auth;
    bool insecure;             /* allow a non-loopback address without tokens */
    char web_dir[SRV_PATH_LEN]; /* built dashboard served at / (srv_web.h); "": none */
    char cors_origin[SRV_PATH_LEN]; /* CORS: the origin allowed, "*" any; "": CORS off */
    double bench_time_limit_s;  /* a benchmark run's worker is killed after, seconds */
    size_t bench_memory_mb;     /* RLIMIT_AS of the worker, MiB; 0: none */
    char bench_mpi[SRV_PATH_LEN]; /* an MPI launcher the worker runs under ("mpirun -np 2
                                     ...", split on blanks; the worker gets --mpi); "": none */
    char worker_path[SRV_PATH_LEN]; /* not an option: the executable run as `PATH exec-worker`
                                       for each benchmark run (serve: its own binary); "": no
                                       supervisor, runs stay queued (srv_config_init) */
    bool bench_test_faults;     /* tests only, not an option: accept "fault" in a run spec */
} srv_config;

/* Fills c with the defaults: 127.0.0.1:8080, var/shardplan.db, log to
 * stderr, 4 threads, 2 plan workers, 16 MiB bodies, 256 MiB of bodies in
 * flight, 1000 connections, 128 per client address, 10 s request heads
 * (then 16 KiB/s bodies), 30 s plan time limit, 30 s plan-scoped
 * computations, 60 s idle timeout, 10 s drain, 4096 cached plans, auth
 * auto. */
void srv_config_init(srv_config *c);

/* Sets one option by name (the long flag without dashes: "listen", "db",
 * "log", "threads", "plan-workers", "max-body", "timeout", "idle-timeout",
 * "drain", "max-inflight-body", "max-connections", "max-per-ip", "max-long-per-client",
 * "head-timeout", "min-body-rate", "compute-timeout", "integrity-interval", "cache", "auth" =
 * auto|on|off, "insecure" = true|false, "web" = DIR, "cors-origin" = ORIGIN|*, "bench-time-limit" =
 * seconds, "bench-memory" = MiB (0: no limit)). Errors: CM_EINVAL with err->path "/<name>" for an
 * unknown name or a bad value. */
cm_status srv_config_set(srv_config *c, const char *name, const char *value, cm_error *err);

/* Reads SHARDPLAN_<NAME> (upper case, '-' as '_') for every option, e.g.
 * SHARDPLAN_LISTEN, SHARDPLAN_DB, SHARDPLAN_MAX_BODY. */
cm_status srv_config_from_env(srv_config *c, cm_error *err);

/* Reads a file of `name = value` lines ('#' comments, blank lines).
 * Errors: CM_EIO, CM_EINVAL with err->path "FILE:LINE". */
cm_status srv_config_from_file(srv_config *c, const char *path, cm_error *err);

/* True when host is a loopback address (127.0.0.0/8, ::1). */
bool srv_host_is_loopback(const char *host);

typedef struct srv_app srv_app;

/* Opens the store, refuses a file that fails PRAGMA quick_check
 * (CM_EINTERNAL, the message says what to do) and checks the access
 * policy: on a non-loopback address without any stored token the app is
 * refused (CM_ECONFLICT) unless insecure. A file of check_beside_bytes or
 * more is not checked here but by srv_app_start, beside listening (a check
 * reads the whole file: a minute for 700 MiB from a cold disk).
 * Errors: those of st_db_open, CM_ENOMEM. */
cm_status srv_app_create(const srv_config *c, srv_app **out, cm_error *err);

/* Starts listening (and the start check of a big file, on the checker
 * thread). Errors: CM_EIO when the address cannot be bound. */
cm_status srv_app_start(srv_app *app, cm_error *err);

/* The integrity check at start of a file checked beside listening:
 * SRV_CHECK_RUNNING until its verdict, during which every route but
 * /healthz, /readyz (503 with the reason) and /v1/openapi.json answers 503
 * unavailable; then SRV_CHECK_SOUND, or SRV_CHECK_DAMAGED
 * with the reason in *err (when err is not NULL), the requests still being
 * refused: the caller stops the app (serve exits 1 with the message).
 * SRV_CHECK_SOUND for a file checked before listening. */
typedef enum srv_check_state {
    SRV_CHECK_SOUND = 0,
    SRV_CHECK_RUNNING,
    SRV_CHECK_DAMAGED
} srv_check_state;
srv_check_state srv_app_start_check(srv_app *app, cm_error *err);

/* The bound port (after srv_app_start). */
uint16_t srv_app_port(const srv_app *app);

/* Requests being served right now (for tests and shutdown). */
unsigned srv_app_in_flight(const srv_app *app);

/* Whether requests need a bearer token. */
bool srv_app_auth_required(const srv_app *app);

/* Graceful stop: refuses new connections, lets in-flight requests finish
 * (up to drain_s), waits for running plan jobs, stops the server. */
void srv_app_stop(srv_app *app);

/* Stops if running, closes the store, frees app. NULL is a no-op. */
void srv_app_destroy(srv_app *app);

/* Creates the parent directory of the database path db_path (one level, mode
 * 0755) when it is missing, as srv_app_create does before opening the store;
 * `shardplan token` calls it before st_db_open. Errors: CM_EIO with the
 * reason. */
cm_status srv_db_dir_make(const char *db_path, cm_error *err);

#endif /* SRV_APP_H */
