/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/core/sp_verify (the module verifier) as the input
 * loader runs it: each input of issue 18 that crashed the planner or was
 * accepted (a mesh axis of size 0 or below, a return with more operands than
 * the function has results, a negative dimension, a device count or element
 * count beyond 64 bits, a dot_general with the wrong result shape) is
 * rejected by sp_input_read, before any pass, with CM_EINVAL at "LINE:COL"
 * (MLIR) or at the op's JSON Pointer (graph documents); StableHLO's shape
 * constraints of the common ops; valid inputs still read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_diag.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_mlir.h"

/* A function of one tensor<8x16xf32> argument sharded on "m" of MESH and
 * the body BODY (which returns %0), typed T. */
#define MOD(MESH, T, BODY)                                                                     \
    "sdy.mesh @mesh = <" MESH ">\n"                                                            \
    "func.func @main(%arg0: " T " {sdy.sharding = #sdy.sharding<@mesh, [{\"m\"}, {}]>}) -> " T \
    " {\n" BODY "}\n"

/* Reads text through the loader (propagating, as the plan path does) and
 * expects CM_EINVAL at path with msg containing want. */
static void expect_rejected(const char *text, const char *path, const char *want)
{
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_input_read(text, strlen(text), NULL, &in, &err);
    if (st != CM_EINVAL || strcmp(err.path, path) != 0 || strstr(err.msg, want) == NULL) {
        fprintf(stderr, "status %d path '%s' msg '%s'; want path '%s' msg '%s'\n", (int)st,
                err.path, err.msg, path, want);
    }
    assert_int_equal(st, CM_EINVAL);
    assert_string_equal(err.path, path);
    assert_non_null(strstr(err.msg, want));
    assert_null(in.m);
}

static void expect_read(const char *text)
{
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_input_read(text, strlen(text), NULL, &in, &err);
    if (st != CM_OK) {
        fprintf(stderr, "rejected at %s: %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    sp_input_fini(&in);
}

static const char *const ADD =
    "  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>\n"
    "  return %0 : tensor<8x16xf32>\n";

static void test_sp_input_read_rejects_zero_mesh_axis(void **state)
{
    (void)state;
    expect_rejected(MOD("[\"m\"=0]", "tensor<8x16xf32>", "  %0 = stablehlo.add %arg0, %arg0 : "
                                                         "tensor<8x16xf32>\n  return %0 : "
                                                         "tensor<8x16xf32>\n"),
                    "1:1", "axis size must be at least 1, got: 0");
}

static void test_sp_input_read_rejects_negative_mesh_axis(void **state)
{
    (void)state;
    expect_rejected(MOD("[\"m\"=-2]", "tensor<8x16xf32>", "  %0 = stablehlo.add %arg0, %arg0 : "
                                                          "tensor<8x16xf32>\n  return %0 : "
                                                          "tensor<8x16xf32>\n"),
                    "1:1", "axis size must be at least 1, got: -2");
}

static void test_sp_input_read_rejects_device_count_overflow(void **state)
{
    (void)state;
    char text[4096] = "sdy.mesh @mesh = <[";
    for (int i = 0; i < 64; i++) {
        char ax[16];
        snprintf(ax, sizeof ax, "%s\"m%d\"=2", i ? ", " : "", i);
        strcat(text, ax);
    }
    strcat(text, "]>\nfunc.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = "
                 "#sdy.sharding<@mesh, [{\"m0\"}, {}]>}) -> tensor<8x16xf32> {\n");
    strcat(text, ADD);
    strcat(text, "}\n");
    expect_rejected(text, "1:1", "the product of axis sizes overflows 64 bits");
}

static void test_sp_input_read_rejects_return_of_more_values(void **state)
{
    (void)state;
    expect_rejected(MOD("[\"m\"=2]", "tensor<8x16xf32>",
                        "  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>\n"
                        "  return %0, %arg0 : tensor<8x16xf32>, tensor<8x16xf32>\n"),
                    "4:3", "'func.return' op has 2 operands, but enclosing function (@main) "
                           "returns 1");
}

static void test_sp_input_read_rejects_return_of_another_type(void **state)
{
    (void)state;
    expect_rejected("func.func @main(%arg0: tensor<8xf32>) -> tensor<4xf32> {\n"
                    "  return %arg0 : tensor<8xf32>\n}\n",
                    "2:3", "type of return operand 0 ('tensor<8xf32>') doesn't match function "
                           "result type ('tensor<4xf32>')");
}

static void test_sp_input_read_rejects_negative_dimension(void **state)
{
    (void)state;
    expect_rejected(MOD("[\"m\"=2]", "tensor<-8x16xf32>",
                        "  %0 = stablehlo.add %arg0, %arg0 : tensor<-8x16xf32>\n"
                        "  return %0 : tensor<-8x16xf32>\n"),
                    "3:3", "invalid tensor type 'tensor<-8x16xf32>'");
}

static void test_sp_input_read_rejects_element_count_overflow(void **state)
{
    (void)state;
#define HUGE "tensor<4611686018427387904x4611686018427387904xf32>"
    expect_rejected(MOD("[\"m\"=2]", HUGE,
                        "  %0 = stablehlo.add %arg0, %arg0 : " HUGE "\n  return %0 : " HUGE
                        "\n"),
                    "3:3", "more elements (or bytes) than fit in 64 bits");
#undef HUGE
}

static void test_sp_input_read_rejects_dot_general_result_shape(void **state)
{
    (void)state;
    expect_rejected(
        "func.func @main(%arg0: tensor<8x1024xf32>, %arg1: tensor<1024x1024xf32>) -> "
        "tensor<8x512xf32> {\n"
        "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x512xf32>\n"
        "  return %0 : tensor<8x512xf32>\n}\n",
        "2:3", "inferred shape '8x1024' is incompatible with result 0 of type "
               "'tensor<8x512xf32>'");
    expect_rejected(
        "func.func @main(%arg0: tensor<8x1024xf32>, %arg1: tensor<512x1024xf32>) -> "
        "tensor<8x1024xf32> {\n"
        "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<8x1024xf32>, tensor<512x1024xf32>) -> tensor<8x1024xf32>\n"
        "  return %0 : tensor<8x1024xf32>\n}\n",
        "2:3", "contracting dimension sizes must match");
}

/* One op between a tensor<4x8xf32> argument and a result of type RT. */
#define ONE(OP, RT)                                                                            \
    "func.func @main(%arg0: tensor<4x8xf32>) -> " RT " {\n  %0 = " OP "\n  return %0 : " RT   \
    "\n}\n"

static void test_sp_module_verify_checks_stablehlo_shapes(void **state)
{
    (void)state;
    expect_rejected(ONE("stablehlo.add %arg0, %arg0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> "
                        "tensor<4x4xf32>",
                        "tensor<4x4xf32>"),
                    "2:3", "requires the same shape for all operands and results");
    expect_rejected(ONE("stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> "
                        "tensor<4x8xf32>",
                        "tensor<4x8xf32>"),
                    "2:3", "inferred shape '8x4'");
    expect_rejected(ONE("stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<30xf32>",
                        "tensor<30xf32>"),
                    "2:3", "number of output elements (30)");
    expect_rejected(ONE("stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<4x8xf32>) "
                        "-> tensor<4x9xf32>",
                        "tensor<4x9xf32>"),
                    "2:3", "size of operand dimension 1 (8)");
    expect_rejected(ONE("stablehlo.slice %arg0 [0:4, 2:9] : (tensor<4x8xf32>) -> "
                        "tensor<4x7xf32>",
                        "tensor<4x7xf32>"),
                    "2:3", "limit 9");
    expect_rejected(ONE("stablehlo.slice %arg0 [0:4, 0:8:2] : (tensor<4x8xf32>) -> "
                        "tensor<4x3xf32>",
                        "tensor<4x3xf32>"),
                    "2:3", "inferred shape '4x4'");
    expect_rejected(ONE("stablehlo.concatenate %arg0, %arg0, dim = 0 : (tensor<4x8xf32>, "
                        "tensor<4x8xf32>) -> tensor<8x9xf32>",
                        "tensor<8x9xf32>"),
                    "2:3", "inferred shape '8x8'");
    /* and the right types read */
    expect_read(ONE("stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> "
                    "tensor<8x4xf32>",
                    "tensor<8x4xf32>"));
    expect_read(ONE("stablehlo.slice %arg0 [0:4, 0:8:3] : (tensor<4x8xf32>) -> "
                    "tensor<4x3xf32>",
                    "tensor<4x3xf32>"));
    expect_read(ONE("stablehlo.concatenate %arg0, %arg0, dim = 1 : (tensor<4x8xf32>, "
                    "tensor<4x8xf32>) -> tensor<4x16xf32>",
                    "tensor<4x16xf32>"));
    expect_read(ONE("stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<4x8xf32>) -> "
                    "tensor<3x4x8xf32>",
                    "tensor<3x4x8xf32>"));
    expect_read(ONE("stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<?xf32>",
                    "tensor<?xf32>"));
}

static void test_sp_module_verify_checks_reduce(void **state)
{
    (void)state;
    static const char *const fmt =
        "func.func @main(%%arg0: tensor<4x8xf32>) -> %s {\n"
        "  %%cst = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %%0 = stablehlo.reduce(%%arg0 init: %%cst) applies stablehlo.add across dimensions = "
        "[1] : (tensor<4x8xf32>, tensor<f32>) -> %s\n"
        "  return %%0 : %s\n}\n";
    char text[1024];
    snprintf(text, sizeof text, fmt, "tensor<8xf32>", "tensor<8xf32>", "tensor<8xf32>");
    expect_rejected(text, "3:3", "inferred shape '4'");
    snprintf(text, sizeof text, fmt, "tensor<4xf32>", "tensor<4xf32>", "tensor<4xf32>");
    expect_read(text);
}

static void test_sp_input_read_graph_error_has_json_pointer(void **state)
{
    (void)state;
    expect_rejected("{\"inputs\":[{\"name\":\"x\",\"type\":\"tensor<4xf32>\"}],"
                    "\"ops\":[{\"op\":\"stablehlo.abs\",\"operands\":[\"%x\"],"
                    "\"results\":[{\"name\":\"%a\",\"type\":\"tensor<4xf32>\"}]},"
                    "{\"op\":\"stablehlo.add\",\"operands\":[\"%x\",\"%x\"],"
                    "\"results\":[{\"name\":\"%b\",\"type\":\"tensor<8xf32>\"}]}],"
                    "\"outputs\":[\"%x\"]}",
                    "/ops/1", "requires the same shape");
    expect_rejected("{\"functions\":[{\"name\":\"main\",\"inputs\":[{\"name\":\"x\",\"type\":"
                    "\"tensor<4xf32>\"}],\"ops\":[{\"op\":\"stablehlo.add\",\"operands\":[\"%x\","
                    "\"%x\"],\"results\":[{\"name\":\"%b\",\"type\":\"tensor<8xf32>\"}]}],"
                    "\"outputs\":[\"%x\"]}]}",
                    "/functions/0/ops/0", "requires the same shape");
}

static void test_sp_input_read_accepts_the_examples(void **state)
{
    (void)state;
    static const char *const files[] = {"examples/flax_mlp.mlir", "examples/flax_mlp.json",
                                        "examples/lint_demo.mlir", "examples/suggest_mlp.mlir"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        sp_input in;
        cm_error err;
        cm_error_clear(&err);
        cm_status st = sp_input_load(files[i], NULL, &in, &err);
        if (st != CM_OK) {
            fprintf(stderr, "%s: %s: %s\n", files[i], err.path, err.msg);
        }
        assert_int_equal(st, CM_OK);
        sp_input_fini(&in);
    }
}

/* opt verifies with the same function: the diagnostics carry the op's line. */
static void test_sp_module_verify_locates_findings(void **state)
{
    (void)state;
    const char *text = MOD("[\"m\"=2]", "tensor<8x16xf32>",
                           "  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>\n"
                           "  return %0, %0 : tensor<8x16xf32>, tensor<8x16xf32>\n");
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_module_verify(m, &d), CM_EINVAL);
    assert_true(d.n >= 1);
    assert_int_equal(d.items[0].line, 4);
    assert_int_equal(d.items[0].col, 3);
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_input_read_rejects_zero_mesh_axis),
        cmocka_unit_test(test_sp_input_read_rejects_negative_mesh_axis),
        cmocka_unit_test(test_sp_input_read_rejects_device_count_overflow),
        cmocka_unit_test(test_sp_input_read_rejects_return_of_more_values),
        cmocka_unit_test(test_sp_input_read_rejects_return_of_another_type),
        cmocka_unit_test(test_sp_input_read_rejects_negative_dimension),
        cmocka_unit_test(test_sp_input_read_rejects_element_count_overflow),
        cmocka_unit_test(test_sp_input_read_rejects_dot_general_result_shape),
        cmocka_unit_test(test_sp_module_verify_checks_stablehlo_shapes),
        cmocka_unit_test(test_sp_module_verify_checks_reduce),
        cmocka_unit_test(test_sp_input_read_graph_error_has_json_pointer),
        cmocka_unit_test(test_sp_input_read_accepts_the_examples),
        cmocka_unit_test(test_sp_module_verify_locates_findings),
    };
    return cmocka_run_group_tests_name("sp_verify", tests, NULL, NULL);
}
