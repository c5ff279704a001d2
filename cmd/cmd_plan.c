/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan plan`, the plan document of a model (planner/doc/sp_plan_json.h)
 * through the plan object (planner/doc/sp_plan.h), as POST /v1/plans makes it:
 * the input read with its pass and rules, hashed, then propagated once. */
#include "cmd.h"

#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_input.h"
#include "sp_mlir.h"
#include "sp_plan.h"


static void usage(FILE *f)
{
    fputs("usage: shardplan plan GRAPH.json|MODULE.mlir [--pass NAME] [--rules FILE] "
          "[--json|--mlir]\n"
          "  writes the plan document (--json, the default) or the propagated module (--mlir);\n"
          "  --format json|mlir is the older spelling\n",
          f);
}

static int run_plan(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci)
{
    const char *file = NULL, *format = "json";
    bool json = false; /* --json given: errors as JSON too */
    if (cmd_wants_help(argc, argv)) {
        usage(out);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int took = cmd_input_option(argc, argv, &i, ci, "plan", errs);
        if (took != 0) {
            if (took < 0) {
                return 2;
            }
            continue;
        }
        if (cmd_is_json_flag(argc, argv, &i)) {
            format = "json";
            json = true;
        } else if (strcmp(a, "--mlir") == 0) {
            format = "mlir";
        } else if (strcmp(a, "--format") == 0 && i + 1 < argc) {
            format = argv[++i];
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
        usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    char *text = NULL;
    size_t len = 0;
    sp_plan *plan = NULL;
    if (cm_file_read(file, &text, &len, &err) != CM_OK ||
        sp_plan_create(text, len, &ci->io, NULL, 0, &plan, &err) != CM_OK) {
        cm_free(text);
        cmd_report(errs, json, "plan", file, &err);
        return 1;
    }
    cm_free(text);
    int rc = 0;
    bool mlir = strcmp(format, "mlir") == 0;
    /* The plan document streams to stdout as it is written (a 1M-op plan
     * is hundreds of MB: never held whole); for --format mlir it is only
     * the propagation, so its bytes go nowhere. */
    cm_buf b;
    cm_buf_init_sink(&b, mlir ? cmd_discard_sink : cmd_file_sink, out);
    cm_status st = sp_plan_write(plan, NULL, &b, NULL, &err);
    if (st == CM_OK && !cm_buf_flush(&b)) {
        st = b.sink_failed ? cm_error_set(&err, CM_EIO, NULL, "write error on the output")
                           : cm_error_oom(&err);
    }
    cm_buf_fini(&b);
    if (st == CM_OK && mlir) {
        cm_buf_init(&b);
        sp_print_opts popts = {false, false};
        sp_mlir_print(sp_plan_input(plan)->m, &popts, &b);
        rc = cmd_write_out(&b, "plan", out, errs);
        cm_buf_fini(&b);
    } else if (st != CM_OK) {
        cmd_report(errs, json, "plan", file, &err);
        rc = 1;
    }
    sp_plan_destroy(plan);
    return rc;
}

int cmd_plan(int argc, char **argv, FILE *out, FILE *errs)
{
    return cmd_input_run(argc, argv, out, errs, run_plan);
}
