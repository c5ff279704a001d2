/* SPDX-License-Identifier: Apache-2.0
 * planner: the sdy collectives (all_gather, all_slice, reduce_scatter,
 * all_reduce, all_to_all, collective_permute, sharded_to_unreduced) checked as Shardy's verifier
 * checks them (verifiers.cc, verifyCollectiveOp and the ops' symbol-use
 * verifiers): the operand has a sharding (all_slice, all_reduce and
 * reduce_scatter may do without), the out_sharding is valid for the type,
 * both are on one mesh (except for collective_permute) of one rank; the
 * per-dimension collective axes are valid axis-ref lists and, applied to
 * the operand's sharding, give the out_sharding; all_reduce keeps the
 * sharding and reduces over axes the operand does not shard on. */
#include "sp_verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_ops.h"

/* (axis index, pre-size, size) of a ref on mesh; false for an unknown name. */
typedef struct cax {
    int32_t axis;
    int64_t pre, size;
} cax;

static bool cax_of(const sp_mesh *m, const sp_axis_ref *r, cax *out)
{
    int32_t i = sp_mesh_axis_index(m, r->name);
    if (i < 0) {
        return false;
    }
    out->axis = i;
    out->pre = r->pre_size == 0 ? 1 : r->pre_size;
    out->size = r->pre_size == 0 ? m->axes[i].size : r->size;
    return true;
}

static bool cax_eq(cax a, cax b)
{
    return a.axis == b.axis && a.pre == b.pre && a.size == b.size;
}

static void cax_str(const sp_mesh *m, cax a, char *buf, size_t cap)
{
    const char *name = m->axes[a.axis].name;
    if (a.pre == 1 && a.size == m->axes[a.axis].size) {
        snprintf(buf, cap, "\"%s\"", name);
    } else {
        snprintf(buf, cap, "\"%s\":(%lld)%lld", name, (long long)a.pre, (long long)a.size);
    }
}

static void list_str(const sp_mesh *m, const cax *v, uint32_t n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < n && k + 2 < cap; i++) {
        char one[160];
        cax_str(m, v[i], one, sizeof one);
        int w = snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", one);
        k += w > 0 ? (size_t)w : 0;
    }
    if (k + 2 < cap) {
        snprintf(buf + k, cap - k, "]");
    }
}

/* The mesh a sharding names, or NULL. */
static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s->mesh != NULL) {
        return s->mesh;
    }
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

/* ---- unreduced axes across an op ------------------------------------------ */

#define MAXDIFF 64

static bool cax_overlap(cax a, cax b)
{
    return a.axis == b.axis && a.pre < b.pre * b.size && b.pre < a.pre * a.size;
}

/* Shardy's getAxisSetDiff: the parts of the axes a that no axis of b
 * covers (at most cap of them); returns their count. */
static uint32_t cax_diff(const cax *a, uint32_t na, const cax *b, uint32_t nb, cax *out,
                         uint32_t cap)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < na; i++) {
        cax x = a[i];
        bool more = true;
        while (more && n < cap) {
            const cax *hit = NULL;
            for (uint32_t k = 0; k < nb; k++) {
                if (cax_overlap(x, b[k]) &&
                    (hit == NULL || b[k].axis < hit->axis ||
                     (b[k].axis == hit->axis && b[k].pre < hit->pre))) {
                    hit = &b[k];
                }
            }
            if (hit == NULL) {
                out[n++] = x;
                break;
            }
            if (x.pre < hit->pre) {
                out[n++] = (cax){x.axis, x.pre, hit->pre / x.pre};
            }
            int64_t x_end = x.pre * x.size, h_end = hit->pre * hit->size;
            more = x_end > h_end;
            if (more) {
                x = (cax){x.axis, h_end, x_end / h_end};
            }
        }
    }
    return n;
}

static const char *red_name(int k)
{
    return k == SP_REDUCTION_MAX ? "max" : k == SP_REDUCTION_MIN ? "min" : "sum";
}

/* Does one of s's unreduced axes overlap one of v? */
static bool unreduced_hits(const sp_mesh *mesh, const sp_sharding *s, const cax *v, uint32_t n)
{
    for (uint32_t k = 0; k < s->n_unreduced; k++) {
        cax c;
        if (!cax_of(mesh, &s->unreduced[k], &c)) {
            continue;
        }
        for (uint32_t j = 0; j < n; j++) {
            if (cax_overlap(c, v[j])) {
                return true;
            }
        }
    }
    return false;
}

bool sp_verify_unreduced_transition(sp_module *m, uint32_t op, const sp_sharding *in,
                                    const sp_sharding *out, int intro, int removed, sp_diags *d)
{
    const sp_mesh *mi = in != NULL ? mesh_of(m, in) : NULL;
    const sp_mesh *mo = out != NULL ? mesh_of(m, out) : NULL;
    if (mi != NULL && mo != NULL && !sp_mesh_equal(mi, mo)) {
        return true;
    }
    const sp_mesh *mesh = mi != NULL ? mi : mo;
    if (mesh == NULL) {
        return true;
    }
    cax a[MAXDIFF], b[MAXDIFF], intro_v[MAXDIFF], rem_v[MAXDIFF];
    uint32_t na = 0, nb = 0;
    for (uint32_t k = 0; in != NULL && k < in->n_unreduced && na < MAXDIFF; k++) {
        na += cax_of(mesh, &in->unreduced[k], &a[na]) ? 1u : 0u;
    }
    for (uint32_t k = 0; out != NULL && k < out->n_unreduced && nb < MAXDIFF; k++) {
        nb += cax_of(mesh, &out->unreduced[k], &b[nb]) ? 1u : 0u;
    }
    uint32_t ni = cax_diff(b, nb, a, na, intro_v, MAXDIFF);
    uint32_t nr = cax_diff(a, na, b, nb, rem_v, MAXDIFF);
    const char *name = m->ops[op].name;
    if (ni > 0) {
        if (intro < 0) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR, "'%s' op cannot add new unreduced axis '%s'.",
                         name, mesh->axes[intro_v[0].axis].name);
            return false;
        }
        if (unreduced_hits(mesh, out, intro_v, ni) && (int)out->reduction != intro) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op cannot introduce '%s' unreduced axes. Expected '%s'.", name,
                         red_name((int)out->reduction), red_name(intro));
            return false;
        }
    }
    if (nr > 0) {
        if (removed < 0) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op dropped unreduced axis '%s' without a blessed operation (e.g., "
                         "sdy.reshard). This is an invalid transition from unreduced to "
                         "reduced.",
                         name, mesh->axes[rem_v[0].axis].name);
            return false;
        }
        if (unreduced_hits(mesh, in, rem_v, nr) && (int)in->reduction != removed) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "'%s' op cannot reduce '%s' unreduced axes. Expected '%s'.", name,
                         red_name((int)in->reduction), red_name(removed));
            return false;
        }
    }
    if (in != NULL && out != NULL && in->reduction != out->reduction &&
        unreduced_hits(mesh, in, b, nb)) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op cannot change the reduction operator of kept unreduced axes from "
                     "%s to %s.",
                     name, red_name((int)in->reduction), red_name((int)out->reduction));
        return false;
    }
    return true;
}

/* The reduction of an all_reduce / reduce_scatter (`sum` when not given). */
static int op_reduction(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "reduction_op");
    if (a == NULL || a->kind != SP_ATTR_ENUM || a->u.enm.value == NULL) {
        return SP_REDUCTION_SUM;
    }
    return strcmp(a->u.enm.value, "max") == 0   ? SP_REDUCTION_MAX
           : strcmp(a->u.enm.value, "min") == 0 ? SP_REDUCTION_MIN
                                                 : SP_REDUCTION_SUM;
}

static void op_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void op_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_diags_add(d, m, op, SP_DIAG_ERROR, "'%s' op %s", m->ops[op].name, msg);
    *bad = true;
}

/* Shardy's verifyAxisRefList over all the per-dimension lists together. */
static bool axis_lists_ok(sp_module *m, uint32_t op, const sp_mesh *mesh, const sp_axis_list *l,
                          uint32_t n, sp_diags *d, bool *bad)
{
    enum { MAXSEEN = 256 };
    cax seen[MAXSEEN];
    uint32_t n_seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        bool prev_sub = false;
        cax prev = {0, 0, 0};
        for (uint32_t k = 0; k < l[i].n; k++) {
            const sp_axis_ref *r = &l[i].axes[k];
            char b1[160], b2[160];
            cax a;
            if (!cax_of(mesh, r, &a)) {
                op_err(m, op, d, bad, "unknown axis name: \"%s\"", r->name);
                return false;
            }
            for (uint32_t j = 0; j < n_seen; j++) {
                if (cax_eq(seen[j], a)) {
                    sp_verify_ref_str(r, b1, sizeof b1);
                    op_err(m, op, d, bad, "duplicate axis ref: %s", b1);
                    return false;
                }
            }
            if (n_seen < MAXSEEN) {
                seen[n_seen++] = a;
            }
            if (r->pre_size == 0) {
                prev_sub = false;
                continue;
            }
            if (prev_sub && prev.axis == a.axis && prev.pre * prev.size == a.pre) {
                sp_verify_ref_str(&l[i].axes[k - 1], b1, sizeof b1);
                sp_verify_ref_str(r, b2, sizeof b2);
                op_err(m, op, d, bad, "two consecutive sub-axes can be merged: %s, %s", b1, b2);
                return false;
            }
            prev_sub = true;
            prev = a;
        }
    }
    return true;
}

/* The dim sharding of s as resolved axes into v (at most SP_MAX_RANK * 4). */
static uint32_t dim_axes(const sp_mesh *mesh, const sp_dim_sharding *ds, cax *v, uint32_t cap)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < ds->n_axes && n < cap; k++) {
        if (cax_of(mesh, &ds->axes[k], &v[n])) {
            n++;
        }
    }
    return n;
}

enum { MAXDIM = 64 };

/* Gathering: each collective axis, last first, must be a suffix of the last
 * axis left; what is left of that axis before it stays. */
static bool gather_dim(sp_module *m, uint32_t op, const sp_mesh *mesh, cax *v, uint32_t *n,
                       const sp_axis_list *axes, uint32_t dim, const char *kind, sp_diags *d,
                       bool *bad)
{
    for (uint32_t k = axes->n; k-- > 0;) {
        cax g;
        if (!cax_of(mesh, &axes->axes[k], &g)) {
            return false;
        }
        cax *last = *n > 0 ? &v[*n - 1] : NULL;
        bool suffix = last != NULL && last->axis == g.axis && g.pre >= last->pre &&
                      g.pre * g.size == last->pre * last->size;
        if (!suffix) {
            char b[160];
            sp_verify_ref_str(&axes->axes[k], b, sizeof b);
            op_err(m, op, d, bad, "can't apply %s axis %s to operand sharding on dimension %u",
                   kind, b, dim);
            return false;
        }
        if (g.pre > last->pre) {
            last->size = g.pre / last->pre;
        } else {
            (*n)--;
        }
    }
    return true;
}

/* Slicing: each axis is appended, merged into the last one when it follows it. */
static void slice_dim(const sp_mesh *mesh, cax *v, uint32_t *n, const sp_axis_list *axes)
{
    for (uint32_t k = 0; k < axes->n; k++) {
        cax s;
        if (!cax_of(mesh, &axes->axes[k], &s)) {
            continue;
        }
        cax *last = *n > 0 ? &v[*n - 1] : NULL;
        bool last_full = last != NULL && last->pre == 1 && last->size == mesh->axes[last->axis].size;
        if (last != NULL && !last_full && last->axis == s.axis &&
            last->pre * last->size == s.pre) {
            last->size *= s.size;
        } else if (*n < MAXDIM) {
            v[(*n)++] = s;
        }
    }
}

static void verify_axes_per_dim(sp_module *m, uint32_t op, const sp_sharding *in,
                                const sp_sharding *out, const sp_mesh *mesh, const char *attr,
                                bool gather, const char *kind, sp_diags *d, bool *bad)
{
    const sp_attr *a = sp_op_attr(m, op, attr);
    if (a == NULL || a->kind != SP_ATTR_AXIS_LISTS) {
        return;
    }
    const sp_axis_list *l = a->u.axis_lists.items;
    uint32_t n = a->u.axis_lists.n;
    if (!axis_lists_ok(m, op, mesh, l, n, d, bad)) {
        return;
    }
    if (out->rank != n) {
        op_err(m, op, d, bad, "result sharding has rank %u but collective axes has rank %u",
               out->rank, n);
        return;
    }
    for (uint32_t dim = 0; dim < n; dim++) {
        cax v[MAXDIM], want[MAXDIM];
        uint32_t nv = in != NULL && dim < in->rank ? dim_axes(mesh, &in->dims[dim], v, MAXDIM) : 0;
        if (gather) {
            if (!gather_dim(m, op, mesh, v, &nv, &l[dim], dim, kind, d, bad)) {
                return;
            }
        } else {
            slice_dim(mesh, v, &nv, &l[dim]);
        }
        uint32_t nw = dim_axes(mesh, &out->dims[dim], want, MAXDIM);
        bool same = nv == nw;
        for (uint32_t k = 0; same && k < nv; k++) {
            same = cax_eq(v[k], want[k]);
        }
        if (!same) {
            char b[1024];
            list_str(mesh, v, nv, b, sizeof b);
            op_err(m, op, d, bad, "result sharding doesn't match expected sharding %s on "
                   "dimension %u", b, dim);
            return;
        }
    }
}

static bool refs_overlap(const sp_mesh *mesh, const sp_axis_ref *r, uint32_t n, cax a)
{
    for (uint32_t k = 0; k < n; k++) {
        cax b;
        if (cax_of(mesh, &r[k], &b) && b.axis == a.axis && a.pre < b.pre * b.size &&
            b.pre < a.pre * a.size) {
            return true;
        }
    }
    return false;
}

static bool same_dims(const sp_mesh *mesh, const sp_sharding *a, const sp_sharding *b)
{
    if (a->rank != b->rank) {
        return false;
    }
    for (uint32_t d = 0; d < a->rank; d++) {
        cax va[MAXDIM], vb[MAXDIM];
        uint32_t na = dim_axes(mesh, &a->dims[d], va, MAXDIM);
        uint32_t nb = dim_axes(mesh, &b->dims[d], vb, MAXDIM);
        if (na != nb) {
            return false;
        }
        for (uint32_t k = 0; k < na; k++) {
            if (!cax_eq(va[k], vb[k])) {
                return false;
            }
        }
    }
    return true;
}

static void verify_all_reduce(sp_module *m, uint32_t op, const sp_sharding *in,
                              const sp_sharding *out, const sp_mesh *mesh, sp_diags *d, bool *bad)
{
    sp_sharding open;
    memset(&open, 0, sizeof open);
    open.rank = out->rank;
    static sp_dim_sharding empty[SP_MAX_RANK];
    open.dims = empty;
    const sp_sharding *src = in != NULL ? in : &open;
    if (!same_dims(mesh, src, out)) {
        op_err(m, op, d, bad, "operand and result shardings are not equivalent");
        return;
    }
    const sp_attr *a = sp_op_attr(m, op, "reduction_axes");
    if (a == NULL || a->kind != SP_ATTR_AXIS_LIST) {
        return;
    }
    const sp_axis_list *l = &a->u.axes;
    for (uint32_t k = 1; k < l->n; k++) {
        cax x, y;
        if (cax_of(mesh, &l->axes[k - 1], &x) && cax_of(mesh, &l->axes[k], &y) &&
            (y.axis < x.axis || (y.axis == x.axis && (y.pre < x.pre ||
                                                      (y.pre == x.pre && y.size < x.size))))) {
            op_err(m, op, d, bad, "reduction axes are not ordered w.r.t. mesh");
            return;
        }
    }
    if (!axis_lists_ok(m, op, mesh, l, 1, d, bad)) {
        return;
    }
    for (uint32_t k = 0; k < l->n; k++) {
        cax r;
        char b[160];
        if (!cax_of(mesh, &l->axes[k], &r)) {
            continue;
        }
        bool hit = in != NULL && refs_overlap(mesh, in->replicated, in->n_replicated, r);
        for (uint32_t dd = 0; in != NULL && dd < in->rank && !hit; dd++) {
            hit = refs_overlap(mesh, in->dims[dd].axes, in->dims[dd].n_axes, r);
        }
        sp_verify_ref_str(&l->axes[k], b, sizeof b);
        if (hit) {
            op_err(m, op, d, bad, "reduction axis %s overlaps with operand dimension sharding "
                   "or replicated axes", b);
            return;
        }
        if (refs_overlap(mesh, out->unreduced, out->n_unreduced, r)) {
            op_err(m, op, d, bad, "reduction axis %s overlaps with result unreduced axes", b);
            return;
        }
    }
}

/* Whether dim sharding ds, resolved, equals v (n entries). */
static bool dim_is(const sp_mesh *mesh, const sp_dim_sharding *ds, const cax *v, uint32_t n)
{
    cax w[MAXDIM];
    uint32_t nw = dim_axes(mesh, ds, w, MAXDIM);
    bool same = nw == n;
    for (uint32_t k = 0; same && k < n; k++) {
        same = cax_eq(v[k], w[k]);
    }
    return same;
}

static bool expect_dim(sp_module *m, uint32_t op, const sp_mesh *mesh, const sp_sharding *out,
                       uint32_t dim, const cax *v, uint32_t n, sp_diags *d, bool *bad)
{
    if (dim_is(mesh, &out->dims[dim], v, n)) {
        return true;
    }
    char b[1024];
    list_str(mesh, v, n, b, sizeof b);
    op_err(m, op, d, bad, "result sharding doesn't match expected sharding %s on dimension %u",
           b, dim);
    return false;
}

static void verify_all_to_all(sp_module *m, uint32_t op, const sp_sharding *in,
                              const sp_sharding *out, const sp_mesh *mesh, sp_diags *d, bool *bad)
{
    const sp_attr *a = sp_op_attr(m, op, "params");
    if (a == NULL || a->kind != SP_ATTR_ALL_TO_ALL) {
        return;
    }
    const sp_all_to_all_param *p = a->u.a2a.items;
    uint32_t n = a->u.a2a.n;
    if (n == 0) {
        op_err(m, op, d, bad, "parameter list is empty");
        return;
    }
    const sp_type *t = &m->types[m->values[m->ops[op].first_result].type];
    int64_t rank = t->kind == SP_TYPE_TENSOR ? (int64_t)t->rank : 0;
    bool seen_dim[SP_MAX_RANK] = {false};
    int64_t prev_src = -1;
    sp_axis_list lists[SP_MAX_RANK];
    for (uint32_t i = 0; i < n && i < SP_MAX_RANK; i++) {
        lists[i] = p[i].axes;
    }
    if (!axis_lists_ok(m, op, mesh, lists, n < SP_MAX_RANK ? n : SP_MAX_RANK, d, bad)) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int64_t dims[2] = {p[i].src_dim, p[i].tgt_dim};
        for (int k = 0; k < 2; k++) {
            if (dims[k] < 0 || dims[k] >= rank) {
                op_err(m, op, d, bad, "%s dimension %lld is out of range [0, %lld)",
                       k == 0 ? "source" : "target", (long long)dims[k], (long long)rank);
                return;
            }
        }
        for (int k = 0; k < 2; k++) {
            if (seen_dim[dims[k]]) {
                op_err(m, op, d, bad, "overlapping source/target dimensions in all-to-all "
                       "params: %lld", (long long)dims[k]);
                return;
            }
            seen_dim[dims[k]] = true;
        }
        if (prev_src >= dims[0]) {
            op_err(m, op, d, bad, "source dimensions are not sorted in ascending order: %lld "
                   "appears after %lld", (long long)dims[0], (long long)prev_src);
            return;
        }
        prev_src = dims[0];
    }
    if (in == NULL || in->rank != out->rank || out->rank != rank) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t sd = (uint32_t)p[i].src_dim, td = (uint32_t)p[i].tgt_dim;
        cax v[MAXDIM];
        uint32_t nv = dim_axes(mesh, &in->dims[sd], v, MAXDIM);
        if (!gather_dim(m, op, mesh, v, &nv, &p[i].axes, sd, "all-to-all", d, bad) ||
            !expect_dim(m, op, mesh, out, sd, v, nv, d, bad)) {
            return;
        }
        nv = dim_axes(mesh, &in->dims[td], v, MAXDIM);
        slice_dim(mesh, v, &nv, &p[i].axes);
        if (!expect_dim(m, op, mesh, out, td, v, nv, d, bad)) {
            return;
        }
    }
    for (uint32_t dim = 0; dim < out->rank; dim++) {
        cax v[MAXDIM];
        uint32_t nv = dim_axes(mesh, &in->dims[dim], v, MAXDIM);
        if (!seen_dim[dim] && !expect_dim(m, op, mesh, out, dim, v, nv, d, bad)) {
            return;
        }
    }
}

static int64_t sharded_size(const sp_mesh *mesh, const sp_dim_sharding *ds)
{
    int64_t p = 1;
    for (uint32_t k = 0; k < ds->n_axes; k++) {
        cax a;
        if (cax_of(mesh, &ds->axes[k], &a) && !cm_mul_i64(p, a.size, &p)) {
            return -1;
        }
    }
    return p;
}

static void operand_note(sp_module *m, uint32_t op, const sp_mesh *in_mesh, sp_diags *d)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_mesh_print(in_mesh, &b);
    const sp_value *v = &m->values[m->ops[op].operands[0]];
    uint32_t at = v->def;
    if (at == SP_NONE && v->block != SP_NONE) {
        at = m->blocks[v->block].parent_op;
    }
    sp_diags_add(d, m, at, SP_DIAG_NOTE, "operand mesh: #sdy.mesh%.*s",
                 b.data != NULL ? (int)b.len : 0, b.data != NULL ? b.data : "");
    cm_buf_fini(&b);
}

static void verify_collective_permute(sp_module *m, uint32_t op, const sp_sharding *in,
                                      const sp_sharding *out, const sp_mesh *mesh,
                                      const sp_mesh *in_mesh, sp_diags *d, bool *bad)
{
    if (in == NULL || in_mesh == NULL) {
        return;
    }
    bool same_axes = in_mesh->n_axes == mesh->n_axes;
    for (uint32_t i = 0; same_axes && i < mesh->n_axes; i++) {
        same_axes = strcmp(in_mesh->axes[i].name, mesh->axes[i].name) == 0 &&
                    in_mesh->axes[i].size == mesh->axes[i].size;
    }
    if (!same_axes) {
        op_err(m, op, d, bad, "result mesh has different axes than operand mesh");
        operand_note(m, op, in_mesh, d);
        return;
    }
    bool same_ref = in->mesh_name != NULL && out->mesh_name != NULL
                        ? strcmp(in->mesh_name, out->mesh_name) == 0
                        : in_mesh == mesh;
    bool same_ids = in_mesh->n_device_ids == mesh->n_device_ids;
    for (uint32_t i = 0; same_ids && i < mesh->n_device_ids; i++) {
        same_ids = in_mesh->device_ids[i] == mesh->device_ids[i];
    }
    if (!same_ref && same_ids) {
        op_err(m, op, d, bad, "result mesh name is different but same device ids as operand");
        operand_note(m, op, in_mesh, d);
        return;
    }
    for (uint32_t dim = 0; dim < in->rank && dim < out->rank; dim++) {
        cax v[MAXDIM];
        uint32_t nv = dim_axes(mesh, &in->dims[dim], v, MAXDIM);
        if (dim_is(mesh, &out->dims[dim], v, nv)) {
            continue;
        }
        int64_t a = sharded_size(mesh, &in->dims[dim]), b = sharded_size(mesh, &out->dims[dim]);
        if (a != b) {
            op_err(m, op, d, bad, "sharded size of result doesn't match operand on dimension "
                   "%u: %lld != %lld", dim, (long long)b, (long long)a);
            return;
        }
    }
}

static bool cax_less(cax a, cax b)
{
    if (a.axis != b.axis) {
        return a.axis < b.axis;
    }
    return a.pre != b.pre ? a.pre < b.pre : a.size < b.size;
}

/* Shardy's sortAndMergeAxes: mesh order, consecutive sub-axes merged. */
static uint32_t sort_merge(const sp_mesh *mesh, cax *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        for (uint32_t j = i; j > 0 && cax_less(v[j], v[j - 1]); j--) {
            cax t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k > 0 && v[k - 1].axis == v[i].axis && v[k - 1].pre * v[k - 1].size == v[i].pre) {
            v[k - 1].size *= v[i].size;
        } else {
            v[k++] = v[i];
        }
    }
    (void)mesh;
    return k;
}

static void verify_sharded_to_unreduced(sp_module *m, uint32_t op, const sp_sharding *in,
                                        const sp_sharding *out, const sp_mesh *mesh,
                                        sp_diags *d, bool *bad)
{
    if (out->n_unreduced > 0 && out->reduction != SP_REDUCTION_SUM) {
        op_err(m, op, d, bad, "out_sharding reduction_op must be SUM");
        return;
    }
    bool was_bad = *bad;
    *bad = false;
    verify_axes_per_dim(m, op, in, out, mesh, "axes", true, "shard-to-unreduce", d, bad);
    bool failed = *bad;
    *bad = *bad || was_bad;
    const sp_attr *a = sp_op_attr(m, op, "axes");
    if (failed || in == NULL || a == NULL || a->kind != SP_ATTR_AXIS_LISTS) {
        return;
    }
    enum { MAXU = 256 };
    cax want[MAXU], got[MAXU];
    uint32_t nw = 0, ng = 0;
    for (uint32_t k = 0; k < in->n_unreduced && nw < MAXU; k++) {
        nw += cax_of(mesh, &in->unreduced[k], &want[nw]);
    }
    for (uint32_t i = 0; i < a->u.axis_lists.n; i++) {
        const sp_axis_list *l = &a->u.axis_lists.items[i];
        for (uint32_t k = 0; k < l->n && nw < MAXU; k++) {
            nw += cax_of(mesh, &l->axes[k], &want[nw]);
        }
    }
    nw = sort_merge(mesh, want, nw);
    for (uint32_t k = 0; k < out->n_unreduced && ng < MAXU; k++) {
        ng += cax_of(mesh, &out->unreduced[k], &got[ng]);
    }
    bool same = nw == ng;
    for (uint32_t k = 0; same && k < nw; k++) {
        same = cax_eq(want[k], got[k]);
    }
    if (!same) {
        op_err(m, op, d, bad,
               "out_unreduced_axes should be in_unreduced_axes + sharded_to_unreduced_axes");
    }
}

/* sdy.replicated_to_unreduced (Shardy's ReplicatedToUnreducedOp checks): a
 * sum-reduced result with the operand's dimension shardings, non-empty
 * sorted axes that the operand has neither in a dimension nor unreduced,
 * and result unreduced axes that are the operand's plus these. */
static void verify_replicated_to_unreduced(sp_module *m, uint32_t op, const sp_sharding *in,
                                           const sp_sharding *out, const sp_mesh *mesh,
                                           sp_diags *d, bool *bad)
{
    if (out->n_unreduced > 0 && out->reduction != SP_REDUCTION_SUM) {
        op_err(m, op, d, bad, "out_sharding reduction_op must be SUM");
        return;
    }
    bool same = in != NULL && same_dims(mesh, in, out);
    for (uint32_t dd = 0; same && dd < out->rank; dd++) {
        same = in->dims[dd].is_closed == out->dims[dd].is_closed &&
               in->dims[dd].priority == out->dims[dd].priority;
    }
    if (!same) {
        op_err(m, op, d, bad, "input and output must share the same dimension shardings");
        return;
    }
    const sp_attr *a = sp_op_attr(m, op, "axes");
    if (a == NULL || a->kind != SP_ATTR_AXIS_LIST) {
        return;
    }
    const sp_axis_list *l = &a->u.axes;
    if (l->n == 0) {
        op_err(m, op, d, bad, "r2u axes must not be empty");
        return;
    }
    if (!axis_lists_ok(m, op, mesh, l, 1, d, bad)) {
        return;
    }
    for (uint32_t k = 1; k < l->n; k++) {
        cax x, y;
        if (cax_of(mesh, &l->axes[k - 1], &x) && cax_of(mesh, &l->axes[k], &y) &&
            cax_less(y, x)) {
            op_err(m, op, d, bad, "r2u axes are not ordered w.r.t. mesh");
            return;
        }
    }
    enum { MAXU = 256 };
    cax want[MAXU], got[MAXU];
    uint32_t nw = 0, ng = 0;
    for (uint32_t k = 0; k < l->n; k++) {
        cax r;
        char b[160];
        if (!cax_of(mesh, &l->axes[k], &r)) {
            continue;
        }
        bool hit = false;
        for (uint32_t dd = 0; dd < in->rank && !hit; dd++) {
            hit = refs_overlap(mesh, in->dims[dd].axes, in->dims[dd].n_axes, r);
        }
        sp_verify_ref_str(&l->axes[k], b, sizeof b);
        if (hit) {
            op_err(m, op, d, bad, "r2u axis %s overlaps with operand dimension sharding", b);
            return;
        }
        if (refs_overlap(mesh, in->unreduced, in->n_unreduced, r)) {
            op_err(m, op, d, bad, "r2u axis %s overlaps with operand unreduced axes", b);
            return;
        }
    }
    for (uint32_t k = 0; k < in->n_unreduced && nw < MAXU; k++) {
        nw += cax_of(mesh, &in->unreduced[k], &want[nw]);
    }
    for (uint32_t k = 0; k < l->n && nw < MAXU; k++) {
        nw += cax_of(mesh, &l->axes[k], &want[nw]);
    }
    nw = sort_merge(mesh, want, nw);
    for (uint32_t k = 0; k < out->n_unreduced && ng < MAXU; k++) {
        ng += cax_of(mesh, &out->unreduced[k], &got[ng]);
    }
    bool eq = nw == ng;
    for (uint32_t k = 0; eq && k < nw; k++) {
        eq = cax_eq(want[k], got[k]);
    }
    if (!eq) {
        op_err(m, op, d, bad, "out_unreduced_axes should be in_unreduced_axes + r2u_axes");
    }
}

void sp_verify_collective(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    sp_op_kind k = (sp_op_kind)o->kind;
    if (k != SP_OP_SDY_ALL_GATHER && k != SP_OP_SDY_ALL_SLICE && k != SP_OP_SDY_ALL_REDUCE &&
        k != SP_OP_SDY_REDUCE_SCATTER && k != SP_OP_SDY_ALL_TO_ALL &&
        k != SP_OP_SDY_COLLECTIVE_PERMUTE && k != SP_OP_SDY_SHARDED_TO_UNREDUCED &&
        k != SP_OP_SDY_REPLICATED_TO_UNREDUCED) {
        return;
    }
    const sp_attr *oa = sp_op_attr(m, op, "out_sharding");
    if (o->n_operands != 1 || o->n_results != 1 || oa == NULL || oa->kind != SP_ATTR_SHARDING) {
        return;
    }
    const sp_sharding *out = oa->u.sharding;
    const sp_sharding *in = sp_value_sharding_partitioned(m, o->operands[0]);
    bool may_miss = k == SP_OP_SDY_ALL_SLICE || k == SP_OP_SDY_ALL_REDUCE ||
                    k == SP_OP_SDY_REDUCE_SCATTER;
    if (in == NULL && !may_miss) {
        op_err(m, op, d, bad, "collective on operand without sharding");
        return;
    }
    const sp_mesh *mesh = mesh_of(m, out);
    char msg[512];
    if (!sp_verify_sharding(out, mesh, &m->types[m->values[o->first_result].type], msg,
                            sizeof msg)) {
        op_err(m, op, d, bad, "%s", msg);
        return;
    }
    const sp_mesh *in_mesh = in != NULL ? mesh_of(m, in) : NULL;
    if (k != SP_OP_SDY_COLLECTIVE_PERMUTE && in_mesh != NULL && !sp_mesh_equal(in_mesh, mesh)) {
        op_err(m, op, d, bad, "result mesh does not match operand mesh");
        operand_note(m, op, in_mesh, d);
        return;
    }
    if (in != NULL && in->rank != out->rank) {
        op_err(m, op, d, bad, "result sharding has rank %u but operand sharding has rank %u",
               out->rank, in->rank);
        return;
    }
    switch (k) {
    case SP_OP_SDY_ALL_GATHER:
        verify_axes_per_dim(m, op, in, out, mesh, "gathering_axes", true, "gathering", d, bad);
        break;
    case SP_OP_SDY_ALL_SLICE:
        verify_axes_per_dim(m, op, in, out, mesh, "slicing_axes", false, "slicing", d, bad);
        break;
    case SP_OP_SDY_REDUCE_SCATTER:
        if (!sp_verify_unreduced_transition(m, op, in, out, -1, op_reduction(m, op), d)) {
            *bad = true;
            break;
        }
        verify_axes_per_dim(m, op, in, out, mesh, "reduce_scatter_axes", false, "slicing", d,
                            bad);
        break;
    case SP_OP_SDY_ALL_REDUCE: {
        bool was_bad = *bad;
        *bad = false;
        verify_all_reduce(m, op, in, out, mesh, d, bad);
        if (!*bad && !sp_verify_unreduced_transition(m, op, in, out, -1, op_reduction(m, op), d)) {
            *bad = true;
        }
        *bad = *bad || was_bad;
        break;
    }
    case SP_OP_SDY_ALL_TO_ALL:
        verify_all_to_all(m, op, in, out, mesh, d, bad);
        break;
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
        verify_collective_permute(m, op, in, out, mesh, in_mesh, d, bad);
        break;
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
        verify_sharded_to_unreduced(m, op, in, out, mesh, d, bad);
        break;
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
        verify_replicated_to_unreduced(m, op, in, out, mesh, d, bad);
        break;
    default:
        break;
    }
}
