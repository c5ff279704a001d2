/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-insert-explicit-reshards (sdy_export_passes.md). After
 * propagation an op's operands and results may still be sharded in ways its
 * sharding rule cannot reconcile; this pass picks one sharding per factor,
 * reshards the operands to it with `sdy.reshard`, computes the op with it,
 * all-reduces the axes of sharded reduction factors with `sdy.all_reduce`
 * and reshards each result back to the sharding it had. The pass is in
 * sp_insert_explicit_reshards.c (Shardy's insert_explicit_reshards.cc).
 * Ownership: new ops, values and shardings live in the module's arena.
 * Thread contract: one module per call. */
#ifndef SP_RESHARD_H
#define SP_RESHARD_H

#include <stdbool.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_diag.h"

typedef struct sp_reshard_opts {
    bool full_version; /* enable-full-version=true; see sp_pass_insert_explicit_reshards */
    /* the operands of a custom call the registry does not know are
     * resharded to replicated, as XLA's partitioner does (sp_rule_opts); the
     * plan's partitioning sets it, Shardy's pass does not */
    bool replicate_unknown_custom_calls;
} sp_reshard_opts;

/* Runs -sdy-insert-explicit-reshards on every function of m, in program order.
 * For each op with a sharding rule (sp_rule_for_op) whose operands and
 * results are on one mesh:
 *  - when every factor is sharded the same way in every tensor that has it,
 *    no axis shards two factors and no need-replication factor is sharded,
 *    the op is left alone, except that the axes of sharded reduction factors
 *    are all-reduced after it;
 *  - otherwise one axis list per factor is chosen (Shardy's
 *    findCommonAxesHeuristic: the factor-axes pair that the largest total
 *    size of tensors holds or extends wins, pass-through factors before
 *    reduction factors, then the larger sharding, then the higher factor
 *    index; the other factors keep the longest prefix of their candidate
 *    that does not overlap the chosen axes; findCommonAxesOnUnaryOperation
 *    for ops of two non-scalar tensors), the
 *    operands that differ get an `sdy.reshard`, the op's `sdy.sharding`
 *    becomes the chosen one, reduction axes are all-reduced, and results
 *    whose original sharding differs get an `sdy.reshard` back to it; uses of
 *    a result then see the last of these values. A reshape with overflow
 *    axes is reconciled as Shardy's processReshapeWithOverflowAxes.
 * A value returned by a function whose sharding differs from the function's
 * result sharding (none: fully replicated) is resharded before the return; a
 * func.call's operands are resharded to its callee's argument shardings, and
 * data-flow operands (while, case/if and manual computation returns,
 * optimization_barrier) to their targets, right after each operand's
 * definition. An op whose results are on
 * one device (a maximal mesh) gets its operands resharded onto the device
 * (through replicated on the global mesh, the first sdy.mesh with axes) and
 * its results back; results naming two devices, and function arguments or
 * results on a single device, are errors reported to diags (CM_EINVAL). Ops
 * with operands on meshes of different axes, or without a rule (custom rules
 * and custom calls the registry does not know included), are skipped. A missing sharding
 * counts as fully replicated. Inside a manual computation's body values are
 * sharded locally (without the manual axes).
 * opts may be NULL (full version). With full_version = false (Shardy's
 * default) only func.call, mhlo.ragged_dot and a concatenate whose operands
 * are not all sharded as its result are treated as above; elsewhere only
 * unreduced axes are reconciled (all-reduces, replicated/sharded-to-unreduced
 * collectives, all-reduces of reduction factors when the result keeps axes
 * unreduced) and a dot may be computed more sharded with its result
 * resharded (Shardy's processDot).
 * Errors: CM_EINVAL as above, CM_ENOMEM (the module may then be partly
 * rewritten). */
cm_status sp_pass_insert_explicit_reshards(sp_module *m, const sp_reshard_opts *opts,
                                           sp_diags *diags, cm_error *err);

#endif /* SP_RESHARD_H */
