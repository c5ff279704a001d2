/* SPDX-License-Identifier: Apache-2.0
 * planner: the export passes of -sdy-propagation-pipeline in their order,
 * and -sdy-export-pipeline, Shardy's export pipeline with its partitioner
 * (Shardy's export/export_pipeline.cc; see sp_export.h). */
#include "sp_export.h"

#include <string.h>

#include "sp_canonicalize.h"
#include "sp_collectives.h"
#include "sp_pass.h"
#include "sp_reshard.h"

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

/* Shardy's runShardyPartitioner: unreduced axes verified, explicit reshards
 * (full version with collectives), then collectives, canonicalized. */
static cm_status partition(sp_module *m, const sp_export_opts *o, sp_diags *d, cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    sp_reshard_opts ro = {.full_version = o->enable_insert_explicit_collectives ||
                                          o->enable_per_instruction_partitioning};
    SP_PASS_STEP(st, timing, "-sdy-verify-unreduced-axes", sp_pass_verify_unreduced_axes(m, d, err));
    SP_PASS_STEP(st, timing, "-sdy-insert-explicit-reshards",
                 sp_pass_insert_explicit_reshards(m, &ro, d, err));
    if (o->enable_per_instruction_partitioning) {
        sp_pip_opts po;
        sp_pip_opts_init(&po);
        po.filter = o->per_instruction_partitioning_filter;
        po.replica_count = o->replica_count;
        po.partition_count = o->partition_count;
        SP_PASS_STEP(st, timing, "-sdy-per-instruction-partitioning",
                     sp_pass_per_instruction_partitioning(m, &po, d, err));
    } else if (o->enable_insert_explicit_collectives) {
        /* Shardy runs the reshard patterns alone here; ours are one pass */
        SP_PASS_STEP(st, timing, "-canonicalize", sp_pass_canonicalize(m, err));
        SP_PASS_STEP(st, timing, "-sdy-reshard-to-collectives",
                     sp_pass_reshard_to_collectives(m, false, err));
    }
    SP_PASS_STEP(st, timing, "-canonicalize", sp_pass_canonicalize(m, err));
    if (o->enable_insert_explicit_collectives && o->remove_all_gather_reduce_scatter_for_cmv1) {
        SP_PASS_STEP(st, timing, "-sdy-remove-all-gather-reduce-scatter-for-cmv1",
                     sp_pass_remove_ag_rs_for_cmv1(m, err));
    }
    return st;
}

cm_status sp_pass_export_pipeline(sp_module *m, const sp_export_opts *o, sp_diags *d,
                                  cm_error *err)
{
    bool timing = o->timing;
    bool debug = o->dump_sharding_origins || o->dump_propagation_edges;
    cm_status st = CM_OK;
    SP_PASS_STEP(st, timing, "-sdy-constant-or-scalar-merger", sp_pass_constant_merger(m, err));
    if (debug) {
        SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges (debug info)",
                     sp_prop_debug_info_sink(m, o->dump_sharding_origins,
                                             o->dump_propagation_edges, err));
    }
    SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges", sp_pass_sink_data_flow_edges(m, err));
    if (!o->avoid_export_for_partitioning) {
        SP_PASS_STEP(st, timing, "-sdy-remove-sharding-groups",
                     sp_pass_remove_sharding_groups(m, err));
        SP_PASS_STEP(st, timing, "-sdy-sharding-constraint-to-reshard",
                     sp_pass_sharding_constraint_to_reshard(m, err));
    }
    if (o->update_non_divisible_input_output_shardings) {
        SP_PASS_STEP(st, timing, "-sdy-update-non-divisible-input-output-shardings",
                     sp_pass_update_non_divisible_io(m, err));
        SP_PASS_STEP(st, timing, "-sdy-remove-sub-axes-in-input-output-shardings",
                     sp_pass_remove_sub_axes_in_io(m, err));
    }
    SP_PASS_STEP(st, timing, "-sdy-close-shardings", sp_pass_close_shardings(m, err));
    if (st == CM_OK && !o->avoid_export_for_partitioning) {
        st = partition(m, o, d, err);
    }
    if (debug) {
        SP_PASS_STEP(st, timing, "-sdy-remove-propagation-debug-info",
                     sp_pass_remove_propagation_debug_info(m, err));
    }
    if (!o->keep_sharding_rules) {
        SP_PASS_STEP(st, timing, "-sdy-drop-sharding-rules", sp_pass_drop_sharding_rules(m, err));
    }
    if (!o->avoid_export_for_partitioning && o->inline_meshes) {
        SP_PASS_STEP(st, timing, "-sdy-inline-meshes", sp_pass_inline_meshes(m, err));
    }
    return st;
}

void sp_export_opts_init(sp_export_opts *o)
{
    memset(o, 0, sizeof *o);
    o->replica_count = 1;
    o->partition_count = 1;
    o->update_non_divisible_input_output_shardings = true;
    o->inline_meshes = true;
}
