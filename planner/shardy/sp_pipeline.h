/* SPDX-License-Identifier: Apache-2.0
 * planner: Shardy's import and export passes around propagation, and the
 * -sdy-propagation-pipeline that chains them (sdy_import_passes.md,
 * sdy_export_passes.md). Each pass edits the module in place.
 * Thread contract: one module per call. */
#ifndef SP_PIPELINE_H
#define SP_PIPELINE_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_prop.h"
#include "sp_diag.h"

/* -sdy-lift-inlined-meshes: inlined meshes in shardings become sdy.mesh
 * symbols (`mesh`, `mesh_0`, ... or `maximal_mesh_N`), reusing equal ones. */
cm_status sp_pass_lift_inlined_meshes(sp_module *m, cm_error *err);
/* -sdy-apply-sharding-constraints: a fully closed constraint on an unsharded
 * value dictates the value's sharding; uses after the last constraint of a
 * chain are redirected to it. */
cm_status sp_pass_apply_sharding_constraints(sp_module *m, cm_error *err);
/* -sdy-constant-or-scalar-splitter: constant sub-computations and scalar
 * broadcasts get one copy per use. */
cm_status sp_pass_constant_splitter(sp_module *m, cm_error *err);
/* -sdy-sharding-group-import: merges groups that share a value and renumbers
 * group ids 0..N-1; members with different shardings are an error. */
cm_status sp_pass_sharding_group_import(sp_module *m, sp_diags *diags, cm_error *err);
/* -sdy-remove-sharding-groups */
cm_status sp_pass_remove_sharding_groups(sp_module *m, cm_error *err);
/* -sdy-constant-or-scalar-merger: merges identical constant sub-computations
 * whose shardings are equal. */
cm_status sp_pass_constant_merger(sp_module *m, cm_error *err);
/* -sdy-update-non-divisible-input-output-shardings */
cm_status sp_pass_update_non_divisible_io(sp_module *m, cm_error *err);
/* -sdy-close-shardings: function input and output shardings become closed and
 * lose their replicated axes. */
cm_status sp_pass_close_shardings(sp_module *m, cm_error *err);
/* -sdy-drop-sharding-rules: removes every sdy.sharding_rule attribute. */
cm_status sp_pass_drop_sharding_rules(sp_module *m, cm_error *err);

/* The pipeline's import passes (lift inlined meshes, sharding-group import,
 * apply sharding constraints, constant splitter) and its export passes
 * (remove sharding groups, constant merger, non-divisible I/O, close
 * shardings), for callers that propagate in between themselves (what-if). */
cm_status sp_pass_propagation_import(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                     cm_error *err);
cm_status sp_pass_propagation_export(sp_module *m, const sp_prop_opts *o, cm_error *err);

/* -sdy-propagation-pipeline: the import passes, user-priority propagation
 * (with op-priority and aggressive propagation inside) and the export passes. */
cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err);

#endif /* SP_PIPELINE_H */
