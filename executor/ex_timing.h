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

#include <stdbool.h>
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

/* ---- the timeline of one run ---------------------------------------------------
 * ex_exec_opts.trace: every op that runs no block of its own, on every
 * device, with its start and end (cm_now seconds), and for a collective the
 * time it waited at its first barrier for the last member to arrive (the
 * straggler is the member that waits least). One run is recorded; each
 * device keeps at most cap events and counts the rest as dropped. Each
 * worker writes only its own device's entry, so no lock is taken. */

/* Events kept over all devices (ex_trace_init shares them out). */
#define EX_TRACE_EVENTS 20000u

typedef struct ex_trace_event {
    uint32_t op;  /* module op id */
    double start; /* cm_now seconds */
    double end;
    double wait;  /* collectives: seconds at the first barrier; else 0 */
} ex_trace_event;

typedef struct ex_trace_dev {
    ex_trace_event *ev; /* cap entries */
    uint32_t n;
    uint64_t dropped;
    double start;       /* when the recorded run began on this device */
    double wait;        /* the pending collective's barrier wait */
    bool on;            /* the recorded run is under way on this device */
} ex_trace_dev;

typedef struct ex_trace {
    uint32_t run;   /* the run recorded (0-based; the last of a benchmark) */
    uint32_t n_dev; /* devices kept (workers beyond are not recorded) */
    uint32_t cap;   /* events per device */
    ex_trace_dev *dev;
    /* NULL, or called by device 0 after each run ends (every device past
     * it), outside the timed part of the next: a progress report. */
    void (*on_run)(void *ctx, uint32_t run, uint32_t runs);
    void *ctx;
} ex_trace;

/* Prepares t to record run of n_dev devices (EX_TRACE_EVENTS shared out,
 * at least 64 per device). CM_ENOMEM; CM_EINVAL for 0 or more than 4096
 * devices. t is released with ex_trace_fini, also after a failure. */
cm_status ex_trace_init(ex_trace *t, uint32_t n_dev, uint32_t run, cm_error *err);
void ex_trace_fini(ex_trace *t);

/* The hooks the run calls (ex_run.c), each from device dev's worker. */
void ex_trace_run_begin(ex_trace *t, uint32_t dev, uint32_t run, double now);
void ex_trace_run_end(ex_trace *t, uint32_t dev, uint32_t run, uint32_t runs);
void ex_trace_wait(ex_trace *t, uint32_t dev, double seconds);
void ex_trace_op(ex_trace *t, uint32_t dev, uint32_t op, double start, double end);

/* Whether device dev records now. */
static inline bool ex_trace_on(const ex_trace *t, uint32_t dev)
{
    return dev < t->n_dev && t->dev[dev].on;
}

/* Appends ,"timeline":{...} (docs/api.md "Benchmark timeline"): the run,
 * devices, dropped events, the ops that ran with their names (source
 * location or value name), kinds and collective kinds and axes (from tm's
 * cost, when it has one), and per event [device, op entry, start us, dur
 * us, wait us] from the run's start. CM_ENOMEM. */
cm_status ex_trace_json(const ex_trace *t, const ex_timing *tm, cm_buf *b);

#endif /* EX_TIMING_H */
