/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagation-pipeline in two compositions. Shardy's
 * (`shardplan opt`): as propagation/propagation_pipeline.cc composes it,
 * the import pipeline (import/import_pipeline.cc), the call-graph handling
 * of the chosen compilation mode, user-priority propagation over
 * pre-ordered functions, the call graph rebuilt, and the export pipeline
 * (export/export_pipeline.cc). The planner's (every library caller: plans,
 * sweeps, the executor's runs): the same propagation between the import
 * and export passes that leave the module fit for the planner's own
 * partitioning. Each step is one pass of import/, export/ or this folder;
 * this file only orders them. */
#include "sp_pipeline.h"

#include "sp_canonicalize.h"
#include "sp_pass.h"
#include "sp_reshard.h"

/* Shardy's addImportPipeline with the default PropagationOptions (no
 * gather/scatter batching); the sharding constraints are applied here only
 * when functions are deduplicated fully, otherwise after the call graph is
 * flattened (Shardy's TODO b/517993355 keeps them there for now). */
static cm_status import_steps(sp_module *m, const sp_prop_opts *o, sp_diags *diags, cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    SP_PASS_STEP(st, timing, "-symbol-dce", sp_pass_symbol_dce(m, err));
    SP_PASS_STEP(st, timing, "-sdy-lift-inlined-meshes", sp_pass_lift_inlined_meshes(m, err));
    SP_PASS_STEP(st, timing, "-sdy-remove-size-one-axes", sp_pass_remove_size_one_axes(m, err));
    SP_PASS_STEP(st, timing, "-sdy-propagate-sharding-from-func-to-call",
                 sp_pass_propagate_sharding_from_func_to_call(m, err));
    SP_PASS_STEP(st, timing, "-sdy-constant-or-scalar-splitter", sp_pass_constant_splitter(m, err));
    SP_PASS_STEP(st, timing, "-symbol-dce", sp_pass_symbol_dce(m, err));
    SP_PASS_STEP(st, timing, "-sdy-manual-axes-cleanup",
                 sp_pass_manual_axes_cleanup(m, diags, err));
    SP_PASS_STEP(st, timing, "-sdy-add-data-flow-edges", sp_pass_add_data_flow_edges(m, err));
    if (o->dedup_functions_fully) {
        SP_PASS_STEP(st, timing, "-sdy-apply-sharding-constraints",
                     sp_pass_apply_sharding_constraints_debug(m, o->debug_edge_source_sharding,
                                                              err));
        SP_PASS_STEP(st, timing, "-sdy-sharding-group-import",
                     sp_pass_sharding_group_import(m, diags, err));
    }
    return st;
}

/* Shardy's addExportPipeline with the pipeline's ExportOptions: divisible
 * input/output shardings updated, no inlined meshes (the registered
 * pipeline turns inline-meshes off); avoid-export-for-partitioning keeps
 * sharding groups and constraints and skips the partitioner stage, so the
 * module can be propagated again (or exported to GSPMD, as XLA does). Its
 * partitioner stage is Shardy's runShardyPartitioner with the pipeline's
 * defaults (no explicit collectives): -sdy-verify-unreduced-axes, the
 * minimal -sdy-insert-explicit-reshards (unreduced axes reduced where their
 * users stop keeping them, func.call operands and the like resharded), then
 * the collective canonicalization (which also erases unused pure ops such
 * as the reshard of a constraint nothing reads). Left out is
 * -sdy-remove-propagation-debug-info, which Shardy runs after dumping the
 * debug attributes to files; here the module is the only output, so the
 * origins and edges the caller asked for stay on it. */
static cm_status export_steps(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                              cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    SP_PASS_STEP(st, timing, "-sdy-constant-or-scalar-merger", sp_pass_constant_merger(m, err));
    SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges",
                 sp_prop_debug_info_sink(m, o->debug_sharding_origins,
                                         o->debug_edge_source_sharding, err));
    SP_PASS_STEP(st, timing, "-sdy-sink-data-flow-edges", sp_pass_sink_data_flow_edges(m, err));
    bool for_partitioning = !o->avoid_export_for_partitioning;
    if (for_partitioning) {
        SP_PASS_STEP(st, timing, "-sdy-remove-sharding-groups",
                     sp_pass_remove_sharding_groups(m, err));
        SP_PASS_STEP(st, timing, "-sdy-sharding-constraint-to-reshard",
                     sp_pass_sharding_constraint_to_reshard(m, err));
    }
    SP_PASS_STEP(st, timing, "-sdy-update-non-divisible-input-output-shardings",
                 sp_pass_update_non_divisible_io(m, err));
    SP_PASS_STEP(st, timing, "-sdy-remove-sub-axes-in-input-output-shardings",
                 sp_pass_remove_sub_axes_in_io(m, err));
    SP_PASS_STEP(st, timing, "-sdy-close-shardings", sp_pass_close_shardings(m, err));
    if (for_partitioning) {
        sp_reshard_opts ro = {.full_version = false};
        SP_PASS_STEP(st, timing, "-sdy-verify-unreduced-axes",
                     sp_pass_verify_unreduced_axes(m, diags, err));
        SP_PASS_STEP(st, timing, "-sdy-insert-explicit-reshards",
                     sp_pass_insert_explicit_reshards(m, &ro, diags, err));
        SP_PASS_STEP(st, timing, "-canonicalize (sdy-collective)",
                     sp_pass_canonicalize_collectives(m, err));
    }
    if (!o->keep_sharding_rules) {
        SP_PASS_STEP(st, timing, "-sdy-drop-sharding-rules", sp_pass_drop_sharding_rules(m, err));
    }
    return st;
}

/* The planner's composition (o->shardy_pipeline off): the import passes
 * of sp_import.h, the manual-axes cleanup and the data-flow edges,
 * user-priority propagation, the edges sunk, and the export passes of
 * sp_export.h. Function calls stay as they are, sharding constraints stay
 * constraints and sub-axes stay in function inputs and outputs, so the
 * module can be propagated again, costed and partitioned by the planner
 * (sp_input_partition) as it stands. */
static cm_status planner_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
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

/* Shardy's addPropagationPipeline, step by step. */
static cm_status shardy_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                 cm_error *err)
{
    bool timing = o->timing;
    bool dedup = o->dedup_functions_fully;
    cm_status st = import_steps(m, o, diags, err);
    if (dedup) {
        SP_PASS_STEP(st, timing, "-sdy-add-func-data-flow-edges",
                     sp_pass_add_func_data_flow_edges(m, err));
    } else {
        SP_PASS_STEP(st, timing, "-sdy-flatten-call-graph", sp_pass_flatten_call_graph(m, err));
        SP_PASS_STEP(st, timing, "-symbol-dce", sp_pass_symbol_dce(m, err));
        SP_PASS_STEP(st, timing, "-sdy-import-func-calls",
                     sp_pass_import_func_calls(m, true, diags, err));
        SP_PASS_STEP(st, timing, "-symbol-dce", sp_pass_symbol_dce(m, err));
        SP_PASS_STEP(st, timing, "-sdy-apply-sharding-constraints",
                     sp_pass_apply_sharding_constraints_debug(m, o->debug_edge_source_sharding,
                                                              err));
        SP_PASS_STEP(st, timing, "-sdy-sharding-group-import",
                     sp_pass_sharding_group_import(m, diags, err));
    }
    SP_PASS_STEP(st, timing, "-sdy-pre-order-funcs", sp_pass_pre_order_funcs(m, err));
    /* Shardy propagates with keep-sharding-rules on and drops the rules in
     * its export; here propagation drops them itself unless the caller
     * keeps them: the steps between do not read them, and the constant
     * merger, which compares attribute dictionaries, then sees equal ops
     * as equal (MLIR uniques equal rule attributes; ours are one per op). */
    sp_prop_opts po = *o;
    po.level = SP_PROP_USER_PRIORITY;
    SP_PASS_STEP(st, timing, "-sdy-user-priority-propagate", sp_propagate(m, &po, diags, err));
    if (dedup) {
        SP_PASS_STEP(st, timing, "-sdy-propagate-to-func-results",
                     sp_pass_propagate_to_func_results(m, err));
        SP_PASS_STEP(st, timing, "-sdy-sink-func-data-flow-edges",
                     sp_pass_sink_func_data_flow_edges(m, err));
    } else {
        SP_PASS_STEP(st, timing, "-sdy-export-named-computations",
                     sp_pass_export_named_computations(m, err));
        SP_PASS_STEP(st, timing, "-sdy-propagate-to-func-results",
                     sp_pass_propagate_to_func_results(m, err));
    }
    /* Shardy's pipeline adds the unflattening pass with its default
     * options: dedup-functions-fully stays off here in either mode. */
    SP_PASS_STEP(st, timing, "-sdy-unflatten-call-graph",
                 sp_pass_unflatten_call_graph(m, false, err));
    SP_PASS_STEP(st, timing, "-symbol-dce", sp_pass_symbol_dce(m, err));
    SP_PASS_STEP(st, timing, "-sdy-insert-func-call-reshards",
                 sp_pass_insert_func_call_reshards(m, err));
    if (st == CM_OK) {
        st = export_steps(m, o, diags, err);
    }
    return st;
}

cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err)
{
    return o->shardy_pipeline ? shardy_pipeline(m, o, diags, err)
                              : planner_pipeline(m, o, diags, err);
}
