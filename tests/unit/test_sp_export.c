/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the export passes of planner/shardy/export (sp_export.h):
 * call graph unflattening (both modes, a missing callee), func-call
 * reshards, named computations to functions (unique names from one
 * counter), the constant merger's block scoping, closing and sinking
 * shardings, and for each pass an OOM loop that must end with the module a
 * clean run gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_export.h"
#include "sp_ir.h"
#include "sp_mlir.h"

typedef cm_status (*pass_fn)(sp_module *m, cm_error *err);

static sp_module *read_module(const char *text)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read(text, strlen(text), 0, &m, &err) != CM_OK) {
        fail_msg("sp_mlir_read: %s", err.msg);
    }
    assert_non_null(m);
    return m;
}

/* The module as text; the caller frees it with cm_free. */
static char *print_module(const sp_module *m)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts o = {false, false};
    sp_mlir_print(m, &o, &b);
    assert_false(b.oom);
    return cm_buf_take(&b);
}

static char *run(const char *text, pass_fn fn)
{
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = fn(m, &err);
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("pass: %s", err.msg);
    }
    char *s = print_module(m);
    sp_module_destroy(m);
    return s;
}

/* Fails allocation n = 0, 1, ... until fn succeeds; each failure must be
 * CM_ENOMEM and the success must print what a clean run prints. */
static void assert_survives_oom(const char *text, pass_fn fn)
{
    char *want = run(text, fn);
    bool done = false;
    for (long n = 0; n < 20000 && !done; n++) {
        sp_module *m = read_module(text);
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = fn(m, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            char *got = print_module(m);
            assert_string_equal(want, got);
            cm_free(got);
            done = true;
        } else {
            assert_int_equal(st, CM_ENOMEM);
            assert_int_equal(err.code, CM_ENOMEM);
        }
        sp_module_destroy(m);
    }
    assert_true(done);
    cm_free(want);
}

static void assert_has(const char *text, const char *part)
{
    if (strstr(text, part) == NULL) {
        fail_msg("missing \"%s\" in:\n%s", part, text);
    }
}

static void assert_lacks(const char *text, const char *part)
{
    if (strstr(text, part) != NULL) {
        fail_msg("unexpected \"%s\" in:\n%s", part, text);
    }
}

#define MESH "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
#define SH(d) "{sdy.sharding = #sdy.sharding<@mesh, " d ">}"

/* Two copies of @baz (one tagged with its original name) with different
 * result shardings, called three times. */
static const char FLAT[] =
    MESH "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @baz(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = call @baz_0(%0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %2 = call @baz_0(%1) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %2 : tensor<8xf32>\n"
    "}\n"
    "func.func private @baz(%arg0: tensor<8xf32>) -> (tensor<8xf32> " SH("[{\"x\"}]") ") {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n"
    "func.func private @baz_0(%arg0: tensor<8xf32>) -> (tensor<8xf32> " SH("[{\"y\"}]") ")"
    " attributes {sdy.original_func_name = \"baz\"} {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static cm_status unflatten(sp_module *m, cm_error *err)
{
    return sp_pass_unflatten_call_graph(m, false, err);
}

static cm_status unflatten_fully(sp_module *m, cm_error *err)
{
    return sp_pass_unflatten_call_graph(m, true, err);
}

static void test_sp_pass_unflatten_call_graph_keeps_distinct_shardings(void **state)
{
    (void)state;
    char *out = run(FLAT, unflatten);
    assert_has(out, "%0 = call @baz(%arg0)");
    assert_has(out, "%1 = call @baz_0(%0)");
    assert_has(out, "%2 = call @baz_0(%1)");
    assert_lacks(out, "sdy.original_func_name");
    cm_free(out);
}

static void test_sp_pass_unflatten_call_graph_fully_picks_most_called(void **state)
{
    (void)state;
    char *out = run(FLAT, unflatten_fully);
    assert_has(out, "%0 = call @baz_0(%arg0)");
    assert_has(out, "%1 = call @baz_0(%0)");
    assert_lacks(out, "call @baz(");
    cm_free(out);
}

static void test_sp_pass_unflatten_call_graph_rejects_missing_callee(void **state)
{
    (void)state;
    static const char text[] = "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
                               "  %0 = call @nowhere(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
                               "  return %0 : tensor<8xf32>\n"
                               "}\n";
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_unflatten_call_graph(m, false, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "");
    assert_non_null(strstr(err.msg, "nowhere"));
    cm_error_clear(&err);
    assert_int_equal(sp_pass_insert_func_call_reshards(m, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_non_null(strstr(err.msg, "nowhere"));
    sp_module_destroy(m);
}

static void test_sp_pass_unflatten_call_graph_survives_oom(void **state)
{
    (void)state;
    assert_survives_oom(FLAT, unflatten);
    assert_survives_oom(FLAT, unflatten_fully);
}

/* A call whose result sharding differs from its callee's. */
static const char CALL_MISMATCH[] =
    MESH "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @foo(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"y\"}]>]>}"
    " : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = stablehlo.negate %0 : tensor<8xf32>\n"
    "  return %1 : tensor<8xf32>\n"
    "}\n"
    "func.func private @foo(%arg0: tensor<8xf32>) -> (tensor<8xf32> " SH("[{\"x\"}]") ") {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static void test_sp_pass_insert_func_call_reshards_reshards_after_call(void **state)
{
    (void)state;
    char *out = run(CALL_MISMATCH, sp_pass_insert_func_call_reshards);
    assert_has(out, "%0 = call @foo(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
                    "[{\"x\"}]>]>}");
    assert_has(out, "%1 = sdy.reshard %0 <@mesh, [{\"y\"}]>");
    assert_has(out, "%2 = stablehlo.negate %1");
    cm_free(out);
    assert_survives_oom(CALL_MISMATCH, sp_pass_insert_func_call_reshards);
}

/* Two named computations called "foo" next to an existing @foo_0. */
static const char NAMED[] =
    MESH "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = sdy.named_computation<\"foo\">(%arg0) in_shardings=[<@mesh, [{\"x\"}]>]"
    " out_shardings=[<@mesh, [{\"y\"}]>] (%arg1: tensor<8xf32>) {\n"
    "    %2 = stablehlo.abs %arg1 : tensor<8xf32>\n"
    "    sdy.return %2 : tensor<8xf32>\n"
    "  } {random_attr = \"r\"} : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = sdy.named_computation<\"foo\">(%0) (%arg1: tensor<8xf32>) {\n"
    "    sdy.return %arg1 : tensor<8xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %1 : tensor<8xf32>\n"
    "}\n"
    "func.func private @foo_0(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static void test_sp_pass_export_named_computations_makes_functions(void **state)
{
    (void)state;
    char *out = run(NAMED, sp_pass_export_named_computations);
    assert_has(out, "%0 = call @foo(%arg0) {random_attr = \"r\", sdy.sharding = "
                    "#sdy.sharding_per_value<[<@mesh, [{\"y\"}]>]>}");
    assert_has(out, "%1 = call @foo_1(%0)");
    assert_has(out, "func.func private @foo(%arg0: tensor<8xf32> {sdy.sharding = "
                    "#sdy.sharding<@mesh, [{\"x\"}]>}) -> tensor<8xf32> attributes "
                    "{sdy.original_func_name = \"foo\"}");
    assert_has(out, "func.func private @foo_1(%arg0: tensor<8xf32>) -> tensor<8xf32> "
                    "attributes {sdy.original_func_name = \"foo\"}");
    assert_lacks(out, "sdy.named_computation");
    assert_lacks(out, "sdy.return");
    cm_free(out);
    assert_survives_oom(NAMED, sp_pass_export_named_computations);
}

/* Three "baz" named computations: two with out sharding {"y"}, one {"x"}
 * fed by a value sharded unlike baz's argument. */
static const char NAMED_DEDUP[] =
    MESH "func.func @main(%arg0: tensor<8xf32> " SH("[{\"x\"}]") ") -> tensor<8xf32> {\n"
    "  %0 = sdy.named_computation<\"baz\">(%arg0) in_shardings=[<@mesh, [{\"x\"}]>]"
    " out_shardings=[<@mesh, [{\"x\"}]>] (%arg1: tensor<8xf32>) {\n"
    "    sdy.return %arg1 : tensor<8xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = sdy.named_computation<\"baz\">(%0) in_shardings=[<@mesh, [{\"x\"}]>]"
    " out_shardings=[<@mesh, [{\"y\"}]>] (%arg1: tensor<8xf32>) {\n"
    "    %3 = stablehlo.abs %arg1 : tensor<8xf32>\n"
    "    sdy.return %3 : tensor<8xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %2 = sdy.named_computation<\"baz\">(%1) in_shardings=[<@mesh, [{\"x\"}]>]"
    " out_shardings=[<@mesh, [{\"y\"}]>] (%arg1: tensor<8xf32>) {\n"
    "    %3 = stablehlo.abs %arg1 : tensor<8xf32>\n"
    "    sdy.return %3 : tensor<8xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %2 : tensor<8xf32>\n"
    "}\n";

static cm_status xla_export_dedup(sp_module *m, cm_error *err)
{
    return sp_pass_xla_export_named_computations(m, true, err);
}

static cm_status xla_export(sp_module *m, cm_error *err)
{
    return sp_pass_xla_export_named_computations(m, false, err);
}

static void test_sp_pass_xla_export_named_computations_dedups_with_copies(void **state)
{
    (void)state;
    char *out = run(NAMED_DEDUP, xla_export_dedup);
    /* the most frequent shardings ({"y"} out) win; one function */
    assert_has(out, "func.func private @baz(%arg0: tensor<8xf32> {sdy.sharding = "
                    "#sdy.sharding<@mesh, [{\"x\"}]>}) -> (tensor<8xf32> {sdy.sharding = "
                    "#sdy.sharding<@mesh, [{\"y\"}]>})");
    assert_lacks(out, "@baz_");
    assert_has(out, "%0 = call @baz(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
                    "[{\"y\"}]>]>}");
    assert_has(out, "%1 = mhlo.copy %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
                    "[{\"x\"}]>]>} : tensor<8xf32>");
    assert_has(out, "%2 = call @baz(%1)");
    assert_has(out, "%3 = mhlo.copy %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
                    "[{\"x\"}]>]>}");
    assert_has(out, "%4 = call @baz(%3)");
    cm_free(out);
    out = run(NAMED_DEDUP, xla_export);
    assert_has(out, "@baz_0");
    assert_lacks(out, "mhlo.copy");
    cm_free(out);
    assert_survives_oom(NAMED_DEDUP, xla_export_dedup);
}

/* Equal constants merge within a block, never into a nested one. */
static const char CONSTANTS[] =
    "func.func @main(%arg0: tensor<i32>) -> tensor<i32> {\n"
    "  %0 = stablehlo.constant dense<1> : tensor<i32>\n"
    "  %1 = stablehlo.constant dense<1> : tensor<i32>\n"
    "  %2 = stablehlo.add %0, %1 : tensor<i32>\n"
    "  %3 = stablehlo.while(%iterArg = %2) : tensor<i32>\n"
    "   cond {\n"
    "    %4 = stablehlo.constant dense<1> : tensor<i32>\n"
    "    %5 = stablehlo.compare  LT, %iterArg, %4 : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "    stablehlo.return %5 : tensor<i1>\n"
    "  } do {\n"
    "    stablehlo.return %iterArg : tensor<i32>\n"
    "  }\n"
    "  return %3 : tensor<i32>\n"
    "}\n";

static void test_sp_pass_constant_merger_stays_in_block(void **state)
{
    (void)state;
    char *out = run(CONSTANTS, sp_pass_constant_merger);
    assert_has(out, "%0 = stablehlo.add %c, %c : tensor<i32>");
    assert_has(out, "%c_0 = stablehlo.constant dense<1>");
    cm_free(out);
    assert_survives_oom(CONSTANTS, sp_pass_constant_merger);
}

/* Edges on a while result and inside a manual computation. */
static const char EDGES[] =
    MESH "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = stablehlo.optimization_barrier %arg0 : tensor<8xf32>\n"
    "  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{\"x\", ?}]> : tensor<8xf32>\n"
    "  %2 = sdy.manual_computation(%1) in_shardings=[<@mesh, [{\"y\"}]>]"
    " out_shardings=[<@mesh, [{\"y\"}]>] manual_axes={\"y\"} (%arg1: tensor<4xf32>) {\n"
    "    %3 = sdy.data_flow_edge %arg1 sharding=<@mesh, [{\"x\"}]> : tensor<4xf32>\n"
    "    sdy.return %3 : tensor<4xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %2 : tensor<8xf32>\n"
    "}\n";

static void test_sp_pass_sink_data_flow_edges_moves_shardings(void **state)
{
    (void)state;
    char *out = run(EDGES, sp_pass_sink_data_flow_edges);
    assert_has(out, "stablehlo.optimization_barrier {sdy.sharding = "
                    "#sdy.sharding_per_value<[<@mesh, [{\"x\", ?}]>]>} %arg0");
    assert_has(out, "in_shardings=[<@mesh, [{\"y\", \"x\"}]>]");
    assert_has(out, "sdy.return %arg1");
    assert_lacks(out, "data_flow_edge");
    cm_free(out);
    assert_survives_oom(EDGES, sp_pass_sink_data_flow_edges);
}

static void test_sp_pass_close_shardings_closes_every_sharding(void **state)
{
    (void)state;
    char *out = run(EDGES, sp_pass_close_shardings);
    assert_has(out, "sharding=<@mesh, [{\"x\"}]> : tensor<8xf32>");
    assert_lacks(out, "?");
    cm_free(out);
    assert_survives_oom(EDGES, sp_pass_close_shardings);
}

static void test_sp_pass_inline_meshes_inlines_and_drops_meshes(void **state)
{
    (void)state;
    char *out = run(EDGES, sp_pass_inline_meshes);
    assert_has(out, "in_shardings=[<mesh<[\"x\"=2, \"y\"=2]>, [{\"y\"}]>]");
    assert_lacks(out, "sdy.mesh");
    assert_lacks(out, "@mesh");
    cm_free(out);
    assert_survives_oom(EDGES, sp_pass_inline_meshes);
}

/* An add placed on device 1 of a two-device mesh. */
static const char SINGLE_DEVICE[] =
    "sdy.mesh @mesh = <[\"x\"=2]>\n"
    "sdy.mesh @dev1 = <[], device_ids=[1]>\n"
    "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = sdy.reshard %arg0 <@dev1, []> : tensor<8xf32>\n"
    "  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@dev1, []>]>}"
    " : tensor<8xf32>\n"
    "  %2 = sdy.reshard %1 <@mesh, [{}]> : tensor<8xf32>\n"
    "  return %2 : tensor<8xf32>\n"
    "}\n";

static cm_status resolve_single(sp_module *m, cm_error *err)
{
    return sp_pass_resolve_single_device_sharding(m, 1, 1, err);
}

static void test_sp_pass_resolve_single_device_sharding_guards_op(void **state)
{
    (void)state;
    char *out = run(SINGLE_DEVICE, resolve_single);
    assert_has(out, "stablehlo.partition_id");
    assert_has(out, "stablehlo.constant dense<1> : tensor<i64>");
    assert_has(out, "\"stablehlo.if\"(%");
    assert_has(out, "stablehlo.add %arg0, %arg0 : tensor<8xf32>");
    assert_has(out, "stablehlo.constant dense<0.000000e+00> : tensor<8xf32>");
    assert_has(out, "sdy.all_reduce {\"x\"}");
    assert_lacks(out, "sdy.reshard");
    cm_free(out);
    assert_survives_oom(SINGLE_DEVICE, resolve_single);
    sp_module *m = read_module(SINGLE_DEVICE);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_resolve_single_device_sharding(m, 2, 2, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "");
    sp_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_pass_unflatten_call_graph_keeps_distinct_shardings),
        cmocka_unit_test(test_sp_pass_unflatten_call_graph_fully_picks_most_called),
        cmocka_unit_test(test_sp_pass_unflatten_call_graph_rejects_missing_callee),
        cmocka_unit_test(test_sp_pass_unflatten_call_graph_survives_oom),
        cmocka_unit_test(test_sp_pass_insert_func_call_reshards_reshards_after_call),
        cmocka_unit_test(test_sp_pass_export_named_computations_makes_functions),
        cmocka_unit_test(test_sp_pass_xla_export_named_computations_dedups_with_copies),
        cmocka_unit_test(test_sp_pass_constant_merger_stays_in_block),
        cmocka_unit_test(test_sp_pass_sink_data_flow_edges_moves_shardings),
        cmocka_unit_test(test_sp_pass_close_shardings_closes_every_sharding),
        cmocka_unit_test(test_sp_pass_inline_meshes_inlines_and_drops_meshes),
        cmocka_unit_test(test_sp_pass_resolve_single_device_sharding_guards_op),
    };
    return cmocka_run_group_tests_name("sp_export", tests, NULL, NULL);
}
