/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd internals shared by its files: reading the xla.sdy strings
 * XLA's sdy round trip keeps in mhlo.frontend_attributes, and the import
 * steps XLA's pipelines share. Not for other folders. */
#ifndef SP_GSPMD_INT_H
#define SP_GSPMD_INT_H

#include "cm.h"
#include "sp_ir.h"

/* The string value of frontend attribute key of op, or NULL. */
const char *sp_gspmd_frontend(const sp_module *m, uint32_t op, const char *key);

/* Parses `#sdy.sharding_per_value<[<...>, ...]>` (text NULL: the empty list)
 * into a new sharding-list attribute of m. Errors: CM_EINVAL at op's
 * LINE:COL, CM_ENOMEM. */
cm_status sp_gspmd_parse_per_value(sp_module *m, const char *text, uint32_t op, sp_attr **out,
                                   cm_error *err);

/* err = CM_EINVAL at op's LINE:COL, "'NAME' op MSG". */
cm_status sp_gspmd_op_error(const sp_module *m, uint32_t op, cm_error *err, const char *msg);

/* sp_gspmd_import_shardings with the global mesh's axes named
 * axis_prefix + N (the pass's own names are "_axis_N", placeholders XLA
 * means to be replaced; its old import pipelines named them "axis_N"). */
cm_status sp_gspmd_import_shardings_as(sp_module *m, const char *axis_prefix, cm_error *err);

/* sp_gspmd_import with the axes named as sp_gspmd_import_shardings_as. */
cm_status sp_gspmd_import_as(sp_module *m, const char *axis_prefix, cm_error *err);

/* -xla-sdy-import-sdy-custom-calls on every function of m: @Sharding with
 * an sdy sharding becomes sdy.sharding_constraint, @xla.sdy.ShardingGroup
 * sdy.sharding_group. Errors: CM_EINVAL at a group call without an id, with
 * other than one operand or with uses; CM_ENOMEM. */
cm_status sp_gspmd_import_sdy_custom_calls(sp_module *m, cm_error *err);

#endif /* SP_GSPMD_INT_H */
