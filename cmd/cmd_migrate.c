/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan migrate FILE`, what moving a GSPMD model to Shardy does to
 * it (issue 20). The report is planner/advise/sp_migrate.h's, shared with
 * POST /v1/migrations; this file parses the command line and prints it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "cmd.h"
#include "cmd_util.h"
#include "sp_cost.h"
#include "sp_migrate.h"
#include "sp_profile_json.h"

static void migrate_usage(FILE *f)
{
    fputs("usage: shardplan migrate MODULE.mlir [--profile NAME|FILE] [--json]\n"
          "  MODULE.mlir: a module as GSPMD left it (mhlo.sharding on its ops, e.g. an\n"
          "  XLA dump after propagation). Prints GSPMD's and Shardy's shardings where they\n"
          "  differ, both costs per device and a constraint that removes the first\n"
          "  difference, re-planned.\n",
          f);
}

int cmd_migrate(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL, *prof = "cpu-local";
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            migrate_usage(out);
            return 0;
        }
        if (cmd_is_json_flag(argc, argv, &i)) {
            json = true;
            continue;
        }
        if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            prof = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(errs, "shardplan migrate: unknown option '%s'\n", argv[i]);
            migrate_usage(errs);
            return 2;
        } else if (file == NULL) {
            file = argv[i];
        } else {
            fprintf(errs, "shardplan migrate: more than one input file\n");
            return 2;
        }
    }
    if (file == NULL) {
        migrate_usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    char *text = NULL;
    size_t len = 0;
    cm_buf b;
    cm_buf_init(&b);
    int rc = 1;
    sp_profile p;
    if (sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, json, "migrate", "profile", &err);
        goto out;
    }
    if (cm_file_read(file, &text, &len, &err) != CM_OK ||
        sp_migrate_report(text, len, file, &p, json, &b, &err) != CM_OK) {
        cmd_report(errs, json, "migrate", file, &err);
        goto out;
    }
    rc = cmd_write_out(&b, "migrate", out, errs);
out:
    cm_buf_fini(&b);
    cm_free(text);
    return rc;
}
