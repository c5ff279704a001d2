/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/shardy/import: the constant splitter (sdy.constant,
 * a copy per non-constant user, erased originals), size-one axis removal,
 * call-graph pre-order, mesh lifting with duplicates, sharding-group
 * validation and renumbering, the chain rule of apply-sharding-constraints,
 * the deep clone of sp_ir.h, data-flow edges on manual computations and
 * while loops, the function-call passes (flattening, import into named
 * computations, function data-flow edges, recursion refused), and OOM loops
 * over the splitter, lifting, edge adding and the function-call passes; the
 * splitter's copies of constant calls and its float literals, the lifting
 * of replica-group meshes and stablehlo.mesh, and explicit gather batching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_diag.h"
#include "sp_export.h"
#include "sp_import.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "tu_oom.h"

static sp_module *read_module(const char *text)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read(text, strlen(text), 0, &m, &err) != CM_OK) {
        fail_msg("sp_mlir_read: %s: %s", err.path, err.msg);
    }
    return m;
}

/* The module printed, for substring checks; the caller frees. */
static char *print_module(const sp_module *m)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts o = {false, false};
    sp_mlir_print(m, &o, &b);
    assert_non_null(b.data);
    return b.data;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static const char *const EDGES =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\n"
    "func.func @f(%arg0: tensor<8x4xf32>, %arg1: !stablehlo.token) -> tensor<8x4xf32> {\n"
    "  %0:2 = sdy.manual_computation(%arg0, %arg1)\n"
    "      in_shardings=[<@mesh, [{\"b\", \"a\", ?}p1, {}], replicated={\"c\"}>, <@mesh, []>]\n"
    "      out_shardings=[<@mesh, [{\"b\"}, {}]>, <@mesh, []>]\n"
    "      manual_axes={\"b\", \"c\"} (%arg2: tensor<4x4xf32>, %arg3: !stablehlo.token) {\n"
    "    sdy.return %arg2, %arg3 : tensor<4x4xf32>, !stablehlo.token\n"
    "  } : (tensor<8x4xf32>, !stablehlo.token) -> (tensor<8x4xf32>, !stablehlo.token)\n"
    "  %1 = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %2:2 = stablehlo.while(%iterArg = %0#0, %iterArg_0 = %1) : tensor<8x4xf32>, tensor<i32>\n"
    "   cond {\n"
    "    %4 = stablehlo.compare LT, %iterArg_0, %iterArg_0 : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "    stablehlo.return %4 : tensor<i1>\n"
    "  } do {\n"
    "    stablehlo.return %iterArg, %iterArg_0 : tensor<8x4xf32>, tensor<i32>\n"
    "  }\n"
    "  %3 = stablehlo.add %2#0, %2#0 : tensor<8x4xf32>\n"
    "  return %3 : tensor<8x4xf32>\n"
    "}\n";

static const char *const CALLS =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @foo(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>, z = 1 : i64, a = 2 : i64} : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = call @foo(%0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %1 : tensor<8xf32>\n"
    "}\n"
    "func.func private @foo(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}]>}) -> tensor<8xf32> {\n"
    "  %0 = call @bar(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n"
    "}\n"
    "func.func private @bar(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = stablehlo.abs %arg0 : tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n"
    "}\n";

static const char *const RECURSIVE =
    "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = call @f(%0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %1 : tensor<8xf32>\n"
    "}\n"
    "func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @g(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n"
    "}\n"
    "func.func private @g(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n"
    "}\n";

static void test_func_calls(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    /* flattening: the second call of foo gets foo_0 and bar its own copy */
    sp_module *m = read_module(CALLS);
    assert_int_equal(sp_pass_flatten_call_graph(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "call @foo_1(%0)"));
    assert_non_null(strstr(s, "func.func private @bar_0("));
    assert_non_null(strstr(s, "call @bar_0("));
    assert_int_equal(count_of(s, "sdy.original_func_name = \"foo\""), 1);
    cm_free(s);
    sp_module_destroy(m);
    /* importing: named computations, the in sharding from foo's argument,
     * the call's other attributes sorted, the callees erased */
    sp_diags d;
    sp_diags_init(&d);
    m = read_module(CALLS);
    assert_int_equal(sp_pass_import_func_calls(m, true, &d, &err), CM_OK);
    s = print_module(m);
    assert_int_equal(count_of(s, "sdy.named_computation<\"foo\">"), 2);
    assert_int_equal(count_of(s, "sdy.named_computation<\"bar\">"), 2);
    assert_non_null(
        strstr(s, "in_shardings=[<@mesh, [{\"y\"}]>] out_shardings=[<@mesh, [{\"x\"}]>]"));
    assert_non_null(strstr(s, "{a = 2 : i64, z = 1 : i64}"));
    assert_int_equal(count_of(s, "func.func"), 1);
    assert_int_equal(count_of(s, "sdy.data_flow_edge"), 8);
    cm_free(s);
    sp_module_destroy(m);
    /* function-to-call shardings and function data-flow edges */
    m = read_module(CALLS);
    assert_int_equal(sp_pass_add_func_data_flow_edges(m, &err), CM_OK);
    s = print_module(m);
    assert_int_equal(count_of(s, "sdy.func_data_flow_edge"), 5);
    cm_free(s);
    sp_module_destroy(m);
    /* recursion is an error, not a loop */
    m = read_module(RECURSIVE);
    assert_int_equal(sp_pass_import_func_calls(m, true, &d, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "recursive call"));
    sp_module_destroy(m);
    cm_error_clear(&err);
    m = read_module(RECURSIVE);
    assert_int_equal(sp_pass_flatten_call_graph(m, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "recursive call"));
    sp_module_destroy(m);
    sp_diags_fini(&d);
}

static void test_add_data_flow_edges(void **state)
{
    (void)state;
    sp_module *m = read_module(EDGES);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_add_data_flow_edges(m, &err), CM_OK);
    char *s = print_module(m);
    /* the body argument drops the leading manual axis and replicated "c";
     * the token argument and token result get no edge */
    assert_non_null(strstr(s, "sdy.data_flow_edge %arg2 sharding=<@mesh, [{\"a\", ?}p1, {}]>"));
    assert_int_equal(count_of(s, "sdy.data_flow_edge %arg3"), 0);
    assert_int_equal(count_of(s, "sdy.data_flow_edge %0#1"), 0);
    /* the result edge keeps the out sharding; the while reads the edge */
    assert_non_null(strstr(s, "sdy.data_flow_edge %0#0 sharding=<@mesh, [{\"b\"}, {}]>"));
    assert_non_null(strstr(s, "stablehlo.while(%iterArg = %1,"));
    /* both while results get edges, the add reads the first one */
    assert_non_null(strstr(s, "sdy.data_flow_edge %2#0"));
    assert_non_null(strstr(s, "sdy.data_flow_edge %2#1"));
    assert_non_null(strstr(s, "stablehlo.add %3, %3"));
    /* the owners keep their shardings */
    assert_non_null(strstr(s, "in_shardings=[<@mesh, [{\"b\", \"a\", ?}p1, {}], replicated={\"c\"}>"));
    assert_int_equal(count_of(s, "sdy.data_flow_edge"), 4);
    cm_free(s);
    sp_module_destroy(m);
}

static const char *const CLEANUP =
    "sdy.mesh @mesh = <[\"c\"=2, \"a\"=2, \"b\"=2]>\n"
    "sdy.mesh @mesh_x = <[\"x\"=8, \"y\"=8]>\n"
    "func.func @f(%arg0: tensor<8xf32>, %arg1: !stablehlo.token) -> tensor<8xf32> {\n"
    "  %0:2 = sdy.manual_computation(%arg0, %arg1)\n"
    "      in_shardings=[<@mesh, [{\"c\", ?}], replicated={\"b\"}>, <@mesh, []>]\n"
    "      out_shardings=[<@mesh, [{\"c\", ?}]>, <@mesh, []>]\n"
    "      manual_axes={\"b\", \"a\", \"c\"} (%arg2: tensor<8xf32>, %arg3: !stablehlo.token) {\n"
    "    sdy.return %arg2, %arg3 : tensor<8xf32>, !stablehlo.token\n"
    "  } : (tensor<8xf32>, !stablehlo.token) -> (tensor<8xf32>, !stablehlo.token)\n"
    "  %1 = sdy.manual_computation(%0#0) in_shardings=[<@mesh_x, [{\"y\":(2)2}]>]\n"
    "      out_shardings=[<@mesh_x, [{\"y\":(1)2}], replicated={\"x\":(2)2}>]\n"
    "      manual_axes={\"x\", \"y\"} (%arg4: tensor<4xf32>) {\n"
    "    sdy.return %arg4 : tensor<4xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %1 : tensor<8xf32>\n"
    "}\n";

static void test_manual_axes_cleanup(void **state)
{
    (void)state;
    sp_module *m = read_module(CLEANUP);
    cm_error err;
    cm_error_clear(&err);
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_pass_manual_axes_cleanup(m, &d, &err), CM_OK);
    char *s = print_module(m);
    /* manual axes in mesh order; unused ones replicated, sorted; the token
     * keeps its sharding */
    assert_non_null(strstr(s, "manual_axes={\"c\", \"a\", \"b\"}"));
    assert_non_null(strstr(s, "in_shardings=[<@mesh, [{\"c\", ?}], replicated={\"a\", \"b\"}>, "
                              "<@mesh, []>]"));
    assert_non_null(strstr(s, "out_shardings=[<@mesh, [{\"c\", ?}], replicated={\"a\", \"b\"}>, "
                              "<@mesh, []>]"));
    /* the unused parts of sub-axes, merged where they meet */
    assert_non_null(strstr(s, "replicated={\"x\", \"y\":(1)2, \"y\":(4)2}"));
    assert_non_null(strstr(s, "replicated={\"x\", \"y\":(2)4}"));
    cm_free(s);
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static const char *const MANUAL =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=4]>\n"
    "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\", ?}, {?}]>})\n"
    "    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {\"c\":(1)2, ?}]>}) {\n"
    "  %0 = sdy.sharding_constraint %arg0 <@mesh, [{\"a\"}, {}]> : tensor<8x8xf32>\n"
    "  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{\"a\", ?}, {?}]>]\n"
    "      out_shardings=[<@mesh, [{\"a\", ?}, {?}]>] manual_axes={\"a\"} (%arg1: tensor<4x8xf32>) {\n"
    "    %2 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"b\", ?}, {?}]>]>} : tensor<4x8xf32>\n"
    "    sdy.return %2 : tensor<4x8xf32>\n"
    "  } : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  %3 = stablehlo.negate %1 : tensor<8x8xf32>\n"
    "  return %3 : tensor<8x8xf32>\n"
    "}\n";

static void test_manual_debug(void **state)
{
    (void)state;
    sp_module *m = read_module(MANUAL);
    cm_error err;
    cm_error_clear(&err);
    sp_diags d;
    sp_diags_init(&d);
    sp_prop_opts o;
    sp_prop_opts_init(&o, SP_PROP_AGGRESSIVE);
    o.debug_sharding_origins = true;
    assert_int_equal(sp_pass_add_data_flow_edges(m, &err), CM_OK);
    assert_int_equal(sp_propagate(m, &o, &d, &err), CM_OK);
    assert_int_equal(sp_prop_debug_info_sink(m, true, false, &err), CM_OK);
    assert_int_equal(sp_pass_sink_data_flow_edges(m, &err), CM_OK);
    char *s = print_module(m);
    /* the free axis "b" leaves the body; the manual axis stays in front */
    assert_non_null(strstr(s, "in_shardings=[<@mesh, [{\"a\", \"b\", ?}, {\"c\":(1)2, ?}]>]"));
    assert_non_null(strstr(s, "out_shardings=[<@mesh, [{\"a\", \"b\", ?}, {\"c\":(1)2, ?}]>]"));
    /* origins: a constraint holds one dictionary, other ops one per result,
     * the manual computation its edges' */
    assert_non_null(strstr(s, "sdy.sharding_origin_name = \"mc_0\""));
    assert_non_null(strstr(s, "sdy.block_arg_sharding_origins = [{a = \"self\", \"c:(1)2\" = "
                              "\"output: 0\"}]"));
    assert_non_null(strstr(s, "sdy.sharding_origins = {a = \"self\"}"));
    assert_non_null(strstr(s, "sdy.sharding_origins = [{a = \"mc_0_output: 0\", \"c:(1)2\" = "
                              "\"output: 0\"}]"));
    cm_free(s);
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static const char *const SPLIT =
    "func.func @f(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {\n"
    "  %0 = stablehlo.constant dense<1.0> : tensor<8xf32>\n"
    "  %1 = stablehlo.negate %0 : tensor<8xf32>\n"
    "  %2 = stablehlo.add %1, %arg0 : tensor<8xf32>\n"
    "  %3 = stablehlo.multiply %1, %arg0 : tensor<8xf32>\n"
    "  return %2, %3 : tensor<8xf32>, tensor<8xf32>\n"
    "}\n";

static void test_splitter(void **state)
{
    (void)state;
    sp_module *m = read_module(SPLIT);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_constant_splitter(m, &err), CM_OK);
    char *s = print_module(m);
    /* two users: two copies of constant+negate, the originals erased */
    assert_int_equal(count_of(s, "sdy.constant dense<1.000000e+00>"), 2);
    assert_int_equal(count_of(s, "stablehlo.negate"), 2);
    assert_int_equal(count_of(s, "stablehlo.constant"), 0);
    cm_free(s);
    sp_module_destroy(m);
}

/* A constant function called with a constant, used twice: each use gets a
 * copy of the call, calling a copy of the function. */
static const char *const SPLIT_CALLS =
    "func.func @main() -> (tensor<4xf32>, tensor<4xf32>, tensor<2xbf16>, tensor<2xf32>) {\n"
    "  %0 = stablehlo.constant dense<1.0> : tensor<4xf32>\n"
    "  %1 = call @foo(%0) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  %2 = stablehlo.abs %1 : tensor<4xf32>\n"
    "  %3 = stablehlo.abs %1 : tensor<4xf32>\n"
    "  %4 = stablehlo.constant dense<[0.1, 0.1]> : tensor<2xbf16>\n"
    "  %5 = stablehlo.constant dense<[1.0e20, 123456789.0]> : tensor<2xf32>\n"
    "  return %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<2xbf16>, tensor<2xf32>\n"
    "}\n"
    "func.func private @foo(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = stablehlo.negate %arg0 : tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n"
    "}\n";

static void test_splitter_calls(void **state)
{
    (void)state;
    sp_module *m = read_module(SPLIT_CALLS);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_constant_splitter(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "call @foo_0("));
    assert_non_null(strstr(s, "call @foo_1("));
    assert_int_equal(count_of(s, "sdy.original_func_name = \"foo\""), 2);
    assert_non_null(strstr(s, "func.func private @foo(")); /* the original stays */
    /* float literals as MLIR writes them: rounded to bf16, a splat; a value
     * six digits do not give back as its bits */
    assert_non_null(strstr(s, "sdy.constant dense<1.000980e-01> : tensor<2xbf16>"));
    assert_non_null(strstr(s, "dense<[1.000000e+20, 0x4CEB79A3]> : tensor<2xf32>"));
    cm_free(s);
    sp_module_destroy(m);
}

/* Shardy's element-wise ops include the pure sdy.reshard and
 * sdy.propagation_barrier: a constant through them is still constant, so
 * each user gets its own copy of the whole chain. */
static void test_splitter_sdy_elementwise(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "sdy.mesh @mesh = <[\"a\"=2]>\n"
        "func.func @f(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {\n"
        "  %0 = stablehlo.constant dense<1.0> : tensor<8xf32>\n"
        "  %1 = sdy.reshard %0 <@mesh, [{\"a\"}]> : tensor<8xf32>\n"
        "  %2 = sdy.propagation_barrier %1 allowed_direction=NONE : tensor<8xf32>\n"
        "  %3 = stablehlo.add %2, %arg0 : tensor<8xf32>\n"
        "  %4 = stablehlo.multiply %2, %arg0 : tensor<8xf32>\n"
        "  return %3, %4 : tensor<8xf32>, tensor<8xf32>\n"
        "}\n");
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_constant_splitter(m, &err), CM_OK);
    char *s = print_module(m);
    assert_int_equal(count_of(s, "sdy.constant"), 2);
    assert_int_equal(count_of(s, "sdy.reshard"), 2);
    assert_int_equal(count_of(s, "sdy.propagation_barrier"), 2);
    cm_free(s);
    sp_module_destroy(m);
}

static void test_remove_size_one_axes(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "sdy.mesh @mesh = <[\"a\"=1, \"b\"=2]>\n"
        "func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\", \"b\"}], "
        "replicated={\"a\"}>}) -> tensor<8xf32> {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n");
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_remove_size_one_axes(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "#sdy.sharding<@mesh, [{\"b\"}]>"));
    assert_non_null(strstr(s, "\"a\"=1")); /* the mesh keeps its axis */
    cm_free(s);
    sp_module_destroy(m);
}

static void test_pre_order_funcs(void **state)
{
    (void)state;
    sp_module *m = read_module("func.func @g() {\n  return\n}\n"
                               "func.func @h() {\n  func.call @g() : () -> ()\n  return\n}\n"
                               "func.func @main() {\n  func.call @h() : () -> ()\n  return\n}\n");
    cm_error err;
    cm_error_clear(&err);
    uint32_t *order, n;
    assert_int_equal(sp_import_funcs_order(m, false, &order, &n, &err), CM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(order[0], sp_module_func(m, "g"));
    assert_int_equal(order[2], sp_module_func(m, "main"));
    cm_free(order);
    assert_int_equal(sp_pass_pre_order_funcs(m, &err), CM_OK);
    char *s = print_module(m);
    const char *a = strstr(s, "@main"), *b = strstr(s, "@h"), *c = strstr(s, "@g()");
    assert_true(a != NULL && b != NULL && c != NULL && a < b && b < c);
    cm_free(s);
    sp_module_destroy(m);
}

static const char *const LIFT =
    "sdy.mesh @mesh = <[\"x\"=2]>\n"
    "sdy.mesh @copy = <[\"x\"=2]>\n"
    "func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@copy, [{\"x\"}]>}) -> "
    "(tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<[]>, [{}]>}) {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static void test_lift_inlined_meshes(void **state)
{
    (void)state;
    sp_module *m = read_module(LIFT);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_lift_inlined_meshes(m, &err), CM_OK);
    char *s = print_module(m);
    assert_null(strstr(s, "@copy"));
    assert_non_null(strstr(s, "#sdy.sharding<@mesh, [{\"x\"}]>"));
    assert_non_null(strstr(s, "sdy.mesh @empty_mesh = <[]>"));
    cm_free(s);
    sp_module_destroy(m);
}

/* A StableHLO mesh in replica groups becomes a symbol; every mesh gets its
 * stablehlo.mesh spelling. */
static const char *const LIFT_RG =
    "sdy.mesh @mesh = <[\"x\"=4], device_ids=[3, 2, 1, 0]>\n"
    "func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = \"stablehlo.all_reduce\"(%arg0) ({\n"
    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "    %1 = stablehlo.add %a, %b : tensor<f32>\n"
    "    stablehlo.return %1 : tensor<f32>\n"
    "  }) {replica_groups = #stablehlo.replica_group_mesh_axes<mesh = "
    "#stablehlo.mesh<axes = [#stablehlo.mesh_axis<name = \"z\", size = 2>]>, "
    "axes = [#stablehlo.axis_ref<name = \"z\">]>} : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n"
    "}\n";

static void test_lift_replica_groups(void **state)
{
    (void)state;
    sp_module *m = read_module(LIFT_RG);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_lift_inlined_meshes(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "sdy.mesh @mesh_0 = <[\"z\"=2]> {stablehlo.mesh = {axes = [{name = "
                              "\"z\", size = 2 : i64}]}}"));
    assert_non_null(strstr(s, "replica_group_mesh_axes<mesh = @mesh_0, axes"));
    assert_non_null(strstr(s, "device_ids = dense<[3, 2, 1, 0]> : tensor<4xi64>}}"));
    cm_free(s);
    sp_module_destroy(m);
}

/* Gathers indexed through an iota along dimension 0: by a concatenate's
 * input (dropped), and by the iota itself (sliced around the component). */
static const char *const BATCH =
    "func.func @f(%arg0: tensor<4x8xf32>, %arg1: tensor<4x1xi32>, %arg2: tensor<4x8x16xf32>) -> "
    "(tensor<4x1xf32>, tensor<4x1xf32>) {\n"
    "  %0 = stablehlo.iota dim = 0 : tensor<4x1xi32>\n"
    "  %1 = stablehlo.concatenate %0, %arg1, dim = 1 : (tensor<4x1xi32>, tensor<4x1xi32>) -> "
    "tensor<4x2xi32>\n"
    "  %2 = \"stablehlo.gather\"(%arg0, %1) {dimension_numbers = #stablehlo.gather<offset_dims = "
    "[1], collapsed_slice_dims = [0], start_index_map = [0, 1], index_vector_dim = 1>, "
    "slice_sizes = array<i64: 1, 1>, indices_are_sorted = false} : (tensor<4x8xf32>, "
    "tensor<4x2xi32>) -> tensor<4x1xf32>\n"
    "  %3 = stablehlo.iota dim = 0 : tensor<4x3xi32>\n"
    "  %4 = \"stablehlo.gather\"(%arg2, %3) {dimension_numbers = #stablehlo.gather<offset_dims = "
    "[1], collapsed_slice_dims = [0, 2], start_index_map = [2, 0, 1], index_vector_dim = 1>, "
    "slice_sizes = array<i64: 1, 1, 1>, indices_are_sorted = false} : (tensor<4x8x16xf32>, "
    "tensor<4x3xi32>) -> tensor<4x1xf32>\n"
    "  return %2, %4 : tensor<4x1xf32>, tensor<4x1xf32>\n"
    "}\n";

static void test_explicit_batching(void **state)
{
    (void)state;
    sp_module *m = read_module(BATCH);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_explicit_gather_scatter_batching(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "\"stablehlo.gather\"(%arg0, %arg1) <{dimension_numbers = "
                              "#stablehlo.gather<offset_dims = [1], operand_batching_dims = [0], "
                              "start_indices_batching_dims = [0], start_index_map = [1], "
                              "index_vector_dim = 1>"));
    assert_int_equal(count_of(s, "stablehlo.iota"), 1); /* the first one was erased */
    assert_int_equal(count_of(s, "stablehlo.slice"), 2);
    assert_non_null(strstr(s, "collapsed_slice_dims = [2], operand_batching_dims = [0], "
                              "start_indices_batching_dims = [0], start_index_map = [2, 1]"));
    cm_free(s);
    sp_module_destroy(m);
}

/* The greedy driver's constant uniquing: equal constants merge, the kept
 * ones move to the front of the function; an unused op goes. */
static const char *const BATCH_CONSTS =
    "func.func @f(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {\n"
    "  %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>\n"
    "  %1 = stablehlo.constant dense<1.0> : tensor<4xf32>\n"
    "  %2 = stablehlo.add %0, %1 : tensor<4xf32>\n"
    "  %3 = stablehlo.constant dense<2.0> : tensor<4xf32>\n"
    "  %4 = stablehlo.constant dense<1.0> : tensor<4xf32>\n"
    "  %5 = stablehlo.add %2, %4 : tensor<4xf32>\n"
    "  %6 = stablehlo.multiply %5, %3 : tensor<4xf32>\n"
    "  return %5, %3 : tensor<4xf32>, tensor<4xf32>\n"
    "}\n";

static void test_explicit_batching_constants(void **state)
{
    (void)state;
    sp_module *m = read_module(BATCH_CONSTS);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_explicit_gather_scatter_batching(m, &err), CM_OK);
    char *s = print_module(m);
    const char *two = strstr(s, "dense<2.000000e+00>"), *one = strstr(s, "dense<1.000000e+00>");
    const char *add = strstr(s, "stablehlo.add");
    assert_true(two != NULL && one != NULL && add != NULL && two < one && one < add);
    assert_int_equal(count_of(s, "stablehlo.constant"), 2);
    assert_int_equal(count_of(s, "stablehlo.multiply"), 0);
    cm_free(s);
    sp_module_destroy(m);
}

static void test_sharding_groups(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) {\n"
        "  sdy.sharding_group %arg0 group_id = 567 : tensor<4xf32>\n"
        "  sdy.sharding_group %arg0 group_id = 23 : tensor<4xf32>\n"
        "  sdy.sharding_group %arg1 group_id = 2 : tensor<4xf32>\n"
        "  return\n"
        "}\n");
    sp_diags d;
    sp_diags_init(&d);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_sharding_group_import(m, &d, &err), CM_OK);
    char *s = print_module(m);
    /* first appearance order; the repeated op on %arg0 is gone */
    assert_int_equal(count_of(s, "sdy.sharding_group %arg0 group_id=0"), 1);
    assert_int_equal(count_of(s, "sdy.sharding_group %arg1 group_id=1"), 1);
    cm_free(s);
    sp_module_destroy(m);

    m = read_module("func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<2xf32>) {\n"
                    "  sdy.sharding_group %arg0 group_id = 3 : tensor<4xf32>\n"
                    "  sdy.sharding_group %arg1 group_id = 3 : tensor<2xf32>\n"
                    "  return\n"
                    "}\n");
    assert_int_equal(sp_pass_sharding_group_import(m, &d, &err), CM_EINVAL);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.items[0].msg, "must have the same shape for groupId: 3"));
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static void test_apply_constraints_chain(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
        "func.func @f(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {\n"
        "  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>\n"
        "  %1 = sdy.sharding_constraint %0 <@mesh, [{\"a\"}, {}]> : tensor<8x8xf32>\n"
        "  %2 = sdy.sharding_constraint %1 <@mesh, [{}, {\"b\"}]> : tensor<8x8xf32>\n"
        "  %3 = stablehlo.add %0, %0 : tensor<8x8xf32>\n"
        "  return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>\n"
        "}\n");
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_apply_sharding_constraints(m, &err), CM_OK);
    char *s = print_module(m);
    assert_non_null(strstr(s, "%3 = stablehlo.add %2, %2"));
    assert_non_null(strstr(s, "stablehlo.add %arg0, %arg0 {sdy.sharding"));
    cm_free(s);
    sp_module_destroy(m);
}

static void test_clone_deep(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = sdy.named_computation<\"n\">(%arg0) (%arg1: tensor<8xf32>) {\n"
        "    %1 = stablehlo.negate %arg1 : tensor<8xf32>\n"
        "    sdy.return %1 : tensor<8xf32>\n"
        "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n"
        "}\n");
    uint32_t nc = SP_NONE;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (strcmp(m->ops[i].name, "sdy.named_computation") == 0) {
            nc = i;
        }
    }
    assert_int_not_equal(nc, SP_NONE);
    sp_value_map map;
    memset(&map, 0, sizeof map);
    uint32_t c;
    assert_int_equal(sp_op_clone_deep(m, nc, &map, &c), CM_OK);
    assert_int_equal(sp_value_map_get(&map, m->ops[nc].first_result), m->ops[c].first_result);
    uint32_t nb = m->ops[c].regions[0].blocks[0];
    uint32_t neg = m->blocks[nb].ops[0];
    /* the copied negate reads the copied block argument */
    assert_int_equal(m->ops[neg].operands[0], m->blocks[nb].first_arg);
    sp_value_map_free(&map);
    sp_module_destroy(m);
}

typedef struct oom_ctx {
    const char *text;
    sp_module *m;
    int which;
} oom_ctx;

static void oom_setup(void *p)
{
    oom_ctx *c = p;
    c->m = read_module(c->text);
}

static cm_status oom_run(void *p)
{
    oom_ctx *c = p;
    cm_error err;
    cm_error_clear(&err);
    switch (c->which) {
    case 0:
        return sp_pass_constant_splitter(c->m, &err);
    case 1:
        return sp_pass_lift_inlined_meshes(c->m, &err);
    case 2:
        return sp_pass_add_data_flow_edges(c->m, &err);
    case 3: {
        sp_diags d;
        sp_diags_init(&d);
        cm_status st = sp_pass_manual_axes_cleanup(c->m, &d, &err);
        sp_diags_fini(&d);
        return st;
    }
    case 5:
        return sp_pass_flatten_call_graph(c->m, &err);
    case 7:
        return sp_pass_explicit_gather_scatter_batching(c->m, &err);
    case 6: {
        sp_diags d;
        sp_diags_init(&d);
        cm_status st = sp_pass_import_func_calls(c->m, true, &d, &err);
        if (st == CM_OK) {
            st = sp_pass_import_pipeline(c->m, true, &d, &err);
        }
        sp_diags_fini(&d);
        return st;
    }
    default: {
        /* a manual computation through its edges, with both debug options
         * and their sinking */
        sp_diags d;
        sp_diags_init(&d);
        sp_prop_opts o;
        sp_prop_opts_init(&o, SP_PROP_AGGRESSIVE);
        o.debug_sharding_origins = true;
        o.debug_edge_source_sharding = true;
        cm_status st = sp_pass_add_data_flow_edges(c->m, &err);
        if (st == CM_OK) {
            st = sp_pass_apply_sharding_constraints_debug(c->m, true, &err);
        }
        if (st == CM_OK) {
            st = sp_propagate(c->m, &o, &d, &err);
        }
        if (st == CM_OK) {
            st = sp_prop_debug_info_sink(c->m, true, true, &err);
        }
        if (st == CM_OK) {
            st = sp_pass_sink_data_flow_edges(c->m, &err);
        }
        sp_diags_fini(&d);
        return st;
    }
    }
}

static void oom_done(void *p, cm_status st)
{
    oom_ctx *c = p;
    (void)st;
    sp_module_destroy(c->m);
    c->m = NULL;
}

static void test_oom(void **state)
{
    (void)state;
    tu_oom t = {oom_setup, oom_run, oom_done};
    oom_ctx c = {SPLIT, NULL, 0};
    tu_oom_loop(&t, &c, 10000);
    c.text = LIFT;
    c.which = 1;
    tu_oom_loop(&t, &c, 10000);
    c.text = EDGES;
    c.which = 2;
    tu_oom_loop(&t, &c, 10000);
    c.text = CLEANUP;
    c.which = 3;
    tu_oom_loop(&t, &c, 10000);
    c.text = MANUAL;
    c.which = 4;
    tu_oom_loop(&t, &c, 20000);
    c.text = CALLS;
    c.which = 5;
    tu_oom_loop(&t, &c, 10000);
    c.which = 6;
    tu_oom_loop(&t, &c, 10000);
    c.text = SPLIT_CALLS;
    c.which = 0;
    tu_oom_loop(&t, &c, 10000);
    c.text = LIFT_RG;
    c.which = 1;
    tu_oom_loop(&t, &c, 10000);
    c.text = BATCH;
    c.which = 7;
    tu_oom_loop(&t, &c, 10000);
    c.text = BATCH_CONSTS;
    tu_oom_loop(&t, &c, 10000);
}

/* ---- user priorities and the cancel hook --------------------------------------------- */

/* Two arguments whose hints conflict on one axis, with priorities pa and pb. */
static char *prio_module(const char *pa, const char *pb)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_printf(&b,
                  "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
                  "func.func @main(%%arg0: tensor<8x8xf32> {sdy.sharding = "
                  "#sdy.sharding<@mesh, [{\"a\"}%s, {?}]>},\n"
                  "    %%arg1: tensor<8x8xf32> {sdy.sharding = "
                  "#sdy.sharding<@mesh, [{?}, {\"a\"}%s]>}) -> tensor<8x8xf32> {\n"
                  "  %%0 = stablehlo.add %%arg0, %%arg1 : tensor<8x8xf32>\n"
                  "  %%1 = stablehlo.negate %%0 : tensor<8x8xf32>\n"
                  "  return %%1 : tensor<8x8xf32>\n"
                  "}\n",
                  pa, pb);
    assert_false(b.oom);
    return b.data;
}

/* The module text after user-priority propagation. */
static char *prio_propagated(const char *pa, const char *pb)
{
    char *text = prio_module(pa, pb);
    sp_module *m = read_module(text);
    cm_free(text);
    cm_error err;
    cm_error_clear(&err);
    sp_diags d;
    sp_diags_init(&d);
    sp_prop_opts o;
    sp_prop_opts_init(&o, SP_PROP_USER_PRIORITY);
    assert_int_equal(sp_propagate(m, &o, &d, &err), CM_OK);
    sp_diags_fini(&d);
    char *s = print_module(m);
    sp_module_destroy(m);
    return s;
}

/* As Shardy, a round runs per distinct priority present, not per number up
 * to the largest: p2000000000 plans at once (it ran two billion rounds
 * before) and as p2 does, only the order of the priorities matters, and
 * swapping them changes the answer (the test sees priorities at work). */
static void test_user_priorities_distinct(void **state)
{
    (void)state;
    char *low = prio_propagated("p1", "p2");
    char *far = prio_propagated("p1", "p2000000000");
    char *shifted = prio_propagated("p5", "p7");
    char *swapped = prio_propagated("p2", "p1");
    assert_string_equal(low, far);
    assert_string_equal(low, shifted);
    assert_string_not_equal(low, swapped);
    /* the first priority's axis wins the add's first dim */
    assert_non_null(strstr(low, "stablehlo.add %arg0, %arg1 {sdy.sharding = "
                                "#sdy.sharding_per_value<[<@mesh, [{\"a\", ?}, {?}]>]>}"));
    cm_free(low);
    cm_free(far);
    cm_free(shifted);
    cm_free(swapped);
}

typedef struct polls {
    unsigned n;         /* polls so far */
    unsigned stop_from; /* say stop from this poll on (0: never) */
} polls;

static bool polls_stop(void *ctx)
{
    polls *p = ctx;
    p->n++;
    return p->stop_from > 0 && p->n >= p->stop_from;
}

/* A chain of n adds, each followed by a constraint of its own priority:
 * n rounds over 2n ops. */
static char *prio_chain(unsigned n)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "sdy.mesh @mesh = <[\"x\"=2]>\n"
                    "func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n");
    cm_buf_puts(&b, "  %c0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n");
    for (unsigned i = 1; i <= n; i++) {
        cm_buf_printf(&b, "  %%a%u = stablehlo.add %%c%u, %%c%u : tensor<8x8xf32>\n", i, i - 1,
                      i - 1);
        cm_buf_printf(&b,
                      "  %%c%u = sdy.sharding_constraint %%a%u <@mesh, [{\"x\"}p%u, {}]> : "
                      "tensor<8x8xf32>\n",
                      i, i, n + 1 - i);
    }
    cm_buf_printf(&b, "  return %%c%u : tensor<8x8xf32>\n}\n", n);
    assert_false(b.oom);
    return b.data;
}

/* Propagation polls its cancel hook while it runs and stops with CM_EIO at
 * the first poll that says stop; without a stop it polls and finishes. */
static void test_propagation_cancel(void **state)
{
    (void)state;
    char *text = prio_chain(200);
    for (int run = 0; run < 2; run++) {
        sp_module *m = read_module(text);
        polls p = {0, run == 0 ? 3u : 0u};
        cm_cancel c = {polls_stop, &p};
        cm_error err;
        cm_error_clear(&err);
        sp_diags d;
        sp_diags_init(&d);
        sp_prop_opts o;
        sp_prop_opts_init(&o, SP_PROP_USER_PRIORITY);
        o.cancel = &c;
        cm_status st = sp_propagate(m, &o, &d, &err);
        if (run == 0) {
            assert_int_equal(st, CM_EIO);
            assert_int_equal(p.n, 3);
            assert_non_null(strstr(err.msg, "cancelled"));
        } else {
            assert_int_equal(st, CM_OK);
            /* a run starts at each of 201 rounds' op priorities, at least */
            assert_true(p.n > 201);
        }
        sp_diags_fini(&d);
        sp_module_destroy(m);
    }
    cm_free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splitter),
        cmocka_unit_test(test_splitter_calls),
        cmocka_unit_test(test_splitter_sdy_elementwise),
        cmocka_unit_test(test_lift_replica_groups),
        cmocka_unit_test(test_explicit_batching),
        cmocka_unit_test(test_explicit_batching_constants),
        cmocka_unit_test(test_remove_size_one_axes),
        cmocka_unit_test(test_pre_order_funcs),
        cmocka_unit_test(test_lift_inlined_meshes),
        cmocka_unit_test(test_sharding_groups),
        cmocka_unit_test(test_apply_constraints_chain),
        cmocka_unit_test(test_clone_deep),
        cmocka_unit_test(test_add_data_flow_edges),
        cmocka_unit_test(test_manual_axes_cleanup),
        cmocka_unit_test(test_manual_debug),
        cmocka_unit_test(test_func_calls),
        cmocka_unit_test(test_user_priorities_distinct),
        cmocka_unit_test(test_propagation_cancel),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
