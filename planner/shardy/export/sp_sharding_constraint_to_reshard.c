/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-sharding-constraint-to-reshard (Shardy's
 * export/sharding_constraint_to_reshard.cc; see sp_export.h). Both ops take
 * one input and a `sharding`, so each constraint becomes a reshard in place,
 * keeping its other attributes. */
#include "sp_export.h"

#include "sp_pass.h"

static cm_status convert_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    if (m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        m->ops[op].name = "sdy.reshard";
        m->ops[op].kind = SP_OP_SDY_RESHARD;
    }
    return CM_OK;
}

cm_status sp_pass_sharding_constraint_to_reshard(sp_module *m, cm_error *err)
{
    (void)err;
    return sp_pass_walk(m, m->body, convert_op, NULL);
}
