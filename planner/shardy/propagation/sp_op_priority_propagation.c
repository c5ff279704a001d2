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
           op->kind == SP_OP_SDY_MANUAL_COMPUTATION;
}

/* Op-priority schedule: which direction this op propagates at the current
 * level (sp_prop_op_direction has already answered for barriers and for op
 * priorities off). */
dir sp_prop_op_priority_direction(const prop *p, const sp_op *op)
{
    bool pass_through = sp_prop_is_pass_through(op);
    if (p->op_priority == 0) {
        return pass_through ? DIR_BOTH : DIR_NONE;
    }
    if (p->op_priority == 1) {
        if (op->kind == SP_OP_BROADCAST_IN_DIM) {
            return DIR_BACKWARD;
        }
        return DIR_BOTH;
    }
    return DIR_BOTH;
}

void sp_prop_op_priority_run(prop *p, const uint32_t *order, uint32_t n_order)
{
    if (p->o->run_op_priority) {
        for (int lvl = 0; lvl < 3 && p->st == CM_OK; lvl++) {
            p->op_priority = lvl < 2 ? lvl : -1;
            sp_prop_fixed_point_run(p, order, n_order, lvl > 0);
        }
    } else {
        p->op_priority = -1;
        sp_prop_fixed_point_run(p, order, n_order, false);
    }
}
