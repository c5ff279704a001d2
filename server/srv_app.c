/* SPDX-License-Identifier: Apache-2.0
 * server: the application context (srv_app.h): configuration from flags,
 * environment and file; the pool of store handles; start, graceful stop.
 * The plan cache is srv_cache.c; the `serve` and `token` commands are
 * cmd/cmd_serve.c. */
#include "srv_app.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_bench.h"
#include "srv_int.h"

/* ---- configuration ------------------------------------------------------------------ */

void srv_config_init(srv_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8080;
    snprintf(c->db_path, sizeof c->db_path, "var/shardplan.db");
    snprintf(c->log_path, sizeof c->log_path, "-");
    c->threads = 4;
    c->plan_workers = 2;
    c->max_body_bytes = (size_t)16 << 20;
    c->request_timeout_s = 30;
    c->idle_timeout_s = 60;
    c->drain_s = 10;
    c->max_inflight_body_bytes = (size_t)256 << 20;
    c->max_connections = 1000;
    c->max_per_ip = 128;
    c->long_per_client = -1;
    c->head_timeout_s = 10;
    c->min_body_rate = 16 << 10;
    c->compute_timeout_s = 30;
    c->plan_timeout_s = 300;
    c->plan_here_s = 0.25;
    c->integrity_interval_s = 300;
    c->check_beside_bytes = SRV_CHECK_BESIDE_BYTES;
    c->cache_entries = 4096;
    c->auth = SRV_AUTH_AUTO;
    c->bench_time_limit_s = 600;
    c->bench_memory_mb = 8192;
}

static bool parse_u64(const char *s, unsigned long long lo, unsigned long long hi,
                      unsigned long long *out)
{
    if (s == NULL || *s == '\0' || !isdigit((unsigned char)*s)) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = 1;
    if (*end == 'k' || *end == 'K') {
        mult = 1024;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        mult = 1024 * 1024;
        end++;
    }
    if (errno != 0 || *end != '\0' || v > hi / mult || v * mult < lo) {
        return false;
    }
    *out = v * mult;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 86400) {
        return false;
    }
    *out = v;
    return true;
}

/* "HOST:PORT", "[V6]:PORT", "HOST" or ":PORT". */
static bool parse_listen(srv_config *c, const char *v)
{
    char host[SRV_HOST_LEN];
    const char *port = NULL;
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (close == NULL || (size_t)(close - v - 1) >= sizeof host) {
            return false;
        }
        memcpy(host, v + 1, (size_t)(close - v - 1));
        host[close - v - 1] = '\0';
        if (close[1] == ':') {
            port = close + 2;
        } else if (close[1] != '\0') {
            return false;
        }
    } else {
        const char *colon = strrchr(v, ':');
        if (colon != NULL && strchr(v, ':') != colon) {
            colon = NULL; /* a bare IPv6 address */
        }
        size_t n = colon != NULL ? (size_t)(colon - v) : strlen(v);
        if (n >= sizeof host) {
            return false;
        }
        memcpy(host, v, n);
        host[n] = '\0';
        port = colon != NULL ? colon + 1 : NULL;
    }
    if (host[0] != '\0') {
        struct in6_addr a6;
        struct in_addr a4;
        if (strcmp(host, "localhost") == 0) {
            snprintf(host, sizeof host, "127.0.0.1");
        }
        if (inet_pton(AF_INET, host, &a4) != 1 && inet_pton(AF_INET6, host, &a6) != 1) {
            return false;
        }
        snprintf(c->host, sizeof c->host, "%s", host);
    }
    if (port != NULL) {
        unsigned long long p = 0;
        if (!parse_u64(port, 0, 65535, &p)) {
            return false;
        }
        c->port = (uint16_t)p;
    }
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
        strcmp(v, "on") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0 ||
        strcmp(v, "off") == 0) {
        *out = false;
        return true;
    }
    return false;
}

cm_status srv_config_set(srv_config *c, const char *name, const char *value, cm_error *err)
{
    unsigned long long u = 0;
    bool ok = true;
    if (value == NULL) {
        return cm_error_set(err, CM_EINVAL, NULL, "option '%s' needs a value", name);
    }
    if (strcmp(name, "listen") == 0) {
        ok = parse_listen(c, value);
    } else if (strcmp(name, "db") == 0) {
        ok = value[0] != '\0' && strlen(value) < sizeof c->db_path;
        if (ok) {
            snprintf(c->db_path, sizeof c->db_path, "%s", value);
        }
    } else if (strcmp(name, "log") == 0) {
        ok = strlen(value) < sizeof c->log_path;
        if (ok) {
            snprintf(c->log_path, sizeof c->log_path, "%s", value);
        }
    } else if (strcmp(name, "threads") == 0) {
        ok = parse_u64(value, 1, 256, &u);
        c->threads = ok ? (unsigned)u : c->threads;
    } else if (strcmp(name, "plan-workers") == 0) {
        ok = parse_u64(value, 1, 256, &u);
        c->plan_workers = ok ? (unsigned)u : c->plan_workers;
    } else if (strcmp(name, "max-body") == 0) {
        ok = parse_u64(value, 1, (unsigned long long)1 << 34, &u);
        c->max_body_bytes = ok ? (size_t)u : c->max_body_bytes;
    } else if (strcmp(name, "timeout") == 0) {
        ok = parse_seconds(value, &c->request_timeout_s) && c->request_timeout_s > 0;
    } else if (strcmp(name, "idle-timeout") == 0) {
        ok = parse_u64(value, 0, 86400, &u);
        c->idle_timeout_s = ok ? (unsigned)u : c->idle_timeout_s;
    } else if (strcmp(name, "drain") == 0) {
        ok = parse_seconds(value, &c->drain_s);
    } else if (strcmp(name, "max-inflight-body") == 0) {
        ok = parse_u64(value, 1, (unsigned long long)1 << 36, &u);
        c->max_inflight_body_bytes = ok ? (size_t)u : c->max_inflight_body_bytes;
    } else if (strcmp(name, "max-connections") == 0) {
        ok = parse_u64(value, 1, 1u << 20, &u);
        c->max_connections = ok ? (unsigned)u : c->max_connections;
    } else if (strcmp(name, "max-per-ip") == 0) {
        ok = parse_u64(value, 0, 1u << 20, &u);
        c->max_per_ip = ok ? (unsigned)u : c->max_per_ip;
    } else if (strcmp(name, "max-long-per-client") == 0) {
        ok = parse_u64(value, 0, 1u << 20, &u);
        c->long_per_client = ok ? (int)u : c->long_per_client;
    } else if (strcmp(name, "min-body-rate") == 0) {
        ok = parse_u64(value, 0, (unsigned long long)1 << 34, &u);
        c->min_body_rate = ok ? (size_t)u : c->min_body_rate;
    } else if (strcmp(name, "head-timeout") == 0) {
        ok = parse_seconds(value, &c->head_timeout_s);
    } else if (strcmp(name, "integrity-interval") == 0) {
        ok = parse_seconds(value, &c->integrity_interval_s);
    } else if (strcmp(name, "plan-timeout") == 0) {
        ok = parse_seconds(value, &c->plan_timeout_s);
    } else if (strcmp(name, "compute-timeout") == 0) {
        ok = parse_seconds(value, &c->compute_timeout_s) && c->compute_timeout_s > 0;
    } else if (strcmp(name, "bench-time-limit") == 0) {
        ok = parse_seconds(value, &c->bench_time_limit_s) && c->bench_time_limit_s > 0;
    } else if (strcmp(name, "bench-memory") == 0) {
        ok = parse_u64(value, 0, 1u << 24, &u);
        c->bench_memory_mb = ok ? (size_t)u : c->bench_memory_mb;
    } else if (strcmp(name, "bench-mpi") == 0) {
        /* a launcher command line: words split on blanks, no line breaks */
        ok = strlen(value) < sizeof c->bench_mpi && strpbrk(value, "\r\n") == NULL;
        if (ok) {
            snprintf(c->bench_mpi, sizeof c->bench_mpi, "%s", value);
        }
    } else if (strcmp(name, "cache") == 0) {
        ok = parse_u64(value, 0, 1u << 24, &u);
        c->cache_entries = ok ? (size_t)u : c->cache_entries;
    } else if (strcmp(name, "auth") == 0) {
        if (strcmp(value, "auto") == 0) {
            c->auth = SRV_AUTH_AUTO;
        } else if (strcmp(value, "on") == 0) {
            c->auth = SRV_AUTH_ON;
        } else if (strcmp(value, "off") == 0) {
            c->auth = SRV_AUTH_OFF;
        } else {
            ok = false;
        }
    } else if (strcmp(name, "insecure") == 0) {
        ok = parse_bool(value, &c->insecure);
    } else if (strcmp(name, "cors-origin") == 0) {
        /* an origin is scheme://host[:port]; no header-breaking bytes */
        ok = strlen(value) < sizeof c->cors_origin && strpbrk(value, "\r\n, ") == NULL;
        if (ok) {
            snprintf(c->cors_origin, sizeof c->cors_origin, "%s", value);
        }
    } else if (strcmp(name, "web") == 0) {
        ok = strlen(value) < sizeof c->web_dir;
        if (ok) {
            snprintf(c->web_dir, sizeof c->web_dir, "%s", value);
        }
    } else {
        return cm_error_set(err, CM_EINVAL, NULL, "unknown option '%s'", name);
    }
    if (!ok) {
        char path[80];
        snprintf(path, sizeof path, "/%s", name);
        return cm_error_set(err, CM_EINVAL, path, "bad value '%s' for option '%s'", value, name);
    }
    return CM_OK;
}

/* clang-format off */
static const char *const option_names[] = {
    "listen", "db", "log", "threads", "plan-workers", "max-body", "timeout", "idle-timeout",
    "drain", "cache", "auth", "insecure", "web", "bench-time-limit", "bench-memory",
    "max-inflight-body", "max-connections", "max-per-ip", "head-timeout", "compute-timeout",
    "integrity-interval", "min-body-rate", "cors-origin", "bench-mpi", "plan-timeout",
    "max-long-per-client",
};
/* clang-format on */

cm_status srv_config_from_env(srv_config *c, cm_error *err)
{
    for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
        char var[64] = "SHARDPLAN_";
        size_t n = strlen(var);
        for (const char *p = option_names[i]; *p != '\0' && n + 1 < sizeof var; p++) {
            var[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        }
        var[n] = '\0';
        const char *v = getenv(var);
        if (v != NULL && srv_config_set(c, option_names[i], v, err) != CM_OK) {
            return err != NULL ? err->code : CM_EINVAL;
        }
    }
    return CM_OK;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

cm_status srv_config_from_file(srv_config *c, const char *path, cm_error *err)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return cm_error_set(err, CM_EIO, NULL, "cannot open config %s: %s", path,
                            strerror(errno));
    }
    char line[2048];
    unsigned lineno = 0;
    cm_status st = CM_OK;
    while (st == CM_OK && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL) {
            *hash = '\0';
        }
        char *s = trim(line);
        if (*s == '\0') {
            continue;
        }
        char *eq = strchr(s, '=');
        char where[64];
        snprintf(where, sizeof where, "%u", lineno);
        if (eq == NULL) {
            st = cm_error_set(err, CM_EINVAL, where, "%s:%u: expected name = value", path,
                              lineno);
            break;
        }
        *eq = '\0';
        cm_error e;
        cm_error_clear(&e);
        if (srv_config_set(c, trim(s), trim(eq + 1), &e) != CM_OK) {
            st = cm_error_set(err, e.code, where, "%s:%u: %s", path, lineno, e.msg);
        }
    }
    fclose(f);
    return st;
}

bool srv_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        return memcmp(a6.s6_addr, lo, 16) == 0;
    }
    return false;
}

/* ---- store pool ---------------------------------------------------------------- */

st_db *srv_app_db_acquire(srv_app *app)
{
    pthread_mutex_lock(&app->db_mu);
    while (app->n_free == 0) {
        pthread_cond_wait(&app->db_cv, &app->db_mu);
    }
    st_db *db = app->free_dbs[--app->n_free];
    pthread_mutex_unlock(&app->db_mu);
    return db;
}

void srv_app_db_release(srv_app *app, st_db *db)
{
    if (db == NULL) {
        return;
    }
    pthread_mutex_lock(&app->db_mu);
    app->free_dbs[app->n_free++] = db;
    pthread_cond_signal(&app->db_cv);
    pthread_mutex_unlock(&app->db_mu);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

cm_status srv_db_dir_make(const char *path, cm_error *err)
{
    char dir[SRV_PATH_LEN];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) {
        return CM_OK;
    }
    *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return cm_error_set(err, CM_EIO, NULL, "cannot create %s: %s", dir, strerror(errno));
    }
    return CM_OK;
}

static bool any_token(st_db *db)
{
    st_token_query q;
    st_token_query_init(&q);
    q.limit = 1;
    st_token_list l;
    memset(&l, 0, sizeof l);
    bool any = st_token_list_query(db, &q, &l, NULL) == CM_OK && l.n_items > 0;
    st_token_list_fini(&l);
    return any;
}

/* err, a failure of opening or checking the database at path, as the
 * refusal a damaged file gets at start: CM_EINTERNAL is our reading of the
 * file failing (its schema, its pages), so it says to restore a backup. */
static cm_status damaged_at_start(const char *path, cm_status st, cm_error *err)
{
    if (st != CM_EINTERNAL) {
        return st;
    }
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    cm_error_clear(err);
    return cm_error_set(err, CM_EINTERNAL, NULL,
                        "database %s fails its integrity check (%s): restore it from a backup "
                        "(shardplan restore, docs/operations.md)",
                        path, why);
}

cm_status srv_app_create(const srv_config *c, srv_app **out, cm_error *err)
{
    *out = NULL;
    srv_app *app = cm_calloc(1, sizeof *app);
    if (app == NULL) {
        return cm_error_oom(err);
    }
    app->cfg = *c;
    app->log_fd = -1;
    pthread_mutex_init(&app->db_mu, NULL);
    pthread_cond_init(&app->db_cv, NULL);
    srv_cache_init(app);
    pthread_mutex_init(&app->ready_mu, NULL);
    pthread_cond_init(&app->check_cv, NULL);
    atomic_init(&app->checks, 0);
    pthread_mutex_init(&app->job_mu, NULL);
    pthread_mutex_init(&app->idem_mu, NULL);
    pthread_cond_init(&app->job_cv, NULL);
    srv_jobs_init(app);
    srv_metrics_init(&app->metrics);
    atomic_init(&app->generation, 1);
    cm_status st = srv_db_dir_make(c->db_path, err);
    /* one handle per HTTP thread, per handler thread and per plan worker,
     * plus one spare */
    size_t n = 2 * (size_t)c->threads + c->plan_workers + 1;
    app->dbs = cm_calloc(n, sizeof *app->dbs);
    app->free_dbs = cm_calloc(n, sizeof *app->free_dbs);
    if (st == CM_OK && (app->dbs == NULL || app->free_dbs == NULL)) {
        st = cm_error_oom(err);
    }
    if (st == CM_OK) {
        st = st_group_create(&app->db_group, err); /* plan puts share commits */
    }
    for (size_t i = 0; st == CM_OK && i < n; i++) {
        /* damaged where opening reads (its schema, say): the same clear
         * refusal as the quick check's below */
        st = damaged_at_start(c->db_path, st_db_open(c->db_path, &app->dbs[i], err), err);
        if (st == CM_OK) {
            st_db_join_group(app->dbs[i], app->db_group);
            app->free_dbs[app->n_free++] = app->dbs[i];
            app->n_dbs++;
        }
    }
    struct stat sb;
    if (st == CM_OK && stat(c->db_path, &sb) == 0 && (int64_t)sb.st_size >= c->check_beside_bytes) {
        /* a big file is checked beside listening (srv_app_start) */
        atomic_store(&app->start_check, SRV_CHECK_RUNNING);
        app->start_check_mib = (int64_t)sb.st_size >> 20;
    } else if (st == CM_OK) {
        /* refuse a damaged file at start, clearly, rather than fail requests */
        cm_error qe;
        cm_error_clear(&qe);
        if (st_db_quick_check(app->dbs[0], &qe) != CM_OK) {
            *err = qe;
            st = damaged_at_start(c->db_path, CM_EINTERNAL, err);
        }
        app->checked_at = cm_now(); /* /readyz's first verdict */
    }
    if (st == CM_OK) {
        /* the plan puts' transactions on a handle of their own */
        st =
            damaged_at_start(c->db_path, st_group_open_writer(app->db_group, c->db_path, err), err);
    }
    if (st == CM_OK) {
        st = damaged_at_start(c->db_path, st_db_open(c->db_path, &app->watch_db, err), err);
    }
    if (st == CM_OK) {
        int64_t v = 0;
        st = st_db_data_version(app->watch_db, &v, err);
        app->data_version = v;
    }
    if (st == CM_OK) {
        st = srv_cache_alloc(app, c->cache_entries, err);
    }
    if (st == CM_OK) {
        bool loopback = srv_host_is_loopback(c->host);
        app->auth = c->auth == SRV_AUTH_ON || (!loopback && !c->insecure && c->auth != SRV_AUTH_OFF);
        if (!loopback && !c->insecure && c->auth == SRV_AUTH_OFF) {
            st = cm_error_set(err, CM_ECONFLICT, NULL,
                              "refusing auth=off on non-loopback address %s without --insecure",
                              c->host);
        } else if (!loopback && app->auth && !any_token(app->dbs[0])) {
            st = cm_error_set(err, CM_ECONFLICT, NULL,
                              "refusing to listen on non-loopback address %s without any API "
                              "token: create one with `shardplan token create --scope admin` "
                              "or pass --insecure",
                              c->host);
        }
    }
    if (st == CM_OK && strcmp(c->log_path, "-") == 0) {
        app->log_fd = STDERR_FILENO;
    } else if (st == CM_OK && c->log_path[0] != '\0') {
        app->log_fd = open(c->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (app->log_fd < 0) {
            st = cm_error_set(err, CM_EIO, NULL, "cannot open log %s: %s", c->log_path,
                              strerror(errno));
        } else {
            app->own_log_fd = true;
        }
    }
    if (st != CM_OK) {
        srv_app_destroy(app);
        return st;
    }
    *out = app;
    return CM_OK;
}

/* The drain time is over (srv_http_stop): computations still running stop. */
static void app_drained(void *cls)
{
    srv_app *app = cls;
    atomic_store(&app->stopping, true);
}

cm_status srv_app_start(srv_app *app, cm_error *err)
{
    srv_http_opts o;
    memset(&o, 0, sizeof o);
    o.host = app->cfg.host;
    o.port = app->cfg.port;
    o.threads = app->cfg.threads;
    o.max_body_bytes = app->cfg.max_body_bytes;
    o.idle_timeout_s = app->cfg.idle_timeout_s;
    o.max_inflight_body_bytes = app->cfg.max_inflight_body_bytes;
    o.max_connections = app->cfg.max_connections;
    o.max_per_ip = app->cfg.max_per_ip;
    o.head_timeout_s = app->cfg.head_timeout_s;
    o.min_body_rate = app->cfg.min_body_rate;
    o.log_fd = app->log_fd;
    o.handler = srv_routes_handle;
    o.done = srv_routes_done;
    o.early = srv_routes_early;
    o.handler_threads = app->cfg.threads;
    o.handler_queue = srv_handler_queue(&app->cfg);
    o.handler_per_client = srv_handler_per_client(&app->cfg);
    o.refuse = srv_reply_refusal;
    o.library_refused = srv_reply_count_refusal;
    o.drained = app_drained;
    o.cls = app;
    atomic_store(&app->stopping, false);
    cm_status st = srv_http_start(&o, &app->http, err);
    app->running = st == CM_OK;
    if (st == CM_OK && atomic_load(&app->start_check) == SRV_CHECK_RUNNING) {
        pthread_mutex_lock(&app->ready_mu);
        srv_checker_want(app);
        bool asked = app->check_want;
        pthread_mutex_unlock(&app->ready_mu);
        if (!asked) {
            srv_app_stop(app);
            st = cm_error_set(err, CM_EIO, NULL, "cannot start the integrity check of %s",
                              app->cfg.db_path);
        }
    }
    if (st == CM_OK) {
        st = srv_bench_start(app, err);
        if (st != CM_OK) {
            srv_app_stop(app);
        }
    }
    return st;
}

srv_check_state srv_app_start_check(srv_app *app, cm_error *err)
{
    srv_check_state s = (srv_check_state)atomic_load(&app->start_check);
    if (s == SRV_CHECK_DAMAGED && err != NULL) {
        pthread_mutex_lock(&app->ready_mu);
        *err = app->check_err;
        pthread_mutex_unlock(&app->ready_mu);
        (void)damaged_at_start(app->cfg.db_path, err->code, err);
    }
    return s;
}

uint16_t srv_app_port(const srv_app *app)
{
    return app->http != NULL ? srv_http_port(app->http) : 0;
}

unsigned srv_app_in_flight(const srv_app *app)
{
    return app->http != NULL ? srv_http_in_flight(app->http) : 0;
}

bool srv_app_auth_required(const srv_app *app)
{
    return app->auth;
}

void srv_app_stop(srv_app *app)
{
    if (app == NULL || !app->running) {
        return;
    }
    srv_http_stop(app->http, app->cfg.drain_s);
    app->http = NULL;
    /* after the requests: a run queued meanwhile stays queued for the next start */
    srv_bench_stop(app);
    app->running = false;
    /* plan jobs abandoned by a timed-out request may still run: they saw
     * app->stopping (app_drained) and stop at their next poll */
    srv_jobs_stop(app);
}

void srv_app_destroy(srv_app *app)
{
    if (app == NULL) {
        return;
    }
    srv_app_stop(app);
    srv_jobs_stop(app); /* when never started: jobs run by a test */
    srv_jobs_fini(app);
    srv_checker_stop(app);
    for (size_t i = 0; i < app->n_dbs; i++) {
        st_db_close(app->dbs[i]);
    }
    st_group_destroy(app->db_group);
    st_db_close(app->watch_db);
    app->watch_db = NULL;
    pthread_mutex_destroy(&app->ready_mu);
    pthread_cond_destroy(&app->check_cv);
    srv_cache_fini(app);
    cm_free(app->dbs);
    cm_free(app->free_dbs);
    if (app->own_log_fd) {
        close(app->log_fd);
    }
    pthread_mutex_destroy(&app->db_mu);
    pthread_cond_destroy(&app->db_cv);
    pthread_mutex_destroy(&app->job_mu);
    pthread_mutex_destroy(&app->idem_mu);
    pthread_cond_destroy(&app->job_cv);
    cm_free(app);
}
