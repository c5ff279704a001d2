/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_exec: the Flax MLP partitioned over 8 devices
 * against its single-device reference; each sdy collective on a small
 * hand-partitioned module (also on a mesh with an explicit device order);
 * sharded iota and broadcast offsets; the error for an op the executor does
 * not run; the comparison's first-mismatch report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "ex_exec.h"
#include "sp_ir.h"

/* Checks text (partitioned by ex_check_text) against its reference. */
static void assert_matches(const char *text, uint32_t devices)
{
    ex_check_opts o = {devices, 2, 7, NULL};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(text, strlen(text), &o, &r, &err);
    if (st != CM_OK) {
        fail_msg("ex_check_text: %s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at result %u %s: expected %g got %g", r.mm.result, r.mm.where,
                 r.mm.expected, r.mm.got);
    }
    assert_int_equal(r.n_devices, devices);
}

static void test_ex_check_text_flax_mlp_8_devices_matches(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.mlir", &text, &len, &err), CM_OK);
    ex_check_opts o = {8, 2, 42, NULL};
    ex_report r;
    cm_status st = ex_check_text(text, len, &o, &r, &err);
    cm_free(text);
    if (st != CM_OK) {
        fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    assert_true(r.mm.match);
    assert_int_equal(r.n_devices, 8);
    assert_true(r.flops > 0);
}

#define MESH "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
#define MESH_IDS "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2], device_ids=[3, 1, 0, 2]>\n"

/* A dot whose contraction is sharded on y, then the collective under test. */
#define DOT_PARTIAL(out_sh)                                                                      \
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "  \
    "{\"y\"}]>}, %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}, {}]>}) " \
    "-> tensor<8x8xf32> {\n"                                                                     \
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = "   \
    "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : (tensor<8x16xf32>, "                 \
    "tensor<16x8xf32>) -> tensor<8x8xf32>\n"

static const char all_reduce_mod[] =
    MESH DOT_PARTIAL() "  %1 = sdy.all_reduce {\"y\"} %0 out_sharding=<@mesh, [{\"x\"}, {}]> : "
                       "tensor<8x8xf32>\n"
                       "  return %1 : tensor<8x8xf32>\n}\n";

static const char reduce_scatter_mod[] =
    MESH DOT_PARTIAL() "  %1 = sdy.reduce_scatter [{}, {\"y\"}] %0 out_sharding=<@mesh, [{\"x\"}, "
                       "{\"y\"}]> : tensor<8x8xf32>\n"
                       "  return %1 : tensor<8x8xf32>\n}\n";

#define ONE_ARG(sh)                                                                              \
    "func.func @main(%arg0: tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, " sh ">}) -> " \
    "tensor<8x12xf32> {\n"

static const char all_gather_mod[] =
    MESH ONE_ARG("[{\"x\"}, {\"y\"}]") "  %0 = sdy.all_gather [{\"x\"}, {}] %arg0 "
                                       "out_sharding=<@mesh, [{}, {\"y\"}]> : tensor<8x12xf32>\n"
                                       "  %1 = stablehlo.exponential %0 {sdy.sharding = "
                                       "#sdy.sharding_per_value<[<@mesh, [{}, {\"y\"}]>]>} : "
                                       "tensor<8x12xf32>\n"
                                       "  return %1 : tensor<8x12xf32>\n}\n";

static const char all_slice_mod[] =
    MESH ONE_ARG("[{}, {}]") "  %0 = sdy.all_slice [{\"y\"}, {\"x\"}] %arg0 out_sharding=<@mesh, "
                             "[{\"y\"}, {\"x\"}]> : tensor<8x12xf32>\n"
                             "  return %0 : tensor<8x12xf32>\n}\n";

static const char all_to_all_mod[] =
    MESH ONE_ARG("[{\"x\"}, {}]") "  %0 = sdy.all_to_all [{\"x\"}: 0->1] %arg0 out_sharding=<@mesh, "
                                  "[{}, {\"x\"}]> : tensor<8x12xf32>\n"
                                  "  return %0 : tensor<8x12xf32>\n}\n";

static const char permute_mod[] =
    MESH ONE_ARG("[{\"x\", \"y\"}, {}]") "  %0 = sdy.collective_permute %arg0 out_sharding=<@mesh, "
                                         "[{\"y\", \"x\"}, {}]> : tensor<8x12xf32>\n"
                                         "  return %0 : tensor<8x12xf32>\n}\n";

static void with_mesh(char *buf, size_t len, const char *mod, bool ids)
{
    /* Swap the default mesh line for the one with an explicit device order. */
    size_t skip = strlen(MESH);
    snprintf(buf, len, "%s%s", ids ? MESH_IDS : MESH, mod + skip);
}

static void check_both_meshes(const char *mod)
{
    char buf[4096];
    with_mesh(buf, sizeof buf, mod, false);
    assert_matches(buf, 4);
    with_mesh(buf, sizeof buf, mod, true);
    assert_matches(buf, 4);
}

static void test_ex_exec_run_all_reduce_matches(void **state)
{
    (void)state;
    check_both_meshes(all_reduce_mod);
}

static void test_ex_exec_run_reduce_scatter_matches(void **state)
{
    (void)state;
    check_both_meshes(reduce_scatter_mod);
}

static void test_ex_exec_run_all_gather_matches(void **state)
{
    (void)state;
    check_both_meshes(all_gather_mod);
}

static void test_ex_exec_run_all_slice_matches(void **state)
{
    (void)state;
    check_both_meshes(all_slice_mod);
}

static void test_ex_exec_run_all_to_all_matches(void **state)
{
    (void)state;
    check_both_meshes(all_to_all_mod);
}

static void test_ex_exec_run_collective_permute_matches(void **state)
{
    (void)state;
    check_both_meshes(permute_mod);
}

/* An all-reduce with the wrong axis must not match its reference. */
static void test_ex_exec_run_wrong_collective_mismatches(void **state)
{
    (void)state;
    static const char bad[] =
        MESH DOT_PARTIAL() "  %1 = sdy.all_reduce {\"x\"} %0 out_sharding=<@mesh, [{\"x\"}, {}]> : "
                           "tensor<8x8xf32>\n"
                           "  return %1 : tensor<8x8xf32>\n}\n";
    ex_check_opts o = {4, 1, 3, NULL};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(bad, strlen(bad), &o, &r, &err);
    /* Either the replicas disagree or the numbers differ. */
    assert_true(st == CM_EINTERNAL || (st == CM_OK && !r.mm.match));
}

/* Iota and broadcast on sharded dimensions need each shard's offset. */
static void test_ex_check_text_sharded_iota_broadcast_match(void **state)
{
    (void)state;
    static const char mod[] =
        MESH "func.func @main(%arg0: tensor<8xf32>) -> (tensor<8x4xf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}) {\n"
             "  %0 = stablehlo.iota dim = 0 : tensor<8x4xf32>\n"
             "  %1 = stablehlo.iota dim = 1 : tensor<8x4xf32>\n"
             "  %2 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<8xf32>) -> "
             "tensor<8x4xf32>\n"
             "  %3 = stablehlo.multiply %0, %1 : tensor<8x4xf32>\n"
             "  %4 = stablehlo.add %3, %2 : tensor<8x4xf32>\n"
             "  %5 = stablehlo.tanh %4 : tensor<8x4xf32>\n"
             "  return %5 : tensor<8x4xf32>\n}\n";
    assert_matches(mod, 4);
}

/* Reduce, compare/select, transpose, reshape, slice, concatenate, convert on
 * a sharded module through the whole pipeline. */
static void test_ex_check_text_mixed_ops_match(void **state)
{
    (void)state;
    static const char mod[] =
        MESH "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {\"y\"}]>}) -> tensor<8xf32> {\n"
             "  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
             "  %z = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> "
             "tensor<8x16xf32>\n"
             "  %c = stablehlo.compare GT, %arg0, %z : (tensor<8x16xf32>, tensor<8x16xf32>) -> "
             "tensor<8x16xi1>\n"
             "  %n = stablehlo.negate %arg0 : tensor<8x16xf32>\n"
             "  %s = stablehlo.select %c, %arg0, %n : tensor<8x16xi1>, tensor<8x16xf32>\n"
             "  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<8x16xf32>) -> "
             "tensor<16x8xf32>\n"
             "  %r = stablehlo.reduce(%t init: %cst) applies stablehlo.add across dimensions = "
             "[0] : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>\n"
             "  %q = stablehlo.sqrt %r : tensor<8xf32>\n"
             "  return %q : tensor<8xf32>\n}\n";
    assert_matches(mod, 4);
}

static void test_ex_exec_run_unsupported_op_is_a_clear_error(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.cosine %arg0 : tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n}\n";
    ex_check_opts o = {1, 1, 1, NULL};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_check_text(mod, strlen(mod), &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.msg, "op stablehlo.cosine cannot be executed yet");
    assert_string_equal(err.path, "2:3");
}

static void test_ex_tensors_compare_reports_first_mismatch(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 4, 5.5f, 7};
    ex_tensor e = {SP_ELEM_F32, 2, {2, 3}, 6, a}, g = {SP_ELEM_F32, 2, {2, 3}, 6, b};
    ex_mismatch mm;
    ex_tensors_compare(&e, &g, 1, 1, &mm);
    assert_false(mm.match);
    assert_int_equal(mm.index, 4);
    assert_string_equal(mm.where, "[1, 1]");
    assert_true(mm.expected == 5.0 && mm.got == 5.5);
    ex_tensors_compare(&e, &e, 1, 1, &mm);
    assert_true(mm.match);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_check_text_flax_mlp_8_devices_matches),
        cmocka_unit_test(test_ex_exec_run_all_reduce_matches),
        cmocka_unit_test(test_ex_exec_run_reduce_scatter_matches),
        cmocka_unit_test(test_ex_exec_run_all_gather_matches),
        cmocka_unit_test(test_ex_exec_run_all_slice_matches),
        cmocka_unit_test(test_ex_exec_run_all_to_all_matches),
        cmocka_unit_test(test_ex_exec_run_collective_permute_matches),
        cmocka_unit_test(test_ex_exec_run_wrong_collective_mismatches),
        cmocka_unit_test(test_ex_check_text_sharded_iota_broadcast_match),
        cmocka_unit_test(test_ex_check_text_mixed_ops_match),
        cmocka_unit_test(test_ex_exec_run_unsupported_op_is_a_clear_error),
        cmocka_unit_test(test_ex_tensors_compare_reports_first_mismatch),
    };
    return cmocka_run_group_tests_name("ex_exec", tests, NULL, NULL);
}
