/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_plan_json: the JSON and MLIR forms of every
 * example give the same plan; local shapes round up; diagnostics for custom
 * calls without rules, conflicts and meshes that differ across inputs and
 * outputs; the content hash ignores JSON layout; the `plan` command; OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>

#include "cm.h"
#include "cmd.h"
#include "sp_example.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_plan_json.h"
#include "sp_mlir.h"

#define MESH "\"meshes\": [{\"name\": \"mesh\", \"axes\": [[\"data\", 2], [\"model\", 4]]}]"

/* The plan of a graph document, parsed (new reference). */
static json_t *plan_of(const char *doc, sp_plan_pass pass)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_plan_graph_json(doc, strlen(doc), pass, &b, &err);
    if (st != CM_OK) {
        fprintf(stderr, "plan failed at '%s': %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    if (j == NULL) {
        fprintf(stderr, "plan is not JSON: %s (line %d)\n%s\n", je.text, je.line, b.data);
    }
    assert_non_null(j);
    cm_buf_fini(&b);
    return j;
}

static json_t *plan_of_mlir(const char *text, size_t len)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, len, 0, &m, &err), CM_OK);
    sp_plan_opts o;
    sp_plan_opts_init(&o);
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(sp_plan_run(m, &o, &b, &err), CM_OK);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(j);
    cm_buf_fini(&b);
    sp_module_destroy(m);
    return j;
}

/* A jax.jit snippet without its comments (they name the values). */
static void strip_comments(json_t *j, const char *key)
{
    json_t *s = json_object_get(j, key);
    if (!json_is_string(s)) {
        return;
    }
    const char *t = json_string_value(s);
    char *out = malloc(strlen(t) + 1);
    assert_non_null(out);
    size_t n = 0;
    bool skip = false;
    for (; *t != '\0'; t++) {
        if (*t == '\n') {
            skip = false;
        } else if (t[0] == ' ' && t[1] == ' ' && t[2] == '#') {
            skip = true;
        }
        if (!skip) {
            out[n++] = *t;
        }
    }
    out[n] = '\0';
    json_object_set_new(j, key, json_string(out));
    free(out);
}

/* Drops the document's value names and Flax logical axis names, which MLIR
 * does not keep. */
static void strip_names(json_t *j)
{
    if (json_is_object(j)) {
        if (json_object_get(j, "index") != NULL) {
            json_object_del(j, "name");
            json_object_del(j, "logical_axes");
        }
        strip_comments(j, "in_shardings");
        strip_comments(j, "out_shardings");
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            strip_names(v);
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v)
        {
            strip_names(v);
        }
    }
}

static json_t *path_get(json_t *j, const char *const *keys)
{
    for (; *keys != NULL && j != NULL; keys++) {
        char *end;
        long i = strtol(*keys, &end, 10);
        j = *end == '\0' ? json_array_get(j, (size_t)i) : json_object_get(j, *keys);
    }
    return j;
}

static bool has_diag(json_t *plan, const char *kind, const char *path)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(plan, "diagnostics"), i, d)
    {
        const char *k = json_string_value(json_object_get(d, "kind"));
        const char *p = json_string_value(json_object_get(d, "path"));
        if (k != NULL && strcmp(k, kind) == 0 &&
            (path == NULL || (p != NULL && strcmp(p, path) == 0))) {
            return true;
        }
    }
    return false;
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_sp_plan_json_and_mlir_examples_agree(void **state)
{
    (void)state;
    DIR *dir = opendir("examples");
    assert_non_null(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) {
            continue;
        }
        char jp[512], mp[512];
        snprintf(jp, sizeof jp, "examples/%s", e->d_name);
        snprintf(mp, sizeof mp, "examples/%.*s.mlir", (int)(l - 5), e->d_name);
        char *js = NULL, *ml = NULL;
        size_t jl = 0, mlen = 0;
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(cm_file_read(jp, &js, &jl, &err), CM_OK);
        if (cm_file_read(mp, &ml, &mlen, &err) != CM_OK) {
            cm_free(js);
            continue; /* a JSON-only example */
        }
        json_t *a = plan_of(js, SP_PLAN_PIPELINE), *b = plan_of_mlir(ml, mlen);
        assert_string_equal(json_string_value(json_object_get(a, "input_sha256")),
                            json_string_value(json_object_get(b, "input_sha256")));
        strip_names(a);
        strip_names(b);
        if (!json_equal(a, b)) {
            fprintf(stderr, "%s and %s plan differently\n", jp, mp);
        }
        assert_true(json_equal(a, b));
        json_decref(a);
        json_decref(b);
        cm_free(js);
        cm_free(ml);
        n++;
    }
    closedir(dir);
    assert_true(n >= 1);
}

static void test_sp_plan_run_reports_shardings_shapes_rules(void **state)
{
    (void)state;
    json_t *p = plan_of("{" MESH ", \"inputs\": ["
                        "{\"name\": \"x\", \"type\": \"tensor<7x10xf32>\", \"sharding\": [\"data\", \"model\"]},"
                        "{\"name\": \"w\", \"type\": \"tensor<10x6xf32>\"}],"
                        "\"ops\": [{\"op\": \"dot_general\", \"operands\": [\"x\", \"w\"], \"result\": \"y\","
                        " \"type\": \"tensor<7x6xf32>\", \"attributes\": {\"dot_dimension_numbers\":"
                        " {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}}],"
                        "\"outputs\": [\"y\"]}",
                        SP_PLAN_USER_PRIORITY); /* the pipeline would drop non-divisible I/O axes */
    static const char *const x_local[] = {"functions", "0", "inputs", "0", "local_shape", NULL};
    json_t *ls = path_get(p, x_local);
    assert_int_equal(json_integer_value(json_array_get(ls, 0)), 4); /* ceil(7 / 2) */
    assert_int_equal(json_integer_value(json_array_get(ls, 1)), 3); /* ceil(10 / 4) */
    static const char *const x_name[] = {"functions", "0", "inputs", "0", "name", NULL};
    assert_string_equal(json_string_value(path_get(p, x_name)), "x");
    static const char *const x_dim0[] = {"functions", "0", "inputs", "0", "sharding", "dims",
                                         "0", "axes", "0", NULL};
    assert_string_equal(json_string_value(path_get(p, x_dim0)), "data");
    static const char *const x_origin[] = {"functions", "0", "inputs", "0", "origin", "data",
                                           NULL};
    assert_string_equal(json_string_value(path_get(p, x_origin)), "self");
    static const char *const rule[] = {"functions", "0", "ops", "0", "rule", NULL};
    assert_non_null(strstr(json_string_value(path_get(p, rule)), "#sdy.op_sharding_rule<"));
    static const char *const op_path[] = {"functions", "0", "ops", "0", "path", NULL};
    assert_string_equal(json_string_value(path_get(p, op_path)), "/ops/0");
    /* y = x @ w picks up "data" on its rows from x */
    static const char *const y_dim0[] = {"functions", "0", "ops", "0", "results", "0",
                                         "sharding", "dims", "0", "axes", "0", NULL};
    assert_string_equal(json_string_value(path_get(p, y_dim0)), "data");
    static const char *const w_sh[] = {"functions", "0", "inputs", "1", "sharding", NULL};
    json_t *ws = path_get(p, w_sh);
    assert_non_null(ws);
    json_decref(p);
}

/* Every input's, result's and output's sharding in JAX spelling: several
 * axes on a dim as a tuple, unsharded dims None, nothing sharded P(),
 * unreduced axes; a sub-axis has no PartitionSpec and says why; the
 * in_shardings/out_shardings snippets name each value and give a Flax
 * input's logical axis names. */
static void test_sp_plan_partition_specs_in_jax_terms(void **state)
{
    (void)state;
    static const char mlir[] =
        "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
        "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\":(1)2}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\", \"y\"}, {}]>}, %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}], unreduced={\"y\"}>}, %arg3: tensor<f32> {sdy.sharding = "
        "#sdy.sharding<@mesh, []>}) -> (tensor<8x8xf32>) {\n"
        "  return %arg1 : tensor<8x8xf32>\n"
        "}\n";
    json_t *p = plan_of_mlir(mlir, sizeof mlir - 1);
    json_t *in = json_object_get(json_array_get(json_object_get(p, "functions"), 0), "inputs");
    json_t *s0 = json_object_get(json_array_get(in, 0), "sharding");
    assert_true(json_is_null(json_object_get(s0, "partition_spec")));
    const char *note = json_string_value(json_object_get(s0, "partition_spec_note"));
    assert_non_null(note);
    assert_non_null(strstr(note, "sub-axis \"x\":(1)2"));
    json_t *s1 = json_object_get(json_array_get(in, 1), "sharding");
    assert_string_equal(json_string_value(json_object_get(s1, "partition_spec")),
                        "P(('x', 'y'), None)");
    assert_null(json_object_get(s1, "partition_spec_note"));
    json_t *s2 = json_object_get(json_array_get(in, 2), "sharding");
    assert_string_equal(json_string_value(json_object_get(s2, "partition_spec")),
                        "P('x', None, unreduced={'y'})");
    json_t *s3 = json_object_get(json_array_get(in, 3), "sharding");
    assert_string_equal(json_string_value(json_object_get(s3, "partition_spec")), "P()");
    json_t *f = json_array_get(json_object_get(p, "functions"), 0);
    const char *ins = json_string_value(json_object_get(f, "in_shardings"));
    assert_non_null(ins);
    assert_non_null(strstr(ins, "in_shardings = (\n    # one per flattened input, in "
                                "jax.tree_util.tree_leaves order"));
    assert_non_null(strstr(ins, "\n    None,  # input 0: no PartitionSpec"));
    assert_non_null(strstr(ins, "\n    NamedSharding(mesh, P(('x', 'y'), None)),  # input 1\n"));
    assert_non_null(strstr(ins, "\n    NamedSharding(mesh, P()),  # input 3\n)"));
    const char *outs = json_string_value(json_object_get(f, "out_shardings"));
    assert_string_equal(outs, "out_shardings = (\n    NamedSharding(mesh, P(('x', 'y'), None)),"
                              "  # output 0\n)");
    json_decref(p);

    /* open dims, which basic propagation leaves open: {?} is P.UNCONSTRAINED
     * in the document but None in the jit snippet; {"x", ?} has no exact
     * PartitionSpec */
    static const char open[] =
        "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
        "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\", ?}, {?}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{?}, {?}]>}) -> (tensor<8x8xf32>) {\n"
        "  return %arg1 : tensor<8x8xf32>\n"
        "}\n";
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(open, sizeof open - 1, 0, &m, &err), CM_OK);
    sp_plan_opts o;
    sp_plan_opts_init(&o);
    o.pass = SP_PLAN_BASIC;
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(sp_plan_run(m, &o, &b, &err), CM_OK);
    p = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(p);
    cm_buf_fini(&b);
    sp_module_destroy(m);
    f = json_array_get(json_object_get(p, "functions"), 0);
    in = json_object_get(f, "inputs");
    s0 = json_object_get(json_array_get(in, 0), "sharding");
    assert_true(json_is_null(json_object_get(s0, "partition_spec")));
    note = json_string_value(json_object_get(s0, "partition_spec_note"));
    assert_non_null(strstr(note, "dim 0 is open with axes"));
    assert_non_null(strstr(note, "nearest: P('x', P.UNCONSTRAINED)"));
    s1 = json_object_get(json_array_get(in, 1), "sharding");
    assert_string_equal(json_string_value(json_object_get(s1, "partition_spec")),
                        "P(P.UNCONSTRAINED, P.UNCONSTRAINED)");
    ins = json_string_value(json_object_get(f, "in_shardings"));
    assert_non_null(strstr(ins, "\n    NamedSharding(mesh, P('x', None)),  # input 0: nearest"));
    assert_non_null(
        strstr(ins, "\n    NamedSharding(mesh, P(None, None)),  # input 1: its open dims"));
    json_decref(p);

    /* a Flax graph: names and logical axes beside each input */
    json_t *g = plan_of("{" MESH ", \"logical_axis_rules\": [[\"batch\", \"data\"]],"
                        " \"inputs\": [{\"name\": \"layer0.W1\", \"type\": \"tensor<8x4xf32>\","
                        " \"logical_axes\": [\"batch\", null]}], \"outputs\": [\"layer0.W1\"]}",
                        SP_PLAN_PIPELINE);
    f = json_array_get(json_object_get(g, "functions"), 0);
    json_t *w = json_array_get(json_object_get(f, "inputs"), 0);
    json_t *la = json_object_get(w, "logical_axes");
    assert_string_equal(json_string_value(json_array_get(la, 0)), "batch");
    assert_true(json_is_null(json_array_get(la, 1)));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(w, "sharding"), "partition_spec")),
        "P('data', None)");
    assert_string_equal(json_string_value(json_object_get(f, "in_shardings")),
                        "in_shardings = (\n    NamedSharding(mesh, P('data', None)),  # layer0.W1 "
                        "('batch', None)\n)");
    json_decref(g);
}

static void test_sp_plan_run_diagnoses_custom_call_without_rule(void **state)
{
    (void)state;
    const char *doc = "{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<8xf32>\","
                      " \"sharding\": [\"data\"]}],"
                      "\"ops\": [{\"op\": \"stablehlo.custom_call\", \"call_target\": \"mystery\","
                      " \"operands\": [\"x\"], \"result\": \"y\", \"type\": \"tensor<8xf32>\"}],"
                      "\"outputs\": [\"y\"]}";
    json_t *p = plan_of(doc, SP_PLAN_PIPELINE);
    assert_true(has_diag(p, "custom_call_without_rule", "/ops/0"));
    json_decref(p);
    /* with a rule the diagnostic goes and the sharding flows through */
    const char *doc2 = "{" MESH ", \"custom_rules\": {\"mystery\": \"i -> i\"},"
                       "\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<8xf32>\","
                       " \"sharding\": [\"data\"]}],"
                       "\"ops\": [{\"op\": \"stablehlo.custom_call\", \"call_target\": \"mystery\","
                       " \"operands\": [\"x\"], \"result\": \"y\", \"type\": \"tensor<8xf32>\"}],"
                       "\"outputs\": [\"y\"]}";
    p = plan_of(doc2, SP_PLAN_PIPELINE);
    assert_false(has_diag(p, "custom_call_without_rule", NULL));
    static const char *const y_dim0[] = {"functions", "0", "ops", "0", "results", "0",
                                         "sharding", "dims", "0", "axes", "0", NULL};
    assert_string_equal(json_string_value(path_get(p, y_dim0)), "data");
    json_decref(p);
}

static void test_sp_plan_run_diagnoses_conflicts_and_meshes(void **state)
{
    (void)state;
    json_t *p = plan_of("{" MESH ", \"inputs\": ["
                        "{\"name\": \"x\", \"type\": \"tensor<8xf32>\", \"sharding\": [\"data\"]},"
                        "{\"name\": \"y\", \"type\": \"tensor<8xf32>\", \"sharding\": [\"model\"]}],"
                        "\"ops\": [{\"op\": \"add\", \"operands\": [\"x\", \"y\"], \"result\": \"z\","
                        " \"type\": \"tensor<8xf32>\"}], \"outputs\": [\"z\"]}",
                        SP_PLAN_PIPELINE);
    assert_true(has_diag(p, "conflict", "/ops/0"));
    assert_false(has_diag(p, "mesh_mismatch", NULL));
    json_decref(p);
    p = plan_of("{\"meshes\": [{\"name\": \"a\", \"axes\": [[\"x\", 2]]}, {\"name\": \"b\","
                " \"axes\": [[\"x\", 4]]}], \"functions\": [{\"name\": \"main\","
                "\"inputs\": [{\"name\": \"p\", \"type\": \"tensor<8xf32>\", \"sharding\":"
                " {\"mesh\": \"a\", \"spec\": [\"x\"]}}],"
                "\"ops\": [{\"op\": \"negate\", \"operands\": [\"p\"], \"result\": \"q\","
                " \"type\": \"tensor<8xf32>\"}],"
                "\"outputs\": [{\"value\": \"q\", \"sharding\": \"<@b, [{\\\"x\\\"}]>\"}]}]}",
                SP_PLAN_PIPELINE);
    assert_true(has_diag(p, "mesh_mismatch", "/functions/0"));
    static const char *const op_path[] = {"functions", "0", "ops", "0", "path", NULL};
    assert_string_equal(json_string_value(path_get(p, op_path)), "/functions/0/ops/0");
    json_decref(p);
}

static void test_sp_plan_hash_ignores_layout_not_pass(void **state)
{
    (void)state;
    const char *a = "{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<8xf32>\"}],"
                    " \"outputs\": [\"x\"]}";
    const char *b = "{\n  \"outputs\" : [ \"%x\" ],\n  " MESH ",\n  \"inputs\": [ {\"type\":"
                    " {\"shape\": [8], \"dtype\": \"float32\"}, \"name\": \"x\"} ]\n}";
    json_t *pa = plan_of(a, SP_PLAN_PIPELINE), *pb = plan_of(b, SP_PLAN_PIPELINE);
    json_t *pc = plan_of(a, SP_PLAN_BASIC);
    const char *ha = json_string_value(json_object_get(pa, "input_sha256"));
    assert_int_equal(strlen(ha), 64);
    assert_string_equal(ha, json_string_value(json_object_get(pb, "input_sha256")));
    assert_string_not_equal(ha, json_string_value(json_object_get(pc, "input_sha256")));
    json_decref(pa);
    json_decref(pb);
    json_decref(pc);
}

static void test_sp_plan_pass_parse_accepts_dashes(void **state)
{
    (void)state;
    sp_plan_pass p;
    assert_true(sp_plan_pass_parse("-sdy-basic-propagate", &p));
    assert_int_equal(p, SP_PLAN_BASIC);
    assert_true(sp_plan_pass_parse("sdy-propagation-pipeline", &p));
    assert_int_equal(p, SP_PLAN_PIPELINE);
    assert_false(sp_plan_pass_parse("sdy-nope", &p));
}

static void test_cmd_plan_runs_json_and_mlir(void **state)
{
    (void)state;
    FILE *out = tmpfile(), *errs = tmpfile();
    assert_non_null(out);
    assert_non_null(errs);
    char plan[] = "plan", fj[] = "examples/flax_mlp.json", fm[] = "examples/flax_mlp.mlir";
    char fmt[] = "--format", mlir[] = "mlir", pass[] = "--pass", agg[] = "sdy-aggressive-propagate";
    char nope[] = "nope", missing[] = "/nonexistent.json";
    char *a1[] = {plan, fj, NULL};
    assert_int_equal(cmd_plan(2, a1, out, errs), 0);
    char *a2[] = {plan, fm, fmt, mlir, pass, agg, NULL};
    assert_int_equal(cmd_plan(6, a2, out, errs), 0);
    char *a3[] = {plan, fj, pass, nope, NULL};
    assert_int_equal(cmd_plan(4, a3, out, errs), 2);
    char *a4[] = {plan, missing, NULL};
    assert_int_equal(cmd_plan(2, a4, out, errs), 1);
    char *a5[] = {plan, NULL};
    assert_int_equal(cmd_plan(1, a5, out, errs), 2);
    fclose(out);
    fclose(errs);
}

static void test_sp_plan_graph_json_reports_decode_errors(void **state)
{
    (void)state;
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    const char *doc = "{\"ops\": [{\"op\": \"negate\", \"operands\": [\"%7\"]}]}";
    assert_int_equal(sp_plan_graph_json(doc, strlen(doc), SP_PLAN_PIPELINE, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/ops/0/operands/0");
    cm_buf_fini(&b);
}

static void test_sp_plan_graph_json_oom(void **state)
{
    (void)state;
    char *js = NULL;
    size_t jl = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &js, &jl, &err), CM_OK);
    for (long n = 0;; n += 1 + n / 8) {
        cm_buf b;
        cm_buf_init(&b);
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_plan_graph_json(js, jl, SP_PLAN_PIPELINE, &b, &err);
        cm_alloc_fail_after(-1);
        cm_buf_fini(&b);
        if (st == CM_OK) {
            break;
        }
        if (st != CM_ENOMEM) {
            fprintf(stderr, "n=%ld: %d at %s: %s\n", n, st, err.path, err.msg);
        }
        assert_int_equal(st, CM_ENOMEM);
    }
    cm_free(js);
}

/* Every template and strategy yields a graph that decodes and plans; the
 * strategy's rules reach the parameters. */
static void test_sp_example_templates_plan(void **state)
{
    (void)state;
    for (int model = 0; model < 2; model++) {
        for (int s = 0; s < 4; s++) {
            for (int train = 0; train < 2 - model; train++) {
                sp_example_opts o;
                sp_example_opts_init(&o);
                o.model = (sp_example_model)model;
                o.strategy = (sp_example_strategy)s;
                o.train = train != 0;
                o.layers = 2;
                o.d_model = 32;
                o.heads = 4;
                o.seq = 8;
                cm_buf b;
                cm_buf_init(&b);
                cm_error err;
                cm_error_clear(&err);
                assert_int_equal(sp_example_graph_json(&o, &b, &err), CM_OK);
                json_t *p = plan_of(b.data, SP_PLAN_PIPELINE);
                cm_buf_fini(&b);
                /* input 0 is layer0's first kernel */
                static const char *const w0[] = {"functions", "0", "inputs", "0", "sharding",
                                                 "text", NULL};
                const char *txt = json_string_value(path_get(p, w0));
                assert_non_null(txt);
                bool sharded = strstr(txt, "\"model\"") != NULL || strstr(txt, "\"data\"") != NULL;
                assert_int_equal(sharded, s != 0 ? 1 : 0); /* dp keeps parameters replicated */
                json_decref(p);
            }
        }
    }
    sp_example_opts o;
    sp_example_opts_init(&o);
    o.model = SP_EXAMPLE_TRANSFORMER;
    o.heads = 3;
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_example_graph_json(&o, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/heads");
    cm_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_plan_json_and_mlir_examples_agree),
        cmocka_unit_test(test_sp_plan_run_reports_shardings_shapes_rules),
        cmocka_unit_test(test_sp_plan_partition_specs_in_jax_terms),
        cmocka_unit_test(test_sp_plan_run_diagnoses_custom_call_without_rule),
        cmocka_unit_test(test_sp_plan_run_diagnoses_conflicts_and_meshes),
        cmocka_unit_test(test_sp_plan_hash_ignores_layout_not_pass),
        cmocka_unit_test(test_sp_plan_pass_parse_accepts_dashes),
        cmocka_unit_test(test_cmd_plan_runs_json_and_mlir),
        cmocka_unit_test(test_sp_plan_graph_json_reports_decode_errors),
        cmocka_unit_test(test_sp_plan_graph_json_oom),
        cmocka_unit_test(test_sp_example_templates_plan),
    };
    return cmocka_run_group_tests_name("sp_plan_json", tests, NULL, NULL);
}
