/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_interp (the StableHLO interpreter behind
 * `shardplan interpret`): checks that hold and one that fails (counted and
 * reported at its op), regions evaluated as written (a reduce whose body is
 * not one op, a sort comparator), integer edge cases (division by zero,
 * shifts past the width, i4 wrap-around), interpreter.run_parallel over
 * 4 partitions with all_reduce, all_gather and collective_permute as JAX
 * lowers psum, all_gather and ppermute inside shard_map, replicas x
 * partitions grids, and clear errors: an op it cannot run (with its
 * position), an entry taking arguments, a collective a peer never reaches
 * (no hang), a recursive call, a value too large and a result that does
 * not fit its operands; the OOM loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "ex_interp.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "tu_oom.h"

/* Interprets text; *out_text (heap, free()) gets what it wrote. */
static cm_status interp(const char *text, ex_interp_report *r, cm_error *err, char **out_text)
{
    sp_module *m = NULL;
    cm_error_clear(err);
    if (sp_mlir_read(text, strlen(text), 0, &m, err) != CM_OK) {
        fail_msg("read: %s at %s", err->msg, err->path);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cm_status st = ex_interp_module(m, f, r, err);
    fclose(f);
    sp_module_destroy(m);
    if (out_text != NULL) {
        *out_text = buf;
    } else {
        free(buf);
    }
    return st;
}

static void test_ex_interp_module_checks_hold(void **state)
{
    (void)state;
    const char *text =
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>\n"
        "  %z = stablehlo.constant dense<0> : tensor<i32>\n"
        /* a body of two ops: sum of squares of the row */
        "  %s = stablehlo.reduce(%a init: %z) across dimensions = [1] : (tensor<2x3xi32>, "
        "tensor<i32>) -> tensor<2xi32>\n"
        "   reducer(%x: tensor<i32>, %y: tensor<i32>) {\n"
        "    %m = stablehlo.multiply %y, %y : tensor<i32>\n"
        "    %p = stablehlo.add %x, %m : tensor<i32>\n"
        "    stablehlo.return %p : tensor<i32>\n"
        "  }\n"
        "  check.expect_eq_const %s, dense<[14, 77]> : tensor<2xi32>\n"
        "  %v = stablehlo.constant dense<[3.0, 1.0, 2.0]> : tensor<3xf32>\n"
        "  %o = \"stablehlo.sort\"(%v) ({\n"
        "  ^bb0(%l: tensor<f32>, %r: tensor<f32>):\n"
        "    %c = stablehlo.compare GT, %l, %r : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }) {dimension = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>\n"
        "  check.expect_almost_eq_const %o, dense<[3.0, 2.0, 1.0]> : tensor<3xf32>\n"
        "  func.return\n"
        "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_OK);
    assert_int_equal(r.n_funcs, 1);
    assert_int_equal(r.n_checks, 2);
    assert_int_equal(r.n_failed, 0);
}

static void test_ex_interp_module_failed_check_is_reported(void **state)
{
    (void)state;
    const char *text = "func.func @f() {\n"
                       "  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi64>\n"
                       "  check.expect_eq_const %a, dense<[1, 3]> : tensor<2xi64>\n"
                       "  func.return\n"
                       "}\n";
    ex_interp_report r;
    cm_error err;
    char *out = NULL;
    assert_int_equal(interp(text, &r, &err, &out), CM_OK);
    assert_int_equal(r.n_checks, 1);
    assert_int_equal(r.n_failed, 1);
    assert_non_null(strstr(out, "3:3: check.expect_eq_const failed: element 1: got 2, expected 3"));
    free(out);
}

static void test_ex_interp_module_integer_edge_cases(void **state)
{
    (void)state;
    const char *text =
        "func.func @f() {\n"
        "  %a = stablehlo.constant dense<[7, -8, 5]> : tensor<3xi32>\n"
        "  %b = stablehlo.constant dense<[0, -1, 2]> : tensor<3xi32>\n"
        "  %d = stablehlo.divide %a, %b : tensor<3xi32>\n"
        "  check.expect_eq_const %d, dense<[-1, 8, 2]> : tensor<3xi32>\n"
        "  %r = stablehlo.remainder %a, %b : tensor<3xi32>\n"
        "  check.expect_eq_const %r, dense<[7, 0, 1]> : tensor<3xi32>\n"
        "  %s = stablehlo.constant dense<[33, 1, 31]> : tensor<3xi32>\n"
        "  %l = stablehlo.shift_left %a, %s : tensor<3xi32>\n"
        "  check.expect_eq_const %l, dense<[0, -16, -2147483648]> : tensor<3xi32>\n"
        "  %x = stablehlo.constant dense<[7, -8]> : tensor<2xi4>\n"
        "  %y = stablehlo.constant dense<[1, -1]> : tensor<2xi4>\n"
        "  %w = stablehlo.add %x, %y : tensor<2xi4>\n"
        "  check.expect_eq_const %w, dense<[-8, 7]> : tensor<2xi4>\n"
        "  func.return\n"
        "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_OK);
    assert_int_equal(r.n_checks, 4);
    assert_int_equal(r.n_failed, 0);
}

/* psum, all_gather and ppermute over 4 partitions, as JAX lowers them in a
 * shard_map body (channel handles, use_global_device_ids). */
static void test_ex_interp_run_parallel_collectives(void **state)
{
    (void)state;
    const char *text =
        "func.func @body(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<8xf32>, tensor<2xf32>) {\n"
        "  %s = \"stablehlo.all_reduce\"(%x) <{channel_handle = #stablehlo.channel_handle<handle "
        "= 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, "
        "use_global_device_ids}> ({\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %c = stablehlo.add %a, %b : tensor<f32>\n"
        "    stablehlo.return %c : tensor<f32>\n"
        "  }) : (tensor<2xf32>) -> tensor<2xf32>\n"
        "  %g = \"stablehlo.all_gather\"(%x) <{all_gather_dim = 0 : i64, channel_handle = "
        "#stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, "
        "3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<2xf32>) -> tensor<8xf32>\n"
        "  %p = \"stablehlo.collective_permute\"(%x) <{channel_handle = "
        "#stablehlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<[[0, 1], "
        "[1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>\n"
        "  return %s, %g, %p : tensor<2xf32>, tensor<8xf32>, tensor<2xf32>\n"
        "}\n"
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
        "  %b = stablehlo.constant dense<[3.0, 4.0]> : tensor<2xf32>\n"
        "  %c = stablehlo.constant dense<[5.0, 6.0]> : tensor<2xf32>\n"
        "  %d = stablehlo.constant dense<[7.0, 8.0]> : tensor<2xf32>\n"
        "  %r:12 = \"interpreter.run_parallel\"(%a, %b, %c, %d) {programs = [[@body, @body, "
        "@body, @body]]} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> "
        "(tensor<2xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, tensor<8xf32>, "
        "tensor<2xf32>, tensor<2xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, "
        "tensor<8xf32>, tensor<2xf32>)\n"
        "  check.expect_eq_const %r#0, dense<[16.0, 20.0]> : tensor<2xf32>\n"
        "  check.expect_eq_const %r#9, dense<[16.0, 20.0]> : tensor<2xf32>\n"
        "  check.expect_eq_const %r#4, dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : "
        "tensor<8xf32>\n"
        "  check.expect_eq_const %r#2, dense<[7.0, 8.0]> : tensor<2xf32>\n"
        "  check.expect_eq_const %r#5, dense<[1.0, 2.0]> : tensor<2xf32>\n"
        "  func.return\n"
        "}\n";
    ex_interp_report r;
    cm_error err;
    cm_status st = interp(text, &r, &err, NULL);
    if (st != CM_OK) {
        fail_msg("%s at %s", err.msg, err.path);
    }
    assert_int_equal(r.n_checks, 5);
    assert_int_equal(r.n_failed, 0);
}

/* programs = [[@f], [@f]]: two replicas; without a channel the groups are
 * replica ids and replica_id tells them apart. */
static void test_ex_interp_run_parallel_replicas(void **state)
{
    (void)state;
    const char *text =
        "func.func @f(%x: tensor<i64>) -> tensor<i64> {\n"
        "  %id = stablehlo.replica_id : tensor<ui32>\n"
        "  %i = stablehlo.convert %id : (tensor<ui32>) -> tensor<i64>\n"
        "  %y = stablehlo.multiply %x, %i : tensor<i64>\n"
        "  %s = \"stablehlo.all_reduce\"(%y) <{replica_groups = dense<[[0, 1]]> : "
        "tensor<1x2xi64>}> ({\n"
        "  ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
        "    %c = stablehlo.maximum %a, %b : tensor<i64>\n"
        "    stablehlo.return %c : tensor<i64>\n"
        "  }) : (tensor<i64>) -> tensor<i64>\n"
        "  return %s : tensor<i64>\n"
        "}\n"
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<5> : tensor<i64>\n"
        "  %r:2 = \"interpreter.run_parallel\"(%a, %a) {programs = [[@f], [@f]]} : "
        "(tensor<i64>, tensor<i64>) -> (tensor<i64>, tensor<i64>)\n"
        "  check.expect_eq_const %r#0, dense<5> : tensor<i64>\n"
        "  check.expect_eq_const %r#1, dense<5> : tensor<i64>\n"
        "  func.return\n"
        "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_OK);
    assert_int_equal(r.n_checks, 2);
    assert_int_equal(r.n_failed, 0);
}

static void test_ex_interp_module_rejects_unknown_op(void **state)
{
    (void)state;
    const char *text = "func.func @main() {\n"
                       "  %a = stablehlo.constant dense<1.0> : tensor<f32>\n"
                       "  %b = stablehlo.custom_call @foo(%a) : (tensor<f32>) -> tensor<f32>\n"
                       "  func.return\n"
                       "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "custom_call @foo cannot be interpreted"));
}

static void test_ex_interp_module_rejects_entry_with_arguments(void **state)
{
    (void)state;
    const char *text = "func.func @main(%a: tensor<f32>) {\n"
                       "  func.return\n"
                       "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_EINVAL);
    assert_string_equal(err.path, "1:1");
    assert_non_null(strstr(err.msg, "takes arguments"));
}

/* One program reaches an all_reduce its peer never does: an error, at once. */
static void test_ex_interp_run_parallel_missing_peer_fails(void **state)
{
    (void)state;
    const char *text =
        "func.func @f(%x: tensor<i64>) -> tensor<i64> {\n"
        "  %s = \"stablehlo.all_reduce\"(%x) <{replica_groups = dense<[[0, 1]]> : "
        "tensor<1x2xi64>}> ({\n"
        "  ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
        "    %c = stablehlo.add %a, %b : tensor<i64>\n"
        "    stablehlo.return %c : tensor<i64>\n"
        "  }) : (tensor<i64>) -> tensor<i64>\n"
        "  return %s : tensor<i64>\n"
        "}\n"
        "func.func @g(%x: tensor<i64>) -> tensor<i64> {\n"
        "  return %x : tensor<i64>\n"
        "}\n"
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<5> : tensor<i64>\n"
        "  %r:2 = \"interpreter.run_parallel\"(%a, %a) {programs = [[@f], [@g]]} : "
        "(tensor<i64>, tensor<i64>) -> (tensor<i64>, tensor<i64>)\n"
        "  func.return\n"
        "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_EINVAL);
    assert_non_null(strstr(err.msg, "peers failed or never came"));
}

static void test_ex_interp_module_rejects_recursion(void **state)
{
    (void)state;
    const char *text = "func.func @main() {\n"
                       "  func.call @main() : () -> ()\n"
                       "  func.return\n"
                       "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(text, &r, &err, NULL), CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "recursive call"));
}

/* A value past the element limit and an op whose result does not fit its
 * operands are errors at the op, not allocations or reads past a buffer. */
static void test_ex_interp_module_rejects_bad_shapes(void **state)
{
    (void)state;
    const char *big = "func.func @main() {\n"
                      "  %a = stablehlo.constant dense<1.0> : tensor<100000x100000xf32>\n"
                      "  func.return\n"
                      "}\n";
    ex_interp_report r;
    cm_error err;
    assert_int_equal(interp(big, &r, &err, NULL), CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "too many to interpret"));
    const char *cat =
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<1> : tensor<2x3xi32>\n"
        "  %b = \"stablehlo.concatenate\"(%a, %a) {dimension = 0 : i64} : (tensor<2x3xi32>, "
        "tensor<2x3xi32>) -> tensor<4x2xi32>\n"
        "  func.return\n"
        "}\n";
    assert_int_equal(interp(cat, &r, &err, NULL), CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "does not fit the result"));
}

/* The OOM loop: every failed allocation is CM_ENOMEM, nothing leaks, also
 * with run_parallel's threads and a collective in flight. */
typedef struct oom_ctx {
    sp_module *m;
    FILE *out;
    ex_interp_report r;
} oom_ctx;

static void oom_setup(void *p)
{
    oom_ctx *c = p;
    const char *text =
        "func.func @f(%x: tensor<3xi32>) -> tensor<3xi32> {\n"
        "  %s = \"stablehlo.all_reduce\"(%x) <{replica_groups = dense<[[0, 1]]> : "
        "tensor<1x2xi64>}> ({\n"
        "  ^bb0(%a: tensor<i32>, %b: tensor<i32>):\n"
        "    %c = stablehlo.add %a, %b : tensor<i32>\n"
        "    stablehlo.return %c : tensor<i32>\n"
        "  }) : (tensor<3xi32>) -> tensor<3xi32>\n"
        "  return %s : tensor<3xi32>\n"
        "}\n"
        "func.func @main() {\n"
        "  %a = stablehlo.constant dense<[1, 2, 3]> : tensor<3xi32>\n"
        "  %r:2 = \"interpreter.run_parallel\"(%a, %a) {programs = [[@f], [@f]]} : "
        "(tensor<3xi32>, tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>)\n"
        "  %z = stablehlo.constant dense<0> : tensor<i32>\n"
        "  %t = stablehlo.reduce(%r#0 init: %z) applies stablehlo.add across dimensions = [0] "
        ": (tensor<3xi32>, tensor<i32>) -> tensor<i32>\n"
        "  check.expect_eq_const %t, dense<12> : tensor<i32>\n"
        "  func.return\n"
        "}\n";
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &c->m, &err), CM_OK);
    c->out = fopen("/dev/null", "w");
    assert_non_null(c->out);
}

static cm_status oom_run(void *p)
{
    oom_ctx *c = p;
    cm_error err;
    cm_error_clear(&err);
    return ex_interp_module(c->m, c->out, &c->r, &err);
}

static void oom_done(void *p, cm_status st)
{
    oom_ctx *c = p;
    if (st == CM_OK) {
        assert_int_equal(c->r.n_checks, 1);
        assert_int_equal(c->r.n_failed, 0);
    }
    sp_module_destroy(c->m);
    fclose(c->out);
}

static void test_ex_interp_module_out_of_memory(void **state)
{
    (void)state;
    oom_ctx c;
    memset(&c, 0, sizeof c);
    tu_oom t = {oom_setup, oom_run, oom_done};
    assert_true(tu_oom_loop(&t, &c, 10000) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_interp_module_checks_hold),
        cmocka_unit_test(test_ex_interp_module_failed_check_is_reported),
        cmocka_unit_test(test_ex_interp_module_integer_edge_cases),
        cmocka_unit_test(test_ex_interp_run_parallel_collectives),
        cmocka_unit_test(test_ex_interp_run_parallel_replicas),
        cmocka_unit_test(test_ex_interp_module_rejects_unknown_op),
        cmocka_unit_test(test_ex_interp_module_rejects_entry_with_arguments),
        cmocka_unit_test(test_ex_interp_run_parallel_missing_peer_fails),
        cmocka_unit_test(test_ex_interp_module_rejects_recursion),
        cmocka_unit_test(test_ex_interp_module_rejects_bad_shapes),
        cmocka_unit_test(test_ex_interp_module_out_of_memory),
    };
    return cmocka_run_group_tests_name("ex_interp", tests, NULL, NULL);
}
