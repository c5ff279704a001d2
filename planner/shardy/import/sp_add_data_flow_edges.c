/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-add-data-flow-edges (Shardy's
 * import/add_data_flow_edges.cc; see sp_import.h). Every data-flow edge
 * owner gets an sdy.data_flow_edge that takes the owner's sharding and
 * replaces it in all other uses. The owners, as Shardy's data-flow op
 * interface lists them: the results of stablehlo.while, stablehlo.case and
 * stablehlo.optimization_barrier (sharding: the op's sdy.sharding entry),
 * and the results and body arguments of sdy.manual_computation and
 * sdy.named_computation (out_shardings and in_shardings entries; a manual
 * computation's body argument drops the manual axes). Owners whose type is
 * not a static-shaped tensor (tokens, dynamic shapes) are skipped. Result
 * edges follow their op in result order; argument edges open the body in
 * argument order. The owners keep their own sharding attributes. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct actx {
    uint32_t *owners; /* owner ops in program order */
    uint32_t n, cap;
    uint32_t *image; /* per value: its edge's result, or SP_NONE */
    uint32_t n_image;
    bool named_only; /* only named computations own edges */
} actx;

static bool is_owner_kind(uint32_t kind)
{
    return kind == SP_OP_WHILE || kind == SP_OP_CASE || kind == SP_OP_OPTIMIZATION_BARRIER ||
           kind == SP_OP_SDY_MANUAL_COMPUTATION || kind == SP_OP_SDY_NAMED_COMPUTATION;
}

static cm_status collect(sp_module *m, uint32_t opid, void *vctx)
{
    actx *c = vctx;
    uint32_t kind = m->ops[opid].kind;
    if (c->named_only ? kind != SP_OP_SDY_NAMED_COMPUTATION : !is_owner_kind(kind)) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->owners, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->owners[c->n++] = opid;
    return CM_OK;
}

static bool is_static_tensor(const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return false;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] == SP_DIM_DYNAMIC) {
            return false;
        }
    }
    return true;
}

/* Entry i of sharding-list attribute name of op, or NULL. */
static const sp_sharding *list_entry(const sp_module *m, uint32_t op, const char *name,
                                     uint32_t i)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST || i >= a->u.shardings.n) {
        return NULL;
    }
    return a->u.shardings.items[i];
}

static bool is_manual(const sp_attr *manual, const char *name)
{
    for (uint32_t i = 0; manual != NULL && i < manual->u.axes.n; i++) {
        if (strcmp(manual->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* Copies axes that are not manual into a fresh array in the arena. */
static cm_status free_axes(sp_module *m, const sp_axis_ref *axes, uint32_t n,
                           const sp_attr *manual, sp_axis_ref **out, uint32_t *n_out)
{
    sp_axis_ref *r = cm_arena_alloc(&m->arena, sizeof *r * (n + 1u));
    if (r == NULL) {
        return CM_ENOMEM;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_manual(manual, axes[i].name)) {
            r[k++] = axes[i];
        }
    }
    *out = r;
    *n_out = k;
    return CM_OK;
}

/* The sharding a manual computation's body sees for an outer in sharding:
 * each dimension drops its leading manual axes (keeping openness and
 * priority), and manual axes leave the replicated and unreduced lists.
 * NULL with *st set on allocation failure. */
static sp_sharding *erase_manual_axes(sp_module *m, const sp_sharding *outer,
                                      const sp_attr *manual, cm_status *st)
{
    *st = CM_OK;
    if (manual == NULL || manual->u.axes.n == 0) {
        return (sp_sharding *)(uintptr_t)outer;
    }
    sp_sharding *r = sp_sharding_clone(&m->arena, outer);
    if (r == NULL) {
        *st = CM_ENOMEM;
        return NULL;
    }
    for (uint32_t d = 0; d < r->rank; d++) {
        sp_dim_sharding *rd = &r->dims[d];
        uint32_t skip = 0;
        while (skip < rd->n_axes && is_manual(manual, rd->axes[skip].name)) {
            skip++;
        }
        if (skip > 0) { /* an empty dimension may have no axes array */
            rd->axes += skip;
            rd->n_axes -= skip;
        }
    }
    if ((*st = free_axes(m, outer->replicated, outer->n_replicated, manual, &r->replicated,
                         &r->n_replicated)) != CM_OK ||
        (*st = free_axes(m, outer->unreduced, outer->n_unreduced, manual, &r->unreduced,
                         &r->n_unreduced)) != CM_OK) {
        return NULL;
    }
    return r;
}

/* Creates the edge on owner v with sharding s (may be NULL) at index of
 * block, recording it as v's image. */
static cm_status add_edge(sp_module *m, actx *c, uint32_t v, const sp_sharding *s,
                          uint32_t block, uint32_t index, const char *loc,
                          const sp_loc *where)
{
    sp_attr *a = NULL;
    if (s != NULL) {
        if ((a = sp_attr_new(m, SP_ATTR_SHARDING)) == NULL) {
            return CM_ENOMEM;
        }
        a->u.sharding = (sp_sharding *)(uintptr_t)s;
    }
    return sp_pass_insert_edge(m, "sdy.data_flow_edge", v, "sharding", a, block, index, loc, where,
                               &c->image[v]);
}

static cm_status add_owner_edges(sp_module *m, actx *c, uint32_t opid)
{
    cm_status st = CM_OK;
    uint32_t kind = m->ops[opid].kind;
    bool region_op = kind == SP_OP_SDY_MANUAL_COMPUTATION || kind == SP_OP_SDY_NAMED_COMPUTATION;
    const char *ins = "in_shardings", *outs = "out_shardings";
    const sp_attr *manual = NULL;
    if (kind == SP_OP_SDY_MANUAL_COMPUTATION) {
        manual = sp_op_attr(m, opid, "manual_axes");
        if (manual != NULL && manual->kind != SP_ATTR_AXIS_LIST) {
            manual = NULL;
        }
    }
    if (region_op && m->ops[opid].n_regions == 1 && m->ops[opid].regions[0].n_blocks == 1) {
        uint32_t bid = m->ops[opid].regions[0].blocks[0];
        uint32_t n_args = m->blocks[bid].n_args, at = 0;
        for (uint32_t i = 0; i < n_args; i++) {
            uint32_t v = m->blocks[bid].first_arg + i;
            if (!is_static_tensor(sp_value_type(m, v))) {
                continue;
            }
            const sp_sharding *s = list_entry(m, opid, ins, i);
            if (s != NULL && manual != NULL) {
                s = erase_manual_axes(m, s, manual, &st);
                if (st != CM_OK) {
                    return st;
                }
            }
            const sp_block *b = &m->blocks[bid];
            const char *loc = b->arg_locs != NULL ? b->arg_locs[i] : NULL;
            const sp_loc *where = b->arg_where != NULL ? b->arg_where[i] : NULL;
            if ((st = add_edge(m, c, v, s, bid, at++, loc, where)) != CM_OK) {
                return st;
            }
        }
    }
    uint32_t idx = sp_op_index_in_block(m, opid);
    if (idx == SP_NONE) {
        return CM_OK;
    }
    uint32_t block = m->ops[opid].parent_block, at = idx + 1;
    uint32_t n_results = m->ops[opid].n_results;
    for (uint32_t i = 0; i < n_results; i++) {
        uint32_t v = m->ops[opid].first_result + i;
        if (!is_static_tensor(sp_value_type(m, v))) {
            continue;
        }
        const sp_sharding *s =
            region_op ? list_entry(m, opid, outs, i) : sp_value_sharding(m, v);
        if ((st = add_edge(m, c, v, s, block, at++, m->ops[opid].loc, m->ops[opid].where)) !=
            CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* Points every use of an owner, except its edge, at the edge's result. */
static cm_status redirect(sp_module *m, uint32_t opid, void *vctx)
{
    actx *c = vctx;
    sp_op *op = &m->ops[opid];
    if (op->kind == SP_OP_SDY_DATA_FLOW_EDGE) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t v = op->operands[i];
        if (v < c->n_image && c->image[v] != SP_NONE) {
            op->operands[i] = c->image[v];
        }
    }
    return CM_OK;
}

cm_status sp_pass_add_data_flow_edges(sp_module *m, cm_error *err)
{
    return sp_import_add_data_flow_edges(m, false, err);
}

cm_status sp_import_add_data_flow_edges(sp_module *m, bool named_only, cm_error *err)
{
    actx c;
    memset(&c, 0, sizeof c);
    c.named_only = named_only;
    cm_status st = sp_pass_walk(m, m->body, collect, &c);
    if (st == CM_OK && c.n > 0) {
        c.n_image = m->n_values;
        c.image = cm_alloc(sizeof *c.image * ((size_t)c.n_image + 1u));
        if (c.image == NULL) {
            st = CM_ENOMEM;
        } else {
            for (uint32_t v = 0; v < c.n_image; v++) {
                c.image[v] = SP_NONE;
            }
        }
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        st = add_owner_edges(m, &c, c.owners[i]);
    }
    if (st == CM_OK && c.n > 0) {
        st = sp_pass_walk(m, m->body, redirect, &c);
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    cm_free(c.image);
    cm_free(c.owners);
    return st;
}
