/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the advisor's what-if (planner/sp_whatif.c): each edit kind
 * changes what it should on a small module; the incremental re-propagation
 * prints exactly the module a full re-propagation prints, for many edits on
 * the Flax MLP and the transformer template (and a region smaller than the
 * module where constraints bound it); bad VREFs and edits give JSON-path
 * errors; the CLI text VREF form; OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_whatif.h"
#include "sp_example.h"
#include "sp_gen.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_mlir.h"

#define SMALL                                                                                      \
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"                                               \
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "   \
    "{}]>}, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"                                      \
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x16xf32>\n"                                       \
    "  %1 = stablehlo.exponential %0 : tensor<8x16xf32>\n"                                         \
    "  %2 = sdy.sharding_constraint %1 <@mesh, [{}, {\"model\"}]> : tensor<8x16xf32>\n"            \
    "  %3 = stablehlo.negate %2 : tensor<8x16xf32>\n"                                              \
    "  return %3 : tensor<8x16xf32>\n"                                                             \
    "}\n"

static void add_edits(sp_edit_list *l, const char *json)
{
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_edit_list_decode(l, json, strlen(json), &err);
    if (st != CM_OK) {
        fprintf(stderr, "decode: %s %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
}

/* The input options every run() uses (the tests of the plan's pass set it). */
static const sp_input_opts *run_io = NULL;

static sp_whatif *run(const char *text, const char *edits, bool full, bool keep, cm_error *err)
{
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, edits);
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    o.full = full;
    o.keep_propagated = keep;
    o.no_cost = keep;
    sp_whatif *w = NULL;
    cm_error_clear(err);
    cm_status st = sp_whatif_run(text, strlen(text), run_io, &l, &o, &w, err);
    sp_edit_list_fini(&l);
    if (st != CM_OK) {
        assert_null(w);
        return NULL;
    }
    return w;
}

static sp_whatif *run_ok(const char *text, const char *edits)
{
    cm_error err;
    sp_whatif *w = run(text, edits, false, false, &err);
    if (w == NULL) {
        fprintf(stderr, "whatif: %s %s\n", err.path, err.msg);
    }
    assert_non_null(w);
    return w;
}

static const sp_whatif_change *change_of(const sp_whatif *w, const char *label)
{
    for (uint32_t i = 0; i < sp_whatif_n_changed(w); i++) {
        if (strcmp(sp_whatif_changed_at(w, i)->label, label) == 0) {
            return sp_whatif_changed_at(w, i);
        }
    }
    return NULL;
}

/* ---- each edit kind -------------------------------------------------------------------- */

static void test_sp_whatif_constrain_changes_downstream(void **state)
{
    (void)state;
    sp_whatif *w = run_ok(SMALL, "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"
                                 "\"sharding\":\"<@mesh, [{}, {\\\"model\\\"}]>\"}");
    /* the add now takes "model" on dimension 1 and "data" is no longer on it */
    const sp_whatif_change *c = change_of(w, "result 0 of /ops/0 (stablehlo.add)");
    assert_non_null(c);
    assert_non_null(strstr(c->after, "\"model\""));
    assert_null(strstr(c->after, "\"data\""));
    assert_non_null(strstr(sp_whatif_mlir(w, NULL), "sdy.sharding_constraint %0"));
    const sp_whatif_stats *s = sp_whatif_get_stats(w);
    assert_true(s->incremental);
    assert_true(s->region_ops > 0 && s->region_ops < s->total_ops);
    sp_whatif_destroy(w);
}

static void test_sp_whatif_unconstrain_removes_constraint(void **state)
{
    (void)state;
    sp_whatif *w = run_ok(SMALL, "{\"kind\":\"unconstrain\",\"op\":\"/ops/2\"}");
    /* without the constraint, the negate follows the input's "data" */
    const sp_whatif_change *c = change_of(w, "result 0 of /ops/3 (stablehlo.negate)");
    assert_non_null(c);
    assert_non_null(strstr(c->before, "\"model\""));
    assert_non_null(strstr(c->after, "\"data\""));
    assert_null(strstr(sp_whatif_mlir(w, NULL), "sdy.sharding_constraint"));
    assert_null(change_of(w, "result 0 of /ops/2 (sdy.sharding_constraint)"));
    sp_whatif_destroy(w);
}

static void test_sp_whatif_set_sharding_input_and_clear(void **state)
{
    (void)state;
    sp_whatif *w = run_ok(SMALL, "{\"kind\":\"set_sharding\",\"value\":\"in:1\","
                                 "\"sharding\":\"<@mesh, [{}, {\\\"model\\\"}p1]>\"}");
    const sp_whatif_change *c = change_of(w, "%arg1");
    assert_non_null(c);
    assert_true(c->before == NULL || strstr(c->before, "p1") == NULL);
    /* user-priority propagation drops priorities after its rounds, as Shardy does */
    assert_non_null(strstr(c->after, "\"model\""));
    assert_null(strstr(c->after, "p1"));
    sp_whatif_destroy(w);
    w = run_ok(SMALL, "{\"kind\":\"set_sharding\",\"value\":{\"input\":0},\"sharding\":null}");
    c = change_of(w, "result 0 of /ops/0 (stablehlo.add)");
    assert_non_null(c);
    assert_non_null(strstr(c->before, "\"data\""));
    assert_true(c->after == NULL || strstr(c->after, "\"data\"") == NULL);
    assert_null(strstr(sp_whatif_mlir(w, NULL), "[{\"data\"}, {}]>}"));
    sp_whatif_destroy(w);
    /* an output's sharding */
    w = run_ok(SMALL, "{\"kind\":\"set_sharding\",\"value\":{\"output\":0},"
                      "\"sharding\":\"<@mesh, [{\\\"data\\\"}, {}]>\"}");
    c = change_of(w, "output 0");
    assert_non_null(c);
    assert_non_null(strstr(c->after, "\"data\""));
    sp_whatif_destroy(w);
}

static void test_sp_whatif_barrier_and_unbarrier(void **state)
{
    (void)state;
    sp_whatif *w = run_ok(SMALL, "{\"kind\":\"barrier\",\"value\":{\"input\":0},"
                                 "\"direction\":\"NONE\"}");
    const sp_whatif_change *c = change_of(w, "result 0 of /ops/0 (stablehlo.add)");
    assert_non_null(c);
    assert_true(c->after == NULL || strstr(c->after, "\"data\"") == NULL);
    assert_non_null(strstr(sp_whatif_mlir(w, NULL), "allowed_direction=NONE"));
    sp_whatif_destroy(w);
    static const char barred[] =
        "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
        "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "
        "{}]>}) -> tensor<8x16xf32> {\n"
        "  %0 = sdy.propagation_barrier %arg0 allowed_direction=NONE : tensor<8x16xf32>\n"
        "  %1 = stablehlo.negate %0 : tensor<8x16xf32>\n"
        "  return %1 : tensor<8x16xf32>\n"
        "}\n";
    w = run_ok(barred, "{\"kind\":\"unbarrier\",\"op\":\"/ops/0\"}");
    c = change_of(w, "result 0 of /ops/1 (stablehlo.negate)");
    assert_non_null(c);
    assert_non_null(strstr(c->after, "\"data\""));
    sp_whatif_destroy(w);
}

#define CUSTOM                                                                                     \
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"                                               \
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "   \
    "{}]>}, %arg1: tensor<16x32xf32>) -> tensor<8x32xf32> {\n"                                     \
    "  %0 = stablehlo.custom_call @my_matmul(%arg0, %arg1) : (tensor<8x16xf32>, "                  \
    "tensor<16x32xf32>) -> tensor<8x32xf32>\n"                                                     \
    "  %1 = stablehlo.negate %0 : tensor<8x32xf32>\n"                                              \
    "  return %1 : tensor<8x32xf32>\n"                                                             \
    "}\n"

static void test_sp_whatif_rule_and_custom_rule(void **state)
{
    (void)state;
    static const char *const edits[] = {
        "{\"kind\":\"rule\",\"op\":\"/ops/0\",\"rule\":\"([i, k], [k, j])->([i, j])\"}",
        "{\"kind\":\"rule\",\"op\":\"/ops/0\",\"rule\":\"i k, k j -> i j\"}",
        "{\"kind\":\"custom_rule\",\"target\":\"my_matmul\",\"rule\":\"([i, k], [k, j])->([i, "
        "j])\"}",
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        sp_whatif *w = run_ok(CUSTOM, edits[i]);
        const sp_whatif_change *c = change_of(w, "result 0 of /ops/0 (stablehlo.custom_call)");
        assert_non_null(c);
        assert_non_null(strstr(c->after, "\"data\""));
        assert_non_null(strstr(sp_whatif_mlir(w, NULL), "sdy.sharding_rule"));
        assert_non_null(strstr(sp_whatif_mlir(w, NULL), "reduction={j}"));
        sp_whatif_destroy(w);
    }
}

static void test_sp_whatif_edit_text_prints_edited_module(void **state)
{
    (void)state;
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l,
              "[{\"kind\":\"constrain\",\"value\":\"/ops/1\",\"sharding\":\"<@mesh, [{}, {}]>\"},"
              " {\"kind\":\"unconstrain\",\"op\":\"/ops/2\"}]");
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_whatif_edit_text(SMALL, strlen(SMALL), NULL, &l, &b, &err), CM_OK);
    assert_non_null(strstr(b.data, "sdy.sharding_constraint %1 <@mesh, [{}, {}]>"));
    assert_null(strstr(b.data, "[{}, {\"model\"}]> :"));
    /* the edits round-trip through their JSON */
    cm_buf j;
    cm_buf_init(&j);
    sp_edit_write_json(&l.items[0], &j);
    assert_string_equal(j.data,
                        "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/1\",\"result\":0},"
                        "\"sharding\":\"<@mesh, [{}, {}]>\"}");
    cm_buf_fini(&j);
    cm_buf_fini(&b);
    sp_edit_list_fini(&l);
}

/* ---- incremental equals full --------------------------------------------------------------- */

/* Runs edits incrementally and in full; the propagated modules must print alike. */
static bool same_as_full(const char *text, const char *edits, uint32_t *region, uint32_t *total)
{
    cm_error err;
    sp_whatif *a = run(text, edits, false, true, &err);
    if (a == NULL) {
        assert_int_equal(err.code, CM_EINVAL); /* e.g. a sharding that does not fit */
        return false;
    }
    sp_whatif *b = run(text, edits, true, true, &err);
    assert_non_null(b);
    size_t la, lb;
    const char *ta = sp_whatif_propagated(a, &la), *tb = sp_whatif_propagated(b, &lb);
    if (la != lb || memcmp(ta, tb, la) != 0) {
        fprintf(stderr, "incremental differs from full for %s\n", edits);
        for (size_t i = 0; i < la && i < lb; i++) {
            if (ta[i] != tb[i]) {
                fprintf(stderr, "at byte %zu:\n%.300s\n----\n%.300s\n", i,
                        ta + (i > 100 ? i - 100 : 0), tb + (i > 100 ? i - 100 : 0));
                break;
            }
        }
        fail();
    }
    assert_int_equal(sp_whatif_n_changed(a), sp_whatif_n_changed(b));
    *region = sp_whatif_get_stats(a)->region_ops;
    *total = sp_whatif_get_stats(a)->total_ops;
    sp_whatif_destroy(a);
    sp_whatif_destroy(b);
    return true;
}

static char *example(sp_example_model model, uint32_t layers, bool train, bool mlir)
{
    sp_example_opts o;
    sp_example_opts_init(&o);
    o.model = model;
    o.layers = layers;
    o.train = train;
    if (model == SP_EXAMPLE_TRANSFORMER) {
        o.d_model = 256;
        o.heads = 4;
        o.seq = 32;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_example_graph_json(&o, &b, &err), CM_OK);
    if (!mlir) {
        return cm_buf_take(&b);
    }
    /* its MLIR: the edited text of no edit */
    sp_edit_list l;
    sp_edit_list_init(&l);
    cm_buf m;
    cm_buf_init(&m);
    assert_int_equal(sp_whatif_edit_text(b.data, b.len, NULL, &l, &m, &err), CM_OK);
    sp_edit_list_fini(&l);
    cm_buf_fini(&b);
    return cm_buf_take(&m);
}

/* Constrains op results (every stride-th top-level op) with a few shardings,
 * plus other edit kinds, checking incremental == full each time. */
static void sweep_func(const char *text, uint32_t fi, uint32_t stride, uint32_t *n_checked,
                       bool *smaller);

static void sweep_edits(const char *text, uint32_t stride, uint32_t *n_checked, bool *smaller)
{
    sweep_func(text, 0, stride, n_checked, smaller);
}

/* The same over the fi-th function, named by /functions/FI/ops/I paths. */
static void sweep_func(const char *text, uint32_t fi, uint32_t stride, uint32_t *n_checked,
                       bool *smaller)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    bool json = text[0] == '{';
    char *mlir = NULL;
    if (json) {
        sp_edit_list l;
        sp_edit_list_init(&l);
        cm_buf b;
        cm_buf_init(&b);
        assert_int_equal(sp_whatif_edit_text(text, strlen(text), NULL, &l, &b, &err), CM_OK);
        sp_edit_list_fini(&l);
        mlir = cm_buf_take(&b);
    }
    assert_int_equal(sp_mlir_read(json ? mlir : text, strlen(json ? mlir : text), 0, &m, &err),
                     CM_OK);
    uint32_t f = SP_NONE, seen = 0;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && f == SP_NONE; i++) {
        if (m->ops[body->ops[i]].kind == SP_OP_FUNC_FUNC && seen++ == fi) {
            f = body->ops[i];
        }
    }
    assert_int_not_equal(f, SP_NONE);
    char fn[32];
    snprintf(fn, sizeof fn, "/functions/%u", fi);
    const sp_block *blk = &m->blocks[m->ops[f].regions[0].blocks[0]];
    static const char *const shapes[] = {"closed-data", "open-model", "replicated"};
    char edit[512], sh[256];
    for (uint32_t i = 0; i < blk->n_ops; i += stride) {
        const sp_op *op = &m->ops[blk->ops[i]];
        if (op->n_results == 0) {
            continue;
        }
        const sp_type *t = sp_value_type(m, op->first_result);
        if (t->kind != SP_TYPE_TENSOR || t->rank == 0) {
            continue;
        }
        for (size_t k = 0; k < 3; k++) {
            cm_buf b;
            cm_buf_init(&b);
            cm_buf_puts(&b, "<@mesh, [");
            for (uint32_t d = 0; d < t->rank; d++) {
                if (d > 0) {
                    cm_buf_puts(&b, ", ");
                }
                if (k == 0 && d == 0) {
                    cm_buf_puts(&b, "{\\\"data\\\"}");
                } else if (k == 1 && d + 1 == t->rank) {
                    cm_buf_puts(&b, "{\\\"model\\\", ?}");
                } else {
                    cm_buf_puts(&b, k == 1 ? "{?}" : "{}");
                }
            }
            cm_buf_puts(&b, "]>");
            snprintf(sh, sizeof sh, "%s", b.data);
            cm_buf_fini(&b);
            const char *kind = op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && k == 2 ? "unconstrain"
                               : k == 2 && i % 2 == 0                              ? "barrier"
                                                                                   : "constrain";
            if (strcmp(kind, "unconstrain") == 0) {
                snprintf(edit, sizeof edit, "{\"kind\":\"unconstrain\",\"op\":\"%s/ops/%u\"}", fn,
                         i);
            } else if (strcmp(kind, "barrier") == 0) {
                snprintf(edit, sizeof edit,
                         "{\"kind\":\"barrier\",\"value\":\"%s/ops/%u\",\"direction\":\"%s\"}", fn,
                         i, i % 4 == 0 ? "FORWARD" : "NONE");
            } else {
                snprintf(
                    edit, sizeof edit,
                    "{\"kind\":\"constrain\",\"value\":{\"op\":\"%s/ops/%u\"},\"sharding\":\"%s\"}",
                    fn, i, sh);
            }
            (void)shapes;
            uint32_t region = 0, total = 0;
            if (same_as_full(text, edit, &region, &total)) {
                (*n_checked)++;
                *smaller = *smaller || region < total;
            }
        }
    }
    /* set_sharding on every input, with and without a priority, and cleared */
    const sp_attr *nm = sp_op_attr(m, f, "sym_name");
    char at[80];
    snprintf(at, sizeof at,
             "@%s:", nm != NULL && nm->kind == SP_ATTR_STRING ? nm->u.str.s : "main");
    for (uint32_t k = 0; k<blk->n_args; k += stride> 4 ? 2 : 1) {
        const sp_type *t = sp_value_type(m, blk->first_arg + k);
        if (t->kind != SP_TYPE_TENSOR || t->rank == 0) {
            continue;
        }
        snprintf(edit, sizeof edit,
                 "{\"kind\":\"set_sharding\",\"value\":\"%sin:%u\",\"sharding\":null}", at, k);
        uint32_t region = 0, total = 0;
        *n_checked += same_as_full(text, edit, &region, &total);
        snprintf(edit, sizeof edit,
                 "{\"kind\":\"set_sharding\",\"value\":\"%sin:%u\",\"sharding\":\"<@mesh, "
                 "[{\\\"model\\\"}%s%s]>\"}",
                 at, k, t->rank > 1 ? ", " : "", t->rank > 1 ? "{?}" : "");
        *n_checked += same_as_full(text, edit, &region, &total);
    }
    sp_module_destroy(m);
    cm_free(mlir);
}

static void test_sp_whatif_incremental_equals_full_mlp(void **state)
{
    (void)state;
    uint32_t n = 0;
    bool smaller = false;
    char *mlp = example(SP_EXAMPLE_MLP, 4, false, false); /* graph document */
    sweep_edits(mlp, 1, &n, &smaller);
    cm_free(mlp);
    assert_true(n >= 60);
    assert_true(smaller);
    n = 0;
    smaller = false;
    char *train = example(SP_EXAMPLE_MLP, 2, true, true); /* MLIR, training step */
    sweep_edits(train, 3, &n, &smaller);
    cm_free(train);
    assert_true(n >= 30);
}

static void test_sp_whatif_incremental_equals_full_transformer(void **state)
{
    (void)state;
    uint32_t n = 0;
    bool smaller = false;
    char *tr = example(SP_EXAMPLE_TRANSFORMER, 2, false, true);
    sweep_edits(tr, 2, &n, &smaller);
    cm_free(tr);
    assert_true(n >= 40);
    assert_true(smaller);
    n = 0;
    char *train = example(SP_EXAMPLE_TRANSFORMER, 1, true, true);
    sweep_edits(train, 9, &n, &smaller);
    cm_free(train);
    assert_true(n >= 20);
}

/* Several functions calling each other (sp_gen: 2 layers per function, with
 * the backward pass): the region stays within the function it starts in. */
static void test_sp_whatif_incremental_equals_full_functions(void **state)
{
    (void)state;
    sp_gen_opts o;
    sp_gen_opts_init(&o);
    o.n_layers = 4;
    o.layers_per_func = 2;
    o.batch = 4;
    o.seq = 8;
    o.d_model = 32;
    o.heads = 2;
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_gen_transformer(&o, 0, &m, NULL, &err), CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts po = {false, false};
    sp_mlir_print(m, &po, &b);
    sp_module_destroy(m);
    uint32_t n = 0;
    bool smaller = false;
    sweep_func(b.data, 0, 7, &n, &smaller);
    sweep_func(b.data, 1, 11, &n, &smaller);
    cm_buf_fini(&b);
    assert_true(n >= 30);
    assert_true(smaller);
}

static void test_sp_whatif_several_edits_equal_full(void **state)
{
    (void)state;
    char *mlp = example(SP_EXAMPLE_MLP, 4, false, true);
    uint32_t region = 0, total = 0;
    assert_true(
        same_as_full(mlp,
                     "[{\"kind\":\"unconstrain\",\"op\":\"/ops/4\"},"
                     " {\"kind\":\"constrain\",\"value\":\"/ops/0\",\"sharding\":\"<@mesh, [{}, "
                     "{\\\"data\\\"}]>\"},"
                     " {\"kind\":\"set_sharding\",\"value\":\"in:1\",\"sharding\":\"<@mesh, [{}, "
                     "{\\\"model\\\"}]>\"},"
                     " {\"kind\":\"barrier\",\"value\":\"/ops/6\",\"direction\":\"BACKWARD\"}]",
                     &region, &total));
    assert_true(region < total);
    /* a new priority round: a full re-propagation, said so */
    cm_error err;
    sp_whatif *w = run(mlp,
                       "{\"kind\":\"set_sharding\",\"value\":\"in:1\","
                       "\"sharding\":\"<@mesh, [{}, {\\\"model\\\"}p3]>\"}",
                       false, false, &err);
    assert_non_null(w);
    assert_false(sp_whatif_get_stats(w)->incremental);
    assert_int_equal(sp_whatif_get_stats(w)->region_ops, sp_whatif_get_stats(w)->total_ops);
    assert_non_null(strstr(sp_whatif_get_stats(w)->why_full, "priority"));
    cm_buf b;
    cm_buf_init(&b);
    sp_whatif_write_json(w, 7, &b);
    assert_non_null(strstr(b.data, "\"plan_id\":7"));
    assert_non_null(strstr(b.data, "\"region\":{\"ops\":"));
    assert_non_null(strstr(b.data, "\"cost\":{\"before\":{\"step_s\":"));
    cm_buf_fini(&b);
    sp_whatif_destroy(w);
    cm_free(mlp);
}

/* A cancel hook that says stop fails the what-if with CM_EIO; one that
 * counts its calls sees each phase once or more and lets it finish. */
static bool stop_now(void *ctx)
{
    (void)ctx;
    return true;
}

static bool count_calls(void *ctx)
{
    (*(int *)ctx)++;
    return false;
}

static void test_sp_whatif_cancel_hook(void **state)
{
    (void)state;
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},\"sharding\":\"<@mesh, "
                  "[{}, {}]>\"}");
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    o.cancel = stop_now;
    cm_error err;
    cm_error_clear(&err);
    sp_whatif *w = NULL;
    assert_int_equal(sp_whatif_run(SMALL, strlen(SMALL), NULL, &l, &o, &w, &err), CM_EIO);
    assert_null(w);
    assert_non_null(strstr(err.msg, "stopped"));
    int calls = 0;
    o.cancel = count_calls;
    o.cancel_ctx = &calls;
    cm_error_clear(&err);
    assert_int_equal(sp_whatif_run(SMALL, strlen(SMALL), NULL, &l, &o, &w, &err), CM_OK);
    assert_true(calls >= 4); /* read, original, edited, each costing */
    sp_whatif_destroy(w);
    sp_edit_list_fini(&l);
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void expect_err(const char *text, const char *edits, const char *path)
{
    sp_edit_list l;
    sp_edit_list_init(&l);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_edit_list_decode(&l, edits, strlen(edits), &err);
    if (st == CM_OK) {
        sp_whatif *w = NULL;
        st = sp_whatif_run(text, strlen(text), NULL, &l, NULL, &w, &err);
        if (w != NULL) {
            fprintf(stderr, "accepted: %s\n", edits);
        }
        assert_null(w);
    }
    assert_int_equal(st, CM_EINVAL);
    if (strcmp(err.path, path) != 0) {
        fprintf(stderr, "want %s, got %s: %s\n", path, err.path, err.msg);
    }
    assert_string_equal(err.path, path);
    sp_edit_list_fini(&l);
}

static void test_sp_whatif_rejects_bad_edits_with_paths(void **state)
{
    (void)state;
    expect_err(
        SMALL,
        "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/99\"},\"sharding\":\"<@mesh, []>\"}",
        "/edits/0/value/op");
    cm_error err;
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/99\"},\"sharding\":\"<@mesh, "
                  "[{}, {}]>\"}");
    cm_error_clear(&err);
    sp_whatif *w = NULL;
    assert_int_equal(sp_whatif_run(SMALL, strlen(SMALL), NULL, &l, NULL, &w, &err), CM_EINVAL);
    assert_string_equal(err.msg, "no op at /ops/99");
    sp_edit_list_fini(&l);
    expect_err(SMALL, "[{\"kind\":\"unconstrain\",\"op\":\"/ops/2\"}, {\"kind\":\"frobnicate\"}]",
               "/edits/1/kind");
    expect_err(SMALL,
               "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\",\"result\":1},"
               "\"sharding\":\"<@mesh, [{}, {}]>\"}",
               "/edits/0/value/result");
    expect_err(SMALL,
               "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},\"sharding\":\"<@nomesh, "
               "[{}, {}]>\"}",
               "/edits/0/sharding");
    expect_err(
        SMALL,
        "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},\"sharding\":\"<@mesh, [{}]>\"}",
        "/edits/0/sharding");
    expect_err(SMALL,
               "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},\"sharding\":\"<@mesh, "
               "[{\\\"zz\\\"}, {}]>\"}",
               "/edits/0/sharding");
    expect_err(SMALL, "{\"kind\":\"unconstrain\",\"op\":\"/ops/0\"}", "/edits/0/op");
    expect_err(SMALL, "{\"kind\":\"unbarrier\",\"op\":\"/ops/2\"}", "/edits/0/op");
    expect_err(
        SMALL,
        "{\"kind\":\"constrain\",\"value\":{\"output\":0},\"sharding\":\"<@mesh, [{}, {}]>\"}",
        "/edits/0/value");
    expect_err(SMALL, "{\"kind\":\"set_sharding\",\"value\":{\"input\":5},\"sharding\":null}",
               "/edits/0/value/input");
    expect_err(
        SMALL,
        "{\"kind\":\"set_sharding\",\"value\":{\"input\":0,\"function\":\"f\"},\"sharding\":null}",
        "/edits/0/value/function");
    expect_err(
        SMALL,
        "{\"kind\":\"set_sharding\",\"value\":{\"input\":0,\"op\":\"/ops/1\"},\"sharding\":null}",
        "/edits/0/value");
    expect_err(SMALL, "{\"kind\":\"set_sharding\",\"value\":\"arg:0\",\"sharding\":null}",
               "/edits/0/value");
    expect_err(SMALL, "{\"kind\":\"barrier\",\"value\":\"in:0\",\"direction\":\"SIDEWAYS\"}",
               "/edits/0/direction");
    expect_err(SMALL, "{\"kind\":\"constrain\",\"value\":\"in:0\"}", "/edits/0/sharding");
    expect_err(
        SMALL,
        "{\"kind\":\"constrain\",\"value\":\"in:0\",\"sharding\":\"<@mesh, [{}, {}]>\",\"x\":1}",
        "/edits/0/x");
    expect_err(SMALL, "{\"kind\":\"rule\",\"op\":\"/ops/0\",\"rule\":\"([i, j])->([i, j])\"}",
               "/edits/0/rule");
    expect_err(SMALL,
               "{\"kind\":\"rule\",\"op\":\"/ops/0/regions/0/ops/0\",\"rule\":\"i j -> i j\"}",
               "/edits/0/op");
    expect_err(CUSTOM,
               "{\"kind\":\"custom_rule\",\"target\":\"nope\",\"rule\":\"i k, k j -> i j\"}",
               "/edits/0/target");
    expect_err(CUSTOM, "{\"kind\":\"rule\",\"op\":\"/ops/0\",\"rule\":\"i k, k j -> i\"}",
               "/edits/0/rule");
    expect_err(SMALL, "{\"edits\": 3}", "/edits");
    expect_err(SMALL, "[1]", "/edits/0");
    expect_err(SMALL,
               "[{\"kind\":\"unconstrain\",\"op\":\"/ops/2\"},{\"kind\":\"unconstrain\",\"op\":\"/"
               "ops/2\"}]",
               "/edits/1/op");
    expect_err(SMALL, "{\"kind\":", "1:8");
}

static void test_sp_vref_parse_text_forms(void **state)
{
    (void)state;
    cm_arena a;
    cm_arena_init(&a, 1024);
    cm_error err;
    cm_error_clear(&err);
    sp_vref v;
    assert_int_equal(sp_vref_parse_text("in:3", &a, &v, &err), CM_OK);
    assert_int_equal(v.kind, SP_VREF_INPUT);
    assert_int_equal(v.index, 3);
    assert_int_equal(sp_vref_parse_text("@f:out:1", &a, &v, &err), CM_OK);
    assert_int_equal(v.kind, SP_VREF_OUTPUT);
    assert_string_equal(v.function, "f");
    assert_int_equal(sp_vref_parse_text("/ops/5#1", &a, &v, &err), CM_OK);
    assert_int_equal(v.kind, SP_VREF_OP);
    assert_string_equal(v.op, "/ops/5");
    assert_int_equal(v.result, 1);
    assert_int_equal(sp_vref_parse_text("/functions/1/ops/2", &a, &v, &err), CM_OK);
    assert_int_equal(v.result, 0);
    assert_int_equal(sp_vref_parse_text("in:", &a, &v, &err), CM_EINVAL);
    assert_int_equal(sp_vref_parse_text("/ops/1#x", &a, &v, &err), CM_EINVAL);
    assert_int_equal(sp_vref_parse_text("@f", &a, &v, &err), CM_EINVAL);
    assert_int_equal(sp_vref_parse_text("x", &a, &v, &err), CM_EINVAL);
    cm_arena_fini(&a);
}

static void test_sp_whatif_request_decode(void **state)
{
    (void)state;
    sp_edit_list l;
    sp_edit_list_init(&l);
    bool save = false;
    char prof[32];
    cm_error err;
    cm_error_clear(&err);
    static const char body[] = "{\"edits\":[{\"kind\":\"unconstrain\",\"op\":\"/ops/2\"}],"
                               "\"save\":true,\"profile\":\"tpu-v5e\"}";
    assert_int_equal(
        sp_whatif_request_decode(body, strlen(body), &l, &save, prof, sizeof prof, &err), CM_OK);
    assert_true(save);
    assert_string_equal(prof, "tpu-v5e");
    assert_int_equal(l.n, 1);
    static const char bad[] = "{\"edits\":[],\"save\":1}";
    assert_int_equal(sp_whatif_request_decode(bad, strlen(bad), &l, &save, prof, sizeof prof, &err),
                     CM_EINVAL);
    assert_string_equal(err.path, "/save");
    sp_edit_list_fini(&l);
}

/* ---- the plan's input options ------------------------------------------------------------ */

/* An unannotated input whose dimension 0 the "x" axis does not divide. */
#define NONDIV                                                                                     \
    "sdy.mesh @mesh = <[\"x\"=4]>\n"                                                               \
    "func.func @main(%arg0: tensor<6x16xf32>, %arg1: tensor<6x16xf32>) -> tensor<6x16xf32> {\n"    \
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<6x16xf32>\n"                                       \
    "  return %0 : tensor<6x16xf32>\n"                                                             \
    "}\n"

static void test_sp_whatif_run_honours_the_pass(void **state)
{
    (void)state;
    const char *edit = "{\"kind\":\"set_sharding\",\"value\":\"in:0\","
                       "\"sharding\":\"<@mesh, [{\\\"x\\\"}, {}]>\"}";
    /* the pipeline's export passes drop the axis that does not divide the
     * input; -sdy-basic-propagate keeps the padded sharding */
    sp_whatif *pipe = run_ok(NONDIV, edit);
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.pass = SP_PLAN_BASIC;
    run_io = &io;
    sp_whatif *basic = run_ok(NONDIV, edit);
    const sp_whatif_change *cb = change_of(basic, "%arg0");
    assert_non_null(cb);
    assert_non_null(strstr(cb->after, "\"x\""));
    assert_non_null(change_of(basic, "result 0 of /ops/0 (stablehlo.add)"));
    const sp_whatif_change *cp = change_of(pipe, "%arg0");
    assert_true(cp == NULL || strstr(cp->after, "\"x\"}") == NULL);
    sp_whatif_destroy(pipe);
    sp_whatif_destroy(basic);
    /* under every other pass too, the region's re-propagation prints what a
     * full one prints */
    char *mlp = example(SP_EXAMPLE_MLP, 2, false, true);
    for (int p = SP_PLAN_USER_PRIORITY; p < SP_PLAN_N_PASSES; p++) {
        io.pass = (sp_plan_pass)p;
        uint32_t n = 0;
        bool smaller = false;
        sweep_edits(mlp, 1, &n, &smaller);
        assert_true(n >= 30);
        assert_true(smaller);
    }
    cm_free(mlp);
    run_io = NULL;
    io.pass = (sp_plan_pass)99;
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, edit);
    cm_error err;
    cm_error_clear(&err);
    sp_whatif *w = NULL;
    assert_int_equal(sp_whatif_run(NONDIV, strlen(NONDIV), &io, &l, NULL, &w, &err), CM_EINVAL);
    assert_string_equal(err.path, "/options/pass");
    assert_null(w);
    sp_edit_list_fini(&l);
}

/* A custom call whose rule only a rules document gives (an MLIR input). */
#define KERNEL                                                                                     \
    "sdy.mesh @mesh = <[\"data\"=4]>\n"                                                            \
    "func.func @main(%arg0: tensor<8x1024xf32>, %arg1: tensor<8x1024xf32>) -> "                    \
    "tensor<8x1024xf32> {\n"                                                                       \
    "  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8x1024xf32>) -> "                    \
    "tensor<8x1024xf32>\n"                                                                         \
    "  %1 = stablehlo.add %0, %arg1 : tensor<8x1024xf32>\n"                                        \
    "  return %1 : tensor<8x1024xf32>\n"                                                           \
    "}\n"

#define RULES_DOC                                                                                  \
    "{\"custom_rules\": {\"my_kernel\": \"i j -> i j\"}, "                                         \
    "\"inputs\": [], \"ops\": [], \"outputs\": []}"

static void test_sp_whatif_honours_the_rules_document(void **state)
{
    (void)state;
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.rules = RULES_DOC;
    io.rules_len = strlen(RULES_DOC);
    const char *edit = "{\"kind\":\"set_sharding\",\"value\":\"in:0\","
                       "\"sharding\":\"<@mesh, [{\\\"data\\\"}, {}]>\"}";
    /* the edited text carries the rule, so it stands alone */
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, edit);
    cm_buf with, without;
    cm_buf_init(&with);
    cm_buf_init(&without);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_whatif_edit_text(KERNEL, strlen(KERNEL), &io, &l, &with, &err), CM_OK);
    assert_int_equal(sp_whatif_edit_text(KERNEL, strlen(KERNEL), NULL, &l, &without, &err),
                     CM_OK);
    assert_non_null(strstr(with.data, "sdy.sharding_rule"));
    assert_null(strstr(without.data, "sdy.sharding_rule"));
    cm_buf_fini(&with);
    cm_buf_fini(&without);
    sp_edit_list_fini(&l);
    /* the new input sharding goes through the call only with the rule */
    sp_whatif *a = run_ok(KERNEL, edit);
    run_io = &io;
    sp_whatif *b = run_ok(KERNEL, edit);
    run_io = NULL;
    assert_null(change_of(a, "result 0 of /ops/1 (stablehlo.add)"));
    const sp_whatif_change *c = change_of(b, "result 0 of /ops/1 (stablehlo.add)");
    assert_non_null(c);
    assert_non_null(strstr(c->after, "\"data\""));
    sp_whatif_destroy(a);
    sp_whatif_destroy(b);
}

static void test_sp_whatif_run_oom(void **state)
{
    (void)state;
    sp_edit_list l;
    sp_edit_list_init(&l);
    add_edits(&l, "{\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/0\"},"
                  "\"sharding\":\"<@mesh, [{}, {\\\"model\\\"}]>\"}");
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    o.no_cost = true;
    for (long n = 0; n < 100000; n += n < 300 ? 1 : 97) {
        cm_error err;
        cm_error_clear(&err);
        sp_whatif *w = NULL;
        cm_alloc_fail_after(n);
        cm_status st = sp_whatif_run(SMALL, strlen(SMALL), NULL, &l, &o, &w, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            assert_non_null(w);
            sp_whatif_destroy(w);
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(w);
    }
    sp_edit_list_fini(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_whatif_constrain_changes_downstream),
        cmocka_unit_test(test_sp_whatif_cancel_hook),
        cmocka_unit_test(test_sp_whatif_unconstrain_removes_constraint),
        cmocka_unit_test(test_sp_whatif_set_sharding_input_and_clear),
        cmocka_unit_test(test_sp_whatif_barrier_and_unbarrier),
        cmocka_unit_test(test_sp_whatif_rule_and_custom_rule),
        cmocka_unit_test(test_sp_whatif_edit_text_prints_edited_module),
        cmocka_unit_test(test_sp_whatif_incremental_equals_full_mlp),
        cmocka_unit_test(test_sp_whatif_incremental_equals_full_transformer),
        cmocka_unit_test(test_sp_whatif_incremental_equals_full_functions),
        cmocka_unit_test(test_sp_whatif_several_edits_equal_full),
        cmocka_unit_test(test_sp_whatif_rejects_bad_edits_with_paths),
        cmocka_unit_test(test_sp_vref_parse_text_forms),
        cmocka_unit_test(test_sp_whatif_request_decode),
        cmocka_unit_test(test_sp_whatif_run_honours_the_pass),
        cmocka_unit_test(test_sp_whatif_honours_the_rules_document),
        cmocka_unit_test(test_sp_whatif_run_oom),
    };
    return cmocka_run_group_tests_name("sp_whatif", tests, NULL, NULL);
}
