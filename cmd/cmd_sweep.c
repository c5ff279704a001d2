/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan sweep`, the transformer template over every data x model
 * mesh and strategy, or the user's FILE over every mesh of a device count
 * (its mesh's axes kept, sizes redistributed), or a Flax graph's
 * logical-axis-rule variants (--logical-rules), ranked
 * (planner/advise/sp_sweep.h). */
#include "cmd.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_example.h"
#include "sp_profile_json.h"
#include "sp_sweep.h"

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

static int run_sweep(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    const char *prof = "cpu-local", *file = NULL, *mesh = NULL;
    bool json = false, devices_set = false, logical = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        bool ok = true;
        int took = cmd_input_option(argc, argv, &i, ci, "sweep", errs);
        if (took != 0) {
            if (took < 0) {
                return 2;
            }
            continue;
        }
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (file != NULL) {
                fprintf(errs, "shardplan sweep: one FILE only ('%s' and '%s')\n", file, a);
                return 2;
            }
            file = a;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        }
        if (strcmp(a, "--logical-rules") == 0) {
            logical = true;
            continue;
        }
        if (strcmp(a, "--inference") == 0) {
            o.train = false;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            fputs("usage: shardplan sweep [--devices N] [--layers N] [--d-model D] [--heads H]\n"
                  "        [--seq S] [--batch B] [--inference] [--strategies dp,fsdp,tp,dp+tp]\n"
                  "        [--threads T] [--jobs N] [--profile NAME|FILE] [--json]\n"
                  "       shardplan sweep FILE [--devices N] [--mesh NAME] [--pass NAME]\n"
                  "        [--rules FILE] [--threads T] [--profile NAME|FILE] [--json]\n"
                  "       shardplan sweep FILE.json --logical-rules [--mesh NAME] [--pass NAME]\n"
                  "        [--rules FILE] [--threads T] [--profile NAME|FILE] [--json]\n"
                  "  FILE: a graph document or MLIR module, swept over every mesh of N devices\n"
                  "  (default: its mesh's own count) with its mesh's axis names and order;\n"
                  "  --logical-rules: a Flax graph document's logical_axis_rules varied instead\n"
                  "  (each logical axis name on each mesh axis or none), its mesh kept\n",
                  out);
            return 0;
        }
        if (val == NULL) {
            ok = false;
        } else if (strcmp(a, "--devices") == 0) {
            ok = parse_i64(val, 1, 65536, &o.devices);
            devices_set = true;
        } else if (strcmp(a, "--mesh") == 0) {
            mesh = val;
        } else if (strcmp(a, "--layers") == 0) {
            ok = parse_i64(val, 1, 100000, &n);
            o.layers = (uint32_t)n;
        } else if (strcmp(a, "--d-model") == 0) {
            ok = parse_i64(val, 1, 1 << 20, &o.d_model);
        } else if (strcmp(a, "--heads") == 0) {
            ok = parse_i64(val, 1, 1 << 20, &o.heads);
        } else if (strcmp(a, "--seq") == 0) {
            ok = parse_i64(val, 1, 1 << 20, &o.seq);
        } else if (strcmp(a, "--batch") == 0) {
            ok = parse_i64(val, 1, 1 << 20, &o.batch);
        } else if (strcmp(a, "--threads") == 0) {
            ok = parse_i64(val, 1, 64, &n);
            o.threads = (uint32_t)n;
        } else if (strcmp(a, "--jobs") == 0) {
            ok = parse_i64(val, 1, 1000000, &n);
            o.jobs = (uint32_t)n;
        } else if (strcmp(a, "--profile") == 0) {
            prof = val;
        } else if (strcmp(a, "--strategies") == 0) {
            o.strategies = 0;
            char buf[64];
            snprintf(buf, sizeof buf, "%s", val);
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t != NULL && ok;
                 t = strtok_r(NULL, ",", &save)) {
                sp_example_strategy k = SP_EXAMPLE_DP;
                ok = sp_example_strategy_parse(t, &k);
                o.strategies |= 1u << ((unsigned)k & 3);
            }
        } else {
            fprintf(errs, "shardplan sweep: unknown option '%s'\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(errs, "shardplan sweep: bad value for %s\n", a);
            return 2;
        }
        i++;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_profile p;
    if (sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, json, "sweep", "profile", &err);
        return 1;
    }
    o.profile = &p;
    sp_sweep_result res;
    if (file == NULL && (mesh != NULL || logical)) {
        fprintf(errs, "shardplan sweep: %s needs a FILE\n", logical ? "--logical-rules" : "--mesh");
        return 2;
    }
    if (logical && devices_set) {
        fprintf(errs, "shardplan sweep: --logical-rules keeps the mesh: no --devices\n");
        return 2;
    }
    if (file != NULL) {
        if (!devices_set) {
            o.devices = 0; /* the mesh's own count */
        }
        char *text = NULL;
        size_t len = 0;
        if (cm_file_read(file, &text, &len, &err) != CM_OK ||
            (logical ? sp_sweep_rules_run(text, len, &ci->io, mesh, &o, &res, &err)
                     : sp_sweep_module_run(text, len, &ci->io, mesh, &o, &res, &err)) != CM_OK) {
            cmd_report(errs, json, "sweep", file, &err);
            cm_free(text);
            return 1;
        }
        cm_free(text);
    } else if (sp_sweep_run(&o, &res, &err) != CM_OK) {
        fprintf(errs, "shardplan sweep: %s%s%s\n", err.path, err.path[0] ? ": " : "", err.msg);
        return 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    if (json) {
        sp_sweep_write_json(&res, &b);
        cm_buf_putc(&b, '\n');
    } else {
        sp_sweep_write_text(&res, &b);
    }
    int rc = cmd_write_out(&b, "sweep", out, errs);
    cm_buf_fini(&b);
    sp_sweep_result_fini(&res);
    return rc;
}

int cmd_sweep(int argc, char **argv, FILE *out, FILE *errs)
{
    return cmd_input_run(argc, argv, out, errs, run_sweep);
}
