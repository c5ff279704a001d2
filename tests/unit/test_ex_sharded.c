/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_exec on sharded dimensions that need more than a
 * block-by-block run (issue 19, "right answers when sharded"): max, min,
 * product and logical reductions over a sharded dimension, whose partial
 * results the all-reduce combines by their own kind; init values and
 * scatter operands counted once, not once per shard; slices and reshapes
 * that need elements other devices hold, which read them across devices.
 * Each runs over 2 and 4 devices and is checked against the one-device
 * run. */
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
#include "sp_mlir.h"

static const uint32_t sizes[] = {2, 4};

/* Partitions text (ex_check_text) and checks it on devices devices against
 * its one-device reference. */
static void assert_matches(const char *text, uint32_t devices)
{
    ex_check_opts o = {.n_devices = devices, .iters = 2, .seed = 11};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(text, strlen(text), &o, &r, &err);
    if (st != CM_OK) {
        fail_msg("ex_check_text (%u devices): %s at %s: %s", devices, cm_status_name(err.code),
                 err.path, err.msg);
    }
    if (!r.mm.match) {
        fail_msg("%u devices: mismatch at result %u %s: expected %g got %g", devices, r.mm.result,
                 r.mm.where, r.mm.expected, r.mm.got);
    }
    assert_int_equal(r.n_devices, devices);
}

/* A module on mesh x=n: its text with the mesh line first. */
static void on_mesh(char *buf, size_t len, uint32_t n, const char *body)
{
    int w = snprintf(buf, len, "sdy.mesh @mesh = <[\"x\"=%u]>\n%s", n, body);
    assert_true(w > 0 && (size_t)w < len);
}

/* reduce of a 8x16 value sharded along the reduced dimension 1. */
static void reduce_module(char *buf, size_t len, uint32_t n, const char *ty, const char *init,
                          const char *body)
{
    char mod[2048];
    snprintf(mod, sizeof mod,
             "func.func @main(%%arg0: tensor<8x16x%s> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
             "{\"x\"}]>}) -> tensor<8x%s> {\n"
             "  %%init = stablehlo.constant dense<%s> : tensor<%s>\n"
             "  %%0 = stablehlo.reduce(%%arg0 init: %%init) applies stablehlo.%s across "
             "dimensions = [1] : (tensor<8x16x%s>, tensor<%s>) -> tensor<8x%s>\n"
             "  return %%0 : tensor<8x%s>\n}\n",
             ty, ty, init, ty, body, ty, ty, ty, ty);
    on_mesh(buf, len, n, mod);
}

static void test_ex_sharded_reduce_kinds_combine_by_kind(void **state)
{
    (void)state;
    static const struct {
        const char *ty, *init, *body;
    } cases[] = {
        {"f32", "0xFF800000", "maximum"},
        {"f32", "0x7F800000", "minimum"},
        {"f32", "1.0", "multiply"},
        {"f64", "0xFFF0000000000000", "maximum"},
        {"i32", "-2147483648", "maximum"},
        {"i32", "2147483647", "minimum"},
        {"i32", "1", "multiply"},
        {"i64", "1", "multiply"},
        {"ui8", "255", "minimum"},
        {"i32", "0", "or"},
        {"i32", "-1", "and"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t s = 0; s < 2; s++) {
            reduce_module(buf, sizeof buf, sizes[s], cases[i].ty, cases[i].init, cases[i].body);
            assert_matches(buf, sizes[s]);
        }
    }
}

/* A reduction over both dimensions of a 2x2 mesh: the partial result is
 * combined over both axes. */
static void test_ex_sharded_reduce_over_two_axes(void **state)
{
    (void)state;
    static const char mod[] =
        "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
        "func.func @main(%arg0: tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {\"y\"}]>}) -> (tensor<f32>, tensor<f32>, tensor<8xf32>) {\n"
        "  %init = stablehlo.constant dense<0.5> : tensor<f32>\n"
        "  %0 = stablehlo.reduce(%arg0 init: %init) applies stablehlo.maximum across "
        "dimensions = [0, 1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<f32>\n"
        "  %1 = stablehlo.reduce(%arg0 init: %init) applies stablehlo.add across "
        "dimensions = [0, 1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<f32>\n"
        "  %2 = stablehlo.reduce(%arg0 init: %init) applies stablehlo.multiply across "
        "dimensions = [1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<8xf32>\n}\n";
    assert_matches(mod, 4);
}

static void test_ex_sharded_reduce_init_applied_once(void **state)
{
    (void)state;
    static const struct {
        const char *ty, *init, *body;
    } cases[] = {
        {"f32", "3.0", "add"},       {"f32", "2.0", "multiply"}, {"f64", "-7.5", "add"},
        {"i32", "5", "add"},         {"i32", "3", "multiply"},   {"f32", "0.25", "maximum"},
        {"f32", "-0.25", "minimum"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t s = 0; s < 2; s++) {
            reduce_module(buf, sizeof buf, sizes[s], cases[i].ty, cases[i].init, cases[i].body);
            assert_matches(buf, sizes[s]);
        }
    }
}

/* Reductions over a split dimension that does not divide (7 over 2 and 4
 * devices): the padding of the last shards must not count, whatever the
 * elementwise ops before wrote there (exp(0) is 1). */
static void test_ex_sharded_reduce_over_padded_dimension(void **state)
{
    (void)state;
    static const char body[] =
        "func.func @main(%arg0: tensor<8x7xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
        "{\"x\"}]>}) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {\n"
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %one = stablehlo.constant dense<1.0> : tensor<f32>\n"
        "  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>\n"
        "  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>\n"
        "  %e = stablehlo.exponential %arg0 : tensor<8x7xf32>\n"
        "  %a = stablehlo.abs %arg0 : tensor<8x7xf32>\n"
        "  %n = stablehlo.negate %a : tensor<8x7xf32>\n"
        "  %0 = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] "
        ": (tensor<8x7xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  %1 = stablehlo.reduce(%n init: %ninf) applies stablehlo.maximum across dimensions = "
        "[1] : (tensor<8x7xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  %2 = stablehlo.reduce(%a init: %inf) applies stablehlo.minimum across dimensions = "
        "[1] : (tensor<8x7xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  %3 = stablehlo.reduce(%arg0 init: %one) applies stablehlo.multiply across "
        "dimensions = [1] : (tensor<8x7xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  return %0, %1, %2, %3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, "
        "tensor<8xf32>\n}\n";
    char buf[4096];
    for (size_t s = 0; s < 2; s++) {
        on_mesh(buf, sizeof buf, sizes[s], body);
        assert_matches(buf, sizes[s]);
    }
}

/* scatter of 16 rows of updates, sharded along their scatter dimension,
 * into a replicated 8x4 operand with body op. */
static void scatter_module(char *buf, size_t len, uint32_t n, const char *ty, const char *op)
{
    char mod[2048];
    snprintf(mod, sizeof mod,
             "func.func @main(%%arg0: tensor<8x4x%s>, %%arg1: tensor<16x1xi32>, "
             "%%arg2: tensor<16x4x%s> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) "
             "-> tensor<8x4x%s> {\n"
             "  %%0 = \"stablehlo.scatter\"(%%arg0, %%arg1, %%arg2) ({\n"
             "  ^bb0(%%a: tensor<%s>, %%b: tensor<%s>):\n"
             "    %%s = stablehlo.%s %%a, %%b : tensor<%s>\n"
             "    stablehlo.return %%s : tensor<%s>\n"
             "  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
             "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
             "index_vector_dim = 1>} : (tensor<8x4x%s>, tensor<16x1xi32>, tensor<16x4x%s>) -> "
             "tensor<8x4x%s>\n"
             "  return %%0 : tensor<8x4x%s>\n}\n",
             ty, ty, ty, ty, ty, op, ty, ty, ty, ty, ty, ty);
    on_mesh(buf, len, n, mod);
}

static void test_ex_sharded_scatter_counts_operand_once(void **state)
{
    (void)state;
    static const struct {
        const char *ty, *op;
    } cases[] = {
        {"f32", "add"},     {"f32", "multiply"}, {"f32", "maximum"},
        {"f32", "minimum"}, {"i32", "add"},      {"f64", "add"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t s = 0; s < 2; s++) {
            scatter_module(buf, sizeof buf, sizes[s], cases[i].ty, cases[i].op);
            assert_matches(buf, sizes[s]);
        }
    }
}

/* Runs mod as given (already partitioned) on devices devices; CM_OK and the
 * results match its one-device run, or the error is returned in err. */
static cm_status run_as_given(const char *mod, uint32_t devices, cm_error *err)
{
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(mod, strlen(mod), 0, &m, err), CM_OK);
    ex_tensor *args = NULL, *want = NULL, *got = NULL;
    uint32_t n_args = 0, n_want = 0, n_got = 0;
    assert_int_equal(ex_args_make(m, 3, &args, &n_args, err), CM_OK);
    ex_exec_opts ro = {.replicated = true, .iters = 1};
    assert_int_equal(ex_exec_run(m, &ro, args, n_args, &want, &n_want, err), CM_OK);
    ex_exec_opts o = {.n_devices = devices, .iters = 1};
    cm_status st = ex_exec_run(m, &o, args, n_args, &got, &n_got, err);
    if (st == CM_OK) {
        ex_mismatch mm;
        assert_int_equal(n_got, n_want);
        ex_tensors_compare(want, got, n_want, 1, &mm);
        if (!mm.match) {
            fail_msg("%u devices: mismatch at result %u %s: expected %g got %g", devices, mm.result,
                     mm.where, mm.expected, mm.got);
        }
    }
    ex_tensors_free(args, n_args);
    ex_tensors_free(want, n_want);
    ex_tensors_free(got, n_got);
    sp_module_destroy(m);
    return st;
}

/* A slice of a sharded dimension: where each device's operand block holds
 * what its result block reads (2 devices) it runs on the blocks; where it
 * does not (4 devices) the devices read their result blocks from the
 * devices holding the elements. Never computed from zeros. */
static void test_ex_sharded_slice_reads_what_it_needs(void **state)
{
    (void)state;
    static const char body[] =
        "func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
        "{}]>}, tensor<5x8xf32>) {\n"
        "  %0 = stablehlo.slice %arg0 [4:12, 0:8] {sdy.sharding = "
        "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : (tensor<16x8xf32>) -> "
        "tensor<8x8xf32>\n"
        "  %1 = stablehlo.slice %arg0 [1:15:3, 0:8] {sdy.sharding = "
        "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : (tensor<16x8xf32>) -> "
        "tensor<5x8xf32>\n"
        "  return %0, %1 : tensor<8x8xf32>, tensor<5x8xf32>\n}\n";
    char buf[4096];
    for (size_t s = 0; s < 2; s++) {
        cm_error err;
        cm_error_clear(&err);
        on_mesh(buf, sizeof buf, sizes[s], body);
        if (run_as_given(buf, sizes[s], &err) != CM_OK) {
            fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
        }
        assert_matches(buf, sizes[s]);
    }
}

/* Reshapes of sharded values: blocks that are the same run of elements
 * copy, a whole operand is read at each result element's place, and a
 * reshape whose blocks do not line up reads across devices. */
static void test_ex_sharded_reshape_reads_what_it_needs(void **state)
{
    (void)state;
    static const char *const mods[] = {
        /* the same runs: a block copy */
        "func.func @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> tensor<48xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}]>]>} : (tensor<8x6xf32>) -> tensor<48xf32>\n"
        "  return %0 : tensor<48xf32>\n}\n",
        /* a whole operand, a sharded result */
        "func.func @main(%arg0: tensor<6x8xf32>) -> tensor<4x12xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{}, {\"x\"}]>]>} : (tensor<6x8xf32>) -> tensor<4x12xf32>\n"
        "  return %0 : tensor<4x12xf32>\n}\n",
        /* a split minor dimension merged into a sharded one */
        "func.func @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
        "{\"x\"}]>}) -> tensor<48xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}]>]>} : (tensor<8x6xf32>) -> tensor<48xf32>\n"
        "  return %0 : tensor<48xf32>\n}\n",
        /* ... into a replicated result */
        "func.func @main(%arg0: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
        "{\"x\"}]>}) -> tensor<48xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 : (tensor<8x6xf32>) -> tensor<48xf32>\n"
        "  return %0 : tensor<48xf32>\n}\n",
        /* a split minor dimension split further: the blocks stay copies */
        "func.func @main(%arg0: tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
        "{\"x\"}]>}) -> tensor<8x4x32xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{}, {\"x\"}, {}]>]>} : (tensor<8x128xf32>) -> tensor<8x4x32xf32>\n"
        "  return %0 : tensor<8x4x32xf32>\n}\n",
        /* a padded split dimension (6 over 4) kept, the next one split */
        "func.func @main(%arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> tensor<6x2x4xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}, {}, {}]>]>} : (tensor<6x8xf32>) -> tensor<6x2x4xf32>\n"
        "  return %0 : tensor<6x2x4xf32>\n}\n",
        /* a padded split dimension (6 over 4) split in two */
        "func.func @main(%arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> tensor<3x16xf32> {\n"
        "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}, {}]>]>} : (tensor<6x8xf32>) -> tensor<3x16xf32>\n"
        "  return %0 : tensor<3x16xf32>\n}\n",
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        for (size_t s = 0; s < 2; s++) {
            cm_error err;
            cm_error_clear(&err);
            on_mesh(buf, sizeof buf, sizes[s], mods[i]);
            if (run_as_given(buf, sizes[s], &err) != CM_OK) {
                fail_msg("module %zu, %u devices: %s at %s: %s", i, sizes[s],
                         cm_status_name(err.code), err.path, err.msg);
            }
            assert_matches(buf, sizes[s]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_sharded_reduce_kinds_combine_by_kind),
        cmocka_unit_test(test_ex_sharded_reduce_over_two_axes),
        cmocka_unit_test(test_ex_sharded_reduce_init_applied_once),
        cmocka_unit_test(test_ex_sharded_reduce_over_padded_dimension),
        cmocka_unit_test(test_ex_sharded_scatter_counts_operand_once),
        cmocka_unit_test(test_ex_sharded_slice_reads_what_it_needs),
        cmocka_unit_test(test_ex_sharded_reshape_reads_what_it_needs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
