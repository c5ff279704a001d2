/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan whatif`, a model's edits re-propagated incrementally and
 * diffed (planner/advise/sp_whatif.h). */
#include "cmd.h"

#include <stdbool.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_profile_json.h"
#include "sp_whatif.h"

static int usage(FILE *f, int rc)
{
    fprintf(f, "usage: shardplan whatif FILE --edit JSON [--edit JSON...] [--edits FILE]\n"
               "                        [--pass NAME] [--rules FILE] [--profile NAME|FILE] [--full]\n"
               "                        [--json] [--mlir]\n"
               "  EDIT: {\"kind\":\"constrain\",\"value\":{\"op\":\"/ops/5\"},"
               "\"sharding\":\"<@mesh, [{\\\"data\\\"}, {}]>\"}, ... (docs/advisor.md)\n");
    return rc;
}

static int run_whatif(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci)
{
    const char *file = NULL, *prof = "cpu-local";
    bool json = false, mlir = false, full = false;
    sp_edit_list l;
    sp_edit_list_init(&l);
    cm_error err;
    cm_error_clear(&err);
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        int took_ = cmd_input_option(argc, argv, &i, ci, "whatif", errs);
        if (took_ != 0) {
            if (took_ < 0) {
                rc = 2;
                break;
            }
            continue;
        }
        if ((strcmp(a, "--edit") == 0 || strcmp(a, "--edits") == 0) && i + 1 < argc) {
            const char *arg = argv[++i];
            char *text = NULL;
            size_t len = 0;
            if (strcmp(a, "--edits") == 0) {
                if (cm_file_read(arg, &text, &len, &err) != CM_OK) {
                    fprintf(errs, "shardplan whatif: %s: %s\n", arg, err.msg);
                    rc = 1;
                    break;
                }
            }
            cm_status st = sp_edit_list_decode(&l, text != NULL ? text : arg,
                                               text != NULL ? len : strlen(arg), &err);
            cm_free(text);
            if (st != CM_OK) {
                fprintf(errs, "shardplan whatif: %s%s%s\n", err.path,
                        err.path[0] != '\0' ? ": " : "", err.msg);
                rc = 2;
            }
        } else if (strcmp(a, "--profile") == 0 && i + 1 < argc) {
            prof = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--mlir") == 0) {
            mlir = true;
        } else if (strcmp(a, "--full") == 0) {
            full = true;
        } else if (strcmp(a, "--help") == 0) {
            sp_edit_list_fini(&l);
            return usage(out, 0);
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan whatif: unknown option '%s'\n", a);
            rc = usage(errs, 2);
        } else if (file == NULL) {
            file = a;
        } else {
            fprintf(errs, "shardplan whatif: more than one input file\n");
            rc = 2;
        }
    }
    if (rc == 0 && (file == NULL || l.n == 0)) {
        rc = usage(errs, 2);
    }
    char *text = NULL;
    size_t len = 0;
    sp_profile p;
    if (rc == 0 && sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, json, "whatif", "profile", &err);
        rc = 1;
    }
    if (rc == 0 && cm_file_read(file, &text, &len, &err) != CM_OK) {
        fprintf(errs, "shardplan whatif: %s: %s\n", file, err.msg);
        rc = 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    if (rc == 0 && mlir) {
        if (sp_whatif_edit_text(text, len, NULL, &l, &b, &err) != CM_OK) {
            rc = 1;
        }
    } else if (rc == 0) {
        sp_whatif_opts o;
        sp_whatif_opts_init(&o);
        o.profile = &p;
        o.full = full;
        sp_whatif *w = NULL;
        if (sp_whatif_run(text, len, &ci->io, &l, &o, &w, &err) != CM_OK) {
            rc = 1;
        } else {
            json ? sp_whatif_write_json(w, 0, &b) : sp_whatif_write_text(w, &b);
            if (json) {
                cm_buf_putc(&b, '\n');
            }
        }
        sp_whatif_destroy(w);
    }
    if (rc == 1 && text != NULL) {
        cmd_report(errs, json, "whatif", file, &err);
    } else if (rc == 0) {
        rc = cmd_write_out(&b, "whatif", out, errs);
    }
    cm_buf_fini(&b);
    cm_free(text);
    sp_edit_list_fini(&l);
    return rc;
}

int cmd_whatif(int argc, char **argv, FILE *out, FILE *errs)
{
    return cmd_input_run(argc, argv, out, errs, run_whatif);
}
