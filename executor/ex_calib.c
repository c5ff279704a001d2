/* SPDX-License-Identifier: Apache-2.0
 * executor: machine calibration (see ex_calib.h). Every figure is a median
 * of repeated runs on buffers touched beforehand, so page faults and the
 * first call's OpenBLAS setup stay out of it (MACHINE-NOTES.md: runs spread
 * 20-30%). */
#include "ex_calib.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm_json.h"
#include "ex_blas.h"
#include "ex_exec.h"
#include "ex_kern_int.h"
#include "ex_thread_int.h"
#include "sp_example.h"
#include "sp_input.h"
#include "sp_profile_json.h"

#define MAX_REPS    64
#define MAX_THREADS 256

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, uint32_t n)
{
    qsort(t, n, sizeof t[0], cmp_double);
    return t[n / 2];
}

static float *filled(size_t n)
{
    float *p = cm_alloc(n * sizeof(float) + 1u);
    for (size_t i = 0; p != NULL && i < n; i++) {
        p[i] = (float)((i * 7u) % 13u) * 0.01f;
    }
    return p;
}

cm_status ex_calib_sgemm(int64_t n, int blas_threads, uint32_t reps, double *flops_out,
                         cm_error *err)
{
    size_t nn = (size_t)(n * n);
    float *a = filled(nn), *b = filled(nn), *c = filled(nn);
    double t[MAX_REPS];
    reps = reps == 0 ? 1 : (reps > MAX_REPS ? MAX_REPS : reps);
    if (a == NULL || b == NULL || c == NULL) {
        cm_free(a);
        cm_free(b);
        cm_free(c);
        return cm_error_oom(err);
    }
    ex_blas_set_threads(blas_threads);
    ex_blas_sgemm(n, n, n, a, b, c); /* warm-up: thread pool, packing buffers */
    for (uint32_t r = 0; r < reps; r++) {
        double t0 = cm_now();
        ex_blas_sgemm(n, n, n, a, b, c);
        t[r] = cm_now() - t0;
    }
    ex_blas_set_threads(1);
    *flops_out = 2.0 * (double)n * (double)n * (double)n / median(t, reps);
    cm_free(a);
    cm_free(b);
    cm_free(c);
    return CM_OK;
}

/* ---- threads that start together -------------------------------------------- */

typedef struct job {
    pthread_barrier_t *bar;
    int64_t n;      /* sgemm size, or 0 for a copy (or exp) */
    uint32_t calls; /* sgemms per round */
    bool use_exp;   /* a copy through the executor's exp kernel (f32) */
    float *a, *b, *c;
    const char *src;
    char *dst;
    size_t len;
    uint32_t reps;
    double t0[MAX_REPS]; /* per round: this thread's start and end (cm_now) */
    double t1[MAX_REPS];
} job;

static void *job_thread(void *arg)
{
    job *j = arg;
    for (uint32_t r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->bar);
        j->t0[r] = cm_now();
        if (j->n > 0) {
            for (uint32_t k = 0; k < j->calls; k++) {
                ex_blas_sgemm(j->n, j->n, j->n, j->a, j->b, j->c);
            }
        } else if (j->use_exp) {
            ex_kern_unary(SP_OP_EXPONENTIAL, SP_ELEM_F32, j->src, j->dst, j->len / sizeof(float));
        } else {
            memcpy(j->dst, j->src, j->len);
        }
        j->t1[r] = cm_now();
        pthread_barrier_wait(j->bar);
    }
    return NULL;
}

/* Runs the jobs on their own threads, reps rounds in lock step; t_out[r] is
 * round r's wall time, from the first thread's start to the last one's end
 * (with more threads than cores they do not all run at once). */
static cm_status run_jobs(job *js, uint32_t n, uint32_t reps, double *t_out, cm_error *err)
{
    pthread_barrier_t bar;
    if (pthread_barrier_init(&bar, NULL, n) != 0) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory (barrier)");
    }
    for (uint32_t i = 0; i < n; i++) {
        js[i].bar = &bar;
        js[i].reps = reps;
    }
    /* all or none: the others would wait at the barrier forever otherwise */
    ex_threads *t = NULL;
    cm_status st = ex_threads_start(n, job_thread, js, sizeof *js, NULL, 0, &t, err);
    ex_threads_join(t);
    pthread_barrier_destroy(&bar);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t r = 0; r < reps; r++) {
        double a = js[0].t0[r], b = js[0].t1[r];
        for (uint32_t i = 1; i < n; i++) {
            a = js[i].t0[r] < a ? js[i].t0[r] : a;
            b = js[i].t1[r] > b ? js[i].t1[r] : b;
        }
        t_out[r] = b - a;
    }
    return CM_OK;
}

cm_status ex_calib_sgemm_workers(int64_t n, uint32_t n_workers, uint32_t reps, double *flops_out,
                                 cm_error *err)
{
    n_workers = n_workers == 0 ? 1 : (n_workers > MAX_THREADS ? MAX_THREADS : n_workers);
    reps = reps == 0 ? 1 : (reps > MAX_REPS - 1 ? MAX_REPS - 1 : reps);
    n = n < 1 ? 1 : n;
    job *js = cm_calloc(n_workers, sizeof(job));
    cm_status st = js == NULL ? cm_error_oom(err) : CM_OK;
    size_t nn = (size_t)(n * n);
    /* small products repeat so that a round does a 512^3 product's work */
    int64_t per = n < 512 ? 512 / n : 1;
    uint32_t calls = (uint32_t)(per * per * per);
    for (uint32_t i = 0; st == CM_OK && i < n_workers; i++) {
        js[i].n = n;
        js[i].calls = calls;
        js[i].a = filled(nn);
        js[i].b = filled(nn);
        js[i].c = filled(nn);
        if (js[i].a == NULL || js[i].b == NULL || js[i].c == NULL) {
            st = cm_error_oom(err);
        }
    }
    double t[MAX_REPS];
    if (st == CM_OK) {
        ex_blas_set_threads(1);
        st = run_jobs(js, n_workers, reps + 1, t, err); /* round 0 warms up */
    }
    if (st == CM_OK) {
        /* Each worker does calls products per round; they share the cores. */
        *flops_out = 2.0 * (double)n * (double)n * (double)n * calls / median(t + 1, reps);
    }
    for (uint32_t i = 0; js != NULL && i < n_workers; i++) {
        cm_free(js[i].a);
        cm_free(js[i].b);
        cm_free(js[i].c);
    }
    cm_free(js);
    return st;
}

/* Median seconds of n_threads threads each copying its share of bytes at
 * once, or, with exp, each taking the f32 exp of its share through the
 * executor's kernel. */
static cm_status copy_rounds(size_t bytes, uint32_t n_threads, uint32_t reps, bool use_exp,
                             double *secs_out, cm_error *err)
{
    n_threads = n_threads == 0 ? 1 : (n_threads > MAX_THREADS ? MAX_THREADS : n_threads);
    reps = reps == 0 ? 1 : (reps > MAX_REPS - 1 ? MAX_REPS - 1 : reps);
    char *src = cm_alloc(bytes + 1u), *dst = cm_alloc(bytes + 1u);
    job *js = cm_calloc(n_threads, sizeof(job));
    if (src == NULL || dst == NULL || js == NULL) {
        cm_free(src);
        cm_free(dst);
        cm_free(js);
        return cm_error_oom(err);
    }
    memset(src, 1, bytes);
    for (size_t i = 0; use_exp && i < bytes / sizeof(float); i++) {
        /* softmax-like arguments: libm takes shortcuts near 0 */
        float v = -(float)(i % 97u) * 0.125f;
        memcpy(src + i * sizeof v, &v, sizeof v);
    }
    memset(dst, 2, bytes); /* fault every page in before timing */
    size_t share = (bytes / n_threads + 63u) & ~(size_t)63u;
    for (uint32_t i = 0; i < n_threads; i++) {
        size_t from = share * i < bytes ? share * i : bytes;
        size_t to = from + share < bytes ? from + share : bytes;
        js[i].src = src + from;
        js[i].dst = dst + from;
        js[i].len = to - from;
        js[i].use_exp = use_exp;
    }
    double t[MAX_REPS];
    cm_status st = run_jobs(js, n_threads, reps + 1, t, err);
    if (st == CM_OK) {
        *secs_out = median(t + 1, reps);
    }
    cm_free(src);
    cm_free(dst);
    cm_free(js);
    return st;
}

cm_status ex_calib_memcpy(size_t bytes, uint32_t n_threads, uint32_t reps, double *secs_out,
                          cm_error *err)
{
    return copy_rounds(bytes, n_threads, reps, false, secs_out, err);
}

cm_status ex_calib_exp_workers(size_t elems, uint32_t n_workers, uint32_t reps, double *rate_out,
                               cm_error *err)
{
    n_workers = n_workers == 0 ? 1 : (n_workers > MAX_THREADS ? MAX_THREADS : n_workers);
    elems = elems < 16 ? 16 : elems;
    double secs = 0;
    cm_status st =
        copy_rounds(elems * n_workers * sizeof(float), n_workers, reps, true, &secs, err);
    if (st == CM_OK) {
        *rate_out = secs > 0 ? (double)elems / secs : 0;
    }
    return st;
}

typedef struct bjob {
    pthread_barrier_t *bar;
    uint32_t rounds;
} bjob;

static void *barrier_thread(void *arg)
{
    bjob *j = arg;
    for (uint32_t r = 0; r < j->rounds; r++) {
        pthread_barrier_wait(j->bar);
    }
    return NULL;
}

cm_status ex_calib_barrier(uint32_t n_threads, uint32_t rounds, double *secs_out, cm_error *err)
{
    n_threads = n_threads < 2 ? 2 : (n_threads > MAX_THREADS ? MAX_THREADS : n_threads);
    rounds = rounds == 0 ? 1 : rounds;
    pthread_barrier_t bar;
    if (pthread_barrier_init(&bar, NULL, n_threads) != 0) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory (barrier)");
    }
    bjob j = {&bar, rounds};
    /* this thread is the last of the barrier's n_threads */
    ex_threads *t = NULL;
    cm_status st = ex_threads_start(n_threads - 1u, barrier_thread, &j, 0, NULL, 0, &t, err);
    if (st == CM_OK) {
        double t0 = cm_now();
        barrier_thread(&j);
        *secs_out = (cm_now() - t0) / rounds;
    }
    ex_threads_join(t);
    pthread_barrier_destroy(&bar);
    return st;
}

/* ---- the profile ------------------------------------------------------------------ */

/* Measures into c; quick takes one round of each (a fraction of a second,
 * for calibrating beside each measured run) instead of the medians of
 * several. */
static cm_status measure(uint32_t n_devices, bool quick, ex_calib *c, ex_calib_progress *progress,
                         void *ctx, cm_error *err)
{
#define CALIB_STEP(k, name)                                                                        \
    do {                                                                                           \
        if (progress != NULL) {                                                                    \
            progress(ctx, name, k, EX_CALIB_STEPS);                                                \
        }                                                                                          \
    } while (0)
    memset(c, 0, sizeof *c);
    c->n_devices = n_devices == 0 ? 8 : n_devices;
    double f = 0, secs1 = 0, secsn = 0;
    const size_t bytes = (size_t)64 << 20;
    uint32_t reps = quick ? 1 : 3;
    CALIB_STEP(1, "sgemm on every worker, 32 to 1024");
    cm_status st = CM_OK;
    for (uint32_t i = 0; st == CM_OK && i < EX_CALIB_GEMM; i++) {
        int64_t n = (int64_t)32 << i;
        st = ex_calib_sgemm_workers(n, c->n_devices, reps, &f, err);
        c->gemm_n[i] = (double)n;
        c->gemm_flops[i] = f;
        c->n_gemm = i + 1;
    }
    if (st == CM_OK) {
        c->f32_flops = c->gemm_flops[EX_CALIB_GEMM - 1];
        c->f64_flops =
            c->f32_flops / 2; /* dgemm runs at about half the sgemm rate (MACHINE-NOTES.md) */
        CALIB_STEP(2, "exp on every worker");
        st = ex_calib_exp_workers((size_t)1 << 18, c->n_devices, quick ? 2 : 5, &c->transcendentals,
                                  err);
    }
    if (st == CM_OK) {
        CALIB_STEP(3, "memcpy on one thread");
        st = ex_calib_memcpy(bytes, 1, quick ? 2 : 5, &secs1, err);
    }
    if (st == CM_OK) {
        c->mem_bandwidth = (double)bytes / secs1;
        CALIB_STEP(4, "memcpy on every worker");
        st = ex_calib_memcpy(bytes, c->n_devices, quick ? 2 : 5, &secsn, err);
    }
    if (st == CM_OK) {
        /* All workers copying at once share the memory system. */
        c->link_bandwidth = (double)bytes / secsn / (double)c->n_devices;
        /* The roofline charges an op its operand + result bytes at
         * memory.bandwidth per device; the workers share the memory system
         * as they share the cores, and a copy of B bytes is 2 B of such
         * traffic. One thread's memcpy rate (mem_bandwidth) made
         * memory-bound ops N/2 times too cheap next to the sgemm rate, which
         * is already the shared one. */
        c->mem_traffic = 2.0 * c->link_bandwidth;
        CALIB_STEP(5, "barrier rounds");
        st = ex_calib_barrier(c->n_devices, quick ? 300 : 2000, &c->link_latency, err);
    }
    if (st == CM_OK) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        c->mem_bytes = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    }
    return st;
#undef CALIB_STEP
}

cm_status ex_calib_measure(uint32_t n_devices, ex_calib *c, ex_calib_progress *progress, void *ctx,
                           cm_error *err)
{
    return measure(n_devices, false, c, progress, ctx, err);
}

void ex_calib_profile_json(const ex_calib *c, const char *name, cm_buf *out)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cm_buf_puts(out, "{\n \"format\": \"shardplan.device-profile/v1\",\n \"name\": ");
    cm_json_put_cstr(out, name);
    cm_buf_printf(
        out,
        ",\n"
        " \"description\": \"This machine's CPU device workers as the executor runs "
        "them: %u workers on %ld cores, one OpenBLAS thread each.\",\n"
        " \"source\": \"measured by shardplan calibrate: sgemm 32 to 1024 on %u concurrent "
        "workers, exp through the executor's kernel, memcpy of 64 MiB on 1 and on %u threads, "
        "pthread barrier rounds\",\n"
        " \"calibrated\": true,\n",
        c->n_devices, cores, c->n_devices, c->n_devices);
    cm_buf_printf(out, " \"peak_flops\": {\n  \"f64\": %.6g,\n  \"f32\": %.6g\n },\n", c->f64_flops,
                  c->f32_flops);
    if (c->n_gemm > 0) {
        cm_buf_puts(out, " \"gemm\": [");
        for (uint32_t i = 0; i < c->n_gemm; i++) {
            cm_buf_printf(out, "%s{\"n\": %.0f, \"flops\": %.6g}", i > 0 ? ", " : "", c->gemm_n[i],
                          c->gemm_flops[i]);
        }
        cm_buf_puts(out, "],\n");
    }
    if (c->transcendentals > 0) {
        cm_buf_printf(out, " \"transcendentals\": %.6g,\n", c->transcendentals);
    }
    cm_buf_printf(out, " \"memory\": {\n");
    if (c->mem_bytes > 0) {
        cm_buf_printf(out, "  \"bytes\": %.0f,\n", c->mem_bytes);
    }
    cm_buf_printf(out,
                  "  \"shared\": true,\n  \"bandwidth\": %.4g,\n"
                  "  \"notes\": \"per worker: bytes read + written per second while %u "
                  "threads copy 64 MiB together (one thread alone copies %.3g bytes/s)\"\n },\n",
                  c->mem_traffic, c->n_devices, c->mem_bandwidth);
    cm_buf_printf(out,
                  " \"links\": {\n  \"default\": {\n   \"bandwidth\": %.4g,\n"
                  "   \"latency\": %.4g,\n"
                  "   \"notes\": \"shared memory: %u threads copying 64 MiB together, per "
                  "thread; latency is one barrier round\"\n  }\n },\n",
                  c->link_bandwidth, c->link_latency, c->n_devices);
    cm_buf_printf(out, " \"overlap\": 0.0,\n \"notes\": \"f64 is estimated as half the f32 "
                       "rate; workers beyond the core count share the cores, so the "
                       "per-worker rates already include that sharing\"\n}\n");
}

/* ---- ranking the benchmark suite ------------------------------------------------- */

/* The step of m predicted under prof, into *out. */
static cm_status predict(sp_module *m, const sp_profile *prof, double *out, cm_error *err)
{
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    co.profile = prof;
    sp_cost *c = NULL;
    cm_status st = sp_cost_compute(m, &co, &c, err);
    if (st == CM_OK) {
        *out = sp_cost_get_summary(c)->step_s;
        sp_cost_destroy(c);
    }
    return st;
}

/* A profile measured now, quickly, for n workers, into *prof. */
static cm_status calibrate_now(uint32_t n, sp_profile *prof, cm_error *err)
{
    ex_calib c;
    cm_status st = measure(n, true, &c, NULL, NULL, err);
    if (st != CM_OK) {
        return st;
    }
    cm_buf b;
    cm_buf_init(&b);
    ex_calib_profile_json(&c, "cpu-calibrated", &b);
    st = b.oom ? cm_error_oom(err) : sp_profile_decode(b.data, b.len, prof, err);
    cm_buf_fini(&b);
    return st;
}

/* CPU seconds all processes have spent busy (user, nice, system, irq,
 * softirq, steal of /proc/stat's first line), or -1 when unreadable. */
static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    int n = f != NULL ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                               &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
                      : 0;
    if (f != NULL) {
        fclose(f);
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (n != 8 || hz <= 0) {
        return -1;
    }
    /* v[3] idle and v[4] iowait are not busy */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

/* CPU seconds this process has spent, all its threads. */
static double own_cpu_s(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0
               ? (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9
               : 0;
}

/* One plan of the suite: its step predicted and measured on 8 workers,
 * iters rounds after a warm-up. Without prof each round calibrates just
 * before its run and predicts under that profile, so that both see the same
 * load; the medians of the rounds are kept. */
static cm_status rank_plan(const sp_example_opts *eo, const sp_profile *prof, uint32_t iters,
                           ex_rank_plan *pl, cm_error *err)
{
    cm_buf doc;
    cm_buf_init(&doc);
    cm_status st = sp_example_graph_json(eo, &doc, err);
    if (st == CM_OK && doc.oom) {
        st = cm_error_oom(err);
    }
    sp_input in;
    memset(&in, 0, sizeof in);
    if (st == CM_OK) {
        st = sp_input_read(doc.data, doc.len, NULL, &in, err);
    }
    cm_buf_fini(&doc);
    if (st == CM_OK) {
        st = ex_partition(in.m, err);
    }
    ex_tensor *args = NULL;
    uint32_t n_args = 0;
    double meas[MAX_REPS], pred[MAX_REPS];
    iters = iters == 0 ? 1 : (iters > MAX_REPS - 1 ? MAX_REPS - 1 : iters);
    if (st == CM_OK) {
        st = ex_args_make(in.m, 1, &args, &n_args, err);
    }
    /* Round 0 warms up (OpenBLAS, the allocator); each round's first run
     * faults its buffers in, its second is the one timed. Without prof a
     * calibration comes before every run and after the last, and a run is
     * predicted by the mean of the predictions under the two that bracket
     * it. */
    double before = 0, busy0 = machine_busy_s(), own0 = own_cpu_s(), t0 = cm_now();
    for (uint32_t r = 0; st == CM_OK && r <= iters + (prof == NULL); r++) {
        sp_profile now;
        double p_now = 0;
        if (prof == NULL) {
            st = calibrate_now(8, &now, err);
            if (st == CM_OK) {
                st = predict(in.m, &now, &p_now, err);
            }
            if (st == CM_OK && r > 1) {
                pred[r - 2] = (before + p_now) / 2;
            }
            before = p_now;
        } else if (r > 0) {
            st = predict(in.m, prof, &pred[r - 1], err);
        }
        if (r > iters) {
            break; /* the last calibration closes the last run */
        }
        double t[2];
        ex_tensor *res = NULL;
        uint32_t n_res = 0;
        if (st == CM_OK) {
            ex_exec_opts o = {.n_devices = 8, .iters = 2, .iter_s = t};
            st = ex_exec_run(in.m, &o, args, n_args, &res, &n_res, err);
        }
        ex_tensors_free(res, n_res);
        if (st == CM_OK && r > 0) {
            meas[r - 1] = t[1];
        }
    }
    if (st == CM_OK) {
        pl->predicted_s = median(pred, iters);
        pl->measured_s = median(meas, iters);
        double busy1 = machine_busy_s(), wall = cm_now() - t0;
        double others = busy0 >= 0 && busy1 >= 0 && wall > 0
                            ? (busy1 - busy0 - (own_cpu_s() - own0)) / wall
                            : -1;
        pl->others_cores = others < 0 && busy0 >= 0 && busy1 >= 0 ? 0 : others; /* tick rounding */
    }
    ex_tensors_free(args, n_args);
    sp_input_fini(&in);
    return st;
}

cm_status ex_calib_rank(const sp_profile *prof, uint32_t iters, ex_rank *out, cm_error *err)
{
    static const struct {
        const char *name;
        sp_example_strategy s;
    } strategies[] = {{"dp", SP_EXAMPLE_DP},
                      {"fsdp", SP_EXAMPLE_FSDP},
                      {"tp", SP_EXAMPLE_TP},
                      {"dp+tp", SP_EXAMPLE_DP_TP}};
    const uint32_t n_s = sizeof strategies / sizeof strategies[0];
    memset(out, 0, sizeof *out);
    for (uint32_t model = 0; model < 2; model++) {
        for (uint32_t i = 0; i < n_s && out->n < EX_RANK_MAX; i++) {
            sp_example_opts eo;
            sp_example_opts_init(&eo); /* mesh data=2 x model=4 */
            eo.train = true;
            eo.strategy = strategies[i].s;
            eo.layers = 1;
            if (model == 0) {
                eo.model = SP_EXAMPLE_MLP;
                eo.batch = 512;
                eo.d_model = 1024;
            } else {
                eo.model = SP_EXAMPLE_TRANSFORMER;
                eo.batch = 8;
                eo.seq = 128;
                eo.d_model = 256;
            }
            ex_rank_plan *pl = &out->plans[out->n++];
            snprintf(pl->label, sizeof pl->label, "%s train %s", model == 0 ? "MLP" : "transformer",
                     strategies[i].name);
            pl->model = model;
            cm_status st = rank_plan(&eo, prof, iters, pl, err);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    ex_calib_rank_score(out);
    return CM_OK;
}

/* a and b within EX_RANK_NOISE of each other. */
static bool near(double a, double b)
{
    double lo = a < b ? a : b, hi = a < b ? b : a;
    return hi <= lo * (1 + EX_RANK_NOISE);
}

void ex_calib_rank_score(ex_rank *out)
{
    /* Kendall tau over the pairs of plans of the same model (a tie on
     * either side counts as neither concordant nor discordant). */
    uint32_t pairs = 0;
    int conc = 0;
    out->discordant = 0;
    out->close = 0;
    for (uint32_t i = 0; i < out->n; i++) {
        for (uint32_t j = i + 1; j < out->n; j++) {
            const ex_rank_plan *a = &out->plans[i], *b = &out->plans[j];
            if (a->model != b->model) {
                continue;
            }
            pairs++;
            double dp = a->predicted_s - b->predicted_s, dm = a->measured_s - b->measured_s;
            if (dp * dm > 0) {
                conc++;
            } else if (dp * dm < 0) {
                conc--;
                out->discordant++;
                /* Within the spread when measured, or a tie as the cost
                 * model sees it: no order to get wrong. */
                out->close +=
                    near(a->measured_s, b->measured_s) || near(a->predicted_s, b->predicted_s);
            }
        }
    }
    out->tau = pairs > 0 ? (double)conc / (double)pairs : 1;
    out->pass = out->close == out->discordant;
    out->within = 0;
    out->busy_off = 0;
    for (uint32_t i = 0; i < out->n; i++) {
        const ex_rank_plan *pl = &out->plans[i];
        double q = pl->measured_s > 0 ? pl->predicted_s / pl->measured_s : 0;
        bool ok = q >= 1 - EX_CALIB_TOL && q <= 1 + EX_CALIB_TOL;
        out->within += ok;
        out->busy_off += !ok && pl->others_cores > EX_CALIB_BUSY;
    }
    out->accurate = out->within == out->n;
}

/* Labels of model's plans, in ascending order of predicted or measured
 * time, into buf. */
static void rank_order(const ex_rank *r, uint32_t model, bool measured, char *buf, size_t len)
{
    uint32_t idx[EX_RANK_MAX], n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->plans[i].model == model) {
            idx[n++] = i;
        }
    }
    for (uint32_t i = 1; i < n; i++) { /* insertion sort: at most EX_RANK_MAX */
        for (uint32_t j = i; j > 0; j--) {
            const ex_rank_plan *a = &r->plans[idx[j - 1]], *b = &r->plans[idx[j]];
            double x = measured ? a->measured_s : a->predicted_s;
            double y = measured ? b->measured_s : b->predicted_s;
            if (x <= y) {
                break;
            }
            uint32_t t = idx[j - 1];
            idx[j - 1] = idx[j];
            idx[j] = t;
        }
    }
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && at < len; i++) {
        const char *lab = strrchr(r->plans[idx[i]].label, ' ');
        int w =
            snprintf(buf + at, len - at, "%s%s", i > 0 ? " < " : "", lab != NULL ? lab + 1 : "");
        at += w > 0 ? (size_t)w : 0;
    }
}

void ex_calib_rank_print(const ex_rank *r, FILE *out)
{
    fprintf(out, "the suite (8 devices, data=2 x model=4), predicted against measured:\n");
    fprintf(out, "  %-24s %12s %12s %7s %8s\n", "plan", "predicted ms", "measured ms", "ratio",
            "others");
    for (uint32_t i = 0; i < r->n; i++) {
        const ex_rank_plan *pl = &r->plans[i];
        double q = pl->measured_s > 0 ? pl->predicted_s / pl->measured_s : 0;
        bool ok = q >= 1 - EX_CALIB_TOL && q <= 1 + EX_CALIB_TOL;
        char others[16] = "?";
        if (pl->others_cores >= 0) {
            snprintf(others, sizeof others, "%.2f", pl->others_cores);
        }
        fprintf(out, "  %-24s %12.2f %12.2f %7.3f %8s%s\n", pl->label, pl->predicted_s * 1e3,
                pl->measured_s * 1e3, q, others, ok ? "" : "  (off by more than 15%)");
    }
    fprintf(out,
            "  (others: cores other processes took while the plan was measured; over %.2f the "
            "machine is too busy to judge by)\n",
            EX_CALIB_BUSY);
    fprintf(out, "  %u of %u plans predicted within %.0f%% of their measured step: %s", r->within,
            r->n, EX_CALIB_TOL * 100, r->accurate ? "PASS" : "FAIL");
    if (!r->accurate && r->busy_off > 0) {
        fprintf(out,
                " (%u of the %u off ran while other processes took over %.2f cores: rerun "
                "on a quieter machine)",
                r->busy_off, r->n - r->within, EX_CALIB_BUSY);
    }
    fputc('\n', out);
    for (uint32_t model = 0; model < 2; model++) {
        char p[160], m[160];
        rank_order(r, model, false, p, sizeof p);
        rank_order(r, model, true, m, sizeof m);
        fprintf(out, "  %s order predicted: %s; measured: %s\n", model == 0 ? "MLP" : "transformer",
                p, m);
    }
    fprintf(out,
            "  Kendall tau %.2f; %u pair(s) ordered differently, %u of them within %.0f%% "
            "(measured: run-to-run spread, or predicted: a tie): %s\n",
            r->tau, r->discordant, r->close, EX_RANK_NOISE * 100, r->pass ? "PASS" : "FAIL");
}
