/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-apply-sharding-constraints (Shardy's
 * import/apply_sharding_constraints.cc): a constraint on an unsharded value
 * becomes the value's sharding (see sp_import.h). */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

static bool fully_closed(const sp_sharding *s)
{
    for (uint32_t d = 0; d < s->rank; d++) {
        if (!s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

cm_status sp_pass_apply_sharding_constraints(sp_module *m, cm_error *err)
{
    uint8_t *want = cm_calloc(m->n_values + 1u, 1);
    if (want == NULL) {
        return sp_pass_oom(err);
    }
    bool any = false;
    for (uint32_t c = 0; c < m->n_ops; c++) {
        const sp_op *op = &m->ops[c];
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && op->n_operands == 1 &&
            op->n_results == 1) {
            want[op->operands[0]] = 1;
            want[op->first_result] = 1;
            any = true;
        }
    }
    sp_uses u;
    memset(&u, 0, sizeof u); /* sp_uses_free is safe when sp_pass_op_positions fails first */
    if (!any) {
        cm_free(want);
        return CM_OK;
    }
    uint32_t *opos = sp_pass_op_positions(m);
    if (opos == NULL || sp_uses_build(m, &u, m->n_values, want) != CM_OK) {
        sp_uses_free(&u);
        cm_free(want);
        cm_free(opos);
        return sp_pass_oom(err);
    }
    cm_status st = CM_OK;
    uint32_t n_ops = m->n_ops;
    for (uint32_t c = 0; c < n_ops && st == CM_OK; c++) {
        const sp_op *op = &m->ops[c];
        if (op->kind != SP_OP_SDY_SHARDING_CONSTRAINT || op->parent_block == SP_NONE ||
            op->n_operands != 1) {
            continue;
        }
        uint32_t v = op->operands[0];
        const sp_attr *a = sp_op_attr(m, c, "sharding");
        if (a == NULL || a->kind != SP_ATTR_SHARDING) {
            continue;
        }
        /* other constraint-like users of v with a different sharding forbid it */
        bool other = false;
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            const sp_op *user = &m->ops[u.pool[i].op];
            if (u.pool[i].op == c || !sp_op_constrains_operands((sp_op_kind)user->kind)) {
                continue;
            }
            const sp_attr *b = sp_op_attr(m, u.pool[i].op, "sharding");
            if (b == NULL || b->kind != SP_ATTR_SHARDING ||
                !sp_sharding_equal(b->u.sharding, a->u.sharding)) {
                other = true;
            }
        }
        uint32_t def = m->values[v].def;
        bool is_edge_target =
            def == SP_NONE
                ? m->blocks[m->values[v].block].parent_op != SP_NONE &&
                      m->ops[m->blocks[m->values[v].block].parent_op].kind != SP_OP_FUNC_FUNC
                : sp_op_is_data_flow((sp_op_kind)m->ops[def].kind);
        if (!other && fully_closed(a->u.sharding) && sp_value_sharding(m, v) == NULL &&
            (def == SP_NONE || m->ops[def].kind != SP_OP_SDY_SHARDING_CONSTRAINT)) {
            if (is_edge_target) {
                /* do not restrict every target of the edge: later uses read
                 * the constrained value instead */
                uint32_t pos = opos[c];
                for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
                    uint32_t user = u.pool[i].op;
                    if (user != c && m->ops[user].parent_block == op->parent_block &&
                        opos[user] > pos) {
                        m->ops[user].operands[u.pool[i].idx] = op->first_result;
                    }
                }
                continue;
            }
            st = sp_value_set_sharding(m, v, a->u.sharding);
            if (st != CM_OK) {
                break;
            }
        }
        /* the chain case: v feeds only this constraint (among constraint-like
         * users) and the constraint's result has no constraint-like users:
         * later uses of v in the same block take the constrained value */
        if (other || (m->values[v].def != SP_NONE &&
                      m->ops[m->values[v].def].kind == SP_OP_SDY_SHARDING_CONSTRAINT)) {
            continue;
        }
        uint32_t r = op->first_result;
        bool r_constrained = false;
        for (uint32_t i = u.head[r]; i != SP_NONE; i = u.pool[i].next) {
            r_constrained = r_constrained ||
                            sp_op_constrains_operands((sp_op_kind)m->ops[u.pool[i].op].kind);
        }
        if (r_constrained) {
            continue;
        }
        uint32_t pos = opos[c];
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            uint32_t user = u.pool[i].op;
            const sp_op *uo = &m->ops[user];
            if (user == c || uo->kind == SP_OP_FUNC_RETURN ||
                uo->parent_block != op->parent_block) {
                continue;
            }
            uint32_t upos = opos[user];
            if (upos != SP_NONE && pos != SP_NONE && upos > pos) {
                m->ops[user].operands[u.pool[i].idx] = r;
            }
        }
    }
    sp_uses_free(&u);
    cm_free(want);
    cm_free(opos);
    return st == CM_ENOMEM ? sp_pass_oom(err) : st;
}
