/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-constant-or-scalar-splitter (Shardy's
 * import/constant_or_scalar_splitter.cc): constant sub-computations and
 * scalar broadcasts get one copy per use (see sp_import.h). */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

cm_status sp_pass_constant_splitter(sp_module *m, cm_error *err)
{
    uint32_t n_ops0 = m->n_ops;
    uint32_t *after_head = NULL;
    uint8_t *dirty = NULL;
    sp_uses u;
    memset(&u, 0, sizeof u);
    cm_status st = CM_OK;
    uint8_t *memo = cm_calloc(n_ops0 * 2u + 16u, 1);
    /* every clone adds at most one value per result; reserve generously */
    uint8_t *want = cm_calloc(m->n_values * 2u + 16u, 1);
    /* the candidates in program order: the split below walks them backwards,
     * and a backward walk over the whole op array is many times slower than
     * a forward one (cache misses on every op) */
    uint32_t *cands = cm_alloc(sizeof(uint32_t) * (n_ops0 + 1u));
    if (memo == NULL || want == NULL || cands == NULL) {
        st = CM_ENOMEM;
        goto out;
    }
    uint32_t n_cands = 0;
    for (uint32_t opid = 0; opid < n_ops0; opid++) {
        const sp_op *op = &m->ops[opid];
        if (op->parent_block != SP_NONE && op->n_results == 1 && op->kind != SP_OP_FUNC_FUNC &&
            (sp_pass_is_const_expr(m, opid, memo) || sp_pass_is_scalar_expansion(m, op))) {
            want[op->first_result] = 1;
            cands[n_cands++] = opid;
        }
    }
    if (n_cands == 0) {
        goto out;
    }
    size_t cap_ops = (size_t)n_ops0 * 2u + 16u;
    after_head = cm_alloc(sizeof(uint32_t) * cap_ops * 3u);
    dirty = cm_calloc(m->n_blocks + 1u, 1);
    if (after_head == NULL || dirty == NULL ||
        sp_uses_build(m, &u, m->n_values * 2u + 16u, want) != CM_OK) {
        st = CM_ENOMEM;
        goto out;
    }
    uint32_t *after_tail = after_head + cap_ops, *after_next = after_head + 2 * cap_ops;
    memset(after_head, 0xff, sizeof(uint32_t) * cap_ops);
    /* reverse program order: users are split before the values they use */
    for (uint32_t ci = n_cands; ci-- > 0 && st == CM_OK;) {
        uint32_t opid = cands[ci];
        const sp_op *op = &m->ops[opid];
        uint32_t v = op->first_result;
        if (sp_uses_count(&u, v) <= 1) {
            continue;
        }
        /* a value in a sharding group stays one value: its group decides */
        bool grouped = false;
        for (uint32_t i = u.head[v]; i != SP_NONE && !grouped; i = u.pool[i].next) {
            grouped = m->ops[u.pool[i].op].kind == SP_OP_SDY_SHARDING_GROUP;
        }
        if (grouped) {
            continue;
        }
        /* keep the first use (in program order the list is reversed: the last
         * node is the first use); give every other use its own copy */
        uint32_t first = u.head[v];
        while (u.pool[first].next != SP_NONE) {
            first = u.pool[first].next;
        }
        uint32_t block = m->ops[opid].parent_block;
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            if (i == first) {
                continue;
            }
            uint32_t clone;
            st = sp_op_clone_detached(m, opid, &clone);
            if (st != CM_OK) {
                break;
            }
            if (m->n_values >= u.n_values || m->n_ops >= n_ops0 * 2u + 16u) {
                st = CM_ENOMEM;
                break;
            }
            /* inserted after opid when the pass ends (one rebuild per block) */
            after_next[clone] = SP_NONE;
            if (after_head[opid] == SP_NONE) {
                after_head[opid] = clone;
            } else {
                after_next[after_tail[opid]] = clone;
            }
            after_tail[opid] = clone;
            dirty[block] = 1;
            memo[clone] = memo[opid];
            const sp_op *c = &m->ops[clone];
            for (uint32_t k = 0; k < c->n_operands && st == CM_OK; k++) {
                st = sp_uses_add(&u, c->operands[k], clone, k);
            }
            m->ops[u.pool[i].op].operands[u.pool[i].idx] = c->first_result;
        }
        /* v now has exactly one use */
        if (st == CM_OK) {
            u.head[v] = first;
            u.pool[first].next = SP_NONE;
        }
    }
    /* place the copies: rebuild each block that got some, once */
    for (uint32_t b = 0; b < m->n_blocks && st == CM_OK; b++) {
        if (!dirty[b]) {
            continue;
        }
        sp_block *bl = &m->blocks[b];
        uint32_t n = bl->n_ops;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            for (uint32_t c = after_head[bl->ops[i]]; c != SP_NONE; c = after_next[c]) {
                n++;
            }
        }
        uint32_t *ops = cm_alloc(sizeof(uint32_t) * (n + 1u));
        if (ops == NULL) {
            st = CM_ENOMEM;
            break;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            ops[k++] = bl->ops[i];
            for (uint32_t c = after_head[bl->ops[i]]; c != SP_NONE; c = after_next[c]) {
                ops[k++] = c;
                m->ops[c].parent_block = b;
            }
        }
        cm_free(bl->ops);
        bl->ops = ops;
        bl->n_ops = n;
        bl->cap_ops = n + 1u;
    }
out:
    cm_free(memo);
    cm_free(want);
    cm_free(cands);
    cm_free(after_head);
    cm_free(dirty);
    sp_uses_free(&u);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
