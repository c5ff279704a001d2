/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-drop-sharding-rules (Shardy's export/drop_sharding_rules.cc;
 * see sp_export.h). */
#include "sp_export.h"

#include "sp_pass.h"

static cm_status drop_rule_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op_remove_attr(m, op, "sdy.sharding_rule");
    return CM_OK;
}

cm_status sp_pass_drop_sharding_rules(sp_module *m, cm_error *err)
{
    (void)err;
    return sp_pass_walk(m, m->body, drop_rule_op, NULL);
}
