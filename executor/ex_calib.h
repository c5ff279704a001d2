/* SPDX-License-Identifier: Apache-2.0
 * executor: measurements of this machine as the executor uses it (sgemm per
 * device worker with one OpenBLAS thread each, memcpy bandwidth, barrier
 * latency), and the CPU device profile (docs/device-profiles.md) written
 * from them by `shardplan calibrate`. bench/bench_executor.c shares the
 * baselines. Thread contract: not reentrant (changes the OpenBLAS thread
 * count while it measures, then sets it back to 1). */
#ifndef EX_CALIB_H
#define EX_CALIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"

/* Median FLOP/s of an n x n x n sgemm run reps times on one thread with
 * OpenBLAS set to blas_threads threads. Errors: CM_ENOMEM. */
cm_status ex_calib_sgemm(int64_t n, int blas_threads, uint32_t reps, double *flops_out,
                         cm_error *err);

/* Median FLOP/s per worker when n_workers threads each run an n x n x n
 * sgemm with one OpenBLAS thread at the same time (how the device workers
 * run), over reps rounds. Errors: CM_ENOMEM. */
cm_status ex_calib_sgemm_workers(int64_t n, uint32_t n_workers, uint32_t reps, double *flops_out,
                                 cm_error *err);

/* Median seconds to copy bytes between two pre-faulted buffers with
 * n_threads threads, each copying its contiguous share. Errors: CM_ENOMEM. */
cm_status ex_calib_memcpy(size_t bytes, uint32_t n_threads, uint32_t reps, double *secs_out,
                          cm_error *err);

/* Median seconds of one pthread barrier round among n_threads threads. */
double ex_calib_barrier(uint32_t n_threads, uint32_t rounds);

typedef struct ex_calib {
    uint32_t n_devices;    /* device workers the profile is for */
    double f32_flops;      /* per worker, FLOP/s (sgemm) */
    double f64_flops;      /* per worker, FLOP/s (dgemm estimate: f32 / 2) */
    double mem_bandwidth;  /* one thread's memcpy, bytes/s */
    double link_bandwidth; /* per worker when all copy together, bytes/s */
    double link_latency;   /* one barrier round, seconds */
    double mem_bytes;      /* physical memory, bytes (0: unknown) */
} ex_calib;

/* Measures into c for n_devices workers (a few seconds). Errors: CM_ENOMEM. */
cm_status ex_calib_measure(uint32_t n_devices, ex_calib *c, cm_error *err);

/* Appends the profile JSON (format shardplan.device-profile/v1, "calibrated":
 * true) named name to out. */
void ex_calib_profile_json(const ex_calib *c, const char *name, cm_buf *out);

/* `shardplan calibrate [--out FILE] [--devices N]`: argv[0] is "calibrate".
 * Measures, checks the document with the profile reader and writes it to
 * FILE (default: stdout). Returns 0, 1 on failure, 2 for bad usage. */
int ex_calib_main(int argc, char **argv, FILE *out, FILE *errs);

#endif /* EX_CALIB_H */
