/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-remove-all-gather-reduce-scatter-for-cmv1 (Shardy's
 * export/remove_ag_rs_for_cmv1.cc; see sp_export.h). For collective matmul
 * (CMv1) a dot or dot_general computes on the sharded operands itself: an
 * sdy.all_gather used only by the dot is dropped; a dot without such an
 * operand whose one user is an sdy.reduce_scatter (and whose result has no
 * unreduced axes) takes the reduce-scatter's sharding, and the
 * reduce-scatter is dropped. */
#include "sp_export.h"

#include <string.h>

#include "sp_pass.h"

typedef struct rctx {
    sp_uses u;
    uint32_t *drop; /* ops to replace by their operand 0, in walk order */
    uint32_t n, cap;
} rctx;

static cm_status push(rctx *c, uint32_t op)
{
    if (CM_GROW_U32(c->drop, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->drop[c->n++] = op;
    return CM_OK;
}

static cm_status visit(sp_module *m, uint32_t opid, void *vctx)
{
    rctx *c = vctx;
    const sp_op *op = &m->ops[opid];
    if ((op->kind != SP_OP_DOT && op->kind != SP_OP_DOT_GENERAL) || op->n_results != 1) {
        return CM_OK;
    }
    bool gathered = false;
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t def = m->values[op->operands[i]].def;
        if (def != SP_NONE && m->ops[def].kind == SP_OP_SDY_ALL_GATHER &&
            sp_uses_count(&c->u, op->operands[i]) == 1) {
            if (push(c, def) != CM_OK) {
                return CM_ENOMEM;
            }
            gathered = true;
        }
    }
    if (gathered || sp_uses_count(&c->u, op->first_result) != 1) {
        return CM_OK;
    }
    uint32_t user = c->u.pool[c->u.head[op->first_result]].op;
    const sp_sharding *s = sp_value_sharding(m, op->first_result);
    const sp_attr *out = sp_op_attr(m, user, "out_sharding");
    if (m->ops[user].kind != SP_OP_SDY_REDUCE_SCATTER || s == NULL || s->n_unreduced > 0 ||
        out == NULL || out->kind != SP_ATTR_SHARDING) {
        return CM_OK;
    }
    if (sp_value_set_sharding(m, op->first_result, out->u.sharding) != CM_OK) {
        return CM_ENOMEM;
    }
    return push(c, user);
}

cm_status sp_pass_remove_ag_rs_for_cmv1(sp_module *m, cm_error *err)
{
    rctx c;
    memset(&c, 0, sizeof c);
    cm_status st = sp_uses_build(m, &c.u, m->n_values, NULL);
    if (st == CM_OK) {
        st = sp_pass_walk(m, m->body, visit, &c);
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        const sp_op *op = &m->ops[c.drop[i]];
        uint32_t idx = sp_op_index_in_block(m, c.drop[i]);
        if (idx == SP_NONE) {
            continue; /* listed twice */
        }
        uint32_t r = op->first_result, in = op->operands[0];
        for (uint32_t k = c.u.head[r]; k != SP_NONE; k = c.u.pool[k].next) {
            m->ops[c.u.pool[k].op].operands[c.u.pool[k].idx] = in;
            if (sp_uses_add(&c.u, in, c.u.pool[k].op, c.u.pool[k].idx) != CM_OK) {
                st = CM_ENOMEM;
            }
        }
        c.u.head[r] = SP_NONE;
        sp_block_remove_op(m, op->parent_block, idx);
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    sp_uses_free(&c.u);
    cm_free(c.drop);
    return st;
}
