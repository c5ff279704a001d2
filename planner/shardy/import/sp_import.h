/* SPDX-License-Identifier: Apache-2.0
 * planner: Shardy's import passes (shardy/dialect/sdy/transforms/import/),
 * which prepare a module for propagation (sdy_import_passes.md), and the
 * import part of -sdy-propagation-pipeline. One pass per file, named after
 * Shardy's: sp_lift_inlined_meshes.c, sp_apply_sharding_constraints.c,
 * sp_constant_or_scalar_splitter.c, sp_sharding_group_import.c,
 * sp_remove_size_one_axes.c, sp_pre_order_funcs.c, sp_add_data_flow_edges.c,
 * sp_manual_axes_cleanup.c, sp_import_func_calls.c,
 * sp_add_func_data_flow_edges.c, sp_flatten_call_graph.c,
 * sp_propagate_sharding_from_func_to_call.c,
 * sp_explicit_gather_scatter_batching.c, sp_symbol_dce.c,
 * sp_import_pipeline.c. Each pass edits the module in place; new ops and
 * attributes live in its arena. Thread contract: one module per call. */
#ifndef SP_IMPORT_H
#define SP_IMPORT_H

#include "cm.h"
#include "sp_diag.h"
#include "sp_ir.h"
#include "sp_prop.h"

/* -sdy-lift-inlined-meshes: inlined meshes in shardings become sdy.mesh
 * symbols (`mesh`, `mesh_0`, ... or `maximal_mesh_N`), reusing equal ones;
 * so do the meshes of the collectives' mesh-axes replica groups (a
 * StableHLO mesh always a new `mesh` symbol), and every sdy.mesh gets the
 * discardable `stablehlo.mesh` dictionary spelling it. Errors: CM_ENOMEM. */
cm_status sp_pass_lift_inlined_meshes(sp_module *m, cm_error *err);
/* -sdy-apply-sharding-constraints: a fully closed constraint on an unsharded
 * value dictates the value's sharding; uses after the last constraint of a
 * chain are redirected to it. Errors: CM_ENOMEM. */
cm_status sp_pass_apply_sharding_constraints(sp_module *m, cm_error *err);
/* The same with debug-propagation-edge-sharding: each constraint applied
 * to its input is a propagation step (numbered after the module's existing
 * sdy.propagation_edges), saved as the constraint's sdy.propagation_edges.
 * Errors: CM_ENOMEM. */
cm_status sp_pass_apply_sharding_constraints_debug(sp_module *m, bool debug_edges, cm_error *err);
/* -sdy-constant-or-scalar-splitter: constant sub-computations and scalar
 * broadcasts get one copy per use. Errors: CM_ENOMEM. */
cm_status sp_pass_constant_splitter(sp_module *m, cm_error *err);
/* -sdy-sharding-group-import: merges groups that share a value and renumbers
 * group ids 0..N-1. Members with different shardings are an error, which
 * propagation reports (sp_propagate); diags is unused here. Errors:
 * CM_ENOMEM. */
cm_status sp_pass_sharding_group_import(sp_module *m, sp_diags *diags, cm_error *err);

/* -sdy-remove-size-one-axes: when some sdy.mesh has an axis of size one,
 * shardings drop their references to such axes (closed dimensions left
 * empty drop their priority). Shardings are edited in place. Errors:
 * CM_ENOMEM. */
cm_status sp_pass_remove_size_one_axes(sp_module *m, cm_error *err);
/* The module's functions in Shardy's call-graph order (iterateFuncs):
 * pre_order lists callers before their callees, else callees before their
 * callers; *funcs_out (op ids, caller frees with cm_free) holds each
 * function once. Errors: CM_ENOMEM. */
cm_status sp_import_funcs_order(sp_module *m, bool pre_order, uint32_t **funcs_out,
                                uint32_t *n_out, cm_error *err);
/* -sdy-pre-order-funcs: moves the functions to the end of the module in
 * call-graph pre-order. Errors: CM_ENOMEM. */
cm_status sp_pass_pre_order_funcs(sp_module *m, cm_error *err);
/* -sdy-add-data-flow-edges: after each data-flow edge owner (a result of
 * while, case, optimization_barrier, manual or named computation; a body
 * argument of the last two) of static-shaped tensor type comes an
 * sdy.data_flow_edge carrying the owner's sharding (a manual computation's
 * body argument without the manual axes), and every other use of the owner
 * uses the edge instead. Owners keep their shardings. Errors: CM_ENOMEM. */
cm_status sp_pass_add_data_flow_edges(sp_module *m, cm_error *err);
/* The same, on named computations alone when named_only (what
 * -sdy-import-func-calls adds on the computations it makes). */
cm_status sp_import_add_data_flow_edges(sp_module *m, bool named_only, cm_error *err);
/* -sdy-manual-axes-cleanup: each sdy.manual_computation's manual axes in
 * mesh order, and every in/out sharding of a shaped value lists the manual
 * axes (or parts of them) it does not use as replicated, sorted and merged,
 * on the op's common mesh. Errors: CM_EINVAL (and an error diagnostic on the
 * op) for manual axes without in/out shardings and a non-empty body;
 * CM_ENOMEM. */
cm_status sp_pass_manual_axes_cleanup(sp_module *m, sp_diags *diags, cm_error *err);
/* -sdy-import-func-calls: every func.call becomes an sdy.named_computation
 * holding its callee's body (the callee's sdy.original_func_name or name;
 * in shardings from the callee's argument shardings, out shardings from the
 * call's sdy.sharding, the call's other discardable attributes). Calls go
 * callees first; a callee's first call takes its body, later calls a copy
 * (a warning diagnostic on the call, once per process, as Shardy gives it),
 * and callees whose bodies moved are erased. With add_edges, every named
 * computation then gets data-flow edges on its body arguments and results.
 * Errors: CM_EINVAL for a call whose callee is not a function with a body
 * or a recursive call; CM_ENOMEM. */
cm_status sp_pass_import_func_calls(sp_module *m, bool add_edges, sp_diags *diags,
                                    cm_error *err);
/* -sdy-add-func-data-flow-edges: every argument of a function but the main
 * one (the only function, else @main) and every func.call result, of
 * static-shaped tensor type, gets an sdy.func_data_flow_edge carrying its
 * sharding as sdy.sharding, which its other uses read instead. Errors:
 * CM_EINVAL when there are several functions and none is @main; CM_ENOMEM. */
cm_status sp_pass_add_func_data_flow_edges(sp_module *m, cm_error *err);
/* -sdy-flatten-call-graph: every function ends up called at most once.
 * Calls go callees first; a function's first call keeps it, each later call
 * gets a copy of it and of everything it calls (tagged
 * sdy.original_func_name, appended under a fresh `NAME_N` name, callees
 * before callers). Errors: CM_EINVAL for a call of an unknown function or a
 * call cycle; CM_ENOMEM. */
cm_status sp_pass_flatten_call_graph(sp_module *m, cm_error *err);
/* Shardy's cloneFuncRecursively with the symbol-table insert after it: a
 * copy of function f and, recursively, of every function it calls (each
 * tagged sdy.original_func_name: the original's own tag, or its name),
 * appended to the module callees first under fresh names (the original
 * name, or `NAME_N` with N taken from *counter, which is incremented per
 * try as MLIR's uniquing counter is). *name_out (module arena) names f's
 * copy. Errors: CM_EINVAL for a call of an unknown function or a call
 * cycle; CM_ENOMEM. */
cm_status sp_import_func_clone(sp_module *m, uint32_t f, uint32_t *counter, const char **name_out,
                               cm_error *err);
/* -sdy-propagate-sharding-from-func-to-call: a func.call without an
 * sdy.sharding takes its callee's result shardings (unsharded results fully
 * open on the mesh of the first result sharded on a non-maximal mesh; none
 * when there is no such result). Errors: CM_EINVAL for a call of an unknown
 * function; CM_ENOMEM. */
cm_status sp_pass_propagate_sharding_from_func_to_call(sp_module *m, cm_error *err);
/* -sdy-explicit-gather-scatter-batching: in every function, a gather or
 * scatter without batching dimensions whose operand dimension 0 is indexed
 * through an iota along indices dimension 0 (a component of a concatenate
 * along the index vector dimension, or the indices themselves, through
 * reshapes, broadcasts, clamps and selects) gets operand and indices
 * dimension 0 as explicit batching dimensions, that component removed from
 * its indices (slices and a concatenate before the op) and from the index
 * map, and operand dimension 0 removed from the collapsed (inserted window)
 * dimensions. As MLIR's greedy rewriter, which Shardy runs it through, the
 * stablehlo.constant ops of each function are first uniqued and moved to
 * its front, and pure ops left without uses are erased at the end.
 * Errors: CM_ENOMEM. */
cm_status sp_pass_explicit_gather_scatter_batching(sp_module *m, cm_error *err);
/* MLIR's -symbol-dce as Shardy's import pipeline runs it: private functions
 * no public symbol reaches through @symbol references are removed. Errors:
 * CM_ENOMEM. */
cm_status sp_pass_symbol_dce(sp_module *m, cm_error *err);
/* The pipeline's import passes in order (lift inlined meshes, sharding-group
 * import, apply sharding constraints, constant splitter), for callers that
 * propagate after them themselves (what-if). o->timing prints each pass's
 * time to stderr. Errors: those of the passes; the first failing pass stops
 * the rest. */
cm_status sp_pass_propagation_import(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                     cm_error *err);

/* -sdy-import-pipeline: Shardy's import pipeline in its order: symbol DCE,
 * lift inlined meshes, remove size-one axes, propagate sharding from func
 * to call, constant splitter, symbol DCE, manual axes cleanup, add
 * data-flow edges, and with dedup_fully then apply sharding constraints and
 * sharding-group import. Errors: those of the passes; the first failing
 * pass stops the rest. */
cm_status sp_pass_import_pipeline(sp_module *m, bool dedup_fully, sp_diags *diags, cm_error *err);

#endif /* SP_IMPORT_H */
