/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_exec's control flow: func.call (a private
 * function called twice, nested calls, a callee holding its arguments with
 * other shardings than the caller), stablehlo.while (a loop on a sharded
 * tensor, a loop whose body has a collective, loop-carried values swapped,
 * a value both passed into and read by the body), sdy.named_computation,
 * stablehlo.case (in and out of range) and stablehlo.if, control flow
 * nested both ways, sdy.manual_computation, each run on several devices and
 * checked both against values computed here and against the single-device
 * reference; recursion, malformed control flow, devices that disagree on a
 * predicate or index, a failure inside a loop body and a collective inside
 * a manual body as clear errors. */
#include <math.h>
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
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_diag.h"
#include "sp_mlir.h"

#define MESH "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
#define SH(dims) "{sdy.sharding = #sdy.sharding<@mesh, " dims ">}"

/* Reads text; unless it already has collectives, plans it
 * (-sdy-propagation-pipeline) and partitions it (ex_partition), as
 * `shardplan run` does. */
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

/* Checks text (partitioned by ex_check_text) against its reference. */
static void assert_matches(const char *text, uint32_t devices)
{
    ex_check_opts o = {.n_devices = devices, .iters = 2, .seed = 7};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    if (ex_check_text(text, strlen(text), &o, &r, &err) != CM_OK) {
        fail_msg("ex_check_text: %s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    if (!r.mm.match) {
        fail_msg("mismatch at result %u %s: expected %g got %g", r.mm.result, r.mm.where,
                 r.mm.expected, r.mm.got);
    }
    assert_int_equal(r.n_devices, devices);
}

/* Runs m on devices workers (0: replicated, the reference) with seeded
 * arguments; *args_out and *res_out are freed by the caller. */
static cm_status run(const sp_module *m, uint32_t devices, ex_tensor **args_out, uint32_t *n_args,
                     ex_tensor **res_out, uint32_t *n_res, cm_error *err)
{
    cm_error_clear(err);
    *res_out = NULL;
    *n_res = 0;
    assert_int_equal(ex_args_make(m, 3, args_out, n_args, err), CM_OK);
    ex_exec_opts o = {.n_devices = devices, .replicated = devices == 0, .iters = 2};
    return ex_exec_run(m, &o, *args_out, *n_args, res_out, n_res, err);
}

/* Expected value of element i of a result from the arguments and the
 * coefficients k of the expectation. */
typedef double (*expect_fn)(const ex_tensor *args, size_t i, const double *k);

/* Runs text partitioned on 4 devices and unpartitioned on one, checks
 * result 0 of both against want element by element, then the partitioned
 * run against the reference through ex_check_text. */
static void check_values(const char *text, expect_fn want, const double *k)
{
    for (int part = 0; part < 2; part++) {
        sp_module *m = plan(text, part == 1);
        ex_tensor *args = NULL, *res = NULL;
        uint32_t n_args = 0, n_res = 0;
        cm_error err;
        if (run(m, part == 1 ? 4u : 0u, &args, &n_args, &res, &n_res, &err) != CM_OK) {
            fail_msg("run: %s at %s: %s", cm_status_name(err.code), err.path, err.msg);
        }
        assert_true(n_res >= 1);
        assert_int_equal(res[0].elem, SP_ELEM_F32);
        for (size_t i = 0; i < res[0].n; i++) {
            double w = want(args, i, k), g = (double)((const float *)res[0].data)[i];
            if (fabs(g - w) > 1e-5 * (1.0 + fabs(w))) {
                fail_msg("%s: element %zu: expected %g, got %g",
                         part == 1 ? "4 devices" : "1 device", i, w, g);
            }
        }
        ex_tensors_free(args, n_args);
        ex_tensors_free(res, n_res);
        sp_module_destroy(m);
    }
    assert_matches(text, 4);
}

static double arg0(const ex_tensor *args, size_t i)
{
    return (double)((const float *)args[0].data)[i];
}

/* k[0] * x + k[1] */
static double linear(const ex_tensor *args, size_t i, const double *k)
{
    return k[0] * arg0(args, i) + k[1];
}

/* Whether some op nested in a while of m is a collective. */
static bool collective_in_loop(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op_kind k = (sp_op_kind)m->ops[i].kind;
        if (k != SP_OP_SDY_ALL_REDUCE && k != SP_OP_SDY_ALL_GATHER && k != SP_OP_SDY_ALL_SLICE &&
            k != SP_OP_SDY_REDUCE_SCATTER && k != SP_OP_SDY_ALL_TO_ALL) {
            continue;
        }
        uint32_t b = m->ops[i].parent_block;
        uint32_t owner = b != SP_NONE ? m->blocks[b].parent_op : SP_NONE;
        if (owner != SP_NONE && m->ops[owner].kind == SP_OP_WHILE) {
            return true;
        }
    }
    return false;
}

/* ---- func.call ------------------------------------------------------------------- */

/* @f(a) = 2a + a, called twice: 9x. The callee has no shardings, so the
 * call redistributes the sharded operand to its replicated argument. */
static const char call_twice_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
         "tensor<8x16xf32> {\n"
         "  %0 = func.call @f(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %1 = func.call @f(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n"
         "func.func private @f(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
         "  %c = stablehlo.constant dense<2.0> : tensor<8x16xf32>\n"
         "  %0 = stablehlo.multiply %a, %c : tensor<8x16xf32>\n"
         "  %1 = stablehlo.add %0, %a : tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_call_twice_computes(void **state)
{
    (void)state;
    check_values(call_twice_mod, linear, (const double[]){9, 0});
}

/* @outer(a) = @inner(a) + @twice(a), @twice(a) = @inner(@inner(a)),
 * @inner(a) = a + 1 held sharded on y (its own argument sharding);
 * main = @outer(@outer(x)). outer(a) = (a + 1) + (a + 2) = 2a + 3, so the
 * result is 2(2x + 3) + 3 = 4x + 9. */
static const char nested_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {}]") ") -> tensor<8x16xf32> {\n"
         "  %0 = func.call @outer(%arg0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %1 = func.call @outer(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n"
         "func.func private @outer(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
         "  %0 = func.call @inner(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %1 = func.call @twice(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %2 = stablehlo.add %0, %1 : tensor<8x16xf32>\n"
         "  return %2 : tensor<8x16xf32>\n}\n"
         "func.func private @twice(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
         "  %0 = func.call @inner(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %1 = func.call @inner(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n"
         "func.func private @inner(%a: tensor<8x16xf32> " SH("[{}, {\"y\"}]") ") -> "
         "tensor<8x16xf32> {\n"
         "  %c = stablehlo.constant dense<1.0> : tensor<8x16xf32>\n"
         "  %0 = stablehlo.add %a, %c : tensor<8x16xf32>\n"
         "  return %0 : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_nested_calls_compute(void **state)
{
    (void)state;
    check_values(nested_mod, linear, (const double[]){4, 9});
}

/* sdy.named_computation runs its region like a called function: 2x, then
 * -2x (the second with in/out shardings). */
static const char named_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
         "tensor<8x16xf32> {\n"
         "  %0 = sdy.named_computation<\"twice\">(%arg0) (%a: tensor<8x16xf32>) {\n"
         "    %1 = stablehlo.add %a, %a : tensor<8x16xf32>\n"
         "    sdy.return %1 : tensor<8x16xf32>\n"
         "  } : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  %2 = sdy.named_computation<\"neg\">(%0) in_shardings=[<@mesh, [{\"x\"}, {}]>] "
         "out_shardings=[<@mesh, [{\"x\"}, {}]>] (%a: tensor<8x16xf32>) {\n"
         "    %1 = stablehlo.negate %a : tensor<8x16xf32>\n"
         "    sdy.return %1 : tensor<8x16xf32>\n"
         "  } : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  return %2 : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_named_computation_computes(void **state)
{
    (void)state;
    check_values(named_mod, linear, (const double[]){-2, 0});
}

/* Runs m on devices workers (0: the reference), which must fail with
 * CM_EINVAL, a message containing msg and path "LINE:COL". */
static void assert_fails(const sp_module *m, uint32_t devices, const ex_tensor *args,
                         uint32_t n_args, const char *msg, const char *path)
{
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    cm_error err;
    cm_error_clear(&err);
    ex_exec_opts o = {.n_devices = devices, .replicated = devices == 0, .iters = 2};
    assert_int_equal(ex_exec_run(m, &o, args, n_args, &res, &n_res, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    if (strstr(err.msg, msg) == NULL) {
        fail_msg("error '%s' does not say '%s'", err.msg, msg);
    }
    assert_string_equal(err.path, path);
    assert_null(res);
}

static void expect_error(const char *text, bool partition, uint32_t devices, const char *msg,
                         const char *path)
{
    sp_module *m = plan(text, partition);
    ex_tensor *args = NULL;
    uint32_t n_args = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_args_make(m, 3, &args, &n_args, &err), CM_OK);
    assert_fails(m, devices, args, n_args, msg, path);
    ex_tensors_free(args, n_args);
    sp_module_destroy(m);
}

/* A hand-partitioned module, read as is (no planning), and its seeded
 * arguments with argument 0 replaced by x0 (len bytes) unless NULL. */
typedef struct raw {
    sp_module *m;
    ex_tensor *args;
    uint32_t n_args;
} raw;

static void raw_load(raw *r, const char *text, const void *x0, size_t len)
{
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &r->m, &err), CM_OK);
    assert_int_equal(ex_args_make(r->m, 3, &r->args, &r->n_args, &err), CM_OK);
    if (x0 != NULL) {
        assert_int_equal(r->args[0].n * sp_elem_bytes(r->args[0].elem), len);
        memcpy(r->args[0].data, x0, len);
    }
}

/* Result 0 of r's reference run (one device), freed with ex_tensors_free
 * (n_res entries). */
static ex_tensor *raw_reference(const raw *r, uint32_t *n_res)
{
    ex_tensor *res = NULL;
    cm_error err;
    cm_error_clear(&err);
    ex_exec_opts one = {.replicated = true, .iters = 1};
    assert_int_equal(ex_exec_run(r->m, &one, r->args, r->n_args, &res, n_res, &err), CM_OK);
    return res;
}

static void raw_fini(raw *r)
{
    ex_tensors_free(r->args, r->n_args);
    sp_module_destroy(r->m);
}

static const char recursive_mod[] =
    "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = func.call @f(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n}\n"
    "func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = func.call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n}\n"
    "func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = stablehlo.negate %a : tensor<4xf32>\n"
    "  %1 = func.call @f(%0) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  return %1 : tensor<4xf32>\n}\n";

static void test_ex_exec_run_recursion_is_a_clear_error(void **state)
{
    (void)state;
    expect_error(recursive_mod, false, 0, "func.call: recursive call to @f cannot be executed",
                 "11:3");
}

static const char missing_callee_mod[] =
    "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = func.call @nowhere(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n}\n";

static void test_ex_exec_run_missing_callee_is_a_clear_error(void **state)
{
    (void)state;
    expect_error(missing_callee_mod, false, 0, "func.call: no function @nowhere", "2:3");
}

/* Malformed control flow: each a clear error at the op, none a crash. */
static void test_ex_exec_run_malformed_control_flow_is_a_clear_error(void **state)
{
    (void)state;
#define F4 "tensor<4xf32>"
#define MAIN4 "func.func @main(%arg0: " F4 ") -> " F4 " {\n"
    static const struct {
        const char *mod, *msg, *path;
    } cases[] = {
        {MAIN4 "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
               "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, " F4 "\n"
               "    cond {\n      stablehlo.return %i : tensor<i32>\n"
               "    } do {\n      stablehlo.return %i, %x : tensor<i32>, " F4 "\n    }\n"
               "  return %0#1 : " F4 "\n}\n",
         "stablehlo.while: the condition must return a 0-d i1 tensor", "3:3"},
        {MAIN4 "  %k = stablehlo.constant dense<0.0> : tensor<f32>\n"
               "  %0 = \"stablehlo.case\"(%k) ({\n    stablehlo.return %arg0 : " F4 "\n"
               "  }) : (tensor<f32>) -> " F4 "\n  return %0 : " F4 "\n}\n",
         "stablehlo.case: the index must be a 0-d integer tensor", "3:3"},
        {MAIN4 "  %k = stablehlo.constant dense<1> : tensor<i32>\n"
               "  %0 = \"stablehlo.case\"(%k) ({\n    stablehlo.return %arg0 : " F4 "\n"
               "  }, {\n    %c = stablehlo.constant dense<1.0> : tensor<8xf32>\n"
               "    stablehlo.return %c : tensor<8xf32>\n"
               "  }) : (tensor<i32>) -> " F4 "\n  return %0 : " F4 "\n}\n",
         "stablehlo.case: a region returns values whose types differ from the results", "3:3"},
        {MAIN4 "  %0 = func.call @f(%arg0) : (" F4 ") -> " F4 "\n  return %0 : " F4 "\n}\n"
               "func.func private @f(%a: tensor<8xf32>) -> " F4 " {\n"
               "  %0 = stablehlo.slice %a [0:4] : (tensor<8xf32>) -> " F4 "\n"
               "  return %0 : " F4 "\n}\n",
         "func.call: operands do not match the arguments of @f", "2:3"},
        {MAIN4 "  %0 = func.call @main(%arg0) : (" F4 ") -> " F4 "\n  return %0 : " F4 "\n}\n",
         "func.call: recursive call to @main cannot be executed", "2:3"},
    };
#undef MAIN4
#undef F4
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_error(cases[i].mod, false, 0, cases[i].msg, cases[i].path);
    }
}

/* ---- stablehlo.while -------------------------------------------------------------- */

/* Five iterations of x = 2x + 1: 32x + 31. */
static const char loop_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
         "tensor<8x16xf32> {\n"
         "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
         "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8x16xf32>\n"
         "    cond {\n"
         "      %n = stablehlo.constant dense<5> : tensor<i32>\n"
         "      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
         "      stablehlo.return %p : tensor<i1>\n"
         "    } do {\n"
         "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
         "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
         "      %c1 = stablehlo.constant dense<1.0> : tensor<8x16xf32>\n"
         "      %c2 = stablehlo.constant dense<2.0> : tensor<8x16xf32>\n"
         "      %m = stablehlo.multiply %x, %c2 : tensor<8x16xf32>\n"
         "      %y = stablehlo.add %m, %c1 : tensor<8x16xf32>\n"
         "      stablehlo.return %i2, %y : tensor<i32>, tensor<8x16xf32>\n"
         "    }\n"
         "  return %0#1 : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_while_computes(void **state)
{
    (void)state;
    check_values(loop_mod, linear, (const double[]){32, 31});
}

/* Three iterations of x = tanh(x . w) with x's columns and w's rows on y:
 * the partitioner puts an all-reduce inside the body, which every device
 * must reach the same number of times. */
static const char loop_dot_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ", %arg1: "
         "tensor<16x16xf32> " SH("[{\"y\"}, {}]") ") -> tensor<8x16xf32> {\n"
         "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
         "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8x16xf32>\n"
         "    cond {\n"
         "      %n = stablehlo.constant dense<3> : tensor<i32>\n"
         "      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
         "      stablehlo.return %p : tensor<i1>\n"
         "    } do {\n"
         "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
         "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
         "      %d = stablehlo.dot_general %x, %arg1, contracting_dims = [1] x [0] : "
         "(tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>\n"
         "      %t = stablehlo.tanh %d : tensor<8x16xf32>\n"
         "      stablehlo.return %i2, %t : tensor<i32>, tensor<8x16xf32>\n"
         "    }\n"
         "  return %0#1 : tensor<8x16xf32>\n}\n";

static void test_ex_check_text_while_with_collective_matches(void **state)
{
    (void)state;
    sp_module *m = plan(loop_dot_mod, true);
    assert_true(collective_in_loop(m));
    sp_module_destroy(m);
    assert_matches(loop_dot_mod, 4);
}

/* Four iterations of (p, q) = (q, p + q + w) from (w, w) with w = -x: the
 * body returns one of its arguments as is, and reads w, which is also
 * passed into the loop (so it must not be handed over). */
static const char loop_swap_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {}]") ") -> tensor<8x16xf32> {\n"
         "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
         "  %w = stablehlo.negate %arg0 : tensor<8x16xf32>\n"
         "  %0:3 = stablehlo.while(%i = %c0, %p = %w, %q = %w) : tensor<i32>, tensor<8x16xf32>, "
         "tensor<8x16xf32>\n"
         "    cond {\n"
         "      %n = stablehlo.constant dense<4> : tensor<i32>\n"
         "      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
         "      stablehlo.return %c : tensor<i1>\n"
         "    } do {\n"
         "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
         "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
         "      %s = stablehlo.add %p, %q : tensor<8x16xf32>\n"
         "      %sw = stablehlo.add %s, %w : tensor<8x16xf32>\n"
         "      stablehlo.return %i2, %q, %sw : tensor<i32>, tensor<8x16xf32>, "
         "tensor<8x16xf32>\n"
         "    }\n"
         "  %r = stablehlo.add %0#1, %0#2 : tensor<8x16xf32>\n"
         "  return %r : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_while_swaps_and_captures(void **state)
{
    (void)state;
    /* (p, q) from (w, w): (w, 3w), (3w, 5w), (5w, 9w), (9w, 15w): 24w */
    check_values(loop_swap_mod, linear, (const double[]){-24, 0});
}

/* Control flow nested both ways: a loop whose body calls @f (3x) and then
 * picks a case by the iteration count (x, 2x, -x), @f called again after
 * the loop: 3x, 18x, -54x, then -162x. */
static const char nested_flow_mod[] =
    MESH "func.func @main(%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
         "tensor<8x16xf32> {\n"
         "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
         "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8x16xf32>\n"
         "    cond {\n"
         "      %n = stablehlo.constant dense<3> : tensor<i32>\n"
         "      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
         "      stablehlo.return %p : tensor<i1>\n"
         "    } do {\n"
         "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
         "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
         "      %y = func.call @f(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "      %z = \"stablehlo.case\"(%i) ({\n"
         "        stablehlo.return %y : tensor<8x16xf32>\n"
         "      }, {\n"
         "        %d = stablehlo.add %y, %y : tensor<8x16xf32>\n"
         "        stablehlo.return %d : tensor<8x16xf32>\n"
         "      }, {\n"
         "        %n = stablehlo.negate %y : tensor<8x16xf32>\n"
         "        stablehlo.return %n : tensor<8x16xf32>\n"
         "      }) : (tensor<i32>) -> tensor<8x16xf32>\n"
         "      stablehlo.return %i2, %z : tensor<i32>, tensor<8x16xf32>\n"
         "    }\n"
         "  %1 = func.call @f(%0#1) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n"
         "func.func private @f(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
         "  %0 = stablehlo.add %a, %a : tensor<8x16xf32>\n"
         "  %1 = stablehlo.add %0, %a : tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n}\n";

static void test_ex_exec_run_calls_and_case_in_loop_compute(void **state)
{
    (void)state;
    check_values(nested_flow_mod, linear, (const double[]){-162, 0});
}

/* A hand-partitioned loop whose condition sums the device's own block of a
 * sharded value without an all-reduce: each device gets a different
 * predicate. */
static const char disagree_mod[] =
    "sdy.mesh @mesh = <[\"x\"=4]>\n"
    "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) -> "
    "tensor<8xf32> {\n"
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8xf32> attributes "
    "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{\"x\"}]>]>}\n"
    "    cond {\n"
    "      %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "      %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : "
    "(tensor<8xf32>, tensor<f32>) -> tensor<f32>\n"
    "      %p = stablehlo.compare GT, %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
    "      stablehlo.return %p : tensor<i1>\n"
    "    } do {\n"
    "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
    "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
    "      %y = stablehlo.negate %x : tensor<8xf32>\n"
    "      stablehlo.return %i2, %y : tensor<i32>, tensor<8xf32>\n"
    "    }\n"
    "  return %0#1 : tensor<8xf32>\n}\n";

static void test_ex_exec_run_while_disagreeing_devices_fail(void **state)
{
    (void)state;
    /* blocks of 2: sums -2, 2, -2, 2 */
    static const float x[8] = {-1, -1, 1, 1, -1, -1, 1, 1};
    raw r;
    raw_load(&r, disagree_mod, x, sizeof x);
    assert_fails(r.m, 4, r.args, r.n_args,
                 "stablehlo.while: the devices disagree on the loop predicate", "4:3");
    /* One device (the reference) has nothing to disagree with: the sum is
     * 0, so the loop does not run and returns x. */
    uint32_t n_res = 0;
    ex_tensor *res = raw_reference(&r, &n_res);
    assert_memory_equal(res[0].data, x, sizeof x);
    ex_tensors_free(res, n_res);
    raw_fini(&r);
}

/* A hand-partitioned loop on a 2x2 mesh whose body negates a value held
 * along "x" into one held along "y": devices 1 and 2 would need elements
 * they do not hold and fail in the first iteration, devices 0 and 3 do
 * not. The failure must end the loop on every device rather than leave 0
 * and 3 waiting. */
static const char fail_in_body_mod[] =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) -> "
    "tensor<8xf32> {\n"
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8xf32> attributes "
    "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{\"x\"}]>]>}\n"
    "    cond {\n"
    "      %n = stablehlo.constant dense<3> : tensor<i32>\n"
    "      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "      stablehlo.return %p : tensor<i1>\n"
    "    } do {\n"
    "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
    "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
    "      %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "      %y0 = stablehlo.negate %x {sdy.sharding = "
    "#sdy.sharding_per_value<[<@mesh, [{\"y\"}]>]>} : tensor<8xf32>\n"
    "      %y = stablehlo.negate %y0 {sdy.sharding = "
    "#sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>} : tensor<8xf32>\n"
    "      stablehlo.return %i2, %y : tensor<i32>, tensor<8xf32>\n"
    "    }\n"
    "  return %0#1 : tensor<8xf32>\n}\n";

static void test_ex_exec_run_while_failing_body_ends_every_device(void **state)
{
    (void)state;
    raw r;
    raw_load(&r, fail_in_body_mod, NULL, 0);
    assert_fails(r.m, 4, r.args, r.n_args, "does not hold what the result block needs", "13:7");
    /* on one device the two negations leave x as it was */
    uint32_t n_res = 0;
    ex_tensor *res = raw_reference(&r, &n_res);
    const float *x = r.args[0].data, *y = res[0].data;
    for (int i = 0; i < 8; i++) {
        assert_true(y[i] == x[i]);
    }
    ex_tensors_free(res, n_res);
    raw_fini(&r);
}

/* ---- stablehlo.case and stablehlo.if --------------------------------------------- */

/* case %k of: -x, x * x, x (a value from outside the branch); then if
 * true: |r| else r. */
static void case_mod(char *buf, size_t len, int k, bool pred)
{
    snprintf(buf, len,
             MESH "func.func @main(%%arg0: tensor<8x16xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
                  "tensor<8x16xf32> {\n"
                  "  %%k = stablehlo.constant dense<%d> : tensor<i32>\n"
                  "  %%0 = \"stablehlo.case\"(%%k) ({\n"
                  "    %%a = stablehlo.negate %%arg0 : tensor<8x16xf32>\n"
                  "    stablehlo.return %%a : tensor<8x16xf32>\n"
                  "  }, {\n"
                  "    %%b = stablehlo.multiply %%arg0, %%arg0 : tensor<8x16xf32>\n"
                  "    stablehlo.return %%b : tensor<8x16xf32>\n"
                  "  }, {\n"
                  "    stablehlo.return %%arg0 : tensor<8x16xf32>\n"
                  "  }) : (tensor<i32>) -> tensor<8x16xf32>\n"
                  "  %%p = stablehlo.constant dense<%s> : tensor<i1>\n"
                  "  %%1 = \"stablehlo.if\"(%%p) ({\n"
                  "    %%a = stablehlo.abs %%0 : tensor<8x16xf32>\n"
                  "    stablehlo.return %%a : tensor<8x16xf32>\n"
                  "  }, {\n"
                  "    stablehlo.return %%0 : tensor<8x16xf32>\n"
                  "  }) : (tensor<i1>) -> tensor<8x16xf32>\n"
                  "  return %%1 : tensor<8x16xf32>\n}\n",
             k, pred ? "true" : "false");
}

static double case_square(const ex_tensor *args, size_t i, const double *k)
{
    (void)k;
    return arg0(args, i) * arg0(args, i);
}

static double case_abs(const ex_tensor *args, size_t i, const double *k)
{
    (void)k;
    return fabs(arg0(args, i));
}

static void test_ex_exec_run_case_and_if_compute(void **state)
{
    (void)state;
    char buf[4096];
    case_mod(buf, sizeof buf, 0, false);
    check_values(buf, linear, (const double[]){-1, 0});
    case_mod(buf, sizeof buf, 1, false);
    check_values(buf, case_square, NULL);
    /* out of range, either way: the last branch */
    case_mod(buf, sizeof buf, 7, false);
    check_values(buf, linear, (const double[]){1, 0});
    case_mod(buf, sizeof buf, -1, false);
    check_values(buf, linear, (const double[]){1, 0});
    case_mod(buf, sizeof buf, 0, true);
    check_values(buf, case_abs, NULL);
}

/* A case whose index each device computes from its own block. */
static const char case_disagree_mod[] =
    "sdy.mesh @mesh = <[\"x\"=4]>\n"
    "func.func @main(%arg0: tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>}) -> "
    "tensor<8xi32> {\n"
    "  %z = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %s = stablehlo.reduce(%arg0 init: %z) applies stablehlo.add across dimensions = [0] : "
    "(tensor<8xi32>, tensor<i32>) -> tensor<i32>\n"
    "  %0 = \"stablehlo.case\"(%s) ({\n"
    "    stablehlo.return %arg0 : tensor<8xi32>\n"
    "  }, {\n"
    "    %a = stablehlo.negate %arg0 : tensor<8xi32>\n"
    "    stablehlo.return %a : tensor<8xi32>\n"
    "  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>} : (tensor<i32>) -> "
    "tensor<8xi32>\n"
    "  return %0 : tensor<8xi32>\n}\n";

static void test_ex_exec_run_case_disagreeing_devices_fail(void **state)
{
    (void)state;
    static const int32_t x[8] = {0, 0, 0, 1, 0, 0, 0, 1};
    raw r;
    raw_load(&r, case_disagree_mod, x, sizeof x);
    assert_fails(r.m, 4, r.args, r.n_args, "stablehlo.case: the devices disagree on the index",
                 "5:3");
    raw_fini(&r);
}

/* A manual computation over "data" whose body adds to each element the sum
 * of its group's local tensor (rows 0-3 or 4-7): a group cut in the wrong
 * place gives other sums. The reduce is the body's own, local to the group. */
static const char manual_mod[] =
    MESH "func.func @main(%arg0: tensor<8x4xf32> " SH("[{\"x\"}, {\"y\"}]") ") -> "
         "tensor<8x4xf32> {\n"
         "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}, {}]>] "
         "out_shardings=[<@mesh, [{\"x\"}, {}]>] manual_axes={\"x\"} (%a: tensor<4x4xf32>) {\n"
         "    %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
         "    %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0, 1] "
         ": (tensor<4x4xf32>, tensor<f32>) -> tensor<f32>\n"
         "    %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x4xf32>\n"
         "    %r = stablehlo.add %a, %b : tensor<4x4xf32>\n"
         "    sdy.return %r : tensor<4x4xf32>\n"
         "  } : (tensor<8x4xf32>) -> tensor<8x4xf32>\n"
         "  return %0 : tensor<8x4xf32>\n}\n";

static double manual_want(const ex_tensor *args, size_t i, const double *k)
{
    (void)k;
    size_t g = i / 16; /* 4 rows of 4 per group */
    double sum = 0;
    for (size_t j = 0; j < 16; j++) {
        sum += arg0(args, g * 16 + j);
    }
    return arg0(args, i) + sum;
}

static void test_ex_exec_run_manual_computation_computes(void **state)
{
    (void)state;
    check_values(manual_mod, manual_want, NULL);
}

static const char manual_collective_mod[] =
    "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"
    "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
    "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"x\"}]>] "
    "out_shardings=[<@mesh, [{\"x\"}]>] manual_axes={\"x\"} (%a: tensor<4xf32>) {\n"
    "    %1 = sdy.all_reduce {\"y\"} %a out_sharding=<@mesh, [{}]> : tensor<4xf32>\n"
    "    sdy.return %1 : tensor<4xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  return %0 : tensor<8xf32>\n}\n";

static void test_ex_exec_run_collective_in_manual_body_is_a_clear_error(void **state)
{
    (void)state;
    expect_error(manual_collective_mod, false, 4,
                 "op sdy.all_reduce inside sdy.manual_computation cannot be executed yet", "4:5");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_exec_run_call_twice_computes),
        cmocka_unit_test(test_ex_exec_run_nested_calls_compute),
        cmocka_unit_test(test_ex_exec_run_named_computation_computes),
        cmocka_unit_test(test_ex_exec_run_recursion_is_a_clear_error),
        cmocka_unit_test(test_ex_exec_run_missing_callee_is_a_clear_error),
        cmocka_unit_test(test_ex_exec_run_malformed_control_flow_is_a_clear_error),
        cmocka_unit_test(test_ex_exec_run_while_computes),
        cmocka_unit_test(test_ex_check_text_while_with_collective_matches),
        cmocka_unit_test(test_ex_exec_run_while_swaps_and_captures),
        cmocka_unit_test(test_ex_exec_run_calls_and_case_in_loop_compute),
        cmocka_unit_test(test_ex_exec_run_while_disagreeing_devices_fail),
        cmocka_unit_test(test_ex_exec_run_while_failing_body_ends_every_device),
        cmocka_unit_test(test_ex_exec_run_case_and_if_compute),
        cmocka_unit_test(test_ex_exec_run_case_disagreeing_devices_fail),
        cmocka_unit_test(test_ex_exec_run_manual_computation_computes),
        cmocka_unit_test(test_ex_exec_run_collective_in_manual_body_is_a_clear_error),
    };
    return cmocka_run_group_tests_name("ex_flow", tests, NULL, NULL);
}
