/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan run`, a model partitioned and run for real on local
 * devices by the executor, checked against a single-device run of it
 * (executor/ex_exec.h ex_check_modules), with per-op timers beside the cost
 * model for --ops (executor/ex_timing.h); with --mpi, under mpirun, the
 * devices spread over the MPI processes (executor/ex_mpi.h), process 0
 * reading the file and reporting. */
#include "cmd.h"

#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "cmd_util.h"
#include "ex_exec.h"
#include "ex_interp.h"
#include "ex_mpi.h"
#include "ex_timing.h"
#include "sp_cost.h"
#include "sp_input.h"
#include "sp_mlir.h"

static void run_usage(FILE *f)
{
    fputs("usage: shardplan run FILE.mlir|GRAPH.json [--devices N] [--iters K] [--seed S] "
          "[--affinity|--no-affinity] [--ops N] [--mpi] [--json]\n"
          "  --json: one JSON object (devices, iters, seed, iter_s, step_s, flops, flop_per_s,\n"
          "  reference_s, numerics, and with --ops the per-op ops and collectives)\n"
          "  --ops N: after the runs, the N slowest ops and every collective, measured on each\n"
          "  device (mean and max) beside the cost model's prediction (the first run is left\n"
          "  out when there are several)\n"
          "  --mpi: under mpirun, the devices spread over the MPI processes (one per host),\n"
          "  process 0 reading FILE and reporting; with --ops each collective's time is\n"
          "  split into its local and its network part (docs/executor.md, \"On a cluster\")\n",
          f);
}

/* The --json report: the fields of a benchmark run's result (docs/api.md,
 * "Benchmark runs"), and the per-op timings when timed. 1 on a numerics
 * mismatch (as the text report) or when out of memory. ts is sorted here. */
static int write_json(FILE *out, FILE *errs, const ex_report *r, double *ts, uint64_t iters,
                      uint64_t seed, bool timed, const ex_timing *t, const cm_buf *extra)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    cm_json_put_kv_u64(&b, "devices", r->n_devices);
    cm_json_put_kv_u64(&b, "iters", iters);
    cm_json_put_kv_u64(&b, "seed", seed);
    cm_json_put_key(&b, "iter_s");
    cm_buf_putc(&b, '[');
    for (uint64_t i = 0; i < iters; i++) {
        cm_json_put_sep(&b);
        cm_json_put_f64(&b, ts[i]);
    }
    cm_buf_putc(&b, ']');
    qsort(ts, (size_t)iters, sizeof(double), cmd_double_cmp);
    double med = iters % 2 == 1 ? ts[iters / 2] : (ts[iters / 2 - 1] + ts[iters / 2]) / 2;
    cm_json_put_kv_f64(&b, "step_s", med);
    cm_json_put_kv_f64(&b, "flops", r->flops);
    cm_json_put_kv_f64(&b, "flop_per_s", med > 0 ? r->flops / med : 0.0);
    cm_json_put_kv_f64(&b, "reference_s", r->ref_s);
    cm_json_put_key(&b, "numerics");
    cm_buf_putc(&b, '{');
    cm_json_put_kv_bool(&b, "match", r->mm.match);
    cm_json_put_kv_f64(&b, "max_abs_diff", r->mm.max_abs_diff);
    if (!r->mm.match) {
        cm_json_put_key(&b, "mismatch");
        cm_buf_putc(&b, '{');
        cm_json_put_kv_u64(&b, "result", r->mm.result);
        cm_json_put_kv_u64(&b, "index", r->mm.index);
        cm_json_put_kv_str(&b, "where", r->mm.where);
        cm_json_put_kv_f64(&b, "expected", r->mm.expected);
        cm_json_put_kv_f64(&b, "got", r->mm.got);
        cm_json_put_kv_f64(&b, "tol", r->mm.tol);
        cm_buf_putc(&b, '}');
    }
    cm_buf_putc(&b, '}');
    if (timed && ex_timing_json(t, &b) != CM_OK) {
        b.oom = true;
    }
    if (extra != NULL && extra->len > 0) {
        cm_buf_puts(&b, extra->data);
        b.oom = b.oom || extra->oom;
    }
    cm_buf_puts(&b, "}\n");
    int rc = cmd_write_out(&b, "run", out, errs);
    cm_buf_fini(&b);
    return rc != 0 ? rc : r->mm.match ? 0 : 1;
}

/* Under --mpi: process 0 reads path and sends the text to every process,
 * each of which loads it twice (part partitioned, ref the reference).
 * The status is every process's (ex_mpi_agree). */
static cm_status load_mpi(ex_mpi *mp, const char *path, sp_input *part, sp_input *ref,
                          cm_error *err)
{
    char *text = NULL;
    size_t len = 0;
    cm_status st = ex_mpi_rank(mp) == 0 ? cm_file_read(path, &text, &len, err) : CM_OK;
    st = ex_mpi_agree(mp, st, err);
    if (st == CM_OK) {
        st = ex_mpi_bcast_text(mp, &text, &len, err);
    }
    if (st == CM_OK) {
        st = sp_input_read(text, len, NULL, part, err);
    }
    if (st == CM_OK) {
        st = sp_input_read(text, len, NULL, ref, err);
    }
    if (st == CM_OK) {
        st = ex_partition(part->m, err);
    }
    cm_free(text);
    return ex_mpi_agree(mp, st, err);
}

/* The collectives' split under --mpi as text: where the processes ran,
 * then for each explicit collective of m its mean time per run over the
 * devices (op_s), the part spent in MPI calls (ex_mpi_colls) and
 * the rest, local work, with the path it took (ex_mpi_colls). */
static void mpi_report(const ex_mpi *mp, const sp_module *m, const double *op_s,
                       const ex_mpi_colls *c, uint32_t n_dev, uint64_t runs, FILE *out)
{
    uint32_t size = ex_mpi_size(mp);
    fprintf(out, "MPI: %u processes:", size);
    for (uint32_t k = 0; k < size; k++) {
        uint32_t lo = 0, hi = 0;
        ex_mpi_devices(n_dev, k, size, &lo, &hi);
        fprintf(out, " %u on %s (devices %u-%u)%s", k, ex_mpi_host(mp, k), lo, hi - 1u,
                k + 1u < size ? "," : "\n");
    }
    if (op_s == NULL || runs == 0) {
        return;
    }
    bool head = false;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (!sp_op_is_sdy_collective(o->kind) || c->path[i] == NULL) {
            continue;
        }
        double total = 0;
        for (uint32_t d = 0; d < n_dev; d++) {
            total += op_s[(size_t)d * m->n_ops + i];
        }
        total /= (double)n_dev * (double)runs;
        double net = c->net_s[i] / (double)runs;
        if (!head) {
            fprintf(out,
                    "collectives, local and network parts (per run; network: time in MPI "
                    "calls of the last process to arrive):\n"
                    "  %-24s %6s %10s %10s %10s  %s\n",
                    "kind", "line", "mean ms", "network ms", "local ms", "path");
            head = true;
        }
        fprintf(out, "  %-24s %6u %10.3f %10.3f %10.3f  %s\n", o->name, o->line, total * 1e3,
                net * 1e3, (total > net ? total - net : 0.0) * 1e3, c->path[i]);
    }
}

/* run's progress on stderr: after a run, once the runs have taken more
 * than a second, at most once a second (and after the last). */
typedef struct run_prog {
    FILE *errs;
    double t0, shown;
} run_prog;

static void run_progress(void *ctx, uint32_t run, uint32_t runs)
{
    run_prog *p = ctx;
    double now = cm_now(), t = now - p->t0;
    if (t > 1.0 && (now - p->shown >= 1.0 || run + 1u == runs)) {
        p->shown = now;
        fprintf(p->errs, "shardplan run: %.1f s, run %u of %u\n", t, run + 1u, runs);
    }
}

/* True when m holds a check dialect assertion: a check.* op or a
 * custom_call to @check.*. */
static bool has_checks(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        if (strncmp(o->name, "check.", 6) == 0) {
            return true;
        }
        if (o->kind == SP_OP_CUSTOM_CALL) {
            const sp_attr *t = sp_op_attr(m, i, "call_target_name");
            if (t != NULL && t->kind == SP_ATTR_STRING && strncmp(t->u.str.s, "check.", 6) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* Each line of text ("LINE:COL: check....") to errs, prefixed with file. */
static void fail_lines(const char *file, const char *text, FILE *errs)
{
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *eol = strchr(l, '\n');
        size_t ln = eol != NULL ? (size_t)(eol - l) : strlen(l);
        fprintf(errs, "%s:%.*s\n", file, (int)ln, l);
        l += ln + (eol != NULL ? 1u : 0u);
    }
}

/* A module with check assertions (StableHLO's interpreter tests, a main
 * that builds its inputs from constants): its checks are evaluated on one
 * device by the interpreter (executor/ex_exec.h ex_check_reference: every
 * process of a per-process main), and, when it runs on more than one
 * device, again in the partitioned run on the device workers, on the
 * assembled values of their operands (ex_check_partitioned; docs/executor.md,
 * "Checks"). Each failed check is reported as "FILE:LINE:COL: check...."
 * on errs. *handled is false (and nothing is printed) when the file is not
 * such a module; the exit status otherwise: 0 when every check held. */
static int run_checks(const char *file, uint32_t devices, bool json, FILE *out, FILE *errs,
                      bool *handled)
{
    *handled = false;
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 5, ".mlir") != 0) {
        return 0;
    }
    cm_error err;
    cm_error_clear(&err);
    char *text = NULL;
    size_t len = 0;
    sp_module *m = NULL;
    if (cm_file_read(file, &text, &len, &err) != CM_OK ||
        sp_mlir_read(text, len, 0, &m, &err) != CM_OK) {
        cm_free(text);
        return 0; /* the ordinary path reports it */
    }
    cm_free(text);
    if (!has_checks(m)) {
        sp_module_destroy(m);
        return 0;
    }
    *handled = true;
    char *lines = NULL;
    size_t lines_len = 0;
    uint32_t nc = 0, nf = 0, pc = 0, pf = 0, pd = 0, np = 1;
    char refused[600] = "";
    FILE *fails = open_memstream(&lines, &lines_len);
    cm_status st =
        fails == NULL ? cm_error_oom(&err) : ex_check_reference(m, fails, &nc, &nf, &np, &err);
    sp_module_destroy(m);
    sp_input part;
    memset(&part, 0, sizeof part);
    bool parted = false;
    if (st == CM_OK) {
        st = sp_input_load(file, NULL, &part, &err);
        if (st == CM_OK) {
            st = ex_partition(part.m, &err);
        }
        uint32_t nd = devices > 0 ? devices : st == CM_OK ? ex_module_devices(part.m) : 1u;
        if (st == CM_OK && nd > 1) {
            parted = true;
            st = ex_check_partitioned(part.m, devices, fails, &pc, &pf, &pd, &err);
            if (st == CM_EINVAL) {
                /* what the workers cannot run (a check inside a region, an op
                 * without a kernel): said, the interpreter's checks stand */
                snprintf(refused, sizeof refused, "%s%s%s", err.path,
                         err.path[0] != '\0' ? ": " : "", err.msg);
                cm_error_clear(&err);
                st = CM_OK;
            }
        }
        if (part.m != NULL) {
            sp_input_fini(&part);
        }
    }
    if (fails != NULL) {
        fclose(fails);
    }
    fail_lines(file, lines, errs);
    free(lines);
    if (st != CM_OK) {
        cmd_report(errs, json, "run", file, &err);
        return 1;
    }
    if (json) {
        fprintf(out, "{\"devices\":%u,\"checks\":%u,\"checks_failed\":%u", parted ? pd : 1u, nc,
                nf);
        if (parted && refused[0] == '\0') {
            fprintf(out, ",\"partitioned_checks\":%u,\"partitioned_checks_failed\":%u", pc, pf);
        } else if (parted) {
            cm_buf b;
            cm_buf_init(&b);
            cm_json_put_kv_str(&b, "partitioned_refused", refused);
            fprintf(out, ",%s", b.oom ? "\"partitioned_refused\":\"\"" : b.data);
            cm_buf_fini(&b);
        }
        fputs("}\n", out);
    } else if (parted && refused[0] != '\0') {
        fprintf(out, "%s: checks: %u of %u held (%s); not run partitioned: %s\n", file, nc - nf, nc,
                np > 1 ? "interpreter, every process" : "1 device, interpreter", refused);
    } else if (parted) {
        fprintf(out, "%s: checks: %u of %u held (%s); partitioned on %u devices: %u of %u held\n",
                file, nc - nf, nc, np > 1 ? "interpreter, every process" : "1 device, interpreter",
                pd, pc - pf, pc);
    } else {
        fprintf(out,
                "%s: checks: %u of %u held (1 device, interpreter; check ops are not run "
                "partitioned)\n",
                file, nc - nf, nc);
    }
    return nf == 0 && pf == 0 ? 0 : 1;
}

int cmd_run(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL;
    uint64_t devices = 0, iters = 3, seed = 1;
    ex_affinity affinity = EX_AFFINITY_AUTO;
    uint64_t top = 0;
    bool json = false, mpi = false;
    for (int i = 1; i < argc; i++) {
        bool ok = true;
        if (cmd_is_json_flag(argc, argv, &i)) {
            json = true;
        } else if (strcmp(argv[i], "--mpi") == 0) {
            mpi = true;
        } else if (strcmp(argv[i], "--affinity") == 0 || strcmp(argv[i], "--no-affinity") == 0) {
            affinity = argv[i][2] == 'n' ? EX_AFFINITY_OFF : EX_AFFINITY_ON;
        } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
            ok = cmd_parse_u64(argv[++i], &top) && top > 0 && top <= 100000;
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            ok = cmd_parse_u64(argv[++i], &devices) && devices > 0 && devices <= 4096;
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            ok = cmd_parse_u64(argv[++i], &iters) && iters > 0 && iters <= 100000;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            ok = cmd_parse_u64(argv[++i], &seed);
        } else if (strcmp(argv[i], "--help") == 0) {
            run_usage(out);
            return 0;
        } else if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
            ok = file == NULL;
            file = argv[i];
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(errs, "shardplan run: bad argument '%s'\n", argv[i]);
            run_usage(errs);
            return 2;
        }
    }
    if (file == NULL) {
        run_usage(errs);
        return 2;
    }
    if (!mpi) {
        bool handled = false;
        int crc = run_checks(file, (uint32_t)devices, json, out, errs, &handled);
        if (handled) {
            return crc;
        }
    }
    cm_error err;
    cm_error_clear(&err);
    sp_input part, ref;
    memset(&part, 0, sizeof part);
    memset(&ref, 0, sizeof ref);
    ex_mpi *mp = NULL;
    if (mpi && ex_mpi_init(NULL, NULL, &mp, &err) != CM_OK) {
        cmd_report(errs, json, "run", file, &err);
        return 1;
    }
    /* under MPI, process 0 alone reports */
    bool talk = mp == NULL || ex_mpi_rank(mp) == 0;
    if (mp != NULL ? load_mpi(mp, file, &part, &ref, &err) != CM_OK
                   : (sp_input_load(file, NULL, &part, &err) != CM_OK ||
                      sp_input_load(file, NULL, &ref, &err) != CM_OK ||
                      ex_partition(part.m, &err) != CM_OK)) {
        if (talk) {
            cmd_report(errs, json, "run", file, &err);
        }
        if (part.m != NULL) {
            sp_input_fini(&part);
        }
        if (ref.m != NULL) {
            sp_input_fini(&ref);
        }
        ex_mpi_fini(mp);
        return 1;
    }
    double *ts = cm_calloc((size_t)iters, sizeof(double)), *op_s = NULL, *net_s = NULL;
    sp_cost *cost = NULL;
    uint32_t n_dev = 0;
    if (top > 0) {
        /* per-op timers, beside the cost model's per-op figures */
        op_s = ex_timing_timers(part.m, devices, &n_dev);
        cost = ex_timing_cost(&part);
    }
    ex_check_opts o = {.n_devices = (uint32_t)devices,
                       .iters = (uint32_t)iters,
                       .seed = seed,
                       .iter_s = ts,
                       .affinity = affinity,
                       .op_s = op_s,
                       .op_from = iters > 1 ? 1u : 0u};
    /* progress on stderr once the runs take more than a second (the
     * timeline recorder's per-run hook; its events are not used here) */
    ex_trace tr;
    memset(&tr, 0, sizeof tr);
    run_prog rp = {errs, cm_now(), 0};
    cm_error te;
    cm_error_clear(&te);
    uint32_t n_trace = devices > 0 && devices <= UINT32_MAX ? (uint32_t)devices
                                                            : ex_module_devices(part.m);
    if (talk && ex_trace_init(&tr, n_trace, (uint32_t)(iters - 1u), &te) == CM_OK) {
        tr.on_run = run_progress;
        tr.ctx = &rp;
        o.trace = &tr;
    }
    ex_report r;
    memset(&r, 0, sizeof r);
    int rc = 0;
    ex_mpi_colls colls = {NULL, NULL};
    if (mp != NULL) {
        net_s = cm_calloc(part.m->n_ops + 1u, sizeof(double));
        colls.net_s = net_s;
        colls.path = cm_calloc(part.m->n_ops + 1u, sizeof(const char *));
    }
    if (ts == NULL || (top > 0 && op_s == NULL) ||
        (mp != NULL && (net_s == NULL || colls.path == NULL))) {
        cm_error_set(&err, CM_ENOMEM, NULL,
                     ts == NULL ? "out of memory" : "out of memory (or too many ops for --ops)");
    }
    cm_status st = err.code;
    if (mp != NULL) {
        st = ex_mpi_agree(mp, st, &err);
        if (st == CM_OK) {
            st = ex_mpi_check_modules(mp, part.m, ref.m, &o, &r, &colls, &err);
        }
    } else if (st == CM_OK) {
        st = ex_check_modules(part.m, ref.m, &o, &r, &err);
    }
    bool timed = top > 0 && op_s != NULL && r.n_devices == n_dev;
    if (st != CM_OK) {
        if (talk) {
            cmd_report(errs, json, "run", file, &err);
        }
        rc = 1;
    } else if (!talk) {
        rc = 0;
    } else if (json) {
        cm_buf extra;
        cm_buf_init(&extra);
        if (mp != NULL && ex_mpi_colls_json(mp, part.m, timed ? op_s : NULL, &colls, n_dev,
                                            iters - o.op_from, &extra) != CM_OK) {
            extra.oom = true;
        }
        rc = write_json(out, errs, &r, ts, iters, seed, timed,
                        &(ex_timing){part.m, part.g, cost, op_s, n_dev, iters - o.op_from}, &extra);
        cm_buf_fini(&extra);
    } else {
        fprintf(out, "%s: %u devices, %llu iterations, seed %llu\n", file, r.n_devices,
                (unsigned long long)iters, (unsigned long long)seed);
        for (uint64_t i = 0; i < iters; i++) {
            fprintf(out, "iter %llu: %.3f ms", (unsigned long long)i + 1, ts[i] * 1e3);
            if (r.flops > 0 && ts[i] > 0) {
                fprintf(out, ", %.2f GFLOP/s", r.flops / ts[i] * 1e-9);
            }
            fputc('\n', out);
        }
        qsort(ts, (size_t)iters, sizeof(double), cmd_double_cmp);
        double med = ts[iters / 2];
        fprintf(out, "median: %.3f ms", med * 1e3);
        if (r.flops > 0 && med > 0) {
            fprintf(out, ", %.2f GFLOP/s (%.3g FLOP per run, cost model)", r.flops / med * 1e-9,
                    r.flops);
        }
        if (r.ref_processes > 0) {
            fprintf(out, "; reference (interpreter, %u processes): %.3f ms\n", r.ref_processes,
                    r.ref_s * 1e3);
        } else {
            fprintf(out, "; reference (1 device, unpartitioned): %.3f ms\n", r.ref_s * 1e3);
        }
        if (r.mm.match) {
            fprintf(out, "numerics: match (max abs diff %.3g)\n", r.mm.max_abs_diff);
        } else {
            fprintf(out,
                    "numerics: MISMATCH at result %u index %zu %s: expected %.9g, got %.9g "
                    "(tolerance %.3g)\n",
                    r.mm.result, r.mm.index, r.mm.where, r.mm.expected, r.mm.got, r.mm.tol);
            rc = 1;
        }
        if (op_s != NULL && r.n_devices == n_dev) {
            ex_timing t = {part.m, part.g, cost, op_s, n_dev, iters - o.op_from};
            if (ex_timing_text(&t, (uint32_t)top, out) != CM_OK) {
                fprintf(errs, "shardplan run: out of memory\n");
                rc = 1;
            }
        }
        if (mp != NULL) {
            mpi_report(mp, part.m, timed ? op_s : NULL, &colls, r.n_devices, iters - o.op_from,
                       out);
        }
    }
    fflush(out);
    ex_trace_fini(&tr);
    ex_mpi_fini(mp);
    sp_cost_destroy(cost);
    cm_free(net_s);
    cm_free(colls.path);
    cm_free(op_s);
    cm_free(ts);
    sp_input_fini(&part);
    sp_input_fini(&ref);
    return rc;
}
