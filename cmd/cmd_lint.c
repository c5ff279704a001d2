/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan lint` and `shardplan collectives`, the advisor's findings
 * and collective inventory of a model (planner/advise/sp_lint.h). */
#include "cmd.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_lint.h"
#include "sp_profile_json.h"

static int run_common(int argc, char **argv, FILE *out, FILE *errs, bool lint, cmd_input *ci)
{
    const char *cmd = argv[0], *file = NULL, *prof = "cpu-local";
    bool json = false;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int took = cmd_input_option(argc, argv, &i, ci, cmd, errs);
        if (took != 0) {
            if (took < 0) {
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--profile") == 0 && i + 1 < argc) {
            prof = argv[++i];
        } else if (lint && strcmp(a, "--mesh") == 0 && i + 1 < argc) {
            o.mesh = argv[++i];
        } else if (lint && strcmp(a, "--min-bytes") == 0 && i + 1 < argc) {
            char *end;
            o.min_bytes = strtod(argv[++i], &end);
            if (*end != '\0' || !(o.min_bytes >= 0)) {
                fprintf(errs, "shardplan %s: --min-bytes takes a byte count\n", cmd);
                return 2;
            }
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--format") == 0 && i + 1 < argc) {
            json = strcmp(argv[++i], "json") == 0;
        } else if (strcmp(a, "--help") == 0) {
            fprintf(out, "usage: shardplan %s FILE [--pass NAME] [--rules FILE] %s[--profile NAME|FILE] [--json]\n", cmd,
                    lint ? "[--mesh NAME] [--min-bytes N] " : "");
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan %s: unknown option '%s'\n", cmd, a);
            return 2;
        } else if (file == NULL) {
            file = a;
        } else {
            fprintf(errs, "shardplan %s: more than one input file\n", cmd);
            return 2;
        }
    }
    if (file == NULL) {
        fprintf(errs, "usage: shardplan %s FILE [--pass NAME] [--rules FILE] %s[--profile NAME|FILE] [--json]\n", cmd,
                lint ? "[--mesh NAME] [--min-bytes N] " : "");
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_profile p;
    if (sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, json, cmd, "profile", &err);
        return 1;
    }
    o.profile = &p;
    char *text = NULL;
    size_t len = 0;
    sp_advise *adv = NULL;
    if (cm_file_read(file, &text, &len, &err) != CM_OK ||
        sp_advise_run(text, len, &ci->io, &o, &adv, &err) != CM_OK) {
        cmd_report(errs, json, cmd, file, &err);
        cm_free(text);
        return 1;
    }
    cm_free(text);
    cm_buf b;
    cm_buf_init(&b);
    if (lint) {
        json ? sp_advise_write_lint_json(adv, &b) : sp_advise_write_lint_text(adv, &b);
    } else {
        json ? sp_advise_write_colls_json(adv, &b) : sp_advise_write_colls_text(adv, &b);
    }
    if (json) {
        cm_buf_putc(&b, '\n');
    }
    int rc = cmd_write_out(&b, cmd, out, errs);
    for (uint32_t i = 0; lint && rc == 0 && i < sp_advise_n_findings(adv); i++) {
        rc = sp_advise_finding_at(adv, i)->sev == SP_LINT_ERROR ? 1 : 0;
    }
    cm_buf_fini(&b);
    sp_advise_destroy(adv);
    return rc;
}

static int run(int argc, char **argv, FILE *out, FILE *errs, bool lint)
{
    cmd_input ci;
    cmd_input_init(&ci);
    int rc = run_common(argc, argv, out, errs, lint, &ci);
    cmd_input_fini(&ci);
    return rc;
}

int cmd_lint(int argc, char **argv, FILE *out, FILE *errs)
{
    return run(argc, argv, out, errs, true);
}

int cmd_collectives(int argc, char **argv, FILE *out, FILE *errs)
{
    return run(argc, argv, out, errs, false);
}
