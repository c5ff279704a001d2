/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan interpret FILE|- [--split-input-file]`, Shardplan's
 * `stablehlo-translate --interpret`: reads a module (each `// -----` chunk
 * alone with --split-input-file) and runs it on the StableHLO interpreter
 * (executor/ex_interp.h). Failed checks and errors go to errs; the exit
 * status is 0 when every chunk ran and every check held. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cm.h"
#include "cmd.h"
#include "ex_interp.h"
#include "sp_mlir.h"

static bool is_split_line(const char *p, const char *eol)
{
    while (p < eol && (*p == ' ' || *p == '\t')) {
        p++;
    }
    if (eol - p < 7 || p[0] != '/' || p[1] != '/') {
        return false;
    }
    p += 2;
    while (p < eol && *p == ' ') {
        p++;
    }
    return eol - p >= 5 && memcmp(p, "-----", 5) == 0;
}

/* Parses --args' text (an array of dense attributes) into m; false after
 * printing why not. */
static bool args_parse(sp_module *m, const char *text, const sp_attr *const **out, uint32_t *n,
                       FILE *errs)
{
    sp_attr *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_parse_attr(m, text, strlen(text), &a, &err) != CM_OK ||
        a->kind != SP_ATTR_ARRAY) {
        /* stablehlo-translate's wording, spelling included: its tests match it */
        fprintf(errs, "shardplan interpret: expectected array attribute string for args, i.e. "
                      "--args=[dense<1> : tensor<2xi32>, ...]\n");
        return false;
    }
    for (uint32_t i = 0; i < a->u.arr.n; i++) {
        if (a->u.arr.items[i]->kind != SP_ATTR_DENSE) {
            fprintf(errs, "shardplan interpret: expected dense elements attribute for args "
                          "elements, i.e. --args=[dense<1> : tensor<2xi32>, ...]\n");
            return false;
        }
    }
    *out = (const sp_attr *const *)a->u.arr.items;
    *n = a->u.arr.n;
    return true;
}

/* Interprets one chunk (lines from line_base); false on failure. */
static bool run_chunk(const char *file, const char *text, size_t len, uint32_t line_base,
                      const char *args, bool dense, FILE *out, FILE *errs,
                      uint32_t *n_checks)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    if (sp_mlir_read(text, len, line_base, &m, &err) != CM_OK) {
        fprintf(errs, "%s:%s: error: %s\n", file, err.path, err.msg);
        return false;
    }
    ex_interp_opts o = {NULL, 0, out, dense};
    if (args != NULL && !args_parse(m, args, &o.args, &o.n_args, errs)) {
        sp_module_destroy(m);
        return false;
    }
    ex_interp_report r;
    cm_status st = ex_interp_run(m, &o, errs, &r, &err);
    sp_module_destroy(m);
    *n_checks += r.n_checks;
    if (st != CM_OK) {
        fprintf(errs, "%s:%s: error: %s\n", file, err.path, err.msg);
        return false;
    }
    return r.n_failed == 0;
}

int cmd_interpret(int argc, char **argv, FILE *out, FILE *errs)
{
    const char *file = NULL, *args = NULL;
    bool split = false, verbose = false, dense = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs("usage: shardplan interpret FILE|- [--split-input-file] [--args=[DENSE, ...]]\n"
                  "                 [--interpreter-print-dense] [--verbose]\n"
                  "  runs @main (on --args' values; without a main, every function taking no\n"
                  "  arguments) on the StableHLO interpreter and prints their results (as\n"
                  "  dense<...> attributes with --interpreter-print-dense); it runs\n"
                  "  check.* assertions and interpreter.run_parallel over\n"
                  "  replicas x partitions with StableHLO's collectives. --interpret is accepted\n"
                  "  and ignored (stablehlo-translate's spelling), as is --probe-output-dir=DIR\n"
                  "  (interpreter.probe values are kept in memory for\n"
                  "  check.expect_serialized_eq). Exit 1 when a check fails.\n",
                  out);
            return 0;
        }
        if (strcmp(a, "--split-input-file") == 0 || strcmp(a, "-split-input-file") == 0) {
            split = true;
        } else if (strcmp(a, "--interpret") == 0 || strcmp(a, "-interpret") == 0) {
            /* stablehlo-translate's mode flag */
        } else if (strncmp(a, "--probe-output-dir=", 19) == 0) {
            /* stablehlo-translate writes probes there; ours stay in memory */
        } else if (strncmp(a, "--args=", 7) == 0) {
            args = a + 7;
        } else if (strcmp(a, "--interpreter-print-dense") == 0 ||
                   strcmp(a, "-interpreter-print-dense") == 0) {
            dense = true;
        } else if (strcmp(a, "--verbose") == 0) {
            verbose = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(errs, "shardplan interpret: unknown option %s\n", a);
            return 2;
        } else if (file == NULL) {
            file = a;
        } else {
            fprintf(errs, "shardplan interpret: more than one input file\n");
            return 2;
        }
    }
    if (file == NULL) {
        fprintf(errs, "usage: shardplan interpret FILE|- [--split-input-file]\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    if (cm_file_read(strcmp(file, "-") == 0 ? "/dev/stdin" : file, &text, &len, &err) != CM_OK) {
        fprintf(errs, "shardplan interpret: %s\n", err.msg);
        return 1;
    }
    bool ok = true;
    uint32_t n_checks = 0, n_chunks = 0;
    if (!split) {
        ok = run_chunk(file, text, len, 0, args, dense, out, errs, &n_checks);
        n_chunks = 1;
    } else {
        const char *p = text, *end = text + len, *chunk = text;
        uint32_t line = 0, chunk_line = 0;
        while (p <= end) {
            const char *eol = memchr(p, '\n', (size_t)(end - p));
            if (eol == NULL) {
                eol = end;
            }
            if (is_split_line(p, eol) || eol == end) {
                const char *stop = eol == end && !is_split_line(p, eol) ? end : p;
                ok = run_chunk(file, chunk, (size_t)(stop - chunk), chunk_line, args, dense, out, errs,
                               &n_checks) &&
                     ok;
                n_chunks++;
                chunk = eol + 1;
                chunk_line = line + 1;
            }
            line++;
            if (eol == end) {
                break;
            }
            p = eol + 1;
        }
    }
    if (verbose) {
        fprintf(out, "%u chunks, %u checks: %s\n", n_chunks, n_checks, ok ? "ok" : "FAILED");
    }
    cm_free(text);
    return ok ? 0 : 1;
}
