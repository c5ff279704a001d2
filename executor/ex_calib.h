/* SPDX-License-Identifier: Apache-2.0
 * executor: measurements of this machine as the executor uses it (sgemm per
 * device worker with one OpenBLAS thread each, memcpy bandwidth, barrier
 * latency), and the CPU device profile (docs/device-profiles.md) written
 * from them by `shardplan calibrate` (cmd/cmd_calibrate.c).
 * bench/bench_executor.c shares the baselines. Thread contract: not
 * reentrant (changes the OpenBLAS thread count while it measures, then sets
 * it back to 1). */
#ifndef EX_CALIB_H
#define EX_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "sp_cost.h"

/* Median FLOP/s of an n x n x n sgemm run reps times on one thread with
 * OpenBLAS set to blas_threads threads. Errors: CM_ENOMEM. */
cm_status ex_calib_sgemm(int64_t n, int blas_threads, uint32_t reps, double *flops_out,
                         cm_error *err);

/* Median FLOP/s per worker when n_workers threads each run an n x n x n
 * sgemm with one OpenBLAS thread at the same time (how the device workers
 * run), over reps rounds. Errors: CM_ENOMEM, those of starting the threads
 * (CM_ENOMEM when the system is out of threads, CM_EINTERNAL). */
cm_status ex_calib_sgemm_workers(int64_t n, uint32_t n_workers, uint32_t reps, double *flops_out,
                                 cm_error *err);

/* Median seconds to copy bytes between two pre-faulted buffers with
 * n_threads threads, each copying its contiguous share. Errors: CM_ENOMEM,
 * those of starting the threads. */
cm_status ex_calib_memcpy(size_t bytes, uint32_t n_threads, uint32_t reps, double *secs_out,
                          cm_error *err);

/* Elements per second per worker when n_workers threads each take the exp
 * of elems f32 values through the executor's kernel at the same time, the
 * median over reps rounds. Errors: those of ex_calib_memcpy. */
cm_status ex_calib_exp_workers(size_t elems, uint32_t n_workers, uint32_t reps, double *rate_out,
                               cm_error *err);

/* Seconds of one pthread barrier round among n_threads threads (2 to 256,
 * this one among them), the mean over rounds, into *secs_out. Errors:
 * CM_ENOMEM, those of starting the threads. */
cm_status ex_calib_barrier(uint32_t n_threads, uint32_t rounds, double *secs_out, cm_error *err);

#define EX_CALIB_GEMM  6 /* sgemm sizes 32, 64, ..., 1024 */
#define EX_CALIB_STEPS 5 /* steps ex_calib_measure tells its progress */

typedef struct ex_calib {
    uint32_t n_devices;    /* device workers the profile is for */
    double f32_flops;      /* per worker, FLOP/s (sgemm) */
    double f64_flops;      /* per worker, FLOP/s (dgemm estimate: f32 / 2) */
    double mem_bandwidth;  /* one thread's memcpy, bytes/s */
    double mem_traffic;    /* per worker when all copy together: bytes read + written per
                              second (the profile's memory.bandwidth) */
    double link_bandwidth; /* per worker when all copy together, bytes/s */
    double link_latency;   /* one barrier round, seconds */
    double mem_bytes;      /* physical memory, bytes (0: unknown) */
    uint32_t n_gemm;       /* points of the gemm curve, by ascending size */
    double gemm_n[EX_CALIB_GEMM];
    double gemm_flops[EX_CALIB_GEMM]; /* per worker at gemm_n^3, all together */
    double transcendentals;           /* exp per worker, elements/s, all together */
} ex_calib;

/* Told before each step of ex_calib_measure: its name ("sgemm", ...), and
 * the step's number and the count of steps (from 1). */
typedef void ex_calib_progress(void *ctx, const char *step, int k, int n);

/* Measures into c for n_devices workers (a few seconds); progress (may be
 * NULL) is told before each step, EX_CALIB_STEPS times unless a step fails
 * (a caller may line processes up in it). Errors: CM_ENOMEM, those of starting the
 * threads. */
cm_status ex_calib_measure(uint32_t n_devices, ex_calib *c, ex_calib_progress *progress, void *ctx,
                           cm_error *err);

/* Appends the profile JSON (format shardplan.device-profile/v1, "calibrated":
 * true) named name to out. */
void ex_calib_profile_json(const ex_calib *c, const char *name, cm_buf *out);

/* ---- does the profile rank plans as the executor does? --------------------------- */

#define EX_RANK_MAX 8

typedef struct ex_rank_plan {
    char label[48];      /* "MLP train dp" */
    uint32_t model;      /* plans of the same model are ranked against each other */
    double predicted_s;  /* cost model step time under the profile */
    double measured_s;   /* executor, 8 devices: median of the runs after a warm-up */
    double others_cores; /* CPU other processes took meanwhile, in cores (-1: unknown) */
} ex_rank_plan;

typedef struct ex_rank {
    uint32_t n;
    ex_rank_plan plans[EX_RANK_MAX];
    double tau;          /* Kendall tau over the pairs of plans of the same model */
    uint32_t discordant; /* such pairs ordered differently */
    uint32_t close;      /* of those, within EX_RANK_NOISE of each other measured or
                            predicted */
    bool pass;           /* every discordant pair is close */
    uint32_t within;     /* plans predicted within EX_CALIB_TOL of their measured step */
    bool accurate;       /* every plan is */
    uint32_t busy_off;   /* plans off by more than that while others took over EX_CALIB_BUSY */
} ex_rank;

/* Other processes taking more than this many cores while a plan is
 * measured make the machine too busy to judge its prediction by: eight
 * workers in lock step on the cores lose more than the others' share at
 * every barrier (docs/executor.md). */
#define EX_CALIB_BUSY 0.25

/* How far a prediction may be from the measured step: |predicted /
 * measured - 1| at most this. */
#define EX_CALIB_TOL 0.15

/* Measured times closer than this fraction are within this machine's run
 * to run spread, predicted ones are a tie for the cost model; a pair ordered
 * differently that is this close on either side does not fail. */
#define EX_RANK_NOISE 0.10

/* Plans the benchmark suite (the MLP and the transformer training steps of
 * sp_example, each under dp, fsdp, tp and dp+tp on data=2 x model=4), predicts
 * each step with the cost model and measures it with the executor on 8
 * devices: a warm-up round, then iters rounds. With prof every round
 * predicts under prof; with prof NULL each round first calibrates this
 * machine quickly (well under a second) and predicts under that, so that a
 * load that comes and goes weighs on both sides alike. The medians of the
 * rounds are kept, and the CPU other processes took meanwhile (from
 * /proc/stat less this process's own). A minute or two. Errors: those of
 * planning, calibrating and running, CM_ENOMEM. */
cm_status ex_calib_rank(const sp_profile *prof, uint32_t iters, ex_rank *out, cm_error *err);

/* Fills tau, discordant, close, pass, within, accurate and busy_off of r
 * from its plans' times (done by ex_calib_rank). */
void ex_calib_rank_score(ex_rank *r);

/* Prints the predicted and measured times with their ratio and whether it
 * is within EX_CALIB_TOL, both orders per model, tau and PASS or FAIL for
 * each of the two checks. */
void ex_calib_rank_print(const ex_rank *r, FILE *out);

#endif /* EX_CALIB_H */
