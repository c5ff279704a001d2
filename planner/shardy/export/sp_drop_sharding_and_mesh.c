/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-drop-sharding-and-mesh (Shardy's
 * export/drop_sharding_and_mesh.cc; see sp_export.h). */
#include "sp_export.h"

#include "sp_export_int.h"
#include "sp_pass.h"

static cm_status drop_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op_remove_attr(m, op, "sdy.sharding");
    if (m->ops[op].kind != SP_OP_FUNC_FUNC) {
        return CM_OK;
    }
    for (int which = 0; which < 2; which++) {
        uint32_t n = sp_exp_io_count(m, op, which == 0);
        for (uint32_t i = 0; i < n; i++) {
            if (sp_exp_io_sharding(m, op, which == 0, i) == NULL) {
                continue;
            }
            cm_status st = which == 0 ? sp_func_set_arg_attr(m, op, i, "sdy.sharding", NULL)
                                      : sp_func_set_result_attr(m, op, i, "sdy.sharding", NULL);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

cm_status sp_pass_drop_sharding_and_mesh(sp_module *m, cm_error *err)
{
    cm_status st = sp_pass_walk(m, m->body, drop_op, NULL);
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    sp_block *b = &m->blocks[m->body];
    for (uint32_t i = b->n_ops; i-- > 0;) {
        if (m->ops[b->ops[i]].kind == SP_OP_SDY_MESH) {
            sp_block_remove_op(m, m->body, i);
        }
    }
    return CM_OK;
}
