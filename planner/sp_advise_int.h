/* SPDX-License-Identifier: Apache-2.0
 * planner, private to the advisor: the scan of a graph document for Flax
 * logical axis names that no logical_axis_rules entry maps (sp_advise_json.c,
 * the only advisor file that sees jansson). */
#ifndef SP_ADVISE_INT_H
#define SP_ADVISE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cm.h"

typedef struct sp_logical_miss {
    const char *logical; /* the unmatched logical name (arena) */
    const char *value;   /* the value that carries it: input/result/output name, or "" */
    const char *path;    /* JSON Pointer of the logical_axes member (arena) */
    uint32_t dim;        /* dimension that stays replicated */
} sp_logical_miss;

/* Scans a graph document for logical_axes entries (inputs, op results,
 * outputs, sharding objects with "logical") whose name has no rule. Results
 * go to *out (n_out entries), allocated in a. A document that is not JSON or
 * has no logical_axes gives 0 entries. Errors: CM_ENOMEM. */
cm_status sp_advise_logical_scan(const char *text, size_t len, cm_arena *a, sp_logical_miss **out,
                                 uint32_t *n_out, cm_error *err);

#endif /* SP_ADVISE_INT_H */
