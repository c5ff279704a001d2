/* SPDX-License-Identifier: Apache-2.0
 * `make bench-suggest`: `shardplan suggest` (planner/advise/sp_suggest.h,
 * sp_suggest_run) on the MLP template of `shardplan example mlp` and on the
 * training step of `shardplan example transformer --train` (115 layers,
 * ~10k ops), with the default options (48 first-round candidates, greedy
 * combinations of up to 3 constraints) on every online core. Prints wall
 * seconds, full runs (candidates evaluated) per second and the target
 * (suggest on the 10k-op module in under 10 s).
 * Usage: bench_suggest [--layers N] [--threads T] [--max-candidates N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "sp_suggest.h"
#include "sp_example.h"

#define TARGET_SECS 10.0

/* CPU seconds of the whole process (every thread). */
static double cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Suggests for the template eo; returns the wall seconds (< 0 on failure). */
static double one(const char *what, const sp_example_opts *eo, const sp_suggest_opts *o)
{
    cm_error err;
    cm_error_clear(&err);
    cm_buf g;
    cm_buf_init(&g);
    sp_suggest *s = NULL;
    double c0 = 0;
    cm_status st = sp_example_graph_json(eo, &g, &err);
    if (st == CM_OK) {
        c0 = cpu_now();
        st = sp_suggest_run(g.data, g.len, NULL, o, &s, &err);
    }
    if (st != CM_OK) {
        fprintf(stderr, "bench_suggest: %s: %s %s\n", what, err.path, err.msg);
        cm_buf_fini(&g);
        return -1;
    }
    const sp_suggest_stats *ss = sp_suggest_get_stats(s);
    const sp_suggest_figures *b = sp_suggest_baseline(s);
    printf("%s: %u ops, %u unannotated values, %u candidate constraints\n", what, ss->n_ops,
           ss->values, ss->candidates);
    double cpu = cpu_now() - c0;
    printf("  %.3f s wall, %.3f s CPU (all threads), %u full runs (plan + partition + cost, %u "
           "failed), %.1f runs/s, %.1f ms CPU per run with the baseline\n",
           ss->seconds, cpu, ss->evaluated, ss->failed,
           ss->seconds > 0 ? ss->evaluated / ss->seconds : 0,
           ss->evaluated > 0 ? 1e3 * cpu / (ss->evaluated + 1) : 0);
    if (sp_suggest_n(s) > 0) {
        const sp_suggestion *t = sp_suggest_at(s, 0);
        printf("  rank 1: %s (%u edit%s), step %.4g -> %.4g ms, peak %.4g -> %.4g MiB\n", t->label,
               t->n_edits, t->n_edits == 1 ? "" : "s", b->step_s * 1e3, t->predicted.step_s * 1e3,
               b->peak_bytes / 1048576.0, t->predicted.peak_bytes / 1048576.0);
    } else {
        printf("  no suggestion\n");
    }
    double secs = ss->seconds;
    sp_suggest_destroy(s);
    cm_buf_fini(&g);
    return secs;
}

int main(int argc, char **argv)
{
    (void)cm_tune_malloc();
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    uint32_t layers = 115;
    for (int i = 1; i + 1 < argc; i += 2) {
        uint32_t v = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--layers") == 0 && v > 0) {
            layers = v;
        } else if (strcmp(argv[i], "--threads") == 0) {
            o.threads = v;
        } else if (strcmp(argv[i], "--max-candidates") == 0 && v > 0) {
            o.max_candidates = v;
        } else {
            fprintf(stderr,
                    "usage: bench_suggest [--layers N] [--threads T] [--max-candidates N]\n");
            return 2;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("suggest, objective time, %u first-round candidates, up to %u edits, %u threads on %ld "
           "cores\n",
           o.max_candidates, o.max_edits, o.threads > 0 ? o.threads : (unsigned)cores, cores);
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    if (one("mlp (example mlp, 4 layers, dp+tp)", &eo, &o) < 0) {
        return 1;
    }
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.layers = layers;
    eo.train = true;
    char what[96];
    snprintf(what, sizeof what, "transformer training step (%u layers, dp+tp)", layers);
    double t = one(what, &eo, &o);
    if (t < 0) {
        return 1;
    }
    printf("  target: suggest on the ~10k-op module < %.0f s: %.3f s -> %s\n", TARGET_SECS, t,
           t < TARGET_SECS ? "met" : "NOT met");
    return 0;
}
