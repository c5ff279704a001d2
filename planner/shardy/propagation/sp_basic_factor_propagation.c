/* SPDX-License-Identifier: Apache-2.0
 * planner: basic factor propagation (Shardy's
 * propagation/basic_factor_propagation.cc). In an op step, per factor of the
 * op's rule: the compatible major axes over the source tensors, how far a
 * tensor can take them (sp_prop_axes_truncate, which the aggressive strategy
 * uses too), and the basic strategy, under which an axis moves only if every
 * tensor can take it. See sp_prop_int.h. */
#include "sp_prop_int.h"

#include <string.h>

/* Longest common prefix of a and b into a (a sub-axis prefix counts). */
static void common_prefix(ax *a, uint32_t *na, const ax *b, uint32_t nb)
{
    uint32_t i = 0;
    while (i < *na && i < nb && ax_eq(a[i], b[i])) {
        i++;
    }
    if (i < *na && i < nb) {
        if (ax_prefix(a[i], b[i])) {
            *na = i + 1;
            return;
        }
        if (ax_prefix(b[i], a[i])) {
            a[i] = b[i];
            *na = i + 1;
            return;
        }
    }
    *na = i;
}

bool sp_prop_candidates_find(prop *p, const sp_rule *r, uint32_t n, dir d)
{
    const tens *ts = p->ts;
    const fsh *fs = p->fs;
    /* per factor: the compatible major axes over the source tensors (the
     * longest common prefix when they conflict), and the tensor they came from */
    if (CM_GROW_U32(p->cands, p->cand_cap, r->n_factors, NULL) != CM_OK) {
        sp_prop_oom(p);
        return false;
    }
    struct cand *cands = p->cands;
    for (uint32_t f = 0; f < r->n_factors; f++) {
        struct cand *c = &cands[f];
        c->n = 0;
        c->src = 0;
        c->order_key = -1;
        if (r->factor_blocked != NULL && r->factor_blocked[f]) {
            continue;
        }
        dir fd = sp_prop_factor_dir(p, r, f, d);
        if (fd == DIR_NONE) {
            continue;
        }
        /* tensors are in order: operands (sources forward) before results */
        bool first = true;
        for (uint32_t i = 0; i < n; i++) {
            if (!(ts[i].is_result ? (fd & DIR_BACKWARD) : (fd & DIR_FORWARD))) {
                continue;
            }
            const fsh *x = &fs[(size_t)i * r->n_factors + f];
            if (!x->present) {
                continue;
            }
            if (first) {
                memcpy(c->axes, x->axes, sizeof(ax) * x->n);
                c->n = x->n;
                c->src = i;
                first = false;
            } else if (ax_list_prefix(c->axes, c->n, x->axes, x->n)) {
                if (x->n > c->n || (x->n > 0 && !ax_eq(c->axes[x->n - 1], x->axes[x->n - 1]))) {
                    c->src = i;
                    memcpy(c->axes, x->axes, sizeof(ax) * x->n);
                    c->n = x->n;
                }
            } else if (!ax_list_prefix(x->axes, x->n, c->axes, c->n)) {
                common_prefix(c->axes, &c->n, x->axes, x->n);
            }
        }
    }
    return true;
}

/* Can tensor row take axis c as a new axis of factor f (no overlap with its
 * other factors, overflow axes or replicated axes)? Shrinks c to a prefix
 * when only part of it fits; false when nothing does. */
static bool fits_across(const sp_rule *r, const fsh *row, const tens *t, uint32_t f, ax *c)
{
    for (uint32_t i = 0; i < t->n_repl; i++) {
        if (!ax_prefix_without(c, t->repl[i])) {
            return false;
        }
    }
    for (uint32_t g = 0; g < r->n_factors; g++) {
        const fsh *x = &row[g];
        for (uint32_t i = 0; i < x->n; i++) {
            if (g == f) {
                continue;
            }
            if (!ax_prefix_without(c, x->axes[i])) {
                return false;
            }
        }
        for (uint32_t i = 0; i < x->n_over; i++) {
            if (!ax_prefix_without(c, x->over[i])) {
                return false;
            }
        }
    }
    return true;
}

/* Truncates cand (the axes proposed for factor f) so that tensor t can hold
 * them: its current axes must be a prefix (the last one may grow), new axes
 * need an open factor, no conflict with its other axes, and room in a factor
 * that is not the minor-most of its dim. */
static void truncate_fit(const prop *p, const sp_rule *r, const fsh *row, const tens *t,
                         uint32_t f, ax *cand, uint32_t *nc);

void sp_prop_axes_truncate(const prop *p, const sp_rule *r, const fsh *row, const tens *t,
                           uint32_t f, ax *cand, uint32_t *nc)
{
    truncate_fit(p, r, row, t, f, cand, nc);
    if (!p->o->conservative || p->step_mesh == NULL) {
        return;
    }
    /* conservative propagation never goes through a sub-axis (Shardy's
     * truncateAxesByRemovingConflicts stops at the first one) */
    for (uint32_t i = 0; i < *nc; i++) {
        const ax *a = &cand[i];
        if (a->axis >= p->step_mesh->n_axes || a->pre != 1 ||
            a->size != p->step_mesh->axes[a->axis].size) {
            *nc = i;
            return;
        }
    }
}

static void truncate_fit(const prop *p, const sp_rule *r, const fsh *row, const tens *t,
                         uint32_t f, ax *cand, uint32_t *nc)
{
    const fsh *x = &row[f];
    if (!x->present) {
        /* the factor is not in t: its axes must not collide with t's axes */
        for (uint32_t i = 0; i < *nc; i++) {
            ax c = cand[i];
            if (!fits_across(r, row, t, f, &c)) {
                *nc = i;
                return;
            }
            if (!ax_eq(c, cand[i])) {
                cand[i] = c;
                *nc = i + 1;
                return;
            }
        }
        return;
    }
    int64_t fsize = r->factor_sizes[f];
    int64_t used = 1;
    for (uint32_t i = 0; i < *nc; i++) {
        ax c = cand[i];
        if (i < x->n) {
            ax have = x->axes[i];
            if (ax_eq(c, have)) {
                used *= have.size;
                continue;
            }
            if (ax_prefix(c, have)) {
                *nc = i + 1; /* t already has more: fine, but nothing beyond */
                return;
            }
            if (i + 1 == x->n && ax_prefix(have, c) && !x->closed && x->n_over == 0) {
                /* t's last axis would grow to c: check the added part */
                ax extra = {c.axis, have.pre * have.size, c.size / have.size};
                ax e2 = extra;
                if (!fits_across(r, row, t, f, &e2)) {
                    cand[i] = have;
                    *nc = i + 1;
                    return;
                }
                if (!ax_eq(e2, extra)) {
                    cand[i].size = have.size * e2.size;
                    *nc = i + 1;
                    c = cand[i];
                }
                if (!x->minor_most || p->o->conservative) {
                    int64_t room = fsize / used;
                    if (room % c.size != 0) {
                        int64_t g = gcd64(room, c.size);
                        if (g % have.size != 0 || g == have.size || p->o->conservative) {
                            cand[i] = have;
                        } else {
                            cand[i].size = g;
                        }
                        *nc = i + 1;
                        return;
                    }
                }
                used *= c.size;
                continue;
            }
            *nc = i; /* conflict */
            return;
        }
        /* a new axis for t */
        if (x->closed || x->n_over > 0) {
            *nc = i;
            return;
        }
        ax c2 = c;
        if (!fits_across(r, row, t, f, &c2)) {
            *nc = i;
            return;
        }
        /* the same axis must not already be used within this factor */
        for (uint32_t k = 0; k < x->n; k++) {
            if (!ax_prefix_without(&c2, x->axes[k])) {
                *nc = i;
                return;
            }
        }
        if (!ax_eq(c2, c)) {
            if (p->o->conservative) {
                *nc = i;
                return;
            }
            cand[i] = c2;
            *nc = i + 1;
            c = c2;
        }
        if (!x->minor_most || p->o->conservative) {
            int64_t room = fsize / used;
            if (room % c.size != 0) {
                int64_t g = gcd64(room, c.size);
                if (g <= 1 || p->o->conservative) {
                    *nc = i;
                } else {
                    cand[i].size = g;
                    *nc = i + 1;
                }
                return;
            }
        }
        used *= c.size;
    }
}

/* Remembers which axes tensor t gains (beyond x's current axes) and from which tensor. */
void sp_prop_gain_note(tens *t, const fsh *x, const ax *cand, uint32_t nc, uint32_t src)
{
    for (uint32_t k = 0; k < nc; k++) {
        bool had = false;
        for (uint32_t j = 0; j < x->n && !had; j++) {
            had = ax_eq(x->axes[j], cand[k]);
        }
        if (!had && t->n_gained < MAXAX) {
            t->gained[t->n_gained].a = cand[k];
            t->gained[t->n_gained].src = src;
            t->n_gained++;
        }
    }
}

void sp_prop_basic_factor_propagate(prop *p, const sp_rule *r, uint32_t n, dir d)
{
    tens *ts = p->ts;
    fsh *fs = p->fs;
    struct cand *cands = p->cands;
    /* basic: an axis moves only if every tensor can take it */
    for (uint32_t f = 0; f < r->n_factors; f++) {
        struct cand *c = &cands[f];
        for (uint32_t i = 0; i < n && c->n > 0; i++) {
            sp_prop_axes_truncate(p, r, fs + (size_t)i * r->n_factors, &ts[i], f, c->axes, &c->n);
        }
        if (c->n == 0) {
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            dir fd = sp_prop_factor_dir(p, r, f, d);
            bool dst = ts[i].is_result ? (fd & DIR_FORWARD) : (fd & DIR_BACKWARD);
            fsh *x = &fs[(size_t)i * r->n_factors + f];
            uint32_t nc = c->n;
            if (!dst || !ts[i].updatable || !x->present || x->closed) {
                continue;
            }
            if (x->n < nc || (x->n == nc && !ax_eq(x->axes[nc - 1], c->axes[nc - 1]))) {
                if (ax_list_prefix(x->axes, x->n, c->axes, nc)) {
                    sp_prop_gain_note(&ts[i], x, c->axes, nc, c->src);
                    memcpy(x->axes, c->axes, sizeof(ax) * nc);
                    x->n = (uint8_t)nc;
                    ts[i].changed = true;
                }
            }
        }
    }
}
