/* SPDX-License-Identifier: Apache-2.0
 * `make bench-sweep`: 100 plans of the transformer training step of
 * `shardplan example transformer --train` (125 layers, ~12k ops per module)
 * over the 2-D factorisations of 8 devices (1x8, 2x4, 4x2, 8x1) and the
 * strategies dp, fsdp, tp, dp+tp, cycling over those 16 variants, each
 * generated, decoded, propagated and costed (planner/advise/sp_sweep.h,
 * sp_sweep_run) on every online core. Prints wall and CPU time, variants/s
 * and the target (100 variants in under 10 s).
 * Usage: bench_sweep [JOBS] [--layers N] [--threads T] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "sp_sweep.h"

#define TARGET_SECS 10.0

int main(int argc, char **argv)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 8;
    o.layers = 125;
    o.train = true;
    o.jobs = 100;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
            o.layers = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o.threads = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else {
            o.jobs = (uint32_t)strtoul(argv[i], NULL, 10);
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    sp_sweep_result r;
    cm_error err;
    cm_error_clear(&err);
    if (sp_sweep_run(&o, &r, &err) != CM_OK) {
        fprintf(stderr, "bench_sweep: %s %s\n", err.path, err.msg);
        return 1;
    }
    uint32_t failed = 0;
    for (uint32_t i = 0; i < r.n_rows; i++) {
        failed += !r.rows[i].ok;
    }
    printf("sweep: %u plans of %u variants (devices 8: 1x8 2x4 4x2 8x1 x dp fsdp tp dp+tp), "
           "%u ops each, %u threads on %ld cores\n",
           r.n_jobs, r.n_rows, r.n_ops, o.threads > 0 ? o.threads : (unsigned)cores, cores);
    printf("  wall %.3f s, CPU %.3f s, %.1f variants/s (wall), %.1f ms CPU per variant%s\n",
           r.seconds, r.cpu_seconds, r.seconds > 0 ? r.n_jobs / r.seconds : 0,
           r.n_jobs > 0 ? 1e3 * r.cpu_seconds / r.n_jobs : 0, failed ? ", SOME FAILED" : "");
    double per100 = r.n_jobs > 0 ? r.seconds * 100.0 / r.n_jobs : 0;
    printf("  target: 100 variants < %.0f s: %.3f s -> %s\n", TARGET_SECS, per100,
           per100 < TARGET_SECS ? "met" : "NOT met");
    printf("  best: %lldx%lld %s, %.4g s per step\n", (long long)r.rows[0].data,
           (long long)r.rows[0].model,
           (const char *[]){"dp", "fsdp", "tp", "dp+tp"}[r.rows[0].strategy & 3], r.rows[0].step_s);
    sp_sweep_result_fini(&r);
    return failed ? 1 : 0;
}
