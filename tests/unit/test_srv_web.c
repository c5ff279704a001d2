/* SPDX-License-Identifier: Apache-2.0
 * Tests of srv_web: the dashboard's static files served by the real server
 * (srv_app) in-process on 127.0.0.1, port 0, from a temporary folder, and
 * driven through libcurl with paths sent as written (no client-side dot
 * removal): Content-Type, Cache-Control, 404 for traversal, symlinks out of
 * the folder, hidden and missing files, and / without --web. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cm.h"
#include "srv_app.h"
#include "srv_web.h"
#include "tu_http.h"

typedef struct fixture {
    char dir[256]; /* temporary root: t.db, web/, secret.txt */
    char web[300]; /* the served folder */
    srv_app *app;
    char base[64]; /* http://127.0.0.1:PORT */
} fixture;

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void start(fixture *f, bool with_web)
{
    srv_config c;
    srv_config_init(&c);
    c.port = 0;
    snprintf(c.db_path, sizeof c.db_path, "%s/t.db", f->dir);
    c.log_path[0] = '\0';
    c.threads = 2;
    c.drain_s = 2;
    if (with_web) {
        snprintf(c.web_dir, sizeof c.web_dir, "%s", f->web);
    }
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(srv_app_create(&c, &f->app, &e), CM_OK);
    assert_int_equal(srv_app_start(f->app, &e), CM_OK);
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", (unsigned)srv_app_port(f->app));
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/test_srv_web_XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (f == NULL || mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    char p[400];
    snprintf(f->web, sizeof f->web, "%s/web", f->dir);
    mkdir(f->web, 0755);
    snprintf(p, sizeof p, "%s/assets", f->web);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/index.html", f->web);
    put_file(p, "<!doctype html><title>t</title>");
    snprintf(p, sizeof p, "%s/assets/app-ABCD1234.js", f->web);
    put_file(p, "console.log(1);");
    snprintf(p, sizeof p, "%s/assets/app.css", f->web);
    put_file(p, "body{}");
    snprintf(p, sizeof p, "%s/.hidden", f->web);
    put_file(p, "hidden");
    snprintf(p, sizeof p, "%s/secret.txt", f->dir);
    put_file(p, "SECRET");
    char link[400];
    snprintf(link, sizeof link, "%s/out.txt", f->web);
    assert_int_equal(symlink(p, link), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    srv_app_destroy(f->app);
    const char *files[] = {"web/index.html",
                           "web/assets/app-ABCD1234.js",
                           "web/assets/app.css",
                           "web/.hidden",
                           "web/out.txt",
                           "secret.txt",
                           "t.db",
                           "t.db-wal",
                           "t.db-shm",
                           "web/assets",
                           "web"};
    char p[400];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", f->dir, files[i]);
        if (unlink(p) != 0) {
            rmdir(p);
        }
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

typedef struct resp {
    long status;
    char type[128];
    char cache[128];
    char body[256];
    size_t body_len;
} resp;

static size_t on_body(char *p, size_t s, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = s * n;
    size_t room = sizeof r->body - 1 - r->body_len;
    size_t k = len < room ? len : room;
    memcpy(r->body + r->body_len, p, k);
    r->body_len += k;
    r->body[r->body_len] = '\0';
    return len;
}

static size_t on_header(char *p, size_t s, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = s * n;
    tu_header_copy(p, len, "Content-Type: ", r->type, sizeof r->type);
    tu_header_copy(p, len, "Cache-Control: ", r->cache, sizeof r->cache);
    return len;
}

static void get(const fixture *f, const char *path, resp *r)
{
    memset(r, 0, sizeof *r);
    char url[512];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
}

static void test_srv_web_content_type_by_extension(void **state)
{
    (void)state;
    assert_string_equal(srv_web_content_type("index.html"), "text/html; charset=utf-8");
    assert_string_equal(srv_web_content_type("assets/app-X.js"), "text/javascript; charset=utf-8");
    assert_string_equal(srv_web_content_type("a/b.css"), "text/css; charset=utf-8");
    assert_string_equal(srv_web_content_type("a.svg"), "image/svg+xml");
    assert_string_equal(srv_web_content_type("a.d/noext"), "application/octet-stream");
}

static void test_srv_web_is_hashed_needs_eight_alnum(void **state)
{
    (void)state;
    assert_true(srv_web_is_hashed("assets/app-ABCD1234.js"));
    assert_true(srv_web_is_hashed("chunk-Q2W3E4R5T6.css"));
    assert_false(srv_web_is_hashed("index.html"));
    assert_false(srv_web_is_hashed("assets/app-ABC.js"));
    assert_false(srv_web_is_hashed("assets/app-ABCD_234.js"));
    assert_false(srv_web_is_hashed("my-app/index.html"));
}

static void test_srv_web_wants_get_outside_v1(void **state)
{
    (void)state;
    assert_true(srv_web_wants("GET", "/"));
    assert_true(srv_web_wants("HEAD", "/assets/x.js"));
    assert_false(srv_web_wants("POST", "/"));
    assert_false(srv_web_wants("GET", "/v1/plans"));
    assert_false(srv_web_wants("GET", "/v1"));
}

static void test_srv_web_reply_index_no_cache(void **state)
{
    fixture *f = *state;
    start(f, true);
    resp r;
    get(f, "/", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.type, "text/html; charset=utf-8");
    assert_string_equal(r.cache, "no-cache");
    assert_string_equal(r.body, "<!doctype html><title>t</title>");
    get(f, "/index.html", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.cache, "no-cache");
}

static void test_srv_web_reply_hashed_asset_immutable(void **state)
{
    fixture *f = *state;
    start(f, true);
    resp r;
    get(f, "/assets/app-ABCD1234.js", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.type, "text/javascript; charset=utf-8");
    assert_string_equal(r.cache, "public, max-age=31536000, immutable");
    get(f, "/assets/app.css", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.type, "text/css; charset=utf-8");
    assert_string_equal(r.cache, "no-cache");
}

static void test_srv_web_reply_refuses_traversal(void **state)
{
    fixture *f = *state;
    start(f, true);
    const char *paths[] = {"/../secret.txt",     "/assets/../../secret.txt",
                           "/%2e%2e/secret.txt", "/assets/%2e%2e/%2e%2e/secret.txt",
                           "/..%2fsecret.txt",   "/out.txt",
                           "/.hidden",           "/assets/",
                           "/assets//app.css",   "/assets\\app.css",
                           "/nope.js",           "/assets"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        resp r;
        get(f, paths[i], &r);
        if (r.status != 404 || strstr(r.body, "SECRET") != NULL) {
            fail_msg("%s: status %ld body %s", paths[i], r.status, r.body);
        }
        assert_non_null(strstr(r.body, "\"not_found\""));
    }
}

static void test_srv_web_reply_api_unchanged(void **state)
{
    fixture *f = *state;
    start(f, true);
    resp r;
    get(f, "/v1/nothing", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.type, "application/json");
    get(f, "/healthz", &r);
    assert_int_equal(r.status, 200);
}

static void test_srv_web_reply_without_web_is_404(void **state)
{
    fixture *f = *state;
    start(f, false);
    resp r;
    get(f, "/", &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "\"not_found\""));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_srv_web_content_type_by_extension),
        cmocka_unit_test(test_srv_web_is_hashed_needs_eight_alnum),
        cmocka_unit_test(test_srv_web_wants_get_outside_v1),
        cmocka_unit_test_setup_teardown(test_srv_web_reply_index_no_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_web_reply_hashed_asset_immutable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_web_reply_refuses_traversal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_web_reply_api_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_web_reply_without_web_is_404, setup, teardown),
    };
    int rc = cmocka_run_group_tests_name("srv_web", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
