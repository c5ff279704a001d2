/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-unflatten-call-graph (Shardy's export/unflatten_call_graph.cc;
 * see sp_export.h). Import flattens the call graph: every call site gets its
 * own copy of its callee, tagged with sdy.original_func_name. After
 * propagation this pass points calls whose callees are the same computation
 * back at one function. Two callees are the same computation when they share
 * the original name, the manual axes (sdy.func_manual_axes) and, unless
 * dedup-functions-fully is set, the argument and result shardings. The
 * functions left without callers stay; the pass only retargets calls and
 * drops the two bookkeeping attributes from every function. */
#include "sp_export.h"

#include <stdlib.h>
#include <string.h>

#include "sp_export_int.h"
#include "sp_pass.h"

/* The original name of function f: sdy.original_func_name, else its own. */
static const char *orig_name(const sp_module *m, uint32_t f)
{
    const sp_attr *a = sp_op_attr(m, f, "sdy.original_func_name");
    if (a != NULL && a->kind == SP_ATTR_STRING) {
        return a->u.str.s;
    }
    a = sp_op_attr(m, f, "sym_name");
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : "";
}

static const char *func_name(const sp_module *m, uint32_t f)
{
    const sp_attr *a = sp_op_attr(m, f, "sym_name");
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : "";
}

/* A sharding of the list, or the fully open one on src's mesh when absent. */
static bool entry_equal(const sp_sharding *a, const sp_sharding *src_a, const sp_sharding *b,
                        const sp_sharding *src_b)
{
    if (a != NULL && b != NULL) {
        return sp_sharding_equal(a, b);
    }
    if (a == NULL && b == NULL) {
        return sp_sharding_same_mesh_ref(src_a, src_b);
    }
    if (a == NULL) {
        return sp_sharding_same_mesh_ref(src_a, b) && sp_sharding_is_fully_open(b);
    }
    return sp_sharding_same_mesh_ref(a, src_b) && sp_sharding_is_fully_open(a);
}

static bool io_equal(const sp_module *m, uint32_t f, uint32_t g, bool is_arg)
{
    uint32_t nf = sp_exp_io_count(m, f, is_arg), ng = sp_exp_io_count(m, g, is_arg);
    const sp_sharding *sf = sp_exp_mesh_source(m, f, is_arg);
    const sp_sharding *sg = sp_exp_mesh_source(m, g, is_arg);
    if (sf == NULL || sg == NULL) {
        return sf == sg;
    }
    if (nf != ng) {
        return false;
    }
    for (uint32_t i = 0; i < nf; i++) {
        if (!entry_equal(sp_exp_io_sharding(m, f, is_arg, i), sf,
                         sp_exp_io_sharding(m, g, is_arg, i), sg)) {
            return false;
        }
    }
    return true;
}

/* Do functions f and g compute the same thing (Shardy's computation key)? */
static bool same_key(const sp_module *m, uint32_t f, uint32_t g, bool ignore_shardings)
{
    if (f == g) {
        return true;
    }
    if (strcmp(orig_name(m, f), orig_name(m, g)) != 0 ||
        !sp_exp_attr_equal(sp_op_attr(m, f, "sdy.func_manual_axes"),
                           sp_op_attr(m, g, "sdy.func_manual_axes"))) {
        return false;
    }
    return ignore_shardings || (io_equal(m, f, g, true) && io_equal(m, f, g, false));
}

typedef struct uctx {
    uint32_t *calls; /* call ops in walk order */
    uint32_t *callee; /* per call: its callee func op */
    uint32_t n_calls, cap_calls;
    const char *missing; /* a callee not found */
} uctx;

static cm_status collect_call(sp_module *m, uint32_t op, void *vctx)
{
    uctx *c = vctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    uint32_t f = sp_exp_callee(m, op);
    if (f == SP_NONE) {
        const sp_attr *a = sp_op_attr(m, op, "callee");
        c->missing = a != NULL && a->kind == SP_ATTR_SYMBOL ? a->u.sym : "";
        return CM_EINVAL;
    }
    uint32_t cap = c->cap_calls;
    if (CM_GROW_U32(c->calls, c->cap_calls, c->n_calls + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    if (c->cap_calls != cap) {
        uint32_t *nc = cm_realloc(c->callee, (size_t)c->cap_calls * sizeof *nc);
        if (nc == NULL) {
            return CM_ENOMEM;
        }
        c->callee = nc;
    }
    c->calls[c->n_calls] = op;
    c->callee[c->n_calls++] = f;
    return CM_OK;
}

/* The index of the representative in reps[0..n) with f's key, or SP_NONE. */
static uint32_t find_rep(const sp_module *m, const uint32_t *reps, uint32_t n, uint32_t f,
                         bool ignore)
{
    for (uint32_t i = 0; i < n; i++) {
        if (same_key(m, reps[i], f, ignore)) {
            return i;
        }
    }
    return SP_NONE;
}

cm_status sp_pass_unflatten_call_graph(sp_module *m, bool dedup_fully, cm_error *err)
{
    uctx c = {0};
    uint32_t *reps = NULL, *full = NULL, *counts = NULL, *call_rep = NULL;
    uint32_t n_reps = 0, n_full = 0;
    cm_status st = sp_pass_walk(m, m->body, collect_call, &c);
    if (st == CM_EINVAL) {
        cm_error_set(err, CM_EINVAL, "", "Failed to lookup function: %s", c.missing);
        goto out;
    }
    if (st != CM_OK) {
        st = cm_error_oom(err);
        goto out;
    }
    size_t n = c.n_calls == 0 ? 1 : c.n_calls;
    reps = cm_alloc(n * sizeof *reps);
    full = cm_alloc(n * sizeof *full);
    counts = cm_calloc(n, sizeof *counts);
    call_rep = cm_alloc(n * sizeof *call_rep);
    if (reps == NULL || full == NULL || counts == NULL || call_rep == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    /* The first callee of each key is its function. */
    for (uint32_t i = 0; i < c.n_calls; i++) {
        uint32_t r = find_rep(m, reps, n_reps, c.callee[i], dedup_fully);
        if (r == SP_NONE) {
            r = n_reps;
            reps[n_reps++] = c.callee[i];
        }
        call_rep[i] = r;
    }
    /* Fully deduplicating, the key's function becomes the callee (with its
     * shardings) called most often, the earliest on a tie. */
    if (dedup_fully) {
        for (uint32_t i = 0; i < c.n_calls; i++) {
            uint32_t k = find_rep(m, full, n_full, c.callee[i], false);
            if (k == SP_NONE) {
                k = n_full;
                full[n_full++] = c.callee[i];
            }
            counts[k]++;
            uint32_t cur = find_rep(m, full, n_full, reps[call_rep[i]], false);
            uint32_t cur_count = cur == SP_NONE ? 0 : counts[cur];
            if (counts[k] > cur_count) {
                reps[call_rep[i]] = c.callee[i];
            }
        }
    }
    for (uint32_t i = 0; i < c.n_calls; i++) {
        uint32_t f = reps[call_rep[i]];
        if (f == c.callee[i]) {
            continue;
        }
        sp_attr *a = sp_attr_new(m, SP_ATTR_SYMBOL);
        if (a == NULL) {
            st = cm_error_oom(err);
            goto out;
        }
        a->u.sym = func_name(m, f);
        if (sp_op_set_attr(m, c.calls[i], "callee", a) != CM_OK) {
            st = cm_error_oom(err);
            goto out;
        }
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        if (m->ops[body->ops[i]].kind == SP_OP_FUNC_FUNC) {
            sp_op_remove_attr(m, body->ops[i], "sdy.original_func_name");
            sp_op_remove_attr(m, body->ops[i], "sdy.func_manual_axes");
        }
    }
out:
    cm_free(c.calls);
    cm_free(c.callee);
    cm_free(reps);
    cm_free(full);
    cm_free(counts);
    cm_free(call_rep);
    return st;
}
