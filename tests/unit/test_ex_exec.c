/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_exec: the Flax MLP partitioned over 8 devices
 * against its single-device reference; the transformer template (dp, tp,
 * dp+tp, inference and training) on data=2 x model=4; each sdy collective on
 * a small hand-partitioned module (also on a mesh with an explicit device
 * order), and over groups of uneven size (meshes 2x3 and 3x2, over one axis
 * or both, with device orders), padded shards and sub-axes;
 * sharded iota and broadcast offsets; pad, gather, convolution,
 * reduce_window and integer element-wise ops on partitioned modules (their
 * kernels: test_ex_kern.c); the error for an op the executor does not run;
 * the comparison's first-mismatch report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cm.h"
#include "ex_exec.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_input.h"

/* Checks text (partitioned by ex_check_text) against its reference. */
static void assert_matches(const char *text, uint32_t devices)
{
    ex_check_opts o = {.n_devices = devices, .iters = 2, .seed = 7};
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
    /* Also with the workers pinned, 4 to a CPU here (test_ex_opts.c). */
    for (int pin = 0; pin < 2; pin++) {
        ex_check_opts o = {.n_devices = 8,
                           .iters = 2,
                           .seed = 42,
                           .affinity = pin != 0 ? EX_AFFINITY_ON : EX_AFFINITY_OFF};
        ex_report r;
        cm_status st = ex_check_text(text, len, &o, &r, &err);
        if (st != CM_OK) {
            fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
        }
        assert_true(r.mm.match);
        assert_int_equal(r.n_devices, 8);
        assert_true(r.flops > 0);
    }
    cm_free(text);
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

/* Integer partial sums add with wrap-around in the collective too: i32
 * products that overflow, summed over a sharded contraction, then
 * all-reduced and reduce-scattered over y. Through doubles, the sum of two
 * wrapped partials left the i32 range and was converted back out of range
 * (undefined; on x86 it gave INT32_MIN). */
static void test_ex_exec_run_integer_reductions_wrap(void **state)
{
    (void)state;
    static const char *const tails[] = {
        "  %3 = sdy.all_reduce {\"y\"} %2 out_sharding=<@mesh, [{\"x\"}, {}]> : "
        "tensor<8x8xi32>\n"
        "  return %3 : tensor<8x8xi32>\n}\n",
        "  %3 = sdy.reduce_scatter [{}, {\"y\"}] %2 out_sharding=<@mesh, [{\"x\"}, {\"y\"}]> : "
        "tensor<8x8xi32>\n"
        "  return %3 : tensor<8x8xi32>\n}\n"};
    for (size_t t = 0; t < 2; t++) {
        char buf[2048];
        snprintf(buf, sizeof buf,
                 MESH "func.func @main(%%arg0: tensor<8x16xi32> {sdy.sharding = "
                      "#sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}, %%arg1: tensor<16x8xi32> "
                      "{sdy.sharding = #sdy.sharding<@mesh, [{\"y\"}, {}]>}) -> "
                      "tensor<8x8xi32> {\n"
                      "  %%0 = stablehlo.constant dense<300000007> : tensor<8x16xi32>\n"
                      "  %%1 = stablehlo.multiply %%arg0, %%0 {sdy.sharding = "
                      "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {\"y\"}]>]>} : "
                      "tensor<8x16xi32>\n"
                      "  %%2 = stablehlo.dot_general %%1, %%arg1, contracting_dims = [1] x [0] "
                      "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : "
                      "(tensor<8x16xi32>, tensor<16x8xi32>) -> tensor<8x8xi32>\n%s",
                 tails[t]);
        assert_matches(buf, 4);
    }
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

/* ---- the transformer template, partitioned on data=2 x model=4 ------------------- */

/* Writes the example's graph document to a temporary file, loads and plans it
 * twice as `shardplan run GRAPH.json` does, partitions one copy and checks it
 * against the other on 8 devices. */
static void check_transformer(sp_example_strategy strategy, bool train)
{
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.strategy = strategy;
    eo.train = train;
    eo.layers = 1;
    eo.d_model = 64;
    eo.heads = 4;
    eo.seq = 8;
    eo.batch = 4;
    cm_error err;
    cm_error_clear(&err);
    cm_buf doc;
    cm_buf_init(&doc);
    assert_int_equal(sp_example_graph_json(&eo, &doc, &err), CM_OK);
    char path[] = "/tmp/test_ex_exec_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, doc.data, doc.len) == (ssize_t)doc.len);
    assert_int_equal(close(fd), 0);
    cm_buf_fini(&doc);
    sp_input part, ref;
    cm_status st = sp_input_load(path, NULL, &part, &err);
    assert_int_equal(st, CM_OK);
    st = sp_input_load(path, NULL, &ref, &err);
    unlink(path);
    assert_int_equal(st, CM_OK);
    st = ex_partition(part.m, &err);
    ex_check_opts o = {.n_devices = 8, .iters = 1, .seed = 5};
    ex_report r;
    if (st == CM_OK) {
        st = ex_check_modules(part.m, ref.m, &o, &r, &err);
    }
    sp_input_fini(&part);
    sp_input_fini(&ref);
    if (st != CM_OK) {
        fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at result %u %s: expected %g got %g", r.mm.result, r.mm.where,
                 r.mm.expected, r.mm.got);
    }
    assert_int_equal(r.n_devices, 8);
}

static void test_ex_check_modules_transformer_dp_matches(void **state)
{
    (void)state;
    check_transformer(SP_EXAMPLE_DP, false);
}

static void test_ex_check_modules_transformer_tp_matches(void **state)
{
    (void)state;
    check_transformer(SP_EXAMPLE_TP, false);
}

static void test_ex_check_modules_transformer_dp_tp_matches(void **state)
{
    (void)state;
    check_transformer(SP_EXAMPLE_DP_TP, false);
}

static void test_ex_check_modules_transformer_train_matches(void **state)
{
    (void)state;
    check_transformer(SP_EXAMPLE_DP, true);
    check_transformer(SP_EXAMPLE_TP, true);
    check_transformer(SP_EXAMPLE_DP_TP, true);
}

/* ---- every collective over groups of uneven size -------------------------------- */

/* Meshes of 6 devices whose axes differ in size, in row-major and in an
 * explicit device order, and one of 8 devices for sub-axes. */
static const char *const uneven_meshes[] = {
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=3]>\n",
    "sdy.mesh @mesh = <[\"x\"=3, \"y\"=2]>\n",
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=3], device_ids=[5, 2, 0, 4, 1, 3]>\n",
    "sdy.mesh @mesh = <[\"x\"=3, \"y\"=2], device_ids=[1, 4, 3, 0, 5, 2]>\n",
};

/* One collective on one argument of R x C: in and out are the argument's and
 * the result's dimension shardings, op the collective with its axes. */
typedef struct coll_case {
    const char *in, *op, *out;
} coll_case;

static const coll_case uneven_colls[] = {
    /* all_gather over y (x stays), over x (y stays), over both, both on one dim */
    {"[{\"x\"}, {\"y\"}]", "sdy.all_gather [{}, {\"y\"}]", "[{\"x\"}, {}]"},
    {"[{\"x\"}, {\"y\"}]", "sdy.all_gather [{\"x\"}, {}]", "[{}, {\"y\"}]"},
    {"[{\"x\"}, {\"y\"}]", "sdy.all_gather [{\"x\"}, {\"y\"}]", "[{}, {}]"},
    {"[{\"x\", \"y\"}, {}]", "sdy.all_gather [{\"x\", \"y\"}, {}]", "[{}, {}]"},
    {"[{\"y\", \"x\"}, {}]", "sdy.all_gather [{\"x\"}, {}]", "[{\"y\"}, {}]"},
    /* all_slice likewise */
    {"[{\"x\"}, {}]", "sdy.all_slice [{}, {\"y\"}]", "[{\"x\"}, {\"y\"}]"},
    {"[{}, {\"y\"}]", "sdy.all_slice [{\"x\"}, {}]", "[{\"x\"}, {\"y\"}]"},
    {"[{}, {}]", "sdy.all_slice [{\"y\"}, {\"x\"}]", "[{\"y\"}, {\"x\"}]"},
    {"[{}, {}]", "sdy.all_slice [{\"y\", \"x\"}, {}]", "[{\"y\", \"x\"}, {}]"},
    /* all_to_all over y, over x, over both */
    {"[{\"y\"}, {}]", "sdy.all_to_all [{\"y\"}: 0->1]", "[{}, {\"y\"}]"},
    {"[{\"x\", \"y\"}, {}]", "sdy.all_to_all [{\"y\"}: 0->1]", "[{\"x\"}, {\"y\"}]"},
    {"[{\"y\"}, {\"x\"}]", "sdy.all_to_all [{\"x\"}: 1->0]", "[{\"y\", \"x\"}, {}]"},
    {"[{\"x\", \"y\"}, {}]", "sdy.all_to_all [{\"x\", \"y\"}: 0->1]", "[{}, {\"x\", \"y\"}]"},
    /* collective_permute between orders of the same axes (swapping "x" and
     * "y" across dimensions changes each dimension's sharded size, which
     * Shardy's verifier, and so the input loader, rejects) */
    {"[{\"x\", \"y\"}, {}]", "sdy.collective_permute", "[{\"y\", \"x\"}, {}]"},
};

/* A dot whose contraction is sharded on axes (a partial sum over them), then
 * op over the same axes into out. */
typedef struct red_case {
    const char *axes, *op, *out;
} red_case;

static const red_case uneven_reds[] = {
    {"\"y\"", "sdy.all_reduce {\"y\"}", "[{\"x\"}, {}]"},
    {"\"x\"", "sdy.all_reduce {\"x\"}", "[{}, {\"y\"}]"},
    {"\"x\", \"y\"", "sdy.all_reduce {\"x\", \"y\"}", "[{}, {}]"},
    {"\"y\"", "sdy.reduce_scatter [{}, {\"y\"}]", "[{\"x\"}, {\"y\"}]"},
    {"\"x\"", "sdy.reduce_scatter [{\"x\"}, {}]", "[{\"x\"}, {\"y\"}]"},
    {"\"x\", \"y\"", "sdy.reduce_scatter [{\"y\", \"x\"}, {}]", "[{\"y\", \"x\"}, {}]"},
};

/* The dot's operands and result keep the axes not reduced (x on rows, y on
 * columns) so the groups are the cosets of the reduced axes. */
static void red_module(char *buf, size_t len, const char *mesh, const red_case *c, int64_t rows,
                       int64_t k, int64_t cols)
{
    bool has_x = strstr(c->axes, "\"x\"") != NULL, has_y = strstr(c->axes, "\"y\"") != NULL;
    const char *row = has_x ? "" : "\"x\"", *col = has_y ? "" : "\"y\"";
    snprintf(buf, len,
             "%sfunc.func @main(%%arg0: tensor<%lldx%lldxf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{%s}, {%s}]>}, %%arg1: tensor<%lldx%lldxf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{%s}, {%s}]>}) -> tensor<%lldx%lldxf32> {\n"
             "  %%0 = stablehlo.dot_general %%arg0, %%arg1, contracting_dims = [1] x [0] "
             "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{%s}, {%s}]>]>} : "
             "(tensor<%lldx%lldxf32>, tensor<%lldx%lldxf32>) -> tensor<%lldx%lldxf32>\n"
             "  %%1 = %s %%0 out_sharding=<@mesh, %s> : tensor<%lldx%lldxf32>\n"
             "  return %%1 : tensor<%lldx%lldxf32>\n}\n",
             mesh, (long long)rows, (long long)k, row, c->axes, (long long)k, (long long)cols,
             c->axes, col, (long long)rows, (long long)cols, row, col, (long long)rows,
             (long long)k, (long long)k, (long long)cols, (long long)rows, (long long)cols, c->op,
             c->out, (long long)rows, (long long)cols, (long long)rows, (long long)cols);
}

static void coll_module(char *buf, size_t len, const char *mesh, const coll_case *c, int64_t rows,
                        int64_t cols)
{
    snprintf(buf, len,
             "%sfunc.func @main(%%arg0: tensor<%lldx%lldxf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, %s>}) -> tensor<%lldx%lldxf32> {\n"
             "  %%0 = %s %%arg0 out_sharding=<@mesh, %s> : tensor<%lldx%lldxf32>\n"
             "  return %%0 : tensor<%lldx%lldxf32>\n}\n",
             mesh, (long long)rows, (long long)cols, c->in, (long long)rows, (long long)cols, c->op,
             c->out, (long long)rows, (long long)cols, (long long)rows, (long long)cols);
}

/* Runs text on n devices; on failure names the module. */
static void assert_matches_named(const char *text, uint32_t devices)
{
    ex_check_opts o = {.n_devices = devices, .iters = 1, .seed = 11};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(text, strlen(text), &o, &r, &err);
    if (st != CM_OK) {
        fail_msg("%s at %s: %s\nmodule:\n%s", cm_status_name(err.code), err.path, err.msg, text);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at result %u %s: expected %g got %g\nmodule:\n%s", r.mm.result,
                 r.mm.where, r.mm.expected, r.mm.got, text);
    }
    assert_int_equal(r.n_devices, devices);
}

static void test_ex_exec_run_collectives_uneven_groups_match(void **state)
{
    (void)state;
    char buf[2048];
    for (size_t m = 0; m < sizeof uneven_meshes / sizeof *uneven_meshes; m++) {
        for (size_t i = 0; i < sizeof uneven_colls / sizeof *uneven_colls; i++) {
            coll_module(buf, sizeof buf, uneven_meshes[m], &uneven_colls[i], 12, 18);
            assert_matches_named(buf, 6);
        }
        for (size_t i = 0; i < sizeof uneven_reds / sizeof *uneven_reds; i++) {
            red_module(buf, sizeof buf, uneven_meshes[m], &uneven_reds[i], 12, 6, 18);
            assert_matches_named(buf, 6);
        }
    }
}

/* Dimensions that no group size divides: the last shards are padded. */
static void test_ex_exec_run_collectives_padded_shards_match(void **state)
{
    (void)state;
    char buf[2048];
    for (size_t m = 0; m < sizeof uneven_meshes / sizeof *uneven_meshes; m++) {
        for (size_t i = 0; i < sizeof uneven_colls / sizeof *uneven_colls; i++) {
            coll_module(buf, sizeof buf, uneven_meshes[m], &uneven_colls[i], 7, 11);
            assert_matches_named(buf, 6);
        }
        for (size_t i = 0; i < sizeof uneven_reds / sizeof *uneven_reds; i++) {
            red_module(buf, sizeof buf, uneven_meshes[m], &uneven_reds[i], 7, 5, 11);
            assert_matches_named(buf, 6);
        }
    }
}

/* Sub-axes of x=4: "x":(1)2 is the major half of x, "x":(2)2 the minor one. */
static const coll_case sub_colls[] = {
    {"[{\"x\":(1)2}, {\"y\"}]", "sdy.all_gather [{\"x\":(1)2}, {}]", "[{}, {\"y\"}]"},
    {"[{\"x\":(2)2}, {\"y\"}]", "sdy.all_gather [{\"x\":(2)2}, {}]", "[{}, {\"y\"}]"},
    {"[{\"x\"}, {}]", "sdy.all_gather [{\"x\":(2)2}, {}]", "[{\"x\":(1)2}, {}]"},
    {"[{}, {}]", "sdy.all_slice [{\"x\":(2)2}, {\"x\":(1)2}]", "[{\"x\":(2)2}, {\"x\":(1)2}]"},
    {"[{\"x\":(1)2}, {\"y\"}]", "sdy.all_to_all [{\"x\":(1)2}: 0->1]", "[{}, {\"y\", \"x\":(1)2}]"},
    {"[{\"x\":(1)2}, {\"x\":(2)2}]", "sdy.collective_permute", "[{\"x\":(2)2}, {\"x\":(1)2}]"},
};

static const char *const sub_meshes[] = {
    "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n",
    "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2], device_ids=[6, 1, 7, 0, 3, 5, 2, 4]>\n",
};

static void test_ex_exec_run_collectives_sub_axes_match(void **state)
{
    (void)state;
    char buf[2048];
    for (size_t m = 0; m < sizeof sub_meshes / sizeof *sub_meshes; m++) {
        for (size_t i = 0; i < sizeof sub_colls / sizeof *sub_colls; i++) {
            coll_module(buf, sizeof buf, sub_meshes[m], &sub_colls[i], 8, 16);
            assert_matches_named(buf, 8);
        }
    }
}

/* Collectives large enough to be cut into many work items per device and to
 * use streaming stores (over 16 MiB of results in all), run twice so the
 * second run reuses the first one's buffers: 1032 x 2046 (blocks of 341 or
 * 1023 columns, runs that are no multiple of the vector width) and 1031 x
 * 2053 (a prime number of rows: padded shards, the generic paths). */
static void assert_matches_twice(const char *text)
{
    ex_check_opts o = {.n_devices = 6, .iters = 2, .seed = 5};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(text, strlen(text), &o, &r, &err);
    if (st != CM_OK) {
        fail_msg("%s: %s\nmodule:\n%s", cm_status_name(err.code), err.msg, text);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at %s: expected %g got %g\nmodule:\n%s", r.mm.where, r.mm.expected,
                 r.mm.got, text);
    }
}

static void test_ex_exec_run_large_collectives_match(void **state)
{
    (void)state;
    static const int64_t sizes[2][2] = {{1032, 2046}, {1031, 2053}};
    static const size_t colls[] = {1, 2, 9, 12, 13}; /* all_gather x2, all_to_all x2, permute */
    char buf[2048];
    for (size_t z = 0; z < 2; z++) {
        const char *mesh = uneven_meshes[2 * z]; /* 2x3 in order, then with device ids */
        for (size_t i = 0; i < sizeof colls / sizeof *colls; i++) {
            coll_module(buf, sizeof buf, mesh, &uneven_colls[colls[i]], sizes[z][0], sizes[z][1]);
            assert_matches_twice(buf);
        }
        for (size_t i = 0; i < sizeof uneven_reds / sizeof *uneven_reds; i++) {
            red_module(buf, sizeof buf, mesh, &uneven_reds[i], sizes[z][0], 6, sizes[z][1]);
            assert_matches_twice(buf);
        }
    }
}

/* An all-to-all on unpadded blocks reads each source range once and
 * scatters it to its group (scatter_item): on rank 3, where a member's part
 * of a source row is not one run (the generic path of a row), and with rows
 * of 256 KiB, cut inside a row (an item is one run), each on both meshes. */
static void test_ex_exec_run_all_to_all_scatter_paths_match(void **state)
{
    (void)state;
    static const char *const mods[] = {
        MESH "func.func @main(%arg0: tensor<8x4x12xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {}, {}]>}) -> tensor<8x4x12xf32> {\n"
             "  %0 = sdy.all_to_all [{\"x\"}: 0->2] %arg0 out_sharding=<@mesh, [{}, {}, "
             "{\"x\"}]> : tensor<8x4x12xf32>\n"
             "  return %0 : tensor<8x4x12xf32>\n}\n",
        MESH "func.func @main(%arg0: tensor<8x4x12xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\", \"y\"}, {}, {}]>}) -> tensor<8x4x12xf32> {\n"
             "  %0 = sdy.all_to_all [{\"y\"}: 0->1] %arg0 out_sharding=<@mesh, [{\"x\"}, "
             "{\"y\"}, {}]> : tensor<8x4x12xf32>\n"
             "  return %0 : tensor<8x4x12xf32>\n}\n",
        MESH "func.func @main(%arg0: tensor<4x65536xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {\"y\"}]>}) -> tensor<4x65536xf32> {\n"
             "  %0 = sdy.all_to_all [{\"x\"}: 0->1] %arg0 out_sharding=<@mesh, [{}, {\"y\", "
             "\"x\"}]> : tensor<4x65536xf32>\n"
             "  return %0 : tensor<4x65536xf32>\n}\n",
        MESH "func.func @main(%arg0: tensor<4x131072xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"y\"}, {}]>}) -> tensor<4x131072xf32> {\n"
             "  %0 = sdy.all_to_all [{\"y\"}: 0->1] %arg0 out_sharding=<@mesh, [{}, "
             "{\"y\"}]> : tensor<4x131072xf32>\n"
             "  return %0 : tensor<4x131072xf32>\n}\n",
    };
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++) {
        char buf[4096];
        with_mesh(buf, sizeof buf, mods[i], false);
        assert_matches_named(buf, 4);
        with_mesh(buf, sizeof buf, mods[i], true);
        assert_matches_named(buf, 4);
    }
}

/* An all-reduce with the wrong axis must not match its reference. */
static void test_ex_exec_run_wrong_collective_mismatches(void **state)
{
    (void)state;
    static const char bad[] =
        MESH DOT_PARTIAL() "  %1 = sdy.all_reduce {\"x\"} %0 out_sharding=<@mesh, [{\"x\"}, {}]> : "
                           "tensor<8x8xf32>\n"
                           "  return %1 : tensor<8x8xf32>\n}\n";
    ex_check_opts o = {.n_devices = 4, .iters = 1, .seed = 3};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(bad, strlen(bad), &o, &r, &err);
    /* The verifier rejects it (the reduction axis shards the operand), or
     * the replicas disagree, or the numbers differ. */
    assert_true(st == CM_EINVAL || st == CM_EINTERNAL || (st == CM_OK && !r.mm.match));
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

/* The element-wise ops added for JAX programs (kernels: test_ex_kern.c) and
 * reverse on sharded dimensions (each device reads the mirrored block) on
 * 2 and 4 devices, against the one-device run. */
static void test_ex_check_text_jax_elementwise_ops_partitioned_match(void **state)
{
    (void)state;
    static const char flt[] =
        MESH "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {\"y\"}]>}, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
             "  %lo = stablehlo.constant dense<-5.000000e-01> : tensor<f32>\n"
             "  %hi = stablehlo.constant dense<7.500000e-01> : tensor<f32>\n"
             "  %0 = stablehlo.sine %arg0 : tensor<8x16xf32>\n"
             "  %1 = stablehlo.cosine %arg1 : tensor<8x16xf32>\n"
             "  %2 = stablehlo.atan2 %0, %1 : tensor<8x16xf32>\n"
             "  %3 = stablehlo.clamp %lo, %2, %hi : (tensor<f32>, tensor<8x16xf32>, tensor<f32>) "
             "-> tensor<8x16xf32>\n"
             "  %4 = stablehlo.reverse %3, dims = [0, 1] : tensor<8x16xf32>\n"
             "  %5 = stablehlo.remainder %4, %1 : tensor<8x16xf32>\n"
             "  %6 = stablehlo.round_nearest_even %5 : tensor<8x16xf32>\n"
             "  %7 = stablehlo.exponential_minus_one %4 : tensor<8x16xf32>\n"
             "  %8 = stablehlo.log_plus_one %1 : tensor<8x16xf32>\n"
             "  %9 = stablehlo.cbrt %8 : tensor<8x16xf32>\n"
             "  %10 = stablehlo.power %1, %arg1 : tensor<8x16xf32>\n"
             "  %11 = stablehlo.add %6, %7 : tensor<8x16xf32>\n"
             "  %12 = stablehlo.sign %11 : tensor<8x16xf32>\n"
             "  %13 = stablehlo.floor %9 : tensor<8x16xf32>\n"
             "  %14 = stablehlo.ceil %10 : tensor<8x16xf32>\n"
             "  %15 = stablehlo.round_nearest_afz %14 : tensor<8x16xf32>\n"
             "  %16 = stablehlo.add %12, %13 : tensor<8x16xf32>\n"
             "  %17 = stablehlo.add %16, %15 : tensor<8x16xf32>\n"
             "  %f = stablehlo.is_finite %17 : (tensor<8x16xf32>) -> tensor<8x16xi1>\n"
             "  %z = stablehlo.constant dense<0.000000e+00> : tensor<8x16xf32>\n"
             "  %18 = stablehlo.select %f, %17, %z : tensor<8x16xi1>, tensor<8x16xf32>\n"
             "  return %18 : tensor<8x16xf32>\n}\n";
    static const char ints[] =
        MESH "func.func @main(%arg0: tensor<8x6xi32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\", \"y\"}, {}]>}, %arg1: tensor<8x6xi32>) -> tensor<8x6xi32> {\n"
             "  %m = stablehlo.constant dense<-3> : tensor<i32>\n"
             "  %one = stablehlo.constant dense<1> : tensor<8x6xi32>\n"
             "  %mx = stablehlo.constant dense<\"0x05000000\"> : tensor<i32>\n"
             "  %0 = stablehlo.shift_left %arg0, %arg1 : tensor<8x6xi32>\n"
             "  %1 = stablehlo.shift_right_arithmetic %0, %one : tensor<8x6xi32>\n"
             "  %2 = stablehlo.shift_right_logical %1, %arg1 : tensor<8x6xi32>\n"
             "  %3 = stablehlo.popcnt %2 : tensor<8x6xi32>\n"
             "  %4 = stablehlo.add %arg1, %one : tensor<8x6xi32>\n"
             "  %5 = stablehlo.remainder %0, %4 : tensor<8x6xi32>\n"
             "  %6 = stablehlo.power %arg0, %arg1 : tensor<8x6xi32>\n"
             "  %7 = stablehlo.subtract %5, %6 : tensor<8x6xi32>\n"
             "  %8 = stablehlo.sign %7 : tensor<8x6xi32>\n"
             "  %9 = stablehlo.reverse %6, dims = [0] : tensor<8x6xi32>\n"
             "  %10 = stablehlo.clamp %m, %9, %mx : (tensor<i32>, tensor<8x6xi32>, tensor<i32>) "
             "-> tensor<8x6xi32>\n"
             "  %11 = stablehlo.add %3, %8 : tensor<8x6xi32>\n"
             "  %12 = stablehlo.add %11, %10 : tensor<8x6xi32>\n"
             "  return %12 : tensor<8x6xi32>\n}\n";
    static const char two[] =
        "sdy.mesh @mesh = <[\"x\"=2]>\n"
        "func.func @main(%arg0: tensor<6x4xf64> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> (tensor<6x4xf64> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) {\n"
        "  %0 = stablehlo.reverse %arg0, dims = [0] : tensor<6x4xf64>\n"
        "  %1 = stablehlo.exponential_minus_one %0 : tensor<6x4xf64>\n"
        "  return %1 : tensor<6x4xf64>\n}\n";
    assert_matches(flt, 4);
    assert_matches(ints, 4);
    assert_matches(two, 2);
}

/* bf16 and f16 programs (element-wise, convert, reverse, reduce over a
 * sharded dimension, dot_general into bf16 and into f32, a convolution
 * sharded on its batch) on 2 and 4
 * devices, against the one-device run. */
static void test_ex_check_text_half_types_partitioned_match(void **state)
{
    (void)state;
    static const char mod[] =
        MESH "func.func @main(%arg0: tensor<8x16xbf16> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {\"y\"}]>}, %arg1: tensor<8x16xf16>, %arg2: tensor<16x4xbf16>) -> "
             "(tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8xbf16>, tensor<8x4xbf16>, "
             "tensor<8x4xf32>, tensor<8x16xf16>) {\n"
             "  %c = stablehlo.constant dense<1.500000e+00> : tensor<8x16xbf16>\n"
             "  %0 = stablehlo.add %arg0, %c : tensor<8x16xbf16>\n"
             "  %1 = stablehlo.exponential %0 : tensor<8x16xbf16>\n"
             "  %2 = stablehlo.convert %arg1 : (tensor<8x16xf16>) -> tensor<8x16xbf16>\n"
             "  %3 = stablehlo.multiply %1, %2 : tensor<8x16xbf16>\n"
             "  %4 = stablehlo.reverse %3, dims = [1] : tensor<8x16xbf16>\n"
             "  %5 = stablehlo.convert %4 : (tensor<8x16xbf16>) -> tensor<8x16xf32>\n"
             "  %z = stablehlo.constant dense<0.000000e+00> : tensor<bf16>\n"
             "  %6 = stablehlo.reduce(%4 init: %z) applies stablehlo.add across dimensions = "
             "[1] : (tensor<8x16xbf16>, tensor<bf16>) -> tensor<8xbf16>\n"
             "  %7 = stablehlo.dot_general %4, %arg2, contracting_dims = [1] x [0] : "
             "(tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>\n"
             "  %8 = stablehlo.dot_general %4, %arg2, contracting_dims = [1] x [0] : "
             "(tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xf32>\n"
             "  %lo = stablehlo.constant dense<-2.500000e-01> : tensor<f16>\n"
             "  %hi = stablehlo.constant dense<2.500000e-01> : tensor<f16>\n"
             "  %9 = stablehlo.tanh %arg1 : tensor<8x16xf16>\n"
             "  %10 = stablehlo.clamp %lo, %9, %hi : (tensor<f16>, tensor<8x16xf16>, "
             "tensor<f16>) -> tensor<8x16xf16>\n"
             "  %11 = stablehlo.round_nearest_even %10 : tensor<8x16xf16>\n"
             "  %12 = stablehlo.subtract %10, %11 : tensor<8x16xf16>\n"
             "  return %4, %5, %6, %7, %8, %12 : tensor<8x16xbf16>, tensor<8x16xf32>, "
             "tensor<8xbf16>, tensor<8x4xbf16>, tensor<8x4xf32>, tensor<8x16xf16>\n}\n";
    static const char two[] =
        "sdy.mesh @mesh = <[\"x\"=2]>\n"
        "func.func @main(%arg0: tensor<6x4xf16> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{}, {\"x\"}]>}) -> tensor<6xf16> {\n"
        "  %z = stablehlo.constant dense<0xFC00> : tensor<f16>\n"
        "  %0 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.maximum across dimensions = "
        "[1] : (tensor<6x4xf16>, tensor<f16>) -> tensor<6xf16>\n"
        "  return %0 : tensor<6xf16>\n}\n";
    static const char conv[] =
        MESH "func.func @main(%arg0: tensor<4x5x5x2xbf16> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\", \"y\"}, {}, {}, {}]>}, %arg1: tensor<3x3x2x3xbf16>) -> "
             "tensor<4x3x3x3xbf16> {\n"
             "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
             "o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], rhs_dilate = "
             "[1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
             "(tensor<4x5x5x2xbf16>, tensor<3x3x2x3xbf16>) -> tensor<4x3x3x3xbf16>\n"
             "  return %0 : tensor<4x3x3x3xbf16>\n}\n";
    assert_matches(mod, 4);
    assert_matches(two, 2);
    static const char pool[] =
        MESH "func.func @main(%arg0: tensor<4x6x5x3xbf16> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {}, {}, {}]>}, %arg1: tensor<4x3x3x3xbf16> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{\"x\"}, {}, {}, {}]>}) -> (tensor<4x3x3x3xbf16>, "
             "tensor<4x6x5x3xbf16>) {\n"
             "  %c = stablehlo.constant dense<0xFF80> : tensor<bf16>\n"
             "  %0 = \"stablehlo.reduce_window\"(%arg0, %c) ({\n"
             "  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):\n"
             "    %m = stablehlo.maximum %a, %b : tensor<bf16>\n"
             "    stablehlo.return %m : tensor<bf16>\n"
             "  }) {padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : tensor<4x2xi64>, "
             "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, "
             "1>} : (tensor<4x6x5x3xbf16>, tensor<bf16>) -> tensor<4x3x3x3xbf16>\n"
             "  %z = stablehlo.constant dense<0.000000e+00> : tensor<bf16>\n"
             "  %1 = \"stablehlo.select_and_scatter\"(%arg0, %arg1, %z) ({\n"
             "  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):\n"
             "    %g = stablehlo.compare GE, %a, %b, FLOAT : (tensor<bf16>, tensor<bf16>) -> "
             "tensor<i1>\n"
             "    stablehlo.return %g : tensor<i1>\n"
             "  }, {\n"
             "  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):\n"
             "    %s = stablehlo.add %a, %b : tensor<bf16>\n"
             "    stablehlo.return %s : tensor<bf16>\n"
             "  }) {padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : tensor<4x2xi64>, "
             "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, "
             "1>} : (tensor<4x6x5x3xbf16>, tensor<4x3x3x3xbf16>, tensor<bf16>) -> "
             "tensor<4x6x5x3xbf16>\n"
             "  return %0, %1 : tensor<4x3x3x3xbf16>, tensor<4x6x5x3xbf16>\n}\n";
    assert_matches(conv, 4);
    assert_matches(pool, 4);
}

/* A module run as given whose reverse is held sharded along the reversed
 * dimension (4 rows a device, blocks not dividing evenly: 10 rows): each
 * device reads its rows from the mirrored blocks (a slice with stride -1
 * reading across devices), on 2 and 4 devices. */
static void test_ex_exec_run_reverse_on_sharded_dim_reads_mirrored_blocks(void **state)
{
    (void)state;
    static const char mod[] =
        "sdy.mesh @mesh = <[\"x\"=%u]>\n"
        "func.func @main(%%arg0: tensor<10x3xi32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) -> (tensor<10x3xi32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}) {\n"
        "  %%0 = stablehlo.reverse %%arg0, dims = [0, 1] {sdy.sharding = "
        "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : tensor<10x3xi32>\n"
        "  return %%0 : tensor<10x3xi32>\n}\n";
    for (uint32_t devs = 2; devs <= 4; devs += 2) {
        char text[1024];
        snprintf(text, sizeof text, mod, devs);
        sp_module *m = NULL;
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
        int32_t a[30];
        for (int i = 0; i < 30; i++) {
            a[i] = i;
        }
        ex_tensor arg = {SP_ELEM_I32, 2, {10, 3}, 30, a};
        ex_tensor *res = NULL;
        uint32_t n_res = 0;
        ex_exec_opts o = {.n_devices = devs, .iters = 1};
        cm_status st = ex_exec_run(m, &o, &arg, 1, &res, &n_res, &err);
        if (st != CM_OK) {
            fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
        }
        assert_int_equal(n_res, 1);
        const int32_t *r = res[0].data;
        for (int i = 0; i < 30; i++) {
            assert_int_equal(r[i], 29 - i);
        }
        ex_tensors_free(res, n_res);
        sp_module_destroy(m);
    }
}

static void test_ex_exec_run_unsupported_op_is_a_clear_error(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.tan %arg0 : tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n}\n";
    ex_check_opts o = {.n_devices = 1, .iters = 1, .seed = 1};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_check_text(mod, strlen(mod), &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.msg, "op stablehlo.tan cannot be executed yet");
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

/* pad, gather, convolution and integer element-wise ops and reduce on
 * partitioned modules (their kernels: test_ex_kern.c). */
static void test_ex_check_text_new_ops_partitioned_match(void **state)
{
    (void)state;
    /* pad on the unsharded dim of a batch-sharded tensor, f32 */
    assert_matches(MESH "func.func @main(%arg0: tensor<8x5xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}]>}) -> tensor<8x12xf32> {\n"
                        "  %c = stablehlo.constant dense<2.5> : tensor<f32>\n"
                        "  %0 = stablehlo.pad %arg0, %c, low = [0, 2], high = [0, 1], interior "
                        "= [0, 1] : (tensor<8x5xf32>, tensor<f32>) -> tensor<8x12xf32>\n"
                        "  %1 = stablehlo.exponential %0 : tensor<8x12xf32>\n"
                        "  return %1 : tensor<8x12xf32>\n}\n",
                   4);
    /* an embedding lookup: indices sharded on the batch */
    assert_matches(MESH "func.func @main(%arg0: tensor<10x6xf32>, %arg1: tensor<8x1xi32> "
                        "{sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) -> "
                        "tensor<8x6xf32> {\n"
                        "  %0 = \"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = "
                        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
                        "start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = "
                        "false, slice_sizes = array<i64: 1, 6>} : (tensor<10x6xf32>, "
                        "tensor<8x1xi32>) -> tensor<8x6xf32>\n"
                        "  return %0 : tensor<8x6xf32>\n}\n",
                   4);
    /* a batch-sharded NHWC convolution, f64 */
    assert_matches(MESH "func.func @main(%arg0: tensor<4x5x5x3xf64> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}, {}, {}]>}, %arg1: "
                        "tensor<3x3x3x2xf64>) -> tensor<4x3x3x2xf64> {\n"
                        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, "
                        "f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, "
                        "1], [1, 1]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, "
                        "feature_group_count = 1 : i64} : (tensor<4x5x5x3xf64>, "
                        "tensor<3x3x3x2xf64>) -> tensor<4x3x3x2xf64>\n"
                        "  return %0 : tensor<4x3x3x2xf64>\n}\n",
                   4);
    /* a batch-sharded 2 x 2 max pool (reduce_window) */
    assert_matches(MESH "func.func @main(%arg0: tensor<4x6x5x3xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}, {}, {}]>}) -> tensor<4x3x3x3xf32> {\n"
                        "  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>\n"
                        "  %0 = \"stablehlo.reduce_window\"(%arg0, %c) ({\n"
                        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
                        "    %m = stablehlo.maximum %a, %b : tensor<f32>\n"
                        "    stablehlo.return %m : tensor<f32>\n"
                        "  }) {padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : "
                        "tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 1>, "
                        "window_strides = array<i64: 1, 2, 2, 1>} : (tensor<4x6x5x3xf32>, "
                        "tensor<f32>) -> tensor<4x3x3x3xf32>\n"
                        "  return %0 : tensor<4x3x3x3xf32>\n}\n",
                   4);
    /* integer element-wise, compare, select and reduce on a sharded tensor */
    assert_matches(MESH "func.func @main(%arg0: tensor<6x7xi32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}, %arg1: tensor<6x7xi32>) -> "
                        "(tensor<6x7xi32>, tensor<6xi32>) {\n"
                        "  %0 = stablehlo.multiply %arg0, %arg1 : tensor<6x7xi32>\n"
                        "  %1 = stablehlo.compare GT, %0, %arg1 : (tensor<6x7xi32>, "
                        "tensor<6x7xi32>) -> tensor<6x7xi1>\n"
                        "  %2 = stablehlo.select %1, %0, %arg0 : tensor<6x7xi1>, "
                        "tensor<6x7xi32>\n"
                        "  %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<6x7xi32>) -> "
                        "tensor<7x6xi32>\n"
                        "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
                        "  %4 = stablehlo.reduce(%3 init: %c) applies stablehlo.add across "
                        "dimensions = [0] : (tensor<7x6xi32>, tensor<i32>) -> tensor<6xi32>\n"
                        "  return %2, %4 : tensor<6x7xi32>, tensor<6xi32>\n}\n",
                   4);
}

/* sort sharded on its other dimension (per device), and on its sort
 * dimension (the partitioner gathers it first); select_and_scatter (a max
 * pool's gradient) sharded on the batch. */
static void test_ex_check_text_sort_select_scatter_partitioned_match(void **state)
{
    (void)state;
#define SORT_MOD(sh)                                                                               \
    MESH "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, " sh        \
         ">}) -> (tensor<8x16xf32>, tensor<8x16xi32>) {\n"                                         \
         "  %i = stablehlo.iota dim = 1 : tensor<8x16xi32>\n"                                      \
         "  %0:2 = \"stablehlo.sort\"(%arg0, %i) ({\n"                                             \
         "  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):\n"           \
         "    %x = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> "      \
         "tensor<i1>\n"                                                                            \
         "    stablehlo.return %x : tensor<i1>\n"                                                  \
         "  }) {dimension = 1 : i64, is_stable = true} : (tensor<8x16xf32>, tensor<8x16xi32>) "    \
         "-> (tensor<8x16xf32>, tensor<8x16xi32>)\n"                                               \
         "  %1 = stablehlo.exponential %0#0 : tensor<8x16xf32>\n"                                  \
         "  return %1, %0#1 : tensor<8x16xf32>, tensor<8x16xi32>\n}\n"
    assert_matches(SORT_MOD("[{\"x\", \"y\"}, {}]"), 4);
    assert_matches(SORT_MOD("[{\"x\"}, {\"y\"}]"), 4);
#undef SORT_MOD
    assert_matches(
        MESH "func.func @main(%arg0: tensor<4x6x5x3xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {}, {}, {}]>}, %arg1: tensor<4x3x3x3xf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{\"x\"}, {}, {}, {}]>}) -> tensor<4x6x5x3xf32> {\n"
             "  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
             "  %0 = \"stablehlo.select_and_scatter\"(%arg0, %arg1, %z) ({\n"
             "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
             "    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> "
             "tensor<i1>\n"
             "    stablehlo.return %c : tensor<i1>\n"
             "  }, {\n"
             "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
             "    %s = stablehlo.add %a, %b : tensor<f32>\n"
             "    stablehlo.return %s : tensor<f32>\n"
             "  }) {padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : tensor<4x2xi64>, "
             "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, "
             "1>} : (tensor<4x6x5x3xf32>, tensor<4x3x3x3xf32>, tensor<f32>) -> "
             "tensor<4x6x5x3xf32>\n"
             "  return %0 : tensor<4x6x5x3xf32>\n}\n",
        4);
}

/* Integer dots: i8 x i8 -> i8 wrapping (the operands multiplied by 37
 * first, so they wrap too) and i8 x i8 -> i32, sharded on free dims;
 * i16 x i16 -> i32 with the contraction sharded (partial sums all-reduced). */
static void test_ex_check_text_integer_dots_partitioned_match(void **state)
{
    (void)state;
    assert_matches(
        MESH "func.func @main(%arg0: tensor<8x16xi8> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"x\"}, {}]>}, %arg1: tensor<16x6xi8> {sdy.sharding = #sdy.sharding<@mesh, [{}, "
             "{\"y\"}]>}) -> (tensor<8x6xi8>, tensor<8x6xi32>) {\n"
             "  %c = stablehlo.constant dense<37> : tensor<8x16xi8>\n"
             "  %a = stablehlo.multiply %arg0, %c : tensor<8x16xi8>\n"
             "  %0 = stablehlo.dot_general %a, %arg1, contracting_dims = [1] x [0] : "
             "(tensor<8x16xi8>, tensor<16x6xi8>) -> tensor<8x6xi8>\n"
             "  %1 = stablehlo.dot_general %a, %arg1, contracting_dims = [1] x [0] : "
             "(tensor<8x16xi8>, tensor<16x6xi8>) -> tensor<8x6xi32>\n"
             "  return %0, %1 : tensor<8x6xi8>, tensor<8x6xi32>\n}\n",
        4);
    assert_matches(MESH "func.func @main(%arg0: tensor<4x8x16xi16> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}, {\"y\"}]>}, %arg1: "
                        "tensor<4x16x6xi16> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
                        "{\"y\"}, {}]>}) -> tensor<4x8x6xi32> {\n"
                        "  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], "
                        "contracting_dims = [2] x [1] : (tensor<4x8x16xi16>, tensor<4x16x6xi16>) "
                        "-> tensor<4x8x6xi32>\n"
                        "  return %0 : tensor<4x8x6xi32>\n}\n",
                   4);
}

/* Convolutions JAX emits in training: depthwise (feature groups) sharded on
 * the batch and on the channels (each device holds whole groups), a
 * transposed one (lhs dilation, reversed window) sharded on the batch, and
 * a weight gradient (batch groups) with the batch sharded, i.e. one batch
 * group per device. */
static void test_ex_check_text_grouped_dilated_convs_partitioned_match(void **state)
{
    (void)state;
    assert_matches(MESH "func.func @main(%arg0: tensor<4x6x6x4xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}, {}, {}]>}, %arg1: "
                        "tensor<3x3x1x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, "
                        "{\"y\"}]>}) -> tensor<4x3x3x8xf32> {\n"
                        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, "
                        "f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, "
                        "1], [1, 1]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, "
                        "feature_group_count = 4 : i64} : (tensor<4x6x6x4xf32>, "
                        "tensor<3x3x1x8xf32>) -> tensor<4x3x3x8xf32>\n"
                        "  return %0 : tensor<4x3x3x8xf32>\n}\n",
                   4);
    assert_matches(MESH "func.func @main(%arg0: tensor<4x3x3x2xf64> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\", \"y\"}, {}, {}, {}]>}, %arg1: "
                        "tensor<3x3x2x3xf64>) -> tensor<4x6x6x3xf64> {\n"
                        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, "
                        "f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, "
                        "2], [1, 2]], lhs_dilate = [2, 2], rhs_dilate = [1, 1], reverse = [true, "
                        "true]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
                        "(tensor<4x3x3x2xf64>, tensor<3x3x2x3xf64>) -> tensor<4x6x6x3xf64>\n"
                        "  return %0 : tensor<4x6x6x3xf64>\n}\n",
                   4);
    assert_matches(MESH "func.func @main(%arg0: tensor<3x5x5x4xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{}, {}, {}, {\"x\"}]>}, %arg1: "
                        "tensor<3x4x4x6xf32>) -> tensor<2x2x2x6xf32> {\n"
                        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [f, 0, 1, "
                        "b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[0, "
                        "0], [0, 0]], rhs_dilate = [1, 1]} {batch_group_count = 2 : i64, "
                        "feature_group_count = 1 : i64} : (tensor<3x5x5x4xf32>, "
                        "tensor<3x4x4x6xf32>) -> tensor<2x2x2x6xf32>\n"
                        "  return %0 : tensor<2x2x2x6xf32>\n}\n",
                   4);
}

/* A module run as given (not partitioned) whose sort is held sharded along
 * its sort dimension: a clear error, not a wrong answer. */
static void test_ex_exec_run_sort_on_sharded_sort_dim_is_a_clear_error(void **state)
{
    (void)state;
    static const char mod[] =
        "sdy.mesh @mesh = <[\"x\"=2]>\n"
        "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) "
        "-> tensor<8xf32> {\n"
        "  %0 = \"stablehlo.sort\"(%arg0) ({\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %c = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }) {dimension = 0 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"x\"}]>]>} : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n}\n";
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(mod, strlen(mod), 0, &m, &err), CM_OK);
    ex_tensor *args = NULL, *res = NULL;
    uint32_t n_args = 0, n_res = 0;
    assert_int_equal(ex_args_make(m, 1, &args, &n_args, &err), CM_OK);
    ex_exec_opts o = {.n_devices = 2, .iters = 1};
    assert_int_equal(ex_exec_run(m, &o, args, n_args, &res, &n_res, &err), CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "sharded along its sort dimension"));
    ex_tensors_free(args, n_args);
    sp_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_check_text_flax_mlp_8_devices_matches),
        cmocka_unit_test(test_ex_exec_run_all_reduce_matches),
        cmocka_unit_test(test_ex_exec_run_reduce_scatter_matches),
        cmocka_unit_test(test_ex_exec_run_all_gather_matches),
        cmocka_unit_test(test_ex_exec_run_integer_reductions_wrap),
        cmocka_unit_test(test_ex_exec_run_all_slice_matches),
        cmocka_unit_test(test_ex_exec_run_all_to_all_matches),
        cmocka_unit_test(test_ex_exec_run_collective_permute_matches),
        cmocka_unit_test(test_ex_check_modules_transformer_dp_matches),
        cmocka_unit_test(test_ex_check_modules_transformer_tp_matches),
        cmocka_unit_test(test_ex_check_modules_transformer_dp_tp_matches),
        cmocka_unit_test(test_ex_check_modules_transformer_train_matches),
        cmocka_unit_test(test_ex_exec_run_collectives_uneven_groups_match),
        cmocka_unit_test(test_ex_exec_run_collectives_padded_shards_match),
        cmocka_unit_test(test_ex_exec_run_collectives_sub_axes_match),
        cmocka_unit_test(test_ex_exec_run_large_collectives_match),
        cmocka_unit_test(test_ex_exec_run_all_to_all_scatter_paths_match),
        cmocka_unit_test(test_ex_exec_run_wrong_collective_mismatches),
        cmocka_unit_test(test_ex_check_text_sharded_iota_broadcast_match),
        cmocka_unit_test(test_ex_check_text_mixed_ops_match),
        cmocka_unit_test(test_ex_exec_run_unsupported_op_is_a_clear_error),
        cmocka_unit_test(test_ex_tensors_compare_reports_first_mismatch),
        cmocka_unit_test(test_ex_check_text_new_ops_partitioned_match),
        cmocka_unit_test(test_ex_check_text_jax_elementwise_ops_partitioned_match),
        cmocka_unit_test(test_ex_check_text_half_types_partitioned_match),
        cmocka_unit_test(test_ex_exec_run_reverse_on_sharded_dim_reads_mirrored_blocks),
        cmocka_unit_test(test_ex_check_text_sort_select_scatter_partitioned_match),
        cmocka_unit_test(test_ex_exec_run_sort_on_sharded_sort_dim_is_a_clear_error),
        cmocka_unit_test(test_ex_check_text_integer_dots_partitioned_match),
        cmocka_unit_test(test_ex_check_text_grouped_dilated_convs_partitioned_match),
    };
    return cmocka_run_group_tests_name("ex_exec", tests, NULL, NULL);
}
