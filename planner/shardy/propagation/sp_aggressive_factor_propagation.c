/* SPDX-License-Identifier: Apache-2.0
 * planner: aggressive factor propagation (Shardy's
 * propagation/aggressive_factor_propagation.cc), the strategy of
 * -sdy-aggressive-propagate and the levels above it: where factors conflict
 * over an axis, the factor whose source tensor is larger gets it. See
 * sp_prop_int.h. */
#include "sp_prop_int.h"

#include <string.h>

void sp_prop_aggressive_factor_propagate(prop *p, const sp_rule *r, uint32_t n, dir d)
{
    tens *ts = p->ts;
    fsh *fs = p->fs;
    struct cand *cands = p->cands;
    /* aggressive: resolve conflicts between factors by giving an axis to
     * the factor whose source tensor is larger; each destination then
     * takes the longest prefix it can hold, so one tensor's conflict does
     * not stop the others */
    uint32_t order[256];
    uint32_t no = 0;
    for (uint32_t f = 0; f < r->n_factors && no < 256; f++) {
        struct cand *c = &cands[f];
        if (c->n > 0) {
            /* aggressive order: factors whose source tensor is larger go first */
            int64_t elems = 1;
            for (uint32_t k = 0; k < ts[c->src].rank; k++) {
                if (!cm_mul_i64(elems, ts[c->src].dims[k], &elems)) {
                    elems = INT64_MAX;
                    break;
                }
            }
            c->order_key = elems;
            uint32_t k = no++;
            while (k > 0 && cands[order[k - 1]].order_key < cands[f].order_key) {
                order[k] = order[k - 1];
                k--;
            }
            order[k] = f;
        }
    }
    ax chosen[4 * MAXAX];
    uint32_t n_chosen = 0;
    for (uint32_t oi = 0; oi < no; oi++) {
        struct cand *c = &cands[order[oi]];
        for (uint32_t k = 0; k < c->n; k++) {
            ax a = c->axes[k];
            bool ok = true;
            for (uint32_t q = 0; q < n_chosen && ok; q++) {
                ok = ax_prefix_without(&a, chosen[q]);
            }
            if (!ok) {
                c->n = k;
                break;
            }
            if (!ax_eq(a, c->axes[k])) {
                c->axes[k] = a;
                c->n = k + 1;
                break;
            }
        }
        for (uint32_t k = 0; k < c->n && n_chosen < 4 * MAXAX; k++) {
            chosen[n_chosen++] = c->axes[k];
        }
    }
    for (uint32_t oi = 0; oi < no; oi++) {
        uint32_t f = order[oi];
        struct cand *c = &cands[f];
        if (c->n == 0) {
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            dir fd = sp_prop_factor_dir(p, r, f, d);
            bool dst = ts[i].is_result ? (fd & DIR_FORWARD) : (fd & DIR_BACKWARD);
            fsh *row = fs + (size_t)i * r->n_factors;
            fsh *x = &row[f];
            if (!dst || !ts[i].updatable || !x->present || x->closed) {
                continue;
            }
            ax mine[MAXAX];
            uint32_t nm = c->n;
            memcpy(mine, c->axes, sizeof(ax) * nm);
            sp_prop_axes_truncate(p, r, row, &ts[i], f, mine, &nm);
            if (nm > x->n || (nm == x->n && nm > 0 && !ax_eq(x->axes[nm - 1], mine[nm - 1]))) {
                if (ax_list_prefix(x->axes, x->n, mine, nm)) {
                    sp_prop_gain_note(&ts[i], x, mine, nm, c->src);
                    memcpy(x->axes, mine, sizeof(ax) * nm);
                    x->n = (uint8_t)nm;
                    ts[i].changed = true;
                }
            }
        }
    }
}
