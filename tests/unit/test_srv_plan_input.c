/* SPDX-License-Identifier: Apache-2.0
 * A stored plan is what it was made from (issue 15): through HTTP on a real
 * server (tests/unit/tu_http.h), plans made with ?mesh= (a stored mesh
 * applied to a graph without one), ?pass=, stored custom rules and an
 * {"example": ...} body answer every plan-scoped route — lint, collectives,
 * cost, suggest, what-if, compare — and a benchmark exactly as the CLI
 * answers on the merged input with the same pass and rules. Each case also
 * checks that the answer is not the one the defaults would give, so a server
 * that re-plans with its own defaults fails. This very binary is the
 * benchmark worker (main hands `exec-worker` to cmd_worker). Run from the
 * repository root (examples/ is read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "cmd.h"
#include "srv_app.h"
#include "tu_http.h"

/* ---- fixture ------------------------------------------------------------------------------ */

static int setup(void **state)
{
    tu_server *s = calloc(1, sizeof *s);
    if (s == NULL || tu_server_init(s, "test_plan_input") != 0) {
        free(s);
        return -1;
    }
    srv_config c;
    tu_config_worker(s, &c, 120, false);
    c.request_timeout_s = 60; /* suggest under ASan */
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

/* ---- the CLI, in process ---------------------------------------------------------------------- */

typedef int (*cmd_fn)(int argc, char **argv, FILE *out, FILE *errs);

/* Runs fn on the NULL-terminated args (args[0] the command name) and
 * returns its output parsed as JSON (new reference); asserts exit 0. */
static json_t *cli_json(cmd_fn fn, const char *const *args)
{
    char *argv[24];
    int argc = 0;
    while (args[argc] != NULL) {
        assert_true(argc < 23);
        argv[argc] = (char *)(uintptr_t)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    char *out_data = NULL, *err_data = NULL;
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&out_data, &out_len);
    FILE *errs = open_memstream(&err_data, &err_len);
    assert_non_null(out);
    assert_non_null(errs);
    int rc = fn(argc, argv, out, errs);
    fclose(out);
    fclose(errs);
    if (rc != 0) {
        fprintf(stderr, "shardplan %s exited %d: %s\n", args[0], rc, err_data);
    }
    assert_int_equal(rc, 0);
    json_error_t je;
    json_t *j = json_loadb(out_data, out_len, 0, &je);
    if (j == NULL) {
        fprintf(stderr, "shardplan %s printed no JSON (%s): %.200s\n", args[0], je.text, out_data);
    }
    assert_non_null(j);
    free(out_data);
    free(err_data);
    return j;
}

/* GET path: 200 and its JSON body (new reference). */
static json_t *get_json(const tu_server *s, const char *path)
{
    tu_resp r;
    tu_http(s, "GET", path, NULL, NULL, &r);
    if (r.status != 200) {
        fprintf(stderr, "GET %s: %ld %.*s\n", path, r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 200);
    assert_non_null(r.json);
    json_t *j = json_incref(r.json);
    tu_resp_fini(&r);
    return j;
}

static void assert_json_equal(const json_t *got, const json_t *want, const char *what)
{
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        fprintf(stderr, "%s differs from the CLI:\n  http: %.400s\n  cli:  %.400s\n", what, g, w);
        free(g);
        free(w);
        fail();
    }
}

/* Writes text to a file of the fixture's directory; returns its path (static per slot). */
static const char *put_file(const tu_server *s, int slot, const char *name, const char *text,
                            size_t len)
{
    static char paths[8][400];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", s->dir, name);
    FILE *f = fopen(paths[slot], "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return paths[slot];
}

static void rm_files(const tu_server *s, const char *const *names)
{
    char p[400];
    for (size_t i = 0; names[i] != NULL; i++) {
        snprintf(p, sizeof p, "%s/%s", s->dir, names[i]);
        unlink(p);
    }
}

/* POSTs body as a plan (query appended to /v1/plans); returns its id. */
static int64_t post_plan(const tu_server *s, const char *query, const char *ctype,
                         const char *body, size_t len)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/plans%s", query);
    tu_resp r;
    tu_http_ex(s, "POST", path, ctype, body, len, NULL, NULL, &r);
    if (r.status != 201) {
        fprintf(stderr, "POST %s: %ld %.*s\n", path, r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 201);
    int64_t id = (int64_t)tu_jint(r.json, "id");
    tu_resp_fini(&r);
    return id;
}

static void put_doc(const tu_server *s, const char *path, const char *body)
{
    tu_resp r;
    tu_http(s, "PUT", path, "application/json", body, &r);
    if (r.status != 201 && r.status != 200) {
        fprintf(stderr, "PUT %s: %ld %.*s\n", path, r.status, (int)r.body.len, r.body.data);
    }
    assert_true(r.status == 201 || r.status == 200);
    tu_resp_fini(&r);
}

/* The plan-scoped routes against the CLI on file with extra (NULL-terminated
 * input options, e.g. {"--pass", P, NULL}): lint, collectives, cost,
 * suggest, what-if and compare. */
static void check_routes(const tu_server *s, int64_t id, const char *file,
                         const char *const *extra)
{
    char path[128];
    const char *args[20];
    size_t n;
#define ARGS(...)                                                                                  \
    do {                                                                                           \
        const char *base_[] = {__VA_ARGS__};                                                       \
        n = 0;                                                                                     \
        for (size_t i_ = 0; i_ < sizeof base_ / sizeof base_[0]; i_++) {                           \
            args[n++] = base_[i_];                                                                 \
        }                                                                                          \
        for (size_t i_ = 0; extra[i_] != NULL; i_++) {                                             \
            args[n++] = extra[i_];                                                                 \
        }                                                                                          \
        args[n] = NULL;                                                                            \
    } while (0)
    ARGS("lint", file, "--json");
    json_t *want = cli_json(cmd_lint, args);
    snprintf(path, sizeof path, "/v1/plans/%lld/lint", (long long)id);
    json_t *got = get_json(s, path);
    assert_json_equal(got, want, path);
    json_decref(got);
    json_decref(want);
    ARGS("collectives", file, "--json");
    want = cli_json(cmd_collectives, args);
    snprintf(path, sizeof path, "/v1/plans/%lld/collectives", (long long)id);
    got = get_json(s, path);
    assert_json_equal(got, want, path);
    json_decref(got);
    json_decref(want);
    ARGS("cost", file, "--partition", "--format", "json");
    want = cli_json(cmd_cost, args);
    snprintf(path, sizeof path, "/v1/plans/%lld/cost", (long long)id);
    got = get_json(s, path);
    assert_json_equal(got, want, path);
    json_decref(got);
    json_decref(want);
    ARGS("suggest", file, "--json", "-k", "2", "--max-candidates", "4");
    want = cli_json(cmd_suggest, args);
    snprintf(path, sizeof path, "/v1/plans/%lld/suggest?k=2&max_candidates=4", (long long)id);
    got = get_json(s, path);
    json_object_del(got, "seconds"); /* wall time, run to run */
    json_object_del(want, "seconds");
    assert_json_equal(got, want, path);
    json_decref(got);
    json_decref(want);
    /* what-if: clear the first input's sharding */
    static const char edit[] = "{\"kind\":\"set_sharding\",\"value\":{\"input\":0},"
                               "\"sharding\":null}";
    ARGS("whatif", file, "--json", "--edit", edit);
    want = cli_json(cmd_whatif, args);
    snprintf(path, sizeof path, "/v1/plans/%lld/whatif", (long long)id);
    char body[160];
    snprintf(body, sizeof body, "{\"edits\":[%s]}", edit);
    tu_resp r;
    tu_http(s, "POST", path, "application/json", body, &r);
    if (r.status != 200) {
        fprintf(stderr, "POST %s: %ld %.*s\n", path, r.status, (int)r.body.len, r.body.data);
    }
    assert_int_equal(r.status, 200);
    json_object_del(r.json, "seconds");
    json_object_del(want, "seconds");
    assert_json_equal(r.json, want, path);
    tu_resp_fini(&r);
    json_decref(want);
    /* compare of the plan with itself: the CLI's report with files as labels */
    ARGS("compare", file, file, "--format", "json");
    want = cli_json(cmd_compare, args);
    snprintf(path, sizeof path, "/v1/compare?plans=%lld,%lld", (long long)id, (long long)id);
    got = get_json(s, path);
    char label[32];
    snprintf(label, sizeof label, "plans/%lld", (long long)id);
    json_t *plans = json_object_get(want, "plans");
    for (size_t i = 0; i < json_array_size(plans); i++) {
        json_object_set_new(json_array_get(plans, i), "file", json_string(label));
    }
    assert_json_equal(got, want, path);
    json_decref(got);
    json_decref(want);
#undef ARGS
}

/* The plan document of id against `shardplan plan file extra...`. */
static void check_plan_document(const tu_server *s, int64_t id, const char *file,
                                const char *const *extra)
{
    const char *args[12] = {"plan", file};
    size_t n = 2;
    for (size_t i = 0; extra[i] != NULL; i++) {
        args[n++] = extra[i];
    }
    args[n] = NULL;
    json_t *want = cli_json(cmd_plan, args);
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld", (long long)id);
    json_t *got = get_json(s, path);
    assert_json_equal(json_object_get(got, "plan"), want, path);
    json_decref(got);
    json_decref(want);
}

/* ---- ?mesh= ----------------------------------------------------------------------------------- */

/* The Flax MLP's graph document without its meshes, and its mesh as a stored
 * mesh body: POST /v1/plans?mesh=mesh makes the example's own module. */
static void mlp_without_mesh(char **doc, char **mesh)
{
    json_error_t je;
    json_t *g = json_load_file("examples/flax_mlp.json", 0, &je);
    assert_non_null(g);
    json_t *m0 = json_incref(json_array_get(json_object_get(g, "meshes"), 0));
    assert_non_null(m0);
    assert_int_equal(json_object_del(g, "meshes"), 0);
    assert_int_equal(json_object_del(m0, "name"), 0);
    *doc = json_dumps(g, JSON_COMPACT);
    *mesh = json_dumps(m0, JSON_COMPACT);
    json_decref(g);
    json_decref(m0);
}

static void test_srv_plan_with_stored_mesh_routes_match_cli(void **state)
{
    tu_server *s = *state;
    char *doc, *mesh;
    mlp_without_mesh(&doc, &mesh);
    put_doc(s, "/v1/meshes/mesh", mesh);
    int64_t id = post_plan(s, "?mesh=mesh", "application/json", doc, strlen(doc));
    static const char *const none[] = {NULL};
    check_plan_document(s, id, "examples/flax_mlp.json", none);
    check_routes(s, id, "examples/flax_mlp.json", none);
    free(doc);
    free(mesh);
}

/* ---- ?pass= ---------------------------------------------------------------------------------- */

static void test_srv_plan_with_pass_routes_match_cli(void **state)
{
    tu_server *s = *state;
    size_t len;
    char *mlir = tu_read_file("examples/lint_demo.mlir", &len);
    int64_t id = post_plan(s, "?pass=sdy-basic-propagate", "text/plain", mlir, len);
    static const char *const basic[] = {"--pass", "sdy-basic-propagate", NULL};
    check_plan_document(s, id, "examples/lint_demo.mlir", basic);
    check_routes(s, id, "examples/lint_demo.mlir", basic);
    /* the same input with the default pipeline gives another plan: the
     * routes above could not pass by re-planning with the defaults */
    const char *dargs[] = {"cost", "examples/lint_demo.mlir", "--partition", "--format", "json",
                           NULL};
    const char *bargs[] = {"cost", "examples/lint_demo.mlir", "--partition", "--format", "json",
                           "--pass", "sdy-basic-propagate", NULL};
    json_t *d = cli_json(cmd_cost, dargs);
    json_t *b = cli_json(cmd_cost, bargs);
    assert_false(json_equal(d, b));
    json_decref(d);
    json_decref(b);
    cm_free(mlir);
}

/* ---- stored rules ------------------------------------------------------------------------------ */

static const char *const MLIR_CALL =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=4]>\n"
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, "
    "{\"b\"}]>}) -> tensor<8x16xf32> {\n"
    "  %0 = stablehlo.custom_call @my_ew(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
    "  %1 = stablehlo.add %0, %0 : tensor<8x16xf32>\n"
    "  return %1 : tensor<8x16xf32>\n"
    "}\n";

static size_t count_kind(const json_t *lint, const char *kind)
{
    size_t n = 0;
    const json_t *fs = json_object_get(lint, "findings");
    for (size_t i = 0; i < json_array_size(fs); i++) {
        const char *k = json_string_value(json_object_get(json_array_get(fs, i), "kind"));
        n += k != NULL && strcmp(k, kind) == 0;
    }
    return n;
}

static void test_srv_plan_with_stored_rules_routes_match_cli(void **state)
{
    tu_server *s = *state;
    put_doc(s, "/v1/rules/my_ew", "\"i j -> i j\"");
    int64_t id = post_plan(s, "", "text/plain", MLIR_CALL, strlen(MLIR_CALL));
    const char *rules = "{\"custom_rules\": {\"my_ew\": \"i j -> i j\"}, \"ops\": []}";
    const char *mfile = put_file(s, 0, "call.mlir", MLIR_CALL, strlen(MLIR_CALL));
    const char *rfile = put_file(s, 1, "rules.json", rules, strlen(rules));
    const char *const with_rules[] = {"--rules", rfile, NULL};
    check_plan_document(s, id, mfile, with_rules);
    check_routes(s, id, mfile, with_rules);
    /* without the rules the custom call is reported: the server used them */
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld/lint", (long long)id);
    json_t *got = get_json(s, path);
    const char *args[] = {"lint", mfile, "--json", NULL};
    json_t *bare = cli_json(cmd_lint, args);
    assert_int_equal(count_kind(got, "custom_call_no_rule"), 0);
    assert_true(count_kind(bare, "custom_call_no_rule") > 0);
    json_decref(got);
    json_decref(bare);
    static const char *const names[] = {"call.mlir", "rules.json", NULL};
    rm_files(s, names);
}

/* ---- {"example": ...} --------------------------------------------------------------------------- */

static void test_srv_plan_from_example_routes_match_cli(void **state)
{
    tu_server *s = *state;
    const char *body = "{\"example\":{\"model\":\"transformer\",\"layers\":1,\"train\":true,"
                       "\"strategy\":\"fsdp\",\"mesh\":{\"data\":4,\"model\":2}}}";
    int64_t id = post_plan(s, "", "application/json", body, strlen(body));
    const char *eargs[] = {"example", "transformer", "--layers", "1", "--train", "--strategy",
                           "fsdp", "--mesh", "data=4,model=2", "--format", "json", NULL};
    json_t *doc = cli_json(cmd_example, eargs);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    const char *file = put_file(s, 2, "example.json", text, strlen(text));
    free(text);
    static const char *const none[] = {NULL};
    check_plan_document(s, id, file, none);
    check_routes(s, id, file, none);
    static const char *const names[] = {"example.json", NULL};
    rm_files(s, names);
}

/* ---- errors point into the request -------------------------------------------------------- */

static void test_srv_plan_envelope_errors_point_into_the_body(void **state)
{
    tu_server *s = *state;
    const char *bare = "{\"inputs\":[{\"name\":\"x\",\"type\":\"tensor<4xf32>\"}],"
                       "\"ops\":[{\"op\":\"stablehlo.abs\",\"operands\":[\"%nope\"],"
                       "\"result\":\"y\",\"type\":\"tensor<4xf32>\"}],\"outputs\":[\"y\"]}";
    tu_resp r;
    tu_http(s, "POST", "/v1/plans", "application/json", bare, &r);
    tu_expect_error(&r, 400, "invalid", "/ops/0/operands/0");
    tu_resp_fini(&r);
    char env[512];
    snprintf(env, sizeof env, "{\"graph\":%s,\"name\":\"bad\"}", bare);
    tu_http(s, "POST", "/v1/plans", "application/json", env, &r);
    tu_expect_error(&r, 400, "invalid", "/graph/ops/0/operands/0");
    tu_resp_fini(&r);
}

/* ---- benchmarks ----------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Benchmarks plan id and returns the finished run (new reference). */
static json_t *bench(const tu_server *s, int64_t id)
{
    char body[160];
    snprintf(body, sizeof body, "{\"plan_id\":%lld,\"devices\":8,\"warmup\":0,\"iters\":1}",
             (long long)id);
    tu_resp r;
    tu_http(s, "POST", "/v1/benchmarks", "application/json", body, &r);
    assert_int_equal(r.status, 202);
    int64_t run = (int64_t)tu_jint(r.json, "id");
    tu_resp_fini(&r);
    char path[64];
    snprintf(path, sizeof path, "/v1/benchmarks/%lld", (long long)run);
    double until = now_s() + 120;
    for (;;) {
        json_t *j = get_json(s, path);
        const char *st = json_string_value(json_object_get(j, "status"));
        assert_non_null(st);
        if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0) {
            return j;
        }
        json_decref(j);
        assert_true(now_s() < until);
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
}

static void check_bench(const tu_server *s, int64_t id)
{
    json_t *run = bench(s, id);
    const char *st = json_string_value(json_object_get(run, "status"));
    if (strcmp(st, "succeeded") != 0) {
        fprintf(stderr, "benchmark of plan %lld: %s\n", (long long)id,
                json_string_value(json_object_get(run, "error")));
    }
    assert_string_equal(st, "succeeded");
    const json_t *res = json_object_get(run, "results");
    if (!json_is_true(json_object_get(json_object_get(res, "numerics"), "match"))) {
        char *t = json_dumps(res, JSON_COMPACT);
        fprintf(stderr, "benchmark of plan %lld: %.600s\n", (long long)id, t);
        free(t);
    }
    assert_true(json_is_true(json_object_get(json_object_get(res, "numerics"), "match")));
    /* the worker's predicted step is the cost of the plan as stored */
    char path[64];
    snprintf(path, sizeof path, "/v1/plans/%lld/cost", (long long)id);
    json_t *cost = get_json(s, path);
    double want = json_number_value(json_object_get(json_object_get(cost, "time"), "step_s"));
    double got = json_number_value(json_object_get(res, "predicted_step_s"));
    /* the cost document rounds to 6 significant digits */
    if (!(want > 0 && got >= want * (1 - 1e-5) && got <= want * (1 + 1e-5))) {
        fprintf(stderr, "plan %lld: predicted step %.9g s, its cost %.9g s\n", (long long)id, got,
                want);
        fail();
    }
    json_decref(cost);
    json_decref(run);
}

static void test_srv_bench_of_mesh_and_pass_plans(void **state)
{
    tu_server *s = *state;
    char *doc, *mesh;
    mlp_without_mesh(&doc, &mesh);
    put_doc(s, "/v1/meshes/mesh", mesh);
    int64_t a = post_plan(s, "?mesh=mesh", "application/json", doc, strlen(doc));
    check_bench(s, a);
    size_t len;
    char *mlir = tu_read_file("examples/flax_mlp.mlir", &len);
    int64_t b = post_plan(s, "?pass=sdy-basic-propagate", "text/plain", mlir, len);
    check_bench(s, b);
    cm_free(mlir);
    free(doc);
    free(mesh);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-worker") == 0) {
        return cmd_worker(argc - 1, argv + 1, stdout, stderr);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_srv_plan_with_stored_mesh_routes_match_cli, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_with_pass_routes_match_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_with_stored_rules_routes_match_cli, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_from_example_routes_match_cli, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_plan_envelope_errors_point_into_the_body, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_srv_bench_of_mesh_and_pass_plans, setup, teardown),
    };
    return cmocka_run_group_tests_name("srv_plan_input", tests, NULL, NULL);
}
