/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagate-to-func-results (Shardy's
 * export/propagate_to_func_results.cc; see sp_export.h). Every function but
 * the main one (the only function, else @main) takes the shardings of the
 * values it returns as its result shardings; a returned value without one
 * clears the result's. */
#include "sp_export.h"

#include <string.h>

#include "sp_pass.h"

static uint32_t main_func(const sp_module *m)
{
    const sp_block *b = &m->blocks[m->body];
    uint32_t only = SP_NONE, n = 0;
    for (uint32_t i = 0; i < b->n_ops; i++) {
        if (m->ops[b->ops[i]].kind == SP_OP_FUNC_FUNC) {
            only = b->ops[i];
            n++;
        }
    }
    return n == 1 ? only : sp_module_func(m, "main");
}

cm_status sp_pass_propagate_to_func_results(sp_module *m, cm_error *err)
{
    uint32_t main = main_func(m);
    if (main == SP_NONE) {
        return cm_error_set(err, CM_EINVAL, "", "Failed to lookup function: main");
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t f = body->ops[i];
        const sp_op *op = &m->ops[f];
        if (op->kind != SP_OP_FUNC_FUNC || f == main || op->n_regions == 0 ||
            op->regions[0].n_blocks == 0) {
            continue;
        }
        const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
        if (b->n_ops == 0) {
            continue;
        }
        const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
        if (ret->kind != SP_OP_FUNC_RETURN) {
            continue;
        }
        for (uint32_t r = 0; r < ret->n_operands; r++) {
            sp_sharding *s = sp_value_sharding(m, ret->operands[r]);
            if (sp_func_set_result_sharding(m, f, r, s) == CM_ENOMEM) {
                return cm_error_oom(err);
            }
        }
    }
    return CM_OK;
}
