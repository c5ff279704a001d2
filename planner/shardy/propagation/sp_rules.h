/* SPDX-License-Identifier: Apache-2.0
 * planner: the op sharding-rule registry. For every op Shardy's registry
 * covers it derives the sdy.op_sharding_rule with Shardy's factor numbering,
 * factor order and special factor kinds; custom calls take their rule from an
 * `sdy.sharding_rule` attribute, from a user rule registered by call-target
 * name (Shardy text or JAX's einsum-like form), or get a rule that blocks
 * propagation plus a diagnostic. The registry is
 * sp_op_sharding_rule_registry.c (Shardy's op_sharding_rule_registry.cc).
 * Ownership: rules are allocated in the module arena. Thread contract: a
 * sp_custom_rules table may be read by many threads once built. */
#ifndef SP_RULES_H
#define SP_RULES_H

#include "cm.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_diag.h"

typedef struct sp_custom_rules sp_custom_rules;

sp_custom_rules *sp_custom_rules_create(void);
void sp_custom_rules_destroy(sp_custom_rules *r);
/* Registers (or replaces) the rule of call target `target` in JAX's
 * einsum-like form, e.g. "i j, j k -> i k" with opts for reduction and other
 * factor kinds. The spec is checked for syntax now and against shapes when
 * applied. */
cm_status sp_custom_rules_put_einsum(sp_custom_rules *r, const char *target, const char *spec,
                                     const sp_einsum_opts *opts, cm_error *err);
/* Registers a rule in Shardy's text form (`#sdy.op_sharding_rule<...>` or its
 * body); it applies only to calls whose shapes match its factor sizes. */
cm_status sp_custom_rules_put_text(sp_custom_rules *r, const char *target, const char *text,
                                   cm_error *err);
bool sp_custom_rules_remove(sp_custom_rules *r, const char *target);

typedef struct sp_rule_opts {
    bool conservative;               /* conservative-propagation=true */
    const sp_custom_rules *custom;   /* may be NULL */
    /* A custom call the registry does not know gets a rule that replicates
     * every dimension and blocks propagation (what XLA's partitioner does to
     * a custom call it cannot partition) instead of Shardy's none; no
     * warning. For the plan's own partitioning only (sp_reshard_opts). */
    bool replicate_unknown_custom_calls;
} sp_rule_opts;

/* Derives the rule of op. *rule_out is NULL when the op has no rule (func
 * ops, sdy ops, region terminators, a reshape with a zero-size dimension...).
 * Diagnostics that a user should see (a custom call without a rule) go to
 * diags (may be NULL). Errors: CM_EINVAL for malformed op attributes. */
cm_status sp_rule_for_op(sp_module *m, uint32_t op, const sp_rule_opts *opts, sp_rule **rule_out,
                         sp_diags *diags, cm_error *err);

/* Whether the registry derives a rule for some ops of kind k; when false,
 * sp_rule_for_op gives no rule for any op of that kind (without an
 * sdy.sharding_rule attribute). */
bool sp_rules_cover_kind(sp_op_kind k);

/* -sdy-populate-op-sharding-rules (sp_populate_op_sharding_rules.c): sets
 * `sdy.sharding_rule` on every op that has a rule and does not carry one
 * already. */
cm_status sp_pass_populate_rules(sp_module *m, const sp_rule_opts *opts, sp_diags *diags,
                                 cm_error *err);

#endif /* SP_RULES_H */
