/* SPDX-License-Identifier: Apache-2.0
 * planner: the import passes of -sdy-propagation-pipeline in their order
 * (Shardy's import/import_pipeline.cc; see sp_import.h). */
#include "sp_import.h"

#include "sp_pass.h"

cm_status sp_pass_propagation_import(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                     cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    SP_PASS_STEP(st, timing, "-sdy-lift-inlined-meshes", sp_pass_lift_inlined_meshes(m, err));
    SP_PASS_STEP(st, timing, "-sdy-sharding-group-import",
                 sp_pass_sharding_group_import(m, diags, err));
    SP_PASS_STEP(st, timing, "-sdy-apply-sharding-constraints",
                 sp_pass_apply_sharding_constraints(m, err));
    SP_PASS_STEP(st, timing, "-sdy-constant-or-scalar-splitter", sp_pass_constant_splitter(m, err));
    return st;
}
