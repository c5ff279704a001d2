/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan calibrate`, this machine measured as the executor uses it
 * and written as a CPU device profile (executor/ex_calib.h), read back with
 * the cost model's profile reader before it is written; --rank checks that
 * the cost model ranks the benchmark suite's plans as the executor runs them
 * and predicts each step within 15%, calibrating beside every run.
 * With --mpi, under mpirun on 2 or more hosts, every host calibrates at once
 * (the profile takes the slowest), and the network between
 * processes 0 and 1 is measured too (executor/ex_mpi.h) and written as the
 * link of the mesh axes --axes names (those that cross hosts); process 0
 * reports. */
#include "cmd.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "cmd_util.h"
#include "ex_calib.h"
#include "ex_mpi.h"
#include "sp_profile_json.h"

static void calib_usage(FILE *f)
{
    fputs("usage: shardplan calibrate [--out FILE] [--devices N] [--rank] [--json]\n"
          "                           [--mpi --axes AXIS[,AXIS...]]\n"
          "  writes the profile (JSON) to FILE, else to stdout; with --out, --json prints the\n"
          "  measured figures as one JSON object instead of a sentence, and the --rank report\n"
          "  goes to stderr so stdout stays JSON\n"
          "  --mpi: under mpirun on 2+ hosts (N devices per host), also the network between\n"
          "  two hosts (as an all-reduce round the executor's ring gets it), written as the\n"
          "  link of the mesh axes --axes names (those that cross hosts): per device, the\n"
          "  host's bandwidth shared by its N devices\n",
          f);
}

/* The profile text in with a link for each axis of the comma-separated
 * list axes (the inter-host one: bandwidth bytes/s per host shared by its
 * per_host devices, latency s) added before "default" in its "links"
 * object, into out. false when the text has no links object or an axis
 * name is not a plain name (letters, digits, '_'). */
static bool add_axis_links(const cm_buf *in, const char *axes, double bandwidth, double latency,
                           uint32_t per_host, cm_buf *out)
{
    const char *at = strstr(in->data, "\"links\": {\n");
    if (at == NULL) {
        return false;
    }
    at += strlen("\"links\": {\n");
    cm_buf_append(out, in->data, (size_t)(at - in->data));
    const char *p = axes;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= 64) {
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            char ch = p[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_')) {
                return false;
            }
        }
        cm_buf_printf(out,
                      "  \"%.*s\": {\n   \"bandwidth\": %.4g,\n   \"latency\": %.4g,\n"
                      "   \"notes\": \"across hosts (shardplan calibrate --mpi): the bandwidth "
                      "each way of an all-reduce between two hosts round the executor's ring "
                      "(bytes on the wire per second; its groups all at once), shared by the "
                      "%u devices of a host; latency per step (two for two hosts): half of what "
                      "each all-reduce takes beyond its bytes, at least half an MPI round "
                      "trip\"\n  },\n",
                      (int)n, p, bandwidth / (double)per_host, latency, per_host);
        p += n;
        p += *p == ',';
    }
    cm_buf_puts(out, at);
    return !out->oom;
}

/* calibrate's progress on stderr: each step once the run has taken more than
 * a second (a quick run stays quiet). */
typedef struct calib_prog {
    FILE *errs;
    double t0;
} calib_prog;

static void calib_progress(void *ctx, const char *step, int k, int n)
{
    calib_prog *p = ctx;
    double t = cm_now() - p->t0;
    if (t > 1.0) {
        fprintf(p->errs, "shardplan calibrate: %.1f s, step %d of %d: %s\n", t, k, n, step);
    }
}

/* Under MPI every process calibrates its own host at the same time, each
 * step begun together (a barrier before it), so that each host's workers
 * compute while the others' do, as in a run: where hosts share anything
 * (cores here, where the "hosts" are namespaces of one machine; a memory
 * system or a switch elsewhere) the profile sees the sharing a run gets. */
typedef struct calib_sync {
    calib_prog prog;
    ex_mpi *mp;
    int done; /* barriers this process has passed */
} calib_sync;

static void calib_progress_mpi(void *ctx, const char *step, int k, int n)
{
    calib_sync *s = ctx;
    (void)ex_mpi_agree(s->mp, CM_OK, NULL);
    s->done++;
    if (ex_mpi_rank(s->mp) == 0) {
        calib_progress(&s->prog, step, k, n);
    }
}

/* The figures of ex_calib gathered per host, in this order. */
enum {
    FIG_F32,
    FIG_F64,
    FIG_MEM,
    FIG_TRAFFIC,
    FIG_LINK_BW,
    FIG_LINK_LAT,
    FIG_MEM_BYTES,
    FIG_EXP,
    FIG_GEMM,
    N_FIGS = FIG_GEMM + EX_CALIB_GEMM
};

static void calib_figs(const ex_calib *c, double *f)
{
    f[FIG_F32] = c->f32_flops;
    f[FIG_F64] = c->f64_flops;
    f[FIG_MEM] = c->mem_bandwidth;
    f[FIG_TRAFFIC] = c->mem_traffic;
    f[FIG_LINK_BW] = c->link_bandwidth;
    f[FIG_LINK_LAT] = c->link_latency;
    f[FIG_MEM_BYTES] = c->mem_bytes;
    f[FIG_EXP] = c->transcendentals;
    for (uint32_t i = 0; i < EX_CALIB_GEMM; i++) {
        f[FIG_GEMM + i] = i < c->n_gemm ? c->gemm_flops[i] : 0;
    }
}

/* c becomes the slowest host's figures of the n_hosts in all (N_FIGS
 * each): a step of a run across hosts waits for the slowest at every
 * collective, so the profile, one for every device, takes each rate's
 * minimum and the latency's maximum (and the smallest memory). */
static void calib_take_slowest(ex_calib *c, const double *all, uint32_t n_hosts)
{
    double f[N_FIGS];
    memcpy(f, all, sizeof f);
    for (uint32_t h = 1; h < n_hosts; h++) {
        const double *g = all + (size_t)h * N_FIGS;
        for (int i = 0; i < N_FIGS; i++) {
            bool worst_is_max = i == FIG_LINK_LAT;
            if (worst_is_max ? g[i] > f[i] : g[i] < f[i]) {
                f[i] = g[i];
            }
        }
    }
    c->f32_flops = f[FIG_F32];
    c->f64_flops = f[FIG_F64];
    c->mem_bandwidth = f[FIG_MEM];
    c->mem_traffic = f[FIG_TRAFFIC];
    c->link_bandwidth = f[FIG_LINK_BW];
    c->link_latency = f[FIG_LINK_LAT];
    c->mem_bytes = f[FIG_MEM_BYTES];
    c->transcendentals = f[FIG_EXP];
    for (uint32_t i = 0; i < c->n_gemm && i < EX_CALIB_GEMM; i++) {
        c->gemm_flops[i] = f[FIG_GEMM + i];
    }
}

/* Each host's figures (N_FIGS per process in all, all calibrated at once)
 * as lines of text (txt) and a JSON array (js), process 0's report. */
static void host_figs(const ex_mpi *mp, const double *all, uint32_t n_hosts, cm_buf *txt,
                      cm_buf *js)
{
    cm_buf_putc(js, '[');
    for (uint32_t h = 0; h < n_hosts; h++) {
        const double *f = all + (size_t)h * N_FIGS;
        cm_buf_printf(txt,
                      "  process %u on %s (all hosts at once): f32 %.1f GFLOP/s per worker, "
                      "exp %.3g/s, memcpy %.2f GB/s, link %.2f GB/s per worker\n",
                      h, ex_mpi_host(mp, h), f[FIG_F32] * 1e-9, f[FIG_EXP], f[FIG_MEM] * 1e-9,
                      f[FIG_LINK_BW] * 1e-9);
        cm_buf_puts(js, h > 0 ? ",{" : "{");
        cm_json_put_kv_str(js, "host", ex_mpi_host(mp, h));
        cm_json_put_kv_f64(js, "f32_flop_per_s", f[FIG_F32]);
        cm_json_put_kv_f64(js, "exp_per_s", f[FIG_EXP]);
        cm_json_put_kv_f64(js, "memcpy_bytes_per_s", f[FIG_MEM]);
        cm_json_put_kv_f64(js, "link_bytes_per_s", f[FIG_LINK_BW]);
        cm_json_put_kv_f64(js, "link_latency_s", f[FIG_LINK_LAT]);
        cm_buf_putc(js, '}');
    }
    cm_buf_putc(js, ']');
}

/* Writes the profile of c (with the links of axes, when not NULL) to path
 * (stdout when NULL) and reports it, or st's error; the exit status. */
static int calib_write(const ex_calib *c, cm_status st, cm_error *errp, const char *path, bool json,
                       const char *axes, const ex_mpi_link *net, const cm_buf *hosts_txt,
                       const cm_buf *hosts_json, FILE *out, FILE *errs)
{
    cm_error err = *errp;
    if (st != CM_OK) {
        fprintf(errs, "shardplan calibrate: %s\n", err.msg);
        return 1;
    }
    if (hosts_txt->oom || hosts_json->oom) {
        fprintf(errs, "shardplan calibrate: out of memory\n");
        return 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    ex_calib_profile_json(c, axes != NULL ? "cpu-calibrated-mpi" : "cpu-calibrated", &b);
    if (axes != NULL) {
        cm_buf with;
        cm_buf_init(&with);
        /* the cost model charges an all-reduce between two 2 steps of
         * latency: the fixed part of the measured ones is two steps */
        double lat =
            net->allreduce_fixed / 2 > net->latency ? net->allreduce_fixed / 2 : net->latency;
        if (!add_axis_links(&b, axes, net->allreduce_bw, lat, c->n_devices, &with)) {
            fprintf(errs,
                    "shardplan calibrate: bad --axes '%s' (comma-separated mesh axis names)\n",
                    axes);
            cm_buf_fini(&with);
            cm_buf_fini(&b);
            return 2;
        }
        cm_buf_fini(&b);
        b = with;
    }
    sp_profile prof;
    int rc = 0;
    if (b.oom) {
        fprintf(errs, "shardplan calibrate: out of memory\n");
        rc = 1;
    } else if (sp_profile_decode(b.data, b.len, &prof, &err) != CM_OK) {
        fprintf(errs, "shardplan calibrate: the written profile does not read back: %s %s\n",
                err.path, err.msg);
        rc = 1;
    } else if (path == NULL) {
        fputs(b.data, out);
    } else {
        FILE *f = fopen(path, "w");
        if (f == NULL || fputs(b.data, f) == EOF || fclose(f) != 0) {
            fprintf(errs, "shardplan calibrate: cannot write %s\n", path);
            rc = 1;
        } else if (json) {
            cm_buf j;
            cm_buf_init(&j);
            cm_buf_putc(&j, '{');
            cm_json_put_kv_str(&j, "path", path);
            cm_json_put_kv_u64(&j, "workers", c->n_devices);
            cm_json_put_kv_f64(&j, "f32_flop_per_s", c->f32_flops);
            cm_json_put_kv_f64(&j, "memcpy_bytes_per_s", c->mem_bandwidth);
            cm_json_put_kv_f64(&j, "link_bytes_per_s", c->link_bandwidth);
            cm_json_put_kv_f64(&j, "link_latency_s", c->link_latency);
            if (axes != NULL) {
                cm_json_put_kv_str(&j, "axes", axes);
                cm_json_put_key(&j, "hosts");
                cm_buf_append(&j, hosts_json->data, hosts_json->len);
                cm_json_put_kv_f64(&j, "network_bytes_per_s", net->allreduce_bw);
                cm_json_put_kv_f64(&j, "network_stream_bytes_per_s", net->stream_bw);
                cm_json_put_kv_f64(&j, "network_latency_s", net->latency);
                cm_json_put_kv_f64(&j, "network_allreduce_fixed_s", net->allreduce_fixed);
            }
            cm_buf_puts(&j, "}\n");
            rc = cmd_write_out(&j, "calibrate", out, errs);
            cm_buf_fini(&j);
        } else {
            fprintf(out,
                    "%s: f32 %.1f GFLOP/s per worker (%u workers), memcpy %.2f GB/s, link "
                    "%.2f GB/s per worker, latency %.1f us\n",
                    path, c->f32_flops * 1e-9, c->n_devices, c->mem_bandwidth * 1e-9,
                    c->link_bandwidth * 1e-9, c->link_latency * 1e6);
            if (axes != NULL) {
                fprintf(out,
                        "  across hosts (axes %s): %.3f GB/s between two hosts (all-reduce; "
                        "a stream each way %.3f), %.3f GB/s per device, latency %.1f us "
                        "(all-reduce fixed part %.2f ms; MPI %.1f us)\n",
                        axes, net->allreduce_bw * 1e-9, net->stream_bw * 1e-9,
                        net->allreduce_bw / (double)c->n_devices * 1e-9,
                        (net->allreduce_fixed / 2 > net->latency ? net->allreduce_fixed / 2
                                                                 : net->latency) *
                            1e6,
                        net->allreduce_fixed * 1e3, net->latency * 1e6);
                fputs(hosts_txt->data != NULL ? hosts_txt->data : "", out);
            }
        }
    }
    cm_buf_fini(&b);
    return rc;
}

int cmd_calibrate(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *path = NULL;
    uint64_t devices = 8;
    bool rank = false, json = false, mpi = false;
    const char *axes = NULL;
    for (int i = 1; i < argc; i++) {
        if (cmd_is_json_flag(argc, argv, &i)) {
            json = true;
        } else if (strcmp(argv[i], "--mpi") == 0) {
            mpi = true;
        } else if (strcmp(argv[i], "--axes") == 0 && i + 1 < argc) {
            axes = argv[++i];
        } else if (strcmp(argv[i], "--rank") == 0) {
            rank = true;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            if (!cmd_parse_u64(s, &devices) || devices == 0 || devices > 256) {
                fprintf(errs, "shardplan calibrate: bad device count '%s'\n", s);
                calib_usage(errs);
                return 2;
            }
        } else if (strcmp(argv[i], "--help") == 0) {
            calib_usage(out);
            return 0;
        } else {
            fprintf(errs, "shardplan calibrate: bad argument '%s'\n", argv[i]);
            calib_usage(errs);
            return 2;
        }
    }
    if (mpi != (axes != NULL)) {
        fprintf(errs, "shardplan calibrate: --mpi and --axes go together\n");
        calib_usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    ex_mpi *mp = NULL;
    if (mpi && ex_mpi_init(NULL, NULL, &mp, &err) != CM_OK) {
        fprintf(errs, "shardplan calibrate: %s\n", err.msg);
        return 1;
    }
    /* under MPI: every process measures its host at once, then 0 and 1 the
     * network */
    calib_prog cp = {errs, cm_now()};
    ex_calib c;
    memset(&c, 0, sizeof c);
    ex_mpi_link net;
    memset(&net, 0, sizeof net);
    cm_status st = CM_OK;
    uint32_t n_hosts = mp == NULL ? 1 : ex_mpi_size(mp);
    double *per_host = NULL;      /* N_FIGS per process */
    cm_buf hosts_txt, hosts_json; /* process 0's per-host report */
    cm_buf_init(&hosts_txt);
    cm_buf_init(&hosts_json);
    if (mp == NULL) {
        st = ex_calib_measure((uint32_t)devices, &c, calib_progress, &cp, &err);
    } else {
        calib_sync cs = {cp, mp, 0};
        st = ex_calib_measure((uint32_t)devices, &c, calib_progress_mpi, &cs, &err);
        /* one that failed part-way still meets the others at the barriers
         * they have left (ex_calib_measure tells EX_CALIB_STEPS steps) */
        while (cs.done < EX_CALIB_STEPS) {
            (void)ex_mpi_agree(mp, CM_OK, NULL);
            cs.done++;
        }
        st = ex_mpi_agree(mp, st, &err);
        per_host = cm_calloc((size_t)n_hosts * N_FIGS, sizeof(double));
        st = ex_mpi_agree(mp, per_host == NULL && st == CM_OK ? cm_error_oom(&err) : st, &err);
        if (st == CM_OK) {
            double mine[N_FIGS];
            calib_figs(&c, mine);
            st = ex_mpi_allgather_f64(mp, mine, N_FIGS, per_host, &err);
        }
        if (st == CM_OK) {
            calib_take_slowest(&c, per_host, n_hosts);
            /* the devices of a host each in a group across hosts, all at
             * once, as a data axis's all-reduces go */
            uint32_t groups = c.n_devices < 64u ? c.n_devices : 64u;
            st = ex_mpi_link_measure(mp, (size_t)64 << 20, groups > 0 ? groups : 1u, &net, &err);
        }
        bool talk = ex_mpi_rank(mp) == 0;
        if (talk && st == CM_OK) {
            host_figs(mp, per_host, n_hosts, &hosts_txt, &hosts_json);
        }
        cm_free(per_host);
        ex_mpi_fini(mp);
        if (!talk) {
            return st == CM_OK ? 0 : 1;
        }
    }
    int rc = calib_write(&c, st, &err, path, json, axes, &net, &hosts_txt, &hosts_json, out, errs);
    cm_buf_fini(&hosts_txt);
    cm_buf_fini(&hosts_json);
    if (rc == 0 && rank) {
        /* The suite runs on 8 devices whatever --devices says; each of its
         * runs is predicted under a calibration taken just before it, as
         * the machine is shared and its load comes and goes. */
        ex_rank r;
        if (ex_calib_rank(NULL, 5, &r, &err) != CM_OK) {
            fprintf(errs, "shardplan calibrate: ranking: %s %s\n", err.path, err.msg);
            return 1;
        }
        ex_calib_rank_print(&r, path == NULL || json ? errs : out);
        rc = r.pass && r.accurate ? 0 : 1;
    }
    return rc;
}
