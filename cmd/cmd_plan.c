/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan plan`, the plan document of a model (planner/doc/sp_plan_json.h).
 * The input is read through the input loader (planner/doc/sp_input.h) without
 * propagating: sp_plan_run hashes the module as given, then runs the pass. */
#include "cmd.h"

#include <string.h>

#include "cm.h"
#include "sp_input.h"
#include "sp_mlir.h"
#include "sp_plan_json.h"

static void report(FILE *errs, const char *file, const cm_error *e)
{
    fprintf(errs, "shardplan plan: %s: %s%s%s: %s\n", file, cm_status_name(e->code),
            e->path[0] != '\0' ? " at " : "", e->path, e->msg);
}

int cmd_plan(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL, *format = "json";
    sp_plan_opts o;
    sp_plan_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--pass") == 0 || strcmp(a, "--format") == 0) && i + 1 < argc) {
            if (strcmp(a, "--pass") == 0 && !sp_plan_pass_parse(argv[i + 1], &o.pass)) {
                fprintf(errs, "shardplan plan: unknown pass '%s'\n", argv[i + 1]);
                return 2;
            }
            if (strcmp(a, "--format") == 0) {
                format = argv[i + 1];
            }
            i++;
        } else if (strncmp(a, "--pass=", 7) == 0) {
            if (!sp_plan_pass_parse(a + 7, &o.pass)) {
                fprintf(errs, "shardplan plan: unknown pass '%s'\n", a + 7);
                return 2;
            }
        } else if (strncmp(a, "--format=", 9) == 0) {
            format = a + 9;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan plan: unknown option '%s'\n", a);
            return 2;
        } else if (file == NULL) {
            file = a;
        } else {
            fprintf(errs, "shardplan plan: more than one input file\n");
            return 2;
        }
    }
    if (file == NULL || (strcmp(format, "json") != 0 && strcmp(format, "mlir") != 0)) {
        fprintf(errs, "usage: shardplan plan GRAPH.json|MODULE.mlir [--pass NAME] "
                      "[--format json|mlir]\n");
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.pass = o.pass;
    io.propagate = false; /* sp_plan_run hashes the input first, then propagates */
    sp_input in;
    if (sp_input_load(file, &io, &in, &err) != CM_OK) {
        report(errs, file, &err);
        return 1;
    }
    o.graph = in.g;
    o.custom = in.custom;
    o.functions_form = in.functions_form;
    int rc = 0;
    cm_buf b;
    cm_buf_init(&b);
    cm_status st = sp_plan_run(in.m, &o, &b, &err);
    if (st == CM_OK && strcmp(format, "mlir") == 0) {
        cm_buf_reset(&b);
        sp_print_opts popts = {false, false};
        sp_mlir_print(in.m, &popts, &b);
        if (b.oom) {
            st = cm_error_set(&err, CM_ENOMEM, NULL, "out of memory");
        }
    }
    if (st != CM_OK) {
        report(errs, file, &err);
        rc = 1;
    } else if (b.len > 0 && fwrite(b.data, 1, b.len, out) != b.len) {
        fprintf(errs, "shardplan plan: write error\n");
        rc = 1;
    }
    cm_buf_fini(&b);
    sp_input_fini(&in);
    return rc;
}
