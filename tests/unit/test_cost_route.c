/* SPDX-License-Identifier: Apache-2.0
 * GET /v1/plans/{id}/memory through a real server (tests/unit/tu_http.h):
 * the memory timeline of a stored plan (the Flax MLP as nn.scan writes it),
 * its peak (the loop, and the body's op at its peak) and largest buffers, ?points= capping the
 * points and rejecting a bad count with its path, 404 for a plan that does not exist. */
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

#include "cm.h"
#include "sp_gen.h"
#include "srv_app.h"
#include "tu_http.h"

static int setup(void **state)
{
    tu_server *s = calloc(1, sizeof *s);
    if (s == NULL || tu_server_init(s, "test_cost_route") != 0) {
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

static int teardown(void **state)
{
    tu_server *s = *state;
    tu_server_fini(s);
    free(s);
    return 0;
}

/* Stores the scanned MLP as a plan; returns its id. */
static json_int_t post_scan_mlp(const tu_server *s)
{
    sp_gen_mlp_opts o;
    sp_gen_mlp_opts_init(&o);
    o.scan = true;
    cm_buf t;
    cm_buf_init(&t);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_mlp_mlir(&o, &t, &err), CM_OK);
    json_t *req = json_pack("{s:s%}", "mlir", t.data, t.len);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    cm_buf_fini(&t);
    tu_resp r;
    tu_http(s, "POST", "/v1/plans", "application/json", body, &r);
    free(body);
    if (r.status != 201) {
        fail_msg("POST /v1/plans: %ld %.*s", r.status, (int)r.body.len, r.body.data);
    }
    json_int_t id = tu_jint(r.json, "id");
    tu_resp_fini(&r);
    return id;
}

static void test_cost_route_memory_timeline(void **state)
{
    tu_server *s = *state;
    json_int_t id = post_scan_mlp(s);
    char path[128];
    snprintf(path, sizeof path, "/v1/plans/%lld/memory", (long long)id);
    tu_resp r;
    tu_http(s, "GET", path, NULL, NULL, &r);
    if (r.status != 200 || r.json == NULL) {
        fail_msg("GET %s: %ld %.*s", path, r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(tu_jint(r.json, "devices"), 8);
    /* the stacked kernels, 4 layers x 2 x 1024x4096 f32 over 4 "model" devices */
    assert_int_equal(tu_jint(r.json, "parameter_bytes"), 32 << 20);
    json_t *peak = json_object_get(r.json, "peak");
    assert_string_equal(tu_jstr(peak, "op"), "stablehlo.while");
    assert_true(json_integer_value(json_object_get(peak, "line")) > 0);
    /* the peak is inside the loop body: the op there is named too */
    json_t *inner = json_object_get(peak, "inner");
    assert_true(json_is_object(inner));
    assert_non_null(tu_jstr(inner, "op"));
    assert_true(json_integer_value(json_object_get(inner, "line")) >
                json_integer_value(json_object_get(peak, "line")));
    json_t *bufs = json_object_get(r.json, "largest_buffers");
    assert_true(json_array_size(bufs) >= 2);
    assert_string_equal(tu_jstr(json_array_get(bufs, 0), "kind"), "parameter");
    assert_int_equal(tu_jint(json_array_get(bufs, 0), "bytes"), 16 << 20);
    json_t *pts = json_object_get(r.json, "points");
    size_t n = json_array_size(pts);
    assert_true(n >= 2 && (json_int_t)n == tu_jint(r.json, "n_ops"));
    json_int_t best = 0;
    for (size_t i = 0; i < n; i++) {
        json_int_t lb = tu_jint(json_array_get(pts, i), "live_bytes");
        best = lb > best ? lb : best;
    }
    assert_int_equal(best, tu_jint(peak, "bytes"));
    tu_resp_fini(&r);
    /* capped */
    snprintf(path, sizeof path, "/v1/plans/%lld/memory?points=1", (long long)id);
    tu_http(s, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "points")), 1);
    assert_int_equal(tu_jint(json_array_get(json_object_get(r.json, "points"), 0), "live_bytes"),
                     tu_jint(json_object_get(r.json, "peak"), "bytes"));
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans/%lld/memory?points=0", (long long)id);
    tu_http(s, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/points");
    tu_resp_fini(&r);
    tu_http(s, "GET", "/v1/plans/999999/memory", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cost_route_memory_timeline, setup, teardown),
    };
    int rc = cmocka_run_group_tests_name("cost_route", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
