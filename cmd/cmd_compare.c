/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan compare`, plans side by side (planner/advise/sp_compare.h).
 * The files are read here and handed to sp_compare_run labelled by their
 * names, so the report and the errors name them as given. */
#include "cmd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_compare.h"
#include "sp_profile_json.h"

static void usage(FILE *f)
{
    fputs("usage: shardplan compare A B [C D] [--pass NAME] [--rules FILE] [--profile NAME|FILE] [--overlap F] "
          "[--json]\n"
          "  (--format text|json is the older spelling of --json)\n",
          f);
}

/* "shardplan compare: FILE: STATUS[ at PATH]: MSG": sp_compare_run prefixes
 * an input's errors with its label, which is the file name here. */
static void report(FILE *errs, const char *const *files, uint32_t n, const cm_error *e)
{
    const char *file = NULL, *msg = e->msg;
    for (uint32_t k = 0; k < n; k++) {
        size_t l = strlen(files[k]);
        if (strncmp(e->msg, files[k], l) == 0 && strncmp(e->msg + l, ": ", 2) == 0 &&
            (file == NULL || l > strlen(file))) {
            file = files[k];
            msg = e->msg + l + 2;
        }
    }
    fprintf(errs, "shardplan compare: %s%s%s%s%s: %s\n", file != NULL ? file : "",
            file != NULL ? ": " : "", cm_status_name(e->code), e->path[0] != '\0' ? " at " : "",
            e->path, msg);
}

static int run_compare(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci)
{
    const char *files[SP_COMPARE_MAX_PLANS], *format = "text", *prof = "cpu-local";
    uint32_t n = 0;
    double overlap = -1;
    if (cmd_wants_help(argc, argv)) {
        usage(out);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cmd_is_json_flag(argc, argv, &i)) {
            format = "json";
            continue;
        }
        int took_ = cmd_input_option(argc, argv, &i, ci, "compare", errs);
        if (took_ != 0) {
            if (took_ < 0) {
                return 2;
            }
            continue;
        }
        if ((strcmp(a, "--profile") == 0 || strcmp(a, "--format") == 0) && i + 1 < argc) {
            *(strcmp(a, "--profile") == 0 ? &prof : &format) = argv[++i];
        } else if (strcmp(a, "--overlap") == 0 && i + 1 < argc) {
            char *end;
            overlap = strtod(argv[++i], &end);
            if (*end != '\0' || !(overlap >= 0 && overlap <= 1)) {
                fprintf(errs, "shardplan compare: --overlap takes a fraction in [0, 1]\n");
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan compare: unknown option '%s'\n", a);
            usage(errs);
            return 2;
        } else if (n < SP_COMPARE_MAX_PLANS) {
            files[n++] = a;
        } else {
            fprintf(errs, "shardplan compare: at most %d plans\n", SP_COMPARE_MAX_PLANS);
            return 2;
        }
    }
    if (n < 2 || (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)) {
        usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_profile prof_v;
    if (sp_profile_load(prof, &prof_v, &err) != CM_OK) {
        cmd_report(errs, strcmp(format, "json") == 0, "compare", "profile", &err);
        return 1;
    }
    char *texts[SP_COMPARE_MAX_PLANS] = {NULL};
    sp_compare_input in[SP_COMPARE_MAX_PLANS];
    int rc = 0;
    for (uint32_t k = 0; k < n && rc == 0; k++) {
        size_t len = 0;
        if (cm_file_read(files[k], &texts[k], &len, &err) != CM_OK) {
            cmd_report(errs, strcmp(format, "json") == 0, "compare", files[k], &err);
            rc = 1;
        }
        in[k] = (sp_compare_input){files[k], texts[k], len, &ci->io};
    }
    sp_compare_opts o;
    sp_compare_opts_init(&o);
    o.profile = &prof_v;
    o.overlap = overlap;
    sp_compare *c = NULL;
    if (rc == 0 && sp_compare_run(in, n, &o, &c, &err) != CM_OK) {
        report(errs, files, n, &err);
        rc = 1;
    }
    for (uint32_t k = 0; k < n; k++) {
        cm_free(texts[k]);
    }
    if (rc != 0) {
        return rc;
    }
    cm_buf b;
    cm_buf_init(&b);
    if (strcmp(format, "json") == 0) {
        sp_compare_write_json(c, &b);
    } else {
        sp_compare_write_text(c, &b);
    }
    rc = cmd_write_out(&b, "compare", out, errs);
    cm_buf_fini(&b);
    sp_compare_destroy(c);
    return rc;
}

int cmd_compare(int argc, char **argv, FILE *out, FILE *errs)
{
    return cmd_input_run(argc, argv, out, errs, run_compare);
}
