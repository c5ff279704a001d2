/* SPDX-License-Identifier: Apache-2.0
 * executor: the per-op timers of a run (ex_exec_opts.op_s) beside the cost
 * model's per-op figures, written as the benchmark result's "ops" and
 * "collectives" (cmd/cmd_worker.c) or as the tables of `shardplan run --ops
 * N` (cmd/cmd_run.c). Compute ops are ranked by their time summed over
 * the devices, the slowest first; collectives are the module's explicit
 * ones, in module order, with their kind, axes, group and bytes.
 * Thread contract: reentrant; nothing is kept between calls. */
#ifndef EX_TIMING_H
#define EX_TIMING_H

#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_input.h"

/* Timers are kept up to this many (devices x ops) entries (128 MiB of
 * doubles); beyond, a run records none. */
#define EX_TIMING_MAX ((size_t)1 << 24)

/* Most ops listed (ops_timed counts them all); also most collectives. */
#define EX_TIMING_LISTED 500

typedef struct ex_timing {
    const sp_module *m; /* the partitioned module that ran */
    const sp_graph *g;  /* its graph document (value names), or NULL for MLIR */
    const sp_cost *c;   /* its cost with opts.per_op, or NULL: no predictions */
    const double *op_s; /* n_dev x m->n_ops, device-major, summed over runs */
    uint32_t n_dev;
    uint64_t runs;      /* runs op_s sums (>= 1) */
} ex_timing;

/* The cost of a partitioned input with per-op figures (its graph's names
 * and custom rules when it came as a graph document), or NULL when the
 * cost model refuses it (times are then shown without predictions). */
sp_cost *ex_timing_cost(const sp_input *part);

/* Zeroed per-op timers for devices workers (0: the module's mesh size) over
 * m's ops, or NULL when they would pass EX_TIMING_MAX entries or memory is
 * short; *n_dev gets the resolved device count. */
double *ex_timing_timers(const sp_module *m, uint64_t devices, uint32_t *n_dev);

/* Appends ,"ops_timed":N,"ops":[...],"collectives":[...] (docs/api.md,
 * "Benchmark runs"). CM_ENOMEM. */
cm_status ex_timing_json(const ex_timing *t, cm_buf *b);

/* Prints the top slowest compute ops and every collective as two tables:
 * where, mean and max over devices, predicted, and GFLOP/s or GB/s. */
cm_status ex_timing_text(const ex_timing *t, uint32_t top, FILE *out);

#endif /* EX_TIMING_H */
