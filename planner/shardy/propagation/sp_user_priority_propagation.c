/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-user-priority-propagate (Shardy's
 * propagation/user_priority_propagation.cc): shardings annotated with a
 * priority (`{"a"}p1`) take part from the round of their priority on, lowest
 * number first; until then their dims are hidden. Priorities are dropped
 * from the output once every round ran. See sp_prop_int.h. */
#include <stdlib.h>

#include "sp_prop_int.h"

/* The sharding of a slot as the current user priority sees it: dims with a
 * higher priority number are hidden (closed and empty). */
const sp_sharding *sp_prop_priority_visible(prop *p, uint32_t slot)
{
    sp_sharding *s = p->sh[slot];
    if (s == NULL || p->user_priority < 0) {
        return s;
    }
    uint32_t n_rep = s->n_replicated;
    bool hide = false;
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].priority > p->user_priority) {
            hide = true;
            n_rep += s->dims[d].n_axes;
        }
    }
    if (!hide) {
        return s;
    }
    /* A shallow copy in the round's view arena (reset at every round): only
     * the dims and the replicated axes differ from the real sharding, so
     * the mesh name, axes and unreduced axes stay the real one's, and a
     * sharding built from the view (build_sharding) points at nothing of
     * the view once its hidden dims are restored. */
    cm_arena *a = &p->views;
    sp_sharding *c = cm_arena_memdup(a, s, 1, sizeof *s);
    sp_dim_sharding *dims = cm_arena_memdup(a, s->dims, s->rank, sizeof *s->dims);
    sp_axis_ref *rep = cm_arena_alloc(a, sizeof *rep * (n_rep + 1u));
    if (c == NULL || dims == NULL || rep == NULL) {
        sp_prop_oom(p);
        return s;
    }
    /* as Shardy's getInitializedSharding: a hidden dim's axes are held
     * replicated, so that no other dim takes them meanwhile */
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_replicated; i++) {
        rep[k++] = s->replicated[i];
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (dims[d].priority > p->user_priority) {
            for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
                rep[k++] = s->dims[d].axes[i];
            }
            dims[d].n_axes = 0;
            dims[d].axes = NULL;
            dims[d].is_closed = true;
        }
    }
    c->dims = dims;
    c->replicated = rep;
    c->n_replicated = k;
    return c;
}

void sp_prop_hidden_dims_restore(const prop *p, uint32_t slot, const sp_sharding *seen,
                                 sp_sharding *s)
{
    const sp_sharding *real = p->sh[slot];
    if (real != NULL && real != seen && p->user_priority >= 0) {
        for (uint32_t d = 0; d < s->rank && d < real->rank; d++) {
            if (real->dims[d].priority > p->user_priority) {
                s->dims[d] = real->dims[d];
            }
        }
        /* the hidden dims' axes were only held replicated in the view */
        s->replicated = real->replicated;
        s->n_replicated = real->n_replicated;
    }
}

static int prio_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The distinct priorities above 0 of the slots' shardings, ascending, in
 * *out (cm_alloc'd; NULL when there are none); *any: whether any dim has
 * a priority (0 included). Returns the count, or -1 out of memory. */
static int64_t priorities_collect(prop *p, int32_t **out, bool *any)
{
    *out = NULL;
    *any = false;
    size_t n = 0, cap = 0;
    int32_t *v = NULL;
    for (uint32_t s = 0; s < p->n_slots; s++) {
        const sp_sharding *sh = p->sh[s];
        for (uint32_t d = 0; sh != NULL && d < sh->rank; d++) {
            int32_t pr = sh->dims[d].priority;
            *any = *any || pr >= 0;
            if (pr <= 0 || (n > 0 && v[n - 1] == pr)) {
                continue; /* runs of one priority are common: keep one */
            }
            if (cm_grow((void **)&v, &cap, n + 1, sizeof *v, NULL) != CM_OK) {
                cm_free(v);
                return -1;
            }
            v[n++] = pr;
        }
    }
    if (n == 0) {
        cm_free(v);
        return 0;
    }
    qsort(v, n, sizeof *v, prio_cmp);
    size_t u = 1;
    for (size_t i = 1; i < n; i++) {
        if (v[i] != v[u - 1]) {
            v[u++] = v[i];
        }
    }
    *out = v;
    return (int64_t)u;
}

/* Shardy drops every user priority once all rounds ran: the output carries
 * `{"a"}` where the input said `{"a"}p1`. Slots that shared a sharding keep
 * sharing its stripped copy (one-entry cache: equal slots are usually
 * adjacent). */
static void priorities_strip(prop *p)
{
    const sp_sharding *last_in = NULL;
    sp_sharding *last_out = NULL;
    for (uint32_t slot = 0; slot < p->n_slots && p->st == CM_OK; slot++) {
        sp_sharding *s = p->sh[slot];
        bool has = false;
        for (uint32_t d = 0; s != NULL && d < s->rank && !has; d++) {
            has = s->dims[d].priority >= 0;
        }
        if (!has) {
            continue;
        }
        if (s != last_in) {
            sp_sharding *c = sp_sharding_clone(&p->m->arena, s);
            if (c == NULL) {
                sp_prop_oom(p);
                return;
            }
            for (uint32_t d = 0; d < c->rank; d++) {
                c->dims[d].priority = -1;
            }
            last_in = s;
            last_out = c;
        }
        p->sh[slot] = last_out;
    }
}

/* One round at user priority up: views are made afresh for it. */
static void round_run(prop *p, int up, const uint32_t *order, uint32_t n_order)
{
    cm_arena_reset(&p->views);
    p->user_priority = up;
    sp_prop_op_priority_run(p, order, n_order);
}

/* As Shardy's UserPriorityPropagationPass: a round at priority 0 (dims
 * with a higher number hidden), then one round per distinct priority
 * present, ascending, each revealing the dims of its priority. */
void sp_prop_user_priority_run(prop *p, const uint32_t *order, uint32_t n_order)
{
    int32_t *prios = NULL;
    bool any = false;
    int64_t n = priorities_collect(p, &prios, &any);
    if (n < 0) {
        sp_prop_oom(p);
        return;
    }
    if (!any) {
        p->user_priority = -1;
        sp_prop_op_priority_run(p, order, n_order);
        cm_free(prios);
        return;
    }
    round_run(p, 0, order, n_order);
    for (int64_t i = 0; i < n && p->st == CM_OK; i++) {
        round_run(p, prios[i], order, n_order);
    }
    cm_free(prios);
    cm_arena_reset(&p->views);
    p->user_priority = -1;
    if (p->st == CM_OK) {
        priorities_strip(p);
    }
}
