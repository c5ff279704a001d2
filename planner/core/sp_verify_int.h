/* SPDX-License-Identifier: Apache-2.0
 * planner/core private: the pieces of the module verifier (sp_verify.c) that
 * live in their own files. Each adds error diagnostics located at the op and
 * sets *bad when it finds anything. Thread contract: read-only on the module
 * except for the scratch arena; no state. */
#ifndef SP_VERIFY_INT_H
#define SP_VERIFY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_diag.h"
#include "sp_ir.h"

/* StableHLO's shape constraints (stablehlo spec, C1..Cn of each op) for op:
 * the result types the operands and attributes imply, dimension numbers in
 * range, sizes that must agree. Ops it does not know are left alone. Types
 * with dynamic dimensions are checked where their sizes are known. */
void sp_verify_op_shapes(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

/* Checks sharding s for a value of type t (NULL: no type, as for an op
 * without results) on mesh (NULL: s names a mesh the module lacks) with the
 * checks and messages of Shardy's verifier; false with the message in msg
 * (cap bytes) at the first finding. */
bool sp_verify_sharding(const sp_sharding *s, const sp_mesh *mesh, const sp_type *t, char *msg,
                        size_t cap);

/* Checks a mesh with the checks and messages of Shardy's MeshAttr verifier
 * (device ids non-negative and a permutation of iota(product of axis
 * sizes) that is not iota itself, axis sizes at least 1, names unique),
 * plus one of ours: the product of the sizes fits in 64 bits. False with
 * the message in msg at the first finding. */
bool sp_verify_mesh(const sp_mesh *m, char *msg, size_t cap);

/* Writes r as Shardy prints an axis ref: "x" or "x":(2)4. */
void sp_verify_ref_str(const sp_axis_ref *r, char *buf, size_t cap);

/* The sdy collectives of Shardy's verifier (sp_verify_coll.c); other ops
 * are left alone. */
void sp_verify_collective(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

/* Shardy's verifyUnreducedAxesTransition from sharding in (operand) to out
 * (result) of op: unreduced axes out adds need intro (an sp_reduction_kind;
 * -1: none may be added), those it drops need removed (-1: none may be
 * dropped), and kept ones keep their reduction. in or out may be NULL; on
 * two different meshes nothing is checked. Adds an error and returns false
 * at the first finding. */
bool sp_verify_unreduced_transition(sp_module *m, uint32_t op, const sp_sharding *in,
                                    const sp_sharding *out, int intro, int removed, sp_diags *d);

/* Every sdy.data_flow_edge and sdy.func_data_flow_edge of m as Shardy
 * verifies them (sp_verify_flow.c). */
void sp_verify_data_flow_edges(sp_module *m, sp_diags *d, bool *bad);
/* MLIR's region isolation for op when it is an sdy.manual_computation or
 * sdy.named_computation: no op inside uses a value defined outside. */
void sp_verify_isolated(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

/* sdy.manual_computation as Shardy verifies it (sp_verify_manual.c); other
 * ops are left alone. */
void sp_verify_manual_computation(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

/* sdy.named_computation as Shardy verifies it (sp_verify_named.c); other
 * ops are left alone. */
void sp_verify_named_computation(sp_module *m, uint32_t op, sp_diags *d, bool *bad);

/* The sdy.propagation_edges, sdy.result_propagation_edges and
 * sdy.block_arg_propagation_edges attributes as Shardy verifies them
 * (sp_verify_edges.c). _parsed: what Shardy checks when it parses them
 * (step indices, sources and targets), for all of op's; false when it
 * reported, and the op's other checks are then skipped, as a parse error
 * would stop them. _attr: the op-level check of attribute name = a (its
 * kind; the shardings, mesh, axes and value indices it refers to); true
 * for any other name; false when it reported, and the op's later
 * attributes go unchecked, as in Shardy. */
bool sp_verify_propagation_edges_parsed(sp_module *m, uint32_t op, sp_diags *d, bool *bad);
bool sp_verify_propagation_edges_attr(sp_module *m, uint32_t op, const char *name,
                                      const sp_attr *a, sp_diags *d, bool *bad);

#endif /* SP_VERIFY_INT_H */
