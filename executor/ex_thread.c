/* SPDX-License-Identifier: Apache-2.0
 * executor: threads that start together or not at all (ex_thread_int.h).
 * Each thread first waits on the group's start flag, which the owner sets
 * once every thread exists (run) or one could not be made (return). */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, cpu_set_t (Linux) */
#include "ex_thread_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

typedef struct slot {
    ex_threads *t;
    void *arg;
} slot;

struct ex_threads {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go; /* 0 until decided, then 1: call fn, -1: return */
    void *(*fn)(void *arg);
    uint32_t n_started;
    pthread_t *th;
    slot *slots;
};

static void *entry(void *arg)
{
    const slot *s = arg;
    ex_threads *t = s->t;
    pthread_mutex_lock(&t->mu);
    while (t->go == 0) {
        pthread_cond_wait(&t->cv, &t->mu);
    }
    int go = t->go;
    pthread_mutex_unlock(&t->mu);
    return go > 0 ? t->fn(s->arg) : NULL;
}

/* Tells the started threads to run (go 1) or to return (-1). */
static void decide(ex_threads *t, int go)
{
    pthread_mutex_lock(&t->mu);
    t->go = go;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void destroy(ex_threads *t)
{
    for (uint32_t i = 0; i < t->n_started; i++) {
        pthread_join(t->th[i], NULL);
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    cm_free(t->th);
    cm_free(t->slots);
    cm_free(t);
}

/* Creates thread i, pinned to cpu unless cpu is SIZE_MAX. */
static cm_status create(ex_threads *t, uint32_t i, size_t cpu, cm_error *err)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory (thread attributes)");
    }
    int rc = 0;
    if (cpu != SIZE_MAX) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        rc = pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    }
    bool pinning = rc != 0;
    if (rc == 0) {
        rc = pthread_create(&t->th[i], &attr, entry, &t->slots[i]);
    }
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        return CM_OK;
    }
    if (rc == EAGAIN) {
        return cm_error_set(err, CM_ENOMEM, NULL,
                            "cannot start thread %u: out of threads or memory", i);
    }
    if (pinning || (cpu != SIZE_MAX && rc == EINVAL)) {
        /* glibc applies the affinity when it creates the thread */
        return cm_error_set(err, CM_EIO, NULL, "cannot pin thread %u to CPU %zu", i, cpu);
    }
    return cm_error_set(err, CM_EINTERNAL, NULL, "cannot start thread %u (error %d)", i, rc);
}

cm_status ex_threads_start(uint32_t n, void *(*fn)(void *arg), void *args, size_t stride,
                           const size_t *cpus, uint32_t n_cpus, ex_threads **out,
                           cm_error *err)
{
    *out = NULL;
    ex_threads *t = cm_calloc(1, sizeof *t);
    if (t == NULL) {
        return cm_error_oom(err);
    }
    t->fn = fn;
    t->th = cm_calloc(n + 1u, sizeof(pthread_t));
    t->slots = cm_calloc(n + 1u, sizeof(slot));
    bool mu = t->th != NULL && t->slots != NULL && pthread_mutex_init(&t->mu, NULL) == 0;
    bool cv = mu && pthread_cond_init(&t->cv, NULL) == 0;
    if (!cv) {
        if (mu) {
            pthread_mutex_destroy(&t->mu);
        }
        cm_free(t->th);
        cm_free(t->slots);
        cm_free(t);
        return cm_error_oom(err);
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        t->slots[i].t = t;
        t->slots[i].arg = (char *)args + (size_t)i * stride;
        st = create(t, i, cpus != NULL ? cpus[i % n_cpus] : SIZE_MAX, err);
        t->n_started += st == CM_OK ? 1u : 0u;
    }
    decide(t, st == CM_OK ? 1 : -1);
    if (st != CM_OK) {
        destroy(t);
        return st;
    }
    *out = t;
    return CM_OK;
}

void ex_threads_join(ex_threads *t)
{
    if (t != NULL) {
        destroy(t);
    }
}
