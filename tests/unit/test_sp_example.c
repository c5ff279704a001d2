/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_example: the transformer training step of every
 * strategy reads back from JSON and from its MLIR, every op type-checks
 * (a shape checker for the ops the templates use), it plans without error
 * diagnostics, each strategy shards a kernel, its gradient and its update
 * alike, and the backward pass at least doubles the op count; OOM. */
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
#include "cmd.h"
#include "sp_example.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_plan_json.h"
#include "sp_diag.h"
#include "sp_mlir.h"

/* Sizes that all differ (batch 2, seq 6, heads 4, head dim 12, d_model 48,
 * mlp 192), so a transposed dimension cannot type-check by accident. */
static void small_opts(sp_example_opts *o, sp_example_model model, sp_example_strategy s,
                       bool train)
{
    sp_example_opts_init(o);
    o->model = model;
    o->strategy = s;
    o->train = train;
    o->layers = 2;
    o->batch = 2;
    o->seq = 6;
    o->heads = 4;
    o->d_model = 48;
}

static void gen(const sp_example_opts *o, cm_buf *b)
{
    cm_buf_init(b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_example_graph_json(o, b, &err), CM_OK);
}

/* ---- a shape checker for the ops of the templates ------------------------------------- */

typedef struct chk {
    const sp_module *m;
    cm_arena scratch;
    uint32_t n_ops;
} chk;

static const sp_type *vt(const chk *c, uint32_t v)
{
    const sp_type *t = sp_value_type(c->m, v);
    assert_int_equal(t->kind, SP_TYPE_TENSOR);
    return t;
}

static bool same_shape(const sp_type *a, const sp_type *b)
{
    if (a->rank != b->rank) {
        return false;
    }
    for (uint32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) {
            return false;
        }
    }
    return true;
}

static void ints_of(chk *c, const sp_attr *a, const int64_t **v, uint32_t *n)
{
    assert_non_null(a);
    assert_true(sp_attr_ints(a, v, n, &c->scratch));
}

static bool in_list(int64_t d, const int64_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == d) {
            return true;
        }
    }
    return false;
}

static void check_dot(chk *c, const sp_op *op, const sp_type *res)
{
    const sp_type *l = vt(c, op->operands[0]), *r = vt(c, op->operands[1]);
    const sp_attr *dn = sp_attrs_get(op->attrs, op->n_attrs, "dot_dimension_numbers");
    assert_non_null(dn);
    assert_int_equal(dn->kind, SP_ATTR_PARAMS);
    static const int64_t none[1] = {0};
    const int64_t *lb = none, *rb = none, *lc, *rc;
    uint32_t n_lb = 0, n_rb = 0, n_lc, n_rc;
    const sp_named_attr *it = dn->u.params.items;
    uint32_t n = dn->u.params.n;
    if (sp_attrs_get(it, n, "lhs_batching_dimensions") != NULL) {
        ints_of(c, sp_attrs_get(it, n, "lhs_batching_dimensions"), &lb, &n_lb);
        ints_of(c, sp_attrs_get(it, n, "rhs_batching_dimensions"), &rb, &n_rb);
    }
    ints_of(c, sp_attrs_get(it, n, "lhs_contracting_dimensions"), &lc, &n_lc);
    ints_of(c, sp_attrs_get(it, n, "rhs_contracting_dimensions"), &rc, &n_rc);
    assert_int_equal(n_lb, n_rb);
    assert_int_equal(n_lc, n_rc);
    int64_t want[SP_MAX_RANK];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_lb; i++) {
        assert_int_equal(l->dims[lb[i]], r->dims[rb[i]]);
        want[k++] = l->dims[lb[i]];
    }
    for (uint32_t i = 0; i < n_lc; i++) {
        assert_int_equal(l->dims[lc[i]], r->dims[rc[i]]);
    }
    for (uint32_t i = 0; i < l->rank; i++) {
        if (!in_list(i, lb, n_lb) && !in_list(i, lc, n_lc)) {
            want[k++] = l->dims[i];
        }
    }
    for (uint32_t i = 0; i < r->rank; i++) {
        if (!in_list(i, rb, n_rb) && !in_list(i, rc, n_rc)) {
            want[k++] = r->dims[i];
        }
    }
    assert_int_equal(res->rank, k);
    for (uint32_t i = 0; i < k; i++) {
        assert_int_equal(res->dims[i], want[i]);
    }
}

/* Checks every op of block blk against the result shape its operands imply. */
static void check_block(chk *c, uint32_t blk, const sp_type *fn)
{
    const sp_module *m = c->m;
    for (uint32_t i = 0; i < m->blocks[blk].n_ops; i++) {
        const sp_op *op = &m->ops[m->blocks[blk].ops[i]];
        const char *nm = op->name;
        c->n_ops++;
        if (strcmp(nm, "func.return") == 0 || strcmp(nm, "stablehlo.return") == 0) {
            if (fn != NULL) {
                assert_int_equal(op->n_operands, fn->n_results);
                for (uint32_t k = 0; k < op->n_operands; k++) {
                    assert_int_equal(m->values[op->operands[k]].type, fn->results[k]);
                }
            }
            continue;
        }
        assert_int_equal(op->n_results, 1);
        const sp_type *res = vt(c, op->first_result);
        bool want_i1 = strcmp(nm, "stablehlo.compare") == 0;
        assert_int_equal(res->elem, want_i1 ? SP_ELEM_I1 : SP_ELEM_F32);
        const int64_t *v;
        uint32_t n;
        if (strcmp(nm, "stablehlo.add") == 0 || strcmp(nm, "stablehlo.subtract") == 0 ||
            strcmp(nm, "stablehlo.multiply") == 0 || strcmp(nm, "stablehlo.divide") == 0 ||
            strcmp(nm, "stablehlo.maximum") == 0 || strcmp(nm, "stablehlo.exponential") == 0 ||
            strcmp(nm, "sdy.sharding_constraint") == 0) {
            for (uint32_t k = 0; k < op->n_operands; k++) {
                assert_int_equal(m->values[op->operands[k]].type, m->values[op->first_result].type);
            }
        } else if (want_i1) {
            assert_int_equal(m->values[op->operands[0]].type, m->values[op->operands[1]].type);
            assert_true(same_shape(vt(c, op->operands[0]), res));
        } else if (strcmp(nm, "stablehlo.select") == 0) {
            const sp_type *pred = vt(c, op->operands[0]);
            assert_int_equal(pred->elem, SP_ELEM_I1);
            assert_true(same_shape(pred, res));
            assert_int_equal(m->values[op->operands[1]].type, m->values[op->first_result].type);
            assert_int_equal(m->values[op->operands[2]].type, m->values[op->first_result].type);
        } else if (strcmp(nm, "stablehlo.constant") == 0) {
            assert_int_equal(res->rank, 0);
        } else if (strcmp(nm, "stablehlo.broadcast_in_dim") == 0) {
            const sp_type *x = vt(c, op->operands[0]);
            ints_of(c, sp_attrs_get(op->attrs, op->n_attrs, "broadcast_dimensions"), &v, &n);
            assert_int_equal(n, x->rank);
            for (uint32_t k = 0; k < n; k++) {
                assert_int_equal(res->dims[v[k]], x->dims[k]);
            }
        } else if (strcmp(nm, "stablehlo.reshape") == 0) {
            const sp_type *x = vt(c, op->operands[0]);
            int64_t ex = 1, er = 1;
            for (uint32_t k = 0; k < x->rank; k++) {
                ex *= x->dims[k];
            }
            for (uint32_t k = 0; k < res->rank; k++) {
                er *= res->dims[k];
            }
            assert_int_equal(ex, er);
        } else if (strcmp(nm, "stablehlo.transpose") == 0) {
            const sp_type *x = vt(c, op->operands[0]);
            ints_of(c, sp_attrs_get(op->attrs, op->n_attrs, "permutation"), &v, &n);
            assert_int_equal(n, x->rank);
            assert_int_equal(res->rank, x->rank);
            for (uint32_t k = 0; k < n; k++) {
                assert_int_equal(res->dims[k], x->dims[v[k]]);
            }
        } else if (strcmp(nm, "stablehlo.reduce") == 0) {
            const sp_type *x = vt(c, op->operands[0]);
            assert_int_equal(vt(c, op->operands[1])->rank, 0);
            ints_of(c, sp_attrs_get(op->attrs, op->n_attrs, "dimensions"), &v, &n);
            uint32_t k = 0;
            for (uint32_t d = 0; d < x->rank; d++) {
                if (!in_list(d, v, n)) {
                    assert_true(k < res->rank);
                    assert_int_equal(res->dims[k++], x->dims[d]);
                }
            }
            assert_int_equal(res->rank, k);
            assert_int_equal(op->n_regions, 1);
            check_block(c, op->regions[0].blocks[0], NULL);
        } else if (strcmp(nm, "stablehlo.dot_general") == 0) {
            check_dot(c, op, res);
        } else {
            fprintf(stderr, "unexpected op %s\n", nm);
            fail();
        }
    }
}

/* Type-checks @main of m; returns its op count (nested ones included). */
static uint32_t check_module(const sp_module *m)
{
    chk c = {m, {0}, 0};
    cm_arena_init(&c.scratch, 4096);
    uint32_t f = sp_module_func(m, "main");
    assert_int_not_equal(f, SP_NONE);
    const sp_type *fn = sp_func_type(m, f);
    assert_non_null(fn);
    uint32_t blk = m->ops[f].regions[0].blocks[0];
    assert_int_equal(m->blocks[blk].n_args, fn->n_inputs);
    for (uint32_t i = 0; i < fn->n_inputs; i++) {
        assert_int_equal(m->values[m->blocks[blk].first_arg + i].type, fn->inputs[i]);
    }
    check_block(&c, blk, fn);
    cm_arena_fini(&c.scratch);
    return c.n_ops;
}

/* ---- plan helpers ---------------------------------------------------------------------- */

static json_t *plan_of(const cm_buf *doc)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_plan_graph_json(doc->data, doc->len, SP_PLAN_PIPELINE, &b, &err);
    if (st != CM_OK) {
        fprintf(stderr, "plan failed at '%s': %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(j);
    cm_buf_fini(&b);
    return j;
}

/* The axes of a plan VALUE's sharding written compactly: "[{},{model}]"
 * ("-" for no sharding or a fully replicated one). */
static void dims_text(const json_t *value, char *buf, size_t n)
{
    const json_t *sh = json_object_get(value, "sharding");
    size_t i, j, n_axes = 0;
    json_t *d, *a;
    json_array_foreach(json_object_get(sh, "dims"), i, d)
    {
        n_axes += json_array_size(json_object_get(d, "axes"));
    }
    if (n_axes == 0) {
        snprintf(buf, n, "-");
        return;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    json_array_foreach(json_object_get(sh, "dims"), i, d)
    {
        k += (size_t)snprintf(buf + k, n - k, "%s{", i > 0 ? "," : "");
        json_array_foreach(json_object_get(d, "axes"), j, a)
        {
            const char *s = json_is_string(a) ? json_string_value(a)
                                              : json_string_value(json_object_get(a, "name"));
            k += (size_t)snprintf(buf + k, n - k, "%s%s", j > 0 ? "," : "", s);
        }
        k += (size_t)snprintf(buf + k, n - k, "}");
    }
    snprintf(buf + k, n - k, "]");
}

/* Index in the document's ops of the op defining value name, or -1. */
static long def_of(const json_t *doc, const char *name)
{
    size_t i;
    json_t *op;
    json_array_foreach(json_object_get(doc, "ops"), i, op)
    {
        const char *r = json_string_value(json_object_get(op, "result"));
        if (r != NULL && strcmp(r, name) == 0) {
            return (long)i;
        }
    }
    return -1;
}

static const char *operand(const json_t *doc, long op, size_t i)
{
    return json_string_value(json_array_get(
        json_object_get(json_array_get(json_object_get(doc, "ops"), (size_t)op), "operands"), i));
}

/* The plan's entry for document op index i (ops are listed by path). */
static const json_t *plan_op(const json_t *plan, long i)
{
    char path[32];
    snprintf(path, sizeof path, "/ops/%ld", i);
    const json_t *ops =
        json_object_get(json_array_get(json_object_get(plan, "functions"), 0), "ops");
    size_t k;
    json_t *op;
    json_array_foreach(ops, k, op)
    {
        if (strcmp(json_string_value(json_object_get(op, "path")), path) == 0) {
            return op;
        }
    }
    return NULL;
}

static size_t n_error_diags(const json_t *plan)
{
    size_t i, n = 0;
    json_t *d;
    json_array_foreach(json_object_get(plan, "diagnostics"), i, d)
    {
        const char *sev = json_string_value(json_object_get(d, "severity"));
        if (strcmp(sev, "error") == 0) {
            fprintf(stderr, "%s at %s: %s\n", json_string_value(json_object_get(d, "kind")),
                    json_string_value(json_object_get(d, "path")),
                    json_string_value(json_object_get(d, "message")));
            n++;
        }
    }
    return n;
}

/* ---- tests ----------------------------------------------------------------------------- */

/* Every strategy: the document decodes, type-checks, prints as MLIR that
 * reads back, verifies and type-checks the same, and plans without errors
 * (the transformer training step, and for comparison its forward pass and
 * the MLP training step). */
static void test_sp_example_transformer_train_reads_back_and_plans(void **state)
{
    (void)state;
    static const struct {
        sp_example_model model;
        bool train;
    } cases[3] = {
        {SP_EXAMPLE_TRANSFORMER, true}, {SP_EXAMPLE_TRANSFORMER, false}, {SP_EXAMPLE_MLP, true}};
    for (int i = 0; i < 12; i++) {
        int s = i % 4;
        sp_example_opts o;
        small_opts(&o, cases[i / 4].model, (sp_example_strategy)s, cases[i / 4].train);
        cm_buf b;
        gen(&o, &b);
        sp_graph *g = NULL;
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_graph_decode(b.data, b.len, NULL, &g, &err), CM_OK);
        uint32_t n_json = check_module(sp_graph_module(g));

        cm_buf mt;
        cm_buf_init(&mt);
        sp_print_opts po = {false, false};
        sp_mlir_print(sp_graph_module(g), &po, &mt);
        sp_graph_destroy(g);
        sp_module *m = NULL;
        assert_int_equal(sp_mlir_read(mt.data, mt.len, 0, &m, &err), CM_OK);
        assert_int_equal(check_module(m), n_json);
        sp_diags d;
        sp_diags_init(&d);
        assert_int_equal(sp_module_verify(m, &d), CM_OK);
        assert_int_equal(d.n, 0);
        sp_diags_fini(&d);
        sp_module_destroy(m);
        cm_buf_fini(&mt);

        json_t *p = plan_of(&b);
        assert_int_equal(n_error_diags(p), 0);
        json_decref(p);
        cm_buf_fini(&b);
    }
}

/* Each kernel, its gradient (the dot_general feeding its update) and its
 * updated value (op result and function output) get the kernel's sharding.
 * tp: QKV and W1 [{}, {model}], Wo and W2 [{model}, {}]; dp+tp the same;
 * fsdp: the embed dimension on data; dp: replicated. */
static void test_sp_example_transformer_train_shards_grads_like_params(void **state)
{
    (void)state;
    static const char *const want[4][6] = {
        {"-", "-", "-", "-", "-", "-"},
        {"[{data},{}]", "[{data},{}]", "[{data},{}]", "[{},{data}]", "[{data},{}]", "[{},{data}]"},
        {"[{},{model}]", "[{},{model}]", "[{},{model}]", "[{model},{}]", "[{},{model}]",
         "[{model},{}]"},
        {"[{},{model}]", "[{},{model}]", "[{},{model}]", "[{model},{}]", "[{},{model}]",
         "[{model},{}]"}};
    for (int s = 0; s < 4; s++) {
        sp_example_opts o;
        small_opts(&o, SP_EXAMPLE_TRANSFORMER, (sp_example_strategy)s, true);
        cm_buf b;
        gen(&o, &b);
        json_t *doc = json_loadb(b.data, b.len, 0, NULL);
        assert_non_null(doc);
        json_t *p = plan_of(&b);
        cm_buf_fini(&b);
        const json_t *fn = json_array_get(json_object_get(p, "functions"), 0);
        const json_t *outs = json_object_get(fn, "outputs");
        assert_int_equal(json_array_size(outs), 1 + 6 * o.layers);
        char got[128];
        for (uint32_t l = 0; l < o.layers; l++) {
            for (size_t k = 0; k < 6; k++) {
                size_t in = 6 * l + k; /* inputs: layer l's six kernels, then x */
                dims_text(json_array_get(json_object_get(fn, "inputs"), in), got, sizeof got);
                assert_string_equal(got, want[s][k]);
                /* output 1 + in is subtract(W, multiply(broadcast(lr), grad)) */
                dims_text(json_array_get(outs, 1 + in), got, sizeof got);
                assert_string_equal(got, want[s][k]);
                const char *nw = json_string_value(json_object_get(
                    json_array_get(json_object_get(doc, "outputs"), 1 + in), "value"));
                long sub = def_of(doc, nw);
                assert_true(sub >= 0);
                dims_text(json_array_get(json_object_get(plan_op(p, sub), "results"), 0), got,
                          sizeof got);
                assert_string_equal(got, want[s][k]);
                long mul = def_of(doc, operand(doc, sub, 1));
                long grad = def_of(doc, operand(doc, mul, 1));
                assert_true(mul >= 0 && grad >= 0);
                const json_t *gop = json_array_get(json_object_get(doc, "ops"), (size_t)grad);
                assert_string_equal(json_string_value(json_object_get(gop, "op")),
                                    "stablehlo.dot_general");
                dims_text(json_array_get(json_object_get(plan_op(p, grad), "results"), 0), got,
                          sizeof got);
                assert_string_equal(got, want[s][k]);
            }
        }
        json_decref(p);
        json_decref(doc);
    }
}

/* The backward pass and the updates at least double the forward op count. */
static void test_sp_example_transformer_train_doubles_ops(void **state)
{
    (void)state;
    for (uint32_t layers = 1; layers <= 3; layers++) {
        uint32_t n[2];
        for (int train = 0; train < 2; train++) {
            sp_example_opts o;
            small_opts(&o, SP_EXAMPLE_TRANSFORMER, SP_EXAMPLE_DP_TP, train != 0);
            o.layers = layers;
            cm_buf b;
            gen(&o, &b);
            json_t *doc = json_loadb(b.data, b.len, 0, NULL);
            assert_non_null(doc);
            n[train] = (uint32_t)json_array_size(json_object_get(doc, "ops"));
            assert_string_equal(json_string_value(json_object_get(doc, "name")),
                                train ? "jit_train_step" : "jit_apply_fn");
            json_decref(doc);
            cm_buf_fini(&b);
        }
        assert_true(n[1] >= 2 * n[0]);
        assert_true(n[1] <= 5 * n[0]);
    }
}

/* `shardplan example transformer --train --format mlir` succeeds. */
static void test_cmd_example_transformer_train(void **state)
{
    (void)state;
    FILE *out = tmpfile(), *errs = tmpfile();
    assert_non_null(out);
    assert_non_null(errs);
    char a0[] = "example", a1[] = "transformer", a2[] = "--train", a3[] = "--format", a4[] = "mlir",
         a5[] = "--layers", a6[] = "1", a7[] = "--d-model", a8[] = "64";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, NULL};
    assert_int_equal(cmd_example(9, argv, out, errs), 0);
    assert_true(ftell(out) > 0);
    fclose(out);
    fclose(errs);
}

static void test_sp_example_graph_json_oom(void **state)
{
    (void)state;
    sp_example_opts o;
    small_opts(&o, SP_EXAMPLE_TRANSFORMER, SP_EXAMPLE_DP_TP, true);
    for (long n = 0;; n++) {
        cm_buf b;
        cm_buf_init(&b);
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_example_graph_json(&o, &b, &err);
        cm_alloc_fail_after(-1);
        cm_buf_fini(&b);
        if (st == CM_OK) {
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_example_transformer_train_reads_back_and_plans),
        cmocka_unit_test(test_sp_example_transformer_train_shards_grads_like_params),
        cmocka_unit_test(test_sp_example_transformer_train_doubles_ops),
        cmocka_unit_test(test_cmd_example_transformer_train),
        cmocka_unit_test(test_sp_example_graph_json_oom),
    };
    return cmocka_run_group_tests_name("sp_example", tests, NULL, NULL);
}
