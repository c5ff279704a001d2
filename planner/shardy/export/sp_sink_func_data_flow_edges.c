/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-sink-func-data-flow-edges (Shardy's
 * export/sink_func_data_flow_edges.cc; see sp_export.h). Each
 * sdy.func_data_flow_edge hands its sharding to the value it wraps (a
 * function argument or a call result) and goes away; without one, a
 * sharded value becomes fully open on its mesh. */
#include "sp_export.h"

#include "sp_pass.h"

typedef struct ectx {
    uint32_t *edges;
    uint32_t n, cap;
} ectx;

static cm_status collect(sp_module *m, uint32_t op, void *vctx)
{
    ectx *c = vctx;
    if (m->ops[op].kind != SP_OP_SDY_FUNC_DATA_FLOW_EDGE || m->ops[op].n_operands != 1 ||
        m->ops[op].n_results != 1) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->edges, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->edges[c->n++] = op;
    return CM_OK;
}

/* A fully open sharding with s's mesh and rank, in m's arena. */
static sp_sharding *open_like(sp_module *m, const sp_sharding *s)
{
    sp_sharding *o = sp_sharding_open(&m->arena, s->mesh_name, s->rank);
    if (o != NULL) {
        o->mesh = s->mesh;
    }
    return o;
}

static cm_status sink_one(sp_module *m, uint32_t e, const sp_uses *u)
{
    uint32_t operand = m->ops[e].operands[0], result = m->ops[e].first_result;
    sp_sharding *s = sp_value_sharding(m, result);
    const sp_sharding *had = sp_value_sharding(m, operand);
    if (s == NULL && had != NULL) {
        s = open_like(m, had);
        if (s == NULL) {
            return CM_ENOMEM;
        }
    }
    if (s != NULL) {
        cm_status st = sp_value_set_sharding(m, operand, s);
        if (st == CM_ENOMEM) {
            return st;
        }
        /* a region argument has nowhere to keep a sharding: nothing to sink */
    }
    for (uint32_t k = u->head[result]; k != SP_NONE; k = u->pool[k].next) {
        m->ops[u->pool[k].op].operands[u->pool[k].idx] = operand;
    }
    uint32_t idx = sp_op_index_in_block(m, e);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[e].parent_block, idx);
    }
    return CM_OK;
}

cm_status sp_pass_sink_func_data_flow_edges(sp_module *m, cm_error *err)
{
    ectx c = {0};
    sp_uses u = {0};
    uint8_t *want = NULL;
    cm_status st = sp_pass_walk(m, m->body, collect, &c);
    if (st == CM_OK && c.n > 0) {
        want = cm_calloc(m->n_values + 1u, 1);
        if (want == NULL) {
            st = CM_ENOMEM;
        }
        for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
            want[m->ops[c.edges[i]].first_result] = 1;
        }
        if (st == CM_OK) {
            st = sp_uses_build(m, &u, m->n_values, want);
        }
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        st = sink_one(m, c.edges[i], &u);
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    sp_uses_free(&u);
    cm_free(want);
    cm_free(c.edges);
    return st;
}
