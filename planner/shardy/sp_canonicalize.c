/* SPDX-License-Identifier: Apache-2.0
 * planner: -canonicalize (see sp_canonicalize.h). Each sweep counts the uses
 * of every value, then tries the patterns on each op in program order; a
 * rewrite keeps the counts current, and sweeps repeat until one changes
 * nothing. Replacing a value rewrites the operands of every op in blocks,
 * as MLIR's replaceAllUsesWith does. */
#include "sp_canonicalize.h"

#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

#define MAX_SWEEPS 64

typedef struct canon {
    sp_module *m;
    uint32_t *uses; /* per value: uses by ops in blocks */
    uint32_t cap;
    uint32_t *order; /* ops of this sweep, program order */
    uint32_t n_order, cap_order;
    bool changed;
    bool collectives_only; /* sp_pass_canonicalize_collectives */
} canon;

static bool attached(const sp_module *m, uint32_t op)
{
    return m->ops[op].parent_block != SP_NONE;
}

static cm_status grow_uses(canon *c)
{
    if (c->cap >= c->m->n_values) {
        return CM_OK;
    }
    uint32_t ncap = c->m->n_values + 64;
    uint32_t *u = cm_realloc(c->uses, sizeof *u * ncap);
    if (u == NULL) {
        return CM_ENOMEM;
    }
    memset(u + c->cap, 0, sizeof *u * (ncap - c->cap));
    c->uses = u;
    c->cap = ncap;
    return CM_OK;
}

static cm_status collect(sp_module *m, uint32_t op, void *vctx)
{
    canon *c = vctx;
    (void)m;
    if (CM_GROW_U32(c->order, c->cap_order, c->n_order + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->order[c->n_order++] = op;
    return CM_OK;
}

static cm_status sweep_begin(canon *c)
{
    c->n_order = 0;
    cm_status st = grow_uses(c);
    if (st == CM_OK) {
        st = sp_pass_walk(c->m, c->m->body, collect, c);
    }
    if (st != CM_OK) {
        return st;
    }
    if (c->cap > 0) {
        memset(c->uses, 0, sizeof *c->uses * c->cap);
    }
    for (uint32_t i = 0; i < c->n_order; i++) {
        const sp_op *op = &c->m->ops[c->order[i]];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            c->uses[op->operands[k]]++;
        }
    }
    return CM_OK;
}

/* Every use of from becomes a use of to. */
static void replace_value(canon *c, uint32_t from, uint32_t to)
{
    sp_module *m = c->m;
    if (from == to || c->uses[from] == 0) {
        return;
    }
    for (uint32_t o = 0; o < m->n_ops; o++) {
        sp_op *op = &m->ops[o];
        if (!attached(m, o)) {
            continue;
        }
        for (uint32_t k = 0; k < op->n_operands; k++) {
            if (op->operands[k] == from) {
                op->operands[k] = to;
            }
        }
    }
    c->uses[to] += c->uses[from];
    c->uses[from] = 0;
    c->changed = true;
}

/* Detaches op from its block; its operands lose a use. */
static void erase_op(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    uint32_t idx = sp_op_index_in_block(m, op);
    if (idx == SP_NONE) {
        return;
    }
    const sp_op *o = &m->ops[op];
    for (uint32_t k = 0; k < o->n_operands; k++) {
        if (c->uses[o->operands[k]] > 0) {
            c->uses[o->operands[k]]--;
        }
    }
    sp_block_remove_op(m, o->parent_block, idx);
    c->changed = true;
}

/* Replaces the single result of op by v and erases op. */
static void replace_op(canon *c, uint32_t op, uint32_t v)
{
    replace_value(c, c->m->ops[op].first_result, v);
    erase_op(c, op);
}

/* A new one-result op of type ty on operand in, inserted before op `before`. */
static cm_status new_op_before(canon *c, uint32_t before, const char *name, uint32_t in,
                               uint32_t ty, uint32_t *out)
{
    sp_module *m = c->m;
    uint32_t block = m->ops[before].parent_block;
    uint32_t idx = sp_op_index_in_block(m, before);
    cm_status st = sp_module_new_op(m, SP_NONE, name, &in, 1, &ty, 1, out);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, block, idx, *out);
    }
    if (st == CM_OK) {
        st = grow_uses(c);
    }
    if (st == CM_OK) {
        c->uses[in]++;
        c->changed = true;
    }
    return st;
}

static uint32_t def_of(const sp_module *m, uint32_t v, sp_op_kind kind)
{
    uint32_t d = m->values[v].def;
    return d != SP_NONE && m->ops[d].kind == (uint32_t)kind && attached(m, d) ? d : SP_NONE;
}

static const sp_attr *attr_of(const sp_module *m, uint32_t op, const char *key, sp_attr_kind k)
{
    const sp_attr *a = sp_op_attr(m, op, key);
    return a != NULL && a->kind == k ? a : NULL;
}

/* The attribute itself, to share with a new op (attributes are immutable
 * once built: sharing is how sp_op_clone_detached copies them too). */
static sp_attr *shared_attr(const sp_module *m, uint32_t op, const char *key)
{
    const sp_op *o = &m->ops[op];
    for (uint32_t i = 0; i < o->n_attrs; i++) {
        if (strcmp(o->attrs[i].name, key) == 0) {
            return o->attrs[i].value;
        }
    }
    return NULL;
}

/* ---- axes ------------------------------------------------------------------------ */

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    return s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
}

static int64_t full_size(const sp_mesh *mesh, const char *name)
{
    int32_t i = mesh != NULL ? sp_mesh_axis_index(mesh, name) : -1;
    return i >= 0 ? mesh->axes[i].size : 0;
}

static bool ref_eq(const sp_axis_ref *a, const sp_axis_ref *b)
{
    if (strcmp(a->name, b->name) != 0 || a->pre_size != b->pre_size) {
        return false;
    }
    return a->pre_size == 0 || a->size == b->size;
}

static bool refs_eq(const sp_axis_ref *a, uint32_t na, const sp_axis_ref *b, uint32_t nb)
{
    if (na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (!ref_eq(&a[i], &b[i])) {
            return false;
        }
    }
    return true;
}

static bool lists_eq(const sp_attr *a, const sp_attr *b)
{
    if (a == NULL || b == NULL || a->u.axis_lists.n != b->u.axis_lists.n) {
        return false;
    }
    for (uint32_t d = 0; d < a->u.axis_lists.n; d++) {
        const sp_axis_list *x = &a->u.axis_lists.items[d], *y = &b->u.axis_lists.items[d];
        if (!refs_eq(x->axes, x->n, y->axes, y->n)) {
            return false;
        }
    }
    return true;
}

static bool lists_empty(const sp_attr *a)
{
    for (uint32_t d = 0; d < a->u.axis_lists.n; d++) {
        if (a->u.axis_lists.items[d].n > 0) {
            return false;
        }
    }
    return true;
}

/* A sub-axis view of r: (pre, size) with full axes as (1, mesh size). */
static void ref_span(const sp_axis_ref *r, const sp_mesh *mesh, int64_t *pre, int64_t *size)
{
    *pre = r->pre_size == 0 ? 1 : r->pre_size;
    *size = r->pre_size == 0 ? full_size(mesh, r->name) : r->size;
}

/* Can b follow a as one sub-axis ("x":(1)2 then "x":(2)2)? */
static bool can_merge(const sp_axis_ref *a, const sp_axis_ref *b, const sp_mesh *mesh)
{
    if (a->pre_size == 0 || b->pre_size == 0 || strcmp(a->name, b->name) != 0) {
        return false;
    }
    int64_t pa, sa, pb, sb;
    ref_span(a, mesh, &pa, &sa);
    ref_span(b, mesh, &pb, &sb);
    return pa * sa == pb;
}

static void merge_into(sp_axis_ref *a, const sp_axis_ref *b, const sp_mesh *mesh)
{
    a->size *= b->size;
    if (a->pre_size == 1 && a->size == full_size(mesh, a->name)) {
        a->pre_size = 0;
    }
}

/* Appends r to v[0..*n), merged into the last entry when it continues it. */
static void add_or_merge(sp_axis_ref *v, uint32_t *n, const sp_axis_ref *r, const sp_mesh *mesh)
{
    if (*n > 0 && can_merge(&v[*n - 1], r, mesh)) {
        merge_into(&v[*n - 1], r, mesh);
        return;
    }
    v[(*n)++] = *r;
    if (v[*n - 1].pre_size == 0) {
        v[*n - 1].size = full_size(mesh, r->name);
    }
}

static const sp_mesh *sort_mesh; /* qsort has no context argument */

static int ref_cmp(const void *pa, const void *pb)
{
    const sp_axis_ref *a = pa, *b = pb;
    int32_t ia = sp_mesh_axis_index(sort_mesh, a->name);
    int32_t ib = sp_mesh_axis_index(sort_mesh, b->name);
    if (ia != ib) {
        return ia < ib ? -1 : 1;
    }
    int64_t xa, sa, xb, sb;
    ref_span(a, sort_mesh, &xa, &sa);
    ref_span(b, sort_mesh, &xb, &sb);
    if (xa != xb) {
        return xa < xb ? -1 : 1;
    }
    return sa == sb ? 0 : (sa > sb ? -1 : 1);
}

/* ---- patterns ---------------------------------------------------------------------- */

static cm_status all_slice_patterns(canon *c, uint32_t op);

/* all_gather / all_slice / reduce_scatter whose per-dimension axes are all
 * empty is its operand. */
static bool noop_per_dim(canon *c, uint32_t op, const char *key)
{
    const sp_attr *a = attr_of(c->m, op, key, SP_ATTR_AXIS_LISTS);
    if (a == NULL || !lists_empty(a)) {
        return false;
    }
    replace_op(c, op, c->m->ops[op].operands[0]);
    return true;
}

static cm_status all_reduce_patterns(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    const sp_attr *red = attr_of(m, op, "reduction_axes", SP_ATTR_AXIS_LIST);
    if (red == NULL) {
        return CM_OK;
    }
    uint32_t in = m->ops[op].operands[0];
    if (red->u.axes.n == 0) {
        replace_op(c, op, in);
        return CM_OK;
    }
    uint32_t r2u = def_of(m, in, SP_OP_SDY_REPLICATED_TO_UNREDUCED);
    if (r2u != SP_NONE) {
        const sp_attr *ax = attr_of(m, r2u, "axes", SP_ATTR_AXIS_LIST);
        if (ax != NULL && refs_eq(ax->u.axes.axes, ax->u.axes.n, red->u.axes.axes, red->u.axes.n)) {
            replace_op(c, op, m->ops[r2u].operands[0]);
        }
        return CM_OK;
    }
    uint32_t s2u = def_of(m, in, SP_OP_SDY_SHARDED_TO_UNREDUCED);
    const sp_attr *os = attr_of(m, op, "out_sharding", SP_ATTR_SHARDING);
    if (s2u == SP_NONE || os == NULL) {
        return CM_OK;
    }
    const sp_attr *ax = attr_of(m, s2u, "axes", SP_ATTR_AXIS_LISTS);
    const sp_attr *s2u_os = attr_of(m, s2u, "out_sharding", SP_ATTR_SHARDING);
    const sp_mesh *mesh = s2u_os != NULL ? mesh_of(m, s2u_os->u.sharding) : NULL;
    if (ax == NULL || mesh == NULL) {
        return CM_OK;
    }
    uint32_t total = 0;
    for (uint32_t d = 0; d < ax->u.axis_lists.n; d++) {
        total += ax->u.axis_lists.items[d].n;
    }
    sp_axis_ref *flat = cm_calloc(total + 1u, sizeof *flat);
    sp_axis_ref *merged = cm_calloc(total + 1u, sizeof *merged);
    if (flat == NULL || merged == NULL) {
        cm_free(flat);
        cm_free(merged);
        return CM_ENOMEM;
    }
    uint32_t n = 0, nm = 0;
    for (uint32_t d = 0; d < ax->u.axis_lists.n; d++) {
        for (uint32_t i = 0; i < ax->u.axis_lists.items[d].n; i++) {
            flat[n++] = ax->u.axis_lists.items[d].axes[i];
        }
    }
    sort_mesh = mesh;
    qsort(flat, n, sizeof *flat, ref_cmp);
    for (uint32_t i = 0; i < n; i++) {
        add_or_merge(merged, &nm, &flat[i], mesh);
    }
    bool match = refs_eq(merged, nm, red->u.axes.axes, red->u.axes.n);
    cm_free(flat);
    cm_free(merged);
    if (!match) {
        return CM_OK;
    }
    uint32_t g;
    cm_status st = new_op_before(c, op, "sdy.all_gather", m->ops[s2u].operands[0],
                                 m->values[m->ops[op].first_result].type, &g);
    if (st == CM_OK) {
        st = sp_op_set_attr(m, g, "gathering_axes", shared_attr(m, s2u, "axes"));
    }
    if (st == CM_OK) {
        st = sp_op_set_attr(m, g, "out_sharding", shared_attr(m, op, "out_sharding"));
    }
    if (st == CM_OK) {
        replace_op(c, op, m->ops[g].first_result);
    }
    return st;
}

static cm_status collective_permute_pattern(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    const sp_attr *os = attr_of(m, op, "out_sharding", SP_ATTR_SHARDING);
    uint32_t in = m->ops[op].operands[0];
    if (os != NULL &&
        sp_sharding_equivalent(sp_value_sharding_partitioned(m, in), os->u.sharding)) {
        replace_op(c, op, in);
    }
    return CM_OK;
}

/* Does param list a share a source or target dimension with b (or itself)? */
static bool a2a_overlap(const sp_attr *a, const sp_attr *b)
{
    int64_t seen[4 * SP_MAX_RANK];
    uint32_t n = 0;
    const sp_attr *lists[2] = {a, b};
    for (int l = 0; l < 2; l++) {
        for (uint32_t i = 0; i < lists[l]->u.a2a.n; i++) {
            int64_t dims[2] = {lists[l]->u.a2a.items[i].src_dim, lists[l]->u.a2a.items[i].tgt_dim};
            for (int k = 0; k < 2; k++) {
                for (uint32_t j = 0; j < n; j++) {
                    if (seen[j] == dims[k]) {
                        return true;
                    }
                }
                if (n >= sizeof seen / sizeof seen[0]) {
                    return true; /* too many to tell: leave them */
                }
                seen[n++] = dims[k];
            }
        }
    }
    return false;
}

static cm_status all_to_all_patterns(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    if (c->uses[m->ops[op].first_result] == 0) {
        erase_op(c, op);
        return CM_OK;
    }
    uint32_t inner = def_of(m, m->ops[op].operands[0], SP_OP_SDY_ALL_TO_ALL);
    const sp_attr *po = attr_of(m, op, "params", SP_ATTR_ALL_TO_ALL);
    const sp_attr *pi = inner != SP_NONE ? attr_of(m, inner, "params", SP_ATTR_ALL_TO_ALL) : NULL;
    if (pi == NULL || po == NULL || c->uses[m->ops[inner].first_result] != 1 ||
        a2a_overlap(pi, po)) {
        return CM_OK;
    }
    uint32_t n = pi->u.a2a.n + po->u.a2a.n;
    sp_attr *a = sp_attr_new(m, SP_ATTR_ALL_TO_ALL);
    sp_all_to_all_param *items = cm_arena_zalloc(&m->arena, sizeof *items * (n + 1u));
    if (a == NULL || items == NULL) {
        return CM_ENOMEM;
    }
    memcpy(items, pi->u.a2a.items, sizeof *items * pi->u.a2a.n);
    memcpy(items + pi->u.a2a.n, po->u.a2a.items, sizeof *items * po->u.a2a.n);
    for (uint32_t i = 1; i < n; i++) { /* stable insertion sort by source dimension */
        sp_all_to_all_param t = items[i];
        uint32_t j = i;
        for (; j > 0 && items[j - 1].src_dim > t.src_dim; j--) {
            items[j] = items[j - 1];
        }
        items[j] = t;
    }
    a->u.a2a.items = items;
    a->u.a2a.n = n;
    cm_status st = sp_op_set_attr(m, op, "params", a);
    if (st != CM_OK) {
        return st;
    }
    uint32_t src = m->ops[inner].operands[0];
    m->ops[op].operands[0] = src;
    c->uses[src]++;
    c->uses[m->ops[inner].first_result]--;
    erase_op(c, inner); /* all_to_all has effects: MLIR erases it only as unused */
    return CM_OK;
}

/* ---- reshard CSE across reshapes and transposes --------------------------------------
 * Shardy's ReshardCommonSubexpressionEliminationPattern: a reshard of x,
 * where x is a value reached from a root through reshapes and transposes,
 * is an earlier reshard of a value reached from the same root through
 * reshapes only, when the two shardings place the mesh axes at the same
 * strides of the row-major element order; the path from the root is cloned
 * onto that reshard's result (after a reshape back to the root's type). */

static bool is_metadata(const sp_module *m, uint32_t op)
{
    return m->ops[op].kind == SP_OP_RESHAPE || m->ops[op].kind == SP_OP_TRANSPOSE;
}

typedef struct axis_stride {
    sp_axis_ref axis; /* full axes as pre_size 0 */
    double stride;
} axis_stride;

static int stride_cmp(const void *pa, const void *pb)
{
    const axis_stride *a = pa, *b = pb;
    if (a->stride != b->stride) {
        return a->stride < b->stride ? -1 : 1;
    }
    return 0;
}

static bool near(double a, double b)
{
    double d = a - b;
    return d < 1e-6 && d > -1e-6;
}

/* The linear stride of every axis of s on a tensor of type t, sorted and
 * with adjacent pieces of one axis merged; false when it cannot tell. */
static bool axis_strides(const sp_sharding *s, const sp_type *t, const sp_mesh *mesh,
                         axis_stride *out, uint32_t cap, uint32_t *n_out)
{
    if (t->kind != SP_TYPE_TENSOR || t->encoding != NULL || s->rank != t->rank) {
        return false;
    }
    uint32_t n = 0;
    double cum = 1.0;
    for (uint32_t i = t->rank; i-- > 0;) {
        int64_t dim = t->dims[i];
        if (dim < 0) {
            return false;
        }
        int64_t total = 1;
        for (uint32_t j = 0; j < s->dims[i].n_axes; j++) {
            int64_t pre, sz;
            ref_span(&s->dims[i].axes[j], mesh, &pre, &sz);
            if (sz <= 0) {
                return false;
            }
            total *= sz;
        }
        double cur = cum * (double)((dim + total - 1) / total);
        for (uint32_t j = s->dims[i].n_axes; j-- > 0;) {
            if (n >= cap) {
                return false;
            }
            int64_t pre, sz;
            ref_span(&s->dims[i].axes[j], mesh, &pre, &sz);
            out[n].axis = s->dims[i].axes[j];
            out[n].stride = cur;
            n++;
            cur *= (double)sz;
        }
        cum *= (double)dim;
    }
    /* stable sort by stride (insertion: lists are short) */
    for (uint32_t i = 1; i < n; i++) {
        axis_stride x = out[i];
        uint32_t j = i;
        for (; j > 0 && stride_cmp(&out[j - 1], &x) > 0; j--) {
            out[j] = out[j - 1];
        }
        out[j] = x;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k > 0) {
            axis_stride *back = &out[k - 1];
            int64_t pp, ps, cp, cs;
            ref_span(&back->axis, mesh, &pp, &ps);
            ref_span(&out[i].axis, mesh, &cp, &cs);
            if (strcmp(back->axis.name, out[i].axis.name) == 0 && cp * cs == pp &&
                near(out[i].stride, back->stride * (double)ps)) {
                int64_t size = ps * cs, pre = cp < pp ? cp : pp;
                back->axis.pre_size = pre == 1 && size == full_size(mesh, back->axis.name) ? 0 : pre;
                back->axis.size = size;
                continue;
            }
        }
        out[k++] = out[i];
    }
    *n_out = k;
    return true;
}

static bool equivalent_across_reshapes(const sp_module *m, const sp_sharding *a, uint32_t ta,
                                       const sp_sharding *b, uint32_t tb)
{
    if (a == NULL || b == NULL) {
        return a == b && ta == tb;
    }
    if (ta == tb && sp_sharding_equal(a, b)) {
        return true;
    }
    if (a->mesh_name == NULL || b->mesh_name == NULL || strcmp(a->mesh_name, b->mesh_name) != 0 ||
        !refs_eq(a->replicated, a->n_replicated, b->replicated, b->n_replicated)) {
        return false;
    }
    const sp_mesh *mesh = mesh_of(m, a);
    if (mesh == NULL) {
        return false;
    }
    axis_stride sa[2 * SP_MAX_RANK], sb[2 * SP_MAX_RANK];
    uint32_t na, nb;
    if (!axis_strides(a, &m->types[ta], mesh, sa, 2 * SP_MAX_RANK, &na) ||
        !axis_strides(b, &m->types[tb], mesh, sb, 2 * SP_MAX_RANK, &nb) || na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (!ref_eq(&sa[i].axis, &sb[i].axis) || !near(sa[i].stride, sb[i].stride)) {
            return false;
        }
    }
    return true;
}

/* The reshard's sharding seen from above the transposes (and same-rank
 * reshapes) that produce its input; NULL when out of memory. */
static const sp_sharding *target_sharding(canon *c, const sp_sharding *s, uint32_t v)
{
    sp_module *m = c->m;
    for (uint32_t d = m->values[v].def; d != SP_NONE && attached(m, d); d = m->values[v].def) {
        const sp_op *o = &m->ops[d];
        if (o->kind == SP_OP_TRANSPOSE && o->n_operands == 1) {
            const sp_attr *pa = sp_op_attr(m, d, "permutation");
            const int64_t *perm;
            uint32_t np;
            if (pa == NULL || !sp_attr_ints(pa, &perm, &np, &m->arena) || np != s->rank) {
                return s;
            }
            sp_sharding *t = sp_sharding_clone(&m->arena, s);
            if (t == NULL) {
                return NULL;
            }
            for (uint32_t r = 0; r < np; r++) {
                if (perm[r] < 0 || perm[r] >= (int64_t)np) {
                    return s;
                }
                t->dims[perm[r]] = s->dims[r];
            }
            s = t;
            v = o->operands[0];
            continue;
        }
        if (o->kind == SP_OP_RESHAPE && o->n_operands == 1 &&
            sp_value_type(m, o->operands[0])->rank == sp_value_type(m, v)->rank) {
            v = o->operands[0];
            continue;
        }
        break;
    }
    return s;
}

/* A reshard reached from root through reshapes, before op in its block,
 * that reshards as target does (for op's type); SP_NONE when none. Users
 * are visited latest first, as MLIR's use lists hold them. */
static cm_status find_compatible(canon *c, uint32_t root, const sp_sharding *target, uint32_t op,
                                 uint32_t *found)
{
    sp_module *m = c->m;
    uint32_t *stack = NULL, n = 0, cap = 0;
    uint32_t block = m->ops[op].parent_block, my_idx = sp_op_index_in_block(m, op);
    uint32_t ty = m->values[m->ops[op].first_result].type;
    *found = SP_NONE;
    if (CM_GROW_U32(stack, cap, 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    stack[n++] = root;
    uint32_t steps = 0;
    while (n > 0 && *found == SP_NONE && steps++ < 4096) {
        uint32_t v = stack[--n];
        for (uint32_t i = c->n_order; i-- > 0 && *found == SP_NONE;) {
            uint32_t u = c->order[i];
            const sp_op *uo = &m->ops[u];
            if (u == op || !attached(m, u) || uo->n_operands == 0 || uo->operands[0] != v) {
                continue;
            }
            if (uo->kind == SP_OP_SDY_RESHARD && uo->n_results == 1) {
                const sp_attr *sh = attr_of(m, u, "sharding", SP_ATTR_SHARDING);
                if (sh != NULL && uo->parent_block == block &&
                    sp_op_index_in_block(m, u) < my_idx &&
                    equivalent_across_reshapes(m, sh->u.sharding, m->values[uo->first_result].type,
                                               target, ty)) {
                    *found = u;
                }
            } else if (uo->kind == SP_OP_RESHAPE && uo->n_results == 1) {
                if (CM_GROW_U32(stack, cap, n + 1, NULL) != CM_OK) {
                    cm_free(stack);
                    return CM_ENOMEM;
                }
                stack[n++] = uo->first_result;
            }
        }
    }
    cm_free(stack);
    return CM_OK;
}

/* Where a new op goes to follow value v: its block and index. */
static void after_value(const sp_module *m, uint32_t v, uint32_t *block, uint32_t *idx)
{
    uint32_t d = m->values[v].def;
    if (d != SP_NONE) {
        *block = m->ops[d].parent_block;
        *idx = sp_op_index_in_block(m, d) + 1;
    } else {
        *block = m->values[v].block;
        *idx = 0;
    }
}

static cm_status insert_after(canon *c, uint32_t v, uint32_t op)
{
    uint32_t block, idx;
    after_value(c->m, v, &block, &idx);
    cm_status st = sp_block_insert_op(c->m, block, idx, op);
    if (st == CM_OK) {
        st = grow_uses(c);
    }
    if (st == CM_OK) {
        for (uint32_t k = 0; k < c->m->ops[op].n_operands; k++) {
            c->uses[c->m->ops[op].operands[k]]++;
        }
        c->changed = true;
    }
    return st;
}

/* Clones the reshapes and transposes from root down to target onto base. */
static cm_status clone_path(canon *c, uint32_t root, uint32_t target, uint32_t base, uint32_t *out)
{
    sp_module *m = c->m;
    uint32_t path[256], n = 0;
    for (uint32_t v = target; v != root; v = m->ops[m->values[v].def].operands[0]) {
        if (n >= 256 || m->values[v].def == SP_NONE) {
            return CM_EINVAL;
        }
        path[n++] = m->values[v].def;
    }
    uint32_t cur = base;
    while (n > 0) {
        uint32_t cl;
        cm_status st = sp_op_clone_detached(m, path[--n], &cl);
        if (st != CM_OK) {
            return st;
        }
        m->ops[cl].operands[0] = cur;
        st = insert_after(c, cur, cl);
        if (st != CM_OK) {
            return st;
        }
        cur = m->ops[cl].first_result;
    }
    *out = cur;
    return CM_OK;
}

static cm_status reshard_cse(canon *c, uint32_t op, bool *done)
{
    sp_module *m = c->m;
    const sp_attr *sh = attr_of(m, op, "sharding", SP_ATTR_SHARDING);
    *done = false;
    if (sh == NULL) {
        return CM_OK;
    }
    uint32_t input = m->ops[op].operands[0], root = input;
    uint32_t depth = 0;
    while (m->values[root].def != SP_NONE && is_metadata(m, m->values[root].def) &&
           m->ops[m->values[root].def].n_operands == 1 && depth++ < 256) {
        root = m->ops[m->values[root].def].operands[0];
    }
    if (depth > 256) {
        return CM_OK;
    }
    const sp_sharding *target = target_sharding(c, sh->u.sharding, input);
    if (target == NULL) {
        return CM_ENOMEM;
    }
    uint32_t found;
    cm_status st = find_compatible(c, root, target, op, &found);
    if (st != CM_OK || found == SP_NONE) {
        return st;
    }
    uint32_t cached = m->ops[found].first_result;
    if (m->values[cached].type != m->values[root].type) {
        uint32_t rs, ty = m->values[root].type;
        st = sp_module_new_op(m, SP_NONE, "stablehlo.reshape", &cached, 1, &ty, 1, &rs);
        if (st == CM_OK) {
            st = insert_after(c, cached, rs);
        }
        if (st != CM_OK) {
            return st;
        }
        cached = m->ops[rs].first_result;
    }
    uint32_t res;
    st = clone_path(c, root, input, cached, &res);
    if (st == CM_EINVAL) {
        return CM_OK;
    }
    if (st == CM_OK) {
        replace_op(c, op, res);
        *done = true;
    }
    return st;
}

static cm_status reshard_patterns(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    if (m->ops[op].n_operands != 1 || m->ops[op].n_results != 1) {
        return CM_OK;
    }
    bool done;
    cm_status st = reshard_cse(c, op, &done);
    if (st != CM_OK || done) {
        return st;
    }
    uint32_t inner = def_of(m, m->ops[op].operands[0], SP_OP_SDY_RESHARD);
    if (inner != SP_NONE && c->uses[m->ops[inner].first_result] == 1 &&
        m->ops[inner].n_operands == 1) {
        uint32_t src = m->ops[inner].operands[0];
        m->ops[op].operands[0] = src;
        c->uses[src]++;
        c->uses[m->ops[inner].first_result]--;
        c->changed = true;
    }
    return CM_OK;
}

/* all_reduce + all_slice users -> reduce_scatter (+ all_slice). */
static cm_status reduce_scatter_fusion(canon *c, uint32_t slice)
{
    sp_module *m = c->m;
    uint32_t ar = def_of(m, m->ops[slice].operands[0], SP_OP_SDY_ALL_REDUCE);
    const sp_attr *sl = attr_of(m, slice, "slicing_axes", SP_ATTR_AXIS_LISTS);
    const sp_attr *sl_os = attr_of(m, slice, "out_sharding", SP_ATTR_SHARDING);
    if (ar == SP_NONE || sl == NULL || sl_os == NULL) {
        return CM_OK;
    }
    const sp_attr *red = attr_of(m, ar, "reduction_axes", SP_ATTR_AXIS_LIST);
    const sp_attr *ar_os = attr_of(m, ar, "out_sharding", SP_ATTR_SHARDING);
    const sp_mesh *mesh = ar_os != NULL ? mesh_of(m, ar_os->u.sharding) : NULL;
    if (red == NULL || mesh == NULL) {
        return CM_OK;
    }
    uint32_t res = m->ops[ar].first_result;
    uint32_t block = m->ops[slice].parent_block;
    uint32_t my_idx = sp_op_index_in_block(m, slice);
    /* every user is an identical all_slice, and this one comes first */
    uint32_t n_users = 0;
    for (uint32_t i = 0; i < c->n_order; i++) {
        uint32_t u = c->order[i];
        const sp_op *uo = &m->ops[u];
        if (!attached(m, u)) {
            continue;
        }
        for (uint32_t k = 0; k < uo->n_operands; k++) {
            if (uo->operands[k] != res) {
                continue;
            }
            if (uo->kind != SP_OP_SDY_ALL_SLICE ||
                !lists_eq(attr_of(m, u, "slicing_axes", SP_ATTR_AXIS_LISTS), sl)) {
                return CM_OK;
            }
            if (uo->parent_block == block && sp_op_index_in_block(m, u) < my_idx) {
                return CM_OK;
            }
            n_users++;
        }
    }
    if (n_users != c->uses[res]) {
        return CM_OK; /* a user created during this sweep: wait for the next */
    }
    uint32_t rank = sl->u.axis_lists.n;
    const sp_sharding *in_s = sp_value_sharding_partitioned(m, m->ops[ar].operands[0]);
    if (in_s != NULL && in_s->rank != rank) {
        return CM_OK;
    }
    uint32_t n_red = red->u.axes.n;
    bool *left = cm_calloc(n_red + 1u, sizeof *left);
    if (left == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_red; i++) {
        left[i] = true;
    }
    sp_attr *rs_axes = sp_attr_new(m, SP_ATTR_AXIS_LISTS);
    sp_attr *rest = sp_attr_new(m, SP_ATTR_AXIS_LISTS);
    sp_axis_list *rs_items = cm_arena_zalloc(&m->arena, sizeof *rs_items * (rank + 1u));
    sp_axis_list *rest_items = cm_arena_zalloc(&m->arena, sizeof *rest_items * (rank + 1u));
    sp_sharding *out = cm_arena_zalloc(&m->arena, sizeof *out);
    sp_dim_sharding *dims = cm_arena_zalloc(&m->arena, sizeof *dims * (rank + 1u));
    if (rs_axes == NULL || rest == NULL || rs_items == NULL || rest_items == NULL ||
        out == NULL || dims == NULL) {
        cm_free(left);
        return CM_ENOMEM;
    }
    bool has_rest = false;
    uint32_t n_left = n_red;
    for (uint32_t d = 0; d < rank; d++) {
        const sp_axis_list *l = &sl->u.axis_lists.items[d];
        uint32_t k = 0;
        for (; k < l->n; k++) {
            uint32_t j = 0;
            while (j < n_red && !(left[j] && ref_eq(&red->u.axes.axes[j], &l->axes[k]))) {
                j++;
            }
            if (j == n_red) {
                break;
            }
            left[j] = false;
            n_left--;
        }
        rs_items[d].axes = l->axes;
        rs_items[d].n = k;
        rest_items[d].axes = l->axes + k;
        rest_items[d].n = l->n - k;
        has_rest = has_rest || k < l->n;
    }
    cm_free(left);
    if (n_left > 0) {
        return CM_OK;
    }
    for (uint32_t d = 0; d < rank; d++) {
        uint32_t have = in_s != NULL ? in_s->dims[d].n_axes : 0;
        sp_axis_ref *v = cm_arena_zalloc(&m->arena, sizeof *v * (have + rs_items[d].n + 1u));
        if (v == NULL) {
            return CM_ENOMEM;
        }
        uint32_t n = 0;
        for (uint32_t i = 0; i < have; i++) {
            v[n++] = in_s->dims[d].axes[i];
        }
        for (uint32_t i = 0; i < rs_items[d].n; i++) {
            add_or_merge(v, &n, &rs_items[d].axes[i], mesh);
        }
        dims[d].axes = v;
        dims[d].n_axes = n;
        dims[d].is_closed = true;
        dims[d].priority = -1;
    }
    const sp_sharding *so = sl_os->u.sharding;
    out->mesh_name = ar_os->u.sharding->mesh_name;
    out->mesh = ar_os->u.sharding->mesh;
    out->dims = dims;
    out->rank = rank;
    out->replicated = so->replicated;
    out->n_replicated = so->n_replicated;
    out->unreduced = so->unreduced;
    out->n_unreduced = so->n_unreduced;
    out->reduction = so->reduction;
    rs_axes->u.axis_lists.items = rs_items;
    rs_axes->u.axis_lists.n = rank;
    rest->u.axis_lists.items = rest_items;
    rest->u.axis_lists.n = rank;
    sp_attr *os = sp_attr_new(m, SP_ATTR_SHARDING);
    if (os == NULL) {
        return CM_ENOMEM;
    }
    os->u.sharding = out;
    uint32_t ty = m->values[res].type, rs, fin;
    cm_status st = new_op_before(c, slice, "sdy.reduce_scatter", m->ops[ar].operands[0], ty, &rs);
    const sp_attr *rop = sp_op_attr(m, ar, "reduction_op");
    if (st == CM_OK) {
        st = sp_op_set_attr(m, rs, "reduce_scatter_axes", rs_axes);
    }
    if (st == CM_OK && rop != NULL) {
        st = sp_op_set_attr(m, rs, "reduction_op", shared_attr(m, ar, "reduction_op"));
    }
    if (st == CM_OK) {
        st = sp_op_set_attr(m, rs, "out_sharding", os);
    }
    fin = m->ops[rs].first_result;
    if (st == CM_OK && has_rest) {
        uint32_t s2;
        st = new_op_before(c, slice, "sdy.all_slice", fin, ty, &s2);
        if (st == CM_OK) {
            st = sp_op_set_attr(m, s2, "slicing_axes", rest);
        }
        if (st == CM_OK) {
            st = sp_op_set_attr(m, s2, "out_sharding", shared_attr(m, slice, "out_sharding"));
        }
        fin = m->ops[s2].first_result;
    }
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < c->n_order; i++) {
        uint32_t u = c->order[i];
        if (attached(m, u) && m->ops[u].kind == SP_OP_SDY_ALL_SLICE &&
            m->ops[u].operands[0] == res) {
            replace_op(c, u, fin);
        }
    }
    erase_op(c, ar);
    return CM_OK;
}

static cm_status all_slice_patterns(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    if (noop_per_dim(c, op, "slicing_axes")) {
        return CM_OK;
    }
    uint32_t g = def_of(m, m->ops[op].operands[0], SP_OP_SDY_ALL_GATHER);
    if (g != SP_NONE) {
        if (lists_eq(attr_of(m, g, "gathering_axes", SP_ATTR_AXIS_LISTS),
                     attr_of(m, op, "slicing_axes", SP_ATTR_AXIS_LISTS))) {
            replace_op(c, op, m->ops[g].operands[0]);
        }
        return CM_OK;
    }
    return reduce_scatter_fusion(c, op);
}

/* ---- manual_computation -------------------------------------------------------------- */

/* The product of the manual axes' sizes, on the mesh of the first in or
 * out sharding (1 without any); 0 when the mesh is unknown. */
static int64_t manual_product(const canon *c, uint32_t op)
{
    const sp_module *m = c->m;
    const sp_attr *ax = attr_of(m, op, "manual_axes", SP_ATTR_AXIS_LIST);
    const char *keys[2] = {"in_shardings", "out_shardings"};
    const sp_mesh *mesh = NULL;
    bool any = false;
    for (int k = 0; k < 2 && mesh == NULL; k++) {
        const sp_attr *l = attr_of(m, op, keys[k], SP_ATTR_SHARDING_LIST);
        if (l != NULL && l->u.shardings.n > 0) {
            any = true;
            mesh = mesh_of(m, l->u.shardings.items[0]);
        }
    }
    if (!any || ax == NULL) {
        return ax != NULL ? 1 : 0;
    }
    if (mesh == NULL) {
        return 0;
    }
    int64_t p = 1;
    for (uint32_t i = 0; i < ax->u.axes.n; i++) {
        int64_t sz = full_size(mesh, ax->u.axes.axes[i].name);
        if (sz <= 0) {
            return 0;
        }
        p *= sz;
        if (p > 1) {
            return p;
        }
    }
    return p;
}

/* Moves the body of a manual_computation whose manual axes all have size 1
 * into its block, in its place: arguments become the operands, results the
 * returned values. */
static cm_status inline_manual(canon *c, uint32_t op, uint32_t bid)
{
    sp_module *m = c->m;
    sp_block *b = &m->blocks[bid];
    uint32_t n_body = b->n_ops;
    if (n_body == 0 || m->ops[b->ops[n_body - 1]].kind != SP_OP_SDY_RETURN ||
        m->ops[b->ops[n_body - 1]].n_operands != m->ops[op].n_results ||
        b->n_args != m->ops[op].n_operands) {
        return CM_OK;
    }
    uint32_t ret = b->ops[n_body - 1];
    uint32_t parent = m->ops[op].parent_block, at = sp_op_index_in_block(m, op);
    uint32_t *moved = cm_calloc(n_body, sizeof *moved);
    if (moved == NULL) {
        return CM_ENOMEM;
    }
    memcpy(moved, b->ops, sizeof *moved * n_body);
    for (uint32_t i = 0; i + 1 < n_body; i++) {
        m->ops[moved[i]].parent_block = SP_NONE;
    }
    b->ops[0] = ret;
    b->n_ops = 1;
    cm_status st = CM_OK;
    for (uint32_t i = 0; i + 1 < n_body && st == CM_OK; i++) {
        st = sp_block_insert_op(m, parent, at + i, moved[i]);
    }
    cm_free(moved);
    if (st != CM_OK) {
        return st;
    }
    b = &m->blocks[bid];
    for (uint32_t i = 0; i < b->n_args; i++) {
        replace_value(c, b->first_arg + i, m->ops[op].operands[i]);
    }
    for (uint32_t i = 0; i < m->ops[op].n_results; i++) {
        replace_value(c, m->ops[op].first_result + i, m->ops[ret].operands[i]);
    }
    erase_op(c, ret);
    erase_op(c, op);
    return CM_OK;
}

static cm_status manual_computation_patterns(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    sp_op *o = &m->ops[op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return CM_OK;
    }
    uint32_t bid = o->regions[0].blocks[0];
    sp_block *b = &m->blocks[bid];
    if (o->n_operands == 0 && o->n_results == 0 && b->n_ops == 1 &&
        m->ops[b->ops[0]].kind == SP_OP_SDY_RETURN) {
        erase_op(c, op);
        return CM_OK;
    }
    if (manual_product(c, op) == 1) {
        return inline_manual(c, op, bid);
    }
    uint32_t keep = 0;
    for (uint32_t i = 0; i < b->n_args; i++) {
        keep += c->uses[b->first_arg + i] > 0;
    }
    const sp_attr *ins = attr_of(m, op, "in_shardings", SP_ATTR_SHARDING_LIST);
    if (keep == b->n_args || b->n_args != o->n_operands || ins == NULL ||
        ins->u.shardings.n != o->n_operands) {
        return CM_OK;
    }
    /* a fresh body block with the used arguments; the ops move over */
    uint32_t nb;
    cm_status st = sp_module_new_block(m, op, &nb);
    sp_sharding **sh = cm_arena_zalloc(&m->arena, sizeof *sh * (keep + 1u));
    sp_attr *na = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (st != CM_OK || sh == NULL || na == NULL) {
        return CM_ENOMEM;
    }
    uint32_t n = 0, n_args = m->blocks[bid].n_args;
    for (uint32_t i = 0; i < n_args && st == CM_OK; i++) {
        uint32_t old = m->blocks[bid].first_arg + i, nv;
        if (c->uses[old] == 0) {
            uint32_t dropped = m->ops[op].operands[i];
            if (c->uses[dropped] > 0) {
                c->uses[dropped]--;
            }
            continue;
        }
        st = sp_module_add_block_arg(m, nb, m->values[old].type, &nv);
        if (st == CM_OK) {
            st = grow_uses(c);
        }
        if (st == CM_OK) {
            replace_value(c, old, nv);
            m->ops[op].operands[n] = m->ops[op].operands[i];
            sh[n++] = ins->u.shardings.items[i];
        }
    }
    if (st != CM_OK) {
        return st;
    }
    o = &m->ops[op];
    sp_block *ob = &m->blocks[bid], *nbk = &m->blocks[nb];
    nbk->ops = ob->ops;
    nbk->n_ops = ob->n_ops;
    nbk->cap_ops = ob->cap_ops;
    nbk->label = ob->label;
    ob->ops = NULL;
    ob->n_ops = ob->cap_ops = 0;
    for (uint32_t i = 0; i < nbk->n_ops; i++) {
        m->ops[nbk->ops[i]].parent_block = nb;
    }
    o->regions[0].blocks[0] = nb;
    na->u.shardings.items = sh;
    na->u.shardings.n = n;
    o->n_operands = n;
    c->changed = true;
    return sp_op_set_attr(m, op, "in_shardings", na);
}

/* ---- dead ops ---------------------------------------------------------------------- */

static bool side_effect_free(sp_op_kind k)
{
    switch (k) {
    case SP_OP_SDY_RESHARD:
    case SP_OP_SDY_CONSTANT:
    case SP_OP_SDY_PROPAGATION_BARRIER:
    case SP_OP_RESHAPE:
    case SP_OP_TRANSPOSE:
    case SP_OP_CONSTANT:
    case SP_OP_BROADCAST_IN_DIM:
    case SP_OP_IOTA:
        return true;
    default:
        return sp_op_is_elementwise(k);
    }
}

static bool dead(const canon *c, uint32_t op)
{
    const sp_op *o = &c->m->ops[op];
    if (o->n_results == 0 || o->n_regions > 0 || !side_effect_free((sp_op_kind)o->kind)) {
        return false;
    }
    for (uint32_t r = 0; r < o->n_results; r++) {
        if (c->uses[o->first_result + r] > 0) {
            return false;
        }
    }
    return true;
}

static cm_status visit(canon *c, uint32_t op)
{
    sp_module *m = c->m;
    if (!attached(m, op)) {
        return CM_OK;
    }
    if (dead(c, op)) {
        erase_op(c, op);
        return CM_OK;
    }
    const sp_op *o = &m->ops[op];
    if (o->kind != SP_OP_SDY_MANUAL_COMPUTATION && (o->n_operands != 1 || o->n_results != 1)) {
        return CM_OK;
    }
    if (c->collectives_only &&
        (o->kind == SP_OP_SDY_RESHARD || o->kind == SP_OP_SDY_MANUAL_COMPUTATION)) {
        return CM_OK;
    }
    switch ((sp_op_kind)o->kind) {
    case SP_OP_SDY_ALL_GATHER:
        (void)noop_per_dim(c, op, "gathering_axes");
        return CM_OK;
    case SP_OP_SDY_REDUCE_SCATTER:
        (void)noop_per_dim(c, op, "reduce_scatter_axes");
        return CM_OK;
    case SP_OP_SDY_ALL_SLICE:
        return all_slice_patterns(c, op);
    case SP_OP_SDY_ALL_REDUCE:
        return all_reduce_patterns(c, op);
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
        return collective_permute_pattern(c, op);
    case SP_OP_SDY_ALL_TO_ALL:
        return all_to_all_patterns(c, op);
    case SP_OP_SDY_RESHARD:
        return reshard_patterns(c, op);
    case SP_OP_SDY_MANUAL_COMPUTATION:
        return manual_computation_patterns(c, op);
    default:
        return CM_OK;
    }
}

static cm_status canonicalize(sp_module *m, bool collectives_only, cm_error *err)
{
    canon c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.collectives_only = collectives_only;
    cm_status st = CM_OK;
    for (int sweep = 0; sweep < MAX_SWEEPS && st == CM_OK; sweep++) {
        c.changed = false;
        st = sweep_begin(&c);
        for (uint32_t i = 0; i < c.n_order && st == CM_OK; i++) {
            st = visit(&c, c.order[i]);
        }
        if (!c.changed) {
            break;
        }
    }
    cm_free(c.uses);
    cm_free(c.order);
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    return st;
}

cm_status sp_pass_canonicalize(sp_module *m, cm_error *err)
{
    return canonicalize(m, false, err);
}

cm_status sp_pass_canonicalize_collectives(sp_module *m, cm_error *err)
{
    return canonicalize(m, true, err);
}
