/* SPDX-License-Identifier: Apache-2.0
 * planner: plans side by side (`shardplan compare`, GET /v1/compare). Each
 * input (MLIR or graph document) is loaded through the input loader
 * (planner/doc/sp_input.h) with its own options, so a stored plan is
 * compared as it was made (its pass, its rules document), propagated with
 * sharding origins recorded unless already partitioned, and costed as lint
 * costs it (partitioned, explicit mode). The report gives per-tensor
 * sharding differences, memory, communication per mesh axis, FLOPs and
 * predicted step time, and the first op in program order where the plans
 * diverge with the origin of each plan's sharding there. Inputs are named
 * by the caller's labels ("plans/3", a file name), never otherwise. The
 * command is cmd/cmd_compare.c.
 * Ownership: sp_compare_run returns a heap object freed by
 * sp_compare_destroy; it keeps copies of the labels and nothing else of the
 * caller's. Thread contract: an sp_compare is read-only once built; runs on
 * different inputs may proceed in parallel. */
#ifndef SP_COMPARE_H
#define SP_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_cost.h"
#include "sp_input.h"

#define SP_COMPARE_MAX_PLANS 4

/* One plan to compare. */
typedef struct sp_compare_input {
    const char *label;            /* names the plan in the report and in errors */
    const char *text;             /* MLIR text or graph document, len bytes */
    size_t len;
    const sp_input_opts *in_opts; /* its pass, rules document, limits; NULL: the defaults
                                   * (propagate and record_edges are not used) */
} sp_compare_input;

typedef struct sp_compare_opts {
    const sp_profile *profile; /* NULL: sp_profile_default */
    double overlap;            /* compute/communication overlap in [0, 1]; < 0: the profile's */
    /* Polled before each input is planned and before it is costed: true
     * stops the comparison, which then fails with CM_EIO ("stopped").
     * NULL: never stops. */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
} sp_compare_opts;

/* Fills o with the defaults: the default profile, its own overlap. */
void sp_compare_opts_init(sp_compare_opts *o);

typedef struct sp_compare sp_compare;

/* Plans, costs and aligns n plans (2..SP_COMPARE_MAX_PLANS). o NULL: the
 * defaults. On success *out is a new object freed with sp_compare_destroy.
 * Errors: CM_EINVAL at /plans for a bad n, at /overlap for an overlap above
 * 1; an input that does not read, plan or cost gives that error's code and
 * path (inside that input) with the message prefixed by the input's label
 * and ": " ("plans/3: ..."); CM_ENOMEM. *out is NULL then. */
cm_status sp_compare_run(const sp_compare_input *plans, uint32_t n, const sp_compare_opts *o,
                         sp_compare **out, cm_error *err);
/* NULL is a no-op. */
void sp_compare_destroy(sp_compare *c);

uint32_t sp_compare_n_plans(const sp_compare *c);
/* Tensors aligned across every plan, and how many of them differ. */
uint32_t sp_compare_n_tensors(const sp_compare *c);
uint32_t sp_compare_n_differences(const sp_compare *c);
/* True when the modules differ in structure (compared up to the first op that differs). */
bool sp_compare_structure_differs(const sp_compare *c);
/* The cost of plan k (in input order), borrowed; NULL for a bad k. */
const sp_cost_summary *sp_compare_summary(const sp_compare *c, uint32_t k);

/* Appends the report `{"format":"shardplan.compare/v1","plans":[{"file":LABEL,...}],...}`
 * and a newline / the text report (columns headed by the labels' last path
 * component). */
void sp_compare_write_json(const sp_compare *c, cm_buf *b);
void sp_compare_write_text(const sp_compare *c, cm_buf *b);

#endif /* SP_COMPARE_H */
