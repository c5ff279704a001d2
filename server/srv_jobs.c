/* SPDX-License-Identifier: Apache-2.0
 * server: the planning jobs. A plan is computed on a plan worker, at most
 * cfg.plan_workers at once, so that the request can answer 503 at its
 * deadline while the planner finishes in the background; the job is
 * reference-counted between the two. The workers are threads started as
 * jobs need them (up to cfg.plan_workers) and kept, taking jobs from one
 * queue, until srv_jobs_stop; srv_app_stop waits for every job. */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "srv_int.h"

void srv_stop_init(srv_stop *s, srv_app *app, srv_req *r, double seconds)
{
    s->app = app;
    s->r = r;
    double from = r != NULL ? srv_req_ready_at(r) : cm_now();
    s->deadline = seconds > 0 ? from + seconds : (double)INFINITY;
    atomic_init(&s->why, SRV_STOP_NO);
}

bool srv_stop_poll(void *ctx)
{
    srv_stop *s = ctx;
    int why = atomic_load(&s->why);
    if (why == SRV_STOP_NO) {
        why = cm_now() > s->deadline                      ? SRV_STOP_DEADLINE
              : atomic_load(&s->app->stopping)            ? SRV_STOP_SHUTDOWN
              : s->r != NULL && srv_req_client_gone(s->r) ? SRV_STOP_GONE
                                                          : SRV_STOP_NO;
        if (why != SRV_STOP_NO) {
            atomic_store(&s->why, why);
        }
    }
    return why != SRV_STOP_NO;
}

plan_job *srv_job_create(srv_app *app, sp_plan *plan)
{
    plan_job *j = cm_calloc(1, sizeof *j);
    if (j == NULL) {
        return NULL;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->app = app;
    j->plan = plan;
    cm_buf_init(&j->out);
    srv_stop_init(&j->stop, app, NULL, app->cfg.plan_timeout_s);
    return j;
}

void srv_job_unref(plan_job *j)
{
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) {
        return;
    }
    if (j->keep != NULL && j->keep_free != NULL) {
        j->keep_free(j->keep);
    }
    sp_plan_destroy(j->plan);
    cm_buf_fini(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    cm_free(j);
}

/* Runs one job taken from the queue. */
static void job_run_one(plan_job *j)
{
    srv_app *app = j->app;
    double t0 = cm_now();
    cm_cancel c = {srv_stop_poll, &j->stop};
    j->st = sp_plan_write(j->plan, &c, &j->out, NULL, &j->err);
    srv_histo_observe(&app->metrics.plan_time, cm_now() - t0);
    pthread_mutex_lock(&j->mu);
    j->done = true;
    bool store = j->abandoned && j->keep != NULL && j->finish != NULL;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (store && j->st == CM_OK) {
        /* the request left at its deadline: store the plan for its retry,
         * before this job stops counting as running (shutdown waits) */
        j->finish(j, j->keep);
    }
    srv_job_unref(j);
    pthread_mutex_lock(&app->job_mu);
    app->slots_busy--;
    app->jobs_running--;
    pthread_cond_broadcast(&app->job_cv);
    pthread_mutex_unlock(&app->job_mu);
}

/* A plan worker: takes queued jobs until the pool stops. */
static void *worker_main(void *arg)
{
    srv_app *app = arg;
    pthread_mutex_lock(&app->job_mu);
    for (;;) {
        while (app->job_head == NULL && !app->pool_stop) {
            app->idle_workers++;
            pthread_cond_wait(&app->pool_cv, &app->job_mu);
            app->idle_workers--;
        }
        if (app->job_head == NULL) {
            break; /* stopping, and nothing left to run */
        }
        plan_job *j = app->job_head;
        app->job_head = j->qnext;
        if (app->job_head == NULL) {
            app->job_tail = NULL;
        }
        j->qnext = NULL;
        pthread_mutex_unlock(&app->job_mu);
        job_run_one(j);
        pthread_mutex_lock(&app->job_mu);
    }
    pthread_mutex_unlock(&app->job_mu);
    return NULL;
}

void srv_jobs_init(srv_app *app)
{
    pthread_cond_init(&app->pool_cv, NULL);
    app->job_head = app->job_tail = NULL;
    app->workers = NULL;
    app->n_workers = app->idle_workers = 0;
    app->pool_stop = false;
}

void srv_jobs_stop(srv_app *app)
{
    pthread_mutex_lock(&app->job_mu);
    while (app->jobs_running > 0) {
        pthread_cond_wait(&app->job_cv, &app->job_mu);
    }
    app->pool_stop = true;
    pthread_cond_broadcast(&app->pool_cv);
    unsigned n = app->n_workers;
    pthread_mutex_unlock(&app->job_mu);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(app->workers[i], NULL);
    }
    pthread_mutex_lock(&app->job_mu);
    app->n_workers = 0;
    app->pool_stop = false;
    pthread_mutex_unlock(&app->job_mu);
}

void srv_jobs_fini(srv_app *app)
{
    cm_free(app->workers);
    app->workers = NULL;
    pthread_cond_destroy(&app->pool_cv);
}

/* Queues j for the workers, starting one when fewer run than the jobs
 * queued or running with j (slots_busy + 1, at most cfg.plan_workers).
 * Under job_mu. False when no worker exists and none can be started. */
static bool job_enqueue(srv_app *app, plan_job *j)
{
    unsigned cap = app->cfg.plan_workers > 0 ? app->cfg.plan_workers : 1;
    if (app->workers == NULL) {
        app->workers = cm_calloc(cap, sizeof *app->workers);
    }
    if (app->workers != NULL && app->n_workers < app->slots_busy + 1 && app->n_workers < cap &&
        pthread_create(&app->workers[app->n_workers], NULL, worker_main, app) == 0) {
        app->n_workers++;
    }
    if (app->n_workers == 0) {
        return false;
    }
    j->qnext = NULL;
    if (app->job_tail != NULL) {
        app->job_tail->qnext = j;
    } else {
        app->job_head = j;
    }
    app->job_tail = j;
    pthread_cond_signal(&app->pool_cv);
    return true;
}

static void deadline_ts(double deadline, struct timespec *ts)
{
    /* deadline is on cm_now()'s monotonic clock; condvars here use CLOCK_REALTIME */
    double left = deadline - cm_now();
    if (left < 0) {
        left = 0;
    }
    clock_gettime(CLOCK_REALTIME, ts);
    double secs = (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9 + left;
    ts->tv_sec = (time_t)secs;
    ts->tv_nsec = (long)((secs - (double)ts->tv_sec) * 1e9);
}

bool srv_job_run_here(srv_app *app, plan_job *j)
{
    double t0 = cm_now();
    double limit = j->stop.deadline;
    double here = t0 + app->cfg.plan_here_s;
    bool bounded = here < limit;
    if (bounded) {
        j->stop.deadline = here;
    }
    cm_cancel c = {srv_stop_poll, &j->stop};
    j->st = sp_plan_write(j->plan, &c, &j->out, NULL, &j->err);
    srv_histo_observe(&app->metrics.plan_time, cm_now() - t0);
    j->done = true;
    atomic_fetch_add(&app->metrics.plans_here, 1);
    j->stop.deadline = limit;
    if (bounded && j->st == CM_EIO && atomic_load(&j->stop.why) == SRV_STOP_DEADLINE) {
        atomic_fetch_add(&app->metrics.plans_moved, 1);
        return false;
    }
    return true;
}

/* Runs the job with the request's deadline. On CM_OK *job_out holds a
 * reference to a finished job. Replies itself on timeout/busy (returns false). */
bool srv_job_run(srv_app *app, srv_req *r, plan_job *j, double deadline)
{
    struct timespec ts;
    deadline_ts(deadline, &ts);
    pthread_mutex_lock(&app->job_mu);
    int rc = 0;
    while (app->slots_busy >= app->cfg.plan_workers && rc == 0) {
        rc = pthread_cond_timedwait(&app->job_cv, &app->job_mu, &ts);
    }
    if (app->slots_busy >= app->cfg.plan_workers) {
        pthread_mutex_unlock(&app->job_mu);
        srv_reply_err(app, r, E_TIMEOUT, NULL, "every plan worker stayed busy for %.1f s",
                      app->cfg.request_timeout_s);
        return false;
    }
    j->refs = 2;
    if (!job_enqueue(app, j)) {
        pthread_mutex_unlock(&app->job_mu);
        j->refs = 1;
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "cannot start a plan worker");
        return false;
    }
    app->slots_busy++;
    app->jobs_running++;
    pthread_mutex_unlock(&app->job_mu);
    atomic_fetch_add(&app->metrics.plans_on_worker, 1);
    pthread_mutex_lock(&j->mu);
    rc = 0;
    while (!j->done && rc == 0) {
        rc = pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    bool done = j->done;
    if (!done && j->detach != NULL) {
        /* under mu: the job thread reads keep only after it sets done */
        j->keep = j->detach(j->detach_ctx);
        j->abandoned = true;
    }
    pthread_mutex_unlock(&j->mu);
    if (!done) {
        srv_reply_err(
            app, r, E_TIMEOUT, NULL,
            "planning did not finish within the %.1f s request limit; it continues in the "
            "background and a retry may find it stored",
            app->cfg.request_timeout_s);
        return false;
    }
    return true;
}
