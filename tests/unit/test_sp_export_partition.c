/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the partitioner-side export passes of
 * planner/shardy/export (sp_export.h): unreduced-axes verification,
 * permutation factors (replication, halo exchange for pad, reverse and
 * reshape), per-instruction partitioning and the export pipeline, each with
 * an OOM loop that must end with the module a clean run gives. */
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
#include "sp_export.h"
#include "sp_ir.h"
#include "sp_mlir.h"

typedef cm_status (*pass_fn)(sp_module *m, sp_diags *d, cm_error *err);

static sp_module *read_module(const char *text)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read(text, strlen(text), 0, &m, &err) != CM_OK) {
        fail_msg("sp_mlir_read: %s", err.msg);
    }
    assert_non_null(m);
    return m;
}

/* The module as text; the caller frees it with cm_free. */
static char *print_module(const sp_module *m)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts o = {false, false};
    sp_mlir_print(m, &o, &b);
    assert_false(b.oom);
    return cm_buf_take(&b);
}

static char *run(const char *text, pass_fn fn)
{
    sp_module *m = read_module(text);
    cm_error err;
    cm_error_clear(&err);
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = fn(m, &d, &err);
    sp_diags_fini(&d);
    if (st != CM_OK) {
        sp_module_destroy(m);
        fail_msg("pass: %s", err.msg);
    }
    char *s = print_module(m);
    sp_module_destroy(m);
    return s;
}

/* Fails allocation n = 0, 1, ... until fn succeeds; each failure must be
 * CM_ENOMEM and the success must print what a clean run prints. */
static void assert_survives_oom(const char *text, pass_fn fn)
{
    char *want = run(text, fn);
    bool done = false;
    for (long n = 0; n < 50000 && !done; n++) {
        sp_module *m = read_module(text);
        cm_error err;
        cm_error_clear(&err);
        sp_diags d;
        sp_diags_init(&d);
        cm_alloc_fail_after(n);
        cm_status st = fn(m, &d, &err);
        cm_alloc_fail_after(-1);
        sp_diags_fini(&d);
        if (st == CM_OK) {
            char *got = print_module(m);
            assert_string_equal(want, got);
            cm_free(got);
            done = true;
        } else {
            assert_int_equal(st, CM_ENOMEM);
        }
        sp_module_destroy(m);
    }
    assert_true(done);
    cm_free(want);
}

static void assert_has(const char *text, const char *part)
{
    if (strstr(text, part) == NULL) {
        fail_msg("missing \"%s\" in:\n%s", part, text);
    }
}

static void assert_lacks(const char *text, const char *part)
{
    if (strstr(text, part) != NULL) {
        fail_msg("unexpected \"%s\" in:\n%s", part, text);
    }
}

#define MESH "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n"

/* ---- -sdy-verify-unreduced-axes ------------------------------------------------- */

static const char DROPPED[] =
    MESH "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
         "{}], unreduced={\"y\"}>}) -> tensor<8x8xf32> {\n"
         "  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
         "[{\"x\"}, {}]>]>} : tensor<8x8xf32>\n"
         "  return %0 : tensor<8x8xf32>\n"
         "}\n";

static const char BLESSED[] =
    MESH "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
         "{}], unreduced={\"y\"}>}) -> tensor<8x8xf32> {\n"
         "  %0 = sdy.reshard %arg0 <@mesh, [{\"x\"}, {}]> : tensor<8x8xf32>\n"
         "  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
         "[{\"x\"}, {}]>]>} : tensor<8x8xf32>\n"
         "  return %1 : tensor<8x8xf32>\n"
         "}\n";

static cm_status verify_unreduced(sp_module *m, sp_diags *d, cm_error *err)
{
    return sp_pass_verify_unreduced_axes(m, d, err);
}

static void test_sp_pass_verify_unreduced_axes_rejects_dropped_axis(void **state)
{
    (void)state;
    sp_module *m = read_module(DROPPED);
    cm_error err;
    cm_error_clear(&err);
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_pass_verify_unreduced_axes(m, &d, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "");
    assert_int_equal(d.n, 1);
    assert_has(d.items[0].msg, "'stablehlo.add' op dropped unreduced axis 'y' without a blessed "
                               "operation");
    assert_int_equal(d.items[0].line, 3);
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

static void test_sp_pass_verify_unreduced_axes_accepts_reshard(void **state)
{
    (void)state;
    char *out = run(BLESSED, verify_unreduced);
    assert_has(out, "sdy.reshard %arg0");
    cm_free(out);
    assert_survives_oom(BLESSED, verify_unreduced);
}

/* ---- -sdy-resolve-permutation-factors ------------------------------------------- */

static const char REVERSE[] =
    MESH "func.func @f(%arg0: tensor<4x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
         "{\"y\"}]>}) -> tensor<4x8xi32> {\n"
         "  %0 = stablehlo.reverse %arg0, dims = [0] {sdy.sharding = "
         "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {\"y\"}]>]>} : tensor<4x8xi32>\n"
         "  return %0 : tensor<4x8xi32>\n"
         "}\n";

/* a pad whose low padding moves data one shard to the right */
static const char PAD[] =
    "sdy.mesh @mesh = <[\"a\"=4, \"b\"=2]>\n"
    "func.func @f(%arg0: tensor<4x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\":(2)2}, "
    "{\"b\"}]>}) -> tensor<7x8xi32> {\n"
    "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %0 = stablehlo.pad %arg0, %c, low = [3, 0], high = [0, 0], interior = [0, 0] "
    "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"a\":(2)2}, {\"b\"}]>]>} : "
    "(tensor<4x8xi32>, tensor<i32>) -> tensor<7x8xi32>\n"
    "  %1 = sdy.reshard %0 <@mesh, [{}, {}]> : tensor<7x8xi32>\n"
    "  return %1 : tensor<7x8xi32>\n"
    "}\n";

/* a reshape splitting a non-divisible dimension */
static const char RESHAPE[] =
    "sdy.mesh @mesh = <[\"a\"=4]>\n"
    "func.func @f(%arg0: tensor<6xi32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}]>}) -> "
    "tensor<2x3xi32> {\n"
    "  %0 = stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
    "[{\"a\":(1)2}, {\"a\":(2)2}]>]>} : (tensor<6xi32>) -> tensor<2x3xi32>\n"
    "  %1 = sdy.reshard %0 <@mesh, [{}, {}]> : tensor<2x3xi32>\n"
    "  return %1 : tensor<2x3xi32>\n"
    "}\n";

static cm_status rpf_halo(sp_module *m, sp_diags *d, cm_error *err)
{
    sp_rpf_opts o = {true, 1, 1};
    return sp_pass_resolve_permutation_factors(m, &o, d, err);
}

static cm_status rpf_replicate(sp_module *m, sp_diags *d, cm_error *err)
{
    sp_rpf_opts o = {false, 1, 1};
    return sp_pass_resolve_permutation_factors(m, &o, d, err);
}

static void test_sp_pass_resolve_permutation_factors_replicates_reverse(void **state)
{
    (void)state;
    char *out = run(REVERSE, rpf_replicate);
    assert_has(out, "%0 = sdy.reshard %arg0 <@mesh, [{}, {\"y\"}]> : tensor<4x8xi32>");
    assert_has(out, "stablehlo.reverse %0, dims = [0] {sdy.sharding = "
                    "#sdy.sharding_per_value<[<@mesh, [{}, {\"y\"}]>]>}");
    assert_has(out, "sdy.reshard %1 <@mesh, [{\"x\"}, {\"y\"}]>");
    assert_has(out, "return %2");
    cm_free(out);
    assert_survives_oom(REVERSE, rpf_replicate);
}

static void test_sp_pass_resolve_permutation_factors_reverses_mesh(void **state)
{
    (void)state;
    char *out = run(REVERSE, rpf_halo);
    assert_has(out, "sdy.mesh @mesh_reversed = <[\"x\"=2, \"y\"=2], device_ids=[2, 3, 0, 1]>");
    assert_has(out, "stablehlo.reverse %arg0, dims = [0] {sdy.sharding = "
                    "#sdy.sharding_per_value<[<@mesh_reversed, [{\"x\"}, {\"y\"}]>]>}");
    assert_has(out, "sdy.reshard %0 <@mesh, [{\"x\"}, {\"y\"}]>");
    cm_free(out);
    assert_survives_oom(REVERSE, rpf_halo);
}

static void test_sp_pass_resolve_permutation_factors_halo_pad(void **state)
{
    (void)state;
    char *out = run(PAD, rpf_halo);
    assert_has(out, "sdy.manual_computation(%arg0, %c) in_shardings=[<@mesh, [{\"a\":(2)2}, "
                    "{\"b\"}]>, <@mesh, []>]");
    assert_has(out, "manual_axes={\"a\", \"b\"}");
    assert_has(out, "\"stablehlo.collective_permute\"");
    assert_has(out, "stablehlo.partition_id");
    assert_has(out, "stablehlo.dynamic_slice");
    assert_has(out, "stablehlo.slice %0 [0:7, 0:8]");
    assert_lacks(out, "stablehlo.pad %arg0");
    cm_free(out);
    assert_survives_oom(PAD, rpf_halo);
    assert_survives_oom(PAD, rpf_replicate);
}

static void test_sp_pass_resolve_permutation_factors_halo_reshape(void **state)
{
    (void)state;
    char *out = run(RESHAPE, rpf_halo);
    assert_has(out, "stablehlo.pad %arg0, %c_0, low = [0], high = [2], interior = [0]");
    assert_has(out, "out_shardings=[<@mesh, [{\"a\":(1)2}, {\"a\":(2)2}]>] manual_axes={\"a\"}");
    assert_has(out, "stablehlo.reshape");
    cm_free(out);
    out = run(RESHAPE, rpf_replicate);
    assert_has(out, "sdy.reshard %arg0 <@mesh, [{}]> : tensor<6xi32>");
    assert_lacks(out, "sdy.manual_computation");
    cm_free(out);
    assert_survives_oom(RESHAPE, rpf_halo);
}

/* 2^32 devices: no per-device tables; the reverse is replicated instead */
static const char HUGE_MESH[] =
    "sdy.mesh @mesh = <[\"x\"=65536, \"y\"=65536]>\n"
    "func.func @f(%arg0: tensor<7x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
    "{\"y\"}]>}) -> tensor<7x8xi32> {\n"
    "  %0 = stablehlo.reverse %arg0, dims = [0] {sdy.sharding = "
    "#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {\"y\"}]>]>} : tensor<7x8xi32>\n"
    "  return %0 : tensor<7x8xi32>\n"
    "}\n";

static void test_sp_pass_resolve_permutation_factors_replicates_on_huge_mesh(void **state)
{
    (void)state;
    char *out = run(HUGE_MESH, rpf_halo);
    assert_has(out, "sdy.reshard %arg0 <@mesh, [{}, {\"y\"}]>");
    assert_lacks(out, "reversed");
    cm_free(out);
}

static void test_sp_pass_resolve_permutation_factors_rejects_both_counts(void **state)
{
    (void)state;
    sp_module *m = read_module(PAD);
    cm_error err;
    cm_error_clear(&err);
    sp_rpf_opts o = {true, 2, 2};
    assert_int_equal(sp_pass_resolve_permutation_factors(m, &o, NULL, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "");
    sp_module_destroy(m);
}

/* ---- -sdy-per-instruction-partitioning and -sdy-export-pipeline ------------------ */

static const char DOT[] =
    MESH "func.func @f(%arg0: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
         "{}]>}, %arg1: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"y\"}]>}) "
         "-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}) {\n"
         "  %0 = stablehlo.dot %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
         "[{\"x\"}, {\"y\"}]>]>} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>\n"
         "  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
         "[{\"x\"}, {\"y\"}]>]>} : tensor<8x16xf32>\n"
         "  return %1 : tensor<8x16xf32>\n"
         "}\n";

static cm_status per_instruction_dot(sp_module *m, sp_diags *d, cm_error *err)
{
    sp_pip_opts o;
    sp_pip_opts_init(&o);
    o.filter = "'dot'";
    return sp_pass_per_instruction_partitioning(m, &o, d, err);
}

static cm_status export_pipeline(sp_module *m, sp_diags *d, cm_error *err)
{
    sp_export_opts o;
    sp_export_opts_init(&o);
    o.enable_insert_explicit_collectives = true;
    return sp_pass_export_pipeline(m, &o, d, err);
}

static void test_sp_pass_per_instruction_partitioning_wraps_dot(void **state)
{
    (void)state;
    char *out = run(DOT, per_instruction_dot);
    assert_has(out, "%0 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{\"x\"}, "
                    "{}]>, <@mesh, [{}, {\"y\"}]>] out_shardings=[<@mesh, [{\"x\"}, {\"y\"}]>] "
                    "manual_axes={\"x\", \"y\"} (%arg2: tensor<4x32xf32>, %arg3: "
                    "tensor<32x8xf32>)");
    assert_has(out, "stablehlo.dot %arg2, %arg3 : (tensor<4x32xf32>, tensor<32x8xf32>) -> "
                    "tensor<4x8xf32>");
    assert_has(out, "stablehlo.add %0, %0");
    assert_has(out, "sdy.mesh @mesh");
    assert_lacks(out, "outlined_op");
    cm_free(out);
    assert_survives_oom(DOT, per_instruction_dot);
}

static void test_sp_pass_export_pipeline_inlines_meshes(void **state)
{
    (void)state;
    char *out = run(DOT, export_pipeline);
    assert_has(out, "#sdy.sharding<mesh<[\"x\"=2, \"y\"=2]>, [{\"x\"}, {}]>");
    assert_lacks(out, "sdy.mesh @mesh");
    cm_free(out);
    assert_survives_oom(DOT, export_pipeline);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_pass_verify_unreduced_axes_rejects_dropped_axis),
        cmocka_unit_test(test_sp_pass_verify_unreduced_axes_accepts_reshard),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_replicates_reverse),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_reverses_mesh),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_halo_pad),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_halo_reshape),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_replicates_on_huge_mesh),
        cmocka_unit_test(test_sp_pass_resolve_permutation_factors_rejects_both_counts),
        cmocka_unit_test(test_sp_pass_per_instruction_partitioning_wraps_dot),
        cmocka_unit_test(test_sp_pass_export_pipeline_inlines_meshes),
    };
    return cmocka_run_group_tests_name("sp_export_partition", tests, NULL, NULL);
}
