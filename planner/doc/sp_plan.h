/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan object. A plan is one input (MLIR text or a graph
 * document, with any mesh and stored rules already merged in), its options
 * (the pass, a rules document for MLIR), the module read from it, and its
 * content hash; the module is propagated once, when the plan document is
 * written, and partitioned only when asked. Everything that describes a
 * stored plan (its document, cost, lint, benchmark) is derived from the same
 * (input, options) through sp_input.h, so no consumer re-plans with defaults
 * of its own.
 * Ownership: sp_plan_create returns a heap object freed by sp_plan_destroy;
 * the plan keeps a copy of nothing but what it reads (the caller's text and
 * rules must outlive sp_plan_create only). Thread contract: one thread per
 * plan at a time; distinct plans are independent. */
#ifndef SP_PLAN_H
#define SP_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "cm.h"
#include "sp_input.h"
#include "sp_plan_json.h"

typedef struct sp_plan sp_plan;

/* Reads text (len bytes) with o's pass and rules, without propagating, and
 * computes the plan's hashes from the module as printed in MLIR, the pass
 * and key_extra (key_extra_len bytes the module text does not show but that
 * change the answer, such as the canonical custom rules; may be NULL). o
 * NULL: the defaults; o->propagate is ignored. Errors: those of
 * sp_input_read; CM_ENOMEM. */
cm_status sp_plan_create(const char *text, size_t len, const sp_input_opts *o,
                         const char *key_extra, size_t key_extra_len, sp_plan **out,
                         cm_error *err);
void sp_plan_destroy(sp_plan *p);

/* 64 hex digits: SHA-256 of the module text, the pass and key_extra — two
 * requests with equal keys have equal plans (the store's plan key). */
const char *sp_plan_key(const sp_plan *p);
/* 64 hex digits: the plan document's input_sha256 (module text and pass). */
const char *sp_plan_input_sha256(const sp_plan *p);
sp_plan_pass sp_plan_get_pass(const sp_plan *p);
/* The loaded input (module, graph document, rules in force); borrowed. */
const sp_input *sp_plan_input(const sp_plan *p);

/* Propagates the module with the plan's pass (the first call only) and
 * appends the plan document to out (sp_plan_run); timing may be NULL.
 * Propagation polls cancel (may be NULL: never) and stops with CM_EIO once
 * it says stop. Errors: those of sp_plan_run; a second call is CM_EINVAL. */
cm_status sp_plan_write(sp_plan *p, const cm_cancel *cancel, cm_buf *out, sp_plan_timing *timing,
                        cm_error *err);

#endif /* SP_PLAN_H */
