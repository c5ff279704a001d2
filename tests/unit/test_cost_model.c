/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the cost model against programs the generator writes
 * (planner/gen/sp_gen.h, sp_gen_text.c): the Flax guide's MLP unrolled and
 * as nn.scan's while loop cost the same; ZeRO's Table 1 (Rajbhandari et al.
 * 2020) and the activation memory per layer of Korthikanti et al. 2022
 * Table 2 come out of our cost model run on generated training steps, within
 * 2%; the memory timeline's JSON, under allocation failures and on loops
 * of unusual shape. Every figure is computed by sp_cost on the
 * real IR module the generated text reads into; the formulas only give the
 * expected values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_gen.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_plan_json.h"

static bool close_rel(double a, double b, double tol)
{
    double d = a > b ? a - b : b - a;
    double m = b > 0 ? b : -b;
    return d <= tol * (m > 0 ? m : 1);
}

/* Reads and propagates MLIR text (the default pipeline), partitioning it too
 * when partition is set. */
static void load(const cm_buf *text, bool partition, sp_input *in)
{
    cm_error err;
    cm_error_clear(&err);
    sp_input_opts io;
    sp_input_opts_init(&io);
    cm_status st = sp_input_read(text->data, text->len, &io, in, &err);
    if (st != CM_OK) {
        fail_msg("read: %s %s", err.path, err.msg);
    }
    if (partition) {
        st = sp_input_partition(in, &err);
        if (st != CM_OK) {
            fail_msg("partition: %s %s", err.path, err.msg);
        }
    }
}

static sp_cost *cost(sp_input *in, bool timeline)
{
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.custom = in->custom;
    o.timeline = timeline;
    sp_cost *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_cost_compute(in->m, &o, &c, &err);
    if (st != CM_OK) {
        fail_msg("cost: %s %s", err.path, err.msg);
    }
    return c;
}

/* ---- the Flax guide's MLP: unrolled and nn.scan ---------------------------------------- */

static void mlp_text(bool scan, cm_buf *b)
{
    sp_gen_mlp_opts o;
    sp_gen_mlp_opts_init(&o);
    o.scan = scan;
    cm_error err;
    cm_error_clear(&err);
    cm_buf_init(b);
    assert_int_equal(sp_gen_mlp_mlir(&o, b, &err), CM_OK);
}

/* Same peak, FLOPs, bytes on the wire and predicted step; the same
 * parameter bytes (8 kernel shards of 4 MiB) by structure alone; every
 * view of the communication counts the loop's four trips. The loop's own
 * scalars (its counter, bound and step) may add a few bytes and FLOPs. */
static void check_scan_parity(bool partition)
{
    cm_buf tu, ts;
    mlp_text(false, &tu);
    mlp_text(true, &ts);
    sp_input iu, is;
    load(&tu, partition, &iu);
    load(&ts, partition, &is);
    sp_cost *cu = cost(&iu, true), *cs = cost(&is, true);
    const sp_cost_summary *u = sp_cost_get_summary(cu), *s = sp_cost_get_summary(cs);
    assert_true(u->param_bytes == 32.0 * 1024 * 1024);
    assert_true(s->param_bytes == u->param_bytes);
    assert_true(s->input_bytes == u->input_bytes);
    if (!close_rel(s->peak_bytes, u->peak_bytes, 1e-3)) {
        fail_msg("peak: scan %g, unrolled %g", s->peak_bytes, u->peak_bytes);
    }
    if (!close_rel(s->peak_activation_bytes, u->peak_activation_bytes, 1e-3)) {
        fail_msg("peak activations: scan %g, unrolled %g", s->peak_activation_bytes,
                 u->peak_activation_bytes);
    }
    if (!close_rel(s->flops, u->flops, 1e-6)) {
        fail_msg("FLOPs: scan %g, unrolled %g", s->flops, u->flops);
    }
    assert_true(u->comm_bytes == 4 * 24.0 * 1024);
    assert_true(s->comm_bytes == u->comm_bytes);
    if (!close_rel(s->mem_traffic_bytes, u->mem_traffic_bytes, 1e-3)) {
        fail_msg("traffic: scan %g, unrolled %g", s->mem_traffic_bytes, u->mem_traffic_bytes);
    }
    if (!close_rel(s->step_s, u->step_s, 1e-3)) {
        fail_msg("step: scan %g, unrolled %g", s->step_s, u->step_s);
    }
    /* per axis and per kind both count every trip */
    for (int k = 0; k < SP_COLL_N_KINDS; k++) {
        assert_true(close_rel(s->kind_bytes[k], u->kind_bytes[k], 1e-12));
    }
    assert_true(s->kind_bytes[SP_COLL_ALL_REDUCE] == s->comm_bytes);
    double axis_total = 0, runs = 0;
    for (uint32_t i = 0; i < sp_cost_n_axes(cs); i++) {
        axis_total += sp_cost_axis_at(cs, i)->bytes;
        runs += sp_cost_axis_at(cs, i)->runs;
    }
    assert_true(axis_total == s->comm_bytes);
    assert_true(runs == 4);
    sp_cost_destroy(cu);
    sp_cost_destroy(cs);
    sp_input_fini(&iu);
    sp_input_fini(&is);
    cm_buf_fini(&tu);
    cm_buf_fini(&ts);
}

static void test_cost_scan_matches_unrolled(void **state)
{
    (void)state;
    check_scan_parity(false);
}

static void test_cost_scan_matches_unrolled_partitioned(void **state)
{
    (void)state;
    check_scan_parity(true);
}

/* The plan document's cost section (structure only, no names) agrees. */
static void test_cost_scan_plan_document(void **state)
{
    (void)state;
    double param[2], peak[2];
    for (int scan = 0; scan < 2; scan++) {
        cm_buf t, out;
        mlp_text(scan != 0, &t);
        cm_buf_init(&out);
        cm_error err;
        cm_error_clear(&err);
        sp_module *m = NULL;
        assert_int_equal(sp_mlir_read(t.data, t.len, 0, &m, &err), CM_OK);
        sp_plan_opts po;
        sp_plan_opts_init(&po);
        assert_int_equal(sp_plan_run(m, &po, &out, &err), CM_OK);
        sp_module_destroy(m);
        json_t *j = json_loadb(out.data, out.len, 0, NULL);
        assert_non_null(j);
        json_t *mem = json_object_get(json_object_get(j, "cost"), "memory");
        param[scan] = json_number_value(json_object_get(mem, "parameter_bytes"));
        json_t *tl = json_object_get(j, "memory");
        assert_true(json_is_object(tl));
        peak[scan] = json_number_value(json_object_get(json_object_get(tl, "peak"), "bytes"));
        json_decref(j);
        cm_buf_fini(&t);
        cm_buf_fini(&out);
    }
    assert_true(param[0] == 32.0 * 1024 * 1024);
    assert_true(param[1] == param[0]);
    assert_true(close_rel(peak[1], peak[0], 1e-3));
}

/* ---- the papers ------------------------------------------------------------------------ */

/* The timeline point of the first top-level op whose location name starts
 * with prefix; fails when none. */
static const sp_cost_mem_point *point_at(const sp_cost *c, const sp_module *m, const char *prefix)
{
    for (uint32_t i = 0; i < sp_cost_n_mem(c); i++) {
        const sp_cost_mem_point *p = sp_cost_mem_at(c, i);
        const sp_op *o = &m->ops[p->op];
        const char *nm = o->where != NULL ? sp_loc_name(o->where) : NULL;
        if (nm != NULL && strncmp(nm, prefix, strlen(prefix)) == 0) {
            return p;
        }
    }
    fail_msg("no op located at %s", prefix);
    return NULL;
}

/* ZeRO (Rajbhandari et al. 2020), Table 1: model-state memory per device of
 * a Psi = 7.5B model with mixed-precision Adam on N_d = 64 data-parallel
 * devices: 16 Psi (120 GB), 4 Psi + 12 Psi / N_d (31.4 GB) with the
 * optimizer states sharded, 2 Psi + 14 Psi / N_d (16.6 GB) with the
 * gradients too, 16 Psi / N_d (1.9 GB) with the parameters too. Our figure
 * is what the cost model says is live on a device where the backward pass
 * has made every gradient and the update starts: parameters and optimizer
 * states (arguments) plus activations (the gradients, and what little the
 * tiny batch leaves). The GPT below has 32 layers of hidden 4096 and MLP
 * width 20416: Psi = 7,499,677,696. */
static void test_cost_zero_table1(void **state)
{
    (void)state;
    static const double paper_gb[4] = {120, 31.4, 16.6, 1.9};
    const double psi = 7.5e9, nd = 64;
    const double formula[4] = {16 * psi, 4 * psi + 12 * psi / nd, 2 * psi + 14 * psi / nd,
                               16 * psi / nd};
    for (int stage = 0; stage < 4; stage++) {
        sp_gen_gpt_opts o;
        sp_gen_gpt_opts_init(&o);
        o.layers = 32;
        o.hidden = 4096;
        o.ffn = 20416;
        o.heads = 32;
        o.seq = 8;
        o.batch = 64;
        o.mesh_data = 64;
        o.mesh_model = 1;
        o.optimizer = SP_GEN_OPTIM_ADAM;
        o.zero_stage = stage;
        cm_buf t;
        cm_buf_init(&t);
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_gen_gpt_mlir(&o, &t, &err), CM_OK);
        sp_input in;
        load(&t, false, &in);
        sp_cost *c = cost(&in, true);
        const sp_cost_summary *s = sp_cost_get_summary(c);
        const sp_cost_mem_point *p = point_at(c, in.m, "adam/");
        double states = s->param_bytes + s->input_bytes + p->activation_bytes + p->temporary_bytes;
        double gb = states / 1e9;
        print_message("ZeRO stage %d: %.2f GB per device (paper %.1f GB, formula %.2f GB), "
                      "peak %.2f GB\n",
                      stage, gb, paper_gb[stage], formula[stage] / 1e9, s->peak_bytes / 1e9);
        if (!close_rel(states, formula[stage], 0.02) || !close_rel(gb, paper_gb[stage], 0.02)) {
            fail_msg("stage %d: %.3f GB, want %.3f GB (paper %.1f)", stage, gb,
                     formula[stage] / 1e9, paper_gb[stage]);
        }
        /* donated states update in place: the step's peak stays near them */
        assert_true(s->peak_bytes < 1.15 * states);
        sp_cost_destroy(c);
        sp_input_fini(&in);
        cm_buf_fini(&t);
    }
}

/* The activation bytes live on a device when the forward pass ends (the
 * loss starts) for a GPT of layers layers at the paper's layer. */
static double activations_at_loss(uint32_t layers, int64_t t, bool sp)
{
    sp_gen_gpt_opts o;
    sp_gen_gpt_opts_init(&o);
    o.layers = layers;
    o.seq = 2048;
    o.hidden = 12288;
    o.heads = 96;
    o.batch = 1;
    o.mesh_data = 1;
    o.mesh_model = t;
    o.sequence_parallel = sp;
    cm_buf txt;
    cm_buf_init(&txt);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_gpt_mlir(&o, &txt, &err), CM_OK);
    sp_input in;
    load(&txt, false, &in);
    sp_cost *c = cost(&in, true);
    const sp_cost_mem_point *p = point_at(c, in.m, "loss");
    double a = p->activation_bytes + p->temporary_bytes;
    sp_cost_destroy(c);
    sp_input_fini(&in);
    cm_buf_fini(&txt);
    return a;
}

/* Korthikanti et al. 2022, Table 2: activation memory per transformer layer
 * sbh(34 + 5as/h) bytes without parallelism, sbh(10 + 24/t + 5as/(ht)) with
 * tensor parallelism, sbh(34/t + 5as/(ht)) with sequence parallelism too, at
 * the GPT-3 175B layer s = 2048, h = 12288, a = 96, b = 1, t = 8. Per layer
 * is what one more layer adds to the activations live at the end of the
 * forward pass (the loss and the input cancel out). */
static void test_cost_korthikanti_table2(void **state)
{
    (void)state;
    const double s = 2048, h = 12288, a = 96, b = 1, t = 8;
    const double want[3] = {s * b * h * (34 + 5 * a * s / h),
                            s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
                            s * b * h * (34 / t + 5 * a * s / (h * t))};
    static const char *const what[3] = {"no parallelism", "tensor parallel t=8",
                                        "tensor + sequence parallel t=8"};
    for (int i = 0; i < 3; i++) {
        int64_t tp = i == 0 ? 1 : 8;
        bool sp = i == 2;
        double per_layer = activations_at_loss(2, tp, sp) - activations_at_loss(1, tp, sp);
        print_message("Korthikanti %s: %.1f MB per layer (formula %.1f MB)\n", what[i],
                      per_layer / 1e6, want[i] / 1e6);
        if (!close_rel(per_layer, want[i], 0.02)) {
            fail_msg("%s: %.1f MB per layer, want %.1f MB", what[i], per_layer / 1e6,
                     want[i] / 1e6);
        }
    }
}

/* ---- the memory timeline --------------------------------------------------------------- */

/* The JSON names the op at the peak, lists the largest buffers live there
 * and gives a point per op (or per run of ops when capped), whose largest
 * live_bytes is the peak. */
static void test_cost_memory_json(void **state)
{
    (void)state;
    sp_gen_gpt_opts o;
    sp_gen_gpt_opts_init(&o);
    o.optimizer = SP_GEN_OPTIM_ADAM;
    o.zero_stage = 1;
    cm_buf t;
    cm_buf_init(&t);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_gpt_mlir(&o, &t, &err), CM_OK);
    sp_input in;
    load(&t, false, &in);
    sp_cost *c = cost(&in, true);
    for (uint32_t cap = 0; cap <= 64; cap += 64) {
        cm_buf b;
        cm_buf_init(&b);
        sp_cost_write_memory_json(c, in.m, cap, true, &b);
        json_error_t je;
        json_t *j = json_loadb(b.data, b.len, 0, &je);
        if (j == NULL) {
            fail_msg("%s", je.text);
        }
        json_t *peak = json_object_get(j, "peak");
        double pk = json_number_value(json_object_get(peak, "bytes"));
        assert_true(pk == sp_cost_get_summary(c)->peak_bytes);
        assert_non_null(json_string_value(json_object_get(peak, "op")));
        assert_non_null(json_string_value(json_object_get(peak, "name")));
        json_t *bufs = json_object_get(j, "largest_buffers");
        assert_true(json_array_size(bufs) > 0 && json_array_size(bufs) <= SP_COST_MAX_PEAK_BUFFERS);
        double prev = 1e300;
        for (size_t i = 0; i < json_array_size(bufs); i++) {
            double by = json_number_value(json_object_get(json_array_get(bufs, i), "bytes"));
            assert_true(by <= prev);
            prev = by;
        }
        json_t *pts = json_object_get(j, "points");
        size_t n = json_array_size(pts);
        assert_true(cap == 0 ? n == sp_cost_n_mem(c) : n <= cap);
        double best = 0;
        for (size_t i = 0; i < n; i++) {
            double lb = json_number_value(json_object_get(json_array_get(pts, i), "live_bytes"));
            best = lb > best ? lb : best;
        }
        assert_true(close_rel(best, pk, 1e-9));
        json_decref(j);
        cm_buf_fini(&b);
    }
    sp_cost_destroy(c);
    sp_input_fini(&in);
    cm_buf_fini(&t);
}

static void test_cost_generators_reject_bad_options(void **state)
{
    (void)state;
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    sp_gen_gpt_opts o;
    sp_gen_gpt_opts_init(&o);
    o.heads = 7;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_gpt_mlir(&o, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/heads");
    sp_gen_gpt_opts_init(&o);
    o.zero_stage = 2; /* needs Adam */
    cm_error_clear(&err);
    assert_int_equal(sp_gen_gpt_mlir(&o, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/zero_stage");
    sp_gen_gpt_opts_init(&o);
    o.optimizer = SP_GEN_OPTIM_ADAM;
    o.layers = 200; /* 200 * 8 * 4 + 1 arguments */
    cm_error_clear(&err);
    assert_int_equal(sp_gen_gpt_mlir(&o, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/layers");
    sp_gen_mlp_opts m;
    sp_gen_mlp_opts_init(&m);
    m.depth = 0;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_mlp_mlir(&m, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/depth");
    sp_gen_mlp_opts_init(&m);
    m.layers = 3000; /* 6001 arguments unrolled */
    cm_error_clear(&err);
    assert_int_equal(sp_gen_mlp_mlir(&m, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/layers");
    m.scan = true; /* two stacked arguments */
    cm_error_clear(&err);
    cm_buf_reset(&b);
    assert_int_equal(sp_gen_mlp_mlir(&m, &b, &err), CM_OK);
    cm_buf_fini(&b);
}

/* Allocation failures anywhere in a timeline costing of the scan give
 * CM_ENOMEM and leak nothing; the run that succeeds gives the figures. */
static void test_cost_timeline_oom(void **state)
{
    (void)state;
    cm_buf t;
    mlp_text(true, &t);
    sp_input in;
    load(&t, false, &in);
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.timeline = true;
    for (long n = 0;; n++) {
        sp_cost *c = NULL;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_cost_compute(in.m, &o, &c, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_true(sp_cost_get_summary(c)->param_bytes == 32.0 * 1024 * 1024);
            assert_true(sp_cost_n_mem(c) > 0);
            sp_cost_destroy(c);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(c);
        assert_true(n < 10000);
    }
    sp_input_fini(&in);
    cm_buf_fini(&t);
}

/* Loops the model does not recognise still cost without reading past
 * their regions: a body that returns fewer values than it carries, one
 * whose carried value is not returned, a loop whose bound is an argument. */
static void test_cost_odd_loops(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "func.func @main(%a: tensor<4x8xf32>, %n: tensor<i32>) -> tensor<4x8xf32> {\n"
        "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
        "  %0:2 = stablehlo.while(%i = %c, %x = %a) : tensor<i32>, tensor<4x8xf32>\n"
        "   cond {\n"
        "    %1 = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
        "    stablehlo.return %1 : tensor<i1>\n"
        "  } do {\n"
        "    %2 = stablehlo.add %x, %x : tensor<4x8xf32>\n"
        "    stablehlo.return %i, %2 : tensor<i32>, tensor<4x8xf32>\n"
        "  }\n"
        "  return %0#1 : tensor<4x8xf32>\n}\n",
        "func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
        "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
        "  %0:2 = \"stablehlo.while\"(%c, %a) ({\n"
        "  ^bb0(%i: tensor<i32>, %x: tensor<4x8xf32>):\n"
        "    %1 = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
        "    stablehlo.return %1 : tensor<i1>\n"
        "  }, {\n"
        "  ^bb0(%i: tensor<i32>, %x: tensor<4x8xf32>):\n"
        "    stablehlo.return %i : tensor<i32>\n"
        "  }) : (tensor<i32>, tensor<4x8xf32>) -> (tensor<i32>, tensor<4x8xf32>)\n"
        "  return %0#1 : tensor<4x8xf32>\n}\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        sp_module *m = NULL;
        cm_error err;
        cm_error_clear(&err);
        if (sp_mlir_read(texts[i], strlen(texts[i]), 0, &m, &err) != CM_OK) {
            continue; /* the reader's own checks refuse it: nothing to cost */
        }
        sp_cost_opts o;
        sp_cost_opts_init(&o);
        o.timeline = true;
        sp_cost *c = NULL;
        cm_error_clear(&err);
        assert_int_equal(sp_cost_compute(m, &o, &c, &err), CM_OK);
        cm_buf b;
        cm_buf_init(&b);
        sp_cost_write_memory_json(c, m, 0, true, &b);
        json_t *j = json_loadb(b.data, b.len, 0, NULL);
        assert_non_null(j);
        json_decref(j);
        cm_buf_fini(&b);
        sp_cost_destroy(c);
        sp_module_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_scan_matches_unrolled),
        cmocka_unit_test(test_cost_scan_matches_unrolled_partitioned),
        cmocka_unit_test(test_cost_scan_plan_document),
        cmocka_unit_test(test_cost_zero_table1),
        cmocka_unit_test(test_cost_korthikanti_table2),
        cmocka_unit_test(test_cost_memory_json),
        cmocka_unit_test(test_cost_generators_reject_bad_options),
        cmocka_unit_test(test_cost_timeline_oom),
        cmocka_unit_test(test_cost_odd_loops),
    };
    return cmocka_run_group_tests_name("cost_model", tests, NULL, NULL);
}
