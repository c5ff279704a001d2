/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-remove-sub-axes-in-input-output-shardings (Shardy's
 * export/remove_sub_axes_in_input_output_shardings.cc; see sp_export.h).
 * In the main function's argument and result shardings, each open
 * dimension keeps its axes up to the first sub-axis; closed dimensions stay. */
#include "sp_export.h"

#include "sp_export_int.h"
#include "sp_pass.h"

/* The sharding without sub-axes in open dimensions, or NULL when s has none
 * to drop (*oom tells a failed allocation apart). */
static sp_sharding *strip(sp_module *m, const sp_sharding *s, bool *oom)
{
    bool need = false;
    for (uint32_t d = 0; d < s->rank && !need; d++) {
        for (uint32_t i = 0; i < s->dims[d].n_axes && !s->dims[d].is_closed; i++) {
            need = need || s->dims[d].axes[i].pre_size != 0;
        }
    }
    if (!need) {
        return NULL;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        *oom = true;
        return NULL;
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        if (c->dims[d].is_closed) {
            continue;
        }
        uint32_t k = 0;
        while (k < c->dims[d].n_axes && c->dims[d].axes[k].pre_size == 0) {
            k++;
        }
        c->dims[d].n_axes = k;
    }
    return c;
}

cm_status sp_pass_remove_sub_axes_in_io(sp_module *m, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t f = SP_NONE, n = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        if (m->ops[body->ops[i]].kind == SP_OP_FUNC_FUNC) {
            f = body->ops[i];
            n++;
        }
    }
    if (n != 1) {
        f = sp_module_func(m, "main");
    }
    if (f == SP_NONE) {
        return cm_error_set(err, CM_EINVAL, "", "Failed to lookup function: main");
    }
    for (int which = 0; which < 2; which++) {
        uint32_t cnt = sp_exp_io_count(m, f, which == 0);
        for (uint32_t i = 0; i < cnt; i++) {
            const sp_sharding *s = sp_exp_io_sharding(m, f, which == 0, i);
            bool oom = false;
            sp_sharding *c = s == NULL ? NULL : strip(m, s, &oom);
            if (oom) {
                return cm_error_oom(err);
            }
            if (c == NULL) {
                continue;
            }
            cm_status st;
            if (which == 0) {
                const sp_op *op = &m->ops[f];
                uint32_t v = m->blocks[op->regions[0].blocks[0]].first_arg + i;
                st = sp_value_set_sharding(m, v, c);
            } else {
                st = sp_func_set_result_sharding(m, f, i, c);
            }
            if (st != CM_OK) {
                return cm_error_oom(err);
            }
        }
    }
    return CM_OK;
}
