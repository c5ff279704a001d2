/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_rules: rules derived for small MLIR modules and
 * compared as Shardy text, custom-call rules (existing attribute, user rules
 * in einsum and text form, the blocking fallback with its warning), bad
 * attributes, the populate pass and an OOM loop; the op traits (sp_ops.h)
 * and the typed attribute accessors (sp_attrs.h) the rules read through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_attrs.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_rules.h"
#include "sp_shard.h"
#include "sp_diag.h"
#include "sp_mlir.h"
#include "tu_oom.h"

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

/* The n-th (0-based) op named name, in creation order. */
static uint32_t find_op(const sp_module *m, const char *name, uint32_t n)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (strcmp(m->ops[i].name, name) == 0 && n-- == 0) {
            return i;
        }
    }
    fail_msg("no op %s", name);
    return SP_NONE;
}

/* Derives the rule of the first op named `name` and compares its text. */
static void check_rule_opts(const char *mlir, const char *name, const sp_rule_opts *opts,
                            const char *want)
{
    sp_module *m = read_module(mlir);
    cm_error err;
    cm_error_clear(&err);
    sp_rule *r = NULL;
    cm_status st = sp_rule_for_op(m, find_op(m, name, 0), opts, &r, NULL, &err);
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("sp_rule_for_op(%s): %s: %s", name, err.path, err.msg);
    }
    if (want == NULL) {
        assert_null(r);
    } else {
        assert_non_null(r);
        cm_buf b;
        cm_buf_init(&b);
        sp_rule_print(r, &b);
        assert_false(b.oom);
        if (strcmp(b.data, want) != 0) {
            char got[1024];
            snprintf(got, sizeof got, "%s", b.data);
            cm_buf_fini(&b);
            sp_module_destroy(m);
            fail_msg("%s:\n  got  %s\n  want %s", name, got, want);
        }
        cm_buf_fini(&b);
    }
    sp_module_destroy(m);
}

static void check_rule(const char *mlir, const char *name, const char *want)
{
    check_rule_opts(mlir, name, NULL, want);
}

/* ---- standard ops ------------------------------------------------------------ */

static void test_sp_rule_for_op_pointwise_and_scalar(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<2x1x4xf32>) -> tensor<2x1x4xf32> {\n"
               "  %0 = stablehlo.add %a, %a : tensor<2x1x4xf32>\n"
               "  return %0 : tensor<2x1x4xf32>\n}\n",
               "stablehlo.add", "<([i, j, k], [i, j, k])->([i, j, k]) {i=2, j=1, k=4}>");
    check_rule("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n"
               "  %0 = stablehlo.negate %a : tensor<f32>\n"
               "  return %0 : tensor<f32>\n}\n",
               "stablehlo.negate", "<([])->([])>");
    check_rule("func.func @f(%p: tensor<i1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
               "  %0 = stablehlo.select %p, %a, %a : tensor<i1>, tensor<4x8xf32>\n"
               "  return %0 : tensor<4x8xf32>\n}\n",
               "stablehlo.select", "<([], [i, j], [i, j])->([i, j]) {i=4, j=8}>");
}

/* mhlo.copy, which Shardy's registry lacks, is pointwise as XLA registers it */
static void test_sp_rule_for_op_mhlo_copy_is_pointwise(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<8x2xi32>) -> tensor<8x2xi32> {\n"
               "  %0 = mhlo.copy %a : tensor<8x2xi32>\n"
               "  return %0 : tensor<8x2xi32>\n}\n",
               "mhlo.copy", "<([i, j])->([i, j]) {i=8, j=2}>");
    check_rule("func.func @f(%a: tensor<f32>) -> tensor<f32> {\n"
               "  %0 = mhlo.copy %a : tensor<f32>\n"
               "  return %0 : tensor<f32>\n}\n",
               "mhlo.copy", "<([])->([])>");
}

static void test_sp_rule_for_op_dot_general_mixed_dims(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<2x4x8x4x64x32xf32>, %b: tensor<16x32x64x4x2xf32>) -> "
               "tensor<2x4x8x4x16xf32> {\n"
               "  %0 = stablehlo.dot_general %a, %b, batching_dims = [0, 1] x [4, 3], "
               "contracting_dims = [5, 4] x [1, 2] : (tensor<2x4x8x4x64x32xf32>, "
               "tensor<16x32x64x4x2xf32>) -> tensor<2x4x8x4x16xf32>\n"
               "  return %0 : tensor<2x4x8x4x16xf32>\n}\n",
               "stablehlo.dot_general",
               "<([i, j, k, l, o, n], [m, n, o, j, i])->([i, j, k, l, m]) {i=2, j=4, k=8, l=4, "
               "m=16, n=32, o=64} reduction={n, o}>");
}

static void test_sp_rule_for_op_reshape_compound_factors(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<6x4xf32>) -> tensor<4x6xf32> {\n"
               "  %0 = stablehlo.reshape %a : (tensor<6x4xf32>) -> tensor<4x6xf32>\n"
               "  return %0 : tensor<4x6xf32>\n}\n",
               "stablehlo.reshape", "<([ij, mn])->([ik, ln]) {i=2, j=3, k=2, l=3, m=2, n=2}>");
    check_rule("func.func @f(%a: tensor<4x7x5x8xf32>) -> tensor<14x10x8xf32> {\n"
               "  %0 = stablehlo.reshape %a : (tensor<4x7x5x8xf32>) -> tensor<14x10x8xf32>\n"
               "  return %0 : tensor<14x10x8xf32>\n}\n",
               "stablehlo.reshape",
               "<([ij, l, n, o])->([ik, mn, o]) {i=2, j=2, k=7, l=7, m=2, n=5, o=8}>");
    check_rule("func.func @f(%a: tensor<32xf32>) -> tensor<8x1x4xf32> {\n"
               "  %0 = stablehlo.reshape %a : (tensor<32xf32>) -> tensor<8x1x4xf32>\n"
               "  return %0 : tensor<8x1x4xf32>\n}\n",
               "stablehlo.reshape", "<([ik])->([i, j, k]) {i=8, j=1, k=4}>");
}

static void test_sp_rule_for_op_reshape_zero_dim_has_no_rule(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<4x0xf32>) -> tensor<0x8xf32> {\n"
               "  %0 = stablehlo.reshape %a : (tensor<4x0xf32>) -> tensor<0x8xf32>\n"
               "  return %0 : tensor<0x8xf32>\n}\n",
               "stablehlo.reshape", NULL);
}

static void test_sp_rule_for_op_data_flow_and_func_ops_have_no_rule(void **state)
{
    (void)state;
    const char *mlir = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                       "  %0 = stablehlo.optimization_barrier %a : tensor<4xf32>\n"
                       "  return %0 : tensor<4xf32>\n}\n";
    check_rule(mlir, "stablehlo.optimization_barrier", NULL);
    check_rule(mlir, "func.func", NULL);
    check_rule(mlir, "func.return", NULL);
}

static void test_sp_rule_for_op_conv_feature_groups(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<8x224x224x192xf32>, %k: tensor<3x3x12x256xf32>) -> "
               "tensor<8x112x112x256xf32> {\n"
               "  %0 = stablehlo.convolution(%a, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
               "o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[0, 1], [0, 1]]} "
               "{batch_group_count = 1 : i64, feature_group_count = 16 : i64} : "
               "(tensor<8x224x224x192xf32>, tensor<3x3x12x256xf32>) -> "
               "tensor<8x112x112x256xf32>\n"
               "  return %0 : tensor<8x112x112x256xf32>\n}\n",
               "stablehlo.convolution",
               "<([i, jk, lm, no], [k, m, o, np])->([i, j, l, np]) {i=8, j=112, k=2, l=112, "
               "m=2, n=16, o=12, p=16} reduction={k, m, o} permutation={j, l}>");
}

static void test_sp_rule_for_op_gather(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<3x4x2x5xf32>, %i: tensor<2x3x3xi64>) -> "
               "tensor<2x3x2x2x1xf32> {\n"
               "  %0 = \"stablehlo.gather\"(%a, %i) {dimension_numbers = #stablehlo.gather<"
               "offset_dims = [2, 3, 4], collapsed_slice_dims = [0], start_index_map = [1, 0, "
               "3], index_vector_dim = 2>, slice_sizes = array<i64: 1, 2, 2, 1>, "
               "indices_are_sorted = false} : (tensor<3x4x2x5xf32>, tensor<2x3x3xi64>) -> "
               "tensor<2x3x2x2x1xf32>\n"
               "  return %0 : tensor<2x3x2x2x1xf32>\n}\n",
               "stablehlo.gather",
               "<([o, k, l, m], [i, j, p])->([i, j, k, l, n]) {i=2, j=3, k=4, l=2, m=5, n=1, "
               "o=3, p=3} reduction={m, o} need_replication={k, n, p} blocked_propagation={k}>");
}

static void test_sp_rule_for_op_pad_conservative(void **state)
{
    (void)state;
    const char *mlir = "func.func @f(%a: tensor<28x28x16xf32>, %p: tensor<f32>) -> "
                       "tensor<30x28x16xf32> {\n"
                       "  %0 = stablehlo.pad %a, %p, low = [1, 1, 0], high = [1, -1, 0], "
                       "interior = [0, 0, 0] : (tensor<28x28x16xf32>, tensor<f32>) -> "
                       "tensor<30x28x16xf32>\n"
                       "  return %0 : tensor<30x28x16xf32>\n}\n";
    /* as Shardy's rule: a dimension the padding leaves the same size (here
     * shifted by one) passes through; a resized one is a permutation factor
     * of the operand's size, blocked with conservative propagation */
    check_rule(mlir, "stablehlo.pad",
               "<([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i}>");
    sp_rule_opts o = {.conservative = true};
    check_rule_opts(mlir, "stablehlo.pad", &o,
                    "<([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i} "
                    "blocked_propagation={i}>");
}

/* ---- custom calls ------------------------------------------------------------ */

static const char *const custom_mlir =
    "func.func @f(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>) -> tensor<8x16xf32> {\n"
    "  %0 = stablehlo.custom_call @my_matmul(%a, %b) : (tensor<8x32xf32>, tensor<32x16xf32>) "
    "-> tensor<8x16xf32>\n"
    "  return %0 : tensor<8x16xf32>\n}\n";

static void test_sp_rule_for_op_custom_call_user_einsum_rule(void **state)
{
    (void)state;
    sp_custom_rules *cr = sp_custom_rules_create();
    assert_non_null(cr);
    const char *red[] = {"j"};
    sp_einsum_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.reduction = red;
    eo.n_reduction = 1;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_einsum(cr, "my_matmul", "i j, j k -> i k", &eo, &err),
                     CM_OK);
    sp_rule_opts o = {.custom = cr};
    sp_diags d;
    sp_diags_init(&d);
    sp_module *m = read_module(custom_mlir);
    sp_rule *r = NULL;
    assert_int_equal(sp_rule_for_op(m, find_op(m, "stablehlo.custom_call", 0), &o, &r, &d, &err),
                     CM_OK);
    assert_non_null(r);
    assert_int_equal(d.n, 0);
    cm_buf b;
    cm_buf_init(&b);
    sp_rule_print(r, &b);
    assert_string_equal(b.data, "<([i, j], [j, k])->([i, k]) {i=8, j=32, k=16} reduction={j}, "
                                "custom>");
    cm_buf_fini(&b);
    sp_module_destroy(m);

    /* a rule whose shapes do not fit is an error naming the op */
    m = read_module("func.func @f(%a: tensor<8x32xf32>) -> tensor<8xf32> {\n"
                    "  %0 = stablehlo.custom_call @my_matmul(%a) : (tensor<8x32xf32>) -> "
                    "tensor<8xf32>\n"
                    "  return %0 : tensor<8xf32>\n}\n");
    cm_error_clear(&err);
    assert_int_equal(sp_rule_for_op(m, find_op(m, "stablehlo.custom_call", 0), &o, &r, &d, &err),
                     CM_EINVAL);
    assert_null(r);
    assert_true(err.msg[0] != '\0');
    sp_module_destroy(m);
    sp_diags_fini(&d);

    assert_true(sp_custom_rules_remove(cr, "my_matmul"));
    assert_false(sp_custom_rules_remove(cr, "my_matmul"));
    sp_custom_rules_destroy(cr);
}

static void test_sp_custom_rules_put_einsum_rejects_bad_syntax(void **state)
{
    (void)state;
    sp_custom_rules *cr = sp_custom_rules_create();
    assert_non_null(cr);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_einsum(cr, "t", "i j -> i -> j", NULL, &err), CM_EINVAL);
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_einsum(cr, "t", "i j; k -> i", NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "col 4");
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_einsum(cr, "t", "((i j)) -> i", NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "col 2");
    sp_custom_rules_destroy(cr);
    sp_custom_rules_destroy(NULL);
}

static void test_sp_rule_for_op_custom_call_user_text_rule(void **state)
{
    (void)state;
    sp_custom_rules *cr = sp_custom_rules_create();
    assert_non_null(cr);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_text(cr, "my_matmul",
                                              "#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) "
                                              "{i=8, j=16, k=32} reduction={k}>",
                                              &err),
                     CM_OK);
    sp_rule_opts o = {.custom = cr};
    check_rule_opts(custom_mlir, "stablehlo.custom_call", &o,
                    "<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}>");
    cm_error_clear(&err);
    assert_int_equal(sp_custom_rules_put_text(cr, "x", "<([i])->([i]) {i=2}> junk", &err),
                     CM_EINVAL);
    sp_custom_rules_destroy(cr);
}

/* An unknown custom call gets no rule (Shardy's registry returns none) and
 * Shardy's warning, once per diagnostics list; known callbacks and kernels
 * get no rule and no warning; XLA's SPMD permutes and the pointwise targets
 * get the pointwise rule. */
static void test_sp_rule_for_op_custom_call_targets(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%a: tensor<4x2xf32>) -> tensor<4x2xf32> {\n"
        "  %0 = stablehlo.custom_call @foo(%a) : (tensor<4x2xf32>) -> tensor<4x2xf32>\n"
        "  %1 = stablehlo.custom_call @bar(%0) : (tensor<4x2xf32>) -> tensor<4x2xf32>\n"
        "  %2 = stablehlo.custom_call @tpu_custom_call(%1) : (tensor<4x2xf32>) -> "
        "tensor<4x2xf32>\n"
        "  %3 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%2) : (tensor<4x2xf32>) -> "
        "tensor<4x2xf32>\n"
        "  %4 = stablehlo.custom_call @_SPMDInternalOp_RotateRight(%3) : (tensor<4x2xf32>) -> "
        "tensor<4x2xf32>\n"
        "  %5 = stablehlo.custom_call @annotate_device_placement(%4) : (tensor<4x2xf32>) -> "
        "tensor<4x2xf32>\n"
        "  return %5 : tensor<4x2xf32>\n}\n");
    sp_diags d;
    sp_diags_init(&d);
    cm_error err;
    cm_error_clear(&err);
    for (uint32_t k = 0; k < 6; k++) {
        sp_rule *r = NULL;
        uint32_t op = find_op(m, "stablehlo.custom_call", k);
        assert_int_equal(sp_rule_for_op(m, op, NULL, &r, &d, &err), CM_OK);
        if (k < 4) {
            assert_null(r);
        } else {
            assert_non_null(r);
            cm_buf b;
            cm_buf_init(&b);
            sp_rule_print(r, &b);
            assert_string_equal(b.data, "<([i, j])->([i, j]) {i=4, j=2}>");
            cm_buf_fini(&b);
        }
    }
    assert_int_equal(d.n, 1); /* @foo only: @bar is unknown too, but Shardy warns once */
    assert_int_equal(d.items[0].sev, SP_DIAG_WARNING);
    assert_int_equal(d.items[0].op, find_op(m, "stablehlo.custom_call", 0));
    assert_string_equal(d.items[0].msg,
                        "custom call @foo is unknown to SDY sharding rule registry");
    /* a new list (another plan) warns again */
    sp_diags_fini(&d);
    sp_diags_init(&d);
    sp_rule *r = NULL;
    assert_int_equal(sp_rule_for_op(m, find_op(m, "stablehlo.custom_call", 1), NULL, &r, &d, &err),
                     CM_OK);
    assert_null(r);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.items[0].msg,
                        "custom call @bar is unknown to SDY sharding rule registry");
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

/* Ops Shardy's registry has no case for get no rule and its warning, once;
 * iota gets no rule and no warning. */
static void test_sp_rule_for_op_unknown_ops(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%x: tensor<8x4xf32>, %s: tensor<4xf32>) -> tensor<8x4xi32> {\n"
        "  %0:3 = \"stablehlo.batch_norm_training\"(%x, %s, %s) {epsilon = 1.0e-3 : f32, "
        "feature_index = 1 : i64} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> "
        "(tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)\n"
        "  %1 = stablehlo.replica_id : tensor<ui32>\n"
        "  %2 = stablehlo.iota dim = 0 : tensor<8x4xi32>\n"
        "  return %2 : tensor<8x4xi32>\n}\n");
    sp_diags d;
    sp_diags_init(&d);
    cm_error err;
    cm_error_clear(&err);
    const char *names[] = {"stablehlo.batch_norm_training", "stablehlo.replica_id",
                           "stablehlo.iota"};
    for (uint32_t k = 0; k < 3; k++) {
        sp_rule *r = NULL;
        assert_int_equal(sp_rule_for_op(m, find_op(m, names[k], 0), NULL, &r, &d, &err), CM_OK);
        assert_null(r);
    }
    assert_int_equal(d.n, 1);
    assert_string_equal(d.items[0].msg,
                        "op 'stablehlo.batch_norm_training' is unknown to SDY sharding rule "
                        "registry");
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static void test_sp_rule_for_op_existing_rule_wins(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<4x2xf32>) -> tensor<2x4xf32> {\n"
               "  %0 = stablehlo.custom_call @foo(%a) {sdy.sharding_rule = "
               "#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}, custom>} : "
               "(tensor<4x2xf32>) -> tensor<2x4xf32>\n"
               "  return %0 : tensor<2x4xf32>\n}\n",
               "stablehlo.custom_call", "<([i, j])->([j, i]) {i=4, j=2}, custom>");
}

static void test_sp_rule_for_op_known_custom_calls(void **state)
{
    (void)state;
    check_rule("func.func @f(%a: tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi32>) {\n"
               "  %0:2 = stablehlo.custom_call @mhlo.topk(%a) {mhlo.version = 1 : i64} : "
               "(tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)\n"
               "  return %0#0, %0#1 : tensor<16x2xf32>, tensor<16x2xi32>\n}\n",
               "stablehlo.custom_call",
               "<([i, j])->([i, j], [i, j]) {i=16, j=8} need_replication={j} "
               "blocked_propagation={j}>");
    check_rule("func.func @f(%a: tensor<8x5x3xf32>) -> (tensor<8x5x3xf32>, tensor<8x3xf32>) {\n"
               "  %0:2 = stablehlo.custom_call @Qr(%a) : (tensor<8x5x3xf32>) -> "
               "(tensor<8x5x3xf32>, tensor<8x3xf32>)\n"
               "  return %0#0, %0#1 : tensor<8x5x3xf32>, tensor<8x3xf32>\n}\n",
               "stablehlo.custom_call",
               "<([i, j, k])->([i, j, k], [i, l]) {i=8, j=5, k=3, l=3} need_replication={j, k, "
               "l}>");
}

/* ---- bad attributes ------------------------------------------------------------ */

static void expect_einval(sp_module *m, uint32_t op)
{
    cm_error err;
    cm_error_clear(&err);
    sp_rule *r = (sp_rule *)&err; /* must be reset */
    assert_int_equal(sp_rule_for_op(m, op, NULL, &r, NULL, &err), CM_EINVAL);
    assert_null(r);
    assert_int_equal(err.code, CM_EINVAL);
    char path[32];
    snprintf(path, sizeof path, "%u:%u", m->ops[op].line, m->ops[op].col);
    assert_string_equal(err.path, path);
    assert_true(strstr(err.msg, m->ops[op].name) != NULL);
}

static void test_sp_rule_for_op_bad_attributes_are_einval(void **state)
{
    (void)state;
    sp_module *m = read_module("func.func @f(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {\n"
                               "  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) "
                               "-> tensor<3x2xf32>\n"
                               "  return %0 : tensor<3x2xf32>\n}\n");
    uint32_t op = find_op(m, "stablehlo.transpose", 0);
    assert_int_equal(m->ops[op].line, 2);
    /* out of range */
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE_ARRAY);
    static int64_t bad_perm[] = {1, 7};
    a->u.darr.elem = "i64";
    a->u.darr.v = bad_perm;
    a->u.darr.n = 2;
    assert_int_equal(sp_op_set_attr(m, op, "permutation", a), CM_OK);
    expect_einval(m, op);
    /* not integers */
    a = sp_attr_new(m, SP_ATTR_STRING);
    a->u.str.s = "x";
    a->u.str.len = 1;
    assert_int_equal(sp_op_set_attr(m, op, "permutation", a), CM_OK);
    expect_einval(m, op);
    /* missing */
    assert_true(sp_op_remove_attr(m, op, "permutation"));
    expect_einval(m, op);
    sp_module_destroy(m);

    m = read_module("func.func @f(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>) -> "
                    "tensor<8x16xf32> {\n"
                    "  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
                    "(tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>\n"
                    "  return %0 : tensor<8x16xf32>\n}\n");
    op = find_op(m, "stablehlo.dot_general", 0);
    a = sp_attr_new(m, SP_ATTR_INT);
    a->u.i.v = 3;
    assert_int_equal(sp_op_set_attr(m, op, "dot_dimension_numbers", a), CM_OK);
    expect_einval(m, op);
    sp_module_destroy(m);
}

/* ---- the pass ---------------------------------------------------------------------- */

static const char *const pass_mlir =
    "func.func @f(%a: tensor<4x8xf32>, %b: tensor<f32>) -> tensor<8xf32> {\n"
    "  %0 = stablehlo.multiply %a, %a {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], "
    "[i, j])->([i, j]) {i=4, j=8}, custom>} : tensor<4x8xf32>\n"
    "  %1 = stablehlo.reduce(%0 init: %b) applies stablehlo.add across dimensions = [0] : "
    "(tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>\n"
    "  %2 = stablehlo.custom_call @unknown(%1) : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %2 : tensor<8xf32>\n}\n";

static void test_sp_pass_populate_rules_sets_missing_rules(void **state)
{
    (void)state;
    sp_module *m = read_module(pass_mlir);
    sp_diags d;
    sp_diags_init(&d);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_pass_populate_rules(m, NULL, &d, &err), CM_OK);
    const sp_attr *a = sp_op_attr(m, find_op(m, "stablehlo.multiply", 0), "sdy.sharding_rule");
    assert_non_null(a);
    assert_true(a->u.rule->is_custom); /* kept as it was */
    a = sp_op_attr(m, find_op(m, "stablehlo.reduce", 0), "sdy.sharding_rule");
    assert_non_null(a);
    assert_int_equal(a->kind, SP_ATTR_RULE);
    cm_buf b;
    cm_buf_init(&b);
    sp_rule_print(a->u.rule, &b);
    assert_string_equal(b.data, "<([i, j], [])->([j]) {i=4, j=8} reduction={i}>");
    cm_buf_fini(&b);
    /* the unknown custom call: no rule, Shardy's warning */
    assert_null(sp_op_attr(m, find_op(m, "stablehlo.custom_call", 0), "sdy.sharding_rule"));
    assert_null(sp_op_attr(m, find_op(m, "func.func", 0), "sdy.sharding_rule"));
    assert_null(sp_op_attr(m, find_op(m, "func.return", 0), "sdy.sharding_rule"));
    assert_int_equal(d.n, 1);
    assert_int_equal(d.items[0].op, find_op(m, "stablehlo.custom_call", 0));
    /* a second run changes nothing and, with the same list, warns no more */
    assert_int_equal(sp_pass_populate_rules(m, NULL, &d, &err), CM_OK);
    assert_int_equal(d.n, 1);
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static const char *const many_ops_mlir =
    "func.func @f(%a: tensor<6x4xf32>, %k: tensor<3x3x4x8xf32>, %x: tensor<2x8x8x4xf32>, "
    "%o: tensor<3x4x2xf32>, %i: tensor<2x3x2xi64>, %u: tensor<2x3x2x2xf32>) -> tensor<4x6xf32> {\n"
    "  %0 = stablehlo.reshape %a : (tensor<6x4xf32>) -> tensor<4x6xf32>\n"
    "  %1 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, "
    "f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, "
    "feature_group_count = 1 : i64} : (tensor<2x8x8x4xf32>, tensor<3x3x4x8xf32>) -> "
    "tensor<2x8x8x8xf32>\n"
    "  %2 = \"stablehlo.scatter\"(%o, %i, %u) ({\n"
    "  ^bb0(%p: tensor<f32>, %q: tensor<f32>):\n"
    "    %s = stablehlo.add %p, %q : tensor<f32>\n"
    "    stablehlo.return %s : tensor<f32>\n"
    "  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [2, 3], "
    "inserted_window_dims = [0], scatter_dims_to_operand_dims = [1, 0], index_vector_dim = 2>} "
    ": (tensor<3x4x2xf32>, tensor<2x3x2xi64>, tensor<2x3x2x2xf32>) -> tensor<3x4x2xf32>\n"
    "  return %0 : tensor<4x6xf32>\n}\n";

static void test_sp_rule_for_op_nested_and_windowed_ops(void **state)
{
    (void)state;
    check_rule(many_ops_mlir, "stablehlo.convolution",
               "<([i, j, l, n], [k, m, n, o])->([i, j, l, o]) {i=2, j=8, k=1, l=8, m=1, n=4, o=8} "
               "reduction={k, m, n} permutation={j, l}>");
    check_rule(many_ops_mlir, "stablehlo.scatter",
               "<([n, k, m], [i, j, o], [i, j, l, m])->([n, k, m]) {i=2, j=3, k=4, l=2, m=2, n=3, "
               "o=2} reduction={i, j} need_replication={k, l, o}>");
    /* the add inside the scatter body gets a (scalar) rule too */
    check_rule(many_ops_mlir, "stablehlo.add", "<([], [])->([])>");
}

/* The OOM loops' attempts (tests/unit/tu_oom.h): the rule pass on a module
 * read afresh each time, with a custom rule (cr) or without. */
typedef struct rules_oom {
    const char *mlir;
    sp_module *m;
    sp_custom_rules *cr;
    sp_diags d;
} rules_oom;

static void rules_oom_setup(void *ctx)
{
    rules_oom *t = ctx;
    t->m = read_module(t->mlir);
    sp_diags_init(&t->d);
}

static void rules_oom_done(void *ctx, cm_status st)
{
    rules_oom *t = ctx;
    if (st == CM_OK && t->cr == NULL) {
        assert_non_null(
            sp_op_attr(t->m, find_op(t->m, "stablehlo.scatter", 0), "sdy.sharding_rule"));
    }
    sp_diags_fini(&t->d);
    sp_custom_rules_destroy(t->cr);
    t->cr = NULL;
    sp_module_destroy(t->m);
}

static cm_status rules_oom_run_plain(void *ctx)
{
    rules_oom *t = ctx;
    cm_error err;
    cm_error_clear(&err);
    return sp_pass_populate_rules(t->m, NULL, NULL, &err);
}

/* ---- op traits and attribute accessors (sp_ops.h, sp_attrs.h) ---------------------------- */

static void test_sp_op_traits_answer_each_question(void **state)
{
    (void)state;
    assert_true(sp_op_is_elementwise(SP_OP_ADD));
    assert_false(sp_op_is_elementwise(SP_OP_BITCAST_CONVERT));
    assert_true(sp_op_is_collective(SP_OP_ALL_REDUCE));
    assert_false(sp_op_is_collective(SP_OP_SDY_ALL_REDUCE));
    assert_true(sp_op_is_sdy_collective(SP_OP_SDY_RESHARD));
    assert_false(sp_op_is_sdy_collective(SP_OP_SDY_SHARDING_CONSTRAINT));
    assert_true(sp_op_is_data_flow(SP_OP_WHILE));
    assert_true(sp_op_is_data_flow(SP_OP_OPTIMIZATION_BARRIER));
    assert_false(sp_op_is_data_flow(SP_OP_SDY_DATA_FLOW_EDGE));
    assert_true(sp_op_has_sharding_attr(SP_OP_SDY_RESHARD));
    assert_false(sp_op_has_sharding_attr(SP_OP_SDY_MANUAL_COMPUTATION));
    assert_true(sp_op_constrains_operands(SP_OP_SDY_MANUAL_COMPUTATION));
    assert_false(sp_op_constrains_operands(SP_OP_SDY_RESHARD));
    assert_int_equal(sp_op_traits(SP_OP_UNKNOWN), 0);
    assert_int_equal(sp_op_traits(SP_OP_COUNT_), 0);
}

static void test_sp_dot_dims_get_decodes_and_checks(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%a: tensor<4x8x16xf32>, %b: tensor<4x16x2xf32>) -> tensor<4x8x2xf32> {\n"
        "  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = "
        "[2] x [1] : (tensor<4x8x16xf32>, tensor<4x16x2xf32>) -> tensor<4x8x2xf32>\n"
        "  %1 = stablehlo.dot_general %a, %b, contracting_dims = [3] x [1] : "
        "(tensor<4x8x16xf32>, tensor<4x16x2xf32>) -> tensor<4x8x2xf32>\n"
        "  return %0 : tensor<4x8x2xf32>\n}\n");
    sp_dot_dims dd;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_dot_dims_get(m, find_op(m, "stablehlo.dot_general", 0), &dd, &err), CM_OK);
    assert_int_equal(dd.n_batch, 1);
    assert_int_equal(dd.n_contract, 1);
    assert_int_equal(dd.lhs_contract[0], 2);
    assert_int_equal(dd.rhs_contract[0], 1);
    uint32_t bad_op = find_op(m, "stablehlo.dot_general", 1);
    assert_int_equal(sp_dot_dims_get(m, bad_op, &dd, &err), CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "stablehlo.dot_general: lhs contracting dimension 3"));
    sp_module_destroy(m);
}

static void test_sp_gather_dims_get_needs_index_vector_dim(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%a: tensor<10x6xf32>, %i: tensor<4x1xi32>) -> tensor<4x6xf32> {\n"
        "  %0 = \"stablehlo.gather\"(%a, %i) {dimension_numbers = #stablehlo.gather<"
        "offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0]>, "
        "slice_sizes = array<i64: 1, 6>} : (tensor<10x6xf32>, tensor<4x1xi32>) -> "
        "tensor<4x6xf32>\n"
        "  return %0 : tensor<4x6xf32>\n}\n");
    sp_gather_dims g;
    cm_error err;
    cm_error_clear(&err);
    uint32_t op = find_op(m, "stablehlo.gather", 0);
    assert_int_equal(sp_gather_dims_get(m, op, &g, &err), CM_EINVAL);
    assert_false(g.decoded);
    assert_non_null(strstr(err.msg, "index_vector_dim"));
    int64_t ss[SP_MAX_RANK];
    uint32_t n = 0;
    assert_int_equal(sp_gather_slice_sizes_get(m, op, ss, &n, NULL), CM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ss[1], 6);
    sp_module_destroy(m);
}

static void test_sp_window_get_checks_lengths(void **state)
{
    (void)state;
    sp_module *m = read_module(
        "func.func @f(%a: tensor<4x4xf32>) -> tensor<2x4xf32> {\n"
        "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %0 = \"stablehlo.reduce_window\"(%a, %c) ({\n"
        "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
        "    %s = stablehlo.add %x, %y : tensor<f32>\n"
        "    stablehlo.return %s : tensor<f32>\n"
        "  }) {window_dimensions = array<i64: 2, 1>, window_strides = array<i64: 2>} : "
        "(tensor<4x4xf32>, tensor<f32>) -> tensor<2x4xf32>\n"
        "  return %0 : tensor<2x4xf32>\n}\n");
    sp_window w;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_window_get(m, find_op(m, "stablehlo.reduce_window", 0), &w, &err),
                     CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "window_strides has 1 entries, expected 2"));
    sp_module_destroy(m);
}

static void test_sp_pass_populate_rules_survives_oom_many_ops(void **state)
{
    (void)state;
    rules_oom t = {.mlir = many_ops_mlir};
    static const tu_oom loop = {rules_oom_setup, rules_oom_run_plain, rules_oom_done};
    tu_oom_loop(&loop, &t, 10000);
}

static void rules_oom_setup_custom(void *ctx)
{
    rules_oom *t = ctx;
    rules_oom_setup(t);
    t->cr = sp_custom_rules_create();
    assert_non_null(t->cr);
}

static cm_status rules_oom_run_custom(void *ctx)
{
    rules_oom *t = ctx;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_custom_rules_put_einsum(t->cr, "unknown", "i -> i", NULL, &err);
    sp_rule_opts o = {.custom = t->cr};
    return st == CM_OK ? sp_pass_populate_rules(t->m, &o, &t->d, &err) : st;
}

static void test_sp_pass_populate_rules_survives_oom(void **state)
{
    (void)state;
    rules_oom t = {.mlir = pass_mlir};
    static const tu_oom loop = {rules_oom_setup_custom, rules_oom_run_custom, rules_oom_done};
    assert_true(tu_oom_loop(&loop, &t, 10000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_op_traits_answer_each_question),
        cmocka_unit_test(test_sp_dot_dims_get_decodes_and_checks),
        cmocka_unit_test(test_sp_gather_dims_get_needs_index_vector_dim),
        cmocka_unit_test(test_sp_window_get_checks_lengths),
        cmocka_unit_test(test_sp_rule_for_op_pointwise_and_scalar),
        cmocka_unit_test(test_sp_rule_for_op_mhlo_copy_is_pointwise),
        cmocka_unit_test(test_sp_rule_for_op_dot_general_mixed_dims),
        cmocka_unit_test(test_sp_rule_for_op_reshape_compound_factors),
        cmocka_unit_test(test_sp_rule_for_op_reshape_zero_dim_has_no_rule),
        cmocka_unit_test(test_sp_rule_for_op_data_flow_and_func_ops_have_no_rule),
        cmocka_unit_test(test_sp_rule_for_op_conv_feature_groups),
        cmocka_unit_test(test_sp_rule_for_op_gather),
        cmocka_unit_test(test_sp_rule_for_op_pad_conservative),
        cmocka_unit_test(test_sp_rule_for_op_custom_call_user_einsum_rule),
        cmocka_unit_test(test_sp_custom_rules_put_einsum_rejects_bad_syntax),
        cmocka_unit_test(test_sp_rule_for_op_custom_call_user_text_rule),
        cmocka_unit_test(test_sp_rule_for_op_custom_call_targets),
        cmocka_unit_test(test_sp_rule_for_op_unknown_ops),
        cmocka_unit_test(test_sp_rule_for_op_existing_rule_wins),
        cmocka_unit_test(test_sp_rule_for_op_known_custom_calls),
        cmocka_unit_test(test_sp_rule_for_op_bad_attributes_are_einval),
        cmocka_unit_test(test_sp_pass_populate_rules_sets_missing_rules),
        cmocka_unit_test(test_sp_pass_populate_rules_survives_oom),
        cmocka_unit_test(test_sp_rule_for_op_nested_and_windowed_ops),
        cmocka_unit_test(test_sp_pass_populate_rules_survives_oom_many_ops),
    };
    return cmocka_run_group_tests_name("sp_rules", tests, NULL, NULL);
}
