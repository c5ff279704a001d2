/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-close-shardings (Shardy's export/close_shardings.cc; see
 * sp_export.h): every sharding of the module becomes closed (axes and
 * priorities kept) and loses its replicated axes. */
#include "sp_export.h"

#include "sp_export_int.h"

static cm_status close_one(sp_module *m, const sp_sharding *s, sp_sharding **out, void *ctx)
{
    (void)ctx;
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
    }
    c->n_replicated = 0;
    c->replicated = NULL;
    *out = c;
    return CM_OK;
}

cm_status sp_pass_close_shardings(sp_module *m, cm_error *err)
{
    return sp_exp_transform_shardings(m, close_one, NULL) == CM_OK ? CM_OK : cm_error_oom(err);
}
