/* SPDX-License-Identifier: Apache-2.0
 * executor: the one wrapper around OpenBLAS (STYLE.md). Row-major matrix
 * products for the dot_general kernel, and the thread setting the device
 * workers need (MACHINE-NOTES.md: one OpenBLAS thread per worker, or the
 * workers oversubscribe the cores).
 * Thread contract: ex_blas_init is process-wide and idempotent; the gemm
 * calls are reentrant once it has run. */
#ifndef EX_BLAS_H
#define EX_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Sets OpenBLAS to one thread (once per process; later calls do nothing).
 * Called by the executor before it starts its workers. */
void ex_blas_init(void);

/* Sets the OpenBLAS thread count to n (after ex_blas_init), process-wide:
 * ex_exec_run sets it for each run from the device count; baselines
 * (bench, calibrate) set it while no device workers run. */
void ex_blas_set_threads(int n);

/* c[m x n] = a[m x k] * b[k x n], all row-major and dense. Sizes must fit in
 * an int (the executor checks before calling). */
void ex_blas_sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c);
void ex_blas_dgemm(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c);

/* c[m x n] (row-major, leading dimension ldc) = op(a) * op(b), where op(a) is
 * a (m x k, leading dimension lda) or, with ta, the transpose of a stored as
 * k x m; likewise b (k x n, or n x k with tb). Leading dimensions must be at
 * least the row length they describe and everything must fit in an int. */
void ex_blas_sgemm_ex(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc);
void ex_blas_dgemm_ex(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                      int64_t lda, const double *b, int64_t ldb, double *c, int64_t ldc);

#endif /* EX_BLAS_H */
