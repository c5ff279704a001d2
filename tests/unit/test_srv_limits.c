/* SPDX-License-Identifier: Apache-2.0
 * Integration tests of the server's defences (issue 21): the real server
 * (srv_app) in-process on 127.0.0.1 with a temporary database, driven by raw
 * sockets where a hostile client would not behave like curl. Covers the
 * token checked before any body byte is kept, the cap on the bodies held
 * at once, connection limits and the request-head deadline with /healthz
 * still answering, JSON errors (ambiguous body framing included), profiles
 * only from the built-in set and the store, readiness on a bad database, two servers on one file, the mesh-name
 * round trip, deadlines of plan-scoped computations and the size check of
 * meshes. Every loop is bounded in count and in time. Run from the
 * repository root. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>

#include "cm.h"
#include "srv_app.h"
#include "st_db.h"
#include "tu_http.h"

typedef tu_server fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || tu_server_init(f, "test_lim") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tu_server_fini(f);
    free(f);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* ---- raw sockets ------------------------------------------------------------------------ */

/* A TCP connection to the fixture's server from source address src
 * ("127.0.0.1", "127.0.0.2", ...), with a receive timeout of timeout_ms. */
static int raw_connect(const fixture *f, const char *src, long timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    inet_pton(AF_INET, src, &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    a.sin_port = htons(srv_app_port(f->app));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static bool raw_send(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return false;
        }
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads what arrives until the peer closes, the buffer is full or the
 * receive timeout passes; returns the bytes read (NUL-terminated in buf).
 * *closed tells whether the peer closed the connection. */
static size_t raw_recv(int fd, char *buf, size_t cap, bool *closed)
{
    size_t at = 0;
    *closed = false;
    while (at + 1 < cap) {
        ssize_t n = recv(fd, buf + at, cap - 1 - at, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            *closed = true;
            break;
        }
        if (n < 0) {
            break;
        }
        at += (size_t)n;
        if (strstr(buf, "\r\n\r\n") != NULL) {
            /* a whole head: read the body the Content-Length announces */
            buf[at] = '\0';
            const char *cl = strcasestr(buf, "Content-Length: ");
            const char *end = strstr(buf, "\r\n\r\n") + 4;
            if (cl != NULL && (size_t)(end - buf) + strtoul(cl + 16, NULL, 10) <= at) {
                break;
            }
        }
    }
    buf[at] = '\0';
    return at;
}

/* The JSON body of a raw response, parsed (NULL when not JSON). */
static json_t *raw_json(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    if (b == NULL) {
        return NULL;
    }
    return json_loads(b + 4, 0, NULL);
}

/* The JSON error document of a raw response, checked to carry code; the
 * caller releases it. */
static json_t *raw_error(const char *resp, const char *code)
{
    json_t *j = raw_json(resp);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        code);
    return j;
}

/* GET path from source address src through libcurl; the status, 0 when the
 * request failed (refused, reset, timed out after timeout_s). */
static long get_from(const fixture *f, const char *src, const char *path, long timeout_s)
{
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    cm_buf b;
    cm_buf_init(&b);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_INTERFACE, src);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_easy_cleanup(h);
    cm_buf_fini(&b);
    return status;
}

/* ---- 1: memory before authentication ---------------------------------------------------- */

/* With tokens required, a body announced without a token is refused (401,
 * JSON) as soon as the head is in: no body byte is sent, yet the answer
 * comes. Before, the server waited for the whole body. */
static void test_lim_token_checked_before_body(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.auth = SRV_AUTH_ON;
    tu_server_start(f, &c);
    int fd = raw_connect(f, "127.0.0.1", 3000);
    const char req[] = "POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: 900000\r\n\r\n";
    assert_true(raw_send(fd, req, sizeof req - 1));
    char buf[4096];
    bool closed = false;
    double t0 = cm_now();
    raw_recv(fd, buf, sizeof buf, &closed);
    close(fd);
    assert_true(cm_now() - t0 < 2.5);
    assert_non_null(strstr(buf, "HTTP/1.1 401"));
    json_t *j = raw_json(buf);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "unauthorized");
    json_decref(j);
}

/* Bodies held at once share one cap: past it a new body is refused with 503
 * and Retry-After before it is read; once the held ones go, bodies are
 * accepted again. */
static void test_lim_inflight_bodies_capped(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.max_inflight_body_bytes = (size_t)1500 << 10;
    tu_server_start(f, &c);
    const char head[] = "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 700000\r\n\r\n{\"nodes\":";
    int held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = raw_connect(f, "127.0.0.1", 300);
        assert_true(raw_send(held[i], head, sizeof head - 1));
    }
    sleep_ms(200);
    int fd = raw_connect(f, "127.0.0.1", 3000);
    assert_true(raw_send(fd, head, sizeof head - 1));
    char buf[4096];
    bool closed = false;
    raw_recv(fd, buf, sizeof buf, &closed);
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 503"));
    assert_non_null(strcasestr(buf, "Retry-After: "));
    json_decref(raw_error(buf, "unavailable"));
    for (int i = 0; i < 2; i++) {
        close(held[i]);
    }
    /* the held bodies' reservations are given back when their connections go */
    long status = 0;
    for (int k = 0; k < 40 && status != 400; k++) {
        sleep_ms(50);
        tu_resp r;
        tu_http(f, "POST", "/v1/graphs", "application/json", "{\"nodes\": 1}", &r);
        status = r.status;
        tu_resp_fini(&r);
    }
    assert_int_equal(status, 400);
}

/* ---- 2: slowloris ------------------------------------------------------------------------ */

/* Slow clients trickling a header byte every 100 ms are cut at the head
 * deadline although bytes keep coming; connections from one address beyond
 * its limit are refused; /healthz answers another address all along and
 * the slow one once its connections are gone. */
static void test_lim_slow_heads_cut_healthz_answers(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.max_per_ip = 4;
    c.head_timeout_s = 1;
    tu_server_start(f, &c);
    enum { N = 10 };
    int fds[N];
    bool gone[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(f, "127.0.0.1", 20);
        gone[i] = false;
    }
    const char head[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    double t0 = cm_now();
    bool probed = false;
    for (size_t k = 0; k < sizeof head - 1 && cm_now() - t0 < 3.0; k++) {
        for (int i = 0; i < N; i++) {
            if (gone[i]) {
                continue;
            }
            char buf[64];
            bool closed = false;
            if (!raw_send(fds[i], head + k, 1)) {
                gone[i] = true;
                continue;
            }
            raw_recv(fds[i], buf, sizeof buf, &closed);
            gone[i] = closed;
        }
        if (!probed && cm_now() - t0 > 0.3) {
            /* while the slow heads are held: another address is served */
            assert_int_equal(get_from(f, "127.0.0.2", "/healthz", 2), 200);
            probed = true;
        }
        sleep_ms(100);
    }
    assert_true(probed);
    int n_gone = 0;
    for (int i = 0; i < N; i++) {
        n_gone += gone[i] ? 1 : 0;
        close(fds[i]);
    }
    assert_int_equal(n_gone, N); /* over the limit at once, the rest at their deadline */
    assert_int_equal(get_from(f, "127.0.0.1", "/healthz", 2), 200);
}

/* ---- helpers for the API tests ------------------------------------------------------------- */

static void start_default(fixture *f)
{
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(f, &c);
}

/* Posts the Flax MLP graph; returns the plan id. */
static int64_t post_mlp(const fixture *f)
{
    size_t jl;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    tu_resp r;
    tu_http_ex(f, "POST", "/v1/plans", "application/json", js, jl, NULL, NULL, &r);
    cm_free(js);
    assert_true(r.status == 201 || r.status == 200);
    int64_t id = (int64_t)tu_jint(r.json, "id");
    tu_resp_fini(&r);
    return id;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A binary request line without an end does not hold its connection past
 * the head deadline (before: until the idle timeout, a minute). */
static void test_lim_binary_request_line_cut(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.head_timeout_s = 1;
    c.idle_timeout_s = 60;
    tu_server_start(f, &c);
    int fd = raw_connect(f, "127.0.0.1", 200);
    static const char junk[] = {'\x01', '\x02', '\xff', '\xfe', 'G', '\x00', '\x7f'};
    assert_true(raw_send(fd, junk, sizeof junk));
    double t0 = cm_now();
    bool closed = false;
    char buf[512];
    while (!closed && cm_now() - t0 < 4.0) {
        raw_recv(fd, buf, sizeof buf, &closed);
    }
    close(fd);
    assert_true(closed);
    assert_true(cm_now() - t0 < 3.0);
}

/* A body trickled a byte every 100 ms is cut once its average rate, after
 * the head deadline's grace, falls below the minimum (before: held until
 * the idle timeout, which every byte resets). */
static void test_lim_slow_body_cut(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.head_timeout_s = 1;
    c.min_body_rate = 1024;
    c.idle_timeout_s = 60;
    tu_server_start(f, &c);
    int fd = raw_connect(f, "127.0.0.1", 20);
    const char head[] = "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 100000\r\n\r\n";
    assert_true(raw_send(fd, head, sizeof head - 1));
    double t0 = cm_now();
    bool closed = false;
    while (!closed && cm_now() - t0 < 5.0) {
        char buf[512];
        if (!raw_send(fd, " ", 1)) {
            closed = true;
            break;
        }
        raw_recv(fd, buf, sizeof buf, &closed);
        sleep_ms(100);
    }
    close(fd);
    assert_true(closed);
    assert_true(cm_now() - t0 < 4.0);
    /* a body at a healthy rate is not cut */
    tu_resp r;
    tu_http(f, "POST", "/v1/graphs", "application/json", "{\"nodes\": 1}", &r);
    assert_int_equal(r.status, 400);
    tu_resp_fini(&r);
}

/* ---- 5: profiles only from the built-in set and the store --------------------------------- */

/* Profile files planted in the server's working directory are never read:
 * by file name, by bare name (./profiles/NAME.json) or as a non-JSON file;
 * the built-in profiles answer whatever the working directory. */
static void test_lim_profiles_never_from_files(void **state)
{
    fixture *f = *state;
    start_default(f);
    int64_t id = post_mlp(f);
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->dir), 0);
    mkdir("profiles", 0755);
    const char planted[] =
        "{\"format\":\"shardplan.device-profile/v1\",\"name\":\"PLANTED\",\"source\":\"x\","
        "\"peak_flops\":{\"f32\":1e12},\"memory\":{\"capacity_bytes\":1e9,"
        "\"bandwidth_bytes_per_s\":1e11},\"links\":{\"default\":{\"bandwidth_bytes_per_s\":1e10,"
        "\"latency_s\":1e-6}}}";
    write_file("planted.json", planted);
    write_file("profiles/planted.json", planted);
    write_file("secret.json", "SECRET-TOKEN-abc");
    const char *const names[] = {"planted.json", "planted", "secret.json", "./planted.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/plans/%lld/cost?profile=%s", (long long)id, names[i]);
        tu_resp r;
        tu_http(f, "GET", path, NULL, NULL, &r);
        tu_expect_error(&r, 400, "invalid", "/profile");
        assert_null(strstr(r.body.data, "PLANTED"));
        assert_null(strstr(r.body.data, "SECRET"));
        tu_resp_fini(&r);
    }
    char path[256];
    snprintf(path, sizeof path, "/v1/plans/%lld/cost?profile=a100-80gb", (long long)id);
    tu_resp r;
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    unlink("planted.json");
    unlink("profiles/planted.json");
    unlink("secret.json");
    rmdir("profiles");
    assert_int_equal(chdir(cwd), 0);
}

/* ---- 6: errors are always the documented JSON ------------------------------------------------ */

/* Starts the fixture's server with the request log in f->dir/requests.log
 * (its path into logp). */
static void start_logging(fixture *f, char *logp, size_t cap)
{
    srv_config c;
    tu_config_default(f, &c);
    snprintf(logp, cap, "%s/requests.log", f->dir);
    snprintf(c.log_path, sizeof c.log_path, "%s", logp);
    tu_server_start(f, &c);
}

/* The request log at path, a JSON value per line (each asserted), as a
 * JSON array; the file is removed. */
static json_t *read_log(const char *path)
{
    size_t len = 0;
    char *log = tu_read_file(path, &len);
    json_t *all = json_array();
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (j == NULL) {
            fprintf(stderr, "log line is not JSON (%s): %s\n", je.text, line);
        }
        assert_non_null(j);
        json_array_append_new(all, j);
    }
    cm_free(log);
    unlink(path);
    return all;
}

/* Invalid UTF-8 in the path comes back as valid JSON; POST /v1/tokens
 * rejects unknown members like every other body. */
static void test_lim_errors_are_json(void **state)
{
    fixture *f = *state;
    char logp[400];
    start_logging(f, logp, sizeof logp);
    tu_resp r;
    tu_http(f, "GET", "/v1/meshes/%FF%FEbad%C3", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/name");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/nothing/%FF%80", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/tokens", "application/json",
            "{\"scope\": \"read\", \"label\": \"x\", \"admin\": true}", &r);
    tu_expect_error(&r, 400, "invalid", "/admin");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/tokens", "application/json", "[1]", &r);
    tu_expect_error(&r, 400, "invalid", NULL);
    tu_resp_fini(&r);
    /* the request log stays JSON too, a line per request */
    tu_server_stop(f);
    json_t *log = read_log(logp);
    assert_int_equal(json_array_size(log), 4);
    json_decref(log);
}

/* What libmicrohttpd still answers itself (a malformed head of a later
 * request on a kept-alive connection, docs/operations.md) is in the request
 * log as a JSON line, "refused":true and "by":"libmicrohttpd" with its
 * cause, and in shardplan_http_errors_total. Before, it printed its
 * message, HTML page and all, to stderr as free text, and nothing counted. */
static void test_lim_library_answers_logged_as_json(void **state)
{
    fixture *f = *state;
    char logp[400];
    start_logging(f, logp, sizeof logp);
    static const char *const second[] = {
        "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
        "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    };
    for (size_t i = 0; i < 2; i++) {
        int fd = raw_connect(f, "127.0.0.1", 3000);
        static const char first[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_true(raw_send(fd, first, sizeof first - 1));
        char buf[8192];
        bool closed = false;
        raw_recv(fd, buf, sizeof buf, &closed);
        assert_non_null(strstr(buf, "200 OK"));
        assert_true(raw_send(fd, second[i], strlen(second[i])));
        raw_recv(fd, buf, sizeof buf, &closed);
        assert_non_null(strstr(buf, i == 0 ? " 505 " : " 400 "));
        close(fd);
    }
    tu_resp r;
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(
        strstr(r.body.data, "shardplan_http_errors_total{code=\"http_version_not_supported\"} 1"));
    tu_resp_fini(&r);
    tu_server_stop(f);
    json_t *log = read_log(logp);
    int by_library = 0;
    bool cause = false;
    size_t i;
    json_t *j;
    json_array_foreach(log, i, j)
    {
        const char *by = json_string_value(json_object_get(j, "by"));
        if (by != NULL && strcmp(by, "libmicrohttpd") == 0) {
            by_library++;
            assert_true(json_is_true(json_object_get(j, "refused")));
            const char *msg = json_string_value(json_object_get(j, "message"));
            assert_non_null(msg);
            assert_null(strstr(msg, "<html>"));
            cause = cause || strstr(msg, "Content-Length") != NULL;
        }
    }
    json_decref(log);
    assert_int_equal(by_library, 2);
    assert_true(cause);
}

/* A head whose body framing is ambiguous (Content-Length headers that
 * differ, or Content-Length with Transfer-Encoding) gets the JSON 400 and
 * the connection closes, no body byte read; same-valued duplicates pass.
 * Before, libmicrohttpd took one of the values and /healthz answered 200,
 * the rest of the stream left to be read as whatever came next. */
static void test_lim_ambiguous_framing_is_json_400(void **state)
{
    fixture *f = *state;
    start_default(f);
    static const char *const bad[] = {
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 2\r\n\r\n{}",
        "POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    };
    static const char *const msg[] = {"different values", "both Content-Length and"};
    char buf[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = raw_connect(f, "127.0.0.1", 2000);
        assert_true(raw_send(fd, bad[i], strlen(bad[i])));
        bool closed = false;
        raw_recv(fd, buf, sizeof buf, &closed);
        if (!closed) {
            raw_recv(fd, buf + strlen(buf), sizeof buf - strlen(buf), &closed);
        }
        close(fd);
        assert_true(strncmp(buf, "HTTP/1.1 400 ", 13) == 0);
        assert_non_null(strcasestr(buf, "Content-Type: application/json"));
        assert_non_null(strcasestr(buf, "Connection: close"));
        json_t *j = raw_error(buf, "invalid");
        assert_non_null(strstr(
            json_string_value(json_object_get(json_object_get(j, "error"), "message")), msg[i]));
        json_decref(j);
        assert_true(closed);
    }
    static const char same[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                               "Content-Length: 0\r\nConnection: close\r\n\r\n";
    int fd = raw_connect(f, "127.0.0.1", 2000);
    assert_true(raw_send(fd, same, sizeof same - 1));
    bool closed = false;
    raw_recv(fd, buf, sizeof buf, &closed);
    close(fd);
    assert_true(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
}

/* ---- 7: honest health ------------------------------------------------------------------------ */

/* Overwrites page `page` (4 KiB pages) of the file at path with garbage. */
static void corrupt_page(const char *path, long page)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    char junk[4096];
    memset(junk, 0xA5, sizeof junk);
    assert_int_equal(pwrite(fd, junk, sizeof junk, page * 4096), (ssize_t)sizeof junk);
    close(fd);
}

static long status_of(const fixture *f, const char *method, const char *path, char *msg,
                      size_t cap)
{
    tu_resp r;
    tu_http(f, method, path, NULL, NULL, &r);
    long st = r.status;
    if (msg != NULL) {
        snprintf(msg, cap, "%.*s", (int)r.body.len, r.body.data != NULL ? r.body.data : "");
    }
    tu_resp_fini(&r);
    return st;
}

/* A file that has become unwritable makes /readyz say 503 and why; a file
 * damaged under a running server makes it say so; serve refuses a damaged
 * file at start with a clear message. */
static void test_lim_readyz_and_quick_check(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.integrity_interval_s = 0;
    tu_server_start(f, &c);
    (void)post_mlp(f);
    char msg[1024];
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 200);
    /* read-only: the file made immutable (root ignores permission bits) */
    char cmd[900];
    snprintf(cmd, sizeof cmd, "chattr +i '%s' '%s-wal' 2>/dev/null", f->db, f->db);
    if (system(cmd) == 0) {
        long st = status_of(f, "GET", "/readyz", msg, sizeof msg);
        snprintf(cmd, sizeof cmd, "chattr -i '%s' '%s-wal' 2>/dev/null", f->db, f->db);
        assert_int_equal(system(cmd), 0);
        if (st != 503) {
            fprintf(stderr, "readyz on an immutable file: %ld %s\n", st, msg);
        }
        assert_int_equal(st, 503);
        if (strstr(msg, "not writable") == NULL) {
            fprintf(stderr, "readyz: %s\n", msg);
        }
        assert_non_null(strstr(msg, "not writable"));
        assert_int_equal(status_of(f, "GET", "/readyz", NULL, 0), 200);
    } else {
        fprintf(stderr, "chattr unavailable: read-only case not exercised\n");
    }
    tu_server_stop(f); /* the last close checkpoints the WAL into the file */
    struct stat sb;
    assert_int_equal(stat(f->db, &sb), 0);
    assert_true(sb.st_size >= 3 * 4096);
    /* damaged under a running server */
    tu_server_start(f, &c);
    corrupt_page(f->db, sb.st_size / 4096 - 1);
    long st = status_of(f, "GET", "/readyz", msg, sizeof msg);
    if (st != 503) {
        fprintf(stderr, "readyz on a damaged file: %ld %s\n", st, msg);
    }
    assert_int_equal(st, 503);
    assert_non_null(strstr(msg, "damaged"));
    tu_server_stop(f);
    /* and refused at start */
    cm_error e;
    cm_error_clear(&e);
    srv_app *app = NULL;
    assert_int_not_equal(srv_app_create(&c, &app, &e), CM_OK);
    assert_null(app);
    if (strstr(e.msg, "integrity check") == NULL) {
        fprintf(stderr, "serve on a damaged file: %d %s\n", (int)e.code, e.msg);
    }
    assert_non_null(strstr(e.msg, "integrity check"));
}

/* Adds about mib MiB of graph rows to the store at path (SQL of its own,
 * one transaction), then drops the file from the page cache, so that an
 * integrity check reads it from the disk. */
static void fill_store(const char *path, int mib)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[512];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) "
             "INSERT INTO graphs (name, format, hash, body, created_at) "
             "SELECT 'filler', 'json', lower(hex(randomblob(32))), "
             "'{\"x\":\"' || hex(randomblob(1700)) || '\"}', 0 FROM c; "
             "PRAGMA wal_checkpoint(TRUNCATE);",
             mib * 300);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "filling the store: %s\n", msg != NULL ? msg : "?");
    }
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

/* Waits (at most 120 s) for the start check to leave SRV_CHECK_RUNNING. */
static srv_check_state start_check_verdict(const fixture *f, cm_error *e)
{
    srv_check_state s = SRV_CHECK_RUNNING;
    for (int i = 0; i < 12000 && s == SRV_CHECK_RUNNING; i++) {
        s = srv_app_start_check(f->app, e);
        if (s == SRV_CHECK_RUNNING) {
            sleep_ms(10);
        }
    }
    return s;
}

/* A big store is checked at start beside listening, not before: /healthz
 * and the OpenAPI document answer at once, /readyz and the API answer 503
 * saying why until the check passes, then as usual; a damaged big file is
 * reported by srv_app_start_check (serve then stops, exits 1 with the
 * message) and the API keeps refusing. Before, serve did not listen for as
 * long as the check read the file (a minute for 700 MiB from a cold disk),
 * so a liveness probe failed and an orchestrator restarted it forever. */
static void test_lim_big_store_checked_beside_listening(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(f, &c);
    (void)post_mlp(f);
    tu_server_stop(f);
    fill_store(f->db, 96);
    c.check_beside_bytes = 1;
    tu_server_start(f, &c);
    char msg[1024];
    assert_int_equal(srv_app_start_check(f->app, NULL), SRV_CHECK_RUNNING);
    assert_int_equal(status_of(f, "GET", "/healthz", NULL, 0), 200);
    assert_int_equal(status_of(f, "GET", "/v1/openapi.json", NULL, 0), 200);
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 503);
    assert_non_null(strstr(msg, "being checked at start"));
    assert_int_equal(status_of(f, "GET", "/v1/plans", msg, sizeof msg), 503);
    assert_non_null(strstr(msg, "being checked at start"));
    tu_resp r;
    tu_http(f, "POST", "/v1/graphs", "application/json", "{\"name\":\"g\"}", &r);
    tu_expect_error(&r, 503, "unavailable", NULL);
    assert_non_null(strstr(r.body.data, "being checked at start"));
    tu_resp_fini(&r);
    /* all of that answered while the check still ran */
    assert_int_equal(srv_app_start_check(f->app, NULL), SRV_CHECK_RUNNING);
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(start_check_verdict(f, &e), SRV_CHECK_SOUND);
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 200);
    assert_int_equal(status_of(f, "GET", "/v1/plans", msg, sizeof msg), 200);
    tu_server_stop(f);
    /* damaged */
    struct stat sb;
    assert_int_equal(stat(f->db, &sb), 0);
    corrupt_page(f->db, sb.st_size / 4096 / 2);
    tu_server_start(f, &c);
    assert_int_equal(start_check_verdict(f, &e), SRV_CHECK_DAMAGED);
    if (strstr(e.msg, "fails its integrity check") == NULL) {
        fprintf(stderr, "start check: %s\n", e.msg);
    }
    assert_non_null(strstr(e.msg, "fails its integrity check"));
    assert_int_equal(status_of(f, "GET", "/v1/plans", msg, sizeof msg), 503);
    assert_non_null(strstr(msg, "failed its integrity check"));
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 503);
    assert_non_null(strstr(msg, "damaged"));
    tu_server_stop(f);
}

/* With an interval, /readyz never runs the integrity check itself: a
 * verdict older than the interval is answered as it is while the checker
 * thread runs a new check, whose verdict the next calls give. Before, the
 * call that found the verdict stale ran quick_check on its polling thread,
 * which reads the whole file: 3 s for a 747 MB store, a minute from a cold
 * disk, longer than a readiness probe waits. */
static void test_lim_readyz_checks_in_the_background(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.integrity_interval_s = 2; /* long enough that the first probe below finds the start's
                                 * verdict fresh even on a slow machine */
    tu_server_start(f, &c);
    (void)post_mlp(f);
    tu_server_stop(f); /* the last close checkpoints the WAL into the file */
    struct stat sb;
    assert_int_equal(stat(f->db, &sb), 0);
    tu_server_start(f, &c); /* checked at start: sound */
    corrupt_page(f->db, sb.st_size / 4096 - 1);
    char msg[1024];
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 200); /* the start's */
    sleep_ms(2200);
    /* stale: answered as it is, and a check is asked for */
    assert_int_equal(status_of(f, "GET", "/readyz", msg, sizeof msg), 200);
    long st = 200;
    for (int i = 0; i < 250 && st == 200; i++) {
        sleep_ms(20);
        st = status_of(f, "GET", "/readyz", msg, sizeof msg);
    }
    assert_int_equal(st, 503);
    assert_non_null(strstr(msg, "damaged"));
    tu_resp r;
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_null(strstr(r.body.data, "shardplan_store_checks_total 0\n"));
    tu_resp_fini(&r);
}

/* ---- 8: two servers on one file ---------------------------------------------------------------- */

/* A plan deleted through one server is not served by the other from its
 * cache; one posted through the other is found. */
static void test_lim_two_servers_one_file(void **state)
{
    fixture *f = *state;
    start_default(f);
    fixture g = *f;
    g.app = NULL;
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(&g, &c);
    int64_t id = post_mlp(f);
    char path[128];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    assert_int_equal(status_of(&g, "GET", path, NULL, 0), 200); /* now in g's cache */
    assert_int_equal(status_of(&g, "GET", path, NULL, 0), 200);
    assert_int_equal(status_of(f, "DELETE", path, NULL, 0), 204);
    sleep_ms(40); /* g asks the store at most every 20 ms */
    assert_int_equal(status_of(&g, "GET", path, NULL, 0), 404);
    /* the other way round: g plans, f deletes, g forgets it */
    int64_t id2 = post_mlp(&g);
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id2);
    assert_int_equal(status_of(&g, "GET", path, NULL, 0), 200);
    assert_int_equal(status_of(f, "DELETE", path, NULL, 0), 204);
    sleep_ms(40);
    assert_int_equal(status_of(&g, "GET", path, NULL, 0), 404);
    /* a re-post through g of the deleted request plans it again */
    int64_t id3 = post_mlp(&g);
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id3);
    assert_int_equal(status_of(f, "GET", path, NULL, 0), 200);
    tu_server_stop(&g);
}

/* ---- 9: mesh names round-trip ---------------------------------------------------------------------- */

/* Posts the Flax MLP with its mesh renamed to name (a JSON string literal);
 * returns the status and the id in *id. */
static long post_mlp_mesh_named(const fixture *f, const char *name, int64_t *id, char *msg,
                                size_t cap)
{
    json_error_t je;
    json_t *g = json_load_file("examples/flax_mlp.json", 0, &je);
    assert_non_null(g);
    json_t *m = json_array_get(json_object_get(g, "meshes"), 0);
    json_object_set_new(m, "name", json_string(name));
    char *body = json_dumps(g, JSON_COMPACT);
    json_decref(g);
    tu_resp r;
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    free(body);
    long st = r.status;
    *id = st == 201 || st == 200 ? (int64_t)tu_jint(r.json, "id") : 0;
    snprintf(msg, cap, "%.*s", (int)r.body.len, r.body.data != NULL ? r.body.data : "");
    tu_resp_fini(&r);
    return st;
}

/* Every mesh name the server accepts survives the stored plan's round trip
 * through MLIR: what-if on the plan works. A name that would not is
 * refused when the plan is posted, with the rule. */
static void test_lim_mesh_names_round_trip(void **state)
{
    fixture *f = *state;
    start_default(f);
    const char *const names[] = {"mesh", "m_2", "a-b", "pod.v4", "x y", "9lives", "_$x"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int64_t id = 0;
        char msg[2048];
        long st = post_mlp_mesh_named(f, names[i], &id, msg, sizeof msg);
        if (st != 201) {
            /* refused: a 400 that names the mesh */
            if (st != 400 || strstr(msg, "/meshes/0/name") == NULL) {
                fprintf(stderr, "mesh '%s': %ld %s\n", names[i], st, msg);
            }
            assert_int_equal(st, 400);
            assert_non_null(strstr(msg, "/meshes/0/name"));
            continue;
        }
        char path[128], edit[512];
        snprintf(path, sizeof path, "/v1/plans/%lld/whatif", (long long)id);
        snprintf(edit, sizeof edit,
                 "{\"edits\":[{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"
                 "\"sharding\":\"<@%s, [{}, {}]>\"}]}",
                 names[i]);
        tu_resp r;
        tu_http(f, "POST", path, "application/json", edit, &r);
        if (r.status != 200) {
            fprintf(stderr, "what-if on mesh '%s': %ld %.*s\n", names[i], r.status,
                    (int)r.body.len, r.body.data);
        }
        assert_int_equal(r.status, 200);
        tu_resp_fini(&r);
    }
    /* a stored mesh takes the same names */
    tu_resp r;
    tu_http(f, "PUT", "/v1/meshes/a-b", "application/json",
            "{\"axes\":[{\"name\":\"x\",\"size\":2}]}", &r);
    tu_expect_error(&r, 400, "invalid", "/name");
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/meshes/a_b", "application/json",
            "{\"axes\":[{\"name\":\"x\",\"size\":2}]}", &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
}

/* ---- 3: bounded work ------------------------------------------------------------------------------ */

/* A transformer training step big enough that suggest over 256 candidates
 * takes many seconds here; returns its plan id. */
static int64_t post_big(const fixture *f)
{
    tu_resp r;
    tu_http(f, "POST", "/v1/plans", "application/json",
            "{\"example\":{\"model\":\"transformer\",\"layers\":32,\"train\":true,"
            "\"strategy\":\"dp\",\"mesh\":{\"data\":4,\"model\":2}}}",
            &r);
    assert_int_equal(r.status, 201);
    int64_t id = (int64_t)tu_jint(r.json, "id");
    tu_resp_fini(&r);
    return id;
}

/* suggest and sweep stop at the compute deadline with 503 "timeout". */
static void test_lim_suggest_and_sweep_deadline(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.compute_timeout_s = 0.5;
    tu_server_start(f, &c);
    int64_t id = post_big(f);
    char path[160];
    snprintf(path, sizeof path, "/v1/plans/%lld/suggest?max_candidates=256&k=100",
             (long long)id);
    double t0 = cm_now();
    tu_resp r;
    tu_http(f, "GET", path, NULL, NULL, &r);
    double dt = cm_now() - t0;
    tu_expect_error(&r, 503, "timeout", NULL);
    tu_resp_fini(&r);
    assert_true(dt < 8.0);
    t0 = cm_now();
    tu_http(f, "GET", "/v1/sweep?devices=4096&layers=64&train=true", NULL, NULL, &r);
    dt = cm_now() - t0;
    tu_expect_error(&r, 503, "timeout", NULL);
    tu_resp_fini(&r);
    assert_true(dt < 8.0);
}

/* A suggest whose client has gone stops: the request completes soon after. */
static void test_lim_suggest_stops_when_client_leaves(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.compute_timeout_s = 120;
    tu_server_start(f, &c);
    int64_t id = post_big(f);
    int fd = raw_connect(f, "127.0.0.1", 200);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /v1/plans/%lld/suggest?max_candidates=256&k=100 HTTP/1.1\r\n"
                     "Host: x\r\n\r\n",
                     (long long)id);
    assert_true(raw_send(fd, req, (size_t)n));
    double until = cm_now() + 5;
    while (srv_app_in_flight(f->app) == 0 && cm_now() < until) {
        sleep_ms(5);
    }
    assert_true(srv_app_in_flight(f->app) > 0);
    sleep_ms(300);
    close(fd);
    double t0 = cm_now();
    while (srv_app_in_flight(f->app) > 0 && cm_now() - t0 < 20) {
        sleep_ms(20);
    }
    assert_int_equal(srv_app_in_flight(f->app), 0);
    if (cm_now() - t0 >= 4.0) {
        fprintf(stderr, "suggest ran %.1f s after its client left\n", cm_now() - t0);
    }
    assert_true(cm_now() - t0 < 4.0);
}

typedef struct bg_get {
    const fixture *f;
    char path[160];
    long status;
    double secs;      /* from the request's start to its answer */
    char body[256];   /* the answer's first bytes */
    const char *from; /* the local address to send from, or NULL */
} bg_get;

static void *bg_get_run(void *arg)
{
    bg_get *g = arg;
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s%s", g->f->base, g->path);
    cm_buf b;
    cm_buf_init(&b);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    if (g->from != NULL) {
        curl_easy_setopt(h, CURLOPT_INTERFACE, g->from);
    }
    double t0 = cm_now();
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &g->status);
    }
    g->secs = cm_now() - t0;
    snprintf(g->body, sizeof g->body, "%.*s", (int)b.len, b.data != NULL ? b.data : "");
    curl_easy_cleanup(h);
    cm_buf_fini(&b);
    return NULL;
}

/* Shutdown honours the drain time although a suggest is still running. */
static void test_lim_stop_honours_drain(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.compute_timeout_s = 120;
    c.drain_s = 0.5;
    tu_server_start(f, &c);
    int64_t id = post_big(f);
    bg_get g;
    memset(&g, 0, sizeof g);
    g.f = f;
    snprintf(g.path, sizeof g.path, "/v1/plans/%lld/suggest?max_candidates=256&k=100",
             (long long)id);
    pthread_t t;
    pthread_create(&t, NULL, bg_get_run, &g);
    double until = cm_now() + 5;
    while (srv_app_in_flight(f->app) == 0 && cm_now() < until) {
        sleep_ms(5);
    }
    sleep_ms(200);
    double t0 = cm_now();
    srv_app_stop(f->app);
    double dt = cm_now() - t0;
    pthread_join(t, NULL);
    if (dt >= 4.0) {
        fprintf(stderr, "stop took %.1f s with a 0.5 s drain\n", dt);
    }
    assert_true(dt < 4.0);
}

/* Starts the fixture's server with one polling and one handler thread,
 * queue places for handler threads, long_per_client (srv_config) and a
 * compute limit of compute_s, and stores the big plan (post_big): its id. */
static int64_t start_one_handler(fixture *f, unsigned queue, int long_per_client, double compute_s)
{
    srv_config c;
    tu_config_default(f, &c);
    c.threads = 1;
    c.handler_queue = queue;
    c.long_per_client = long_per_client;
    c.compute_timeout_s = compute_s;
    tu_server_start(f, &c);
    return post_big(f);
}

/* Starts two long suggests of plan id in the background, one at a time:
 * the second is sent once the first has been taken off the handler
 * threads' queue (which may hold one), so that it waits behind it. */
static void start_two_suggests(const fixture *f, int64_t id, bg_get g[2], pthread_t t[2])
{
    for (int i = 0; i < 2; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].f = f;
        snprintf(g[i].path, sizeof g[i].path,
                 "/v1/plans/%lld/suggest?max_candidates=256&k=100&n=%d", (long long)id, i);
        pthread_create(&t[i], NULL, bg_get_run, &g[i]);
        double until = cm_now() + 5;
        while (srv_app_in_flight(f->app) < (unsigned)i + 1 && cm_now() < until) {
            sleep_ms(5);
        }
        sleep_ms(200);
    }
}

/* Long computations run on handler threads, not on the polling threads:
 * with one polling thread and two suggests running, /healthz and a stored
 * plan answer at once, a third suggest waits in the handler queue and a
 * fourth, past the queue's limit (1 here), is answered 503 without
 * computing. Before, the first suggest held the one polling thread, and
 * every connection on it, for its whole compute deadline. */
static void test_lim_slow_requests_leave_polling_threads_free(void **state)
{
    fixture *f = *state;
    int64_t id = start_one_handler(f, 1, 0 /* both from this client */, 3);
    bg_get g[2];
    pthread_t t[2];
    start_two_suggests(f, id, g, t);
    assert_int_equal(srv_app_in_flight(f->app), 2); /* one computing, one queued */
    char path[160];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    for (int i = 0; i < 3; i++) {
        double t0 = cm_now();
        tu_resp r;
        tu_http(f, "GET", "/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        tu_resp_fini(&r);
        tu_http(f, "GET", path, NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        tu_resp_fini(&r);
        double dt = cm_now() - t0;
        if (dt >= 1.0) {
            fprintf(stderr, "healthz and a stored plan took %.2f s beside two suggests\n", dt);
        }
        assert_true(dt < 1.0);
    }
    snprintf(path, sizeof path, "/v1/plans/%lld/suggest?max_candidates=256&k=100&n=9",
             (long long)id);
    tu_resp r;
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 503, "unavailable", NULL);
    assert_non_null(strstr(r.body.data, "every handler thread is busy"));
    tu_resp_fini(&r);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_true(g[i].status == 503 || g[i].status == 200);
    }
}

/* A request queued for a handler thread has its deadline counted from when
 * it was complete, not from when the thread took it: with one handler
 * thread busy on a suggest until its 1.5 s limit, a second suggest queued
 * behind it answers 503 "timeout" about 1.5 s after it was sent. Before,
 * its 1.5 s began only once the first had finished (about 2.8 s). */
static void test_lim_queued_request_deadline_counts_the_wait(void **state)
{
    fixture *f = *state;
    int64_t id = start_one_handler(f, 1, 0 /* both from this client */, 1.5);
    bg_get g[2];
    pthread_t t[2];
    start_two_suggests(f, id, g, t);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    for (int i = 0; i < 2; i++) {
        if (g[i].status != 503 || strstr(g[i].body, "\"timeout\"") == NULL) {
            fprintf(stderr, "suggest %d: %ld after %.2f s: %s\n", i, g[i].status, g[i].secs,
                    g[i].body);
        }
        assert_int_equal(g[i].status, 503);
        assert_non_null(strstr(g[i].body, "\"timeout\""));
    }
    if (g[1].secs >= 2.3) {
        fprintf(stderr, "the queued suggest answered after %.2f s (limit 1.5 s)\n", g[1].secs);
    }
    assert_true(g[1].secs < 2.3);
}

/* One client cannot take every place on the handler threads: with one
 * thread and a queue of 3 (4 places, 2 per client by default), a third long
 * request of 127.0.0.1 while two of its own wait or run answers 503 saying
 * so, and a request of another client (127.0.0.2) still finds a place.
 * Before, the third was queued too, and the other client's request found
 * the queue full. */
static void test_lim_one_client_leaves_handler_places(void **state)
{
    fixture *f = *state;
    int64_t id = start_one_handler(f, 3, -1 /* the default share */, 1.5);
    bg_get g[4];
    pthread_t t[4];
    start_two_suggests(f, id, g, t);
    char path[160];
    snprintf(path, sizeof path, "/v1/plans/%lld/suggest?max_candidates=256&k=100&n=2",
             (long long)id);
    tu_resp r;
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 503, "unavailable", NULL);
    if (strstr(r.body.data, "this client has 2 long requests") == NULL) {
        fprintf(stderr, "third request of one client: %s\n", r.body.data);
    }
    assert_non_null(strstr(r.body.data, "this client has 2 long requests"));
    tu_resp_fini(&r);
    /* another client: two places left for it */
    for (int i = 2; i < 4; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].f = f;
        g[i].from = "127.0.0.2";
        snprintf(g[i].path, sizeof g[i].path,
                 "/v1/plans/%lld/suggest?max_candidates=256&k=100&n=%d", (long long)id, i + 1);
        pthread_create(&t[i], NULL, bg_get_run, &g[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    /* each answered by the handler thread: a result, or its compute limit */
    for (int i = 2; i < 4; i++) {
        if (g[i].status != 200 && strstr(g[i].body, "\"timeout\"") == NULL) {
            fprintf(stderr, "the other client's request %d: %ld %s\n", i, g[i].status, g[i].body);
        }
        assert_true(g[i].status == 200 || strstr(g[i].body, "\"timeout\"") != NULL);
    }
}

/* A POST /v1/plans body whose MLIR is a chain of n adds, each constrained
 * with a priority of its own: n propagation rounds over 2n ops, which takes
 * seconds for n = 2000 (it is quadratic, as in Shardy). The caller frees. */
static char *long_plan_body(unsigned n)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "sdy.mesh @mesh = <[\"x\"=2]>\n"
                    "func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
                    "  %c0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n");
    for (unsigned i = 1; i <= n; i++) {
        cm_buf_printf(&b,
                      "  %%a%u = stablehlo.add %%c%u, %%c%u : tensor<8x8xf32>\n"
                      "  %%c%u = sdy.sharding_constraint %%a%u <@mesh, [{\"x\"}p%u, {}]> : "
                      "tensor<8x8xf32>\n",
                      i, i - 1, i - 1, i, i, n + 1 - i);
    }
    cm_buf_printf(&b, "  return %%c%u : tensor<8x8xf32>\n}\n", n);
    assert_false(b.oom);
    json_t *j = json_pack("{s:s%}", "mlir", b.data, b.len);
    char *body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    cm_buf_fini(&b);
    assert_non_null(body);
    return body;
}

/* Planning itself stops at --plan-timeout: 503 "timeout" naming the limit,
 * soon after it, and nothing is stored. Before, the plan ran to its end and
 * the request answered 201 after seconds. */
static void test_lim_plan_stops_at_plan_timeout(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.plan_timeout_s = 0.3;
    tu_server_start(f, &c);
    char *body = long_plan_body(2000);
    double t0 = cm_now();
    tu_resp r;
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    double dt = cm_now() - t0;
    tu_expect_error(&r, 503, "timeout", NULL);
    assert_non_null(strstr(r.body.data, "--plan-timeout"));
    tu_resp_fini(&r);
    free(body);
    if (dt >= 3.0) {
        fprintf(stderr, "a plan stopped %.1f s after a 0.3 s limit\n", dt);
    }
    assert_true(dt < 3.0);
    tu_http(f, "GET", "/v1/plans", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "plans")), 0);
    tu_resp_fini(&r);
}

/* A plan its request gave up on (at --timeout) goes on in the background,
 * but shutdown past its drain stops it: before, srv_app_stop waited for it
 * to finish. */
static void test_lim_stop_stops_abandoned_plan(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.request_timeout_s = 0.3;
    c.plan_timeout_s = 0;
    c.drain_s = 0.3;
    tu_server_start(f, &c);
    char *body = long_plan_body(2000);
    tu_resp r;
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    tu_expect_error(&r, 503, "timeout", NULL);
    assert_non_null(strstr(r.body.data, "continues in the background"));
    tu_resp_fini(&r);
    free(body);
    double t0 = cm_now();
    srv_app_stop(f->app);
    double dt = cm_now() - t0;
    if (dt >= 2.5) {
        fprintf(stderr, "stop took %.1f s with a 0.3 s drain and a plan running\n", dt);
    }
    assert_true(dt < 2.5);
}

/* ---- 4: memory of big documents --------------------------------------------------------------- */

/* The process's peak resident set (VmHWM), bytes. */
static size_t peak_rss(void)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtoul(line + 6, NULL, 10);
        }
    }
    if (fp != NULL) {
        fclose(fp);
    }
    return kb * 1024;
}

/* A mesh object of n axes. */
static void big_mesh(cm_buf *b, size_t n)
{
    cm_buf_puts(b, "{\"name\":\"mesh\",\"axes\":[");
    for (size_t i = 0; i < n; i++) {
        cm_buf_printf(b, "%s{\"name\":\"a%zu\",\"size\":1}", i > 0 ? "," : "", i);
    }
    cm_buf_puts(b, "]}");
}

/* A 14 MiB mesh of 600,000 axes is refused, wherever it comes, before the
 * body is parsed, at its JSON Pointer. The peak RSS may grow by the bodies
 * held (ASan keeps freed ones in quarantine), not by the hundreds of MiB a
 * tree of 600,000 axes costs. */
static void test_lim_huge_mesh_refused_before_parse(void **state)
{
    fixture *f = *state;
    srv_config c;
    tu_config_default(f, &c);
    c.max_body_bytes = (size_t)32 << 20;
    c.max_inflight_body_bytes = (size_t)64 << 20;
    tu_server_start(f, &c);
    cm_buf mesh;
    cm_buf_init(&mesh);
    big_mesh(&mesh, 600000);
    assert_true(mesh.len > ((size_t)13 << 20));
    cm_buf doc, env, env2;
    cm_buf_init(&doc);
    cm_buf_init(&env);
    cm_buf_init(&env2);
    cm_buf_puts(&doc, "{\"format\":\"shardplan.graph/v1\",\"meshes\":[");
    cm_buf_append(&doc, mesh.data, mesh.len);
    cm_buf_puts(&doc, "],\"ops\":[]}");
    cm_buf_puts(&env, "{\"graph\":");
    cm_buf_append(&env, doc.data, doc.len);
    cm_buf_puts(&env, "}");
    cm_buf_puts(&env2, "{\"graph_id\":1,\"mesh\":");
    cm_buf_append(&env2, mesh.data, mesh.len);
    cm_buf_puts(&env2, "}");
    size_t hwm0 = peak_rss();
    const struct {
        const cm_buf *body;
        const char *method, *path, *where;
        long status;
    } cases[] = {
        {&doc, "POST", "/v1/plans", "/meshes/0", 400},
        {&env, "POST", "/v1/plans", "/graph/meshes/0", 400},
        {&env2, "POST", "/v1/plans", "/mesh", 400},
        {&doc, "POST", "/v1/graphs", "/meshes/0", 400},
        {&mesh, "PUT", "/v1/meshes/big", NULL, 413},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_resp r;
        tu_http_ex(f, cases[i].method, cases[i].path, "application/json", cases[i].body->data,
                   cases[i].body->len, NULL, NULL, &r);
        tu_expect_error(&r, cases[i].status, cases[i].status == 400 ? "invalid" : "too_large",
                        cases[i].where);
        tu_resp_fini(&r);
    }
    size_t grown = peak_rss() - hwm0;
    if (grown > ((size_t)200 << 20)) {
        fprintf(stderr, "peak RSS grew by %zu MiB\n", grown >> 20);
    }
    assert_true(grown <= ((size_t)200 << 20));
    cm_buf_fini(&mesh);
    cm_buf_fini(&doc);
    cm_buf_fini(&env);
    cm_buf_fini(&env2);
}

/* ---- durability: kill -9 under a write load ---------------------------------------------------------- */

enum { KILL_ROUNDS = 3, KILL_WRITERS = 3, KILL_MAX_WRITES = 400 };

typedef struct kill_writer {
    char base[64];
    int round, who;
    int n_acked;
    char acked[KILL_MAX_WRITES][32]; /* names whose PUT was answered 201 */
} kill_writer;

/* PUTs meshes until the server dies, at most KILL_MAX_WRITES or 3 s. */
static void *kill_writer_run(void *arg)
{
    kill_writer *w = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    cm_buf b;
    cm_buf_init(&b);
    static const char body[] = "{\"axes\":[{\"name\":\"x\",\"size\":2}]}";
    double t0 = cm_now();
    for (int i = 0; i < KILL_MAX_WRITES && cm_now() - t0 < 3.0; i++) {
        char name[32], url[160];
        snprintf(name, sizeof name, "w%d_%d_%d", w->round, w->who, i);
        snprintf(url, sizeof url, "%s/v1/meshes/%s", w->base, name);
        b.len = 0;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(sizeof body - 1));
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 3L);
        long status = 0;
        if (curl_easy_perform(h) != CURLE_OK) {
            break; /* the server is gone */
        }
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (status == 201) {
            snprintf(w->acked[w->n_acked++], sizeof w->acked[0], "%s", name);
        }
    }
    cm_buf_fini(&b);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return NULL;
}

/* The server in a child process on f's database; its port through a pipe.
 * The child serves until it is killed. */
static pid_t serve_child(const fixture *f, uint16_t *port)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        srv_config c;
        tu_config_default(f, &c);
        srv_app *app = NULL;
        cm_error e;
        cm_error_clear(&e);
        if (srv_app_create(&c, &app, &e) != CM_OK || srv_app_start(app, &e) != CM_OK) {
            _exit(3);
        }
        uint16_t p = srv_app_port(app);
        if (write(fds[1], &p, sizeof p) != (ssize_t)sizeof p) {
            _exit(4);
        }
        for (;;) {
            pause();
        }
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], port, sizeof *port), (ssize_t)sizeof *port);
    close(fds[0]);
    return pid;
}

/* Writers on several connections, the server killed with SIGKILL mid-load,
 * KILL_ROUNDS times: every acknowledged write is in the file afterwards and
 * PRAGMA integrity_check says ok. */
static void test_lim_kill_9_loses_no_acknowledged_write(void **state)
{
    fixture *f = *state;
    kill_writer *w = calloc(KILL_WRITERS, sizeof *w);
    assert_non_null(w);
    int total = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        uint16_t port = 0;
        pid_t pid = serve_child(f, &port);
        pthread_t th[KILL_WRITERS];
        for (int t = 0; t < KILL_WRITERS; t++) {
            memset(&w[t], 0, sizeof w[t]);
            snprintf(w[t].base, sizeof w[t].base, "http://127.0.0.1:%u", (unsigned)port);
            w[t].round = round;
            w[t].who = t;
            pthread_create(&th[t], NULL, kill_writer_run, &w[t]);
        }
        sleep_ms(400 + 150 * round);
        kill(pid, SIGKILL);
        int ws = 0;
        waitpid(pid, &ws, 0);
        for (int t = 0; t < KILL_WRITERS; t++) {
            pthread_join(th[t], NULL);
        }
        /* the acknowledged writes of this round are all there */
        st_db *db = NULL;
        cm_error e;
        cm_error_clear(&e);
        assert_int_equal(st_db_open(f->db, &db, &e), CM_OK);
        int acked = 0;
        for (int t = 0; t < KILL_WRITERS; t++) {
            for (int i = 0; i < w[t].n_acked; i++) {
                st_doc d;
                memset(&d, 0, sizeof d);
                cm_status st = st_mesh_get(db, w[t].acked[i], &d, &e);
                if (st != CM_OK) {
                    fprintf(stderr, "acknowledged mesh %s lost\n", w[t].acked[i]);
                }
                assert_int_equal(st, CM_OK);
                st_doc_fini(&d);
                acked++;
            }
        }
        assert_int_equal(st_db_integrity_check(db, &e), CM_OK);
        st_db_close(db);
        assert_true(acked > 0);
        total += acked;
    }
    fprintf(stderr, "kill -9: %d acknowledged writes over %d kills, none lost\n", total,
            KILL_ROUNDS);
    free(w);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lim_token_checked_before_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_inflight_bodies_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_slow_heads_cut_healthz_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_binary_request_line_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_slow_body_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_profiles_never_from_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_errors_are_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_library_answers_logged_as_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_ambiguous_framing_is_json_400, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_readyz_and_quick_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_readyz_checks_in_the_background, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_big_store_checked_beside_listening, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lim_two_servers_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_mesh_names_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_suggest_and_sweep_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_suggest_stops_when_client_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_slow_requests_leave_polling_threads_free, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lim_stop_honours_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_queued_request_deadline_counts_the_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lim_one_client_leaves_handler_places, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_plan_stops_at_plan_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_stop_stops_abandoned_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_huge_mesh_refused_before_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lim_kill_9_loses_no_acknowledged_write, setup,
                                        teardown),
    };
    int rc = cmocka_run_group_tests_name("srv_limits", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
