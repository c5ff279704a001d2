/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan cost`, the per-device cost of a model (planner/cost/sp_cost.h)
 * read and planned through the input loader (planner/doc/sp_input.h). */
#include "cmd.h"

#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_cost.h"
#include "sp_input.h"
#include "sp_profile_json.h"

static void cost_usage(FILE *f)
{
    fputs("usage: shardplan cost GRAPH.json|MODULE.mlir [--pass NAME] [--rules FILE] [--partition]\n"
          "                      [--profile NAME|FILE] [--overlap F]\n"
          "                      [--mode auto|explicit|implied] [--json]\n"
          "  (--format text|json is the older spelling of --json)\n",
          f);
}

int cmd_cost(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL, *format = "text", *prof = "cpu-local", *mode = "auto";
    double overlap = -1;
    bool partition = false;
    cmd_input ci;
    cmd_input_init(&ci);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cmd_is_json_flag(argc, argv, &i)) {
            format = "json";
            continue;
        }
        int took = cmd_input_option(argc, argv, &i, &ci, "cost", errs);
        if (took != 0) {
            if (took < 0) {
                cmd_input_fini(&ci);
                return 2;
            }
            continue;
        }
        const char **dst = strcmp(a, "--profile") == 0  ? &prof
                           : strcmp(a, "--format") == 0 ? &format
                           : strcmp(a, "--mode") == 0   ? &mode
                                                        : NULL;
        if (dst != NULL && i + 1 < argc) {
            *dst = argv[++i];
        } else if (strcmp(a, "--overlap") == 0 && i + 1 < argc) {
            char *end;
            overlap = strtod(argv[++i], &end);
            if (*end != '\0' || !(overlap >= 0 && overlap <= 1)) {
                fprintf(errs, "shardplan cost: --overlap takes a fraction in [0, 1]\n");
                return 2;
            }
        } else if (strcmp(a, "--partition") == 0) {
            partition = true;
        } else if (strcmp(a, "--help") == 0) {
            cost_usage(out);
            cmd_input_fini(&ci);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan cost: unknown option '%s'\n", a);
            cost_usage(errs);
            cmd_input_fini(&ci);
            return 2;
        } else if (file == NULL) {
            file = a;
        } else {
            fprintf(errs, "shardplan cost: more than one input file\n");
            cmd_input_fini(&ci);
            return 2;
        }
    }
    sp_cost_opts o;
    sp_cost_opts_init(&o);
    o.overlap = overlap;
    if (strcmp(mode, "auto") == 0) {
        o.mode = SP_COST_AUTO;
    } else if (strcmp(mode, "explicit") == 0) {
        o.mode = SP_COST_EXPLICIT;
    } else if (strcmp(mode, "implied") == 0) {
        o.mode = SP_COST_IMPLIED;
    } else {
        file = NULL;
    }
    if (file == NULL || (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)) {
        cost_usage(errs);
        cmd_input_fini(&ci);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_profile p;
    sp_input in;
    memset(&in, 0, sizeof in);
    sp_cost *c = NULL;
    cm_buf b;
    cm_buf_init(&b);
    if (sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, strcmp(format, "json") == 0, "cost", "profile", &err);
        rc = 1;
        goto out;
    }
    o.profile = &p;
    if (sp_input_load(file, &ci.io, &in, &err) != CM_OK ||
        (partition && sp_input_partition(&in, &err) != CM_OK)) {
        cmd_report(errs, strcmp(format, "json") == 0, "cost", file, &err);
        rc = 1;
        goto out;
    }
    if (in.g != NULL) {
        o.value_names = sp_graph_value_names(in.g, &o.n_value_names);
    }
    o.custom = in.custom;
    if (sp_cost_compute(in.m, &o, &c, &err) != CM_OK) {
        cmd_report(errs, strcmp(format, "json") == 0, "cost", file, &err);
        rc = 1;
        goto out;
    }
    if (strcmp(format, "json") == 0) {
        sp_cost_write_json(c, in.m, &b);
        cm_buf_putc(&b, '\n');
    } else {
        sp_cost_write_text(c, in.m, &b);
    }
    rc = cmd_write_out(&b, "cost", out, errs);
out:
    cm_buf_fini(&b);
    sp_cost_destroy(c);
    sp_input_fini(&in);
    cmd_input_fini(&ci);
    return rc;
}
