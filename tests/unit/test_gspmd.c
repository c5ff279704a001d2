/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/gspmd: HLO sharding text round trips (every form
 * XLA prints), normalisation, parse errors with their columns, the local
 * mesh analysis, the conversion to sdy shardings as XLA's import makes it
 * and back as its export does, the module import through the input loader
 * and POST /v1/plans with LINE:COL errors, and OOM loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "sp_diag.h"
#include "sp_gspmd.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_shard.h"
#include "tu_http.h"
#include "tu_oom.h"

#define N_OF(x) (sizeof(x) / sizeof((x)[0]))

static char *print_hlo(const char *text, cm_arena *a, cm_error *err)
{
    sp_hlo_sharding *s = NULL;
    if (sp_hlo_sharding_parse(text, strlen(text), a, &s, err) != CM_OK) {
        return NULL;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_hlo_sharding_print(s, &b);
    char *r = cm_arena_strndup(a, b.data, b.len);
    cm_buf_fini(&b);
    return r;
}

/* The text of m, NUL-terminated, in b (the caller finishes b). */
static void print_module(const sp_module *m, cm_buf *b)
{
    cm_buf_init(b);
    sp_print_opts po;
    memset(&po, 0, sizeof po);
    sp_mlir_print(m, &po, b);
    cm_buf_putc(b, '\0');
}

/* Each input and the text XLA prints for it. */
static const char *const round_trip[][2] = {
    {"{replicated}", "{replicated}"},
    {"{manual}", "{manual}"},
    {"{unknown}", "{unknown}"},
    {"{maximal device=3}", "{maximal device=3}"},
    {"{devices=[4,8]<=[8,4]T(1,0)}", "{devices=[4,8]<=[8,4]T(1,0)}"},
    {"{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    {"{devices=[4,4,2]<=[2,16]T(1,0) last_tile_dim_replicate}",
     "{devices=[4,4,2]<=[2,16]T(1,0) last_tile_dim_replicate}"},
    /* canonical iota: adjacent reshape dims merge, size-one dims go */
    {"{devices=[8]<=[2,4]}", "{devices=[8]<=[8]}"},
    {"{devices=[2,4]<=[1,2,4]T(0,2,1)}", "{devices=[2,4]<=[2,4]T(1,0)}"},
    /* explicit device lists stay as written */
    {"{devices=[2,2]0,2,1,3}", "{devices=[2,2]0,2,1,3}"},
    /* a replicated last dim of every device is {replicated}; of one, a tile */
    {"{devices=[1,8]<=[8] last_tile_dim_replicate}", "{replicated}"},
    {"{devices=[4,1]<=[4] last_tile_dim_replicate}", "{devices=[4]<=[4]}"},
    {"{devices=[1,1,8]<=[8] last_tile_dims={manual}}", "{manual}"},
    {"{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
     "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"},
    /* a single replicated subgroup is last_tile_dim_replicate */
    {"{devices=[2,4]<=[8] last_tile_dims={replicated}}",
     "{devices=[2,4]<=[8] last_tile_dim_replicate}"},
    /* metadata is skipped, tuples print index comments every fifth */
    {"{replicated metadata={op_name=\"jit(f)/x\" source_file=\"a.py\"}}", "{replicated}"},
    {"{{replicated}, {maximal device=0}}", "{{replicated}, {maximal device=0}}"},
    {"{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, {manual}}",
     "{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, /*index=5*/{manual}}"},
    {"{}", "{}"},
    /* V3 (named) text, as XLA's enable-hlo-sharding-v3 writes it */
    {"{mesh['a'=2,'b'=2], [{'a', ?}, {}], replicated={'b'}}",
     "{mesh['a'=2,'b'=2], [{'a', ?}, {}], replicated={'b'}}"},
    {"{mesh['x'=8,'y'=4], [{'x':(1)2, 'x':(4)2}, {}], unreduced={'y'}}",
     "{mesh['x'=8,'y'=4], [{'x':(1)2, 'x':(4)2}, {}], unreduced={'y'}}"},
    {"{mesh['i'=2,'j'=2], [{'i'}, {}], manual={'j'}}",
     "{mesh['i'=2,'j'=2], [{'i'}, {}], manual={'j'}}"},
    {"{mesh['x'=8,'y'=4], manual}", "{mesh['x'=8,'y'=4], manual}"},
    {"{mesh[], replicated}", "{mesh[], replicated}"},
    {"{mesh['a'=2,'b'=2], device_ids=(0,2,1,3), [{'a'}]}",
     "{mesh['a'=2,'b'=2], device_ids=(0,2,1,3), [{'a'}]}"},
    {"{single_device[device_id=5]}", "{maximal device=5}"},
    {"{{mesh['x'=8,'y'=4], [{'x'}, {}]}, {mesh['x'=8,'y'=4], replicated}}",
     "{{mesh['x'=8,'y'=4], [{'x'}, {}]}, {mesh['x'=8,'y'=4], replicated}}"},
};

static void test_sp_hlo_sharding_round_trips(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    for (size_t i = 0; i < N_OF(round_trip); i++) {
        cm_error err;
        cm_error_clear(&err);
        char *got = print_hlo(round_trip[i][0], &a, &err);
        if (got == NULL) {
            fail_msg("%s: %s at %s", round_trip[i][0], err.msg, err.path);
        }
        assert_string_equal(got, round_trip[i][1]);
        /* the printed text reads back to itself */
        char *again = print_hlo(got, &a, &err);
        assert_non_null(again);
        assert_string_equal(again, got);
    }
    cm_arena_fini(&a);
}

static void test_sp_hlo_sharding_explicit_list_is_iota(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    cm_error err;
    sp_hlo_sharding *s;
    const char *t = "{devices=[2,4]0,4,1,5,2,6,3,7}";
    assert_int_equal(sp_hlo_sharding_parse(t, strlen(t), &a, &s, &err), CM_OK);
    assert_int_equal(s->n_reshape, 2);
    assert_int_equal(s->reshape[0], 2);
    assert_int_equal(s->reshape[1], 4);
    assert_int_equal(s->perm[0], 1);
    assert_int_equal(s->perm[1], 0);
    for (int64_t i = 0; i < 8; i++) {
        assert_int_equal(sp_hlo_sharding_device(s, i), s->devices[i]);
    }
    cm_arena_fini(&a);
}

static const char *const bad[][2] = {
    {"replicated", "col 1"},
    {"{replicated", "col 1"},
    {"{devices=[2,2]<=[8]}", "col 17"},
    {"{devices=[2,2]<=[4]T(0,0)}", "col 21"},
    {"{devices=[2,2]0,1,2}", "col 20"},
    {"{devices=[2,2]0,1,2,2}", "col 21"},
    {"{maximal}", "col 1"},
    {"{replicated manual}", "col 1"},
    {"{devices=[2,2]<=[4] last_tile_dims={bogus}}", "col 37"},
    {"{devices=[0,2]<=[4]}", "col 10"},
    {"{devices=[99999999999,99999999999]<=[4]}", "col 10"},
    {"{replicated} x", "col 14"},
    {"{frobnicate}", "col 2"},
    {"{mesh['a'=2], [{'b'}]}", "col 1"},
    {"{mesh['a'=0], [{'a'}]}", "col 12"},
    {"{mesh['a'=2], [{'a'}], bogus}", "col 24"},
    {"{single_device[device=1]}", "col 16"},
};

static void test_sp_hlo_sharding_parse_rejects_bad_text(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    for (size_t i = 0; i < N_OF(bad); i++) {
        cm_error err;
        cm_error_clear(&err);
        sp_hlo_sharding *s = NULL;
        cm_status st = sp_hlo_sharding_parse(bad[i][0], strlen(bad[i][0]), &a, &s, &err);
        if (st != CM_EINVAL) {
            fail_msg("%s: accepted", bad[i][0]);
        }
        assert_int_equal(err.code, CM_EINVAL);
        if (strcmp(err.path, bad[i][1]) != 0) {
            fail_msg("%s: path %s, want %s (%s)", bad[i][0], err.path, bad[i][1], err.msg);
        }
    }
    cm_arena_fini(&a);
}

static void test_sp_hlo_local_mesh_decomposes_iota(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    cm_error err;
    sp_hlo_sharding *s;
    /* XLA's own example: [6,35]<=[7,10,3]T(2,1,0) has the local mesh 7,2,5,3 */
    const char *t = "{devices=[6,35]<=[7,10,3]T(2,1,0)}";
    assert_int_equal(sp_hlo_sharding_parse(t, strlen(t), &a, &s, &err), CM_OK);
    int64_t sizes[SP_HLO_MAX_DIMS];
    uint32_t n = 0;
    assert_int_equal(sp_hlo_local_mesh(s, sizes, &n, &err), CM_OK);
    assert_int_equal(n, 4);
    assert_int_equal(sizes[0], 7);
    assert_int_equal(sizes[1], 2);
    assert_int_equal(sizes[2], 5);
    assert_int_equal(sizes[3], 3);
    /* the common factor sequence of two shapes */
    int64_t x[] = {2, 4, 4}, y[] = {8, 4}, out[8];
    assert_int_equal(sp_hlo_common_factors(x, 3, y, 2, out, 8), 3);
    int64_t p[] = {3, 2}, q[] = {2, 3};
    assert_int_equal(sp_hlo_common_factors(p, 2, q, 2, out, 8), 0);
    cm_arena_fini(&a);
}

static char *to_sdy_text(const char *hlo, const sp_mesh *mesh, uint32_t rank, cm_arena *a)
{
    cm_error err;
    cm_error_clear(&err);
    sp_hlo_sharding *s;
    sp_sharding *sh;
    if (sp_hlo_sharding_parse(hlo, strlen(hlo), a, &s, &err) != CM_OK ||
        sp_hlo_to_sdy(s, mesh, "mesh", "single_device_0", rank, false, a, &sh, &err) != CM_OK) {
        return NULL;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sharding_print(sh, &b);
    char *r = cm_arena_strndup(a, b.data, b.len);
    cm_buf_fini(&b);
    return r;
}

static void test_sp_hlo_to_sdy_and_back(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh_axis axes[] = {{"_axis_0", 2}, {"_axis_1", 4}, {"_axis_2", 4}};
    sp_mesh mesh = {axes, 3, NULL, 0};
    static const char *const cases[][2] = {
        {"{devices=[4,8]<=[8,4]T(1,0)}", "<@mesh, [{\"_axis_2\"}, {\"_axis_0\", \"_axis_1\"}]>"},
        {"{devices=[1,2,16]<=[32] last_tile_dim_replicate}", "<@mesh, [{}, {\"_axis_0\"}]>"},
        {"{devices=[8,1,4]<=[2,4,4]T(1,0,2) last_tile_dim_replicate}",
         "<@mesh, [{\"_axis_1\", \"_axis_0\"}, {}]>"},
        {"{replicated}", "<@mesh, [{}, {}]>"},
        {"{unknown}", "<@mesh, [{?}, {?}]>"},
        {"{maximal device=0}", "<@single_device_0, []>"},
        {"{devices=[2,4,4]<=[32] last_tile_dims={unreduced}}",
         "<@mesh, [{\"_axis_0\"}, {\"_axis_1\"}], unreduced={\"_axis_2\"}>"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        char *got = to_sdy_text(cases[i][0], &mesh, 2, &a);
        assert_non_null(got);
        assert_string_equal(got, cases[i][1]);
    }
    /* a sub-axis: 2 of _axis_1's 4 */
    char *sub = to_sdy_text("{devices=[4,8]<=[32]}", &mesh, 2, &a);
    assert_non_null(sub);
    assert_string_equal(
        sub, "<@mesh, [{\"_axis_0\", \"_axis_1\":(1)2}, {\"_axis_1\":(2)2, \"_axis_2\"}]>");
    /* back: the export of sdy shardings as HLO text */
    static const char *const back[][2] = {
        {"<@mesh, [{\"_axis_2\"}, {\"_axis_0\", \"_axis_1\"}]>", "{devices=[4,8]<=[8,4]T(1,0)}"},
        {"<@mesh, [{}, {\"_axis_0\"}]>", "{devices=[1,2,16]<=[32] last_tile_dim_replicate}"},
        {"<@mesh, [{}, {}]>", "{replicated}"},
        {"<@mesh, [{\"_axis_0\", \"_axis_1\":(1)2}, {\"_axis_1\":(2)2, \"_axis_2\"}]>",
         "{devices=[4,8]<=[32]}"},
        {"<@mesh, [{\"_axis_1\"}, {}], replicated={\"_axis_0\"}>",
         "{devices=[4,1,8]<=[2,4,4]T(1,0,2) last_tile_dim_replicate}"},
    };
    for (size_t i = 0; i < N_OF(back); i++) {
        cm_error err;
        cm_error_clear(&err);
        sp_sharding *sh;
        sp_hlo_sharding *h;
        assert_int_equal(sp_sharding_parse(back[i][0], strlen(back[i][0]), &a, &sh, NULL, &err),
                         CM_OK);
        assert_int_equal(sp_sharding_verify(sh, &mesh, sh->rank, NULL, &err), CM_OK);
        assert_int_equal(sp_hlo_from_sdy(sh, &mesh, NULL, 0, &a, &h, &err), CM_OK);
        cm_buf b;
        cm_buf_init(&b);
        sp_hlo_sharding_print(h, &b);
        cm_buf_putc(&b, '\0');
        assert_string_equal(b.data, back[i][1]);
        cm_buf_fini(&b);
    }
    /* manual axes: all of them is {manual} */
    const char *manual[] = {"_axis_0", "_axis_1", "_axis_2"};
    sp_sharding *open = sp_sharding_open(&a, "mesh", 2);
    sp_hlo_sharding *hm;
    cm_error err;
    assert_int_equal(sp_hlo_from_sdy(open, &mesh, manual, 3, &a, &hm, &err), CM_OK);
    assert_int_equal(hm->kind, SP_HLO_MANUAL);
    cm_arena_fini(&a);
}

static const char gspmd_module[] =
    "func.func public @main(%arg0: tensor<8x16xf32> {mhlo.sharding = \"{devices=[2,1,4]<=[8] "
    "last_tile_dim_replicate}\"},\n"
    "    %arg1: tensor<16x32xf32> {mhlo.sharding = \"{devices=[1,4,2]<=[2,4]T(1,0) "
    "last_tile_dim_replicate}\"}) -> tensor<8x32xf32> {\n"
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
    "(tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>\n"
    "  %1 = stablehlo.custom_call @Sharding(%0) {backend_config = \"unspecified_dims=[1]\", "
    "mhlo.sharding = \"{devices=[2,1,4]<=[8] last_tile_dim_replicate}\"} : (tensor<8x32xf32>) "
    "-> tensor<8x32xf32>\n"
    "  return %1 : tensor<8x32xf32>\n"
    "}\n";

static void test_sp_input_reads_gspmd(void **state)
{
    (void)state;
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(gspmd_module, strlen(gspmd_module), NULL, &in, &err), CM_OK);
    const sp_mesh *mesh = sp_module_mesh(in.m, "mesh");
    assert_non_null(mesh);
    assert_int_equal(mesh->n_axes, 2);
    assert_int_equal(mesh->axes[0].size, 2);
    assert_int_equal(mesh->axes[1].size, 4);
    uint32_t f = sp_module_func(in.m, "main");
    uint32_t arg1 = in.m->blocks[in.m->ops[f].regions[0].blocks[0]].first_arg + 1;
    const sp_sharding *s = sp_value_sharding(in.m, arg1);
    assert_non_null(s);
    cm_buf b;
    cm_buf_init(&b);
    sp_sharding_print(s, &b);
    cm_buf_putc(&b, '\0');
    assert_string_equal(b.data, "<@mesh, [{}, {\"_axis_1\"}]>");
    cm_buf_fini(&b);
    /* the @Sharding call is a constraint now, its unspecified dim open */
    bool constraint = false;
    for (uint32_t i = 0; i < in.m->n_ops; i++) {
        constraint = constraint || strcmp(in.m->ops[i].name, "sdy.sharding_constraint") == 0;
    }
    assert_true(constraint);
    sp_input_fini(&in);
}

static void test_sp_input_gspmd_error_has_line_col(void **state)
{
    (void)state;
    static const char text[] =
        "func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = stablehlo.abs %arg0 {mhlo.sharding = \"{devices=[2,3]<=[6]}\"} : tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n"
        "}\n";
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(text, strlen(text), NULL, &in, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "mhlo.sharding"));
    /* a sharding that does not parse names its column inside the string */
    static const char text2[] =
        "func.func @f(%arg0: tensor<8xf32> {mhlo.sharding = \"{devices=[2]<=[2]T(1)}\"}) -> "
        "tensor<8xf32> {\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n";
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(text2, strlen(text2), NULL, &in, &err), CM_EINVAL);
    assert_string_equal(err.path, "1:1");
    assert_non_null(strstr(err.msg, "argument 0 of @f"));
    assert_non_null(strstr(err.msg, "at col"));
}

typedef struct oom_ctx {
    sp_module *m;
    const char *text;
    cm_status (*fn)(sp_module *m, cm_error *err);
} oom_ctx;

static void oom_setup(void *vctx)
{
    oom_ctx *c = vctx;
    cm_error err;
    assert_int_equal(sp_mlir_read(c->text, strlen(c->text), 0, &c->m, &err), CM_OK);
}

static cm_status oom_run(void *vctx)
{
    oom_ctx *c = vctx;
    cm_error err;
    cm_error_clear(&err);
    return c->fn(c->m, &err);
}

static void oom_done(void *vctx, cm_status st)
{
    oom_ctx *c = vctx;
    (void)st;
    sp_module_destroy(c->m);
    c->m = NULL;
}

static const char oom_shard_map[] =
    "func.func @main(%arg0: tensor<8x8xf32> {mhlo.sharding = \"{devices=[8,1]<=[8]}\"}) -> "
    "tensor<8x8xf32> {\n"
    "  %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = \"{devices=[8,1]<=[8]}\"} : "
    "(tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = \"{manual}\"} : "
    "(tensor<8x8xf32>) -> tensor<1x8xf32>\n"
    "  %2 = call @shmap_body(%1) : (tensor<1x8xf32>) -> tensor<1x8xf32>\n"
    "  %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = \"{manual}\"} : "
    "(tensor<1x8xf32>) -> tensor<1x8xf32>\n"
    "  %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "
    "\"{devices=[8,1]<=[8]}\"} : (tensor<1x8xf32>) -> tensor<8x8xf32>\n"
    "  return %4 : tensor<8x8xf32>\n"
    "}\n"
    "func.func @shmap_body(%arg0: tensor<1x8xf32>) -> tensor<1x8xf32> {\n"
    "  %0 = stablehlo.abs %arg0 : tensor<1x8xf32>\n"
    "  return %0 : tensor<1x8xf32>\n"
    "}\n";

static const char oom_round_trip[] =
    "module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "
    "\"{mesh = #sdy.mesh<[\\22a\\22=4]>}\"}} {\n"
    "  func.func @main(%arg0: tensor<8x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "
    "\"#sdy.sharding<@mesh, [{\\22a\\22}, {}]>\"}}) -> tensor<8x8xf32> {\n"
    "    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) "
    "{mhlo.frontend_attributes = {xla.sdy.in_shardings = "
    "\"#sdy.sharding_per_value<[<@mesh, [{\\22a\\22}, {}]>]>\", xla.sdy.manual_axes = "
    "\"#sdy<manual_axes{\\22a\\22}>\"}} : (tensor<8x8xf32>) -> tensor<2x8xf32>\n"
    "    %1 = call @xla.sdy.manual_computation_body(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>\n"
    "    %2 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%1) "
    "{mhlo.frontend_attributes = {xla.sdy.manual_axes = \"#sdy<manual_axes{\\22a\\22}>\", "
    "xla.sdy.out_shardings = \"#sdy.sharding_per_value<[<@mesh, [{\\22a\\22}, {}]>]>\"}} "
    ": (tensor<2x8xf32>) -> tensor<8x8xf32>\n"
    "    %3 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%2) {mhlo.frontend_attributes = "
    "{xla.sdy.sharding = \"#sdy.sharding_per_value<[<@mesh, [{\\22a\\22}, {}]>]>\"}} : "
    "(tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "    return %3 : tensor<8x8xf32>\n"
    "  }\n"
    "  func.func @xla.sdy.manual_computation_body(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32> {\n"
    "    return %arg0 : tensor<2x8xf32>\n"
    "  }\n"
    "}\n";

static const char oom_v3[] =
    "func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = \"{mesh['d'=2,'m'=4], [{'d'}, "
    "{'m', ?}], replicated={}}\"}, %arg1: tensor<4xf32> {mhlo.sharding = "
    "\"{single_device[device_id=3]}\"}) -> tensor<8x16xf32> {\n"
    "  return %arg0 : tensor<8x16xf32>\n"
    "}\n";

static cm_status round_trip_then_back(sp_module *m, cm_error *err)
{
    cm_status st = sp_gspmd_round_trip_import(m, false, NULL, err);
    if (st == CM_OK) {
        st = sp_gspmd_shard_map_export(m, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_clone_manual_computation_calls(m, err);
    }
    return st;
}

static cm_status v3_import_export(sp_module *m, cm_error *err)
{
    cm_status st = sp_gspmd_import_shardings(m, err);
    sp_gspmd_export_opts o = {true, true, false};
    return st == CM_OK ? sp_gspmd_export(m, &o, err) : st;
}

static cm_status user_annotations(sp_module *m, cm_error *err)
{
    return sp_gspmd_import_user_annotations(m, err);
}

/* A module for XLA's stablehlo import pipeline: a custom call on a
 * stablehlo.tuple and on a tuple argument, with a tuple result read by
 * get_tuple_element and returned whole, and a sharding group call. */
static const char pipeline_module[] =
    "func.func @f(%arg0: tensor<8x8xf32> {mhlo.sharding = \"{devices=[2,1,2]<=[4] "
    "last_tile_dim_replicate}\"}, %t: tuple<tensor<8x8xf32>, tensor<4xf32>>)"
    " -> (tuple<tensor<8x8xf32>, tensor<4xf32>>, tensor<4xf32>) {\n"
    "  %0 = stablehlo.tuple %arg0, %arg0 : tuple<tensor<8x8xf32>, tensor<8x8xf32>>\n"
    "  %1 = stablehlo.custom_call @foo(%0) : (tuple<tensor<8x8xf32>, tensor<8x8xf32>>)"
    " -> tensor<8x8xf32>\n"
    "  %2 = stablehlo.custom_call @bar(%t, %1) : (tuple<tensor<8x8xf32>, tensor<4xf32>>,"
    " tensor<8x8xf32>) -> tuple<tensor<8x8xf32>, tensor<4xf32>>\n"
    "  %3 = stablehlo.get_tuple_element %2[1] : (tuple<tensor<8x8xf32>, tensor<4xf32>>)"
    " -> tensor<4xf32>\n"
    "  %4 = stablehlo.custom_call @xla.sdy.ShardingGroup(%1) {has_side_effect = true,"
    " mhlo.frontend_attributes = {xla.sdy.sharding_group_id = \"3 : i64\"}}"
    " : (tensor<8x8xf32>) -> tuple<>\n"
    "  %5 = stablehlo.constant dense<1.0> : tensor<f32>\n"
    "  return %2, %3 : tuple<tensor<8x8xf32>, tensor<4xf32>>, tensor<4xf32>\n"
    "}\n";

/* The pipeline flattens the tuples of custom calls (a stablehlo.tuple
 * operand becomes its elements, another tuple operand is read element by
 * element, a tuple result becomes one result per element), names the mesh
 * axes axis_N, imports the sharding group and the constants. */
static void test_sp_gspmd_stablehlo_import_pipeline_flattens_tuples(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(pipeline_module, strlen(pipeline_module), 0, &m, &err), CM_OK);
    assert_int_equal(sp_gspmd_stablehlo_import_pipeline(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "sdy.mesh @mesh = <[\"axis_0\"=2, \"axis_1\"=2]>"));
    assert_non_null(strstr(b.data, "[{\"axis_0\"}, {}]"));
    assert_non_null(strstr(b.data, "%0 = stablehlo.custom_call @foo(%arg0, %arg0) : "
                                   "(tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>"));
    assert_null(strstr(b.data, "stablehlo.tuple %arg0"));
    assert_non_null(strstr(b.data, "stablehlo.get_tuple_element %arg1[0]"));
    assert_non_null(strstr(b.data, "stablehlo.get_tuple_element %arg1[1]"));
    assert_non_null(strstr(b.data, "%3:2 = stablehlo.custom_call @bar(%1, %2, %0)"));
    assert_non_null(strstr(b.data, "%4 = stablehlo.tuple %3#0, %3#1"));
    assert_non_null(strstr(b.data, "return %4, %3#1"));
    assert_non_null(strstr(b.data, "sdy.sharding_group %0 group_id=3"));
    assert_non_null(strstr(b.data, "sdy.constant dense<1.000000e+00>"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* Nested tuples: a stablehlo.tuple of a stablehlo.tuple, a nested tuple
 * argument, and a nested tuple result read through chained
 * get_tuple_element ops with its inner tuple also returned whole. */
static const char nested_tuple_module[] =
    "func.func @f(%a: tensor<2xf32>, %b: tensor<4xf32>,"
    " %t: tuple<tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>>)"
    " -> (tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>) {\n"
    "  %0 = stablehlo.tuple %a, %b : tuple<tensor<2xf32>, tensor<4xf32>>\n"
    "  %1 = stablehlo.tuple %0, %b : tuple<tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>>\n"
    "  %2 = stablehlo.custom_call @foo(%1, %t) : (tuple<tuple<tensor<2xf32>, tensor<4xf32>>,"
    " tensor<4xf32>>, tuple<tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>>)"
    " -> tuple<tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>>\n"
    "  %3 = stablehlo.get_tuple_element %2[0] : (tuple<tuple<tensor<2xf32>, tensor<4xf32>>,"
    " tensor<4xf32>>) -> tuple<tensor<2xf32>, tensor<4xf32>>\n"
    "  %4 = stablehlo.get_tuple_element %3[1] : (tuple<tensor<2xf32>, tensor<4xf32>>)"
    " -> tensor<4xf32>\n"
    "  %5 = stablehlo.add %4, %b : tensor<4xf32>\n"
    "  return %3, %5 : tuple<tensor<2xf32>, tensor<4xf32>>, tensor<4xf32>\n"
    "}\n";

/* Nested tuples are opened all the way down: stablehlo.tuple operands give
 * their operands' leaves, a nested tuple argument is read with chained
 * get_tuple_element ops, the result has one value per leaf, a chained
 * get_tuple_element reads its leaf and the inner tuple used whole is
 * rebuilt. */
static void test_sp_gspmd_stablehlo_import_pipeline_flattens_nested_tuples(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(nested_tuple_module, strlen(nested_tuple_module), 0, &m, &err),
                     CM_OK);
    assert_int_equal(sp_gspmd_stablehlo_import_pipeline(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "%0 = stablehlo.get_tuple_element %arg2[0]"));
    assert_non_null(strstr(b.data, "%1 = stablehlo.get_tuple_element %0[0]"));
    assert_non_null(strstr(b.data, "%2 = stablehlo.get_tuple_element %0[1]"));
    assert_non_null(strstr(b.data, "%3 = stablehlo.get_tuple_element %arg2[1]"));
    assert_non_null(
        strstr(b.data, "%4:3 = stablehlo.custom_call @foo(%arg0, %arg1, %arg1, %1, %2, %3)"));
    assert_non_null(strstr(b.data, "-> (tensor<2xf32>, tensor<4xf32>, tensor<4xf32>)"));
    assert_non_null(strstr(b.data, "%5 = stablehlo.tuple %4#0, %4#1"));
    assert_non_null(strstr(b.data, "%6 = stablehlo.add %4#1, %arg1"));
    assert_non_null(strstr(b.data, "return %5, %6"));
    assert_null(strstr(b.data, "stablehlo.tuple %arg0"));
    assert_null(strstr(b.data, "get_tuple_element %4"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* Tuples nested past the flattener's depth limit are refused at the call,
 * not followed without bound. */
static void test_sp_gspmd_stablehlo_import_pipeline_rejects_deep_tuples(void **state)
{
    (void)state;
    char ty[1024];
    size_t n = 0;
    for (int i = 0; i < 40; i++) {
        memcpy(ty + n, "tuple<", 6);
        n += 6;
    }
    memcpy(ty + n, "tensor<f32>", 11);
    n += 11;
    memset(ty + n, '>', 40);
    ty[n + 40] = '\0';
    char text[4096];
    snprintf(text, sizeof text,
             "func.func @f(%%a: tensor<f32>) -> tensor<f32> {\n"
             "  %%0 = stablehlo.custom_call @foo(%%a) : (tensor<f32>) -> %s\n"
             "  return %%a : tensor<f32>\n}\n",
             ty);
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    cm_status st = sp_gspmd_stablehlo_import_pipeline(m, &err);
    sp_module_destroy(m);
    assert_int_equal(st, CM_EINVAL);
    assert_non_null(strstr(err.msg, "nested too deep"));
    assert_string_equal(err.path, "2:3");
}

/* A module for XLA's stablehlo export pipeline: a manual computation with
 * a reshard in its body, and a collective outside. */
static const char export_module[] =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\n"
    "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"c\"}]>})"
    " -> tensor<8xf32> {\n"
    "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"a\", \"b\"}]>]"
    " out_shardings=[<@mesh, [{\"a\", \"b\"}]>] manual_axes={\"a\"}"
    " (%arg1: tensor<4xf32>) {\n"
    "    %1 = sdy.reshard %arg1 <@mesh, [{\"c\"}]> : tensor<4xf32>\n"
    "    %2 = stablehlo.multiply %1, %1 : tensor<4xf32>\n"
    "    sdy.return %2 : tensor<4xf32>\n"
    "  } : (tensor<8xf32>) -> tensor<8xf32>\n"
    "  %3 = sdy.all_gather [{\"a\", \"b\"}] %0 out_sharding=<@mesh, [{}]> : tensor<8xf32>\n"
    "  return %3 : tensor<8xf32>\n"
    "}\n";

static cm_status export_pipeline_v2(sp_module *m, cm_error *err)
{
    sp_gspmd_export_opts o = {false, false, false};
    return sp_gspmd_stablehlo_export_pipeline(m, &o, err);
}

/* Host callbacks for the export pipeline: one whose single result is used,
 * one whose result is unused, and a custom call that is no callback. */
static const char callback_module[] =
    "sdy.mesh @empty = <[]>\n"
    "func.func @f(%arg0: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {\n"
    "  %0 = stablehlo.custom_call @xla_python_cpu_callback(%arg0) {sdy.sharding ="
    " #sdy.sharding_per_value<[<@empty, [{}]>]>} : (tensor<2xf64>) -> tensor<2xf64>\n"
    "  %1 = stablehlo.custom_call @xla_ffi_python_gpu_callback(%arg0)"
    " : (tensor<2xf64>) -> tensor<2xf64>\n"
    "  %2 = stablehlo.custom_call @foo(%0) : (tensor<2xf64>) -> tensor<2xf64>\n"
    "  return %0, %2 : tensor<2xf64>, tensor<2xf64>\n"
    "}\n";

/* A used host callback with one result returns a one-element tuple read by
 * get_tuple_element [0], which carries the callback's sharding; an unused
 * callback and other custom calls keep their result. */
static void test_sp_gspmd_stablehlo_export_pipeline_tuples_callback_results(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(callback_module, strlen(callback_module), 0, &m, &err), CM_OK);
    assert_int_equal(export_pipeline_v2(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "mhlo.sharding = \"{replicated}\"} : (tensor<2xf64>) -> "
                                   "tuple<tensor<2xf64>>"));
    assert_non_null(strstr(b.data, "%1 = stablehlo.get_tuple_element %0[0] {mhlo.sharding = "
                                   "\"{replicated}\"} : (tuple<tensor<2xf64>>) -> tensor<2xf64>"));
    assert_non_null(strstr(b.data, "@xla_ffi_python_gpu_callback(%arg0) : (tensor<2xf64>) -> "
                                   "tensor<2xf64>"));
    assert_non_null(strstr(b.data, "@foo(%1) : (tensor<2xf64>) -> tensor<2xf64>"));
    assert_non_null(strstr(b.data, "return %1, %3"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* The export pipeline writes the manual computation as XLA's partitioner
 * pattern, with the manual axes as a manual subgroup inside, and reshards
 * and collectives as mhlo.copy; nothing of sdy is left. */
static void test_sp_gspmd_stablehlo_export_pipeline_manual_computation(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(export_module, strlen(export_module), 0, &m, &err), CM_OK);
    assert_int_equal(export_pipeline_v2(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "%0 = mhlo.copy %arg0 {mhlo.sharding = \"{devices=[4,2]<=[8] "
                                   "last_tile_dim_replicate}\"}"));
    assert_non_null(strstr(b.data, "stablehlo.custom_call @SPMDFullToShardShape(%0) "
                                   "{mhlo.sharding = \"{devices=[2,2,2]<=[2,2,2]T(1,0,2) "
                                   "last_tile_dims={manual, replicated}}\"}"));
    assert_non_null(strstr(b.data, "call @xla.sdy.inlinable_manual_computation_body(%1)"));
    assert_non_null(strstr(b.data, "stablehlo.custom_call @SPMDShardToFullShape(%3)"));
    assert_non_null(strstr(b.data, "func.func private @xla.sdy.inlinable_manual_computation_body("
                                   "%arg0: tensor<4xf32> {mhlo.sharding = \"{devices=[2,2,2]<=[2,2,2]"
                                   "T(1,0,2) last_tile_dims={manual, replicated}}\"}"));
    /* the reshard in the body: c on the local shard, a manual */
    assert_non_null(strstr(b.data, "mhlo.copy %arg0 {mhlo.sharding = \"{devices=[2,2,2]<=[4,2]"
                                   "T(1,0) last_tile_dims={manual, replicated}}\"}"));
    /* an op of the body without a sharding gets a closed replicated one */
    assert_non_null(strstr(b.data, "stablehlo.multiply %0, %0 {mhlo.sharding = \"{devices=[1,2,4]"
                                   "<=[8] last_tile_dims={manual, replicated}}\"}"));
    assert_non_null(strstr(b.data, "= mhlo.copy %4 {mhlo.sharding = \"{replicated}\"}"));
    assert_null(strstr(b.data, "= sdy."));
    assert_null(strstr(b.data, "sdy.mesh"));
    assert_null(strstr(b.data, "sdy.sharding"));
    assert_null(strstr(b.data, "xla.sdy.manual_axes"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* An sdy.all_reduce inside a manual computation, on a value without
 * unreduced axes, gives way to its operand as XLA's export-ops has it (its
 * partitioner reduces again from the shardings); a reduce_scatter of
 * unreduced axes, whose manual form is not done here, is an error at its
 * line, not a dropped op. */
static void test_sp_gspmd_stablehlo_export_pipeline_leftover_reductions(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"a\"=2]>\n"
        "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"a\"}]>]"
        " out_shardings=[<@mesh, [{}]>] manual_axes={\"a\"} (%arg1: tensor<4xf32>) {\n"
        "    %1 = sdy.all_reduce {\"a\"} %arg1 out_sharding=<@mesh, [{}]> : tensor<4xf32>\n"
        "    sdy.return %1 : tensor<4xf32>\n"
        "  } : (tensor<8xf32>) -> tensor<4xf32>\n"
        "  return %arg0 : tensor<8xf32>\n"
        "}\n";
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    assert_int_equal(export_pipeline_v2(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_null(strstr(b.data, "all_reduce"));
    assert_non_null(strstr(b.data, "return %arg0 : tensor<4xf32>"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
    static const char scatter[] =
        "sdy.mesh @mesh = <[\"a\"=2]>\n"
        "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}],"
        " unreduced={\"a\"}>}) -> tensor<8xf32> {\n"
        "  %0 = sdy.reduce_scatter [{\"a\"}] %arg0 out_sharding=<@mesh, [{\"a\"}]> : "
        "tensor<8xf32>\n"
        "  return %0 : tensor<8xf32>\n"
        "}\n";
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(scatter, strlen(scatter), 0, &m, &err), CM_OK);
    assert_int_equal(export_pipeline_v2(m, &err), CM_EINVAL);
    assert_string_equal(err.path, "3:3");
    assert_non_null(strstr(err.msg, "unreduced"));
    sp_module_destroy(m);
}

/* XLA's export of manual reduction collectives and of reshards next to a
 * maximal sharding: an all_reduce of a value with unreduced axes becomes a
 * fully manual computation around a stablehlo.all_reduce (channel after the
 * module's largest, device-id replica groups, a summing body); a reshard
 * from nothing to a maximal sharding and from maximal to replicated give
 * way to their operand, one to another device stays a copy; a sharding
 * whose only split is unreduced prints as {unreduced}. */
static const char unreduced_export_module[] =
    "sdy.mesh @mesh = <[\"i\"=2, \"j\"=2]>\n"
    "sdy.mesh @max0 = <[], device_ids=[0]>\n"
    "sdy.mesh @max1 = <[], device_ids=[1]>\n"
    "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"j\"}, {}],"
    " unreduced={\"i\"}>}, %arg1: tensor<4xf32>) -> (tensor<8x8xf32>, tensor<4xf32>,"
    " tensor<4xf32>, tensor<4xf32>) {\n"
    "  %0 = sdy.all_reduce {\"i\"} %arg0 out_sharding=<@mesh, [{\"j\"}, {}]> : tensor<8x8xf32>\n"
    "  %1 = stablehlo.custom_call @foo(%arg1) {channel_handle ="
    " #stablehlo.channel_handle<handle = 6, type = 2>} : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  %2 = sdy.reshard %arg1 <@max0, []> : tensor<4xf32>\n"
    "  %3 = stablehlo.negate %2 {sdy.sharding = #sdy.sharding_per_value<[<@max0, []>]>}"
    " : tensor<4xf32>\n"
    "  %4 = sdy.reshard %3 <@mesh, [{}]> : tensor<4xf32>\n"
    "  %5 = sdy.reshard %3 <@max1, []> : tensor<4xf32>\n"
    "  %6 = stablehlo.abs %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}],"
    " unreduced={\"i\", \"j\"}>]>} : tensor<4xf32>\n"
    "  return %0, %4, %5, %6 : tensor<8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>\n"
    "}\n";

static void test_sp_gspmd_stablehlo_export_pipeline_unreduced_and_maximal(void **state)
{
    (void)state;
    const char *text = unreduced_export_module;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    assert_int_equal(export_pipeline_v2(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    static const char *const want[] = {
        "@SPMDFullToShardShape(%0) {mhlo.sharding = \"{manual}\"} : (tensor<8x8xf32>) -> "
        "tensor<4x8xf32>",
        "\"stablehlo.all_reduce\"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 7, "
        "type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, "
        "use_global_device_ids}>",
        "stablehlo.add %arg1, %arg2 {mhlo.sharding = \"{manual}\"} : tensor<f32>\n"
        "      stablehlo.return %1 : tensor<f32>",
        "stablehlo.negate %arg1 {mhlo.sharding = \"{maximal device=0}\"}",
        "mhlo.copy %6 {mhlo.sharding = \"{maximal device=1}\"}",
        "stablehlo.abs %arg1 {mhlo.sharding = \"{unreduced "
        "metadata={op_type=\\22sdy::reduction_op\\22"
        " op_name=\\22SUM\\22}}\"}",
        "return %4, %6, %7, %8",
    };
    for (size_t i = 0; i < N_OF(want); i++) {
        if (strstr(b.data, want[i]) == NULL) {
            fail_msg("missing %s in\n%s", want[i], b.data);
        }
    }
    assert_null(strstr(b.data, "{replicated}\"} : tensor<4xf32>"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* A module for the sdy round trip: a mesh, argument, op and result
 * shardings, a constraint, a sharding group, a propagation barrier, a rule
 * and a while reading a constant from outside. */
static const char rt_module[] =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
    "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>})"
    " -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"b\"}]>}) {\n"
    "  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
    "[{\"b\"}, {}]>]>} : tensor<8x8xf32>\n"
    "  %1 = sdy.sharding_constraint %0 <@mesh, [{\"a\", ?}, {?}]> : tensor<8x8xf32>\n"
    "  sdy.sharding_group %1 group_id=4 : tensor<8x8xf32>\n"
    "  %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD : tensor<8x8xf32>\n"
    "  %3 = stablehlo.custom_call @foo(%2) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])"
    "->([i, j]) {i=8, j=8}>} : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  %c = sdy.constant dense<3> : tensor<i32>\n"
    "  %c0 = sdy.constant dense<0> : tensor<i32>\n"
    "  %4:2 = stablehlo.while(%iterArg = %3, %iterArg_0 = %c0) : tensor<8x8xf32>, tensor<i32>\n"
    "    cond {\n"
    "    %5 = stablehlo.compare LT, %iterArg_0, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
    "    stablehlo.return %5 : tensor<i1>\n"
    "  } do {\n"
    "    stablehlo.return %iterArg, %iterArg_0 : tensor<8x8xf32>, tensor<i32>\n"
    "  }\n"
    "  return %4#0 : tensor<8x8xf32>\n"
    "}\n";

static cm_status rt_testing(sp_module *m, cm_error *err)
{
    cm_status st = sp_gspmd_round_trip_export_pipeline(m, false, false, err);
    if (st == CM_OK) {
        st = sp_gspmd_hlo_round_trip(m, err);
    }
    return st == CM_OK ? sp_gspmd_round_trip_import(m, false, NULL, err) : st;
}

/* The export saves every sdy attribute as escaped frontend attribute text
 * next to its mhlo.sharding and the sdy ops as custom calls; through the
 * HLO model and the import the module's shardings and ops come back. */
static void test_sp_gspmd_round_trip_export_then_import(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    assert_int_equal(sp_mlir_read(rt_module, strlen(rt_module), 0, &m, &err), CM_OK);
    assert_int_equal(sp_gspmd_round_trip_export_pipeline(m, false, false, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    static const char *const want[] = {
        "xla.sdy.meshes = \"{mesh = #sdy.mesh<[\\\\\\22a\\\\\\22=2, \\\\\\22b\\\\\\22=2]>}\"",
        "{mhlo.frontend_attributes = {xla.sdy.sharding = \"#sdy.sharding<@mesh, "
        "[{\\\\\\22a\\\\\\22}, {}]>\"}, mhlo.sharding = \"{devices=[2,1,2]<=[4] "
        "last_tile_dim_replicate}\"}",
        "stablehlo.custom_call @Sharding(%0)",
        "@xla.sdy.ShardingGroup(%1) {has_side_effect = true, mhlo.frontend_attributes = "
        "{xla.sdy.sharding_group_id = \"4 : i64\"}}",
        "@xla.sdy.PropagationBarrier(%1) {mhlo.frontend_attributes = "
        "{xla.sdy.allowed_direction = \"1 : i32\"}}",
        "xla.sdy.sharding_rule = \"#sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=8}>\"",
        "@xla.sdy.FuncResultSharding(%4#0) {has_side_effect = true",
    };
    for (size_t i = 0; i < N_OF(want); i++) {
        if (strstr(b.data, want[i]) == NULL) {
            fail_msg("missing %s in\n%s", want[i], b.data);
        }
    }
    assert_null(strstr(b.data, "sdy.mesh @"));
    assert_null(strstr(b.data, "sdy.sharding = #"));
    cm_buf_fini(&b);
    assert_int_equal(sp_gspmd_hlo_round_trip(m, &err), CM_OK);
    assert_int_equal(sp_gspmd_round_trip_import(m, false, NULL, &err), CM_OK);
    print_module(m, &b);
    static const char *const back[] = {
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>",
        "%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>}) -> "
        "(tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"b\"}]>})",
        "sdy.sharding_constraint %0 <@mesh, [{\"a\", ?}, {?}]>",
        "sdy.sharding_group %1 group_id=4",
        "sdy.propagation_barrier %1 allowed_direction=FORWARD",
        /* HLO gives the custom call a backend config */
        "{backend_config = \"\", sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) "
        "{i=8, j=8}>}",
        /* the constant read in the loop's condition sinks into it */
        "cond {\n      %c_1 = stablehlo.constant dense<3> : tensor<i32>\n      %5 = "
        "stablehlo.compare",
    };
    for (size_t i = 0; i < N_OF(back); i++) {
        if (strstr(b.data, back[i]) == NULL) {
            fail_msg("missing %s in\n%s", back[i], b.data);
        }
    }
    /* the op's own sharding is not one the import restores */
    assert_null(strstr(b.data, "xla.sdy"));
    assert_null(strstr(b.data, "mhlo.sharding"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}


/* Two meshes over the same 8 devices in the default order: the second
 * folds into the first, its axes onto the first's (sub-)axes; an inlined
 * single-device mesh is lifted as `single_device_N`. */
static const char dedup_module[] =
    "sdy.mesh @m1 = <[\"x\"=4, \"y\"=2]>\n"
    "sdy.mesh @m2 = <[\"p\"=2, \"q\"=4]>\n"
    "func.func @main(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@m2, [{\"q\"}]>},"
    " %arg1: tensor<16xf32> {sdy.sharding = #sdy.sharding<@m2, [{\"q\":(2)2}]>},"
    " %arg2: tensor<16xf32> {sdy.sharding = #sdy.sharding<@m2, [{\"p\", \"q\"}]>})"
    " -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<mesh<[], device_ids=[3]>, []>}) {\n"
    "  return %arg0 : tensor<16xf32>\n"
    "}\n";

static cm_status dedup_pipeline(sp_module *m, cm_error *err)
{
    sp_gspmd_round_trip_opts o = {true, false, true, true, false};
    return sp_gspmd_round_trip_import_pipeline(m, &o, NULL, err);
}

/* A V3 round-trip module: single-device meshes named out of device order,
 * an X64Combine with a V3 sharding and one with a V2 {replicated}
 * placeholder, and a callback tuple sharding with a placeholder element. */
static const char v3_placeholder_module[] =
    "func.func @f(%arg0: tensor<16xi64>, %arg1: tensor<8xf32> {mhlo.sharding ="
    " \"{single_device[device_id=5]}\"}) -> tensor<16xi64> {\n"
    "  %0 = stablehlo.custom_call @X64SplitLow(%arg0) : (tensor<16xi64>) -> tensor<16xui32>\n"
    "  %1 = stablehlo.custom_call @X64SplitHigh(%arg0) : (tensor<16xi64>) -> tensor<16xui32>\n"
    "  %2 = stablehlo.custom_call @X64Combine(%0, %1) {mhlo.sharding ="
    " \"{mesh['a'=4], [{'a'}]}\"} : (tensor<16xui32>, tensor<16xui32>) -> tensor<16xi64>\n"
    "  %3 = stablehlo.custom_call @X64Combine(%0, %1) {mhlo.sharding = \"{replicated}\"}"
    " : (tensor<16xui32>, tensor<16xui32>) -> tensor<16xi64>\n"
    "  %4 = stablehlo.custom_call @xla_python_gpu_callback(%arg1) {mhlo.sharding ="
    " \"{{mesh['a'=4], [{'a'}]}, {replicated}}\"} : (tensor<8xf32>)"
    " -> tuple<tensor<8xf32>, tensor<8xf32>>\n"
    "  %5 = stablehlo.custom_call @xla_python_cpu_callback(%arg1) {mhlo.sharding ="
    " \"{maximal device=0}\", has_side_effect = true} : (tensor<8xf32>) -> tuple<>\n"
    "  return %2 : tensor<16xi64>\n"
    "}\n";

static cm_status v3_pipeline(sp_module *m, cm_error *err)
{
    sp_gspmd_round_trip_opts o = {true, true, false, true, false};
    return sp_gspmd_round_trip_import_pipeline(m, &o, NULL, err);
}

/* In the V3 round trip the single-device meshes come in the order the
 * shardings name them, an X64Combine keeps its sharding, a V2 {replicated}
 * is a placeholder: no sharding on its own, fully open on the mesh of its
 * sibling in a tuple. */
static void test_sp_gspmd_round_trip_import_pipeline_v3_placeholders(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(
        sp_mlir_read(v3_placeholder_module, strlen(v3_placeholder_module), 0, &m, &err), CM_OK);
    assert_int_equal(v3_pipeline(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    const char *d5 = strstr(b.data, "sdy.mesh @single_device_5");
    const char *d0 = strstr(b.data, "sdy.mesh @single_device_0");
    assert_non_null(d5);
    assert_non_null(d0);
    assert_true(d5 < d0);
    assert_non_null(strstr(b.data, "@X64Combine(%0, %1) {sdy.sharding = "
                                   "#sdy.sharding_per_value<[<@mesh, [{\"a\"}]>]>}"));
    assert_non_null(strstr(b.data, "@X64Combine(%0, %1) : (tensor<16xui32>"));
    assert_non_null(strstr(b.data, "@xla_python_gpu_callback(%arg1) {sdy.sharding = "
                                   "#sdy.sharding_per_value<[<@mesh, [{\"a\"}]>, "
                                   "<@mesh, [{?}]>]>}"));
    assert_null(strstr(b.data, "mhlo.sharding"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* In the V3 round trip a V2 sharding at a function boundary ({replicated},
 * a maximal one not written {single_device[...]}) is a placeholder and
 * dropped, while an op keeps a maximal one; with only single-device
 * shardings no global mesh is made. */
static const char v3_boundary_module[] =
    "func.func @f(%arg0: tensor<4xf32> {mhlo.sharding = \"{replicated}\"}, %arg1: tensor<4xf32>"
    " {mhlo.sharding = \"{single_device[device_id=1]}\"}) -> (tensor<4xf32> {mhlo.sharding ="
    " \"{maximal_mesh[device_id=0]}\"}) {\n"
    "  stablehlo.custom_call @xla_python_cpu_callback(%arg0) {has_side_effect = true,"
    " mhlo.sharding = \"{maximal_mesh[device_id=0]}\"} : (tensor<4xf32>) -> ()\n"
    "  return %arg1 : tensor<4xf32>\n"
    "}\n";

static void test_sp_gspmd_round_trip_import_pipeline_v3_boundary_placeholders(void **state)
{
    (void)state;
    const char *text = v3_boundary_module;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    assert_int_equal(v3_pipeline(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    static const char *const want[] = {
        "func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<4xf32> {sdy.sharding = "
        "#sdy.sharding<@single_device_1, []>}) -> tensor<4xf32> {",
        "@xla_python_cpu_callback(%arg0) {has_side_effect = true, sdy.sharding = "
        "#sdy.sharding_per_value<[<@single_device_0, []>]>}",
    };
    for (size_t i = 0; i < N_OF(want); i++) {
        if (strstr(b.data, want[i]) == NULL) {
            fail_msg("missing %s in\n%s", want[i], b.data);
        }
    }
    assert_null(strstr(b.data, "sdy.mesh @mesh"));
    assert_null(strstr(b.data, "mhlo.sharding"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

static void test_sp_gspmd_round_trip_import_pipeline_dedups_meshes(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(dedup_module, strlen(dedup_module), 0, &m, &err), CM_OK);
    assert_int_equal(dedup_pipeline(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_null(strstr(b.data, "@m2"));
    assert_non_null(strstr(b.data, "sdy.mesh @single_device_3 = <[], device_ids=[3]>"));
    assert_non_null(strstr(b.data, "%arg0: tensor<16xf32> {sdy.sharding = "
                                   "#sdy.sharding<@m1, [{\"x\":(2)2, \"y\"}]>}"));
    assert_non_null(
        strstr(b.data, "%arg1: tensor<16xf32> {sdy.sharding = #sdy.sharding<@m1, [{\"y\"}]>}"));
    assert_non_null(strstr(b.data, "%arg2: tensor<16xf32> {sdy.sharding = "
                                   "#sdy.sharding<@m1, [{\"x\", \"y\"}]>}"));
    assert_non_null(strstr(b.data, "#sdy.sharding<@single_device_3, []>"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* A FuncResultSharding whose value is also used by another op stays as a
 * constraint: with open dims in XLA's current import, with the sharding's
 * own closed dims in the pipeline that still had
 * import-only-uninlineable-func-calls. */
static const char frs_module[] =
    "module attributes {mhlo.frontend_attributes = {xla.sdy.meshes ="
    " \"{mesh = #sdy.mesh<[\\\"a\\\"=2]>}\"}} {\n"
    "  func.func @f(%arg0: tensor<8xi32>) -> (tensor<8xi32>, tensor<8xi32>) {\n"
    "    %0 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%arg0) {mhlo.frontend_attributes ="
    " {xla.sdy.sharding = \"#sdy.sharding_per_value<[<@mesh, [{\\\"a\\\"}p0]>]>\"}}"
    " : (tensor<8xi32>) -> tensor<8xi32>\n"
    "    %1 = stablehlo.add %0, %0 : tensor<8xi32>\n"
    "    return %0, %1 : tensor<8xi32>, tensor<8xi32>\n"
    "  }\n"
    "}\n";

static void check_frs_constraint(bool closed, const char *want)
{
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(frs_module, strlen(frs_module), 0, &m, &err), CM_OK);
    sp_gspmd_round_trip_opts o = {true, false, false, true, closed};
    assert_int_equal(sp_gspmd_round_trip_import_pipeline(m, &o, NULL, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    if (strstr(b.data, want) == NULL) {
        fail_msg("missing %s in\n%s", want, b.data);
    }
    assert_non_null(strstr(b.data, "-> (tensor<8xi32> {sdy.sharding = "
                                   "#sdy.sharding<@mesh, [{\"a\"}p0]>}, tensor<8xi32>)"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

static cm_status frs_closed_pipeline(sp_module *m, cm_error *err)
{
    sp_gspmd_round_trip_opts o = {true, false, false, true, true};
    return sp_gspmd_round_trip_import_pipeline(m, &o, NULL, err);
}

static void test_sp_gspmd_round_trip_func_result_constraint_dims(void **state)
{
    (void)state;
    check_frs_constraint(false, "sdy.sharding_constraint %arg0 <@mesh, [{\"a\", ?}p0]>");
    check_frs_constraint(true, "sdy.sharding_constraint %arg0 <@mesh, [{\"a\"}p0]>");
}

/* tf2xla's tuple shardings of @main must have one entry per argument. */
static void test_sp_gspmd_round_trip_import_pipeline_rejects_tuple_count(void **state)
{
    (void)state;
    static const char text[] =
        "module attributes {mhlo.frontend_attributes = {xla.sdy.tuple_args_shardings = "
        "\"#sdy.sharding_per_value<[<mesh<[\\\"a\\\"=2]>, [{\\\"a\\\"}]>]>\"}} {\n"
        "  func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32> {\n"
        "    return %arg0 : tensor<8xf32>\n"
        "  }\n"
        "}\n";
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    assert_int_equal(sp_gspmd_round_trip_import_pipeline(m, NULL, NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "has 1 shardings in xla.sdy.tuple_args_shardings"));
    sp_module_destroy(m);
}

/* Every allocation of the imports and exports may fail: each attempt fails
 * with CM_ENOMEM and leaks nothing, until one succeeds. */
static void test_sp_gspmd_import_oom(void **state)
{
    (void)state;
    const oom_ctx cases[] = {
        {NULL, gspmd_module, sp_gspmd_import},
        {NULL, gspmd_module, user_annotations},
        {NULL, oom_shard_map, sp_gspmd_import},
        {NULL, oom_round_trip, round_trip_then_back},
        {NULL, oom_v3, v3_import_export},
        {NULL, pipeline_module, sp_gspmd_stablehlo_import_pipeline},
        {NULL, nested_tuple_module, sp_gspmd_stablehlo_import_pipeline},
        {NULL, export_module, export_pipeline_v2},
        {NULL, callback_module, export_pipeline_v2},
        {NULL, rt_module, rt_testing},
        {NULL, dedup_module, dedup_pipeline},
        {NULL, v3_placeholder_module, v3_pipeline},
        {NULL, v3_boundary_module, v3_pipeline},
        {NULL, unreduced_export_module, export_pipeline_v2},
        {NULL, frs_module, frs_closed_pipeline},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        oom_ctx c = cases[i];
        tu_oom t = {oom_setup, oom_run, oom_done};
        tu_oom_loop(&t, &c, 20000);
    }
}

static void test_sp_gspmd_export_round_trip(void **state)
{
    (void)state;
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(gspmd_module, strlen(gspmd_module), 0, &m, &err), CM_OK);
    assert_true(sp_gspmd_detect(m));
    assert_int_equal(sp_gspmd_import_shardings(m, &err), CM_OK);
    assert_false(sp_gspmd_detect(m));
    assert_int_equal(sp_gspmd_export_shardings(m, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"));
    assert_non_null(strstr(b.data, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"));
    assert_null(strstr(b.data, "sdy."));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* GSPMD's shard_map (@Sharding, @SPMDFullToShardShape, a shmap_body call,
 * @Sharding, @SPMDShardToFullShape) reads as an sdy.manual_computation. */
static void test_sp_input_reads_gspmd_shard_map(void **state)
{
    (void)state;
    static const char text[] =
        "func.func @main(%arg0: tensor<8x8xf32> {mhlo.sharding = \"{devices=[8,1]<=[8]}\"}) -> "
        "tensor<8x8xf32> {\n"
        "  %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = \"{devices=[8,1]<=[8]}\"} "
        ": (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
        "  %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = \"{manual}\"} : "
        "(tensor<8x8xf32>) -> tensor<1x8xf32>\n"
        "  %2 = call @shmap_body(%1) : (tensor<1x8xf32>) -> tensor<1x8xf32>\n"
        "  %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = \"{manual}\"} : "
        "(tensor<1x8xf32>) -> tensor<1x8xf32>\n"
        "  %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "
        "\"{devices=[8,1]<=[8]}\"} : (tensor<1x8xf32>) -> tensor<8x8xf32>\n"
        "  return %4 : tensor<8x8xf32>\n"
        "}\n"
        "func.func @shmap_body(%arg0: tensor<1x8xf32>) -> tensor<1x8xf32> {\n"
        "  %0 = stablehlo.abs %arg0 : tensor<1x8xf32>\n"
        "  return %0 : tensor<1x8xf32>\n"
        "}\n";
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(text, strlen(text), NULL, &in, &err), CM_OK);
    assert_int_equal(sp_module_func(in.m, "shmap_body"), SP_NONE);
    uint32_t mc = SP_NONE;
    for (uint32_t i = 0; i < in.m->n_ops; i++) {
        if (in.m->ops[i].parent_block != SP_NONE &&
            strcmp(in.m->ops[i].name, "sdy.manual_computation") == 0) {
            mc = i;
        }
        assert_false(in.m->ops[i].parent_block != SP_NONE &&
                     strcmp(in.m->ops[i].name, "stablehlo.custom_call") == 0);
    }
    assert_int_not_equal(mc, SP_NONE);
    const sp_attr *axes = sp_op_attr(in.m, mc, "manual_axes");
    assert_non_null(axes);
    assert_int_equal(axes->u.axes.n, 1);
    assert_string_equal(axes->u.axes.axes[0].name, "_axis_0");
    sp_input_fini(&in);
    /* a broken pattern is an error at the call */
    static const char broken[] =
        "func.func @main(%arg0: tensor<8x8xf32> {mhlo.sharding = \"{devices=[8,1]<=[8]}\"}) -> "
        "tensor<8x8xf32> {\n"
        "  %0 = call @shmap_body(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n"
        "}\n"
        "func.func @shmap_body(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  return %arg0 : tensor<8x8xf32>\n"
        "}\n";
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(broken, strlen(broken), NULL, &in, &err), CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "SPMDFullToShardShape"));
}

/* JAX's round-trip shard_map (xla.sdy.GlobalToLocalShape, a
 * manual_computation_body call, xla.sdy.LocalToGlobalShape). */
static void test_sp_gspmd_shard_map_import_round_trip_form(void **state)
{
    (void)state;
    static const char text[] =
        "sdy.mesh @mesh = <[\"a\"=4]>\n"
        "func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) "
        "{mhlo.frontend_attributes = {xla.sdy.in_shardings = "
        "\"#sdy.sharding_per_value<[<@mesh, [{\\22a\\22}, {}]>]>\", xla.sdy.manual_axes = "
        "\"#sdy<manual_axes{\\22a\\22}>\"}} : (tensor<8x8xf32>) -> tensor<2x8xf32>\n"
        "  %1 = call @xla.sdy.manual_computation_body(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>\n"
        "  %2 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%1) "
        "{mhlo.frontend_attributes = {xla.sdy.manual_axes = \"#sdy<manual_axes{\\22a\\22}>\", "
        "xla.sdy.out_shardings = \"#sdy.sharding_per_value<[<@mesh, [{\\22a\\22}, {}]>]>\"}} "
        ": (tensor<2x8xf32>) -> tensor<8x8xf32>\n"
        "  return %2 : tensor<8x8xf32>\n"
        "}\n"
        "func.func @xla.sdy.manual_computation_body(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32> {\n"
        "  return %arg0 : tensor<2x8xf32>\n"
        "}\n";
    sp_module *m;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    assert_int_equal(sp_gspmd_shard_map_import(m, NULL, &err), CM_OK);
    cm_buf b;
    print_module(m, &b);
    assert_non_null(strstr(b.data, "sdy.manual_computation(%arg0) in_shardings=[<@mesh, "
                                   "[{\"a\"}, {}]>] out_shardings=[<@mesh, [{\"a\"}, {}]>] "
                                   "manual_axes={\"a\"}"));
    assert_null(strstr(b.data, "manual_computation_body"));
    cm_buf_fini(&b);
    sp_module_destroy(m);
}

/* The sdy round trip's form (jax.export): meshes and shardings from the
 * xla.sdy frontend attributes; a malformed one is an error at LINE:COL. */
static void test_sp_input_reads_sdy_round_trip(void **state)
{
    (void)state;
    static const char text[] =
        "module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "
        "\"{mesh = #sdy.mesh<[\\22x\\22=4]>}\"}} {\n"
        "  func.func @main(%arg0: tensor<8x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "
        "\"#sdy.sharding<@mesh, [{\\22x\\22}, {}]>\"}}) -> tensor<8x8xf32> {\n"
        "    return %arg0 : tensor<8x8xf32>\n"
        "  }\n"
        "}\n";
    sp_input in;
    cm_error err;
    cm_error_clear(&err);
    assert_true(sp_input_read(text, strlen(text), NULL, &in, &err) == CM_OK);
    const sp_mesh *mesh = sp_module_mesh(in.m, "mesh");
    assert_non_null(mesh);
    assert_int_equal(mesh->n_axes, 1);
    assert_int_equal(mesh->axes[0].size, 4);
    uint32_t f = sp_module_func(in.m, "main");
    const sp_sharding *s =
        sp_value_sharding(in.m, in.m->blocks[in.m->ops[f].regions[0].blocks[0]].first_arg);
    assert_non_null(s);
    assert_int_equal(s->dims[0].n_axes, 1);
    assert_string_equal(s->dims[0].axes[0].name, "x");
    sp_input_fini(&in);
    static const char bad_rt[] =
        "module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "
        "\"{mesh = #sdy.mesh<[\\22x\\22=4]>}\"}} {\n"
        "  func.func @main(%arg0: tensor<8x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "
        "\"#sdy.sharding<@mesh, [{\\22x\\22}, {}\"}}) -> tensor<8x8xf32> {\n"
        "    return %arg0 : tensor<8x8xf32>\n"
        "  }\n"
        "}\n";
    cm_error_clear(&err);
    assert_int_equal(sp_input_read(bad_rt, strlen(bad_rt), NULL, &in, &err), CM_EINVAL);
    assert_string_equal(err.path, "2:3");
    assert_non_null(strstr(err.msg, "argument 0"));
}

/* The migration's comparison: GSPMD replicated the abs over the model axis
 * where Shardy, from the same user annotations, keeps the dot's sharding. */
static void test_sp_gspmd_divergences_finds_the_op(void **state)
{
    (void)state;
    static const char text[] =
        "func.func @main(%arg0: tensor<8x16xf32> {mhlo.sharding = \"{devices=[2,1,4]<=[8] "
        "last_tile_dim_replicate}\"}, %arg1: tensor<16x32xf32> {mhlo.sharding = "
        "\"{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}\"}) -> tensor<8x32xf32> {\n"
        "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {mhlo.sharding = "
        "\"{devices=[2,4]<=[8]}\"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> "
        "tensor<8x32xf32>\n"
        "  %1 = stablehlo.abs %0 {mhlo.sharding = \"{devices=[2,1,4]<=[8] "
        "last_tile_dim_replicate}\"} : tensor<8x32xf32>\n"
        "  return %1 : tensor<8x32xf32>\n"
        "}\n";
    sp_module *g, *s;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &g, &err), CM_OK);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &s, &err), CM_OK);
    assert_int_equal(sp_gspmd_import(g, &err), CM_OK);
    assert_int_equal(sp_gspmd_import_user_annotations(s, &err), CM_OK);
    sp_diags d;
    sp_diags_init(&d);
    assert_int_equal(sp_input_propagate(s, SP_PLAN_PIPELINE, NULL, false, NULL, &d, &err), CM_OK);
    sp_diags_fini(&d);
    sp_gspmd_divergence *v = NULL;
    uint32_t n = 0;
    assert_int_equal(sp_gspmd_divergences(g, s, &v, &n, &err), CM_OK);
    assert_int_equal(n, 1);
    assert_string_equal(g->ops[v[0].op].name, "stablehlo.abs");
    assert_int_equal(v[0].gspmd->dims[1].n_axes, 0);
    assert_int_equal(v[0].shardy->dims[1].n_axes, 1);
    cm_free(v);
    sp_module_destroy(g);
    sp_module_destroy(s);
}

/* POST /v1/plans with a GSPMD module: the plan has the converted mesh and
 * shardings; an unconvertible sharding is a 400 at the op's LINE:COL. */
static void test_post_plans_reads_gspmd(void **state)
{
    (void)state;
    tu_server srv;
    memset(&srv, 0, sizeof srv);
    assert_int_equal(tu_server_init(&srv, "test_gspmd"), 0);
    srv_config c;
    tu_config_default(&srv, &c);
    tu_server_start(&srv, &c);
    json_t *req = json_pack("{s:s}", "mlir", gspmd_module);
    char *body = json_dumps(req, 0);
    tu_resp r;
    tu_http(&srv, "POST", "/v1/plans", "application/json", body, &r);
    assert_int_equal(r.status, 201);
    json_t *mesh = json_object_get(
        json_array_get(json_object_get(json_object_get(r.json, "plan"), "meshes"), 0), "axes");
    assert_int_equal(json_array_size(mesh), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(mesh, 1), "name")),
                        "_axis_1");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(mesh, 1), "size")), 4);
    assert_non_null(strstr(r.body.data, "<@mesh, [{}, {\\\"_axis_1\\\"}]>"));
    tu_resp_fini(&r);
    free(body);
    json_decref(req);
    /* the bad one: [2,3] tiles over 6 devices do not fit the 2 x 4 mesh */
    static const char bad_module[] =
        "func.func @f(%arg0: tensor<8x16xf32> {mhlo.sharding = \"{devices=[2,4]<=[8]}\"}) -> "
        "tensor<8x16xf32> {\n"
        "  %0 = stablehlo.abs %arg0 {mhlo.sharding = \"{devices=[2,3]<=[6]}\"} : tensor<8x16xf32>\n"
        "  return %0 : tensor<8x16xf32>\n"
        "}\n";
    req = json_pack("{s:s}", "mlir", bad_module);
    body = json_dumps(req, 0);
    tu_http(&srv, "POST", "/v1/plans", "application/json", body, &r);
    assert_int_equal(r.status, 400);
    json_t *e = json_object_get(r.json, "error");
    assert_string_equal(json_string_value(json_object_get(e, "path")), "2:3");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "mhlo.sharding"));
    tu_resp_fini(&r);
    free(body);
    json_decref(req);
    tu_server_fini(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_hlo_sharding_round_trips),
        cmocka_unit_test(test_sp_hlo_sharding_explicit_list_is_iota),
        cmocka_unit_test(test_sp_hlo_sharding_parse_rejects_bad_text),
        cmocka_unit_test(test_sp_hlo_local_mesh_decomposes_iota),
        cmocka_unit_test(test_sp_hlo_to_sdy_and_back),
        cmocka_unit_test(test_sp_gspmd_stablehlo_import_pipeline_flattens_tuples),
        cmocka_unit_test(test_sp_gspmd_stablehlo_import_pipeline_flattens_nested_tuples),
        cmocka_unit_test(test_sp_gspmd_stablehlo_import_pipeline_rejects_deep_tuples),
        cmocka_unit_test(test_sp_gspmd_stablehlo_export_pipeline_manual_computation),
        cmocka_unit_test(test_sp_gspmd_stablehlo_export_pipeline_tuples_callback_results),
        cmocka_unit_test(test_sp_gspmd_stablehlo_export_pipeline_leftover_reductions),
        cmocka_unit_test(test_sp_gspmd_stablehlo_export_pipeline_unreduced_and_maximal),
        cmocka_unit_test(test_sp_input_reads_gspmd),
        cmocka_unit_test(test_sp_input_gspmd_error_has_line_col),
        cmocka_unit_test(test_sp_gspmd_import_oom),
        cmocka_unit_test(test_sp_gspmd_export_round_trip),
        cmocka_unit_test(test_sp_input_reads_gspmd_shard_map),
        cmocka_unit_test(test_sp_gspmd_shard_map_import_round_trip_form),
        cmocka_unit_test(test_sp_input_reads_sdy_round_trip),
        cmocka_unit_test(test_sp_gspmd_round_trip_export_then_import),
        cmocka_unit_test(test_sp_gspmd_divergences_finds_the_op),
        cmocka_unit_test(test_post_plans_reads_gspmd),
        cmocka_unit_test(test_sp_gspmd_round_trip_import_pipeline_dedups_meshes),
        cmocka_unit_test(test_sp_gspmd_round_trip_import_pipeline_v3_placeholders),
        cmocka_unit_test(test_sp_gspmd_round_trip_import_pipeline_v3_boundary_placeholders),
        cmocka_unit_test(test_sp_gspmd_round_trip_func_result_constraint_dims),
        cmocka_unit_test(test_sp_gspmd_round_trip_import_pipeline_rejects_tuple_count),
    };
    return cmocka_run_group_tests_name("sp_gspmd", tests, NULL, NULL);
}
