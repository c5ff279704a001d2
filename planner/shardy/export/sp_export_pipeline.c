/* SPDX-License-Identifier: Apache-2.0
 * planner: the export passes of -sdy-propagation-pipeline in their order
 * (Shardy's export/export_pipeline.cc; see sp_export.h). */
#include "sp_export.h"

#include "sp_pass.h"

cm_status sp_pass_propagation_export(sp_module *m, const sp_prop_opts *o, cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    SP_PASS_STEP(st, timing, "-sdy-remove-sharding-groups", sp_pass_remove_sharding_groups(m, err));
    SP_PASS_STEP(st, timing, "-sdy-constant-or-scalar-merger", sp_pass_constant_merger(m, err));
    SP_PASS_STEP(st, timing, "-sdy-update-non-divisible-input-output-shardings",
                 sp_pass_update_non_divisible_io(m, err));
    SP_PASS_STEP(st, timing, "-sdy-close-shardings", sp_pass_close_shardings(m, err));
    return st;
}
