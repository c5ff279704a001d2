/* SPDX-License-Identifier: Apache-2.0
 * Integration tests of the HTTP API: the real server (srv_app) runs
 * in-process on 127.0.0.1, port 0, with a temporary database, and is driven
 * through libcurl and through `shardplan client` (cmd_client). Covers
 * every endpoint, every error status, auth on and off, restart persistence,
 * concurrent requests and graceful shutdown. Run from the repository root
 * (examples/ and profiles/ are read). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "cm.h"
#include "cmd.h"
#include "sp_example.h"
#include "sp_plan.h"
#include "srv_app.h"
#include "st_db.h"
#include "tu_http.h"

/* ---- fixture (tests/unit/tu_http.h) ------------------------------------------------------- */

typedef tu_server fixture;
typedef tu_resp resp;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || tu_server_init(f, "test_srv") != 0) {
        free(f);
        return -1;
    }
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(f, &c);
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

/* ---- tests --------------------------------------------------------------------------------- */

static void test_srv_health_ready_openapi_metrics(void **state)
{
    fixture *f = *state;
    resp r;
    tu_http(f, "GET", "/healthz", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(tu_jstr(r.json, "status"), "ok");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/readyz", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "schema_version"), ST_DB_SCHEMA_VERSION);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/openapi.json", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(tu_jstr(r.json, "openapi"), "3.0.3");
    const json_t *paths = json_object_get(r.json, "paths");
    const char *const expect[] = {"/healthz",          "/readyz",           "/metrics",
                                  "/v1/graphs",        "/v1/graphs/{id}",   "/v1/meshes/{name}",
                                  "/v1/rules/{name}",  "/v1/profiles/{name}", "/v1/plans",
                                  "/v1/plans/{id}",    "/v1/compare",       "/v1/runs",
                                  "/v1/plans/{id}/lint", "/v1/plans/{id}/collectives",
                                  "/v1/plans/{id}/suggest",     "/v1/plans/{id}/whatif",
                                  "/v1/sweep",
                                  "/v1/runs/{id}",     "/v1/tokens",        "/v1/tokens/{id}"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        assert_non_null(json_object_get(paths, expect[i]));
    }
    tu_resp_fini(&r);
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body.data, "shardplan_http_requests_total{route=\"healthz\","
                                        "code=\"2xx\"} 1"));
    assert_non_null(strstr(r.body.data, "shardplan_http_request_duration_seconds_bucket"));
    assert_non_null(strstr(r.body.data, "shardplan_plan_duration_seconds_count"));
    assert_non_null(strstr(r.body.data, "shardplan_http_errors_total{code=\"not_found\"}"));
    tu_resp_fini(&r);
}

static void test_srv_errors_have_status_code_and_path(void **state)
{
    fixture *f = *state;
    resp r;
    tu_http(f, "GET", "/v1/nothing", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "");
    tu_resp_fini(&r);
    tu_http(f, "PATCH", "/v1/plans", NULL, NULL, &r);
    tu_expect_error(&r, 405, "method_not_allowed", "");
    assert_string_equal(r.allow, "POST, GET");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/xml", "<graph/>", &r);
    tu_expect_error(&r, 415, "unsupported_media_type", "");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/json", "{\"graph\": [", &r);
    tu_expect_error(&r, 400, "invalid", "");
    assert_non_null(strstr(tu_jstr(json_object_get(r.json, "error"), "message"), "line 1"));
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/json", "{\"graph_id\": 1, \"bogus\": 2}", &r);
    tu_expect_error(&r, 400, "invalid", "/bogus");
    tu_resp_fini(&r);
    /* a graph document that decodes wrong: the planner's JSON Pointer */
    tu_http(f, "POST", "/v1/graphs", "application/json",
         "{\"inputs\":[{\"name\":\"x\",\"type\":\"tensor<4xf32>\"}],"
         "\"ops\":[{\"op\":\"stablehlo.abs\",\"operands\":[\"%nope\"],"
         "\"results\":[\"tensor<4xf32>\"]}],\"outputs\":[\"%x\"]}",
         &r);
    tu_expect_error(&r, 400, "invalid", "/ops/0/operands/0");
    tu_resp_fini(&r);
    /* MLIR errors give line:col */
    tu_http(f, "POST", "/v1/graphs", "text/plain", "func.func @main(%x: tensor<4xf32>) {\n  bad\n}",
         &r);
    tu_expect_error(&r, 400, "invalid", NULL);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans/12345", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "/id");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans/abc", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "/id");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans?limit=5000", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/limit");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans?after=-1", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/after");
    tu_resp_fini(&r);
    /* 413: the body limit is 1 MiB in this fixture */
    size_t big = (1 << 20) + 100;
    char *blob = malloc(big);
    memset(blob, ' ', big);
    blob[0] = '{';
    blob[big - 1] = '}';
    tu_http_ex(f, "POST", "/v1/graphs", "application/json", blob, big, NULL, NULL, &r);
    tu_expect_error(&r, 413, "too_large", "");
    tu_resp_fini(&r);
    free(blob);
    /* 409: create-only PUT of a different mesh under a taken name */
    tu_http(f, "PUT", "/v1/meshes/m409", "application/json", "{\"axes\":[[\"x\",2]]}", &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    tu_http_ex(f, "PUT", "/v1/meshes/m409", "application/json", "{\"axes\":[[\"x\",4]]}", strlen("{\"axes\":[[\"x\",4]]}"), NULL,
            "If-None-Match: *", &r);
    tu_expect_error(&r, 409, "conflict", "/name");
    tu_resp_fini(&r);
}

static void test_srv_graphs_store_list_get_delete(void **state)
{
    fixture *f = *state;
    size_t jl, ml;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    char *ms = tu_read_file("examples/flax_mlp.mlir", &ml);
    resp r;
    tu_http_ex(f, "POST", "/v1/graphs?name=mlp", "application/json", js, jl, NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    json_int_t id1 = tu_jint(r.json, "id");
    assert_string_equal(tu_jstr(r.json, "format"), "json");
    assert_string_equal(tu_jstr(r.json, "name"), "mlp");
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/graphs/%lld", (long long)id1);
    assert_string_equal(r.location, loc);
    tu_resp_fini(&r);
    tu_http_ex(f, "POST", "/v1/graphs", "application/json", js, jl, NULL, NULL, &r);
    assert_int_equal(r.status, 200); /* same content: the stored graph */
    assert_int_equal(tu_jint(r.json, "id"), id1);
    tu_resp_fini(&r);
    tu_http_ex(f, "POST", "/v1/graphs", "text/plain", ms, ml, NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    json_int_t id2 = tu_jint(r.json, "id");
    assert_string_equal(tu_jstr(r.json, "format"), "mlir");
    tu_resp_fini(&r);
    /* paging */
    tu_http(f, "GET", "/v1/graphs?limit=1", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    json_int_t next = tu_jint(r.json, "next_after");
    assert_int_equal(next, id1);
    tu_resp_fini(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/graphs?limit=1&after=%lld", (long long)next);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(tu_jint(json_array_get(json_object_get(r.json, "items"), 0), "id"), id2);
    assert_int_equal(tu_jint(r.json, "next_after"), 0);
    tu_resp_fini(&r);
    /* filters */
    tu_http(f, "GET", "/v1/graphs?format=mlir", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/graphs?name=mlp", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/graphs?format=xml", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/format");
    tu_resp_fini(&r);
    /* get, raw, delete */
    tu_http(f, "GET", loc, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_object(json_object_get(r.json, "graph")));
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/graphs/%lld?raw=1", (long long)id2);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.body.len, ml);
    assert_memory_equal(r.body.data, ms, ml);
    assert_string_equal(r.content_type, "text/plain"); /* MLIR as stored, not JSON */
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/graphs/%lld", (long long)id2);
    tu_http(f, "DELETE", path, NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "/id");
    tu_resp_fini(&r);
    cm_free(js);
    cm_free(ms);
}

/* Names come from what the user gave: `module @jit_f` names an MLIR graph
 * and its plan; content posted again under another name keeps that name as
 * an alias, once, and the reply says so; ?name= finds a graph by an alias;
 * a plan records its mesh as data=2 x model=4. */
static void test_srv_graph_names_and_aliases(void **state)
{
    fixture *f = *state;
    static const char mlir[] =
        "module @jit_f {\n"
        "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
        "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"data\"}, {}]>}) -> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n"
        "}\n"
        "}\n";
    resp r;
    tu_http(f, "POST", "/v1/graphs", "text/plain", mlir, &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(tu_jstr(r.json, "name"), "jit_f");
    assert_int_equal(json_array_size(json_object_get(r.json, "aliases")), 0);
    assert_null(json_object_get(r.json, "existed"));
    json_int_t id = tu_jint(r.json, "id");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/graphs?name=other", "text/plain", mlir, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "id"), id);
    assert_string_equal(tu_jstr(r.json, "name"), "jit_f");
    assert_true(json_is_true(json_object_get(r.json, "existed")));
    assert_string_equal(tu_jstr(r.json, "alias_recorded"), "other");
    assert_non_null(strstr(tu_jstr(r.json, "message"), "\"other\" is recorded"));
    json_t *al = json_object_get(r.json, "aliases");
    assert_int_equal(json_array_size(al), 1);
    assert_string_equal(json_string_value(json_array_get(al, 0)), "other");
    tu_resp_fini(&r);
    /* once: the same name again records nothing new */
    tu_http(f, "POST", "/v1/graphs?name=other", "text/plain", mlir, &r);
    assert_int_equal(r.status, 200);
    assert_null(json_object_get(r.json, "alias_recorded"));
    assert_int_equal(json_array_size(json_object_get(r.json, "aliases")), 1);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/graphs?name=other", NULL, NULL, &r);
    json_t *items = json_object_get(r.json, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_int_equal(tu_jint(json_array_get(items, 0), "id"), id);
    tu_resp_fini(&r);
    /* the plan of the module: its name and mesh */
    tu_http(f, "POST", "/v1/plans", "text/plain", mlir, &r);
    assert_true(r.status == 200 || r.status == 201);
    json_t *opts = json_object_get(r.json, "options");
    assert_string_equal(json_string_value(json_object_get(opts, "name")), "jit_f");
    assert_string_equal(json_string_value(json_object_get(opts, "mesh_axes")), "data=2 x model=4");
    tu_resp_fini(&r);
}

static void test_srv_meshes_rules_profiles(void **state)
{
    fixture *f = *state;
    resp r;
    const char *mesh = "{\"axes\":[{\"name\":\"data\",\"size\":4},{\"name\":\"model\",\"size\":2}]}";
    tu_http(f, "PUT", "/v1/meshes/m42", "application/json", mesh, &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(tu_jstr(r.json, "name"), "m42");
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/meshes/m42", "application/json", mesh, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/meshes/m42", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_array(json_object_get(json_object_get(r.json, "mesh"), "axes")));
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/meshes", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/meshes/bad", "application/json", "{\"axes\":[{\"name\":\"x\",\"size\":-2}]}",
         &r);
    tu_expect_error(&r, 400, "invalid", NULL);
    assert_non_null(strstr(tu_jstr(json_object_get(r.json, "error"), "path"), "/axes/0"));
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/meshes/bad", "application/json", "[1]", &r);
    tu_expect_error(&r, 400, "invalid", "");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/meshes/none", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    tu_resp_fini(&r);
    /* rules by call-target name */
    tu_http(f, "PUT", "/v1/rules/my_matmul", "application/json", "\"i j, j k -> i k\"", &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/rules/my_matmul", NULL, NULL, &r);
    assert_string_equal(tu_jstr(r.json, "rule"), "i j, j k -> i k");
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/rules/broken", "application/json", "{\"sharding_rule\": 5}", &r);
    tu_expect_error(&r, 400, "invalid", NULL);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/rules", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "DELETE", "/v1/rules/my_matmul", NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http(f, "DELETE", "/v1/rules/my_matmul", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    tu_resp_fini(&r);
    /* device profiles */
    size_t pl;
    char *prof = tu_read_file("profiles/a100-80gb.json", &pl);
    tu_http_ex(f, "PUT", "/v1/profiles/a100", "application/json", prof, pl, NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    cm_free(prof);
    tu_http(f, "GET", "/v1/profiles/a100", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_object(json_object_get(r.json, "profile")));
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/profiles", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/profiles/bad", "application/json", "{\"peak_flops\": \"fast\"}", &r);
    tu_expect_error(&r, 400, "invalid", NULL);
    tu_resp_fini(&r);
    tu_http(f, "DELETE", "/v1/profiles/a100", NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http(f, "DELETE", "/v1/meshes/m42", NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
}

/* Posts the Flax MLP as a bare graph document; returns the plan id. */
static json_int_t post_mlp(const fixture *f, long want_status)
{
    size_t jl;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    resp r;
    tu_http_ex(f, "POST", "/v1/plans", "application/json", js, jl, NULL, NULL, &r);
    cm_free(js);
    assert_int_equal(r.status, want_status);
    json_int_t id = tu_jint(r.json, "id");
    assert_true(json_is_object(json_object_get(r.json, "plan")));
    tu_resp_fini(&r);
    return id;
}

static void test_srv_plans_dedup_options_and_lists(void **state)
{
    fixture *f = *state;
    json_int_t id = post_mlp(f, 201);
    assert_int_equal(post_mlp(f, 200), id); /* the same request: the stored plan */
    resp r;
    char path[128];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    json_int_t graph_id = tu_jint(r.json, "graph_id");
    const json_t *plan = json_object_get(r.json, "plan");
    assert_string_equal(tu_jstr(plan, "format"), "shardplan.plan/v1");
    assert_string_equal(tu_jstr(plan, "input_sha256"), tu_jstr(r.json, "hash"));
    tu_resp_fini(&r);
    /* the same module as MLIR hashes alike: the stored plan again */
    size_t ml;
    char *ms = tu_read_file("examples/flax_mlp.mlir", &ml);
    tu_http_ex(f, "POST", "/v1/plans", "text/plain", ms, ml, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "id"), id);
    tu_resp_fini(&r);
    cm_free(ms);
    /* by stored graph id */
    char body[256];
    snprintf(body, sizeof body, "{\"graph_id\":%lld}", (long long)graph_id);
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "id"), id);
    tu_resp_fini(&r);
    /* another pass: another plan */
    snprintf(body, sizeof body,
             "{\"graph_id\":%lld,\"options\":{\"pass\":\"sdy-basic-propagate\"}}",
             (long long)graph_id);
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    assert_int_equal(r.status, 201);
    json_int_t id_basic = tu_jint(r.json, "id");
    assert_true(id_basic != id);
    assert_string_equal(tu_jstr(json_object_get(r.json, "options"), "pass"), "sdy-basic-propagate");
    tu_resp_fini(&r);
    /* a stored mesh of another shape: another plan, linked to the mesh */
    tu_http(f, "PUT", "/v1/meshes/wide", "application/json",
         "{\"axes\":[{\"name\":\"data\",\"size\":4},{\"name\":\"model\",\"size\":2}]}", &r);
    json_int_t mesh_id = tu_jint(r.json, "id");
    tu_resp_fini(&r);
    snprintf(body, sizeof body, "{\"graph_id\":%lld,\"mesh\":\"wide\"}", (long long)graph_id);
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    assert_int_equal(r.status, 201);
    assert_int_equal(tu_jint(r.json, "mesh_id"), mesh_id);
    const json_t *m0 = json_array_get(json_object_get(json_object_get(r.json, "plan"), "meshes"), 0);
    assert_int_equal(tu_jint(json_array_get(json_object_get(m0, "axes"), 0), "size"), 4);
    tu_resp_fini(&r);
    /* an inline mesh, and the pass from the query */
    size_t jl;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    tu_http_ex(f, "POST", "/v1/plans?pass=sdy-aggressive-propagate", "application/json", js, jl,
            NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    cm_free(js);
    tu_http(f, "POST", "/v1/plans", "application/json",
         "{\"graph_id\":1,\"mesh\":{\"axes\":[[\"data\",8],[\"model\",1]]}}", &r);
    assert_true(r.status == 201 || r.status == 200);
    tu_resp_fini(&r);
    /* errors */
    snprintf(body, sizeof body, "{\"graph_id\":%lld,\"options\":{\"pass\":\"nope\"}}",
             (long long)graph_id);
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    tu_expect_error(&r, 400, "invalid", "/options/pass");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/json", "{\"graph_id\":999}", &r);
    tu_expect_error(&r, 404, "not_found", "/graph_id");
    tu_resp_fini(&r);
    snprintf(body, sizeof body, "{\"graph_id\":%lld,\"mesh\":\"absent\"}", (long long)graph_id);
    tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
    tu_expect_error(&r, 404, "not_found", "/mesh");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/json", "{\"graph\":{},\"mlir\":\"\"}", &r);
    tu_expect_error(&r, 400, "invalid", "");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans", "application/json", "", &r);
    tu_expect_error(&r, 400, "invalid", "");
    tu_resp_fini(&r);
    /* lists and filters */
    tu_http(f, "GET", "/v1/plans", NULL, NULL, &r);
    assert_true(json_array_size(json_object_get(r.json, "items")) >= 4);
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans?mesh_id=%lld", (long long)mesh_id);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans?graph_id=%lld&limit=2", (long long)graph_id);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 2);
    assert_true(tu_jint(r.json, "next_after") > 0);
    tu_resp_fini(&r);
    /* delete */
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id_basic);
    tu_http(f, "DELETE", path, NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    tu_resp_fini(&r);
    /* metrics count computed and deduplicated plans */
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_non_null(strstr(r.body.data, "shardplan_plans_total{outcome=\"deduplicated\"} 3"));
    /* and the store's checkpoint counters (none needed yet: a few pages) */
    assert_non_null(strstr(r.body.data, "shardplan_store_checkpoint_pages_total{step=\"bulk\"} 0"));
    assert_non_null(
        strstr(r.body.data, "shardplan_store_checkpoint_pages_total{step=\"final\"} 0"));
    tu_resp_fini(&r);
}

/* GET /v1/plans/{id}/lint and /collectives run planner/sp_advise on the
 * plan's stored graph: the Flax MLP has four all-reduces over "model" and,
 * under a stored 1 KiB profile, memory over capacity. */
static void test_srv_plan_lint_and_collectives(void **state)
{
    fixture *f = *state;
    json_int_t a = post_mlp(f, 201);
    char path[160];
    resp r;
    snprintf(path, sizeof path, "/v1/plans/%lld/collectives", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    const json_t *cs = json_object_get(r.json, "collectives");
    assert_int_equal(json_array_size(cs), 4);
    assert_string_equal(tu_jstr(json_array_get(cs, 0), "kind"), "all_reduce");
    assert_non_null(strstr(tu_jstr(json_array_get(cs, 0), "cause"), "reduction"));
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans/%lld/lint", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(json_object_get(r.json, "findings"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "counts"),
                                                        "memory_over_capacity")),
                     0);
    tu_resp_fini(&r);
    tu_http(f, "PUT", "/v1/profiles/tiny", "application/json",
         "{\"format\":\"shardplan.device-profile/v1\",\"name\":\"tiny\",\"source\":\"test\","
         "\"peak_flops\":{\"f32\":1e9},\"memory\":{\"bytes\":1024,\"bandwidth\":1e9},"
         "\"links\":{\"default\":{\"bandwidth\":1e9,\"latency\":1e-6}}}",
         &r);
    if (r.status != 201) {
        fprintf(stderr, "profile: %.*s\n", (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans/%lld/lint?profile=tiny", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "counts"),
                                                        "memory_over_capacity")),
                     1);
    assert_string_equal(tu_jstr(r.json, "profile"), "tiny");
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans/%lld/lint?mesh=nope", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/mesh");
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/plans/%lld/lint?min_bytes=-1", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/min_bytes");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans/4242/lint", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
    /* suggest (the advisor contract): the MLP's unannotated activations */
    snprintf(path, sizeof path, "/v1/plans/%lld/suggest?objective=memory&k=2&max_candidates=8",
             (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(tu_jstr(r.json, "objective"), "memory");
    assert_true(json_array_size(json_object_get(r.json, "suggestions")) <= 2);
    assert_true(json_number_value(json_object_get(json_object_get(r.json, "baseline"), "step_s")) >
                0);
    assert_true(tu_jint(r.json, "evaluated") >= 1);
    tu_resp_fini(&r);
    static const char *const bad_suggest[][2] = {{"objective=speed", "/objective"},
                                                 {"k=0", "/k"},
                                                 {"max_candidates=1000", "/max_candidates"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/v1/plans/%lld/suggest?%s", (long long)a, bad_suggest[i][0]);
        tu_http(f, "GET", path, NULL, NULL, &r);
        tu_expect_error(&r, 400, "invalid", bad_suggest[i][1]);
        tu_resp_fini(&r);
    }
    tu_http(f, "GET", "/v1/plans/4242/suggest", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
    /* the sweep: 2 devices (1x2, 2x1) x dp, tp */
    tu_http(f, "GET", "/v1/sweep?devices=2&layers=1&d_model=64&seq=8&strategies=dp,tp", NULL, NULL,
         &r);
    assert_int_equal(r.status, 200);
    const json_t *rows = json_object_get(r.json, "rows");
    assert_int_equal(json_array_size(rows), 4);
    assert_int_equal(tu_jint(json_array_get(rows, 0), "rank"), 1);
    assert_true(json_is_true(json_object_get(json_array_get(rows, 0), "ok")));
    /* the profile and its capacity per device (the dashboard's capacity line) */
    assert_string_equal(json_string_value(json_object_get(r.json, "profile")), "cpu-local");
    assert_true(json_number_value(json_object_get(json_array_get(rows, 0), "capacity_bytes")) > 0);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/sweep?devices=0", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/devices");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/sweep?strategies=dp,zz", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/strategies");
    tu_resp_fini(&r);
}

/* POST /v1/plans/{id}/whatif (the advisor contract): the Flax MLP's first
 * hidden state constrained to replicated changes it (and nothing upstream of
 * the closed constraints); with "save" the edited module becomes a new plan
 * (201 + Location) whose op 0 carries the edit's sharding. */
static void test_srv_plan_whatif(void **state)
{
    fixture *f = *state;
    json_int_t a = post_mlp(f, 201);
    char path[160];
    resp r;
#define WHATIF_EDITS                                                                               \
    "{\"edits\":[{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"                              \
    "\"sharding\":\"<@mesh, [{}, {}]>\"}]"
    snprintf(path, sizeof path, "/v1/plans/%lld/whatif", (long long)a);
    tu_http(f, "POST", path, "application/json", WHATIF_EDITS "}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "edits"), 1);
    assert_int_equal(tu_jint(r.json, "n_changed"), 1);
    const json_t *c = json_array_get(json_object_get(r.json, "changed"), 0);
    assert_string_equal(tu_jstr(c, "after"), "<@mesh, [{}, {}]>");
    assert_string_equal(tu_jstr(json_object_get(c, "value"), "op"), "/ops/0");
    const json_t *region = json_object_get(r.json, "region");
    assert_true(tu_jint(region, "ops") < tu_jint(region, "total_ops"));
    assert_true(json_number_value(json_object_get(
                    json_object_get(json_object_get(r.json, "cost"), "after"), "step_s")) > 0);
    assert_non_null(strstr(tu_jstr(r.json, "mlir"), "sdy.sharding_constraint"));
    assert_null(json_object_get(r.json, "plan_id"));
    tu_resp_fini(&r);
    /* save: a new graph and plan, as POST /v1/plans stores them */
    static const char req[] = WHATIF_EDITS ",\"save\":true,\"profile\":\"cpu-local\"}";
    tu_http(f, "POST", path, "application/json", req, &r);
    assert_int_equal(r.status, 201);
    json_int_t b = tu_jint(r.json, "plan_id");
    assert_true(b > 0 && b != a);
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/plans/%lld", (long long)b);
    assert_string_equal(r.location, loc);
    tu_resp_fini(&r);
    tu_http(f, "GET", loc, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    const json_t *op0 = json_array_get(
        json_object_get(json_array_get(json_object_get(json_object_get(r.json, "plan"), "functions"),
                                       0),
                        "ops"),
        0);
    const json_t *res0 = json_array_get(json_object_get(op0, "results"), 0);
    assert_string_equal(tu_jstr(json_object_get(res0, "sharding"), "text"), "<@mesh, [{}, {}]>");
    tu_resp_fini(&r);
    /* the same edit saved again: the same plan, 200 */
    tu_http(f, "POST", path, "application/json", req, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "plan_id"), b);
    tu_resp_fini(&r);
    /* bad edits: 400 with the JSON path; unknown plan: 404 */
    tu_http(f, "POST", path, "application/json",
         "{\"edits\":[{\"kind\":\"unconstrain\",\"op\":\"/ops/99\"}]}", &r);
    tu_expect_error(&r, 400, "invalid", "/edits/0/op");
    tu_resp_fini(&r);
    tu_http(f, "POST", path, "application/json", "{\"edits\":[],\"save\":\"yes\"}", &r);
    tu_expect_error(&r, 400, "invalid", "/save");
    tu_resp_fini(&r);
    tu_http(f, "POST", path, "application/json", "{\"edits\":[],\"profile\":\"nope\"}", &r);
    tu_expect_error(&r, 400, "invalid", "/profile");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/plans/4242/whatif", "application/json", "{\"edits\":[]}", &r);
    assert_int_equal(r.status, 404);
    tu_resp_fini(&r);
}

static void test_srv_compare_and_runs(void **state)
{
    fixture *f = *state;
    json_int_t a = post_mlp(f, 201);
    resp r;
    tu_http(f, "POST", "/v1/plans", "application/json",
         "{\"graph_id\":1,\"options\":{\"pass\":\"sdy-basic-propagate\"}}", &r);
    assert_int_equal(r.status, 201);
    json_int_t b = tu_jint(r.json, "id");
    tu_resp_fini(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/compare?plans=%lld,%lld", (long long)a, (long long)b);
    tu_http(f, "GET", path, NULL, NULL, &r);
    if (r.status != 200) {
        fprintf(stderr, "compare: %.*s\n", (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 200);
    assert_non_null(r.json);
    /* inputs are named by plan, never by a server path */
    for (size_t k = 0; k < 2; k++) {
        json_t *pl = json_array_get(json_object_get(r.json, "plans"), k);
        char want[64];
        snprintf(want, sizeof want, "plans/%lld", (long long)(k == 0 ? a : b));
        assert_string_equal(json_string_value(json_object_get(pl, "file")), want);
    }
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/compare?plans=%lld", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/plans");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/compare", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/plans");
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/compare?plans=%lld,777", (long long)a);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "/plans/1");
    tu_resp_fini(&r);
    /* benchmark runs */
    char body[200];
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"spec\":{\"steps\":3}}", (long long)a);
    tu_http(f, "POST", "/v1/runs", "application/json", body, &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(tu_jstr(r.json, "status"), "queued");
    json_int_t run = tu_jint(r.json, "id");
    assert_non_null(strstr(r.location, "/v1/runs/"));
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/runs", "application/json", "{\"plan_id\":4242}", &r);
    tu_expect_error(&r, 404, "not_found", "/plan_id");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/runs", "application/json", "{\"spec\":{}}", &r);
    tu_expect_error(&r, 400, "invalid", "/plan_id");
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/runs?status=queued", NULL, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/runs?status=sleeping", NULL, NULL, &r);
    tu_expect_error(&r, 400, "invalid", "/status");
    tu_resp_fini(&r);
    snprintf(path, sizeof path, "/v1/runs/%lld", (long long)run);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(json_object_get(r.json, "spec"), "steps"), 3);
    tu_resp_fini(&r);
    tu_http(f, "DELETE", path, NULL, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", NULL);
    tu_resp_fini(&r);
}

/* Migration reports: POST builds and stores the report (201), the same
 * request again answers the stored one (200, existed), as text or JSON;
 * GET lists and returns it with its module; bad input is a 4xx with its
 * path. */
static void test_srv_migrations(void **state)
{
    fixture *f = *state;
    size_t len = 0;
    char *mlir = tu_read_file("tests/lit/gspmd_migrate.mlir", &len);
    resp r;
    tu_http(f, "POST", "/v1/migrations?name=mlp", "text/plain", mlir, &r);
    if (r.status != 201) {
        fprintf(stderr, "migrate: %.*s\n", (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 201);
    json_int_t id = tu_jint(r.json, "id");
    assert_string_equal(tu_jstr(r.json, "name"), "mlp");
    assert_string_equal(tu_jstr(r.json, "profile"), "cpu-local");
    json_t *rep = json_object_get(r.json, "report");
    assert_string_equal(tu_jstr(rep, "format"), "shardplan.migration/v1");
    assert_true(json_array_size(json_object_get(rep, "divergences")) >= 1);
    assert_non_null(json_object_get(json_object_get(rep, "fix"), "constraints"));
    assert_non_null(strstr(r.location, "/v1/migrations/"));
    tu_resp_fini(&r);
    json_t *env = json_pack("{s:s, s:s}", "mlir", mlir, "name", "mlp");
    char *body = json_dumps(env, 0);
    tu_http(f, "POST", "/v1/migrations", "application/json", body, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tu_jint(r.json, "id"), id);
    assert_true(json_is_true(json_object_get(r.json, "existed")));
    tu_resp_fini(&r);
    free(body);
    json_decref(env);
    char path[64];
    snprintf(path, sizeof path, "/v1/migrations/%lld", (long long)id);
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(tu_jstr(r.json, "mlir"), mlir);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/migrations", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 1);
    assert_null(json_object_get(json_array_get(json_object_get(r.json, "items"), 0), "report"));
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/migrations/99", NULL, NULL, &r);
    tu_expect_error(&r, 404, "not_found", "/id");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/migrations", "application/json", "{\"name\":\"x\"}", &r);
    tu_expect_error(&r, 400, "invalid", "/mlir");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/migrations?profile=nosuch", "text/plain", mlir, &r);
    tu_expect_error(&r, 400, "invalid", "/profile");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/migrations", "text/plain", "func.func @f() {\n  return\n}\n", &r);
    assert_int_equal(r.status, 400);
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/migrations", "text/plain", "module {", &r);
    assert_int_equal(r.status, 400);
    tu_resp_fini(&r);
    cm_free(mlir);
}

/* Our own stored data that does not plan is a 500 without a path. */
static void test_srv_corrupt_stored_graph_is_500(void **state)
{
    fixture *f = *state;
    st_db *db = NULL;
    assert_int_equal(st_db_open(f->db, &db, NULL), CM_OK);
    st_graph_in gi = {"corrupt", ST_GRAPH_JSON, "{\"ops\": 7}", 10, NULL};
    int64_t gid = 0, p1 = 0, p2 = 0;
    assert_int_equal(st_graph_put(db, &gi, &gid, NULL, NULL), CM_OK);
    st_plan_in pi = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", gid, 0,
                     NULL, 0, "{}", 2, NULL, 0, false, NULL, 0, NULL};
    assert_int_equal(st_plan_put(db, &pi, &p1, NULL, NULL), CM_OK);
    pi.hash = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    assert_int_equal(st_plan_put(db, &pi, &p2, NULL, NULL), CM_OK);
    st_db_close(db);
    char path[128];
    snprintf(path, sizeof path, "/v1/compare?plans=%lld,%lld", (long long)p1, (long long)p2);
    resp r;
    tu_http(f, "GET", path, NULL, NULL, &r);
    tu_expect_error(&r, 500, "internal", "");
    tu_resp_fini(&r);
}

/* "example" in the envelope: the server generates the template (as
 * `shardplan example` does) and plans it; bad members name their path. */
static void test_srv_plan_from_example(void **state)
{
    fixture *f = *state;
    resp r;
    tu_http(f, "POST", "/v1/plans", "application/json",
         "{\"example\":{\"model\":\"transformer\",\"layers\":1,\"train\":true,"
         "\"strategy\":\"fsdp\",\"mesh\":{\"data\":4,\"model\":2}},\"name\":\"sweep 4x2 fsdp\"}",
         &r);
    assert_int_equal(r.status, 201);
    const json_t *plan = json_object_get(r.json, "plan");
    const json_t *m0 = json_array_get(json_object_get(plan, "meshes"), 0);
    const json_t *ax = json_object_get(m0, "axes");
    assert_string_equal(tu_jstr(json_array_get(ax, 0), "name"), "data");
    assert_int_equal(tu_jint(json_array_get(ax, 0), "size"), 4);
    assert_int_equal(tu_jint(json_array_get(ax, 1), "size"), 2);
    assert_true(json_array_size(json_object_get(json_array_get(json_object_get(plan, "functions"), 0),
                                                "ops")) == 89); /* as `shardplan example` gives it */
    tu_resp_fini(&r);
    static const struct {
        const char *body, *path;
    } bad[] = {
        {"{\"example\":{\"layers\":0}}", "/example/layers"},
        {"{\"example\":{\"layers\":4097}}", "/example/layers"},
        {"{\"example\":{\"model\":\"cnn\"}}", "/example/model"},
        {"{\"example\":{\"strategy\":\"pp\"}}", "/example/strategy"},
        {"{\"example\":{\"mesh\":{\"data\":0}}}", "/example/mesh/data"},
        {"{\"example\":{\"depth\":3}}", "/example/depth"},
        {"{\"example\":{\"model\":\"transformer\",\"d_model\":1000,\"heads\":3}}",
         "/example/heads"},
        {"{\"example\":{},\"graph_id\":1}", ""},
        {"{\"example\":[]}", "/example"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_http(f, "POST", "/v1/plans", "application/json", bad[i].body, &r);
        tu_expect_error(&r, 400, "invalid", bad[i].path);
        tu_resp_fini(&r);
    }
}

/* Where plans run: a small input without calls on the request's own
 * thread, one with a func.call on a plan worker (each call site costs its
 * callee again, so calls are not known to be quick); both answer 201 with
 * their plan. */
static void test_srv_plan_runs_where(void **state)
{
    fixture *f = *state;
    resp r;
    size_t jl;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    tu_http_ex(f, "POST", "/v1/plans", "application/json", js, jl, NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    assert_non_null(json_object_get(r.json, "plan"));
    tu_resp_fini(&r);
    cm_free(js);
    const char *calls =
        "sdy.mesh @m = <[\"x\"=2]>\n"
        "func.func private @g(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n}\n"
        "func.func @main(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{\"x\"}, {}]>}) "
        "-> tensor<8x8xf32> {\n"
        "  %0 = call @g(%a) : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n}\n";
    tu_http(f, "POST", "/v1/plans", "text/plain", calls, &r);
    assert_int_equal(r.status, 201);
    assert_non_null(json_object_get(r.json, "plan"));
    tu_resp_fini(&r);
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_non_null(strstr(r.body.data, "shardplan_plan_runs_total{on=\"request\"} 1\n"));
    assert_non_null(strstr(r.body.data, "shardplan_plan_runs_total{on=\"worker\"} 1\n"));
    tu_resp_fini(&r);
}

/* A plan begun on the request's thread that runs past its bound
 * (cfg.plan_here_s, here almost nothing) is stopped and planned again on a
 * plan worker: the answer is the same 201 and the same document as the
 * planner gives, and /metrics counts the move. Before, such a plan held its
 * HTTP thread, and every connection served by it, until --plan-timeout. */
static void test_srv_plan_moves_past_its_bound(void **state)
{
    fixture *f = *state;
    tu_server_stop(f);
    srv_config c;
    tu_config_default(f, &c);
    c.plan_here_s = 1e-9;
    tu_server_start(f, &c);
    size_t jl;
    char *js = tu_read_file("examples/flax_mlp.json", &jl);
    resp r;
    tu_http_ex(f, "POST", "/v1/plans", "application/json", js, jl, NULL, NULL, &r);
    assert_int_equal(r.status, 201);
    /* the planner's own document for the same input */
    sp_input_opts io;
    sp_input_opts_init(&io);
    sp_plan *plan = NULL;
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(sp_plan_create(js, jl, &io, NULL, 0, &plan, &e), CM_OK);
    cm_buf doc;
    cm_buf_init(&doc);
    assert_int_equal(sp_plan_write(plan, NULL, &doc, NULL, &e), CM_OK);
    json_t *want = json_loadb(doc.data, doc.len, 0, NULL);
    assert_non_null(want);
    assert_true(json_equal(json_object_get(r.json, "plan"), want));
    json_decref(want);
    cm_buf_fini(&doc);
    sp_plan_destroy(plan);
    cm_free(js);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/metrics", NULL, NULL, &r);
    assert_non_null(strstr(r.body.data, "shardplan_plan_runs_total{on=\"request\"} 1\n"));
    assert_non_null(strstr(r.body.data, "shardplan_plan_runs_total{on=\"worker\"} 1\n"));
    assert_non_null(strstr(r.body.data, "shardplan_plans_moved_total 1\n"));
    tu_resp_fini(&r);
}

static void test_srv_plan_timeout_is_503(void **state)
{
    fixture *f = *state;
    tu_server_stop(f);
    srv_config c;
    tu_config_default(f, &c);
    c.request_timeout_s = 1e-6;
    tu_server_start(f, &c);
    /* A 48-layer training step: tens of milliseconds of planning, so the
       wait times out (the Flax MLP could finish before the handler waited,
       and a finished plan is answered whatever the deadline). */
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.layers = 48;
    eo.train = true;
    cm_buf g;
    cm_buf_init(&g);
    assert_int_equal(sp_example_graph_json(&eo, &g, NULL), CM_OK);
    resp r;
    tu_http_ex(f, "POST", "/v1/plans", "application/json", g.data, g.len, NULL, NULL, &r);
    tu_expect_error(&r, 503, "timeout", "");
    tu_resp_fini(&r);
    /* The plan finishes in the background and is stored, so the retry the
     * 503 suggests finds it (before: it was dropped, and every retry
     * planned from scratch and timed out again). Within 60 s under ASan. */
    json_int_t n = 0;
    for (int i = 0; i < 600 && n == 0; i++) {
        tu_http(f, "GET", "/v1/plans", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        n = (json_int_t)json_array_size(json_object_get(r.json, "items"));
        tu_resp_fini(&r);
        if (n == 0) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal(n, 1);
    tu_http_ex(f, "POST", "/v1/plans", "application/json", g.data, g.len, NULL, NULL, &r);
    assert_int_equal(r.status, 200); /* stored: answered whatever the deadline */
    assert_non_null(json_object_get(r.json, "plan"));
    tu_resp_fini(&r);
    cm_buf_fini(&g);
}

static void test_srv_auth_tokens_and_scopes(void **state)
{
    fixture *f = *state;
    tu_server_stop(f);
    char admin[ST_TOKEN_LEN + 1], reader[ST_TOKEN_LEN + 1];
    st_db *db = NULL;
    assert_int_equal(st_db_open(f->db, &db, NULL), CM_OK);
    assert_int_equal(st_token_create(db, ST_SCOPE_ADMIN, "admin", admin, NULL, NULL), CM_OK);
    assert_int_equal(st_token_create(db, ST_SCOPE_READ, "reader", reader, NULL, NULL), CM_OK);
    st_db_close(db);
    srv_config c;
    tu_config_default(f, &c);
    c.auth = SRV_AUTH_ON;
    tu_server_start(f, &c);
    assert_true(srv_app_auth_required(f->app));
    resp r;
    tu_http(f, "GET", "/healthz", NULL, NULL, &r); /* probes stay open */
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    tu_http(f, "GET", "/v1/plans", NULL, NULL, &r);
    tu_expect_error(&r, 401, "unauthorized", "");
    assert_non_null(strstr(r.www_auth, "Bearer"));
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/v1/plans", NULL, NULL, 0, "spt_0000000000000000000000000000000000000000",
            NULL, &r);
    tu_expect_error(&r, 401, "unauthorized", "");
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/v1/plans", NULL, NULL, 0, reader, NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    tu_http_ex(f, "PUT", "/v1/meshes/m", "application/json", "{\"axes\":[[\"x\",2]]}", strlen("{\"axes\":[[\"x\",2]]}"), reader,
            NULL, &r);
    tu_expect_error(&r, 403, "forbidden", "");
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/v1/tokens", NULL, NULL, 0, reader, NULL, &r);
    tu_expect_error(&r, 403, "forbidden", "");
    tu_resp_fini(&r);
    /* admin: create a write token through the API, use it, revoke it */
    tu_http_ex(f, "POST", "/v1/tokens", "application/json", "{\"scope\":\"write\",\"label\":\"ci\"}",
            strlen("{\"scope\":\"write\",\"label\":\"ci\"}"), admin, NULL, &r);
    assert_int_equal(r.status, 201);
    char writer[128];
    snprintf(writer, sizeof writer, "%s", tu_jstr(r.json, "token"));
    json_int_t wid = tu_jint(r.json, "id");
    tu_resp_fini(&r);
    tu_http_ex(f, "POST", "/v1/tokens", "application/json", "{\"scope\":\"root\"}", strlen("{\"scope\":\"root\"}"), admin, NULL,
            &r);
    tu_expect_error(&r, 400, "invalid", "/scope");
    tu_resp_fini(&r);
    tu_http_ex(f, "PUT", "/v1/meshes/m", "application/json", "{\"axes\":[[\"x\",2]]}", strlen("{\"axes\":[[\"x\",2]]}"), writer,
            NULL, &r);
    assert_int_equal(r.status, 201);
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/v1/tokens", NULL, NULL, 0, admin, NULL, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "items")), 3);
    assert_null(strstr(r.body.data, writer)); /* only prefixes are listed */
    tu_resp_fini(&r);
    char path[64];
    snprintf(path, sizeof path, "/v1/tokens/%lld", (long long)wid);
    tu_http_ex(f, "DELETE", path, NULL, NULL, 0, admin, NULL, &r);
    assert_int_equal(r.status, 204);
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/v1/meshes", NULL, NULL, 0, writer, NULL, &r);
    tu_expect_error(&r, 401, "unauthorized", "");
    tu_resp_fini(&r);
    tu_http_ex(f, "GET", "/metrics", NULL, NULL, 0, NULL, NULL, &r);
    tu_expect_error(&r, 401, "unauthorized", "");
    tu_resp_fini(&r);
}

static void test_srv_app_refuses_non_loopback_without_tokens(void **state)
{
    fixture *f = *state;
    assert_true(srv_host_is_loopback("127.0.0.1"));
    assert_true(srv_host_is_loopback("127.1.2.3"));
    assert_true(srv_host_is_loopback("::1"));
    assert_false(srv_host_is_loopback("0.0.0.0"));
    assert_false(srv_host_is_loopback("192.0.2.1"));
    /* the policy is checked before anything binds: nothing listens here */
    srv_config c;
    tu_config_default(f, &c);
    snprintf(c.host, sizeof c.host, "192.0.2.1"); /* TEST-NET-1, never bound */
    srv_app *app = NULL;
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(srv_app_create(&c, &app, &e), CM_ECONFLICT);
    assert_null(app);
    assert_non_null(strstr(e.msg, "token"));
    c.insecure = true;
    cm_error_clear(&e);
    assert_int_equal(srv_app_create(&c, &app, &e), CM_OK);
    assert_false(srv_app_auth_required(app));
    srv_app_destroy(app);
    /* config: flags, environment, file */
    srv_config_init(&c);
    assert_int_equal(srv_config_set(&c, "listen", "127.0.0.1:9", NULL), CM_OK);
    assert_int_equal(c.port, 9);
    assert_int_equal(srv_config_set(&c, "listen", "[::1]:10", NULL), CM_OK);
    assert_string_equal(c.host, "::1");
    cm_error_clear(&e);
    assert_int_equal(srv_config_set(&c, "listen", "example.com:80", &e), CM_EINVAL);
    assert_string_equal(e.path, "/listen");
    cm_error_clear(&e);
    assert_int_equal(srv_config_set(&c, "colour", "red", &e), CM_EINVAL);
    setenv("SHARDPLAN_MAX_BODY", "2M", 1);
    assert_int_equal(srv_config_from_env(&c, NULL), CM_OK);
    assert_int_equal(c.max_body_bytes, 2u << 20);
    unsetenv("SHARDPLAN_MAX_BODY");
    char cfgp[400];
    snprintf(cfgp, sizeof cfgp, "%s/s.conf", f->dir);
    FILE *cf = fopen(cfgp, "w");
    fputs("# comment\nthreads = 3\ntimeout = 2.5\n", cf);
    fclose(cf);
    assert_int_equal(srv_config_from_file(&c, cfgp, NULL), CM_OK);
    assert_int_equal(c.threads, 3);
    cf = fopen(cfgp, "w");
    fputs("threads = many\n", cf);
    fclose(cf);
    cm_error_clear(&e);
    assert_int_equal(srv_config_from_file(&c, cfgp, &e), CM_EINVAL);
    assert_string_equal(e.path, "1");
    unlink(cfgp);
}

static void test_srv_restart_keeps_everything(void **state)
{
    fixture *f = *state;
    json_int_t id = post_mlp(f, 201);
    resp r;
    tu_http(f, "PUT", "/v1/meshes/keep", "application/json", "{\"axes\":[[\"x\",2]]}", &r);
    tu_resp_fini(&r);
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    tu_http(f, "GET", path, NULL, NULL, &r);
    cm_buf before;
    cm_buf_init(&before);
    cm_buf_append(&before, r.body.data, r.body.len);
    tu_resp_fini(&r);
    tu_server_stop(f);
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(f, &c); /* same db file, fresh process state and cache */
    tu_http(f, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body.len, before.len);
    assert_memory_equal(r.body.data, before.data, before.len);
    tu_resp_fini(&r);
    assert_int_equal(post_mlp(f, 200), id); /* dedup from the store, not the cache */
    tu_http(f, "GET", "/v1/meshes/keep", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
    cm_buf_fini(&before);
}

/* Runs cmd_client with argv; output and errors captured. */
static int run_client(const fixture *f, const char *const *args, size_t n, char **out,
                      char **errs)
{
    char *argv[24];
    int argc = 0;
    char a0[] = "client", a1[] = "--server";
    argv[argc++] = a0;
    argv[argc++] = a1;
    argv[argc++] = (char *)(uintptr_t)f->base;
    for (size_t i = 0; i < n; i++) {
        argv[argc++] = (char *)(uintptr_t)args[i];
    }
    argv[argc] = NULL;
    size_t ol = 0, el = 0;
    FILE *o = open_memstream(out, &ol);
    FILE *e = open_memstream(errs, &el);
    int rc = cmd_client(argc, argv, o, e);
    fclose(o);
    fclose(e);
    return rc;
}

static void test_srv_client_commands(void **state)
{
    fixture *f = *state;
    char *out = NULL, *errs = NULL;
    const char *plan[] = {"plan", "examples/flax_mlp.json"};
    assert_int_equal(run_client(f, plan, 2, &out, &errs), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_int_t id = tu_jint(j, "id");
    json_decref(j);
    free(out);
    free(errs);
    const char *plan_mlir[] = {"plan", "examples/flax_mlp.mlir", "--pass", "sdy-basic-propagate"};
    assert_int_equal(run_client(f, plan_mlir, 4, &out, &errs), 0);
    free(out);
    free(errs);
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *get[] = {"get", "plan", ids};
    assert_int_equal(run_client(f, get, 3, &out, &errs), 0);
    assert_non_null(strstr(out, "\"plan\""));
    free(out);
    free(errs);
    const char *missing[] = {"get", "plan", "999"};
    assert_int_equal(run_client(f, missing, 3, &out, &errs), 1);
    assert_non_null(strstr(errs, "HTTP 404: not_found"));
    free(out);
    free(errs);
    const char *list[] = {"--table", "list", "plans"};
    assert_int_equal(run_client(f, list, 3, &out, &errs), 0);
    assert_non_null(strstr(out, "id"));
    assert_non_null(strstr(out, "hash"));
    free(out);
    free(errs);
    const char *submit[] = {"submit", "examples/flax_mlp.mlir", "--name", "mlp mlir"};
    assert_int_equal(run_client(f, submit, 4, &out, &errs), 0);
    assert_non_null(strstr(out, "\"format\":\"mlir\""));
    free(out);
    free(errs);
    char meshp[400];
    snprintf(meshp, sizeof meshp, "%s/mesh.json", f->dir);
    FILE *mf = fopen(meshp, "w");
    fputs("{\"axes\":[[\"x\",2]]}", mf);
    fclose(mf);
    const char *put[] = {"put", "mesh", "cm", meshp};
    assert_int_equal(run_client(f, put, 4, &out, &errs), 0);
    free(out);
    free(errs);
    unlink(meshp);
    const char *del[] = {"delete", "mesh", "cm"};
    assert_int_equal(run_client(f, del, 3, &out, &errs), 0);
    free(out);
    free(errs);
    const char *compare[] = {"compare", ids, "2"};
    assert_int_equal(run_client(f, compare, 3, &out, &errs), 0);
    free(out);
    free(errs);
    const char *bench[] = {"bench", ids, "--spec", "{\"steps\":1}"};
    assert_int_equal(run_client(f, bench, 4, &out, &errs), 0);
    assert_non_null(strstr(out, "\"queued\""));
    free(out);
    free(errs);
    /* the advisor and any route */
    const char *lint[] = {"lint", ids};
    assert_int_equal(run_client(f, lint, 2, &out, &errs), 0);
    assert_non_null(strstr(out, "\"findings\""));
    free(out);
    free(errs);
    const char *mem[] = {"memory", ids, "--query", "points=5", "--profile", "tpu-v5e"};
    assert_int_equal(run_client(f, mem, 6, &out, &errs), 0);
    assert_non_null(strstr(out, "\"peak\""));
    free(out);
    free(errs);
    const char *sweep[] = {"sweep", "--query", "devices=8", "--query", "layers=1"};
    assert_int_equal(run_client(f, sweep, 5, &out, &errs), 0);
    assert_non_null(strstr(out, "\"variants\""));
    free(out);
    free(errs);
    const char *badq[] = {"sweep", "--query", "devices"};
    assert_int_equal(run_client(f, badq, 3, &out, &errs), 2);
    assert_non_null(strstr(errs, "KEY=VALUE"));
    free(out);
    free(errs);
    const char *raw[] = {"request", "GET", "/v1/openapi.json"};
    assert_int_equal(run_client(f, raw, 3, &out, &errs), 0);
    assert_non_null(strstr(out, "\"openapi\""));
    free(out);
    free(errs);
    char editp[400];
    snprintf(editp, sizeof editp, "%s/edits.json", f->dir);
    FILE *ef = fopen(editp, "w");
    fputs("{\"edits\":[{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"
          "\"sharding\":\"<@mesh, [{}, {}]>\"}]}",
          ef);
    fclose(ef);
    const char *whatif[] = {"whatif", ids, editp};
    assert_int_equal(run_client(f, whatif, 3, &out, &errs), 0);
    free(out);
    free(errs);
    unlink(editp);
    const char *trace[] = {"trace", "987654"};
    assert_int_equal(run_client(f, trace, 2, &out, &errs), 1);
    assert_non_null(strstr(errs, "HTTP 404"));
    free(out);
    free(errs);
    /* --wait polls the run and gives up at --timeout (no worker runs here) */
    const char *wait[] = {"bench", ids, "--wait", "--timeout", "1"};
    assert_int_equal(run_client(f, wait, 5, &out, &errs), 1);
    assert_non_null(strstr(errs, ": queued 0%"));
    assert_non_null(strstr(errs, "did not end within"));
    free(out);
    free(errs);
    const char *bad[] = {"plan", "no/such/file.json"};
    assert_int_equal(run_client(f, bad, 2, &out, &errs), 1);
    free(out);
    free(errs);
    const char *health[] = {"health"};
    assert_int_equal(run_client(f, health, 1, &out, &errs), 0);
    free(out);
    free(errs);
    const char *usage[] = {"frobnicate"};
    assert_int_equal(run_client(f, usage, 1, &out, &errs), 2);
    free(out);
    free(errs);
}

typedef struct worker_arg {
    const fixture *f;
    int ok;
    int n;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    size_t jl;
    char *js = NULL;
    cm_file_read("examples/flax_mlp.json", &js, &jl, NULL);
    for (int i = 0; i < w->n; i++) {
        resp r;
        if (i % 2 == 0) {
            tu_http_ex(w->f, "POST", "/v1/plans", "application/json", js, jl, NULL, NULL, &r);
        } else {
            tu_http(w->f, "GET", "/v1/plans/1", NULL, NULL, &r);
        }
        w->ok += (r.status == 200 || r.status == 201) && r.json != NULL;
        tu_resp_fini(&r);
    }
    cm_free(js);
    return NULL;
}

static void test_srv_concurrent_requests(void **state)
{
    fixture *f = *state;
    post_mlp(f, 201);
    pthread_t t[4];
    worker_arg w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_arg){f, 0, 40};
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].ok, 40);
    }
}

/* Graceful shutdown: a request whose body is still arriving when stop is
 * called completes with its answer. */
typedef struct slow_upload {
    const char *data;
    size_t len, at;
    bool paused_once;
} slow_upload;

static size_t slow_read(char *buf, size_t size, size_t nitems, void *ud)
{
    slow_upload *u = ud;
    if (u->at > 0 && !u->paused_once) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the server is being stopped meanwhile */
        u->paused_once = true;
    }
    size_t n = size * nitems;
    size_t chunk = u->at == 0 ? 100 : u->len - u->at;
    if (n > chunk) {
        n = chunk;
    }
    memcpy(buf, u->data + u->at, n);
    u->at += n;
    return n;
}

typedef struct slow_arg {
    const fixture *f;
    long status;
} slow_arg;

static void *slow_client(void *p)
{
    slow_arg *a = p;
    size_t jl;
    char *js = NULL;
    cm_file_read("examples/flax_mlp.json", &js, &jl, NULL);
    slow_upload u = {js, jl, 0, false};
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "%s/v1/plans", a->f->base);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    cm_buf body;
    cm_buf_init(&body);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, slow_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &u);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)jl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tu_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 15L);
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    cm_buf_fini(&body);
    cm_free(js);
    return NULL;
}

static void test_srv_stop_finishes_in_flight_requests(void **state)
{
    fixture *f = *state;
    slow_arg a = {f, 0};
    pthread_t t;
    pthread_create(&t, NULL, slow_client, &a);
    double until = cm_now() + 5;
    while (srv_app_in_flight(f->app) == 0 && cm_now() < until) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(srv_app_in_flight(f->app) > 0);
    srv_app_stop(f->app); /* returns once the request has been answered */
    pthread_join(t, NULL);
    assert_int_equal(a.status, 201);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_srv_health_ready_openapi_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_migrations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_errors_have_status_code_and_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_graph_names_and_aliases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_graphs_store_list_get_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_meshes_rules_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plans_dedup_options_and_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_compare_and_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_lint_and_collectives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_whatif, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_corrupt_stored_graph_is_500, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_from_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_runs_where, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_moves_past_its_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_timeout_is_503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_auth_tokens_and_scopes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_app_refuses_non_loopback_without_tokens, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_restart_keeps_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_client_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_concurrent_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_stop_finishes_in_flight_requests, setup, teardown),
    };
    int rc = cmocka_run_group_tests_name("srv_api", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
