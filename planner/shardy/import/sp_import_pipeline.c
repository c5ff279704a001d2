/* SPDX-License-Identifier: Apache-2.0
 * planner: the import passes of -sdy-propagation-pipeline in their order
 * (Shardy's import/import_pipeline.cc; see sp_import.h), and
 * -sdy-import-pipeline, Shardy's addImportPipeline step by step. */
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

cm_status sp_pass_import_pipeline(sp_module *m, bool dedup_fully, sp_diags *diags, cm_error *err)
{
    cm_status st = CM_OK;
    SP_PASS_STEP(st, false, "-symbol-dce", sp_pass_symbol_dce(m, err));
    SP_PASS_STEP(st, false, "-sdy-lift-inlined-meshes", sp_pass_lift_inlined_meshes(m, err));
    SP_PASS_STEP(st, false, "-sdy-remove-size-one-axes", sp_pass_remove_size_one_axes(m, err));
    SP_PASS_STEP(st, false, "-sdy-propagate-sharding-from-func-to-call",
                 sp_pass_propagate_sharding_from_func_to_call(m, err));
    SP_PASS_STEP(st, false, "-sdy-constant-or-scalar-splitter", sp_pass_constant_splitter(m, err));
    SP_PASS_STEP(st, false, "-symbol-dce", sp_pass_symbol_dce(m, err));
    SP_PASS_STEP(st, false, "-sdy-manual-axes-cleanup", sp_pass_manual_axes_cleanup(m, diags, err));
    SP_PASS_STEP(st, false, "-sdy-add-data-flow-edges", sp_pass_add_data_flow_edges(m, err));
    if (dedup_fully) {
        SP_PASS_STEP(st, false, "-sdy-apply-sharding-constraints",
                     sp_pass_apply_sharding_constraints(m, err));
        SP_PASS_STEP(st, false, "-sdy-sharding-group-import",
                     sp_pass_sharding_group_import(m, diags, err));
    }
    return st;
}
