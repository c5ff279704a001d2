/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for XLA's call graph unflattening (sp_gspmd_unflatten_call_graph,
 * sp_gspmd.h): copies on operands and results where a call and the kept
 * callee disagree, both dedup modes, calls of inlinable manual computation
 * bodies left alone, bad calls reported at their LINE:COL, and an OOM loop
 * that must end with the module a clean run gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_gspmd.h"
#include "sp_ir.h"
#include "sp_mlir.h"

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

static char *run(const char *text, bool fully)
{
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_gspmd_unflatten_call_graph(m, fully, &err);
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("pass: %s", err.msg);
    }
    char *s = print_module(m);
    sp_module_destroy(m);
    return s;
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

#define PV(d) "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, " d ">]>}"

/* @baz once with result {"x"}, its copy @baz_0 twice with result {"y"}; the
 * operand of every call is sharded {"y"}, @baz wants {} and @baz_0 {"y"}. */
static const char FLAT[] =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}]>})"
    " -> tensor<8xf32> {\n"
    "  %0 = call @baz(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>}"
    " : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = call @baz_0(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"y\"}]>]>}"
    " : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %2 = call @baz_0(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"y\"}]>]>}"
    " : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %3 = stablehlo.add %0, %2 : tensor<8xf32>\n"
    "  return %3 : tensor<8xf32>\n"
    "}\n"
    "func.func private @baz(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>})"
    " -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n"
    "func.func private @baz_0(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"y\"}]>})"
    " -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}]>})"
    " attributes {sdy.original_func_name = \"baz\"} {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static void test_sp_gspmd_unflatten_call_graph_fully_copies_to_most_called(void **state)
{
    (void)state;
    char *out = run(FLAT, true);
    /* @baz_0 is called twice: every call goes there, the first one's result
     * goes back to its own {"x"} through a copy that the add then reads */
    assert_has(out, "%0 = call @baz_0(%arg0) " PV("[{\"y\"}]"));
    assert_has(out, "%1 = mhlo.copy %0 " PV("[{\"x\"}]"));
    assert_has(out, "%4 = stablehlo.add %1, %3");
    assert_lacks(out, "call @baz(");
    assert_lacks(out, "sdy.original_func_name");
    cm_free(out);
}

static void test_sp_gspmd_unflatten_call_graph_copies_operands_without_dedup(void **state)
{
    (void)state;
    char *out = run(FLAT, false);
    /* the shardings differ, so @baz keeps its call; its {"y"} operand goes
     * through a copy to @baz's {} */
    assert_has(out, "%0 = mhlo.copy %arg0 " PV("[{}]"));
    assert_has(out, "%1 = call @baz(%0) " PV("[{\"x\"}]"));
    assert_has(out, "%2 = call @baz_0(%arg0)");
    assert_has(out, "%3 = call @baz_0(%arg0)");
    assert_lacks(out, "mhlo.copy %1");
    cm_free(out);
}

static void test_sp_gspmd_unflatten_call_graph_leaves_inlinable_bodies(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
        "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}]>})"
        " -> tensor<8xf32> {\n"
        "  %0 = call @xla.sdy.inlinable_manual_computation_body(%arg0)"
        " {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>}"
        " : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  %1 = call @other(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>}"
        " : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  %2 = stablehlo.add %0, %1 : tensor<8xf32>\n"
        "  return %2 : tensor<8xf32>\n"
        "}\n"
        "func.func @xla.sdy.inlinable_manual_computation_body("
        "%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>})"
        " -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n"
        "func.func private @other(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>})"
        " -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n";
    char *out = run(text, true);
    assert_has(out, "%0 = call @xla.sdy.inlinable_manual_computation_body(%arg0) " PV("[{\"x\"}]"));
    /* the other call, as mismatched, gets copies on both sides */
    assert_has(out, "%1 = mhlo.copy %arg0 " PV("[{}]"));
    assert_has(out, "%2 = call @other(%1) " PV("[{}]"));
    assert_has(out, "%3 = mhlo.copy %2 " PV("[{\"x\"}]"));
    assert_has(out, "stablehlo.add %0, %3");
    cm_free(out);
}

static void test_sp_gspmd_unflatten_call_graph_rejects_missing_callee(void **state)
{
    (void)state;
    static const char text[] = "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
                               "  %0 = call @nowhere(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
                               "  return %0 : tensor<8xf32>\n"
                               "}\n";
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gspmd_unflatten_call_graph(m, true, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "Failed to lookup function: nowhere"));
    sp_module_destroy(m);
}

static void test_sp_gspmd_unflatten_call_graph_rejects_arity_mismatch(void **state)
{
    (void)state;
    static const char text[] =
        "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = call @two(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n"
        "}\n"
        "func.func private @two(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n";
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gspmd_unflatten_call_graph(m, false, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "do not match @two"));
    sp_module_destroy(m);
}

/* Fails allocation n = 0, 1, ... until the pass succeeds; each failure must
 * be CM_ENOMEM and the success must print what a clean run prints. */
static void assert_survives_oom(const char *text, bool fully)
{
    char *want = run(text, fully);
    bool done = false;
    for (long n = 0; n < 20000 && !done; n++) {
        sp_module *m = read_module(text);
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_gspmd_unflatten_call_graph(m, fully, &err);
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

static void test_sp_gspmd_unflatten_call_graph_survives_oom(void **state)
{
    (void)state;
    assert_survives_oom(FLAT, true);
    assert_survives_oom(FLAT, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_fully_copies_to_most_called),
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_copies_operands_without_dedup),
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_leaves_inlinable_bodies),
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_rejects_missing_callee),
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_rejects_arity_mismatch),
        cmocka_unit_test(test_sp_gspmd_unflatten_call_graph_survives_oom),
    };
    return cmocka_run_group_tests_name("sp_gspmd_unflatten", tests, NULL, NULL);
}
