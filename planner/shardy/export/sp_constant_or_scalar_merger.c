/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-constant-or-scalar-merger (Shardy's
 * export/constant_or_scalar_merger.cc; see sp_export.h). Within one block,
 * a constant (stablehlo.constant, sdy.constant) whose attributes all equal
 * an earlier one's, or a broadcast_in_dim of a scalar with the same
 * attributes, result type and operand as an earlier one, is replaced by the
 * earlier op. Constants in different blocks never merge, so no value moves
 * into a region its sharding does not describe. */
#include "sp_export.h"

#include <string.h>

#include "cm_map.h"
#include "sp_pass.h"

/* One kept op, keyed by its block, kind, result type, operands and attributes. */
typedef struct kept {
    uint32_t op;
} kept;

typedef struct mkey {
    const sp_module *m;
    const sp_op *op;
} mkey;

static bool sharding_lists_equal(const sp_attr *x, const sp_attr *y)
{
    if (x->u.shardings.n != y->u.shardings.n) {
        return false;
    }
    for (uint32_t k = 0; k < x->u.shardings.n; k++) {
        if (!sp_sharding_equal(x->u.shardings.items[k], y->u.shardings.items[k])) {
            return false;
        }
    }
    return true;
}

static bool attr_value_equal(const sp_attr *x, const sp_attr *y)
{
    if (x == y) {
        return true;
    }
    if (x->kind != y->kind) {
        return false;
    }
    if (x->kind == SP_ATTR_SHARDING_LIST) {
        return sharding_lists_equal(x, y);
    }
    if (x->kind == SP_ATTR_SHARDING) {
        return sp_sharding_equal(x->u.sharding, y->u.sharding);
    }
    return sp_attr_equal(x, y);
}

/* The attribute dictionaries of a and b are equal (as sets: MLIR sorts them). */
static bool same_attrs(const sp_op *a, const sp_op *b)
{
    if (a->n_attrs != b->n_attrs) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_attrs; i++) {
        const sp_attr *y = sp_attrs_get(b->attrs, b->n_attrs, a->attrs[i].name);
        if (y == NULL || !attr_value_equal(a->attrs[i].value, y)) {
            return false;
        }
    }
    return true;
}

static bool key_eq(const void *entry, const void *key)
{
    const kept *e = entry;
    const mkey *k = key;
    const sp_op *o = &k->m->ops[e->op], *op = k->op;
    return o->parent_block == op->parent_block && o->kind == op->kind &&
           o->n_operands == op->n_operands &&
           k->m->values[o->first_result].type == k->m->values[op->first_result].type &&
           (op->n_operands == 0 ||
            memcmp(o->operands, op->operands, sizeof(uint32_t) * op->n_operands) == 0) &&
           same_attrs(o, op);
}

/* Consistent with key_eq: attribute hashes are summed (order-insensitive);
 * sdy attributes hash by kind only (sp_attr_hash). */
static uint64_t key_hash(const sp_module *m, const sp_op *op)
{
    uint64_t h = cm_hash_combine(cm_hash_u64(op->kind + 1u), op->parent_block);
    h = cm_hash_combine(h, m->values[op->first_result].type);
    for (uint32_t k = 0; k < op->n_operands; k++) {
        h = cm_hash_combine(h, op->operands[k]);
    }
    uint64_t a = 0;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        a += cm_hash_combine(cm_hash_bytes(op->attrs[i].name, strlen(op->attrs[i].name)),
                             sp_attr_hash(op->attrs[i].value));
    }
    return cm_hash_combine(h, a);
}

static bool is_candidate(const sp_module *m, const sp_op *op)
{
    if (op->n_results != 1 || op->n_regions != 0) {
        return false;
    }
    if (op->kind == SP_OP_CONSTANT || op->kind == SP_OP_SDY_CONSTANT) {
        return true;
    }
    if (op->kind != SP_OP_BROADCAST_IN_DIM || op->n_operands != 1) {
        return false;
    }
    const sp_type *t = sp_value_type(m, op->operands[0]);
    return t->kind == SP_TYPE_TENSOR && t->rank == 0;
}

typedef struct merge_ctx {
    uint32_t *repl; /* per value: the value that replaces it */
    cm_map kept;    /* of kept */
} merge_ctx;

static cm_status merge_block(sp_module *m, uint32_t block, merge_ctx *c)
{
    uint32_t keep = 0; /* ops kept so far in this block (removals compacted in place) */
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t opid = m->blocks[block].ops[i];
        sp_op *op = &m->ops[opid];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            op->operands[k] = c->repl[op->operands[k]];
        }
        if (is_candidate(m, op)) {
            mkey key = {m, op};
            kept *e;
            bool found;
            if (cm_map_find_or_insert(&c->kept, key_hash(m, op), key_eq, &key, (void **)&e, &found,
                                      NULL) != CM_OK) {
                return CM_ENOMEM;
            }
            if (found) {
                c->repl[op->first_result] = m->ops[e->op].first_result;
                op->parent_block = SP_NONE;
                continue;
            }
            e->op = opid;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[opid].regions[r].n_blocks; k++) {
                cm_status st = merge_block(m, m->ops[opid].regions[r].blocks[k], c);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        m->blocks[block].ops[keep++] = opid;
    }
    m->blocks[block].n_ops = keep;
    return CM_OK;
}

cm_status sp_pass_constant_merger(sp_module *m, cm_error *err)
{
    merge_ctx c;
    cm_map_init(&c.kept, sizeof(kept));
    c.repl = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    cm_status st = c.repl != NULL ? CM_OK : CM_ENOMEM;
    for (uint32_t v = 0; st == CM_OK && v < m->n_values; v++) {
        c.repl[v] = v;
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        const sp_op *f = &m->ops[body->ops[i]];
        for (uint32_t r = 0; r < f->n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < f->regions[r].n_blocks && st == CM_OK; k++) {
                st = merge_block(m, f->regions[r].blocks[k], &c);
            }
        }
    }
    cm_free(c.repl);
    cm_map_fini(&c.kept);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
