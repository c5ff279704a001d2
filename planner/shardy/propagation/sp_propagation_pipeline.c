/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagation-pipeline (Shardy's
 * propagation/propagation_pipeline.cc): the import passes, user-priority
 * propagation and the export passes (see sp_pipeline.h). */
#include "sp_pipeline.h"

#include "sp_pass.h"

cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err)
{
    bool timing = o->timing;
    cm_status st = sp_pass_propagation_import(m, o, diags, err);
    sp_prop_opts po = *o;
    po.level = SP_PROP_USER_PRIORITY;
    SP_PASS_STEP(st, timing, "-sdy-user-priority-propagate", sp_propagate(m, &po, diags, err));
    if (st == CM_OK) {
        st = sp_pass_propagation_export(m, o, err);
    }
    return st;
}
