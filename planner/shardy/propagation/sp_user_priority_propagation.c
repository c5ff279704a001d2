/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-user-priority-propagate (Shardy's
 * propagation/user_priority_propagation.cc): shardings annotated with a
 * priority (`{"a"}p1`) take part from the round of their priority on, lowest
 * number first; until then their dims are hidden. Priorities are dropped
 * from the output once every round ran. See sp_prop_int.h. */
#include "sp_prop_int.h"

/* The sharding of a slot as the current user priority sees it: dims with a
 * higher priority number are hidden (closed and empty). */
const sp_sharding *sp_prop_priority_visible(prop *p, uint32_t slot)
{
    sp_sharding *s = p->sh[slot];
    if (s == NULL || p->user_priority < 0) {
        return s;
    }
    bool hide = false;
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].priority > p->user_priority) {
            hide = true;
        }
    }
    if (!hide) {
        return s;
    }
    sp_sharding *c = sp_sharding_clone(&p->m->arena, s);
    uint32_t n_rep = s->n_replicated;
    for (uint32_t d = 0; d < s->rank; d++) {
        n_rep += s->dims[d].priority > p->user_priority ? s->dims[d].n_axes : 0;
    }
    sp_axis_ref *rep = cm_arena_alloc(&p->m->arena, sizeof *rep * (n_rep + 1u));
    if (c == NULL || rep == NULL) {
        sp_prop_oom(p);
        return s;
    }
    /* as Shardy's getInitializedSharding: a hidden dim's axes are held
     * replicated, so that no other dim takes them meanwhile */
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_replicated; i++) {
        rep[k++] = s->replicated[i];
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        if (c->dims[d].priority > p->user_priority) {
            for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
                rep[k++] = s->dims[d].axes[i];
            }
            c->dims[d].n_axes = 0;
            c->dims[d].is_closed = true;
        }
    }
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

static int max_user_priority(const prop *p)
{
    int mx = -1;
    for (uint32_t s = 0; s < p->n_slots; s++) {
        const sp_sharding *sh = p->sh[s];
        for (uint32_t d = 0; sh != NULL && d < sh->rank; d++) {
            if (sh->dims[d].priority > mx) {
                mx = sh->dims[d].priority;
            }
        }
    }
    return mx;
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

void sp_prop_user_priority_run(prop *p, const uint32_t *order, uint32_t n_order)
{
    int max_prio = max_user_priority(p);
    for (int up = max_prio >= 0 ? 0 : -1; up <= max_prio && p->st == CM_OK; up++) {
        p->user_priority = up;
        sp_prop_op_priority_run(p, order, n_order);
        if (up < 0) {
            break;
        }
    }
    if (p->st == CM_OK) {
        priorities_strip(p);
    }
}
