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

static cm_status export_one(nctx *c, uint32_t nc)
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
    if (st != CM_OK) {
        return st;
    }
    const sp_attr *ins = sp_op_attr(m, nc, "in_shardings");
    const sp_attr *outs = sp_op_attr(m, nc, "out_shardings");

    /* the function */
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
    if (ins != NULL && ins->kind == SP_ATTR_SHARDING_LIST) {
        for (uint32_t i = 0; i < ins->u.shardings.n && i < m->blocks[blk].n_args; i++) {
            sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
            if (a == NULL) {
                return CM_ENOMEM;
            }
            a->u.sharding = ins->u.shardings.items[i];
            if (sp_func_set_arg_attr(m, f, i, "sdy.sharding", a) != CM_OK) {
                return CM_ENOMEM;
            }
        }
    }
    if (sp_op_set_attr(m, f, "sdy.original_func_name", orig) != CM_OK) {
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

    /* the call in its place */
    op = &m->ops[nc];
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
    return CM_OK;
}

cm_status sp_pass_export_named_computations(sp_module *m, cm_error *err)
{
    nctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    cm_status st = collect(&c, m->body);
    uint32_t extra = 0;
    for (uint32_t i = 0; i < c.n_ncs && st == CM_OK; i++) {
        extra += m->ops[c.ncs[i]].n_results;
    }
    if (st == CM_OK) {
        st = sp_uses_build(m, &c.u, m->n_values + extra, NULL);
    }
    for (uint32_t i = 0; i < c.n_ncs && st == CM_OK; i++) {
        st = export_one(&c, c.ncs[i]);
        if (st == CM_EINVAL) {
            cm_error_set(err, CM_EINVAL, "", "%u:%u: malformed sdy.named_computation",
                         m->ops[c.ncs[i]].line, m->ops[c.ncs[i]].col);
        }
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
    return st;
}
