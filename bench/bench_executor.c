/* SPDX-License-Identifier: Apache-2.0
 * The executor against this machine's own limits, measured in the same run
 * (MACHINE-NOTES.md: the machine drifts, so baselines are never constants):
 *   1. the Flax MLP training step (batch 2048, d_model 2048, one layer) and
 *      a small transformer training step, each partitioned on 8 devices
 *      (data=2 x model=4) and unpartitioned on 1 device: achieved FLOP/s
 *      (cost-model FLOPs) against a 2-thread OpenBLAS sgemm; target 70%;
 *   2. all-reduce, all-gather, reduce-scatter and all-to-all of 64 MiB over
 *      8 workers: algbw and busbw as nccl-tests define them, and the time
 *      against a 2-thread memcpy of the bytes the collective must at least
 *      read and write (at the best memcpy rate seen in the run); target
 *      within 1.3x;
 *   3. `shardplan calibrate`'s profile, read back by the profile reader.
 * Usage: bench_executor [--skip-models [COLLECTIVE] | --only-models] */
#define _GNU_SOURCE /* MADV_HUGEPAGE, pthread affinity (Linux) */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "ex_calib.h"
#include "ex_exec.h"
#include "sp_cost.h"
#include "sp_example.h"
#include "sp_ir.h"
#include "sp_profile_json.h"
#include "sp_mlir.h"
#include "sp_input.h"

#define FLOP_TARGET 0.70
#define COLL_TARGET 1.3
#define COLL_ITERS  8 /* the first faults its buffers in; the other 7 are paired with floors */
/* The first run warms up (fresh buffers, OpenBLAS pools) and is printed
 * apart; the result is the median of the other 5. The second run still
 * allocates the buffers a reshape took over in the first (their spares
 * settle from the third run on), so with 3 runs after the first the median
 * could land on it. */
#define MODEL_ITERS 6
#define MIB         ((size_t)1 << 20)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const cm_error *err)
{
    fprintf(stderr, "bench_executor: %s: %s %s %s\n", what, cm_status_name(err->code), err->path,
            err->msg);
    exit(1);
}

/* ---- 1. models ----------------------------------------------------------------- */

/* The sgemm 2048 rate right now: the better of the 2-thread and the
 * 1-thread median (on a busy machine the 2-thread one can come out lower). */
static double sgemm_baseline(void)
{
    cm_error err;
    cm_error_clear(&err);
    double s2 = 0, s1 = 0;
    if (ex_calib_sgemm(2048, 2, 3, &s2, &err) != CM_OK ||
        ex_calib_sgemm(2048, 1, 3, &s1, &err) != CM_OK) {
        die("sgemm", &err);
    }
    return s2 > s1 ? s2 : s1;
}

/* Each run is compared with a baseline measured right before it: the
 * machine drifts over the minutes a model takes. */
static void bench_model(const char *label, const sp_example_opts *eo)
{
    cm_error err;
    cm_error_clear(&err);
    cm_buf doc;
    cm_buf_init(&doc);
    if (sp_example_graph_json(eo, &doc, &err) != CM_OK) {
        die(label, &err);
    }
    char path[] = "/tmp/bench_executor_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, doc.data, doc.len) != (ssize_t)doc.len || close(fd) != 0) {
        fprintf(stderr, "bench_executor: cannot write %s\n", path);
        exit(1);
    }
    cm_buf_fini(&doc);
    sp_input part, ref;
    if (sp_input_load(path, NULL, &part, &err) != CM_OK ||
        sp_input_load(path, NULL, &ref, &err) != CM_OK || ex_partition(part.m, &err) != CM_OK) {
        die(label, &err);
    }
    unlink(path);
    ex_tensor *args = NULL, *want = NULL, *got = NULL;
    uint32_t n_args = 0, n_want = 0, n_got = 0;
    double t1s[MODEL_ITERS], t8s[MODEL_ITERS];
    if (ex_args_make(ref.m, 1, &args, &n_args, &err) != CM_OK) {
        die(label, &err);
    }
    ex_exec_opts o1 = {
        .n_devices = 1, .replicated = true, .iters = MODEL_ITERS, .iter_s = t1s};
    ex_exec_opts o8 = {.n_devices = 8, .iters = MODEL_ITERS, .iter_s = t8s};
    double base[2]; /* 8 devices, 1 device */
    base[1] = sgemm_baseline();
    if (ex_exec_run(ref.m, &o1, args, n_args, &want, &n_want, &err) != CM_OK) {
        die(label, &err);
    }
    base[0] = sgemm_baseline();
    if (ex_exec_run(part.m, &o8, args, n_args, &got, &n_got, &err) != CM_OK) {
        die(label, &err);
    }
    ex_mismatch mm;
    ex_tensors_compare(want, got, n_want < n_got ? n_want : n_got, ex_module_contraction(ref.m),
                       &mm);
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    sp_cost *c = NULL;
    if (sp_cost_compute(part.m, &co, &c, &err) != CM_OK) {
        die(label, &err);
    }
    double flops = sp_cost_get_summary(c)->flops * 8.0;
    sp_cost_destroy(c);
    printf("%-34s %.3g FLOP (cost model), numerics %s\n", label, flops,
           mm.match && n_want == n_got ? "match" : "MISMATCH");
    /* steady state, as the sgemm baseline (which is warmed up too) */
    double first[2] = {t8s[0], t1s[0]};
    qsort(t8s + 1, MODEL_ITERS - 1, sizeof(double), cmp_double);
    qsort(t1s + 1, MODEL_ITERS - 1, sizeof(double), cmp_double);
    double ts[2] = {t8s[1 + (MODEL_ITERS - 1) / 2], t1s[1 + (MODEL_ITERS - 1) / 2]};
    const char *names[2] = {"8 devices (data=2 x model=4)", "1 device (unpartitioned)"};
    for (int i = 0; i < 2; i++) {
        double rate = flops / ts[i], frac = rate / base[i];
        printf("  %-30s %9.1f ms  %6.2f GFLOP/s  %5.1f%% of sgemm %.1f GFLOP/s (%.1f ms)  "
               "target 70%%: %s  (first run %.1f ms)\n",
               names[i], ts[i] * 1e3, rate * 1e-9, frac * 100, base[i] * 1e-9,
               flops / base[i] * 1e3, frac >= FLOP_TARGET ? "target met" : "NOT MET",
               first[i] * 1e3);
    }
    ex_tensors_free(args, n_args);
    ex_tensors_free(want, n_want);
    ex_tensors_free(got, n_got);
    sp_input_fini(&part);
    sp_input_fini(&ref);
}

/* ---- 2. collectives ----------------------------------------------------------- */

typedef struct coll {
    const char *name;
    const char *mlir;   /* module on mesh x=8 */
    int64_t rows;       /* global argument: rows x 4096 f32 */
    double bus;         /* busbw factor for n = 8 */
    double floor_bytes; /* memcpy bytes with the same reads + writes, in units of S */
} coll;

#define CMESH "sdy.mesh @mesh = <[\"x\"=8]>\n"
#define CARG(rows, sh)                                                                             \
    "func.func @main(%arg0: tensor<" rows "x4096xf32> {sdy.sharding = #sdy.sharding<@mesh, " sh    \
    ">}) -> tensor<" rows "x4096xf32> {\n"

/* S = 64 MiB: the per-rank buffer of nccl-tests (all-reduce in and out,
 * all-gather out, reduce-scatter in, all-to-all in and out). The floor is a
 * memcpy moving as many bytes as the collective must at least read plus
 * write, over 2: all-reduce reads 8 S and writes 8 S (8 S copied);
 * all-gather reads S and writes 8 S (4.5 S); reduce-scatter reads 8 S and
 * writes S (4.5 S); all-to-all reads and writes 8 S (8 S). */
static const coll colls[] = {
    {"all-reduce",
     CMESH CARG("4096", "[{}, {}]") "  %0 = sdy.all_reduce {\"x\"} %arg0 out_sharding=<@mesh, "
                                    "[{}, {}]> : tensor<4096x4096xf32>\n"
                                    "  return %0 : tensor<4096x4096xf32>\n}\n",
     4096, 2.0 * 7 / 8, 8},
    {"all-gather",
     CMESH CARG("4096", "[{\"x\"}, {}]") "  %0 = sdy.all_gather [{\"x\"}, {}] %arg0 "
                                         "out_sharding=<@mesh, [{}, {}]> : "
                                         "tensor<4096x4096xf32>\n"
                                         "  return %0 : tensor<4096x4096xf32>\n}\n",
     4096, 7.0 / 8, 4.5},
    {"reduce-scatter",
     CMESH CARG("4096", "[{}, {}]") "  %0 = sdy.reduce_scatter [{\"x\"}, {}] %arg0 "
                                    "out_sharding=<@mesh, [{\"x\"}, {}]> : "
                                    "tensor<4096x4096xf32>\n"
                                    "  return %0 : tensor<4096x4096xf32>\n}\n",
     4096, 7.0 / 8, 4.5},
    {"all-to-all",
     CMESH CARG("32768", "[{\"x\"}, {}]") "  %0 = sdy.all_to_all [{\"x\"}: 0->1] %arg0 "
                                          "out_sharding=<@mesh, [{}, {\"x\"}]> : "
                                          "tensor<32768x4096xf32>\n"
                                          "  return %0 : tensor<32768x4096xf32>\n}\n",
     32768, 7.0 / 8, 8},
};

/* The floor of a collective: a bare memcpy of floor_bytes * S on 2 threads
 * (each copies one contiguous half, glibc memcpy), between the same two
 * buffers every time; the source holds distinct words, so no page of it can
 * be shared or deduplicated. It runs between two runs of the collective
 * (ex_exec_run_paced), so each run is compared with a floor measured just
 * before it: on this VM the copy rate of the same buffers jumps by 2x within
 * a fraction of a second (docs/executor.md), and a floor taken apart from
 * the run would compare two different machines. */
typedef struct floor_run {
    char *src, *dst;
    size_t len;
    uint32_t n;                /* floors measured */
    double t[COLL_ITERS];      /* seconds of each */
} floor_run;

typedef struct half_copy {
    char *dst;
    const char *src;
    size_t len;
} half_copy;

static void *half_main(void *arg)
{
    half_copy *h = arg;
    memcpy(h->dst, h->src, h->len);
    return NULL;
}

/* The CPUs the bench may use, read at start, before any worker is pinned. */
static cpu_set_t all_cpus;

/* The floor runs between two runs on worker 0's thread, which the default
 * affinity pins to one CPU when the 8 workers outnumber the cores: its two
 * copies get every CPU for the time (a thread it starts would inherit the
 * pin, and both halves would share one core). */
static void floor_measure(void *ctx)
{
    floor_run *f = ctx;
    size_t half = (f->len / 2 + 63u) & ~(size_t)63u;
    half_copy h[2] = {{f->dst, f->src, half}, {f->dst + half, f->src + half, f->len - half}};
    cpu_set_t mine;
    CPU_ZERO(&mine);
    bool moved = pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 &&
                 pthread_setaffinity_np(pthread_self(), sizeof all_cpus, &all_cpus) == 0;
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0 ||
        pthread_attr_setaffinity_np(&attr, sizeof all_cpus, &all_cpus) != 0) {
        fprintf(stderr, "bench_executor: cannot set a thread's CPUs\n");
        exit(1);
    }
    double t0 = cm_now();
    if (pthread_create(&th, &attr, half_main, &h[1]) != 0) {
        fprintf(stderr, "bench_executor: cannot start a thread\n");
        exit(1);
    }
    half_main(&h[0]);
    pthread_join(th, NULL);
    if (f->n < COLL_ITERS) {
        f->t[f->n++] = cm_now() - t0;
    }
    pthread_attr_destroy(&attr);
    if (moved) {
        (void)pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    }
}

static double median_of(double *t, uint32_t n)
{
    qsort(t, n, sizeof t[0], cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* The 1-minute load average, or -1. */
static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1) {
            l = -1;
        }
        fclose(f);
    }
    return l;
}

/* A buffer for the floor's copy, on 2 MiB pages as the executor's own
 * buffers of 4 MiB or more are (ex_mem_alloc): with 4 KiB pages the same
 * memcpy runs up to 1.6x slower here, and the floor would flatter the
 * collective. */
static char *floor_buffer(size_t len)
{
    const size_t huge = 2 * MIB;
    size_t n = (len + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, n) != 0) {
        return NULL;
    }
#if defined(MADV_HUGEPAGE)
    (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

static void bench_collective(const coll *cl)
{
    const size_t s = 64 * MIB;
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    if (sp_mlir_read(cl->mlir, strlen(cl->mlir), 0, &m, &err) != CM_OK) {
        die(cl->name, &err);
    }
    ex_tensor arg;
    memset(&arg, 0, sizeof arg);
    arg.elem = SP_ELEM_F32;
    arg.rank = 2;
    arg.dims[0] = cl->rows;
    arg.dims[1] = 4096;
    arg.n = (size_t)cl->rows * 4096u;
    arg.data = cm_calloc(arg.n, sizeof(float));
    floor_run f;
    memset(&f, 0, sizeof f);
    f.len = (size_t)(cl->floor_bytes * (double)s);
    f.src = floor_buffer(f.len);
    f.dst = floor_buffer(f.len);
    if (arg.data == NULL || f.src == NULL || f.dst == NULL) {
        fprintf(stderr, "bench_executor: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < arg.n; i += 1021) {
        ((float *)arg.data)[i] = (float)(i % 7u);
    }
    for (size_t i = 0; i + 8 <= f.len; i += 8) {
        uint64_t w = (uint64_t)i * 0x9E3779B97F4A7C15u;
        memcpy(f.src + i, &w, 8);
    }
    memset(f.dst, 1, f.len);
    floor_measure(&f); /* warm-up: first touch of the copy's pages */
    f.n = 0;
    double t[COLL_ITERS];
    ex_exec_opts o = {.n_devices = 8, .iters = COLL_ITERS, .iter_s = t, .partial_inputs = true};
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    if (ex_exec_run_paced(m, &o, floor_measure, &f, &arg, 1, &res, &n_res, &err) != CM_OK) {
        die(cl->name, &err);
    }
    ex_tensors_free(res, n_res);
    cm_free(arg.data);
    free(f.src);
    free(f.dst);
    sp_module_destroy(m);
    /* Run i (from 1: run 0 faults its buffers in) against floor i - 1,
     * measured right before it. */
    double ratio[COLL_ITERS], runs[COLL_ITERS], floors[COLL_ITERS];
    uint32_t n = 0;
    for (uint32_t i = 1; i < COLL_ITERS && i - 1 < f.n; i++, n++) {
        ratio[n] = t[i] / f.t[i - 1];
        runs[n] = t[i];
        floors[n] = f.t[i - 1];
    }
    double r = median_of(ratio, n), secs = median_of(runs, n), fl = median_of(floors, n);
    double best = floors[0]; /* sorted by median_of */
    double algbw = (double)s / secs;
    /* Other jobs slow the 2-thread floor more than the 8 workers (the
     * scheduler shares the cores per thread): no verdict when the machine
     * is busier than its cores. */
    double load = load_average();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char verdict[64];
    if (load < 0 || load > (double)cores + 0.5) {
        snprintf(verdict, sizeof verdict, "not judged (load %.1f on %ld cores)", load, cores);
    } else {
        snprintf(verdict, sizeof verdict, "%s", r <= COLL_TARGET ? "target met" : "NOT MET");
    }
    printf("  %-15s %7.2f ms  algbw %6.2f GB/s  busbw %6.2f GB/s  memcpy floor %4.0f MiB %7.2f ms "
           "(%5.2f GB/s)  %5.2fx (%.2f-%.2fx; %.2fx the best floor)  target 1.3x: %s  (first "
           "run %.1f ms)\n",
           cl->name, secs * 1e3, algbw * 1e-9, algbw * cl->bus * 1e-9, (double)f.len / (double)MIB,
           fl * 1e3, (double)f.len / fl * 1e-9, r, ratio[0], ratio[n - 1], secs / best, verdict,
           t[0] * 1e3);
}

/* ---- 3. calibration ------------------------------------------------------------ */

static void bench_calibrate(void)
{
    cm_error err;
    cm_error_clear(&err);
    ex_calib c;
    if (ex_calib_measure(8, &c, NULL, NULL, &err) != CM_OK) {
        die("calibrate", &err);
    }
    cm_buf b;
    cm_buf_init(&b);
    ex_calib_profile_json(&c, "cpu-calibrated", &b);
    sp_profile p;
    cm_status st = b.oom ? CM_ENOMEM : sp_profile_decode(b.data, b.len, &p, &err);
    printf("calibrate (8 workers): f32 %.1f GFLOP/s per worker, memcpy %.2f GB/s (1 thread), "
           "link %.2f GB/s per worker, barrier %.1f us; profile reads back: %s\n",
           c.f32_flops * 1e-9, c.mem_bandwidth * 1e-9, c.link_bandwidth * 1e-9,
           c.link_latency * 1e6, st == CM_OK ? "ok" : err.msg);
    cm_buf_fini(&b);
    double back = st == CM_OK ? p.peak_flops[SP_COST_F32] : 0;
    if (st != CM_OK || back < c.f32_flops * 0.999 || back > c.f32_flops * 1.001) {
        if (st == CM_OK) {
            fprintf(stderr, "bench_executor: profile f32 rate read back as %g, wrote %g\n",
                    p.peak_flops[SP_COST_F32], c.f32_flops);
        }
        exit(1);
    }
    /* Does the cost model rank the suite's plans as they run, and predict
     * each within 15%, calibrated beside every run? */
    ex_rank r;
    if (ex_calib_rank(NULL, 5, &r, &err) != CM_OK) {
        die("ranking", &err);
    }
    ex_calib_rank_print(&r, stdout);
}

int main(int argc, char **argv)
{
    (void)cm_tune_malloc(); /* as `shardplan run` and `exec-worker` run (server/srv_main.c) */
    CPU_ZERO(&all_cpus);
    if (sched_getaffinity(0, sizeof all_cpus, &all_cpus) != 0) {
        fprintf(stderr, "bench_executor: cannot read this process's CPUs\n");
        return 1;
    }
    bool models = !(argc > 1 && strcmp(argv[1], "--skip-models") == 0);
    const char *only = argc > 2 ? argv[2] : NULL; /* --skip-models NAME: one collective */
    bool only_models = argc > 1 && strcmp(argv[1], "--only-models") == 0;
    double t0 = cm_now();
    cm_error err;
    cm_error_clear(&err);
    double sgemm2 = 0, sgemm1 = 0;
    if (ex_calib_sgemm(2048, 2, 5, &sgemm2, &err) != CM_OK ||
        ex_calib_sgemm(2048, 1, 3, &sgemm1, &err) != CM_OK) {
        die("sgemm", &err);
    }
    /* On a busy machine the 2-thread median can come out below one thread's;
     * never compare against less than the better of the two. */
    double base = sgemm2 > sgemm1 ? sgemm2 : sgemm1;
    printf("baseline sgemm 2048 at start (median): 2 threads %.1f GFLOP/s, 1 thread %.1f "
           "GFLOP/s, better %.1f GFLOP/s (each model run is compared with the better of the two "
           "measured right before it)\n",
           sgemm2 * 1e-9, sgemm1 * 1e-9, base * 1e-9);
    if (models) {
        sp_example_opts eo;
        sp_example_opts_init(&eo);
        eo.model = SP_EXAMPLE_MLP;
        eo.train = true;
        eo.batch = 2048;
        eo.d_model = 2048;
        eo.layers = 1;
        bench_model("MLP train, batch 2048, d 2048, 1 layer", &eo);
        sp_example_opts_init(&eo);
        eo.model = SP_EXAMPLE_TRANSFORMER;
        eo.train = true;
        eo.batch = 8;
        eo.seq = 128;
        eo.d_model = 512;
        eo.layers = 1;
        bench_model("transformer train, b 8 s 128 d 512", &eo);
    }
    if (only_models) {
        printf("total %.1f s\n", cm_now() - t0);
        return 0;
    }
    printf("collectives, 64 MiB per rank (nccl-tests size), 8 workers, %d runs after a first "
           "one, each against a 2-thread memcpy floor measured right before it; median (and "
           "range) of the ratios:\n",
           COLL_ITERS - 1);
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++) {
        if (only == NULL || strcmp(only, colls[i].name) == 0) {
            bench_collective(&colls[i]);
        }
    }
    bench_calibrate();
    printf("total %.1f s\n", cm_now() - t0);
    return 0;
}
