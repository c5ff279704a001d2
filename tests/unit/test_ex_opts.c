/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the run options and argument helpers of ex_exec:
 * - affinity: pinned, each worker runs on one CPU of those the process may
 *   use (worker d on the (d mod n)-th), seen from inside the run, and the
 *   result is right; unpinned, the workers keep the process's CPUs; the
 *   default pins exactly the pools with more workers than CPUs (the Flax
 *   MLP on 8 workers, pinned and not, is checked in test_ex_exec.c);
 * - op_s, the per-op timers: every op that runs gets time on every device,
 *   a collective included (its barriers and the wait for the slowest
 *   member), a constraint that leaves each device's block in place too (a
 *   local copy), and runs before op_from count nothing; `shardplan run
 *   --ops N` prints them as tables;
 * - ex_args_make refuses an argument type whose byte size overflows;
 * - and the element-wise ops and copies a worker with cores to itself cuts
 *   over its pool (ex_par): the one-device reference run does, 4 workers on
 *   2 cores do not, so checking one against the other checks the slices
 *   (sizes that are no multiple of the slice alignment, a transpose whose
 *   first dimension is odd). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT (Linux) */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "cmd.h"
#include "ex_exec.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_mlir.h"

#define MAX_OPS 32

/* Elements of the first result and argument exec_text hands back. */
#define ROWS 48
#define RES0 (ROWS * 16)

/* Runs main of text with o and between; kinds gets each op's kind (at most
 * MAX_OPS ops), res0 and arg0 (when not NULL) the first result's and the
 * first argument's RES0 floats. */
static void exec_text(const char *text, const ex_exec_opts *o, void (*between)(void *ctx),
                      void *ctx, sp_op_kind *kinds, uint32_t *n_ops, float *res0, float *arg0)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    ex_tensor *args = NULL, *res = NULL;
    uint32_t n_args = 0, n_res = 0;
    assert_int_equal(ex_args_make(m, 9, &args, &n_args, &err), CM_OK);
    assert_true(m->n_ops <= MAX_OPS);
    *n_ops = m->n_ops;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        kinds[i] = (sp_op_kind)m->ops[i].kind;
    }
    cm_status st = ex_exec_run_paced(m, o, between, ctx, args, n_args, &res, &n_res, &err);
    if (st != CM_OK) {
        fail_msg("%s: %s", cm_status_name(err.code), err.msg);
    }
    if (res0 != NULL) {
        memcpy(res0, res[0].data, RES0 * sizeof(float));
        memcpy(arg0, args[0].data, RES0 * sizeof(float));
    }
    ex_tensors_free(res, n_res);
    ex_tensors_free(args, n_args);
    sp_module_destroy(m);
}

/* ---- affinity --------------------------------------------------------------------- */

/* An all-gather of 48 x 16 over a mesh of %u devices. */
static const char gather_fmt[] =
    "sdy.mesh @mesh = <[\"x\"=%u]>\n"
    "func.func @main(%%arg0: tensor<48x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
    "{}]>}) -> tensor<48x16xf32> {\n"
    "  %%0 = sdy.all_gather [{\"x\"}, {}] %%arg0 out_sharding=<@mesh, [{}, {}]> : "
    "tensor<48x16xf32>\n"
    "  return %%0 : tensor<48x16xf32>\n}\n";

/* What worker 0 sees of its own CPU set, between two runs (on its thread). */
typedef struct seen {
    int calls;
    int count; /* CPUs in the set */
    int first; /* the lowest CPU in it */
} seen;

static int lowest_cpu(const cpu_set_t *set)
{
    for (size_t c = 0; c < (size_t)CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, set)) {
            return (int)c;
        }
    }
    return -1;
}

static void look(void *ctx)
{
    seen *s = ctx;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    s->calls++;
    s->count = CPU_COUNT(&set);
    s->first = lowest_cpu(&set);
}

static void run_gather(ex_affinity affinity, uint32_t devices, seen *s)
{
    ex_exec_opts o = {.n_devices = devices, .iters = 2, .affinity = affinity};
    sp_op_kind kinds[MAX_OPS];
    uint32_t n = 0;
    static float got[RES0], want[RES0];
    char text[1024];
    snprintf(text, sizeof text, gather_fmt, devices);
    memset(s, 0, sizeof *s);
    exec_text(text, &o, look, s, kinds, &n, got, want);
    /* The all-gather hands back the global tensor whole. */
    assert_memory_equal(got, want, sizeof got);
}

static void test_ex_exec_affinity_pins_each_worker(void **state)
{
    (void)state;
    cpu_set_t mine;
    CPU_ZERO(&mine);
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    seen s;
    run_gather(EX_AFFINITY_ON, 4, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, 1);
    assert_int_equal(s.first, lowest_cpu(&mine)); /* worker 0: the first allowed CPU */
    assert_true(ex_affinity_pins(EX_AFFINITY_ON, 1));
    run_gather(EX_AFFINITY_OFF, 4, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, CPU_COUNT(&mine));
    assert_false(ex_affinity_pins(EX_AFFINITY_OFF, 4));
    /* The default pins a pool with more workers than CPUs, and only that. */
    uint32_t n_cpu = (uint32_t)CPU_COUNT(&mine);
    run_gather(EX_AFFINITY_AUTO, n_cpu + 1u, &s);
    assert_int_equal(s.count, 1);
    assert_true(ex_affinity_pins(EX_AFFINITY_AUTO, n_cpu + 1u));
    run_gather(EX_AFFINITY_AUTO, n_cpu, &s);
    assert_int_equal(s.count, CPU_COUNT(&mine));
    assert_false(ex_affinity_pins(EX_AFFINITY_AUTO, n_cpu));
}

/* ---- per-op timers ---------------------------------------------------------------- */

/* A dot with its contraction sharded on y, the all-reduce that sums it and
 * a constraint to the sharding the sum already has. */
static const char dot_mod[] =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"x\"}, {\"y\"}]>}, %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"y\"}, {}]>}) -> tensor<8x8xf32> {\n"
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding "
    "= #sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>} : (tensor<8x16xf32>, "
    "tensor<16x8xf32>) -> tensor<8x8xf32>\n"
    "  %1 = sdy.all_reduce {\"y\"} %0 out_sharding=<@mesh, [{\"x\"}, {}]> : "
    "tensor<8x8xf32>\n"
    "  %2 = sdy.sharding_constraint %1 <@mesh, [{\"x\"}, {}]> : tensor<8x8xf32>\n"
    "  return %2 : tensor<8x8xf32>\n}\n";

static void run_timed(uint32_t iters, uint32_t from, double *op_s, uint32_t *n_ops,
                      sp_op_kind *kinds)
{
    memset(op_s, 0, sizeof(double) * 4 * MAX_OPS);
    ex_exec_opts o = {.n_devices = 4, .iters = iters, .op_s = op_s, .op_from = from};
    exec_text(dot_mod, &o, NULL, NULL, kinds, n_ops, NULL, NULL);
}

static void test_ex_exec_op_timers_cover_ops_and_collectives(void **state)
{
    (void)state;
    double op_s[4 * MAX_OPS];
    sp_op_kind kinds[MAX_OPS];
    uint32_t n = 0;
    run_timed(3, 1, op_s, &n, kinds);
    int seen_dot = 0, seen_reduce = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t d = 0; d < 4; d++) {
            double t = op_s[d * n + i];
            switch (kinds[i]) {
            case SP_OP_DOT_GENERAL:
            case SP_OP_SDY_ALL_REDUCE:
            case SP_OP_SDY_SHARDING_CONSTRAINT:
                if (!(t > 0 && t < 10)) {
                    fail_msg("op %u on device %u: %g s", i, d, t);
                }
                seen_dot += kinds[i] == SP_OP_DOT_GENERAL;
                seen_reduce += kinds[i] == SP_OP_SDY_ALL_REDUCE;
                break;
            case SP_OP_FUNC_FUNC:
            case SP_OP_SDY_MESH:
                assert_true(t == 0); /* not ops of main's body */
                break;
            default:
                break;
            }
        }
    }
    assert_int_equal(seen_dot, 4);
    assert_int_equal(seen_reduce, 4);
    /* Only runs from op_from on count: with op_from == iters, none. */
    run_timed(2, 2, op_s, &n, kinds);
    for (uint32_t i = 0; i < 4 * n; i++) {
        assert_true(op_s[i] == 0);
    }
}

/* Runs `shardplan run ARGS` into a temporary file; returns its exit code
 * and the output (freed with cm_free). */
static int run_cli(int argc, char **argv, char **text)
{
    FILE *out = tmpfile(), *errs = tmpfile();
    assert_non_null(out);
    assert_non_null(errs);
    int rc = cmd_run(argc, argv, out, errs);
    long n = ftell(out);
    assert_true(n >= 0);
    *text = cm_alloc((size_t)n + 1u);
    assert_non_null(*text);
    rewind(out);
    assert_int_equal(fread(*text, 1, (size_t)n, out), (size_t)n);
    (*text)[n] = '\0';
    fclose(out);
    fclose(errs);
    return rc;
}

static void test_shardplan_run_ops_prints_tables(void **state)
{
    (void)state;
    char a0[] = "run", a1[] = "examples/flax_mlp.mlir", a2[] = "--iters", a3[] = "2",
         a4[] = "--ops", a5[] = "3", a6[] = "0";
    char *argv[] = {a0, a1, a2, a3, a4, a5, NULL};
    char *text = NULL;
    assert_int_equal(run_cli(6, argv, &text), 0);
    assert_non_null(strstr(text, "numerics: match"));
    assert_non_null(strstr(text, "slowest ops (3 of "));
    /* the three slowest: the MLP's dots, at their lines */
    const char *p = strstr(text, "GFLOP/s\n");
    assert_non_null(p);
    for (int i = 0; i < 3; i++) {
        p = strstr(p, "\n  stablehlo.dot_general");
        assert_non_null(p);
        p++;
    }
    /* every all-reduce the partitioner inserted, after the dot it sums */
    assert_non_null(strstr(text, "collectives (4; "));
    static const char *const after[] = {"of 21:5", "of 28:5", "of 35:5", "of 42:5"};
    for (int i = 0; i < 4; i++) {
        const char *line = strstr(text, after[i]);
        assert_non_null(line);
        assert_true(line - text > 40);
        assert_non_null(strstr(line - 40, "all_reduce       model            4 "));
    }
    cm_free(text);
    char *bad[] = {a0, a1, a4, a6, NULL};
    assert_int_equal(run_cli(4, bad, &text), 2);
    cm_free(text);
}

static void test_ex_exec_pooled_elementwise_matches(void **state)
{
    (void)state;
    /* 508 x 257 f32 = 130,556 elements, over the 65,536 a pool takes */
    static const char mod[] =
        "sdy.mesh @mesh = <[\"x\"=4]>\n"
        "func.func @main(%arg0: tensor<508x257xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}, %arg1: tensor<508x257xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"x\"}, {}]>}, %arg2: tensor<257xf32>) -> (tensor<257x508xf32>, tensor<508x257xi32>) "
        "{\n"
        "  %0 = stablehlo.multiply %arg0, %arg1 : tensor<508x257xf32>\n"
        "  %1 = stablehlo.exponential %0 : tensor<508x257xf32>\n"
        "  %2 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<257xf32>) -> "
        "tensor<508x257xf32>\n"
        "  %3 = stablehlo.compare GT, %0, %2 : (tensor<508x257xf32>, tensor<508x257xf32>) -> "
        "tensor<508x257xi1>\n"
        "  %4 = stablehlo.select %3, %1, %arg1 : tensor<508x257xi1>, tensor<508x257xf32>\n"
        "  %5 = stablehlo.transpose %4, dims = [1, 0] : (tensor<508x257xf32>) -> "
        "tensor<257x508xf32>\n"
        "  %6 = stablehlo.convert %4 : (tensor<508x257xf32>) -> tensor<508x257xi32>\n"
        "  return %5, %6 : tensor<257x508xf32>, tensor<508x257xi32>\n}\n";
    ex_check_opts o = {.n_devices = 4, .iters = 2, .seed = 13};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = ex_check_text(mod, strlen(mod), &o, &r, &err);
    if (st != CM_OK) {
        fail_msg("%s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at result %u %s: expected %g got %g", r.mm.result, r.mm.where,
                 r.mm.expected, r.mm.got);
    }
}

/* An argument whose byte size overflows is refused before any allocation
 * (the seeded generator used to multiply the dimensions unchecked). */
static void test_ex_args_make_refuses_overflowing_types(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4611686018427387904x4xf32>) -> "
        "tensor<4x4xf32> {\n"
        "  return %arg0 : tensor<4x4xf32>\n}\n";
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(mod, strlen(mod), 0, &m, &err), CM_OK);
    ex_tensor *args = NULL;
    uint32_t n = 0;
    assert_int_equal(ex_args_make(m, 1, &args, &n, &err), CM_EINVAL);
    assert_null(args);
    assert_non_null(strstr(err.msg, "argument 1: type tensor<4611686018427387904x4xf32> is too "
                                    "large"));
    assert_string_equal(err.path, "1:1"); /* @main's line and column */
    sp_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_exec_affinity_pins_each_worker),
        cmocka_unit_test(test_ex_exec_op_timers_cover_ops_and_collectives),
        cmocka_unit_test(test_shardplan_run_ops_prints_tables),
        cmocka_unit_test(test_ex_exec_pooled_elementwise_matches),
        cmocka_unit_test(test_ex_args_make_refuses_overflowing_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
