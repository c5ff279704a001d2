/* SPDX-License-Identifier: Apache-2.0
 * planner: -xla-sdy-round-trip-shard-map-import (sp_gspmd.h). JAX's
 * shard_map reaches XLA as a call of a function named
 * `...xla.sdy.manual_computation_body...` between @xla.sdy.GlobalToLocalShape
 * and @xla.sdy.LocalToGlobalShape custom calls that carry the in and out
 * shardings and the manual axes in their frontend attributes. Each such
 * triple becomes an sdy.manual_computation whose region is a copy of the
 * body (innermost first, so nested shard_maps nest), and the body functions
 * go. */
#include <stdio.h>
#include <string.h>

#include "sp_diag.h"
#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define BODY_NAME "xla.sdy.manual_computation_body"

static const char *call_target(const sp_module *m, uint32_t op)
{
    const sp_attr *t =
        sp_op_attr(m, op, m->ops[op].kind == SP_OP_FUNC_CALL ? "callee" : "call_target_name");
    if (t == NULL) {
        return NULL;
    }
    return t->kind == SP_ATTR_SYMBOL ? t->u.sym : t->kind == SP_ATTR_STRING ? t->u.str.s : NULL;
}

static bool is_custom(const sp_module *m, uint32_t op, const char *target)
{
    const char *t = m->ops[op].kind == SP_OP_CUSTOM_CALL ? call_target(m, op) : NULL;
    return t != NULL && strcmp(t, target) == 0;
}

static bool is_call_of(const sp_module *m, uint32_t op, const char *fragment)
{
    const char *t = m->ops[op].kind == SP_OP_FUNC_CALL ? call_target(m, op) : NULL;
    return t != NULL && strstr(t, fragment) != NULL;
}

static bool is_body_call(const sp_module *m, uint32_t op)
{
    return is_call_of(m, op, BODY_NAME);
}

const char *sp_gspmd_frontend(const sp_module *m, uint32_t op, const char *key)
{
    const sp_attr *d = sp_op_attr(m, op, "mhlo.frontend_attributes");
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *v = sp_attrs_get(d->u.dict.items, d->u.dict.n, key);
    return v != NULL && v->kind == SP_ATTR_STRING ? v->u.str.s : NULL;
}

cm_status sp_gspmd_op_error(const sp_module *m, uint32_t op, cm_error *err, const char *msg)
{
    char path[32];
    snprintf(path, sizeof path, "%u:%u", m->ops[op].line, m->ops[op].col);
    return cm_error_set(err, CM_EINVAL, path, "'%s' op %s", m->ops[op].name, msg);
}

cm_status sp_gspmd_parse_per_value(sp_module *m, const char *text, uint32_t op, sp_attr **out,
                                   cm_error *err)
{
    static const char head[] = "#sdy.sharding_per_value<[";
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (a == NULL) {
        return cm_error_oom(err);
    }
    *out = a;
    if (text == NULL) {
        return CM_OK;
    }
    size_t len = strlen(text), i = sizeof head - 1;
    if (len < i || memcmp(text, head, i) != 0) {
        return sp_gspmd_op_error(m, op, err, "has a malformed xla.sdy sharding list");
    }
    uint32_t cap = 0;
    while (i < len && text[i] != ']') {
        sp_sharding *s;
        size_t used = 0;
        cm_error e;
        cm_error_clear(&e);
        if (sp_sharding_parse(text + i, len - i, &m->arena, &s, &used, &e) != CM_OK) {
            return e.code == CM_ENOMEM
                       ? cm_error_oom(err)
                       : sp_gspmd_op_error(m, op, err, "has a malformed xla.sdy sharding");
        }
        if (a->u.shardings.n == cap) {
            uint32_t nc = cap == 0 ? 4 : cap * 2;
            sp_sharding **ni = cm_arena_alloc(&m->arena, sizeof *ni * nc);
            if (ni == NULL) {
                return cm_error_oom(err);
            }
            if (a->u.shardings.n > 0) {
                memcpy(ni, a->u.shardings.items, sizeof *ni * a->u.shardings.n);
            }
            a->u.shardings.items = ni;
            cap = nc;
        }
        a->u.shardings.items[a->u.shardings.n++] = s;
        i += used;
        while (i < len && (text[i] == ',' || text[i] == ' ')) {
            i++;
        }
    }
    return CM_OK;
}

/* Parses `#sdy<manual_axes{"a", "b"}>` into an axis list. */
static cm_status parse_manual_axes(sp_module *m, const char *text, uint32_t op, sp_attr **out,
                                   cm_error *err)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    if (a == NULL) {
        return cm_error_oom(err);
    }
    *out = a;
    if (text == NULL) {
        return CM_OK;
    }
    const char *p = strchr(text, '{'), *end = p != NULL ? strchr(p, '}') : NULL;
    if (p == NULL || end == NULL) {
        return sp_gspmd_op_error(m, op, err, "has malformed xla.sdy.manual_axes");
    }
    uint32_t n = 0;
    for (const char *q = p; q < end; q++) {
        n += *q == '"';
    }
    a->u.axes.axes = cm_arena_zalloc(&m->arena, sizeof *a->u.axes.axes * (n / 2 + 1));
    if (a->u.axes.axes == NULL) {
        return cm_error_oom(err);
    }
    for (const char *q = p; q < end;) {
        const char *o = memchr(q, '"', (size_t)(end - q));
        const char *c = o != NULL ? memchr(o + 1, '"', (size_t)(end - o - 1)) : NULL;
        if (o == NULL || c == NULL) {
            break;
        }
        const char *name = sp_module_str(m, o + 1, (size_t)(c - o - 1));
        if (name == NULL) {
            return cm_error_oom(err);
        }
        a->u.axes.axes[a->u.axes.n++] = (sp_axis_ref){name, 0, 0};
        q = c + 1;
    }
    return CM_OK;
}

static uint32_t find_func(const sp_module *m, const char *name)
{
    return name != NULL ? sp_module_func(m, name) : SP_NONE;
}

/* True when func f still calls a shard_map body (its own conversion comes
 * first). */
static bool has_body_calls(const sp_module *m, uint32_t f, const char *fragment)
{
    /* ops of f: walk its region's blocks by parent chain */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE || !is_call_of(m, i, fragment)) {
            continue;
        }
        uint32_t cur = i;
        for (int depth = 0; depth < 64 && cur != SP_NONE; depth++) {
            uint32_t pb = m->ops[cur].parent_block;
            if (pb == SP_NONE) {
                break;
            }
            cur = m->blocks[pb].parent_op;
            if (cur == f) {
                return true;
            }
        }
    }
    return false;
}

/* The first op (in m's table, attached) that uses value v, or SP_NONE. */
static uint32_t first_user(const sp_module *m, uint32_t v)
{
    uint32_t best = SP_NONE;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            if (m->ops[i].operands[k] == v) {
                if (best == SP_NONE ||
                    (m->ops[i].parent_block == m->ops[best].parent_block &&
                     sp_op_index_in_block(m, i) < sp_op_index_in_block(m, best))) {
                    best = i;
                }
                break;
            }
        }
    }
    return best;
}

static void replace_uses(sp_module *m, const sp_value_map *map)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            uint32_t to = sp_value_map_get(map, m->ops[i].operands[k]);
            if (to != SP_NONE) {
                m->ops[i].operands[k] = to;
            }
        }
    }
}

static void detach(sp_module *m, uint32_t op)
{
    uint32_t idx = sp_op_index_in_block(m, op);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[op].parent_block, idx);
        m->ops[op].parent_block = SP_NONE;
    }
}

/* Gives op and the ops nested in it their own attribute lists: a deep clone
 * shares them, and sp_op_set_attr replaces an existing entry in place. */
static cm_status own_attrs(sp_module *m, uint32_t op, int depth)
{
    if (depth > 64) {
        return CM_OK;
    }
    sp_op *o = &m->ops[op];
    if (o->n_attrs > 0) {
        sp_named_attr *a = cm_arena_memdup(&m->arena, o->attrs, o->n_attrs, sizeof *a);
        if (a == NULL) {
            return CM_ENOMEM;
        }
        m->ops[op].attrs = a;
    }
    for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
        for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
            uint32_t blk = m->ops[op].regions[r].blocks[k];
            for (uint32_t i = 0; i < m->blocks[blk].n_ops; i++) {
                cm_status st = own_attrs(m, m->blocks[blk].ops[i], depth + 1);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

/* Builds a detached sdy.manual_computation for call (of callee) with the
 * n_in global operands, n_out result types, the shardings and manual axes,
 * and a copy of the callee's body whose return keeps the results keep marks
 * (NULL: all). */
static cm_status build_mc(sp_module *m, uint32_t call, uint32_t callee, const uint32_t *operands,
                          uint32_t n_in, const uint32_t *rtypes, uint32_t n_out, sp_attr *ins,
                          sp_attr *outs, sp_attr *axes, const bool *keep, uint32_t *mc_out,
                          cm_error *err)
{
    uint32_t mc, blk;
    if (sp_module_new_op(m, SP_NONE, "sdy.manual_computation", operands, n_in, rtypes, n_out,
                         &mc) != CM_OK ||
        sp_op_add_regions(m, mc, 1) != CM_OK || sp_module_new_block(m, mc, &blk) != CM_OK ||
        sp_region_add_block(m, mc, 0, blk) != CM_OK) {
        return cm_error_oom(err);
    }
    m->ops[mc].line = m->ops[call].line;
    m->ops[mc].col = m->ops[call].col;
    m->ops[mc].loc = m->ops[call].loc;
    m->ops[mc].where = m->ops[call].where;
    if (sp_op_set_attr(m, mc, "in_shardings", ins) != CM_OK ||
        sp_op_set_attr(m, mc, "out_shardings", outs) != CM_OK ||
        sp_op_set_attr(m, mc, "manual_axes", axes) != CM_OK) {
        return cm_error_oom(err);
    }
    uint32_t body = m->ops[callee].regions[0].blocks[0];
    sp_value_map map;
    memset(&map, 0, sizeof map);
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->blocks[body].n_args && st == CM_OK; i++) {
        uint32_t v;
        st = sp_module_add_block_arg(m, blk, m->values[m->blocks[body].first_arg + i].type, &v);
        if (st == CM_OK) {
            st = sp_value_map_set(&map, m->blocks[body].first_arg + i, v);
        }
    }
    for (uint32_t i = 0; i < m->blocks[body].n_ops && st == CM_OK; i++) {
        uint32_t o = m->blocks[body].ops[i];
        if (m->ops[o].kind == SP_OP_FUNC_RETURN) {
            uint32_t n = m->ops[o].n_operands, *ops = NULL, r, k2 = 0;
            ops = cm_arena_alloc(&m->arena, sizeof *ops * (n + 1u));
            if (ops == NULL) {
                st = CM_ENOMEM;
                break;
            }
            for (uint32_t k = 0; k < n; k++) {
                if (keep != NULL && !keep[k]) {
                    continue;
                }
                uint32_t to = sp_value_map_get(&map, m->ops[o].operands[k]);
                ops[k2++] = to != SP_NONE ? to : m->ops[o].operands[k];
            }
            st = sp_module_new_op(m, blk, "sdy.return", ops, k2, NULL, 0, &r);
            continue;
        }
        uint32_t c;
        st = sp_op_clone_deep(m, o, &map, &c);
        if (st == CM_OK) {
            st = own_attrs(m, c, 0);
        }
        if (st == CM_OK) {
            st = sp_block_insert_op(m, blk, m->blocks[blk].n_ops, c);
        }
    }
    sp_value_map_free(&map);
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    *mc_out = mc;
    return CM_OK;
}

/* Converts the body call `call` into an sdy.manual_computation. */
static cm_status convert_call(sp_module *m, uint32_t call, cm_error *err)
{
    /* every error below but OOM is about the call */
    uint32_t callee = find_func(m, call_target(m, call));
    if (callee == SP_NONE || m->ops[callee].n_regions == 0 ||
        m->ops[callee].regions[0].n_blocks != 1) {
        return sp_gspmd_op_error(m, call, err,
                                 "calls a shard_map body that is not a function of the module");
    }
    /* the GlobalToLocalShape feeding it, if any */
    uint32_t g2l = SP_NONE;
    for (uint32_t k = 0; k < m->ops[call].n_operands && g2l == SP_NONE; k++) {
        uint32_t d = m->values[m->ops[call].operands[k]].def;
        if (d != SP_NONE && is_custom(m, d, "xla.sdy.GlobalToLocalShape")) {
            g2l = d;
        }
    }
    if (g2l == SP_NONE && m->ops[call].n_operands > 0) {
        return sp_gspmd_op_error(m, call, err,
                                 "expected at least one operand of @" BODY_NAME
                                 " to be produced by a xla.sdy.GlobalToLocalShape CustomCallOp");
    }
    uint32_t l2g = SP_NONE;
    if (m->ops[call].n_results > 0) {
        uint32_t u = first_user(m, m->ops[call].first_result);
        if (u == SP_NONE || !is_custom(m, u, "xla.sdy.LocalToGlobalShape")) {
            return sp_gspmd_op_error(m, call, err,
                                     "expected the first use of @" BODY_NAME
                                     " to be by a xla.sdy.LocalToGlobalShape CustomCallOp");
        }
        l2g = u;
    }
    sp_attr *ins = NULL, *outs = NULL, *axes = NULL;
    const char *ax_text = g2l != SP_NONE ? sp_gspmd_frontend(m, g2l, "xla.sdy.manual_axes") : NULL;
    if (ax_text == NULL && l2g != SP_NONE) {
        ax_text = sp_gspmd_frontend(m, l2g, "xla.sdy.manual_axes");
    }
    if (ax_text == NULL) {
        ax_text = sp_gspmd_frontend(m, call, "xla.sdy.manual_axes");
    }
    /* older XLA kept the shardings on the call itself */
    const char *in_text = g2l != SP_NONE ? sp_gspmd_frontend(m, g2l, "xla.sdy.in_shardings") : NULL;
    const char *out_text =
        l2g != SP_NONE ? sp_gspmd_frontend(m, l2g, "xla.sdy.out_shardings") : NULL;
    if (in_text == NULL && g2l != SP_NONE) {
        in_text = sp_gspmd_frontend(m, call, "xla.sdy.in_shardings");
    }
    if (out_text == NULL && l2g != SP_NONE) {
        out_text = sp_gspmd_frontend(m, call, "xla.sdy.out_shardings");
    }
    cm_status st = sp_gspmd_parse_per_value(m, in_text, call, &ins, err);
    if (st == CM_OK) {
        st = sp_gspmd_parse_per_value(m, out_text, call, &outs, err);
    }
    if (st == CM_OK) {
        st = parse_manual_axes(m, ax_text, call, &axes, err);
    }
    if (st != CM_OK) {
        return st;
    }
    /* the op: global operands and results, the body's argument types inside */
    uint32_t n_in = g2l != SP_NONE ? m->ops[g2l].n_operands : 0;
    uint32_t n_out = l2g != SP_NONE ? m->ops[l2g].n_results : 0;
    uint32_t *rtypes = cm_arena_alloc(&m->arena, sizeof *rtypes * (n_out + 1u));
    if (rtypes == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < n_out; i++) {
        rtypes[i] = m->values[m->ops[l2g].first_result + i].type;
    }
    uint32_t mc = SP_NONE;
    uint32_t parent = m->ops[call].parent_block;
    st = build_mc(m, call, callee, g2l != SP_NONE ? m->ops[g2l].operands : NULL, n_in, rtypes,
                  n_out, ins, outs, axes, NULL, &mc, err);
    if (st != CM_OK) {
        return st;
    }
    /* in place of the call; the results of LocalToGlobalShape become ours */
    if (sp_block_insert_op(m, parent, sp_op_index_in_block(m, call), mc) != CM_OK) {
        return cm_error_oom(err);
    }
    sp_value_map repl;
    memset(&repl, 0, sizeof repl);
    for (uint32_t i = 0; i < n_out && st == CM_OK; i++) {
        st = sp_value_map_set(&repl, m->ops[l2g].first_result + i, m->ops[mc].first_result + i);
    }
    if (st != CM_OK) {
        sp_value_map_free(&repl);
        return cm_error_oom(err);
    }
    replace_uses(m, &repl);
    sp_value_map_free(&repl);
    if (l2g != SP_NONE) {
        detach(m, l2g);
    }
    detach(m, call);
    if (g2l != SP_NONE && first_user(m, m->ops[g2l].first_result) == SP_NONE) {
        bool used = false;
        for (uint32_t i = 1; i < m->ops[g2l].n_results && !used; i++) {
            used = first_user(m, m->ops[g2l].first_result + i) != SP_NONE;
        }
        if (!used) {
            detach(m, g2l);
        }
    }
    return CM_OK;
}

typedef struct calls {
    uint32_t *v;
    uint32_t n, cap;
} calls;

static cm_status collect(sp_module *m, uint32_t op, void *ctx)
{
    calls *c = ctx;
    if (!is_body_call(m, op)) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->v, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->v[c->n++] = op;
    return CM_OK;
}

cm_status sp_gspmd_shard_map_import(sp_module *m, sp_diags *d, cm_error *err)
{
    calls c = {NULL, 0, 0};
    cm_status st = sp_gspmd_unescape_frontend(m, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t bad = SP_NONE;
    /* one body function per call, as XLA requires */
    for (;;) {
        c.n = 0;
        const sp_block *top = &m->blocks[m->body];
        for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
            uint32_t f = top->ops[i];
            if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
                m->ops[f].regions[0].n_blocks > 0) {
                st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], collect, &c);
            }
        }
        if (st != CM_OK) {
            st = cm_error_oom(err);
            break;
        }
        for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
            for (uint32_t j = 0; j < i && st == CM_OK; j++) {
                if (strcmp(call_target(m, c.v[i]), call_target(m, c.v[j])) == 0) {
                    st = sp_gspmd_op_error(m, c.v[i], err,
                                           "expected a unique FuncOp per @" BODY_NAME " call");
                    bad = c.v[i];
                }
            }
        }
        bool progress = false;
        for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
            uint32_t callee = find_func(m, call_target(m, c.v[i]));
            if (callee != SP_NONE && has_body_calls(m, callee, BODY_NAME)) {
                continue; /* its nested shard_maps first */
            }
            st = convert_call(m, c.v[i], err);
            bad = c.v[i];
            progress = true;
        }
        if (st != CM_OK || !progress) {
            break;
        }
    }
    cm_free(c.v);
    if (st != CM_OK) {
        /* XLA converts these as a dialect conversion, which adds its own
         * error at the op that did not convert */
        if (d != NULL && st == CM_EINVAL && bad != SP_NONE) {
            sp_diags_add(d, m, bad, SP_DIAG_ERROR, "%s", err != NULL ? err->msg : "");
            sp_diags_add(d, m, bad, SP_DIAG_ERROR, "failed to legalize operation '%s'",
                         m->ops[bad].name);
        }
        return st;
    }
    /* the body functions go once nothing calls them */
    sp_block *top = &m->blocks[m->body];
    for (uint32_t i = top->n_ops; i-- > 0;) {
        uint32_t f = top->ops[i];
        const sp_attr *n = sp_op_attr(m, f, "sym_name");
        if (m->ops[f].kind != SP_OP_FUNC_FUNC || n == NULL || n->kind != SP_ATTR_STRING ||
            strstr(n->u.str.s, BODY_NAME) == NULL) {
            continue;
        }
        bool called = false;
        for (uint32_t k = 0; k < m->n_ops && !called; k++) {
            const char *t = m->ops[k].parent_block != SP_NONE && m->ops[k].kind == SP_OP_FUNC_CALL
                                ? call_target(m, k)
                                : NULL;
            called = t != NULL && strcmp(t, n->u.str.s) == 0;
        }
        if (!called) {
            sp_block_remove_op(m, m->body, i);
            m->ops[f].parent_block = SP_NONE;
        }
    }
    return CM_OK;
}

/* ---- GSPMD's form: @Sharding + @SPMDFullToShardShape around a shmap_body call ---- */

#define SHMAP_NAME "shmap_body"

/* The number of attached ops using v; *first_out the first found. */
static uint32_t users(const sp_module *m, uint32_t v, uint32_t *first_out)
{
    uint32_t n = 0;
    *first_out = SP_NONE;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            if (m->ops[i].operands[k] == v) {
                n++;
                if (*first_out == SP_NONE) {
                    *first_out = i;
                }
            }
        }
    }
    return n;
}

/* A one-operand, one-used-result custom call of the target (XLA's shape of
 * the shard_map custom calls). */
static bool is_unary_custom(const sp_module *m, uint32_t op, const char *target)
{
    uint32_t first;
    return op != SP_NONE && is_custom(m, op, target) && m->ops[op].n_operands == 1 &&
           m->ops[op].n_results == 1 && users(m, m->ops[op].first_result, &first) > 0;
}

static sp_sharding *first_sharding(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "sdy.sharding");
    return a != NULL && a->kind == SP_ATTR_SHARDING_LIST && a->u.shardings.n > 0
               ? a->u.shardings.items[0]
               : NULL;
}

static cm_status add_axes(sp_module *m, const sp_sharding *s, const sp_mesh *mesh, bool *used,
                          uint32_t call, cm_error *err)
{
    for (uint32_t d = 0; d <= s->rank; d++) {
        const sp_axis_ref *ax = d < s->rank ? s->dims[d].axes : s->replicated;
        uint32_t n = d < s->rank ? s->dims[d].n_axes : s->n_replicated;
        for (uint32_t k = 0; k < n; k++) {
            int32_t i = sp_mesh_axis_index(mesh, ax[k].name);
            if (i < 0 || ax[k].pre_size != 0) {
                return sp_gspmd_op_error(
                    m, call, err, "has a shard_map sharding with a sub-axis or an unknown axis");
            }
            used[i] = true;
        }
    }
    return CM_OK;
}

static cm_status convert_gspmd_call(sp_module *m, uint32_t call, cm_error *err)
{
    uint32_t callee = find_func(m, call_target(m, call));
    if (callee == SP_NONE || m->ops[callee].n_regions == 0 ||
        m->ops[callee].regions[0].n_blocks != 1) {
        return sp_gspmd_op_error(m, call, err,
                                 "calls a shard_map body that is not a function of the module");
    }
    uint32_t n_in = m->ops[call].n_operands, n_res = m->ops[call].n_results;
    uint32_t *operands = cm_arena_alloc(&m->arena, sizeof *operands * (n_in + 1u));
    uint32_t *shard_in = cm_arena_alloc(&m->arena, sizeof *shard_in * (n_in + 1u));
    uint32_t *to_shard = cm_arena_alloc(&m->arena, sizeof *to_shard * (n_in + 1u));
    uint32_t *rtypes = cm_arena_alloc(&m->arena, sizeof *rtypes * (n_res + 1u));
    uint32_t *shard_out = cm_arena_alloc(&m->arena, sizeof *shard_out * (n_res + 1u));
    uint32_t *to_full = cm_arena_alloc(&m->arena, sizeof *to_full * (n_res + 1u));
    bool *keep = cm_arena_zalloc(&m->arena, sizeof *keep * (n_res + 1u));
    sp_attr *ins = sp_attr_new(m, SP_ATTR_SHARDING_LIST),
            *outs = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_attr *axes = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    if (operands == NULL || shard_in == NULL || to_shard == NULL || rtypes == NULL ||
        shard_out == NULL || to_full == NULL || keep == NULL || ins == NULL || outs == NULL ||
        axes == NULL) {
        return cm_error_oom(err);
    }
    ins->u.shardings.items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * (n_in + 1u));
    outs->u.shardings.items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * (n_res + 1u));
    if (ins->u.shardings.items == NULL || outs->u.shardings.items == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t k = 0; k < n_in; k++) {
        uint32_t f2s = m->values[m->ops[call].operands[k]].def;
        if (!is_unary_custom(m, f2s, "SPMDFullToShardShape")) {
            return sp_gspmd_op_error(m, call, err,
                                     "expecting SPMDFullToShardShape custom call as operand");
        }
        uint32_t sh = m->values[m->ops[f2s].operands[0]].def;
        if (!is_unary_custom(m, sh, "Sharding")) {
            return sp_gspmd_op_error(
                m, call, err, "expecting Sharding CustomCallOp as operand of SPMDFullToShardShape");
        }
        sp_sharding *s = first_sharding(m, sh);
        if (s == NULL) {
            return sp_gspmd_op_error(m, call, err,
                                     "expecting a sharding on the shard_map's Sharding call");
        }
        operands[k] = m->ops[sh].operands[0];
        shard_in[k] = sh;
        to_shard[k] = f2s;
        ins->u.shardings.items[ins->u.shardings.n++] = s;
    }
    uint32_t n_out = 0;
    for (uint32_t r = 0; r < n_res; r++) {
        uint32_t sh, s2f;
        uint32_t nu = users(m, m->ops[call].first_result + r, &sh);
        if (nu == 0) {
            continue; /* an unused result leaves the computation */
        }
        if (nu != 1 || !is_unary_custom(m, sh, "Sharding") ||
            users(m, m->ops[sh].first_result, &s2f) != 1 ||
            !is_unary_custom(m, s2f, "SPMDShardToFullShape")) {
            return sp_gspmd_op_error(
                m, call, err,
                "expecting each result of shmap_body to go through a Sharding and an "
                "SPMDShardToFullShape CustomCallOp");
        }
        sp_sharding *s = first_sharding(m, s2f);
        if (s == NULL) {
            return sp_gspmd_op_error(m, call, err, "expecting a sharding on SPMDShardToFullShape");
        }
        keep[r] = true;
        rtypes[n_out] = m->values[m->ops[s2f].first_result].type;
        shard_out[n_out] = sh;
        to_full[n_out] = s2f;
        n_out++;
        outs->u.shardings.items[outs->u.shardings.n++] = s;
    }
    /* the manual axes: every axis the in and out shardings use, mesh order */
    const char *mesh_name = NULL;
    for (uint32_t i = 0; i < ins->u.shardings.n + outs->u.shardings.n; i++) {
        const sp_sharding *s = i < ins->u.shardings.n
                                   ? ins->u.shardings.items[i]
                                   : outs->u.shardings.items[i - ins->u.shardings.n];
        if (s->mesh_name == NULL || (mesh_name != NULL && strcmp(mesh_name, s->mesh_name) != 0)) {
            return sp_gspmd_op_error(m, call, err,
                                     "Multiple meshes in a single manual computation.");
        }
        mesh_name = s->mesh_name;
    }
    const sp_mesh *mesh = mesh_name != NULL ? sp_module_mesh(m, mesh_name) : NULL;
    if (mesh_name != NULL && mesh == NULL) {
        return sp_gspmd_op_error(m, call, err, "uses a mesh the module does not define");
    }
    if (mesh != NULL) {
        bool used[SP_MAX_RANK * 4] = {false};
        if (mesh->n_axes > SP_MAX_RANK * 4) {
            return sp_gspmd_op_error(m, call, err, "has a mesh with too many axes");
        }
        for (uint32_t i = 0; i < ins->u.shardings.n + outs->u.shardings.n; i++) {
            const sp_sharding *s = i < ins->u.shardings.n
                                       ? ins->u.shardings.items[i]
                                       : outs->u.shardings.items[i - ins->u.shardings.n];
            cm_status st = add_axes(m, s, mesh, used, call, err);
            if (st != CM_OK) {
                return st;
            }
        }
        axes->u.axes.axes =
            cm_arena_zalloc(&m->arena, sizeof *axes->u.axes.axes * (mesh->n_axes + 1u));
        if (axes->u.axes.axes == NULL) {
            return cm_error_oom(err);
        }
        for (uint32_t i = 0; i < mesh->n_axes; i++) {
            if (used[i]) {
                axes->u.axes.axes[axes->u.axes.n++] =
                    (sp_axis_ref){mesh->axes[i].name, 0, mesh->axes[i].size};
            }
        }
    }
    uint32_t mc = SP_NONE, parent = m->ops[call].parent_block;
    cm_status st =
        build_mc(m, call, callee, operands, n_in, rtypes, n_out, ins, outs, axes, keep, &mc, err);
    if (st != CM_OK) {
        return st;
    }
    if (sp_block_insert_op(m, parent, sp_op_index_in_block(m, call), mc) != CM_OK) {
        return cm_error_oom(err);
    }
    sp_value_map repl;
    memset(&repl, 0, sizeof repl);
    for (uint32_t i = 0; i < n_out && st == CM_OK; i++) {
        st = sp_value_map_set(&repl, m->ops[to_full[i]].first_result, m->ops[mc].first_result + i);
    }
    if (st != CM_OK) {
        sp_value_map_free(&repl);
        return cm_error_oom(err);
    }
    replace_uses(m, &repl);
    sp_value_map_free(&repl);
    for (uint32_t i = 0; i < n_out; i++) {
        detach(m, to_full[i]);
        detach(m, shard_out[i]);
    }
    detach(m, call);
    for (uint32_t k = 0; k < n_in; k++) {
        uint32_t first;
        if (m->ops[to_shard[k]].parent_block != SP_NONE &&
            users(m, m->ops[to_shard[k]].first_result, &first) == 0) {
            detach(m, to_shard[k]);
        }
        if (m->ops[shard_in[k]].parent_block != SP_NONE &&
            users(m, m->ops[shard_in[k]].first_result, &first) == 0) {
            detach(m, shard_in[k]);
        }
    }
    return CM_OK;
}

static cm_status collect_shmap(sp_module *m, uint32_t op, void *ctx)
{
    calls *c = ctx;
    if (!is_call_of(m, op, SHMAP_NAME)) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->v, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->v[c->n++] = op;
    return CM_OK;
}

cm_status sp_gspmd_manual_import(sp_module *m, cm_error *err)
{
    calls c = {NULL, 0, 0};
    cm_status st = CM_OK;
    for (;;) {
        c.n = 0;
        const sp_block *top = &m->blocks[m->body];
        for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
            uint32_t f = top->ops[i];
            if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
                m->ops[f].regions[0].n_blocks > 0) {
                st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], collect_shmap, &c);
            }
        }
        if (st != CM_OK) {
            st = cm_error_oom(err);
            break;
        }
        bool progress = false;
        for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
            uint32_t callee = find_func(m, call_target(m, c.v[i]));
            if (callee != SP_NONE && has_body_calls(m, callee, SHMAP_NAME)) {
                continue;
            }
            st = convert_gspmd_call(m, c.v[i], err);
            progress = true;
        }
        if (st != CM_OK || !progress) {
            break;
        }
    }
    cm_free(c.v);
    if (st != CM_OK) {
        return st;
    }
    sp_block *top = &m->blocks[m->body];
    for (uint32_t i = top->n_ops; i-- > 0;) {
        uint32_t f = top->ops[i];
        const sp_attr *n = sp_op_attr(m, f, "sym_name");
        if (m->ops[f].kind != SP_OP_FUNC_FUNC || n == NULL || n->kind != SP_ATTR_STRING ||
            strstr(n->u.str.s, SHMAP_NAME) == NULL) {
            continue;
        }
        bool called = false;
        for (uint32_t k = 0; k < m->n_ops && !called; k++) {
            const char *t = m->ops[k].parent_block != SP_NONE && m->ops[k].kind == SP_OP_FUNC_CALL
                                ? call_target(m, k)
                                : NULL;
            called = t != NULL && strcmp(t, n->u.str.s) == 0;
        }
        if (!called) {
            sp_block_remove_op(m, m->body, i);
        }
    }
    return CM_OK;
}

/* ---- export: sdy.manual_computation back to the round trip's calls ------------------ */

typedef struct mc_list {
    uint32_t *v;
    uint32_t n, cap;
} mc_list;

/* Post-order: a manual computation after the ones nested in it. */
static cm_status collect_mc(const sp_module *m, uint32_t block, mc_list *l, int depth)
{
    if (depth > 64) {
        return CM_OK;
    }
    const sp_block *b = &m->blocks[block];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        uint32_t op = b->ops[i];
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                cm_status st = collect_mc(m, m->ops[op].regions[r].blocks[k], l, depth + 1);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        if (m->ops[op].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            if (CM_GROW_U32(l->v, l->cap, l->n + 1, NULL) != CM_OK) {
                return CM_ENOMEM;
            }
            l->v[l->n++] = op;
        }
    }
    return CM_OK;
}

static sp_attr *string_attr(sp_module *m, const char *s, size_t len)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_STRING);
    if (a != NULL) {
        a->u.str.s = sp_module_str(m, s, len);
        a->u.str.len = len;
        if (a->u.str.s == NULL) {
            a = NULL;
        }
    }
    return a;
}

static sp_attr *per_value_text(sp_module *m, const sp_attr *list)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#sdy.sharding_per_value<[");
    for (uint32_t i = 0;
         list != NULL && list->kind == SP_ATTR_SHARDING_LIST && i < list->u.shardings.n; i++) {
        cm_buf_puts(&b, i > 0 ? ", " : "");
        sp_sharding_print(list->u.shardings.items[i], &b);
    }
    cm_buf_puts(&b, "]>");
    sp_attr *a = b.oom ? NULL : string_attr(m, b.data, b.len);
    cm_buf_fini(&b);
    return a;
}

static sp_attr *manual_axes_text(sp_module *m, const sp_attr *axes)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#sdy<manual_axes{");
    for (uint32_t i = 0; axes != NULL && axes->kind == SP_ATTR_AXIS_LIST && i < axes->u.axes.n;
         i++) {
        cm_buf_printf(&b, "%s\"%s\"", i > 0 ? ", " : "", axes->u.axes.axes[i].name);
    }
    cm_buf_puts(&b, "}>");
    sp_attr *a = b.oom ? NULL : string_attr(m, b.data, b.len);
    cm_buf_fini(&b);
    return a;
}

/* A dictionary attribute of n (name, value) pairs, in the order given. */
static sp_attr *dict2(sp_module *m, const char *k1, sp_attr *v1, const char *k2, sp_attr *v2)
{
    sp_attr *d = sp_attr_new(m, SP_ATTR_DICT);
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * 2);
    if (d == NULL || items == NULL || v1 == NULL || (k2 != NULL && v2 == NULL)) {
        return NULL;
    }
    items[0] = (sp_named_attr){k1, v1};
    items[1] = (sp_named_attr){k2, v2};
    d->u.dict.items = items;
    d->u.dict.n = k2 != NULL ? 2 : 1;
    return d;
}

static cm_status shape_call(sp_module *m, uint32_t block, uint32_t at, const char *target,
                            const uint32_t *operands, uint32_t n_in, const uint32_t *types,
                            uint32_t n_out, sp_attr *frontend, uint32_t *op_out)
{
    uint32_t op;
    sp_attr *t = string_attr(m, target, strlen(target)), *se = sp_attr_new(m, SP_ATTR_BOOL);
    if (t == NULL || se == NULL || frontend == NULL ||
        sp_module_new_op(m, SP_NONE, "stablehlo.custom_call", operands, n_in, types, n_out, &op) !=
            CM_OK) {
        return CM_ENOMEM;
    }
    se->u.b = true;
    if (sp_op_set_attr(m, op, "call_target_name", t) != CM_OK ||
        sp_op_set_attr(m, op, "has_side_effect", se) != CM_OK ||
        sp_op_set_attr(m, op, "mhlo.frontend_attributes", frontend) != CM_OK ||
        sp_block_insert_op(m, block, at, op) != CM_OK) {
        return CM_ENOMEM;
    }
    *op_out = op;
    return CM_OK;
}

/* The function type text "(A, B) -> (R)" of a body, interned. */
static cm_status body_type(sp_module *m, uint32_t blk, const uint32_t *rtypes, uint32_t n_out,
                           uint32_t *id_out)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '(');
    for (uint32_t i = 0; i < m->blocks[blk].n_args; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, sp_value_type(m, m->blocks[blk].first_arg + i)->text);
    }
    cm_buf_puts(&b, ") -> (");
    for (uint32_t i = 0; i < n_out; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, m->types[rtypes[i]].text);
    }
    cm_buf_putc(&b, ')');
    cm_status st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, id_out, NULL);
    cm_buf_fini(&b);
    return st;
}

/* MLIR's symbol uniquing: the name if free, else name_N for the next N of
 * one counter. */
static const char *unique_body_name(sp_module *m, const char *base, uint32_t *counter)
{
    char buf[96];
    snprintf(buf, sizeof buf, "%s", base);
    while (sp_module_func(m, buf) != SP_NONE || sp_module_mesh(m, buf) != NULL) {
        snprintf(buf, sizeof buf, "%s_%u", base, (*counter)++);
    }
    return sp_module_str(m, buf, strlen(buf));
}

/* A manual computation's body moved into a new function (named base, made
 * unique) at the end of the module, its sdy.return a func.return. */
typedef struct mc_body {
    uint32_t blk, ret, func; /* the body block, its return, the new function */
    const char *name;
    uint32_t *ltypes, n_local; /* the body's result types */
    uint32_t *atypes;          /* the body's argument types (blocks[blk].n_args) */
    uint32_t *gtypes;          /* the computation's result types */
} mc_body;

/* Errors: CM_EINVAL for a body that does not end in sdy.return, CM_ENOMEM. */
static cm_status body_to_func(sp_module *m, uint32_t mc, const char *base, uint32_t *counter,
                              mc_body *out)
{
    sp_op *o = &m->ops[mc];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return CM_EINVAL;
    }
    uint32_t blk = o->regions[0].blocks[0];
    const sp_block *b = &m->blocks[blk];
    if (b->n_ops == 0 || m->ops[b->ops[b->n_ops - 1]].kind != SP_OP_SDY_RETURN) {
        return CM_EINVAL;
    }
    uint32_t ret = b->ops[b->n_ops - 1];
    uint32_t n_local = m->ops[ret].n_operands, n_out = o->n_results;
    uint32_t *ltypes = cm_arena_alloc(&m->arena, sizeof *ltypes * (n_local + 1u));
    uint32_t *atypes = cm_arena_alloc(&m->arena, sizeof *atypes * (b->n_args + 1u));
    uint32_t *gtypes = cm_arena_alloc(&m->arena, sizeof *gtypes * (n_out + 1u));
    if (ltypes == NULL || atypes == NULL || gtypes == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_local; i++) {
        ltypes[i] = m->values[m->ops[ret].operands[i]].type;
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        atypes[i] = m->values[b->first_arg + i].type;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        gtypes[i] = m->values[o->first_result + i].type;
    }
    const char *name = unique_body_name(m, base, counter);
    uint32_t f, fty;
    sp_attr *sym = name != NULL ? string_attr(m, name, strlen(name)) : NULL;
    sp_attr *ft = sp_attr_new(m, SP_ATTR_TYPE);
    if (sym == NULL || ft == NULL || body_type(m, blk, ltypes, n_local, &fty) != CM_OK ||
        sp_module_new_op(m, m->body, "func.func", NULL, 0, NULL, 0, &f) != CM_OK) {
        return CM_ENOMEM;
    }
    ft->u.type = fty;
    if (sp_op_set_attr(m, f, "sym_name", sym) != CM_OK ||
        sp_op_set_attr(m, f, "function_type", ft) != CM_OK || sp_op_add_regions(m, f, 1) != CM_OK ||
        sp_region_add_block(m, f, 0, blk) != CM_OK) {
        return CM_ENOMEM;
    }
    m->ops[mc].regions[0].n_blocks = 0;
    m->ops[ret].name = "func.return";
    m->ops[ret].kind = SP_OP_FUNC_RETURN;
    *out = (mc_body){blk, ret, f, name, ltypes, n_local, atypes, gtypes};
    return CM_OK;
}

/* Every use of the computation's results reads the matching value of to. */
static cm_status replace_results(sp_module *m, uint32_t mc, const uint32_t *to)
{
    sp_value_map repl;
    memset(&repl, 0, sizeof repl);
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->ops[mc].n_results && st == CM_OK; i++) {
        st = sp_value_map_set(&repl, m->ops[mc].first_result + i, to[i]);
    }
    if (st == CM_OK) {
        replace_uses(m, &repl);
    }
    sp_value_map_free(&repl);
    return st;
}

static cm_status export_mc(sp_module *m, uint32_t mc, uint32_t *counter)
{
    mc_body mb;
    cm_status bst = body_to_func(m, mc, BODY_NAME, counter, &mb);
    if (bst != CM_OK) {
        return bst;
    }
    uint32_t blk = mb.blk, parent = m->ops[mc].parent_block, n_local = mb.n_local;
    uint32_t n_in = m->ops[mc].n_operands, n_out = m->ops[mc].n_results;
    uint32_t *ltypes = mb.ltypes, *atypes = mb.atypes, *gtypes = mb.gtypes;
    const sp_block *b = &m->blocks[blk];
    const char *name = mb.name;
    const sp_attr *ins = sp_op_attr(m, mc, "in_shardings");
    const sp_attr *outs = sp_op_attr(m, mc, "out_shardings");
    const sp_attr *axes = sp_op_attr(m, mc, "manual_axes");
    /* in the computation's place: GlobalToLocalShape, the call, LocalToGlobalShape */
    uint32_t at = sp_op_index_in_block(m, mc), g2l = SP_NONE, call, l2g = SP_NONE;
    const uint32_t *call_in = m->ops[mc].operands;
    if (n_in > 0) {
        sp_attr *fe = dict2(m, "xla.sdy.in_shardings", per_value_text(m, ins),
                            "xla.sdy.manual_axes", manual_axes_text(m, axes));
        if (shape_call(m, parent, at++, "xla.sdy.GlobalToLocalShape", m->ops[mc].operands, n_in,
                       atypes, b->n_args, fe, &g2l) != CM_OK) {
            return CM_ENOMEM;
        }
        call_in = NULL;
    }
    uint32_t *cin = cm_arena_alloc(&m->arena, sizeof *cin * (m->blocks[blk].n_args + 1u));
    if (cin == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < m->blocks[blk].n_args; i++) {
        cin[i] = g2l != SP_NONE ? m->ops[g2l].first_result + i : call_in[i];
    }
    sp_attr *callee = sp_attr_new(m, SP_ATTR_SYMBOL);
    if (callee == NULL || sp_module_new_op(m, SP_NONE, "func.call", cin, m->blocks[blk].n_args,
                                           ltypes, n_local, &call) != CM_OK) {
        return CM_ENOMEM;
    }
    callee->u.sym = name;
    if (sp_op_set_attr(m, call, "callee", callee) != CM_OK) {
        return CM_ENOMEM;
    }
    if (n_in > 0 || n_out > 0) {
        sp_attr *fe = dict2(m, "inlineable", string_attr(m, "false", 5), NULL, NULL);
        if (fe == NULL || sp_op_set_attr(m, call, "mhlo.frontend_attributes", fe) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    if (sp_block_insert_op(m, parent, at++, call) != CM_OK) {
        return CM_ENOMEM;
    }
    if (n_out > 0) {
        uint32_t *lin = cm_arena_alloc(&m->arena, sizeof *lin * (n_local + 1u));
        if (lin == NULL) {
            return CM_ENOMEM;
        }
        for (uint32_t i = 0; i < n_local; i++) {
            lin[i] = m->ops[call].first_result + i;
        }
        sp_attr *fe = dict2(m, "xla.sdy.manual_axes", manual_axes_text(m, axes),
                            "xla.sdy.out_shardings", per_value_text(m, outs));
        if (shape_call(m, parent, at++, "xla.sdy.LocalToGlobalShape", lin, n_local, gtypes, n_out,
                       fe, &l2g) != CM_OK) {
            return CM_ENOMEM;
        }
        uint32_t *to = cm_arena_alloc(&m->arena, sizeof *to * n_out);
        if (to == NULL) {
            return CM_ENOMEM;
        }
        for (uint32_t i = 0; i < n_out; i++) {
            to[i] = m->ops[l2g].first_result + i;
        }
        cm_status st = replace_results(m, mc, to);
        if (st != CM_OK) {
            return st;
        }
    }
    detach(m, mc);
    return CM_OK;
}

cm_status sp_gspmd_shard_map_export(sp_module *m, cm_error *err)
{
    mc_list l = {NULL, 0, 0};
    cm_status st = CM_OK;
    const sp_block *top = &m->blocks[m->body];
    uint32_t n_top = top->n_ops;
    uint32_t *funcs = cm_alloc(sizeof *funcs * (n_top + 1u));
    if (funcs == NULL) {
        return cm_error_oom(err);
    }
    memcpy(funcs, top->ops, sizeof *funcs * n_top);
    for (uint32_t i = 0; i < n_top && st == CM_OK; i++) {
        uint32_t f = funcs[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = collect_mc(m, m->ops[f].regions[0].blocks[0], &l, 0);
        }
    }
    uint32_t counter = 0;
    for (uint32_t i = 0; i < l.n && st == CM_OK; i++) {
        st = export_mc(m, l.v[i], &counter);
        if (st == CM_EINVAL) {
            st = sp_gspmd_op_error(m, l.v[i], err, "has a body that does not end in sdy.return");
        } else if (st != CM_OK) {
            st = cm_error_oom(err);
        }
    }
    cm_free(funcs);
    cm_free(l.v);
    return st;
}

/* ---- export: sdy.manual_computation to XLA's StableHLO pattern ---------------------- */

#define INLINABLE_BODY "xla.sdy.inlinable_manual_computation_body"

/* The manual axes of every manual computation, outer ones' first. */
typedef struct mc_axes {
    uint32_t *mc;       /* manual computation op ids */
    sp_axis_list *axes; /* the axes manual inside each (enclosing ones' first) */
    uint32_t n, cap;
} mc_axes;

static bool axis_in(const sp_axis_list *l, const char *name)
{
    for (uint32_t i = 0; i < l->n; i++) {
        if (strcmp(l->axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* s without the axes of l (dimensions, replicated and unreduced axes). */
static sp_sharding *erase_manual(sp_module *m, const sp_sharding *s, const sp_axis_list *l)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d <= c->rank; d++) {
        sp_axis_ref *ax = d < c->rank ? c->dims[d].axes : c->replicated;
        uint32_t *n = d < c->rank ? &c->dims[d].n_axes : &c->n_replicated, k = 0;
        for (uint32_t i = 0; i < *n; i++) {
            if (!axis_in(l, ax[i].name)) {
                ax[k++] = ax[i];
            }
        }
        *n = k;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n_unreduced; i++) {
        if (!axis_in(l, c->unreduced[i].name)) {
            c->unreduced[k++] = c->unreduced[i];
        }
    }
    c->n_unreduced = k;
    return c;
}

static sp_attr *axes_value(sp_module *m, const sp_axis_list *l)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    if (a != NULL) {
        a->u.axes = *l;
    }
    return a;
}

static sp_attr *one_sharding(sp_module *m, sp_sharding *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
    if (a == NULL || items == NULL || s == NULL) {
        return NULL;
    }
    items[0] = s;
    a->u.shardings.items = items;
    a->u.shardings.n = 1;
    return a;
}

/* A fully closed replicated sharding of rank on mesh_name. */
static sp_sharding *closed_sharding(sp_module *m, const char *mesh_name, uint32_t rank)
{
    sp_sharding *s = cm_arena_zalloc(&m->arena, sizeof *s);
    sp_dim_sharding *dims = cm_arena_zalloc(&m->arena, sizeof *dims * (rank + 1u));
    if (s == NULL || dims == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < rank; d++) {
        dims[d].is_closed = true;
        dims[d].priority = -1;
    }
    s->mesh_name = mesh_name;
    s->dims = dims;
    s->rank = rank;
    return s;
}

static uint32_t rank_of(const sp_module *m, uint32_t type)
{
    const sp_type *t = &m->types[type];
    return t->kind == SP_TYPE_TENSOR ? t->rank : 0;
}

/* The first of the computation's in and out shardings, or NULL. */
static const sp_sharding *mc_first_sharding(const sp_module *m, uint32_t mc)
{
    static const char *const keys[2] = {"in_shardings", "out_shardings"};
    for (int k = 0; k < 2; k++) {
        const sp_attr *a = sp_op_attr(m, mc, keys[k]);
        if (a != NULL && a->kind == SP_ATTR_SHARDING_LIST && a->u.shardings.n > 0) {
            return a->u.shardings.items[0];
        }
    }
    return NULL;
}

typedef struct manual_ctx {
    sp_axis_list axes;
    const char *mesh;
    uint32_t depth;
    cm_error *err;
} manual_ctx;

static cm_status set_func_manual(sp_module *m, uint32_t f, manual_ctx *c);

/* An op of a manual computation's body (not in a nested one): its
 * shardings on another mesh go, a missing one is fully closed, and it is
 * marked with the region's manual axes; a callee is marked throughout. The
 * terminators (of the body and of nested regions) hold no value and get
 * nothing. */
static cm_status set_op_manual(sp_module *m, uint32_t op, manual_ctx *c)
{
    sp_op *o = &m->ops[op];
    if (o->kind == SP_OP_FUNC_RETURN || o->kind == SP_OP_SDY_RETURN || o->kind == SP_OP_RETURN) {
        return CM_OK;
    }
    const sp_attr *sh = sp_op_attr(m, op, "sdy.sharding");
    bool other = false;
    for (uint32_t i = 0; sh != NULL && sh->kind == SP_ATTR_SHARDING_LIST && i < sh->u.shardings.n;
         i++) {
        const char *mn = sh->u.shardings.items[i]->mesh_name;
        other = other || mn == NULL || strcmp(mn, c->mesh) != 0;
    }
    if (other) {
        (void)sp_op_remove_attr(m, op, "sdy.sharding");
        sh = NULL;
    }
    if (sh == NULL) {
        uint32_t n = o->n_results > 0 ? o->n_results : 1;
        sp_attr *l = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
        sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * n);
        if (l == NULL || items == NULL) {
            return cm_error_oom(c->err);
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t r = o->n_results > 0 ? rank_of(m, m->values[o->first_result + i].type) : 0;
            if ((items[i] = closed_sharding(m, c->mesh, r)) == NULL) {
                return cm_error_oom(c->err);
            }
        }
        l->u.shardings.items = items;
        l->u.shardings.n = n;
        if (sp_op_set_attr(m, op, "sdy.sharding", l) != CM_OK) {
            return cm_error_oom(c->err);
        }
    }
    sp_attr *ax = axes_value(m, &c->axes);
    if (ax == NULL || sp_op_set_attr(m, op, SP_GSPMD_MANUAL_AXES, ax) != CM_OK) {
        return cm_error_oom(c->err);
    }
    const sp_attr *callee = o->kind == SP_OP_FUNC_CALL ? sp_op_attr(m, op, "callee") : NULL;
    if (callee != NULL && callee->kind == SP_ATTR_SYMBOL) {
        uint32_t f = sp_module_func(m, callee->u.sym);
        if (f == SP_NONE) {
            return sp_gspmd_op_error(m, op, c->err, "calls a function the module lacks");
        }
        return set_func_manual(m, f, c);
    }
    return CM_OK;
}

/* Pre-order over block, not into nested manual computations. */
static cm_status mark_block(sp_module *m, uint32_t block, manual_ctx *c)
{
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        if (m->ops[op].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            continue;
        }
        cm_status st = set_op_manual(m, op, c);
        for (uint32_t r = 0; st == CM_OK && r < m->ops[op].n_regions; r++) {
            for (uint32_t k = 0; st == CM_OK && k < m->ops[op].regions[r].n_blocks; k++) {
                st = mark_block(m, m->ops[op].regions[r].blocks[k], c);
            }
        }
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static cm_status set_func_manual(sp_module *m, uint32_t f, manual_ctx *c)
{
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL || ++c->depth > 64) {
        return CM_OK;
    }
    static const char *const lists[2] = {"arg_attrs", "res_attrs"};
    for (int side = 0; side < 2; side++) {
        uint32_t n = side == 0 ? ft->n_inputs : ft->n_results;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t type = side == 0 ? ft->inputs[i] : ft->results[i];
            const sp_attr *arr = sp_op_attr(m, f, lists[side]);
            const sp_attr *d = arr != NULL && arr->kind == SP_ATTR_ARRAY && i < arr->u.arr.n
                                   ? arr->u.arr.items[i]
                                   : NULL;
            bool has = d != NULL && d->kind == SP_ATTR_DICT &&
                       sp_attrs_get(d->u.dict.items, d->u.dict.n, "sdy.sharding") != NULL;
            sp_attr *sv = has ? NULL : sp_attr_new(m, SP_ATTR_SHARDING);
            sp_attr *ax = axes_value(m, &c->axes);
            cm_status st = ax == NULL ? CM_ENOMEM : CM_OK;
            if (st == CM_OK && !has) {
                if (sv == NULL || (sv->u.sharding = closed_sharding(m, c->mesh,
                                                                    rank_of(m, type))) == NULL) {
                    st = CM_ENOMEM;
                } else {
                    st = side == 0 ? sp_func_set_arg_attr(m, f, i, "sdy.sharding", sv)
                                   : sp_func_set_result_attr(m, f, i, "sdy.sharding", sv);
                }
            }
            if (st == CM_OK) {
                st = side == 0 ? sp_func_set_arg_attr(m, f, i, SP_GSPMD_MANUAL_AXES, ax)
                               : sp_func_set_result_attr(m, f, i, SP_GSPMD_MANUAL_AXES, ax);
            }
            if (st != CM_OK) {
                return cm_error_oom(c->err);
            }
        }
    }
    cm_status st = CM_OK;
    if (m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0) {
        st = mark_block(m, m->ops[f].regions[0].blocks[0], c);
    }
    c->depth--;
    return st;
}

/* The manual axes inside manual computation mc: those of the innermost
 * enclosing one (listed before it in pre-order) then its own. */
static cm_status region_axes(sp_module *m, uint32_t mc, const mc_axes *done, sp_axis_list *parent,
                             sp_axis_list *out)
{
    *parent = (sp_axis_list){NULL, 0, false};
    for (uint32_t p = m->ops[mc].parent_block; p != SP_NONE;) {
        uint32_t pop = m->blocks[p].parent_op;
        if (pop == SP_NONE) {
            break;
        }
        if (m->ops[pop].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            for (uint32_t i = 0; i < done->n; i++) {
                if (done->mc[i] == pop) {
                    *parent = done->axes[i];
                }
            }
            break;
        }
        p = m->ops[pop].parent_block;
    }
    const sp_attr *own = sp_op_attr(m, mc, "manual_axes");
    uint32_t n_own = own != NULL && own->kind == SP_ATTR_AXIS_LIST ? own->u.axes.n : 0;
    sp_axis_ref *ax = cm_arena_alloc(&m->arena, sizeof *ax * (parent->n + n_own + 1u));
    if (ax == NULL) {
        return CM_ENOMEM;
    }
    if (parent->n > 0) {
        memcpy(ax, parent->axes, sizeof *ax * parent->n);
    }
    if (n_own > 0) {
        memcpy(ax + parent->n, own->u.axes.axes, sizeof *ax * n_own);
    }
    *out = (sp_axis_list){ax, parent->n + n_own, false};
    return CM_OK;
}

/* Collects manual computations in walk order: pre-order, a manual
 * computation before the ones nested in it. */
static cm_status note_mc(sp_module *m, uint32_t op, void *vctx)
{
    mc_list *l = vctx;
    if (m->ops[op].kind != SP_OP_SDY_MANUAL_COMPUTATION) {
        return CM_OK;
    }
    if (CM_GROW_U32(l->v, l->cap, l->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    l->v[l->n++] = op;
    return CM_OK;
}

static cm_status new_unary(sp_module *m, uint32_t block, uint32_t at, const char *name,
                           const char *target, uint32_t operand, uint32_t type, sp_sharding *s,
                           const sp_axis_list *manual, uint32_t *op_out)
{
    uint32_t op;
    sp_attr *sh = one_sharding(m, s);
    if (sh == NULL || sp_module_new_op(m, SP_NONE, name, &operand, 1, &type, 1, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    if (target != NULL) {
        sp_attr *t = string_attr(m, target, strlen(target));
        if (t == NULL || sp_op_set_attr(m, op, "call_target_name", t) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    if (sp_op_set_attr(m, op, "sdy.sharding", sh) != CM_OK) {
        return CM_ENOMEM;
    }
    if (manual->n > 0) {
        sp_attr *ax = axes_value(m, manual);
        if (ax == NULL || sp_op_set_attr(m, op, SP_GSPMD_MANUAL_AXES, ax) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    if (sp_block_insert_op(m, block, at, op) != CM_OK) {
        return CM_ENOMEM;
    }
    *op_out = op;
    return CM_OK;
}

/* One manual computation as XLA's partitioner expects it: per operand an
 * mhlo.copy with the in sharding and an @SPMDFullToShardShape, a call of
 * the body (a new private function), per result an mhlo.copy and an
 * @SPMDShardToFullShape with the out sharding. */
static cm_status export_mc_stablehlo(sp_module *m, uint32_t mc, const sp_axis_list *parent,
                                     const sp_axis_list *region, uint32_t *counter)
{
    const sp_sharding *first = mc_first_sharding(m, mc);
    if (first == NULL) {
        return CM_EINVAL;
    }
    const sp_attr *ins = sp_op_attr(m, mc, "in_shardings");
    const sp_attr *outs = sp_op_attr(m, mc, "out_shardings");
    uint32_t n_in = m->ops[mc].n_operands, n_out = m->ops[mc].n_results;
    if (ins == NULL || outs == NULL || ins->kind != SP_ATTR_SHARDING_LIST ||
        outs->kind != SP_ATTR_SHARDING_LIST || ins->u.shardings.n != n_in ||
        outs->u.shardings.n != n_out) {
        return CM_EINVAL;
    }
    mc_body mb;
    cm_status st = body_to_func(m, mc, INLINABLE_BODY, counter, &mb);
    if (st != CM_OK) {
        return st;
    }
    if (mb.n_local != n_out || m->blocks[mb.blk].n_args != n_in) {
        return CM_EINVAL;
    }
    sp_attr *vis = string_attr(m, "private", 7);
    if (vis == NULL || sp_op_set_attr(m, mb.func, "sym_visibility", vis) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t parent_blk = m->ops[mc].parent_block, at = sp_op_index_in_block(m, mc);
    uint32_t *cin = cm_arena_alloc(&m->arena, sizeof *cin * (n_in + 1u));
    uint32_t *to = cm_arena_alloc(&m->arena, sizeof *to * (n_out + 1u));
    if (cin == NULL || to == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_in; i++) {
        uint32_t v = m->ops[mc].operands[i], cp, f2s;
        sp_sharding *in = ins->u.shardings.items[i];
        sp_sharding *local = erase_manual(m, in, region);
        if (m->types[mb.atypes[i]].kind != SP_TYPE_TENSOR) {
            cin[i] = v;
            continue;
        }
        if (local == NULL ||
            new_unary(m, parent_blk, at++, "mhlo.copy", NULL, v, m->values[v].type, in, parent,
                      &cp) != CM_OK ||
            new_unary(m, parent_blk, at++, "stablehlo.custom_call", "SPMDFullToShardShape",
                      m->ops[cp].first_result, mb.atypes[i], local, region, &f2s) != CM_OK) {
            return CM_ENOMEM;
        }
        cin[i] = m->ops[f2s].first_result;
        sp_attr *sv = sp_attr_new(m, SP_ATTR_SHARDING);
        if (sv == NULL) {
            return CM_ENOMEM;
        }
        sv->u.sharding = local;
        if (sp_func_set_arg_attr(m, mb.func, i, "sdy.sharding", sv) != CM_OK ||
            (region->n > 0 && sp_func_set_arg_attr(m, mb.func, i, SP_GSPMD_MANUAL_AXES,
                                                   axes_value(m, region)) != CM_OK)) {
            return CM_ENOMEM;
        }
    }
    uint32_t call;
    sp_attr *callee = sp_attr_new(m, SP_ATTR_SYMBOL);
    sp_attr *csh = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **cs = cm_arena_alloc(&m->arena, sizeof *cs * (n_out + 1u));
    if (callee == NULL || csh == NULL || cs == NULL ||
        sp_module_new_op(m, SP_NONE, "func.call", cin, n_in, mb.ltypes, n_out, &call) != CM_OK) {
        return CM_ENOMEM;
    }
    callee->u.sym = mb.name;
    for (uint32_t i = 0; i < n_out; i++) {
        if ((cs[i] = erase_manual(m, outs->u.shardings.items[i], region)) == NULL) {
            return CM_ENOMEM;
        }
        sp_attr *sv = sp_attr_new(m, SP_ATTR_SHARDING);
        if (sv == NULL) {
            return CM_ENOMEM;
        }
        sv->u.sharding = cs[i];
        if (sp_func_set_result_attr(m, mb.func, i, "sdy.sharding", sv) != CM_OK ||
            (region->n > 0 && sp_func_set_result_attr(m, mb.func, i, SP_GSPMD_MANUAL_AXES,
                                                      axes_value(m, region)) != CM_OK)) {
            return CM_ENOMEM;
        }
    }
    csh->u.shardings.items = cs;
    csh->u.shardings.n = n_out;
    if (sp_op_set_attr(m, call, "callee", callee) != CM_OK ||
        (n_out > 0 && sp_op_set_attr(m, call, "sdy.sharding", csh) != CM_OK) ||
        (region->n > 0 &&
         sp_op_set_attr(m, call, SP_GSPMD_MANUAL_AXES, axes_value(m, region)) != CM_OK) ||
        sp_block_insert_op(m, parent_blk, at++, call) != CM_OK) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        uint32_t r = m->ops[call].first_result + i, cp, s2f;
        if (m->types[mb.gtypes[i]].kind != SP_TYPE_TENSOR) {
            to[i] = r;
            continue;
        }
        if (new_unary(m, parent_blk, at++, "mhlo.copy", NULL, r, m->values[r].type, cs[i], region,
                      &cp) != CM_OK ||
            new_unary(m, parent_blk, at++, "stablehlo.custom_call", "SPMDShardToFullShape",
                      m->ops[cp].first_result, mb.gtypes[i], outs->u.shardings.items[i], parent,
                      &s2f) != CM_OK) {
            return CM_ENOMEM;
        }
        to[i] = m->ops[s2f].first_result;
    }
    st = replace_results(m, mc, to);
    if (st == CM_OK) {
        detach(m, mc);
    }
    return st;
}

cm_status sp_gspmd_stablehlo_shard_map_export(sp_module *m, cm_error *err)
{
    mc_list pre = {NULL, 0, 0};
    mc_axes done = {NULL, NULL, 0, 0};
    cm_status st = sp_gspmd_walk_funcs(m, note_mc, &pre);
    done.mc = cm_alloc(sizeof *done.mc * (pre.n + 1u));
    done.axes = cm_alloc(sizeof *done.axes * (pre.n + 1u));
    sp_axis_list *parents = cm_alloc(sizeof *parents * (pre.n + 1u));
    if (st == CM_OK && (done.mc == NULL || done.axes == NULL || parents == NULL)) {
        st = CM_ENOMEM;
    }
    /* pre-order: the body's ops learn their manual axes, outer ones first */
    for (uint32_t i = 0; i < pre.n && st == CM_OK; i++) {
        uint32_t mc = pre.v[i];
        st = region_axes(m, mc, &done, &parents[i], &done.axes[i]);
        done.mc[i] = mc;
        done.n = i + 1;
        const sp_sharding *first = st == CM_OK ? mc_first_sharding(m, mc) : NULL;
        if (first == NULL || first->mesh_name == NULL || done.axes[i].n == 0 ||
            m->ops[mc].n_regions != 1 || m->ops[mc].regions[0].n_blocks != 1) {
            continue;
        }
        manual_ctx c = {done.axes[i], first->mesh_name, 0, err};
        st = mark_block(m, m->ops[mc].regions[0].blocks[0], &c);
        if (st != CM_OK) {
            goto out;
        }
    }
    /* then in post-order (inner computations first, so an outer body holds
     * their calls), numbering the bodies as XLA's walk does */
    mc_list post = {NULL, 0, 0};
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = collect_mc(m, m->ops[f].regions[0].blocks[0], &post, 0);
        }
    }
    uint32_t counter = 0;
    for (uint32_t k = 0; k < post.n && st == CM_OK; k++) {
        uint32_t i = 0;
        while (i < pre.n && pre.v[i] != post.v[k]) {
            i++;
        }
        if (i == pre.n) {
            continue;
        }
        st = export_mc_stablehlo(m, pre.v[i], &parents[i], &done.axes[i], &counter);
        if (st == CM_EINVAL) {
            st = sp_gspmd_op_error(m, pre.v[i], err,
                                   "needs in/out shardings, one per operand and result, and a "
                                   "body that ends in sdy.return");
        }
    }
    cm_free(post.v);
    if (st == CM_ENOMEM) {
        st = cm_error_oom(err);
    }
out:
    cm_free(pre.v);
    cm_free(done.mc);
    cm_free(done.axes);
    cm_free(parents);
    return st;
}

/* ---- -xla-sdy-round-trip-clone-manual-computation-calls ----------------------------- */

typedef struct clone_ctx {
    const char **seen;
    uint32_t n_seen, cap_seen;
    uint32_t counter;
    cm_error *err;
} clone_ctx;

static cm_status clone_call(sp_module *m, uint32_t op, void *vctx)
{
    clone_ctx *c = vctx;
    if (!is_body_call(m, op)) {
        return CM_OK;
    }
    const char *callee = call_target(m, op);
    bool seen = false;
    for (uint32_t i = 0; i < c->n_seen && !seen; i++) {
        seen = strcmp(c->seen[i], callee) == 0;
    }
    if (!seen) {
        if (CM_GROW_U32(c->seen, c->cap_seen, c->n_seen + 1, NULL) != CM_OK) {
            return cm_error_oom(c->err);
        }
        c->seen[c->n_seen++] = callee;
        return CM_OK;
    }
    uint32_t f = find_func(m, callee), clone;
    if (f == SP_NONE) {
        return sp_gspmd_op_error(m, op, c->err, "calls a function the module does not define");
    }
    /* MLIR's uniquing: callee_N for the next free N of one counter */
    char buf[256];
    do {
        snprintf(buf, sizeof buf, "%s_%u", callee, c->counter++);
    } while (sp_module_func(m, buf) != SP_NONE);
    sp_value_map map;
    memset(&map, 0, sizeof map);
    cm_status st = sp_op_clone_deep(m, f, &map, &clone);
    sp_value_map_free(&map);
    const char *name = st == CM_OK ? sp_module_str(m, buf, strlen(buf)) : NULL;
    sp_attr *sym = sp_attr_new(m, SP_ATTR_STRING), *ref = sp_attr_new(m, SP_ATTR_SYMBOL);
    if (name == NULL || sym == NULL || ref == NULL || own_attrs(m, clone, 0) != CM_OK) {
        return cm_error_oom(c->err);
    }
    sym->u.str.s = name;
    sym->u.str.len = strlen(name);
    ref->u.sym = name;
    sp_named_attr *own =
        cm_arena_memdup(&m->arena, m->ops[op].attrs, m->ops[op].n_attrs, sizeof *own);
    if ((m->ops[op].n_attrs > 0 && own == NULL)) {
        return cm_error_oom(c->err);
    }
    m->ops[op].attrs = own;
    if (sp_op_set_attr(m, clone, "sym_name", sym) != CM_OK ||
        sp_block_insert_op(m, m->body, m->blocks[m->body].n_ops, clone) != CM_OK ||
        sp_op_set_attr(m, op, "callee", ref) != CM_OK) {
        return cm_error_oom(c->err);
    }
    return CM_OK;
}

cm_status sp_gspmd_clone_manual_computation_calls(sp_module *m, cm_error *err)
{
    clone_ctx c = {NULL, 0, 0, 0, err};
    cm_status st = CM_OK;
    uint32_t n_top = m->blocks[m->body].n_ops;
    for (uint32_t i = 0; i < n_top && st == CM_OK; i++) {
        uint32_t f = m->blocks[m->body].ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], clone_call, &c);
        }
    }
    cm_free(c.seen);
    return st;
}
