/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-close-shardings (Shardy's export/close_shardings.cc; see
 * sp_export.h). */
#include "sp_export.h"

#include "sp_pass.h"

static cm_status close_one(sp_module *m, const sp_sharding *s, const sp_type *t,
                           sp_sharding **out)
{
    (void)t;
    *out = NULL;
    bool need = s->n_replicated > 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        need = need || !s->dims[d].is_closed;
    }
    if (!need) {
        return CM_OK;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        c->dims[d].is_closed = true;
        if (c->dims[d].n_axes == 0) {
            c->dims[d].priority = -1;
        }
    }
    c->n_replicated = 0;
    c->replicated = NULL;
    *out = c;
    return CM_OK;
}

cm_status sp_pass_close_shardings(sp_module *m, cm_error *err)
{
    return sp_pass_io_shardings_fix(m, close_one, err);
}
