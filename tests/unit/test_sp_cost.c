/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_cost and sp_profile_json: the cost figures of the
 * Flax MLP on data=2 x model=4 and of a data-parallel and a tensor-parallel
 * transformer block against values computed by hand; the collective formulas
 * on an explicitly partitioned module; the overlap model and the OOM check;
 * the shipped device profiles and the decoder's JSON Pointer errors; the plan
 * document's cost section; OOM. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "sp_collectives.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_pipeline.h"
#include "sp_plan_json.h"
#include "sp_profile_json.h"
#include "sp_reshard.h"
#include "sp_diag.h"
#include "sp_mlir.h"
#include "sp_input.h"

#define KIB 1024.0

/* Relative closeness of two computed times. */
static bool near(double a, double b)
{
    double d = a > b ? a - b : b - a, m = b > 0 ? b : -b;
    return d <= 1e-12 * (m > 1 ? m : 1);
}
#define MIB (1024.0 * 1024.0)

/* The module of an MLIR file after -sdy-propagation-pipeline. */
static sp_module *planned_mlir(const char *path)
{
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    cm_status st = sp_input_load(path, NULL, &in, &err);
    if (st != CM_OK) {
        fprintf(stderr, "%s: %s %s\n", path, err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_null(in.g);
    assert_true(in.propagated);
    return in.m;
}

static sp_cost *cost_of(sp_module *m, const sp_cost_opts *o)
{
    sp_cost *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_cost_compute(m, o, &c, &err), CM_OK);
    assert_non_null(c);
    return c;
}

/* ---- Flax MLP ------------------------------------------------------------------------- */

/* 8 kernels of 1024x1024 f32, each sharded 4 ways on "model": 8 * 4 MiB / 4
 * = 8 MiB per device; x (8x1024 f32) on "data": 4x1024 f32 = 16 KiB. Each
 * layer's z = y @ W2 contracts a dimension sharded on "model": its result
 * (local 4x1024 f32 = 16 KiB) is all-reduced over the 4 devices of "model",
 * 2 * 3/4 * 16 KiB = 24 KiB per device; 4 layers, 96 KiB. FLOPs per layer:
 * x @ W1 local 4x1024 by 1024x256 = 2*4*256*1024, y @ W2 local 4x256 by
 * 256x1024 = 2*4*1024*256, relu 4*256 element-wise. Peak activations: the
 * W2 dot's result (16 KiB) while its operand (4 KiB, the constraint aliases
 * the maximum) is live = 20 KiB, plus the f32 zero all four layers share
 * (the constant merger keeps one, as Shardy's does) = 20 KiB + 4 B. */
static void test_sp_cost_flax_mlp_hand_values(void **state)
{
    (void)state;
    sp_module *m = planned_mlir("examples/flax_mlp.mlir");
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = cost_of(m, &o);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_false(s->partitioned);
    assert_int_equal(s->devices, 8);
    assert_true(s->param_bytes == 8 * MIB);
    assert_true(s->input_bytes == 16 * KIB);
    assert_true(s->output_bytes == 16 * KIB);
    assert_int_equal(s->peak_activation_bytes, 20 * KIB + 4);
    assert_int_equal(s->peak_bytes, 8 * MIB + 36 * KIB + 4);
    assert_true(s->flops_dot == 4 * (2.0 * 4 * 256 * 1024 + 2.0 * 4 * 1024 * 256));
    assert_true(s->flops_elementwise == 4 * 4.0 * 256);
    assert_int_equal(sp_cost_n_colls(c), 4);
    for (uint32_t i = 0; i < 4; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(c, i);
        assert_int_equal(k->kind, SP_COLL_ALL_REDUCE);
        assert_true(k->implied);
        assert_int_equal(k->n_axes, 1);
        assert_string_equal(k->axes[0], "model");
        assert_int_equal(k->group, 4);
        assert_true(k->tensor_bytes == 16 * KIB);
        assert_true(k->bytes == 24 * KIB);
        assert_string_equal(m->ops[k->op].name, "stablehlo.dot_general");
    }
    assert_true(s->comm_bytes == 96 * KIB);
    assert_int_equal(sp_cost_n_axes(c), 1);
    assert_string_equal(sp_cost_axis_at(c, 0)->axes, "model");
    assert_true(sp_cost_axis_at(c, 0)->bytes == 96 * KIB);
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* Step time: with the cpu-local link (6 GB/s, 75 us a step) one 24 KiB ring
 * all-reduce over 4 devices takes 6 steps * 75 us + 24576 / 6e9 s. */
static void test_sp_cost_time_and_overlap(void **state)
{
    (void)state;
    sp_module *m = planned_mlir("examples/flax_mlp.mlir");
    sp_profile p;
    sp_profile_default(&p);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.profile = &p;
    sp_cost *c = cost_of(m, &o);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    double one = 6 * 75e-6 + 24576.0 / 6e9;
    assert_true(near(sp_cost_coll_at(c, 0)->time_s, one));
    assert_true(near(s->comm_s, 4 * one));
    assert_true(s->compute_s > 0);
    assert_true(near(s->step_s, s->compute_s + s->comm_s));
    double compute = s->compute_s, comm = s->comm_s;
    sp_cost_destroy(c);
    /* overlap 1: communication hides behind compute up to the compute time */
    o.overlap = 1.0;
    c = cost_of(m, &o);
    s = sp_cost_get_summary(c);
    double hidden = comm < compute ? comm : compute;
    assert_true(near(s->hidden_s, hidden));
    assert_true(near(s->step_s, compute + comm - hidden));
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* 8 MiB + 36 KiB on a device with 4 MiB: the message users see. */
static void test_sp_cost_oom_predicted(void **state)
{
    (void)state;
    sp_module *m = planned_mlir("examples/flax_mlp.mlir");
    sp_profile p;
    sp_profile_default(&p);
    p.mem_bytes = 4 * MIB;
    p.mem_shared = false;
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.profile = &p;
    sp_cost *c = cost_of(m, &o);
    assert_false(sp_cost_get_summary(c)->fits);
    char msg[128];
    sp_cost_oom_message(c, msg, sizeof msg);
    assert_string_equal(msg, "OOM predicted on every device: 8.0 MiB > 4 MiB");
    sp_cost_destroy(c);
    /* shared memory: 24 GiB over 8 devices is 3 GiB each, which fits */
    sp_profile_default(&p);
    c = cost_of(m, &o);
    assert_true(sp_cost_get_summary(c)->fits);
    assert_true(sp_cost_get_summary(c)->capacity_bytes == 3.0 * 1024 * MIB);
    sp_cost_oom_message(c, msg, sizeof msg);
    assert_string_equal(msg, "");
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* ---- transformer blocks ------------------------------------------------------------------ */

static sp_cost *transformer_cost(sp_example_strategy strategy, sp_graph **g_out)
{
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.strategy = strategy;
    eo.layers = 1; /* d_model 1024, 8 heads, seq 128, batch 8, data=2 x model=4 */
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_example_graph_json(&eo, &b, &err), CM_OK);
    sp_graph *g = NULL;
    assert_int_equal(sp_graph_decode(b.data, b.len, NULL, &g, &err), CM_OK);
    cm_buf_fini(&b);
    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    po.custom = sp_graph_custom_rules(g);
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_pass_propagation_pipeline(sp_graph_module(g), &po, &d, &err), CM_OK);
    sp_diags_fini(&d);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    if (g != NULL) {
        o.value_names = sp_graph_value_names(g, &o.n_value_names);
    }
    *g_out = g;
    return cost_of(sp_graph_module(g), &o);
}

/* Parameters per block: Wq, Wk, Wv, Wo (1024x1024) and W1, W2 (1024x4096):
 * 12 * 1024^2 f32 = 48 MiB. Data parallel: parameters replicated, x
 * (8x128x1024 f32 = 4 MiB) split on "data" = 2 MiB, no communication in the
 * forward pass. Dot FLOPs with 4 of the 8 sequences: q, k, v, o projections
 * 4 * 2*512*1024*1024, scores and context 2 * 2*4*8*128*128*128, MLP
 * 2 * 2*512*1024*4096. */
static void test_sp_cost_transformer_data_parallel(void **state)
{
    (void)state;
    sp_graph *g;
    sp_cost *c = transformer_cost(SP_EXAMPLE_DP, &g);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(s->param_bytes == 48 * MIB);
    assert_true(s->input_bytes == 2 * MIB);
    assert_true(s->comm_bytes == 0);
    assert_int_equal(sp_cost_n_colls(c), 0);
    double dot = 4 * 2.0 * 512 * 1024 * 1024 + 2 * 2.0 * 4 * 8 * 128 * 128 * 128 +
                 2 * 2.0 * 512 * 1024 * 4096;
    assert_true(s->flops_dot == dot);
    sp_cost_destroy(c);
    sp_graph_destroy(g);
}

/* Tensor parallel (heads and mlp on "model"): parameters 48 MiB / 4 = 12
 * MiB, x replicated (4 MiB). The attention output projection contracts the
 * heads and the MLP's second matmul the hidden dimension, both sharded on
 * "model": two all-reduces of the 8x128x1024 f32 result (4 MiB) over 4
 * devices, 2 * 3/4 * 4 MiB = 6 MiB each. Dot FLOPs: all 1024 tokens, a
 * quarter of the heads and of the MLP width. */
static void test_sp_cost_transformer_tensor_parallel(void **state)
{
    (void)state;
    sp_graph *g;
    sp_cost *c = transformer_cost(SP_EXAMPLE_TP, &g);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(s->param_bytes == 12 * MIB);
    assert_true(s->input_bytes == 4 * MIB);
    assert_int_equal(sp_cost_n_colls(c), 2);
    for (uint32_t i = 0; i < 2; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(c, i);
        assert_int_equal(k->kind, SP_COLL_ALL_REDUCE);
        assert_string_equal(k->axes[0], "model");
        assert_int_equal(k->group, 4);
        assert_true(k->tensor_bytes == 4 * MIB);
        assert_true(k->bytes == 6 * MIB);
    }
    assert_true(s->comm_bytes == 12 * MIB);
    double dot = 4 * 2.0 * 1024 * 1024 * 256 + 2 * 2.0 * 8 * 2 * 128 * 128 * 128 +
                 2 * 2.0 * 1024 * 1024 * 1024;
    assert_true(s->flops_dot == dot);
    sp_cost_destroy(c);
    sp_graph_destroy(g);
}

/* ---- explicit collectives ------------------------------------------------------------------ */

static const char partitioned[] =
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
    "func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "
    "{\"model\"}]>}) -> tensor<8x1024xf32> {\n"
    "  %0 = sdy.all_gather [{}, {\"model\"}] %arg0 out_sharding=<@mesh, [{\"data\"}, {}]> : "
    "tensor<8x1024xf32>\n"
    "  %1 = sdy.all_reduce {\"model\"} %0 out_sharding=<@mesh, [{\"data\"}, {}]> : "
    "tensor<8x1024xf32>\n"
    "  %2 = sdy.all_slice [{}, {\"model\"}] %1 out_sharding=<@mesh, [{\"data\"}, {\"model\"}]> : "
    "tensor<8x1024xf32>\n"
    "  %3 = sdy.all_to_all [{\"model\"}: 1->0] %2 out_sharding=<@mesh, [{\"data\", \"model\"}, "
    "{}]> : tensor<8x1024xf32>\n"
    "  %4 = sdy.collective_permute %3 out_sharding=<@mesh, [{\"model\", \"data\"}, {}]> : "
    "tensor<8x1024xf32>\n"
    "  return %4 : tensor<8x1024xf32>\n"
    "}\n";

/* Local shard of x on data x model: 4x256 f32 = 4 KiB. all_gather over
 * model to 4x1024 (16 KiB): 3/4 * 16 KiB = 12 KiB; all_reduce of 16 KiB over
 * 4: 24 KiB; all_slice: 0; all_to_all of the 4 KiB shard: 3 KiB; permute of
 * the 1x1024 shard (4 KiB): 4 KiB. */
static void test_sp_cost_explicit_collective_formulas(void **state)
{
    (void)state;
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(partitioned, sizeof partitioned - 1, 0, &m, &err), CM_OK);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = cost_of(m, &o);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(s->partitioned);
    assert_int_equal(sp_cost_n_colls(c), 5);
    static const sp_coll_kind kinds[5] = {SP_COLL_ALL_GATHER, SP_COLL_ALL_REDUCE,
                                          SP_COLL_ALL_SLICE, SP_COLL_ALL_TO_ALL, SP_COLL_PERMUTE};
    static const double bytes[5] = {12 * KIB, 24 * KIB, 0, 3 * KIB, 4 * KIB};
    for (uint32_t i = 0; i < 5; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(c, i);
        assert_int_equal(k->kind, kinds[i]);
        assert_false(k->implied);
        assert_true(k->bytes == bytes[i]);
    }
    assert_int_equal(sp_cost_coll_at(c, 0)->group, 4);
    assert_true(s->comm_bytes == 43 * KIB);
    assert_true(s->input_bytes == 4 * KIB);
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* The same collectives on a 2x1 mesh: the ones over "model" (size 1) group
 * one device each, move nothing and are not counted; the permute still is
 * (a group of its own pairs), and the all_to_all over data-model is none. */
static void test_sp_cost_size_one_groups_not_counted(void **state)
{
    (void)state;
    char text[sizeof partitioned];
    memcpy(text, partitioned, sizeof partitioned);
    char *p = strstr(text, "\"model\"=4");
    assert_non_null(p);
    p[8] = '1';
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = cost_of(m, &o);
    assert_int_equal(sp_cost_n_colls(c), 1);
    assert_int_equal(sp_cost_coll_at(c, 0)->kind, SP_COLL_PERMUTE);
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* Partitioned by -sdy-insert-explicit-reshards and -sdy-reshard-to-collectives,
 * the MLP holds the four sdy.all_reduce ops the implied estimate predicted:
 * the same 4 x 24 KiB over "model", now read from the program. */
static void test_sp_cost_partitioned_mlp_matches_implied(void **state)
{
    (void)state;
    sp_module *m = planned_mlir("examples/flax_mlp.mlir");
    cm_error err;
    cm_error_clear(&err);
    sp_reshard_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.full_version = true;
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_pass_insert_explicit_reshards(m, &ro, &d, &err), CM_OK);
    sp_diags_fini(&d);
    assert_int_equal(sp_pass_reshard_to_collectives(m, false, &err), CM_OK);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = cost_of(m, &o);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(s->partitioned);
    assert_int_equal(sp_cost_n_colls(c), 4);
    for (uint32_t i = 0; i < 4; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(c, i);
        assert_int_equal(k->kind, SP_COLL_ALL_REDUCE);
        assert_false(k->implied);
        assert_string_equal(m->ops[k->op].name, "sdy.all_reduce");
        assert_true(k->bytes == 24 * KIB);
    }
    assert_true(s->comm_bytes == 96 * KIB);
    assert_true(s->param_bytes == 8 * MIB);
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

/* ---- profiles ---------------------------------------------------------------------------- */

/* A counted while loop (the form jax.lax.fori_loop and scan emit): the
 * body's ops count once per trip and the condition's once more; a loop
 * whose bound is not a constant counts its body once, as before. FLOPs:
 * the 8x16 by 16x16 dot is 2*8*16*16 = 4096, the add 8*16 = 128 per trip,
 * the compare 1 and the counter's add 1 per evaluation. */
static void check_loop(const char *start, const char *cmp, const char *bound,
                       const char *step, double trips)
{
    char text[2048];
    snprintf(text, sizeof text,
             "func.func @main(%%arg0: tensor<8x16xf32>, %%arg1: tensor<16x16xf32>, "
             "%%argn: tensor<i32>) -> tensor<8x16xf32> {\n"
             "  %%c0 = stablehlo.constant dense<%s> : tensor<i32>\n"
             "  %%0:2 = stablehlo.while(%%i = %%c0, %%x = %%arg0) : tensor<i32>, "
             "tensor<8x16xf32>\n"
             "   cond {\n"
             "    %%n = stablehlo.constant dense<%s> : tensor<i32>\n"
             "    %%1 = stablehlo.compare %s, %%i, %s : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
             "    stablehlo.return %%1 : tensor<i1>\n"
             "  } do {\n"
             "    %%s = stablehlo.constant dense<%s> : tensor<i32>\n"
             "    %%2 = stablehlo.add %%i, %%s : tensor<i32>\n"
             "    %%3 = stablehlo.dot_general %%x, %%arg1, contracting_dims = [1] x [0] : "
             "(tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>\n"
             "    %%4 = stablehlo.add %%3, %%x : tensor<8x16xf32>\n"
             "    stablehlo.return %%2, %%4 : tensor<i32>, tensor<8x16xf32>\n"
             "  }\n"
             "  return %%0#1 : tensor<8x16xf32>\n}\n",
             start, bound[0] == '%' ? "0" : bound, cmp, bound[0] == '%' ? bound : "%n", step);
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read(text, strlen(text), 0, &m, &err) != CM_OK) {
        fail_msg("%s: %s\n%s", err.path, err.msg, text);
    }
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = cost_of(m, &o);
    /* trips < 0: not a counted loop, the body and the condition once each */
    double want = trips < 0 ? 4096 + 128 + 1 + 1 : trips * (4096 + 128 + 1) + (trips + 1) * 1;
    if (!near(sp_cost_get_summary(c)->flops, want)) {
        fail_msg("%s %s %s step %s: %g FLOPs, want %g", start, cmp, bound, step,
                 sp_cost_get_summary(c)->flops, want);
    }
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

static void test_sp_cost_counted_while_loops(void **state)
{
    (void)state;
    check_loop("0", "LT", "10", "1", 10);
    check_loop("0", "LE", "10", "1", 11);
    check_loop("2", "LT", "11", "3", 3);  /* 2, 5, 8 */
    check_loop("10", "GT", "0", "-2", 5); /* 10, 8, 6, 4, 2 */
    check_loop("0", "LT", "0", "1", 0);
    check_loop("0", "LT", "%argn", "1", -1); /* bound not a constant: once */
    check_loop("0", "LT", "10", "-1", -1);   /* counts away from the bound */
}

#define OKHEAD "{\"name\":\"x\",\"source\":\"s\",\"memory\":{\"bytes\":1,\"bandwidth\":1},"
#define OKHEAD_PEAK                                                                                \
    OKHEAD "\"peak_flops\":{\"f32\":8e9},\"links\":{\"default\":{\"bandwidth\":1}},"
/* peak f32 8 GFLOP/s, f64 4; the curve 1 GFLOP/s at 32, 4 at 128, 8 at 1024;
 * exp 1e6 elements/s; memory 1 TB/s */
#define OKHEAD_RATES                                                                               \
    "{\"name\":\"x\",\"source\":\"s\",\"memory\":{\"bytes\":1e9,\"bandwidth\":1e12},"              \
    "\"peak_flops\":{\"f32\":8e9,\"f64\":4e9},\"links\":{\"default\":{\"bandwidth\":1}},"         \
    "\"gemm\":[{\"n\":32,\"flops\":1e9},{\"n\":128,\"flops\":4e9},{\"n\":1024,\"flops\":8e9}],"   \
    "\"transcendentals\":1e6}"

static void expect_bad(const char *doc, const char *path)
{
    sp_profile p;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_profile_decode(doc, strlen(doc), &p, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, path);
}


/* ---- kernel rates: the gemm curve and transcendentals ------------------------------------ */

/* A batched dot (4 calls of 64x32 by 32x16) and an exp of 1024 elements,
 * one device. */
static const char kernels[] =
    "func.func @main(%arg0: tensor<4x64x32xf32>, %arg1: tensor<4x32x16xf32>, %arg2: tensor<1024xf32>) "
    "-> (tensor<4x64x16xf32>, tensor<1024xf32>) {\n"
    "  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x "
    "[1] : (tensor<4x64x32xf32>, tensor<4x32x16xf32>) -> tensor<4x64x16xf32>\n"
    "  %1 = stablehlo.exponential %arg2 : tensor<1024xf32>\n"
    "  return %0, %1 : tensor<4x64x16xf32>, tensor<1024xf32>\n"
    "}\n";

static void test_sp_cost_gemm_curve_and_transcendentals(void **state)
{
    (void)state;
    const char *doc = OKHEAD_RATES;
    sp_profile p;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_profile_decode(doc, strlen(doc), &p, &err), CM_OK);
    assert_int_equal(p.n_gemm, 3);
    assert_true(p.transcendentals == 1e6);
    /* held flat beyond the ends, log-linear between points */
    assert_true(sp_profile_dot_rate(&p, SP_COST_F32, 8, 8, 8) == 1e9);
    assert_true(sp_profile_dot_rate(&p, SP_COST_F32, 4096, 4096, 4096) == 8e9);
    assert_true(near(sp_profile_dot_rate(&p, SP_COST_F32, 64, 64, 64), 2.5e9));
    assert_true(near(sp_profile_dot_rate(&p, SP_COST_F32, 128, 128, 128), 4e9));
    /* f64 keeps the curve's shape under its own peak (half of f32's) */
    assert_true(near(sp_profile_dot_rate(&p, SP_COST_F64, 128, 128, 128), 2e9));
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(kernels, sizeof kernels - 1, 0, &m, &err), CM_OK);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.profile = &p;
    o.per_op = true;
    sp_cost *c = cost_of(m, &o);
    /* each call is 64x32x16: size cbrt(32768) = 32, the curve's first point */
    double dot_f = 2.0 * 4 * 64 * 16 * 32;
    double exp_t = 1024 / 1e6; /* beyond its 8 KiB of traffic at 1 TB/s */
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(s->flops_dot == dot_f);
    assert_true(near(s->compute_s, dot_f / 1e9 + exp_t));
    sp_cost_destroy(c);
    /* without the curve and the rate: the peak, and exp is memory-bound */
    p.n_gemm = 0;
    p.transcendentals = 0;
    c = cost_of(m, &o);
    s = sp_cost_get_summary(c);
    assert_true(near(s->compute_s, dot_f / 8e9 + 1024 / 8e9)); /* 8 KiB at 1 TB/s is less */
    sp_cost_destroy(c);
    sp_module_destroy(m);
    /* a curve out of order, a bad point, a bad rate: named by pointer */
    expect_bad(OKHEAD_PEAK "\"gemm\":[{\"n\":64,\"flops\":1},{\"n\":32,\"flops\":1}]}",
               "/gemm/1/n");
    expect_bad(OKHEAD_PEAK "\"gemm\":[{\"n\":64,\"flops\":0}]}", "/gemm/0/flops");
    expect_bad(OKHEAD_PEAK "\"gemm\":[{\"n\":64}]}", "/gemm/0");
    expect_bad(OKHEAD_PEAK "\"gemm\":[]}", "/gemm");
    expect_bad(OKHEAD_PEAK "\"transcendentals\":\"fast\"}", "/transcendentals");
}

static void test_sp_profile_load_shipped_profiles(void **state)
{
    (void)state;
    static const char *const names[] = {"cpu-local", "tpu-v4", "tpu-v5e", "a100-80gb",
                                        "h100-sxm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "profiles/%s.json", names[i]);
        sp_profile p;
        cm_error err;
        cm_error_clear(&err);
        cm_status st = sp_profile_load(path, &p, &err);
        if (st != CM_OK) {
            fprintf(stderr, "%s: %s %s\n", path, err.path, err.msg);
        }
        assert_int_equal(st, CM_OK);
        assert_string_equal(p.name, names[i]);
        assert_true(strlen(p.source) > 20);
        assert_true(p.mem_bytes > 0 && p.mem_bandwidth > 0 && p.link.bandwidth > 0);
        assert_true(sp_profile_peak(&p, SP_COST_F32, false) > 0);
    }
    /* the built-in copy is the file */
    sp_profile a, b;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_profile_load("profiles/cpu-local.json", &a, &err), CM_OK);
    sp_profile_default(&b);
    assert_string_equal(a.source, b.source);
    assert_memory_equal(a.peak_flops, b.peak_flops, sizeof a.peak_flops);
    assert_true(a.mem_bytes == b.mem_bytes && a.mem_shared == b.mem_shared);
    assert_true(a.mem_bandwidth == b.mem_bandwidth);
    assert_true(a.link.bandwidth == b.link.bandwidth && a.link.latency == b.link.latency);
    assert_true(a.overlap == b.overlap);
    /* bf16 falls back to f32 on the CPU; the A100 has tf32 for f32 matmuls */
    assert_true(sp_profile_peak(&a, SP_COST_BF16, true) == 80e9);
    assert_int_equal(sp_profile_load("a100-80gb", &a, &err), CM_OK);
    assert_true(sp_profile_peak(&a, SP_COST_F32, true) == 156e12);
    assert_true(sp_profile_peak(&a, SP_COST_F32, false) == 19.5e12);
}

static void test_sp_profile_decode_rejects_bad_members(void **state)
{
    (void)state;
    expect_bad(OKHEAD "\"peak_flops\":{\"bf17\":1},\"links\":{\"default\":{\"bandwidth\":1}}}",
               "/peak_flops/bf17");
    expect_bad(OKHEAD "\"peak_flops\":{\"f32\":1},\"links\":{\"default\":{\"bandwidth\":-1}}}",
               "/links/default/bandwidth");
    expect_bad(OKHEAD "\"peak_flops\":{\"f32\":1},\"links\":{\"data\":{\"bandwidth\":1}}}",
               "/links");
    expect_bad(OKHEAD "\"peak_flops\":{\"f32\":1},\"links\":{\"default\":{\"bandwidth\":1},"
                      "\"a/b\":{\"latency\":\"x\"}}}",
               "/links/a~1b/latency");
    expect_bad(OKHEAD "\"peak_flops\":{\"f32\":1},\"links\":{\"default\":{\"bandwidth\":1}},"
                      "\"overlap\":2}",
               "/overlap");
    expect_bad("{\"name\":\"x\",\"peak_flops\":{\"f32\":1},\"memory\":{},\"links\":{\"default\":"
               "{\"bandwidth\":1}}}",
               "/source");
    expect_bad(OKHEAD "\"peak_flops\":{\"f32\":1},\"links\":{\"default\":{\"bandwidth\":1}},"
                      "\"speed\":1}",
               "/speed");
    expect_bad("{\"name\":", "");
    sp_profile p;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_profile_load("no-such-device", &p, &err), CM_ENOTFOUND);
}

/* ---- the plan document ---------------------------------------------------------------------- */

/* A module whose depth functions each call the next twice: the cost walk
 * visits the last one's op 2^(depth-1) times. */
static char *call_tree(int depth)
{
    cm_buf b;
    cm_buf_init(&b);
    const char *ty = "tensor<8x8xf32>";
    cm_buf_printf(&b,
                  "sdy.mesh @m = <[\"x\"=2]>\n"
                  "func.func @main(%%a: %s {sdy.sharding = #sdy.sharding<@m, [{\"x\"}, {}]>}) "
                  "-> %s {\n  %%0 = call @f0(%%a) : (%s) -> %s\n  return %%0 : %s\n}\n",
                  ty, ty, ty, ty, ty);
    for (int i = 0; i < depth; i++) {
        cm_buf_printf(&b, "func.func private @f%d(%%a: %s) -> %s {\n", i, ty, ty);
        if (i + 1 < depth) {
            cm_buf_printf(&b,
                          "  %%0 = call @f%d(%%a) : (%s) -> %s\n  %%1 = call @f%d(%%0) : (%s) -> "
                          "%s\n  return %%1 : %s\n}\n",
                          i + 1, ty, ty, i + 1, ty, ty, ty);
        } else {
            cm_buf_printf(&b, "  %%0 = stablehlo.add %%a, %%a : %s\n  return %%0 : %s\n}\n", ty,
                          ty);
        }
    }
    assert_false(b.oom);
    return b.data;
}

/* Costs call_tree(depth): its status, and on success the ops costed. */
static cm_status cost_call_tree(int depth, uint32_t *n_ops, cm_error *err)
{
    char *text = call_tree(depth);
    sp_input_opts io;
    sp_input_opts_init(&io);
    sp_input in;
    assert_int_equal(sp_input_read(text, strlen(text), &io, &in, err), CM_OK);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    sp_cost *c = NULL;
    cm_status st = sp_cost_compute(in.m, &o, &c, err);
    if (st == CM_OK) {
        *n_ops = sp_cost_get_summary(c)->n_ops;
    }
    sp_cost_destroy(c);
    sp_input_fini(&in);
    cm_free(text);
    return st;
}

/* Each call site costs its callee again, but a few KB of nested calls must
 * not expand into unbounded work: 2^11 leaf instances are costed, 2^30
 * (seconds to days before the bound) are refused at once. */
static void test_sp_cost_bounds_call_expansion(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    uint32_t n = 0;
    assert_int_equal(cost_call_tree(12, &n, &err), CM_OK);
    assert_true(n >= 4096); /* 2^11 adds and their returns, plus the calls */
    assert_int_equal(cost_call_tree(31, &n, &err), CM_EINVAL);
    assert_non_null(strstr(err.msg, "calls expand to more than"));
}

static void test_sp_cost_plan_section(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &text, &len, &err), CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(sp_plan_graph_json(text, len, SP_PLAN_PIPELINE, &b, &err), CM_OK);
    cm_free(text);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(j);
    json_t *cost = json_object_get(j, "cost");
    assert_true(json_is_object(cost));
    assert_string_equal(json_string_value(json_object_get(cost, "mode")), "implied");
    json_t *mem = json_object_get(cost, "memory");
    assert_int_equal(json_integer_value(json_object_get(mem, "parameter_bytes")), 8 << 20);
    json_t *comm = json_object_get(cost, "communication");
    assert_int_equal(json_integer_value(json_object_get(comm, "bytes")), 96 << 10);
    json_t *k0 = json_array_get(json_object_get(comm, "collectives"), 0);
    assert_string_equal(json_string_value(json_object_get(k0, "kind")), "all_reduce");
    assert_int_equal(json_integer_value(json_object_get(k0, "bytes")), 24 << 10);
    json_decref(j);
    cm_buf_fini(&b);
}

/* ---- OOM ------------------------------------------------------------------------------------ */

static void test_sp_cost_compute_oom(void **state)
{
    (void)state;
    sp_module *m = planned_mlir("examples/flax_mlp.mlir");
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    for (long n = 0;; n++) {
        sp_cost *c = NULL;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_cost_compute(m, &o, &c, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_true(sp_cost_get_summary(c)->comm_bytes == 96 * KIB);
            sp_cost_destroy(c);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(c);
        assert_true(n < 10000);
    }
    sp_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_cost_flax_mlp_hand_values),
        cmocka_unit_test(test_sp_cost_time_and_overlap),
        cmocka_unit_test(test_sp_cost_oom_predicted),
        cmocka_unit_test(test_sp_cost_transformer_data_parallel),
        cmocka_unit_test(test_sp_cost_transformer_tensor_parallel),
        cmocka_unit_test(test_sp_cost_explicit_collective_formulas),
        cmocka_unit_test(test_sp_cost_size_one_groups_not_counted),
        cmocka_unit_test(test_sp_cost_partitioned_mlp_matches_implied),
        cmocka_unit_test(test_sp_cost_counted_while_loops),
        cmocka_unit_test(test_sp_profile_load_shipped_profiles),
        cmocka_unit_test(test_sp_profile_decode_rejects_bad_members),
        cmocka_unit_test(test_sp_cost_gemm_curve_and_transcendentals),
        cmocka_unit_test(test_sp_cost_plan_section),
        cmocka_unit_test(test_sp_cost_bounds_call_expansion),
        cmocka_unit_test(test_sp_cost_compute_oom),
    };
    return cmocka_run_group_tests_name("sp_cost", tests, NULL, NULL);
}
