/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_reshard (-sdy-insert-explicit-reshards): the ops
 * it inserts for a dot, compatible ops left untouched, the partial version
 * (enable-full-version=false), call operands resharded after their
 * definition, ops on two meshes skipped, and OOM loops that must end with
 * the same module as a clean run;
 * and the CSR lists the Shardy passes share (sp_csr_build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_pass.h"
#include "sp_reshard.h"
#include "sp_mlir.h"

static const char DOT_REDUCE_SCATTER[] =
    "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
    "func.func @f(%arg0: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
    "{\"y\"}]>}, %arg1: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}, {}]>}) "
    "-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}) {\n"
    "  %0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
    "[{\"x\"}, {\"y\"}]>]>} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>\n"
    "  %1 = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}, "
    "{\"y\"}]>]>} : tensor<8x16xf32>\n"
    "  return %1 : tensor<8x16xf32>\n"
    "}\n";

static sp_module *read_module(const char *text)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_mlir_read(text, strlen(text), 0, &m, &err);
    if (st != CM_OK) {
        fail_msg("sp_mlir_read: %s: %s", err.path, err.msg);
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

/* Reads text, runs the pass (full version or not) and returns the printed
 * result. */
static char *run_pass_opts(const char *text, bool full)
{
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    sp_reshard_opts o = {.full_version = full};
    cm_status st = sp_pass_insert_explicit_reshards(m, &o, NULL, &err);
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("pass: %s", err.msg);
    }
    char *s = print_module(m);
    sp_module_destroy(m);
    return s;
}

static char *run_pass(const char *text)
{
    return run_pass_opts(text, true);
}

static void assert_in_order(const char *text, const char *const *parts, size_t n)
{
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        const char *hit = strstr(p, parts[i]);
        if (hit == NULL) {
            fail_msg("missing (in order) `%s` in:\n%s", parts[i], text);
        }
        p = hit + strlen(parts[i]);
    }
}

static void test_sp_pass_insert_explicit_reshards_dot_reduce_scatter(void **state)
{
    (void)state;
    char *out = run_pass(DOT_REDUCE_SCATTER);
    static const char *const want[] = {
        "%0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}, {}]>]>}",
        "%1 = sdy.all_reduce {\"y\"} %0 out_sharding=<@mesh, [{\"x\"}, {}]> : tensor<8x16xf32>",
        "%2 = sdy.reshard %1 <@mesh, [{\"x\"}, {\"y\"}]> : tensor<8x16xf32>",
        "%3 = stablehlo.negate %2 ",
        "return %3",
    };
    assert_in_order(out, want, sizeof want / sizeof want[0]);
    cm_free(out);
}

static void test_sp_pass_insert_explicit_reshards_compatible_op_untouched(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
        "func.func @f(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
        "{}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\", ?}, {}]>}) "
        "-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) {\n"
        "  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}, {?}]>]>} : tensor<8x16xf32>\n"
        "  return %0 : tensor<8x16xf32>\n"
        "}\n";
    sp_module *m = read_module(text);
    char *before = print_module(m);
    sp_module_destroy(m);
    char *after = run_pass(text);
    assert_string_equal(before, after);
    cm_free(before);
    cm_free(after);
}

/* A manual computation's operand is resharded to its in_shardings entry,
 * and its result counts as sharded by out_shardings: returning it where the
 * function's result wants that sharding needs no reshard (it used to be
 * taken as replicated, and an all_slice followed). */
static void test_sp_pass_insert_explicit_reshards_manual_computation(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
        "func.func @f(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) "
        "-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) {\n"
        "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}, {}]>] "
        "out_shardings=[<@mesh, [{\"x\"}, {}]>] manual_axes={\"x\"} (%arg1: "
        "tensor<4x16xf32>) {\n"
        "    %1 = stablehlo.add %arg1, %arg1 : tensor<4x16xf32>\n"
        "    sdy.return %1 : tensor<4x16xf32>\n"
        "  } : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
        "  return %0 : tensor<8x16xf32>\n"
        "}\n";
    char *out = run_pass(text);
    static const char *const want[] = {
        "%0 = sdy.reshard %arg0 <@mesh, [{\"x\"}, {}]> : tensor<8x16xf32>",
        "sdy.manual_computation(%0) in_shardings=",
        "return %1 : tensor<8x16xf32>",
    };
    assert_in_order(out, want, sizeof want / sizeof want[0]);
    const char *after = strstr(out, "sdy.manual_computation");
    assert_null(strstr(after, "sdy.reshard")); /* nothing after it */
    cm_free(out);
}

/* enable-full-version=false: the dot whose result conflicts with its
 * operands is left alone (its result's conflicting factor is unsharded in
 * the operands, Shardy's reduce-scatter pattern), and nothing else moves. */
static void test_sp_pass_insert_explicit_reshards_partial_leaves_dot(void **state)
{
    (void)state;
    sp_module *m = read_module(DOT_REDUCE_SCATTER);
    char *before = print_module(m);
    sp_module_destroy(m);
    char *after = run_pass_opts(DOT_REDUCE_SCATTER, false);
    assert_string_equal(before, after);
    cm_free(before);
    cm_free(after);
}

/* enable-full-version=false still computes a dot more sharded when its
 * result conflicts on one factor with the contracting axes (Shardy's
 * processDot): the result is resharded back after it. */
static void test_sp_pass_insert_explicit_reshards_partial_process_dot(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
        "func.func @f(%arg0: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}, "
        "{\"x\"}]>}, %arg1: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) "
        "-> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) {\n"
        "  %0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}, {}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>\n"
        "  return %0 : tensor<4x8xf32>\n"
        "}\n";
    char *out = run_pass_opts(text, false);
    static const char *const want[] = {
        "%0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"y\"}, {}]>]>}",
        "%1 = sdy.reshard %0 <@mesh, [{\"x\"}, {}]> : tensor<4x8xf32>",
        "return %1",
    };
    assert_in_order(out, want, sizeof want / sizeof want[0]);
    assert_null(strstr(out, "sdy.all_reduce"));
    cm_free(out);
}

/* Reshards for a call's operands go right after the operand's definition,
 * the latest first (here both at the start of the body); a sharded value
 * returned where the function gives no result sharding goes replicated. */
static const char CALL_TWICE[] =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) "
    "-> tensor<8xf32> {\n"
    "  %c = stablehlo.constant dense<1.0> : tensor<8xf32>\n"
    "  %0 = call @g(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %1 = call @h(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %2 = stablehlo.add %0, %1 : tensor<8xf32>\n"
    "  %3 = stablehlo.add %2, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
    "[{\"x\"}]>]>} : tensor<8xf32>\n"
    "  return %3 : tensor<8xf32>\n"
    "}\n"
    "func.func private @g(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"y\"}]>}) -> tensor<8xf32> {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n"
    "func.func private @h(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{}]>}) -> tensor<8xf32> {\n"
    "  return %arg0 : tensor<8xf32>\n"
    "}\n";

static void test_sp_pass_insert_explicit_reshards_call_operands_after_def(void **state)
{
    (void)state;
    char *out = run_pass(CALL_TWICE);
    static const char *const want[] = {
        "%0 = sdy.reshard %arg0 <@mesh, [{}]> : tensor<8xf32>",
        "%1 = sdy.reshard %arg0 <@mesh, [{\"y\"}]> : tensor<8xf32>",
        "stablehlo.constant",
        "call @g(%1)",
        "call @h(%0)",
        "sdy.reshard %arg0 <@mesh, [{}]> : tensor<8xf32>\n    return",
    };
    assert_in_order(out, want, sizeof want / sizeof want[0]);
    cm_free(out);
}

/* A reshape whose operand has overflow axes ("x","y" on 12 = 6 x 2 overflow
 * the 6): the axes are spread afresh and the common prefix "x":(1)2 kept. */
static const char RESHAPE_OVERFLOW[] =
    "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
    "func.func @f(%arg0: tensor<12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\", "
    "\"y\"}]>}) -> (tensor<6x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {\n"
    "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, "
    "{}]>]>} : (tensor<12xf32>) -> tensor<6x2xf32>\n"
    "  return %0 : tensor<6x2xf32>\n"
    "}\n";

static void test_sp_pass_insert_explicit_reshards_reshape_overflow(void **state)
{
    (void)state;
    char *out = run_pass(RESHAPE_OVERFLOW);
    static const char *const want[] = {
        "%0 = sdy.reshard %arg0 <@mesh, [{\"x\":(1)2}]> : tensor<12xf32>",
        "%1 = stablehlo.reshape %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\":(1)2}, {}]>]>}",
        "%2 = sdy.reshard %1 <@mesh, [{}, {}]> : tensor<6x2xf32>",
        "return %2",
    };
    assert_in_order(out, want, sizeof want / sizeof want[0]);
    cm_free(out);
}

static void test_sp_pass_insert_explicit_reshards_skips_two_meshes(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @a = <[\"x\"=4]>\n"
        "sdy.mesh @b = <[\"y\"=4]>\n"
        "func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@a, [{\"x\"}]>}, "
        "%arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@b, [{\"y\"}]>}) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n"
        "}\n";
    char *out = run_pass(text);
    assert_null(strstr(out, "sdy.reshard"));
    cm_free(out);
}

/* Every allocation failing in turn ends in CM_ENOMEM or the clean result. */
static void survives_oom(const char *text)
{
    char *want = run_pass(text);
    bool done = false;
    for (long n = 0; n < 10000 && !done; n++) {
        sp_module *m = read_module(text);
        cm_error err;
        cm_error_clear(&err);
        sp_reshard_opts o = {.full_version = true};
        cm_alloc_fail_after(n);
        cm_status st = sp_pass_insert_explicit_reshards(m, &o, NULL, &err);
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

static void test_sp_pass_insert_explicit_reshards_survives_oom(void **state)
{
    (void)state;
    survives_oom(DOT_REDUCE_SCATTER);
    survives_oom(CALL_TWICE);
    survives_oom(RESHAPE_OVERFLOW);
}

/* ---- the CSR lists the passes share (planner/shardy/sp_pass.c) --------------- */

static const uint32_t csr_pairs[][2] = {{3, 10}, {0, 11}, {3, 12}, {1, 13}, {3, 14}, {0, 15}};

static void csr_edges(sp_csr *c, void *ctx)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof csr_pairs / sizeof csr_pairs[0]; i++) {
        sp_csr_add(c, csr_pairs[i][0], csr_pairs[i][1]);
    }
}

static void csr_edges_none(sp_csr *c, void *ctx)
{
    (void)c;
    (void)ctx;
}

static void test_sp_csr_build_keeps_items_in_order(void **state)
{
    (void)state;
    sp_csr c;
    assert_int_equal(sp_csr_build(&c, 5, csr_edges, NULL, NULL), CM_OK);
    static const uint32_t start[] = {0, 2, 3, 3, 6, 6};
    static const uint32_t items[] = {11, 15, 13, 10, 12, 14};
    assert_int_equal(c.n_keys, 5);
    assert_memory_equal(c.start, start, sizeof start);
    assert_memory_equal(c.items, items, sizeof items);
    assert_null(c.fill);
    sp_csr_fini(&c);
    assert_null(c.start);
    /* no keys, no items */
    assert_int_equal(sp_csr_build(&c, 0, csr_edges_none, NULL, NULL), CM_OK);
    assert_int_equal(c.start[0], 0);
    sp_csr_fini(&c);
}

static void test_sp_csr_build_reports_oom(void **state)
{
    (void)state;
    bool done = false;
    for (long n = 0; n < 100 && !done; n++) {
        sp_csr c;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_csr_build(&c, 5, csr_edges, NULL, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_int_equal(c.start[5], 6);
            done = true;
        } else {
            assert_int_equal(st, CM_ENOMEM);
            assert_int_equal(err.code, CM_ENOMEM);
        }
        sp_csr_fini(&c);
    }
    assert_true(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_dot_reduce_scatter),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_compatible_op_untouched),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_manual_computation),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_partial_leaves_dot),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_partial_process_dot),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_call_operands_after_def),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_reshape_overflow),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_skips_two_meshes),
        cmocka_unit_test(test_sp_pass_insert_explicit_reshards_survives_oom),
        cmocka_unit_test(test_sp_csr_build_keeps_items_in_order),
        cmocka_unit_test(test_sp_csr_build_reports_oom),
    };
    return cmocka_run_group_tests_name("sp_reshard", tests, NULL, NULL);
}
