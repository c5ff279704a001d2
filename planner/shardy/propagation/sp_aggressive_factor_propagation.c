/* SPDX-License-Identifier: Apache-2.0
 * planner: aggressive factor propagation (Shardy's
 * propagation/aggressive_factor_propagation.cc), the strategy of
 * -sdy-aggressive-propagate and the levels above it: where factors conflict
 * over an axis, the factor whose source tensor is larger gets it. See
 * sp_prop_int.h. */
#include "sp_prop_int.h"

#include <string.h>

/* Shardy's sort of the factors with new axes: is factor f (source size
 * fsz, sharded size fsh, source tensor fsrc) before factor g? */
typedef struct fkey {
    int64_t size;     /* elements of the source tensor (product of its factors' sizes) */
    int64_t sharded;  /* element-wise ops: the candidate's sharded size, else 0 */
    uint32_t src;     /* the source tensor's index, operands then results */
    uint32_t factor;
} fkey;

static bool fkey_before(const fkey *a, const fkey *b)
{
    if (a->size != b->size) {
        return a->size > b->size;
    }
    if (a->sharded != b->sharded) {
        return a->sharded > b->sharded;
    }
    if (a->src != b->src) {
        return a->src < b->src;
    }
    return a->factor < b->factor;
}

void sp_prop_aggressive_factor_propagate(prop *p, const sp_rule *r, uint32_t n, dir d,
                                         uint32_t op)
{
    tens *ts = p->ts;
    fsh *fs = p->fs;
    struct cand *cands = p->cands;
    bool elementwise = op < p->m->n_ops && sp_prop_is_elementwise(p->m, op);
    /* aggressive: conflicts between factors are resolved in each tensor
     * on its own, the factors taking their axes in order, each the longest
     * prefix its tensor can still hold, so one tensor's conflict does not
     * stop the others. A factor's source is the largest tensor (the first
     * of equals) whose axes for it extend the candidate; the order is
     * larger source first, then (element-wise ops) the more sharded
     * candidate, the earlier source, the lower factor. */
    uint32_t order[256];
    fkey keys[256];
    uint32_t no = 0;
    for (uint32_t f = 0; f < r->n_factors && no < 256; f++) {
        struct cand *c = &cands[f];
        if (c->n == 0) {
            continue;
        }
        fkey k = {-1, 0, 0, f};
        for (uint32_t i = 0; i < n; i++) {
            const fsh *row = fs + (size_t)i * r->n_factors;
            if (!row[f].present || !ax_list_prefix(c->axes, c->n, row[f].axes, row[f].n)) {
                continue;
            }
            int64_t size = 1;
            for (uint32_t g = 0; g < r->n_factors; g++) {
                if (row[g].present && !cm_mul_i64(size, r->factor_sizes[g], &size)) {
                    size = INT64_MAX;
                    break;
                }
            }
            if (size > k.size) {
                k.size = size;
                k.src = i;
            }
        }
        if (elementwise) {
            k.sharded = 1;
            for (uint32_t q = 0; q < c->n; q++) {
                k.sharded *= c->axes[q].size;
            }
        }
        c->order_key = k.size;
        uint32_t pos = no++;
        while (pos > 0 && fkey_before(&k, &keys[pos - 1])) {
            order[pos] = order[pos - 1];
            keys[pos] = keys[pos - 1];
            pos--;
        }
        order[pos] = f;
        keys[pos] = k;
    }
    /* results first, then operands (an element-wise op's operand then sees
     * the results as this step left them) */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t oi = 0; oi < no; oi++) {
            uint32_t f = order[oi];
            const struct cand *c = &cands[f];
            dir fd = sp_prop_factor_dir(p, r, f, d);
            for (uint32_t i = 0; i < n; i++) {
                if (ts[i].is_result != (pass == 0)) {
                    continue;
                }
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
                if (elementwise && !ts[i].is_result) {
                    /* an element-wise operand takes no more than a result
                     * holds when that is a strict prefix of its new axes:
                     * nothing goes sideways that the results refused */
                    for (uint32_t j = 0; j < n; j++) {
                        const fsh *y = &fs[(size_t)j * r->n_factors + f];
                        if (ts[j].is_result && y->present && ax_list_prefix(y->axes, y->n, mine, nm) &&
                            (y->n < nm || (nm > 0 && !ax_eq(y->axes[nm - 1], mine[nm - 1])))) {
                            memcpy(mine, y->axes, sizeof(ax) * y->n);
                            nm = y->n;
                        }
                    }
                }
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
}
