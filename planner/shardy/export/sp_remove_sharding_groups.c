/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-remove-sharding-groups (Shardy's
 * export/remove_sharding_groups.cc; see sp_export.h). */
#include "sp_export.h"

#include "sp_ops.h"

static cm_status remove_groups_in(sp_module *m, uint32_t block)
{
    for (uint32_t i = 0; i < m->blocks[block].n_ops;) {
        uint32_t op = m->blocks[block].ops[i];
        if (m->ops[op].kind == SP_OP_SDY_SHARDING_GROUP) {
            sp_block_remove_op(m, block, i);
            continue;
        }
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                remove_groups_in(m, m->ops[op].regions[r].blocks[k]);
            }
        }
        i++;
    }
    return CM_OK;
}

cm_status sp_pass_remove_sharding_groups(sp_module *m, cm_error *err)
{
    (void)err;
    return remove_groups_in(m, m->body);
}
