/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for StableHLO collectives inside sdy.manual_computation (JAX
 * shard_map programs) in executor/ex_exec: all_reduce (sum over every
 * device, maximum of i32 over a mesh axis, two operands at once),
 * all_gather, reduce_scatter, all_to_all, collective_permute and
 * partition_id, each run partitioned on 4 devices (the device workers'
 * collectives) and replicated (the reference: the interpreter runs every
 * device's body in lockstep), both checked against values worked out here;
 * a wrong program detected against the right one's reference; bad process
 * groups, bodies and placements as clear errors at the op. */
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
#include "sp_diag.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_pipeline.h"
#include "sp_prop.h"

/* Reads and plans text (-sdy-propagation-pipeline), and partitions it when
 * partition is set, as `shardplan run` does. */
static sp_module *plan(const char *text, bool partition)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read(text, strlen(text), 0, &m, &err) != CM_OK) {
        fail_msg("read: %s at %s", err.msg, err.path);
    }
    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = sp_pass_propagation_pipeline(m, &po, &d, &err);
    sp_diags_fini(&d);
    if (st == CM_OK && partition) {
        st = ex_partition(m, &err);
    }
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("plan: %s at %s", err.msg, err.path);
    }
    return m;
}

/* Runs main of text (no arguments) partitioned on 4 devices and replicated;
 * result r of both must be want[0..n) exactly (f32, or i32 with is_int). */
static void check_exact(const char *text, uint32_t r, const double *want, size_t n, bool is_int)
{
    for (int part = 0; part < 2; part++) {
        sp_module *m = plan(text, part == 1);
        ex_tensor *res = NULL;
        uint32_t n_res = 0;
        cm_error err;
        cm_error_clear(&err);
        ex_exec_opts o = {.n_devices = part == 1 ? 4u : 0u, .replicated = part == 0, .iters = 2};
        if (ex_exec_run(m, &o, NULL, 0, &res, &n_res, &err) != CM_OK) {
            fail_msg("%s: %s at %s: %s", part ? "partitioned" : "reference",
                     cm_status_name(err.code), err.path, err.msg);
        }
        assert_true(n_res > r);
        assert_int_equal(res[r].n, n);
        for (size_t i = 0; i < n; i++) {
            double g = is_int ? (double)((const int32_t *)res[r].data)[i]
                              : (double)((const float *)res[r].data)[i];
            if (g != want[i]) {
                fail_msg("%s: element %zu: expected %g, got %g", part ? "4 devices" : "reference",
                         i, want[i], g);
            }
        }
        ex_tensors_free(res, n_res);
        sp_module_destroy(m);
    }
}

#define HEAD                                                                                       \
    "module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n"
#define CH "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"
#define ADD(T)                                                                                     \
    "({\n^bb0(%a: tensor<" T ">, %b: tensor<" T ">):\n  %s = stablehlo.add %a, %b : tensor<" T     \
    ">\n  stablehlo.return %s : tensor<" T ">\n})"
/* main: x = iota 0..15 as 8x2 f32, the manual computation BODY on it. */
#define IOTA_MAIN(MESH, RT, IN, OUT, AXES, LT, BODY)                                               \
    HEAD "sdy.mesh @mesh = <" MESH ">\n"                                                           \
         "func.func @main() -> tensor<" RT "> {\n"                                                 \
         "  %i = stablehlo.iota dim = 0 : tensor<16xf32>\n"                                        \
         "  %x = stablehlo.reshape %i : (tensor<16xf32>) -> tensor<8x2xf32>\n"                     \
         "  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, " IN                             \
         ">] out_shardings=[<@mesh, " OUT ">] manual_axes=" AXES " (%l: tensor<" LT                \
         "xf32>) {\n" BODY "  } : (tensor<8x2xf32>) -> tensor<" RT ">\n"                           \
         "  return %0 : tensor<" RT ">\n}\n}\n"

static const char *psum_mod = IOTA_MAIN(
    "[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
    "  %r = \"stablehlo.all_reduce\"(%l) <{" CH ", replica_groups = dense<[[0, 1, 2, 3]]> : "
    "tensor<1x4xi64>, use_global_device_ids}> " ADD(
        "f32") " : (tensor<2x2xf32>) -> "
               "tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n");

/* the same with a maximum: a different program */
static const char *pmax_mod = IOTA_MAIN(
    "[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
    "  %r = \"stablehlo.all_reduce\"(%l) <{" CH ", replica_groups = dense<[[0, 1, 2, 3]]> : "
    "tensor<1x4xi64>, use_global_device_ids}> ({\n^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "  %s = stablehlo.maximum %a, %b : tensor<f32>\n  stablehlo.return %s : tensor<f32>\n})"
    " : (tensor<2x2xf32>) -> tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n");

static void test_ex_spmd_psum_sums_every_device(void **state)
{
    (void)state;
    /* device d holds rows 2d, 2d+1: [[4d, 4d+1], [4d+2, 4d+3]] */
    static const double want[] = {24, 28, 32, 36};
    check_exact(psum_mod, 0, want, 4, false);
    static const double wmax[] = {12, 13, 14, 15};
    check_exact(pmax_mod, 0, wmax, 4, false);
}

static void test_ex_spmd_all_gather_and_permute(void **state)
{
    (void)state;
    const char *gather = IOTA_MAIN(
        "[\"x\"=4]", "2x8xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
        "  %r = \"stablehlo.all_gather\"(%l) <{all_gather_dim = 1 : i64, " CH
        ", replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : "
        "(tensor<2x2xf32>) -> tensor<2x8xf32>\n  sdy.return %r : tensor<2x8xf32>\n");
    static const double wg[] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};
    check_exact(gather, 0, wg, 16, false);
    /* device 3 sends to 0 and nobody sends to 3... reversed: t gets t+1,
     * 3 gets nothing (zeros) */
    const char *perm =
        IOTA_MAIN("[\"x\"=4]", "8x2xf32", "[{\"x\"}, {}]", "[{\"x\"}, {}]", "{\"x\"}", "2x2",
                  "  %r = \"stablehlo.collective_permute\"(%l) <{" CH
                  ", source_target_pairs = dense<[[1, 0], [2, 1], [3, 2]]> : tensor<3x2xi64>}> : "
                  "(tensor<2x2xf32>) -> tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n");
    static const double wp[] = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0};
    check_exact(perm, 0, wp, 16, false);
    /* no channel id: cross_replica pairs of the one replica, (0, 0), in
     * every partition: each device keeps its own block */
    const char *self = IOTA_MAIN(
        "[\"x\"=4]", "8x2xf32", "[{\"x\"}, {}]", "[{\"x\"}, {}]", "{\"x\"}", "2x2",
        "  %r = \"stablehlo.collective_permute\"(%l) <{source_target_pairs = dense<[[0, 0]]> : "
        "tensor<1x2xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>\n"
        "  sdy.return %r : tensor<2x2xf32>\n");
    double ws[16];
    for (int i = 0; i < 16; i++) {
        ws[i] = i;
    }
    check_exact(self, 0, ws, 16, false);
}

static void test_ex_spmd_reduce_scatter_and_all_to_all(void **state)
{
    (void)state;
    /* replicated in: every device holds all 8 rows; the sum is 4x; device
     * d keeps rows 2d, 2d+1 */
    const char *rs = IOTA_MAIN(
        "[\"x\"=4]", "8x2xf32", "[{}, {}]", "[{\"x\"}, {}]", "{\"x\"}", "8x2",
        "  %r = \"stablehlo.reduce_scatter\"(%l) <{" CH
        ", replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 0 : "
        "i64, use_global_device_ids}> " ADD("f32") " : (tensor<8x2xf32>) -> tensor<2x2xf32>\n"
                                                   "  sdy.return %r : tensor<2x2xf32>\n");
    double w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = 4.0 * i;
    }
    check_exact(rs, 0, w, 16, false);
    /* 2x2 mesh, groups over y ([[0, 1], [2, 3]], cross_partition): device
     * (x, y) holds rows 4x..4x+3; it sends row block j to member j and
     * concatenates what it gets along dim 1 */
    const char *a2a = IOTA_MAIN(
        "[\"x\"=2, \"y\"=2]", "8x4xf32", "[{\"x\"}, {}]", "[{\"x\", \"y\"}, {}]", "{\"x\", \"y\"}",
        "4x2",
        "  %r = \"stablehlo.all_to_all\"(%l) <{" CH ", concat_dimension = 1 : i64, "
        "replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, split_count = 2 : i64, "
        "split_dimension = 0 : i64}> : (tensor<4x2xf32>) -> tensor<2x4xf32>\n"
        "  sdy.return %r : tensor<2x4xf32>\n");
    /* device (x, y) gets row block y (rows 4x + 2y + t) from both members,
     * which hold the same block (y does not split the operand), side by
     * side: global row g of the 8x4 result is [2g, 2g + 1, 2g, 2g + 1] */
    static const double wa[] = {
        /* device 0 (x0 y0): rows 0, 1 of block x0, from y0 and y1 (same data) */
        0, 1, 0, 1, 2, 3, 2, 3,
        /* device 1: rows 2, 3 */
        4, 5, 4, 5, 6, 7, 6, 7,
        /* device 2: rows 4, 5 of block x1 */
        8, 9, 8, 9, 10, 11, 10, 11,
        /* device 3 */
        12, 13, 12, 13, 14, 15, 14, 15};
    check_exact(a2a, 0, wa, 32, false);
}

static void test_ex_spmd_int_max_two_operands_and_partition_id(void **state)
{
    (void)state;
    /* 2x2 mesh, both axes manual: each device's partition id and its
     * negation, reduced by maximum over x ([[0, 2], [1, 3]]) in one op */
    const char *text =
        HEAD "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
             "func.func @main() -> (tensor<4xi32>, tensor<4xi32>) {\n"
             "  %z = stablehlo.constant dense<0> : tensor<4xi32>\n"
             "  %0:2 = sdy.manual_computation(%z) in_shardings=[<@mesh, [{\"x\", \"y\"}]>] "
             "out_shardings=[<@mesh, [{\"x\", \"y\"}]>, <@mesh, [{\"x\", \"y\"}]>] "
             "manual_axes={\"x\", \"y\"} (%l: tensor<1xi32>) {\n"
             "    %p = stablehlo.partition_id : tensor<ui32>\n"
             "    %q = stablehlo.convert %p : (tensor<ui32>) -> tensor<i32>\n"
             "    %v = stablehlo.reshape %q : (tensor<i32>) -> tensor<1xi32>\n"
             "    %a = stablehlo.add %v, %l : tensor<1xi32>\n"
             "    %n = stablehlo.negate %a : tensor<1xi32>\n"
             "    %r:2 = \"stablehlo.all_reduce\"(%a, %n) <{" CH
             ", replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, "
             "use_global_device_ids}> ({\n^bb0(%s0: tensor<i32>, %s1: tensor<i32>):\n"
             "  %m = stablehlo.maximum %s0, %s1 : tensor<i32>\n"
             "  stablehlo.return %m : tensor<i32>\n})"
             " : (tensor<1xi32>, tensor<1xi32>) -> (tensor<1xi32>, tensor<1xi32>)\n"
             "    sdy.return %r#0, %r#1 : tensor<1xi32>, tensor<1xi32>\n"
             "  } : (tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>)\n"
             "  return %0#0, %0#1 : tensor<4xi32>, tensor<4xi32>\n}\n}\n";
    static const double w0[] = {2, 3, 2, 3}, w1[] = {0, -1, 0, -1};
    check_exact(text, 0, w0, 4, true);
    check_exact(text, 1, w1, 4, true);
}

static void test_ex_spmd_wrong_program_is_a_mismatch(void **state)
{
    (void)state;
    sp_module *part = plan(pmax_mod, true), *ref = plan(psum_mod, false);
    ex_check_opts o = {.n_devices = 4, .iters = 1, .seed = 1};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_check_modules(part, ref, &o, &r, &err), CM_OK);
    assert_false(r.mm.match);
    assert_int_equal(r.mm.index, 0);
    assert_true(r.mm.expected == 24.0 && r.mm.got == 12.0);
    sp_module_destroy(part);
    sp_module_destroy(ref);
    /* and the right one matches */
    part = plan(psum_mod, true);
    ref = plan(psum_mod, false);
    assert_int_equal(ex_check_modules(part, ref, &o, &r, &err), CM_OK);
    assert_true(r.mm.match);
    sp_module_destroy(part);
    sp_module_destroy(ref);
}

/* text fails partitioned on 4 devices with msg (a substring) at path. */
static void expect_fails(const char *text, const char *msg, const char *path)
{
    sp_module *m = plan(text, true);
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    cm_error err;
    cm_error_clear(&err);
    ex_exec_opts o = {.n_devices = 4, .iters = 1};
    assert_int_equal(ex_exec_run(m, &o, NULL, 0, &res, &n_res, &err), CM_EINVAL);
    if (strstr(err.msg, msg) == NULL || strcmp(err.path, path) != 0) {
        fail_msg("got '%s' at '%s', wanted '%s' at '%s'", err.msg, err.path, msg, path);
    }
    sp_module_destroy(m);
}

static void test_ex_spmd_bad_groups_and_bodies_are_clear_errors(void **state)
{
    (void)state;
    expect_fails(IOTA_MAIN("[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
                           "  %r = \"stablehlo.all_reduce\"(%l) <{" CH
                           ", replica_groups = dense<[[0, 1], [1, 3]]> : tensor<2x2xi64>, "
                           "use_global_device_ids}> " ADD(
                               "f32") " : (tensor<2x2xf32>) -> "
                                      "tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n"),
                 "replica_groups names id 1 twice", "7:3");
    expect_fails(IOTA_MAIN("[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
                           "  %r = \"stablehlo.all_reduce\"(%l) <{" CH
                           ", replica_groups = dense<[[0, 1, 2, 7]]> : tensor<1x4xi64>, "
                           "use_global_device_ids}> " ADD(
                               "f32") " : (tensor<2x2xf32>) -> "
                                      "tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n"),
                 "replica_groups names id 7, outside the 4 processes", "7:3");
    expect_fails(IOTA_MAIN("[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
                           "  %r = \"stablehlo.all_reduce\"(%l) <{" CH
                           ", replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, "
                           "use_global_device_ids}> ({\n^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
                           "  %s = stablehlo.subtract %a, %b : tensor<f32>\n"
                           "  stablehlo.return %s : tensor<f32>\n}) : (tensor<2x2xf32>) -> "
                           "tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n"),
                 "only a body of one add", "7:3");
    expect_fails(IOTA_MAIN("[\"x\"=4]", "8x2xf32", "[{\"x\"}, {}]", "[{\"x\"}, {}]", "{\"x\"}",
                           "2x2",
                           "  %r = \"stablehlo.collective_permute\"(%l) <{" CH
                           ", source_target_pairs = dense<[[0, 1], [2, 1]]> : tensor<2x2xi64>}> : "
                           "(tensor<2x2xf32>) -> tensor<2x2xf32>\n"
                           "  sdy.return %r : tensor<2x2xf32>\n"),
                 "names a source or target twice", "7:3");
    /* outside a manual computation */
    expect_fails(HEAD "sdy.mesh @mesh = <[\"x\"=4]>\n"
                      "func.func @main() -> tensor<ui32> {\n"
                      "  %p = stablehlo.partition_id : tensor<ui32>\n"
                      "  return %p : tensor<ui32>\n}\n}\n",
                 "op stablehlo.partition_id outside sdy.manual_computation", "4:3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_spmd_psum_sums_every_device),
        cmocka_unit_test(test_ex_spmd_all_gather_and_permute),
        cmocka_unit_test(test_ex_spmd_reduce_scatter_and_all_to_all),
        cmocka_unit_test(test_ex_spmd_int_max_two_operands_and_partition_id),
        cmocka_unit_test(test_ex_spmd_wrong_program_is_a_mismatch),
        cmocka_unit_test(test_ex_spmd_bad_groups_and_bodies_are_clear_errors),
    };
    return cmocka_run_group_tests_name("ex_spmd", tests, NULL, NULL);
}
