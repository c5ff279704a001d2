/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the whole planning path, as POST /v1/plans runs it:
 * the input (MLIR text, or a graph document when it starts with '{') is
 * loaded and verified by sp_input, planned by sp_plan_create and
 * sp_plan_write (propagation pipeline, plan document with its cost), then
 * loaded again, partitioned into explicit collectives and costed. Errors are
 * expected; crashes, sanitizer reports and leaks are not. Seeds:
 * tests/fuzz/corpus/plan/ (the examples and issue 18's crash inputs). Build
 * and run with `make fuzz-plan`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"
#include "sp_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    cm_error err;
    cm_error_clear(&err);
    sp_plan *p = NULL;
    if (sp_plan_create(text, size, NULL, NULL, 0, &p, &err) != CM_OK) {
        return 0;
    }
    cm_buf doc;
    cm_buf_init(&doc);
    cm_error_clear(&err);
    (void)sp_plan_write(p, NULL, &doc, NULL, &err);
    cm_buf_fini(&doc);
    sp_plan_destroy(p);

    sp_input in;
    cm_error_clear(&err);
    if (sp_input_read(text, size, NULL, &in, &err) != CM_OK) {
        return 0;
    }
    cm_error_clear(&err);
    if (sp_input_partition(&in, &err) == CM_OK) {
        sp_cost_opts co;
        sp_cost_opts_init(&co);
        sp_cost *c = NULL;
        cm_error_clear(&err);
        if (sp_cost_compute(in.m, &co, &c, &err) == CM_OK) {
            sp_cost_destroy(c);
        }
    }
    sp_input_fini(&in);
    return 0;
}
