/* SPDX-License-Identifier: Apache-2.0
 * planner: Shardy's export passes that close -sdy-propagation-pipeline
 * (shardy/dialect/sdy/transforms/export/, sdy_export_passes.md), and the
 * export part of the pipeline. One pass per file, named after Shardy's:
 * sp_remove_sharding_groups.c, sp_constant_or_scalar_merger.c,
 * sp_update_non_divisible_input_output_shardings.c, sp_close_shardings.c,
 * sp_drop_sharding_rules.c, sp_export_pipeline.c. The partitioning passes of
 * this folder have their own headers (sp_reshard.h, sp_collectives.h). Each
 * pass edits the module in place; new attributes live in its arena. Thread
 * contract: one module per call. */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include "cm.h"
#include "sp_diag.h"
#include "sp_ir.h"
#include "sp_prop.h"

/* -sdy-remove-sharding-groups: removes every sdy.sharding_group op. Cannot
 * fail (err is unused). */
cm_status sp_pass_remove_sharding_groups(sp_module *m, cm_error *err);
/* -sdy-constant-or-scalar-merger: merges identical constant sub-computations
 * whose shardings are equal. Errors: CM_ENOMEM. */
cm_status sp_pass_constant_merger(sp_module *m, cm_error *err);
/* -sdy-update-non-divisible-input-output-shardings: each dimension of a
 * function input or output sharding, a func.call result sharding and a
 * manual computation's in and out shardings (against the global shapes) keeps the axes that divide it, plus the
 * largest dividing major sub-axis of the first one that does not.
 * Errors: CM_ENOMEM. */
cm_status sp_pass_update_non_divisible_io(sp_module *m, cm_error *err);
/* -sdy-close-shardings: every sharding of the module (function inputs and
 * outputs, op results, manual and named computation edges, constraints,
 * reshards, collectives) becomes closed, keeping its axes and priorities,
 * and loses its replicated axes. Errors: CM_ENOMEM. */
cm_status sp_pass_close_shardings(sp_module *m, cm_error *err);
/* -sdy-drop-sharding-rules: removes every sdy.sharding_rule attribute. Cannot
 * fail (err is unused). */
cm_status sp_pass_drop_sharding_rules(sp_module *m, cm_error *err);

/* -sdy-unflatten-call-graph: retargets every func.call at one function per
 * computation: callees with the same original name (sdy.original_func_name,
 * else their own), manual axes and, unless dedup_fully, argument and result
 * shardings share the first such callee (dedup_fully: the callee called most
 * often). Drops sdy.original_func_name and sdy.func_manual_axes from every
 * function; functions left without calls stay. Errors: CM_EINVAL when a call
 * names no function, CM_ENOMEM. */
cm_status sp_pass_unflatten_call_graph(sp_module *m, bool dedup_fully, cm_error *err);

/* -sdy-insert-func-call-reshards: every func.call's results take its
 * callee's result shardings (missing ones fully open on the mesh of the
 * others; without any, fully closed copies of the call's own); a result
 * whose sharding was not equivalent gets an sdy.reshard right after the call
 * back to the sharding it had (fully closed when it had none), which its
 * users then read. Errors: CM_EINVAL when a call names no function,
 * CM_ENOMEM. */
cm_status sp_pass_insert_func_call_reshards(sp_module *m, cm_error *err);

/* -sdy-export-named-computations: each sdy.named_computation (innermost
 * first) becomes a private func.func appended to the module, named after it
 * (a taken name gets `_N` from one module-wide counter) with
 * sdy.original_func_name set and the in shardings on its arguments, and a
 * func.call in its place carrying the out shardings and the op's other
 * attributes (execution_thread moves to the function). Data-flow edges on
 * the body arguments and results give their shardings first, then are
 * removed. Errors: CM_EINVAL for a malformed named computation, CM_ENOMEM. */
cm_status sp_pass_export_named_computations(sp_module *m, cm_error *err);
/* XLA's -xla-sdy-export-named-computations: as Shardy's, and the function
 * also takes the out shardings as its result shardings and, when the named
 * computation has xla.sdy.manual_axes, those axes on itself and each of its
 * arguments and results. With dedup_fully, named computations with the same
 * name and manual axes share one function, made from the body of the one
 * whose in and out shardings occur most often (the earliest on a tie); each
 * call takes that function's result shardings, and a result whose own out
 * sharding is not equivalent gets an mhlo.copy to it after the call.
 * Errors: as Shardy's. */
cm_status sp_pass_xla_export_named_computations(sp_module *m, bool dedup_fully, cm_error *err);

/* -sdy-sink-func-data-flow-edges: removes every sdy.func_data_flow_edge,
 * giving its sharding to the value it wraps (without one, a sharded value
 * becomes fully open on its mesh). Errors: CM_ENOMEM. */
cm_status sp_pass_sink_func_data_flow_edges(sp_module *m, cm_error *err);
/* -sdy-propagate-to-func-results: every function but the main one (the only
 * function, else @main) takes the shardings of its returned values as its
 * result shardings, clearing those whose value has none. Errors: CM_EINVAL
 * without a main function, CM_ENOMEM. */
cm_status sp_pass_propagate_to_func_results(sp_module *m, cm_error *err);

/* -sdy-drop-sharding-and-mesh: removes every sdy.sharding (of ops and of
 * function arguments and results) and every sdy.mesh. Errors: CM_ENOMEM. */
cm_status sp_pass_drop_sharding_and_mesh(sp_module *m, cm_error *err);
/* -sdy-remove-propagation-debug-info: removes the propagation-edge and
 * sharding-origin attributes of ops and of function arguments and results.
 * Errors: CM_ENOMEM. */
cm_status sp_pass_remove_propagation_debug_info(sp_module *m, cm_error *err);
/* -sdy-sharding-constraint-to-reshard: every sdy.sharding_constraint becomes
 * an sdy.reshard with the same input, sharding and attributes. Cannot fail. */
cm_status sp_pass_sharding_constraint_to_reshard(sp_module *m, cm_error *err);
/* -sdy-remove-sub-axes-in-input-output-shardings: in the main function's
 * (the only function, else @main) argument and result shardings each open
 * dimension keeps its axes up to the first sub-axis. Errors: CM_EINVAL
 * without a main function, CM_ENOMEM. */
cm_status sp_pass_remove_sub_axes_in_io(sp_module *m, cm_error *err);

/* -sdy-remove-all-gather-reduce-scatter-for-cmv1: drops each sdy.all_gather
 * whose only user is a dot or dot_general; a dot with no such operand whose
 * only user is an sdy.reduce_scatter (and whose sharding has no unreduced
 * axes) takes its sharding and the reduce-scatter is dropped. Errors:
 * CM_ENOMEM. */
cm_status sp_pass_remove_ag_rs_for_cmv1(sp_module *m, cm_error *err);

/* -sdy-sink-data-flow-edges: the shardings of sdy.data_flow_edge ops move
 * to the data-flow ops owning the edges (the results of while, case, if and
 * optimization_barrier; a named or manual computation's body arguments and
 * results, a manual computation keeping its outer manual axes; missing ones
 * fully open on the mesh of the first), then every edge is
 * replaced by its input. Errors: CM_ENOMEM. */
cm_status sp_pass_sink_data_flow_edges(sp_module *m, cm_error *err);

/* -sdy-inline-meshes: every sharding naming an sdy.mesh gets that mesh
 * inlined (`mesh<[...]>`), then the sdy.mesh ops are removed. Errors:
 * CM_ENOMEM. */
cm_status sp_pass_inline_meshes(sp_module *m, cm_error *err);

/* -sdy-resolve-single-device-sharding (replica-count, partition-count): an
 * op (outside the sdy dialect) whose tensor results are on one device of a
 * maximal mesh runs in `stablehlo.if` on that device's id (replica_id when
 * replica_count > 1, else partition_id); other devices yield zeros or
 * tokens, and an sdy.all_reduce over the global mesh (the first sdy.mesh
 * with axes) spreads each tensor result, replacing reshards of it to
 * replicated; operand reshards onto the device are folded. Nothing without
 * a global mesh. Errors: CM_EINVAL when both counts exceed 1 or an op's
 * results disagree on their device, CM_ENOMEM. */
cm_status sp_pass_resolve_single_device_sharding(sp_module *m, int64_t replica_count,
                                                 int64_t partition_count, cm_error *err);

/* Options of -sdy-convert-global-to-local, named as Shardy's. */
typedef struct sp_g2l_opts {
    int64_t replica_count;   /* replica-count (device ids from replica_id when > 1) */
    int64_t partition_count; /* partition-count */
    bool enable_rgv3;        /* enable-rgv3: replica groups as mesh axes when no sub-axis */
    bool per_dim_all_gather; /* per-dim-all-gather: one all_gather per gathered dimension */
    bool combine_multi_dimension_reduce_scatter; /* combine-multi-dimension-reduce-scatter */
} sp_g2l_opts;

/* -sdy-convert-global-to-local (sp_convert_global_to_local.c): rewrites a
 * module with global shapes, consistent shardings and explicit sdy
 * collectives into the program one device runs. Sharded values take their
 * local shapes (function signatures, function and named/manual computation
 * arguments, op results); sdy.all_reduce, all_gather and all_slice become
 * stablehlo.all_reduce / all_gather (with fresh channel handles after the
 * module's largest and use_global_device_ids) and a dynamic_slice at the
 * device's offsets; sdy.constant becomes stablehlo.constant (a sharded
 * dense one sliced by a per-device offset table read at partition_id, or
 * replica_id when replica_count > 1); a sharded iota adds its shard's
 * offset; stablehlo.slice is localized; sdy.manual_computation is inlined.
 * Other ops keep their attributes and take local result types. Op errors
 * (non-divisible sharding, a slice that needs communication, an sdy op it
 * does not convert) go to d. Errors: CM_EINVAL (both counts above 1, or an
 * op error), CM_ENOMEM. */
cm_status sp_pass_convert_global_to_local(sp_module *m, const sp_g2l_opts *o, sp_diags *d,
                                          cm_error *err);

/* A stablehlo.all_reduce of value v over axes (n of them) of mesh, as the
 * conversion above writes one: Shardy's device-id replica groups, channel
 * handle `channel` of type 1 (device to device), use_global_device_ids,
 * and a body reducing scalars of v's element type with `kind` (e.g.
 * "stablehlo.add"). Inserted into block at index at, its result type v's;
 * the new op in *op_out. Errors: CM_EINVAL (more axes than it handles, or
 * axes whose size does not divide the mesh), CM_ENOMEM. */
cm_status sp_export_build_all_reduce(sp_module *m, uint32_t block, uint32_t at, uint32_t v,
                                     const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                                     int64_t channel, const char *kind, uint32_t *op_out);

/* -sdy-pad-for-divisibility: every tensor whose sharding does not divide a
 * dimension grows along it to the next multiple of the shard count
 * (stablehlo.pad before sdy.all_slice, reduce_scatter and all_to_all;
 * stablehlo.slice back to the original size after the gathered dimensions
 * of sdy.all_gather and all_to_all; widened stablehlo.slice and pad limits;
 * dot_general's contracting padding masked to zero; other ops retyped).
 * Function inputs and outputs must divide: otherwise an error diagnostic
 * on the function. Errors: CM_EINVAL (with diagnostics in d), CM_ENOMEM. */
cm_status sp_pass_pad_for_divisibility(sp_module *m, sp_diags *d, cm_error *err);

/* The pipeline's export passes in order (remove sharding groups, constant
 * merger, non-divisible I/O, close shardings), for callers that propagate
 * before them themselves (what-if). o->timing prints each pass's time to
 * stderr. Errors: those of the passes; the first failing pass stops the
 * rest. */
cm_status sp_pass_propagation_export(sp_module *m, const sp_prop_opts *o, cm_error *err);

/* -sdy-verify-unreduced-axes: checks, function by function, that unreduced
 * axes change only where Shardy allows: sdy.reshard and
 * sdy.sharding_constraint may drop axes of the kind their source has and add
 * sum ones; sdy.all_reduce / reduce_scatter (whose operand must be sharded)
 * and stablehlo.all_reduce / reduce_scatter drop only axes of their own
 * reduction kind; reduce adds only axes of its body's kind, dot, dot_general
 * and other ops only sum ones, and none of them drops any; a call's operands
 * and results match its callee's unreduced axes, a return its function's
 * results (or a manual computation's, less its manual axes), unless an
 * explicit reshard made the value; a kept axis keeps its kind. The first
 * finding of each function is an error diagnostic in d. Errors: CM_EINVAL
 * after a finding, CM_ENOMEM. */
cm_status sp_pass_verify_unreduced_axes(sp_module *m, sp_diags *d, cm_error *err);

/* Options of -sdy-export-pipeline, named as Shardy's ExportOptions. */
typedef struct sp_export_opts {
    int64_t replica_count;                            /* replica-count */
    int64_t partition_count;                          /* partition-count */
    bool avoid_export_for_partitioning;               /* avoid-export-for-partitioning */
    bool enable_insert_explicit_collectives;          /* enable-insert-explicit-collectives */
    bool remove_all_gather_reduce_scatter_for_cmv1;   /* remove-all-gather-reduce-scatter-for-cmv1 */
    bool keep_sharding_rules;                         /* keep-sharding-rules */
    bool dump_sharding_origins;                       /* dump-sharding-origins */
    bool dump_propagation_edges;                      /* dump-propagation-edges */
    bool update_non_divisible_input_output_shardings; /* default true */
    bool inline_meshes;                               /* inline-meshes, default true */
    bool enable_per_instruction_partitioning;         /* enable-per-instruction-partitioning */
    const char *per_instruction_partitioning_filter;  /* per-instruction-partitioning-filter */
    bool avoid_reshards_on_calls;                     /* avoid-reshards-on-calls (unused, as in Shardy) */
    bool timing;                                      /* print each step's time to stderr */
} sp_export_opts;

/* Shardy's defaults: counts 1, update-non-divisible-input-output-shardings
 * and inline-meshes on, the rest off. */
void sp_export_opts_init(sp_export_opts *o);

/* -sdy-export-pipeline: constant merger, data-flow edges sunk, sharding
 * groups removed and constraints made reshards, non-divisible I/O updated and
 * sub-axes removed from the main function's I/O, shardings closed; then
 * (unless avoid-export-for-partitioning) the partitioner: unreduced axes
 * verified, explicit reshards inserted (the full version when collectives
 * or per-instruction partitioning are enabled), then either
 * -sdy-per-instruction-partitioning (with its filter and the counts) or,
 * with enable-insert-explicit-collectives, the reshards become
 * collectives; -canonicalize, and the collective-matmul cleanup when asked;
 * last debug info and sharding rules dropped and meshes inlined, as the
 * options say. Errors: those of the passes (diagnostics in d); the first
 * failing pass stops the rest. */
cm_status sp_pass_export_pipeline(sp_module *m, const sp_export_opts *o, sp_diags *d,
                                  cm_error *err);

/* Options of -sdy-resolve-permutation-factors, named as Shardy's. */
typedef struct sp_rpf_opts {
    bool enable_halo_exchange; /* enable-halo-exchange (Shardy's default: true) */
    int64_t replica_count;     /* replica-count: device ids from replica_id when > 1 */
    int64_t partition_count;   /* partition-count */
} sp_rpf_opts;

/* -sdy-resolve-permutation-factors (sp_resolve_permutation_factors.c): the
 * dimensions of StableHLO ops that their rules map to permutation factors
 * stop moving data between devices implicitly. With halo exchange, a pad or
 * slice that needs neighbouring shards runs in an sdy.manual_computation
 * over the dimensions' axes that fetches them with
 * stablehlo.collective_permute and slices the running device's window at an
 * offset computed from its id; a reverse runs on a new sdy.mesh (`<mesh>_reversed`)
 * whose device order along the reversed axes is flipped, after shifting
 * the padding of non-divisible dimensions to the low side, and is resharded
 * back. Otherwise (and when halo exchange cannot do it) the permutation
 * factors are replicated: sdy.reshard before the op for operands that had
 * axes on them (not for communication-free slice and pad dimensions), and
 * after it for results. A reshape of non-divisible shardings that is not
 * communication free splits one dimension by halo exchange, or else runs
 * between reshards without the axes of its non-divisible dimension groups.
 * Errors: CM_EINVAL when
 * both counts exceed 1, CM_ENOMEM. */
cm_status sp_pass_resolve_permutation_factors(sp_module *m, const sp_rpf_opts *o, sp_diags *d,
                                              cm_error *err);

/* Options of -sdy-per-instruction-partitioning, named as Shardy's. */
typedef struct sp_pip_opts {
    const char *filter;        /* filter: op name substrings, selectLow=N, selectHigh=N */
    bool enable_halo_exchange; /* enable-halo-exchange (default true) */
    int64_t replica_count;     /* replica-count */
    int64_t partition_count;   /* partition-count */
} sp_pip_opts;

/* Shardy's defaults: no filter (every candidate), halo exchange, counts 1. */
void sp_pip_opts_init(sp_pip_opts *o);

/* -sdy-per-instruction-partitioning (sp_per_instruction_partitioning.c):
 * the ops of each function's top-level block that have a sharded operand or
 * result (not collectives, edges, manual computations, barriers,
 * constraints, groups or Sharding custom calls) are numbered in order; those
 * the filter selects (a comma-separated list of op name substrings and
 * selectLow=N / selectHigh=N bounds, optionally quoted; empty selects all)
 * are each partitioned alone: operands padded to divide their op's axes,
 * the op outlined into a function that -sdy-resolve-permutation-factors,
 * -sdy-insert-explicit-reshards (full), -sdy-reshard-to-collectives,
 * -sdy-pad-for-divisibility, -sdy-convert-global-to-local and
 * -sdy-drop-sharding-and-mesh make local, and that body placed in an
 * sdy.manual_computation over all the axes the op's shardings use; padded
 * results are sliced back. Errors: an op without a mesh, or the passes'
 * errors (diagnostics in d), CM_ENOMEM. */
cm_status sp_pass_per_instruction_partitioning(sp_module *m, const sp_pip_opts *o, sp_diags *d,
                                               cm_error *err);

#endif /* SP_EXPORT_H */
