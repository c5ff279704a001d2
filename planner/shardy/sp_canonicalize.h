/* SPDX-License-Identifier: Apache-2.0
 * planner: -canonicalize, the sdy ops' canonicalization patterns as MLIR's
 * canonicalizer applies them under sdy_opt (Shardy's
 * dialect/sdy/ir/canonicalization.{cc,td}), plus the canonicalizer's
 * removal of unused side-effect-free ops. Thread contract: one module per
 * call. */
#ifndef SP_CANONICALIZE_H
#define SP_CANONICALIZE_H

#include "cm.h"
#include "sp_ir.h"

/* Rewrites m to a fixed point (at most 64 sweeps) with these patterns:
 * - no-op collectives: all_gather / all_slice / reduce_scatter with empty
 *   per-dimension axes, all_reduce with no reduction axes, and a
 *   collective_permute whose out_sharding is equivalent to its operand's
 *   sharding, are replaced by their operand;
 * - all_slice of all_gather with the same axes is the gather's operand;
 *   all_reduce of replicated_to_unreduced over the same axes is the latter's
 *   operand; all_reduce of sharded_to_unreduced over the same (sorted and
 *   merged) axes is an all_gather of the latter's operand;
 * - all_reduce followed by all_slices (all its users, all alike) becomes a
 *   reduce_scatter over the slicing axes' prefixes that the reduction axes
 *   cover, plus an all_slice of the rest when some remain;
 * - an unused all_to_all is dropped; all_to_all of a single-use all_to_all
 *   with disjoint dimensions is one all_to_all with both parameter lists,
 *   sorted by source dimension;
 * - reshard of a single-use reshard reshards the inner operand; a reshard of
 *   a value reached from a root through reshapes and transposes is an
 *   earlier reshard (same block) of a value reached from that root through
 *   reshapes only, when both put the same axes at the same linear strides;
 *   the reshape/transpose path is then cloned onto the earlier result;
 * - a manual_computation drops unused arguments, is erased when it has no
 *   operands, results or body ops, and is inlined when its manual axes
 *   multiply to 1;
 * - unused results of side-effect-free ops (reshard, sdy.constant,
 *   propagation_barrier, and StableHLO reshape, transpose, constant,
 *   broadcast_in_dim, iota and element-wise ops) are erased.
 * Errors: CM_ENOMEM (the module may then be partly rewritten). */
cm_status sp_pass_canonicalize(sp_module *m, cm_error *err);

/* The canonicalizer as Shardy's export pipeline runs it after the
 * partitioner (enabled patterns: the `sdy-collective` label): the
 * collective patterns above and the removal of unused side-effect-free
 * ops, without the reshard and manual_computation patterns. Errors:
 * CM_ENOMEM (the module may then be partly rewritten). */
cm_status sp_pass_canonicalize_collectives(sp_module *m, cm_error *err);

#endif /* SP_CANONICALIZE_H */
