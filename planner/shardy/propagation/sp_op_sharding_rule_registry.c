/* SPDX-License-Identifier: Apache-2.0
 * planner: the op sharding-rule registry (Shardy's
 * propagation/op_sharding_rule_registry.cc; declared in sp_rules.h).
 * A small builder (rb_*) mirrors Shardy's OpShardingRuleBuilder: factors are
 * numbered in the order they are added, each tensor dimension lists the
 * factors mapped to it in that order, and build() drops size-one factors from
 * compound dimensions and factors that end up unused. One function per op
 * family derives the factors from shapes and attributes.
 * Ownership: rules live in the module arena; builder scratch is heap memory
 * freed before returning. */
#include "sp_rules.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_attrs.h"
#include "sp_ax.h"
#include "sp_diag.h"

#define RULE_ATTR "sdy.sharding_rule"
#define NO_FACTOR UINT32_MAX

/* ==== rule builder ========================================================== */

typedef struct rb_ent {
    uint32_t slot; /* base[tensor] + dim */
    uint32_t factor;
} rb_ent;

typedef struct rb {
    uint32_t n_operands;
    uint32_t n_tensors; /* operands, then results */
    uint32_t *rank;     /* per tensor */
    uint32_t *base;     /* first slot of each tensor */
    uint32_t n_slots;
    int64_t *size;    /* per factor */
    uint8_t *kind;    /* per factor, sp_factor_kind */
    uint8_t *blocked; /* per factor */
    uint32_t n_factors, cap_factors;
    rb_ent *ents; /* dimension -> factor, in insertion order */
    uint32_t n_ents, cap_ents;
    uint8_t *left; /* per slot: left without a factor on purpose (NULL: none) */
    bool oom;
} rb;

static void rb_fini(rb *b)
{
    cm_free(b->rank);
    cm_free(b->base);
    cm_free(b->size);
    cm_free(b->kind);
    cm_free(b->blocked);
    cm_free(b->ents);
    cm_free(b->left);
    memset(b, 0, sizeof *b);
}

/* ranks has n_operands + n_results entries. */
static cm_status rb_init(rb *b, uint32_t n_operands, uint32_t n_results, const uint32_t *ranks)
{
    memset(b, 0, sizeof *b);
    b->n_operands = n_operands;
    b->n_tensors = n_operands + n_results;
    b->rank = cm_calloc((size_t)b->n_tensors + 1u, sizeof *b->rank);
    b->base = cm_calloc((size_t)b->n_tensors + 1u, sizeof *b->base);
    if (b->rank == NULL || b->base == NULL) {
        rb_fini(b);
        return CM_ENOMEM;
    }
    for (uint32_t t = 0; t < b->n_tensors; t++) {
        b->rank[t] = ranks[t];
        b->base[t] = b->n_slots;
        b->n_slots += ranks[t];
    }
    return CM_OK;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    uint32_t nc = *cap ? *cap * 2u : 16u;
    while (nc < need) {
        nc *= 2u;
    }
    void *q = cm_realloc(*p, (size_t)nc * elem);
    if (q == NULL) {
        return false;
    }
    *p = q;
    *cap = nc;
    return true;
}

/* Adds a factor; returns its index, or NO_FACTOR after an allocation failure
 * (recorded in b->oom, checked by rb_build). */
static uint32_t rb_factor(rb *b, int64_t size, sp_factor_kind kind, bool blocked)
{
    if (b->oom) {
        return NO_FACTOR;
    }
    if (b->n_factors == b->cap_factors) {
        uint32_t c1 = b->cap_factors, c2 = b->cap_factors, c3 = b->cap_factors;
        uint32_t need = b->n_factors + 1u;
        if (!grow((void **)&b->size, &c1, need, sizeof *b->size) ||
            !grow((void **)&b->kind, &c2, need, sizeof *b->kind) ||
            !grow((void **)&b->blocked, &c3, need, sizeof *b->blocked)) {
            b->oom = true;
            return NO_FACTOR;
        }
        b->cap_factors = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    }
    uint32_t f = b->n_factors++;
    b->size[f] = size;
    b->kind[f] = (uint8_t)kind;
    b->blocked[f] = blocked ? 1u : 0u;
    return f;
}

/* Maps dimension dim of tensor t (operands first, then results) to factor f. */
static void rb_map(rb *b, uint32_t t, uint32_t dim, uint32_t f)
{
    if (f == NO_FACTOR || b->oom) {
        return;
    }
    assert(t < b->n_tensors && dim < b->rank[t]);
    if (!grow((void **)&b->ents, &b->cap_ents, b->n_ents + 1u, sizeof *b->ents)) {
        b->oom = true;
        return;
    }
    b->ents[b->n_ents].slot = b->base[t] + dim;
    b->ents[b->n_ents].factor = f;
    b->n_ents++;
}

/* Leaves dimension dim of tensor t without a factor on purpose: the build
 * gives it a size-one factor of its own. */
static void rb_leave(rb *b, uint32_t t, uint32_t dim)
{
    if (b->oom) {
        return;
    }
    assert(t < b->n_tensors && dim < b->rank[t]);
    if (b->left == NULL) {
        b->left = cm_calloc((size_t)b->n_slots + 1u, 1);
        if (b->left == NULL) {
            b->oom = true;
            return;
        }
    }
    b->left[b->base[t] + dim] = 1;
}

static void *azalloc(cm_arena *a, size_t n, size_t elem)
{
    size_t bytes;
    if (!cm_mul_size(n ? n : 1u, elem, &bytes)) {
        return NULL;
    }
    return cm_arena_zalloc(a, bytes);
}

/* Builds the rule into arena a. Like Shardy's builder, a dimension with
 * several factors loses its size-one factors (one is kept when all are size
 * one) and factors mapped nowhere are dropped, the rest renumbered in order. */
/* Gives every dimension no factor maps a factor of size 1 of its own, in
 * tensor order (Shardy's buildTensorMappingAttrList), for the rules that
 * leave dimensions out on purpose (conservative propagation). */
static void rb_fill_unmapped(rb *b)
{
    uint8_t *mapped = cm_calloc((size_t)b->n_slots + 1u, 1);
    if (mapped == NULL) {
        b->oom = true;
        return;
    }
    for (uint32_t e = 0; e < b->n_ents; e++) {
        mapped[b->ents[e].slot] = 1;
    }
    for (uint32_t t = 0; t < b->n_tensors; t++) {
        for (uint32_t d = 0; d < b->rank[t]; d++) {
            if (!mapped[b->base[t] + d]) {
                rb_map(b, t, d, rb_factor(b, 1, SP_FACTOR_PASS_THROUGH, false));
            }
        }
    }
    cm_free(mapped);
}

static cm_status rb_build(rb *b, cm_arena *a, sp_rule **out)
{
    *out = NULL;
    if (b->oom) {
        return CM_ENOMEM;
    }
    cm_status st = CM_ENOMEM;
    uint32_t *off = cm_calloc((size_t)b->n_slots + 2u, sizeof *off);
    uint32_t *fill = cm_calloc((size_t)b->n_ents + 1u, sizeof *fill);
    uint32_t *keep = cm_calloc((size_t)b->n_slots + 1u, sizeof *keep); /* kept count per slot */
    uint32_t *newid = cm_calloc((size_t)b->n_factors + 1u, sizeof *newid);
    uint32_t *cur = cm_calloc((size_t)b->n_slots + 1u, sizeof *cur);
    if (off == NULL || fill == NULL || keep == NULL || newid == NULL || cur == NULL) {
        goto out;
    }
    for (uint32_t e = 0; e < b->n_ents; e++) {
        off[b->ents[e].slot + 1u]++;
    }
    for (uint32_t s = 0; s < b->n_slots; s++) {
        off[s + 1u] += off[s];
    }
    for (uint32_t e = 0; e < b->n_ents; e++) {
        uint32_t s = b->ents[e].slot;
        fill[off[s] + cur[s]++] = b->ents[e].factor;
    }
    /* filter in place: fill[off[s] .. off[s] + keep[s]) are the kept factors */
    for (uint32_t s = 0; s < b->n_slots; s++) {
        uint32_t n = off[s + 1u] - off[s];
        uint32_t *fs = fill + off[s];
        if (n <= 1u) {
            keep[s] = n;
            continue;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (b->size[fs[i]] != 1) {
                fs[k++] = fs[i];
            }
        }
        keep[s] = k ? k : 1u; /* all size one: the first stays */
    }
    for (uint32_t f = 0; f < b->n_factors; f++) {
        newid[f] = NO_FACTOR;
    }
    for (uint32_t s = 0; s < b->n_slots; s++) {
        for (uint32_t i = 0; i < keep[s]; i++) {
            newid[fill[off[s] + i]] = 0;
        }
    }
    uint32_t n_used = 0;
    for (uint32_t f = 0; f < b->n_factors; f++) {
        if (newid[f] != NO_FACTOR) {
            newid[f] = n_used++;
        }
    }
    /* a dimension no factor maps gets a fresh size-one factor of its own,
     * after all others, in tensor and dimension order (as Shardy's build) */
    uint32_t n_mapped = n_used;
    for (uint32_t s = 0; s < b->n_slots; s++) {
        n_used += keep[s] == 0 ? 1u : 0u;
    }
    sp_rule *r = azalloc(a, 1, sizeof *r);
    if (r == NULL) {
        goto out;
    }
    r->n_factors = n_used;
    r->factor_sizes = azalloc(a, n_used, sizeof *r->factor_sizes);
    r->factor_kind = azalloc(a, n_used, sizeof *r->factor_kind);
    r->factor_blocked = azalloc(a, n_used, sizeof *r->factor_blocked);
    r->n_operands = b->n_operands;
    r->n_results = b->n_tensors - b->n_operands;
    r->operands = azalloc(a, r->n_operands, sizeof *r->operands);
    r->results = azalloc(a, r->n_results, sizeof *r->results);
    if (r->factor_sizes == NULL || r->factor_kind == NULL || r->factor_blocked == NULL ||
        r->operands == NULL || r->results == NULL) {
        goto out;
    }
    for (uint32_t f = 0; f < b->n_factors; f++) {
        if (newid[f] != NO_FACTOR) {
            r->factor_sizes[newid[f]] = b->size[f];
            r->factor_kind[newid[f]] = b->kind[f];
            r->factor_blocked[newid[f]] = b->blocked[f];
        }
    }
    for (uint32_t f = n_mapped; f < n_used; f++) {
        r->factor_sizes[f] = 1; /* pass-through, not blocked (zeroed) */
    }
    uint32_t next_one = n_mapped;
    for (uint32_t t = 0; t < b->n_tensors; t++) {
        sp_tensor_mapping *tm =
            t < b->n_operands ? &r->operands[t] : &r->results[t - b->n_operands];
        tm->rank = b->rank[t];
        tm->dims = azalloc(a, tm->rank, sizeof *tm->dims);
        if (tm->dims == NULL) {
            goto out;
        }
        for (uint32_t d = 0; d < tm->rank; d++) {
            uint32_t s = b->base[t] + d;
            sp_dim_mapping *dm = &tm->dims[d];
            dm->n_factors = keep[s] == 0 ? 1u : keep[s];
            dm->factors = azalloc(a, dm->n_factors, sizeof *dm->factors);
            if (dm->factors == NULL) {
                goto out;
            }
            if (keep[s] == 0) {
                dm->factors[0] = next_one++;
            }
            for (uint32_t i = 0; i < keep[s]; i++) {
                dm->factors[i] = newid[fill[off[s] + i]];
            }
        }
    }
    *out = r;
    st = CM_OK;
out:
    cm_free(off);
    cm_free(fill);
    cm_free(keep);
    cm_free(newid);
    cm_free(cur);
    return st;
}

/* ==== per-op context and helpers ============================================= */

typedef struct rctx {
    sp_module *m;
    uint32_t opid;
    const sp_op *op;
    const sp_rule_opts *opts;
    sp_diags *diags;
    cm_error *err;
    rb b;
    bool none; /* the op has no rule */
} rctx;

#define RES(c, i) ((c)->op->n_operands + (uint32_t)(i))

static cm_status bad(rctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static cm_status bad(rctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_status st = sp_op_errorv(c->m, c->opid, c->err, fmt, ap);
    va_end(ap);
    return st;
}

static cm_status no_rule(rctx *c)
{
    c->none = true;
    return CM_OK;
}

static const sp_type *ttype(const rctx *c, uint32_t t)
{
    uint32_t v =
        t < c->op->n_operands ? c->op->operands[t] : c->op->first_result + (t - c->op->n_operands);
    return sp_value_type(c->m, v);
}

static uint32_t trank(const rctx *c, uint32_t t)
{
    return c->b.rank[t];
}

/* Size of dim d of tensor t (the tensor must have rank > d). */
static int64_t tdim(const rctx *c, uint32_t t, uint32_t d)
{
    const sp_type *ty = ttype(c, t);
    assert(ty->kind == SP_TYPE_TENSOR && d < ty->rank);
    return ty->dims[d];
}

static bool same_dims(const rctx *c, uint32_t t, uint32_t u)
{
    if (trank(c, t) != trank(c, u)) {
        return false;
    }
    for (uint32_t d = 0; d < trank(c, t); d++) {
        if (tdim(c, t, d) != tdim(c, u, d)) {
            return false;
        }
    }
    return true;
}

static const sp_attr *op_attr(const rctx *c, const char *name)
{
    return sp_op_attr(c->m, c->opid, name);
}

/* Reads an integer list; an absent attribute reads as empty unless required. */
static cm_status ints_of(rctx *c, const sp_attr *a, const char *name, bool required,
                         const int64_t **v, uint32_t *n)
{
    *v = NULL;
    *n = 0;
    if (a == NULL) {
        if (required) {
            return bad(c, "missing attribute %s", name);
        }
        return CM_OK;
    }
    if (!sp_attr_ints(a, v, n, &c->m->arena)) {
        bool ints = a->kind == SP_ATTR_ARRAY;
        for (uint32_t i = 0; ints && i < a->u.arr.n; i++) {
            ints = a->u.arr.items[i]->kind == SP_ATTR_INT;
        }
        if (ints) { /* only the scratch copy failed */
            return cm_error_oom(c->err);
        }
        return bad(c, "attribute %s is not a list of integers", name);
    }
    return CM_OK;
}

/* Reads one integer (an INT, or a one-element list). */
static cm_status int_of(rctx *c, const sp_attr *a, const char *name, bool required, int64_t dflt,
                        int64_t *out)
{
    const int64_t *v;
    uint32_t n;
    cm_status st = ints_of(c, a, name, required, &v, &n);
    if (st != CM_OK) {
        return st;
    }
    if (a == NULL) {
        *out = dflt;
        return CM_OK;
    }
    if (n != 1) {
        return bad(c, "attribute %s must be one integer", name);
    }
    *out = v[0];
    return CM_OK;
}

/* A dimension index read from an attribute, checked against rank. */
static cm_status dim_of(rctx *c, int64_t v, uint32_t rank, const char *what, uint32_t *out)
{
    *out = (uint32_t)v;
    return sp_op_dim_check(c->m, c->opid, v, rank, what, c->err);
}

/* Checks that list v of n dims are in range for rank and pairwise distinct. */
static cm_status dims_ok(rctx *c, const int64_t *v, uint32_t n, uint32_t rank, const char *what)
{
    return sp_op_dims_check(c->m, c->opid, v, n, rank, what, c->err);
}

static bool in_list(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return true;
        }
    }
    return false;
}

/* Position of x in v, or -1. */
static int64_t index_in(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return (int64_t)i;
        }
    }
    return -1;
}

/* One factor per dimension of tensor `ref`, shared by every tensor of the same
 * rank (scalars and other ranks get nothing). */
static void pointwise(rctx *c, uint32_t ref)
{
    uint32_t r = trank(c, ref);
    for (uint32_t d = 0; d < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, ref, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            if (trank(c, t) == r) {
                rb_map(&c->b, t, d, f);
            }
        }
    }
}

/* Checks that every tensor of rank > 0 has the shape of `ref`. */
static bool all_same_shape(const rctx *c, uint32_t ref)
{
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        if (trank(c, t) != 0 && !same_dims(c, t, ref)) {
            return false;
        }
    }
    return true;
}

/* ==== op families ============================================================ */

static cm_status rule_elementwise(rctx *c)
{
    if (c->op->n_results == 0) {
        return no_rule(c);
    }
    uint32_t ref = RES(c, 0);
    if (!all_same_shape(c, ref)) {
        return bad(c, "operand and result shapes differ");
    }
    pointwise(c, ref);
    return CM_OK;
}

/* Collectives that keep shapes (all_reduce, collective_permute): pointwise
 * when every operand and result has one shape, else no rule. */
static cm_status rule_same_shape(rctx *c)
{
    if (c->op->n_results == 0 || !all_same_shape(c, RES(c, 0))) {
        return no_rule(c);
    }
    pointwise(c, RES(c, 0));
    return CM_OK;
}

/* Whether the n operands share one shape and the n results another. */
static bool same_operand_and_result_shapes(const rctx *c, uint32_t n)
{
    for (uint32_t t = 1; t < n; t++) {
        if (!same_dims(c, t, 0) || !same_dims(c, RES(c, t), RES(c, 0))) {
            return false;
        }
    }
    return true;
}

/* all_gather (dim attr "all_gather_dim") and reduce_scatter
 * ("scatter_dimension"): pointwise except the gathered/scattered dimension,
 * which gets an operand-only then a result-only need_replication factor. */
static cm_status rule_gather_scatter_collective(rctx *c, const char *dim_attr)
{
    uint32_t n = c->op->n_operands;
    if (n == 0 || c->op->n_results != n) {
        return no_rule(c);
    }
    int64_t gd;
    cm_status st = int_of(c, op_attr(c, dim_attr), dim_attr, true, 0, &gd);
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0), g = 0;
    if ((st = dim_of(c, gd, r, dim_attr, &g)) != CM_OK) {
        return st;
    }
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        if (trank(c, t) != r) {
            return bad(c, "operands and results must have one rank");
        }
    }
    if (!same_operand_and_result_shapes(c, n)) {
        return no_rule(c); /* variadic with several shapes */
    }
    for (uint32_t d = 0; d < r; d++) {
        if (d == g) {
            continue;
        }
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            rb_map(&c->b, t, d, f);
        }
    }
    uint32_t fo = rb_factor(&c->b, tdim(c, 0, g), SP_FACTOR_NEED_REPLICATION, false);
    for (uint32_t t = 0; t < n; t++) {
        rb_map(&c->b, t, g, fo);
    }
    uint32_t fr = rb_factor(&c->b, tdim(c, RES(c, 0), g), SP_FACTOR_NEED_REPLICATION, false);
    for (uint32_t t = 0; t < n; t++) {
        rb_map(&c->b, RES(c, t), g, fr);
    }
    return CM_OK;
}

static cm_status rule_all_to_all(rctx *c)
{
    uint32_t n = c->op->n_operands;
    if (n == 0 || c->op->n_results != n) {
        return no_rule(c);
    }
    int64_t sd, cd;
    cm_status st = int_of(c, op_attr(c, "split_dimension"), "split_dimension", true, 0, &sd);
    if (st == CM_OK) {
        st = int_of(c, op_attr(c, "concat_dimension"), "concat_dimension", true, 0, &cd);
    }
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0), s = 0, k = 0;
    if ((st = dim_of(c, sd, r, "split_dimension", &s)) != CM_OK ||
        (st = dim_of(c, cd, r, "concat_dimension", &k)) != CM_OK) {
        return st;
    }
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        if (trank(c, t) != r) {
            return bad(c, "operands and results must have one rank");
        }
    }
    if (!same_operand_and_result_shapes(c, n)) {
        return no_rule(c); /* variadic with several shapes */
    }
    for (uint32_t d = 0; d < r; d++) {
        if (d == s || d == k) {
            continue;
        }
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            rb_map(&c->b, t, d, f);
        }
    }
    uint32_t dims[2] = {s, k};
    for (uint32_t i = 0; i < (s == k ? 1u : 2u); i++) {
        uint32_t d = dims[i];
        uint32_t fo = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_NEED_REPLICATION, false);
        for (uint32_t t = 0; t < n; t++) {
            rb_map(&c->b, t, d, fo);
        }
        uint32_t fr = rb_factor(&c->b, tdim(c, RES(c, 0), d), SP_FACTOR_NEED_REPLICATION, false);
        for (uint32_t t = 0; t < n; t++) {
            rb_map(&c->b, RES(c, t), d, fr);
        }
    }
    return CM_OK;
}

/* batch_norm_inference (Shardy registers neither training nor grad): the
 * rank-N tensors share one factor per dimension; the 1-D tensors (scale,
 * offset, mean, variance) map to the feature factor. */
static cm_status rule_batch_norm(rctx *c)
{
    if (c->op->n_operands == 0) {
        return no_rule(c);
    }
    int64_t fi;
    cm_status st = int_of(c, op_attr(c, "feature_index"), "feature_index", true, 0, &fi);
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0), fd = 0;
    if ((st = dim_of(c, fi, r, "feature_index", &fd)) != CM_OK) {
        return st;
    }
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        if (trank(c, t) == r ? !same_dims(c, t, 0)
                             : trank(c, t) != 1 || tdim(c, t, 0) != tdim(c, 0, fd)) {
            return bad(c, "operand and result shapes do not match feature_index");
        }
    }
    for (uint32_t d = 0; d < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            if (trank(c, t) == r) {
                rb_map(&c->b, t, d, f);
            } else if (d == fd) {
                rb_map(&c->b, t, 0, f);
            }
        }
    }
    return CM_OK;
}

static cm_status rule_bitcast_convert(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, out = RES(c, 0);
    uint32_t ri = trank(c, in), ro = trank(c, out);
    uint32_t common = ri < ro ? ri : ro;
    if (ri > ro + 1u || ro > ri + 1u) {
        return bad(c, "operand and result ranks differ by more than one");
    }
    for (uint32_t d = 0; d < common; d++) {
        if (tdim(c, in, d) != tdim(c, out, d)) {
            return bad(c, "operand and result shapes differ in dimension %u", d);
        }
        uint32_t f = rb_factor(&c->b, tdim(c, in, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, in, d, f);
        rb_map(&c->b, out, d, f);
    }
    if (ri != ro) {
        uint32_t t = ri > ro ? in : out;
        rb_map(&c->b, t, common,
               rb_factor(&c->b, tdim(c, t, common), SP_FACTOR_NEED_REPLICATION, false));
    }
    return CM_OK;
}

static cm_status rule_broadcast_in_dim(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    const int64_t *bd;
    uint32_t n;
    cm_status st =
        ints_of(c, op_attr(c, "broadcast_dimensions"), "broadcast_dimensions", true, &bd, &n);
    if (st != CM_OK) {
        return st;
    }
    uint32_t in = 0, out = RES(c, 0);
    if (n != trank(c, in)) {
        return bad(c, "broadcast_dimensions has %u entries, operand rank is %u", n, trank(c, in));
    }
    if ((st = dims_ok(c, bd, n, trank(c, out), "broadcast dimension")) != CM_OK) {
        return st;
    }
    for (uint32_t r = 0; r < trank(c, out); r++) {
        int64_t i = index_in(bd, n, (int64_t)r);
        int64_t rs = tdim(c, out, r);
        if (i < 0) {
            rb_map(&c->b, out, r, rb_factor(&c->b, rs, SP_FACTOR_PASS_THROUGH, false));
            continue;
        }
        uint32_t d = (uint32_t)i;
        int64_t is = tdim(c, in, d);
        if (is == rs) {
            uint32_t f = rb_factor(&c->b, rs, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, in, d, f);
            rb_map(&c->b, out, r, f);
        } else {
            /* an expanded size-one dimension */
            rb_map(&c->b, in, d, rb_factor(&c->b, is, SP_FACTOR_PASS_THROUGH, false));
            rb_map(&c->b, out, r, rb_factor(&c->b, rs, SP_FACTOR_PASS_THROUGH, false));
        }
    }
    return CM_OK;
}

/* Pointwise over operand 0's shape with the last n_special dimensions marked. */
static void pointwise_tail(rctx *c, uint32_t n_special, sp_factor_kind kind)
{
    uint32_t r = trank(c, 0);
    for (uint32_t d = 0; d < r; d++) {
        bool sp = d + n_special >= r;
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), sp ? kind : SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            if (trank(c, t) == r) {
                rb_map(&c->b, t, d, f);
            }
        }
    }
}

static cm_status rule_cholesky(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    if (!same_dims(c, 0, RES(c, 0))) {
        return bad(c, "operand and result shapes differ");
    }
    pointwise_tail(c, 2, SP_FACTOR_NEED_REPLICATION);
    return CM_OK;
}

/* The tensor an operand of concatenate is a slice of, or the operand itself. */
static uint32_t slice_source(const rctx *c, uint32_t v, bool *is_slice)
{
    uint32_t def = c->m->values[v].def;
    *is_slice = false;
    if (def != SP_NONE && c->m->ops[def].kind == SP_OP_SLICE && c->m->ops[def].n_operands == 1) {
        *is_slice = true;
        return c->m->ops[def].operands[0];
    }
    return v;
}

static cm_status rule_concatenate(rctx *c)
{
    uint32_t n = c->op->n_operands;
    if (n == 0 || c->op->n_results != 1) {
        return no_rule(c);
    }
    int64_t cd;
    cm_status st = int_of(c, op_attr(c, "dimension"), "dimension", true, 0, &cd);
    if (st != CM_OK) {
        return st;
    }
    uint32_t out = RES(c, 0), r = trank(c, out), k = 0;
    if ((st = dim_of(c, cd, r, "dimension", &k)) != CM_OK) {
        return st;
    }
    for (uint32_t t = 0; t < n; t++) {
        if (trank(c, t) != r) {
            return bad(c, "operand %u has rank %u, result has rank %u", t, trank(c, t), r);
        }
        for (uint32_t d = 0; d < r; d++) {
            if (d != k && tdim(c, t, d) != tdim(c, out, d)) {
                return bad(c, "operand %u differs from the result in dimension %u", t, d);
            }
        }
    }
    /* Concatenating slices (of any tensors), or pieces of one tensor of which
     * at least one is a slice, only permutes data along the dimension. */
    bool all_slices = true, any_slice = false, one_source = true;
    uint32_t src0 = NO_FACTOR;
    for (uint32_t t = 0; t < n; t++) {
        bool is_slice;
        uint32_t src = slice_source(c, c->op->operands[t], &is_slice);
        all_slices = all_slices && is_slice;
        any_slice = any_slice || is_slice;
        if (t == 0) {
            src0 = src;
        } else if (src != src0) {
            one_source = false;
        }
    }
    bool permute = any_slice && (all_slices || one_source);
    for (uint32_t d = 0; d < r; d++) {
        sp_factor_kind kind = SP_FACTOR_PASS_THROUGH;
        if (d == k && c->opts->conservative) {
            /* no factor for the concatenated dimension */
            for (uint32_t t = 0; t < c->b.n_tensors; t++) {
                rb_leave(&c->b, t, d);
            }
            continue;
        }
        if (d == k) {
            kind = permute ? SP_FACTOR_PERMUTATION : SP_FACTOR_NEED_REPLICATION;
        }
        uint32_t f = rb_factor(&c->b, tdim(c, out, d), kind, false);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            rb_map(&c->b, t, d, f);
        }
    }
    if (c->opts->conservative) {
        rb_fill_unmapped(&c->b);
    }
    return CM_OK;
}

/* A windowed dimension whose operand and result differ: a permutation factor
 * of size `size` shared by the given tensors, blocked from propagating with
 * conservative propagation (Shardy's pad, slice and reduce_window rules). */
static void windowed_dim(rctx *c, uint32_t d, int64_t size, const uint32_t *ins, uint32_t n_ins,
                         const uint32_t *outs, uint32_t n_outs)
{
    uint32_t f = rb_factor(&c->b, size, SP_FACTOR_PERMUTATION, c->opts->conservative);
    for (uint32_t i = 0; i < n_ins; i++) {
        rb_map(&c->b, ins[i], d, f);
    }
    for (uint32_t i = 0; i < n_outs; i++) {
        rb_map(&c->b, outs[i], d, f);
    }
}

static cm_status rule_pad(rctx *c)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, out = RES(c, 0), r = trank(c, in);
    const int64_t *lo, *hi, *inner;
    uint32_t nl, nh, ni;
    cm_status st = ints_of(c, op_attr(c, "edge_padding_low"), "edge_padding_low", true, &lo, &nl);
    if (st == CM_OK) {
        st = ints_of(c, op_attr(c, "edge_padding_high"), "edge_padding_high", true, &hi, &nh);
    }
    if (st == CM_OK) {
        st = ints_of(c, op_attr(c, "interior_padding"), "interior_padding", false, &inner, &ni);
    }
    if (st != CM_OK) {
        return st;
    }
    if (trank(c, out) != r || nl != r || nh != r || (ni != 0 && ni != r)) {
        return bad(c, "padding lists must have one entry per dimension");
    }
    (void)inner;
    /* as Shardy: a dimension whose size the padding keeps passes through */
    for (uint32_t d = 0; d < r; d++) {
        int64_t is = tdim(c, in, d), os = tdim(c, out, d);
        if (is == os) {
            uint32_t f = rb_factor(&c->b, is, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, in, d, f);
            rb_map(&c->b, out, d, f);
        } else {
            windowed_dim(c, d, is, &in, 1, &out, 1);
        }
    }
    return CM_OK;
}

static cm_status rule_slice(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, out = RES(c, 0), r = trank(c, in);
    if (trank(c, out) != r) {
        return bad(c, "operand and result ranks differ");
    }
    for (uint32_t d = 0; d < r; d++) {
        int64_t is = tdim(c, in, d), os = tdim(c, out, d);
        if (is == os) {
            uint32_t f = rb_factor(&c->b, is, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, in, d, f);
            rb_map(&c->b, out, d, f);
        } else {
            windowed_dim(c, d, is, &in, 1, &out, 1);
        }
    }
    return CM_OK;
}

static cm_status rule_reverse(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    const int64_t *dims;
    uint32_t n;
    cm_status st = ints_of(c, op_attr(c, "dimensions"), "dimensions", true, &dims, &n);
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0);
    if (!same_dims(c, 0, RES(c, 0))) {
        return bad(c, "operand and result shapes differ");
    }
    if ((st = dims_ok(c, dims, n, r, "reversed dimension")) != CM_OK) {
        return st;
    }
    for (uint32_t d = 0; d < r; d++) {
        sp_factor_kind kind =
            in_list(dims, n, (int64_t)d) ? SP_FACTOR_PERMUTATION : SP_FACTOR_PASS_THROUGH;
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), kind, false);
        rb_map(&c->b, 0, d, f);
        rb_map(&c->b, RES(c, 0), d, f);
    }
    return CM_OK;
}

static cm_status rule_transpose(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    const int64_t *perm;
    uint32_t n;
    cm_status st = ints_of(c, op_attr(c, "permutation"), "permutation", true, &perm, &n);
    if (st != CM_OK) {
        return st;
    }
    uint32_t in = 0, out = RES(c, 0);
    if (n != trank(c, in) || n != trank(c, out)) {
        return bad(c, "permutation has %u entries, operand rank is %u", n, trank(c, in));
    }
    if ((st = dims_ok(c, perm, n, n, "permutation entry")) != CM_OK) {
        return st;
    }
    for (uint32_t r = 0; r < n; r++) {
        uint32_t f = rb_factor(&c->b, tdim(c, out, r), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, in, (uint32_t)perm[r], f);
        rb_map(&c->b, out, r, f);
    }
    return CM_OK;
}

/* dot and dot_general (dimension numbers from sp_dot_dims_get, which checked
 * them): batch factors, lhs free, rhs free, then contracting (reduction)
 * factors. */
static cm_status rule_dot(rctx *c)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    sp_dot_dims dd;
    cm_status st = sp_dot_dims_get(c->m, c->opid, &dd, c->err);
    if (st != CM_OK) {
        return st;
    }
    const int64_t *lb = dd.lhs_batch, *rbd = dd.rhs_batch, *lc = dd.lhs_contract,
                  *rc = dd.rhs_contract;
    uint32_t nb = dd.n_batch, nc = dd.n_contract;
    uint32_t lhs = 0, rhs = 1, out = RES(c, 0);
    uint32_t lr = trank(c, lhs), rr = trank(c, rhs);
    uint32_t od = 0;
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t f = rb_factor(&c->b, tdim(c, lhs, (uint32_t)lb[i]), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, lhs, (uint32_t)lb[i], f);
        rb_map(&c->b, rhs, (uint32_t)rbd[i], f);
        rb_map(&c->b, out, od++, f);
    }
    for (uint32_t d = 0; d < lr; d++) {
        if (in_list(lb, nb, (int64_t)d) || in_list(lc, nc, (int64_t)d)) {
            continue;
        }
        uint32_t f = rb_factor(&c->b, tdim(c, lhs, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, lhs, d, f);
        rb_map(&c->b, out, od++, f);
    }
    for (uint32_t d = 0; d < rr; d++) {
        if (in_list(rbd, nb, (int64_t)d) || in_list(rc, nc, (int64_t)d)) {
            continue;
        }
        uint32_t f = rb_factor(&c->b, tdim(c, rhs, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, rhs, d, f);
        rb_map(&c->b, out, od++, f);
    }
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t f = rb_factor(&c->b, tdim(c, lhs, (uint32_t)lc[i]), SP_FACTOR_REDUCTION, false);
        rb_map(&c->b, lhs, (uint32_t)lc[i], f);
        rb_map(&c->b, rhs, (uint32_t)rc[i], f);
    }
    return CM_OK;
}

/* A convolution spatial dimension: lhs size L, kernel size R, result size O.
 * The lhs dimension becomes the compound of the number of windows (a
 * permutation factor shared with the result) and the window (a reduction
 * factor shared with the kernel), the larger of O and R first and the other
 * sized by integer division, as the registry's tests show (224 with O=112,
 * R=3 is [112, 2] with the kernel on the 2). A 1-window dimension (L == O,
 * R == 1) passes through. */
static void conv_spatial(rctx *c, uint32_t ld, uint32_t kd, uint32_t od, int64_t L, int64_t R,
                         int64_t O)
{
    uint32_t lhs = 0, rhs = 1, out = RES(c, 0);
    if (c->opts->conservative) {
        return; /* no spatial factors: each dimension gets a size-1 factor of its own */
    }
    if (L == O && R == 1) {
        uint32_t f = rb_factor(&c->b, O, SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, lhs, ld, f);
        rb_map(&c->b, out, od, f);
        rb_map(&c->b, rhs, kd, rb_factor(&c->b, 1, SP_FACTOR_REDUCTION, false));
        return;
    }
    if (!c->opts->conservative && O > 0 && R > 0) {
        uint32_t fw, fk;
        if (O >= R) {
            fw = rb_factor(&c->b, O, SP_FACTOR_PERMUTATION, false);
            fk = rb_factor(&c->b, L / O, SP_FACTOR_REDUCTION, false);
            rb_map(&c->b, lhs, ld, fw);
            rb_map(&c->b, lhs, ld, fk);
        } else {
            fk = rb_factor(&c->b, R, SP_FACTOR_REDUCTION, false);
            fw = rb_factor(&c->b, L / R, SP_FACTOR_PERMUTATION, false);
            rb_map(&c->b, lhs, ld, fk);
            rb_map(&c->b, lhs, ld, fw);
        }
        rb_map(&c->b, rhs, kd, fk);
        rb_map(&c->b, out, od, fw);
        return;
    }
    /* an empty dimension: nothing propagates */
    rb_map(&c->b, lhs, ld, rb_factor(&c->b, L, SP_FACTOR_NEED_REPLICATION, false));
    rb_map(&c->b, out, od, rb_factor(&c->b, O, SP_FACTOR_NEED_REPLICATION, false));
    rb_map(&c->b, rhs, kd, rb_factor(&c->b, R, SP_FACTOR_NEED_REPLICATION, false));
}

static cm_status rule_convolution(rctx *c)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t lhs = 0, rhs = 1, out = RES(c, 0);
    sp_conv_dims cd;
    cm_status st = sp_conv_dims_get(c->m, c->opid, &cd, c->err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t ib = (uint32_t)cd.input_batch, ifd = (uint32_t)cd.input_feature,
             kif = (uint32_t)cd.kernel_input_feature, kof = (uint32_t)cd.kernel_output_feature,
             ob = (uint32_t)cd.output_batch, of = (uint32_t)cd.output_feature;
    const int64_t *is = cd.input_spatial, *ks = cd.kernel_spatial, *os = cd.output_spatial;
    uint32_t nis = cd.n_spatial;
    int64_t bgc = cd.batch_group_count, fgc = cd.feature_group_count;
    int64_t groups = 0;
    if (!cm_mul_i64(bgc, fgc, &groups) || tdim(c, lhs, ib) % bgc != 0 ||
        tdim(c, lhs, ifd) % fgc != 0 || tdim(c, rhs, kof) % groups != 0) {
        return bad(c, "group counts do not divide the batch and feature sizes");
    }
    /* batch */
    if (bgc > 1) {
        uint32_t fbg = rb_factor(&c->b, bgc, SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, lhs, ib, fbg);
        rb_map(&c->b, rhs, kof, fbg);
        rb_map(&c->b, out, of, fbg);
    }
    uint32_t fb = rb_factor(&c->b, tdim(c, lhs, ib) / bgc, SP_FACTOR_PASS_THROUGH, false);
    rb_map(&c->b, lhs, ib, fb);
    rb_map(&c->b, out, ob, fb);
    /* spatial: no factors with conservative propagation */
    for (uint32_t i = 0; i < nis && c->opts->conservative; i++) {
        rb_leave(&c->b, lhs, (uint32_t)is[i]);
        rb_leave(&c->b, rhs, (uint32_t)ks[i]);
        rb_leave(&c->b, out, (uint32_t)os[i]);
    }
    for (uint32_t i = 0; i < nis && !c->opts->conservative; i++) {
        uint32_t ld = (uint32_t)is[i], kd = (uint32_t)ks[i], od = (uint32_t)os[i];
        conv_spatial(c, ld, kd, od, tdim(c, lhs, ld), tdim(c, rhs, kd), tdim(c, out, od));
    }
    /* input feature */
    if (fgc > 1) {
        uint32_t fg = rb_factor(&c->b, fgc, SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, lhs, ifd, fg);
        rb_map(&c->b, rhs, kof, fg);
        rb_map(&c->b, out, of, fg);
    }
    uint32_t fi = rb_factor(&c->b, tdim(c, lhs, ifd) / fgc, SP_FACTOR_REDUCTION, false);
    rb_map(&c->b, lhs, ifd, fi);
    rb_map(&c->b, rhs, kif, fi);
    /* output feature (per group) */
    uint32_t fo = rb_factor(&c->b, tdim(c, rhs, kof) / groups, SP_FACTOR_PASS_THROUGH, false);
    rb_map(&c->b, rhs, kof, fo);
    rb_map(&c->b, out, of, fo);
    if (c->opts->conservative) {
        rb_fill_unmapped(&c->b);
    }
    return CM_OK;
}

static bool is_constant_value(const rctx *c, uint32_t v)
{
    uint32_t def = c->m->values[v].def;
    if (def == SP_NONE) {
        return false;
    }
    uint32_t k = c->m->ops[def].kind;
    return k == SP_OP_CONSTANT || k == SP_OP_SDY_CONSTANT;
}

static cm_status rule_dynamic_slice(rctx *c)
{
    if (c->op->n_operands < 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, out = RES(c, 0), r = trank(c, in);
    if (trank(c, out) != r) {
        return bad(c, "operand and result ranks differ");
    }
    for (uint32_t i = 1; i < c->op->n_operands; i++) {
        if (trank(c, i) != 0) {
            return bad(c, "start index %u is not a scalar", i - 1u);
        }
    }
    for (uint32_t d = 0; d < r; d++) {
        int64_t is = tdim(c, in, d);
        bool sliced = is != tdim(c, out, d);
        uint32_t f = rb_factor(
            &c->b, is, sliced ? SP_FACTOR_NEED_REPLICATION : SP_FACTOR_PASS_THROUGH, sliced);
        rb_map(&c->b, in, d, f);
        rb_map(&c->b, out, d, f);
    }
    return CM_OK;
}

static cm_status rule_dynamic_update_slice(rctx *c)
{
    if (c->op->n_operands < 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, upd = 1, out = RES(c, 0), r = trank(c, in);
    if (trank(c, upd) != r || !same_dims(c, in, out)) {
        return bad(c, "operand, update and result ranks differ");
    }
    bool constant = true;
    for (uint32_t i = 2; i < c->op->n_operands; i++) {
        if (trank(c, i) != 0) {
            return bad(c, "start index %u is not a scalar", i - 2u);
        }
        constant = constant && is_constant_value(c, c->op->operands[i]);
    }
    for (uint32_t d = 0; d < r; d++) {
        int64_t is = tdim(c, in, d), us = tdim(c, upd, d);
        uint32_t f = rb_factor(&c->b, is, SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, in, d, f);
        if (is == us) {
            rb_map(&c->b, upd, d, f);
        }
        rb_map(&c->b, out, d, f);
        if (is != us) {
            rb_map(&c->b, upd, d,
                   rb_factor(&c->b, us,
                             constant ? SP_FACTOR_PASS_THROUGH : SP_FACTOR_NEED_REPLICATION,
                             false));
        }
    }
    return CM_OK;
}

static cm_status rule_fft(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    const sp_attr *ty = op_attr(c, "fft_type");
    const char *kind = NULL;
    if (ty != NULL && ty->kind == SP_ATTR_ENUM) {
        kind = ty->u.enm.value;
    } else if (ty != NULL && ty->kind == SP_ATTR_STRING) {
        kind = ty->u.str.s;
    }
    if (kind == NULL) {
        return bad(c, "missing fft_type");
    }
    const int64_t *len;
    uint32_t n;
    cm_status st = ints_of(c, op_attr(c, "fft_length"), "fft_length", true, &len, &n);
    if (st != CM_OK) {
        return st;
    }
    uint32_t in = 0, out = RES(c, 0), r = trank(c, in);
    if (trank(c, out) != r || n > r) {
        return bad(c, "fft_length does not match the operand rank");
    }
    bool real = strcmp(kind, "RFFT") == 0 || strcmp(kind, "IRFFT") == 0;
    for (uint32_t d = 0; d < r; d++) {
        bool fd = d + n >= r;
        uint32_t f = rb_factor(&c->b, tdim(c, in, d),
                               fd ? SP_FACTOR_NEED_REPLICATION : SP_FACTOR_PASS_THROUGH,
                               real && d + 1u == r);
        rb_map(&c->b, in, d, f);
        rb_map(&c->b, out, d, f);
    }
    return CM_OK;
}

/* ---- gather and scatter ----------------------------------------------------- */

/* The operand dimension of the k-th window dimension. */
static uint32_t window_operand_dim(const sp_gather_dims *x, uint32_t k, uint32_t orank)
{
    uint32_t seen = 0;
    for (uint32_t d = 0; d < orank; d++) {
        if (in_list(x->collapsed, x->n_collapsed, (int64_t)d) ||
            in_list(x->operand_batch, x->n_operand_batch, (int64_t)d)) {
            continue;
        }
        if (seen++ == k) {
            return d;
        }
    }
    return 0; /* unreachable after sp_gather_dims_get */
}

/* The indices dimension of the j-th batch dimension (skipping index_vector_dim). */
static uint32_t batch_indices_dim(const sp_gather_dims *x, uint32_t j)
{
    return (int64_t)j < x->index_vector_dim ? j : j + 1u;
}

static cm_status rule_gather(rctx *c)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    sp_gather_dims x;
    int64_t ss[SP_MAX_RANK];
    uint32_t nss;
    uint32_t opd = 0, idx = 1, out = RES(c, 0);
    uint32_t orank = trank(c, opd), irank = trank(c, idx), rrank = trank(c, out);
    cm_status st = sp_gather_dims_get(c->m, c->opid, &x, c->err);
    if (st == CM_OK) {
        st = sp_gather_slice_sizes_get(c->m, c->opid, ss, &nss, c->err);
    }
    if (st != CM_OK) {
        return st;
    }
    uint32_t nbatch = 0;
    for (uint32_t r = 0; r < rrank; r++) {
        int64_t k = index_in(x.offset, x.n_offset, (int64_t)r);
        int64_t rs = tdim(c, out, r);
        if (k < 0) {
            uint32_t id = batch_indices_dim(&x, nbatch++);
            uint32_t f = rb_factor(&c->b, rs, SP_FACTOR_PASS_THROUGH, false);
            int64_t p = index_in(x.indices_batch, x.n_indices_batch, (int64_t)id);
            if (p >= 0) {
                rb_map(&c->b, opd, (uint32_t)x.operand_batch[p], f);
            }
            rb_map(&c->b, idx, id, f);
            rb_map(&c->b, out, r, f);
            continue;
        }
        uint32_t d = window_operand_dim(&x, (uint32_t)k, orank);
        int64_t D = tdim(c, opd, d), s = ss[d];
        if (s == D) {
            uint32_t f = rb_factor(&c->b, D, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, opd, d, f);
            rb_map(&c->b, out, r, f);
        } else if (s == 1) {
            rb_map(&c->b, opd, d, rb_factor(&c->b, D, SP_FACTOR_REDUCTION, false));
            rb_map(&c->b, out, r, rb_factor(&c->b, rs, SP_FACTOR_NEED_REPLICATION, false));
        } else {
            uint32_t f = rb_factor(&c->b, D, SP_FACTOR_NEED_REPLICATION, true);
            rb_map(&c->b, opd, d, f);
            rb_map(&c->b, out, r, f);
        }
    }
    for (uint32_t i = 0; i < x.n_collapsed; i++) {
        uint32_t d = (uint32_t)x.collapsed[i];
        int64_t D = tdim(c, opd, d);
        rb_map(
            &c->b, opd, d,
            rb_factor(&c->b, D, D == 1 ? SP_FACTOR_NEED_REPLICATION : SP_FACTOR_REDUCTION, false));
    }
    if (x.index_vector_dim < (int64_t)irank) {
        uint32_t id = (uint32_t)x.index_vector_dim;
        rb_map(&c->b, idx, id,
               rb_factor(&c->b, tdim(c, idx, id), SP_FACTOR_NEED_REPLICATION, false));
    }
    return CM_OK;
}

static cm_status rule_scatter(rctx *c)
{
    uint32_t nops = c->op->n_operands;
    if (nops < 3 || nops % 2u != 1u || c->op->n_results != (nops - 1u) / 2u) {
        return no_rule(c);
    }
    uint32_t n = (nops - 1u) / 2u; /* inputs, indices, updates */
    uint32_t idx = n, upd0 = n + 1u;
    sp_gather_dims x;
    uint32_t orank = trank(c, 0), irank = trank(c, idx), urank = trank(c, upd0);
    cm_status st = sp_gather_dims_get(c->m, c->opid, &x, c->err);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!same_dims(c, i, 0) || !same_dims(c, RES(c, i), 0) || !same_dims(c, upd0 + i, upd0)) {
            return bad(c, "inputs, updates and results must have matching shapes");
        }
    }
    /* a batch dimension only in the indices and updates: a reduction when
     * the update computation is one supported reduction (Shardy) */
    sp_factor_kind scatter_kind = sp_scatter_reduction(c->m, c->opid) != NULL
                                      ? SP_FACTOR_REDUCTION
                                      : SP_FACTOR_NEED_REPLICATION;
    uint32_t nbatch = 0;
    for (uint32_t u = 0; u < urank; u++) {
        int64_t k = index_in(x.offset, x.n_offset, (int64_t)u);
        int64_t us = tdim(c, upd0, u);
        if (k < 0) {
            uint32_t id = batch_indices_dim(&x, nbatch++);
            int64_t p = index_in(x.indices_batch, x.n_indices_batch, (int64_t)id);
            uint32_t f =
                rb_factor(&c->b, us, p >= 0 ? SP_FACTOR_PASS_THROUGH : scatter_kind, false);
            for (uint32_t i = 0; i < n && p >= 0; i++) {
                rb_map(&c->b, i, (uint32_t)x.operand_batch[p], f);
            }
            rb_map(&c->b, idx, id, f);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, upd0 + i, u, f);
            }
            for (uint32_t i = 0; i < n && p >= 0; i++) {
                rb_map(&c->b, RES(c, i), (uint32_t)x.operand_batch[p], f);
            }
            continue;
        }
        uint32_t d = window_operand_dim(&x, (uint32_t)k, orank);
        int64_t D = tdim(c, 0, d);
        if (D == us) {
            uint32_t f = rb_factor(&c->b, D, SP_FACTOR_PASS_THROUGH, false);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, i, d, f);
                rb_map(&c->b, upd0 + i, u, f);
                rb_map(&c->b, RES(c, i), d, f);
            }
        } else {
            uint32_t fo = rb_factor(&c->b, D, SP_FACTOR_NEED_REPLICATION, false);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, i, d, fo);
                rb_map(&c->b, RES(c, i), d, fo);
            }
            uint32_t fu = rb_factor(&c->b, us, SP_FACTOR_NEED_REPLICATION, false);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, upd0 + i, u, fu);
            }
        }
    }
    for (uint32_t j = 0; j < x.n_collapsed; j++) {
        uint32_t d = (uint32_t)x.collapsed[j];
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t i = 0; i < n; i++) {
            rb_map(&c->b, i, d, f);
            rb_map(&c->b, RES(c, i), d, f);
        }
    }
    if (x.index_vector_dim < (int64_t)irank) {
        uint32_t id = (uint32_t)x.index_vector_dim;
        rb_map(&c->b, idx, id,
               rb_factor(&c->b, tdim(c, idx, id), SP_FACTOR_NEED_REPLICATION, false));
    }
    return CM_OK;
}

/* ---- reductions and windows --------------------------------------------------- */

static cm_status rule_reduce(rctx *c)
{
    uint32_t nops = c->op->n_operands;
    if (nops < 2 || nops % 2u != 0 || c->op->n_results != nops / 2u) {
        return no_rule(c);
    }
    uint32_t n = nops / 2u;
    const int64_t *dims;
    uint32_t nd;
    cm_status st = ints_of(c, op_attr(c, "dimensions"), "dimensions", true, &dims, &nd);
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0);
    if ((st = dims_ok(c, dims, nd, r, "reduced dimension")) != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!same_dims(c, i, 0) || trank(c, RES(c, i)) + nd != r) {
            return bad(c, "inputs and results do not match the reduced dimensions");
        }
    }
    uint32_t rd = 0;
    for (uint32_t d = 0; d < r; d++) {
        bool reduced = in_list(dims, nd, (int64_t)d);
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d),
                               reduced ? SP_FACTOR_REDUCTION : SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t i = 0; i < n; i++) {
            rb_map(&c->b, i, d, f);
        }
        if (!reduced) {
            for (uint32_t i = 0; i < n; i++) {
                if (tdim(c, RES(c, i), rd) != tdim(c, 0, d)) {
                    return bad(c, "result %u differs from the input in dimension %u", i, rd);
                }
                rb_map(&c->b, RES(c, i), rd, f);
            }
            rd++;
        }
    }
    return CM_OK;
}

/* Whether the window leaves dimension d as it is (dilations: whether they
 * count, as they do for reduce_window). */
static bool window_trivial(const sp_window *w, bool dilations, uint32_t d)
{
    return (w->n_dims == 0 || w->dims[d] == 1) && (w->n_strides == 0 || w->strides[d] == 1) &&
           (!dilations || w->n_base_dilations == 0 || w->base_dilations[d] == 1) &&
           (!dilations || w->n_window_dilations == 0 || w->window_dilations[d] == 1) &&
           (w->n_padding == 0 || (w->padding[2u * d] == 0 && w->padding[2u * d + 1u] == 0));
}

static cm_status rule_reduce_window(rctx *c)
{
    uint32_t nops = c->op->n_operands;
    if (nops < 2 || nops % 2u != 0 || c->op->n_results != nops / 2u) {
        return no_rule(c);
    }
    uint32_t n = nops / 2u, r = trank(c, 0);
    sp_window w;
    cm_status st = sp_window_get(c->m, c->opid, &w, c->err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t ins[SP_MAX_RANK], outs[SP_MAX_RANK];
    if (n > SP_MAX_RANK) {
        return no_rule(c);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!same_dims(c, i, 0) || !same_dims(c, RES(c, i), RES(c, 0)) ||
            trank(c, RES(c, i)) != r) {
            return bad(c, "inputs and results must have matching shapes");
        }
        ins[i] = i;
        outs[i] = RES(c, i);
    }
    for (uint32_t d = 0; d < r; d++) {
        int64_t os = tdim(c, RES(c, 0), d);
        if (window_trivial(&w, true, d)) {
            uint32_t f = rb_factor(&c->b, os, SP_FACTOR_PASS_THROUGH, false);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, ins[i], d, f);
                rb_map(&c->b, outs[i], d, f);
            }
        } else {
            windowed_dim(c, d, os, ins, n, outs, n);
        }
    }
    return CM_OK;
}

static cm_status rule_select_and_scatter(rctx *c)
{
    if (c->op->n_operands != 3 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t opd = 0, src = 1, out = RES(c, 0), r = trank(c, opd);
    sp_window w;
    cm_status st = sp_window_get(c->m, c->opid, &w, c->err);
    if (st != CM_OK) {
        return st;
    }
    if (trank(c, src) != r || !same_dims(c, opd, out)) {
        return bad(c, "operand, source and result ranks differ");
    }
    for (uint32_t d = 0; d < r; d++) {
        int64_t os = tdim(c, opd, d), ss = tdim(c, src, d);
        if (window_trivial(&w, false, d)) {
            uint32_t f = rb_factor(&c->b, os, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, opd, d, f);
            rb_map(&c->b, src, d, f);
            rb_map(&c->b, out, d, f);
            continue;
        }
        bool cons = c->opts->conservative;
        rb_map(&c->b, src, d, rb_factor(&c->b, ss, SP_FACTOR_NEED_REPLICATION, cons));
        uint32_t f = rb_factor(&c->b, os, SP_FACTOR_PERMUTATION, cons);
        rb_map(&c->b, opd, d, f);
        rb_map(&c->b, out, d, f);
    }
    return CM_OK;
}

/* ---- reshape -------------------------------------------------------------------- */

/* Walks input and output dimensions from the major end keeping, for each
 * side, the product of the sizes consumed so far (pos). While both positions
 * agree, common divisors become shared factors; once they diverge, the side
 * that is behind emits a factor that reaches lcm(posIn, posOut) when it
 * divides its remaining size, else its whole remaining size. Fresh size-one
 * dimensions get their own factor. */
static cm_status rule_reshape(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t in = 0, out = RES(c, 0);
    uint32_t ri = trank(c, in), ro = trank(c, out);
    int64_t ni = 1, no = 1;
    for (uint32_t d = 0; d < ri; d++) {
        if (tdim(c, in, d) == 0) {
            return no_rule(c);
        }
        if (!cm_mul_i64(ni, tdim(c, in, d), &ni)) {
            return no_rule(c);
        }
    }
    for (uint32_t d = 0; d < ro; d++) {
        if (tdim(c, out, d) == 0) {
            return no_rule(c);
        }
        if (!cm_mul_i64(no, tdim(c, out, d), &no)) {
            return no_rule(c);
        }
    }
    if (ni != no) {
        return bad(c, "operand has %lld elements, result %lld", (long long)ni, (long long)no);
    }
    uint32_t di = 0, dout = 0;
    int64_t rem_i = ri ? tdim(c, in, 0) : 1, rem_o = ro ? tdim(c, out, 0) : 1;
    int64_t pos_i = 1, pos_o = 1;
#define NEXT_IN()                                                                                  \
    do {                                                                                           \
        di++;                                                                                      \
        rem_i = di < ri ? tdim(c, in, di) : 1;                                                     \
    } while (0)
#define NEXT_OUT()                                                                                 \
    do {                                                                                           \
        dout++;                                                                                    \
        rem_o = dout < ro ? tdim(c, out, dout) : 1;                                                \
    } while (0)
    while (di < ri || dout < ro) {
        bool ai = di < ri, ao = dout < ro;
        if (ai && ao && pos_i == pos_o && rem_i == rem_o) {
            uint32_t f = rb_factor(&c->b, rem_i, SP_FACTOR_PASS_THROUGH, false);
            rb_map(&c->b, in, di, f);
            rb_map(&c->b, out, dout, f);
            pos_i *= rem_i;
            pos_o = pos_i;
            NEXT_IN();
            NEXT_OUT();
            continue;
        }
        if (ai && rem_i == 1) {
            rb_map(&c->b, in, di, rb_factor(&c->b, 1, SP_FACTOR_PASS_THROUGH, false));
            NEXT_IN();
            continue;
        }
        if (ao && rem_o == 1) {
            rb_map(&c->b, out, dout, rb_factor(&c->b, 1, SP_FACTOR_PASS_THROUGH, false));
            NEXT_OUT();
            continue;
        }
        if (pos_i == pos_o) {
            if (!ai || !ao) {
                return bad(c, "operand and result sizes do not decompose");
            }
            int64_t g = gcd64(rem_i, rem_o);
            if (g > 1) {
                uint32_t f = rb_factor(&c->b, g, SP_FACTOR_PASS_THROUGH, false);
                rb_map(&c->b, in, di, f);
                rb_map(&c->b, out, dout, f);
                rem_i /= g;
                rem_o /= g;
                pos_i *= g;
                pos_o = pos_i;
                if (rem_i == 1) {
                    NEXT_IN();
                }
                if (rem_o == 1) {
                    NEXT_OUT();
                }
                continue;
            }
            rb_map(&c->b, in, di, rb_factor(&c->b, rem_i, SP_FACTOR_PASS_THROUGH, false));
            pos_i *= rem_i;
            NEXT_IN();
            continue;
        }
        bool behind_in = pos_i < pos_o;
        if (behind_in ? !ai : !ao) {
            return bad(c, "operand and result sizes do not decompose");
        }
        int64_t p = behind_in ? pos_i : pos_o, q = behind_in ? pos_o : pos_i;
        int64_t rem = behind_in ? rem_i : rem_o;
        int64_t step = q / gcd64(p, q); /* lcm(p, q) / p */
        int64_t x = rem % step == 0 ? step : rem;
        uint32_t f = rb_factor(&c->b, x, SP_FACTOR_PASS_THROUGH, false);
        if (behind_in) {
            rb_map(&c->b, in, di, f);
            pos_i *= x;
            rem_i /= x;
            if (rem_i == 1) {
                NEXT_IN();
            }
        } else {
            rb_map(&c->b, out, dout, f);
            pos_o *= x;
            rem_o /= x;
            if (rem_o == 1) {
                NEXT_OUT();
            }
        }
    }
#undef NEXT_IN
#undef NEXT_OUT
    return CM_OK;
}

/* ---- other ops ------------------------------------------------------------------ */

static cm_status rule_rng_bit_generator(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 2) {
        return no_rule(c);
    }
    uint32_t st = 0, ost = RES(c, 0), val = RES(c, 1);
    if (!same_dims(c, st, ost)) {
        return bad(c, "initial and output state shapes differ");
    }
    for (uint32_t d = 0; d < trank(c, st); d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, st, d), SP_FACTOR_NEED_REPLICATION, true);
        rb_map(&c->b, st, d, f);
        rb_map(&c->b, ost, d, f);
    }
    for (uint32_t d = 0; d < trank(c, val); d++) {
        rb_map(&c->b, val, d, rb_factor(&c->b, tdim(c, val, d), SP_FACTOR_PASS_THROUGH, false));
    }
    return CM_OK;
}

static cm_status rule_sort(rctx *c)
{
    if (c->op->n_operands == 0 || c->op->n_results != c->op->n_operands) {
        return no_rule(c);
    }
    int64_t sd;
    cm_status st = int_of(c, op_attr(c, "dimension"), "dimension", false, -1, &sd);
    if (st != CM_OK) {
        return st;
    }
    uint32_t r = trank(c, 0), k = 0;
    if (sd < 0) {
        sd += (int64_t)r; /* -1 means the last dimension */
    }
    if ((st = dim_of(c, sd, r, "dimension", &k)) != CM_OK) {
        return st;
    }
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        if (!same_dims(c, t, 0)) {
            return bad(c, "operands and results must have one shape");
        }
    }
    bool others_trivial = true;
    for (uint32_t d = 0; d < r; d++) {
        if (d != k && tdim(c, 0, d) > 1) {
            others_trivial = false;
        }
    }
    for (uint32_t d = 0; d < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d),
                               d == k ? SP_FACTOR_NEED_REPLICATION : SP_FACTOR_PASS_THROUGH,
                               d == k && others_trivial);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            rb_map(&c->b, t, d, f);
        }
    }
    return CM_OK;
}

static bool enum_is(const sp_attr *a, const char *v)
{
    if (a == NULL) {
        return false;
    }
    if (a->kind == SP_ATTR_ENUM) {
        return strcmp(a->u.enm.value, v) == 0;
    }
    if (a->kind == SP_ATTR_STRING) {
        return strcmp(a->u.str.s, v) == 0;
    }
    return false;
}

/* triangular_solve: batch factors, then b's row factor, b's column factor,
 * and the factor a shares with the result only; all but batch need
 * replication. */
static cm_status rule_triangular_solve(rctx *c)
{
    if (c->op->n_operands != 2 || c->op->n_results != 1) {
        return no_rule(c);
    }
    uint32_t a = 0, bb = 1, out = RES(c, 0), r = trank(c, a);
    if (r < 2 || trank(c, bb) != r || !same_dims(c, bb, out)) {
        return bad(c, "a, b and the result must have one rank >= 2 and b the result's shape");
    }
    const sp_attr *ls = op_attr(c, "left_side");
    if (ls == NULL || ls->kind != SP_ATTR_BOOL) {
        return bad(c, "missing left_side");
    }
    bool left = ls->u.b;
    const sp_attr *ta = op_attr(c, "transpose_a");
    bool trans = enum_is(ta, "TRANSPOSE") || enum_is(ta, "ADJOINT");
    for (uint32_t d = 0; d + 2u < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, a, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, a, d, f);
        rb_map(&c->b, bb, d, f);
        rb_map(&c->b, out, d, f);
    }
    uint32_t row = r - 2u, col = r - 1u;
    /* op(a) dims as dims of a */
    uint32_t oa_row = trans ? col : row, oa_col = trans ? row : col;
    uint32_t fj = rb_factor(&c->b, tdim(c, bb, row), SP_FACTOR_NEED_REPLICATION, false);
    uint32_t fk = rb_factor(&c->b, tdim(c, bb, col), SP_FACTOR_NEED_REPLICATION, false);
    uint32_t fl;
    if (left) {
        /* op(a) x = b: op(a)[m, p] x[p, n] = b[m, n] */
        fl = rb_factor(&c->b, tdim(c, a, oa_col), SP_FACTOR_NEED_REPLICATION, false);
        rb_map(&c->b, a, oa_row, fj);
        rb_map(&c->b, a, oa_col, fl);
        rb_map(&c->b, bb, row, fj);
        rb_map(&c->b, bb, col, fk);
        rb_map(&c->b, out, row, fl);
        rb_map(&c->b, out, col, fk);
    } else {
        /* x op(a) = b: x[m, p] op(a)[p, n] = b[m, n] */
        fl = rb_factor(&c->b, tdim(c, a, oa_row), SP_FACTOR_NEED_REPLICATION, false);
        rb_map(&c->b, a, oa_row, fl);
        rb_map(&c->b, a, oa_col, fk);
        rb_map(&c->b, bb, row, fj);
        rb_map(&c->b, bb, col, fk);
        rb_map(&c->b, out, row, fj);
        rb_map(&c->b, out, col, fl);
    }
    return CM_OK;
}

/* ---- custom calls ------------------------------------------------------------------ */

static const char *call_target(const rctx *c)
{
    const sp_attr *t = op_attr(c, "call_target_name");
    if (t != NULL && t->kind == SP_ATTR_STRING) {
        return t->u.str.s;
    }
    if (t != NULL && t->kind == SP_ATTR_SYMBOL) {
        return t->u.sym;
    }
    return NULL;
}

static bool used_by_rng_bit_generator(const rctx *c)
{
    for (uint32_t o = 0; o < c->m->n_ops; o++) {
        const sp_op *u = &c->m->ops[o];
        if (u->kind != SP_OP_RNG_BIT_GENERATOR) {
            continue;
        }
        for (uint32_t i = 0; i < u->n_operands; i++) {
            uint32_t v = u->operands[i];
            if (v >= c->op->first_result && v < c->op->first_result + c->op->n_results) {
                return true;
            }
        }
    }
    return false;
}

/* The reduction dimension of ApproxTopK/PartialReduce from its backend
 * config (a dictionary, or a JSON string), else the last dimension. */
static int64_t approx_topk_dim(const rctx *c, uint32_t rank)
{
    const sp_attr *bc = op_attr(c, "mhlo.backend_config");
    if (bc != NULL && bc->kind == SP_ATTR_DICT) {
        const sp_attr *rd = sp_attrs_get(bc->u.dict.items, bc->u.dict.n, "reduction_dim");
        if (rd != NULL && rd->kind == SP_ATTR_INT) {
            return rd->u.i.v;
        }
    }
    bc = op_attr(c, "backend_config");
    if (bc != NULL && bc->kind == SP_ATTR_STRING) {
        const char *p = strstr(bc->u.str.s, "reduction_dim");
        if (p != NULL) {
            p += strlen("reduction_dim");
            while (*p == '"' || *p == ':' || *p == ' ' || *p == '\t') {
                p++;
            }
            bool neg = *p == '-';
            if (neg) {
                p++;
            }
            int64_t v = 0;
            bool any = false;
            while (*p >= '0' && *p <= '9' && v < 1000000) {
                v = v * 10 + (*p++ - '0');
                any = true;
            }
            if (any) {
                return neg ? -v : v;
            }
        }
    }
    return (int64_t)rank - 1;
}

static cm_status rule_approx_topk(rctx *c)
{
    uint32_t nops = c->op->n_operands, n = c->op->n_results;
    if (n == 0 || nops < n) {
        return no_rule(c);
    }
    uint32_t r = trank(c, 0);
    int64_t rdv = approx_topk_dim(c, r);
    if (rdv < 0) {
        rdv += (int64_t)r;
    }
    uint32_t rd = 0;
    cm_status st = dim_of(c, rdv, r, "reduction_dim", &rd);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!same_dims(c, i, 0) || trank(c, RES(c, i)) != r) {
            return bad(c, "operands and results must have one rank");
        }
    }
    for (uint32_t d = 0; d < r; d++) {
        if (d != rd) {
            uint32_t f = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
            for (uint32_t i = 0; i < n; i++) {
                rb_map(&c->b, i, d, f);
                rb_map(&c->b, RES(c, i), d, f);
            }
            continue;
        }
        uint32_t fo = rb_factor(&c->b, tdim(c, 0, d), SP_FACTOR_PASS_THROUGH, false);
        for (uint32_t i = 0; i < n; i++) {
            rb_map(&c->b, i, d, fo);
        }
        uint32_t fr = rb_factor(&c->b, tdim(c, RES(c, 0), d), SP_FACTOR_NEED_REPLICATION, true);
        for (uint32_t i = 0; i < n; i++) {
            rb_map(&c->b, RES(c, i), d, fr);
        }
    }
    return CM_OK;
}

static cm_status rule_topk(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results < 1) {
        return no_rule(c);
    }
    uint32_t r = trank(c, 0);
    if (r == 0) {
        return bad(c, "operand must have rank >= 1");
    }
    for (uint32_t i = 0; i < c->op->n_results; i++) {
        if (trank(c, RES(c, i)) != r) {
            return bad(c, "operands and results must have one rank");
        }
    }
    for (uint32_t d = 0; d < r; d++) {
        bool last = d + 1u == r;
        uint32_t f = rb_factor(&c->b, tdim(c, 0, d),
                               last ? SP_FACTOR_NEED_REPLICATION : SP_FACTOR_PASS_THROUGH, last);
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            rb_map(&c->b, t, d, f);
        }
    }
    return CM_OK;
}

/* Eigh: batch factors; the row factor (operand, eigenvectors) and the column
 * factor (operand, eigenvectors, eigenvalues). */
static cm_status rule_eigh(rctx *c)
{
    if (c->op->n_operands != 1 || c->op->n_results != 2) {
        return no_rule(c);
    }
    uint32_t a = 0, v = RES(c, 0), w = RES(c, 1), r = trank(c, a);
    if (r < 2 || !same_dims(c, a, v) || trank(c, w) != r - 1u) {
        return bad(c, "unexpected Eigh shapes");
    }
    for (uint32_t d = 0; d + 2u < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, a, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, a, d, f);
        rb_map(&c->b, v, d, f);
        rb_map(&c->b, w, d, f);
    }
    uint32_t fj = rb_factor(&c->b, tdim(c, a, r - 2u), SP_FACTOR_PASS_THROUGH, false);
    rb_map(&c->b, a, r - 2u, fj);
    rb_map(&c->b, v, r - 2u, fj);
    uint32_t fk = rb_factor(&c->b, tdim(c, a, r - 1u), SP_FACTOR_PASS_THROUGH, false);
    rb_map(&c->b, a, r - 1u, fk);
    rb_map(&c->b, v, r - 1u, fk);
    rb_map(&c->b, w, r - 2u, fk);
    return CM_OK;
}

/* Qr / QrDecompositionBlock: (a) -> (a', taus); and
 * ProductOfElementaryHouseholderReflectors: (a, taus) -> (a'). Batch
 * factors, then a's two matrix dims and the taus dim, all need replication. */
static cm_status rule_qr_like(rctx *c, bool householder)
{
    uint32_t a = 0, ar = RES(c, 0);
    uint32_t taus = householder ? 1u : RES(c, 1);
    if ((householder && (c->op->n_operands != 2 || c->op->n_results != 1)) ||
        (!householder && (c->op->n_operands != 1 || c->op->n_results != 2))) {
        return no_rule(c);
    }
    uint32_t r = trank(c, a);
    if (r < 2 || !same_dims(c, a, ar) || trank(c, taus) != r - 1u) {
        return bad(c, "unexpected QR shapes");
    }
    for (uint32_t d = 0; d + 2u < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, a, d), SP_FACTOR_PASS_THROUGH, false);
        rb_map(&c->b, a, d, f);
        rb_map(&c->b, taus, d, f);
        rb_map(&c->b, ar, d, f);
    }
    for (uint32_t d = r - 2u; d < r; d++) {
        uint32_t f = rb_factor(&c->b, tdim(c, a, d), SP_FACTOR_NEED_REPLICATION, false);
        rb_map(&c->b, a, d, f);
        rb_map(&c->b, ar, d, f);
    }
    rb_map(&c->b, taus, r - 2u,
           rb_factor(&c->b, tdim(c, taus, r - 2u), SP_FACTOR_NEED_REPLICATION, false));
    return CM_OK;
}

/* Targets Shardy leaves without a rule and without a warning: calls whose
 * partitioning is their own (TPU kernels, host callbacks, debug logging). */
static const char *const ruleless_targets[] = {
    "sdy_testonly",           "tpu_custom_call",          "xla_python_cpu_callback",
    "xla_python_gpu_callback", "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback",
    "xla.debug.Log",
};

/* Targets with the pointwise rule: the element-wise ones, and XLA's SPMD
 * permutes between partitions, whose results all take their input's
 * sharding. */
static const char *const pointwise_targets[] = {
    "annotate_device_placement",
    "Cholesky",
    "CompactWyHelper",
    "InspectSharding",
    "InvertDiagBlocksLowerTriangular",
    "InvertDiagBlocksUpperTriangular",
    "LayoutConstraint",
    "mhlo.erf",
    "MoveToDevice",
    "MoveToHost",
    "X64SplitHigh",
    "X64SplitLow",
    "xla.megascale.provide_metadata",
    "_SPMDInternalOp_MultiPad",
    "_SPMDInternalOp_RotateRight",
    "_SPMDInternalOp_MultiRotate",
    "_SPMDInternalOp_MultiSlice",
    "_SPMDInternalOp_Wrap",
};

static bool target_in(const char *target, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(target, list[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Sets *out to the user's rule for target (opts->custom), or NULL when there
 * is none or a text rule does not fit the shapes. Errors: CM_EINVAL for an
 * einsum rule that does not fit, CM_ENOMEM. */
static cm_status user_rule(rctx *c, const char *target, sp_rule **out);

static cm_status rule_custom_call(rctx *c, sp_rule **direct)
{
    const char *target = call_target(c);
    if (target == NULL) {
        return bad(c, "missing call_target_name");
    }
    cm_status st = user_rule(c, target, direct);
    if (st != CM_OK || *direct != NULL) {
        return st;
    }
    if (target_in(target, ruleless_targets, sizeof ruleless_targets / sizeof *ruleless_targets)) {
        return no_rule(c);
    }
    if (target_in(target, pointwise_targets, sizeof pointwise_targets / sizeof *pointwise_targets)) {
        /* Shardy's pointwise builder: no rule when the first result is no
         * tensor (a token) */
        if (c->op->n_results == 0 || ttype(c, RES(c, 0))->kind != SP_TYPE_TENSOR) {
            return no_rule(c);
        }
        return rule_elementwise(c);
    }
    if (strcmp(target, "X64Combine") == 0) {
        if (c->op->n_results != 1 || !all_same_shape(c, RES(c, 0))) {
            return bad(c, "operand and result shapes differ");
        }
        if (used_by_rng_bit_generator(c)) {
            for (uint32_t d = 0; d < trank(c, RES(c, 0)); d++) {
                uint32_t f =
                    rb_factor(&c->b, tdim(c, RES(c, 0), d), SP_FACTOR_NEED_REPLICATION, true);
                for (uint32_t t = 0; t < c->b.n_tensors; t++) {
                    if (trank(c, t) > 0) {
                        rb_map(&c->b, t, d, f);
                    }
                }
            }
            return CM_OK;
        }
        pointwise(c, RES(c, 0));
        return CM_OK;
    }
    if (strcmp(target, "Eigh") == 0) {
        return rule_eigh(c);
    }
    if (strcmp(target, "Qr") == 0 || strcmp(target, "QrDecompositionBlock") == 0) {
        return rule_qr_like(c, false);
    }
    if (strcmp(target, "ProductOfElementaryHouseholderReflectors") == 0) {
        return rule_qr_like(c, true);
    }
    if (strcmp(target, "mhlo.topk") == 0) {
        return rule_topk(c);
    }
    if (strcmp(target, "ApproxTopK") == 0 || strcmp(target, "PartialReduce") == 0) {
        return rule_approx_topk(c);
    }
    if (c->opts->replicate_unknown_custom_calls) {
        for (uint32_t t = 0; t < c->b.n_tensors; t++) {
            for (uint32_t d = 0; d < trank(c, t); d++) {
                rb_map(&c->b, t, d,
                       rb_factor(&c->b, tdim(c, t, d), SP_FACTOR_NEED_REPLICATION, true));
            }
        }
        return CM_OK;
    }
    /* Unknown: no rule, so propagation passes it by and the export leaves it
     * as it is. Shardy warns once per process (sp_diag.h). */
    if (sp_diags_once(c->diags, SP_DIAG_ONCE_UNKNOWN_CUSTOM_CALL)) {
        sp_diags_add(c->diags, c->m, c->opid, SP_DIAG_WARNING,
                     "custom call @%s is unknown to SDY sharding rule registry", target);
    }
    return no_rule(c);
}

/* ==== the custom rule table ==================================================== */

typedef struct custom_entry {
    const char *target;
    bool is_einsum;
    const char *spec;     /* einsum spec */
    sp_einsum_opts eopts; /* deep copy */
    const sp_rule *rule;  /* parsed text rule */
} custom_entry;

struct sp_custom_rules {
    cm_arena arena;
    custom_entry *items;
    uint32_t n, cap;
};

sp_custom_rules *sp_custom_rules_create(void)
{
    sp_custom_rules *r = cm_calloc(1, sizeof *r);
    if (r != NULL) {
        cm_arena_init(&r->arena, 4096);
    }
    return r;
}

void sp_custom_rules_destroy(sp_custom_rules *r)
{
    if (r == NULL) {
        return;
    }
    cm_arena_fini(&r->arena);
    cm_free(r->items);
    cm_free(r);
}

static custom_entry *find_entry(const sp_custom_rules *r, const char *target)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (strcmp(r->items[i].target, target) == 0) {
            return &r->items[i];
        }
    }
    return NULL;
}

static cm_status slot_for(sp_custom_rules *r, const char *target, custom_entry **out, cm_error *err)
{
    custom_entry *e = find_entry(r, target);
    if (e == NULL) {
        if (!grow((void **)&r->items, &r->cap, r->n + 1u, sizeof *r->items)) {
            return cm_error_oom(err);
        }
        e = &r->items[r->n];
        memset(e, 0, sizeof *e);
        e->target = cm_arena_strdup(&r->arena, target);
        if (e->target == NULL) {
            return cm_error_oom(err);
        }
        r->n++;
    }
    *out = e;
    return CM_OK;
}

static bool copy_names(cm_arena *a, const char **src, uint32_t n, const char ***dst)
{
    *dst = NULL;
    if (n == 0) {
        return true;
    }
    const char **v = azalloc(a, n, sizeof *v);
    if (v == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        v[i] = cm_arena_strdup(a, src[i] ? src[i] : "");
        if (v[i] == NULL) {
            return false;
        }
    }
    *dst = v;
    return true;
}

/* A syntax check of a JAX einsum-like rule: one "->", allowed characters,
 * and balanced, non-nested parentheses. Shapes are checked when applied. */
static cm_status einsum_syntax(const char *spec, cm_error *err)
{
    size_t arrows = 0;
    bool open = false;
    for (size_t i = 0; spec[i] != '\0'; i++) {
        char ch = spec[i];
        char path[32];
        snprintf(path, sizeof path, "col %zu", i + 1u);
        if (ch == '-' && spec[i + 1] == '>') {
            if (open) {
                return cm_error_set(err, CM_EINVAL, path, "'->' inside parentheses");
            }
            arrows++;
            i++;
            continue;
        }
        if (ch == '(') {
            if (open) {
                return cm_error_set(err, CM_EINVAL, path, "nested parentheses");
            }
            open = true;
        } else if (ch == ')') {
            if (!open) {
                return cm_error_set(err, CM_EINVAL, path, "unbalanced ')'");
            }
            open = false;
        } else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '_' || ch == ' ' || ch == ',' || ch == '.' ||
                     ch == '\t')) {
            return cm_error_set(err, CM_EINVAL, path, "unexpected character '%c'", ch);
        }
    }
    if (open) {
        return cm_error_set(err, CM_EINVAL, "", "unbalanced '('");
    }
    if (arrows != 1) {
        return cm_error_set(err, CM_EINVAL, "", "sharding rule must have exactly one '->'");
    }
    return CM_OK;
}

cm_status sp_custom_rules_put_einsum(sp_custom_rules *r, const char *target, const char *spec,
                                     const sp_einsum_opts *opts, cm_error *err)
{
    if (r == NULL || target == NULL || spec == NULL) {
        return cm_error_set(err, CM_EINVAL, "", "target and spec are required");
    }
    cm_status st = einsum_syntax(spec, err);
    if (st != CM_OK) {
        return st;
    }
    sp_einsum_opts o;
    memset(&o, 0, sizeof o);
    const char *s = cm_arena_strdup(&r->arena, spec);
    if (s == NULL) {
        return cm_error_oom(err);
    }
    if (opts != NULL) {
        o.n_reduction = opts->n_reduction;
        o.n_need_replication = opts->n_need_replication;
        o.n_permutation = opts->n_permutation;
        o.n_sizes = opts->n_sizes;
        int64_t *sizes = NULL;
        if (opts->n_sizes > 0) {
            sizes = cm_arena_memdup(&r->arena, opts->sizes, opts->n_sizes, sizeof *sizes);
        }
        o.sizes = sizes;
        if (!copy_names(&r->arena, opts->reduction, opts->n_reduction, &o.reduction) ||
            !copy_names(&r->arena, opts->need_replication, opts->n_need_replication,
                        &o.need_replication) ||
            !copy_names(&r->arena, opts->permutation, opts->n_permutation, &o.permutation) ||
            !copy_names(&r->arena, opts->size_names, opts->n_sizes, &o.size_names) ||
            (opts->n_sizes > 0 && sizes == NULL)) {
            return cm_error_oom(err);
        }
    }
    custom_entry *e;
    if ((st = slot_for(r, target, &e, err)) != CM_OK) {
        return st;
    }
    e->is_einsum = true;
    e->spec = s;
    e->eopts = o;
    e->rule = NULL;
    return CM_OK;
}

cm_status sp_custom_rules_put_text(sp_custom_rules *r, const char *target, const char *text,
                                   cm_error *err)
{
    if (r == NULL || target == NULL || text == NULL) {
        return cm_error_set(err, CM_EINVAL, "", "target and rule text are required");
    }
    static const char prefix[] = "#sdy.op_sharding_rule";
    size_t len = strlen(text);
    size_t skip = 0;
    while (skip < len && (text[skip] == ' ' || text[skip] == '\t' || text[skip] == '\n')) {
        skip++;
    }
    if (strncmp(text + skip, prefix, sizeof prefix - 1u) == 0) {
        skip += sizeof prefix - 1u;
    }
    sp_rule *rule = NULL;
    size_t used = 0;
    cm_status st = sp_rule_parse(text + skip, len - skip, &r->arena, &rule, &used, err);
    if (st != CM_OK) {
        return st;
    }
    for (size_t i = skip + used; i < len; i++) {
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n') {
            char path[32];
            snprintf(path, sizeof path, "col %zu", i + 1u);
            return cm_error_set(err, CM_EINVAL, path, "unexpected text after the rule");
        }
    }
    custom_entry *e;
    if ((st = slot_for(r, target, &e, err)) != CM_OK) {
        return st;
    }
    e->is_einsum = false;
    e->spec = NULL;
    memset(&e->eopts, 0, sizeof e->eopts);
    e->rule = rule;
    return CM_OK;
}

bool sp_custom_rules_remove(sp_custom_rules *r, const char *target)
{
    if (r == NULL || target == NULL) {
        return false;
    }
    custom_entry *e = find_entry(r, target);
    if (e == NULL) {
        return false;
    }
    uint32_t i = (uint32_t)(e - r->items);
    memmove(&r->items[i], &r->items[i + 1u], (size_t)(r->n - i - 1u) * sizeof *r->items);
    r->n--;
    return true;
}

/* Whether a text rule fits the op: counts, ranks, and per-dimension factor
 * size products. */
static bool text_rule_fits(const rctx *c, const sp_rule *rule)
{
    if (rule->n_operands != c->op->n_operands || rule->n_results != c->op->n_results) {
        return false;
    }
    for (uint32_t t = 0; t < c->b.n_tensors; t++) {
        const sp_tensor_mapping *tm =
            t < rule->n_operands ? &rule->operands[t] : &rule->results[t - rule->n_operands];
        if (tm->rank != trank(c, t)) {
            return false;
        }
        for (uint32_t d = 0; d < tm->rank; d++) {
            int64_t p = 1;
            for (uint32_t k = 0; k < tm->dims[d].n_factors; k++) {
                uint32_t f = tm->dims[d].factors[k];
                if (f >= rule->n_factors || !cm_mul_i64(p, rule->factor_sizes[f], &p)) {
                    return false;
                }
            }
            if (p != tdim(c, t, d)) {
                return false;
            }
        }
    }
    return true;
}

static sp_rule *clone_rule(cm_arena *a, const sp_rule *s)
{
    sp_rule *r = azalloc(a, 1, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    *r = *s;
    r->factor_sizes = cm_arena_memdup(a, s->factor_sizes, s->n_factors ? s->n_factors : 1u,
                                      sizeof *r->factor_sizes);
    r->factor_kind = cm_arena_memdup(a, s->factor_kind, s->n_factors ? s->n_factors : 1u,
                                     sizeof *r->factor_kind);
    r->factor_blocked = cm_arena_memdup(a, s->factor_blocked, s->n_factors ? s->n_factors : 1u,
                                        sizeof *r->factor_blocked);
    r->operands = azalloc(a, s->n_operands, sizeof *r->operands);
    r->results = azalloc(a, s->n_results, sizeof *r->results);
    if (r->factor_sizes == NULL || r->factor_kind == NULL || r->factor_blocked == NULL ||
        r->operands == NULL || r->results == NULL) {
        return NULL;
    }
    for (uint32_t t = 0; t < s->n_operands + s->n_results; t++) {
        const sp_tensor_mapping *st =
            t < s->n_operands ? &s->operands[t] : &s->results[t - s->n_operands];
        sp_tensor_mapping *dt =
            t < s->n_operands ? &r->operands[t] : &r->results[t - s->n_operands];
        dt->rank = st->rank;
        dt->dims = azalloc(a, st->rank, sizeof *dt->dims);
        if (dt->dims == NULL) {
            return NULL;
        }
        for (uint32_t d = 0; d < st->rank; d++) {
            dt->dims[d].n_factors = st->dims[d].n_factors;
            dt->dims[d].factors = azalloc(a, st->dims[d].n_factors, sizeof(uint32_t));
            if (dt->dims[d].factors == NULL) {
                return NULL;
            }
            if (st->dims[d].n_factors > 0) {
                memcpy(dt->dims[d].factors, st->dims[d].factors,
                       st->dims[d].n_factors * sizeof(uint32_t));
            }
        }
    }
    return r;
}

static cm_status user_rule(rctx *c, const char *target, sp_rule **out)
{
    *out = NULL;
    if (c->opts->custom == NULL) {
        return CM_OK;
    }
    const custom_entry *e = find_entry(c->opts->custom, target);
    if (e == NULL) {
        return CM_OK;
    }
    if (!e->is_einsum) {
        if (!text_rule_fits(c, e->rule)) {
            return CM_OK;
        }
        *out = clone_rule(&c->m->arena, e->rule);
        return *out ? CM_OK : cm_error_oom(c->err);
    }
    uint32_t nt = c->b.n_tensors, no = c->op->n_operands;
    const int64_t **dims = cm_calloc((size_t)nt + 1u, sizeof *dims);
    if (dims == NULL) {
        return cm_error_oom(c->err);
    }
    for (uint32_t t = 0; t < nt; t++) {
        const sp_type *ty = ttype(c, t);
        dims[t] = ty->kind == SP_TYPE_TENSOR ? ty->dims : NULL;
    }
    sp_rule *r = NULL;
    cm_status st = sp_rule_from_einsum(e->spec, &e->eopts, dims, c->b.rank, no, dims + no,
                                       c->b.rank + no, nt - no, &c->m->arena, &r, c->err);
    cm_free(dims);
    if (st != CM_OK) {
        if (c->err != NULL && c->err->path[0] == '\0' && c->op->line > 0) {
            snprintf(c->err->path, sizeof c->err->path, "%u:%u", c->op->line, c->op->col);
        }
        return st;
    }
    r->is_custom = true;
    *out = r;
    return CM_OK;
}

/* ==== dispatch ==================================================================== */

static cm_status dispatch(rctx *c, sp_rule **direct)
{
    sp_op_kind k = (sp_op_kind)c->op->kind;
    /* mhlo.copy: not in Shardy's registry, but XLA gives it the pointwise
     * rule (its sharding-rule extension for MHLO ops) */
    if (sp_op_is_elementwise(k) || k == SP_OP_MHLO_COPY || k == SP_OP_SDY_SHARDING_CONSTRAINT ||
        k == SP_OP_COLLECTIVE_BROADCAST) {
        return rule_elementwise(c);
    }
    switch (k) {
    case SP_OP_ALL_REDUCE:
    case SP_OP_COLLECTIVE_PERMUTE:
        return rule_same_shape(c);
    case SP_OP_ALL_GATHER:
        return rule_gather_scatter_collective(c, "all_gather_dim");
    case SP_OP_REDUCE_SCATTER:
        return rule_gather_scatter_collective(c, "scatter_dimension");
    case SP_OP_ALL_TO_ALL:
        return rule_all_to_all(c);
    case SP_OP_BATCH_NORM_INFERENCE:
        return rule_batch_norm(c);
    case SP_OP_BITCAST_CONVERT:
        return rule_bitcast_convert(c);
    case SP_OP_BROADCAST_IN_DIM:
        return rule_broadcast_in_dim(c);
    case SP_OP_CHOLESKY:
        return rule_cholesky(c);
    case SP_OP_CONCATENATE:
        return rule_concatenate(c);
    case SP_OP_CONVOLUTION:
        return rule_convolution(c);
    case SP_OP_CUSTOM_CALL:
        return rule_custom_call(c, direct);
    case SP_OP_DOT:
    case SP_OP_DOT_GENERAL:
        return rule_dot(c);
    case SP_OP_DYNAMIC_SLICE:
        return rule_dynamic_slice(c);
    case SP_OP_DYNAMIC_UPDATE_SLICE:
        return rule_dynamic_update_slice(c);
    case SP_OP_FFT:
        return rule_fft(c);
    case SP_OP_GATHER:
        return rule_gather(c);
    case SP_OP_PAD:
        return rule_pad(c);
    case SP_OP_REDUCE:
        return rule_reduce(c);
    case SP_OP_REDUCE_WINDOW:
        return rule_reduce_window(c);
    case SP_OP_RESHAPE:
        return rule_reshape(c);
    case SP_OP_REVERSE:
        return rule_reverse(c);
    case SP_OP_RNG_BIT_GENERATOR:
        return rule_rng_bit_generator(c);
    case SP_OP_SCATTER:
        return rule_scatter(c);
    case SP_OP_SELECT_AND_SCATTER:
        return rule_select_and_scatter(c);
    case SP_OP_SLICE:
        return rule_slice(c);
    case SP_OP_SORT:
        return rule_sort(c);
    case SP_OP_TRANSPOSE:
        return rule_transpose(c);
    case SP_OP_TRIANGULAR_SOLVE:
        return rule_triangular_solve(c);
    case SP_OP_CHLO_TOP_K:
        /* XLA turns chlo.top_k into the mhlo.topk custom call before Shardy
         * sees it; its rule is that call's (the chlo element-wise ops are
         * element-wise by their traits) */
        return rule_topk(c);
    default:
        /* data-flow ops (while, case, if, optimization_barrier), func and sdy
         * ops, terminators, constants and ops Shardy does not register */
        return no_rule(c);
    }
}

/* Whether the op kind can have a rule at all (avoids setting up a builder
 * for the many ops that never do). */
bool sp_rules_cover_kind(sp_op_kind k)
{
    if (sp_op_is_elementwise(k)) {
        return true;
    }
    switch (k) {
    case SP_OP_MHLO_COPY:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_COLLECTIVE_BROADCAST:
    case SP_OP_ALL_REDUCE:
    case SP_OP_COLLECTIVE_PERMUTE:
    case SP_OP_ALL_GATHER:
    case SP_OP_REDUCE_SCATTER:
    case SP_OP_ALL_TO_ALL:
    case SP_OP_BATCH_NORM_INFERENCE:
    case SP_OP_BITCAST_CONVERT:
    case SP_OP_BROADCAST_IN_DIM:
    case SP_OP_CHOLESKY:
    case SP_OP_CONCATENATE:
    case SP_OP_CONVOLUTION:
    case SP_OP_CUSTOM_CALL:
    case SP_OP_DOT:
    case SP_OP_DOT_GENERAL:
    case SP_OP_DYNAMIC_SLICE:
    case SP_OP_DYNAMIC_UPDATE_SLICE:
    case SP_OP_FFT:
    case SP_OP_GATHER:
    case SP_OP_PAD:
    case SP_OP_REDUCE:
    case SP_OP_REDUCE_WINDOW:
    case SP_OP_RESHAPE:
    case SP_OP_REVERSE:
    case SP_OP_RNG_BIT_GENERATOR:
    case SP_OP_SCATTER:
    case SP_OP_SELECT_AND_SCATTER:
    case SP_OP_CHLO_TOP_K:
    case SP_OP_SLICE:
    case SP_OP_SORT:
    case SP_OP_TRANSPOSE:
    case SP_OP_TRIANGULAR_SOLVE:
        return true;
    default:
        return false;
    }
}

/* StableHLO ops Shardy's registry has no case for: they get no rule, and
 * the first one met gets Shardy's warning (once per process there, once per
 * diagnostics list here). Iota, constants, tokens, control flow and the
 * data-flow ops get no rule either, but no warning. */
static bool unknown_to_registry(sp_op_kind k)
{
    switch (k) {
    case SP_OP_BATCH_NORM_GRAD:
    case SP_OP_BATCH_NORM_TRAINING:
    case SP_OP_BROADCAST:
    case SP_OP_COMPOSITE:
    case SP_OP_DYNAMIC_BROADCAST_IN_DIM:
    case SP_OP_DYNAMIC_CONV:
    case SP_OP_DYNAMIC_GATHER:
    case SP_OP_DYNAMIC_IOTA:
    case SP_OP_DYNAMIC_PAD:
    case SP_OP_DYNAMIC_RESHAPE:
    case SP_OP_EINSUM:
    case SP_OP_GET_DIMENSION_SIZE:
    case SP_OP_MAP:
    case SP_OP_REAL_DYNAMIC_SLICE:
    case SP_OP_REPLICA_ID:
    case SP_OP_RNG:
    case SP_OP_SET_DIMENSION_SIZE:
    case SP_OP_TORCH_INDEX_SELECT:
    case SP_OP_TUPLE:
    case SP_OP_UNARY_EINSUM:
    case SP_OP_UNIFORM_DEQUANTIZE:
    case SP_OP_UNIFORM_QUANTIZE:
        return true;
    default:
        return false;
    }
}

/* Whether every operand and result dimension got at least one factor or
 * was left out on purpose (rb_leave; otherwise a handler leaves one out only
 * for shapes it did not validate). */
static bool all_dims_mapped(const rb *b)
{
    bool ok = true;
    uint8_t *seen = cm_calloc((size_t)b->n_slots + 1u, 1);
    if (seen == NULL) {
        return true; /* the build that follows reports the OOM */
    }
    for (uint32_t e = 0; e < b->n_ents; e++) {
        seen[b->ents[e].slot] = 1;
    }
    for (uint32_t s = 0; b->left != NULL && s < b->n_slots; s++) {
        seen[s] = seen[s] || b->left[s];
    }
    for (uint32_t s = 0; s < b->n_slots && ok; s++) {
        ok = seen[s] != 0;
    }
    cm_free(seen);
    return ok;
}

cm_status sp_rule_for_op(sp_module *m, uint32_t op, const sp_rule_opts *opts, sp_rule **rule_out,
                         sp_diags *diags, cm_error *err)
{
    static const sp_rule_opts no_opts = {false, NULL, false};
    *rule_out = NULL;
    if (m == NULL || op >= m->n_ops) {
        return cm_error_set(err, CM_EINVAL, "", "no such op");
    }
    const sp_attr *have = sp_op_attr(m, op, RULE_ATTR);
    if (have != NULL && have->kind == SP_ATTR_RULE) {
        *rule_out = have->u.rule;
        return CM_OK;
    }
    const sp_op *o = &m->ops[op];
    if (!sp_rules_cover_kind((sp_op_kind)o->kind)) {
        if (unknown_to_registry((sp_op_kind)o->kind) &&
            sp_diags_once(diags, SP_DIAG_ONCE_UNKNOWN_OP)) {
            sp_diags_add(diags, m, op, SP_DIAG_WARNING,
                         "op '%s' is unknown to SDY sharding rule registry",
                         sp_op_kind_name((sp_op_kind)o->kind));
        }
        return CM_OK;
    }
    rctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.opid = op;
    c.op = o;
    c.opts = opts ? opts : &no_opts;
    c.diags = diags;
    c.err = err;
    /* Ranks of operands and results; tokens count as rank 0. Rules need
     * static shapes: a dynamic dimension or an unranked/tuple type means no
     * rule. */
    uint32_t nt = o->n_operands + o->n_results;
    uint32_t *ranks = cm_calloc((size_t)nt + 1u, sizeof *ranks);
    if (ranks == NULL) {
        return cm_error_oom(err);
    }
    bool static_shapes = true;
    for (uint32_t t = 0; t < nt; t++) {
        uint32_t v = t < o->n_operands ? o->operands[t] : o->first_result + (t - o->n_operands);
        const sp_type *ty = sp_value_type(m, v);
        if (ty->kind == SP_TYPE_TENSOR) {
            ranks[t] = ty->rank;
            for (uint32_t d = 0; d < ty->rank; d++) {
                if (ty->dims[d] < 0) {
                    static_shapes = false;
                }
            }
        } else if (ty->kind != SP_TYPE_TOKEN) {
            static_shapes = false;
        }
    }
    cm_status st = static_shapes ? rb_init(&c.b, o->n_operands, o->n_results, ranks) : CM_OK;
    cm_free(ranks);
    if (!static_shapes || nt == 0) {
        rb_fini(&c.b);
        return CM_OK;
    }
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    sp_rule *direct = NULL;
    st = dispatch(&c, &direct);
    if (st == CM_OK && direct == NULL && !c.none && !c.b.oom && !all_dims_mapped(&c.b)) {
        st = bad(&c, "operand or result shapes do not fit the op");
    }
    if (st == CM_OK && direct != NULL) {
        *rule_out = direct;
    } else if (st == CM_OK && !c.none) {
        st = rb_build(&c.b, &m->arena, rule_out);
        if (st != CM_OK) {
            cm_error_oom(err);
        }
    }
    rb_fini(&c.b);
    return st;
}
