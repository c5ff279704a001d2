/* SPDX-License-Identifier: Apache-2.0
 * planner: what the export passes of this folder share about functions and
 * calls (Shardy's getFuncArgShardings / getFuncResultShardings, sharding
 * equivalence, fully closed copies). Folder-private. Thread contract: one
 * module per call. */
#ifndef SP_EXPORT_INT_H
#define SP_EXPORT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "sp_ir.h"

/* The sharding of argument (is_arg) or result i of function f, or NULL. */
const sp_sharding *sp_exp_io_sharding(const sp_module *m, uint32_t f, bool is_arg, uint32_t i);
/* The number of arguments (is_arg) or results of function f. */
uint32_t sp_exp_io_count(const sp_module *m, uint32_t f, bool is_arg);
/* The rank of argument (is_arg) or result i of function f (0 when not a tensor). */
uint32_t sp_exp_io_rank(const sp_module *m, uint32_t f, bool is_arg, uint32_t i);
/* Is s on a maximal mesh (no axes, one device id)? */
bool sp_exp_is_maximal(const sp_module *m, const sp_sharding *s);
/* The first of f's argument (or result) shardings whose mesh is not
 * maximal, or NULL: Shardy's per-value list is absent without one, and a
 * missing entry elsewhere stands for a fully open sharding on its mesh. */
const sp_sharding *sp_exp_mesh_source(const sp_module *m, uint32_t f, bool is_arg);
/* (sp_sharding_same_mesh_ref, _is_fully_open and _equivalent are in sp_shard.h.) */
/* Are a and b the same attribute value (NULL only equals NULL)? Sharding
 * lists compare their shardings and axis lists their axes by value. */
bool sp_exp_attr_equal(const sp_attr *a, const sp_attr *b);
/* A fully closed sharding with s's mesh and rank, in m's arena; NULL when out of memory. */
sp_sharding *sp_exp_fully_closed_like(sp_module *m, const sp_sharding *s);
/* The func.func a func.call names, or SP_NONE. */
uint32_t sp_exp_callee(const sp_module *m, uint32_t call);
/* `array<i64: ...>` of the n values v, copied into m's arena; NULL when out
 * of memory. */
sp_attr *sp_exp_i64_array(sp_module *m, const int64_t *v, uint32_t n);

/* A rewrite of one sharding s: *out is a new sharding (m's arena) to set,
 * or stays NULL when s is kept. Returns CM_OK or an error that stops the walk. */
typedef cm_status (*sp_exp_sharding_fn)(sp_module *m, const sp_sharding *s, sp_sharding **out,
                                        void *ctx);
/* Applies fn to every sharding of the module, in program order (Shardy's
 * transformShardings): function argument and result shardings, and the
 * sdy.sharding, in_shardings, out_shardings, sharding and out_sharding
 * attributes of every op. Errors: fn's, CM_ENOMEM. */
cm_status sp_exp_transform_shardings(sp_module *m, sp_exp_sharding_fn fn, void *ctx);

/* A rewrite of entry i (never NULL) of a sharding list: as sp_exp_sharding_fn. */
typedef cm_status (*sp_exp_item_fn)(sp_module *m, uint32_t i, const sp_sharding *s,
                                    sp_sharding **out, const void *ctx);
/* Rewrites op's sharding-list attribute name through fn, copy on write: a
 * new attribute (m's arena) replaces it when fn changes any entry; a missing
 * attribute or one of another kind is left alone. Errors: fn's, CM_ENOMEM. */
cm_status sp_exp_rewrite_sharding_list(sp_module *m, uint32_t op, const char *name,
                                       sp_exp_item_fn fn, const void *ctx);

#endif /* SP_EXPORT_INT_H */
