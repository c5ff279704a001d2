/* SPDX-License-Identifier: Apache-2.0
 * planner: the sdy collectives (all_gather, all_slice, reduce_scatter,
 * all_reduce, all_to_all, collective_permute) checked as Shardy's verifier
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

void sp_verify_collective(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    sp_op_kind k = (sp_op_kind)o->kind;
    if (k != SP_OP_SDY_ALL_GATHER && k != SP_OP_SDY_ALL_SLICE && k != SP_OP_SDY_ALL_REDUCE &&
        k != SP_OP_SDY_REDUCE_SCATTER && k != SP_OP_SDY_ALL_TO_ALL &&
        k != SP_OP_SDY_COLLECTIVE_PERMUTE) {
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
        cm_buf b;
        cm_buf_init(&b);
        sp_mesh_print(in_mesh, &b);
        const sp_value *v = &m->values[o->operands[0]];
        uint32_t at = v->def;
        if (at == SP_NONE && v->block != SP_NONE) {
            at = m->blocks[v->block].parent_op;
        }
        sp_diags_add(d, m, at, SP_DIAG_NOTE, "operand mesh: #sdy.mesh%.*s",
                     b.data != NULL ? (int)b.len : 0, b.data != NULL ? b.data : "");
        cm_buf_fini(&b);
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
        verify_axes_per_dim(m, op, in, out, mesh, "reduce_scatter_axes", false, "slicing", d,
                            bad);
        break;
    case SP_OP_SDY_ALL_REDUCE:
        verify_all_reduce(m, op, in, out, mesh, d, bad);
        break;
    default:
        break;
    }
}
