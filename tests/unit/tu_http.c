/* SPDX-License-Identifier: Apache-2.0
 * Test helper: the in-process server and libcurl requests (tu_http.h). */
#include "tu_http.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

int tu_server_init(tu_server *s, const char *prefix)
{
    memset(s, 0, sizeof *s);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/%s_XXXXXX", tmp != NULL ? tmp : "/tmp", prefix);
    if (mkdtemp(s->dir) == NULL) {
        return -1;
    }
    snprintf(s->db, sizeof s->db, "%s/t.db", s->dir);
    return 0;
}

void tu_config_default(const tu_server *s, srv_config *c)
{
    srv_config_init(c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 0;
    snprintf(c->db_path, sizeof c->db_path, "%s", s->db);
    c->log_path[0] = '\0';
    c->threads = 2;
    c->plan_workers = 2;
    c->max_body_bytes = 1 << 20;
    c->request_timeout_s = 15;
    c->drain_s = 5;
}

void tu_config_worker(const tu_server *s, srv_config *c, double time_limit_s, bool faults)
{
    tu_config_default(s, c);
    c->bench_time_limit_s = time_limit_s;
    c->bench_memory_mb = 0;
    c->bench_test_faults = faults;
    ssize_t n = readlink("/proc/self/exe", c->worker_path, sizeof c->worker_path - 1);
    assert_true(n > 0);
    c->worker_path[n] = '\0';
}

void tu_server_start(tu_server *s, const srv_config *c)
{
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(srv_app_create(c, &s->app, &e), CM_OK);
    assert_int_equal(srv_app_start(s->app, &e), CM_OK);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", (unsigned)srv_app_port(s->app));
}

void tu_server_stop(tu_server *s)
{
    srv_app_destroy(s->app);
    s->app = NULL;
}

void tu_server_fini(tu_server *s)
{
    tu_server_stop(s);
    char p[400];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", s->db, suffix[i]);
        unlink(p);
    }
    rmdir(s->dir);
}



size_t tu_on_body(char *p, size_t s, size_t n, void *ud)
{
    cm_buf_append(ud, p, s * n);
    return s * n;
}

bool tu_header_copy(const char *p, size_t len, const char *name, char *dst, size_t cap)
{
    size_t k = strlen(name);
    if (len <= k || strncasecmp(p, name, k) != 0) {
        return false;
    }
    size_t v = len - k;
    while (v > 0 && (p[k + v - 1] == '\r' || p[k + v - 1] == '\n')) {
        v--;
    }
    snprintf(dst, cap, "%.*s", (int)v, p + k);
    return true;
}

static size_t on_header(char *p, size_t s, size_t n, void *ud)
{
    tu_resp *r = ud;
    size_t len = s * n;
    tu_header_copy(p, len, "Location: ", r->location, sizeof r->location);
    tu_header_copy(p, len, "Allow: ", r->allow, sizeof r->allow);
    tu_header_copy(p, len, "WWW-Authenticate: ", r->www_auth, sizeof r->www_auth);
    tu_header_copy(p, len, "ETag: ", r->etag, sizeof r->etag);
    tu_header_copy(p, len, "Cache-Control: ", r->cache_control, sizeof r->cache_control);
    tu_header_copy(p, len, "Content-Type: ", r->content_type, sizeof r->content_type);
    tu_header_copy(p, len, "Access-Control-Allow-Origin: ", r->cors_origin,
                   sizeof r->cors_origin);
    return len;
}

void tu_resp_fini(tu_resp *r)
{
    cm_buf_fini(&r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

void tu_http_ex(const tu_server *f, const char *method, const char *path, const char *ctype,
                const char *body, size_t len, const char *token, const char *extra_hdr,
                tu_resp *out)
{
    memset(out, 0, sizeof *out);
    cm_buf_init(&out->body);
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[512];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    struct curl_slist *hdrs = NULL;
    char line[600];
    if (ctype != NULL) {
        snprintf(line, sizeof line, "Content-Type: %s", ctype);
        hdrs = curl_slist_append(hdrs, line);
    }
    if (token != NULL) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, line);
    }
    if (extra_hdr != NULL) {
        hdrs = curl_slist_append(hdrs, extra_hdr);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    /* A large body waits for the server's 100 Continue (curl's default for
     * over 1 MiB) for up to 10 s, not curl's 1 s: a server that refuses it
     * from its headers (413) answers first, and under load a client that
     * gave up waiting would be sending into a closed connection (error 55)
     * instead of reading that answer. */
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 10000L);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(h);
    assert_int_equal(rc, CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    json_error_t je;
    if (out->body.len > 0) {
        out->json = json_loadb(out->body.data, out->body.len, 0, &je);
    }
}

void tu_http(const tu_server *f, const char *method, const char *path, const char *ctype,
             const char *body, tu_resp *out)
{
    tu_http_ex(f, method, path, ctype, body, body != NULL ? strlen(body) : 0, NULL, NULL, out);
}

json_int_t tu_jint(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

const char *tu_jstr(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    assert_true(json_is_string(v));
    return json_string_value(v);
}

/* Asserts an error reply: status, code and path. */
void tu_expect_error(const tu_resp *r, long status, const char *code, const char *path)
{
    if (r->status != status) {
        fprintf(stderr, "expected %ld, got %ld: %.*s\n", status, r->status, (int)r->body.len,
                r->body.data != NULL ? r->body.data : "");
    }
    assert_int_equal(r->status, status);
    assert_non_null(r->json);
    const json_t *e = json_object_get(r->json, "error");
    assert_true(json_is_object(e));
    assert_string_equal(tu_jstr(e, "code"), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    if (path != NULL) {
        assert_string_equal(tu_jstr(e, "path"), path);
    }
}

char *tu_read_file(const char *path, size_t *len)
{
    char *data = NULL;
    assert_int_equal(cm_file_read(path, &data, len, NULL), CM_OK);
    return data;
}

