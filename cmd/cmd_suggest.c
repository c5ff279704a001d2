/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan suggest`, the sharding constraints that most cut predicted
 * step time or memory (planner/advise/sp_suggest.h); --check measures the
 * input and the top suggestion with the executor (executor/ex_measure.h). */
#include "cmd.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "ex_measure.h"
#include "sp_profile_json.h"
#include "sp_suggest.h"

static bool parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static void usage(FILE *f)
{
    fputs("usage: shardplan suggest FILE [--pass NAME] [--rules FILE] [--objective time|memory] [-k N] [--profile NAME|FILE]\n"
          "        [--threads T] [--max-candidates N] [--max-edits N] [--check [--iters K]]\n"
          "        [--json]\n",
          f);
}

static int run_suggest(int argc, char **argv, FILE *out, FILE *errs, cmd_input *ci)
{
    const char *file = NULL, *prof = "cpu-local";
    bool json = false, check = false;
    uint32_t iters = 5;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        int took_ = cmd_input_option(argc, argv, &i, ci, "suggest", errs);
        if (took_ != 0) {
            if (took_ < 0) {
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
            takes = false;
        } else if (strcmp(a, "--check") == 0) {
            check = true;
            takes = false;
        } else if (strcmp(a, "--help") == 0) {
            usage(out);
            return 0;
        } else if (val == NULL && a[0] == '-' && a[1] != '\0') {
            ok = false;
        } else if (strcmp(a, "--objective") == 0) {
            ok = sp_suggest_objective_parse(val, &o.objective);
        } else if (strcmp(a, "-k") == 0 || strcmp(a, "--k") == 0) {
            ok = parse_u32(val, 1, SP_SUGGEST_MAX_K, &o.k);
        } else if (strcmp(a, "--profile") == 0) {
            prof = val;
        } else if (strcmp(a, "--threads") == 0) {
            ok = parse_u32(val, 1, 64, &o.threads);
        } else if (strcmp(a, "--max-candidates") == 0) {
            ok = parse_u32(val, 1, 4096, &o.max_candidates);
        } else if (strcmp(a, "--max-edits") == 0) {
            ok = parse_u32(val, 1, SP_SUGGEST_MAX_EDITS, &o.max_edits);
        } else if (strcmp(a, "--iters") == 0) {
            ok = parse_u32(val, 1, 1000, &iters);
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan suggest: unknown option '%s'\n", a);
            usage(errs);
            return 2;
        } else if (file == NULL) {
            file = a;
            takes = false;
        } else {
            fprintf(errs, "shardplan suggest: more than one input file\n");
            return 2;
        }
        if (!ok) {
            fprintf(errs, "shardplan suggest: bad value for %s\n", a);
            usage(errs);
            return 2;
        }
        i += takes ? 1 : 0;
    }
    if (file == NULL) {
        usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    sp_profile p;
    if (sp_profile_load(prof, &p, &err) != CM_OK) {
        cmd_report(errs, json, "suggest", "profile", &err);
        return 1;
    }
    o.profile = &p;
    char *text = NULL;
    size_t len = 0;
    sp_suggest *S = NULL;
    if (cm_file_read(file, &text, &len, &err) != CM_OK ||
        sp_suggest_run(text, len, &ci->io, &o, &S, &err) != CM_OK) {
        cmd_report(errs, json, "suggest", file, &err);
        cm_free(text);
        return 1;
    }
    cm_free(text);
    /* --check measures with the executor (executor/ex_measure.h) */
    sp_suggest_check chk;
    memset(&chk, 0, sizeof chk);
    if (check) {
        sp_suggest_check_run(S, ex_measure_text, iters, &chk);
    }
    cm_buf b;
    cm_buf_init(&b);
    if (json) {
        check ? sp_suggest_check_write_json(S, &chk, &b) : sp_suggest_write_json(S, &b);
        cm_buf_putc(&b, '\n');
    } else {
        sp_suggest_write_text(S, &b);
        if (check) {
            sp_suggest_check_write_text(S, &chk, &b);
        }
    }
    int rc = cmd_write_out(&b, "suggest", out, errs);
    if (check && (!chk.done[0] || (sp_suggest_n(S) > 0 && !chk.done[1]))) {
        rc = 1;
    }
    cm_buf_fini(&b);
    sp_suggest_destroy(S);
    return rc;
}

int cmd_suggest(int argc, char **argv, FILE *out, FILE *errs)
{
    return cmd_input_run(argc, argv, out, errs, run_suggest);
}
