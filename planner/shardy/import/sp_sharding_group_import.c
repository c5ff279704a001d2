/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-sharding-group-import (Shardy's
 * import/sharding_group_import.cc): the groups are validated (the values of
 * one group share their nearest manual computation, or none, and their
 * shape), groups that share a value are merged and renumbered 0..N-1 in the
 * order they first appear, and a group's repeated ops on one
 * value are erased (see sp_import.h). */
#include "sp_import.h"

#include <string.h>

#include "cm_map.h"

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct sg_list {
    uint32_t *ops;
    uint32_t n, cap;
} sg_list;

static cm_status collect_group(sp_module *m, uint32_t op, void *ctx)
{
    sg_list *l = ctx;
    if (m->ops[op].kind != SP_OP_SDY_SHARDING_GROUP) {
        return CM_OK;
    }
    if (CM_GROW_U32(l->ops, l->cap, l->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    l->ops[l->n++] = op;
    return CM_OK;
}

static uint32_t manual_parent(const sp_module *m, uint32_t op)
{
    uint32_t b = m->ops[op].parent_block;
    while (b != SP_NONE && m->blocks[b].parent_op != SP_NONE) {
        uint32_t p = m->blocks[b].parent_op;
        if (m->ops[p].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            return p;
        }
        b = m->ops[p].parent_block;
    }
    return SP_NONE;
}

static bool same_shape(const sp_type *a, const sp_type *b)
{
    if (a->kind != b->kind || a->rank != b->rank) {
        return false;
    }
    for (uint32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) {
            return false;
        }
    }
    return true;
}

typedef struct id_entry {
    int64_t id;
    uint32_t first; /* index of the first op with this id */
} id_entry;

static bool id_eq(const void *entry, const void *key)
{
    return ((const id_entry *)entry)->id == *(const int64_t *)key;
}

static uint32_t find_root(uint32_t *parent, uint32_t a)
{
    while (parent[a] != a) {
        parent[a] = parent[parent[a]];
        a = parent[a];
    }
    return a;
}

cm_status sp_pass_sharding_group_import(sp_module *m, sp_diags *diags, cm_error *err)
{
    sg_list l = {NULL, 0, 0};
    if (sp_pass_walk(m, m->body, collect_group, &l) != CM_OK) {
        cm_free(l.ops);
        return cm_error_oom(err);
    }
    uint32_t n = l.n;
    if (n == 0) {
        cm_free(l.ops);
        return CM_OK;
    }
    uint32_t *ops = l.ops;
    int64_t *ids = cm_alloc(sizeof(int64_t) * n);
    uint32_t *parent = cm_alloc(sizeof(uint32_t) * n);
    uint32_t *value_group = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    int64_t *canon = cm_alloc(sizeof(int64_t) * n);
    cm_map first_of_id;
    cm_map_init(&first_of_id, sizeof(id_entry));
    cm_status st = CM_OK;
    if (ids == NULL || parent == NULL || value_group == NULL || canon == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    memset(value_group, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = ops[k];
        const sp_op *op = &m->ops[i];
        const sp_attr *g = sp_op_attr(m, i, "group_id");
        ids[k] = g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : 0;
        parent[k] = k;
        /* same id: union with the first op of that id, after validating */
        id_entry *e;
        bool found;
        if (cm_map_find_or_insert(&first_of_id, cm_hash_u64((uint64_t)ids[k]), id_eq, &ids[k],
                                  (void **)&e, &found, err) != CM_OK) {
            st = CM_ENOMEM;
            goto out;
        }
        if (!found) {
            e->id = ids[k];
            e->first = k;
        } else {
            uint32_t j = e->first;
            parent[k] = j;
            if (manual_parent(m, ops[j]) != manual_parent(m, i)) {
                sp_diags_add(diags, m, i, SP_DIAG_ERROR,
                             "ShardingGroupOps values cannot cross ManualComputationOp "
                             "boundaries for groupId: %lld",
                             (long long)ids[k]);
                st = cm_error_set(err, CM_EINVAL, NULL,
                                  "sharding group %lld crosses a manual computation",
                                  (long long)ids[k]);
                goto out;
            }
            if (op->n_operands == 1 && m->ops[ops[j]].n_operands == 1 &&
                !same_shape(sp_value_type(m, op->operands[0]),
                            sp_value_type(m, m->ops[ops[j]].operands[0]))) {
                sp_diags_add(diags, m, i, SP_DIAG_ERROR,
                             "ShardingGroupOps values must have the same shape for groupId: %lld",
                             (long long)ids[k]);
                st = cm_error_set(err, CM_EINVAL, NULL,
                                  "sharding group %lld has values of different shapes",
                                  (long long)ids[k]);
                goto out;
            }
        }
        if (op->n_operands == 1) {
            uint32_t v = op->operands[0];
            if (value_group[v] != SP_NONE) {
                uint32_t a = find_root(parent, value_group[v]), b = find_root(parent, k);
                if (a != b) {
                    parent[b < a ? a : b] = b < a ? b : a;
                }
            } else {
                value_group[v] = k;
            }
        }
    }
    /* renumber the classes 0..N-1 in the order they first appear (as
     * Shardy's equivalence classes iterate); a class's root is its first op */
    int64_t next = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (find_root(parent, i) == i) {
            canon[i] = next++;
        }
    }
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        int64_t c = canon[find_root(parent, i)];
        sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
        if (a == NULL) {
            st = cm_error_oom(err);
            break;
        }
        a->u.i.v = c;
        a->u.i.type = "i64";
        st = sp_op_set_attr(m, ops[i], "group_id", a) == CM_OK ? CM_OK : cm_error_oom(err);
    }
    /* a group's repeated op on one value goes (value_group holds the first op
     * on each value; a later op on it with the same group is a repeat) */
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        const sp_op *op = &m->ops[ops[i]];
        if (op->n_operands != 1) {
            continue;
        }
        uint32_t f = value_group[op->operands[0]];
        if (f != i && f != SP_NONE) {
            uint32_t idx = sp_op_index_in_block(m, ops[i]);
            if (idx != SP_NONE) {
                sp_block_remove_op(m, m->ops[ops[i]].parent_block, idx);
                m->ops[ops[i]].parent_block = SP_NONE;
            }
        }
    }
out:
    cm_map_fini(&first_of_id);
    cm_free(ids);
    cm_free(parent);
    cm_free(value_group);
    cm_free(canon);
    cm_free(ops);
    return st;
}
