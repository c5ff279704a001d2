/* SPDX-License-Identifier: Apache-2.0
 * Time to partition and cost the 1,000,000-op module of the propagation
 * benchmark on one core: sp_gen builds the transformer training step
 * (data=2 x model=4, 16 layers per function), -sdy-propagation-pipeline
 * shards it (sharding rules kept, as `shardplan plan` runs it), then
 *   1. cost of the propagated module, communication implied by shardings;
 *   2. -sdy-insert-explicit-reshards (planner/sp_reshard.h);
 *   3. -sdy-reshard-to-collectives (planner/sp_collectives.h);
 *   4. cost of the partitioned module, communication from its collectives.
 * The target: partition + cost in under 1 s. Costing is repeated
 * RUNS times (it does not change the module) and its median printed.
 * Usage: bench_partition [OPS] [--runs N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "sp_collectives.h"
#include "sp_cost.h"
#include "sp_gen.h"
#include "sp_ir.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_reshard.h"
#include "sp_diag.h"

#define TARGET_SECS 1.0
#define MAX_RUNS    15

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of runs costings of m; *c_out gets the last cost. */
static double time_cost(sp_module *m, sp_cost_mode mode, int runs, sp_cost **c_out)
{
    double t[MAX_RUNS];
    *c_out = NULL;
    for (int r = 0; r < runs; r++) {
        sp_cost_opts o;
        sp_cost_opts_init(&o);
        o.mode = mode;
        cm_error err;
        cm_error_clear(&err);
        sp_cost_destroy(*c_out);
        *c_out = NULL;
        double t0 = cm_now();
        if (sp_cost_compute(m, &o, c_out, &err) != CM_OK) {
            fprintf(stderr, "bench_partition: cost: %s\n", err.msg);
            exit(1);
        }
        t[r] = cm_now() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

static void print_cost(const char *what, const sp_cost *c, double secs)
{
    const sp_cost_summary *s = sp_cost_get_summary(c);
    printf("  %-34s %8.3f s   %u ops, %u collectives, %.1f MiB on the wire, %.3g GFLOP, "
           "step %.3g s\n",
           what, secs, s->n_ops, sp_cost_n_colls(c), s->comm_bytes / (1024.0 * 1024.0),
           s->flops / 1e9, s->step_s);
}

int main(int argc, char **argv)
{
    (void)cm_tune_malloc(); /* as shardplan runs the passes */
    size_t target = 1000000;
    int runs = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else {
            target = (size_t)strtoull(argv[i], NULL, 10);
        }
    }
    runs = runs < 1 ? 1 : runs > MAX_RUNS ? MAX_RUNS : runs;
    sp_gen_opts go;
    sp_gen_opts_init(&go);
    sp_module *m = NULL;
    sp_gen_info info;
    cm_error err;
    cm_error_clear(&err);
    double t0 = cm_now();
    if (sp_gen_transformer(&go, target, &m, &info, &err) != CM_OK) {
        fprintf(stderr, "bench_partition: generate: %s\n", err.msg);
        return 1;
    }
    double gen_s = cm_now() - t0;
    sp_prop_opts po;
    sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
    po.keep_sharding_rules = true;
    sp_diags d;
    sp_diags_init(&d);
    t0 = cm_now();
    if (sp_pass_propagation_pipeline(m, &po, &d, &err) != CM_OK) {
        fprintf(stderr, "bench_partition: propagate: %s\n", err.msg);
        return 1;
    }
    double prop_s = cm_now() - t0;
    sp_diags_fini(&d);
    printf("bench-partition: %u ops (%u layers, %u functions), data=2 x model=4, one core\n",
           info.n_ops, info.n_layers, info.n_funcs);
    printf("  %-34s %8.3f s\n", "generate", gen_s);
    printf("  %-34s %8.3f s   (bench-propagation's figure)\n", "-sdy-propagation-pipeline",
           prop_s);
    sp_cost *c = NULL;
    double cost_implied_s = time_cost(m, SP_COST_IMPLIED, runs, &c);
    print_cost("cost (implied communication)", c, cost_implied_s);
    sp_cost_destroy(c);

    sp_reshard_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.full_version = true;
    sp_diags_init(&d);
    t0 = cm_now();
    cm_status st = sp_pass_insert_explicit_reshards(m, &ro, &d, &err);
    double reshard_s = cm_now() - t0;
    sp_diags_fini(&d);
    if (st != CM_OK) {
        fprintf(stderr, "bench_partition: insert-explicit-reshards: %s\n", err.msg);
        return 1;
    }
    printf("  %-34s %8.3f s\n", "-sdy-insert-explicit-reshards", reshard_s);
    t0 = cm_now();
    st = sp_pass_reshard_to_collectives(m, false, &err);
    double lower_s = cm_now() - t0;
    if (st != CM_OK) {
        fprintf(stderr, "bench_partition: reshard-to-collectives: %s\n", err.msg);
        return 1;
    }
    printf("  %-34s %8.3f s\n", "-sdy-reshard-to-collectives", lower_s);
    double cost_explicit_s = time_cost(m, SP_COST_EXPLICIT, runs, &c);
    print_cost("cost (partitioned module)", c, cost_explicit_s);
    sp_cost_destroy(c);
    double total = reshard_s + lower_s + cost_explicit_s;
    printf("partition + cost: %.3f s (target %.1f s): %s\n", total, TARGET_SECS,
           total < TARGET_SECS ? "met" : "NOT met");
    printf("cost alone, median of %d: %.3f s implied, %.3f s partitioned\n", runs, cost_implied_s,
           cost_explicit_s);
    sp_module_destroy(m);
    return 0;
}
