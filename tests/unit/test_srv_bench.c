/* SPDX-License-Identifier: Apache-2.0
 * Tests of the benchmark service (server/srv_bench.c): the real server runs
 * in-process on 127.0.0.1, port 0, with a temporary database, and this very
 * binary is its worker (main dispatches `exec-worker` to cmd_worker, as
 * shardplan's main does). Covers a Flax MLP run end to end with its webhook
 * caught by a listener on loopback, a worker crash and a runaway worker
 * (test faults), graceful stop with a run in flight, and bad requests.
 * Every wait is bounded. Run from the repository root (examples/ is read). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "cm.h"
#include "tu_http.h"
#include "cmd.h"
#include "srv_app.h"
#include "st_db.h"

/* ---- fixture (tests/unit/tu_http.h) ------------------------------------------------------- */

typedef tu_server fixture;
typedef tu_resp resp;

static int setup_with(void **state, double time_limit_s, bool faults)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || tu_server_init(f, "test_bench") != 0) {
        free(f);
        return -1;
    }
    srv_config c;
    tu_config_worker(f, &c, time_limit_s, faults);
    tu_server_start(f, &c);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, 120, true);
}

static int setup_short_limit(void **state)
{
    return setup_with(state, 1.5, true);
}

static int setup_no_faults(void **state)
{
    return setup_with(state, 120, false);
}

static int teardown(void **state)
{
    fixture *f = *state;
    tu_server_fini(f);
    free(f);
    return 0;
}

/* A JSON request of len bytes (body NULL: none). */
static void http(const fixture *f, const char *method, const char *path, const char *body,
                 size_t len, resp *out)
{
    tu_http_ex(f, method, path, "application/json", body, len, NULL, NULL, out);
}

static void post(const fixture *f, const char *path, const char *body, resp *out)
{
    http(f, "POST", path, body, strlen(body), out);
}


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Stores examples/flax_mlp.json as a plan; f->plan_id. */
static void make_plan(fixture *f)
{
    char *text = NULL;
    size_t len = 0;
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &text, &len, &e), CM_OK);
    resp r;
    http(f, "POST", "/v1/plans", text, len, &r);
    cm_free(text);
    assert_true(r.status == 201 || r.status == 200);
    f->plan_id = json_integer_value(json_object_get(r.json, "id"));
    assert_true(f->plan_id > 0);
    tu_resp_fini(&r);
}

/* Queues a benchmark from body (a printf format taking the plan id); returns its id. */
static int64_t queue_run(fixture *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t queue_run(fixture *f, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    resp r;
    post(f, "/v1/benchmarks", body, &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "queued");
    int64_t id = json_integer_value(json_object_get(r.json, "id"));
    assert_true(id > 0);
    tu_resp_fini(&r);
    return id;
}

/* Polls the run until its status is final (or want, when not NULL), at most
 * limit_s; returns the run (new reference). */
static json_t *wait_run(const fixture *f, int64_t id, const char *want, double limit_s)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/benchmarks/%lld", (long long)id);
    double until = now_s() + limit_s;
    for (;;) {
        resp r;
        http(f, "GET", path, NULL, 0, &r);
        assert_int_equal(r.status, 200);
        const char *st = json_string_value(json_object_get(r.json, "status"));
        assert_non_null(st);
        bool done = want != NULL ? strcmp(st, want) == 0
                                 : strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
                                       strcmp(st, "canceled") == 0;
        if (done || now_s() > until) {
            json_t *j = json_incref(r.json);
            tu_resp_fini(&r);
            if (!done) {
                fprintf(stderr, "run %lld still %s after %.0f s\n", (long long)id, st, limit_s);
                json_decref(j);
                fail();
            }
            return j;
        }
        tu_resp_fini(&r);
        nap_ms(100);
    }
}

/* ---- a webhook receiver on loopback --------------------------------------------------------- */

typedef struct hook {
    int fd; /* listening socket */
    uint16_t port;
    pthread_t thread;
    char body[16384]; /* the first request's body */
    size_t body_len;
    bool got;
    const char *base;      /* the server, to read the run while the hook is called */
    char run_status[32];   /* the stored status of the run at that moment */
} hook;

/* GET base/v1/benchmarks/id's status into out, without cmocka (another thread). */
static void status_now(const char *base, long long id, char *out, size_t cap)
{
    char url[256];
    snprintf(url, sizeof url, "%s/v1/benchmarks/%lld", base, id);
    cm_buf b;
    cm_buf_init(&b);
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(h) == CURLE_OK) {
        json_error_t je;
        json_t *j = json_loadb(b.data, b.len, 0, &je);
        const char *st = json_string_value(json_object_get(j, "status"));
        snprintf(out, cap, "%s", st != NULL ? st : "?");
        json_decref(j);
    }
    curl_easy_cleanup(h);
    cm_buf_fini(&b);
}

static void *hook_main(void *arg)
{
    hook *k = arg;
    struct pollfd p = {k->fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) {
        return NULL;
    }
    int c = accept(k->fd, NULL, NULL);
    if (c < 0) {
        return NULL;
    }
    char buf[32768];
    size_t n = 0;
    double until = now_s() + 10;
    while (n < sizeof buf - 1 && now_s() < until) {
        struct pollfd q = {c, POLLIN, 0};
        if (poll(&q, 1, 1000) <= 0) {
            continue;
        }
        ssize_t r = read(c, buf + n, sizeof buf - 1 - n);
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
        buf[n] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strstr(buf, "Content-Length: ");
        if (end != NULL && cl != NULL) {
            size_t want = (size_t)strtoul(cl + 16, NULL, 10);
            size_t have = n - (size_t)(end + 4 - buf);
            if (have >= want && want < sizeof k->body) {
                memcpy(k->body, end + 4, want);
                k->body_len = want;
                k->got = true;
                json_error_t je;
                json_t *j = json_loadb(k->body, k->body_len, 0, &je);
                if (k->base != NULL && j != NULL) {
                    status_now(k->base, (long long)json_integer_value(json_object_get(j, "id")),
                               k->run_status, sizeof k->run_status);
                }
                json_decref(j);
                break;
            }
        }
    }
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (write(c, ok, sizeof ok - 1) < 0) {
        k->got = false;
    }
    close(c);
    return NULL;
}

static void hook_start(hook *k)
{
    memset(k, 0, sizeof *k);
    k->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(k->fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(k->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(k->fd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(k->fd, (struct sockaddr *)&a, &al), 0);
    k->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&k->thread, NULL, hook_main, k), 0);
}

static void hook_join(hook *k)
{
    pthread_join(k->thread, NULL);
    close(k->fd);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_srv_bench_flax_mlp_succeeds_with_webhook(void **state)
{
    fixture *f = *state;
    make_plan(f);
    hook k;
    hook_start(&k);
    k.base = f->base;
    int64_t id = queue_run(f,
                           "{\"plan_id\":%lld,\"devices\":8,\"warmup\":1,\"iters\":3,\"seed\":5,"
                           "\"affinity\":true,\"webhook_url\":\"http://127.0.0.1:%u/hook\"}",
                           (long long)f->plan_id, (unsigned)k.port);
    json_t *run = wait_run(f, id, NULL, 120);
    hook_join(&k);
    /* the run is final before its webhook; the delivery record follows */
    for (double until = now_s() + 30;
         json_object_get(json_object_get(run, "results"), "webhook") == NULL && now_s() < until;) {
        nap_ms(50);
        json_decref(run);
        run = wait_run(f, id, NULL, 10);
    }
    assert_string_equal(json_string_value(json_object_get(run, "status")), "succeeded");
    assert_true(json_is_null(json_object_get(run, "error")));
    json_t *res = json_object_get(run, "results");
    assert_true(json_is_object(res));
    assert_int_equal(json_integer_value(json_object_get(res, "devices")), 8);
    assert_true(json_is_true(json_object_get(res, "affinity"))); /* pinned workers */
    assert_int_equal(json_array_size(json_object_get(res, "iter_s")), 3);
    assert_true(json_real_value(json_object_get(res, "step_s")) > 0);
    assert_true(json_real_value(json_object_get(res, "flop_per_s")) > 0);
    assert_true(json_real_value(json_object_get(res, "predicted_step_s")) > 0);
    /* per-op and per-collective time on each device, beside the prediction:
     * the MLP's dots, and its all-reduces over "model" (4 devices a group) */
    json_t *ops = json_object_get(res, "ops"), *colls = json_object_get(res, "collectives");
    assert_true(json_array_size(ops) > 0);
    assert_int_equal(json_integer_value(json_object_get(res, "ops_timed")),
                     (json_int_t)json_array_size(ops));
    size_t dots = 0;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *o = json_array_get(ops, i);
        assert_int_equal(json_array_size(json_object_get(o, "measured_s")), 8);
        assert_non_null(json_string_value(json_object_get(o, "result"))); /* graph input */
        if (strcmp(json_string_value(json_object_get(o, "op")), "stablehlo.dot_general") == 0) {
            dots++;
            assert_true(json_number_value(json_object_get(o, "predicted_s")) > 0);
            assert_true(json_number_value(json_object_get(o, "flops")) > 0);
        }
    }
    assert_true(dots >= 4);
    assert_true(json_array_size(colls) > 0);
    for (size_t i = 0; i < json_array_size(colls); i++) {
        json_t *o = json_array_get(colls, i);
        assert_string_equal(json_string_value(json_object_get(o, "kind")), "all_reduce");
        assert_non_null(json_string_value(json_object_get(o, "operand")));
        assert_int_equal(json_integer_value(json_object_get(o, "group")), 4);
        assert_true(json_number_value(json_object_get(o, "bytes")) > 0);
        assert_true(json_number_value(json_object_get(o, "predicted_s")) > 0);
        json_t *ms = json_object_get(o, "measured_s");
        assert_int_equal(json_array_size(ms), 8);
        for (size_t d = 0; d < 8; d++) {
            assert_true(json_number_value(json_array_get(ms, d)) > 0);
        }
    }
    json_t *num = json_object_get(res, "numerics");
    assert_true(json_is_true(json_object_get(num, "match")));
    assert_true(json_number_value(json_object_get(num, "max_abs_diff")) < 1e-3);
    json_t *wh = json_object_get(res, "webhook");
    assert_true(json_is_true(json_object_get(wh, "delivered")));
    assert_int_equal(json_integer_value(json_object_get(wh, "http_status")), 200);
    /* the listener got the run's final JSON */
    assert_true(k.got);
    json_error_t je;
    json_t *sent = json_loadb(k.body, k.body_len, 0, &je);
    assert_non_null(sent);
    assert_int_equal(json_integer_value(json_object_get(sent, "id")), id);
    assert_string_equal(json_string_value(json_object_get(sent, "status")), "succeeded");
    /* when the webhook is called, the run is already stored final */
    assert_string_equal(k.run_status, "succeeded");
    assert_true(json_is_true(
        json_object_get(json_object_get(json_object_get(sent, "results"), "numerics"), "match")));
    json_decref(sent);
    json_decref(run);
    /* the same run through the older resource name, and the list filter */
    resp r;
    char path[64];
    snprintf(path, sizeof path, "/v1/runs/%lld", (long long)id);
    http(f, "GET", path, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    http(f, "GET", "/v1/benchmarks?status=succeeded", NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    /* its timeline as a Chrome trace: every event has the format's required
     * fields, an X event per op per device (tid), collectives marked */
    snprintf(path, sizeof path, "/v1/benchmarks/%lld/trace", (long long)id);
    http(f, "GET", path, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    json_t *evs = json_object_get(r.json, "traceEvents");
    assert_true(json_array_size(evs) > 8);
    size_t xs = 0, coll = 0;
    bool tids[8] = {false};
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        assert_non_null(json_string_value(json_object_get(e, "name")));
        assert_non_null(ph);
        assert_true(json_is_number(json_object_get(e, "ts")));
        assert_true(json_is_integer(json_object_get(e, "pid")));
        json_int_t tid = json_integer_value(json_object_get(e, "tid"));
        assert_true(tid >= 0 && tid < 8);
        if (strcmp(ph, "X") == 0) {
            assert_true(json_number_value(json_object_get(e, "dur")) >= 0);
            xs++;
            tids[tid] = true;
            const char *cat = json_string_value(json_object_get(e, "cat"));
            coll += cat != NULL && strcmp(cat, "collective") == 0;
        } else {
            assert_string_equal(ph, "M");
        }
    }
    assert_true(xs > 0 && coll > 0);
    for (int d = 0; d < 8; d++) {
        assert_true(tids[d]);
    }
    tu_resp_fini(&r);
    http(f, "GET", "/v1/benchmarks/999999/trace", NULL, 0, &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
}

static void test_srv_bench_worker_crash_fails_run_and_server_goes_on(void **state)
{
    fixture *f = *state;
    make_plan(f);
    int64_t bad = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"crash\"}", (long long)f->plan_id);
    int64_t good =
        queue_run(f, "{\"plan_id\":%lld,\"warmup\":0,\"iters\":1}", (long long)f->plan_id);
    json_t *run = wait_run(f, bad, NULL, 60);
    assert_string_equal(json_string_value(json_object_get(run, "status")), "failed");
    const char *why = json_string_value(json_object_get(run, "error"));
    assert_non_null(why);
    assert_non_null(strstr(why, "worker killed by signal 11"));
    json_decref(run);
    resp r;
    http(f, "GET", "/healthz", NULL, 0, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    run = wait_run(f, good, NULL, 120);
    assert_string_equal(json_string_value(json_object_get(run, "status")), "succeeded");
    json_decref(run);
}

static void test_srv_bench_time_limit_kills_runaway_worker(void **state)
{
    fixture *f = *state;
    make_plan(f);
    int64_t id = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"hang\"}", (long long)f->plan_id);
    json_t *run = wait_run(f, id, NULL, 30);
    assert_string_equal(json_string_value(json_object_get(run, "status")), "failed");
    assert_string_equal(json_string_value(json_object_get(run, "error")),
                        "time limit 1.5 s exceeded");
    json_decref(run);
    resp r;
    http(f, "GET", "/healthz", NULL, 0, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
}

static void test_srv_bench_stop_fails_running_run(void **state)
{
    fixture *f = *state;
    make_plan(f);
    int64_t id = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"hang\"}", (long long)f->plan_id);
    json_decref(wait_run(f, id, "running", 30));
    double t0 = now_s();
    srv_app_destroy(f->app);
    f->app = NULL;
    assert_true(now_s() - t0 < 10);
    st_db *db = NULL;
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(st_db_open(f->db, &db, &e), CM_OK);
    st_bench b;
    memset(&b, 0, sizeof b);
    assert_int_equal(st_bench_get(db, id, &b, &e), CM_OK);
    assert_int_equal(b.status, ST_BENCH_FAILED);
    assert_string_equal(b.error, "server stopped");
    st_bench_fini(&b);
    st_db_close(db);
    srv_config c;
    tu_config_worker(f, &c, 120, true);
    tu_server_start(f, &c); /* for teardown */
}

static void test_srv_bench_cancel_queued_and_running(void **state)
{
    fixture *f = *state;
    make_plan(f);
    int64_t first = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"hang\"}", (long long)f->plan_id);
    int64_t second = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"hang\"}", (long long)f->plan_id);
    json_decref(wait_run(f, first, "running", 30));
    char path[96];
    resp r;
    /* the queued one: canceled at once, never started */
    snprintf(path, sizeof path, "/v1/benchmarks/%lld/cancel", (long long)second);
    post(f, path, "", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "canceled");
    assert_string_equal(json_string_value(json_object_get(r.json, "error")), "canceled by request");
    tu_resp_fini(&r);
    /* the running one: its worker is killed before the answer */
    snprintf(path, sizeof path, "/v1/benchmarks/%lld/cancel", (long long)first);
    double t0 = now_s();
    post(f, path, "", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "canceled");
    assert_true(now_s() - t0 < 10);
    tu_resp_fini(&r);
    post(f, path, "", &r); /* final now */
    assert_int_equal(r.status, 409);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r.json, "error"), "path")), "/status");
    tu_resp_fini(&r);
    http(f, "GET", "/v1/benchmarks?status=canceled", NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    tu_resp_fini(&r);
    post(f, "/v1/benchmarks/999/cancel", "", &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
    /* the supervisor goes on with the next run; deleting a running run stops it */
    int64_t third = queue_run(f, "{\"plan_id\":%lld,\"fault\":\"hang\"}", (long long)f->plan_id);
    json_decref(wait_run(f, third, "running", 30));
    snprintf(path, sizeof path, "/v1/benchmarks/%lld", (long long)third);
    http(f, "DELETE", path, NULL, 0, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    int64_t fourth =
        queue_run(f, "{\"plan_id\":%lld,\"warmup\":0,\"iters\":1}", (long long)f->plan_id);
    json_t *run = wait_run(f, fourth, NULL, 120);
    assert_string_equal(json_string_value(json_object_get(run, "status")), "succeeded");
    json_decref(run);
}

static void expect_error(fixture *f, const char *body, long status, const char *path)
{
    resp r;
    post(f, "/v1/benchmarks", body, &r);
    if (r.status != status) {
        fprintf(stderr, "%s -> %ld %.*s\n", body, r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, status);
    json_t *err = json_object_get(r.json, "error");
    assert_non_null(err);
    assert_string_equal(json_string_value(json_object_get(err, "path")), path);
    assert_non_null(json_string_value(json_object_get(err, "message")));
    tu_resp_fini(&r);
}

static void test_srv_bench_bad_requests_name_the_member(void **state)
{
    fixture *f = *state;
    make_plan(f);
    char body[256];
    expect_error(f, "{\"plan_id\":999}", 404, "/plan_id");
    expect_error(f, "{\"plan_id\":\"one\"}", 400, "/plan_id");
    expect_error(f, "{\"devices\":2}", 400, "/plan_id");
    expect_error(f, "{\"plan_id\":1,", 400, "");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"iters\":0}", (long long)f->plan_id);
    expect_error(f, body, 400, "/iters");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"devices\":-1}", (long long)f->plan_id);
    expect_error(f, body, 400, "/devices");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"affinity\":1}", (long long)f->plan_id);
    expect_error(f, body, 400, "/affinity");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"steps\":3}", (long long)f->plan_id);
    expect_error(f, body, 400, "/steps");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"webhook_url\":\"http://192.0.2.1/x\"}",
             (long long)f->plan_id);
    expect_error(f, body, 400, "/webhook_url");
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"webhook_url\":\"https://127.0.0.1/x\"}",
             (long long)f->plan_id);
    expect_error(f, body, 400, "/webhook_url");
    /* test faults only on a server started with them */
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"fault\":\"crash\"}", (long long)f->plan_id);
    expect_error(f, body, 400, "/fault");
    resp r;
    http(f, "GET", "/v1/benchmarks/12345", NULL, 0, &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-worker") == 0) {
        return cmd_worker(argc - 1, argv + 1, stdout, stderr);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_srv_bench_flax_mlp_succeeds_with_webhook, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_worker_crash_fails_run_and_server_goes_on,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_time_limit_kills_runaway_worker,
                                        setup_short_limit, teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_stop_fails_running_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_cancel_queued_and_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_bad_requests_name_the_member,
                                        setup_no_faults, teardown),
    };
    int rc = cmocka_run_group_tests_name("srv_bench", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
