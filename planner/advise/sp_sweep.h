/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's sweep (docs/advisor.md "Sweep"): plans the
 * transformer template of sp_example over the 2-D factorisations data x model
 * of a device count and the strategies, in parallel, ranks the variants by
 * predicted step time under the memory limit and marks the memory/time
 * Pareto front. The command is cmd/cmd_sweep.c.
 * Ownership: sp_sweep_run fills caller storage released by
 * sp_sweep_result_fini. Thread contract: sp_sweep_run starts and joins its
 * own threads and is reentrant. */
#ifndef SP_SWEEP_H
#define SP_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"

typedef struct sp_sweep_opts {
    int64_t devices; /* every 2-D factorisation data x model of this count */
    uint32_t layers; /* transformer template (sp_example_opts) */
    int64_t d_model, heads, seq, batch;
    bool train;
    uint32_t strategies; /* bit mask of 1 << sp_example_strategy; 0: all four */
    uint32_t threads;    /* 0: online cores */
    uint32_t jobs;       /* plans to run, cycling over the variants (benchmarks); 0: one each */
    const sp_profile *profile; /* NULL: sp_profile_default */
    /* Polled before each variant, from the worker threads: true stops the
     * sweep, which then fails with CM_EIO ("stopped"). NULL: never stops. */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
} sp_sweep_opts;

void sp_sweep_opts_init(sp_sweep_opts *o);

typedef struct sp_sweep_row {
    int64_t data, model;                                  /* mesh data=data,model=model */
    int strategy;                                         /* sp_example_strategy */
    bool ok;                                              /* planned and costed */
    char error[CM_ERROR_PATH_LEN + CM_ERROR_MSG_LEN + 4]; /* why not, when !ok */
    double step_s, peak_bytes, comm_bytes, flops;
    bool fits;     /* peak under the profile's capacity */
    double capacity_bytes; /* the profile's memory per device for this mesh (0: unknown) */
    bool pareto;   /* on the front of (peak_bytes, step_s) among ok rows */
    uint32_t rank; /* 1 = fastest that fits; 0 for rows that do not fit or failed */
} sp_sweep_row;

typedef struct sp_sweep_result {
    sp_sweep_row *rows; /* heap, sorted by rank (fitting first), then step time */
    uint32_t n_rows;
    uint32_t n_ops;     /* ops of one variant's module */
    uint32_t n_jobs;    /* plans run (n_rows, or o->jobs) */
    double seconds;     /* wall time of the sweep */
    double cpu_seconds; /* CPU time of the process during the sweep (all threads) */
    char profile[SP_PROFILE_NAME_LEN]; /* the device profile's name */
} sp_sweep_result;

/* Plans and costs every variant on o->threads threads. Each strategy's graph
 * is generated and decoded once; variants are its MLIR text with their own
 * mesh, kept when o->jobs cycles over the variants again. Errors: CM_EINVAL
 * for bad options (err->path "/devices", ...), CM_ENOMEM. Per-variant failures
 * are rows with ok = false. The caller frees res with sp_sweep_result_fini.
 * Thread contract: starts and joins its own threads; reentrant. */
cm_status sp_sweep_run(const sp_sweep_opts *o, sp_sweep_result *res, cm_error *err);
void sp_sweep_result_fini(sp_sweep_result *res);
void sp_sweep_write_json(const sp_sweep_result *res, cm_buf *b);
void sp_sweep_write_text(const sp_sweep_result *res, cm_buf *b);

#endif /* SP_SWEEP_H */
