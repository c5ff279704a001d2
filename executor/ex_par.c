/* SPDX-License-Identifier: Apache-2.0
 * executor: fork-join pool of a device worker (see ex_par_int.h). */
#include "ex_par_int.h"

#include <pthread.h>

struct ex_par {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;      /* job number: a helper runs each job once */
    uint32_t pending;  /* helpers still running the job */
    bool stop;
    void (*fn)(void *ctx, uint32_t part, uint32_t parts);
    void *ctx;
    uint32_t n_helpers, n_started;
    struct helper {
        struct ex_par *p;
        uint32_t part;
        pthread_t th;
    } helpers[EX_PAR_MAX];
};

static void *helper_thread(void *arg)
{
    struct helper *h = arg;
    ex_par *p = h->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) {
            pthread_cond_wait(&p->go, &p->mu);
        }
        if (p->stop) {
            break;
        }
        seen = p->gen;
        void (*fn)(void *, uint32_t, uint32_t) = p->fn;
        void *ctx = p->ctx;
        uint32_t parts = p->n_helpers + 1u;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, h->part, parts);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) {
            pthread_cond_signal(&p->done);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cm_status ex_par_start(uint32_t helpers, ex_par **out)
{
    *out = NULL;
    if (helpers == 0 || helpers >= EX_PAR_MAX) {
        return CM_EINVAL;
    }
    ex_par *p = cm_calloc(1, sizeof *p);
    if (p == NULL) {
        return CM_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n_helpers = helpers;
    for (uint32_t i = 0; i < helpers; i++) {
        p->helpers[i].p = p;
        p->helpers[i].part = i + 1u;
        if (pthread_create(&p->helpers[i].th, NULL, helper_thread, &p->helpers[i]) != 0) {
            ex_par_stop(p);
            return CM_EIO;
        }
        p->n_started++;
    }
    *out = p;
    return CM_OK;
}

void ex_par_stop(ex_par *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n_started; i++) {
        pthread_join(p->helpers[i].th, NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    cm_free(p);
}

uint32_t ex_par_width(const ex_par *p)
{
    return p->n_helpers + 1u;
}

void ex_par_run(ex_par *p, void (*fn)(void *ctx, uint32_t part, uint32_t parts), void *ctx)
{
    uint32_t parts = p->n_helpers + 1u;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n_helpers;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, parts);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) {
        pthread_cond_wait(&p->done, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

void ex_par_slice(size_t n, size_t align, uint32_t part, uint32_t parts, size_t *lo, size_t *hi)
{
    size_t per = (n / parts + align - 1u) / align * align;
    *lo = per * part < n ? per * part : n;
    *hi = part + 1u == parts || per * (part + 1u) > n ? n : per * (part + 1u);
    if (*hi < *lo) {
        *hi = *lo;
    }
}
