/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/advise/sp_lint (lint, collective inventory) and
 * planner/advise/sp_sweep: each lint fires on a module built to trigger it and stays
 * quiet on a near copy built not to; the collective inventory agrees with the
 * cost model and names causes; the sweep covers every factorisation and
 * strategy, ranks and marks a correct Pareto front; JSON output parses; OOM. */
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
#include "sp_lint.h"
#include "sp_sweep.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_graph_json.h"
#include "sp_pipeline.h"
#include "sp_diag.h"
#include "sp_input.h"

static sp_advise *lint_opts(const char *text, const sp_advise_opts *o)
{
    sp_advise *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_advise_run(text, strlen(text), NULL, o, &a, &err);
    if (st != CM_OK) {
        fprintf(stderr, "advise: %s %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_non_null(a);
    return a;
}

static sp_advise *lint(const char *text)
{
    return lint_opts(text, NULL);
}

static const sp_finding *first_of(const sp_advise *a, sp_lint_kind k)
{
    for (uint32_t i = 0; i < sp_advise_n_findings(a); i++) {
        if (sp_advise_finding_at(a, i)->kind == k) {
            return sp_advise_finding_at(a, i);
        }
    }
    return NULL;
}

/* The one finding of kind k (there must be exactly one). */
static const sp_finding *only_of(const sp_advise *a, sp_lint_kind k)
{
    assert_int_equal(sp_advise_count(a, k), 1);
    return first_of(a, k);
}

/* only_of, on op at line (1-based) of the module text. */
static const sp_finding *only_at(const sp_advise *a, sp_lint_kind k, const char *op, uint32_t line)
{
    const sp_finding *f = only_of(a, k);
    assert_string_equal(f->op, op);
    assert_int_equal(f->line, line);
    return f;
}

/* ---- (a) non-divisible dimensions ------------------------------------------------------ */

#define ND_MODULE(ROWS)                                                                            \
    "sdy.mesh @mesh = <[\"data\"=4, \"model\"=2]>\n"                                               \
    "func.func @main(%arg0: tensor<" ROWS "x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "       \
    "[{\"data\"}, {}]>}) -> tensor<" ROWS "x1024xf32> {\n"                                         \
    "  %0 = stablehlo.add %arg0, %arg0 : tensor<" ROWS "x1024xf32>\n"                              \
    "  return %0 : tensor<" ROWS "x1024xf32>\n"                                                    \
    "}\n"

static void test_sp_advise_non_divisible_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(ND_MODULE("6"));
    assert_int_equal(sp_advise_count(a, SP_LINT_NON_DIVISIBLE), 1);
    /* the "data":(1)2 the pass leaves on the input is this finding, not a sub-axis one */
    assert_int_equal(sp_advise_count(a, SP_LINT_SUB_AXIS), 0);
    const sp_finding *f = first_of(a, SP_LINT_NON_DIVISIBLE);
    assert_string_equal(f->value, "%arg0");
    assert_int_equal(f->line, 2);
    /* whole dimension (6 rows) minus the 2-row shard, of 1024 f32 */
    assert_true(f->bytes == (6.0 - 2.0) * 1024 * 4);
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %arg0 <@mesh, [{}, {}]>");
    /* a function input is fixed by its in_shardings entry */
    assert_string_equal(f->fix_jax, "in_shardings for input 0: NamedSharding(mesh, P(None, None))");
    sp_advise_destroy(a);
}

static void test_sp_advise_non_divisible_quiet_when_divisible(void **state)
{
    (void)state;
    sp_advise *a = lint(ND_MODULE("8"));
    assert_int_equal(sp_advise_count(a, SP_LINT_NON_DIVISIBLE), 0);
    assert_int_equal(sp_advise_n_findings(a), 0);
    sp_advise_destroy(a);
}

/* The fix keeps the longest prefix of the axes that divides. */
static void test_sp_advise_non_divisible_keeps_dividing_prefix(void **state)
{
    (void)state;
    sp_advise *a =
        lint("sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
             "func.func @main(%arg0: tensor<6x16xf32> {sdy.sharding = "
             "#sdy.sharding<@mesh, [{\"data\", \"model\"}, {}]>}) -> tensor<6x16xf32> {\n"
             "  return %arg0 : tensor<6x16xf32>\n}\n");
    const sp_finding *f = first_of(a, SP_LINT_NON_DIVISIBLE);
    assert_non_null(f);
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %arg0 <@mesh, [{\"data\"}, {}]>");
    assert_non_null(strstr(f->fix_jax, "P('data', None)"));
    sp_advise_destroy(a);
}

/* ---- (a) custom calls without a rule -------------------------------------------------- */

#define CC_MODULE(ATTR)                                                                            \
    "sdy.mesh @mesh = <[\"data\"=4]>\n"                                                            \
    "func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "              \
    "[{\"data\"}, {}]>}) -> tensor<8x1024xf32> {\n"                                                \
    "  %0 = stablehlo.custom_call @my_kernel(%arg0) " ATTR                                         \
    ": (tensor<8x1024xf32>) -> tensor<8x1024xf32> loc(\"kernel\")\n"                               \
    "  return %0 : tensor<8x1024xf32>\n"                                                           \
    "}\n"

static void test_sp_advise_custom_call_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(CC_MODULE(""));
    const sp_finding *f = only_of(a, SP_LINT_CUSTOM_CALL);
    assert_string_equal(f->op, "stablehlo.custom_call");
    assert_string_equal(f->loc, "\"kernel\"");
    assert_int_equal(f->line, 3);
    assert_true(f->bytes == 8.0 * 1024 * 4); /* replicated result */
    assert_non_null(strstr(f->message, "@my_kernel"));
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %v <@mesh, [{\"data\"}, {}]>");
    assert_non_null(strstr(f->fix_jax, "P('data', None)"));
    sp_advise_destroy(a);
}

/* A JAX location (`"name"(file:line:col)` behind a `#loc` alias at the end)
 * gives the finding its Python source line. */
static void test_sp_advise_custom_call_names_source_line(void **state)
{
    (void)state;
    sp_advise *a = lint("sdy.mesh @mesh = <[\"data\"=4]>\n"
                        "func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"data\"}, {}]>} loc(\"x\")) -> "
                        "tensor<8x1024xf32> {\n"
                        "  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8x1024xf32>) -> "
                        "tensor<8x1024xf32> loc(#loc2)\n"
                        "  return %0 : tensor<8x1024xf32> loc(#loc)\n"
                        "} loc(#loc)\n"
                        "#loc = loc(unknown)\n"
                        "#loc1 = loc(\"model.py\":14:9)\n"
                        "#loc2 = loc(\"jit(f)/my_kernel\"(#loc1))\n");
    const sp_finding *f = only_of(a, SP_LINT_CUSTOM_CALL);
    assert_string_equal(f->loc, "#loc2");
    assert_string_equal(f->source, "model.py:14");
    cm_buf b;
    cm_buf_init(&b);
    sp_advise_write_lint_json(a, &b);
    assert_non_null(strstr(b.data, "\"source\":\"model.py:14\""));
    cm_buf_fini(&b);
    sp_advise_destroy(a);
}

static void test_sp_advise_custom_call_quiet_with_rule(void **state)
{
    (void)state;
    sp_advise *a = lint(CC_MODULE("{sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) "
                                  "{i=8, j=1024}>} "));
    assert_int_equal(sp_advise_count(a, SP_LINT_CUSTOM_CALL), 0);
    sp_advise_destroy(a);
}

/* A custom call with GSPMD callbacks (JAX custom_partitioning without a
 * sharding_rule: @CustomSPMDPartitioning) gets candidate sharding_rule
 * strings from its shapes: by size for a matmul-like call, elementwise for
 * one whose operand and result shapes agree. */
static void test_sp_advise_custom_call_gspmd_callbacks_rules(void **state)
{
    (void)state;
    sp_advise *a =
        lint("sdy.mesh @mesh = <[\"data\"=4]>\n"
             "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
             "[{\"data\"}, {}]>}, %arg1: tensor<16x4xf32>) -> tensor<8x4xf32> {\n"
             "  %0 = stablehlo.custom_call @CustomSPMDPartitioning(%arg0, %arg1) {backend_config = "
             "\"7\"} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>\n"
             "  %1 = stablehlo.custom_call @CustomSPMDPartitioning(%0) {backend_config = \"8\"} : "
             "(tensor<8x4xf32>) -> tensor<8x4xf32>\n"
             "  %2 = stablehlo.custom_call @my_kernel(%1) : (tensor<8x4xf32>) -> tensor<8x4xf32>\n"
             "  return %2 : tensor<8x4xf32>\n"
             "}\n");
    assert_int_equal(sp_advise_count(a, SP_LINT_CUSTOM_CALL), 3);
    const sp_finding *mm = NULL, *ew = NULL, *plain = NULL;
    for (uint32_t i = 0; i < sp_advise_n_findings(a); i++) {
        const sp_finding *f = sp_advise_finding_at(a, i);
        mm = f->line == 3 ? f : mm;
        ew = f->line == 4 ? f : ew;
        plain = f->line == 5 ? f : plain;
    }
    assert_non_null(mm);
    assert_non_null(ew);
    assert_non_null(plain);
    assert_non_null(strstr(mm->message, "sharding propagation callbacks instead of sharding_rule"));
    assert_non_null(strstr(mm->message, "\"i k, k j -> i j\" (dimensions matched by size)"));
    assert_null(strstr(mm->message, "elementwise"));
    assert_non_null(strstr(ew->message, "\"i j -> i j\" (elementwise)"));
    assert_null(strstr(plain->message, "callbacks"));
    sp_advise_destroy(a);
}

/* ---- (a) unmatched logical axis names -------------------------------------------------- */

#define LOGICAL_DOC(RULES)                                                                         \
    "{\"meshes\": [{\"name\": \"mesh\", \"axes\": [[\"data\", 2], [\"model\", 4]]}],\n"            \
    " \"logical_axis_rules\": " RULES ",\n"                                                        \
    " \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<8x1024xf32>\", \"logical_axes\": "         \
    "[\"batch\", \"embed\"]},\n"                                                                   \
    "            {\"name\": \"w\", \"type\": \"tensor<1024x1024xf32>\", \"logical_axes\": "        \
    "[\"embed\", \"mlp\"]}],\n"                                                                    \
    " \"ops\": [{\"op\": \"stablehlo.dot_general\", \"operands\": [\"x\", \"w\"], \"result\": "    \
    "\"h\", \"type\": \"tensor<8x1024xf32>\", \"attributes\": {\"dot_dimension_numbers\": "        \
    "{\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}}],\n"             \
    " \"outputs\": [\"h\"]}\n"

static void test_sp_advise_logical_axis_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(LOGICAL_DOC("[[\"batch\", \"data\"], [\"mlp\", \"model\"]]"));
    /* "embed" is named twice (x and w) but reported once */
    const sp_finding *f = only_of(a, SP_LINT_LOGICAL_AXIS);
    assert_string_equal(f->value, "%x");
    assert_non_null(strstr(f->message, "\"embed\""));
    assert_non_null(strstr(f->message, "2 tensor dimensions"));
    assert_non_null(strstr(f->message, "/inputs/0/logical_axes/1"));
    /* x: 4 x 1024 f32 per device; w: 1024 x 256 f32 per device */
    assert_true(f->bytes == 4.0 * 1024 * 4 + 1024.0 * 256 * 4);
    /* x uses "data" already; the free axis "model" divides 1024 */
    assert_string_equal(f->fix_shardy,
                        "sdy.sharding_constraint %x <@mesh, [{\"data\"}, {\"model\"}]>");
    /* a Flax parameter: the logical_axis_rules entry first, then in_shardings, by name */
    assert_non_null(strstr(f->fix_jax, "logical_axis_rules: ('embed', 'model') for dim 1 of x, "
                                       "whose nn.with_logical_partitioning names are ("));
    assert_non_null(strstr(f->fix_jax, "; or in_shardings for x (input 0): NamedSharding(mesh, "
                                       "P('data', 'model'))"));
    sp_advise_destroy(a);
}

static void test_sp_advise_logical_axis_quiet_when_matched(void **state)
{
    (void)state;
    sp_advise *a =
        lint(LOGICAL_DOC("[[\"batch\", \"data\"], [\"mlp\", \"model\"], [\"embed\", null]]"));
    assert_int_equal(sp_advise_count(a, SP_LINT_LOGICAL_AXIS), 0);
    sp_advise_destroy(a);
}

/* ---- (b) gathered to replicated, then sliced again ------------------------------------ */

#define REMAT_MODULE(ADD_SHARDING)                                                                 \
    "sdy.mesh @mesh = <[\"x\"=4]>\n"                                                               \
    "func.func @main(%arg0: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "     \
    "{}]>}, %arg1: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"x\"}]>}) -> "    \
    "(tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}) {\n"                 \
    "  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = "                                           \
    "#sdy.sharding_per_value<[<@mesh, " ADD_SHARDING ">]>} : tensor<64x64xf32>\n"                  \
    "  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {\"x\"}]> : tensor<64x64xf32>\n"               \
    "  return %1 : tensor<64x64xf32>\n"                                                            \
    "}\n"

static void test_sp_advise_remat_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(REMAT_MODULE("[{}, {}]"));
    const sp_finding *f = only_at(a, SP_LINT_REMAT, "stablehlo.add", 3);
    assert_true(f->bytes == 64.0 * 64 * 4);
    assert_non_null(strstr(f->message, "sdy.sharding_constraint at line 4"));
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %v <@mesh, [{}, {\"x\"}]>");
    assert_non_null(strstr(f->fix_jax, "P(None, 'x')"));
    sp_advise_destroy(a);
}

static void test_sp_advise_remat_quiet_without_conflict(void **state)
{
    (void)state;
    sp_advise *a = lint(REMAT_MODULE("[{}, {\"x\"}]"));
    assert_int_equal(sp_advise_count(a, SP_LINT_REMAT), 0);
    sp_advise_destroy(a);
}

/* ---- (c) inputs and outputs on different meshes ----------------------------------------- */

#define MESH_MODULE(SECOND)                                                                        \
    "sdy.mesh @mesh = <[\"data\"=4]>\n"                                                            \
    "sdy.mesh @other = <[\"data\"=2]>\n"                                                           \
    "func.func @main(%arg0: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "  \
    "{}]>}, %arg1: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@" SECOND ", [{\"data\"}, "     \
    "{}]>}) -> (tensor<64x64xf32>, tensor<64x64xf32>) {\n"                                         \
    "  return %arg0, %arg1 : tensor<64x64xf32>, tensor<64x64xf32>\n"                               \
    "}\n"

static void test_sp_advise_mesh_mismatch_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(MESH_MODULE("other"));
    /* %arg1 as an input, and again as an output */
    assert_int_equal(sp_advise_count(a, SP_LINT_MESH_MISMATCH), 2);
    const sp_finding *f = first_of(a, SP_LINT_MESH_MISMATCH);
    assert_int_equal(f->sev, SP_LINT_ERROR);
    assert_string_equal(f->value, "%arg1");
    assert_true(f->bytes == 32.0 * 64 * 4);
    assert_non_null(strstr(f->message, "@other"));
    /* "data" exists on @mesh, so the fix keeps it */
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %arg1 <@mesh, [{\"data\"}, {}]>");
    sp_advise_destroy(a);
}

static void test_sp_advise_mesh_mismatch_quiet_on_one_mesh(void **state)
{
    (void)state;
    sp_advise *a = lint(MESH_MODULE("mesh"));
    assert_int_equal(sp_advise_count(a, SP_LINT_MESH_MISMATCH), 0);
    sp_advise_destroy(a);
}

/* --mesh picks the reference mesh; an unknown name is an error with a path. */
static void test_sp_advise_mesh_option(void **state)
{
    (void)state;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    o.mesh = "other";
    sp_advise *a = lint_opts(MESH_MODULE("other"), &o);
    const sp_finding *f = first_of(a, SP_LINT_MESH_MISMATCH);
    assert_non_null(f);
    assert_string_equal(f->value, "%arg0");
    sp_advise_destroy(a);
    o.mesh = "nope";
    cm_error err;
    cm_error_clear(&err);
    const char *t = MESH_MODULE("other");
    assert_int_equal(sp_advise_run(t, strlen(t), NULL, &o, &a, &err), CM_EINVAL);
    assert_string_equal(err.path, "/mesh");
    assert_null(a);
}

/* ---- (d) memory over capacity ------------------------------------------------------------ */

#define MEM_MODULE                                                                                 \
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"                                               \
    "func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, " \
    "{}]>}, %arg1: tensor<1024x1024xf32>) -> tensor<8x1024xf32> {\n"                               \
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "                   \
    "(tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>\n"                          \
    "  return %0 : tensor<8x1024xf32>\n"                                                           \
    "}\n"

static void test_sp_advise_memory_fires_over_capacity(void **state)
{
    (void)state;
    sp_profile p;
    sp_profile_default(&p);
    p.mem_bytes = 1024 * 1024; /* 1 MiB: the replicated 4 MiB weight does not fit */
    p.mem_shared = false;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    o.profile = &p;
    sp_advise *a = lint_opts(MEM_MODULE, &o);
    const sp_finding *f = only_of(a, SP_LINT_MEMORY);
    const sp_cost_summary *s = sp_advise_summary(a);
    assert_false(s->fits);
    assert_true(f->bytes == s->peak_bytes - s->capacity_bytes);
    assert_int_equal(f->sev, SP_LINT_ERROR);
    assert_string_equal(f->value, "%arg1");
    /* the weight is the largest input; "data" and "model" are free, "data" divides dim 0 */
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %arg1 <@mesh, [{\"data\"}, {}]>");
    assert_non_null(strstr(f->message, "OOM predicted"));
    sp_advise_destroy(a);
}

static void test_sp_advise_memory_quiet_under_capacity(void **state)
{
    (void)state;
    sp_profile p;
    sp_profile_default(&p);
    p.mem_bytes = 64.0 * 1024 * 1024;
    p.mem_shared = false;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    o.profile = &p;
    sp_advise *a = lint_opts(MEM_MODULE, &o);
    assert_int_equal(sp_advise_count(a, SP_LINT_MEMORY), 0);
    assert_true(sp_advise_summary(a)->fits);
    sp_advise_destroy(a);
}

/* --min-bytes drops small findings but never memory or mesh errors. */
/* ---- (d) sub-axes at the function boundary ----------------------------------------------- */

#define SUB_SPLIT(OUT_ATTR)                                                                        \
    "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"                                                      \
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "                \
    "[{\"x\"}, {}]>}) -> (tensor<2x4x16xf32>" OUT_ATTR ") {\n"                                     \
    "  %0 = stablehlo.reshape %arg0 : (tensor<8x16xf32>) -> tensor<2x4x16xf32> loc(\"split\")\n"   \
    "  return %0 : tensor<2x4x16xf32>\n"                                                           \
    "}\n"

static void test_sp_advise_sub_axis_output_fires(void **state)
{
    (void)state;
    sp_advise *a = lint(SUB_SPLIT(""));
    const sp_finding *f = only_at(a, SP_LINT_SUB_AXIS, "stablehlo.reshape", 3);
    assert_string_equal(f->loc, "\"split\"");
    assert_non_null(strstr(f->message, "output 0 of @main"));
    assert_non_null(strstr(f->message, "\"x\":(1)2"));
    /* the fix puts "x" whole on the dimension it divides: no sub-axis left */
    assert_string_equal(f->fix_shardy, "sdy.sharding_constraint %v <@mesh, [{}, {\"x\"}, {}]>");
    assert_non_null(strstr(f->fix_jax, "P(None, 'x', None)"));
    assert_true(f->bytes == 0); /* same shard size */
    sp_advise_destroy(a);
}

static void test_sp_advise_sub_axis_quiet_with_fix_applied(void **state)
{
    (void)state;
    sp_advise *a =
        lint(SUB_SPLIT(" {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"x\"}, {}]>}"));
    assert_int_equal(sp_advise_count(a, SP_LINT_SUB_AXIS), 0);
    sp_advise_destroy(a);
}

static void test_sp_advise_sub_axis_input_fires_with_arg_loc(void **state)
{
    (void)state;
    sp_advise *a = lint(
        "sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
        "func.func @main(%arg0: tensor<2x4x16xf32> loc(\"params['w']\")) -> (tensor<8x16xf32> "
        "{sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>}) {\n"
        "  %0 = stablehlo.reshape %arg0 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>\n"
        "  %1 = stablehlo.negate %0 : tensor<8x16xf32>\n"
        "  return %1 : tensor<8x16xf32>\n"
        "}\n");
    const sp_finding *f = only_of(a, SP_LINT_SUB_AXIS);
    assert_string_equal(f->value, "%arg0");
    assert_string_equal(f->loc, "\"params['w']\"");
    assert_int_equal(f->line, 3); /* the reshape */
    assert_non_null(strstr(f->message, "input 0 of @main"));
    assert_string_equal(f->fix_shardy,
                        "sdy.sharding_constraint %arg0 <@mesh, [{}, {\"x\"}, {\"y\"}]>");
    /* the JAX fix names the input by its location, never bare %arg0 */
    assert_string_equal(f->fix_jax, "in_shardings for params['w'] (input 0): "
                                    "NamedSharding(mesh, P(None, 'x', 'y'))");
    sp_advise_destroy(a);
}

static void test_sp_advise_sub_axis_quiet_when_axes_stay_whole(void **state)
{
    (void)state;
    sp_advise *a = lint("sdy.mesh @mesh = <[\"x\"=4, \"y\"=2]>\n"
                        "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = "
                        "#sdy.sharding<@mesh, [{\"x\"}, {}]>}) -> tensor<8x4x4xf32> {\n"
                        "  %0 = stablehlo.reshape %arg0 : (tensor<8x16xf32>) -> tensor<8x4x4xf32>\n"
                        "  return %0 : tensor<8x4x4xf32>\n"
                        "}\n");
    assert_int_equal(sp_advise_count(a, SP_LINT_SUB_AXIS), 0);
    assert_int_equal(sp_advise_n_findings(a), 0);
    sp_advise_destroy(a);
}

static void test_sp_advise_min_bytes_filters(void **state)
{
    (void)state;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    o.min_bytes = 1e9;
    sp_advise *a = lint_opts(ND_MODULE("6"), &o);
    assert_int_equal(sp_advise_n_findings(a), 0);
    sp_advise_destroy(a);
    a = lint_opts(MESH_MODULE("other"), &o);
    assert_int_equal(sp_advise_count(a, SP_LINT_MESH_MISMATCH), 2);
    sp_advise_destroy(a);
}

/* ---- the collective inventory ------------------------------------------------------------ */

/* The Flax MLP's four y @ W2 all-reduces over "model", each 2 x 3/4 x 16 KiB. */
static void test_sp_advise_collectives_flax_mlp(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.mlir", &text, &len, &err), CM_OK);
    sp_advise *a = NULL;
    assert_int_equal(sp_advise_run(text, len, NULL, NULL, &a, &err), CM_OK);
    cm_free(text);
    assert_int_equal(sp_advise_n_colls(a), 4);
    for (uint32_t i = 0; i < 4; i++) {
        const sp_advise_coll *c = sp_advise_coll_at(a, i);
        assert_string_equal(c->op, "sdy.all_reduce");
        assert_int_equal(c->cost.kind, SP_COLL_ALL_REDUCE);
        assert_int_equal(c->cost.n_axes, 1);
        assert_string_equal(c->cost.axes[0], "model");
        assert_true(c->cost.bytes == 24576.0);
        assert_true(c->cost.time_s > 0);
        assert_string_equal(c->for_op, "stablehlo.dot_general");
        assert_true(c->line > 0);
        assert_non_null(strstr(c->cause, "reduction"));
        assert_non_null(strstr(c->cause, "{\"model\"}"));
    }
    assert_int_equal(sp_advise_n_findings(a), 0);
    sp_advise_destroy(a);
}

/* Reshard-made collectives name their source, consumer and the constraint. */
static void test_sp_advise_collectives_causes(void **state)
{
    (void)state;
    sp_advise *a = lint(REMAT_MODULE("[{}, {}]"));
    assert_int_equal(sp_advise_n_colls(a), 3);
    const sp_advise_coll *c0 = sp_advise_coll_at(a, 0), *c1 = sp_advise_coll_at(a, 1),
                         *c2 = sp_advise_coll_at(a, 2);
    assert_int_equal(c0->cost.kind, SP_COLL_ALL_TO_ALL);
    assert_non_null(strstr(c0->cause, "%arg0 is <@mesh, [{\"x\"}, {}]>"));
    assert_non_null(strstr(c0->cause, "stablehlo.add needs it as <@mesh, [{}, {\"x\"}]>"));
    assert_int_equal(c1->cost.kind, SP_COLL_ALL_GATHER);
    assert_non_null(strstr(c1->cause, "computes its result as"));
    assert_non_null(strstr(c1->cause, "<@mesh, [{}, {}]>"));
    assert_int_equal(c2->cost.kind, SP_COLL_ALL_TO_ALL);
    assert_non_null(strstr(c2->cause, "function output"));
    /* gathered output: 3/4 of the 16 KiB replicated tensor */
    assert_true(c1->cost.bytes == 0.75 * 64 * 64 * 4);
    sp_advise_destroy(a);
}

/* The JSON documents parse and carry every member. */
static void test_sp_advise_json_parses(void **state)
{
    (void)state;
    sp_advise *a = lint(REMAT_MODULE("[{}, {}]"));
    cm_buf b;
    cm_buf_init(&b);
    sp_advise_write_lint_json(a, &b);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    assert_non_null(j);
    json_t *f0 = json_array_get(json_object_get(j, "findings"), 0);
    assert_string_equal(json_string_value(json_object_get(f0, "kind")), "rematerialisation");
    assert_non_null(json_object_get(json_object_get(f0, "fix"), "jax"));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "counts"), "rematerialisation")), 1);
    json_decref(j);
    cm_buf_reset(&b);
    sp_advise_write_colls_json(a, &b);
    j = json_loads(b.data, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "collectives")), 3);
    json_decref(j);
    cm_buf_reset(&b);
    sp_advise_write_lint_text(a, &b);
    assert_non_null(strstr(b.data, "fix: sdy.sharding_constraint"));
    cm_buf_reset(&b);
    sp_advise_write_colls_text(a, &b);
    assert_non_null(strstr(b.data, "cause:"));
    cm_buf_fini(&b);
    sp_advise_destroy(a);
}

static void test_sp_advise_run_rejects_bad_input(void **state)
{
    (void)state;
    sp_advise *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    const char *t = "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %nope";
    assert_int_equal(sp_advise_run(t, strlen(t), NULL, NULL, &a, &err), CM_EINVAL);
    assert_null(a);
    assert_true(err.path[0] != '\0');
}

static void test_sp_advise_run_oom(void **state)
{
    (void)state;
    const char *t = REMAT_MODULE("[{}, {}]");
    for (long n = 0;; n++) {
        sp_advise *a = NULL;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_advise_run(t, strlen(t), NULL, NULL, &a, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_int_equal(sp_advise_n_colls(a), 3);
            sp_advise_destroy(a);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(a);
        assert_true(n < 100000);
    }
}

/* ---- the plan's input options ------------------------------------------------------------ */

/* An input sharded on an axis that does not divide its dimension: the
 * pipeline's export passes drop the axis from the function's input and
 * output (-sdy-update-non-divisible-input-output-shardings), so the output
 * is gathered; -sdy-basic-propagate keeps the padded sharding throughout. */
#define PASS_MODULE                                                                                \
    "sdy.mesh @mesh = <[\"x\"=4]>\n"                                                               \
    "func.func @main(%arg0: tensor<6x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "      \
    "{}]>}, %arg1: tensor<6x16xf32>) -> tensor<6x16xf32> {\n"                                      \
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<6x16xf32>\n"                                       \
    "  return %0 : tensor<6x16xf32>\n"                                                             \
    "}\n"

static sp_advise *lint_in(const char *text, const sp_input_opts *io)
{
    sp_advise *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_advise_run(text, strlen(text), io, NULL, &a, &err);
    if (st != CM_OK) {
        fprintf(stderr, "advise: %s %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    return a;
}

static char *colls_json(const sp_advise *a)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_advise_write_colls_json(a, &b);
    return cm_buf_take(&b);
}

static void test_sp_advise_run_honours_the_pass(void **state)
{
    (void)state;
    sp_input_opts io;
    sp_input_opts_init(&io);
    sp_advise *pipe = lint_in(PASS_MODULE, NULL);
    io.pass = SP_PLAN_PIPELINE;
    sp_advise *pipe2 = lint_in(PASS_MODULE, &io);
    io.pass = SP_PLAN_BASIC;
    sp_advise *basic = lint_in(PASS_MODULE, &io);
    char *jp = colls_json(pipe), *jp2 = colls_json(pipe2), *jb = colls_json(basic);
    assert_string_equal(jp, jp2); /* NULL is the defaults: the pipeline */
    assert_int_equal(sp_advise_n_colls(pipe), 3);
    assert_int_equal(sp_advise_coll_at(pipe, 2)->cost.kind, SP_COLL_ALL_GATHER);
    assert_string_equal(sp_advise_coll_at(pipe, 2)->for_op, "func.return");
    assert_int_equal(sp_advise_n_colls(basic), 0);
    /* the user's sharding is linted before either pass */
    assert_int_equal(sp_advise_count(pipe, SP_LINT_NON_DIVISIBLE), 1);
    assert_int_equal(sp_advise_count(basic, SP_LINT_NON_DIVISIBLE), 1);
    cm_free(jp);
    cm_free(jp2);
    cm_free(jb);
    sp_advise_destroy(pipe);
    sp_advise_destroy(pipe2);
    sp_advise_destroy(basic);
}

/* A rules document (a graph document's custom_rules) for an MLIR input: the
 * custom call has a rule, so it is neither reported nor a propagation stop. */
#define RULES_DOC                                                                                  \
    "{\"custom_rules\": {\"my_kernel\": \"i j -> i j\"}, "                                         \
    "\"inputs\": [], \"ops\": [], \"outputs\": []}"

static void test_sp_advise_run_honours_the_rules_document(void **state)
{
    (void)state;
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.rules = RULES_DOC;
    io.rules_len = strlen(RULES_DOC);
    sp_advise *without = lint_in(CC_MODULE(""), NULL);
    sp_advise *with = lint_in(CC_MODULE(""), &io);
    assert_int_equal(sp_advise_count(without, SP_LINT_CUSTOM_CALL), 1);
    assert_int_equal(sp_advise_count(with, SP_LINT_CUSTOM_CALL), 0);
    /* propagation went through the call: its result keeps "data", the output
     * needs no gather */
    assert_true(sp_advise_n_colls(without) > 0);
    assert_int_equal(sp_advise_n_colls(with), 0);
    sp_advise_destroy(without);
    sp_advise_destroy(with);
    /* a bad rules document is an error at /rules */
    io.rules = "{\"custom_rules\": 3}";
    io.rules_len = strlen(io.rules);
    sp_advise *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    const char *t = CC_MODULE("");
    assert_int_equal(sp_advise_run(t, strlen(t), &io, NULL, &a, &err), CM_EINVAL);
    assert_null(a);
    assert_string_equal(err.path, "/rules");
}

/* ---- sweep -------------------------------------------------------------------------------- */

static void test_sp_sweep_run_covers_factorisations(void **state)
{
    (void)state;
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 8;
    o.layers = 1;
    o.d_model = 256;
    o.seq = 32;
    o.threads = 2;
    sp_sweep_result r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sweep_run(&o, &r, &err), CM_OK);
    assert_int_equal(r.n_rows, 16); /* 1x8, 2x4, 4x2, 8x1 x dp, fsdp, tp, dp+tp */
    bool seen[9][4];
    memset(seen, 0, sizeof seen);
    uint32_t n_pareto = 0;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        const sp_sweep_row *x = &r.rows[i];
        assert_true(x->ok);
        assert_true(x->fits);
        assert_int_equal(x->data * x->model, 8);
        seen[x->data][x->strategy] = true;
        assert_int_equal(x->rank, i + 1); /* sorted by step time, all fit */
        if (i > 0) {
            assert_true(r.rows[i - 1].step_s <= x->step_s);
        }
        /* Pareto: no row is at least as good in both and better in one */
        bool dominated = false;
        for (uint32_t j = 0; j < r.n_rows; j++) {
            const sp_sweep_row *y = &r.rows[j];
            dominated = dominated || (y->peak_bytes <= x->peak_bytes && y->step_s <= x->step_s &&
                                      (y->peak_bytes < x->peak_bytes || y->step_s < x->step_s));
        }
        assert_int_equal(x->pareto, !dominated);
        n_pareto += x->pareto;
    }
    assert_true(n_pareto >= 1);
    int64_t facts[4] = {1, 2, 4, 8};
    for (int f = 0; f < 4; f++) {
        for (int s = 0; s < 4; s++) {
            assert_true(seen[facts[f]][s]);
        }
    }
    /* the same sweep on one thread gives the same figures */
    sp_sweep_result r1;
    o.threads = 1;
    o.jobs = 20; /* cycles over the variants again; rows are the first round's */
    assert_int_equal(sp_sweep_run(&o, &r1, &err), CM_OK);
    assert_int_equal(r1.n_jobs, 20);
    for (uint32_t i = 0; i < r.n_rows; i++) {
        assert_true(r1.rows[i].step_s == r.rows[i].step_s);
        assert_true(r1.rows[i].peak_bytes == r.rows[i].peak_bytes);
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&r, &b);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "rows")), 16);
    /* the profile and its capacity, for the dashboard's capacity line */
    assert_string_equal(json_string_value(json_object_get(j, "profile")), "cpu-local");
    json_t *row0 = json_array_get(json_object_get(j, "rows"), 0);
    assert_true(json_number_value(json_object_get(row0, "capacity_bytes")) > 0);
    assert_true(r.rows[0].capacity_bytes > 0);
    json_decref(j);
    cm_buf_fini(&b);
    sp_sweep_result_fini(&r);
    sp_sweep_result_fini(&r1);
}

/* The user's module over the meshes of 8 devices: every ordered
 * factorisation of its two axes once, figures independent of the sizes the
 * module was written with (only the mesh line differs between variants),
 * the same on one thread, and the errors of a missing mesh and of too many
 * meshes. */
static void test_sp_sweep_module_meshes(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.mlir", &text, &len, &err), CM_OK);
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 0; /* the mesh's own: 2 x 4 */
    o.threads = 2;
    sp_sweep_result r;
    assert_int_equal(sp_sweep_module_run(text, len, NULL, NULL, &o, &r, &err), CM_OK);
    assert_true(r.of_module);
    assert_string_equal(r.mesh, "mesh");
    assert_int_equal(r.n_axes, 2);
    assert_string_equal(r.axes[0], "data");
    assert_string_equal(r.axes[1], "model");
    assert_int_equal(r.n_rows, 4);
    bool seen[9] = {false};
    for (uint32_t i = 0; i < r.n_rows; i++) {
        const sp_sweep_row *x = &r.rows[i];
        assert_true(x->ok);
        assert_int_equal(x->strategy, -1);
        assert_int_equal(x->sizes[0] * x->sizes[1], 8);
        assert_false(seen[x->sizes[0]]);
        seen[x->sizes[0]] = true;
        assert_true(x->step_s > 0 && x->peak_bytes > 0);
    }
    /* the same module written with an 8 x 1 mesh sweeps to the same rows */
    const char *from = "\"data\"=2, \"model\"=4";
    char *at = strstr(text, from);
    assert_non_null(at);
    cm_buf t;
    cm_buf_init(&t);
    cm_buf_append(&t, text, (size_t)(at - text));
    cm_buf_puts(&t, "\"data\"=8, \"model\"=1");
    cm_buf_puts(&t, at + strlen(from));
    sp_sweep_result r8;
    o.threads = 1;
    assert_int_equal(sp_sweep_module_run(t.data, t.len, NULL, NULL, &o, &r8, &err), CM_OK);
    assert_int_equal(r8.n_rows, 4);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(r8.rows[i].sizes[0], r.rows[i].sizes[0]);
        assert_true(r8.rows[i].step_s == r.rows[i].step_s);
        assert_true(r8.rows[i].peak_bytes == r.rows[i].peak_bytes);
        assert_true(r8.rows[i].comm_bytes == r.rows[i].comm_bytes);
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&r, &b);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    assert_non_null(j);
    json_t *row0 = json_array_get(json_object_get(j, "rows"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(row0, "mesh"), "data")),
                     r.rows[0].sizes[0]);
    assert_null(json_object_get(row0, "strategy"));
    assert_string_equal(json_string_value(json_object_get(j, "mesh_name")), "mesh");
    json_decref(j);
    cm_buf_fini(&b);
    sp_sweep_result_fini(&r8);
    sp_sweep_result_fini(&r);
    /* errors */
    assert_int_equal(sp_sweep_module_run(text, len, NULL, "nope", &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.path, "/mesh");
    cm_error_clear(&err);
    o.devices = 65536; /* 2^16 over 2 axes: 17 meshes, fine */
    assert_int_equal(sp_sweep_module_run(text, len, NULL, NULL, &o, &r, &err), CM_OK);
    assert_int_equal(r.n_rows, 17);
    sp_sweep_result_fini(&r);
    cm_buf_reset(&t);
    cm_buf_puts(&t, "sdy.mesh @m = <[\"a\"=1, \"b\"=1, \"c\"=1, \"d\"=1, \"e\"=1, \"f\"=1]>\n"
                    "func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
                    "  return %x : tensor<8xf32>\n}\n");
    o.devices = 65536; /* 2^16 over 6 axes: C(21, 5) = 20349 meshes */
    assert_int_equal(sp_sweep_module_run(t.data, t.len, NULL, NULL, &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.path, "/devices");
    cm_buf_fini(&t);
    cm_free(text);
}

/* The figures of the 2 x 4 row of a mesh sweep of doc (its own mesh). */
static const sp_sweep_row *own_mesh_row(const char *doc, size_t len, sp_sweep_result *r)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sweep_module_run(doc, len, NULL, NULL, &o, r, &err), CM_OK);
    for (uint32_t i = 0; i < r->n_rows; i++) {
        if (r->rows[i].sizes[0] == 2 && r->rows[i].sizes[1] == 4) {
            return &r->rows[i];
        }
    }
    fail();
    return NULL;
}

/* The Flax guide's MLP over its logical-axis-rule variants: 3 names (batch,
 * hidden from the rules, embed from the inputs' logical_axes) on data,
 * model or none is 27 assignments; the document's own rules are one of them
 * (embed has no rule: none), kept once, as the own row. The own row costs
 * what the document costs, and another row what the document rewritten
 * with that row's rules costs. With 6 names (729 assignments) it moves one
 * name at a time instead. MLIR input is an error. */
static void test_sp_sweep_logical_rules(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &text, &len, &err), CM_OK);
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.threads = 2;
    sp_sweep_result r;
    assert_int_equal(sp_sweep_rules_run(text, len, NULL, NULL, &o, &r, &err), CM_OK);
    assert_true(r.of_rules);
    assert_false(r.neighbours);
    assert_int_equal(r.n_logical, 3);
    assert_int_equal(r.n_rows, 27);
    uint32_t n_own = 0, other = UINT32_MAX;
    const sp_sweep_row *own = NULL;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        const sp_sweep_row *x = &r.rows[i];
        assert_true(x->ok);
        assert_int_equal(x->sizes[0], 2);
        assert_int_equal(x->sizes[1], 4);
        for (uint32_t j = 0; j < i; j++) {
            assert_string_not_equal(r.rows[j].rules, x->rules);
        }
        n_own += x->own;
        own = x->own ? x : own;
        if (!x->own && strstr(x->rules, "[\"batch\",null]") != NULL &&
            strstr(x->rules, "[\"hidden\",\"model\"]") != NULL &&
            strstr(x->rules, "[\"embed\",\"data\"]") != NULL) {
            other = i;
        }
    }
    assert_int_equal(n_own, 1);
    assert_string_equal(own->rules, "[[\"batch\",\"data\"],[\"hidden\",\"model\"]]");
    sp_sweep_result m;
    const sp_sweep_row *mr = own_mesh_row(text, len, &m);
    assert_true(own->step_s == mr->step_s && own->peak_bytes == mr->peak_bytes &&
                own->comm_bytes == mr->comm_bytes);
    sp_sweep_result_fini(&m);
    /* batch none, hidden on model, embed on data: the document with those rules */
    assert_true(other != UINT32_MAX);
    json_t *doc = json_loadb(text, len, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_object_set_new(doc, "logical_axis_rules",
                                         json_loads(r.rows[other].rules, 0, NULL)),
                     0);
    char *t2 = json_dumps(doc, JSON_COMPACT);
    mr = own_mesh_row(t2, strlen(t2), &m);
    assert_true(r.rows[other].step_s == mr->step_s &&
                r.rows[other].peak_bytes == mr->peak_bytes &&
                r.rows[other].comm_bytes == mr->comm_bytes);
    assert_true(r.rows[other].peak_bytes != own->peak_bytes); /* the rules matter */
    sp_sweep_result_fini(&m);
    free(t2);
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&r, &b);
    json_t *j = json_loads(b.data, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "logical_names")), 3);
    json_t *row0 = json_array_get(json_object_get(j, "rows"), 0);
    assert_true(json_is_array(json_object_get(row0, "rules")));
    assert_true(json_is_boolean(json_object_get(row0, "own")));
    json_decref(j);
    cm_buf_reset(&b);
    sp_sweep_write_text(&r, &b);
    assert_non_null(strstr(b.data, "(own) batch=data hidden=model"));
    cm_buf_fini(&b);
    sp_sweep_result_fini(&r);
    /* three more names (rules to none): 3^6 = 729 assignments, too many */
    json_t *rules = json_object_get(doc, "logical_axis_rules");
    json_array_clear(rules);
    json_array_append_new(rules, json_pack("[ss]", "batch", "data"));
    json_array_append_new(rules, json_pack("[ss]", "hidden", "model"));
    json_array_append_new(rules, json_pack("[sn]", "a1"));
    json_array_append_new(rules, json_pack("[sn]", "a2"));
    json_array_append_new(rules, json_pack("[sn]", "a3"));
    t2 = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(sp_sweep_rules_run(t2, strlen(t2), NULL, NULL, &o, &r, &err), CM_OK);
    assert_true(r.neighbours);
    assert_int_equal(r.n_logical, 6);
    assert_int_equal(r.n_rows, 1 + 6 * 2); /* each name to its two other choices */
    sp_sweep_result_fini(&r);
    free(t2);
    json_decref(doc);
    cm_free(text);
    /* MLIR has no logical names */
    assert_int_equal(cm_file_read("examples/flax_mlp.mlir", &text, &len, &err), CM_OK);
    assert_int_equal(sp_sweep_rules_run(text, len, NULL, NULL, &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.path, "/logical_axis_rules");
    cm_free(text);
}

/* A tight capacity leaves only sharded variants ranked; dp (replicated
 * weights) does not fit. */
static void test_sp_sweep_run_ranks_under_memory_limit(void **state)
{
    (void)state;
    sp_profile p;
    sp_profile_default(&p);
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 4;
    o.layers = 1;
    o.d_model = 256;
    o.seq = 32;
    o.strategies = (1u << 0) | (1u << 1); /* dp, fsdp */
    o.profile = &p;
    sp_sweep_result r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sweep_run(&o, &r, &err), CM_OK);
    assert_int_equal(r.n_rows, 6);
    /* capacity between the smallest and the largest peak */
    double lo = 1e300, hi = 0;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        lo = r.rows[i].peak_bytes < lo ? r.rows[i].peak_bytes : lo;
        hi = r.rows[i].peak_bytes > hi ? r.rows[i].peak_bytes : hi;
    }
    assert_true(lo < hi);
    sp_sweep_result_fini(&r);
    p.mem_bytes = (lo + hi) / 2;
    p.mem_shared = false;
    assert_int_equal(sp_sweep_run(&o, &r, &err), CM_OK);
    bool seen_unfit = false;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        const sp_sweep_row *x = &r.rows[i];
        assert_int_equal(x->fits, x->peak_bytes <= p.mem_bytes);
        if (!x->fits) {
            seen_unfit = true;
            assert_int_equal(x->rank, 0);
        } else {
            assert_false(seen_unfit); /* fitting rows come first */
            assert_int_equal(x->rank, i + 1);
        }
    }
    assert_true(seen_unfit);
    sp_sweep_result_fini(&r);
}

/* The sweep reuses one decoded module per strategy; its figures equal those
 * of `shardplan cost` on the variant's own graph document. */
static void test_sp_sweep_run_matches_cost_of_graph(void **state)
{
    (void)state;
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 8;
    o.layers = 2;
    o.d_model = 256;
    o.seq = 32;
    o.strategies = 1u << SP_EXAMPLE_DP_TP;
    sp_sweep_result r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sweep_run(&o, &r, &err), CM_OK);
    assert_int_equal(r.n_rows, 4);
    const sp_sweep_row *row = NULL;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        row = r.rows[i].data == 2 ? &r.rows[i] : row;
    }
    assert_non_null(row);
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.strategy = SP_EXAMPLE_DP_TP;
    eo.layers = 2;
    eo.d_model = 256;
    eo.seq = 32;
    eo.train = true;
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(sp_example_graph_json(&eo, &b, &err), CM_OK); /* data=2, model=4 */
    sp_graph *g = NULL;
    assert_int_equal(sp_graph_decode(b.data, b.len, NULL, &g, &err), CM_OK);
    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    po.keep_sharding_rules = true;
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_pass_propagation_pipeline(sp_graph_module(g), &po, &d, &err), CM_OK);
    sp_diags_fini(&d);
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    co.mode = SP_COST_IMPLIED;
    if (g != NULL) {
        co.value_names = sp_graph_value_names(g, &co.n_value_names);
    }
    sp_cost *c = NULL;
    assert_int_equal(sp_cost_compute(sp_graph_module(g), &co, &c, &err), CM_OK);
    const sp_cost_summary *s = sp_cost_get_summary(c);
    assert_true(row->step_s == s->step_s);
    assert_true(row->peak_bytes == s->peak_bytes);
    assert_true(row->comm_bytes == s->comm_bytes);
    assert_true(row->flops == s->flops);
    sp_cost_destroy(c);
    sp_graph_destroy(g);
    cm_buf_fini(&b);
    sp_sweep_result_fini(&r);
}

static void test_sp_sweep_run_rejects_bad_devices(void **state)
{
    (void)state;
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 0;
    sp_sweep_result r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_sweep_run(&o, &r, &err), CM_EINVAL);
    assert_string_equal(err.path, "/devices");
    assert_null(r.rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_advise_non_divisible_fires),
        cmocka_unit_test(test_sp_advise_custom_call_names_source_line),
        cmocka_unit_test(test_sp_advise_non_divisible_quiet_when_divisible),
        cmocka_unit_test(test_sp_advise_non_divisible_keeps_dividing_prefix),
        cmocka_unit_test(test_sp_advise_custom_call_fires),
        cmocka_unit_test(test_sp_advise_custom_call_quiet_with_rule),
        cmocka_unit_test(test_sp_advise_custom_call_gspmd_callbacks_rules),
        cmocka_unit_test(test_sp_advise_logical_axis_fires),
        cmocka_unit_test(test_sp_advise_logical_axis_quiet_when_matched),
        cmocka_unit_test(test_sp_advise_remat_fires),
        cmocka_unit_test(test_sp_advise_remat_quiet_without_conflict),
        cmocka_unit_test(test_sp_advise_mesh_mismatch_fires),
        cmocka_unit_test(test_sp_advise_mesh_mismatch_quiet_on_one_mesh),
        cmocka_unit_test(test_sp_advise_mesh_option),
        cmocka_unit_test(test_sp_advise_memory_fires_over_capacity),
        cmocka_unit_test(test_sp_advise_memory_quiet_under_capacity),
        cmocka_unit_test(test_sp_advise_sub_axis_output_fires),
        cmocka_unit_test(test_sp_advise_sub_axis_quiet_with_fix_applied),
        cmocka_unit_test(test_sp_advise_sub_axis_input_fires_with_arg_loc),
        cmocka_unit_test(test_sp_advise_sub_axis_quiet_when_axes_stay_whole),
        cmocka_unit_test(test_sp_advise_min_bytes_filters),
        cmocka_unit_test(test_sp_advise_collectives_flax_mlp),
        cmocka_unit_test(test_sp_advise_collectives_causes),
        cmocka_unit_test(test_sp_advise_json_parses),
        cmocka_unit_test(test_sp_advise_run_rejects_bad_input),
        cmocka_unit_test(test_sp_advise_run_oom),
        cmocka_unit_test(test_sp_advise_run_honours_the_pass),
        cmocka_unit_test(test_sp_advise_run_honours_the_rules_document),
        cmocka_unit_test(test_sp_sweep_run_covers_factorisations),
        cmocka_unit_test(test_sp_sweep_module_meshes),
        cmocka_unit_test(test_sp_sweep_logical_rules),
        cmocka_unit_test(test_sp_sweep_run_ranks_under_memory_limit),
        cmocka_unit_test(test_sp_sweep_run_matches_cost_of_graph),
        cmocka_unit_test(test_sp_sweep_run_rejects_bad_devices),
    };
    return cmocka_run_group_tests_name("sp_advise", tests, NULL, NULL);
}
