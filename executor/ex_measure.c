/* SPDX-License-Identifier: Apache-2.0
 * executor: ex_measure_text (ex_measure.h), the benchmark behind
 * `shardplan suggest --check`. */
#include "ex_measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex_exec.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

cm_status ex_measure_text(const char *mlir, size_t len, uint32_t iters, sp_suggest_measure *out,
                          cm_error *err)
{
    memset(out, 0, sizeof *out);
    iters = iters > 0 ? iters : 1;
    double *ts = cm_calloc(iters, sizeof *ts);
    if (ts == NULL) {
        return cm_error_oom(err);
    }
    ex_check_opts o = {.iters = iters, .seed = 1, .iter_s = ts};
    ex_report r;
    cm_status st = ex_check_text(mlir, len, &o, &r, err);
    if (st == CM_OK) {
        qsort(ts, iters, sizeof *ts, cmp_double);
        out->step_s = ts[iters / 2];
        out->devices = r.n_devices;
        out->numerics_ok = r.mm.match;
        if (r.mm.match) {
            snprintf(out->note, sizeof out->note, "match (max abs diff %.3g)", r.mm.max_abs_diff);
        } else {
            snprintf(out->note, sizeof out->note,
                     "MISMATCH at result %u index %zu: expected %.9g, got %.9g", r.mm.result,
                     r.mm.index, r.mm.expected, r.mm.got);
        }
    }
    cm_free(ts);
    return st;
}
