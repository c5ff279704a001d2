/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-export-named-computations (Shardy's
 * export/export_named_computations.cc; see sp_export.h). Each
 * sdy.named_computation, innermost first, becomes a private func.func at the
 * end of the module (named after it, made unique with a `_N` suffix from one
 * counter for the whole module, and tagged sdy.original_func_name) and a
 * func.call in its place. The body's block moves into the function, its
 * sdy.return becomes func.return, the in shardings become argument
 * shardings and the out shardings the call's sdy.sharding. Data-flow edges
 * on the body arguments and the results first lend their shardings to the
 * in and out shardings, then go away. */
#include "sp_export.h"

#include <stdio.h>
#include <string.h>

#include "sp_export_int.h"
#include "sp_pass.h"

typedef struct nctx {
    sp_module *m;
    sp_uses u;
    uint32_t *ncs; /* named computations, innermost first */
    uint32_t n_ncs, cap_ncs;
    uint32_t *call_results; /* results of the new calls */
    uint32_t n_cr, cap_cr;
    uint32_t counter; /* the module's symbol uniquing counter */
    bool xla;         /* XLA's flavour (see sp_pass_xla_export_named_computations) */
    bool dedup;       /* XLA, dedup-functions-fully: one function per name and manual axes */
    uint32_t *group;  /* dedup: per named computation, its group's first member */
    uint32_t *rep;    /* dedup: per group head, the member whose body the function takes */
    uint32_t *fn;     /* dedup: per group head, the function made (SP_NONE before) */
} nctx;

/* Collects the named computations of block in post order. */
static cm_status collect(nctx *c, uint32_t block)
{
    sp_module *m = c->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t b = 0; b < m->ops[op].regions[r].n_blocks; b++) {
                cm_status st = collect(c, m->ops[op].regions[r].blocks[b]);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        if (m->ops[op].kind == SP_OP_SDY_NAMED_COMPUTATION) {
            if (CM_GROW_U32(c->ncs, c->cap_ncs, c->n_ncs + 1, NULL) != CM_OK) {
                return CM_ENOMEM;
            }
            c->ncs[c->n_ncs++] = op;
        }
    }
    return CM_OK;
}

/* The data-flow edge that is the only user of v, or SP_NONE. */
static uint32_t edge_of(const nctx *c, uint32_t v)
{
    uint32_t k = c->u.head[v];
    if (k == SP_NONE || c->u.pool[k].next != SP_NONE) {
        return SP_NONE;
    }
    uint32_t op = c->u.pool[k].op;
    return c->m->ops[op].kind == SP_OP_SDY_DATA_FLOW_EDGE ? op : SP_NONE;
}

/* Makes the users of value from use value to instead. */
static cm_status redirect(nctx *c, uint32_t from, uint32_t to)
{
    for (uint32_t k = c->u.head[from]; k != SP_NONE; k = c->u.pool[k].next) {
        sp_use use = c->u.pool[k];
        c->m->ops[use.op].operands[use.idx] = to;
        if (sp_uses_add(&c->u, to, use.op, use.idx) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    c->u.head[from] = SP_NONE;
    return CM_OK;
}

/* Replaces the data-flow edge on v, if any, with v itself. */
static cm_status drop_edge(nctx *c, uint32_t v)
{
    uint32_t e = edge_of(c, v);
    if (e == SP_NONE) {
        return CM_OK;
    }
    sp_module *m = c->m;
    cm_status st = redirect(c, m->ops[e].first_result, v);
    uint32_t idx = sp_op_index_in_block(m, e);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[e].parent_block, idx);
    }
    return st;
}

/* Shardy's getShardingsFromDataFlowEdges over n values: the shardings of
 * their edges, missing ones fully open on the first edge sharding's mesh;
 * *out NULL when no edge has a sharding. */
static cm_status edge_shardings(nctx *c, uint32_t first, uint32_t n, sp_attr **out)
{
    sp_module *m = c->m;
    *out = NULL;
    const sp_sharding *src = NULL;
    for (uint32_t i = 0; i < n && src == NULL; i++) {
        uint32_t e = edge_of(c, first + i);
        const sp_attr *a = e == SP_NONE ? NULL : sp_op_attr(m, e, "sharding");
        if (a != NULL && a->kind == SP_ATTR_SHARDING) {
            src = a->u.sharding;
        }
    }
    if (src == NULL) {
        return CM_OK;
    }
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (list == NULL || items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = first + i;
        uint32_t e = edge_of(c, v);
        const sp_attr *a = e == SP_NONE ? NULL : sp_op_attr(m, e, "sharding");
        if (a != NULL && a->kind == SP_ATTR_SHARDING) {
            items[i] = a->u.sharding;
            continue;
        }
        const sp_type *t = sp_value_type(m, v);
        items[i] = sp_sharding_open(&m->arena, src->mesh_name,
                                    t->kind == SP_TYPE_TENSOR ? t->rank : 0);
        if (items[i] == NULL) {
            return CM_ENOMEM;
        }
        items[i]->mesh = src->mesh;
    }
    list->u.shardings.items = items;
    list->u.shardings.n = n;
    *out = list;
    return CM_OK;
}

static bool symbol_taken(const sp_module *m, const char *name)
{
    const sp_block *b = &m->blocks[m->body];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        const sp_attr *a = sp_op_attr(m, b->ops[i], "sym_name");
        if (a != NULL && a->kind == SP_ATTR_STRING && strcmp(a->u.str.s, name) == 0) {
            return true;
        }
    }
    return false;
}

/* A symbol name for base not yet in the module, in m's arena. */
static const char *unique_name(nctx *c, const char *base)
{
    if (!symbol_taken(c->m, base)) {
        return sp_module_str(c->m, base, strlen(base));
    }
    char buf[512];
    int n;
    do {
        n = snprintf(buf, sizeof buf, "%s_%u", base, c->counter++);
    } while (n > 0 && (size_t)n < sizeof buf && symbol_taken(c->m, buf));
    if (n <= 0 || (size_t)n >= sizeof buf) {
        return NULL;
    }
    return sp_module_str(c->m, buf, (size_t)n);
}

static sp_attr *string_attr(sp_module *m, const char *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_STRING);
    if (a != NULL) {
        a->u.str.s = s;
        a->u.str.len = strlen(s);
    }
    return a;
}

/* The function type (args) -> (results) of the named computation nc. */
static cm_status func_type(sp_module *m, uint32_t nc, uint32_t blk, uint32_t *id_out)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '(');
    for (uint32_t i = 0; i < m->blocks[blk].n_args; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, sp_value_type(m, m->blocks[blk].first_arg + i)->text);
    }
    cm_buf_puts(&b, ") -> (");
    for (uint32_t i = 0; i < m->ops[nc].n_results; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, sp_value_type(m, m->ops[nc].first_result + i)->text);
    }
    cm_buf_putc(&b, ')');
    cm_status st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, id_out, NULL);
    cm_buf_fini(&b);
    return st;
}

/* Checks nc's shape and lends the shardings of the data-flow edges on its
 * body arguments and results to its in and out shardings. */
static cm_status lend_edges(nctx *c, uint32_t nc)
{
    sp_module *m = c->m;
    sp_op *op = &m->ops[nc];
    if (op->n_regions != 1 || op->regions[0].n_blocks != 1) {
        return CM_EINVAL;
    }
    uint32_t blk = op->regions[0].blocks[0];
    const sp_attr *name = sp_op_attr(m, nc, "name");
    if (name == NULL || name->kind != SP_ATTR_STRING) {
        return CM_EINVAL;
    }
    sp_attr *in = NULL, *out = NULL;
    cm_status st = edge_shardings(c, m->blocks[blk].first_arg, m->blocks[blk].n_args, &in);
    if (st == CM_OK && in != NULL) {
        st = sp_op_set_attr(m, nc, "in_shardings", in);
    }
    if (st == CM_OK) {
        st = edge_shardings(c, op->first_result, op->n_results, &out);
    }
    if (st == CM_OK && out != NULL) {
        st = sp_op_set_attr(m, nc, "out_shardings", out);
    }
    return st;
}

/* Sets key (an attribute) on argument (is_arg) or result i of function f. */
static cm_status set_io_attr(sp_module *m, uint32_t f, bool is_arg, uint32_t i, const char *key,
                             const sp_attr *v)
{
    sp_attr *a = (sp_attr *)(uintptr_t)v;
    return is_arg ? sp_func_set_arg_attr(m, f, i, key, a) : sp_func_set_result_attr(m, f, i, key, a);
}

/* Puts the shardings of list (when a sharding list) on f's arguments
 * (is_arg) or results, with the manual axes when given. */
static cm_status set_io_shardings(sp_module *m, uint32_t f, bool is_arg, uint32_t n,
                                  const sp_attr *list, const sp_attr *manual)
{
    if (list == NULL || list->kind != SP_ATTR_SHARDING_LIST) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < list->u.shardings.n && i < n; i++) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        if (a == NULL) {
            return CM_ENOMEM;
        }
        a->u.sharding = list->u.shardings.items[i];
        if (set_io_attr(m, f, is_arg, i, "sdy.sharding", a) != CM_OK ||
            (manual != NULL && set_io_attr(m, f, is_arg, i, "xla.sdy.manual_axes", manual) !=
                                   CM_OK)) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* Moves nc's body into a new private function at the end of the module;
 * *f_out is the function. */
static cm_status make_func(nctx *c, uint32_t nc, uint32_t *f_out)
{
    sp_module *m = c->m;
    sp_op *op = &m->ops[nc];
    uint32_t blk = op->regions[0].blocks[0];
    const sp_attr *name = sp_op_attr(m, nc, "name");
    const sp_attr *ins = sp_op_attr(m, nc, "in_shardings");
    const sp_attr *outs = sp_op_attr(m, nc, "out_shardings");
    const sp_attr *manual = c->xla ? sp_op_attr(m, nc, "xla.sdy.manual_axes") : NULL;
    cm_status st;

    const char *fname = unique_name(c, name->u.str.s);
    uint32_t f, fty;
    sp_attr *sym = fname == NULL ? NULL : string_attr(m, fname);
    sp_attr *vis = string_attr(m, "private");
    sp_attr *orig = string_attr(m, name->u.str.s);
    sp_attr *ft = sp_attr_new(m, SP_ATTR_TYPE);
    if (sym == NULL || vis == NULL || orig == NULL || ft == NULL ||
        func_type(m, nc, blk, &fty) != CM_OK ||
        sp_module_new_op(m, m->body, "func.func", NULL, 0, NULL, 0, &f) != CM_OK) {
        return CM_ENOMEM;
    }
    ft->u.type = fty;
    if (sp_op_set_attr(m, f, "sym_name", sym) != CM_OK ||
        sp_op_set_attr(m, f, "function_type", ft) != CM_OK ||
        sp_op_set_attr(m, f, "sym_visibility", vis) != CM_OK ||
        sp_op_add_regions(m, f, 1) != CM_OK || sp_region_add_block(m, f, 0, blk) != CM_OK) {
        return CM_ENOMEM;
    }
    op = &m->ops[nc];
    op->regions[0].n_blocks = 0;
    if (set_io_shardings(m, f, true, m->blocks[blk].n_args, ins, manual) != CM_OK ||
        (c->xla && set_io_shardings(m, f, false, m->ops[nc].n_results, outs, manual) != CM_OK) ||
        sp_op_set_attr(m, f, "sdy.original_func_name", orig) != CM_OK ||
        (manual != NULL &&
         sp_op_set_attr(m, f, "xla.sdy.manual_axes", (sp_attr *)(uintptr_t)manual) != CM_OK)) {
        return CM_ENOMEM;
    }
    const sp_attr *thread = sp_op_attr(m, nc, "execution_thread");
    if (thread != NULL && sp_op_set_attr(m, f, "execution_thread", (sp_attr *)(uintptr_t)thread) !=
                              CM_OK) {
        return CM_ENOMEM;
    }
    sp_block *b = &m->blocks[blk];
    if (b->n_ops > 0) {
        sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
        if (ret->kind == SP_OP_SDY_RETURN) {
            ret->name = "func.return";
            ret->kind = SP_OP_FUNC_RETURN;
        }
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        if ((st = drop_edge(c, b->first_arg + i)) != CM_OK) {
            return st;
        }
    }
    *f_out = f;
    return CM_OK;
}

static bool is_manual_axis(const sp_attr *manual, const char *name)
{
    for (uint32_t i = 0; i < manual->u.axes.n; i++) {
        if (strcmp(manual->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* The sharding of value v as its users see it: sp_value_sharding, and for
 * an argument of an sdy.manual_computation body its in sharding without
 * the manual axes. *out is NULL without one. */
static cm_status local_sharding(sp_module *m, uint32_t v, const sp_sharding **out)
{
    *out = sp_value_sharding(m, v);
    const sp_value *val = &m->values[v];
    uint32_t owner = val->def == SP_NONE ? m->blocks[val->block].parent_op : SP_NONE;
    if (owner == SP_NONE || m->ops[owner].kind != SP_OP_SDY_MANUAL_COMPUTATION) {
        return CM_OK;
    }
    const sp_attr *ins = sp_op_attr(m, owner, "in_shardings");
    const sp_attr *manual = sp_op_attr(m, owner, "manual_axes");
    if (ins == NULL || ins->kind != SP_ATTR_SHARDING_LIST || val->index >= ins->u.shardings.n) {
        return CM_OK;
    }
    sp_sharding *l = sp_sharding_clone(&m->arena, ins->u.shardings.items[val->index]);
    if (l == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t d = 0; d < l->rank && manual != NULL && manual->kind == SP_ATTR_AXIS_LIST;
         d++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < l->dims[d].n_axes; i++) {
            if (!is_manual_axis(manual, l->dims[d].axes[i].name)) {
                l->dims[d].axes[k++] = l->dims[d].axes[i];
            }
        }
        l->dims[d].n_axes = k;
    }
    *out = l;
    return CM_OK;
}

/* A new `mhlo.copy` of value v with sharding s (and manual axes when not
 * NULL), not yet in a block; *out is the op. */
static cm_status new_copy(sp_module *m, uint32_t v, sp_sharding *s, const sp_attr *manual,
                          uint32_t *out)
{
    uint32_t ty = m->values[v].type;
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
    if (a == NULL || items == NULL ||
        sp_module_new_op(m, SP_NONE, "mhlo.copy", &v, 1, &ty, 1, out) != CM_OK) {
        return CM_ENOMEM;
    }
    items[0] = s;
    a->u.shardings.items = items;
    a->u.shardings.n = 1;
    if (manual != NULL &&
        sp_op_set_attr(m, *out, "xla.sdy.manual_axes", (sp_attr *)(uintptr_t)manual) != CM_OK) {
        return CM_ENOMEM;
    }
    return sp_op_set_attr(m, *out, "sdy.sharding", a);
}

/* XLA, dedup-functions-fully: an operand of call whose sharding is not
 * equivalent to the function's argument sharding reaches the call through
 * an mhlo.copy to it; a result whose sharding (the function's) is not
 * equivalent to nc's own out sharding gets an mhlo.copy to that after the
 * call, which the result's users then read. */
static cm_status insert_copies(nctx *c, uint32_t nc, uint32_t call, uint32_t f)
{
    sp_module *m = c->m;
    uint32_t block = m->ops[call].parent_block;
    const sp_attr *manual = sp_op_attr(m, nc, "xla.sdy.manual_axes");
    for (uint32_t k = 0; k < m->ops[call].n_operands; k++) {
        uint32_t v = m->ops[call].operands[k], cp;
        sp_sharding *want = (sp_sharding *)(uintptr_t)sp_exp_io_sharding(m, f, true, k);
        const sp_sharding *have = NULL;
        if (local_sharding(m, v, &have) != CM_OK) {
            return CM_ENOMEM;
        }
        if (want == NULL || sp_sharding_equivalent(have, want)) {
            continue;
        }
        if (new_copy(m, v, want, manual, &cp) != CM_OK ||
            sp_block_insert_op(m, block, sp_op_index_in_block(m, call), cp) != CM_OK) {
            return CM_ENOMEM;
        }
        uint32_t nv = m->ops[cp].first_result;
        m->ops[call].operands[k] = nv;
        for (uint32_t j = c->u.head[v]; j != SP_NONE; j = c->u.pool[j].next) {
            if (c->u.pool[j].op == call && c->u.pool[j].idx == k) {
                c->u.pool[j].op = cp;
                c->u.pool[j].idx = 0;
            }
        }
        if (sp_uses_add(&c->u, nv, call, k) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    const sp_attr *outs = sp_op_attr(m, nc, "out_shardings");
    const sp_attr *have = sp_op_attr(m, call, "sdy.sharding");
    if (outs != NULL && outs->kind != SP_ATTR_SHARDING_LIST) {
        outs = NULL;
    }
    if (have == NULL || have->kind != SP_ATTR_SHARDING_LIST) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < m->ops[call].n_results && i < have->u.shardings.n; i++) {
        /* without out shardings of its own, nc's results were fully closed */
        sp_sharding *want = outs != NULL ? (i < outs->u.shardings.n ? outs->u.shardings.items[i]
                                                                     : NULL)
                                         : sp_exp_fully_closed_like(m, have->u.shardings.items[i]);
        if (want == NULL) {
            return outs != NULL ? CM_OK : CM_ENOMEM;
        }
        if (sp_sharding_equivalent(have->u.shardings.items[i], want)) {
            continue;
        }
        uint32_t r = m->ops[call].first_result + i, cp;
        if (new_copy(m, r, want, manual, &cp) != CM_OK ||
            sp_block_insert_op(m, block, sp_op_index_in_block(m, call) + 1, cp) != CM_OK ||
            redirect(c, r, m->ops[cp].first_result) != CM_OK ||
            sp_uses_add(&c->u, r, cp, 0) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* Replaces nc with a call of function f. */
static cm_status make_call(nctx *c, uint32_t nc, uint32_t f)
{
    sp_module *m = c->m;
    const sp_attr *outs = sp_op_attr(m, nc, "out_shardings");
    const char *fname = sp_op_attr(m, f, "sym_name")->u.str.s;
    cm_status st;
    /* XLA's call takes its function's result shardings, fully closed
     * copies of its own out shardings when the function has none */
    if (c->xla && c->dedup) {
        const sp_attr *own = outs;
        outs = sp_op_attr(m, c->rep[c->group[nc]], "out_shardings");
        if (outs == NULL && own != NULL && own->kind == SP_ATTR_SHARDING_LIST) {
            sp_attr *l = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
            uint32_t n = own->u.shardings.n;
            sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
            if (l == NULL || items == NULL) {
                return CM_ENOMEM;
            }
            for (uint32_t i = 0; i < n; i++) {
                if ((items[i] = sp_exp_fully_closed_like(m, own->u.shardings.items[i])) == NULL) {
                    return CM_ENOMEM;
                }
            }
            l->u.shardings.items = items;
            l->u.shardings.n = n;
            outs = l;
        }
    }
    sp_op *op = &m->ops[nc];
    uint32_t n_res = op->n_results, call;
    uint32_t tys[64];
    uint32_t *types = n_res <= 64 ? tys : cm_alloc(sizeof *types * n_res);
    if (types == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_res; i++) {
        types[i] = m->values[op->first_result + i].type;
    }
    st = sp_module_new_op(m, SP_NONE, "func.call", op->operands, op->n_operands, types, n_res,
                          &call);
    if (types != tys) {
        cm_free(types);
    }
    if (st != CM_OK) {
        return st;
    }
    op = &m->ops[nc];
    sp_attr *callee = sp_attr_new(m, SP_ATTR_SYMBOL);
    if (callee == NULL) {
        return CM_ENOMEM;
    }
    callee->u.sym = fname;
    if (sp_op_set_attr(m, call, "callee", callee) != CM_OK) {
        return CM_ENOMEM;
    }
    static const char *const skip[] = {"name", "in_shardings", "out_shardings",
                                       "execution_thread"};
    for (uint32_t i = 0; i < m->ops[nc].n_attrs; i++) {
        const sp_named_attr *na = &m->ops[nc].attrs[i];
        bool skipped = false;
        for (size_t k = 0; k < sizeof skip / sizeof skip[0]; k++) {
            skipped = skipped || strcmp(na->name, skip[k]) == 0;
        }
        if (!skipped && sp_op_set_attr(m, call, na->name, na->value) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    if (outs != NULL && sp_op_set_attr(m, call, "sdy.sharding", (sp_attr *)(uintptr_t)outs) !=
                            CM_OK) {
        return CM_ENOMEM;
    }
    m->ops[call].line = m->ops[nc].line;
    m->ops[call].col = m->ops[nc].col;
    /* the call takes over the computation's operand uses, so that a later
     * redirect (drop_edge on a preceding call's result) reaches it */
    for (uint32_t k = 0; k < m->ops[call].n_operands; k++) {
        uint32_t v = m->ops[call].operands[k];
        for (uint32_t j = c->u.head[v]; j != SP_NONE; j = c->u.pool[j].next) {
            if (c->u.pool[j].op == nc && c->u.pool[j].idx == k) {
                c->u.pool[j].op = call;
            }
        }
    }
    uint32_t parent = m->ops[nc].parent_block, idx = sp_op_index_in_block(m, nc);
    if (idx == SP_NONE || sp_block_insert_op(m, parent, idx, call) != CM_OK) {
        return idx == SP_NONE ? CM_EINVAL : CM_ENOMEM;
    }
    sp_block_remove_op(m, parent, idx + 1);
    for (uint32_t i = 0; i < n_res; i++) {
        uint32_t r = m->ops[call].first_result + i;
        if (redirect(c, m->ops[nc].first_result + i, r) != CM_OK ||
            CM_GROW_U32(c->call_results, c->cap_cr, c->n_cr + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        c->call_results[c->n_cr++] = r;
    }
    return c->xla && c->dedup ? insert_copies(c, nc, call, f) : CM_OK;
}

static cm_status export_one(nctx *c, uint32_t nc)
{
    uint32_t f;
    if (!c->dedup) {
        cm_status st = make_func(c, nc, &f);
        return st != CM_OK ? st : make_call(c, nc, f);
    }
    uint32_t g = c->group[nc];
    if (c->fn[g] == SP_NONE) {
        return CM_EINVAL; /* the group's function is made before any call */
    }
    return make_call(c, nc, c->fn[g]);
}

/* Does named computation x have y's name and manual axes (and, when exact,
 * in and out shardings)? */
static bool same_computation(const sp_module *m, uint32_t x, uint32_t y, bool exact)
{
    static const char *const keys[] = {"name", "xla.sdy.manual_axes", "in_shardings",
                                       "out_shardings"};
    for (size_t k = 0; k < (exact ? 4u : 2u); k++) {
        if (!sp_exp_attr_equal(sp_op_attr(m, x, keys[k]), sp_op_attr(m, y, keys[k]))) {
            return false;
        }
    }
    return true;
}

/* XLA's dedup-functions-fully: named computations with the same name and
 * manual axes form a group sharing one function, made from the body of the
 * member whose exact computation (with its in and out shardings) is seen
 * most often, the earliest on a tie; the functions are made up front, in
 * the order the groups first appear. */
static cm_status make_group_functions(nctx *c)
{
    sp_module *m = c->m;
    uint32_t *best = cm_calloc((size_t)c->n_ncs + 1u, sizeof *best);
    if (best == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < c->n_ncs; i++) {
        uint32_t nc = c->ncs[i], g = nc, sites = 0;
        for (uint32_t j = 0; j < i; j++) {
            sites += same_computation(m, c->ncs[j], nc, true);
        }
        for (uint32_t j = 0; j < i && g == nc; j++) {
            if (same_computation(m, c->ncs[j], nc, false)) {
                g = c->group[c->ncs[j]];
            }
        }
        c->group[nc] = g;
        if (g == nc) {
            c->rep[g] = nc;
            best[i] = sites;
            continue;
        }
        uint32_t gi = 0;
        while (c->ncs[gi] != g) {
            gi++;
        }
        if (sites > best[gi]) {
            best[gi] = sites;
            c->rep[g] = nc;
        }
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < c->n_ncs && st == CM_OK; i++) {
        uint32_t nc = c->ncs[i];
        if (c->group[nc] == nc) {
            st = make_func(c, c->rep[nc], &c->fn[nc]);
        }
    }
    cm_free(best);
    return st;
}

static cm_status export_all(sp_module *m, bool xla, bool dedup, cm_error *err)
{
    nctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.xla = xla;
    c.dedup = xla && dedup;
    cm_status st = collect(&c, m->body);
    uint32_t extra = 0;
    for (uint32_t i = 0; i < c.n_ncs && st == CM_OK; i++) {
        extra += m->ops[c.ncs[i]].n_results + (c.dedup ? m->ops[c.ncs[i]].n_operands : 0u);
    }
    if (st == CM_OK) {
        /* room for the calls' results and, deduplicating, the copies */
        st = sp_uses_build(m, &c.u, m->n_values + (c.dedup ? 2u : 1u) * extra, NULL);
    }
    if (st == CM_OK && c.dedup) {
        size_t n = (size_t)m->n_ops + 1u;
        c.group = cm_alloc(n * sizeof *c.group);
        c.rep = cm_alloc(n * sizeof *c.rep);
        c.fn = cm_alloc(n * sizeof *c.fn);
        if (c.group == NULL || c.rep == NULL || c.fn == NULL) {
            st = CM_ENOMEM;
        } else {
            memset(c.fn, 0xff, n * sizeof *c.fn); /* SP_NONE */
        }
    }
    uint32_t bad = SP_NONE;
    for (uint32_t i = 0; i < c.n_ncs && st == CM_OK; i++) {
        st = lend_edges(&c, c.ncs[i]);
        bad = c.ncs[i];
    }
    if (st == CM_OK && c.dedup) {
        st = make_group_functions(&c);
    }
    for (uint32_t i = 0; i < c.n_ncs && st == CM_OK; i++) {
        bad = c.ncs[i];
        st = export_one(&c, c.ncs[i]);
    }
    if (st == CM_EINVAL) {
        cm_error_set(err, CM_EINVAL, "", "%u:%u: malformed sdy.named_computation",
                     m->ops[bad].line, m->ops[bad].col);
    }
    for (uint32_t i = 0; i < c.n_cr && st == CM_OK; i++) {
        st = drop_edge(&c, c.call_results[i]);
    }
    if (st == CM_ENOMEM) {
        cm_error_oom(err);
    }
    sp_uses_free(&c.u);
    cm_free(c.ncs);
    cm_free(c.call_results);
    cm_free(c.group);
    cm_free(c.rep);
    cm_free(c.fn);
    return st;
}

cm_status sp_pass_export_named_computations(sp_module *m, cm_error *err)
{
    return export_all(m, false, false, err);
}

cm_status sp_pass_xla_export_named_computations(sp_module *m, bool dedup_fully, cm_error *err)
{
    return export_all(m, true, dedup_fully, err);
}
