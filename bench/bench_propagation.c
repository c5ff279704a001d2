/* SPDX-License-Identifier: Apache-2.0
 * Throughput and peak memory of -sdy-propagation-pipeline on one core.
 * For each size (10k, 100k and 1M ops by default) a fresh child process
 * (fork, so peaks do not accumulate) builds a transformer training step with
 * sp_gen (attention + MLP blocks, backward pass, SGD update, Megatron-style
 * parameter shardings on a data=2 x model=4 mesh), times the generation, a
 * plain linear walk over all ops touching their operands and results (a lower
 * bound, measured in the same process), and sp_pass_propagation_pipeline
 * (or sp_propagate alone with --propagate-only). Each size runs RUNS times
 * (medians are printed; peak RSS is the largest of the runs). The issue's
 * target: the 1,000,000-op module through the pipeline in under 1 s, peak
 * memory under 1 GiB.
 * Usage: bench_propagation [OPS...] [--runs N] [--layers-per-func N]
 *                          [--propagate-only] [--forward-only] [--dump FILE]
 *   --layers-per-func N: layers per func.func (default 16; 0: one function
 *   holding every layer, as a JAX train step would)
 *   --dump FILE writes the (first size's) propagated module as MLIR text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm.h"
#include "sp_gen.h"
#include "sp_ir.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_diag.h"
#include "sp_mlir.h"

#define MAX_SIZES    16
#define MAX_RUNS     15
#define WALK_RUNS    5
#define TARGET_OPS   1000000u
#define TARGET_SECS  1.0
#define TARGET_BYTES ((size_t)1 << 30)

/* What one child measured; sent to the parent through a pipe. */
typedef struct result {
    int ok;
    uint32_t n_ops, n_layers, n_funcs, n_values;
    double gen_s;      /* sp_gen_transformer */
    double walk_s;     /* median linear walk */
    double prop_s;     /* pipeline or sp_propagate */
    size_t rss_gen;    /* peak RSS after generation, bytes */
    size_t rss_peak;   /* peak RSS at the end, bytes */
    size_t arena_grow; /* module arena bytes added by the pipeline */
    uint32_t n_diags;
    char msg[1024];
} result;

typedef struct cfg {
    uint32_t layers_per_func;
    bool propagate_only;
    bool forward_only;
    const char *dump;
} cfg;

static volatile uint64_t sink; /* keeps the walk from being optimised out */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, size_t n)
{
    qsort(t, n, sizeof *t, cmp_double);
    return t[n / 2];
}

/* The lower bound: one pass over the op table reading every operand's and
 * result's value record. */
static double time_walk(const sp_module *m)
{
    double t[WALK_RUNS];
    for (int r = 0; r < WALK_RUNS; r++) {
        double t0 = cm_now();
        uint64_t acc = 0;
        for (uint32_t i = 0; i < m->n_ops; i++) {
            const sp_op *op = &m->ops[i];
            for (uint32_t k = 0; k < op->n_operands; k++) {
                acc += m->values[op->operands[k]].type;
            }
            for (uint32_t k = 0; k < op->n_results; k++) {
                acc += m->values[op->first_result + k].type;
            }
        }
        t[r] = cm_now() - t0;
        sink = acc;
    }
    return median(t, WALK_RUNS);
}

static void dump_module(const sp_module *m, const char *path)
{
    sp_print_opts po = {.generic = false, .debug_info = false};
    cm_buf b;
    cm_buf_init(&b);
    sp_mlir_print(m, &po, &b);
    FILE *f = fopen(path, "w");
    if (b.oom || f == NULL || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
        fprintf(stderr, "bench_propagation: cannot write %s\n", path);
    }
    cm_buf_fini(&b);
}

/* Runs in the child: generate, walk, propagate. */
static void measure(size_t target, const cfg *c, bool dump, result *r)
{
    memset(r, 0, sizeof *r);
    sp_gen_opts o;
    sp_gen_opts_init(&o);
    o.backward = !c->forward_only;
    o.layers_per_func = c->layers_per_func;
    sp_module *m = NULL;
    sp_gen_info info;
    cm_error err;
    cm_error_clear(&err);
    double t0 = cm_now();
    cm_status st = sp_gen_transformer(&o, target, &m, &info, &err);
    r->gen_s = cm_now() - t0;
    if (st != CM_OK) {
        snprintf(r->msg, sizeof r->msg, "generation failed (%s): %s", cm_status_name(st), err.msg);
        return;
    }
    r->rss_gen = cm_peak_rss();
    r->n_ops = info.n_ops;
    r->n_layers = info.n_layers;
    r->n_funcs = info.n_funcs;
    r->n_values = m->n_values;
    r->walk_s = time_walk(m);

    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    sp_diags d;
    sp_diags_init(&d);
    cm_error_clear(&err);
    size_t arena0 = m->arena.used_bytes;
    t0 = cm_now();
    st = c->propagate_only ? sp_propagate(m, &po, &d, &err)
                           : sp_pass_propagation_pipeline(m, &po, &d, &err);
    r->prop_s = cm_now() - t0;
    r->rss_peak = cm_peak_rss();
    r->arena_grow = m->arena.used_bytes - arena0;
    r->n_diags = d.n;
    if (st != CM_OK) {
        snprintf(r->msg, sizeof r->msg, "propagation failed (%s) at %s: %s", cm_status_name(st),
                 err.path, err.msg);
    } else if (d.n > 0) {
        snprintf(r->msg, sizeof r->msg, "%u diagnostics, first: %s", d.n, d.items[0].msg);
        r->ok = 1;
    } else {
        r->ok = 1;
    }
    if (dump) {
        dump_module(m, c->dump);
    }
    sp_diags_fini(&d);
    sp_module_destroy(m);
}

/* Forks a child that measures one run; false if the child failed. */
static bool run_child(size_t target, const cfg *c, bool dump, result *out)
{
    int fd[2];
    if (pipe(fd) != 0) {
        perror("pipe");
        return false;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return false;
    }
    if (pid == 0) {
        close(fd[0]);
        result r;
        measure(target, c, dump, &r);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t n = read(fd[0], (char *)out + got, sizeof *out - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof *out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_propagation: child for %zu ops died (status %d)\n", target, status);
        return false;
    }
    if (!out->ok) {
        fprintf(stderr, "bench_propagation: %zu ops: %s\n", target, out->msg);
        return false;
    }
    return true;
}

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

int main(int argc, char **argv)
{
    (void)cm_tune_malloc(); /* as shardplan runs the passes */
    size_t sizes[MAX_SIZES];
    size_t n_sizes = 0;
    int runs = 3;
    cfg c = {16, false, false, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--layers-per-func") == 0 && i + 1 < argc) {
            c.layers_per_func = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--propagate-only") == 0) {
            c.propagate_only = true;
        } else if (strcmp(argv[i], "--forward-only") == 0) {
            c.forward_only = true;
        } else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            c.dump = argv[++i];
        } else if (argv[i][0] >= '1' && argv[i][0] <= '9' && n_sizes < MAX_SIZES) {
            sizes[n_sizes++] = (size_t)strtoul(argv[i], NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_propagation [OPS...] [--runs N] [--layers-per-func N] "
                            "[--propagate-only] [--forward-only] [--dump FILE]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench_propagation: --runs must be in [1, %d]\n", MAX_RUNS);
        return 2;
    }
    if (n_sizes == 0) {
        sizes[0] = 10000;
        sizes[1] = 100000;
        sizes[2] = 1000000;
        n_sizes = 3;
    }

    const char *what =
        c.propagate_only ? "sp_propagate (user-priority)" : "sp_pass_propagation_pipeline";
    printf("shardplan propagation benchmark: one core, %s, median of %d run%s, each in a fresh "
           "process\n",
           what, runs, runs > 1 ? "s" : "");
    printf("module: transformer %s (batch 8, seq 128, d_model 512, 8 heads, d_ff 2048), "
           "%u layers per function%s,\n        Megatron parameter shardings on mesh data=2 x "
           "model=4, input sharded on data\n",
           c.forward_only ? "forward pass" : "training step (forward, backward, SGD update)",
           c.layers_per_func, c.layers_per_func == 0 ? " (all in one)" : "");
    printf("%9s %6s %5s %8s %9s %10s %9s %7s %9s %9s %9s\n", "ops", "layers", "funcs", "gen s",
           "prop s", "ops/s", "walk s", "x walk", "RSS gen", "RSS peak", "arena +");
    int rc = 0;
    for (size_t s = 0; s < n_sizes; s++) {
        result r[MAX_RUNS];
        double gen[MAX_RUNS], prop[MAX_RUNS], walk[MAX_RUNS];
        size_t rss_gen = 0, rss_peak = 0, arena = 0;
        bool ok = true;
        for (int k = 0; k < runs && ok; k++) {
            ok = run_child(sizes[s], &c, c.dump != NULL && s == 0 && k == 0, &r[k]);
            gen[k] = r[k].gen_s;
            prop[k] = r[k].prop_s;
            walk[k] = r[k].walk_s;
            rss_gen = r[k].rss_gen > rss_gen ? r[k].rss_gen : rss_gen;
            rss_peak = r[k].rss_peak > rss_peak ? r[k].rss_peak : rss_peak;
            arena = r[k].arena_grow > arena ? r[k].arena_grow : arena;
        }
        if (!ok) {
            rc = 1;
            continue;
        }
        double g = median(gen, (size_t)runs), p = median(prop, (size_t)runs);
        double w = median(walk, (size_t)runs);
        printf("%9u %6u %5u %8.3f %9.3f %10.0f %9.5f %7.0f %6.0f Mi %6.0f Mi %6.0f Mi\n",
               r[0].n_ops, r[0].n_layers, r[0].n_funcs, g, p, p > 0 ? r[0].n_ops / p : 0.0, w,
               w > 0 ? p / w : 0.0, mib(rss_gen), mib(rss_peak), mib(arena));
        if (r[0].n_diags > 0) {
            printf("          note: %s\n", r[0].msg);
        }
        if (sizes[s] >= TARGET_OPS) {
            bool t_ok = p < TARGET_SECS, m_ok = rss_peak < TARGET_BYTES;
            printf("          target %u ops: time %.3f s < %.0f s: %s; peak RSS %.0f MiB < 1024 "
                   "MiB: %s\n",
                   r[0].n_ops, p, TARGET_SECS, t_ok ? "met" : "NOT MET", mib(rss_peak),
                   m_ok ? "met" : "NOT MET");
        }
    }
    printf("walk = one linear pass over all ops reading operand and result values (lower "
           "bound);\nx walk = propagation time / walk time; RSS gen = peak after generation;\n"
           "arena + = bytes the pipeline added to the module arena\n");
    return rc;
}
