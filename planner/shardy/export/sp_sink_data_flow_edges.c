/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-sink-data-flow-edges (Shardy's
 * export/sink_data_flow_edges.cc; see sp_export.h). The shardings that
 * propagation left on sdy.data_flow_edge ops move to the data-flow op that
 * owns the edges: the results of while, case, if and optimization_barrier
 * (their sdy.sharding) and of sdy.named_computation and
 * sdy.manual_computation (their out_shardings), and the body arguments of
 * those two (their in_shardings; a manual computation keeps the outer
 * manual axes in front). Then every
 * sdy.data_flow_edge is replaced by its input. */
#include "sp_export.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct sctx {
    sp_uses u;
    uint32_t *edges; /* every data-flow edge, in program order */
    uint32_t n, cap;
} sctx;

/* The data-flow edge that is the only user of v, or SP_NONE. */
static uint32_t edge_of(const sp_module *m, const sctx *c, uint32_t v)
{
    uint32_t k = c->u.head[v];
    if (k == SP_NONE || c->u.pool[k].next != SP_NONE) {
        return SP_NONE;
    }
    uint32_t op = c->u.pool[k].op;
    return m->ops[op].kind == SP_OP_SDY_DATA_FLOW_EDGE ? op : SP_NONE;
}

static const sp_sharding *edge_sharding(const sp_module *m, const sctx *c, uint32_t v)
{
    uint32_t e = edge_of(m, c, v);
    const sp_attr *a = e == SP_NONE ? NULL : sp_op_attr(m, e, "sharding");
    return a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
}

/* Sets attribute name of op to the shardings of the edges on the n values
 * first, first + 1, ... (or vals[i]); missing ones fully open on the mesh of
 * the first edge sharding. Nothing when no edge has a sharding. */
static cm_status edge_list(sp_module *m, const sctx *c, const uint32_t *vals, uint32_t first,
                           uint32_t n, sp_sharding ***out)
{
    *out = NULL;
    const sp_sharding *src = NULL;
    for (uint32_t i = 0; i < n && src == NULL; i++) {
        src = edge_sharding(m, c, vals != NULL ? vals[i] : first + i);
    }
    if (src == NULL) {
        return CM_OK;
    }
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = vals != NULL ? vals[i] : first + i;
        const sp_sharding *s = edge_sharding(m, c, v);
        if (s != NULL) {
            items[i] = (sp_sharding *)(uintptr_t)s;
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
    *out = items;
    return CM_OK;
}

static cm_status set_list(sp_module *m, uint32_t op, const char *name, sp_sharding **items,
                          uint32_t n)
{
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (list == NULL) {
        return CM_ENOMEM;
    }
    list->u.shardings.items = items;
    list->u.shardings.n = n;
    return sp_op_set_attr(m, op, name, list);
}

/* Sets attribute name of op to the edge shardings of the n values (see
 * edge_list); nothing when no edge has a sharding. */
static cm_status sink(sp_module *m, const sctx *c, uint32_t op, const char *name,
                      const uint32_t *vals, uint32_t first, uint32_t n)
{
    sp_sharding **items;
    cm_status st = edge_list(m, c, vals, first, n, &items);
    if (st != CM_OK || items == NULL) {
        return st;
    }
    return set_list(m, op, name, items, n);
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

/* An in sharding of a manual computation from its outer sharding and the
 * body argument's edge sharding: each dimension keeps the outer manual axes
 * and appends the edge's axes, taking the edge's openness and priority and
 * mesh; the outer replicated and unreduced axes stay. */
static sp_sharding *with_free_axes(sp_module *m, const sp_sharding *outer,
                                   const sp_sharding *edge, const sp_attr *manual)
{
    sp_sharding *r = sp_sharding_clone(&m->arena, outer);
    if (r == NULL) {
        return NULL;
    }
    r->mesh_name = edge->mesh_name;
    r->mesh = edge->mesh;
    for (uint32_t d = 0; d < r->rank; d++) {
        const sp_dim_sharding *od = &outer->dims[d];
        sp_dim_sharding *rd = &r->dims[d];
        uint32_t keep = 0;
        while (keep < od->n_axes && is_manual(manual, od->axes[keep].name)) {
            keep++;
        }
        const sp_dim_sharding *ed = d < edge->rank ? &edge->dims[d] : NULL;
        uint32_t extra = ed != NULL ? ed->n_axes : 0;
        sp_axis_ref *axes = cm_arena_alloc(&m->arena, sizeof *axes * (keep + extra + 1u));
        if (axes == NULL) {
            return NULL;
        }
        for (uint32_t i = 0; i < keep; i++) {
            axes[i] = od->axes[i];
        }
        for (uint32_t i = 0; i < extra; i++) {
            axes[keep + i] = ed->axes[i];
        }
        rd->axes = axes;
        rd->n_axes = keep + extra;
        if (ed != NULL) {
            rd->is_closed = ed->is_closed;
            rd->priority = ed->priority;
        }
    }
    return r;
}

static cm_status sink_manual(sp_module *m, const sctx *c, uint32_t opid)
{
    const sp_op *op = &m->ops[opid];
    const sp_attr *ins = sp_op_attr(m, opid, "in_shardings");
    const sp_attr *manual = sp_op_attr(m, opid, "manual_axes");
    if (manual != NULL && manual->kind != SP_ATTR_AXIS_LIST) {
        manual = NULL;
    }
    if (op->n_regions == 1 && op->regions[0].n_blocks == 1 && ins != NULL &&
        ins->kind == SP_ATTR_SHARDING_LIST) {
        const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
        uint32_t n = b->n_args;
        sp_sharding **items;
        cm_status st = edge_list(m, c, NULL, b->first_arg, n, &items);
        if (st != CM_OK) {
            return st;
        }
        if (items != NULL && ins->u.shardings.n == n) {
            for (uint32_t i = 0; i < n; i++) {
                items[i] = with_free_axes(m, ins->u.shardings.items[i], items[i], manual);
                if (items[i] == NULL) {
                    return CM_ENOMEM;
                }
            }
            if ((st = set_list(m, opid, "in_shardings", items, n)) != CM_OK) {
                return st;
            }
        }
    }
    op = &m->ops[opid];
    return sink(m, c, opid, "out_shardings", NULL, op->first_result, op->n_results);
}

static cm_status visit(sp_module *m, uint32_t opid, void *vctx)
{
    sctx *c = vctx;
    const sp_op *op = &m->ops[opid];
    switch (op->kind) {
    case SP_OP_SDY_DATA_FLOW_EDGE:
        if (op->n_operands != 1 || op->n_results != 1) {
            return CM_OK;
        }
        if (CM_GROW_U32(c->edges, c->cap, c->n + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        c->edges[c->n++] = opid;
        return CM_OK;
    case SP_OP_WHILE:
    case SP_OP_CASE:
    case SP_OP_IF:
    case SP_OP_OPTIMIZATION_BARRIER:
        return sink(m, c, opid, "sdy.sharding", NULL, op->first_result, op->n_results);
    case SP_OP_SDY_MANUAL_COMPUTATION:
        return sink_manual(m, c, opid);
    case SP_OP_SDY_NAMED_COMPUTATION: {
        if (op->n_regions == 1 && op->regions[0].n_blocks == 1) {
            const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
            cm_status st = sink(m, c, opid, "in_shardings", NULL, b->first_arg, b->n_args);
            if (st != CM_OK) {
                return st;
            }
        }
        op = &m->ops[opid];
        return sink(m, c, opid, "out_shardings", NULL, op->first_result, op->n_results);
    }
    default:
        return CM_OK;
    }
}

cm_status sp_pass_sink_data_flow_edges(sp_module *m, cm_error *err)
{
    sctx c;
    memset(&c, 0, sizeof c);
    cm_status st = sp_uses_build(m, &c.u, m->n_values, NULL);
    if (st == CM_OK) {
        st = sp_pass_walk(m, m->body, visit, &c);
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        const sp_op *e = &m->ops[c.edges[i]];
        uint32_t r = e->first_result, in = e->operands[0];
        for (uint32_t k = c.u.head[r]; k != SP_NONE; k = c.u.pool[k].next) {
            m->ops[c.u.pool[k].op].operands[c.u.pool[k].idx] = in;
        }
        uint32_t idx = sp_op_index_in_block(m, c.edges[i]);
        if (idx != SP_NONE) {
            sp_block_remove_op(m, e->parent_block, idx);
        }
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    sp_uses_free(&c.u);
    cm_free(c.edges);
    return st;
}
