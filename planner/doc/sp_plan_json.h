/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan document (docs/graph-format.md, "Plan"): runs Shardy's
 * propagation on a module with sharding origins and edges recorded, then
 * writes, for every function input, op result and output, its sharding
 * (Shardy text and per dimension), its per-device local shape and where the
 * sharding came from; for every op its sharding rule; diagnostics (conflicts
 * resolved by resharding, custom calls without a rule, inputs and outputs on
 * different meshes); and a SHA-256 of the module as printed in MLIR before
 * propagation, so identical requests (in either syntax) hash alike.
 * The `shardplan plan` command is cmd/cmd_plan.c. Thread contract: one module
 * per call. */
#ifndef SP_PLAN_JSON_H
#define SP_PLAN_JSON_H

#include "cm.h"
#include "sp_graph_json.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_rules.h"

#include <stdbool.h>
#include <stddef.h>



/* Seconds spent in each phase of sp_plan_run (for benchmarks). */
typedef struct sp_plan_timing {
    double hash_s;  /* printing and hashing the input module */
    double pass_s;  /* the propagation pass */
    double write_s; /* writing the plan document */
} sp_plan_timing;

typedef struct sp_plan_opts {
    sp_plan_pass pass;
    const sp_custom_rules *custom; /* rules for custom calls, may be NULL */
    const sp_graph *graph;         /* for value names and op paths, may be NULL */
    bool functions_form;           /* op paths /functions/F/ops/I (else /ops/I) */
    sp_plan_timing *timing;        /* filled when not NULL */
    const char *input_sha256;      /* the input's hash when known (sp_plan.h), else NULL */
    const cm_cancel *cancel;       /* polled while propagating; NULL: never */
} sp_plan_opts;

/* Fills o with the defaults: the propagation pipeline, no rules, no graph,
 * paths in the single-function form. */
void sp_plan_opts_init(sp_plan_opts *o);



/* Runs the pass on m (edited in place) and appends the plan document to out.
 * Errors: those of the pass (CM_EINVAL for shardings that do not verify),
 * CM_ENOMEM (also when out ran out of memory). */
cm_status sp_plan_run(sp_module *m, const sp_plan_opts *o, cm_buf *out, cm_error *err);

/* Decodes a graph document and plans it: sp_graph_decode + sp_plan_run with
 * the graph's rules, names and path form. */
cm_status sp_plan_graph_json(const char *text, size_t len, sp_plan_pass pass, cm_buf *out,
                             cm_error *err);

#endif /* SP_PLAN_JSON_H */
