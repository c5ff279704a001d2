/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-populate-op-sharding-rules (Shardy's
 * propagation/populate_op_sharding_rules.cc): every op the registry
 * (sp_op_sharding_rule_registry.c) has a rule for gets it as an
 * `sdy.sharding_rule` attribute (see sp_rules.h). */
#include "sp_rules.h"

#define RULE_ATTR "sdy.sharding_rule"

/* Whether op is reachable from the module body (not a detached op). */
static bool is_attached(const sp_module *m, uint32_t op)
{
    for (uint32_t depth = 0; depth <= m->n_ops; depth++) {
        uint32_t blk = m->ops[op].parent_block;
        if (blk == SP_NONE || blk >= m->n_blocks) {
            return false;
        }
        if (blk == m->body) {
            return true;
        }
        op = m->blocks[blk].parent_op;
        if (op == SP_NONE || op >= m->n_ops) {
            return false;
        }
    }
    return false;
}

cm_status sp_pass_populate_rules(sp_module *m, const sp_rule_opts *opts, sp_diags *diags,
                                 cm_error *err)
{
    if (m == NULL) {
        return cm_error_set(err, CM_EINVAL, "", "no module");
    }
    uint32_t n = m->n_ops; /* ops added meanwhile (none expected) are not visited */
    for (uint32_t op = 0; op < n; op++) {
        /* every op, as Shardy walks them: sp_rule_for_op gives the ops
         * without a rule their warning where Shardy gives one */
        if (sp_op_attr(m, op, RULE_ATTR) != NULL || !is_attached(m, op)) {
            continue;
        }
        sp_rule *rule = NULL;
        cm_status st = sp_rule_for_op(m, op, opts, &rule, diags, err);
        if (st != CM_OK) {
            return st;
        }
        if (rule == NULL) {
            continue;
        }
        sp_attr *a = sp_attr_new(m, SP_ATTR_RULE);
        if (a == NULL) {
            return cm_error_oom(err);
        }
        a->u.rule = rule;
        if ((st = sp_op_set_attr(m, op, RULE_ATTR, a)) != CM_OK) {
            return cm_error_set(err, st, NULL, "cannot set %s", RULE_ATTR);
        }
    }
    return CM_OK;
}
