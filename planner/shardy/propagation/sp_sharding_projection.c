/* SPDX-License-Identifier: Apache-2.0
 * planner: sharding projection onto the factors of a sharding rule (see
 * sp_sharding_projection.h). */
#include "sp_sharding_projection.h"

#include <stddef.h>
#include <string.h>

bool sp_sharding_project(const sp_rule *r, const sp_tensor_mapping *map, const sp_sharding *s,
                         const sp_mesh *mesh, sp_factor_axes *row, ax *repl, uint32_t *n_repl)
{
    for (uint32_t f = 0; f < r->n_factors; f++) {
        memset(&row[f], 0, offsetof(sp_factor_axes, axes));
    }
    if (repl != NULL) {
        *n_repl = 0;
    }
    for (uint32_t d = 0; d < map->rank; d++) {
        const sp_dim_mapping *dm = &map->dims[d];
        bool closed = s != NULL && d < s->rank && s->dims[d].is_closed;
        ax axes[SP_PROJ_MAX_AXES];
        uint32_t na = 0;
        if (s != NULL && d < s->rank && mesh != NULL) {
            const sp_dim_sharding *ds = &s->dims[d];
            if (ds->n_axes > SP_PROJ_MAX_AXES) {
                return false;
            }
            for (uint32_t i = 0; i < ds->n_axes; i++) {
                if (!ax_from_ref(mesh, &ds->axes[i], &axes[na++])) {
                    return false;
                }
            }
        }
        uint32_t ai = 0;
        bool have_rem = false;
        ax rem = {0, 0, 0};
        bool overflowed = false;
        for (uint32_t k = 0; k < dm->n_factors; k++) {
            uint32_t f = dm->factors[k];
            sp_factor_axes *x = &row[f];
            x->present = 1;
            x->closed = closed;
            x->minor_most = k + 1 == dm->n_factors;
            x->n = 0;
            x->n_over = 0;
            if (overflowed) {
                continue;
            }
            if (x->minor_most) {
                if (na - ai + (have_rem ? 1u : 0u) > SP_PROJ_MAX_AXES) {
                    return false;
                }
                if (have_rem) {
                    x->axes[x->n++] = rem;
                    have_rem = false;
                }
                while (ai < na) {
                    x->axes[x->n++] = axes[ai++];
                }
                break;
            }
            int64_t R = r->factor_sizes[f];
            for (;;) {
                ax cur;
                if (have_rem) {
                    cur = rem;
                } else if (ai < na) {
                    cur = axes[ai];
                } else {
                    break;
                }
                int64_t sz = cur.size;
                if (x->n >= SP_PROJ_MAX_AXES) {
                    return false;
                }
                if (sz == 1 || (R > 0 && R % sz == 0)) {
                    x->axes[x->n++] = cur;
                    if (sz > 1) {
                        R /= sz;
                    }
                    if (have_rem) {
                        have_rem = false;
                    } else {
                        ai++;
                    }
                    continue;
                }
                if (R <= 1) {
                    break;
                }
                int64_t g = gcd64(R, sz);
                if (g > 1) {
                    x->axes[x->n++] = (ax){cur.axis, cur.pre, g};
                    rem = (ax){cur.axis, cur.pre * g, sz / g};
                    if (!have_rem) {
                        ai++;
                    }
                    have_rem = true;
                    R /= g;
                    continue;
                }
                /* does not fit: the rest of the dim overflows this factor */
                if (na - ai + (have_rem ? 1u : 0u) > SP_PROJ_MAX_AXES) {
                    return false;
                }
                if (have_rem) {
                    x->over[x->n_over++] = rem;
                    have_rem = false;
                }
                while (ai < na) {
                    x->over[x->n_over++] = axes[ai++];
                }
                overflowed = true;
                break;
            }
        }
    }
    if (s != NULL && mesh != NULL && repl != NULL) {
        if (s->n_replicated + s->n_unreduced > SP_PROJ_MAX_AXES) {
            return false;
        }
        for (uint32_t i = 0; i < s->n_replicated; i++) {
            if (!ax_from_ref(mesh, &s->replicated[i], &repl[(*n_repl)++])) {
                return false;
            }
        }
        /* unreduced axes are off limits to the dims as replicated ones are
         * (Shardy's compatiblePrefixNoConflictsWithinFactor) */
        for (uint32_t i = 0; i < s->n_unreduced; i++) {
            if (!ax_from_ref(mesh, &s->unreduced[i], &repl[(*n_repl)++])) {
                return false;
            }
        }
    }
    return true;
}
