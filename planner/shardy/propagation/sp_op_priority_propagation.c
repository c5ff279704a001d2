/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-op-priority-propagate (Shardy's
 * propagation/op_priority_propagation.cc): the fixed point runs in rounds of
 * growing op priority, pass-through ops first, so that shardings flow along
 * the ops that keep them before other ops may split them. See
 * sp_prop_int.h. */
#include "sp_prop_int.h"

#include "sp_ops.h"

bool sp_prop_is_pass_through(const sp_op *op)
{
    return sp_op_is_elementwise((sp_op_kind)op->kind) ||
           op->kind == SP_OP_SDY_SHARDING_CONSTRAINT || op->kind == SP_OP_FUNC_RETURN ||
           op->kind == SP_OP_RESHAPE || op->kind == SP_OP_TRANSPOSE || op->kind == SP_OP_WHILE ||
           op->kind == SP_OP_CASE || op->kind == SP_OP_IF ||
           op->kind == SP_OP_OPTIMIZATION_BARRIER || op->kind == SP_OP_SDY_PROPAGATION_BARRIER ||
           op->kind == SP_OP_SDY_MANUAL_COMPUTATION || op->kind == SP_OP_SDY_DATA_FLOW_EDGE ||
           op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE;
}

bool sp_prop_is_elementwise(const sp_module *m, uint32_t opid)
{
    const sp_op *op = &m->ops[opid];
    switch ((sp_op_kind)op->kind) {
    case SP_OP_SDY_PROPAGATION_BARRIER:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_SDY_RESHARD:
        return true;
    case SP_OP_BITCAST_CONVERT: {
        if (op->n_operands != 1 || op->n_results != 1) {
            return false;
        }
        const sp_type *a = sp_value_type(m, op->operands[0]);
        const sp_type *b = sp_value_type(m, op->first_result);
        return a->kind == SP_TYPE_TENSOR && b->kind == SP_TYPE_TENSOR && a->rank == b->rank &&
               (a->rank == 0 || memcmp(a->dims, b->dims, sizeof a->dims[0] * a->rank) == 0);
    }
    default:
        return sp_op_is_elementwise((sp_op_kind)op->kind);
    }
}

/* The offload custom calls Shardy treats as pass-through. */
static bool is_offload(const prop *p, uint32_t opid)
{
    const sp_attr *t = sp_op_attr(p->m, opid, "call_target_name");
    const char *name = NULL;
    if (t != NULL && t->kind == SP_ATTR_STRING) {
        name = t->u.str.s;
    } else if (t != NULL && t->kind == SP_ATTR_SYMBOL) {
        name = t->u.sym;
    }
    return name != NULL && (strcmp(name, "MoveToDevice") == 0 || strcmp(name, "MoveToHost") == 0);
}

/* BOTH, or NONE when a non-scalar operand of op has more than one use: a
 * value with several users would otherwise start a conflict per use. */
static dir direction_by_uses(const prop *p, const sp_op *op, bool allow_multi_use)
{
    if (allow_multi_use || p->n_uses == NULL) {
        return DIR_BOTH;
    }
    for (uint32_t k = 0; k < op->n_operands; k++) {
        uint32_t v = op->operands[k];
        const sp_type *t = &p->m->types[p->m->values[v].type];
        bool scalar = t->kind == SP_TYPE_TENSOR && t->rank == 0;
        if (p->n_uses[v] > 1 && !scalar) {
            return DIR_NONE;
        }
    }
    return DIR_BOTH;
}

/* Shardy's first two schedule entries: the direction of a pass-through op
 * (element-wise, offload, reshape, transpose, the data-flow ops; dynamic
 * slices forward only), NONE for every other op. */
static dir pass_through_direction(const prop *p, uint32_t opid, const sp_op *op,
                                  bool allow_multi_use)
{
    /* region and terminator ops stand for Shardy's data-flow edges, which it
     * never restricts by uses (their edges are owned by the op, not shared) */
    if (op->kind == SP_OP_FUNC_RETURN || op->kind == SP_OP_WHILE || op->kind == SP_OP_CASE ||
        op->kind == SP_OP_IF || op->kind == SP_OP_OPTIMIZATION_BARRIER ||
        op->kind == SP_OP_SDY_MANUAL_COMPUTATION || op->kind == SP_OP_SDY_DATA_FLOW_EDGE ||
        op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE) {
        return DIR_BOTH;
    }
    if (sp_prop_is_elementwise(p->m, opid) || op->kind == SP_OP_RESHAPE ||
        op->kind == SP_OP_TRANSPOSE || (op->kind == SP_OP_CUSTOM_CALL && is_offload(p, opid))) {
        return direction_by_uses(p, op, allow_multi_use);
    }
    if (op->kind == SP_OP_DYNAMIC_SLICE || op->kind == SP_OP_DYNAMIC_UPDATE_SLICE) {
        return (dir)(direction_by_uses(p, op, allow_multi_use) & DIR_FORWARD);
    }
    return DIR_NONE;
}

/* Shardy's op-priority schedule (op_priority_propagation.cc); priority N
 * allows the union of entries 0..N:
 *   0 pass-through ops whose operands have one use each,
 *   1 pass-through ops,
 *   2 the pass-through factors of any op (broadcast_in_dim backward only),
 *   3 any factor of any op, broadcast_in_dim backward only,
 *   4 anything.
 * The op-level answer is what entry 2's pass-through factors or entries 3-4
 * allow; p->np_dir narrows the op's other factors (sp_prop_factor_dir). */
dir sp_prop_op_priority_direction(prop *p, uint32_t opid, const sp_op *op)
{
    int lvl = p->op_priority;
    dir pt = pass_through_direction(p, opid, op, lvl >= 1);
    dir any = op->kind == SP_OP_BROADCAST_IN_DIM ? DIR_BACKWARD : DIR_BOTH;
    if (lvl <= 1) {
        p->np_dir = (int)pt;
        return pt;
    }
    if (lvl == 2) {
        p->np_dir = (int)pt;
        return (dir)(pt | any);
    }
    dir all = lvl == 3 ? (dir)(pt | any) : DIR_BOTH;
    p->np_dir = (int)all;
    return all;
}

/* Counts each value's uses (operands of any op, terminators included). */
static cm_status uses_count(prop *p)
{
    const sp_module *m = p->m;
    p->n_uses = cm_calloc(m->n_values + 1u, sizeof(uint32_t));
    if (p->n_uses == NULL) {
        return sp_prop_oom(p);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            if (op->operands[k] < m->n_values && p->n_uses[op->operands[k]] < UINT32_MAX) {
                p->n_uses[op->operands[k]]++;
            }
        }
    }
    return CM_OK;
}

/* The directions (op level and non-pass-through factors, packed) op takes
 * at op priority lvl. */
static unsigned directions_at(prop *p, uint32_t opid, int lvl)
{
    p->op_priority = lvl;
    dir d = sp_prop_op_direction(p, opid, &p->m->ops[opid]);
    return (unsigned)d | ((unsigned)p->np_dir << 2);
}

/* Each round starts only with the ops whose directions grew since the
 * previous round: every other op was at a fixed point under the same
 * directions, and changes around it wake it through the users lists. */
void sp_prop_op_priority_run(prop *p, const uint32_t *order, uint32_t n_order)
{
    if (!p->o->run_op_priority) {
        p->op_priority = -1;
        sp_prop_fixed_point_run(p, order, n_order, false);
        return;
    }
    if (p->n_uses == NULL && uses_count(p) != CM_OK) {
        return;
    }
    uint32_t *sub = cm_alloc(sizeof(uint32_t) * (n_order + 1u));
    /* each op's directions at the previous level: they depend on the op,
     * its operands' uses and the level only, so each is computed once */
    unsigned *prev = cm_calloc(n_order + 1u, sizeof *prev);
    if (sub == NULL || prev == NULL) {
        cm_free(sub);
        cm_free(prev);
        sp_prop_oom(p);
        return;
    }
    for (int lvl = 0; lvl < SP_PROP_OP_PRIORITIES && p->st == CM_OK; lvl++) {
        uint32_t n_sub = 0;
        for (uint32_t i = 0; i < n_order; i++) {
            unsigned now = directions_at(p, order[i], lvl);
            if (now != prev[i]) {
                sub[n_sub++] = order[i];
            }
            prev[i] = now;
        }
        p->op_priority = lvl;
        sp_prop_fixed_point_run(p, sub, n_sub, false);
    }
    p->op_priority = -1;
    cm_free(sub);
    cm_free(prev);
}
