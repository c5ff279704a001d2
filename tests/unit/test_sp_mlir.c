/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the MLIR reader and printer (planner/sp_mlir_*.c): round
 * trips of every custom form in pretty and generic input, SSA naming as MLIR
 * does it, canonical float printing, every reader error with its "LINE:COL",
 * an OOM loop over sp_mlir_read and sp_mlir_print, and the IR helpers the
 * reader builds on (attribute equality and hashing, type interning, element
 * sizes). */
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
#include "sp_float.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_mlir.h"

#define N_OF(x) (sizeof(x) / sizeof((x)[0]))

/* ---- helpers ------------------------------------------------------------------ */

/* Reads text (which must succeed) and returns the printed form (cm_free). */
static char *print_text(const char *text, bool generic)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    cm_status st = sp_mlir_read(text, strlen(text), 0, &m, &err);
    if (st != CM_OK) {
        print_error("read failed at %s: %s\n--- input ---\n%s\n", err.path, err.msg, text);
    }
    assert_int_equal(st, CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts o = {generic, false};
    sp_mlir_print(m, &o, &b);
    assert_false(b.oom);
    sp_module_destroy(m);
    return cm_buf_take(&b);
}

static void assert_prints(const char *in, const char *want)
{
    char *got = print_text(in, false);
    if (strcmp(got, want) != 0) {
        print_error("--- want ---\n%s--- got ---\n%s", want, got);
    }
    assert_string_equal(got, want);
    cm_free(got);
}

/* Reading text must fail with CM_EINVAL at path, with msg containing needle. */
static void assert_read_error(const char *text, const char *path, const char *needle)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = (sp_module *)&err; /* must be reset to NULL */
    cm_status st = sp_mlir_read(text, strlen(text), 0, &m, &err);
    if (st != CM_EINVAL || strcmp(err.path, path) != 0 || strstr(err.msg, needle) == NULL) {
        print_error("want %s '%s', got status %d at '%s': %s\n", path, needle, (int)st, err.path,
                    err.msg);
    }
    assert_int_equal(st, CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_null(m);
    assert_string_equal(err.path, path);
    assert_non_null(strstr(err.msg, needle));
}

/* ---- exact dense values, locations, the forms JAX and StableHLO's tests use ------ */

/* The values of the constant of the first op of @main in text. */
static void dense_of(const char *text, cm_arena *ar, uint64_t **v, size_t *n, cm_status want)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    uint32_t f = sp_module_func(m, "main");
    assert_int_not_equal(f, SP_NONE);
    const sp_block *b = &m->blocks[m->ops[f].regions[0].blocks[0]];
    const sp_attr *a = sp_op_attr(m, b->ops[0], "value");
    cm_status st = sp_mlir_dense_values(m, a, ar, v, n, &err);
    assert_int_equal(st, want);
    sp_module_destroy(m);
}

#define CONST_MODULE(BODY, T)                                                                      \
    "func.func @main() -> " T " {\n  %0 = stablehlo.constant dense<" BODY "> : " T "\n"          \
    "  return %0 : " T "\n}\n"

static void test_sp_mlir_dense_values_exact(void **state)
{
    (void)state;
    cm_arena ar;
    cm_arena_init(&ar, 4096);
    uint64_t *v;
    size_t n;
    dense_of(CONST_MODULE("9223372036854775807", "tensor<i64>"), &ar, &v, &n, CM_OK);
    assert_int_equal(n, 1);
    assert_true(v[0] == (uint64_t)INT64_MAX);
    dense_of(CONST_MODULE("[9007199254740993, -9223372036854775808]", "tensor<2xi64>"), &ar, &v,
             &n, CM_OK);
    assert_true(v[0] == 9007199254740993u && v[1] == (uint64_t)1 << 63);
    dense_of(CONST_MODULE("18446744073709551615", "tensor<ui64>"), &ar, &v, &n, CM_OK);
    assert_true(v[0] == UINT64_MAX);
    dense_of(CONST_MODULE("[-1, 127]", "tensor<2xi8>"), &ar, &v, &n, CM_OK);
    assert_true(v[0] == 0xffu && v[1] == 127u);
    dense_of(CONST_MODULE("128", "tensor<i8>"), &ar, &v, &n, CM_EINVAL);
    /* a hex literal in a list is a bit pattern: NaN, not 2143289344 */
    dense_of(CONST_MODULE("[0x7FC00000, 1.0, 0xFF800000]", "tensor<3xf32>"), &ar, &v, &n, CM_OK);
    assert_true(n == 3 && v[0] == 0x7FC00000u && v[1] == 0x3F800000u && v[2] == 0xFF800000u);
    dense_of(CONST_MODULE("[1.0, -2.5]", "tensor<2xbf16>"), &ar, &v, &n, CM_OK);
    assert_true(v[0] == 0x3F80u && v[1] == 0xC020u);
    dense_of(CONST_MODULE("[1.0, 0.1]", "tensor<2xf16>"), &ar, &v, &n, CM_OK);
    assert_true(v[0] == 0x3C00u && v[1] == 0x2E66u);
    /* rounded once, from the literal: 1 + 2^-8 + 2^-30 is just above the bf16
     * tie between 1.0 and 1 + 2^-7 (through f32 it would land on the tie and
     * round to even, 1.0); f16 overflow, the least normal, a subnormal, NaN */
    dense_of(CONST_MODULE("[1.0039062509313226, -3.5e38, 1.1754943508222875e-38]",
                          "tensor<3xbf16>"),
             &ar, &v, &n, CM_OK);
    assert_true(v[0] == 0x3F81u && v[1] == 0xFF80u && v[2] == 0x0080u);
    dense_of(CONST_MODULE("[65519.0, 65520.0, 6.103515625e-05, 5.9604644775390625e-08, 0x7E00]",
                          "tensor<5xf16>"),
             &ar, &v, &n, CM_OK);
    assert_true(v[0] == 0x7BFFu && v[1] == 0x7C00u && v[2] == 0x0400u && v[3] == 0x0001u &&
                v[4] == 0x7E00u);
    /* quoted hex: raw little-endian bytes, an array or one element's splat */
    dense_of(CONST_MODULE("\"0x0000803F00000040\"", "tensor<2xf32>"), &ar, &v, &n, CM_OK);
    assert_true(n == 2 && v[0] == 0x3F800000u && v[1] == 0x40000000u);
    dense_of(CONST_MODULE("\"0x0100\"", "tensor<3xi16>"), &ar, &v, &n, CM_OK);
    assert_true(n == 3 && v[0] == 1u && v[2] == 1u);
    dense_of(CONST_MODULE("\"0x010002\"", "tensor<2xi16>"), &ar, &v, &n, CM_EINVAL);
    /* a splat of an empty tensor has no values */
    dense_of(CONST_MODULE("0.0", "tensor<0x4xf32>"), &ar, &v, &n, CM_OK);
    assert_int_equal(n, 0);
    dense_of(CONST_MODULE("(1.0, -1.0)", "tensor<2xcomplex<f32>>"), &ar, &v, &n, CM_OK);
    assert_true(n == 4 && v[2] == 0x3F800000u && v[3] == 0xBF800000u);
    cm_arena_fini(&ar);
}

static void test_sp_mlir_read_locations_resolve(void **state)
{
    (void)state;
    const char *text =
        "module @m {\n"
        "  func.func @main(%arg0: tensor<4xf32> loc(\"params['w1']\")) -> "
        "(tensor<4xf32> {jax.result_info = \"out\"}) {\n"
        "    %0 = stablehlo.sine %arg0 : tensor<4xf32> loc(#loc3)\n"
        "    %1 = stablehlo.cosine %0 : tensor<4xf32> loc(\"y\")\n"
        "    return %1 : tensor<4xf32> loc(#loc)\n"
        "  } loc(#loc)\n"
        "} loc(#loc)\n"
        "#loc = loc(unknown)\n"
        "#loc1 = loc(\"model.py\":14:9 to :20)\n"
        "#loc2 = loc(callsite(#loc1 at \"main.py\":3:1))\n"
        "#loc3 = loc(\"jit(f)/sin\"(#loc2))\n";
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    uint32_t f = sp_module_func(m, "main");
    const sp_block *b = &m->blocks[m->ops[f].regions[0].blocks[0]];
    assert_string_equal(sp_value_name(m, b->first_arg), "params['w1']");
    uint32_t sine = b->ops[0];
    assert_string_equal(sp_loc_name(m->ops[sine].where), "jit(f)/sin");
    assert_null(sp_value_name(m, m->ops[sine].first_result)); /* a name stack, not a name */
    assert_string_equal(sp_value_name(m, m->ops[b->ops[1]].first_result), "y");
    char src[64];
    assert_true(sp_op_source(m, sine, src, sizeof src));
    assert_string_equal(src, "model.py:14");
    assert_false(sp_op_source(m, b->ops[2], src, sizeof src));
    assert_string_equal(sp_func_result_name(m, f, 0), "out");
    /* printed back with debug info, byte for byte */
    cm_buf o;
    cm_buf_init(&o);
    sp_print_opts po = {false, true};
    sp_mlir_print(m, &po, &o);
    assert_non_null(strstr(o.data, "} loc(#loc)\n#loc = loc(unknown)\n"));
    assert_non_null(strstr(o.data, "%arg0: tensor<4xf32> loc(\"params['w1']\")"));
    sp_module *m2 = NULL;
    assert_int_equal(sp_mlir_read(o.data, o.len, 0, &m2, &err), CM_OK);
    cm_buf o2;
    cm_buf_init(&o2);
    sp_mlir_print(m2, &po, &o2);
    assert_string_equal(o.data, o2.data);
    cm_buf_fini(&o);
    cm_buf_fini(&o2);
    sp_module_destroy(m2);
    sp_module_destroy(m);
}

/* Block arguments carry locations too: a labelled block keeps and prints
 * them, the custom reduce form's reducer arguments take them. */
static void test_sp_mlir_read_block_arg_locations(void **state)
{
    (void)state;
    const char *text =
        "func.func @f(%arg0: tensor<4xf32>) -> tensor<f32> {\n"
        "  %cst = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %0 = stablehlo.reduce(%arg0 init: %cst) across dimensions = [0] : (tensor<4xf32>, "
        "tensor<f32>) -> tensor<f32>\n"
        "   reducer(%a: tensor<f32> loc(\"a\"), %b: tensor<f32> loc(\"b\"))  {\n"
        "    %1 = stablehlo.add %a, %b : tensor<f32>\n"
        "    stablehlo.return %1 : tensor<f32>\n"
        "  }\n"
        "  %2 = \"stablehlo.reduce\"(%0, %cst) ({\n"
        "  ^bb0(%c: tensor<f32> loc(\"c\"), %d: tensor<f32> loc(#l)):\n"
        "    %3 = stablehlo.multiply %c, %d : tensor<f32>\n"
        "    \"stablehlo.return\"(%3) : (tensor<f32>) -> ()\n"
        "  }) {dimensions = array<i64: 0>} : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
        "  return %2 : tensor<f32>\n"
        "}\n"
        "#l = loc(\"m.py\":3:4)\n";
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    cm_buf o;
    cm_buf_init(&o);
    sp_print_opts po = {true, true};
    sp_mlir_print(m, &po, &o);
    assert_non_null(strstr(o.data, "^bb0(%arg1: tensor<f32> loc(\"c\"), %arg2: tensor<f32> loc(#l)):"));
    cm_buf_fini(&o);
    sp_module_destroy(m);
}

static void test_sp_mlir_read_rejects_bad_locations(void **state)
{
    (void)state;
    assert_read_error("func.func @f() {\n  return loc(#nowhere)\n}\n", "2:14",
                      "undefined location alias '#nowhere'");
    assert_read_error("func.func @f() {\n  return loc(#a)\n}\n#a = loc(#b)\n#b = loc(#a)\n", "4:10",
                      "refers to itself");
    assert_read_error("func.func @f() {\n  return loc(42)\n}\n", "2:14", "expected a location");
    assert_read_error("module {\n} loc(#x)\n#x = loc(unknown)\n// -----\nmodule {\n}\n", "5:1",
                      "a second module");
}

static void test_sp_mlir_print_jax_and_interpreter_forms(void **state)
{
    (void)state;
    const char *in =
        "module {\n"
        "  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xcomplex<f32>> {\n"
        "    %0 = chlo.erf %arg0 : tensor<4xf32> -> tensor<4xf32>\n"
        "    %1 = chlo.next_after %0, %arg1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>\n"
        "    %2:2 = chlo.top_k(%1, k = 2) : tensor<4xf32> -> (tensor<2xf32>, tensor<2xi32>)\n"
        "    %3 = stablehlo.complex %1, %arg1 : tensor<4xcomplex<f32>>\n"
        "    %4 = call @\"<lambda>\"(%0) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "    check.expect_almost_eq_const %4, dense<1.000000e+00> : tensor<4xf32>, tolerance = "
        "1.000000e-01\n"
        "    check.expect_close %0, %4, max_ulp_difference = 3 : tensor<4xf32>, tensor<4xf32>\n"
        "    %5 = interpreter.probe %0, probe_id = \"p\" : tensor<4xf32>\n"
        "    return %3 : tensor<4xcomplex<f32>>\n"
        "  }\n"
        "  func.func private @\"<lambda>\"(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    return {foo} %arg0 : tensor<4xf32>\n"
        "  }\n"
        "}\n";
    assert_prints(in, in);
    /* and the generic form reads back to the same */
    char *g = print_text(in, true);
    assert_prints(g, in);
    cm_free(g);
}


/* ---- round trips ---------------------------------------------------------------- */

/* Modules in the exact form the printer writes (and MLIR prints): reading
 * and printing each must give it back, and so must the generic form. */
static const char *const corpus[] = {
    /* elementwise */
    "module {\n"
    "  func.func @f(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<2xi1>)"
        " -> tensor<2xf32> {\n"
    "    %0 = stablehlo.add %arg0, %arg1 : tensor<2xf32>\n"
    "    %1 = stablehlo.multiply %0, %arg1 : tensor<2xf32>\n"
    "    %2 = stablehlo.abs %1 : tensor<2xf32>\n"
    "    %3 = stablehlo.convert %2 : (tensor<2xf32>) -> tensor<2xf64>\n"
    "    %4 = stablehlo.select %arg2, %2, %1 : tensor<2xi1>, tensor<2xf32>\n"
    "    %5 = stablehlo.clamp %arg0, %4, %arg1 : tensor<2xf32>\n"
    "    %6 = stablehlo.reshape %5 : (tensor<2xf32>) -> tensor<1x2xf32>\n"
    "    %7 = stablehlo.compare  GT, %arg0, %arg1,  FLOAT : (tensor<2xf32>,"
        " tensor<2xf32>) -> tensor<2xi1>\n"
    "    %8 = stablehlo.iota dim = 0 : tensor<2xf32>\n"
    "    %9 = stablehlo.reduce_precision %8, format = e5m2 : tensor<2xf32>\n"
    "    return %9 : tensor<2xf32>\n"
    "  }\n"
    "}\n",
    /* keyword */
    "module {\n"
    "  func.func @f(%arg0: tensor<4x8xf32>, %arg1: tensor<8x16xf32>, %arg2:"
        " tensor<f32>, %arg3: tensor<i64>) -> tensor<4x16xf32> {\n"
    "    %0 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) ->"
        " tensor<4x16xf32>\n"
    "    %1 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) ->"
        " tensor<8x4xf32>\n"
    "    %2 = stablehlo.reverse %arg0, dims = [0] : tensor<4x8xf32>\n"
    "    %3 = stablehlo.concatenate %arg0, %2, dim = 0 : (tensor<4x8xf32>,"
        " tensor<4x8xf32>) -> tensor<8x8xf32>\n"
    "    %4 = stablehlo.dynamic_slice %arg0, %arg3, %arg3, sizes = [2, 2] :"
        " (tensor<4x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x2xf32>\n"
    "    %5 = stablehlo.pad %arg0, %arg2, low = [0, 1], high = [0, 1], interior ="
        " [0, 0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x10xf32>\n"
    "    %6 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0],"
        " precision = [DEFAULT, HIGHEST] : (tensor<4x8xf32>, tensor<8x16xf32>) ->"
        " tensor<4x16xf32>\n"
    "    %7 = stablehlo.dot_general %1, %1, batching_dims = [1] x [1],"
        " contracting_dims = [0] x [0] : (tensor<8x4xf32>, tensor<8x4xf32>) ->"
        " tensor<4xf32>\n"
    "    %8 = stablehlo.einsum %arg0, %arg1, config = \"ab,bc->ac\" :"
        " (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>\n"
    "    %9 = stablehlo.slice %arg0 [0:2, 1:8:2] : (tensor<4x8xf32>) ->"
        " tensor<2x4xf32>\n"
    "    %10 = stablehlo.custom_call @foo(%arg0) {backend_config = \"x\","
        " has_side_effect = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>\n"
    "    %11:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<4x8xf32>,"
        " tensor<8x16xf32>\n"
    "    %12 = stablehlo.add %11#1, %11#1 : tensor<8x16xf32>\n"
    "    return %6 : tensor<4x16xf32>\n"
    "  }\n"
    "}\n",
    /* regions */
    "module {\n"
    "  func.func @f(%arg0: tensor<4x8xf32>, %arg1: tensor<f32>, %arg2: tensor<i32>)"
        " -> tensor<4xf32> {\n"
    "    %0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across"
        " dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>\n"
    "    %1 = stablehlo.reduce(%arg0 init: %arg1) across dimensions = [1] :"
        " (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>\n"
    "     reducer(%arg3: tensor<f32>, %arg4: tensor<f32>)  {\n"
    "      %4 = stablehlo.divide %arg3, %arg4 : tensor<f32>\n"
    "      stablehlo.return %4 : tensor<f32>\n"
    "    }\n"
    "    %2:2 = stablehlo.while(%iterArg = %arg2, %iterArg_0 = %0) : tensor<i32>,"
        " tensor<4xf32>\n"
    "     cond {\n"
    "      %c = stablehlo.constant dense<10> : tensor<i32>\n"
    "      %4 = stablehlo.compare  LT, %iterArg, %c : (tensor<i32>, tensor<i32>) ->"
        " tensor<i1>\n"
    "      stablehlo.return %4 : tensor<i1>\n"
    "    } do {\n"
    "      %c = stablehlo.constant dense<1> : tensor<i32>\n"
    "      %4 = stablehlo.add %iterArg, %c : tensor<i32>\n"
    "      stablehlo.return %4, %iterArg_0 : tensor<i32>, tensor<4xf32>\n"
    "    }\n"
    "    %3 = \"stablehlo.case\"(%arg2) ({\n"
    "      stablehlo.return %0 : tensor<4xf32>\n"
    "    }, {\n"
    "      stablehlo.return %1 : tensor<4xf32>\n"
    "    }) : (tensor<i32>) -> tensor<4xf32>\n"
    "    return %2#1 : tensor<4xf32>\n"
    "  }\n"
    "}\n",
    /* constants */
    "module {\n"
    "  func.func @f() -> tensor<2xf32> {\n"
    "    %c = stablehlo.constant dense<[1, 2]> : tensor<2xi32>\n"
    "    %c_0 = stablehlo.constant dense<1> : tensor<2x2xi32>\n"
    "    %cst = stablehlo.constant dense<1.500000e+00> : tensor<2xf32>\n"
    "    %cst_1 = stablehlo.constant {attr = 1.000000e-03 : f32} dense<0.000000e+00>"
        " : tensor<2xf32>\n"
    "    %c_2 = stablehlo.constant dense<[true, false]> : tensor<2xi1>\n"
    "    %cst_3 = stablehlo.constant() <{value = dense<[1, 2]> : tensor<2xi8>}> : ()"
        " -> tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>\n"
    "    %c5_i32 = arith.constant 5 : i32\n"
    "    %c-1 = arith.constant -1 : index\n"
    "    %true = arith.constant true\n"
    "    %cst_4 = arith.constant dense<-1> : tensor<i32>\n"
    "    %cst_5 = arith.constant 0x7FC00000 : f32\n"
    "    %cst_6 = arith.constant 0.33333333333333331 : f64\n"
    "    %0 = tensor.cast %cst : tensor<2xf32> to tensor<?xf32>\n"
    "    %1 = stablehlo.tuple %c, %cst : tuple<tensor<2xi32>, tensor<2xf32>>\n"
    "    %2 = stablehlo.get_tuple_element %1[1] : (tuple<tensor<2xi32>,"
        " tensor<2xf32>>) -> tensor<2xf32>\n"
    "    %3 = stablehlo.composite \"my.op\" %2 {composite_attributes = {k ="
        " 2.500000e-01 : f32}, decomposition = @g} : (tensor<2xf32>) -> tensor<2xf32>\n"
    "    return %3 : tensor<2xf32>\n"
    "  }\n"
    "}\n",
    /* sdy */
    "module {\n"
    "  sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n"
    "  func.func @f(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh,"
        " [{\"x\"}, {\"y\", ?}p1]>}) -> (tensor<8x16xf32> {sdy.sharding ="
        " #sdy.sharding<@mesh, [{}, {}]>}) {\n"
    "    %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {\"y\"}]> : tensor<8x16xf32>\n"
    "    %1 = sdy.reshard %0 <@mesh, [{\"x\"}, {}]> : tensor<8x16xf32>\n"
    "    %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD :"
        " tensor<8x16xf32>\n"
    "    sdy.sharding_group %2 group_id=3 : tensor<8x16xf32>\n"
    "    %3 = sdy.all_gather [{\"x\"}, {}] %2 out_sharding=<@mesh, [{}, {}]> :"
        " tensor<8x16xf32>\n"
    "    %4 = sdy.all_slice [{}, {\"y\":(1)2}] %3 out_sharding=<@mesh, [{},"
        " {\"y\":(1)2}]> : tensor<8x16xf32>\n"
    "    %5 = sdy.all_reduce {\"x\"} %4 out_sharding=<@mesh, [{}, {\"y\":(1)2}]> :"
        " tensor<8x16xf32>\n"
    "    %6 = sdy.all_reduce max {\"x\"} %5 out_sharding=<@mesh, [{}, {\"y\":(1)2}]> :"
        " tensor<8x16xf32>\n"
    "    %7 = sdy.all_to_all [{\"y\":(1)2}: 1->0] %6 out_sharding=<@mesh, [{\"y\":(1)2},"
        " {}]> : tensor<8x16xf32>\n"
    "    %8 = sdy.collective_permute %7 out_sharding=<@mesh, [{\"x\"}, {}]> :"
        " tensor<8x16xf32>\n"
    "    %9 = sdy.reduce_scatter [{}, {\"y\"}] %8 out_sharding=<@mesh, [{\"x\"}, {\"y\"}]>"
        " : tensor<8x16xf32>\n"
    "    %10 = sdy.replicated_to_unreduced {\"y\"} %9 out_sharding=<@mesh, [{\"x\"},"
        " {}], unreduced={\"y\"}> : tensor<8x16xf32>\n"
    "    %11 = sdy.sharded_to_unreduced [{\"x\"}, {}] %10 out_sharding=<@mesh, [{},"
        " {}], unreduced={\"x\", \"y\"}> : tensor<8x16xf32>\n"
    "    %12 = sdy.data_flow_edge %11 sharding=<@mesh, [{\"x\"}, {}]> :"
        " tensor<8x16xf32>\n"
    "    %13 = sdy.func_data_flow_edge %12 : tensor<8x16xf32>\n"
    "    %14 = sdy.manual_computation(%13) in_shardings=[<@mesh, [{\"x\"}, {}]>]"
        " out_shardings=[<@mesh, [{\"x\"}, {}]>] manual_axes={\"x\"} (%arg1:"
        " tensor<4x16xf32>) {\n"
    "      %16 = sdy.constant dense<1.000000e+00> : tensor<4x16xf32>\n"
    "      %17 = stablehlo.add %arg1, %16 : tensor<4x16xf32>\n"
    "      sdy.return %17 : tensor<4x16xf32>\n"
    "    } : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
    "    %15 = sdy.named_computation<\"foo\">(%14) in_shardings=[<@mesh, [{\"x\"}, {}]>]"
        " out_shardings=[<@mesh, [{}, {}]>] (%arg1: tensor<8x16xf32>) {\n"
    "      sdy.return %arg1 : tensor<8x16xf32>\n"
    "    } : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
    "    return %15 : tensor<8x16xf32>\n"
    "  }\n"
    "}\n",
    /* alias */
    "#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 :"
        " compressed) }>\n"
    "module @m attributes {mhlo.num_partitions = 8 : i32} {\n"
    "  func.func private @f(%arg0: tensor<10x20xf32, #CSR>) -> tensor<10x20xf32>"
        " attributes {a = [1 : i64, 2.000000e+00 : f64], b = #stablehlo<precision HIGH>}"
        " {\n"
    "    %0 = stablehlo.abs %arg0 : (tensor<10x20xf32, #CSR>) -> tensor<10x20xf32>\n"
    "    return %0 : tensor<10x20xf32>\n"
    "  }\n"
    "}\n",
    /* decl */
    "module {\n"
    "  sdy.mesh @m = <[\"x\"=2]>\n"
    "  func.func private @decl(tensor<16xbf16>, tensor<2xf32> {sdy.sharding ="
        " #sdy.sharding<@m, [{}]>}) -> (tensor<2xf32>, tensor<i1>)\n"
    "  func.func nested @h(%arg0: tensor<f32>) -> tensor<f32> {\n"
    "    %0 = call @decl2(%arg0) : (tensor<f32>) -> tensor<f32>\n"
    "    return %0 : tensor<f32>\n"
    "  }\n"
    "}\n",
};

static void test_sp_mlir_print_roundtrips_pretty_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus); i++) {
        char *once = print_text(corpus[i], false);
        if (strcmp(once, corpus[i]) != 0) {
            print_error("corpus %zu:\n--- want ---\n%s--- got ---\n%s", i, corpus[i], once);
        }
        assert_string_equal(once, corpus[i]);
        char *twice = print_text(once, false);
        assert_string_equal(twice, once);
        cm_free(once);
        cm_free(twice);
    }
}

static void test_sp_mlir_print_roundtrips_generic_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus); i++) {
        char *gen = print_text(corpus[i], true);
        char *gen2 = print_text(gen, true);
        assert_string_equal(gen2, gen);
        char *pretty = print_text(gen, false);
        if (strcmp(pretty, corpus[i]) != 0) {
            print_error("corpus %zu:\n--- generic ---\n%s--- pretty ---\n%s", i, gen, pretty);
        }
        assert_string_equal(pretty, corpus[i]);
        cm_free(gen);
        cm_free(gen2);
        cm_free(pretty);
    }
}

static void test_sp_mlir_print_generic_input_prints_pretty(void **state)
{
    (void)state;
    assert_prints("func.func @f(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {\n"
                  "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> "
                  "tensor<2xf32>\n"
                  "  %1 = \"stablehlo.transpose\"(%0) <{permutation = array<i64: 0>}> : "
                  "(tensor<2xf32>) -> tensor<2xf32>\n"
                  "  %2 = \"stablehlo.dot_general\"(%1, %1) {dot_dimension_numbers = "
                  "#stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions "
                  "= [0]>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>\n"
                  "  \"func.return\"(%0) : (tensor<2xf32>) -> ()\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32> {\n"
                  "    %0 = stablehlo.add %arg0, %arg1 : tensor<2xf32>\n"
                  "    %1 = stablehlo.transpose %0, dims = [0] : (tensor<2xf32>) -> "
                  "tensor<2xf32>\n"
                  "    %2 = stablehlo.dot_general %1, %1, contracting_dims = [0] x [0] : "
                  "(tensor<2xf32>, tensor<2xf32>) -> tensor<f32>\n"
                  "    return %0 : tensor<2xf32>\n"
                  "  }\n"
                  "}\n");
}

static void test_sp_mlir_print_sdy_generic_input_prints_pretty(void **state)
{
    (void)state;
    assert_prints(
        "sdy.mesh @mesh = <[\"x\"=2]>\n"
        "func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = \"sdy.all_reduce\"(%a) {out_sharding = #sdy.sharding<@mesh, [{}]>, "
        "reduction_axes = #sdy<axis_ref_list{\"x\"}>} : (tensor<8xf32>) -> tensor<8xf32>\n"
        "  %1 = \"sdy.all_gather\"(%0) {gathering_axes = "
        "#sdy<list_of_axis_ref_lists[{\"x\"}]>, out_sharding = #sdy.sharding<@mesh, [{}]>} "
        ": (tensor<8xf32>) -> tensor<8xf32>\n"
        "  return %1 : tensor<8xf32>\n"
        "}\n",
        "module {\n"
        "  sdy.mesh @mesh = <[\"x\"=2]>\n"
        "  func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "    %0 = sdy.all_reduce {\"x\"} %arg0 out_sharding=<@mesh, [{}]> : tensor<8xf32>\n"
        "    %1 = sdy.all_gather [{\"x\"}] %0 out_sharding=<@mesh, [{}]> : tensor<8xf32>\n"
        "    return %1 : tensor<8xf32>\n"
        "  }\n"
        "}\n");
}

static void test_sp_mlir_read_keeps_sdy_collective_attrs(void **state)
{
    (void)state;
    const char *text = "func.func @f(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
                       "  %0 = sdy.all_to_all [{\"x\", \"y\":(2)4}: 0->1] %a "
                       "out_sharding=<@m, [{}, {\"x\"}]> : tensor<8x8xf32>\n"
                       "  %1 = sdy.all_reduce <min> {\"z\"} %0 out_sharding=<@m, [{}, {}]> : "
                       "tensor<8x8xf32>\n"
                       "  return %1 : tensor<8x8xf32>\n"
                       "}\n";
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    uint32_t a2a = SP_NONE, ar = SP_NONE;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_SDY_ALL_TO_ALL) {
            a2a = i;
        } else if (m->ops[i].kind == SP_OP_SDY_ALL_REDUCE) {
            ar = i;
        }
    }
    assert_int_not_equal(a2a, SP_NONE);
    const sp_attr *p = sp_op_attr(m, a2a, "params");
    assert_non_null(p);
    assert_int_equal(p->kind, SP_ATTR_ALL_TO_ALL);
    assert_int_equal(p->u.a2a.n, 1);
    assert_int_equal(p->u.a2a.items[0].src_dim, 0);
    assert_int_equal(p->u.a2a.items[0].tgt_dim, 1);
    assert_int_equal(p->u.a2a.items[0].axes.n, 2);
    assert_string_equal(p->u.a2a.items[0].axes.axes[1].name, "y");
    assert_int_equal(p->u.a2a.items[0].axes.axes[1].pre_size, 2);
    assert_int_equal(p->u.a2a.items[0].axes.axes[1].size, 4);
    assert_int_equal(sp_op_attr(m, a2a, "out_sharding")->kind, SP_ATTR_SHARDING);
    const sp_attr *ra = sp_op_attr(m, ar, "reduction_axes");
    assert_int_equal(ra->kind, SP_ATTR_AXIS_LIST);
    assert_int_equal(ra->u.axes.n, 1);
    assert_string_equal(ra->u.axes.axes[0].name, "z");
    const sp_attr *op = sp_op_attr(m, ar, "reduction_op");
    assert_int_equal(op->kind, SP_ATTR_ENUM);
    assert_string_equal(op->u.enm.value, "min");
    sp_module_destroy(m);
}

/* ---- names ----------------------------------------------------------------------- */

static void test_sp_mlir_print_names_result_groups(void **state)
{
    (void)state;
    assert_prints("func.func @f(%x: tensor<f32>) -> tensor<f32> {\n"
                  "  %a:2 = \"foo.bar\"(%x) : (tensor<f32>) -> (tensor<f32>, tensor<f32>)\n"
                  "  %b = stablehlo.add %a#1, %a#0 : tensor<f32>\n"
                  "  return %b : tensor<f32>\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f(%arg0: tensor<f32>) -> tensor<f32> {\n"
                  "    %0:2 = \"foo.bar\"(%arg0) : (tensor<f32>) -> (tensor<f32>, tensor<f32>)\n"
                  "    %1 = stablehlo.add %0#1, %0#0 : tensor<f32>\n"
                  "    return %1 : tensor<f32>\n"
                  "  }\n"
                  "}\n");
}

static void test_sp_mlir_print_names_constants_with_shared_suffixes(void **state)
{
    (void)state;
    assert_prints("func.func @f() {\n"
                  "  %a = stablehlo.constant dense<1> : tensor<i32>\n"
                  "  %b = stablehlo.constant dense<1.0> : tensor<f32>\n"
                  "  %d = stablehlo.constant dense<2> : tensor<i32>\n"
                  "  %e = stablehlo.constant dense<2.0> : tensor<f32>\n"
                  "  %f = arith.constant 7 : i64\n"
                  "  %g = arith.constant 7 : i64\n"
                  "  return\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f() {\n"
                  "    %c = stablehlo.constant dense<1> : tensor<i32>\n"
                  "    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>\n"
                  "    %c_0 = stablehlo.constant dense<2> : tensor<i32>\n"
                  "    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>\n"
                  "    %c7_i64 = arith.constant 7 : i64\n"
                  "    %c7_i64_2 = arith.constant 7 : i64\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

static void test_sp_mlir_print_names_args_continue_in_nested_regions(void **state)
{
    (void)state;
    assert_prints(
        "func.func @f(%x: tensor<4xf32>, %i: tensor<f32>) -> tensor<f32> {\n"
        "  %r = \"stablehlo.reduce\"(%x, %i) ({\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %s = \"stablehlo.divide\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
        "    \"stablehlo.return\"(%s) : (tensor<f32>) -> ()\n"
        "  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>\n"
        "  return %r : tensor<f32>\n"
        "}\n",
        "module {\n"
        "  func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<f32> {\n"
        "    %0 = stablehlo.reduce(%arg0 init: %arg1) across dimensions = [0] : "
        "(tensor<4xf32>, tensor<f32>) -> tensor<f32>\n"
        "     reducer(%arg2: tensor<f32>, %arg3: tensor<f32>)  {\n"
        "      %1 = stablehlo.divide %arg2, %arg3 : tensor<f32>\n"
        "      stablehlo.return %1 : tensor<f32>\n"
        "    }\n"
        "    return %0 : tensor<f32>\n"
        "  }\n"
        "}\n");
}

static void test_sp_mlir_print_names_while_iter_args(void **state)
{
    (void)state;
    assert_prints(
        "func.func @f(%x: tensor<i32>) -> tensor<i32> {\n"
        "  %w:2 = stablehlo.while(%p = %x, %q = %x) : tensor<i32>, tensor<i32>\n"
        "  cond {\n"
        "    %t = stablehlo.constant dense<true> : tensor<i1>\n"
        "    stablehlo.return %t : tensor<i1>\n"
        "  } do {\n"
        "    stablehlo.return %q, %p : tensor<i32>, tensor<i32>\n"
        "  }\n"
        "  return %w#0 : tensor<i32>\n"
        "}\n",
        "module {\n"
        "  func.func @f(%arg0: tensor<i32>) -> tensor<i32> {\n"
        "    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg0) : tensor<i32>, "
        "tensor<i32>\n"
        "     cond {\n"
        "      %c = stablehlo.constant dense<true> : tensor<i1>\n"
        "      stablehlo.return %c : tensor<i1>\n"
        "    } do {\n"
        "      stablehlo.return %iterArg_0, %iterArg : tensor<i32>, tensor<i32>\n"
        "    }\n"
        "    return %0#0 : tensor<i32>\n"
        "  }\n"
        "}\n");
}

/* ---- attributes ------------------------------------------------------------------------ */

static void test_sp_mlir_print_floats_canonically(void **state)
{
    (void)state;
    assert_prints("func.func @f() attributes {a = 0.001 : f32, b = 1.0, c = -2.5e10 : f64, "
                  "d = 0.1 : f16, e = 1e40 : f32, f = 0x7F800000 : f32, g = 0.3333333333333333, "
                  "h = 16777217.0 : f32, i = 3 : bf16, j = #stablehlo.result_accuracy<atol = "
                  "1.0e-5, rtol = 0.0, ulps = 0, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>}"
                  " {\n  return\n}\n",
                  "module {\n"
                  "  func.func @f() attributes {a = 1.000000e-03 : f32, b = 1.000000e+00 : f64, "
                  "c = -2.500000e+10 : f64, d = 9.997560e-02 : f16, e = 0x7F800000 : f32, "
                  "f = 0x7F800000 : f32, g = 0.33333333333333331 : f64, h = 0x4B800000 : f32, "
                  "i = 3.000000e+00 : bf16, j = #stablehlo.result_accuracy<atol = 1.000000e-05, mode = "
                  "#stablehlo.result_accuracy_mode<TOLERANCE>>} {\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

static void test_sp_mlir_print_dense_ints_canonically(void **state)
{
    (void)state;
    assert_prints("func.func @f() {\n"
                  "  %0 = stablehlo.constant dense<[[1,2],[3,4]]> : tensor<2x2xi64>\n"
                  "  %1 = stablehlo.constant dense<[7, 7, 7]> : tensor<3xi32>\n"
                  "  %2 = stablehlo.constant dense<[0.5, 1.0]> : tensor<2xf32>\n"
                  "  %3 = stablehlo.constant dense<> : tensor<0xi32>\n"
                  "  return\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f() {\n"
                  "    %c = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>\n"
                  "    %c_0 = stablehlo.constant dense<7> : tensor<3xi32>\n"
                  "    %cst = stablehlo.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>\n"
                  "    %c_1 = stablehlo.constant dense<> : tensor<0xi32>\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

/* Float tensors print as MLIR prints them: each element in printFloatValue's
 * form for its type, a splat when all are equal, nested lists otherwise;
 * hex blobs and complex pairs stay as they came; a splat of a tensor past
 * 2^20 elements is rewritten too. */
static void test_sp_mlir_print_dense_floats_canonically(void **state)
{
    (void)state;
    assert_prints("func.func @f() {\n"
                  "  %0 = stablehlo.constant dense<1.0> : tensor<2x2xf32>\n"
                  "  %1 = stablehlo.constant dense<[[1.0, 2.5], [0x7FC00000, -0.0]]> : tensor<2x2xf32>\n"
                  "  %2 = stablehlo.constant dense<[0.1, 0.1]> : tensor<2xbf16>\n"
                  "  %3 = stablehlo.constant dense<1.2345678> : tensor<f32>\n"
                  "  %4 = stablehlo.constant dense<\"0x0000803F00000040\"> : tensor<2xf32>\n"
                  "  %5 = stablehlo.constant dense<(1.0,2.0)> : tensor<complex<f32>>\n"
                  "  %6 = stablehlo.constant dense<[1.5, 2.5]> : tensor<2xf64>\n"
                  "  %7 = stablehlo.constant dense<3.0> : tensor<2048x1024xf32>\n"
                  "  return\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f() {\n"
                  "    %cst = stablehlo.constant dense<1.000000e+00> : tensor<2x2xf32>\n"
                  "    %cst_0 = stablehlo.constant dense<[[1.000000e+00, 2.500000e+00], "
                  "[0x7FC00000, -0.000000e+00]]> : tensor<2x2xf32>\n"
                  "    %cst_1 = stablehlo.constant dense<1.000980e-01> : tensor<2xbf16>\n"
                  "    %cst_2 = stablehlo.constant dense<1.23456776> : tensor<f32>\n"
                  "    %cst_3 = stablehlo.constant dense<\"0x0000803F00000040\"> : tensor<2xf32>\n"
                  "    %cst_4 = stablehlo.constant dense<(1.0,2.0)> : tensor<complex<f32>>\n"
                  "    %cst_5 = stablehlo.constant dense<[1.500000e+00, 2.500000e+00]> : tensor<2xf64>\n"
                  "    %cst_6 = stablehlo.constant dense<3.000000e+00> : tensor<2048x1024xf32>\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

/* A training step's parameters and optimizer state make functions with
 * thousands of arguments: 6000 arguments with locs read, keep their locs and
 * print back as they came. */
static void test_sp_mlir_read_function_with_many_args(void **state)
{
    (void)state;
    enum { N = 6000 };
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "func.func @main(");
    for (int i = 0; i < N; i++) {
        cm_buf_printf(&b, "%s%%arg%d: tensor<2xf32>%s", i ? ", " : "", i,
                      i % 3 == 1 ? " loc(\"p\")" : "");
    }
    cm_buf_puts(&b, ") -> tensor<2xf32> {\n  return %arg5999 : tensor<2xf32>\n}\n");
    assert_false(b.oom);
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(b.data, b.len, 0, &m, &err), CM_OK);
    const sp_block *body = &m->blocks[m->body];
    const sp_op *fn = &m->ops[body->ops[0]];
    const sp_block *entry = &m->blocks[fn->regions[0].blocks[0]];
    assert_int_equal(entry->n_args, N);
    assert_non_null(entry->arg_locs);
    assert_null(entry->arg_locs[0]);
    assert_string_equal(entry->arg_locs[1], "\"p\"");
    assert_string_equal(entry->arg_locs[N - 2], "\"p\"");
    assert_null(entry->arg_locs[N - 1]);
    sp_module_destroy(m);
    cm_buf_fini(&b);
}

static void test_sp_mlir_read_canonicalizes_bounds_encoding(void **state)
{
    (void)state;
    assert_prints("func.func @f(%a: tensor<?xf32, #stablehlo.type_extensions<bounds = [4]>>) {\n"
                  "  %0 = stablehlo.abs %a : tensor<?xf32, #stablehlo.bounds<4>>\n"
                  "  return\n"
                  "}\n",
                  "module {\n"
                  "  func.func @f(%arg0: tensor<?xf32, #stablehlo.bounds<4>>) {\n"
                  "    %0 = stablehlo.abs %arg0 : tensor<?xf32, #stablehlo.bounds<4>>\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

static void test_sp_mlir_read_substitutes_aliases(void **state)
{
    (void)state;
    assert_prints("!T = tensor<2xf32>\n"
                  "#A = {x = 1 : i32}\n"
                  "func.func @f(%a: !T) attributes {d = #A} {\n"
                  "  return\n"
                  "}\n",
                  "#A = {x = 1 : i32}\n"
                  "module {\n"
                  "  func.func @f(%arg0: tensor<2xf32>) attributes {d = {x = 1 : i32}} {\n"
                  "    return\n"
                  "  }\n"
                  "}\n");
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_sp_mlir_read_rejects_unterminated_string(void **state)
{
    (void)state;
    assert_read_error("func.func @f() {\n  %0 = \"stablehlo.add(%a) : () -> ()\n}\n", "2:8",
                      "unterminated string literal");
}

static void test_sp_mlir_read_rejects_undefined_value(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = stablehlo.add %arg0, %arg9 : tensor<2xf32>\n}\n",
                      "2:29", "use of undefined value '%arg9'");
}

static void test_sp_mlir_read_rejects_redefinition(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = stablehlo.abs %arg0 : tensor<2xf32>\n"
                      "  %0 = stablehlo.abs %arg0 : tensor<2xf32>\n}\n",
                      "3:3", "redefinition of SSA value '%0'");
}

static void test_sp_mlir_read_rejects_operand_type_mismatch(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<2xf32>, %arg1: tensor<3xf32>) {\n"
                      "  %0 = stablehlo.add %arg0, %arg1 : tensor<2xf32>\n}\n",
                      "2:36", "operand 1 of 'stablehlo.add' has type tensor<3xf32>");
    assert_read_error("func.func @f(%arg0: tensor<2xf32>, %arg1: tensor<3xf32>) {\n"
                      "  %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<2xf32>, tensor<2xf32>)"
                      " -> tensor<2xf32>\n}\n",
                      "2:39", "but the op type says tensor<2xf32>");
}

static void test_sp_mlir_read_rejects_bad_integer(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = stablehlo.transpose %arg0, dims = [0, 99999999999999999999] : "
                      "(tensor<2xf32>) -> tensor<2xf32>\n}\n",
                      "2:46", "integer literal out of range");
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = stablehlo.transpose %arg0, dims = [0, x] : "
                      "(tensor<2xf32>) -> tensor<2xf32>\n}\n",
                      "2:46", "expected an integer");
}

static void test_sp_mlir_read_rejects_unbalanced_brackets(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<2xf32) {\n}\n", "1:33",
                      "unbalanced brackets: expected '>', found ')'");
    assert_read_error("func.func @f() attributes {a = [1, (2]} {\n}\n", "1:38",
                      "expected ')', found ']'");
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = stablehlo.abs %arg0 : tensor<2xf32>\n",
                      "3:1", "unterminated region");
}

static void test_sp_mlir_read_rejects_unknown_custom_form(void **state)
{
    (void)state;
    assert_read_error("func.func @f() {\n  %0 = tensor.empty() : tensor<2xf32>\n}\n", "2:8",
                      "unknown operation 'tensor.empty'");
    assert_read_error("func.func @f(%arg0: tensor<i1>) {\n  %0 = stablehlo.if %arg0 {\n  }\n}\n",
                      "2:8", "the custom form of 'stablehlo.if' is not supported");
    assert_read_error("func.func @f() {\n  %0 = arith.constant 5\n}\n", "2:23",
                      "expected a typed constant");
}

static void test_sp_mlir_read_rejects_bad_sharding_inside_attribute(void **state)
{
    (void)state;
    /* the column points at the offending ']' inside the sharding */
    assert_read_error("sdy.mesh @mesh = <[\"x\"=2]>\n"
                      "func.func @f(%arg0: tensor<2xf32> {sdy.sharding = "
                      "#sdy.sharding<@mesh, [{\"x\"}, {\"y\"]>}) {\n}\n",
                      "2:84", "expected ','");
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = sdy.all_to_all [{\"x\"}: 0 1] %arg0 out_sharding=<@m, [{}]> : "
                      "tensor<2xf32>\n}\n",
                      "2:33", "expected '->' in an all-to-all parameter");
    assert_read_error("func.func @f(%arg0: tensor<2xf32>) {\n"
                      "  %0 = sdy.all_slice [{\"x\":(0)2}] %arg0 out_sharding=<@m, [{}]> : "
                      "tensor<2xf32>\n}\n",
                      "2:29", "sub-axis pre-size and size must be positive");
}

static void test_sp_mlir_read_rejects_deep_nesting(void **state)
{
    (void)state;
    char text[1024];
    int n = snprintf(text, sizeof text, "func.func @f() attributes {a = ");
    for (int i = 0; i < 300; i++) {
        text[n++] = '[';
    }
    text[n] = '\0';
    assert_read_error(text, "1:288", "nested too deeply");
}

static void test_sp_mlir_read_rejects_huge_dims(void **state)
{
    (void)state;
    assert_read_error("func.func @f(%arg0: tensor<99999999999999999999x2xf32>) {\n}\n", "1:21",
                      "tensor dimension too large");
    char text[1024];
    int n = snprintf(text, sizeof text, "func.func @f(%%arg0: tensor<");
    for (int i = 0; i < 70; i++) {
        n += snprintf(text + n, sizeof text - (size_t)n, "1x");
    }
    snprintf(text + n, sizeof text - (size_t)n, "f32>) {\n}\n");
    assert_read_error(text, "1:21", "tensor rank exceeds 64");
}

static void test_sp_mlir_read_rejects_bad_result_use(void **state)
{
    (void)state;
    assert_read_error("func.func @f() {\n"
                      "  %0 = stablehlo.constant dense<1> : tensor<2xi32>\n"
                      "  %1 = stablehlo.add %0#3, %0 : tensor<2xi32>\n}\n",
                      "3:22", "result number 3 out of range");
    assert_read_error("func.func @f() {\n  %0:2 = stablehlo.constant dense<1> : tensor<2xi32>\n}\n",
                      "2:3", "has 1 results but 2 are named");
}

static void test_sp_mlir_read_rejects_alias_redefinition(void **state)
{
    (void)state;
    assert_read_error("#A = 1 : i32\n#A = 2 : i32\n", "2:1", "redefinition of alias '#A'");
}

static void test_sp_mlir_read_rejects_nul_byte(void **state)
{
    (void)state;
    static const char text[] = "func.func @f() attributes {a = #x.y<\0>} {\n}\n";
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, sizeof text - 1, 0, &m, &err), CM_EINVAL);
    assert_string_equal(err.path, "1:37");
    assert_non_null(strstr(err.msg, "NUL byte"));
    assert_null(m);
}

static void test_sp_mlir_read_reports_lines_after_line_base(void **state)
{
    (void)state;
    const char *text = "func.func @f() {\n  %0 = stablehlo.abs %x : tensor<f32>\n}\n";
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 40, &m, &err), CM_EINVAL);
    assert_string_equal(err.path, "42:22");
    assert_null(m);
}

/* ---- OOM --------------------------------------------------------------------------------- */

static void test_sp_mlir_read_oom(void **state)
{
    (void)state;
    /* every corpus module, failing allocation n = 0, 1, ... until it succeeds */
    for (size_t i = 0; i < N_OF(corpus); i++) {
        for (long n = 0;; n++) {
            cm_error err;
            cm_error_clear(&err);
            sp_module *m = NULL;
            cm_alloc_fail_after(n);
            cm_status st = sp_mlir_read(corpus[i], strlen(corpus[i]), 0, &m, &err);
            cm_alloc_fail_after(-1);
            if (st == CM_OK) {
                assert_true(n > 0);
                sp_module_destroy(m);
                break;
            }
            assert_int_equal(st, CM_ENOMEM);
            assert_int_equal(err.code, CM_ENOMEM);
            assert_null(m);
            assert_true(n < 100000);
        }
    }
}

/* Locations (aliases at the end, callsites, fused lists longer than the
 * reader's stack buffer) under failing allocations. */
static void test_sp_mlir_read_oom_locations(void **state)
{
    (void)state;
    cm_buf t;
    cm_buf_init(&t);
    cm_buf_puts(&t, "module {\n  func.func @main(%arg0: tensor<4xf32> loc(\"x\")) -> tensor<4xf32> {\n"
                    "    %0 = stablehlo.sine %arg0 : tensor<4xf32> loc(#loc3)\n"
                    "    return %0 : tensor<4xf32> loc(#loc)\n  } loc(#loc)\n} loc(#loc)\n"
                    "#loc = loc(unknown)\n#loc1 = loc(\"m.py\":1:2)\n"
                    "#loc2 = loc(callsite(#loc1 at #loc1))\n#loc3 = loc(fused[");
    for (int i = 0; i < 40; i++) {
        cm_buf_puts(&t, i > 0 ? ", #loc2" : "#loc2");
    }
    cm_buf_puts(&t, "])\n");
    assert_false(t.oom);
    for (long n = 0;; n++) {
        cm_error err;
        cm_error_clear(&err);
        sp_module *m = NULL;
        cm_alloc_fail_after(n);
        cm_status st = sp_mlir_read(t.data, t.len, 0, &m, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            char src[32];
            const sp_block *b = &m->blocks[m->ops[sp_module_func(m, "main")].regions[0].blocks[0]];
            assert_true(sp_op_source(m, b->ops[0], src, sizeof src));
            assert_string_equal(src, "m.py:1");
            sp_module_destroy(m);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(m);
        assert_true(n < 100000);
    }
    cm_buf_fini(&t);
}

static void test_sp_mlir_print_oom(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_OF(corpus); i++) {
        sp_module *m = NULL;
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_mlir_read(corpus[i], strlen(corpus[i]), 0, &m, &err), CM_OK);
        for (long n = 0;; n++) {
            cm_buf b;
            cm_buf_init(&b);
            cm_alloc_fail_after(n);
            sp_mlir_print(m, NULL, &b);
            cm_alloc_fail_after(-1);
            bool ok = !b.oom;
            if (ok) {
                assert_string_equal(b.data, corpus[i]);
            }
            cm_buf_fini(&b);
            if (ok) {
                break;
            }
            assert_true(n < 100000);
        }
        sp_module_destroy(m);
    }
}

/* ---- IR helpers the reader relies on (planner/core/sp_ir.c) ------------------ */

static sp_attr *attr_of(sp_module *m, const char *text)
{
    cm_error err;
    cm_error_clear(&err);
    sp_attr *a = NULL;
    cm_status st = sp_mlir_parse_attr(m, text, strlen(text), &a, &err);
    if (st != CM_OK) {
        print_error("%s: %s at %s\n", text, err.msg, err.path);
    }
    assert_int_equal(st, CM_OK);
    return a;
}

static void test_sp_attr_equal_agrees_with_hash(void **state)
{
    (void)state;
    static const char *const same[] = {
        "1 : i64",
        "\"ab\"",
        "array<i64: 1, 2, 3>",
        "[1, \"x\", [true, unit]]",
        "{a = 1 : i64, b = \"x\"}",
        "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>",
        "#stablehlo<comparison_direction GT>",
        "dense<[1, 2]> : tensor<2xi32>",
        "@f",
        "1.5 : f32",
    };
    static const char *const differ[][2] = {
        {"1 : i64", "1 : i32"},
        {"\"ab\"", "\"ac\""},
        {"array<i64: 1, 2>", "array<i64: 2, 1>"},
        {"[1, 2]", "[1, 2, 3]"},
        {"{a = 1 : i64, b = 2 : i64}", "{b = 2 : i64, a = 1 : i64}"},
        {"#stablehlo<comparison_direction GT>", "#stablehlo<comparison_direction LT>"},
        {"dense<[1, 2]> : tensor<2xi32>", "dense<[1, 2]> : tensor<2xi64>"},
        {"@f", "@g"},
        {"true", "false"},
    };
    sp_module *m = sp_module_create();
    assert_non_null(m);
    for (size_t i = 0; i < N_OF(same); i++) {
        sp_attr *a = attr_of(m, same[i]), *b = attr_of(m, same[i]);
        assert_ptr_not_equal(a, b);
        assert_true(sp_attr_equal(a, b));
        assert_true(sp_attr_hash(a) == sp_attr_hash(b));
    }
    for (size_t i = 0; i < N_OF(differ); i++) {
        sp_attr *a = attr_of(m, differ[i][0]), *b = attr_of(m, differ[i][1]);
        assert_false(sp_attr_equal(a, b));
        assert_false(sp_attr_equal(b, a));
    }
    /* sdy attributes compare by identity */
    sp_attr *s1 = attr_of(m, "#sdy.sharding<@mesh, [{\"a\"}]>");
    sp_attr *s2 = attr_of(m, "#sdy.sharding<@mesh, [{\"a\"}]>");
    assert_true(sp_attr_equal(s1, s1));
    assert_false(sp_attr_equal(s1, s2));
    assert_true(sp_attr_hash(s1) == sp_attr_hash(s2));
    sp_module_destroy(m);
}

static void test_sp_module_intern_type_shares_ids(void **state)
{
    (void)state;
    sp_module *m = sp_module_create();
    assert_non_null(m);
    cm_error err;
    cm_error_clear(&err);
    uint32_t a, b, c;
    assert_int_equal(sp_module_intern_type(m, "tensor<4x8xf32>", 15, &a, &err), CM_OK);
    assert_int_equal(sp_module_intern_type(m, "tensor< 4x8xf32 >", 17, &b, &err), CM_OK);
    assert_int_equal(a, b);
    assert_int_equal(m->types[a].kind, SP_TYPE_TENSOR);
    assert_int_equal(m->types[a].elem, SP_ELEM_F32);
    /* a function type interns its parts: the same ids come back */
    const char *ft = "(tensor<4x8xf32>, tensor<2xbf16>) -> tensor<4x8xf32>";
    assert_int_equal(sp_module_intern_type(m, ft, strlen(ft), &c, &err), CM_OK);
    assert_int_equal(m->types[c].kind, SP_TYPE_FUNC);
    assert_int_equal(m->types[c].inputs[0], a);
    assert_int_equal(m->types[c].results[0], a);
    uint32_t bf;
    assert_int_equal(sp_module_intern_type(m, "tensor<2xbf16>", 14, &bf, &err), CM_OK);
    assert_int_equal(m->types[c].inputs[1], bf);
    /* enough distinct types to grow the table several times */
    uint32_t ids[3000];
    char text[64];
    for (int i = 0; i < 3000; i++) {
        int n = snprintf(text, sizeof text, "tensor<%dxi8>", i + 1);
        assert_int_equal(sp_module_intern_type(m, text, (size_t)n, &ids[i], &err), CM_OK);
    }
    for (int i = 0; i < 3000; i++) {
        uint32_t again;
        int n = snprintf(text, sizeof text, "tensor<%dxi8>", i + 1);
        assert_int_equal(sp_module_intern_type(m, text, (size_t)n, &again, &err), CM_OK);
        assert_int_equal(again, ids[i]);
        assert_int_equal(m->types[again].dims[0], i + 1);
    }
    assert_int_equal(sp_module_intern_type(m, "", 0, &a, &err), CM_EINVAL);
    sp_module_destroy(m);
}

/* MHLO ops are StableHLO's under another prefix; mhlo.copy, which has no
 * twin, is its own kind; other mhlo names and names too long for the
 * lookup stay unknown. */
static void test_sp_op_kind_of_mhlo_aliases_stablehlo(void **state)
{
    (void)state;
    assert_int_equal(sp_op_kind_of("mhlo.add", 8), SP_OP_ADD);
    assert_int_equal(sp_op_kind_of("mhlo.custom_call", 16), SP_OP_CUSTOM_CALL);
    assert_int_equal(sp_op_kind_of("mhlo.while", 10), SP_OP_WHILE);
    assert_int_equal(sp_op_kind_of("mhlo.copy", 9), SP_OP_MHLO_COPY);
    assert_int_equal(sp_op_kind_of("mhlo.frobnicate", 15), SP_OP_UNKNOWN);
    assert_int_equal(sp_op_kind_of("mhlo.", 5), SP_OP_UNKNOWN);
    char longname[200];
    memset(longname, 'a', sizeof longname);
    memcpy(longname, "mhlo.", 5);
    assert_int_equal(sp_op_kind_of(longname, sizeof longname), SP_OP_UNKNOWN);
    /* the prefix is matched by its length only */
    assert_int_equal(sp_op_kind_of("mhlo.addx", 8), SP_OP_ADD);
}

/* Every format against APFloat's: the largest finite value, the patterns
 * StableHLO's constant tests spell, and a round trip of every bit pattern
 * (decode, then encode gives the pattern back, NaNs and FNUZ's -0 aside). */
static void test_sp_float_formats(void **state)
{
    (void)state;
    static const struct {
        sp_elem e;
        double max;
        unsigned bits;
    } f[] = {
        {SP_ELEM_F4E2M1FN, 6.0, 4},       {SP_ELEM_F6E2M3FN, 7.5, 6},
        {SP_ELEM_F6E3M2FN, 28.0, 6},      {SP_ELEM_F8E3M4, 15.5, 8},
        {SP_ELEM_F8E4M3, 240.0, 8},       {SP_ELEM_F8E4M3FN, 448.0, 8},
        {SP_ELEM_F8E4M3FNUZ, 240.0, 8},   {SP_ELEM_F8E4M3B11FNUZ, 30.0, 8},
        {SP_ELEM_F8E5M2, 57344.0, 8},     {SP_ELEM_F8E5M2FNUZ, 57344.0, 8},
        {SP_ELEM_F8E8M0FNU, 0x1p127, 8},  {SP_ELEM_F16, 65504.0, 16},
        {SP_ELEM_BF16, 0x1.FEp127, 16},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        assert_true(sp_float_is(f[i].e));
        assert_int_equal(sp_float_bits(f[i].e), f[i].bits);
        assert_true(sp_float_max(f[i].e) == f[i].max);
        assert_true(sp_float_round(f[i].e, f[i].max) == f[i].max);
        for (uint64_t b = 0; b < ((uint64_t)1 << f[i].bits); b++) {
            double v = sp_float_decode(f[i].e, b);
            if (isnan(v)) {
                assert_true(isnan(sp_float_decode(f[i].e, sp_float_encode(f[i].e, v))));
                continue;
            }
            assert_true(fabs(v) <= f[i].max || isinf(v));
            assert_true(sp_float_encode(f[i].e, v) == b);
        }
    }
    assert_false(sp_float_is(SP_ELEM_C64));
    assert_false(sp_float_is(SP_ELEM_I8));
    /* StableHLO's constant tests: 0x07 / 0x0F / 0x01 of f4E2M1FN */
    assert_true(sp_float_decode(SP_ELEM_F4E2M1FN, 0x07) == 6.0);
    assert_true(sp_float_decode(SP_ELEM_F4E2M1FN, 0x0F) == -6.0);
    assert_true(sp_float_decode(SP_ELEM_F4E2M1FN, 0x01) == 0.5);
    assert_true(sp_float_round(SP_ELEM_F4E2M1FN, 3.1415) == 3.0);
    assert_true(sp_float_round(SP_ELEM_F6E2M3FN, 3.1415) == 3.25);
    assert_true(sp_float_round(SP_ELEM_F8E3M4, 0.1) == 0.09375);
    assert_true(sp_float_decode(SP_ELEM_F8E4M3FNUZ, 0x01) == 0x1p-10);
    assert_true(sp_float_decode(SP_ELEM_F8E4M3B11FNUZ, 0x7F) == 30.0);
    /* no -0 in FNUZ: -0 is +0, and -0's pattern is the NaN */
    assert_true(sp_float_encode(SP_ELEM_F8E5M2FNUZ, -0.0) == 0u);
    assert_true(isnan(sp_float_decode(SP_ELEM_F8E5M2FNUZ, 0x80)));
    assert_true(sp_float_encode(SP_ELEM_F8E5M2FNUZ, -1e-30) == 0u);
    /* past the largest finite value: infinity (IEEE), NaN (FN, FNUZ), the
     * largest value (f4, f6); a tie at the edge rounds to even */
    assert_true(sp_float_encode(SP_ELEM_F8E5M2, 1e6) == 0x7Cu);
    assert_true(sp_float_encode(SP_ELEM_F8E4M3FN, 464.0) == 0x7Eu);
    assert_true(sp_float_encode(SP_ELEM_F8E4M3FN, 470.0) == 0x7Fu);
    assert_true(sp_float_encode(SP_ELEM_F8E4M3FN, -1e9) == 0xFFu);
    assert_true(sp_float_encode(SP_ELEM_F8E4M3FNUZ, 1e9) == 0x80u);
    assert_true(sp_float_encode(SP_ELEM_F4E2M1FN, 100.0) == 0x07u);
    assert_true(sp_float_encode(SP_ELEM_F6E3M2FN, -1e9) == 0x3Fu);
    /* E8M0: powers of two, no sign (negative is NaN), no zero (its least) */
    assert_true(sp_float_round(SP_ELEM_F8E8M0FNU, 0.1) == 0.125);
    assert_true(sp_float_round(SP_ELEM_F8E8M0FNU, 3.1415) == 4.0);
    assert_true(sp_float_round(SP_ELEM_F8E8M0FNU, 3.0) == 4.0);
    assert_true(sp_float_encode(SP_ELEM_F8E8M0FNU, 0.0) == 0x00u);
    assert_true(sp_float_encode(SP_ELEM_F8E8M0FNU, -2.0) == 0xFFu);
    assert_true(sp_float_decode(SP_ELEM_F8E8M0FNU, 0x80) == 2.0);
    /* f32 and f64 are the C types */
    assert_true(sp_float_encode(SP_ELEM_F32, 1.0) == 0x3F800000u);
    assert_true(sp_float_decode(SP_ELEM_F64, 0x3FF0000000000000u) == 1.0);
    assert_int_equal(sp_float_precision(SP_ELEM_BF16), 8);
    assert_int_equal(sp_elem_of_name("f8E4M3B11FNUZ", 13), SP_ELEM_F8E4M3B11FNUZ);
}

static void test_sp_elem_bytes_and_names(void **state)
{
    (void)state;
    assert_int_equal(sp_elem_bytes(SP_ELEM_I1), 1);
    assert_int_equal(sp_elem_bytes(SP_ELEM_UI4), 1);
    assert_int_equal(sp_elem_bytes(SP_ELEM_BF16), 2);
    assert_int_equal(sp_elem_bytes(SP_ELEM_UI32), 4);
    assert_int_equal(sp_elem_bytes(SP_ELEM_INDEX), 8);
    assert_int_equal(sp_elem_bytes(SP_ELEM_C64), 8);
    assert_int_equal(sp_elem_bytes(SP_ELEM_C128), 16);
    assert_int_equal(sp_elem_bytes(SP_ELEM_F8E5M2), 1);
    assert_int_equal(sp_elem_bytes(SP_ELEM_OTHER), 0);
    assert_string_equal(sp_elem_name(SP_ELEM_F8E4M3FN), "f8E4M3FN");
    assert_string_equal(sp_elem_name(SP_ELEM_C128), "complex<f64>");
    assert_string_equal(sp_elem_name(SP_ELEM_OTHER), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_mlir_print_roundtrips_pretty_corpus),
        cmocka_unit_test(test_sp_mlir_dense_values_exact),
        cmocka_unit_test(test_sp_float_formats),
        cmocka_unit_test(test_sp_mlir_read_locations_resolve),
        cmocka_unit_test(test_sp_mlir_read_rejects_bad_locations),
        cmocka_unit_test(test_sp_mlir_read_block_arg_locations),
        cmocka_unit_test(test_sp_mlir_print_jax_and_interpreter_forms),
        cmocka_unit_test(test_sp_mlir_print_roundtrips_generic_corpus),
        cmocka_unit_test(test_sp_mlir_print_generic_input_prints_pretty),
        cmocka_unit_test(test_sp_mlir_print_sdy_generic_input_prints_pretty),
        cmocka_unit_test(test_sp_mlir_read_keeps_sdy_collective_attrs),
        cmocka_unit_test(test_sp_mlir_print_names_result_groups),
        cmocka_unit_test(test_sp_mlir_print_names_constants_with_shared_suffixes),
        cmocka_unit_test(test_sp_mlir_print_names_args_continue_in_nested_regions),
        cmocka_unit_test(test_sp_mlir_print_names_while_iter_args),
        cmocka_unit_test(test_sp_mlir_print_floats_canonically),
        cmocka_unit_test(test_sp_mlir_print_dense_floats_canonically),
        cmocka_unit_test(test_sp_mlir_print_dense_ints_canonically),
        cmocka_unit_test(test_sp_mlir_read_function_with_many_args),
        cmocka_unit_test(test_sp_mlir_read_canonicalizes_bounds_encoding),
        cmocka_unit_test(test_sp_mlir_read_substitutes_aliases),
        cmocka_unit_test(test_sp_mlir_read_rejects_unterminated_string),
        cmocka_unit_test(test_sp_mlir_read_rejects_undefined_value),
        cmocka_unit_test(test_sp_mlir_read_rejects_redefinition),
        cmocka_unit_test(test_sp_mlir_read_rejects_operand_type_mismatch),
        cmocka_unit_test(test_sp_mlir_read_rejects_bad_integer),
        cmocka_unit_test(test_sp_mlir_read_rejects_unbalanced_brackets),
        cmocka_unit_test(test_sp_mlir_read_rejects_unknown_custom_form),
        cmocka_unit_test(test_sp_mlir_read_rejects_bad_sharding_inside_attribute),
        cmocka_unit_test(test_sp_mlir_read_rejects_deep_nesting),
        cmocka_unit_test(test_sp_mlir_read_rejects_huge_dims),
        cmocka_unit_test(test_sp_mlir_read_rejects_bad_result_use),
        cmocka_unit_test(test_sp_mlir_read_rejects_alias_redefinition),
        cmocka_unit_test(test_sp_mlir_read_rejects_nul_byte),
        cmocka_unit_test(test_sp_mlir_read_reports_lines_after_line_base),
        cmocka_unit_test(test_sp_mlir_read_oom),
        cmocka_unit_test(test_sp_mlir_read_oom_locations),
        cmocka_unit_test(test_sp_mlir_print_oom),
        cmocka_unit_test(test_sp_attr_equal_agrees_with_hash),
        cmocka_unit_test(test_sp_module_intern_type_shares_ids),
        cmocka_unit_test(test_sp_op_kind_of_mhlo_aliases_stablehlo),
        cmocka_unit_test(test_sp_elem_bytes_and_names),
    };
    return cmocka_run_group_tests_name("sp_mlir", tests, NULL, NULL);
}
