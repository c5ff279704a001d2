/* SPDX-License-Identifier: Apache-2.0
 * server: the benchmark supervisor (srv_bench.h). One thread claims queued
 * runs and runs each in a fresh child process, `PATH exec-worker`, fed the
 * plan's graph on stdin; the child's stdout is a line protocol ("progress
 * F", then "result JSON" or "error MESSAGE"). Between fork and exec only
 * async-signal-safe calls are made (the server is multithreaded). Also
 * GET /v1/benchmarks/{id}/trace: the stored timeline of a run as a Chrome
 * trace (srv_h_bench_trace). */
#include "srv_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cm_json.h"
#include "srv_client.h"
#include "srv_int.h"
#include "srv_json.h"

#define WEBHOOK_ATTEMPTS  3   /* deliveries tried */
#define WEBHOOK_TIMEOUT_S 5.0 /* per attempt */
#define POLL_MS           100 /* stop-flag and queue polling interval */
#define LINGER_S          5.0 /* a worker that answered is killed if still alive after */

struct srv_bench {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;   /* under mu */
    bool kicked;     /* under mu: a run was queued */
    int64_t current; /* under mu: the run whose worker is alive, 0 when none */
    int64_t cancel;  /* under mu: the run to cancel (== current), 0 when none */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool stopping(srv_app *app)
{
    pthread_mutex_lock(&app->bench->mu);
    bool s = app->bench->stopping;
    pthread_mutex_unlock(&app->bench->mu);
    return s;
}

static void set_current(srv_app *app, int64_t id)
{
    pthread_mutex_lock(&app->bench->mu);
    app->bench->current = id;
    app->bench->cancel = 0;
    pthread_cond_broadcast(&app->bench->cv); /* a canceller waits for this */
    pthread_mutex_unlock(&app->bench->mu);
}

static bool cancel_requested(srv_app *app, int64_t id)
{
    pthread_mutex_lock(&app->bench->mu);
    bool c = app->bench->cancel == id;
    pthread_mutex_unlock(&app->bench->mu);
    return c;
}

bool srv_bench_cancel(srv_app *app, int64_t id, double timeout_s)
{
    srv_bench *b = app->bench;
    if (b == NULL || id <= 0) {
        return false;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = (long)((timeout_s - (double)(long)timeout_s) * 1e9);
    until.tv_sec += (time_t)timeout_s + (until.tv_nsec + ns) / 1000000000L;
    until.tv_nsec = (until.tv_nsec + ns) % 1000000000L;
    pthread_mutex_lock(&b->mu);
    bool running = b->current == id;
    if (running) {
        b->cancel = id;
        while (b->current == id && !b->stopping) {
            if (pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT) {
                break;
            }
        }
    }
    pthread_mutex_unlock(&b->mu);
    return running;
}

/* Sleeps up to ms or until stop or a kick. */
static void nap(srv_app *app, long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ms * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    srv_bench *b = app->bench;
    pthread_mutex_lock(&b->mu);
    while (!b->stopping && !b->kicked) {
        if (pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    b->kicked = false;
    pthread_mutex_unlock(&b->mu);
}

cm_status srv_bench_webhook_check(const char *url, const char *path, cm_error *err)
{
    static const char scheme[] = "http://";
    if (strlen(url) > 512 || strncmp(url, scheme, sizeof scheme - 1) != 0) {
        return cm_error_set(err, CM_EINVAL, path,
                            "webhook must be an http:// URL to a loopback address");
    }
    const char *h = url + sizeof scheme - 1;
    char host[64];
    size_t n;
    if (*h == '[') {
        n = strcspn(h + 1, "]");
        if (h[1 + n] != ']') {
            n = sizeof host;
        }
        h++;
    } else {
        n = strcspn(h, ":/?#");
    }
    if (n == 0 || n >= sizeof host || memchr(h, '@', n) != NULL) {
        return cm_error_set(err, CM_EINVAL, path, "webhook URL has no usable host");
    }
    memcpy(host, h, n);
    host[n] = '\0';
    if (strcmp(host, "localhost") != 0 && !srv_host_is_loopback(host)) {
        return cm_error_set(err, CM_EINVAL, path,
                            "webhook host '%s' is not a loopback address (127.0.0.0/8, [::1], "
                            "localhost)",
                            host);
    }
    return CM_OK;
}

/* ---- store access ---------------------------------------------------------------- */

static void set_progress(srv_app *app, int64_t id, double p)
{
    st_db *db = srv_app_db_acquire(app);
    st_bench_update u = {ST_BENCH_RUNNING, p, NULL, 0, NULL};
    st_bench_set(db, id, &u, NULL);
    srv_app_db_release(app, db);
}

/* Runs "running" at start-up were cut off by an earlier process. */
static void fail_leftovers(srv_app *app)
{
    st_db *db = srv_app_db_acquire(app);
    st_bench_query q;
    st_bench_query_init(&q);
    q.has_status = true;
    q.status = ST_BENCH_RUNNING;
    for (;;) {
        st_bench_list l;
        memset(&l, 0, sizeof l);
        if (st_bench_list_query(db, &q, &l, NULL) != CM_OK) {
            break;
        }
        for (size_t i = 0; i < l.n_items; i++) {
            st_bench_update u = {ST_BENCH_FAILED, l.items[i].progress, NULL, 0, "server stopped"};
            st_bench_set(db, l.items[i].id, &u, NULL);
        }
        q.after_id = l.next_after;
        st_bench_list_fini(&l);
        if (q.after_id == 0) {
            break;
        }
    }
    srv_app_db_release(app, db);
}

/* ---- the worker process --------------------------------------------------------- */

typedef struct outcome {
    bool ok;
    bool canceled;   /* by srv_bench_cancel */
    char *result;    /* heap JSON from the worker, or NULL */
    char error[640]; /* the reason a run failed */
} outcome;

static void set_cloexec(int fd)
{
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

/* Handles complete lines in buf (consumed from the front). */
static void take_lines(srv_app *app, int64_t id, cm_buf *buf, outcome *o)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(buf->data + start, '\n', buf->len - start);
        if (nl == NULL) {
            break;
        }
        *nl = '\0';
        const char *line = buf->data + start;
        if (strncmp(line, "progress ", 9) == 0) {
            double p = strtod(line + 9, NULL);
            if (p >= 0 && p <= 1) {
                set_progress(app, id, p);
            }
        } else if (strncmp(line, "result ", 7) == 0 && o->result == NULL) {
            o->result = cm_alloc(strlen(line + 7) + 1);
            if (o->result != NULL) {
                strcpy(o->result, line + 7);
            }
        } else if (strncmp(line, "error ", 6) == 0 && o->error[0] == '\0') {
            snprintf(o->error, sizeof o->error, "%s", line + 6);
        }
        start = (size_t)(nl - buf->data) + 1;
    }
    memmove(buf->data, buf->data + start, buf->len - start);
    buf->len -= start;
}

/* Runs `shardplan exec-worker` on the plan input: stdin carries rules_len
 * bytes of the rules document (if any), then the model text; the plan's
 * pass is named on the command line. */
static void run_worker(srv_app *app, int64_t id, const srv_bench_spec *s, const char *pass,
                       size_t rules_len, const char *input, size_t input_len, outcome *o)
{
    const srv_config *c = &app->cfg;
    const char *path = c->worker_path;
    char a_dev[24], a_warm[24], a_it[24], a_seed[24];
    snprintf(a_dev, sizeof a_dev, "%u", s->devices);
    snprintf(a_warm, sizeof a_warm, "%u", s->warmup);
    snprintf(a_it, sizeof a_it, "%u", s->iters);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)s->seed);
    char a_rules[24];
    snprintf(a_rules, sizeof a_rules, "%zu", rules_len);
    /* Under an MPI launcher (--bench-mpi "mpirun -np 2 ..."): its words
     * first, then the worker with --mpi (docs/operations.md). Split here,
     * before the fork, into a copy. */
    enum { MAX_LAUNCHER = 48 };
    char launcher[SRV_PATH_LEN];
    const char *argv[18 + MAX_LAUNCHER + 1];
    size_t n_argv = 0;
    snprintf(launcher, sizeof launcher, "%s", c->bench_mpi);
    char *save = NULL;
    for (char *w = strtok_r(launcher, " \t", &save); w != NULL && n_argv < MAX_LAUNCHER;
         w = strtok_r(NULL, " \t", &save)) {
        argv[n_argv++] = w;
    }
    bool mpi = n_argv > 0;
    const char *base[] = {path,   "exec-worker", "--devices", a_dev,    "--warmup",
                          a_warm, "--iters",     a_it,        "--seed", a_seed};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        argv[n_argv++] = base[i];
    }
    if (mpi) {
        argv[n_argv++] = "--mpi";
    }
    if (pass != NULL && pass[0] != '\0') {
        argv[n_argv++] = "--pass";
        argv[n_argv++] = pass;
    }
    if (rules_len > 0) {
        argv[n_argv++] = "--rules-bytes";
        argv[n_argv++] = a_rules;
    }
    if (s->affinity >= 0) {
        argv[n_argv++] = s->affinity > 0 ? "--affinity" : "--no-affinity";
    }
    if (s->fault[0] != '\0') {
        argv[n_argv++] = "--fault";
        argv[n_argv++] = s->fault;
    }
    argv[n_argv] = NULL;
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)c->bench_memory_mb << 20;
    int in[2], out[2];
    if (pipe(in) != 0) {
        snprintf(o->error, sizeof o->error, "cannot start the worker: %s", strerror(errno));
        return;
    }
    if (pipe(out) != 0) {
        snprintf(o->error, sizeof o->error, "cannot start the worker: %s", strerror(errno));
        close(in[0]);
        close(in[1]);
        return;
    }
    set_cloexec(in[1]);
    set_cloexec(out[0]);
    sigset_t none;
    sigemptyset(&none);
    pid_t pid = fork();
    if (pid == 0) {
        /* child: async-signal-safe calls only */
        sigprocmask(SIG_SETMASK, &none, NULL); /* SIGPIPE is blocked in this thread */
        dup2(in[0], 0);
        dup2(out[1], 1);
        for (int fd = 3; fd < 1024; fd++) {
            close(fd);
        }
        if (c->bench_memory_mb > 0) {
            setrlimit(RLIMIT_AS, &rl);
        }
        if (mpi) {
            execvp(argv[0], (char *const *)(uintptr_t)argv); /* the launcher, from PATH */
        } else {
            execv(path, (char *const *)(uintptr_t)argv);
        }
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        snprintf(o->error, sizeof o->error, "cannot start the worker: %s", strerror(errno));
        close(in[1]);
        close(out[0]);
        return;
    }
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
    int wfd = in[1], rfd = out[0];
    size_t sent = 0;
    cm_buf buf;
    cm_buf_init(&buf);
    double deadline = now_s() + c->bench_time_limit_s;
    const char *killed_for = NULL;
    double final_at = 0;  /* when the result or error line arrived */
    double killed_at = 0; /* when a launcher was sent SIGTERM */
    while (rfd >= 0) {
        if (wfd >= 0 && sent == input_len) {
            close(wfd);
            wfd = -1;
        }
        struct pollfd p[2] = {{rfd, POLLIN, 0}, {wfd, POLLOUT, 0}};
        int r = poll(p, wfd >= 0 ? 2 : 1, POLL_MS);
        double t = now_s();
        if (final_at == 0 && (o->result != NULL || o->error[0] != '\0')) {
            final_at = t;
        }
        if (stopping(app)) {
            killed_for = "server stopped";
        } else if (cancel_requested(app, id)) {
            killed_for = "canceled";
        } else if (final_at > 0 && t > final_at + LINGER_S) {
            /* it answered but does not exit (seen: OpenBLAS's exit handler
               joining a thread stuck after RLIMIT_AS refused memory) */
            killed_for = "lingered";
        } else if (t > deadline) {
            killed_for = "time limit";
        }
        if (killed_for != NULL) {
            /* a launcher is asked first, so it takes its processes down */
            kill(pid, mpi ? SIGTERM : SIGKILL);
            killed_at = t;
            break;
        }
        if (r <= 0) {
            continue;
        }
        if (wfd >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
            ssize_t w = write(wfd, input + sent, input_len - sent);
            if (w > 0) {
                sent += (size_t)w;
            } else if (errno != EAGAIN && errno != EINTR) {
                sent = input_len; /* the worker stopped reading: its exit tells why */
            }
        }
        if ((p[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
            char chunk[4096];
            ssize_t n = read(rfd, chunk, sizeof chunk);
            if (n > 0) {
                cm_buf_append(&buf, chunk, (size_t)n);
                if (buf.len > 0) {
                    take_lines(app, id, &buf, o);
                }
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                close(rfd);
                rfd = -1;
            }
        }
    }
    if (wfd >= 0) {
        close(wfd);
    }
    if (rfd >= 0) {
        close(rfd);
    }
    cm_buf_fini(&buf);
    /* stdout closed: the worker is exiting; bound the wait all the same */
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (killed_for == NULL && now_s() > deadline) {
            killed_for = "time limit";
            kill(pid, SIGKILL);
        } else if (killed_for == NULL && stopping(app)) {
            killed_for = "server stopped";
            kill(pid, SIGKILL);
        } else if (killed_at > 0 && now_s() > killed_at + 5.0) {
            kill(pid, SIGKILL); /* the launcher did not stop on SIGTERM */
            killed_at = 0;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (killed_for != NULL && strcmp(killed_for, "lingered") == 0) {
        o->ok = o->result != NULL; /* its answer stands */
    } else if (killed_for != NULL && strcmp(killed_for, "canceled") == 0) {
        o->canceled = true;
        snprintf(o->error, sizeof o->error, "canceled by request");
    } else if (killed_for != NULL && strcmp(killed_for, "time limit") == 0) {
        snprintf(o->error, sizeof o->error, "time limit %g s exceeded", c->bench_time_limit_s);
    } else if (killed_for != NULL) {
        snprintf(o->error, sizeof o->error, "%s", killed_for);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(o->error, sizeof o->error, "worker killed by signal %d (%s)%s", sig,
                 strsignal(sig),
                 c->bench_memory_mb > 0 && (sig == SIGSEGV || sig == SIGABRT || sig == SIGKILL)
                     ? "; it may have run out of memory"
                     : "");
    } else if (WEXITSTATUS(status) == 0 && o->result != NULL) {
        o->ok = true;
    } else if (o->error[0] == '\0' && mpi) {
        snprintf(o->error, sizeof o->error,
                 "MPI job exited with status %d%s: a process of it failed or died before it "
                 "answered (the launcher's message is on the server's standard error)",
                 WEXITSTATUS(status),
                 WEXITSTATUS(status) == 127 ? ", or the launcher cannot be executed" : "");
    } else if (o->error[0] == '\0') {
        snprintf(o->error, sizeof o->error, "worker exited with status %d%s", WEXITSTATUS(status),
                 WEXITSTATUS(status) == 127 ? " (cannot execute it)" : "");
    } /* else the worker's own message */
    if (!o->ok && strncmp(o->error, "out of memory", 13) == 0 && c->bench_memory_mb > 0) {
        size_t n = strlen(o->error);
        snprintf(o->error + n, sizeof o->error - n, " (worker memory limit %zu MiB)",
                 c->bench_memory_mb);
    }
    if (!o->ok) {
        cm_free(o->result);
        o->result = NULL;
    }
}

/* ---- one run ----------------------------------------------------------------------- */

/* POSTs the final run JSON; appends the delivery record to rec. */
static void deliver(srv_app *app, const char *url, const cm_buf *body, cm_buf *rec)
{
    long status = 0;
    int attempt = 0;
    cm_error e;
    cm_error_clear(&e);
    bool ok = false;
    double backoff = 0.5;
    while (attempt < WEBHOOK_ATTEMPTS && !stopping(app)) {
        attempt++;
        cm_error_clear(&e);
        if (srv_client_post_json(url, body->data, body->len, WEBHOOK_TIMEOUT_S, &status, &e) ==
                CM_OK &&
            status >= 200 && status < 300) {
            ok = true;
            break;
        }
        if (attempt < WEBHOOK_ATTEMPTS) {
            nap(app, (long)(backoff * 1000));
            backoff *= 2;
        }
    }
    cm_buf_putc(rec, '{');
    cm_json_put_kv_str(rec, "url", url);
    cm_json_put_kv_bool(rec, "delivered", ok);
    cm_json_put_kv_i64(rec, "attempts", attempt);
    cm_json_put_kv_i64(rec, "http_status", status);
    if (!ok) {
        cm_json_put_kv_str(rec, "error", e.msg[0] != '\0' ? e.msg : "non-2xx answer");
    }
    cm_buf_putc(rec, '}');
}

/* Stores the run's final status, then calls its webhook and completes the
 * stored results with the delivery record: whoever the webhook wakes reads the
 * final status. */
static void finish(srv_app *app, const st_bench *run, outcome *o)
{
    st_bench_status fin = o->ok ? ST_BENCH_SUCCEEDED
                          : o->canceled ? ST_BENCH_CANCELED
                                        : ST_BENCH_FAILED;
    cm_buf results;
    cm_buf_init(&results);
    if (o->result != NULL) {
        cm_buf_puts(&results, o->result);
    }
    st_bench_update u = {fin, o->ok ? 1.0 : 0.0,
                         results.len > 0 && !results.oom ? results.data : NULL, results.len,
                         o->ok ? NULL : o->error};
    st_db *db = srv_app_db_acquire(app);
    if (!o->ok) {
        st_bench x;
        memset(&x, 0, sizeof x);
        if (st_bench_get(db, run->id, &x, NULL) == CM_OK) {
            u.progress = x.progress; /* where it got to */
            st_bench_fini(&x);
        }
    }
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_set(db, run->id, &u, &e) != CM_OK && u.results != NULL) {
        u.results = NULL; /* e.g. the results were not JSON: keep status and reason */
        u.status = fin = ST_BENCH_FAILED;
        u.error = e.msg;
        results.len = 0;
        if (st_bench_set(db, run->id, &u, NULL) != CM_OK) {
            st_bench x; /* final already (canceled meanwhile): report what is stored */
            memset(&x, 0, sizeof x);
            if (st_bench_get(db, run->id, &x, NULL) == CM_OK) {
                fin = x.status;
                st_bench_fini(&x);
            }
        }
    }
    srv_app_db_release(app, db);
    bool stopped = strcmp(o->error, "server stopped") == 0;
    if (run->webhook_url != NULL && !stopped) {
        cm_buf body;
        cm_buf_init(&body);
        cm_buf_putc(&body, '{');
        cm_json_put_kv_i64(&body, "id", run->id);
        cm_json_put_kv_i64(&body, "plan_id", run->plan_id);
        cm_json_put_kv_str(&body, "status", st_bench_status_name(fin));
        cm_json_put_key(&body, "spec");
        cm_buf_puts(&body, run->spec != NULL ? run->spec : "{}");
        cm_json_put_key(&body, "results");
        cm_buf_puts(&body, results.len > 0 ? o->result : "null");
        const char *why = u.error != NULL ? u.error : o->error;
        cm_json_put_kv_str(&body, "error", fin == ST_BENCH_SUCCEEDED ? NULL : why);
        cm_buf_putc(&body, '}');
        /* the delivery record goes into the stored results */
        if (results.len > 0) {
            results.len--; /* the closing brace of the worker's object */
            cm_buf_puts(&results, ",\"webhook\":");
        } else {
            cm_buf_puts(&results, "{\"webhook\":");
        }
        if (!body.oom) {
            deliver(app, run->webhook_url, &body, &results);
        } else {
            cm_buf_puts(&results, "null");
        }
        cm_buf_putc(&results, '}');
        cm_buf_fini(&body);
        if (!results.oom) {
            st_bench_update w = {fin, u.progress, results.data, results.len, NULL};
            db = srv_app_db_acquire(app);
            st_bench_set(db, run->id, &w, NULL);
            srv_app_db_release(app, db);
        }
    }
    cm_buf_fini(&results);
}

static void run_one(srv_app *app, int64_t id)
{
    outcome o;
    memset(&o, 0, sizeof o);
    st_bench run;
    memset(&run, 0, sizeof run);
    cm_error e;
    cm_error_clear(&e);
    set_current(app, id); /* before the read: a cancel from now on is seen */
    st_db *db = srv_app_db_acquire(app);
    cm_status st = st_bench_get(db, id, &run, &e);
    srv_app_db_release(app, db);
    if (st != CM_OK || run.status != ST_BENCH_RUNNING) {
        set_current(app, 0);
        st_bench_fini(&run);
        return; /* deleted or canceled meanwhile */
    }
    srv_bench_spec s;
    if (srv_json_bench_spec_decode(run.spec != NULL ? run.spec : "{}",
                                   run.spec != NULL ? run.spec_len : 2, &s, &e) != CM_OK) {
        snprintf(o.error, sizeof o.error, "bad spec at %s: %s", e.path, e.msg);
    } else if (s.fault[0] != '\0' && !app->cfg.bench_test_faults) {
        snprintf(o.error, sizeof o.error, "test faults are not enabled on this server");
    } else if (run.plan_id == 0) {
        snprintf(o.error, sizeof o.error, "the run has no plan (deleted?)");
    } else {
        /* the plan as it was made: its input, rules and pass */
        srv_plan_input pi;
        db = srv_app_db_acquire(app);
        st = srv_plan_input_load(db, run.plan_id, &pi, &e);
        srv_app_db_release(app, db);
        cm_buf in;
        cm_buf_init(&in);
        if (st == CM_OK) {
            if (pi.io.rules != NULL) {
                cm_buf_append(&in, pi.io.rules, pi.io.rules_len);
            }
            cm_buf_append(&in, pi.text, pi.len);
        }
        if (st != CM_OK) {
            snprintf(o.error, sizeof o.error, "cannot read plan %lld: %s", (long long)run.plan_id,
                     e.msg);
        } else if (in.oom) {
            snprintf(o.error, sizeof o.error, "out of memory for the plan's input");
        } else {
            run_worker(app, id, &s, pi.pass, pi.io.rules != NULL ? pi.io.rules_len : 0, in.data,
                       in.len, &o);
        }
        cm_buf_fini(&in);
        srv_plan_input_fini(&pi);
    }
    finish(app, &run, &o);
    set_current(app, 0); /* after the final status: a canceller waits for it */
    cm_free(o.result);
    st_bench_fini(&run);
}

static void *bench_thread(void *arg)
{
    srv_app *app = arg;
    /* a worker that dies before reading its input must give EPIPE here, not
       a process-wide SIGPIPE (an embedding program may not ignore it) */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    /* nothing read from a store whose check at start has not passed */
    while (!stopping(app) && srv_app_start_check(app, NULL) == SRV_CHECK_RUNNING) {
        nap(app, 250);
    }
    if (srv_app_start_check(app, NULL) != SRV_CHECK_SOUND) {
        return NULL;
    }
    fail_leftovers(app);
    while (!stopping(app)) {
        int64_t id = 0;
        st_db *db = srv_app_db_acquire(app);
        cm_status st = st_bench_claim(db, &id, NULL);
        srv_app_db_release(app, db);
        if (st == CM_OK) {
            run_one(app, id);
        } else {
            nap(app, 250);
        }
    }
    return NULL;
}

cm_status srv_bench_start(srv_app *app, cm_error *err)
{
    if (app->bench != NULL || app->cfg.worker_path[0] == '\0') {
        return CM_OK;
    }
    srv_bench *b = cm_calloc(1, sizeof *b);
    if (b == NULL) {
        return cm_error_oom(err);
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    app->bench = b;
    if (pthread_create(&b->thread, NULL, bench_thread, app) != 0) {
        app->bench = NULL;
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        cm_free(b);
        return cm_error_set(err, CM_EIO, NULL, "cannot start the benchmark supervisor");
    }
    return CM_OK;
}

void srv_bench_stop(srv_app *app)
{
    srv_bench *b = app->bench;
    if (b == NULL) {
        return;
    }
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    app->bench = NULL;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    cm_free(b);
}

void srv_bench_kick(srv_app *app)
{
    srv_bench *b = app->bench;
    if (b == NULL) {
        return;
    }
    pthread_mutex_lock(&b->mu);
    b->kicked = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* ---- GET /v1/benchmarks/{id}/trace ---------------------------------------------------- */

/* One stored timeline op entry ("ops" of results.timeline). */
static const char *str_of(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : dflt;
}

/* Writes the trace event "X" of one event [dev, op, ts, dur, wait] (and
 * the wait inside a collective as a nested "X"); false when malformed. */
static bool trace_event(cm_buf *b, const json_t *ev, const json_t *ops, uint32_t n_dev)
{
    if (!json_is_array(ev) || json_array_size(ev) < 5) {
        return false;
    }
    json_int_t dev = json_integer_value(json_array_get(ev, 0));
    json_int_t ref = json_integer_value(json_array_get(ev, 1));
    double ts = json_number_value(json_array_get(ev, 2));
    double dur = json_number_value(json_array_get(ev, 3));
    double wait = json_number_value(json_array_get(ev, 4));
    const json_t *op = ref >= 0 ? json_array_get(ops, (size_t)ref) : NULL;
    if (dev < 0 || (uint64_t)dev >= n_dev || !json_is_object(op) || !(ts >= 0) || !(dur >= 0)) {
        return false;
    }
    const char *coll = str_of(op, "collective", NULL);
    cm_buf_puts(b, ",\n{");
    cm_json_put_kv_str(b, "name", str_of(op, "name", "op"));
    cm_json_put_kv_str(b, "cat", coll != NULL ? "collective" : "compute");
    cm_json_put_kv_str(b, "ph", "X");
    cm_json_put_key(b, "ts");
    cm_json_put_g(b, ts, 12);
    cm_json_put_key(b, "dur");
    cm_json_put_g(b, dur, 9);
    cm_json_put_kv_i64(b, "pid", 1);
    cm_json_put_kv_i64(b, "tid", dev);
    cm_buf_puts(b, ",\"args\":{");
    cm_json_put_kv_i64(b, "op", json_integer_value(json_object_get(op, "op")));
    cm_json_put_kv_str(b, "kind", str_of(op, "kind", ""));
    if (json_integer_value(json_object_get(op, "line")) > 0) {
        cm_json_put_kv_i64(b, "line", json_integer_value(json_object_get(op, "line")));
        cm_json_put_kv_i64(b, "col", json_integer_value(json_object_get(op, "col")));
    }
    if (str_of(op, "loc", NULL) != NULL) {
        cm_json_put_kv_str(b, "loc", str_of(op, "loc", NULL));
    }
    if (coll != NULL) {
        cm_json_put_kv_str(b, "collective", coll);
        const json_t *axes = json_object_get(op, "axes");
        cm_buf_puts(b, ",\"axes\":[");
        for (size_t i = 0; i < json_array_size(axes); i++) {
            cm_json_put_sep(b);
            cm_json_put_cstr(b, str_of(json_array_get(axes, i), "", "?"));
        }
        cm_buf_putc(b, ']');
        cm_json_put_key(b, "wait_us");
        cm_json_put_g(b, wait, 9);
    }
    cm_buf_puts(b, "}}");
    if (coll != NULL && wait > 0) {
        cm_buf_puts(b, ",\n{\"name\":\"wait for peers\",\"cat\":\"collective,wait\",\"ph\":\"X\"");
        cm_json_put_key(b, "ts");
        cm_json_put_g(b, ts, 12);
        cm_json_put_key(b, "dur");
        cm_json_put_g(b, wait < dur ? wait : dur, 9);
        cm_json_put_kv_i64(b, "pid", 1);
        cm_json_put_kv_i64(b, "tid", dev);
        cm_buf_putc(b, '}');
    }
    return true;
}

/* The Chrome trace of a stored results document into b: metadata events
 * naming the process (the run) and one thread per device, then the
 * events. CM_ENOTFOUND when the results hold no timeline, CM_EINTERNAL
 * when it is malformed. */
static cm_status trace_json(const st_bench *x, cm_buf *b, cm_error *err)
{
    json_error_t je;
    json_t *res = x->results != NULL ? json_loadb(x->results, x->results_len, 0, &je) : NULL;
    const json_t *tl = json_object_get(res, "timeline");
    const json_t *ops = json_object_get(tl, "ops"), *evs = json_object_get(tl, "events");
    json_int_t n_dev = json_integer_value(json_object_get(tl, "devices"));
    if (!json_is_array(ops) || !json_is_array(evs) || n_dev <= 0 || n_dev > 4096) {
        json_decref(res);
        return cm_error_set(err, CM_ENOTFOUND, "/id",
                            "benchmark run %lld has no timeline (it is %s%s)", (long long)x->id,
                            st_bench_status_name(x->status),
                            x->status == ST_BENCH_SUCCEEDED ? ", measured before timelines" : "");
    }
    cm_buf_puts(b, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,"
                   "\"pid\":1,\"tid\":0,\"args\":{");
    char label[96];
    snprintf(label, sizeof label, "benchmark run %lld (plan %lld)", (long long)x->id,
             (long long)x->plan_id);
    cm_json_put_kv_str(b, "name", label);
    cm_buf_puts(b, "}}");
    for (json_int_t d = 0; d < n_dev; d++) {
        cm_buf_printf(b,
                      ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":1,\"tid\":%lld,"
                      "\"args\":{\"name\":\"device %lld\"}}",
                      (long long)d, (long long)d);
        cm_buf_printf(b,
                      ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0,\"pid\":1,"
                      "\"tid\":%lld,\"args\":{\"sort_index\":%lld}}",
                      (long long)d, (long long)d);
    }
    for (size_t i = 0; i < json_array_size(evs); i++) {
        if (!trace_event(b, json_array_get(evs, i), ops, (uint32_t)n_dev)) {
            json_decref(res);
            return cm_error_set(err, CM_EINTERNAL, NULL,
                                "benchmark run %lld: timeline event %zu is malformed",
                                (long long)x->id, i);
        }
    }
    cm_buf_puts(b, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{");
    cm_json_put_kv_i64(b, "run_id", x->id);
    cm_json_put_kv_i64(b, "plan_id", x->plan_id);
    cm_json_put_kv_i64(b, "devices", n_dev);
    cm_json_put_kv_i64(b, "traced_run", json_integer_value(json_object_get(tl, "run")));
    cm_json_put_kv_i64(b, "dropped", json_integer_value(json_object_get(tl, "dropped")));
    const json_t *step = json_object_get(res, "step_s");
    if (json_is_number(step)) {
        cm_json_put_key(b, "step_s");
        cm_json_put_g(b, json_number_value(step), 9);
    }
    cm_buf_puts(b, "}}\n");
    json_decref(res);
    return CM_OK;
}

void srv_h_bench_trace(srv_app *app, srv_req *r, route_args *a)
{
    st_bench x;
    cm_error e;
    cm_error_clear(&e);
    if (st_bench_get(a->db, a->id, &x, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_status st = trace_json(&x, &b, &e);
    st_bench_fini(&x);
    if (st == CM_ENOTFOUND) {
        cm_buf_fini(&b);
        srv_reply_cm(app, r, &e);
    } else if (st != CM_OK) {
        cm_buf_fini(&b);
        srv_reply_ours(app, r, &e);
    } else {
        srv_reply_buf(app, r, 200, &b);
    }
}
