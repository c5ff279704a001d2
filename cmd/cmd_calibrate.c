/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan calibrate`, this machine measured as the executor uses it
 * and written as a CPU device profile (executor/ex_calib.h), read back with
 * the cost model's profile reader before it is written; --rank checks that
 * the profile ranks the benchmark suite's plans as the executor runs them. */
#include "cmd.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "cmd_util.h"
#include "ex_calib.h"
#include "sp_profile_json.h"

static void calib_usage(FILE *f)
{
    fputs("usage: shardplan calibrate [--out FILE] [--devices N] [--rank] [--json]\n"
          "  writes the profile (JSON) to FILE, else to stdout; with --out, --json prints the\n"
          "  measured figures as one JSON object instead of a sentence, and the --rank report\n"
          "  goes to stderr so stdout stays JSON\n",
          f);
}

int cmd_calibrate(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *path = NULL;
    uint64_t devices = 8;
    bool rank = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (cmd_is_json_flag(argc, argv, &i)) {
            json = true;
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
    cm_error err;
    cm_error_clear(&err);
    ex_calib c;
    if (ex_calib_measure((uint32_t)devices, &c, &err) != CM_OK) {
        fprintf(errs, "shardplan calibrate: %s\n", err.msg);
        return 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    ex_calib_profile_json(&c, "cpu-calibrated", &b);
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
            cm_json_put_kv_u64(&j, "workers", c.n_devices);
            cm_json_put_kv_f64(&j, "f32_flop_per_s", c.f32_flops);
            cm_json_put_kv_f64(&j, "memcpy_bytes_per_s", c.mem_bandwidth);
            cm_json_put_kv_f64(&j, "link_bytes_per_s", c.link_bandwidth);
            cm_json_put_kv_f64(&j, "link_latency_s", c.link_latency);
            cm_buf_puts(&j, "}\n");
            rc = cmd_write_out(&j, "calibrate", out, errs);
            cm_buf_fini(&j);
        } else {
            fprintf(out,
                    "%s: f32 %.1f GFLOP/s per worker (%u workers), memcpy %.2f GB/s, link "
                    "%.2f GB/s per worker, latency %.1f us\n",
                    path, c.f32_flops * 1e-9, c.n_devices, c.mem_bandwidth * 1e-9,
                    c.link_bandwidth * 1e-9, c.link_latency * 1e6);
        }
    }
    cm_buf_fini(&b);
    if (rc == 0 && rank) {
        /* The suite runs on 8 devices whatever --devices says. */
        ex_rank r;
        if (ex_calib_rank(&prof, 3, &r, &err) != CM_OK) {
            fprintf(errs, "shardplan calibrate: ranking: %s %s\n", err.path, err.msg);
            return 1;
        }
        ex_calib_rank_print(&r, path == NULL || json ? errs : out);
        rc = r.pass ? 0 : 1;
    }
    return rc;
}
