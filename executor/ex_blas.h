/* SPDX-License-Identifier: Apache-2.0
 * executor: the one wrapper around OpenBLAS (STYLE.md). Row-major matrix
 * products for the dot_general kernel, and the thread setting the device
 * workers need (MACHINE-NOTES.md: one OpenBLAS thread per worker, or the
 * workers oversubscribe the cores).
 * Thread contract: ex_blas_init is process-wide and idempotent; the gemm
 * calls are reentrant once it has run. */
#ifndef EX_BLAS_H
#define EX_BLAS_H

#include <stdint.h>

/* Sets OpenBLAS to one thread (once per process; later calls do nothing).
 * Called by the executor before it starts its workers. */
void ex_blas_init(void);

/* Sets the OpenBLAS thread count to n (after ex_blas_init). Only for
 * baselines measured while no device workers run (bench, calibrate): the
 * caller restores 1 before running the executor again. */
void ex_blas_set_threads(int n);

/* c[m x n] = a[m x k] * b[k x n], all row-major and dense. Sizes must fit in
 * an int (the executor checks before calling). */
void ex_blas_sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c);
void ex_blas_dgemm(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c);

#endif /* EX_BLAS_H */
