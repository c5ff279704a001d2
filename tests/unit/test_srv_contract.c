/* SPDX-License-Identifier: Apache-2.0
 * The HTTP contract a client expects (issue 22), through a real server
 * (tests/unit/tu_http.h): a plan's ETag is its hash, with an immutable
 * Cache-Control, and If-None-Match answers 304; Accept: application/mlir
 * gives the propagated module, as `shardplan plan --mlir` prints it; byte
 * counts are exact JSON integers; a plan's hash covers only the stored
 * rules its custom calls name; plans are named after what the user gave;
 * the OpenAPI document keeps 3.0.3's rules (one type, nullable; operationIds);
 * CORS is off unless --cors-origin names the origin; an Idempotency-Key
 * on POST /v1/benchmarks queues a retried run once; Accept-Encoding: gzip
 * gets large JSON and MLIR replies gzip-coded, and they inflate to the
 * bytes an uncoded reply carries.
 * Run from the repository root (examples/ is read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <zlib.h>

#include "cm.h"
#include "cmd.h"
#include "srv_app.h"
#include "tu_http.h"

/* ---- fixture ------------------------------------------------------------------------------ */

static int setup(void **state)
{
    tu_server *s = calloc(1, sizeof *s);
    if (s == NULL || tu_server_init(s, "test_contract") != 0) {
        free(s);
        return -1;
    }
    srv_config c;
    tu_config_default(s, &c);
    c.request_timeout_s = 60; /* under ASan */
    tu_server_start(s, &c);
    *state = s;
    return 0;
}

static int setup_cors(void **state)
{
    tu_server *s = calloc(1, sizeof *s);
    if (s == NULL || tu_server_init(s, "test_contract") != 0) {
        free(s);
        return -1;
    }
    srv_config c;
    tu_config_default(s, &c);
    cm_error e;
    cm_error_clear(&e);
    if (srv_config_set(&c, "cors-origin", "http://app.example", &e) != CM_OK) {
        tu_server_fini(s);
        free(s);
        return -1;
    }
    tu_server_start(s, &c);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    tu_server *s = *state;
    tu_server_fini(s);
    free(s);
    return 0;
}

/* POST body to /v1/plans{query}: asserts the status and returns the reply
 * (tu_resp_fini it). */
static void post_plan(const tu_server *s, const char *query, const char *ctype, const char *body,
                      size_t len, long want, tu_resp *r)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/plans%s", query);
    tu_http_ex(s, "POST", path, ctype, body, len, NULL, NULL, r);
    if (r->status != want) {
        fprintf(stderr, "POST %s: %ld %.*s\n", path, r->status, (int)r->body.len, r->body.data);
    }
    assert_int_equal(r->status, want);
    assert_non_null(r->json);
}

static int64_t post_mlp(const tu_server *s, long want)
{
    size_t len = 0;
    char *body = tu_read_file("examples/flax_mlp.json", &len);
    assert_non_null(body);
    tu_resp r;
    post_plan(s, "", "application/json", body, len, want, &r);
    int64_t id = (int64_t)tu_jint(r.json, "id");
    tu_resp_fini(&r);
    cm_free(body);
    return id;
}

static void get_hdr(const tu_server *s, const char *path, const char *hdr, tu_resp *r)
{
    tu_http_ex(s, "GET", path, NULL, NULL, 0, NULL, hdr, r);
}

/* ---- ETag, If-None-Match, Accept ----------------------------------------------------------- */

static void test_srv_plan_get_etag_and_not_modified(void **state)
{
    tu_server *s = *state;
    int64_t id = post_mlp(s, 201);
    char path[64], want[80], hdr[160];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    tu_resp r;
    get_hdr(s, path, NULL, &r);
    assert_int_equal(r.status, 200);
    snprintf(want, sizeof want, "\"%s\"", tu_jstr(r.json, "hash"));
    assert_int_equal(strlen(want), 66);
    assert_string_equal(r.etag, want);
    assert_non_null(strstr(r.cache_control, "immutable"));
    tu_resp_fini(&r);

    /* the same tag, alone, weak, in a list, or "*": 304 with no body */
    const char *const prefix[] = {"", "W/", "\"other\", ", NULL};
    for (size_t i = 0; i < 4; i++) {
        if (prefix[i] != NULL) {
            snprintf(hdr, sizeof hdr, "If-None-Match: %s%s", prefix[i], want);
        } else {
            snprintf(hdr, sizeof hdr, "If-None-Match: *");
        }
        get_hdr(s, path, hdr, &r);
        assert_int_equal(r.status, 304);
        assert_int_equal(r.body.len, 0);
        assert_string_equal(r.etag, want);
        tu_resp_fini(&r);
    }
    /* another tag: the plan */
    get_hdr(s, path, "If-None-Match: \"0000\"", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "id"), id);
    tu_resp_fini(&r);
    /* a missing plan is still a 404 */
    get_hdr(s, "/v1/plans/4242", hdr, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    assert_string_equal(r.cache_control, ""); /* errors are never cached */
    assert_string_equal(r.etag, "");
    tu_resp_fini(&r);
    /* Accept preferring JSON keeps JSON */
    get_hdr(s, path, "Accept: application/json, application/mlir;q=0.5", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "application/json"));
    tu_resp_fini(&r);
}

static void test_srv_plan_get_accept_mlir_is_the_propagated_module(void **state)
{
    tu_server *s = *state;
    int64_t id = post_mlp(s, 201);
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    tu_resp r;
    get_hdr(s, path, "Accept: application/mlir", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "application/mlir"));
    assert_true(r.etag[0] != '\0');
    char etag_mlir[96];
    snprintf(etag_mlir, sizeof etag_mlir, "%s", r.etag);

    /* what the CLI prints for the same input */
    char *out_data = NULL;
    size_t out_len = 0;
    FILE *out = open_memstream(&out_data, &out_len);
    FILE *errs = fopen("/dev/null", "w");
    assert_non_null(out);
    assert_non_null(errs);
    char *argv[] = {(char *)(uintptr_t) "plan", (char *)(uintptr_t) "examples/flax_mlp.json",
                    (char *)(uintptr_t) "--mlir", NULL};
    assert_int_equal(cmd_plan(3, argv, out, errs), 0);
    fclose(out);
    fclose(errs);
    assert_int_equal(r.body.len, out_len);
    assert_memory_equal(r.body.data, out_data, out_len);
    assert_non_null(strstr(out_data, "sdy.sharding"));
    free(out_data);
    tu_resp_fini(&r);

    /* its own tag: the JSON tag does not match it, its own does */
    get_hdr(s, path, NULL, &r);
    assert_string_not_equal(r.etag, etag_mlir);
    char hdr[200];
    snprintf(hdr, sizeof hdr, "If-None-Match: %s", r.etag);
    tu_resp_fini(&r);
    tu_http_ex(s, "GET", path, NULL, NULL, 0, NULL, hdr, &r);
    assert_int_equal(r.status, 304);
    tu_resp_fini(&r);
}

/* ---- exact integers ------------------------------------------------------------------------- */

static void assert_exact_int(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) {
        char *t = json_dumps(o, JSON_COMPACT);
        fprintf(stderr, "%s is not an integer in %.300s\n", key, t);
        free(t);
    }
    assert_true(json_is_integer(v));
}

static void test_srv_byte_counts_are_exact_integers(void **state)
{
    tu_server *s = *state;
    int64_t id = post_mlp(s, 201);
    char path[80];
    snprintf(path, sizeof path, "/v1/plans/%lld/whatif", (long long)id);
    tu_resp r;
    tu_http(s, "POST", path, "application/json",
            "{\"edits\":[{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"
            "\"sharding\":\"<@mesh, [{}, {}]>\"}]}",
            &r);
    assert_int_equal(r.status, 200);
    const json_t *cost = json_object_get(r.json, "cost");
    for (int k = 0; k < 2; k++) {
        const json_t *side = json_object_get(cost, k == 0 ? "before" : "after");
        assert_non_null(side);
        assert_exact_int(side, "peak_bytes");
        assert_exact_int(side, "comm_bytes");
        /* more than six digits: %.6g would have rounded it */
        assert_true(json_integer_value(json_object_get(side, "peak_bytes")) > 1000000);
    }
    tu_resp_fini(&r);
    tu_http(s, "GET", "/v1/sweep?devices=2&layers=1&d_model=64&heads=2&seq=8&batch=2", NULL, NULL,
            &r);
    assert_int_equal(r.status, 200);
    const json_t *rows = json_object_get(r.json, "rows");
    assert_true(json_array_size(rows) > 0);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i);
        if (json_object_get(row, "peak_bytes") != NULL) {
            assert_exact_int(row, "peak_bytes");
            assert_exact_int(row, "flops");
        }
    }
    tu_resp_fini(&r);
}

/* ---- dedup ---------------------------------------------------------------------------------- */

static const char *const MLIR_CALL =
    "module @jit_f {\n"
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=4]>\n"
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, "
    "{\"b\"}]>}) -> tensor<8x16xf32> {\n"
    "  %0 = stablehlo.custom_call @my_ew(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
    "  %1 = stablehlo.add %0, %0 : tensor<8x16xf32>\n"
    "  return %1 : tensor<8x16xf32>\n"
    "}\n"
    "}\n";

static void put_rule(const tu_server *s, const char *name, const char *body)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/rules/%s", name);
    tu_resp r;
    tu_http(s, "PUT", path, "application/json", body, &r);
    assert_true(r.status == 201 || r.status == 200);
    tu_resp_fini(&r);
}

static json_int_t metric(const tu_server *s, const char *name)
{
    tu_resp r;
    tu_http(s, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    json_int_t v = -1;
    size_t k = strlen(name);
    for (const char *p = r.body.data; p != NULL && *p != '\0';) {
        if (strncmp(p, name, k) == 0 && p[k] == ' ') { /* a sample line: NAME VALUE */
            v = strtoll(p + k + 1, NULL, 10);
        }
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    tu_resp_fini(&r);
    assert_true(v >= 0);
    return v;
}

static void test_srv_unrelated_rule_keeps_the_plan_hash(void **state)
{
    tu_server *s = *state;
    put_rule(s, "my_ew", "\"i j -> i j\"");
    tu_resp r;
    post_plan(s, "", "text/plain", MLIR_CALL, strlen(MLIR_CALL), 201, &r);
    json_int_t id = tu_jint(r.json, "id");
    char hash[80];
    snprintf(hash, sizeof hash, "%s", tu_jstr(r.json, "hash"));
    tu_resp_fini(&r);
    json_int_t computed = metric(s, "shardplan_plans_total{outcome=\"computed\"}");

    /* a rule for a call target the module does not use: the same plan */
    put_rule(s, "other_target", "\"i -> i\"");
    post_plan(s, "", "text/plain", MLIR_CALL, strlen(MLIR_CALL), 200, &r);
    assert_int_equal(tu_jint(r.json, "id"), id);
    assert_string_equal(tu_jstr(r.json, "hash"), hash);
    tu_resp_fini(&r);
    /* a graph document of the Flax MLP is not re-planned either */
    int64_t mlp = post_mlp(s, 201);
    put_rule(s, "third_target", "\"i -> i\"");
    assert_int_equal(post_mlp(s, 200), mlp);
    assert_int_equal(metric(s, "shardplan_plans_total{outcome=\"computed\"}"), computed + 1);

    /* a changed rule the module does use: a new plan */
    put_rule(s, "my_ew", "\"i j -> j i\"");
    post_plan(s, "", "text/plain", MLIR_CALL, strlen(MLIR_CALL), 201, &r);
    assert_true(tu_jint(r.json, "id") != id);
    assert_string_not_equal(tu_jstr(r.json, "hash"), hash);
    tu_resp_fini(&r);
}

/* ---- names ---------------------------------------------------------------------------------- */

/* The name plan reply r's graph is stored under, and its options.name. */
static void assert_named(const tu_server *s, const tu_resp *r, const char *want)
{
    const json_t *opts = json_object_get(r->json, "options");
    assert_string_equal(tu_jstr(opts, "name"), want);
    char path[64];
    snprintf(path, sizeof path, "/v1/graphs/%lld", (long long)tu_jint(r->json, "graph_id"));
    tu_resp g;
    tu_http(s, "GET", path, NULL, NULL, &g);
    assert_int_equal(g.status, 200);
    assert_string_equal(tu_jstr(g.json, "name"), want);
    tu_resp_fini(&g);
}

static void test_srv_plan_is_named_after_what_was_given(void **state)
{
    tu_server *s = *state;
    tu_resp r;
    /* module @jit_f */
    post_plan(s, "", "text/plain", MLIR_CALL, strlen(MLIR_CALL), 201, &r);
    assert_named(s, &r, "jit_f");
    tu_resp_fini(&r);
    /* ?name= */
    char other[1024];
    snprintf(other, sizeof other, "%s", MLIR_CALL);
    memcpy(strstr(other, "@jit_f"), "@jit_g", 6); /* another module: another graph */
    post_plan(s, "?name=my_step", "text/plain", other, strlen(other), 201, &r);
    assert_named(s, &r, "my_step");
    tu_resp_fini(&r);
    /* the graph document's name */
    static const char graph[] =
        "{\"format\": \"shardplan.graph/v1\", \"name\": \"tiny_mlp\", \"meshes\": [{\"name\": "
        "\"mesh\", \"axes\": [[\"x\", 2]]}], \"inputs\": [{\"name\": \"a\", \"type\": "
        "\"tensor<4x8xf32>\"}], \"ops\": [{\"op\": \"stablehlo.negate\", \"operands\": [\"a\"], "
        "\"result\": \"b\", \"type\": \"tensor<4x8xf32>\"}], \"outputs\": [{\"value\": \"b\"}]}";
    tu_http_ex(s, "POST", "/v1/plans", "application/json", graph, strlen(graph), NULL, NULL, &r);
    if (r.status == 201) {
        assert_named(s, &r, "tiny_mlp");
    } else {
        fprintf(stderr, "graph document: %ld %.*s\n", r.status, (int)r.body.len, r.body.data);
        fail();
    }
    tu_resp_fini(&r);
}

/* ---- the OpenAPI document ---------------------------------------------------------------------- */

/* Walks j: in a 3.0.3 document "type" is one string (a nullable value says
 * "nullable": true), never a list. Counts the "type" members seen. */
static void walk_types(const json_t *j, const char *where, size_t *n_types)
{
    if (json_is_object(j)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)(uintptr_t)j, k, v)
        {
            if (strcmp(k, "type") == 0 && !json_is_object(v)) {
                if (!json_is_string(v)) {
                    fprintf(stderr, "openapi: \"type\" is not a string under %s\n", where);
                }
                assert_true(json_is_string(v));
                (*n_types)++;
            }
            if (strcmp(k, "nullable") == 0) {
                assert_true(json_is_boolean(v));
            }
            walk_types(v, k, n_types);
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            walk_types(json_array_get(j, i), where, n_types);
        }
    }
}

static void test_srv_openapi_is_structurally_3_0_3(void **state)
{
    tu_server *s = *state;
    tu_resp r;
    tu_http(s, "GET", "/v1/openapi.json", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(tu_jstr(r.json, "openapi"), "3.0.3");
    size_t n_types = 0;
    walk_types(r.json, "/", &n_types);
    assert_true(n_types > 50);
    /* every operation has an operationId, and no two the same */
    static const char *const methods[] = {"get", "put", "post", "delete", "patch", "head", "options",
                                          "trace"};
    json_t *ids = json_object(); /* new */
    size_t n_ops = 0;
    const char *path;
    json_t *item;
    json_object_foreach(json_object_get(r.json, "paths"), path, item)
    {
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            const json_t *op = json_object_get(item, methods[m]);
            if (op == NULL) {
                continue;
            }
            n_ops++;
            const char *id = tu_jstr(op, "operationId");
            if (id == NULL || id[0] == '\0') {
                fprintf(stderr, "openapi: %s %s has no operationId\n", methods[m], path);
            }
            assert_non_null(id);
            if (json_object_get(ids, id) != NULL) {
                fprintf(stderr, "openapi: operationId %s twice (%s %s)\n", id, methods[m], path);
            }
            assert_null(json_object_get(ids, id));
            json_object_set_new(ids, id, json_true());
        }
    }
    assert_true(n_ops >= 40);
    json_decref(ids);
    tu_resp_fini(&r);
}

/* ---- CORS ------------------------------------------------------------------------------------ */

typedef struct pre_hdrs {
    char origin[128], methods[128], headers[256];
} pre_hdrs;

static size_t on_pre_header(char *p, size_t sz, size_t n, void *ud)
{
    pre_hdrs *g = ud;
    size_t len = sz * n;
    tu_header_copy(p, len, "Access-Control-Allow-Origin: ", g->origin, sizeof g->origin);
    tu_header_copy(p, len, "Access-Control-Allow-Methods: ", g->methods, sizeof g->methods);
    tu_header_copy(p, len, "Access-Control-Allow-Headers: ", g->headers, sizeof g->headers);
    return len;
}

/* Off by default: no Access-Control-Allow-Origin, OPTIONS is a 405. */
static void test_srv_cors_is_off_by_default(void **state)
{
    tu_server *s = *state;
    tu_resp r;
    tu_http_ex(s, "GET", "/healthz", NULL, NULL, 0, NULL, "Origin: http://app.example", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.cors_origin, "");
    tu_resp_fini(&r);
    tu_http_ex(s, "OPTIONS", "/v1/plans", NULL, NULL, 0, NULL, "Origin: http://app.example", &r);
    assert_int_equal(r.status, 405);
    tu_resp_fini(&r);
    cm_error e;
    cm_error_clear(&e);
    srv_config c;
    srv_config_init(&c);
    assert_int_equal(srv_config_set(&c, "cors-origin", "http://a\r\nX: y", &e), CM_EINVAL);
    assert_string_equal(e.path, "/cors-origin");
}

/* --cors-origin: that origin (only) gets the header, on answers and
 * errors, and a preflight gets the methods of its path. */
static void test_srv_cors_origin_allows_that_origin(void **state)
{
    tu_server *s = *state;
    tu_resp r;
    tu_http_ex(s, "GET", "/v1/plans/4242", NULL, NULL, 0, NULL, "Origin: http://app.example", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.cors_origin, "http://app.example");
    tu_resp_fini(&r);
    tu_http_ex(s, "GET", "/healthz", NULL, NULL, 0, NULL, "Origin: http://evil.example", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.cors_origin, "");
    tu_resp_fini(&r);
    /* a body request: the early hook's path */
    tu_http_ex(s, "POST", "/v1/plans", "application/json", "{}", 2, NULL,
               "Origin: http://app.example", &r);
    assert_string_equal(r.cors_origin, "http://app.example");
    tu_resp_fini(&r);
    /* a preflight: 204 with the path's methods */
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/plans/1", s->base);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Origin: http://app.example");
    hdrs = curl_slist_append(hdrs, "Access-Control-Request-Method: DELETE");
    pre_hdrs got;
    memset(&got, 0, sizeof got);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "OPTIONS");
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_pre_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &got);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    assert_int_equal(status, 204);
    assert_string_equal(got.origin, "http://app.example");
    assert_non_null(strstr(got.methods, "DELETE"));
    assert_non_null(strstr(got.methods, "GET"));
    assert_non_null(strstr(got.headers, "Authorization"));
}

/* ---- gzip ------------------------------------------------------------------------------------- */

typedef struct gz_resp {
    long status;
    cm_buf body; /* as sent, not decoded */
    char encoding[64], vary[128], etag[96], ctype[96];
} gz_resp;

static size_t on_gz_header(char *p, size_t sz, size_t n, void *ud)
{
    gz_resp *g = ud;
    size_t len = sz * n;
    tu_header_copy(p, len, "Content-Encoding: ", g->encoding, sizeof g->encoding);
    tu_header_copy(p, len, "Vary: ", g->vary, sizeof g->vary);
    tu_header_copy(p, len, "ETag: ", g->etag, sizeof g->etag);
    tu_header_copy(p, len, "Content-Type: ", g->ctype, sizeof g->ctype);
    return len;
}

/* GET path with the extra headers hv (NULL-terminated, NULLs skipped
 * before it: up to 3); the body as it came (libcurl decodes nothing, as
 * CURLOPT_ACCEPT_ENCODING is not set). */
static void get_raw(const tu_server *s, const char *path, const char *h1, const char *h2,
                    const char *h3, gz_resp *g)
{
    memset(g, 0, sizeof *g);
    cm_buf_init(&g->body);
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[256];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    struct curl_slist *hdrs = NULL;
    const char *const hv[] = {h1, h2, h3};
    for (size_t i = 0; i < 3; i++) {
        if (hv[i] != NULL) {
            hdrs = curl_slist_append(hdrs, hv[i]);
        }
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &g->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_gz_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, g);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &g->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
}

/* Inflates the gzip member data (len bytes) into out; true when it is one
 * whole, well-formed member. */
static bool gunzip(const char *data, size_t len, cm_buf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK) {
        return false;
    }
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    unsigned char chunk[16384];
    int rc;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        cm_buf_append(out, (const char *)chunk, sizeof chunk - z.avail_out);
    } while (rc == Z_OK);
    bool ok = rc == Z_STREAM_END && z.avail_in == 0;
    inflateEnd(&z);
    return ok;
}

/* One representation of path (under accept, or JSON): gzip-coded when asked,
 * inflating to the plain reply's bytes, Vary: Accept-Encoding on both, the
 * coded reply's ETag the weak form of the plain one. */
static void check_gzip_of(const tu_server *s, const char *path, const char *accept)
{
    gz_resp plain, coded;
    get_raw(s, path, accept, NULL, NULL, &plain);
    get_raw(s, path, accept, "Accept-Encoding: gzip, deflate", NULL, &coded);
    assert_int_equal(plain.status, 200);
    assert_int_equal(coded.status, 200);
    assert_string_equal(plain.encoding, "");
    assert_string_equal(coded.encoding, "gzip");
    assert_non_null(strstr(plain.vary, "Accept-Encoding"));
    assert_non_null(strstr(coded.vary, "Accept-Encoding"));
    assert_non_null(strstr(coded.vary, "Accept,")); /* the handler's Vary: Accept kept */
    assert_string_equal(plain.ctype, coded.ctype);
    assert_true(plain.body.len >= 1024);
    assert_true(coded.body.len < plain.body.len / 2);
    cm_buf out;
    cm_buf_init(&out);
    assert_true(gunzip(coded.body.data, coded.body.len, &out));
    assert_int_equal(out.len, plain.body.len);
    assert_memory_equal(out.data, plain.body.data, out.len);
    char weak[128];
    snprintf(weak, sizeof weak, "W/%s", plain.etag);
    assert_true(plain.etag[0] == '"');
    assert_string_equal(coded.etag, weak);

    /* the weak tag revalidates: 304 with the validators the 200 carries, no coding */
    char inm[160];
    snprintf(inm, sizeof inm, "If-None-Match: %s", coded.etag);
    gz_resp nm;
    get_raw(s, path, accept, inm, "Accept-Encoding: gzip", &nm);
    assert_int_equal(nm.status, 304);
    assert_int_equal(nm.body.len, 0);
    assert_string_equal(nm.etag, coded.etag);
    assert_string_equal(nm.encoding, "");
    assert_non_null(strstr(nm.vary, "Accept-Encoding"));
    cm_buf_fini(&nm.body);
    cm_buf_fini(&out);
    cm_buf_fini(&plain.body);
    cm_buf_fini(&coded.body);
}

static void test_srv_gzip_when_asked(void **state)
{
    tu_server *s = *state;
    int64_t id = post_mlp(s, 201);
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    check_gzip_of(s, path, NULL);
    check_gzip_of(s, path, "Accept: application/mlir");

    /* refused (q=0), or not offered: as it is */
    static const char *const no[] = {"Accept-Encoding: gzip;q=0", "Accept-Encoding: identity",
                                     "Accept-Encoding: br", "Accept-Encoding: *, gzip; q=0.000",
                                     "Accept-Encoding: gzipx"};
    static const char *const yes[] = {"Accept-Encoding: *", "Accept-Encoding: GZIP;q=0.5",
                                      "Accept-Encoding: x-gzip", "Accept-Encoding: br, gzip;q=1"};
    gz_resp g;
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        get_raw(s, "/v1/openapi.json", no[i], NULL, NULL, &g);
        assert_int_equal(g.status, 200);
        assert_string_equal(g.encoding, "");
        json_t *doc = json_loadb(g.body.data, g.body.len, 0, NULL);
        assert_non_null(doc);
        json_decref(doc);
        cm_buf_fini(&g.body);
    }
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        get_raw(s, "/v1/openapi.json", yes[i], NULL, NULL, &g);
        assert_int_equal(g.status, 200);
        assert_string_equal(g.encoding, "gzip");
        assert_non_null(strstr(g.vary, "Accept-Encoding"));
        cm_buf_fini(&g.body);
    }
    /* a small reply (under the threshold) and a list with a 404 error: as they are */
    get_raw(s, "/healthz", "Accept-Encoding: gzip", NULL, NULL, &g);
    assert_int_equal(g.status, 200);
    assert_string_equal(g.encoding, "");
    assert_string_equal(g.vary, "");
    cm_buf_fini(&g.body);
    get_raw(s, "/v1/plans/4242", "Accept-Encoding: gzip", NULL, NULL, &g);
    assert_int_equal(g.status, 404);
    assert_string_equal(g.encoding, "");
    cm_buf_fini(&g.body);
    /* the metrics are text/plain: never coded */
    get_raw(s, "/metrics", "Accept-Encoding: gzip", NULL, NULL, &g);
    assert_int_equal(g.status, 200);
    assert_string_equal(g.encoding, "");
    cm_buf_fini(&g.body);
}

/* ---- Idempotency-Key ------------------------------------------------------------------------ */

static json_int_t post_bench(const tu_server *s, const char *body, const char *hdr, long want)
{
    tu_resp r;
    tu_http_ex(s, "POST", "/v1/benchmarks", "application/json", body, strlen(body), NULL, hdr, &r);
    if (r.status != want) {
        fprintf(stderr, "POST /v1/benchmarks: %ld %.*s\n", r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, want);
    json_int_t id = want == 202 ? tu_jint(r.json, "id") : 0;
    tu_resp_fini(&r);
    return id;
}

/* A retried POST /v1/benchmarks with the same Idempotency-Key queues one run. */
static void test_srv_bench_idempotency_key_queues_once(void **state)
{
    tu_server *s = *state;
    int64_t plan = post_mlp(s, 201);
    char body[128], other[128];
    snprintf(body, sizeof body, "{\"plan_id\": %lld, \"iters\": 2}", (long long)plan);
    snprintf(other, sizeof other, "{\"plan_id\": %lld, \"iters\": 3}", (long long)plan);
    json_int_t a = post_bench(s, body, "Idempotency-Key: step-42", 202);
    json_int_t b = post_bench(s, body, "Idempotency-Key: step-42", 202);
    assert_true(a > 0);
    assert_int_equal(a, b);
    /* the same key for another request: a conflict, nothing queued */
    post_bench(s, other, "Idempotency-Key: step-42", 409);
    /* another key, or none: a new run each */
    json_int_t c = post_bench(s, body, "Idempotency-Key: step-43", 202);
    json_int_t d = post_bench(s, body, NULL, 202);
    assert_true(c != a && d != a && d != c);
    tu_resp r;
    tu_http(s, "GET", "/v1/benchmarks", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 3);
    tu_resp_fini(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_srv_plan_get_etag_and_not_modified, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_get_accept_mlir_is_the_propagated_module,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_byte_counts_are_exact_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_unrelated_rule_keeps_the_plan_hash, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_is_named_after_what_was_given, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_openapi_is_structurally_3_0_3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_cors_is_off_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_gzip_when_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_idempotency_key_queues_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_cors_origin_allows_that_origin, setup_cors,
                                        teardown),
    };
    int rc = cmocka_run_group_tests_name("srv_contract", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
