/* SPDX-License-Identifier: Apache-2.0
 * planner: -xla-sdy-unflatten-call-graph (XLA's
 * stablehlo_round_trip/unflatten_call_graph.cc; see sp_gspmd.h). Like
 * Shardy's -sdy-unflatten-call-graph it points the calls of copies of one
 * computation back at one function, but XLA's version then makes every
 * call agree with the function it calls: an operand whose sharding is not
 * equivalent to the callee's argument sharding goes through an mhlo.copy
 * to it, the call takes the callee's result shardings, and a result whose
 * own sharding differed gets an mhlo.copy back to that. Calls of the bodies
 * XLA's StableHLO export made of manual computations
 * (xla.sdy.inlinable_manual_computation_body*) are left as they are.
 *
 * The sharding helpers (Shardy's getFuncArgShardings, isEquivalent) are
 * restated here rather than shared with planner/shardy/export, whose
 * helper header is private to that folder. */
#include "sp_gspmd.h"

#include <stdio.h>
#include <string.h>

#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define INLINABLE_BODY "xla.sdy.inlinable_manual_computation_body"

/* ---- functions and their shardings ---------------------------------------------- */

static const char *str_attr(const sp_module *m, uint32_t op, const char *key)
{
    const sp_attr *a = sp_op_attr(m, op, key);
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : NULL;
}

static const char *sym_name(const sp_module *m, uint32_t f)
{
    const char *s = str_attr(m, f, "sym_name");
    return s != NULL ? s : "";
}

/* The computation f is a copy of: sdy.original_func_name (Shardy's import
 * and XLA's named-computation export write it), else XLA's round-trip
 * spelling xla.sdy.original_func_name, else f's own name. */
static const char *origin(const sp_module *m, uint32_t f)
{
    const char *s = str_attr(m, f, "sdy.original_func_name");
    if (s == NULL) {
        s = str_attr(m, f, "xla.sdy.original_func_name");
    }
    return s != NULL ? s : sym_name(m, f);
}

static uint32_t io_count(const sp_module *m, uint32_t f, bool is_arg)
{
    const sp_type *t = sp_func_type(m, f);
    return t == NULL ? 0 : (is_arg ? t->n_inputs : t->n_results);
}

static uint32_t type_rank(const sp_module *m, uint32_t type)
{
    const sp_type *t = &m->types[type];
    return t->kind == SP_TYPE_TENSOR ? t->rank : 0;
}

static uint32_t io_rank(const sp_module *m, uint32_t f, bool is_arg, uint32_t i)
{
    const sp_type *t = sp_func_type(m, f);
    if (t == NULL || i >= (is_arg ? t->n_inputs : t->n_results)) {
        return 0;
    }
    return type_rank(m, is_arg ? t->inputs[i] : t->results[i]);
}

/* The sharding of argument (is_arg) or result i of function f, or NULL;
 * read from arg_attrs so that a declaration without a body has them too. */
static const sp_sharding *io_sharding(const sp_module *m, uint32_t f, bool is_arg, uint32_t i)
{
    if (!is_arg) {
        return sp_func_result_sharding(m, f, i);
    }
    const sp_attr *arr = sp_op_attr(m, f, "arg_attrs");
    if (arr == NULL || arr->kind != SP_ATTR_ARRAY || i >= arr->u.arr.n) {
        return NULL;
    }
    const sp_attr *d = arr->u.arr.items[i];
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *s = sp_attrs_get(d->u.dict.items, d->u.dict.n, "sdy.sharding");
    return s != NULL && s->kind == SP_ATTR_SHARDING ? s->u.sharding : NULL;
}

/* Is s on a maximal mesh (no axes, one device)? Shardy leaves those out
 * when it looks for the mesh of a list of shardings. */
static bool is_maximal(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = s->mesh != NULL        ? s->mesh
                          : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                 : NULL;
    return mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1;
}

/* The first of f's argument (or result) shardings not on a maximal mesh:
 * without one f has no sharding list there; with one, an entry without a
 * sharding stands for a fully open sharding on that mesh. */
static const sp_sharding *mesh_source(const sp_module *m, uint32_t f, bool is_arg)
{
    uint32_t n = io_count(m, f, is_arg);
    for (uint32_t i = 0; i < n; i++) {
        const sp_sharding *s = io_sharding(m, f, is_arg, i);
        if (s != NULL && !is_maximal(m, s)) {
            return s;
        }
    }
    return NULL;
}



/* Entry equality of two functions' sharding lists, a missing entry being
 * the fully open sharding on its list's mesh (src_a, src_b). */
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

/* Do f and g have the same argument (or result) sharding list? */
static bool io_equal(const sp_module *m, uint32_t f, uint32_t g, bool is_arg)
{
    const sp_sharding *sf = mesh_source(m, f, is_arg), *sg = mesh_source(m, g, is_arg);
    if (sf == NULL || sg == NULL) {
        return sf == sg;
    }
    uint32_t n = io_count(m, f, is_arg);
    if (n != io_count(m, g, is_arg)) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!entry_equal(io_sharding(m, f, is_arg, i), sf, io_sharding(m, g, is_arg, i), sg)) {
            return false;
        }
    }
    return true;
}

static bool axes_equal(const sp_attr *a, const sp_attr *b)
{
    if (a == NULL || b == NULL || a == b) {
        return a == b;
    }
    if (a->kind != SP_ATTR_AXIS_LIST || b->kind != SP_ATTR_AXIS_LIST) {
        return a->kind == b->kind && sp_attr_equal(a, b);
    }
    if (a->u.axes.n != b->u.axes.n) {
        return false;
    }
    for (uint32_t i = 0; i < a->u.axes.n; i++) {
        const sp_axis_ref *x = &a->u.axes.axes[i], *y = &b->u.axes.axes[i];
        if (strcmp(x->name, y->name) != 0 || x->pre_size != y->pre_size || x->size != y->size) {
            return false;
        }
    }
    return true;
}

/* Are f and g the same computation: the same origin, the same manual axes
 * (Shardy's sdy.func_manual_axes, XLA's xla.sdy.manual_axes) and, unless
 * ignore_shardings, the same argument and result sharding lists? */
static bool same_key(const sp_module *m, uint32_t f, uint32_t g, bool ignore_shardings)
{
    if (f == g) {
        return true;
    }
    if (strcmp(origin(m, f), origin(m, g)) != 0 ||
        !axes_equal(sp_op_attr(m, f, "sdy.func_manual_axes"),
                    sp_op_attr(m, g, "sdy.func_manual_axes")) ||
        !axes_equal(sp_op_attr(m, f, SP_GSPMD_MANUAL_AXES),
                    sp_op_attr(m, g, SP_GSPMD_MANUAL_AXES))) {
        return false;
    }
    return ignore_shardings || (io_equal(m, f, g, true) && io_equal(m, f, g, false));
}

/* ---- shardings of values ------------------------------------------------------------ */

/* A sharding of rank on src's mesh, every dimension open (or closed); in
 * m's arena, NULL when out of memory. */
static sp_sharding *empty_like(sp_module *m, const sp_sharding *src, uint32_t rank, bool closed)
{
    sp_sharding *s = sp_sharding_open(&m->arena, src->mesh_name, rank);
    if (s == NULL) {
        return NULL;
    }
    s->mesh = src->mesh;
    for (uint32_t d = 0; d < rank; d++) {
        s->dims[d].is_closed = closed;
    }
    return s;
}

static bool has_axis(const sp_attr *manual, const char *name)
{
    for (uint32_t i = 0; i < manual->u.axes.n; i++) {
        if (strcmp(manual->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* The sharding of value v as Shardy's getSharding sees it (*out NULL
 * without one): a manual computation's body argument has its in sharding
 * without the manual axes, a named computation's its in sharding, a
 * manual or named computation's result its out sharding; the rest as
 * sp_value_sharding_partitioned. Errors: CM_ENOMEM. */
static cm_status value_sharding(sp_module *m, uint32_t v, const sp_sharding **out)
{
    const sp_value *val = &m->values[v];
    uint32_t owner = val->def == SP_NONE ? m->blocks[val->block].parent_op : SP_NONE;
    *out = sp_value_sharding_partitioned(m, v);
    if (owner == SP_NONE || (m->ops[owner].kind != SP_OP_SDY_MANUAL_COMPUTATION &&
                             m->ops[owner].kind != SP_OP_SDY_NAMED_COMPUTATION)) {
        return CM_OK;
    }
    const sp_attr *ins = sp_op_attr(m, owner, "in_shardings");
    if (ins == NULL || ins->kind != SP_ATTR_SHARDING_LIST || val->index >= ins->u.shardings.n) {
        *out = NULL;
        return CM_OK;
    }
    const sp_sharding *in = ins->u.shardings.items[val->index];
    const sp_attr *manual = sp_op_attr(m, owner, "manual_axes");
    *out = in;
    if (in == NULL || m->ops[owner].kind != SP_OP_SDY_MANUAL_COMPUTATION || manual == NULL ||
        manual->kind != SP_ATTR_AXIS_LIST || manual->u.axes.n == 0) {
        return CM_OK;
    }
    sp_sharding *l = sp_sharding_clone(&m->arena, in);
    if (l == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t d = 0; d < l->rank; d++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < l->dims[d].n_axes; i++) {
            if (!has_axis(manual, l->dims[d].axes[i].name)) {
                l->dims[d].axes[k++] = l->dims[d].axes[i];
            }
        }
        l->dims[d].n_axes = k;
    }
    *out = l;
    return CM_OK;
}

/* ---- the pass ------------------------------------------------------------------------ */

typedef struct uctx {
    sp_module *m;
    sp_uses u;
    uint32_t *calls;  /* func.call ops in walk order */
    uint32_t *callee; /* per call: its callee */
    uint32_t n_calls, cap_calls;
    uint32_t n_io; /* operands and results of all calls: the copies possible */
    uint32_t bad;  /* a call with no callee or the wrong arity, or SP_NONE */
} uctx;

static cm_status collect_call(sp_module *m, uint32_t op, void *vctx)
{
    uctx *c = vctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    const sp_attr *a = sp_op_attr(m, op, "callee");
    uint32_t f = a != NULL && a->kind == SP_ATTR_SYMBOL ? sp_module_func(m, a->u.sym) : SP_NONE;
    if (f == SP_NONE || io_count(m, f, true) != m->ops[op].n_operands ||
        io_count(m, f, false) != m->ops[op].n_results) {
        c->bad = op;
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
    if (m->ops[op].n_operands + m->ops[op].n_results > UINT32_MAX - c->n_io) {
        return CM_ENOMEM;
    }
    c->n_io += m->ops[op].n_operands + m->ops[op].n_results;
    c->calls[c->n_calls] = op;
    c->callee[c->n_calls++] = f;
    return CM_OK;
}

static cm_status bad_call(const sp_module *m, uint32_t op, cm_error *err)
{
    const sp_attr *a = sp_op_attr(m, op, "callee");
    const char *name = a != NULL && a->kind == SP_ATTR_SYMBOL ? a->u.sym : "";
    char msg[200];
    if (sp_module_func(m, name) == SP_NONE) {
        snprintf(msg, sizeof msg, "Failed to lookup function: %.150s", name);
    } else {
        snprintf(msg, sizeof msg, "has operands or results that do not match @%.150s", name);
    }
    return sp_gspmd_op_error(m, op, err, msg);
}

/* An mhlo.copy of v with sharding s and, when not NULL, the call's manual
 * axes, inserted into block at index; *out is its result. */
static cm_status insert_copy(sp_module *m, uint32_t block, uint32_t index, uint32_t v,
                             sp_sharding *s, const sp_attr *manual, uint32_t *out)
{
    uint32_t ty = m->values[v].type, cp;
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
    if (a == NULL || items == NULL ||
        sp_module_new_op(m, SP_NONE, "mhlo.copy", &v, 1, &ty, 1, &cp) != CM_OK) {
        return CM_ENOMEM;
    }
    items[0] = s;
    a->u.shardings.items = items;
    a->u.shardings.n = 1;
    if (sp_op_set_attr(m, cp, "sdy.sharding", a) != CM_OK ||
        (manual != NULL &&
         sp_op_set_attr(m, cp, SP_GSPMD_MANUAL_AXES, (sp_attr *)(uintptr_t)manual) != CM_OK) ||
        sp_block_insert_op(m, block, index, cp) != CM_OK) {
        return CM_ENOMEM;
    }
    *out = m->ops[cp].first_result;
    return CM_OK;
}

/* Operand k of call becomes the copy's result nv (the use lists follow). */
static cm_status move_operand(uctx *c, uint32_t call, uint32_t k, uint32_t cp_op, uint32_t nv)
{
    sp_module *m = c->m;
    uint32_t v = m->ops[call].operands[k];
    for (uint32_t j = c->u.head[v]; j != SP_NONE; j = c->u.pool[j].next) {
        if (c->u.pool[j].op == call && c->u.pool[j].idx == k) {
            c->u.pool[j].op = cp_op;
            c->u.pool[j].idx = 0;
        }
    }
    m->ops[call].operands[k] = nv;
    return sp_uses_add(&c->u, nv, call, k);
}

/* XLA's insertReshardsOnFuncArguments with copies: each operand whose
 * sharding is not equivalent to f's argument sharding reaches the call
 * through an mhlo.copy to it. Without argument shardings on f, the operands
 * are held to fully closed replicated shardings on the mesh of the first
 * operand that has one, and without that nothing changes. */
static cm_status copy_operands(uctx *c, uint32_t call, uint32_t f)
{
    sp_module *m = c->m;
    uint32_t n = m->ops[call].n_operands;
    const sp_sharding *src = mesh_source(m, f, true);
    bool from_func = src != NULL;
    for (uint32_t k = 0; k < n && src == NULL; k++) {
        const sp_sharding *s = NULL;
        if (value_sharding(m, m->ops[call].operands[k], &s) != CM_OK) {
            return CM_ENOMEM;
        }
        if (s != NULL && !is_maximal(m, s)) {
            src = s;
        }
    }
    if (src == NULL) {
        return CM_OK;
    }
    const sp_attr *manual = sp_op_attr(m, call, SP_GSPMD_MANUAL_AXES);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t v = m->ops[call].operands[k];
        sp_sharding *want = from_func ? (sp_sharding *)(uintptr_t)io_sharding(m, f, true, k) : NULL;
        if (want == NULL) {
            uint32_t rank = from_func ? io_rank(m, f, true, k) : type_rank(m, m->values[v].type);
            if ((want = empty_like(m, src, rank, !from_func)) == NULL) {
                return CM_ENOMEM;
            }
        }
        const sp_sharding *have = NULL;
        if (value_sharding(m, v, &have) != CM_OK) {
            return CM_ENOMEM;
        }
        if (sp_sharding_equivalent(want, have)) {
            continue;
        }
        uint32_t block = m->ops[call].parent_block, nv;
        if (insert_copy(m, block, sp_op_index_in_block(m, call), v, want, manual, &nv) != CM_OK ||
            move_operand(c, call, k, m->values[nv].def, nv) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* Every use of r but by op except becomes a use of nv. */
static cm_status redirect(uctx *c, uint32_t r, uint32_t nv, uint32_t except)
{
    sp_module *m = c->m;
    uint32_t keep = SP_NONE;
    for (uint32_t j = c->u.head[r]; j != SP_NONE;) {
        sp_use use = c->u.pool[j];
        uint32_t next = use.next;
        if (use.op != except && use.idx < m->ops[use.op].n_operands &&
            m->ops[use.op].operands[use.idx] == r) {
            m->ops[use.op].operands[use.idx] = nv;
            if (sp_uses_add(&c->u, nv, use.op, use.idx) != CM_OK) {
                return CM_ENOMEM;
            }
        } else if (use.op == except) {
            keep = j;
        }
        j = next;
    }
    c->u.head[r] = keep;
    if (keep != SP_NONE) {
        c->u.pool[keep].next = SP_NONE;
    }
    return CM_OK;
}

/* XLA's insertReshardsOnFuncResults with copies: the call takes f's result
 * shardings (without any on f, fully closed ones like the call's own; with
 * neither, nothing changes), and each result whose own sharding is not
 * equivalent gets an mhlo.copy right after the call back to it (to a fully
 * closed one when it had none), which its users then read. */
static cm_status copy_results(uctx *c, uint32_t call, uint32_t f)
{
    sp_module *m = c->m;
    uint32_t n = m->ops[call].n_results, first = m->ops[call].first_result;
    const sp_sharding *src = mesh_source(m, f, false);
    const sp_sharding *call_src = NULL;
    for (uint32_t i = 0; i < n && call_src == NULL; i++) {
        call_src = sp_value_sharding(m, first + i);
    }
    if (src == NULL && call_src == NULL) {
        return CM_OK;
    }
    sp_sharding **want = cm_arena_alloc(&m->arena, sizeof *want * (n == 0 ? 1 : n));
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (want == NULL || list == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        const sp_sharding *have = sp_value_sharding(m, first + i);
        if (src != NULL) {
            want[i] = (sp_sharding *)(uintptr_t)io_sharding(m, f, false, i);
            if (want[i] == NULL) {
                want[i] = empty_like(m, src, io_rank(m, f, false, i), false);
            }
        } else {
            const sp_sharding *like = have != NULL ? have : call_src;
            uint32_t rank = have != NULL ? have->rank : type_rank(m, m->values[first + i].type);
            want[i] = empty_like(m, like, rank, true);
        }
        if (want[i] == NULL) {
            return CM_ENOMEM;
        }
    }
    const sp_attr *manual = sp_op_attr(m, call, SP_GSPMD_MANUAL_AXES);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = first + i, nv;
        sp_sharding *have = sp_value_sharding(m, r);
        if (sp_sharding_equivalent(want[i], have)) {
            continue;
        }
        sp_sharding *back = have != NULL ? have : empty_like(m, want[i], want[i]->rank, true);
        if (back == NULL) {
            return CM_ENOMEM;
        }
        uint32_t block = m->ops[call].parent_block;
        if (insert_copy(m, block, sp_op_index_in_block(m, call) + 1, r, back, manual, &nv) !=
                CM_OK ||
            redirect(c, r, nv, m->values[nv].def) != CM_OK ||
            sp_uses_add(&c->u, r, m->values[nv].def, 0) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    list->u.shardings.items = want;
    list->u.shardings.n = n;
    return sp_op_set_attr(m, call, "sdy.sharding", list);
}

static cm_status retarget(sp_module *m, uint32_t call, uint32_t f)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SYMBOL);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    a->u.sym = sym_name(m, f);
    return sp_op_set_attr(m, call, "callee", a);
}

/* The index of the function in reps[0..n) with f's key, or SP_NONE. */
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

/* Picks per call the function it will call (into rep_of, an index into
 * reps): the first callee of its key in walk order, or fully deduplicating,
 * the callee with the call's origin whose shardings have been called most
 * often, the later one taking over only when its count passes the kept
 * one's. */
static void pick(const uctx *c, bool dedup_fully, uint32_t *reps, uint32_t *rep_of, uint32_t *full,
                 uint32_t *counts)
{
    const sp_module *m = c->m;
    uint32_t n_reps = 0, n_full = 0;
    for (uint32_t i = 0; i < c->n_calls; i++) {
        uint32_t r = find_rep(m, reps, n_reps, c->callee[i], dedup_fully);
        if (r == SP_NONE) {
            r = n_reps;
            reps[n_reps++] = c->callee[i];
        }
        rep_of[i] = r;
    }
    if (!dedup_fully) {
        return;
    }
    for (uint32_t i = 0; i < c->n_calls; i++) {
        uint32_t k = find_rep(m, full, n_full, c->callee[i], false);
        if (k == SP_NONE) {
            k = n_full;
            full[n_full++] = c->callee[i];
        }
        counts[k]++;
        uint32_t cur = find_rep(m, full, n_full, reps[rep_of[i]], false);
        if (counts[k] > (cur == SP_NONE ? 0 : counts[cur])) {
            reps[rep_of[i]] = c->callee[i];
        }
    }
}

cm_status sp_gspmd_unflatten_call_graph(sp_module *m, bool dedup_fully, cm_error *err)
{
    uctx c = {.m = m, .bad = SP_NONE};
    uint32_t *reps = NULL, *rep_of = NULL, *full = NULL, *counts = NULL;
    cm_status st = sp_pass_walk(m, m->body, collect_call, &c);
    if (st == CM_EINVAL && c.bad != SP_NONE) {
        st = bad_call(m, c.bad, err);
        goto out;
    }
    if (st != CM_OK || c.n_io > UINT32_MAX - m->n_values) {
        st = cm_error_oom(err);
        goto out;
    }
    size_t n = c.n_calls == 0 ? 1 : c.n_calls;
    reps = cm_alloc(n * sizeof *reps);
    rep_of = cm_alloc(n * sizeof *rep_of);
    full = cm_alloc(n * sizeof *full);
    counts = cm_calloc(n, sizeof *counts);
    if (reps == NULL || rep_of == NULL || full == NULL || counts == NULL ||
        sp_uses_build(m, &c.u, m->n_values + c.n_io, NULL) != CM_OK) {
        st = cm_error_oom(err);
        goto out;
    }
    pick(&c, dedup_fully, reps, rep_of, full, counts);
    for (uint32_t i = 0; i < c.n_calls; i++) {
        uint32_t call = c.calls[i], f = reps[rep_of[i]];
        if (strstr(sym_name(m, c.callee[i]), INLINABLE_BODY) != NULL) {
            continue;
        }
        if ((f != c.callee[i] && retarget(m, call, f) != CM_OK) ||
            copy_operands(&c, call, f) != CM_OK || copy_results(&c, call, f) != CM_OK) {
            st = cm_error_oom(err);
            goto out;
        }
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        if (m->ops[op].kind == SP_OP_FUNC_FUNC) {
            sp_op_remove_attr(m, op, "sdy.original_func_name");
            sp_op_remove_attr(m, op, "xla.sdy.original_func_name");
            sp_op_remove_attr(m, op, "sdy.func_manual_axes");
            sp_op_remove_attr(m, op, SP_GSPMD_MANUAL_AXES);
        }
    }
out:
    sp_uses_free(&c.u);
    cm_free(c.calls);
    cm_free(c.callee);
    cm_free(reps);
    cm_free(rep_of);
    cm_free(full);
    cm_free(counts);
    return st;
}
