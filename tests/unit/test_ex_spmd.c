/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for StableHLO collectives inside sdy.manual_computation (JAX
 * shard_map programs) in executor/ex_exec: all_reduce (sum over every
 * device, maximum of i32 over a mesh axis, two operands at once),
 * all_gather, reduce_scatter, all_to_all, collective_permute and
 * partition_id, each run partitioned on 4 devices (the device workers'
 * collectives) and replicated (the reference: the interpreter runs every
 * device's body in lockstep), both checked against values worked out here;
 * a wrong program detected against the right one's reference; bad process
 * groups, bodies and placements as clear errors at the op; a body of a
 * non-commutative op run by the interpreter on the workers; per-process
 * mains over 2 replicas x 2 partitions (the spec's process-group
 * strategies, collective_broadcast) and their check against the
 * interpreter's run of every process, with the OOM loop over it. */
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
#include "tu_oom.h"

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
                           "use_global_device_ids}> ({\n^bb0(%a: tensor<f32>, %b: tensor<f64>):\n"
                           "  %c = stablehlo.convert %a : (tensor<f32>) -> tensor<f64>\n"
                           "  %s = stablehlo.subtract %c, %b : tensor<f64>\n"
                           "  %t = stablehlo.convert %s : (tensor<f64>) -> tensor<f32>\n"
                           "  stablehlo.return %t : tensor<f32>\n}) : (tensor<2x2xf32>) -> "
                           "tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n"),
                 "a body that does not take two scalars of its operand's element type", "7:3");
    expect_fails(IOTA_MAIN("[\"x\"=4]", "8x2xf32", "[{\"x\"}, {}]", "[{\"x\"}, {}]", "{\"x\"}",
                           "2x2",
                           "  %r = \"stablehlo.collective_permute\"(%l) <{" CH
                           ", source_target_pairs = dense<[[0, 1], [2, 1]]> : tensor<2x2xi64>}> : "
                           "(tensor<2x2xf32>) -> tensor<2x2xf32>\n"
                           "  sdy.return %r : tensor<2x2xf32>\n"),
                 "names a source or target twice", "7:3");
    /* at the top level of a Shardy-sharded program */
    expect_fails(HEAD "sdy.mesh @mesh = <[\"x\"=4]>\n"
                      "func.func @main() -> tensor<4xf32> {\n"
                      "  %p = stablehlo.partition_id : tensor<ui32>\n"
                      "  %i = stablehlo.iota dim = 0 : tensor<4xf32>\n"
                      "  %s = sdy.sharding_constraint %i <@mesh, [{\"x\"}]> : tensor<4xf32>\n"
                      "  return %s : tensor<4xf32>\n}\n}\n",
                 "op stablehlo.partition_id at the top level of a Shardy-sharded program has no "
                 "meaning",
                 "4:3");
    /* send and recv */
    expect_fails("module @m attributes {mhlo.num_replicas = 4 : i32} {\n"
                 "func.func @main() -> tensor<2xf32> {\n"
                 "  %x = stablehlo.constant dense<1.0> : tensor<2xf32>\n"
                 "  %t = stablehlo.after_all : !stablehlo.token\n"
                 "  %u = \"stablehlo.send\"(%x, %t) <{channel_handle = "
                 "#stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = false}> : "
                 "(tensor<2xf32>, !stablehlo.token) -> !stablehlo.token\n"
                 "  return %x : tensor<2xf32>\n}\n}\n",
                 "op stablehlo.send cannot be executed on the device workers yet", "5:3");
}

/* a body of one non-commutative op, which the interpreter evaluates on the
 * workers: folded in group order, d0 - d1 - d2 - d3 */
static const char *psub_mod = IOTA_MAIN(
    "[\"x\"=4]", "2x2xf32", "[{\"x\"}, {}]", "[{}, {}]", "{\"x\"}", "2x2",
    "  %r = \"stablehlo.all_reduce\"(%l) <{" CH ", replica_groups = dense<[[0, 1, 2, 3]]> : "
    "tensor<1x4xi64>, use_global_device_ids}> ({\n^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "  %s = stablehlo.subtract %a, %b : tensor<f32>\n  stablehlo.return %s : tensor<f32>\n})"
    " : (tensor<2x2xf32>) -> tensor<2x2xf32>\n  sdy.return %r : tensor<2x2xf32>\n");

static void test_ex_spmd_body_folds_in_group_order(void **state)
{
    (void)state;
    /* device d holds [[4d, 4d+1], [4d+2, 4d+3]]: k - (4 + k) - (8 + k) - (12 + k) */
    static const double want[] = {-24, -26, -28, -30};
    check_exact(psub_mod, 0, want, 4, false);
}

/* A per-process main (no manual computation): text run on n devices, each
 * device's result r (i32 or ui32, 4 bytes) must be want[d * per + i]. */
static void check_per_device(const char *text, uint32_t n, uint32_t r, const int64_t *want,
                             size_t per)
{
    sp_module *m = plan(text, true);
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    cm_error err;
    cm_error_clear(&err);
    ex_exec_opts o = {.n_devices = n, .iters = 2};
    if (ex_exec_run(m, &o, NULL, 0, &res, &n_res, &err) != CM_OK) {
        fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    assert_int_equal(n_res % n, 0);
    uint32_t nr = n_res / n;
    for (uint32_t d = 0; d < n; d++) {
        const ex_tensor *t = &res[d * nr + r];
        assert_int_equal(t->n, per);
        for (size_t i = 0; i < per; i++) {
            int64_t g = ((const int32_t *)t->data)[i];
            if (g != want[d * per + i]) {
                fail_msg("device %u element %zu: expected %lld, got %lld", d, i,
                         (long long)want[d * per + i], (long long)g);
            }
        }
    }
    ex_tensors_free(res, n_res);
    /* the reference refuses a replicated run: the interpreter runs it */
    ex_exec_opts ro = {.replicated = true, .iters = 1};
    assert_int_equal(ex_exec_run(m, &ro, NULL, 0, &res, &n_res, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "has no replicated run"));
    sp_module_destroy(m);
}

/* 2 replicas x 2 partitions: v = 10 replica + partition, and the spec's
 * strategies over them */
#define GRID_MAIN(BODY)                                                                            \
    "module @g attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {\n"        \
    "func.func @main() -> (tensor<ui32>, tensor<ui32>, tensor<2xi32>) {\n"                         \
    "  %r = stablehlo.replica_id : tensor<ui32>\n"                                                 \
    "  %q = stablehlo.partition_id : tensor<ui32>\n"                                               \
    "  %ri = stablehlo.convert %r : (tensor<ui32>) -> tensor<i32>\n"                               \
    "  %qi = stablehlo.convert %q : (tensor<ui32>) -> tensor<i32>\n"                               \
    "  %ten = stablehlo.constant dense<10> : tensor<i32>\n"                                        \
    "  %r10 = stablehlo.multiply %ri, %ten : tensor<i32>\n"                                        \
    "  %s = stablehlo.add %r10, %qi : tensor<i32>\n"                                               \
    "  %v = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<i32>) -> tensor<1xi32>\n" BODY      \
    "  return %r, %q, %out : tensor<ui32>, tensor<ui32>, tensor<2xi32>\n}\n}\n"

static void test_ex_spmd_replicas_and_partitions_grid(void **state)
{
    (void)state;
    /* device d is replica d / 2, partition d % 2 */
    static const int64_t rep[] = {0, 0, 1, 1}, part[] = {0, 1, 0, 1};
    const char *xr = GRID_MAIN(
        "  %out = \"stablehlo.all_gather\"(%v) <{all_gather_dim = 0 : i64, replica_groups = "
        "dense<[[1, 0]]> : tensor<1x2xi64>}> : (tensor<1xi32>) -> tensor<2xi32>\n");
    check_per_device(xr, 4, 0, rep, 1);
    check_per_device(xr, 4, 1, part, 1);
    /* cross_replica, group [1, 0] within each partition q: [10 + q, q] */
    static const int64_t xr_want[] = {10, 0, 11, 1, 10, 0, 11, 1};
    check_per_device(xr, 4, 2, xr_want, 2);
    /* cross_replica_and_partition of [[0], [1]]: replica r's two partitions: [10 r, 10 r + 1] */
    static const int64_t crp_want[] = {0, 1, 0, 1, 10, 11, 10, 11};
    check_per_device(GRID_MAIN("  %out = \"stablehlo.all_gather\"(%v) <{all_gather_dim = 0 : i64, "
                               "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "
                               "replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>}> : "
                               "(tensor<1xi32>) -> tensor<2xi32>\n"),
                     4, 2, crp_want, 2);
    /* flattened ids {0, 3}, {2, 1}: [0, 11] and [10, 1] */
    static const int64_t flat_want[] = {0, 11, 10, 1, 10, 1, 0, 11};
    check_per_device(GRID_MAIN("  %out = \"stablehlo.all_gather\"(%v) <{all_gather_dim = 0 : i64, "
                               "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "
                               "replica_groups = dense<[[0, 3], [2, 1]]> : tensor<2x2xi64>, "
                               "use_global_device_ids}> : (tensor<1xi32>) -> tensor<2xi32>\n"),
                     4, 2, flat_want, 2);
    /* collective_broadcast over partitions (a channel), group [1, 0]: partition 1's value */
    static const int64_t bc_want[] = {1, 1, 1, 1, 11, 11, 11, 11};
    check_per_device(GRID_MAIN("  %b = \"stablehlo.collective_broadcast\"(%v) <{channel_handle = "
                               "#stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = "
                               "dense<[[1, 0]]> : tensor<1x2xi64>}> : (tensor<1xi32>) -> "
                               "tensor<1xi32>\n"
                               "  %out = stablehlo.concatenate %b, %b, dim = 0 : (tensor<1xi32>, "
                               "tensor<1xi32>) -> tensor<2xi32>\n"),
                     4, 2, bc_want, 2);
    /* the device count must be the grid's */
    sp_module *m = plan(xr, true);
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    cm_error err;
    cm_error_clear(&err);
    ex_exec_opts o = {.n_devices = 2, .iters = 1};
    assert_int_equal(ex_exec_run(m, &o, NULL, 0, &res, &n_res, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "a program of 2 replicas x 2 partitions runs on 4 devices"));
    assert_string_equal(err.path, "3:3");
    sp_module_destroy(m);
}

static void test_ex_spmd_per_process_main_checked_against_the_interpreter(void **state)
{
    (void)state;
    const char *sum =
        GRID_MAIN("  %a = \"stablehlo.all_reduce\"(%v) <{replica_groups = dense<[[0, 1]]> : "
                  "tensor<1x2xi64>}> " ADD("i32") " : (tensor<1xi32>) -> tensor<1xi32>\n"
                                                  "  %out = stablehlo.concatenate %a, %v, dim = 0 "
                                                  ": (tensor<1xi32>, tensor<1xi32>) -> "
                                                  "tensor<2xi32>\n");
    const char *max = GRID_MAIN(
        "  %a = \"stablehlo.all_reduce\"(%v) <{replica_groups = dense<[[0, 1]]> : "
        "tensor<1x2xi64>}> ({\n^bb0(%a0: tensor<i32>, %b0: tensor<i32>):\n"
        "  %m = stablehlo.maximum %a0, %b0 : tensor<i32>\n  stablehlo.return %m : tensor<i32>\n})"
        " : (tensor<1xi32>) -> tensor<1xi32>\n"
        "  %out = stablehlo.concatenate %a, %v, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> "
        "tensor<2xi32>\n");
    ex_check_opts o = {.iters = 1, .seed = 1};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    sp_module *part = plan(sum, true), *ref = plan(sum, false);
    assert_int_equal(ex_check_modules(part, ref, &o, &r, &err), CM_OK);
    assert_true(r.mm.match);
    assert_int_equal(r.n_devices, 4);
    sp_module_destroy(part);
    part = plan(max, true);
    /* max and sum differ where the other replica holds more than 0: partition
     * 0 sums 0 + 10 = 10 = max; partition 1: 1 + 11 = 12, max 11 */
    assert_int_equal(ex_check_modules(part, ref, &o, &r, &err), CM_OK);
    assert_false(r.mm.match);
    assert_int_equal(r.mm.result, 2);
    assert_true(r.mm.expected == 12.0 && r.mm.got == 11.0);
    assert_non_null(strstr(r.mm.where, "on device 1 (replica 0, partition 1)"));
    sp_module_destroy(part);
    sp_module_destroy(ref);
}

/* The OOM loop (STYLE.md) over a per-process main's check against the
 * interpreter, with a body the interpreter folds on the workers: every
 * allocation of the executor's and the interpreter's runs fails in turn. */
typedef struct oom_ctx {
    sp_module *part, *ref;
    ex_report r;
} oom_ctx;

static const char *oom_text =
    GRID_MAIN("  %a = \"stablehlo.all_reduce\"(%v) <{replica_groups = dense<[[0, 1]]> : "
              "tensor<1x2xi64>}> ({\n^bb0(%a0: tensor<i32>, %b0: tensor<i32>):\n"
              "  %lt = stablehlo.compare LT, %a0, %b0 : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
              "  %m = stablehlo.select %lt, %a0, %b0 : tensor<i1>, tensor<i32>\n"
              "  stablehlo.return %m : tensor<i32>\n}) : (tensor<1xi32>) -> tensor<1xi32>\n"
              "  %out = stablehlo.concatenate %a, %v, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> "
              "tensor<2xi32>\n");

static void oom_setup(void *p)
{
    oom_ctx *c = p;
    c->part = plan(oom_text, true);
    c->ref = plan(oom_text, false);
}

static cm_status oom_run(void *p)
{
    oom_ctx *c = p;
    ex_check_opts o = {.iters = 1, .seed = 1};
    cm_error err;
    cm_error_clear(&err);
    return ex_check_modules(c->part, c->ref, &o, &c->r, &err);
}

static void oom_done(void *p, cm_status st)
{
    oom_ctx *c = p;
    if (st == CM_OK) {
        assert_true(c->r.mm.match);
        assert_int_equal(c->r.ref_processes, 4);
    }
    sp_module_destroy(c->part);
    sp_module_destroy(c->ref);
}

static void test_ex_spmd_per_process_check_out_of_memory(void **state)
{
    (void)state;
    oom_ctx c;
    memset(&c, 0, sizeof c);
    tu_oom t = {oom_setup, oom_run, oom_done};
    assert_true(tu_oom_loop(&t, &c, 20000) > 0);
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
        cmocka_unit_test(test_ex_spmd_body_folds_in_group_order),
        cmocka_unit_test(test_ex_spmd_replicas_and_partitions_grid),
        cmocka_unit_test(test_ex_spmd_per_process_main_checked_against_the_interpreter),
        cmocka_unit_test(test_ex_spmd_per_process_check_out_of_memory),
    };
    return cmocka_run_group_tests_name("ex_spmd", tests, NULL, NULL);
}
