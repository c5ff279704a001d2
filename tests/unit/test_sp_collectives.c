/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_collectives: device groups of collectives on
 * 1-D, 2-D and 3-D meshes, sub-axes and explicit device orders; local shapes
 * (divisible, non-divisible, dynamic); the reshard lowering and the
 * device-groups annotation on small modules; errors with their paths; OOM
 * loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_collectives.h"
#include "sp_ir.h"
#include "sp_shard.h"
#include "sp_mlir.h"

#define N_OF(x) (sizeof(x) / sizeof((x)[0]))

/* ---- helpers ------------------------------------------------------------------ */

static sp_mesh *mesh_of(cm_arena *a, const char *text)
{
    sp_mesh *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mesh_parse(text, strlen(text), a, &m, NULL, &err), CM_OK);
    return m;
}

static sp_axis_ref full(const char *name)
{
    sp_axis_ref r = {name, 0, 0};
    return r;
}

static sp_axis_ref sub(const char *name, int64_t pre, int64_t size)
{
    sp_axis_ref r = {name, pre, size};
    return r;
}

/* Checks the groups of axes on mesh_text against want (n_groups x size). */
static void assert_groups(const char *mesh_text, const sp_axis_ref *axes, uint32_t n,
                          const int64_t *want, uint32_t want_groups, uint32_t want_size)
{
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh *mesh = mesh_of(&a, mesh_text);
    int64_t *g = NULL;
    uint32_t ng = 0, gs = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_collective_groups(mesh, axes, n, &g, &ng, &gs, &a, &err), CM_OK);
    assert_int_equal(ng, want_groups);
    assert_int_equal(gs, want_size);
    for (uint32_t i = 0; i < ng * gs; i++) {
        if (g[i] != want[i]) {
            print_error("group entry %u: want %lld, got %lld\n", i, (long long)want[i],
                        (long long)g[i]);
        }
        assert_int_equal(g[i], want[i]);
    }
    cm_arena_fini(&a);
}

/* Reads text, runs the pass, returns the printed module (cm_free). */
static char *run_pass(const char *text, bool annotate)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    cm_status st = annotate ? sp_pass_annotate_device_groups(m, &err)
                            : sp_pass_reshard_to_collectives(m, false, &err);
    assert_int_equal(st, CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts o = {false, false};
    sp_mlir_print(m, &o, &b);
    assert_false(b.oom);
    sp_module_destroy(m);
    return cm_buf_take(&b);
}

static void assert_contains(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL) {
        print_error("missing:\n%s\n--- in ---\n%s\n", needle, hay);
    }
    assert_non_null(strstr(hay, needle));
}

/* ---- device groups ---------------------------------------------------------------- */

static void test_sp_collective_groups_1d_mesh(void **state)
{
    (void)state;
    sp_axis_ref x[1] = {full("x")};
    const int64_t want[] = {0, 1, 2, 3};
    assert_groups("<[\"x\"=4]>", x, 1, want, 1, 4);
}

static void test_sp_collective_groups_2d_mesh_each_axis(void **state)
{
    (void)state;
    sp_axis_ref x[1] = {full("x")}, y[1] = {full("y")};
    const int64_t want_x[] = {0, 2, 1, 3};
    const int64_t want_y[] = {0, 1, 2, 3};
    assert_groups("<[\"x\"=2, \"y\"=2]>", x, 1, want_x, 2, 2);
    assert_groups("<[\"x\"=2, \"y\"=2]>", y, 1, want_y, 2, 2);
}

static void test_sp_collective_groups_axis_order_sets_member_order(void **state)
{
    (void)state;
    sp_axis_ref yx[2] = {full("y"), full("x")};
    const int64_t want[] = {0, 2, 1, 3};
    assert_groups("<[\"x\"=2, \"y\"=2]>", yx, 2, want, 1, 4);
}

static void test_sp_collective_groups_3d_mesh_outer_axes(void **state)
{
    (void)state;
    sp_axis_ref xz[2] = {full("x"), full("z")};
    const int64_t want[] = {0, 1, 4, 5, 2, 3, 6, 7};
    assert_groups("<[\"x\"=2, \"y\"=2, \"z\"=2]>", xz, 2, want, 2, 4);
}

static void test_sp_collective_groups_sub_axis(void **state)
{
    (void)state;
    sp_axis_ref mid[1] = {sub("x", 2, 2)};
    const int64_t want[] = {0, 2, 1, 3, 4, 6, 5, 7};
    assert_groups("<[\"x\"=8]>", mid, 1, want, 4, 2);
    sp_axis_ref major[1] = {sub("y", 1, 2)};
    const int64_t want_major[] = {0, 2, 1, 3, 4, 6, 5, 7};
    assert_groups("<[\"x\"=2, \"y\"=4]>", major, 1, want_major, 4, 2);
}

static void test_sp_collective_groups_explicit_device_ids(void **state)
{
    (void)state;
    sp_axis_ref x[1] = {full("x")}, y[1] = {full("y")};
    const int64_t want_x[] = {3, 1, 2, 0};
    const int64_t want_y[] = {3, 2, 1, 0};
    assert_groups("<[\"x\"=2, \"y\"=2], device_ids=[3, 2, 1, 0]>", x, 1, want_x, 2, 2);
    assert_groups("<[\"x\"=2, \"y\"=2], device_ids=[3, 2, 1, 0]>", y, 1, want_y, 2, 2);
    const int64_t want_x2[] = {3, 2, 1, 0};
    assert_groups("<[\"x\"=2, \"y\"=2], device_ids=[3, 1, 2, 0]>", x, 1, want_x2, 2, 2);
}

static void test_sp_collective_groups_no_axes_gives_single_devices(void **state)
{
    (void)state;
    const int64_t want[] = {0, 1, 2, 3, 4, 5};
    assert_groups("<[\"x\"=2, \"y\"=3]>", NULL, 0, want, 6, 1);
}

static void test_sp_collective_groups_rejects_unknown_axis(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh *mesh = mesh_of(&a, "<[\"x\"=2, \"y\"=2]>");
    sp_axis_ref axes[2] = {full("x"), full("w")};
    int64_t *g;
    uint32_t ng, gs;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_collective_groups(mesh, axes, 2, &g, &ng, &gs, &a, &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "/axes/1");
    cm_arena_fini(&a);
}

static void test_sp_collective_groups_rejects_overlapping_sub_axes(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh *mesh = mesh_of(&a, "<[\"x\"=8]>");
    sp_axis_ref axes[2] = {sub("x", 1, 4), sub("x", 2, 2)};
    int64_t *g;
    uint32_t ng, gs;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_collective_groups(mesh, axes, 2, &g, &ng, &gs, &a, &err), CM_EINVAL);
    assert_string_equal(err.path, "/axes/1");
    sp_axis_ref bad[1] = {sub("x", 3, 2)};
    cm_error_clear(&err);
    assert_int_equal(sp_collective_groups(mesh, bad, 1, &g, &ng, &gs, &a, &err), CM_EINVAL);
    assert_string_equal(err.path, "/axes/0");
    cm_arena_fini(&a);
}

static void test_sp_collective_groups_oom(void **state)
{
    (void)state;
    sp_axis_ref axes[2] = {full("y"), sub("x", 1, 2)};
    for (long n = 0;; n++) {
        cm_arena a;
        cm_arena_init(&a, 0);
        sp_mesh *mesh = mesh_of(&a, "<[\"x\"=4, \"y\"=2]>");
        int64_t *g;
        uint32_t ng, gs;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_collective_groups(mesh, axes, 2, &g, &ng, &gs, &a, &err);
        cm_alloc_fail_after(-1);
        cm_arena_fini(&a);
        if (st == CM_OK) {
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_true(n < 100);
    }
}

/* ---- local shapes ------------------------------------------------------------------ */

static void assert_local(const char *mesh_text, const char *sharding_text, const int64_t *dims,
                         uint32_t rank, const int64_t *want)
{
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh *mesh = mesh_of(&a, mesh_text);
    sp_sharding *s = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sharding_text != NULL) {
        assert_int_equal(
            sp_sharding_parse(sharding_text, strlen(sharding_text), &a, &s, NULL, &err), CM_OK);
    }
    int64_t local[8];
    assert_int_equal(sp_local_shape(s, mesh, dims, rank, local, &err), CM_OK);
    for (uint32_t d = 0; d < rank; d++) {
        assert_int_equal(local[d], want[d]);
    }
    cm_arena_fini(&a);
}

static void test_sp_local_shape_divisible(void **state)
{
    (void)state;
    const int64_t dims[2] = {16, 8}, want[2] = {8, 4};
    assert_local("<[\"x\"=2, \"y\"=2]>", "<@m, [{\"x\"}, {\"y\"}]>", dims, 2, want);
    const int64_t want_both[2] = {4, 8};
    assert_local("<[\"x\"=2, \"y\"=2]>", "<@m, [{\"x\", \"y\"}, {}]>", dims, 2, want_both);
}

static void test_sp_local_shape_rounds_up_when_not_divisible(void **state)
{
    (void)state;
    const int64_t dims[2] = {10, 7}, want[2] = {3, 3};
    assert_local("<[\"x\"=4, \"y\"=3]>", "<@m, [{\"x\"}, {\"y\"}]>", dims, 2, want);
}

static void test_sp_local_shape_sub_axis_and_dynamic(void **state)
{
    (void)state;
    const int64_t dims[3] = {16, SP_DIM_DYNAMIC, 6}, want[3] = {4, SP_DIM_DYNAMIC, 6};
    assert_local("<[\"x\"=2, \"y\"=8]>", "<@m, [{\"y\":(1)4}, {\"x\"}, {}]>", dims, 3, want);
}

static void test_sp_local_shape_replicated(void **state)
{
    (void)state;
    const int64_t dims[2] = {5, 3};
    assert_local("<[\"x\"=2]>", NULL, dims, 2, dims);
}

static void test_sp_local_shape_rejects_rank_mismatch_and_unknown_axis(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 0);
    sp_mesh *mesh = mesh_of(&a, "<[\"x\"=2]>");
    sp_sharding *s = NULL;
    cm_error err;
    cm_error_clear(&err);
    const char *t = "<@m, [{\"x\"}, {\"q\"}]>";
    assert_int_equal(sp_sharding_parse(t, strlen(t), &a, &s, NULL, &err), CM_OK);
    int64_t dims[2] = {4, 4}, local[2];
    assert_int_equal(sp_local_shape(s, mesh, dims, 1, local, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dims");
    cm_error_clear(&err);
    assert_int_equal(sp_local_shape(s, mesh, dims, 2, local, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dims/1");
    cm_arena_fini(&a);
}

/* ---- the passes --------------------------------------------------------------------- */

static const char *const mesh_defs = "sdy.mesh @m = <[\"x\"=2, \"y\"=2, \"z\"=2]>\n"
                                     "sdy.mesh @m42 = <[\"a\"=4, \"b\"=2]>\n"
                                     "sdy.mesh @rev = <[\"x\"=2, \"y\"=2, \"z\"=2], "
                                     "device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>\n";

static char *lower(const char *in_sharding, const char *out_sharding, const char *type)
{
    char text[2048];
    snprintf(text, sizeof text,
             "%sfunc.func @f(%%arg0: %s {sdy.sharding = #sdy.sharding%s}) -> %s {\n"
             "  %%0 = sdy.reshard %%arg0 %s : %s\n"
             "  return %%0 : %s\n"
             "}\n",
             mesh_defs, type, in_sharding, type, out_sharding, type, type);
    return run_pass(text, false);
}

static void test_sp_pass_reshard_to_collectives_gathers_a_suffix(void **state)
{
    (void)state;
    char *out = lower("<@m, [{\"x\", \"y\"}, {\"z\"}]>", "<@m, [{\"x\"}, {}]>", "tensor<8x8xf32>");
    assert_contains(out,
                    "sdy.all_gather [{\"y\"}, {\"z\"}] %arg0 out_sharding=<@m, [{\"x\"}, {}]>");
    assert_null(strstr(out, "sdy.reshard"));
    cm_free(out);
}

static void test_sp_pass_reshard_to_collectives_moves_an_axis(void **state)
{
    (void)state;
    char *out = lower("<@m, [{\"x\"}, {}]>", "<@m, [{}, {\"x\"}]>", "tensor<8x8xf32>");
    assert_contains(out, "sdy.all_to_all [{\"x\"}: 0->1] %arg0 out_sharding=<@m, [{}, {\"x\"}]>");
    cm_free(out);
}

static void test_sp_pass_reshard_to_collectives_swaps_and_splits(void **state)
{
    (void)state;
    char *out =
        lower("<@m42, [{\"a\"}, {\"b\"}]>", "<@m42, [{\"b\"}, {\"a\"}]>", "tensor<8x8xf32>");
    assert_contains(out, "%0 = sdy.collective_permute %arg0 out_sharding=<@m42, [{\"b\", "
                         "\"a\":(2)2}, {\"a\":(1)2}]>");
    assert_contains(out, "%1 = sdy.all_to_all [{\"a\":(2)2}: 0->1] %0 out_sharding=<@m42, "
                         "[{\"b\"}, {\"a\"}]>");
    cm_free(out);
}

static void test_sp_pass_reshard_to_collectives_reorders_devices(void **state)
{
    (void)state;
    char *out = lower("<@m, [{\"x\"}, {\"y\"}]>", "<@rev, [{}, {\"y\"}]>", "tensor<8x8xf32>");
    assert_contains(out,
                    "%0 = sdy.collective_permute %arg0 out_sharding=<@rev, [{\"x\"}, {\"y\"}]>");
    assert_contains(out, "%1 = sdy.all_gather [{\"x\"}, {}] %0 out_sharding=<@rev, [{}, {\"y\"}]>");
    cm_free(out);
}

static void test_sp_pass_reshard_to_collectives_drops_redundant(void **state)
{
    (void)state;
    char *out = lower("<@m, [{\"x\"}, {}]>", "<@m, [{\"x\", ?}, {?}]>", "tensor<8x8xf32>");
    assert_contains(out, "return %arg0");
    assert_null(strstr(out, "sdy.reshard"));
    cm_free(out);
}

static void test_sp_pass_reshard_to_collectives_oom(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof text,
             "%sfunc.func @f(%%arg0: tensor<8x8xf32> {sdy.sharding = "
             "#sdy.sharding<@m42, [{\"a\"}, {\"b\"}]>}) -> tensor<8x8xf32> {\n"
             "  %%0 = sdy.reshard %%arg0 <@m42, [{\"b\"}, {\"a\"}]> : tensor<8x8xf32>\n"
             "  return %%0 : tensor<8x8xf32>\n}\n",
             mesh_defs);
    for (long n = 0;; n++) {
        cm_error err;
        cm_error_clear(&err);
        sp_module *m = NULL;
        assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
        cm_alloc_fail_after(n);
        cm_status st = sp_pass_reshard_to_collectives(m, false, &err);
        cm_alloc_fail_after(-1);
        sp_module_destroy(m);
        if (st == CM_OK) {
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_true(n < 1000);
    }
}

static void test_sp_pass_annotate_device_groups_sets_attribute(void **state)
{
    (void)state;
    const char *text =
        "sdy.mesh @nm = <[\"x\"=2, \"y\"=2], device_ids=[3, 2, 1, 0]>\n"
        "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@nm, [{\"x\"}, "
        "{}]>}) -> tensor<8x8xf32> {\n"
        "  %0 = sdy.all_gather [{\"x\"}, {}] %arg0 out_sharding=<@nm, [{}, {}]> : "
        "tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n}\n";
    char *out = run_pass(text, true);
    assert_contains(out, "sdy.device_groups = dense<[[3, 1], [2, 0]]> : tensor<2x2xi64>");
    cm_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_collective_groups_1d_mesh),
        cmocka_unit_test(test_sp_collective_groups_2d_mesh_each_axis),
        cmocka_unit_test(test_sp_collective_groups_axis_order_sets_member_order),
        cmocka_unit_test(test_sp_collective_groups_3d_mesh_outer_axes),
        cmocka_unit_test(test_sp_collective_groups_sub_axis),
        cmocka_unit_test(test_sp_collective_groups_explicit_device_ids),
        cmocka_unit_test(test_sp_collective_groups_no_axes_gives_single_devices),
        cmocka_unit_test(test_sp_collective_groups_rejects_unknown_axis),
        cmocka_unit_test(test_sp_collective_groups_rejects_overlapping_sub_axes),
        cmocka_unit_test(test_sp_collective_groups_oom),
        cmocka_unit_test(test_sp_local_shape_divisible),
        cmocka_unit_test(test_sp_local_shape_rounds_up_when_not_divisible),
        cmocka_unit_test(test_sp_local_shape_sub_axis_and_dynamic),
        cmocka_unit_test(test_sp_local_shape_replicated),
        cmocka_unit_test(test_sp_local_shape_rejects_rank_mismatch_and_unknown_axis),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_gathers_a_suffix),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_moves_an_axis),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_swaps_and_splits),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_reorders_devices),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_drops_redundant),
        cmocka_unit_test(test_sp_pass_reshard_to_collectives_oom),
        cmocka_unit_test(test_sp_pass_annotate_device_groups_sets_attribute),
    };
    (void)N_OF(tests);
    return cmocka_run_group_tests_name("sp_collectives", tests, NULL, NULL);
}
