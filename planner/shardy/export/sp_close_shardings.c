/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-close-shardings (Shardy's export/close_shardings.cc; see
 * sp_export.h). */
#include "sp_export.h"

#include "sp_pass.h"

static sp_sharding *close_one(sp_module *m, const sp_sharding *s, const sp_type *t)
{
    (void)t;
    bool need = s->n_replicated > 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        need = need || !s->dims[d].is_closed;
    }
    if (!need) {
        return (sp_sharding *)(uintptr_t)s;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        c->dims[d].is_closed = true;
        if (c->dims[d].n_axes == 0) {
            c->dims[d].priority = -1;
        }
    }
    c->n_replicated = 0;
    c->replicated = NULL;
    return c;
}

cm_status sp_pass_close_shardings(sp_module *m, cm_error *err)
{
    return sp_pass_io_shardings_fix(m, close_one, err);
}
