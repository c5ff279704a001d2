/* SPDX-License-Identifier: Apache-2.0
 * planner: sharding groups in propagation (Shardy's
 * propagation/sharding_group_map.cc): the values of sdy.sharding_group ops
 * with one group id share one sharding; propagation keeps them in sync
 * (sp_basic_propagation.c, slot_changed). See sp_prop_int.h. */
#include "sp_prop_int.h"

/* Sharding groups: union the values of sdy.sharding_group ops by group id
 * (a value in two groups merges them) and link each group as a ring. */
cm_status sp_prop_groups_setup(prop *p)
{
    sp_module *m = p->m;
    uint32_t n_groups = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_SDY_SHARDING_GROUP && m->ops[i].parent_block != SP_NONE) {
            n_groups++;
        }
    }
    if (n_groups == 0) {
        return CM_OK;
    }
    p->group_next = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    uint32_t *parent = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    if (p->group_next == NULL || parent == NULL) {
        cm_free(parent);
        return sp_prop_oom(p);
    }
    for (uint32_t s = 0; s < p->n_slots; s++) {
        parent[s] = s;
        p->group_next[s] = SP_NONE;
    }
    /* first member seen per group id (ids are small in practice; linear map) */
    typedef struct gid {
        int64_t id;
        uint32_t slot;
    } gid;
    gid *firsts = cm_alloc(sizeof(gid) * n_groups);
    uint32_t n_firsts = 0;
    if (firsts == NULL) {
        cm_free(parent);
        return sp_prop_oom(p);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind != SP_OP_SDY_SHARDING_GROUP || op->parent_block == SP_NONE ||
            op->n_operands != 1) {
            continue;
        }
        const sp_attr *g = sp_op_attr(m, i, "group_id");
        int64_t id = g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : -1;
        uint32_t s = sp_prop_canon_slot(p, op->operands[0]);
        uint32_t k = 0;
        while (k < n_firsts && firsts[k].id != id) {
            k++;
        }
        if (k == n_firsts) {
            firsts[n_firsts++] = (gid){id, s};
            continue;
        }
        /* union */
        uint32_t a = firsts[k].slot, b = s;
        while (parent[a] != a) {
            a = parent[a];
        }
        while (parent[b] != b) {
            b = parent[b];
        }
        if (a != b) {
            parent[b] = a;
        }
    }
    cm_free(firsts);
    /* rings: members of one root, linked in slot order */
    uint32_t *last = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    uint32_t *first = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    if (last == NULL || first == NULL) {
        cm_free(parent);
        cm_free(last);
        cm_free(first);
        return sp_prop_oom(p);
    }
    memset(last, 0xff, sizeof(uint32_t) * (p->n_slots + 1u));
    memset(first, 0xff, sizeof(uint32_t) * (p->n_slots + 1u));
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind != SP_OP_SDY_SHARDING_GROUP || op->parent_block == SP_NONE ||
            op->n_operands != 1) {
            continue;
        }
        uint32_t s = sp_prop_canon_slot(p, op->operands[0]);
        if (p->group_next[s] != SP_NONE || (first[s] == s)) {
            continue; /* already linked */
        }
        uint32_t r = s;
        while (parent[r] != r) {
            r = parent[r];
        }
        if (first[r] == SP_NONE) {
            first[r] = s;
            last[r] = s;
            p->group_next[s] = s;
        } else {
            p->group_next[s] = first[r];
            p->group_next[last[r]] = s;
            last[r] = s;
        }
    }
    /* members must agree before propagation; an annotated member seeds the rest */
    cm_status st = CM_OK;
    for (uint32_t s = 0; s < p->n_slots && st == CM_OK; s++) {
        if (first[s] == SP_NONE) {
            continue;
        }
        sp_sharding *seed = NULL;
        uint32_t r = first[s];
        do {
            if (p->sh[r] != NULL) {
                if (seed != NULL && !sp_sharding_equal(seed, p->sh[r])) {
                    /* report at the group op of the disagreeing member */
                    uint32_t at = SP_NONE;
                    int64_t group = -1;
                    for (uint32_t i = 0; i < m->n_ops && at == SP_NONE; i++) {
                        const sp_op *op = &m->ops[i];
                        if (op->kind == SP_OP_SDY_SHARDING_GROUP && op->parent_block != SP_NONE &&
                            op->n_operands == 1 && sp_prop_canon_slot(p, op->operands[0]) == r) {
                            const sp_attr *g = sp_op_attr(m, i, "group_id");
                            group = g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : -1;
                            at = i;
                        }
                    }
                    sp_diags_add(p->diags, m, at, SP_DIAG_ERROR,
                                 "Inconsistent shardings prior to propagation for ShardingGroupOps "
                                 "with canonicalized groupId: %lld",
                                 (long long)group);
                    st = cm_error_set(p->err, CM_EINVAL, NULL,
                                      "sharding group %lld has members with different shardings "
                                      "before propagation",
                                      (long long)group);
                    p->st = st;
                    break;
                }
                seed = p->sh[r];
            }
            r = p->group_next[r];
        } while (r != first[s]);
        if (seed != NULL && st == CM_OK) {
            r = first[s];
            do {
                p->sh[r] = seed;
                r = p->group_next[r];
            } while (r != first[s]);
        }
    }
    cm_free(parent);
    cm_free(last);
    cm_free(first);
    return st;
}
