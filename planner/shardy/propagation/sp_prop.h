/* SPDX-License-Identifier: Apache-2.0
 * planner: Shardy-compatible sharding propagation. Given the shardings on
 * function inputs and outputs, op results and sharding constraints, finds the
 * sharding of every other tensor by propagating along the factors of each op's
 * sharding rule (propagation.md), forward and backward to a fixed point, with
 * Shardy's hierarchy: basic, aggressive (conflict resolution), op-priority and
 * user-priority propagation. The entry (sp_propagate) and basic propagation
 * are in sp_basic_propagation.c; each level above has its Shardy-named file
 * (sp_prop_int.h lists them).
 * Ownership: results are written into the module (attributes allocated in its
 * arena). Thread contract: one module per call; calls on different modules
 * may run in parallel. */
#ifndef SP_PROP_H
#define SP_PROP_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_rules.h"
#include "sp_diag.h"

typedef enum sp_prop_level {
    SP_PROP_BASIC = 0,    /* -sdy-basic-propagate */
    SP_PROP_AGGRESSIVE,   /* -sdy-aggressive-propagate */
    SP_PROP_OP_PRIORITY,  /* -sdy-op-priority-propagate */
    SP_PROP_USER_PRIORITY /* -sdy-user-priority-propagate */
} sp_prop_level;

typedef struct sp_prop_opts {
    sp_prop_level level;
    bool conservative;               /* conservative-propagation */
    bool keep_sharding_rules;        /* keep-sharding-rules */
    bool aggressive_strategy;        /* propagation-strategy=aggressive (default) vs basic */
    bool run_op_priority;            /* run-op-priority-propagation (default true) */
    bool debug_sharding_origins;     /* debug-sharding-origins */
    bool debug_edge_source_sharding; /* debug-edge-source-sharding */
    const sp_custom_rules *custom;   /* user rules for custom calls, may be NULL */
    bool timing;                     /* print each pass's time to stderr (-mlir-timing) */
    bool shardy_pipeline;            /* sp_pass_propagation_pipeline composes Shardy's
                                      * pipeline (`shardplan opt`); false: the planner's */
    bool avoid_export_for_partitioning; /* Shardy's pipeline: keep constraints and groups,
                                         * no partitioner stage in the export */
    bool dedup_functions_fully;      /* Shardy's pipeline, dedup-functions-fully: keep
                                      * the call graph (function data-flow edges)
                                      * instead of flattening it */
    const uint8_t *op_mask;          /* per op id (m->n_ops entries): nonzero = start the
                                      * worklist with this op; NULL: every op. For incremental
                                      * re-propagation (sp_whatif.c): the caller guarantees that
                                      * the masked ops' tensors only meet unmasked ops through
                                      * tensors whose sharding cannot change */
    const cm_cancel *cancel;         /* polled as each fixed-point run starts and every
                                      * SP_PROP_POLL_STEPS op steps; once it says stop,
                                      * propagation fails with CM_EIO. NULL: never */
} sp_prop_opts;

/* Op steps between two polls of sp_prop_opts.cancel (a step costs about
 * 0.1-1 us, so a stop is seen within about a millisecond). */
#define SP_PROP_POLL_STEPS 1024u

/* Fills opts with Shardy's defaults for the given level. */
void sp_prop_opts_init(sp_prop_opts *o, sp_prop_level level);

/* Runs propagation on every function of m. Diagnostics (Shardy's errors and
 * warnings) go to diags. Errors: CM_EINVAL for shardings that do not verify
 * against their mesh or tensor (err->path "LINE:COL" of the op), CM_ENOMEM. */
cm_status sp_propagate(sp_module *m, const sp_prop_opts *o, sp_diags *diags, cm_error *err);

/* The sink-debug-sharding-origins and sink-debug-propagation-edge-sharding
 * part of -sdy-sink-data-flow-edges (Shardy's
 * saveDebugInfoDictsFromDataFlowEdges): before the edges go, each data-flow
 * op (while, case, if, optimization_barrier, manual and named computations)
 * gets, per side, an array of its edges' debug attributes:
 * sdy.block_arg_sharding_origins and sdy.result_sharding_origins (each
 * edge's sdy.sharding_origins; edges without one are left out, as in
 * Shardy), sdy.block_arg_propagation_edges and sdy.result_propagation_edges
 * (the edges' non-empty sdy.propagation_edges). Nothing when both flags are
 * off. Errors: CM_ENOMEM. */
cm_status sp_prop_debug_info_sink(sp_module *m, bool origins, bool edges, cm_error *err);

/* The step after the highest `step-N` of the module's sdy.propagation_edges
 * (op attributes and function result attributes), 0 when there are none:
 * where a pass recording propagation edges starts counting (Shardy's
 * maximumPropagationStep + 1). */
int64_t sp_prop_debug_next_step(const sp_module *m);

#endif /* SP_PROP_H */
