/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan exec-worker`, one benchmark run in a child process of the
 * server (a hidden subcommand the server runs per benchmark run, see
 * docs/executor.md "The benchmark service"). It reads a graph document or
 * MLIR module from stdin, runs it like `shardplan run` and writes a line
 * protocol to stdout: "progress F" lines (0..1), then exactly one of
 * "result {JSON}" or "error MESSAGE". Everything the run allocates dies with
 * the process, so a crash, a runaway loop or memory exhaustion here costs
 * only this run; the server (server/srv_bench.c) reads the line protocol.
 * With --mpi it is one process of an MPI job (executor/ex_mpi.h): process 0
 * reads stdin and speaks the protocol, every process runs its share of the
 * devices, and the result gains the "mpi" member (docs/executor.md). */
#include "cmd.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cm.h"
#include "cm_json.h"
#include "cmd_util.h"
#include "ex_exec.h"
#include "ex_mpi.h"
#include "ex_timing.h"
#include "sp_cost.h"
#include "sp_input.h"

/* The test faults: a segmentation fault (default action, so the parent sees
 * the signal even under ASan), a loop that never ends, or allocation until
 * the address-space limit stops it (refused without a limit). */
static int fault(const char *kind, FILE *out)
{
    if (strcmp(kind, "crash") == 0) {
        fflush(out);
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return 1;
    }
    if (strcmp(kind, "hang") == 0) {
        for (;;) {
            pause();
        }
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        fputs("error oom fault refused: no address-space limit\n", out);
        return 1;
    }
    for (;;) {
        size_t n = (size_t)64 << 20;
        char *p = malloc(n); /* leaked on purpose: the process ends below */
        if (p == NULL) {
            fputs("error out of memory\n", out);
            return 1;
        }
        memset(p, 1, n);
    }
}

/* Reads the plan's input from stdin into part (to be partitioned) and ref
 * (the reference): rules_len bytes of a rules document (srv_bench.c sends
 * the plan's, if any), then the model text, both loaded with the plan's
 * pass as every consumer of a stored plan loads it (planner/doc/sp_input.h).
 * Errors: those of cm_file_read and sp_input_read, CM_EINVAL when stdin is
 * shorter than rules_len; part may hold a module then (the caller releases
 * what has one, as after a success). */
static cm_status read_input(ex_mpi *mp, sp_plan_pass pass, uint64_t rules_len, sp_input *part,
                            sp_input *ref, cm_error *err)
{
    /* stdin is read once; the reference copy is re-read from the same text.
     * Under MPI, process 0 reads it and sends it to the others. */
    char *text = NULL;
    size_t len = 0;
    cm_status st = mp == NULL || ex_mpi_rank(mp) == 0 ? cm_file_read("-", &text, &len, err) : CM_OK;
    if (mp != NULL) {
        st = ex_mpi_agree(mp, st, err);
        if (st == CM_OK) {
            st = ex_mpi_bcast_text(mp, &text, &len, err);
        }
    }
    if (st == CM_OK && rules_len > len) {
        st = cm_error_set(err, CM_EINVAL, NULL, "the input is shorter than its %llu rule bytes",
                          (unsigned long long)rules_len);
    }
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.pass = pass;
    if (rules_len > 0) {
        io.rules = text;
        io.rules_len = (size_t)rules_len;
    }
    /* two independent modules: the partitioned program and the reference */
    if (st == CM_OK) {
        st = sp_input_read(text + rules_len, len - rules_len, &io, part, err);
    }
    if (st == CM_OK) {
        st = sp_input_read(text + rules_len, len - rules_len, &io, ref, err);
    }
    cm_free(text);
    return mp != NULL ? ex_mpi_agree(mp, st, err) : st;
}

/* "key":v with 9 significant digits, as the result document has them. */
static void put_kv_g9(cm_buf *b, const char *key, double v)
{
    cm_json_put_key(b, key);
    cm_json_put_g(b, v, 9);
}

/* ex_trace.on_run: "progress F" after each run, from 0.1 (partitioned)
 * to 1, at most once per percent. */
typedef struct progress {
    FILE *out;
    int shown; /* percent last printed */
} progress;

static void report_run(void *ctx, uint32_t run, uint32_t runs)
{
    progress *p = ctx;
    int pct = (int)(10.0 + 89.0 * (double)(run + 1u) / (double)(runs > 0 ? runs : 1));
    if (pct > p->shown) {
        p->shown = pct;
        fprintf(p->out, "progress %.2f\n", pct / 100.0);
        fflush(p->out);
    }
}

int cmd_worker(int argc, char **argv, FILE *out, FILE *errs)
{
    uint64_t devices = 0, warmup = 1, iters = 5, seed = 1, rules_len = 0;
    sp_plan_pass pass = SP_PLAN_PIPELINE;
    const char *fault_kind = NULL;
    ex_affinity affinity = EX_AFFINITY_AUTO;
    bool mpi = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--affinity") == 0 || strcmp(argv[i], "--no-affinity") == 0) {
            affinity = argv[i][2] == 'n' ? EX_AFFINITY_OFF : EX_AFFINITY_ON;
            continue;
        }
        if (strcmp(argv[i], "--mpi") == 0) {
            mpi = true;
            continue;
        }
        bool ok = i + 1 < argc;
        const char *v = ok ? argv[i + 1] : "";
        if (ok && strcmp(argv[i], "--devices") == 0) {
            ok = cmd_parse_u64(v, &devices) && devices <= 4096;
        } else if (ok && strcmp(argv[i], "--warmup") == 0) {
            ok = cmd_parse_u64(v, &warmup) && warmup <= 1000;
        } else if (ok && strcmp(argv[i], "--iters") == 0) {
            ok = cmd_parse_u64(v, &iters) && iters > 0 && iters <= 100000;
        } else if (ok && strcmp(argv[i], "--seed") == 0) {
            ok = cmd_parse_u64(v, &seed);
        } else if (ok && strcmp(argv[i], "--pass") == 0) {
            ok = sp_plan_pass_parse(v, &pass);
        } else if (ok && strcmp(argv[i], "--rules-bytes") == 0) {
            ok = cmd_parse_u64(v, &rules_len) && rules_len <= ((uint64_t)1 << 40);
        } else if (ok && strcmp(argv[i], "--fault") == 0) {
            fault_kind = v;
            ok = strcmp(v, "crash") == 0 || strcmp(v, "hang") == 0 || strcmp(v, "oom") == 0;
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(errs, "shardplan exec-worker: bad argument '%s'\n", argv[i]);
            return 2;
        }
        i++;
    }
    cm_error err;
    cm_error_clear(&err);
    ex_mpi *mp = NULL;
    if (mpi && ex_mpi_init(NULL, NULL, &mp, &err) != CM_OK) {
        fprintf(out, "error %s\n", err.msg);
        return 1;
    }
    /* under MPI, process 0 alone speaks the protocol */
    FILE *devnull = NULL;
    if (mp != NULL && ex_mpi_rank(mp) != 0) {
        devnull = fopen("/dev/null", "w");
        out = devnull != NULL ? devnull : out;
    }
    fputs("progress 0\n", out);
    fflush(out);
    if (fault_kind != NULL) {
        return fault(fault_kind, out);
    }
    sp_input part, ref;
    memset(&part, 0, sizeof part);
    memset(&ref, 0, sizeof ref);
    double *ts = NULL, *op_s = NULL, *net_s = NULL;
    const char **paths = NULL;
    ex_trace tr; /* the last run's timeline (released at out) */
    memset(&tr, 0, sizeof tr);
    progress pr = {out, 10};
    sp_cost *c = NULL;
    cm_buf b;
    cm_buf_init(&b);
    int rc = 1;
    if (read_input(mp, pass, rules_len, &part, &ref, &err) != CM_OK) {
        goto out;
    }
    cm_status pst = sp_input_partition(&part, &err);
    if ((mp != NULL ? ex_mpi_agree(mp, pst, &err) : pst) != CM_OK) {
        goto out;
    }
    fputs("progress 0.1\n", out);
    fflush(out);
    /* predicted step time: the cost model on the partitioned module */
    c = ex_timing_cost(&part);
    double predicted = c != NULL ? sp_cost_get_summary(c)->step_s : -1;
    uint64_t total = warmup + iters;
    ts = cm_calloc((size_t)total, sizeof(double));
    if (ts == NULL) {
        cm_error_oom(&err);
        goto out;
    }
    /* per-op timers of the measured runs, when they fit */
    uint32_t n_dev = 0;
    op_s = ex_timing_timers(part.m, devices, &n_dev);
    /* the last run's timeline, and progress after every run */
    cm_error te;
    cm_error_clear(&te);
    bool traced = ex_trace_init(&tr, n_dev, (uint32_t)(total - 1u), &te) == CM_OK;
    tr.on_run = report_run;
    tr.ctx = &pr;
    ex_check_opts o = {.n_devices = (uint32_t)devices,
                       .iters = (uint32_t)total,
                       .seed = seed,
                       .iter_s = ts,
                       .affinity = affinity,
                       .op_s = op_s,
                       .op_from = (uint32_t)warmup,
                       .trace = traced ? &tr : NULL};
    ex_report r;
    ex_mpi_colls colls = {NULL, NULL};
    if (mp != NULL) {
        colls.net_s = net_s = cm_calloc(part.m->n_ops + 1u, sizeof(double));
        colls.path = paths = cm_calloc(part.m->n_ops + 1u, sizeof(const char *));
        cm_status ast = net_s == NULL || paths == NULL ? cm_error_oom(&err) : CM_OK;
        if (ex_mpi_agree(mp, ast, &err) != CM_OK) {
            goto out;
        }
    }
    if (mp != NULL ? ex_mpi_check_modules(mp, part.m, ref.m, &o, &r, &colls, &err) != CM_OK
                   : ex_check_modules(part.m, ref.m, &o, &r, &err) != CM_OK) {
        goto out;
    }
    const double *meas = ts + warmup;
    cm_buf_putc(&b, '{');
    cm_json_put_kv_u64(&b, "devices", r.n_devices);
    cm_json_put_kv_u64(&b, "warmup", warmup);
    cm_json_put_kv_u64(&b, "iters", iters);
    cm_json_put_kv_u64(&b, "seed", seed);
    cm_json_put_kv_bool(&b, "affinity", ex_affinity_pins(affinity, r.n_devices));
    cm_json_put_key(&b, "iter_s");
    cm_buf_putc(&b, '[');
    for (uint64_t i = 0; i < iters; i++) {
        cm_json_put_sep(&b);
        cm_json_put_g(&b, meas[i], 9);
    }
    cm_buf_putc(&b, ']');
    qsort(ts + warmup, (size_t)iters, sizeof(double), cmd_double_cmp);
    double med = iters % 2 == 1 ? meas[iters / 2] : (meas[iters / 2 - 1] + meas[iters / 2]) / 2;
    put_kv_g9(&b, "step_s", med);
    cm_json_put_kv_f64(&b, "flops", r.flops); /* a count: exact */
    put_kv_g9(&b, "flop_per_s", med > 0 ? r.flops / med : 0.0);
    if (predicted >= 0) {
        put_kv_g9(&b, "predicted_step_s", predicted);
    } else {
        cm_json_put_key(&b, "predicted_step_s");
        cm_json_put_null(&b);
    }
    if (c != NULL) {
        /* which profile the prediction used, and whether it was measured
         * on this machine (the dashboard says when it was not) */
        const sp_cost_summary *cs = sp_cost_get_summary(c);
        cm_json_put_key(&b, "predicted_profile");
        cm_buf_putc(&b, '{');
        cm_json_put_kv_str(&b, "name", cs->profile);
        cm_json_put_kv_bool(&b, "calibrated", cs->profile_calibrated);
        cm_buf_putc(&b, '}');
    }
    put_kv_g9(&b, "reference_s", r.ref_s);
    cm_json_put_key(&b, "numerics");
    cm_buf_putc(&b, '{');
    cm_json_put_kv_bool(&b, "match", r.mm.match);
    put_kv_g9(&b, "max_abs_diff", r.mm.max_abs_diff);
    if (!r.mm.match) {
        cm_json_put_key(&b, "mismatch");
        cm_buf_putc(&b, '{');
        cm_json_put_kv_u64(&b, "result", r.mm.result);
        cm_json_put_kv_u64(&b, "index", r.mm.index);
        put_kv_g9(&b, "expected", r.mm.expected);
        put_kv_g9(&b, "got", r.mm.got);
        put_kv_g9(&b, "tol", r.mm.tol);
        cm_buf_putc(&b, '}');
    }
    cm_buf_putc(&b, '}');
    if (op_s != NULL && r.n_devices == n_dev && c != NULL) {
        ex_timing t = {part.m, part.g, c, op_s, n_dev, iters};
        if (ex_timing_json(&t, &b) != CM_OK) {
            cm_error_oom(&err);
            goto out;
        }
    }
    if (mp != NULL && ex_mpi_colls_json(mp, part.m, r.n_devices == n_dev ? op_s : NULL, &colls,
                                        n_dev, iters, &b) != CM_OK) {
        cm_error_oom(&err);
        goto out;
    }
    if (traced && r.n_devices == n_dev) {
        ex_timing t = {part.m, part.g, c, op_s, n_dev, iters};
        if (ex_trace_json(&tr, &t, &b) != CM_OK) {
            cm_error_oom(&err);
            goto out;
        }
    }
    cm_buf_putc(&b, '}');
    if (b.oom) {
        cm_error_oom(&err);
        goto out;
    }
    fprintf(out, "progress 1\nresult %s\n", b.data);
    rc = 0;
out:
    if (rc != 0) {
        /* one line: the message must not contain a line end */
        for (char *p = err.msg; *p != '\0'; p++) {
            if (*p == '\n' || *p == '\r') {
                *p = ' ';
            }
        }
        fprintf(out, "error %s%s%s%s\n",
                err.code == CM_ENOMEM && strncmp(err.msg, "out of memory", 13) != 0
                    ? "out of memory: "
                    : "",
                err.path[0] != '\0' ? err.path : "", err.path[0] != '\0' ? ": " : "", err.msg);
    }
    fflush(out);
    cm_buf_fini(&b);
    sp_cost_destroy(c);
    cm_free(op_s);
    cm_free(net_s);
    cm_free(paths);
    ex_trace_fini(&tr);
    cm_free(ts);
    if (part.m != NULL) {
        sp_input_fini(&part);
    }
    if (ref.m != NULL) {
        sp_input_fini(&ref);
    }
    ex_mpi_fini(mp);
    if (devnull != NULL) {
        fclose(devnull);
    }
    return rc;
}
