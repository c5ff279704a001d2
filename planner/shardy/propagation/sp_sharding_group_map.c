/* SPDX-License-Identifier: Apache-2.0
 * planner: sharding groups in propagation (Shardy's
 * propagation/sharding_group_map.cc): the values of sdy.sharding_group ops
 * with one group id share one sharding; members that disagree before
 * propagation are each wrapped in an open constraint; propagation keeps
 * the members in sync (sp_basic_propagation.c, slot_changed). See
 * sp_prop_int.h. */
#include "sp_prop_int.h"

#include <stdio.h>
#include <stdlib.h>

/* Fully open with no axes anywhere (Shardy's isFullyReplicatedAndOpen): a
 * member like this does not take part in finding a group's sharding. */
static bool open_replicated(const sp_sharding *s)
{
    if (s->n_replicated > 0 || s->n_unreduced > 0) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0 || s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

/* The sharding value v carries before propagation: a constraint's or an
 * edge's `sharding`, a manual or named computation's in sharding for a
 * body argument, else sp_value_sharding. */
static const sp_sharding *member_sharding(const sp_module *m, uint32_t v)
{
    uint32_t def = m->values[v].def;
    if (def != SP_NONE && (m->ops[def].kind == SP_OP_SDY_DATA_FLOW_EDGE ||
                           m->ops[def].kind == SP_OP_SDY_SHARDING_CONSTRAINT)) {
        const sp_attr *a = sp_op_attr(m, def, "sharding");
        return a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
    }
    uint32_t owner = def == SP_NONE ? m->blocks[m->values[v].block].parent_op : SP_NONE;
    if (owner != SP_NONE && (m->ops[owner].kind == SP_OP_SDY_MANUAL_COMPUTATION ||
                             m->ops[owner].kind == SP_OP_SDY_NAMED_COMPUTATION)) {
        /* a body argument is sharded as the owner's in_shardings says */
        const sp_attr *a = sp_op_attr(m, owner, "in_shardings");
        uint32_t k = m->values[v].index;
        return a != NULL && a->kind == SP_ATTR_SHARDING_LIST && k < a->u.shardings.n
                   ? a->u.shardings.items[k]
                   : NULL;
    }
    return sp_value_sharding(m, v);
}

/* The group id of sharding_group op i, or -1. */
static int64_t group_id(const sp_module *m, uint32_t i)
{
    const sp_attr *g = sp_op_attr(m, i, "group_id");
    return g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : -1;
}

/* Wraps value v in a fully open constraint like s, placed right after v's
 * definition (at the start of its block for a block argument); *w_out is
 * the constraint's result (SP_NONE for a detached definition). The caller
 * redirects v's other uses (redirect_uses). */
static cm_status wrap_open(sp_module *m, uint32_t v, const sp_sharding *s, uint32_t *w_out)
{
    *w_out = SP_NONE;
    sp_sharding *open = sp_sharding_open(&m->arena, s->mesh_name, s->rank);
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
    if (open == NULL || a == NULL) {
        return CM_ENOMEM;
    }
    open->mesh = s->mesh;
    a->u.sharding = open;
    const sp_value *val = &m->values[v];
    uint32_t block = val->block, index = 0;
    if (val->def != SP_NONE) {
        block = m->ops[val->def].parent_block;
        index = sp_op_index_in_block(m, val->def);
        if (block == SP_NONE || index == SP_NONE) {
            return CM_OK; /* a detached definition: nothing to wrap */
        }
        index++;
    }
    return sp_pass_insert_edge(m, "sdy.sharding_constraint", v, "sharding", a, block, index, NULL,
                               NULL, w_out);
}

/* Makes every op of the first n_old ops (those before the wrapping
 * constraints, which keep reading the wrapped values) that reads a value
 * v < n_to with to[v] != SP_NONE read to[v] instead: one walk for all
 * members. */
static void redirect_uses(sp_module *m, uint32_t n_old, const uint32_t *to, uint32_t n_to)
{
    for (uint32_t i = 0; i < n_old; i++) {
        sp_op *op = &m->ops[i];
        if (op->parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < op->n_operands; k++) {
            uint32_t v = op->operands[k];
            if (v < n_to && to[v] != SP_NONE) {
                op->operands[k] = to[v];
            }
        }
    }
}

/* A sharding_group op: its group id and op number (sorted by id, then op). */
typedef struct gop {
    int64_t id;
    uint32_t op;
} gop;

static int gop_cmp(const void *pa, const void *pb)
{
    const gop *a = pa, *b = pb;
    if (a->id != b->id) {
        return a->id < b->id ? -1 : 1;
    }
    return a->op < b->op ? -1 : a->op > b->op;
}

cm_status sp_prop_groups_resolve(prop *p)
{
    sp_module *m = p->m;
    uint32_t n_ops = m->n_ops, n = 0;
    for (uint32_t i = 0; i < n_ops; i++) {
        const sp_op *op = &m->ops[i];
        n += op->kind == SP_OP_SDY_SHARDING_GROUP && op->parent_block != SP_NONE &&
             op->n_operands == 1;
    }
    if (n < 2) {
        return CM_OK;
    }
    gop *g = cm_alloc(sizeof(gop) * n);
    if (g == NULL) {
        return sp_prop_oom(p);
    }
    n = 0;
    for (uint32_t i = 0; i < n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_SDY_SHARDING_GROUP && op->parent_block != SP_NONE &&
            op->n_operands == 1) {
            g[n++] = (gop){group_id(m, i), i};
        }
    }
    qsort(g, n, sizeof(gop), gop_cmp);
    uint32_t *to = NULL; /* per value: its wrapping constraint's result, once one conflicts */
    uint32_t n_to = 0;
    for (uint32_t lo = 0, hi; lo < n; lo = hi) {
        hi = lo + 1;
        while (hi < n && g[hi].id == g[lo].id) {
            hi++;
        }
        /* members of one group have one shape (as -sdy-sharding-group-import
         * checks; a module may come here without it) */
        const sp_type *t0 = &m->types[m->values[m->ops[g[lo].op].operands[0]].type];
        for (uint32_t j = lo + 1; j < hi; j++) {
            const sp_type *t = &m->types[m->values[m->ops[g[j].op].operands[0]].type];
            bool same = t->rank == t0->rank;
            for (uint32_t d = 0; same && d < t->rank; d++) {
                same = t->dims[d] == t0->dims[d];
            }
            if (!same) {
                sp_diags_add(p->diags, m, g[j].op, SP_DIAG_ERROR,
                             "ShardingGroupOps values must have the same shape for groupId: %lld",
                             (long long)g[j].id);
                char at[32];
                snprintf(at, sizeof at, "%u:%u", m->ops[g[j].op].line, m->ops[g[j].op].col);
                cm_status st = cm_error_set(p->err, CM_EINVAL, at,
                                            "sharding group %lld has members of different "
                                            "shapes",
                                            (long long)g[j].id);
                p->st = st;
                cm_free(g);
                cm_free(to);
                return st;
            }
        }
        const sp_sharding *common = NULL;
        bool conflict = false;
        for (uint32_t j = lo; j < hi && !conflict; j++) {
            const sp_sharding *s = member_sharding(m, m->ops[g[j].op].operands[0]);
            if (s == NULL || open_replicated(s)) {
                continue;
            }
            if (common == NULL) {
                common = s;
            } else if (!sp_sharding_equal(common, s)) {
                conflict = true;
            }
        }
        if (!conflict) {
            continue;
        }
        uint32_t first = m->ops[g[lo].op].operands[0];
        uint32_t owner = m->values[first].def != SP_NONE
                             ? m->values[first].def
                             : m->blocks[m->values[first].block].parent_op;
        sp_diags_add(p->diags, m, owner, SP_DIAG_WARNING,
                     "The initial operand shardings on the sharding groups of groupID: %lld do "
                     "not match. Inserting an open sharding constraint to all constrained "
                     "values. This can be caused when shardings from different values are "
                     "grouped (e.g. from jax.shard_alike) but have separate inconsistent "
                     "sharding constraints on them.",
                     (long long)g[lo].id);
        if (to == NULL) {
            to = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
            if (to == NULL) {
                cm_free(g);
                return sp_prop_oom(p);
            }
            memset(to, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
            n_to = m->n_values;
        }
        for (uint32_t j = lo; j < hi; j++) {
            uint32_t v = m->ops[g[j].op].operands[0], w;
            if (v >= n_to || to[v] != SP_NONE) {
                continue; /* a member listed twice: already wrapped */
            }
            if (wrap_open(m, v, common, &w) != CM_OK) {
                cm_free(g);
                cm_free(to);
                return sp_prop_oom(p);
            }
            to[v] = w;
        }
    }
    if (to != NULL) {
        redirect_uses(m, n_ops, to, n_to);
    }
    cm_free(g);
    cm_free(to);
    return CM_OK;
}

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
    /* the common sharding seeds every member (sp_prop_groups_resolve has
     * already split groups whose members disagreed) */
    cm_status st = CM_OK;
    for (uint32_t s = 0; s < p->n_slots; s++) {
        if (first[s] == SP_NONE) {
            continue;
        }
        sp_sharding *seed = NULL;
        uint32_t r = first[s];
        if (p->group_next[r] == r) {
            continue; /* a lone member keeps its own */
        }
        do {
            if (p->sh[r] != NULL && !open_replicated(p->sh[r])) {
                seed = p->sh[r];
                break;
            }
            r = p->group_next[r];
        } while (r != first[s]);
        if (seed != NULL) {
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
