/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-reshard-to-collectives (Shardy's
 * export/reshard_to_collectives.cc: sdy.reshard -> all_slice,
 * collective_permute, all_to_all, all_gather), device groups of collectives,
 * local shapes, and -shardplan-annotate-device-groups (ours, not Shardy's;
 * it shares this file's mesh helpers). Declared in sp_collectives.h.
 *
 * The lowering works on "atoms": the axes and sub-axes of the input and
 * output shardings split at every sub-axis boundary either side uses, so two
 * atoms are equal or disjoint. Per dimension it tracks the current atoms and
 * the wanted (output) ones; their common prefix never moves. The steps are
 * Shardy's (reshard_to_collectives.mlir shows them): slice new axes where they
 * fit, a collective permute when the all-to-alls and the final all-gather
 * cannot reach the output from there, then the all-to-alls (a suffix of one
 * dimension appended to another) and one all-gather. Work memory is heap
 * (cm_alloc), freed per reshard; new IR lives in the module arena. */
#include "sp_collectives.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_ax.h"

#define MAX_ATOMS 48 /* atoms per dimension; more makes a reshard stay as it is */

/* ---- atoms -------------------------------------------------------------------------- */

typedef struct axl {
    ax a[MAX_ATOMS];
    uint32_t n;
} axl;

static int64_t axl_size_range(const axl *l, uint32_t from, uint32_t to)
{
    int64_t s = 1;
    for (uint32_t i = from; i < to; i++) {
        s *= l->a[i].size;
    }
    return s;
}

static int64_t axl_size(const axl *l)
{
    return axl_size_range(l, 0, l->n);
}

static bool axl_push(axl *l, ax a)
{
    if (l->n >= MAX_ATOMS) {
        return false;
    }
    l->a[l->n++] = a;
    return true;
}

static bool axl_contains(const axl *l, ax a)
{
    for (uint32_t i = 0; i < l->n; i++) {
        if (ax_eq(l->a[i], a)) {
            return true;
        }
    }
    return false;
}

/* Splits atom i of l into (pre, g) and (pre * g, size / g). */
static bool axl_split(axl *l, uint32_t i, int64_t g)
{
    if (l->n >= MAX_ATOMS) {
        return false;
    }
    ax a = l->a[i];
    memmove(&l->a[i + 2], &l->a[i + 1], sizeof(ax) * (l->n - i - 1));
    l->a[i].size = g;
    l->a[i + 1] = (ax){a.axis, a.pre * g, a.size / g};
    l->n++;
    return true;
}

/* Finds a in lists[0..n): its list and index; false when absent. */
static bool find_atom(const axl *lists, uint32_t n, ax a, uint32_t *d_out, uint32_t *i_out)
{
    for (uint32_t d = 0; d < n; d++) {
        for (uint32_t i = 0; i < lists[d].n; i++) {
            if (ax_eq(lists[d].a[i], a)) {
                *d_out = d;
                *i_out = i;
                return true;
            }
        }
    }
    return false;
}

/* ---- mesh helpers ------------------------------------------------------------------- */

/* ax_from_ref, with a sub-axis checked against its axis's size. */
static bool ref_to_ax(const sp_mesh *mesh, const sp_axis_ref *r, ax *out)
{
    if (!ax_from_ref(mesh, r, out)) {
        return false;
    }
    int64_t n = mesh->axes[out->axis].size;
    return r->pre_size == 0 ||
           (r->pre_size >= 1 && r->size >= 1 && n % r->pre_size == 0 &&
            n % (r->pre_size * r->size) == 0);
}

/* Appends the refs of atoms a[0..n) to out, merging consecutive sub-axes of one
 * axis ("x":(1)2, "x":(2)2 -> "x"); returns the count. */
static uint32_t to_refs(const sp_mesh *mesh, const ax *a, uint32_t n, sp_axis_ref *out)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        ax cur = a[i];
        while (i + 1 < n && a[i + 1].axis == cur.axis && cur.pre * cur.size == a[i + 1].pre) {
            cur.size *= a[i + 1].size;
            i++;
        }
        const sp_mesh_axis *ma = &mesh->axes[cur.axis];
        out[k].name = ma->name;
        if (cur.pre == 1 && cur.size == ma->size) {
            out[k].pre_size = 0;
            out[k].size = ma->size;
        } else {
            out[k].pre_size = cur.pre;
            out[k].size = cur.size;
        }
        k++;
    }
    return k;
}

static bool same_axes(const sp_mesh *a, const sp_mesh *b)
{
    if (a->n_axes != b->n_axes) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_axes; i++) {
        if (strcmp(a->axes[i].name, b->axes[i].name) != 0 || a->axes[i].size != b->axes[i].size) {
            return false;
        }
    }
    return true;
}

static int64_t device_at(const sp_mesh *m, int64_t i)
{
    return m->device_ids != NULL && (uint64_t)i < m->n_device_ids ? m->device_ids[i] : i;
}

static bool same_devices(const sp_mesh *a, const sp_mesh *b)
{
    int64_t n = sp_mesh_size(a);
    for (int64_t i = 0; i < n; i++) {
        if (device_at(a, i) != device_at(b, i)) {
            return false;
        }
    }
    return true;
}

/* A maximal mesh `<[], device_ids=[N]>` puts a tensor on one device. */
static bool is_maximal(const sp_mesh *m)
{
    return m->n_axes == 0 && m->n_device_ids > 0;
}

static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    if (s->mesh != NULL) {
        return s->mesh;
    }
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static bool fully_replicated(const sp_sharding *s)
{
    if (s == NULL) {
        return true;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return true;
}

/* ---- the plan of one reshard -------------------------------------------------------- */

typedef struct plan {
    const sp_mesh *mesh; /* axes shared by the input and output meshes */
    uint32_t rank;
    const int64_t *dims; /* tensor dims */
    axl *cur;            /* rank lists: the sharding reached so far */
    axl *out;            /* rank lists: the wanted sharding */
    axl *tmp;            /* rank lists of scratch (targets, simulations) */
    axl *tmp2;
    bool overflow; /* an atom list was full: give up on this reshard */
} plan;

/* Splits every atom of cur and out at the sub-axis boundaries of the other
 * atoms of its axis, so atoms are equal or disjoint. False when boundaries do
 * not nest (e.g. "x":(1)2 and "x":(1)3 of a 6-axis) or a list overflows. */
static bool align(plan *p)
{
    for (uint32_t ai = 0; ai < p->mesh->n_axes; ai++) {
        int64_t bounds[2 * MAX_ATOMS * 2 + 2];
        uint32_t nb = 0;
        axl *sets[2] = {p->cur, p->out};
        for (int s = 0; s < 2; s++) {
            for (uint32_t d = 0; d < p->rank; d++) {
                const axl *l = &sets[s][d];
                for (uint32_t i = 0; i < l->n; i++) {
                    if (l->a[i].axis != ai) {
                        continue;
                    }
                    if (nb + 2 > sizeof bounds / sizeof bounds[0]) {
                        return false;
                    }
                    bounds[nb++] = l->a[i].pre;
                    bounds[nb++] = l->a[i].pre * l->a[i].size;
                }
            }
        }
        if (nb == 0) {
            continue;
        }
        /* sort and check that consecutive distinct bounds divide each other */
        for (uint32_t i = 1; i < nb; i++) {
            for (uint32_t j = i; j > 0 && bounds[j - 1] > bounds[j]; j--) {
                int64_t t = bounds[j];
                bounds[j] = bounds[j - 1];
                bounds[j - 1] = t;
            }
        }
        for (uint32_t i = 1; i < nb; i++) {
            if (bounds[i] != bounds[i - 1] && bounds[i] % bounds[i - 1] != 0) {
                return false;
            }
        }
        for (int s = 0; s < 2; s++) {
            for (uint32_t d = 0; d < p->rank; d++) {
                axl *l = &sets[s][d];
                for (uint32_t i = 0; i < l->n; i++) {
                    if (l->a[i].axis != ai) {
                        continue;
                    }
                    int64_t lo = l->a[i].pre, hi = lo * l->a[i].size;
                    for (uint32_t b = 0; b < nb; b++) {
                        if (bounds[b] > lo && bounds[b] < hi) {
                            if (!axl_split(l, i, bounds[b] / lo)) {
                                p->overflow = true;
                                return false;
                            }
                            break; /* the rest is split when i + 1 is visited */
                        }
                    }
                }
            }
        }
    }
    return true;
}

/* Length of the common prefix of cur[d] and out[d] (in lists c, o). */
static uint32_t prefix_len(const axl *c, const axl *o)
{
    uint32_t i = 0;
    while (i < c->n && i < o->n && ax_eq(c->a[i], o->a[i])) {
        i++;
    }
    return i;
}

static bool lists_equal(const axl *a, const axl *b, uint32_t rank)
{
    for (uint32_t d = 0; d < rank; d++) {
        if (a[d].n != b[d].n) {
            return false;
        }
        for (uint32_t i = 0; i < a[d].n; i++) {
            if (!ax_eq(a[d].a[i], b[d].a[i])) {
                return false;
            }
        }
    }
    return true;
}

static bool in_lists(const axl *lists, uint32_t rank, ax a)
{
    uint32_t d, i;
    return find_atom(lists, rank, a, &d, &i);
}

/* ---- emitting ops ------------------------------------------------------------------- */

typedef struct emitter {
    sp_module *m;
    uint32_t block;
    uint32_t index; /* where the next op goes in block */
    uint32_t value; /* the value reached so far */
    const plan *p;
    const char *mesh_name;    /* mesh of the shardings emitted now */
    sp_mesh *mesh_inline;     /* or this inlined mesh */
    const sp_sharding *proto; /* the reshard's sharding: unreduced axes */
    uint32_t n_ops;           /* ops emitted */
    cm_status st;
} emitter;

static sp_axis_ref *refs_of(emitter *e, const ax *a, uint32_t n, uint32_t *n_out)
{
    *n_out = 0;
    if (n == 0) {
        return NULL;
    }
    sp_axis_ref *r = cm_arena_alloc(&e->m->arena, sizeof(sp_axis_ref) * n);
    if (r == NULL) {
        e->st = CM_ENOMEM;
        return NULL;
    }
    *n_out = to_refs(e->p->mesh, a, n, r);
    return r;
}

/* A closed sharding with the atoms of lists l on the emitter's mesh. */
static sp_sharding *make_sharding(emitter *e, const axl *l)
{
    sp_module *m = e->m;
    uint32_t rank = e->p->rank;
    sp_sharding *s = cm_arena_zalloc(&m->arena, sizeof *s);
    sp_dim_sharding *dims = cm_arena_zalloc(&m->arena, sizeof *dims * (rank + 1u));
    if (s == NULL || dims == NULL) {
        e->st = CM_ENOMEM;
        return NULL;
    }
    s->mesh_name = e->mesh_name;
    s->mesh = e->mesh_inline;
    s->rank = rank;
    s->dims = dims;
    for (uint32_t d = 0; d < rank; d++) {
        dims[d].is_closed = true;
        dims[d].priority = -1;
        dims[d].axes = refs_of(e, l[d].a, l[d].n, &dims[d].n_axes);
    }
    if (e->proto != NULL && e->proto->n_unreduced > 0) {
        s->unreduced = e->proto->unreduced;
        s->n_unreduced = e->proto->n_unreduced;
        s->reduction = e->proto->reduction;
    }
    return e->st == CM_OK ? s : NULL;
}

/* Creates `name` on the current value with attribute key = axes (may be
 * NULL) and out_sharding = l, inserted at the emitter's position. */
static void emit_op(emitter *e, const char *name, const char *key, sp_attr *axes, const axl *l)
{
    if (e->st != CM_OK) {
        return;
    }
    sp_module *m = e->m;
    uint32_t ty = m->values[e->value].type, op;
    sp_sharding *s = make_sharding(e, l);
    sp_attr *sa = sp_attr_new(m, SP_ATTR_SHARDING);
    if (s == NULL || sa == NULL ||
        sp_module_new_op(m, SP_NONE, name, &e->value, 1, &ty, 1, &op) != CM_OK) {
        e->st = CM_ENOMEM;
        return;
    }
    sa->u.sharding = s;
    if ((key != NULL && sp_op_set_attr(m, op, key, axes) != CM_OK) ||
        sp_op_set_attr(m, op, "out_sharding", sa) != CM_OK ||
        sp_block_insert_op(m, e->block, e->index, op) != CM_OK) {
        e->st = CM_ENOMEM;
        return;
    }
    e->index++;
    e->n_ops++;
    e->value = m->ops[op].first_result;
}

/* all_gather / all_slice with per-dimension atoms per[0..rank). */
static void emit_per_dim(emitter *e, const char *name, const char *key, const axl *per,
                         const axl *after)
{
    if (e->st != CM_OK) {
        return;
    }
    uint32_t rank = e->p->rank;
    sp_attr *a = sp_attr_new(e->m, SP_ATTR_AXIS_LISTS);
    sp_axis_list *items = cm_arena_zalloc(&e->m->arena, sizeof *items * (rank + 1u));
    if (a == NULL || items == NULL) {
        e->st = CM_ENOMEM;
        return;
    }
    for (uint32_t d = 0; d < rank; d++) {
        items[d].axes = refs_of(e, per[d].a, per[d].n, &items[d].n);
    }
    a->u.axis_lists.items = items;
    a->u.axis_lists.n = rank;
    emit_op(e, name, key, a, after);
}

typedef struct a2a_param {
    uint32_t src, tgt, len; /* the last len atoms of cur[src] go to the end of cur[tgt] */
} a2a_param;

static void emit_all_to_all(emitter *e, const axl *before, const a2a_param *ps, uint32_t n,
                            const axl *after)
{
    if (e->st != CM_OK) {
        return;
    }
    sp_attr *a = sp_attr_new(e->m, SP_ATTR_ALL_TO_ALL);
    sp_all_to_all_param *items = cm_arena_zalloc(&e->m->arena, sizeof *items * (n + 1u));
    if (a == NULL || items == NULL) {
        e->st = CM_ENOMEM;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const axl *src = &before[ps[i].src];
        items[i].axes.axes = refs_of(e, &src->a[src->n - ps[i].len], ps[i].len, &items[i].axes.n);
        items[i].src_dim = ps[i].src;
        items[i].tgt_dim = ps[i].tgt;
    }
    a->u.a2a.items = items;
    a->u.a2a.n = n;
    emit_op(e, "sdy.all_to_all", "params", a, after);
}

/* ---- step 1: all-slice -------------------------------------------------------------- */

/* Is some atom of cur[d] beyond its common prefix wanted in dimension t? */
static bool holds_atom_for(const plan *p, uint32_t d, uint32_t t)
{
    uint32_t pl = prefix_len(&p->cur[d], &p->out[d]);
    for (uint32_t i = pl; i < p->cur[d].n; i++) {
        if (axl_contains(&p->out[t], p->cur[d].a[i])) {
            return true;
        }
    }
    return false;
}

/* Slices the output atoms that no dimension has yet:
 *  - a run of them that follows, in the output, an atom that ends another
 *    (source) dimension goes on that source dimension, so one all-to-all
 *    moves them together (when the source keeps nothing else to gain, the
 *    target holds nothing foreign, and the tensor dimension stays divisible);
 *  - the others go on their own dimension up to its capacity (output size
 *    over its gcd with the current size), taking prefix sub-axes;
 *  - what is left goes on a dimension whose atoms move into the atom's
 *    dimension, so a collective permute can swap them.
 * slice[d] receives the atoms appended to cur[d]. */
static bool slice_step(plan *p, axl *slice)
{
    uint32_t r = p->rank;
    bool any = false;
    for (uint32_t d = 0; d < r; d++) {
        slice[d].n = 0;
    }
    /* on the source dimension of an all-to-all */
    for (uint32_t t = 0; t < r; t++) {
        uint32_t plt = prefix_len(&p->cur[t], &p->out[t]);
        if (plt != p->cur[t].n) {
            continue;
        }
        for (uint32_t j = plt; j + 1 < p->out[t].n; j++) {
            uint32_t s, i;
            if (!find_atom(p->cur, r, p->out[t].a[j], &s, &i) || s == t || i + 1 != p->cur[s].n ||
                i < prefix_len(&p->cur[s], &p->out[s]) ||
                prefix_len(&p->cur[s], &p->out[s]) != p->out[s].n) {
                continue;
            }
            uint32_t k = j + 1;
            while (k < p->out[t].n && !in_lists(p->cur, r, p->out[t].a[k])) {
                k++;
            }
            if (k == j + 1) {
                continue;
            }
            int64_t size = axl_size(&p->cur[s]) * axl_size_range(&p->out[t], j + 1, k);
            if (p->dims[s] < 0 || p->dims[s] % size != 0) {
                continue;
            }
            for (uint32_t q = j + 1; q < k; q++) {
                if (!axl_push(&p->cur[s], p->out[t].a[q]) || !axl_push(&slice[s], p->out[t].a[q])) {
                    p->overflow = true;
                    return false;
                }
            }
            any = true;
        }
    }
    int64_t cap[SP_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        int64_t o = axl_size(&p->out[d]);
        cap[d] = o / gcd64(o, axl_size(&p->cur[d]));
    }
    /* on their own dimension */
    for (uint32_t d = 0; d < r; d++) {
        uint32_t pl = prefix_len(&p->cur[d], &p->out[d]);
        for (uint32_t j = pl; j < p->out[d].n && cap[d] > 1; j++) {
            ax a = p->out[d].a[j];
            if (in_lists(p->cur, r, a)) {
                continue;
            }
            int64_t g = gcd64(a.size, cap[d]);
            if (g == 1) {
                continue;
            }
            if (g < a.size && !axl_split(&p->out[d], j, g)) {
                p->overflow = true;
                return false;
            }
            if (!axl_push(&p->cur[d], p->out[d].a[j]) || !axl_push(&slice[d], p->out[d].a[j])) {
                p->overflow = true;
                return false;
            }
            cap[d] /= g;
            any = true;
        }
    }
    /* on a dimension that swaps with the atom's dimension */
    for (uint32_t d = 0; d < r; d++) {
        for (uint32_t j = 0; j < p->out[d].n; j++) {
            if (in_lists(p->cur, r, p->out[d].a[j])) {
                continue;
            }
            for (uint32_t t = 0; t < r; t++) {
                if (t == d || cap[t] <= 1 || !holds_atom_for(p, d, t)) {
                    continue;
                }
                ax a = p->out[d].a[j];
                int64_t g = gcd64(a.size, cap[t]);
                if (g == 1) {
                    continue;
                }
                if (g < a.size && !axl_split(&p->out[d], j, g)) {
                    p->overflow = true;
                    return false;
                }
                if (!axl_push(&p->cur[t], p->out[d].a[j]) || !axl_push(&slice[t], p->out[d].a[j])) {
                    p->overflow = true;
                    return false;
                }
                cap[t] /= g;
                any = true;
                if (g < a.size) {
                    j++; /* continue with the remainder */
                    continue;
                }
                break;
            }
        }
    }
    return any;
}

/* ---- step 3: all-to-alls and the final all-gather ----------------------------------- */

/* Finds the all-to-alls that can run now on lists c: a suffix of a source
 * dimension that is the next part of a target dimension holding nothing
 * foreign. At most one parameter per dimension. */
static uint32_t find_all_to_alls(const plan *p, const axl *c, a2a_param *ps)
{
    uint32_t r = p->rank, n = 0;
    bool used[SP_MAX_RANK] = {false};
    for (uint32_t s = 0; s < r; s++) {
        uint32_t pls = prefix_len(&c[s], &p->out[s]);
        if (used[s] || c[s].n == pls || pls != p->out[s].n) {
            continue;
        }
        for (uint32_t t = 0; t < r; t++) {
            if (t == s || used[t]) {
                continue;
            }
            uint32_t plt = prefix_len(&c[t], &p->out[t]);
            if (plt != c[t].n || plt == p->out[t].n) {
                continue;
            }
            uint32_t max = c[s].n - pls;
            if (p->out[t].n - plt < max) {
                max = p->out[t].n - plt;
            }
            uint32_t len = 0;
            for (uint32_t l = max; l > 0 && len == 0; l--) {
                bool ok = true;
                for (uint32_t q = 0; q < l && ok; q++) {
                    ok = ax_eq(c[s].a[c[s].n - l + q], p->out[t].a[plt + q]);
                }
                if (ok) {
                    len = l;
                }
            }
            /* every atom of the source wanted in t must move in this one */
            for (uint32_t q = pls; q + len < c[s].n && len > 0; q++) {
                if (axl_contains(&p->out[t], c[s].a[q])) {
                    len = 0;
                }
            }
            if (len > 0) {
                ps[n++] = (a2a_param){s, t, len};
                used[s] = used[t] = true;
                break;
            }
        }
    }
    return n;
}

static bool apply_all_to_alls(axl *c, const a2a_param *ps, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        axl *src = &c[ps[i].src], *tgt = &c[ps[i].tgt];
        for (uint32_t q = src->n - ps[i].len; q < src->n; q++) {
            if (!axl_push(tgt, src->a[q])) {
                return false;
            }
        }
        src->n -= ps[i].len;
    }
    return true;
}

/* Runs all-to-alls while any applies, then gathers what is left beyond each
 * common prefix if none of it is wanted anywhere. On lists c (modified); emits
 * the ops when e is not NULL. True when c reaches the output. */
static bool finish(const plan *p, axl *c, emitter *e)
{
    uint32_t r = p->rank;
    a2a_param ps[SP_MAX_RANK];
    for (int guard = 0; guard < 4 * SP_MAX_RANK; guard++) {
        uint32_t n = find_all_to_alls(p, c, ps);
        if (n == 0) {
            break;
        }
        if (e != NULL) {
            /* emit with the lists before and after */
            axl *before = p->tmp2;
            memcpy(before, c, sizeof(axl) * r);
            if (!apply_all_to_alls(c, ps, n)) {
                return false;
            }
            emit_all_to_all(e, before, ps, n, c);
        } else if (!apply_all_to_alls(c, ps, n)) {
            return false;
        }
    }
    bool any = false;
    axl gather[SP_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        uint32_t pl = prefix_len(&c[d], &p->out[d]);
        if (pl != p->out[d].n) {
            return false;
        }
        gather[d].n = 0;
        for (uint32_t i = pl; i < c[d].n; i++) {
            if (in_lists(p->out, r, c[d].a[i])) {
                return false;
            }
            gather[d].a[gather[d].n++] = c[d].a[i];
        }
        any = any || gather[d].n > 0;
        c[d].n = pl;
    }
    if (any && e != NULL) {
        emit_per_dim(e, "sdy.all_gather", "gathering_axes", gather, c);
    }
    return true;
}

static bool finishable(plan *p)
{
    memcpy(p->tmp, p->cur, sizeof(axl) * p->rank);
    return finish(p, p->tmp, NULL);
}

/* ---- step 2: the collective permute ------------------------------------------------- */

typedef enum tgt_rc { TGT_OK, TGT_RETRY, TGT_FAIL } tgt_rc;

/* After a split, realigns and asks for another round. */
static tgt_rc split_retry(plan *p, axl *l, uint32_t i, int64_t g)
{
    if (!axl_split(l, i, g) || !align(p)) {
        p->overflow = true;
        return TGT_FAIL;
    }
    return TGT_RETRY;
}

/* Builds in T the sharding the collective permute should reach, with the
 * per-dimension sizes of cur:
 *   T[d] = common prefix + K + kept gathers + moved gathers + A
 * K is the longest prefix of the rest of out[d] that fits; the rest of the
 * output atoms (R) are put at the end of source dimensions (A), filling them
 * in dimension order, to be all-to-all'ed; atoms nobody wants are gathered at
 * the end: those of a dimension that K does not replace stay in place (K
 * replaces the major part of what a dimension holds), the replaced ones fill
 * the holes other dimensions have left. When K does not line up with the
 * dimension's atoms, the dimension keeps the major part of its unwanted
 * atoms. */
static tgt_rc target_once(plan *p, axl *T)
{
    uint32_t r = p->rank;
    int64_t c[SP_MAX_RANK], holes[SP_MAX_RANK];
    uint32_t pl[SP_MAX_RANK], kl[SP_MAX_RANK];
    bool misaligned[SP_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        c[d] = axl_size(&p->cur[d]);
        pl[d] = prefix_len(&p->cur[d], &p->out[d]);
        int64_t rem = c[d] / axl_size_range(&p->cur[d], 0, pl[d]);
        kl[d] = 0;
        for (uint32_t j = pl[d]; j < p->out[d].n; j++) {
            ax o = p->out[d].a[j];
            if (rem % o.size == 0) {
                kl[d]++;
                rem /= o.size;
                continue;
            }
            int64_t g = gcd64(o.size, rem);
            if (g > 1) {
                return split_retry(p, &p->out[d], j, g);
            }
            break;
        }
        holes[d] = rem;
    }
    /* where the unwanted atoms of each dimension go */
    axl *resid = T; /* T[d] doubles as the residual list until assembled */
    axl *pool = &p->tmp2[0];
    pool->n = 0;
    for (uint32_t d = 0; d < r; d++) {
        resid[d].n = 0;
        int64_t k = axl_size_range(&p->out[d], pl[d], pl[d] + kl[d]), rem = k;
        misaligned[d] = false;
        for (uint32_t i = pl[d]; i < p->cur[d].n && rem > 1 && !misaligned[d]; i++) {
            int64_t size = p->cur[d].a[i].size;
            if (rem % size == 0) {
                rem /= size;
            } else if (size % rem == 0) {
                return split_retry(p, &p->cur[d], i, rem);
            } else {
                misaligned[d] = true;
            }
        }
        rem = misaligned[d] ? 1 : k;
        for (uint32_t i = pl[d]; i < p->cur[d].n && !misaligned[d]; i++) {
            ax l = p->cur[d].a[i];
            bool major = rem > 1;
            if (major) {
                rem /= l.size;
            }
            if (in_lists(p->out, r, l)) {
                continue;
            }
            if (major) {
                if (!axl_push(pool, l)) {
                    return TGT_FAIL;
                }
            } else if (!axl_push(&resid[d], l)) {
                return TGT_FAIL;
            }
        }
        int64_t rs = axl_size(&resid[d]);
        if (holes[d] % rs != 0) {
            return TGT_FAIL;
        }
        holes[d] /= rs;
    }
    /* A: the atoms still to come, at the end of source dimensions */
    axl *A = &p->tmp2[1];
    for (uint32_t d = 0; d < r; d++) {
        A[d].n = 0;
    }
    for (uint32_t t = 0; t < r; t++) {
        uint32_t s = 0;
        for (uint32_t j = pl[t] + kl[t]; j < p->out[t].n; j++) {
            ax a = p->out[t].a[j];
            bool placed = false;
            for (; s < r && !placed; s++) {
                if (s == t || pl[s] + kl[s] < p->out[s].n || holes[s] <= 1) {
                    continue;
                }
                if (holes[s] % a.size == 0) {
                    if (!axl_push(&A[s], a)) {
                        return TGT_FAIL;
                    }
                    holes[s] /= a.size;
                    placed = true;
                    break;
                }
                int64_t g = gcd64(a.size, holes[s]);
                if (g > 1) {
                    return split_retry(p, &p->out[t], j, g);
                }
            }
            if (!placed) {
                return TGT_FAIL;
            }
        }
    }
    /* misaligned dimensions keep the major part of their unwanted atoms */
    for (uint32_t d = 0; d < r; d++) {
        if (!misaligned[d]) {
            continue;
        }
        for (uint32_t i = pl[d]; i < p->cur[d].n; i++) {
            ax l = p->cur[d].a[i];
            if (in_lists(p->out, r, l)) {
                continue;
            }
            if (holes[d] > 1) {
                if (holes[d] % l.size == 0) {
                    holes[d] /= l.size;
                    if (!axl_push(&resid[d], l)) {
                        return TGT_FAIL;
                    }
                    continue;
                }
                int64_t g = gcd64(l.size, holes[d]);
                if (g > 1) {
                    return split_retry(p, &p->cur[d], i, g);
                }
            }
            if (!axl_push(pool, l)) {
                return TGT_FAIL;
            }
        }
    }
    /* the replaced unwanted atoms fill the holes left, in dimension order */
    axl *fill = &p->tmp2[1 + r];
    uint32_t pi = 0;
    for (uint32_t d = 0; d < r; d++) {
        fill[d].n = 0;
        while (holes[d] > 1 && pi < pool->n) {
            ax a = pool->a[pi];
            if (holes[d] % a.size == 0) {
                if (!axl_push(&fill[d], a)) {
                    return TGT_FAIL;
                }
                holes[d] /= a.size;
                pi++;
                continue;
            }
            int64_t g = gcd64(a.size, holes[d]);
            if (g > 1) {
                uint32_t sd, si;
                if (!find_atom(p->cur, r, a, &sd, &si)) {
                    return TGT_FAIL;
                }
                return split_retry(p, &p->cur[sd], si, g);
            }
            break;
        }
    }
    /* assemble */
    for (uint32_t d = 0; d < r; d++) {
        axl res = resid[d];
        T[d].n = 0;
        for (uint32_t j = 0; j < pl[d] + kl[d]; j++) {
            T[d].a[T[d].n++] = p->out[d].a[j];
        }
        const axl *parts[3] = {&res, &fill[d], &A[d]};
        for (int q = 0; q < 3; q++) {
            for (uint32_t i = 0; i < parts[q]->n; i++) {
                if (!axl_push(&T[d], parts[q]->a[i])) {
                    return TGT_FAIL;
                }
            }
        }
        if (axl_size(&T[d]) != c[d]) {
            return TGT_FAIL;
        }
    }
    return TGT_OK;
}

static bool build_target(plan *p, axl *T)
{
    for (int i = 0; i < 64; i++) {
        tgt_rc rc = target_once(p, T);
        if (rc != TGT_RETRY) {
            return rc == TGT_OK;
        }
    }
    return false;
}

/* When no collective permute helps (the sizes of the dimensions cannot be
 * matched, e.g. swapping a 2-axis and a 3-axis), moves the suffix of the
 * first source dimension that starts another dimension's output there anyway. */
static bool forced_all_to_all(const plan *p, a2a_param *pa)
{
    uint32_t r = p->rank;
    for (uint32_t s = 0; s < r; s++) {
        uint32_t pls = prefix_len(&p->cur[s], &p->out[s]);
        for (uint32_t t = 0; t < r; t++) {
            if (t == s) {
                continue;
            }
            uint32_t plt = prefix_len(&p->cur[t], &p->out[t]);
            if (plt == p->out[t].n) {
                continue;
            }
            for (uint32_t l = p->cur[s].n - pls; l > 0; l--) {
                if (l > p->out[t].n - plt) {
                    continue;
                }
                bool ok = true;
                for (uint32_t q = 0; q < l && ok; q++) {
                    ok = ax_eq(p->cur[s].a[p->cur[s].n - l + q], p->out[t].a[plt + q]);
                }
                if (ok) {
                    *pa = (a2a_param){s, t, l};
                    return true;
                }
            }
        }
    }
    return false;
}

/* ---- one reshard -------------------------------------------------------------------- */

typedef struct pass_ctx {
    sp_module *m;
    bool keep_redundant;
    cm_status st;
} pass_ctx;

static void replace_uses(sp_module *m, uint32_t from, uint32_t to)
{
    for (uint32_t o = 0; o < m->n_ops; o++) {
        sp_op *op = &m->ops[o];
        for (uint32_t i = 0; i < op->n_operands; i++) {
            if (op->operands[i] == from) {
                op->operands[i] = to;
            }
        }
    }
}

static bool load_lists(const sp_mesh *mesh, const sp_sharding *s, uint32_t rank, axl *l)
{
    for (uint32_t d = 0; d < rank; d++) {
        l[d].n = 0;
        if (s == NULL || d >= s->rank) {
            continue;
        }
        for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
            ax a;
            if (!ref_to_ax(mesh, &s->dims[d].axes[i], &a) || !axl_push(&l[d], a)) {
                return false;
            }
        }
    }
    return true;
}

/* Emits the collectives of plan p (cur = input, out = output) with emitter e;
 * in_name/in_inline name the input mesh, e's mesh the output one. */
static bool lower_plan(plan *p, emitter *e, const char *in_name, sp_mesh *in_inline,
                       bool reorder_devices)
{
    const char *out_name = e->mesh_name;
    sp_mesh *out_inline = e->mesh_inline;
    e->mesh_name = in_name;
    e->mesh_inline = in_inline;
    axl *slice = p->tmp;
    if (slice_step(p, slice)) {
        emit_per_dim(e, "sdy.all_slice", "slicing_axes", slice, p->cur);
    }
    if (p->overflow || !align(p)) {
        return false;
    }
    axl *T = cm_alloc(sizeof(axl) * p->rank);
    if (T == NULL) {
        e->st = CM_ENOMEM;
        return false;
    }
    bool ok = false;
    for (int round = 0; round < 8 && e->st == CM_OK; round++) {
        bool done = finishable(p);
        if (done && !reorder_devices) {
            ok = true;
            break;
        }
        /* only the device order differs: permute to the same axes */
        bool have_t = done ? (memcpy(T, p->cur, sizeof(axl) * p->rank), true) : build_target(p, T);
        if (p->overflow) {
            break;
        }
        if (have_t && (reorder_devices || !lists_equal(T, p->cur, p->rank))) {
            e->mesh_name = out_name;
            e->mesh_inline = out_inline;
            emit_op(e, "sdy.collective_permute", NULL, NULL, T);
            memcpy(p->cur, T, sizeof(axl) * p->rank);
            reorder_devices = false;
            if (!align(p)) {
                break;
            }
            continue;
        }
        a2a_param pa;
        if (!forced_all_to_all(p, &pa)) {
            break;
        }
        memcpy(p->tmp2, p->cur, sizeof(axl) * p->rank);
        if (!apply_all_to_alls(p->cur, &pa, 1)) {
            p->overflow = true;
            break;
        }
        emit_all_to_all(e, p->tmp2, &pa, 1, p->cur);
    }
    cm_free(T);
    if (e->st != CM_OK || p->overflow) {
        return false;
    }
    if (reorder_devices) {
        e->mesh_name = out_name;
        e->mesh_inline = out_inline;
        emit_op(e, "sdy.collective_permute", NULL, NULL, p->cur);
    }
    e->mesh_name = out_name;
    e->mesh_inline = out_inline;
    if (ok && finish(p, p->cur, e)) {
        return e->st == CM_OK;
    }
    /* Not a case Shardy's tests show: gather all that differs, slice the rest. */
    axl *per = p->tmp;
    bool any = false;
    for (uint32_t d = 0; d < p->rank; d++) {
        uint32_t pl = prefix_len(&p->cur[d], &p->out[d]);
        per[d].n = 0;
        for (uint32_t i = pl; i < p->cur[d].n; i++) {
            per[d].a[per[d].n++] = p->cur[d].a[i];
        }
        any = any || per[d].n > 0;
        p->cur[d].n = pl;
    }
    if (any) {
        emit_per_dim(e, "sdy.all_gather", "gathering_axes", per, p->cur);
    }
    any = false;
    for (uint32_t d = 0; d < p->rank; d++) {
        per[d].n = 0;
        for (uint32_t i = p->cur[d].n; i < p->out[d].n; i++) {
            per[d].a[per[d].n++] = p->out[d].a[i];
            p->cur[d].a[p->cur[d].n++] = p->out[d].a[i];
        }
        any = any || per[d].n > 0;
    }
    if (any) {
        emit_per_dim(e, "sdy.all_slice", "slicing_axes", per, p->cur);
    }
    return e->st == CM_OK;
}

static void lower_reshard(pass_ctx *c, uint32_t op_id)
{
    sp_module *m = c->m;
    const sp_op *op = &m->ops[op_id];
    if (op->n_operands != 1 || op->n_results != 1 || op->parent_block == SP_NONE) {
        return;
    }
    const sp_attr *sa = sp_op_attr(m, op_id, "sharding");
    if (sa == NULL || sa->kind != SP_ATTR_SHARDING) {
        return;
    }
    sp_sharding *out_s = sa->u.sharding;
    uint32_t in = op->operands[0], result = op->first_result;
    /* a propagation barrier passes its operand through */
    while (m->values[in].def != SP_NONE &&
           m->ops[m->values[in].def].kind == SP_OP_SDY_PROPAGATION_BARRIER &&
           m->ops[m->values[in].def].n_operands == 1) {
        in = m->ops[m->values[in].def].operands[0];
    }
    const sp_sharding *in_s = sp_value_sharding_partitioned(m, in);
    const sp_mesh *out_mesh = sharding_mesh(m, out_s);
    const sp_mesh *in_mesh = in_s != NULL ? sharding_mesh(m, in_s) : out_mesh;
    if (out_mesh == NULL || in_mesh == NULL || is_maximal(out_mesh) || is_maximal(in_mesh)) {
        return;
    }
    bool in_repl = fully_replicated(in_s), out_repl = fully_replicated(out_s);
    uint32_t block = op->parent_block, index = sp_op_index_in_block(m, op_id);
    if (index == SP_NONE) {
        return;
    }
    if (in_repl && out_repl) {
        if (!c->keep_redundant) {
            replace_uses(m, result, in);
            sp_block_remove_op(m, block, index);
        }
        return;
    }
    const sp_mesh *mesh = out_mesh;
    const char *in_name = in_s != NULL ? in_s->mesh_name : out_s->mesh_name;
    sp_mesh *in_inline = in_s != NULL ? in_s->mesh : out_s->mesh;
    const char *out_name = out_s->mesh_name;
    sp_mesh *out_inline = out_s->mesh;
    bool reorder = false;
    if (!same_axes(in_mesh, out_mesh)) {
        if (out_repl) {
            mesh = in_mesh; /* gather on the input's mesh */
            out_name = in_name;
            out_inline = in_inline;
        } else if (in_repl) {
            in_name = out_name; /* slice on the output's mesh */
            in_inline = out_inline;
        } else {
            return;
        }
    } else {
        reorder = !same_devices(in_mesh, out_mesh);
    }
    const sp_type *ty = sp_value_type(m, result);
    if (ty->kind != SP_TYPE_TENSOR || out_s->rank != ty->rank ||
        (in_s != NULL && in_s->rank != ty->rank)) {
        return;
    }
    plan p = {0};
    p.mesh = mesh;
    p.rank = ty->rank;
    p.dims = ty->dims;
    size_t bytes = sizeof(axl) * (ty->rank + 1u);
    p.cur = cm_alloc(bytes);
    p.out = cm_alloc(bytes);
    p.tmp = cm_alloc(bytes);
    p.tmp2 = cm_alloc(sizeof(axl) * (2u * ty->rank + 2u));
    if (p.cur == NULL || p.out == NULL || p.tmp == NULL || p.tmp2 == NULL) {
        c->st = CM_ENOMEM;
        goto out;
    }
    if (!load_lists(mesh, in_s, p.rank, p.cur) || !load_lists(mesh, out_s, p.rank, p.out) ||
        !align(&p)) {
        goto out;
    }
    if (lists_equal(p.cur, p.out, p.rank) && !reorder) {
        if (!c->keep_redundant) {
            replace_uses(m, result, in);
            sp_block_remove_op(m, block, index);
        }
        goto out;
    }
    emitter e = {m, block, index, in, &p, out_name, out_inline, out_s, 0, CM_OK};
    bool ok = lower_plan(&p, &e, in_name, in_inline, reorder);
    if (e.st != CM_OK) {
        c->st = e.st;
        goto out;
    }
    if (!ok) {
        /* keep a reshard for what could not be lowered */
        uint32_t ty_id = m->values[e.value].type, r2;
        if (e.n_ops == 0) {
            goto out;
        }
        sp_attr *keep = sp_attr_new(m, SP_ATTR_SHARDING);
        if (keep == NULL) {
            c->st = CM_ENOMEM;
            goto out;
        }
        keep->u.sharding = out_s;
        if (sp_module_new_op(m, SP_NONE, "sdy.reshard", &e.value, 1, &ty_id, 1, &r2) != CM_OK ||
            sp_op_set_attr(m, r2, "sharding", keep) != CM_OK ||
            sp_block_insert_op(m, block, e.index, r2) != CM_OK) {
            c->st = CM_ENOMEM;
            goto out;
        }
        e.index++;
        e.value = m->ops[r2].first_result;
    }
    replace_uses(m, result, e.value);
    sp_block_remove_op(m, block, e.index);
out:
    cm_free(p.cur);
    cm_free(p.out);
    cm_free(p.tmp);
    cm_free(p.tmp2);
}

cm_status sp_pass_reshard_to_collectives(sp_module *m, bool keep_redundant, cm_error *err)
{
    pass_ctx c = {m, keep_redundant, CM_OK};
    uint32_t n = m->n_ops;
    for (uint32_t o = 0; o < n && c.st == CM_OK; o++) {
        if (m->ops[o].kind == SP_OP_SDY_RESHARD && m->ops[o].parent_block != SP_NONE) {
            lower_reshard(&c, o);
        }
    }
    if (c.st != CM_OK) {
        return cm_error_oom(err); /* c.st is only ever CM_ENOMEM */
    }
    return CM_OK;
}

/* ---- device groups ------------------------------------------------------------------ */

cm_status sp_collective_groups(const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                               int64_t **groups_out, uint32_t *n_groups, uint32_t *group_size,
                               cm_arena *a, cm_error *err)
{
    int64_t total = sp_mesh_size(mesh);
    ax *coll = NULL;
    int64_t gsize = 1;
    if (n > 0) {
        coll = cm_alloc(sizeof(ax) * n);
        if (coll == NULL) {
            return cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof path, "/axes/%u", i);
        sp_axis_ref r = axes[i];
        if (!ref_to_ax(mesh, &r, &coll[i])) {
            cm_free(coll);
            return cm_error_set(err, CM_EINVAL, path, "unknown axis or bad sub-axis \"%s\"",
                                r.name != NULL ? r.name : "");
        }
        for (uint32_t j = 0; j < i; j++) {
            ax x = coll[i], y = coll[j];
            if (x.axis == y.axis && x.pre < y.pre * y.size && y.pre < x.pre * x.size) {
                cm_free(coll);
                return cm_error_set(err, CM_EINVAL, path, "axis \"%s\" overlaps axis %u", r.name,
                                    j);
            }
        }
        gsize *= coll[i].size;
    }
    int64_t ng = total / gsize;
    int64_t *out = cm_arena_alloc(a, sizeof(int64_t) * (size_t)(total > 0 ? total : 1));
    int64_t *stride = cm_alloc(sizeof(int64_t) * (mesh->n_axes + 1u));
    int64_t *rest_of = cm_alloc(sizeof(int64_t) * (size_t)(total > 0 ? total : 1));
    if (out == NULL || stride == NULL || rest_of == NULL) {
        cm_free(coll);
        cm_free(stride);
        cm_free(rest_of);
        return cm_error_oom(err);
    }
    /* stride of each mesh axis in the row-major device position */
    int64_t st = 1;
    for (uint32_t i = mesh->n_axes; i > 0; i--) {
        stride[i - 1] = st;
        st *= mesh->axes[i - 1].size;
    }
    /* group order: first appearance of a position with its collective
     * coordinates zeroed, scanning positions in row-major order */
    for (int64_t i = 0; i < total; i++) {
        rest_of[i] = -1;
    }
    int64_t next_group = 0;
    for (int64_t pos = 0; pos < total; pos++) {
        int64_t base = pos, idx = 0;
        for (uint32_t k = 0; k < n; k++) {
            const ax *c = &coll[k];
            int64_t n_ax = mesh->axes[c->axis].size;
            int64_t coord_ax = (pos / stride[c->axis]) % n_ax;
            int64_t below = n_ax / (c->pre * c->size);
            int64_t coord = (coord_ax / below) % c->size;
            idx = idx * c->size + coord;
            base -= coord * below * stride[c->axis];
        }
        if (rest_of[base] < 0) {
            rest_of[base] = next_group++;
        }
        out[rest_of[base] * gsize + idx] = device_at(mesh, pos);
    }
    cm_free(coll);
    cm_free(stride);
    cm_free(rest_of);
    *groups_out = out;
    *n_groups = (uint32_t)ng;
    *group_size = (uint32_t)gsize;
    return CM_OK;
}

cm_status sp_local_shape(const sp_sharding *s, const sp_mesh *mesh, const int64_t *dims,
                         uint32_t rank, int64_t *local_out, cm_error *err)
{
    if (s != NULL && s->rank != rank) {
        return cm_error_set(err, CM_EINVAL, "/dims", "sharding has rank %u, tensor %u", s->rank,
                            rank);
    }
    for (uint32_t d = 0; d < rank; d++) {
        int64_t k = 1;
        for (uint32_t i = 0; s != NULL && i < s->dims[d].n_axes; i++) {
            ax a;
            if (!ref_to_ax(mesh, &s->dims[d].axes[i], &a)) {
                char path[32];
                snprintf(path, sizeof path, "/dims/%u", d);
                return cm_error_set(err, CM_EINVAL, path, "unknown axis \"%s\"",
                                    s->dims[d].axes[i].name);
            }
            k *= a.size;
        }
        local_out[d] = dims[d] < 0 ? dims[d] : (dims[d] + k - 1) / k;
    }
    return CM_OK;
}

/* ---- -shardplan-annotate-device-groups --------------------------------------------- */

static cm_status annotate_op(sp_module *m, uint32_t o)
{
    const sp_op *op = &m->ops[o];
    const char *key = NULL;
    switch ((sp_op_kind)op->kind) {
    case SP_OP_SDY_ALL_GATHER:
        key = "gathering_axes";
        break;
    case SP_OP_SDY_ALL_SLICE:
        key = "slicing_axes";
        break;
    case SP_OP_SDY_REDUCE_SCATTER:
        key = "reduce_scatter_axes";
        break;
    case SP_OP_SDY_ALL_REDUCE:
        key = "reduction_axes";
        break;
    case SP_OP_SDY_ALL_TO_ALL:
        key = "params";
        break;
    default:
        return CM_OK;
    }
    const sp_attr *axes = sp_op_attr(m, o, key), *os = sp_op_attr(m, o, "out_sharding");
    if (axes == NULL || os == NULL || os->kind != SP_ATTR_SHARDING) {
        return CM_OK;
    }
    const sp_mesh *mesh = sharding_mesh(m, os->u.sharding);
    if (mesh == NULL) {
        return CM_OK;
    }
    sp_axis_ref refs[4 * SP_MAX_RANK];
    uint32_t n = 0;
    const sp_axis_list *lists = NULL;
    uint32_t n_lists = 0;
    if (axes->kind == SP_ATTR_AXIS_LIST) {
        lists = &axes->u.axes;
        n_lists = 1;
    } else if (axes->kind == SP_ATTR_AXIS_LISTS) {
        lists = axes->u.axis_lists.items;
        n_lists = axes->u.axis_lists.n;
    }
    for (uint32_t i = 0; i < n_lists; i++) {
        for (uint32_t j = 0; j < lists[i].n && n < sizeof refs / sizeof refs[0]; j++) {
            refs[n++] = lists[i].axes[j];
        }
    }
    if (axes->kind == SP_ATTR_ALL_TO_ALL) {
        for (uint32_t i = 0; i < axes->u.a2a.n; i++) {
            const sp_axis_list *l = &axes->u.a2a.items[i].axes;
            for (uint32_t j = 0; j < l->n && n < sizeof refs / sizeof refs[0]; j++) {
                refs[n++] = l->axes[j];
            }
        }
    }
    if (n == 0) {
        return CM_OK;
    }
    int64_t *g;
    uint32_t ng, gs;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_collective_groups(mesh, refs, n, &g, &ng, &gs, &m->arena, &e);
    if (st == CM_EINVAL) {
        return CM_OK; /* not ours to diagnose: the verifier reports bad axes */
    }
    if (st != CM_OK) {
        return st;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '[');
    for (uint32_t i = 0; i < ng; i++) {
        cm_buf_puts(&b, i > 0 ? ", [" : "[");
        for (uint32_t j = 0; j < gs; j++) {
            if (j > 0) {
                cm_buf_puts(&b, ", ");
            }
            cm_buf_put_i64(&b, g[(size_t)i * gs + j]);
        }
        cm_buf_putc(&b, ']');
    }
    cm_buf_putc(&b, ']');
    int64_t tdims[2] = {(int64_t)ng, (int64_t)gs};
    uint32_t ty;
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    const char *body = !b.oom && b.data != NULL ? sp_module_str(m, b.data, b.len) : NULL;
    cm_buf_fini(&b);
    if (a == NULL || body == NULL ||
        sp_module_tensor_type(m, SP_ELEM_I64, tdims, 2, &ty, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    a->u.dense.body = body;
    a->u.dense.type = ty;
    a->u.dense.ints = g;
    a->u.dense.n_ints = ng * gs;
    return sp_op_set_attr(m, o, "sdy.device_groups", a);
}

cm_status sp_pass_annotate_device_groups(sp_module *m, cm_error *err)
{
    for (uint32_t o = 0; o < m->n_ops; o++) {
        if (m->ops[o].parent_block == SP_NONE) {
            continue;
        }
        cm_status st = annotate_op(m, o);
        if (st != CM_OK) {
            return cm_error_set(err, st, NULL, "out of memory annotating device groups");
        }
    }
    return CM_OK;
}
