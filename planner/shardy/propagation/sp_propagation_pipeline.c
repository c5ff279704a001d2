/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagation-pipeline (Shardy's
 * propagation/propagation_pipeline.cc): the import passes, then (as
 * Shardy's import pipeline ends) -sdy-manual-axes-cleanup and
 * -sdy-add-data-flow-edges, user-priority propagation, the sinking of the
 * data-flow edges (Shardy's export pipeline starts with it) and the export
 * passes (see sp_pipeline.h). */
#include "sp_pipeline.h"

#include "sp_pass.h"

cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err)
{
    bool timing = o->timing;
    cm_status st = sp_pass_propagation_import(m, o, diags, err);
    SP_PASS_STEP(st, timing, "-sdy-manual-axes-cleanup",
                 sp_pass_manual_axes_cleanup(m, diags, err));
    SP_PASS_STEP(st, timing, "-sdy-add-data-flow-edges", sp_pass_add_data_flow_edges(m, err));
    sp_prop_opts po = *o;
    po.level = SP_PROP_USER_PRIORITY;
    SP_PASS_STEP(st, timing, "-sdy-user-priority-propagate", sp_propagate(m, &po, diags, err));
    SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges",
                 sp_prop_debug_info_sink(m, o->debug_sharding_origins,
                                         o->debug_edge_source_sharding, err));
    SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges", sp_pass_sink_data_flow_edges(m, err));
    if (st == CM_OK) {
        st = sp_pass_propagation_export(m, o, err);
    }
    return st;
}
