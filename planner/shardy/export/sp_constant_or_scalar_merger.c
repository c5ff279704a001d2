/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-constant-or-scalar-merger (Shardy's
 * export/constant_or_scalar_merger.cc): identical constant sub-computations
 * with equal shardings become one (see sp_export.h). */
#include "sp_export.h"

#include <string.h>

#include "sp_pass.h"

typedef struct merge_ctx {
    uint32_t *repl; /* per value: the value that replaces it */
    struct seen {
        uint32_t op;   /* a candidate op kept so far in the enclosing blocks */
        uint32_t next; /* the next entry of its hash bucket */
    } *seen;
    uint32_t n_seen, cap_seen;
    uint32_t heads[4096]; /* hash buckets of seen entries (SP_NONE: empty) */
} merge_ctx;

static bool same_attrs(const sp_op *a, const sp_op *b)
{
    if (a->n_attrs != b->n_attrs) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_attrs; i++) {
        const sp_attr *x = a->attrs[i].value;
        const sp_attr *y = sp_attrs_get(b->attrs, b->n_attrs, a->attrs[i].name);
        if (y == NULL) {
            return false;
        }
        if (x == y) {
            continue;
        }
        if (x->kind == SP_ATTR_SHARDING_LIST && y->kind == SP_ATTR_SHARDING_LIST &&
            x->u.shardings.n == y->u.shardings.n) {
            for (uint32_t k = 0; k < x->u.shardings.n; k++) {
                if (!sp_sharding_equal(x->u.shardings.items[k], y->u.shardings.items[k])) {
                    return false;
                }
            }
            continue;
        }
        return false;
    }
    return true;
}

/* Consistent with same_attrs: attributes other than sharding lists are
 * equal only as the same object, so their addresses are hashed (summed, as
 * same_attrs ignores their order); sharding lists compare by value and are
 * left out. Constants of one type with different values thus land in
 * different buckets (they used to chain into one: ~0.1 s on a 34k-op
 * module). */
static uint32_t merge_hash(const sp_module *m, const sp_op *op)
{
    uint64_t h = op->kind * 0x9e3779b97f4a7c15ull ^ m->values[op->first_result].type;
    for (uint32_t k = 0; k < op->n_operands; k++) {
        h = (h ^ op->operands[k]) * 1099511628211ull;
    }
    uint64_t a = 0;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        const sp_attr *x = op->attrs[i].value;
        if (x->kind != SP_ATTR_SHARDING_LIST) {
            a += (uint64_t)(uintptr_t)x * 0x9e3779b97f4a7c15ull;
        }
    }
    h = (h ^ a ^ (a >> 31)) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 29)) & 4095u;
}

static cm_status merge_block(sp_module *m, uint32_t block, merge_ctx *c, uint8_t *memo)
{
    uint32_t seen0 = c->n_seen;
    uint32_t keep = 0; /* ops kept so far in this block (removals compacted in place) */
    sp_block *bl = &m->blocks[block];
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t opid = m->blocks[block].ops[i];
        sp_op *op = &m->ops[opid];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            op->operands[k] = c->repl[op->operands[k]];
        }
        bool removed = false;
        if (op->n_results == 1 && op->n_regions == 0 &&
            (sp_pass_is_const_expr(m, opid, memo) || sp_pass_is_scalar_expansion(m, op))) {
            uint32_t h = merge_hash(m, op);
            for (uint32_t s = c->heads[h]; s != SP_NONE; s = c->seen[s].next) {
                const sp_op *o = &m->ops[c->seen[s].op];
                if (o->kind != op->kind || o->n_operands != op->n_operands ||
                    m->values[o->first_result].type != m->values[op->first_result].type) {
                    continue;
                }
                bool same = op->n_operands == 0 || memcmp(o->operands, op->operands,
                                                          sizeof(uint32_t) * op->n_operands) == 0;
                if (same && same_attrs(o, op)) {
                    c->repl[op->first_result] = o->first_result;
                    op->parent_block = SP_NONE;
                    removed = true;
                    break;
                }
            }
            if (!removed) {
                if (CM_GROW_U32(c->seen, c->cap_seen, c->n_seen + 1, NULL) != CM_OK) {
                    return CM_ENOMEM;
                }
                c->seen[c->n_seen] = (struct seen){opid, c->heads[h]};
                c->heads[h] = c->n_seen++;
            }
        }
        if (removed) {
            continue;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[opid].regions[r].n_blocks; k++) {
                cm_status st = merge_block(m, m->ops[opid].regions[r].blocks[k], c, memo);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        bl = &m->blocks[block];
        bl->ops[keep++] = opid;
    }
    m->blocks[block].n_ops = keep;
    /* leave this block's scope: pop its entries from their buckets */
    while (c->n_seen > seen0) {
        uint32_t s = --c->n_seen;
        uint32_t h = merge_hash(m, &m->ops[c->seen[s].op]);
        c->heads[h] = c->seen[s].next;
    }
    return CM_OK;
}

cm_status sp_pass_constant_merger(sp_module *m, cm_error *err)
{
    merge_ctx *c = cm_calloc(1, sizeof *c); /* the bucket array is big: keep it off the stack */
    uint8_t *memo = cm_calloc(m->n_ops + 1u, 1);
    if (c == NULL || memo == NULL) {
        cm_free(c);
        cm_free(memo);
        return cm_error_oom(err);
    }
    memset(c->heads, 0xff, sizeof c->heads);
    c->repl = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    cm_status st = c->repl != NULL ? CM_OK : CM_ENOMEM;
    for (uint32_t v = 0; st == CM_OK && v < m->n_values; v++) {
        c->repl[v] = v;
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        const sp_op *f = &m->ops[body->ops[i]];
        for (uint32_t r = 0; r < f->n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < f->regions[r].n_blocks && st == CM_OK; k++) {
                st = merge_block(m, f->regions[r].blocks[k], c, memo);
            }
        }
    }
    cm_free(memo);
    cm_free(c->repl);
    cm_free(c->seen);
    cm_free(c);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
