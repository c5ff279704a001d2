/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_gen: generated transformer modules print and read
 * back to the same text, hit the requested op count, propagate the batch
 * sharding to the activations, reject bad options, and survive OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_gen.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_diag.h"
#include "sp_mlir.h"

/* Small sizes, all distinct, so dim 0 == batch identifies activations. */
static void small_opts(sp_gen_opts *o)
{
    sp_gen_opts_init(o);
    o->n_layers = 2;
    o->batch = 4;
    o->seq = 8;
    o->d_model = 16;
    o->heads = 2;
    o->d_ff = 32;
}

static char *print_module(const sp_module *m)
{
    sp_print_opts po = {.generic = false, .debug_info = false};
    cm_buf b;
    cm_buf_init(&b);
    sp_mlir_print(m, &po, &b);
    assert_false(b.oom);
    return cm_buf_take(&b);
}

/* print -> read -> print gives the same text (and the same op count when
 * no pass has detached ops from their blocks). */
static void check_roundtrip(const sp_module *m, bool same_op_count)
{
    char *text = print_module(m);
    sp_module *m2 = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_mlir_read(text, strlen(text), 0, &m2, &err);
    if (st != CM_OK) {
        fprintf(stderr, "read back failed at %s: %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    if (same_op_count) {
        assert_int_equal(m2->n_ops, m->n_ops);
    }
    char *text2 = print_module(m2);
    assert_string_equal(text, text2);
    cm_free(text2);
    cm_free(text);
    sp_module_destroy(m2);
}

static void test_sp_gen_transformer_roundtrips_through_text(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        sp_gen_opts o;
        small_opts(&o);
        o.backward = variant & 1;
        o.act = variant & 2 ? SP_GEN_ACT_TANH : SP_GEN_ACT_RELU;
        o.constraints = variant != 3;
        o.layers_per_func = variant == 2 ? 1 : 16;
        sp_module *m = NULL;
        sp_gen_info info;
        assert_int_equal(sp_gen_transformer(&o, 0, &m, &info, NULL), CM_OK);
        assert_int_equal(info.n_layers, 2);
        assert_int_equal(info.n_funcs, variant == 2 ? 2 : 1);
        assert_int_equal(info.n_ops, m->n_ops);
        check_roundtrip(m, true);
        sp_module_destroy(m);
    }
}

static void test_sp_gen_transformer_prints_expected_ops(void **state)
{
    (void)state;
    sp_gen_opts o;
    small_opts(&o);
    o.n_layers = 1;
    sp_module *m = NULL;
    assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, NULL), CM_OK);
    char *text = print_module(m);
    static const char *const want[] = {
        "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>",
        "func.func @main(%arg0: tensor<4x8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"data\"}, {}, {}]>}, %arg1: tensor<16x16xf32> {sdy.sharding = "
        "#sdy.sharding<@mesh, [{}, {\"model\"}]>}",
        "tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"model\"}, {}]>}",
        "tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"model\"}]>}",
        "stablehlo.dot_general",
        "batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3]",
        "contracting_dims = [0, 1] x [0, 1]",
        "stablehlo.transpose",
        "stablehlo.reshape",
        "applies stablehlo.maximum across dimensions = [3]",
        "sdy.sharding_constraint",
        "stablehlo.sign",
        "stablehlo.subtract",
        "return",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (strstr(text, want[i]) == NULL) {
            fprintf(stderr, "missing: %s\n", want[i]);
        }
        assert_non_null(strstr(text, want[i]));
    }
    cm_free(text);
    sp_module_destroy(m);
}

static void test_sp_gen_transformer_hits_target_ops(void **state)
{
    (void)state;
    static const size_t targets[] = {1, 500, 10000, 25000};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        sp_gen_opts o;
        small_opts(&o);
        o.n_layers = 0;
        o.layers_per_func = 4;
        sp_module *m = NULL;
        sp_gen_info info;
        assert_int_equal(sp_gen_transformer(&o, targets[i], &m, &info, NULL), CM_OK);
        assert_true(info.n_layers >= 1);
        assert_true(info.ops_per_layer > 100);
        assert_int_equal(info.n_ops, m->n_ops);
        assert_int_equal(info.n_funcs, (info.n_layers + 3) / 4);
        if (targets[i] > info.ops_per_layer * 2) {
            /* at least the target, and one layer (+ a function) dropped would be below it */
            assert_true(info.n_ops >= targets[i]);
            assert_true(info.n_ops < targets[i] + info.ops_per_layer + 64);
        }
        sp_module_destroy(m);
    }
}

static bool sharded_on_data_dim0(const sp_sharding *s)
{
    return s != NULL && s->rank > 0 && s->dims[0].n_axes > 0 &&
           strcmp(s->dims[0].axes[0].name, "data") == 0;
}

static void test_sp_gen_propagation_shards_activations_on_data(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        bool pipeline = variant >= 2;
        sp_gen_opts o;
        small_opts(&o);
        o.backward = variant & 1;
        sp_module *m = NULL;
        assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, NULL), CM_OK);
        sp_prop_opts po;
        sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
        sp_diags d;
        sp_diags_init(&d);
        cm_error err;
        cm_error_clear(&err);
        if (pipeline) {
            assert_int_equal(sp_pass_propagation_pipeline(m, &po, &d, &err), CM_OK);
        } else {
            assert_int_equal(sp_propagate(m, &po, &d, &err), CM_OK);
        }
        for (uint32_t k = 0; k < d.n; k++) {
            fprintf(stderr, "diag: %s\n", d.items[k].msg);
        }
        assert_int_equal(d.n, 0);
        sp_diags_fini(&d);
        uint32_t checked = 0, bad = 0;
        for (uint32_t i = 0; i < m->n_ops; i++) {
            const sp_op *op = &m->ops[i];
            if (op->n_results != 1 || op->kind == SP_OP_CONSTANT || op->parent_block == SP_NONE) {
                continue;
            }
            const sp_type *t = sp_value_type(m, op->first_result);
            if (t->kind != SP_TYPE_TENSOR || t->rank < 2 || t->dims[0] != o.batch) {
                continue;
            }
            checked++;
            const sp_sharding *s = NULL;
            const sp_attr *a = sp_op_attr(m, i, "sdy.sharding");
            if (a != NULL && a->kind == SP_ATTR_SHARDING_LIST && a->u.shardings.n == 1) {
                s = a->u.shardings.items[0];
            }
            a = sp_op_attr(m, i, "sharding");
            if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && a != NULL) {
                s = a->u.sharding;
            }
            if (!sharded_on_data_dim0(s)) {
                fprintf(stderr, "op %u (%s) result is not sharded on data in dim 0\n", i, op->name);
                bad++;
            }
        }
        assert_true(checked > 100);
        assert_int_equal(bad, 0);
        check_roundtrip(m, !pipeline);
        sp_module_destroy(m);
    }
}

static void test_sp_gen_transformer_rejects_bad_opts(void **state)
{
    (void)state;
    static const struct {
        int field;
        int64_t value;
        const char *path;
    } cases[] = {
        {0, 0, "/batch"}, {1, -3, "/seq"},      {2, 15, "/d_model"},   {3, 0, "/heads"},
        {4, -1, "/d_ff"}, {5, 0, "/mesh_data"}, {6, 0, "/mesh_model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp_gen_opts o;
        small_opts(&o);
        int64_t *f[7] = {&o.batch, &o.seq,       &o.d_model,   &o.heads,
                         &o.d_ff,  &o.mesh_data, &o.mesh_model};
        *f[cases[i].field] = cases[i].value;
        sp_module *m = (sp_module *)&o; /* must be reset to NULL */
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, &err), CM_EINVAL);
        assert_int_equal(err.code, CM_EINVAL);
        assert_string_equal(err.path, cases[i].path);
        assert_null(m);
    }
}

static void test_sp_gen_transformer_rejects_functions_over_4096_args(void **state)
{
    (void)state;
    sp_gen_opts o;
    small_opts(&o);
    o.n_layers = 400;
    o.layers_per_func = 373;
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "/layers_per_func");
    assert_null(m);
    o.layers_per_func = 0;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "/n_layers");
    assert_null(m);
    /* 372 layers (4093 arguments) is the largest function */
    o.n_layers = 372;
    o.backward = false;
    assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, NULL), CM_OK);
    sp_module_destroy(m);
}

static void test_sp_gen_transformer_oom(void **state)
{
    (void)state;
    sp_gen_opts o;
    small_opts(&o);
    o.n_layers = 0;
    o.layers_per_func = 1;
    for (long n = 0;; n++) {
        sp_module *m = NULL;
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_gen_transformer(&o, 300, &m, NULL, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_non_null(m);
            sp_module_destroy(m);
            assert_true(n > 10);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_int_equal(err.code, CM_ENOMEM);
        assert_null(m);
        assert_true(n < 100000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_gen_transformer_roundtrips_through_text),
        cmocka_unit_test(test_sp_gen_transformer_prints_expected_ops),
        cmocka_unit_test(test_sp_gen_transformer_hits_target_ops),
        cmocka_unit_test(test_sp_gen_propagation_shards_activations_on_data),
        cmocka_unit_test(test_sp_gen_transformer_rejects_bad_opts),
        cmocka_unit_test(test_sp_gen_transformer_rejects_functions_over_4096_args),
        cmocka_unit_test(test_sp_gen_transformer_oom),
    };
    return cmocka_run_group_tests_name("sp_gen", tests, NULL, NULL);
}
