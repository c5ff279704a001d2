/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd internals shared by its files: reading the xla.sdy strings
 * XLA's sdy round trip keeps in mhlo.frontend_attributes, and the import
 * steps XLA's pipelines share. Not for other folders. */
#ifndef SP_GSPMD_INT_H
#define SP_GSPMD_INT_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_pass.h"

/* The string value of frontend attribute key of op, or NULL. */
const char *sp_gspmd_frontend(const sp_module *m, uint32_t op, const char *key);

/* Parses `#sdy.sharding_per_value<[<...>, ...]>` (text NULL: the empty list)
 * into a new sharding-list attribute of m. Errors: CM_EINVAL at op's
 * LINE:COL, CM_ENOMEM. */
cm_status sp_gspmd_parse_per_value(sp_module *m, const char *text, uint32_t op, sp_attr **out,
                                   cm_error *err);

/* err = CM_EINVAL at op's LINE:COL, "'NAME' op MSG". */
cm_status sp_gspmd_op_error(const sp_module *m, uint32_t op, cm_error *err, const char *msg);

/* sp_pass_walk over the body of every function of m, in module order;
 * stops at the first status fn returns other than CM_OK. */
cm_status sp_gspmd_walk_funcs(sp_module *m, sp_pass_op_fn fn, void *ctx);

/* Flattens the tuples of every custom call of m (tuple operands become
 * their elements, a tuple result one result per element, read by the
 * get_tuple_element users), then drops the stablehlo.tuple ops that fed one
 * and have no use left; nested tuples are left. Errors: CM_EINVAL for a
 * tuple type that does not split, CM_ENOMEM. */
cm_status sp_gspmd_flatten_tuples(sp_module *m, cm_error *err);

/* Renames each single-device sdy.mesh named `maximal_mesh_N` (as Shardy's
 * lift names them) that is not among before[0..n_before) to
 * `single_device_N` (made unique), as XLA names them, with every sharding
 * that names it. Errors: CM_ENOMEM. */
cm_status sp_gspmd_name_single_device_meshes(sp_module *m, const char *const *before,
                                             uint32_t n_before, cm_error *err);

/* Whether some sharding of m (on an op, or a function argument or result)
 * names the mesh `name`. */
bool sp_gspmd_mesh_referenced(sp_module *m, const char *name);

/* XLA's -xla-sdy-round-trip-dedup-meshes: each sdy.mesh with the device
 * count and device order of an earlier or better one (real axes, more axes
 * above size one) whose axes map onto that main mesh's (sub-)axes is
 * removed, and the shardings and manual axes on it are rewritten to the
 * main mesh (consecutive sub-axes merged). Errors: CM_EINVAL for a sub-axis
 * that does not map or a manual sub-axis, CM_ENOMEM. */
cm_status sp_gspmd_dedup_meshes(sp_module *m, cm_error *err);

/* sp_gspmd_import_shardings with the global mesh's axes named
 * axis_prefix + N (the pass's own names are "_axis_N", placeholders XLA
 * means to be replaced; its old import pipelines named them "axis_N"). */
cm_status sp_gspmd_import_shardings_as(sp_module *m, const char *axis_prefix, cm_error *err);

/* sp_gspmd_import_shardings with the single-device meshes in the order the
 * shardings name them (module order), not sorted: the V3 round trip's
 * meshes come from Shardy's lift of inlined meshes, which meets them so. */
cm_status sp_gspmd_import_shardings_in_order(sp_module *m, cm_error *err);

/* sp_gspmd_round_trip_import; with closed_constraints, a FuncResultSharding
 * with uses other than the return becomes a constraint with the sharding's
 * own (closed) dims, as XLA's import did before it opened them. */
cm_status sp_gspmd_round_trip_import_as(sp_module *m, bool hlo_sharding_v3, bool closed_constraints,
                                        sp_diags *d, cm_error *err);

/* sp_gspmd_import with the axes named as sp_gspmd_import_shardings_as. */
cm_status sp_gspmd_import_as(sp_module *m, const char *axis_prefix, cm_error *err);


/* The attribute (an axis list) that marks an op, or a function argument or
 * result, as inside manual computations over those axes, from XLA's
 * StableHLO shard_map export until its sharding export reads it. */
#define SP_GSPMD_MANUAL_AXES "xla.sdy.manual_axes"

/* XLA's -xla-sdy-stablehlo-round-trip-shard-map-export: every
 * sdy.manual_computation (inner ones first) becomes, per operand, an
 * mhlo.copy with its in sharding and an @SPMDFullToShardShape custom call
 * with that sharding minus the manual axes, a call of a new private
 * function `xla.sdy.inlinable_manual_computation_body[_N]` holding the body,
 * and per result an mhlo.copy and an @SPMDShardToFullShape with the out
 * sharding. The body's ops (and the functions they call) get a fully closed
 * sharding where they have none and SP_GSPMD_MANUAL_AXES. Errors: CM_EINVAL
 * at a computation without shardings or whose body does not end in
 * sdy.return, CM_ENOMEM. */
cm_status sp_gspmd_stablehlo_shard_map_export(sp_module *m, cm_error *err);

/* Undoes XLA's escaping (a backslash before each quote) in every xla.sdy.*
 * frontend attribute string of m: the module's, the ops' and the function
 * arguments'. The importers run it first, so they read both forms. Errors:
 * CM_ENOMEM. */
cm_status sp_gspmd_unescape_frontend(sp_module *m, cm_error *err);

#endif /* SP_GSPMD_INT_H */
