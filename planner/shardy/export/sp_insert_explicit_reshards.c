/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-insert-explicit-reshards (Shardy's
 * export/insert_explicit_reshards.cc; declared in sp_reshard.h). Each op's
 * tensor shardings are projected onto the factors of its sharding rule (as
 * propagation does, with sub-axes where an axis spans two factors of a
 * dimension); when they are not compatible one axis list per factor is
 * chosen and sdy.reshard / sdy.all_reduce ops are inserted around the op.
 * Without enable-full-version only unreduced axes are reconciled, except
 * for calls, ragged dots and mismatched concatenates (Shardy's
 * isOnFullVersion), and dots may be computed more sharded (processDot).
 * Uses of a rewritten result are redirected lazily: ops are visited in
 * program order and their operands are looked up in a replacement table
 * first, so no use lists are needed. New ops go before or after the visited
 * op (each block is rebuilt once); those Shardy puts right after an
 * operand's definition (data-flow edges, calls) are placed when the pass
 * ends (apply_hoists).
 * Ownership: everything created lives in the module arena; per-op scratch is
 * heap memory freed before the next op. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ax.h"
#include "sp_diag.h"
#include "sp_export_int.h"
#include "sp_ops.h"
#include "sp_reshard.h"
#include "sp_rules.h"
#include "sp_sharding_projection.h"

#define MAXAX SP_PROJ_MAX_AXES /* axes of one factor or one dimension */

/* ---- axes ------------------------------------------------------------------------ */

typedef struct axl {
    uint32_t n;
    ax a[MAXAX];
} axl;

static bool axl_eq(const axl *a, const axl *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (uint32_t i = 0; i < a->n; i++) {
        if (!ax_eq(a->a[i], b->a[i])) {
            return false;
        }
    }
    return true;
}

static int64_t axl_size(const axl *a)
{
    int64_t x = 1;
    for (uint32_t i = 0; i < a->n; i++) {
        if (!cm_mul_i64(x, a->a[i].size, &x)) {
            return INT64_MAX;
        }
    }
    return x;
}

/* Is out a prefix of in (the last atom of out may be a major part of in's
 * atom at that place)? *strict: and not equal. */
static bool axl_is_prefix(const axl *out, const axl *in, bool *strict)
{
    *strict = false;
    if (out->n > in->n) {
        return false;
    }
    for (uint32_t k = 0; k + 1 < out->n; k++) {
        if (!ax_eq(out->a[k], in->a[k])) {
            return false;
        }
    }
    if (out->n > 0 && !ax_prefix(out->a[out->n - 1], in->a[out->n - 1])) {
        return false;
    }
    *strict = out->n < in->n || (out->n > 0 && !ax_eq(out->a[out->n - 1], in->a[out->n - 1]));
    return true;
}

/* Appends b's atoms to a; false when a is full. */
static bool axl_cat(axl *a, const axl *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        if (a->n == MAXAX) {
            return false;
        }
        a->a[a->n++] = b->a[i];
    }
    return true;
}

/* Appends a, merging it into the previous element when they are adjacent
 * sub-axes of one axis. False when full. */
static bool axl_merge(axl *l, ax a)
{
    if (l->n > 0) {
        ax *p = &l->a[l->n - 1];
        if (p->axis == a.axis && p->pre * p->size == a.pre) {
            p->size *= a.size;
            return true;
        }
    }
    if (l->n == MAXAX) {
        return false;
    }
    l->a[l->n++] = a;
    return true;
}

/* Every axis of mesh has a positive size (the axis algebra divides by
 * them; a bad mesh leaves its ops alone). */
static bool mesh_ok(const sp_mesh *mesh)
{
    for (uint32_t i = 0; mesh != NULL && i < mesh->n_axes; i++) {
        if (mesh->axes[i].size < 1) {
            return false;
        }
    }
    return mesh != NULL;
}

static sp_axis_ref ax_to_ref(const sp_mesh *mesh, ax a)
{
    const sp_mesh_axis *ma = &mesh->axes[a.axis];
    sp_axis_ref r;
    r.name = ma->name;
    if (a.pre == 1 && a.size == ma->size) {
        r.pre_size = 0;
        r.size = ma->size;
    } else {
        r.pre_size = a.pre;
        r.size = a.size;
    }
    return r;
}

/* The merged axes of dimension d of s (NULL: none). False on an unknown axis
 * or too many axes. */
static bool dim_axl(const sp_mesh *mesh, const sp_sharding *s, uint32_t d, axl *out)
{
    out->n = 0;
    if (s == NULL || d >= s->rank) {
        return true;
    }
    for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
        ax a;
        if (!ax_from_ref(mesh, &s->dims[d].axes[i], &a) || !axl_merge(out, a)) {
            return false;
        }
    }
    return true;
}

/* Do a and b (either may be NULL, meaning replicated) shard every one of the
 * rank dimensions on the same axes? Open/closed, priorities and replicated
 * axes are ignored. */
static bool same_dim_axes(const sp_mesh *mesh, const sp_sharding *a, const sp_sharding *b,
                          uint32_t rank)
{
    for (uint32_t d = 0; d < rank; d++) {
        axl x, y;
        if (!dim_axl(mesh, a, d, &x) || !dim_axl(mesh, b, d, &y) || !axl_eq(&x, &y)) {
            return false;
        }
    }
    return true;
}

/* ---- the value shardings the pass sees ---------------------------------------------- */

/* A sharding on mesh_name with every dimension closed and unsharded. */
static sp_sharding *replicated(sp_module *m, const char *mesh_name, uint32_t rank)
{
    sp_sharding *s = sp_sharding_open(&m->arena, mesh_name, rank);
    if (s != NULL) {
        for (uint32_t d = 0; d < rank; d++) {
            s->dims[d].is_closed = true;
        }
    }
    return s;
}

/* ---- per-op state ----------------------------------------------------------------- */

typedef struct fsh {
    bool present; /* the tensor has this factor */
    bool closed;  /* its dimension is closed (or the tensor has no sharding) */
    axl axes;
    axl over; /* the rest of its dimension's axes when they overflow it */
} fsh;

typedef struct tinfo {
    uint32_t value;               /* operand value (after replacement) or result */
    const sp_tensor_mapping *map; /* the rule's mapping of this tensor */
    uint32_t rank;
    const int64_t *dims;
    sp_sharding *cur;      /* NULL: replicated (the module's, shared: never written) */
    int64_t size;          /* elements */
    const char *mesh_name; /* of cur */
    bool other;            /* cur is sharded on a mesh whose device order differs from the op's */
} tinfo;

typedef struct cand {
    uint32_t f;
    int64_t total; /* summed sizes of the tensors whose axes of f extend these */
    int64_t grow;  /* what the axes add to the factor's current assignment */
    axl axes;
} cand;

typedef struct pass {
    sp_module *m;
    uint32_t n_ops0; /* ops created by the pass have larger ids */
    uint32_t n_values0;
    uint32_t *repl; /* n_values0 entries: replacement of a value, or SP_NONE */
    uint32_t at;    /* index of the visited op in its block; reshards before it bump it */
    sp_rule_opts ropts;
    bool full;           /* enable-full-version */
    bool op_full;        /* the full version applies to the visited op (on_full_version) */
    bool oom_hit;        /* an allocation failed where no status could be returned */
    sp_sharding **local; /* n_values0 entries: a manual body argument's local sharding */
    cm_error *err;
    sp_diags *diags; /* may be NULL */
    /* ops made while visiting one op go before or after it; the block is
     * rebuilt once at its end (inserting one by one would be quadratic) */
    struct oplist {
        uint32_t *v;
        uint32_t n, cap;
    } before, after;
    /* ops that go right after a value's definition (Shardy's
     * insertAfterOperand), placed when the pass ends */
    struct hoist {
        uint32_t key;   /* the defining op, or the block whose argument it is */
        uint32_t chain; /* one per resharded operand: later chains go first */
        uint32_t seq;   /* order within the chain */
        uint32_t op;
        bool at_start; /* key is a block */
    } * hoists;
    uint32_t n_hoists, cap_hoists;
    bool hoisting;        /* defer_op records into hoists */
    uint32_t hoist_value; /* the value the current chain follows */
    uint32_t n_chains;
    struct fsh *row_buf; /* reused factor rows (project() initialises them) */
    size_t row_cap;
    sp_factor_axes *proj_buf; /* one tensor's projection (proj_cap factors) */
    size_t proj_cap;
} pass;

static cm_status oplist_push(struct oplist *l, uint32_t op)
{
    if (CM_GROW_U32(l->v, l->cap, l->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    l->v[l->n++] = op;
    return CM_OK;
}

/* Queues a new op for the block being walked: before the visited op when
 * index is at or before its position, after it otherwise. */
static cm_status defer_op(pass *g, uint32_t index, uint32_t op)
{
    if (g->hoisting) {
        if (CM_GROW_U32(g->hoists, g->cap_hoists, g->n_hoists + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        const sp_value *val = &g->m->values[g->hoist_value];
        struct hoist *h = &g->hoists[g->n_hoists];
        h->at_start = val->def == SP_NONE;
        h->key = h->at_start ? val->block : val->def;
        h->chain = g->n_chains;
        h->seq = g->n_hoists++;
        h->op = op;
        return CM_OK;
    }
    return oplist_push(index <= g->at ? &g->before : &g->after, op);
}

typedef struct opctx {
    pass *g;
    uint32_t op;
    const sp_rule *r;
    const sp_mesh *mesh;
    const char *mesh_name;
    uint32_t nt; /* operands then results */
    uint32_t nf;
    tinfo *t;    /* nt */
    fsh *row;    /* nt * nf */
    axl *common; /* nf */
    cand *cands;
    uint32_t n_cands, cap_cands;
} opctx;

static fsh *row_of(const opctx *c, uint32_t t)
{
    return &c->row[(size_t)t * c->nf];
}

static cm_status oom(pass *g)
{
    return cm_error_oom(g->err);
}

/* ---- the shardings the pass sees ------------------------------------------------ */

static bool is_manual_axis(const sp_attr *manual, const char *name)
{
    if (manual == NULL || manual->kind != SP_ATTR_AXIS_LIST) {
        return false;
    }
    for (uint32_t i = 0; i < manual->u.axes.n; i++) {
        if (strcmp(manual->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* Copies the refs of src[0..n) that are not (sub-axes of) manual axes into a
 * new arena array; *n_out their number. False when out of memory. */
static bool drop_manual(sp_module *m, const sp_axis_ref *src, uint32_t n, const sp_attr *manual,
                        sp_axis_ref **out, uint32_t *n_out)
{
    *out = cm_arena_alloc(&m->arena, sizeof(sp_axis_ref) * (n + 1u));
    if (*out == NULL) {
        return false;
    }
    *n_out = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_manual_axis(manual, src[i].name)) {
            (*out)[(*n_out)++] = src[i];
        }
    }
    return true;
}

/* s as the body of a manual computation with those manual axes sees it: the
 * manual axes dropped from every dimension and from the replicated and
 * unreduced axes (Shardy's global-to-local sharding). NULL when out of
 * memory. */
static sp_sharding *localize(sp_module *m, const sp_sharding *s, const sp_attr *manual)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    sp_dim_sharding *dims = cm_arena_alloc(&m->arena, sizeof *dims * (s->rank + 1u));
    if (dims == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        dims[d] = s->dims[d];
        if (!drop_manual(m, s->dims[d].axes, s->dims[d].n_axes, manual, &dims[d].axes,
                         &dims[d].n_axes)) {
            return NULL;
        }
    }
    c->dims = dims;
    if (!drop_manual(m, s->replicated, s->n_replicated, manual, &c->replicated, &c->n_replicated) ||
        !drop_manual(m, s->unreduced, s->n_unreduced, manual, &c->unreduced, &c->n_unreduced)) {
        return NULL;
    }
    return c;
}

/* Entry i of the sharding-list attribute key of a manual computation, as its
 * body sees it (NULL: none, or out of memory, which sets g->oom_hit). */
static sp_sharding *manual_local(pass *g, uint32_t op, const char *key, uint32_t i)
{
    sp_module *m = g->m;
    const sp_attr *list = sp_op_attr(m, op, key);
    if (list == NULL || list->kind != SP_ATTR_SHARDING_LIST || i >= list->u.shardings.n ||
        list->u.shardings.items[i] == NULL) {
        return NULL;
    }
    sp_sharding *l = localize(m, list->u.shardings.items[i], sp_op_attr(m, op, "manual_axes"));
    if (l == NULL) {
        g->oom_hit = true;
    }
    return l;
}

/* The sharding of v as this pass reads it: sp_value_sharding_partitioned,
 * except that an argument of a manual computation's body is sharded as its
 * in_shardings entry without the manual axes. */
static sp_sharding *vsh(pass *g, uint32_t v)
{
    sp_module *m = g->m;
    const sp_value *val = &m->values[v];
    if (val->def == SP_NONE && v < g->n_values0) {
        uint32_t owner = m->blocks[val->block].parent_op;
        if (owner != SP_NONE && m->ops[owner].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            if (g->local[v] == NULL) {
                g->local[v] = manual_local(g, owner, "in_shardings", val->index);
            }
            return g->local[v];
        }
    }
    return sp_value_sharding_partitioned(m, v);
}

/* ---- projection ------------------------------------------------------------------ */

/* Projects tensor t's dimension shardings onto its factors, splitting an
 * axis into sub-axes where it spans two factors of a dimension; axes that
 * do not divide a non-minor factor overflow it (sp_sharding_project). False
 * when the sharding cannot be handled (unknown axis, too many axes). */
static bool project_sharding(const opctx *c, const tinfo *t, const sp_sharding *s, fsh *row)
{
    sp_factor_axes *proj = c->g->proj_buf;
    if (!sp_sharding_project(c->r, t->map, s, c->mesh, proj, NULL, NULL)) {
        return false;
    }
    for (uint32_t f = 0; f < c->nf; f++) {
        const sp_factor_axes *x = &proj[f];
        fsh *y = &row[f];
        y->present = x->present;
        y->closed = s == NULL || x->closed; /* Shardy's closedIfMissing */
        y->axes.n = 0;
        y->over.n = 0;
        /* as Shardy, the minor-most factor's and the overflow's adjacent
         * sub-axes are merged */
        for (uint32_t i = 0; i < x->n; i++) {
            if (x->minor_most ? !axl_merge(&y->axes, x->axes[i]) : y->axes.n == MAXAX) {
                return false;
            }
            if (!x->minor_most) {
                y->axes.a[y->axes.n++] = x->axes[i];
            }
        }
        for (uint32_t i = 0; i < x->n_over; i++) {
            if (!axl_merge(&y->over, x->over[i])) {
                return false;
            }
        }
    }
    /* as Shardy's projection: after a factor with overflow axes the next
     * factor of the dimension is closed and empty, and the later ones are
     * not in the tensor's projection at all */
    for (uint32_t d = 0; d < t->map->rank; d++) {
        const sp_dim_mapping *dm = &t->map->dims[d];
        for (uint32_t k = 0; k + 1 < dm->n_factors; k++) {
            if (row[dm->factors[k]].over.n == 0) {
                continue;
            }
            row[dm->factors[k + 1]].closed = true;
            for (uint32_t j = k + 2; j < dm->n_factors; j++) {
                row[dm->factors[j]].present = false;
            }
            break;
        }
    }
    return true;
}

static bool project(const opctx *c, const tinfo *t, fsh *row)
{
    return project_sharding(c, t, t->cur, row);
}

/* ---- choosing the axes of each factor ------------------------------------------------ */

/* Every tensor that has factor f shards it the same way, need-replication
 * factors are unsharded and no axis shards two factors: fills common. */
static bool compatible(const opctx *c)
{
    for (uint32_t f = 0; f < c->nf; f++) {
        bool seen = false;
        for (uint32_t t = 0; t < c->nt; t++) {
            const fsh *x = &row_of(c, t)[f];
            if (!x->present) {
                continue;
            }
            if (c->r->factor_kind[f] == SP_FACTOR_NEED_REPLICATION && x->axes.n > 0) {
                return false;
            }
            if (!seen) {
                c->common[f] = x->axes;
                seen = true;
            } else if (!axl_eq(&c->common[f], &x->axes)) {
                return false;
            }
        }
        if (!seen) {
            c->common[f].n = 0;
        }
    }
    for (uint32_t f = 0; f < c->nf; f++) {
        for (uint32_t g = f + 1; g < c->nf; g++) {
            for (uint32_t i = 0; i < c->common[f].n; i++) {
                for (uint32_t j = 0; j < c->common[g].n; j++) {
                    if (ax_overlap(c->common[f].a[i], c->common[g].a[j])) {
                        return false;
                    }
                }
            }
        }
    }
    return true;
}

static int precedence(const opctx *c, uint32_t f)
{
    switch (c->r->factor_kind[f]) {
    case SP_FACTOR_PASS_THROUGH:
        return 3;
    case SP_FACTOR_REDUCTION:
        return 2;
    case SP_FACTOR_PERMUTATION:
        return 1;
    default: /* need replication */
        return 0;
    }
}

/* Is factor f in the mapping of every tensor of rank > 0 (Shardy's
 * isFactorInAllNonScalarTensors)? */
static bool in_all_tensors(const opctx *c, uint32_t f)
{
    for (uint32_t t = 0; t < c->nt; t++) {
        const sp_tensor_mapping *tm = c->t[t].map;
        bool has = tm->rank == 0;
        for (uint32_t d = 0; d < tm->rank && !has; d++) {
            for (uint32_t k = 0; k < tm->dims[d].n_factors && !has; k++) {
                has = tm->dims[d].factors[k] == f;
            }
        }
        if (!has) {
            return false;
        }
    }
    return true;
}

/* Shardy's distributeAxisRefsToBatchingFactors: the axes chosen for a factor
 * that needs replication are taken off it and, when that factor is in every
 * non-scalar tensor, appended (whole axes, while they divide the room left)
 * to the batching factors: pass-through factors in every non-scalar tensor,
 * in factor order. */
static void distribute_need_replication(opctx *c)
{
    for (uint32_t nr = 0; nr < c->nf; nr++) {
        if (c->r->factor_kind[nr] != SP_FACTOR_NEED_REPLICATION) {
            continue;
        }
        axl give = c->common[nr];
        c->common[nr].n = 0;
        if (give.n == 0 || !in_all_tensors(c, nr)) {
            continue;
        }
        uint32_t next = 0;
        for (uint32_t f = 0; f < c->nf && next < give.n; f++) {
            if (c->r->factor_kind[f] != SP_FACTOR_PASS_THROUGH || !in_all_tensors(c, f)) {
                continue;
            }
            int64_t size = c->r->factor_sizes[f], have = axl_size(&c->common[f]);
            if (size == 0 || have <= 0 || size % have != 0) {
                continue;
            }
            int64_t room = size / have;
            while (next < give.n && give.a[next].size > 0 && room % give.a[next].size == 0) {
                if (!axl_merge(&c->common[f], give.a[next])) {
                    break;
                }
                room /= give.a[next].size;
                next++;
            }
        }
    }
}

/* Shardy's AxisRefAttr order: by axis name, then a full axis before the
 * sub-axes that do not start it, sub-axes by (pre-size, size). */
static int ax_order(const sp_mesh *mesh, ax a, ax b)
{
    int k = strcmp(mesh->axes[a.axis].name, mesh->axes[b.axis].name);
    if (k != 0) {
        return k < 0 ? -1 : 1;
    }
    bool fa = a.pre == 1 && a.size == mesh->axes[a.axis].size;
    bool fb = b.pre == 1 && b.size == mesh->axes[b.axis].size;
    if (fa && fb) {
        return 0;
    }
    if (fa) {
        return b.pre > 1 ? -1 : 1;
    }
    if (fb) {
        return a.pre == 1 ? -1 : 1;
    }
    if (a.pre != b.pre) {
        return a.pre < b.pre ? -1 : 1;
    }
    return a.size < b.size ? -1 : a.size > b.size ? 1 : 0;
}

/* a beats b: Shardy's candidate order, by total source size, factor type
 * precedence, sharding size, then (factor index, axes) with shorter axis
 * lists first. */
static bool cand_better(const opctx *c, const cand *a, const cand *b)
{
    if (a->total != b->total) {
        return a->total > b->total;
    }
    int pa = precedence(c, a->f), pb = precedence(c, b->f);
    if (pa != pb) {
        return pa > pb;
    }
    if (a->grow != b->grow) {
        return a->grow > b->grow;
    }
    if (a->f != b->f) {
        return a->f > b->f;
    }
    if (a->axes.n != b->axes.n) {
        return a->axes.n > b->axes.n;
    }
    for (uint32_t i = 0; i < a->axes.n; i++) {
        int k = ax_order(c->mesh, a->axes.a[i], b->axes.a[i]);
        if (k != 0) {
            return k > 0;
        }
    }
    return false;
}

static bool cand_add(opctx *c, uint32_t f, const axl *axes)
{
    for (uint32_t i = 0; i < c->n_cands; i++) {
        if (c->cands[i].f == f && axl_eq(&c->cands[i].axes, axes)) {
            return true;
        }
    }
    if (CM_GROW_U32(c->cands, c->cap_cands, c->n_cands + 1, NULL) != CM_OK) {
        return false;
    }
    cand *k = &c->cands[c->n_cands++];
    k->f = f;
    k->axes = *axes;
    k->total = 0;
    k->grow = axl_size(axes);
    return true;
}

/* The longest prefix of axes that can coexist with every axis of used
 * (Shardy's truncateAxesByRemovingOverlaps). */
static void trim_against(axl *axes, const axl *used)
{
    for (uint32_t i = 0; i < axes->n; i++) {
        int64_t before = axes->a[i].size;
        for (uint32_t j = 0; j < used->n; j++) {
            if (!ax_prefix_without(&axes->a[i], used->a[j])) {
                axes->n = i;
                return;
            }
        }
        if (axes->a[i].size != before) {
            axes->n = i + 1;
            return;
        }
    }
}

/* Is a a strict prefix of b (Shardy's AxisListRef::strictPrefixOf)? */
static bool axl_strict_prefix(const axl *a, const axl *b)
{
    bool strict;
    return axl_is_prefix(a, b, &strict) && strict;
}

/* Shardy's findCommonAxesHeuristic for conflicting shardings. Candidates are
 * the factor-axes pairs some tensor holds and their prefixes (dropping whole
 * axes); a candidate scores the summed sizes of the tensors whose axes for
 * that factor it equals or strictly prefixes. A factor that follows another
 * in some dimension waits until that one is fully sharded. The best valid
 * candidate is taken; candidates of its factor that extend it stay (scored
 * by what they add), the others of its factor go; candidates of other
 * factors are cut to what does not overlap it, and go when nothing beyond
 * their factor's assignment is left. Then the axes of factors that need
 * replication move to the batching factors. dep is nf * nf scratch. */
static bool choose_common(opctx *c)
{
    uint32_t nf = c->nf;
    uint8_t *dep = cm_calloc((size_t)nf * nf + 1u, 1);
    uint8_t *has_dep = cm_calloc((size_t)nf + 1u, 1);
    if (dep == NULL || has_dep == NULL) {
        cm_free(dep);
        cm_free(has_dep);
        return false;
    }
    /* dep[f * nf + g]: f waits for g (g is right before f in a dimension) */
    for (uint32_t t = 0; t < c->nt; t++) {
        const sp_tensor_mapping *tm = c->t[t].map;
        for (uint32_t d = 0; d < tm->rank; d++) {
            for (uint32_t k = 1; k < tm->dims[d].n_factors; k++) {
                uint32_t f = tm->dims[d].factors[k], g = tm->dims[d].factors[k - 1];
                if (f < nf && g < nf) {
                    dep[(size_t)f * nf + g] = 1;
                    has_dep[f] = 1;
                }
            }
        }
    }
    c->n_cands = 0;
    bool ok = true;
    for (uint32_t f = 0; f < nf; f++) {
        c->common[f].n = 0;
    }
    for (uint32_t t = 0; t < c->nt && ok; t++) {
        for (uint32_t f = 0; f < nf && ok; f++) {
            const fsh *x = &row_of(c, t)[f];
            if (!x->present) {
                continue;
            }
            axl p = x->axes;
            while (p.n > 0 && ok) {
                ok = cand_add(c, f, &p);
                p.n--;
            }
        }
    }
    for (uint32_t i = 0; i < c->n_cands && ok; i++) {
        cand *k = &c->cands[i];
        for (uint32_t t = 0; t < c->nt; t++) {
            const fsh *x = &row_of(c, t)[k->f];
            if (x->present &&
                (axl_eq(&k->axes, &x->axes) || axl_strict_prefix(&k->axes, &x->axes))) {
                k->total =
                    k->total <= INT64_MAX - c->t[t].size ? k->total + c->t[t].size : INT64_MAX;
            }
        }
    }
    while (ok && c->n_cands > 0) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < c->n_cands; i++) {
            uint32_t f = c->cands[i].f;
            bool valid = true;
            for (uint32_t g = 0; has_dep[f] && g < nf && valid; g++) {
                valid = dep[(size_t)f * nf + g] == 0;
            }
            if (valid && (best == UINT32_MAX || cand_better(c, &c->cands[i], &c->cands[best]))) {
                best = i;
            }
        }
        if (best == UINT32_MAX) {
            break; /* only candidates still waiting on other factors */
        }
        cand b = c->cands[best];
        c->common[b.f] = b.axes;
        if (axl_size(&b.axes) == c->r->factor_sizes[b.f]) {
            for (uint32_t f = 0; f < nf; f++) {
                dep[(size_t)f * nf + b.f] = 0;
            }
        }
        uint32_t i = 0;
        while (i < c->n_cands) {
            cand *k = &c->cands[i];
            bool drop = false;
            if (k->f == b.f) {
                if (!axl_strict_prefix(&b.axes, &k->axes)) {
                    drop = true;
                } else {
                    k->grow = axl_size(&k->axes) / axl_size(&b.axes);
                }
            } else {
                axl before = k->axes;
                trim_against(&k->axes, &b.axes);
                if (!axl_eq(&before, &k->axes)) {
                    const axl *have = &c->common[k->f];
                    if (axl_eq(&k->axes, have)) {
                        drop = true;
                    } else {
                        int64_t hs = axl_size(have);
                        k->grow = hs > 0 ? axl_size(&k->axes) / hs : 0;
                    }
                } else {
                    k->grow = axl_size(&k->axes);
                }
            }
            if (drop) {
                c->cands[i] = c->cands[--c->n_cands];
            } else {
                i++;
            }
        }
    }
    cm_free(dep);
    cm_free(has_dep);
    if (ok) {
        distribute_need_replication(c);
    }
    return ok;
}

/* Shardy's findCommonAxesOnUnaryOperation: an op with exactly two
 * non-scalar tensors, no factor that needs replication and no dimension of
 * several factors is resharded on one side only. The preferred tensor keeps
 * its factor shardings: the one without sharded permutation factors, then
 * the larger, then the more sharded, the first on a tie; factors only the
 * other tensor has keep its axes minus those the preferred one uses.
 * Returns false when the op is not of that shape. */
static bool choose_unary(opctx *c)
{
    uint32_t idx[2], n = 0;
    for (uint32_t t = 0; t < c->nt; t++) {
        if (c->t[t].rank > 0) {
            if (n == 2) {
                return false;
            }
            idx[n++] = t;
        }
    }
    if (n != 2) {
        return false;
    }
    for (uint32_t f = 0; f < c->nf; f++) {
        if (c->r->factor_kind[f] == SP_FACTOR_NEED_REPLICATION) {
            return false;
        }
    }
    for (int k = 0; k < 2; k++) {
        const sp_tensor_mapping *tm = c->t[idx[k]].map;
        for (uint32_t d = 0; d < tm->rank; d++) {
            if (tm->dims[d].n_factors > 1) {
                return false;
            }
        }
    }
    bool no_perm[2];
    int64_t shards[2];
    for (int k = 0; k < 2; k++) {
        const fsh *row = row_of(c, idx[k]);
        no_perm[k] = true;
        shards[k] = 1;
        for (uint32_t f = 0; f < c->nf; f++) {
            if (!row[f].present) {
                continue;
            }
            if (c->r->factor_kind[f] == SP_FACTOR_PERMUTATION && row[f].axes.n > 0) {
                no_perm[k] = false;
            }
            if (!cm_mul_i64(shards[k], axl_size(&row[f].axes), &shards[k])) {
                shards[k] = INT64_MAX;
            }
        }
    }
    bool first = no_perm[0] != no_perm[1]                 ? no_perm[0]
                 : c->t[idx[0]].size != c->t[idx[1]].size ? c->t[idx[0]].size > c->t[idx[1]].size
                                                          : shards[0] >= shards[1];
    uint32_t pick = first ? idx[0] : idx[1], other = first ? idx[1] : idx[0];
    const fsh *row = row_of(c, pick), *orow = row_of(c, other);
    axl used = {0, {{0, 0, 0}}};
    for (uint32_t f = 0; f < c->nf; f++) {
        c->common[f] = row[f].present ? row[f].axes : (axl){0, {{0, 0, 0}}};
        for (uint32_t k = 0; row[f].present && k < row[f].axes.n && used.n < MAXAX; k++) {
            used.a[used.n++] = row[f].axes.a[k];
        }
    }
    for (uint32_t f = 0; f < c->nf; f++) {
        if (!row[f].present && orow[f].present) {
            c->common[f] = orow[f].axes;
            trim_against(&c->common[f], &used);
        }
    }
    return true;
}

/* ---- building shardings and ops -------------------------------------------------------- */

/* Shardy's createTensorShardingAttr: the sharding of tensor t when its
 * factors are sharded as row says; each dimension takes its factors' axes
 * major to minor up to the first one not fully sharded, is closed when one
 * of its factors is (a dimension without factors is closed), and the
 * tensor's replicated and unreduced axes are kept. NULL when out of memory. */
static sp_sharding *sharding_from_row(opctx *c, const tinfo *t, const fsh *row)
{
    sp_module *m = c->g->m;
    sp_sharding *s = sp_sharding_open(&m->arena, c->mesh_name, t->rank);
    if (s == NULL) {
        return NULL;
    }
    if (t->cur != NULL) {
        s->replicated = t->cur->replicated;
        s->n_replicated = t->cur->n_replicated;
        s->unreduced = t->cur->unreduced;
        s->n_unreduced = t->cur->n_unreduced;
        s->reduction = t->cur->reduction;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        const sp_dim_mapping *dm = &t->map->dims[d];
        axl out = {0, {{0, 0, 0}}};
        bool closed = dm->n_factors == 0;
        for (uint32_t k = 0; k < dm->n_factors; k++) {
            uint32_t f = dm->factors[k];
            const axl *a = &row[f].axes;
            closed = closed || row[f].closed;
            for (uint32_t i = 0; i < a->n; i++) {
                if (!axl_merge(&out, a->a[i])) {
                    break;
                }
            }
            if (row[f].over.n > 0) { /* the dim's other axes, then no more factors */
                for (uint32_t i = 0; i < row[f].over.n; i++) {
                    if (!axl_merge(&out, row[f].over.a[i])) {
                        break;
                    }
                }
                break;
            }
            if (!row[f].present || axl_size(a) < c->r->factor_sizes[f]) {
                break;
            }
        }
        sp_dim_sharding *ds = &s->dims[d];
        ds->is_closed = closed;
        ds->priority = -1;
        ds->n_axes = out.n;
        if (out.n > 0) {
            ds->axes = cm_arena_alloc(&m->arena, sizeof(sp_axis_ref) * out.n);
            if (ds->axes == NULL) {
                return NULL;
            }
            for (uint32_t i = 0; i < out.n; i++) {
                ds->axes[i] = ax_to_ref(c->mesh, out.a[i]);
            }
        }
    }
    return s;
}

/* The sharding of tensor t when its factors are sharded as c->common
 * (sharding_from_row on t's projection with those axes and no overflow). */
static sp_sharding *sharding_from_factors(opctx *c, const tinfo *t)
{
    fsh *row = cm_alloc(sizeof(fsh) * ((size_t)c->nf + 1u));
    if (row == NULL) {
        return NULL;
    }
    const fsh *have = row_of(c, (uint32_t)(t - c->t));
    for (uint32_t f = 0; f < c->nf; f++) {
        row[f] = have[f];
        row[f].axes = c->common[f];
        row[f].over.n = 0;
    }
    sp_sharding *s = sharding_from_row(c, t, row);
    cm_free(row);
    return s;
}

/* Creates a detached one-operand sdy op `name` on value v (same type). */
static cm_status new_sdy_op(pass *g, const char *name, uint32_t v, uint32_t *op_out)
{
    uint32_t ty = g->m->values[v].type;
    return sp_module_new_op(g->m, SP_NONE, name, &v, 1, &ty, 1, op_out);
}

static cm_status set_sharding_attr(sp_module *m, uint32_t op, const char *key, sp_sharding *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    a->u.sharding = s;
    return sp_op_set_attr(m, op, key, a);
}

/* Inserts `sdy.reshard v <s>` into block at index; *v_out is its result. */
static cm_status insert_reshard(pass *g, uint32_t block, uint32_t index, uint32_t v, sp_sharding *s,
                                uint32_t *v_out)
{
    uint32_t op;
    (void)block; /* the op goes into the block being walked (defer_op) */
    if (new_sdy_op(g, "sdy.reshard", v, &op) != CM_OK ||
        set_sharding_attr(g->m, op, "sharding", s) != CM_OK || defer_op(g, index, op) != CM_OK) {
        return oom(g);
    }
    *v_out = g->m->ops[op].first_result;
    return CM_OK;
}

/* Inserts `sdy.all_reduce {axes} v out_sharding=<s>` into block at index. */
static cm_status insert_all_reduce(pass *g, uint32_t block, uint32_t index, uint32_t v,
                                   const sp_mesh *mesh, const axl *axes, sp_sharding *s,
                                   sp_reduction_kind kind, uint32_t *v_out)
{
    sp_module *m = g->m;
    uint32_t op;
    (void)block; /* the op goes into the block being walked (defer_op) */
    sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    if (a == NULL || new_sdy_op(g, "sdy.all_reduce", v, &op) != CM_OK) {
        return oom(g);
    }
    a->u.axes.n = axes->n;
    a->u.axes.axes = cm_arena_alloc(&m->arena, sizeof(sp_axis_ref) * (axes->n + 1u));
    if (a->u.axes.axes == NULL) {
        return oom(g);
    }
    for (uint32_t i = 0; i < axes->n; i++) {
        a->u.axes.axes[i] = ax_to_ref(mesh, axes->a[i]);
    }
    if (kind != SP_REDUCTION_SUM) { /* printed `sdy.all_reduce max {...}` */
        sp_attr *e = sp_attr_new(m, SP_ATTR_ENUM);
        if (e == NULL) {
            return oom(g);
        }
        e->u.enm.dialect = "sdy";
        e->u.enm.kind = "reduction_op";
        e->u.enm.value = kind == SP_REDUCTION_MAX ? "max" : "min";
        if (sp_op_set_attr(m, op, "reduction_op", e) != CM_OK) {
            return oom(g);
        }
    }
    if (sp_op_set_attr(m, op, "reduction_axes", a) != CM_OK ||
        set_sharding_attr(m, op, "out_sharding", s) != CM_OK || defer_op(g, index, op) != CM_OK) {
        return oom(g);
    }
    *v_out = m->ops[op].first_result;
    return CM_OK;
}

static int ax_cmp(const void *pa, const void *pb)
{
    const ax *a = pa, *b = pb;
    if (a->axis != b->axis) {
        return a->axis < b->axis ? -1 : 1;
    }
    return a->pre < b->pre ? -1 : a->pre > b->pre ? 1 : 0;
}

/* The axes of the sharded reduction factors, sorted by the mesh and merged. */
static void reduction_axes(const opctx *c, axl *out)
{
    axl all = {0, {{0, 0, 0}}};
    for (uint32_t f = 0; f < c->nf; f++) {
        if (c->r->factor_kind[f] != SP_FACTOR_REDUCTION) {
            continue;
        }
        for (uint32_t i = 0; i < c->common[f].n && all.n < MAXAX; i++) {
            all.a[all.n++] = c->common[f].a[i];
        }
    }
    qsort(all.a, all.n, sizeof(ax), ax_cmp);
    out->n = 0;
    for (uint32_t i = 0; i < all.n; i++) {
        (void)axl_merge(out, all.a[i]);
    }
}

/* ---- unreduced axes (Shardy's insertAllReduceIfUnreducedToReplicated) ---------- */

/* Appends to out the parts of atom a that no atom of cut covers (a piece of a
 * sub-axis before or after each covered span). False when out is full. */
static bool ax_minus(ax a, const axl *cut, axl *out)
{
    axl work = {1, {a}};
    for (uint32_t k = 0; k < cut->n; k++) {
        axl next = {0, {{0, 0, 0}}};
        ax b = cut->a[k];
        for (uint32_t i = 0; i < work.n; i++) {
            ax p = work.a[i];
            if (!ax_overlap(p, b)) {
                next.a[next.n++] = p;
                continue;
            }
            int64_t p_end = p.pre * p.size, b_end = b.pre * b.size;
            if (b.pre > p.pre && b.pre % p.pre == 0 && next.n < MAXAX) {
                ax left = {p.axis, p.pre, b.pre / p.pre};
                next.a[next.n++] = left;
            }
            if (p_end > b_end && p_end % b_end == 0 && next.n < MAXAX) {
                ax right = {p.axis, b_end, p_end / b_end};
                next.a[next.n++] = right;
            }
        }
        work = next;
    }
    for (uint32_t i = 0; i < work.n; i++) {
        if (out->n == MAXAX) {
            return false;
        }
        out->a[out->n++] = work.a[i];
    }
    return true;
}

/* Sorts l by the mesh and merges adjacent sub-axes (Shardy's
 * sortAndMergeAxes). */
static void axl_sort_merge(axl *l)
{
    axl all = *l;
    qsort(all.a, all.n, sizeof(ax), ax_cmp);
    l->n = 0;
    for (uint32_t i = 0; i < all.n; i++) {
        (void)axl_merge(l, all.a[i]);
    }
}

/* src minus cut, sorted and merged. */
static void axl_diff(const axl *src, const axl *cut, axl *out)
{
    out->n = 0;
    for (uint32_t i = 0; i < src->n; i++) {
        if (!ax_minus(src->a[i], cut, out)) {
            break;
        }
    }
    axl_sort_merge(out);
}

/* The unreduced axes of s as atoms of mesh (none for NULL). False on an
 * unknown axis or too many. */
static bool unreduced_axl(const sp_mesh *mesh, const sp_sharding *s, axl *out)
{
    out->n = 0;
    if (s == NULL) {
        return true;
    }
    for (uint32_t i = 0; i < s->n_unreduced; i++) {
        if (out->n == MAXAX || !ax_from_ref(mesh, &s->unreduced[i], &out->a[out->n])) {
            return false;
        }
        out->n++;
    }
    return true;
}

/* A copy of s whose unreduced axes are un (in the module arena). */
static sp_sharding *with_unreduced(sp_module *m, const sp_sharding *s, const sp_mesh *mesh,
                                   const axl *un)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    c->n_unreduced = un->n;
    c->unreduced = cm_arena_alloc(&m->arena, sizeof(sp_axis_ref) * (un->n + 1u));
    if (c->unreduced == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < un->n; i++) {
        c->unreduced[i] = ax_to_ref(mesh, un->a[i]);
    }
    return c;
}

/* Operand i of op: when its sharding has unreduced axes that target (the
 * user's sharding, NULL: none) does not keep unreduced, all-reduces it over
 * those axes before op; the new value keeps the rest unreduced. */
static cm_status reduce_unreduced_operand(pass *g, uint32_t op, uint32_t i,
                                          const sp_sharding *target)
{
    sp_module *m = g->m;
    uint32_t v = m->ops[op].operands[i];
    const sp_sharding *have = vsh(g, v);
    if (have == NULL || have->n_unreduced == 0 || have->mesh_name == NULL) {
        return CM_OK;
    }
    const sp_mesh *mesh = sp_module_mesh(m, have->mesh_name);
    if (!mesh_ok(mesh)) {
        return CM_OK;
    }
    if (target != NULL && target->n_unreduced > 0 &&
        (target->mesh_name == NULL || strcmp(target->mesh_name, have->mesh_name) != 0)) {
        return CM_OK; /* Shardy requires one mesh here */
    }
    axl src, tgt, red, keep;
    if (!unreduced_axl(mesh, have, &src) || !unreduced_axl(mesh, target, &tgt)) {
        return CM_OK;
    }
    axl_diff(&src, &tgt, &red);
    if (red.n == 0) {
        return CM_OK;
    }
    axl_diff(&src, &red, &keep);
    sp_sharding *out = with_unreduced(m, have, mesh, &keep);
    if (out == NULL) {
        return oom(g);
    }
    uint32_t nv;
    cm_status st = insert_all_reduce(g, m->ops[op].parent_block, g->at++, v, mesh, &red, out,
                                     have->reduction, &nv);
    if (st == CM_OK) {
        m->ops[op].operands[i] = nv;
    }
    return st;
}

/* An arena axis list of l on mesh. False when out of memory. */
static bool axl_to_list(sp_module *m, const sp_mesh *mesh, const axl *l, sp_axis_list *out)
{
    out->n = l->n;
    out->axes = cm_arena_alloc(&m->arena, sizeof(sp_axis_ref) * (l->n + 1u));
    if (out->axes == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        out->axes[i] = ax_to_ref(mesh, l->a[i]);
    }
    return true;
}

/* Shardy's insertUnreducedCollectives: operand i of op goes to want, whose
 * unreduced axes add some to the operand's ("out = in + r2u + s2u"). Axes
 * that want drops from the end of a dimension the operand shards become
 * unreduced by sdy.sharded_to_unreduced; the others, replicated in the
 * operand, by sdy.replicated_to_unreduced; dimensions that cannot be reached
 * that way are resharded first. *done: the operand was replaced; *last its
 * new sharding. */
static cm_status unreduced_collectives(pass *g, uint32_t op, uint32_t i, const sp_sharding *want,
                                       bool *done, const sp_sharding **last)
{
    sp_module *m = g->m;
    *done = false;
    uint32_t v = m->ops[op].operands[i];
    const sp_sharding *in = vsh(g, v);
    if (in == NULL || want == NULL || want->n_unreduced == 0 || in->mesh_name == NULL ||
        want->mesh_name == NULL || strcmp(in->mesh_name, want->mesh_name) != 0 ||
        in->rank != want->rank) {
        return CM_OK;
    }
    const sp_mesh *mesh = sp_module_mesh(m, in->mesh_name);
    axl in_un, out_un, add, extra;
    if (!mesh_ok(mesh) || !unreduced_axl(mesh, in, &in_un) || !unreduced_axl(mesh, want, &out_un)) {
        return CM_OK;
    }
    axl_diff(&out_un, &in_un, &add);
    axl_diff(&in_un, &out_un, &extra);
    if (add.n == 0 || extra.n > 0) {
        return CM_OK; /* Shardy requires out's unreduced axes to include in's */
    }
    uint32_t rank = in->rank;
    sp_dim_sharding *tmp = cm_arena_alloc(&m->arena, sizeof *tmp * (rank + 1u));
    sp_axis_list *per_dim = cm_arena_alloc(&m->arena, sizeof *per_dim * (rank + 1u));
    if (tmp == NULL || per_dim == NULL) {
        return oom(g);
    }
    axl s2u = {0, {{0, 0, 0}}};
    bool need_reshard = false;
    for (uint32_t d = 0; d < rank; d++) {
        tmp[d] = want->dims[d];
        per_dim[d].axes = NULL;
        per_dim[d].n = 0;
        axl ia, oa;
        bool strict;
        if (!dim_axl(mesh, in, d, &ia) || !dim_axl(mesh, want, d, &oa)) {
            return CM_OK;
        }
        if (!axl_is_prefix(&oa, &ia, &strict)) {
            need_reshard = true;
            continue;
        }
        if (!strict) {
            continue;
        }
        axl diff = {0, {{0, 0, 0}}}, left;
        uint32_t from = oa.n;
        if (oa.n > 0 && !ax_eq(oa.a[oa.n - 1], ia.a[oa.n - 1])) {
            ax o = oa.a[oa.n - 1], w = ia.a[oa.n - 1];
            ax suffix = {w.axis, o.pre * o.size, (w.pre * w.size) / (o.pre * o.size)};
            diff.a[diff.n++] = suffix;
        }
        for (uint32_t k = from; k < ia.n && diff.n < MAXAX; k++) {
            diff.a[diff.n++] = ia.a[k];
        }
        axl_diff(&diff, &add, &left);
        if (left.n > 0) {
            need_reshard = true;
            continue;
        }
        if (!axl_to_list(m, mesh, &diff, &per_dim[d])) {
            return oom(g);
        }
        for (uint32_t k = 0; k < diff.n && s2u.n < MAXAX; k++) {
            s2u.a[s2u.n++] = diff.a[k];
        }
        tmp[d] = in->dims[d];
    }
    uint32_t block = m->ops[op].parent_block, cur = v;
    const sp_sharding *now = in;
    cm_status st;
    if (need_reshard) {
        sp_sharding *r = sp_sharding_clone(&m->arena, in);
        if (r == NULL) {
            return oom(g);
        }
        r->dims = tmp;
        if ((st = insert_reshard(g, block, g->at++, cur, r, &cur)) != CM_OK) {
            return st;
        }
        now = r;
    }
    axl r2u;
    axl_diff(&add, &s2u, &r2u);
    if (r2u.n > 0) {
        axl un = in_un;
        for (uint32_t k = 0; k < r2u.n && un.n < MAXAX; k++) {
            un.a[un.n++] = r2u.a[k];
        }
        axl_sort_merge(&un);
        sp_sharding *l = sp_sharding_clone(&m->arena, want);
        sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LIST);
        uint32_t nop;
        if (l == NULL || a == NULL) {
            return oom(g);
        }
        l->dims = tmp;
        sp_axis_list ul;
        if (!axl_to_list(m, mesh, &r2u, &a->u.axes) || !axl_to_list(m, mesh, &un, &ul)) {
            return oom(g);
        }
        l->unreduced = ul.axes;
        l->n_unreduced = ul.n;
        if (new_sdy_op(g, "sdy.replicated_to_unreduced", cur, &nop) != CM_OK ||
            sp_op_set_attr(m, nop, "axes", a) != CM_OK ||
            set_sharding_attr(m, nop, "out_sharding", l) != CM_OK ||
            defer_op(g, g->at++, nop) != CM_OK) {
            return oom(g);
        }
        cur = m->ops[nop].first_result;
        now = l;
    }
    if (s2u.n > 0) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LISTS);
        sp_sharding *o = sp_sharding_clone(&m->arena, want);
        uint32_t nop;
        if (a == NULL || o == NULL) {
            return oom(g);
        }
        a->u.axis_lists.items = per_dim;
        a->u.axis_lists.n = rank;
        if (new_sdy_op(g, "sdy.sharded_to_unreduced", cur, &nop) != CM_OK ||
            sp_op_set_attr(m, nop, "axes", a) != CM_OK ||
            set_sharding_attr(m, nop, "out_sharding", o) != CM_OK ||
            defer_op(g, g->at++, nop) != CM_OK) {
            return oom(g);
        }
        cur = m->ops[nop].first_result;
        now = o;
    }
    if (cur != v) {
        m->ops[op].operands[i] = cur;
        *done = true;
        *last = now;
    }
    return CM_OK;
}

/* Before an op: every operand's unreduced axes that the op's first result
 * does not keep unreduced are all-reduced (Shardy assumes the results agree). */
static cm_status reduce_unreduced_operands(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    if (m->ops[op].n_results == 0) {
        return CM_OK;
    }
    const sp_sharding *res = vsh(g, m->ops[op].first_result);
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        cm_status st = reduce_unreduced_operand(g, op, i, res);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* Reduction axes the first result keeps unreduced need no all-reduce. */
static void drop_result_unreduced(const opctx *c, axl *red)
{
    const sp_op *o = &c->g->m->ops[c->op];
    if (red->n == 0 || o->n_results == 0) {
        return;
    }
    const sp_sharding *s = c->t[o->n_operands].cur;
    axl un, left;
    if (s == NULL || s->n_unreduced == 0 || !unreduced_axl(c->mesh, s, &un)) {
        return;
    }
    axl_diff(red, &un, &left);
    *red = left;
}

/* After op: all-reduce each result over red (when non-empty), then reshard
 * it to target[i] (NULL: keep). Later uses see the last value. */
static cm_status fix_results(opctx *c, const axl *red, sp_sharding **computed, sp_sharding **target)
{
    pass *g = c->g;
    sp_module *m = g->m;
    const sp_op *o = &m->ops[c->op];
    uint32_t block = o->parent_block;
    uint32_t at = g->at + 1;
    uint32_t n_res = o->n_results, first = o->first_result;
    /* as Shardy: every result's all-reduce right after the op, then the
     * reshards */
    for (uint32_t pass2 = 0; pass2 < 2; pass2++) {
        for (uint32_t i = 0; i < n_res; i++) {
            uint32_t v = first + i;
            uint32_t cur = v < g->n_values0 && g->repl[v] != SP_NONE ? g->repl[v] : v;
            cm_status st;
            if (pass2 == 0 && red->n > 0) {
                if ((st = insert_all_reduce(g, block, at++, cur, c->mesh, red, computed[i],
                                            computed[i]->reduction, &cur)) != CM_OK) {
                    return st;
                }
            }
            if (pass2 == 1 && target[i] != NULL) {
                if ((st = insert_reshard(g, block, at++, cur, target[i], &cur)) != CM_OK) {
                    return st;
                }
            }
            if (cur != v && v < g->n_values0) {
                g->repl[v] = cur;
            }
        }
    }
    return CM_OK;
}

/* ---- one op ------------------------------------------------------------------------ */

static int64_t elements(const sp_type *ty)
{
    int64_t n = 1;
    if (ty->kind != SP_TYPE_TENSOR) {
        return 1;
    }
    for (uint32_t d = 0; d < ty->rank; d++) {
        if (ty->dims[d] < 0 || !cm_mul_i64(n, ty->dims[d], &n)) {
            return INT64_MAX;
        }
    }
    return n;
}

/* Do meshes a and b have the same axes (names and sizes), whatever their
 * device orders? */
static bool same_axes(const sp_mesh *a, const sp_mesh *b)
{
    if (a->n_axes != b->n_axes) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_axes; i++) {
        if (a->axes[i].size != b->axes[i].size || strcmp(a->axes[i].name, b->axes[i].name) != 0) {
            return false;
        }
    }
    return true;
}

static bool same_device_ids(const sp_mesh *a, const sp_mesh *b)
{
    if (a->device_ids == NULL || b->device_ids == NULL) {
        return a->device_ids == b->device_ids;
    }
    return a->n_device_ids == b->n_device_ids &&
           memcmp(a->device_ids, b->device_ids, sizeof(int64_t) * a->n_device_ids) == 0;
}

static bool dims_replicated(const sp_sharding *s)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return true;
}

/* Shardy's getMostCommonMesh: among the tensors sharded on some dimension,
 * the mesh that most of them use (the first to reach the count); the first
 * mesh seen when none is. Tensors sharded on a mesh of other device order
 * are marked to be resharded onto it. */
static void pick_common_mesh(opctx *c)
{
    sp_module *m = c->g->m;
    uint32_t best = 0;
    const char *name = c->mesh_name;
    for (uint32_t t = 0; t < c->nt; t++) {
        if (c->t[t].cur == NULL || dims_replicated(c->t[t].cur)) {
            continue;
        }
        uint32_t n = 0;
        for (uint32_t k = 0; k <= t; k++) {
            if (c->t[k].cur != NULL && !dims_replicated(c->t[k].cur) &&
                strcmp(c->t[k].mesh_name, c->t[t].mesh_name) == 0) {
                n++;
            }
        }
        if (n > best) {
            best = n;
            name = c->t[t].mesh_name;
        }
    }
    const sp_mesh *mesh = sp_module_mesh(m, name);
    if (mesh == NULL) {
        return;
    }
    c->mesh_name = name;
    c->mesh = mesh;
    for (uint32_t t = 0; t < c->nt; t++) {
        tinfo *ti = &c->t[t];
        if (ti->cur != NULL && !dims_replicated(ti->cur) && strcmp(ti->mesh_name, name) != 0) {
            const sp_mesh *tm = sp_module_mesh(m, ti->mesh_name);
            ti->other = tm == NULL || !same_device_ids(tm, mesh);
        }
    }
}

/* Fills the tensors of c and finds the op's mesh. False when the op is to be
 * skipped. */
static bool setup_tensors(opctx *c)
{
    sp_module *m = c->g->m;
    const sp_op *o = &m->ops[c->op];
    c->mesh = NULL;
    c->mesh_name = NULL;
    for (uint32_t t = 0; t < c->nt; t++) {
        bool is_res = t >= o->n_operands;
        uint32_t v = is_res ? o->first_result + (t - o->n_operands) : o->operands[t];
        const sp_tensor_mapping *map =
            is_res ? &c->r->results[t - o->n_operands] : &c->r->operands[t];
        const sp_type *ty = sp_value_type(m, v);
        tinfo *ti = &c->t[t];
        ti->value = v;
        ti->map = map;
        ti->rank = ty->kind == SP_TYPE_TENSOR ? ty->rank : 0;
        ti->dims = ty->kind == SP_TYPE_TENSOR ? ty->dims : NULL;
        ti->size = elements(ty);
        if (map->rank != ti->rank) {
            return false;
        }
        const sp_value *val = &m->values[v];
        if (val->def == SP_NONE) {
            uint32_t owner = m->blocks[val->block].parent_op;
            if (owner != SP_NONE && m->ops[owner].kind != SP_OP_FUNC_FUNC &&
                m->ops[owner].kind != SP_OP_WHILE &&
                m->ops[owner].kind != SP_OP_SDY_MANUAL_COMPUTATION) {
                return false; /* an argument whose sharding we cannot tell */
            }
        }
        /* as Shardy's getShardingBypassingBarriers: a propagation barrier's
         * result is sharded as its input */
        uint32_t sv = v;
        while (m->values[sv].def != SP_NONE &&
               m->ops[m->values[sv].def].kind == SP_OP_SDY_PROPAGATION_BARRIER &&
               m->ops[m->values[sv].def].n_operands == 1) {
            sv = m->ops[m->values[sv].def].operands[0];
        }
        sp_sharding *s = vsh(c->g, sv);
        if (s != NULL && s->mesh_name == NULL) {
            return false; /* inlined meshes: lifted by an import pass first */
        }
        const sp_mesh *mesh = s != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
        if (s != NULL && !mesh_ok(mesh)) {
            return false;
        }
        if (mesh != NULL && mesh->n_axes == 0) {
            s = NULL; /* a maximal or empty mesh shards nothing */
        }
        if (s != NULL && s->rank != ti->rank) {
            return false;
        }
        ti->cur = s;
        ti->mesh_name = s != NULL ? s->mesh_name : NULL;
        ti->other = false;
        if (s == NULL) {
            continue;
        }
        if (c->mesh_name == NULL) {
            c->mesh_name = s->mesh_name;
            c->mesh = mesh;
        } else if (strcmp(c->mesh_name, s->mesh_name) != 0 && !same_axes(c->mesh, mesh)) {
            return false;
        }
    }
    if (c->mesh == NULL) {
        return false;
    }
    pick_common_mesh(c);
    return true;
}

/* ---- reshapes with overflow axes (Shardy's processReshapeWithOverflowAxes) ---- */

/* The product of the sizes of every axis sharding a factor of row, overflow
 * axes included. */
static int64_t row_shard_size(const opctx *c, const fsh *row)
{
    int64_t x = 1;
    for (uint32_t f = 0; f < c->nf; f++) {
        if (row[f].present && (!cm_mul_i64(x, axl_size(&row[f].axes), &x) ||
                               !cm_mul_i64(x, axl_size(&row[f].over), &x))) {
            return INT64_MAX;
        }
    }
    return x;
}

/* Shardy's distributeAxesAcrossFactors over the factors tensor t has, in
 * dimension order: each axis of all in turn goes, whole or split, to the
 * first factors with room that share a divisor with it; an axis no factor
 * can take, and every axis after it, overflow the last factor. False when
 * out of memory or when a factor would take too many axes. */
static bool redistribute(const opctx *c, const tinfo *t, fsh *row, const axl *all)
{
    uint32_t *fl = cm_alloc(sizeof(uint32_t) * ((size_t)c->nf + 1u));
    int64_t *room = cm_alloc(sizeof(int64_t) * ((size_t)c->nf + 1u));
    bool ok = fl != NULL && room != NULL;
    uint32_t n = 0;
    for (uint32_t d = 0; ok && d < t->map->rank; d++) {
        const sp_dim_mapping *dm = &t->map->dims[d];
        for (uint32_t k = 0; k < dm->n_factors; k++) {
            uint32_t f = dm->factors[k];
            if (f < c->nf && row[f].present && n < c->nf) {
                row[f].axes.n = 0;
                row[f].over.n = 0;
                room[n] = c->r->factor_sizes[f];
                fl[n++] = f;
            }
        }
    }
    uint32_t ai = 0;
    ax cur = all->n > 0 ? all->a[0] : (ax){0, 1, 1};
    while (ok && n > 0 && ai < all->n) {
        bool used = false;
        for (uint32_t i = 0; i < n && ok; i++) {
            if (room[i] <= 1) {
                continue;
            }
            int64_t g = gcd64(room[i], cur.size);
            if (g == 1 && cur.size != 1) {
                continue;
            }
            used = true;
            axl *to = &row[fl[i]].axes;
            if (cur.size > g) {
                ok = axl_merge(to, (ax){cur.axis, cur.pre, g});
                cur.pre *= g;
                cur.size /= g;
                room[i] /= g;
                continue;
            }
            ok = axl_merge(to, cur);
            room[i] /= cur.size;
            if (++ai < all->n) {
                cur = all->a[ai];
            }
            break;
        }
        if (!used) {
            axl *over = &row[fl[n - 1]].over;
            ok = axl_merge(over, cur);
            while (ok && ++ai < all->n) {
                ok = axl_merge(over, all->a[ai]);
            }
        }
    }
    cm_free(fl);
    cm_free(room);
    return ok;
}

/* Shardy's greatest common prefix of two axis lists: the equal atoms, then
 * the shorter of the next two when one is a major part of the other. */
static void axl_common_prefix(axl *a, const axl *b)
{
    uint32_t i = 0;
    while (i < a->n && i < b->n && ax_eq(a->a[i], b->a[i])) {
        i++;
    }
    if (i < a->n && i < b->n) {
        if (ax_prefix(a->a[i], b->a[i])) {
            i++;
        } else if (ax_prefix(b->a[i], a->a[i])) {
            a->a[i] = b->a[i];
            i++;
        }
    }
    a->n = i;
}

/* A reshape whose operand or result has overflow axes: the axes of the more
 * sharded side are spread over the factors of each side afresh, both
 * sides' shardings are rebuilt and projected again, and each factor takes
 * the greatest common prefix of its axes there; the operand is resharded to
 * that, and the result computed with it and resharded back, where they
 * differ. */
static cm_status process_reshape_overflow(opctx *c)
{
    pass *g = c->g;
    sp_module *m = g->m;
    fsh *r0 = row_of(c, 0), *r1 = row_of(c, 1);
    const fsh *best = row_shard_size(c, r0) >= row_shard_size(c, r1) ? r0 : r1;
    axl all = {0, {{0, 0, 0}}};
    for (uint32_t f = 0; f < c->nf; f++) {
        if (best[f].present && (!axl_cat(&all, &best[f].axes) || !axl_cat(&all, &best[f].over))) {
            return CM_OK;
        }
    }
    if (!redistribute(c, &c->t[0], r0, &all) || !redistribute(c, &c->t[1], r1, &all)) {
        return CM_OK;
    }
    sp_sharding *in_b = sharding_from_row(c, &c->t[0], r0);
    sp_sharding *out_b = sharding_from_row(c, &c->t[1], r1);
    fsh *legal = cm_alloc(sizeof(fsh) * (2u * (size_t)c->nf + 1u));
    if (in_b == NULL || out_b == NULL || legal == NULL) {
        cm_free(legal);
        return oom(g);
    }
    if (!project_sharding(c, &c->t[0], in_b, legal) ||
        !project_sharding(c, &c->t[1], out_b, legal + c->nf)) {
        cm_free(legal);
        return CM_OK;
    }
    for (uint32_t f = 0; f < c->nf; f++) {
        bool seen = false;
        axl common = {0, {{0, 0, 0}}};
        for (uint32_t k = 0; k < 2; k++) {
            const fsh *x = &legal[(size_t)k * c->nf + f];
            if (!x->present) {
                continue;
            }
            if (!seen) {
                common = x->axes;
                seen = true;
            } else {
                axl_common_prefix(&common, &x->axes);
            }
        }
        for (uint32_t k = 0; k < 2; k++) {
            fsh *x = &(k == 0 ? r0 : r1)[f];
            if (x->present) {
                x->axes = common;
                x->over.n = 0;
            }
        }
    }
    cm_free(legal);
    sp_sharding *want = sharding_from_row(c, &c->t[0], r0);
    sp_sharding *now = sharding_from_row(c, &c->t[1], r1);
    if (want == NULL || now == NULL) {
        return oom(g);
    }
    const tinfo *in = &c->t[0], *res = &c->t[1];
    cm_status st;
    if (!same_dim_axes(c->mesh, in->cur, want, in->rank) || in->other) {
        uint32_t nv;
        if ((st = insert_reshard(g, m->ops[c->op].parent_block, g->at++, in->value, want, &nv)) !=
            CM_OK) {
            return st;
        }
        m->ops[c->op].operands[0] = nv;
    }
    if (same_dim_axes(c->mesh, res->cur, now, res->rank) && !res->other) {
        return CM_OK;
    }
    sp_sharding *back = res->cur != NULL ? res->cur : replicated(m, c->mesh_name, res->rank);
    if (back == NULL || sp_value_set_sharding(m, res->value, now) != CM_OK) {
        return oom(g);
    }
    axl none = {0, {{0, 0, 0}}};
    sp_sharding *computed[1] = {now}, *target[1] = {back};
    return fix_results(c, &none, computed, target);
}

/* ---- the partial version (enable-full-version=false) ------------------------- */

/* Shardy's processDot, for a dot or dot_general whose operands agree (same
 * axes on their shared factors, no axis on two non-contracting factors):
 * when the result disagrees with them on exactly one factor, the operands
 * shard that factor (non-empty), the result is no larger than the operand
 * it conflicts with, and the result shards that factor on exactly the
 * contracting factors' axes, the dot is computed with the operands'
 * sharding of the factor and its result resharded to the old sharding
 * (*target). A smaller tensor moves instead of an operand and the partial
 * sums are all-reduced instead of reduce-scattered. */
static cm_status process_dot(opctx *c, sp_sharding **target)
{
    sp_module *m = c->g->m;
    const fsh *lhs = row_of(c, 0), *rhs = row_of(c, 1);
    fsh *res = row_of(c, 2);
    int64_t ls = c->t[0].size, rs = c->t[1].size, os = c->t[2].size;
    uint32_t conflict = UINT32_MAX;
    axl conf = {0, {{0, 0, 0}}}, red = {0, {{0, 0, 0}}}, seen = {0, {{0, 0, 0}}};
    for (uint32_t f = 0; f < c->nf; f++) {
        const axl *opa;
        int64_t max_size;
        if (lhs[f].present && rhs[f].present) {
            opa = &lhs[f].axes;
            max_size = ls > rs ? ls : rs;
            if (!axl_eq(&lhs[f].axes, &rhs[f].axes)) {
                return CM_OK; /* lhs and rhs conflict */
            }
            if (c->r->factor_kind[f] == SP_FACTOR_REDUCTION) {
                if (!axl_cat(&red, opa)) {
                    return CM_OK;
                }
                continue;
            }
        } else if (lhs[f].present || rhs[f].present) {
            opa = lhs[f].present ? &lhs[f].axes : &rhs[f].axes;
            max_size = lhs[f].present ? ls : rs;
            for (uint32_t i = 0; i < opa->n; i++) {
                for (uint32_t k = 0; k < seen.n; k++) {
                    if (ax_overlap(opa->a[i], seen.a[k])) {
                        return CM_OK; /* non-contracting dims conflict */
                    }
                }
                if (seen.n == MAXAX) {
                    return CM_OK;
                }
                seen.a[seen.n++] = opa->a[i];
            }
        } else {
            continue;
        }
        if (!res[f].present || axl_eq(&res[f].axes, opa)) {
            continue;
        }
        if (opa->n == 0 || conflict != UINT32_MAX || os > max_size) {
            return CM_OK;
        }
        conflict = f;
        conf = *opa;
    }
    if (conflict == UINT32_MAX || res[conflict].axes.n == 0 || !axl_eq(&res[conflict].axes, &red)) {
        return CM_OK;
    }
    uint32_t v = m->ops[c->op].first_result;
    sp_sharding *old = sp_value_sharding(m, v);
    res[conflict].axes = conf;
    sp_sharding *now = sharding_from_row(c, &c->t[2], res);
    if (old == NULL || now == NULL || sp_value_set_sharding(m, v, now) != CM_OK) {
        return oom(c->g);
    }
    c->t[2].cur = now;
    *target = old;
    return CM_OK;
}

/* The partial version: a dot may be computed more sharded (process_dot),
 * and when the first result keeps some axes unreduced, the axes of the
 * reduction factors (sharded alike in every tensor) that it does not keep
 * unreduced are all-reduced after the op. */
static cm_status rewrite_partial(opctx *c)
{
    pass *g = c->g;
    sp_module *m = g->m;
    const sp_op *o = &m->ops[c->op];
    uint32_t n_opd = o->n_operands, n_res = o->n_results;
    sp_sharding **computed = cm_calloc((size_t)n_res + 1u, sizeof *computed);
    sp_sharding **target = cm_calloc((size_t)n_res + 1u, sizeof *target);
    cm_status st = CM_OK;
    axl red = {0, {{0, 0, 0}}};
    if (computed == NULL || target == NULL) {
        st = oom(g);
        goto out;
    }
    if ((o->kind == SP_OP_DOT || o->kind == SP_OP_DOT_GENERAL) && n_opd == 2 && n_res == 1 &&
        (st = process_dot(c, &target[0])) != CM_OK) {
        goto out;
    }
    const sp_sharding *first = n_res > 0 ? c->t[n_opd].cur : NULL;
    if (first != NULL && first->n_unreduced > 0) {
        bool ok = true;
        for (uint32_t f = 0; f < c->nf && ok; f++) {
            if (c->r->factor_kind[f] != SP_FACTOR_REDUCTION) {
                continue;
            }
            const axl *common = NULL;
            for (uint32_t t = 0; t < c->nt && ok; t++) {
                const fsh *x = &row_of(c, t)[f];
                if (x->present) {
                    ok = common == NULL || axl_eq(common, &x->axes);
                    common = &x->axes;
                }
            }
            /* Shardy fails hard on a reduction factor sharded two ways */
            ok = ok && (common == NULL || axl_cat(&red, common));
        }
        if (!ok) {
            red.n = 0;
        }
        drop_result_unreduced(c, &red);
    }
    for (uint32_t i = 0; i < n_res && red.n > 0; i++) {
        const tinfo *ti = &c->t[n_opd + i];
        computed[i] = ti->cur != NULL ? ti->cur : replicated(m, c->mesh_name, ti->rank);
        if (computed[i] == NULL) {
            st = oom(g);
            goto out;
        }
    }
    if (red.n > 0 || target[0] != NULL) {
        st = fix_results(c, &red, computed, target);
    }
out:
    cm_free(computed);
    cm_free(target);
    return st;
}

static cm_status rewrite_op(opctx *c)
{
    pass *g = c->g;
    sp_module *m = g->m;
    bool over = false;
    for (uint32_t t = 0; t < c->nt; t++) {
        if (!project(c, &c->t[t], row_of(c, t))) {
            return CM_OK;
        }
        for (uint32_t f = 0; f < c->nf; f++) {
            over = over || row_of(c, t)[f].over.n > 0;
        }
    }
    if (!g->op_full) {
        return rewrite_partial(c);
    }
    if (over && m->ops[c->op].kind == SP_OP_RESHAPE && c->nt == 2) {
        return process_reshape_overflow(c);
    }
    const sp_op *o = &m->ops[c->op];
    uint32_t n_opd = o->n_operands, n_res = o->n_results;
    sp_sharding **computed = cm_calloc((size_t)n_res + 1u, sizeof *computed);
    sp_sharding **target = cm_calloc((size_t)n_res + 1u, sizeof *target);
    cm_status st = CM_OK;
    if (computed == NULL || target == NULL) {
        st = oom(g);
        goto out;
    }
    bool any_other = false;
    for (uint32_t t = 0; t < c->nt; t++) {
        any_other = any_other || c->t[t].other;
    }
    axl red;
    bool compat = compatible(c);
    if (compat && !any_other) {
        reduction_axes(c, &red);
        drop_result_unreduced(c, &red);
        if (red.n == 0) {
            goto out;
        }
        for (uint32_t i = 0; i < n_res; i++) {
            const tinfo *ti = &c->t[n_opd + i];
            computed[i] = ti->cur != NULL ? ti->cur : replicated(m, c->mesh_name, ti->rank);
            if (computed[i] == NULL) {
                st = oom(g);
                goto out;
            }
        }
        st = fix_results(c, &red, computed, target);
        goto out;
    }
    if (!compat && !choose_unary(c) && !choose_common(c)) {
        st = oom(g);
        goto out;
    }
    reduction_axes(c, &red);
    drop_result_unreduced(c, &red);
    /* operands */
    uint32_t block = o->parent_block;
    for (uint32_t i = 0; i < n_opd; i++) {
        const tinfo *ti = &c->t[i];
        if (ti->rank == 0) {
            continue;
        }
        sp_sharding *want = sharding_from_factors(c, ti);
        if (want == NULL) {
            st = oom(g);
            goto out;
        }
        if (same_dim_axes(c->mesh, ti->cur, want, ti->rank) && !ti->other) {
            continue;
        }
        uint32_t nv;
        if ((st = insert_reshard(g, block, g->at++, ti->value, want, &nv)) != CM_OK) {
            goto out;
        }
        m->ops[c->op].operands[i] = nv;
    }
    /* results. As in Shardy: once one result of an op that had no
     * shardings is given one, the op's other results read as fully open, so
     * a later result without a sharding is resharded back to open dims. */
    bool had_none = true, gave_one = false;
    for (uint32_t i = 0; i < n_res; i++) {
        if (sp_value_sharding(m, m->ops[c->op].first_result + i) != NULL) {
            had_none = false;
        }
    }
    for (uint32_t i = 0; i < n_res; i++) {
        const tinfo *ti = &c->t[n_opd + i];
        sp_sharding *now = sharding_from_factors(c, ti);
        if (now == NULL) {
            st = oom(g);
            goto out;
        }
        computed[i] = now;
        if (same_dim_axes(c->mesh, ti->cur, now, ti->rank) && !ti->other) {
            computed[i] = ti->cur != NULL ? ti->cur : now;
            continue;
        }
        if ((st = sp_value_set_sharding(m, ti->value, now)) != CM_OK) {
            st = oom(g);
            goto out;
        }
        target[i] = ti->cur != NULL        ? ti->cur
                    : had_none && gave_one ? sp_sharding_open(&m->arena, c->mesh_name, ti->rank)
                                           : replicated(m, c->mesh_name, ti->rank);
        gave_one = true;
        if (target[i] == NULL) {
            st = oom(g);
            goto out;
        }
    }
    st = fix_results(c, &red, computed, target);
out:
    cm_free(computed);
    cm_free(target);
    return st;
}

static cm_status visit_op(pass *g, uint32_t opid)
{
    sp_module *m = g->m;
    const sp_op *o = &m->ops[opid];
    if (o->n_results == 0 || o->kind == SP_OP_FUNC_FUNC) {
        return CM_OK;
    }
    /* A sharding constraint is a reshard here: Shardy's export pipeline
     * makes it one (sharding-constraint-to-reshard) before this pass, and
     * leaves reshards alone; the plan's own partitioning keeps the
     * constraint so that the advisor can name it. */
    if (o->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        return CM_OK;
    }
    sp_rule *r = NULL;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_rule_for_op(m, opid, &g->ropts, &r, NULL, &e);
    o = &m->ops[opid];
    if (st == CM_ENOMEM) {
        return oom(g);
    }
    if (st != CM_OK || r == NULL || r->n_operands != o->n_operands ||
        r->n_results != o->n_results || r->is_custom) {
        return CM_OK; /* as Shardy: custom rules get no explicit reshards */
    }
    opctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.op = opid;
    c.r = r;
    c.nt = o->n_operands + o->n_results;
    c.nf = r->n_factors;
    c.t = cm_calloc((size_t)c.nt + 1u, sizeof *c.t);
    bool bufs = CM_GROW(g->row_buf, g->row_cap, (size_t)c.nt * c.nf + 1u, NULL) == CM_OK &&
                CM_GROW(g->proj_buf, g->proj_cap, (size_t)c.nf + 1u, NULL) == CM_OK;
    c.row = g->row_buf;
    c.common = cm_calloc((size_t)c.nf + 1u, sizeof *c.common);
    if (c.t == NULL || !bufs || c.common == NULL) {
        st = oom(g);
    } else if (setup_tensors(&c)) {
        st = rewrite_op(&c);
    }
    cm_free(c.t);
    cm_free(c.common);
    cm_free(c.cands);
    return st;
}

/* Reshards value number i of op (an operand, inserted before op) to want
 * unless it is already sharded that way (only when full: the full version
 * applies). want NULL: no constraint. First its unreduced axes that want
 * does not keep are all-reduced, and axes want adds to them are made
 * unreduced. */
static cm_status match_owner_at(pass *g, uint32_t op, uint32_t i, sp_sharding *want, bool full)
{
    sp_module *m = g->m;
    bool done = false;
    const sp_sharding *last = NULL;
    cm_status st0 = reduce_unreduced_operand(g, op, i, want);
    if (st0 == CM_OK) {
        st0 = unreduced_collectives(g, op, i, want, &done, &last);
    }
    if (st0 != CM_OK || !full) {
        return st0;
    }
    uint32_t v = m->ops[op].operands[i];
    const sp_type *ty = sp_value_type(m, v);
    const sp_sharding *have = vsh(g, v);
    if (want == NULL && have != NULL && !dims_replicated(have) && ty->kind == SP_TYPE_TENSOR) {
        /* no target: a sharded value goes fully replicated (closed) */
        if ((want = replicated(m, have->mesh_name, ty->rank)) == NULL) {
            return oom(g);
        }
    }
    if (want == NULL || want->mesh_name == NULL || ty->kind != SP_TYPE_TENSOR ||
        want->rank != ty->rank) {
        return CM_OK;
    }
    const sp_mesh *mesh = sp_module_mesh(m, want->mesh_name);
    if (mesh == NULL || (have != NULL && (have->mesh_name == NULL || have->rank != ty->rank))) {
        return CM_OK;
    }
    if ((have == NULL || strcmp(have->mesh_name, want->mesh_name) == 0) &&
        same_dim_axes(mesh, have, want, ty->rank)) {
        return CM_OK;
    }
    /* Shardy's isEquivalent: fully replicated on any two meshes is the same */
    if (dims_replicated(have) && (have == NULL || have->n_unreduced == 0) &&
        dims_replicated(want) && want->n_unreduced == 0) {
        return CM_OK;
    }
    uint32_t nv;
    cm_status st = insert_reshard(g, m->ops[op].parent_block, g->at++, v, want, &nv);
    if (st == CM_OK) {
        m->ops[op].operands[i] = nv;
    }
    return st;
}

/* match_owner_at; with after_def the new ops go right after the operand's
 * definition (at the start of its block for an argument), the latest chain
 * first, as Shardy inserts them for data-flow edges and calls. */
static cm_status match_owner(pass *g, uint32_t op, uint32_t i, sp_sharding *want, bool full,
                             bool after_def)
{
    if (!after_def) {
        return match_owner_at(g, op, i, want, full);
    }
    uint32_t at = g->at;
    g->hoisting = true;
    g->hoist_value = g->m->ops[op].operands[i];
    cm_status st = match_owner_at(g, op, i, want, full);
    g->hoisting = false;
    g->n_chains++;
    g->at = at;
    return st;
}

static int hoist_cmp(const void *pa, const void *pb)
{
    const struct hoist *a = pa, *b = pb;
    if (a->at_start != b->at_start) {
        return a->at_start ? 1 : -1;
    }
    if (a->key != b->key) {
        return a->key < b->key ? -1 : 1;
    }
    if (a->chain != b->chain) {
        return a->chain > b->chain ? -1 : 1;
    }
    return a->seq < b->seq ? -1 : a->seq > b->seq ? 1 : 0;
}

/* The first hoist of (at_start, key) in the sorted hoists, or n_hoists. */
static uint32_t hoist_find(const pass *g, bool at_start, uint32_t key)
{
    uint32_t lo = 0, hi = g->n_hoists;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct hoist *h = &g->hoists[mid];
        bool less = h->at_start != at_start ? !h->at_start : h->key < key;
        if (less) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < g->n_hoists && g->hoists[lo].at_start == at_start && g->hoists[lo].key == key
               ? lo
               : g->n_hoists;
}

/* Pushes op, then the ops that follow its results (and theirs). */
static cm_status hoist_emit(pass *g, struct oplist *out, uint32_t block, uint32_t op,
                            uint32_t depth)
{
    g->m->ops[op].parent_block = block;
    if (oplist_push(out, op) != CM_OK) {
        return CM_ENOMEM;
    }
    if (depth > 64) {
        return CM_OK;
    }
    for (uint32_t k = hoist_find(g, false, op);
         k < g->n_hoists && !g->hoists[k].at_start && g->hoists[k].key == op; k++) {
        if (hoist_emit(g, out, block, g->hoists[k].op, depth + 1) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* Places the hoisted ops: each block holding an anchor is rebuilt once. */
static cm_status apply_hoists(pass *g)
{
    sp_module *m = g->m;
    if (g->n_hoists == 0) {
        return CM_OK;
    }
    qsort(g->hoists, g->n_hoists, sizeof *g->hoists, hoist_cmp);
    uint8_t *hoisted = cm_calloc((size_t)m->n_ops + 1u, 1);
    uint8_t *done = cm_calloc((size_t)m->n_blocks + 1u, 1);
    cm_status st = hoisted != NULL && done != NULL ? CM_OK : CM_ENOMEM;
    for (uint32_t k = 0; st == CM_OK && k < g->n_hoists; k++) {
        hoisted[g->hoists[k].op] = 1;
    }
    for (uint32_t k = 0; st == CM_OK && k < g->n_hoists; k++) {
        const struct hoist *h = &g->hoists[k];
        uint32_t block = h->at_start ? h->key : m->ops[h->key].parent_block;
        if (block == SP_NONE || done[block]) {
            continue;
        }
        done[block] = 1;
        struct oplist out = {NULL, 0, 0};
        for (uint32_t j = hoist_find(g, true, block);
             st == CM_OK && j < g->n_hoists && g->hoists[j].at_start && g->hoists[j].key == block;
             j++) {
            st = hoist_emit(g, &out, block, g->hoists[j].op, 0);
        }
        sp_block *b = &m->blocks[block];
        for (uint32_t i = 0; st == CM_OK && i < b->n_ops; i++) {
            if (!hoisted[b->ops[i]]) {
                st = hoist_emit(g, &out, block, b->ops[i], 0);
            }
        }
        if (st != CM_OK) {
            cm_free(out.v);
            break;
        }
        cm_free(b->ops);
        b->ops = out.v;
        b->n_ops = out.n;
        b->cap_ops = out.cap;
    }
    cm_free(hoisted);
    cm_free(done);
    return st == CM_OK ? CM_OK : oom(g);
}

/* Data-flow ops (while, optimization_barrier) have no rule: each operand
 * must be sharded as the result it flows into. */
static cm_status visit_data_flow(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    const sp_op *o = &m->ops[op];
    if (o->n_operands != o->n_results) {
        return CM_OK;
    }
    /* match_owner adds ops, which may move m->ops: o is not used after it */
    uint32_t n = o->n_operands, first = o->first_result;
    for (uint32_t i = 0; i < n; i++) {
        cm_status st = match_owner(g, op, i, sp_value_sharding(m, first + i), g->op_full, true);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* sdy.manual_computation: each operand must arrive sharded as its
 * in_shardings entry says (the body then sees the local blocks); the
 * results are sharded as out_shardings (sp_value_sharding_partitioned). */
static cm_status visit_manual(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    const sp_op *o = &m->ops[op];
    const sp_attr *in = sp_attrs_get(o->attrs, o->n_attrs, "in_shardings");
    if (in == NULL || in->kind != SP_ATTR_SHARDING_LIST || in->u.shardings.n != o->n_operands) {
        return CM_OK;
    }
    /* match_owner adds ops, which may move m->ops: o is not used after it */
    uint32_t n = o->n_operands;
    for (uint32_t i = 0; i < n; i++) {
        cm_status st = match_owner(g, op, i, in->u.shardings.items[i], g->op_full, true);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* stablehlo.return ending a while body or a case/if branch: each returned
 * value must be sharded as the parent's result. */
static cm_status visit_terminator(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    uint32_t block = m->ops[op].parent_block;
    uint32_t owner = m->blocks[block].parent_op;
    if (owner == SP_NONE) {
        return CM_OK;
    }
    const sp_op *p = &m->ops[owner];
    bool manual = p->kind == SP_OP_SDY_MANUAL_COMPUTATION;
    bool body = p->kind == SP_OP_WHILE && p->n_regions == 2 && p->regions[1].n_blocks > 0 &&
                p->regions[1].blocks[0] == block;
    if (!body && !manual && p->kind != SP_OP_CASE && p->kind != SP_OP_IF) {
        return CM_OK;
    }
    if (m->ops[op].n_operands != p->n_results) {
        return CM_OK;
    }
    /* match_owner adds ops, which may move m->ops: p is not used after it */
    uint32_t first = p->first_result;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        /* a manual computation's body returns its out_shardings, local */
        sp_sharding *want =
            manual ? manual_local(g, owner, "out_shardings", i) : sp_value_sharding(m, first + i);
        cm_status st = match_owner(g, op, i, want, g->full, true);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* ---- single-device ops (Shardy's processSingleDeviceOperation) ------------------- */

/* The device of s when it is on a maximal mesh, else -1; *mesh_name its mesh. */
static int64_t single_device(const sp_module *m, const sp_sharding *s, const char **mesh_name)
{
    if (s == NULL || s->mesh_name == NULL) {
        return -1;
    }
    const sp_mesh *mesh = sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL || mesh->n_axes != 0 || mesh->n_device_ids != 1) {
        return -1;
    }
    if (mesh_name != NULL) {
        *mesh_name = s->mesh_name;
    }
    return mesh->device_ids[0];
}

/* The first sdy.mesh with axes (Shardy's global mesh), or NULL. */
static const char *global_mesh(const sp_module *m)
{
    const sp_block *b = &m->blocks[m->body];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        const sp_op *op = &m->ops[b->ops[i]];
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *mesh = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (op->kind == SP_OP_SDY_MESH && n != NULL && n->kind == SP_ATTR_STRING && mesh != NULL &&
            mesh->kind == SP_ATTR_MESH && mesh->u.mesh->n_axes > 0) {
            return n->u.str.s;
        }
    }
    return NULL;
}

static bool no_dim_axes(const sp_sharding *s)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return true;
}

/* An op whose results are placed on one device: its operands are resharded
 * onto the device (through replicated on the global mesh unless already
 * there), its results back to what they were (replicated on the global mesh
 * when that was the device), and the op's tensor results take the device's
 * sharding (tokens: replicated on the global mesh). *handled false: not such
 * an op. Errors: CM_EINVAL (with a diagnostic) when the results name two
 * devices, CM_ENOMEM. */
static cm_status visit_single_device(pass *g, uint32_t op, sp_diags *diags, bool *handled)
{
    sp_module *m = g->m;
    *handled = false;
    const char *dev_mesh = NULL;
    int64_t dev = -1;
    bool conflict = false;
    for (uint32_t i = 0; i < m->ops[op].n_results; i++) {
        const char *name = NULL;
        int64_t d = single_device(m, sp_value_sharding(m, m->ops[op].first_result + i), &name);
        if (d < 0) {
            continue;
        }
        conflict = conflict || (dev >= 0 && d != dev);
        if (dev < 0) {
            dev = d;
            dev_mesh = name;
        }
    }
    if (dev < 0) {
        return CM_OK;
    }
    *handled = true;
    if (conflict) {
        sp_diags_add(diags, m, op, SP_DIAG_ERROR,
                     "'%s' op has conflicting single-device result shardings", m->ops[op].name);
        return cm_error_set(g->err, CM_EINVAL, "",
                            "'%s' op has conflicting single-device result "
                            "shardings",
                            m->ops[op].name);
    }
    const char *global = global_mesh(m);
    if (global == NULL) {
        return CM_OK;
    }
    sp_sharding *single = replicated(m, dev_mesh, 0);
    if (single == NULL) {
        return oom(g);
    }
    uint32_t block = m->ops[op].parent_block;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        uint32_t v = m->ops[op].operands[i];
        const sp_type *ty = sp_value_type(m, v);
        if (ty->kind != SP_TYPE_TENSOR) {
            continue;
        }
        const sp_sharding *have = vsh(g, v);
        const char *have_mesh = have != NULL ? have->mesh_name : global;
        bool replicated_have = no_dim_axes(have) && (have == NULL || have->n_unreduced == 0);
        if (replicated_have && have_mesh != NULL && strcmp(have_mesh, dev_mesh) == 0) {
            continue;
        }
        cm_status st;
        if (!(replicated_have && have_mesh != NULL && strcmp(have_mesh, global) == 0)) {
            sp_sharding *rep = replicated(m, global, ty->rank);
            if (rep == NULL) {
                return oom(g);
            }
            if ((st = insert_reshard(g, block, g->at++, v, rep, &v)) != CM_OK) {
                return st;
            }
        }
        if ((st = insert_reshard(g, block, g->at++, v, single, &v)) != CM_OK) {
            return st;
        }
        m->ops[op].operands[i] = v;
    }
    uint32_t n = m->ops[op].n_results, at = g->at + 1;
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (items == NULL) {
        return oom(g);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = m->ops[op].first_result + i, cur = r;
        const sp_type *ty = sp_value_type(m, r);
        sp_sharding *orig = sp_value_sharding(m, r);
        items[i] = orig;
        if (ty->kind == SP_TYPE_TOKEN) {
            if ((items[i] = replicated(m, global, 0)) == NULL) {
                return oom(g);
            }
            continue;
        }
        if (ty->kind != SP_TYPE_TENSOR) {
            continue;
        }
        items[i] = single;
        sp_sharding *rep = replicated(m, global, ty->rank);
        if (rep == NULL) {
            return oom(g);
        }
        cm_status st = insert_reshard(g, block, at++, cur, rep, &cur);
        if (st == CM_OK && orig != NULL && single_device(m, orig, NULL) < 0 &&
            !sp_sharding_equal(orig, rep)) {
            st = insert_reshard(g, block, at++, cur, orig, &cur);
        }
        if (st != CM_OK) {
            return st;
        }
        if (r < g->n_values0) {
            g->repl[r] = cur;
        }
    }
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (list == NULL) {
        return oom(g);
    }
    list->u.shardings.items = items;
    list->u.shardings.n = n;
    return sp_op_set_attr(m, op, "sdy.sharding", list) == CM_OK ? CM_OK : oom(g);
}

/* A function argument or result on a single device is an error. */
static cm_status verify_func_io(pass *g, uint32_t f, sp_diags *diags)
{
    for (int which = 0; which < 2; which++) {
        uint32_t n = sp_exp_io_count(g->m, f, which == 0);
        for (uint32_t i = 0; i < n; i++) {
            if (single_device(g->m, sp_exp_io_sharding(g->m, f, which == 0, i), NULL) < 0) {
                continue;
            }
            const char *what = which == 0 ? "argument" : "result";
            sp_diags_add(diags, g->m, f, SP_DIAG_ERROR,
                         "'func.func' op function %s %u cannot have a single-device (maximal) "
                         "sharding attribute",
                         what, i);
            return cm_error_set(g->err, CM_EINVAL, "",
                                "function %s %u cannot have a single-device (maximal) sharding "
                                "attribute",
                                what, i);
        }
    }
    return CM_OK;
}

/* func.call: each operand is resharded to its callee's argument sharding
 * (a missing one fully open on the mesh of the others); a callee without
 * argument shardings takes fully replicated operands on the mesh of the
 * first sharded operand (Shardy's insertReshardsOnFuncArguments). */
static cm_status visit_call(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    uint32_t f = sp_exp_callee(m, op);
    if (f == SP_NONE) {
        return CM_OK;
    }
    const sp_sharding *src = sp_exp_mesh_source(m, f, true);
    const char *mesh_name = src != NULL ? src->mesh_name : NULL;
    if (src == NULL) {
        for (uint32_t i = 0; i < m->ops[op].n_operands && mesh_name == NULL; i++) {
            const sp_sharding *s = vsh(g, m->ops[op].operands[i]);
            if (s != NULL && !sp_exp_is_maximal(m, s)) {
                mesh_name = s->mesh_name;
            }
        }
    }
    if (mesh_name == NULL) {
        return CM_OK;
    }
    uint32_t n = m->ops[op].n_operands;
    for (uint32_t i = 0; i < n; i++) {
        const sp_type *ty = sp_value_type(m, m->ops[op].operands[i]);
        sp_sharding *want =
            src != NULL ? (sp_sharding *)(uintptr_t)sp_exp_io_sharding(m, f, true, i) : NULL;
        if (want == NULL && ty->kind == SP_TYPE_TENSOR) {
            want = src != NULL ? sp_sharding_open(&m->arena, mesh_name, ty->rank)
                               : replicated(m, mesh_name, ty->rank);
            if (want == NULL) {
                return oom(g);
            }
        }
        cm_status st = match_owner(g, op, i, want, true, true);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* func.return: a returned value whose sharding differs from the function's
 * result sharding is resharded to it. */
static cm_status visit_return(pass *g, uint32_t func, uint32_t opid)
{
    for (uint32_t i = 0; i < g->m->ops[opid].n_operands; i++) {
        cm_status st =
            match_owner(g, opid, i, sp_func_result_sharding(g->m, func, i), g->full, false);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static void remap_operands(pass *g, uint32_t op)
{
    sp_op *o = &g->m->ops[op];
    for (uint32_t k = 0; k < o->n_operands; k++) {
        uint32_t v = o->operands[k];
        if (v < g->n_values0 && g->repl[v] != SP_NONE) {
            o->operands[k] = g->repl[v];
        }
    }
}

/* An sdy.reshard whose sharding adds unreduced axes becomes the unreduced
 * collectives (Shardy's convertReshardToUnreducedCollectives): its uses see
 * their result and *dropped says the reshard goes. */
static cm_status reshard_to_unreduced(pass *g, uint32_t op, bool *dropped)
{
    sp_module *m = g->m;
    *dropped = false;
    const sp_attr *a = sp_op_attr(m, op, "sharding");
    if (m->ops[op].n_operands != 1 || m->ops[op].n_results != 1 || a == NULL ||
        a->kind != SP_ATTR_SHARDING) {
        return CM_OK;
    }
    bool done = false;
    const sp_sharding *last = NULL;
    cm_status st = unreduced_collectives(g, op, 0, a->u.sharding, &done, &last);
    if (st != CM_OK || !done) {
        return st;
    }
    uint32_t res = m->ops[op].first_result;
    if (res < g->n_values0) {
        g->repl[res] = m->ops[op].operands[0];
        *dropped = true;
    }
    return CM_OK;
}

/* Shardy's isOnFullVersion: the full version, when not enabled, still
 * applies to func.call, mhlo.ragged_dot, and a concatenate one of whose
 * operands is not sharded exactly as its result. */
static bool on_full_version(pass *g, uint32_t op)
{
    sp_module *m = g->m;
    const sp_op *o = &m->ops[op];
    if (g->full || o->kind == SP_OP_FUNC_CALL || strcmp(o->name, "mhlo.ragged_dot") == 0) {
        return true;
    }
    if (o->kind == SP_OP_CONCATENATE && o->n_results > 0) {
        const sp_sharding *res = sp_value_sharding(m, o->first_result);
        for (uint32_t i = 0; i < o->n_operands; i++) {
            if (!sp_sharding_equal(vsh(g, o->operands[i]), res)) {
                return true;
            }
        }
    }
    return false;
}

static cm_status walk_block(pass *g, uint32_t func, uint32_t block)
{
    sp_module *m = g->m;
    uint32_t n = m->blocks[block].n_ops;
    uint32_t *orig = cm_alloc(sizeof(uint32_t) * (n + 1u));
    struct oplist out = {NULL, 0, 0};
    if (orig == NULL) {
        return oom(g);
    }
    if (n > 0) { /* an empty block may have no ops array */
        memcpy(orig, m->blocks[block].ops, sizeof(uint32_t) * n);
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        uint32_t op = orig[i];
        remap_operands(g, op);
        g->at = i;
        g->before.n = 0;
        g->after.n = 0;
        uint32_t kind = m->ops[op].kind;
        bool dropped = false;
        g->op_full = on_full_version(g, op);
        if (kind == SP_OP_FUNC_RETURN) {
            st = visit_return(g, func, op);
        } else if (kind == SP_OP_RETURN || kind == SP_OP_SDY_RETURN) {
            st = visit_terminator(g, op);
        } else if (kind == SP_OP_WHILE || kind == SP_OP_OPTIMIZATION_BARRIER) {
            st = visit_data_flow(g, op);
        } else if (kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            st = visit_manual(g, op);
        } else if (kind == SP_OP_FUNC_CALL) {
            st = visit_call(g, op);
        } else if (kind == SP_OP_SDY_RESHARD &&
                   (st = reshard_to_unreduced(g, op, &dropped)) != CM_OK) {
            break;
        } else if (!dropped) {
            bool handled = false;
            st = reduce_unreduced_operands(g, op);
            if (st == CM_OK) {
                st = visit_single_device(g, op, g->diags, &handled);
            }
            if (st == CM_OK && !handled) {
                st = visit_op(g, op);
            }
        }
        for (uint32_t k = 0; k < g->before.n && st == CM_OK; k++) {
            st = oplist_push(&out, g->before.v[k]);
        }
        if (st == CM_OK && !dropped) {
            st = oplist_push(&out, op);
        }
        for (uint32_t k = 0; k < g->after.n && st == CM_OK; k++) {
            st = oplist_push(&out, g->after.v[k]);
        }
        if (st != CM_OK) {
            break;
        }
        for (uint32_t r = 0; r < m->ops[op].n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks && st == CM_OK; k++) {
                st = walk_block(g, func, m->ops[op].regions[r].blocks[k]);
            }
        }
    }
    cm_free(orig);
    if (st != CM_OK) {
        cm_free(out.v);
        return st == CM_ENOMEM ? oom(g) : st;
    }
    /* the rebuilt block: the new ops in place */
    sp_block *b = &m->blocks[block];
    for (uint32_t i = 0; i < out.n; i++) {
        m->ops[out.v[i]].parent_block = block;
    }
    cm_free(b->ops);
    b->ops = out.v;
    b->n_ops = out.n;
    b->cap_ops = out.cap;
    return CM_OK;
}

cm_status sp_pass_insert_explicit_reshards(sp_module *m, const sp_reshard_opts *opts,
                                           sp_diags *diags, cm_error *err)
{
    pass g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.full = opts == NULL || opts->full_version;
    g.ropts.replicate_unknown_custom_calls = opts != NULL && opts->replicate_unknown_custom_calls;
    g.err = err;
    g.diags = diags;
    g.n_ops0 = m->n_ops;
    g.n_values0 = m->n_values;
    g.repl = cm_alloc(sizeof(uint32_t) * ((size_t)m->n_values + 1u));
    g.local = cm_calloc((size_t)m->n_values + 1u, sizeof *g.local);
    if (g.repl == NULL || g.local == NULL) {
        cm_free(g.repl);
        cm_free(g.local);
        return oom(&g);
    }
    for (uint32_t i = 0; i < m->n_values; i++) {
        g.repl[i] = SP_NONE;
    }
    cm_status st = CM_OK;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        uint32_t f = m->blocks[m->body].ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        st = verify_func_io(&g, f, diags);
        for (uint32_t r = 0; r < m->ops[f].n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < m->ops[f].regions[r].n_blocks && st == CM_OK; k++) {
                st = walk_block(&g, f, m->ops[f].regions[r].blocks[k]);
            }
        }
    }
    if (st == CM_OK) {
        st = apply_hoists(&g);
    }
    if (st == CM_OK && g.oom_hit) {
        st = oom(&g);
    }
    cm_free(g.repl);
    cm_free(g.local);
    cm_free(g.hoists);
    cm_free(g.before.v);
    cm_free(g.after.v);
    cm_free(g.row_buf);
    cm_free(g.proj_buf);
    return st;
}
