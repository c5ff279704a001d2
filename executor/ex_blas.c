/* SPDX-License-Identifier: Apache-2.0
 * executor: OpenBLAS behind ex_blas.h; the only file that includes cblas.h. */
#include "ex_blas.h"

#include <pthread.h>

#include <cblas.h>

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_one_thread(void)
{
    openblas_set_num_threads(1);
}

void ex_blas_init(void)
{
    pthread_once(&blas_once, blas_one_thread);
}

void ex_blas_set_threads(int n)
{
    ex_blas_init();
    openblas_set_num_threads(n > 0 ? n : 1);
}

void ex_blas_sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                (int)(k > 0 ? k : 1), b, (int)(n > 0 ? n : 1), 0.0f, c, (int)(n > 0 ? n : 1));
}

void ex_blas_dgemm(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a,
                (int)(k > 0 ? k : 1), b, (int)(n > 0 ? n : 1), 0.0, c, (int)(n > 0 ? n : 1));
}

void ex_blas_sgemm_ex(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
}

void ex_blas_dgemm_ex(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                      int64_t lda, const double *b, int64_t ldb, double *c, int64_t ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, 0.0, c, (int)ldc);
}
