/* SPDX-License-Identifier: Apache-2.0
 * planner: StableHLO shape verification for the ops whose result shape
 * follows from their operands and attributes (the constraints of each op in
 * the StableHLO spec): element-wise ops, dot and dot_general,
 * broadcast_in_dim, reshape, transpose, concatenate, slice, reduce, and the
 * dimension numbers of convolution, gather and scatter (sp_attrs.h). A
 * dynamic dimension ('?') is compatible with any size. Findings are error
 * diagnostics on the op, so they carry the op's LINE:COL. */
#include "sp_verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_attrs.h"
#include "sp_ops.h"

/* The tensor type of value v, or NULL when it is not a ranked tensor. */
static const sp_type *tensor_of(const sp_module *m, uint32_t v)
{
    const sp_type *t = &m->types[m->values[v].type];
    return t->kind == SP_TYPE_TENSOR ? t : NULL;
}

static bool dim_ok(int64_t a, int64_t b)
{
    return a == b || a == SP_DIM_DYNAMIC || b == SP_DIM_DYNAMIC;
}

/* Writes dims as "8x1024" (with '?' for dynamic) into buf. */
static const char *shape_str(const int64_t *dims, uint32_t rank, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < rank && k + 24 < cap; i++) {
        int w = dims[i] == SP_DIM_DYNAMIC
                    ? snprintf(buf + k, cap - k, "%s?", i ? "x" : "")
                    : snprintf(buf + k, cap - k, "%s%lld", i ? "x" : "", (long long)dims[i]);
        k += w > 0 ? (size_t)w : 0;
    }
    if (rank == 0) {
        snprintf(buf, cap, "scalar");
    }
    return buf;
}

/* Compares the inferred dims with result r of op; reports a mismatch. */
static void expect_shape(sp_module *m, uint32_t op, uint32_t r, const int64_t *dims,
                         uint32_t rank, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    const sp_type *t = tensor_of(m, o->first_result + r);
    if (t == NULL) {
        return;
    }
    bool ok = t->rank == rank;
    for (uint32_t i = 0; ok && i < rank; i++) {
        ok = dim_ok(dims[i], t->dims[i]);
    }
    if (!ok) {
        char buf[512];
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "'%s' op inferred shape '%s' is incompatible with result %u of type '%s'",
                     o->name, shape_str(dims, rank, buf, sizeof buf), r, t->text);
        *bad = true;
    }
}

static void fail(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void fail(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_diags_add(d, m, op, SP_DIAG_ERROR, "'%s' op %s", m->ops[op].name, msg);
    *bad = true;
}

/* The integer list attribute name of op; false (reported) when absent or
 * not integers, unless optional. */
static bool ints_attr(sp_module *m, uint32_t op, const char *name, bool optional,
                      const int64_t **v, uint32_t *n, sp_diags *d, bool *bad)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    *v = NULL;
    *n = 0;
    if (a == NULL) {
        if (!optional) {
            fail(m, op, d, bad, "requires attribute '%s'", name);
        }
        return optional;
    }
    if (!sp_attr_ints(a, v, n, &m->arena)) {
        fail(m, op, d, bad, "attribute '%s' must be a list of integers", name);
        return false;
    }
    return true;
}

/* Element-wise ops: every tensor operand and result has one shape, except
 * the scalar predicate of select and the scalar bounds of clamp. */
static void verify_elementwise(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    const sp_type *ref = NULL;
    for (uint32_t i = 0; i < o->n_operands + o->n_results; i++) {
        bool res = i >= o->n_operands;
        const sp_type *t = tensor_of(m, res ? o->first_result + (i - o->n_operands)
                                            : o->operands[i]);
        if (t == NULL) {
            continue;
        }
        if (t->rank == 0 && !res &&
            ((o->kind == SP_OP_SELECT && i == 0) || (o->kind == SP_OP_CLAMP && i != 1))) {
            continue;
        }
        if (ref == NULL) {
            ref = t;
            continue;
        }
        bool ok = t->rank == ref->rank;
        for (uint32_t k = 0; ok && k < t->rank; k++) {
            ok = dim_ok(t->dims[k], ref->dims[k]);
        }
        if (!ok) {
            fail(m, op, d, bad,
                 "requires the same shape for all operands and results ('%s' and '%s')",
                 ref->text, t->text);
            return;
        }
    }
}

static void verify_dot(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    sp_dot_dims dd;
    cm_error e;
    cm_error_clear(&e);
    if (sp_dot_dims_get(m, op, &dd, &e) != CM_OK) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s", e.msg);
        *bad = true;
        return;
    }
    const sp_op *o = &m->ops[op];
    const sp_type *l = tensor_of(m, o->operands[0]), *r = tensor_of(m, o->operands[1]);
    if (l == NULL || r == NULL || o->n_results != 1) {
        return;
    }
    for (uint32_t i = 0; i < dd.n_contract; i++) {
        int64_t a = l->dims[dd.lhs_contract[i]], b = r->dims[dd.rhs_contract[i]];
        if (!dim_ok(a, b)) {
            fail(m, op, d, bad,
                 "contracting dimension sizes must match: lhs dimension %lld has size %lld, "
                 "rhs dimension %lld has size %lld",
                 (long long)dd.lhs_contract[i], (long long)a, (long long)dd.rhs_contract[i],
                 (long long)b);
            return;
        }
    }
    int64_t dims[SP_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t i = 0; i < dd.n_batch; i++) {
        dims[n++] = l->dims[dd.lhs_batch[i]];
    }
    for (int side = 0; side < 2; side++) {
        const sp_type *t = side == 0 ? l : r;
        const int64_t *bt = side == 0 ? dd.lhs_batch : dd.rhs_batch;
        const int64_t *ct = side == 0 ? dd.lhs_contract : dd.rhs_contract;
        for (uint32_t k = 0; k < t->rank; k++) {
            bool used = false;
            for (uint32_t i = 0; i < dd.n_batch; i++) {
                used = used || bt[i] == (int64_t)k;
            }
            for (uint32_t i = 0; i < dd.n_contract; i++) {
                used = used || ct[i] == (int64_t)k;
            }
            if (!used && n < SP_MAX_RANK) {
                dims[n++] = t->dims[k];
            }
        }
    }
    expect_shape(m, op, 0, dims, n, d, bad);
}

static void verify_broadcast_in_dim(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands != 1 || o->n_results != 1) {
        return;
    }
    const sp_type *in = tensor_of(m, o->operands[0]), *out = tensor_of(m, o->first_result);
    const int64_t *bd;
    uint32_t n;
    if (in == NULL || out == NULL ||
        !ints_attr(m, op, "broadcast_dimensions", false, &bd, &n, d, bad)) {
        return;
    }
    if (n != in->rank) {
        fail(m, op, d, bad, "broadcast_dimensions size (%u) does not match operand rank (%u)", n,
             in->rank);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (bd[i] < 0 || bd[i] >= (int64_t)out->rank) {
            fail(m, op, d, bad, "broadcast_dimensions contains invalid value %lld for result "
                 "with rank %u", (long long)bd[i], out->rank);
            return;
        }
        for (uint32_t k = 0; k < i; k++) {
            if (bd[k] == bd[i]) {
                fail(m, op, d, bad, "broadcast_dimensions should not have duplicates");
                return;
            }
        }
        int64_t a = in->dims[i], b = out->dims[bd[i]];
        if (a != 1 && !dim_ok(a, b)) {
            fail(m, op, d, bad,
                 "size of operand dimension %u (%lld) is not equal to 1 or size of result "
                 "dimension %lld (%lld)",
                 i, (long long)a, (long long)bd[i], (long long)b);
            return;
        }
    }
}

/* The element count of t, or -1 when a dimension is dynamic (or it overflows). */
static int64_t n_elems(const sp_type *t)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0 || !cm_mul_i64(p, t->dims[i], &p)) {
            return -1;
        }
    }
    return p;
}

static void verify_reshape(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands != 1 || o->n_results != 1) {
        return;
    }
    const sp_type *in = tensor_of(m, o->operands[0]), *out = tensor_of(m, o->first_result);
    if (in == NULL || out == NULL) {
        return;
    }
    int64_t a = n_elems(in), b = n_elems(out);
    if (a >= 0 && b >= 0 && a != b) {
        fail(m, op, d, bad,
             "number of output elements (%lld) doesn't match expected number of elements (%lld)",
             (long long)b, (long long)a);
    }
}

static void verify_transpose(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands != 1 || o->n_results != 1) {
        return;
    }
    const sp_type *in = tensor_of(m, o->operands[0]);
    const int64_t *p;
    uint32_t n;
    if (in == NULL || !ints_attr(m, op, "permutation", false, &p, &n, d, bad)) {
        return;
    }
    if (n != in->rank) {
        fail(m, op, d, bad, "TransposeOp operand rank %u does not match permutation size %u",
             in->rank, n);
        return;
    }
    int64_t dims[SP_MAX_RANK];
    for (uint32_t i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= (int64_t)n) {
            fail(m, op, d, bad, "permutation %lld out of range [0, %u)", (long long)p[i], n);
            return;
        }
        for (uint32_t k = 0; k < i; k++) {
            if (p[k] == p[i]) {
                fail(m, op, d, bad, "permutation is not a permutation: %lld is repeated",
                     (long long)p[i]);
                return;
            }
        }
        dims[i] = in->dims[p[i]];
    }
    expect_shape(m, op, 0, dims, n, d, bad);
}

static void verify_concatenate(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands == 0 || o->n_results != 1) {
        return;
    }
    const sp_type *first = tensor_of(m, o->operands[0]);
    const int64_t *dv;
    uint32_t n;
    if (first == NULL || !ints_attr(m, op, "dimension", false, &dv, &n, d, bad)) {
        return;
    }
    if (n != 1 || dv[0] < 0 || dv[0] >= (int64_t)first->rank) {
        fail(m, op, d, bad, "dimension %lld is out of range [0, %u)",
             n == 1 ? (long long)dv[0] : -1LL, first->rank);
        return;
    }
    uint32_t cd = (uint32_t)dv[0];
    int64_t dims[SP_MAX_RANK];
    memcpy(dims, first->dims, first->rank * sizeof dims[0]);
    for (uint32_t i = 1; i < o->n_operands; i++) {
        const sp_type *t = tensor_of(m, o->operands[i]);
        if (t == NULL) {
            return;
        }
        if (t->rank != first->rank) {
            fail(m, op, d, bad, "operands (0) and (%u) do not match rank", i);
            return;
        }
        for (uint32_t k = 0; k < t->rank; k++) {
            if (k == cd) {
                if (dims[k] == SP_DIM_DYNAMIC || t->dims[k] == SP_DIM_DYNAMIC ||
                    dims[k] > INT64_MAX - t->dims[k]) {
                    dims[k] = SP_DIM_DYNAMIC;
                } else {
                    dims[k] += t->dims[k];
                }
            } else if (!dim_ok(dims[k], t->dims[k])) {
                fail(m, op, d, bad, "shapes of operand (0) and (%u) do not match at non-concat "
                     "index %u", i, k);
                return;
            }
        }
    }
    expect_shape(m, op, 0, dims, first->rank, d, bad);
}

static void verify_slice(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands != 1 || o->n_results != 1) {
        return;
    }
    const sp_type *in = tensor_of(m, o->operands[0]);
    const int64_t *s, *l, *st;
    uint32_t ns, nl, nst;
    if (in == NULL || !ints_attr(m, op, "start_indices", false, &s, &ns, d, bad) ||
        !ints_attr(m, op, "limit_indices", false, &l, &nl, d, bad) ||
        !ints_attr(m, op, "strides", false, &st, &nst, d, bad)) {
        return;
    }
    if (ns != in->rank || nl != in->rank || nst != in->rank) {
        fail(m, op, d, bad, "the number of start, limit and stride indices (%u, %u, %u) must "
             "equal the operand rank %u", ns, nl, nst, in->rank);
        return;
    }
    int64_t dims[SP_MAX_RANK];
    for (uint32_t i = 0; i < ns; i++) {
        int64_t dim = in->dims[i];
        if (s[i] < 0 || l[i] < s[i] || (dim != SP_DIM_DYNAMIC && l[i] > dim) || st[i] <= 0) {
            fail(m, op, d, bad, "dimension %u: start %lld, limit %lld and stride %lld must "
                 "satisfy 0 <= start <= limit <= %lld and stride > 0",
                 i, (long long)s[i], (long long)l[i], (long long)st[i], (long long)dim);
            return;
        }
        dims[i] = (l[i] - s[i] + st[i] - 1) / st[i];
    }
    expect_shape(m, op, 0, dims, ns, d, bad);
}

static void verify_reduce(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands == 0 || o->n_operands % 2 != 0) {
        fail(m, op, d, bad, "expects an even, non-zero number of operands (inputs and init "
             "values), got %u", o->n_operands);
        return;
    }
    uint32_t n = o->n_operands / 2;
    if (o->n_results != n) {
        fail(m, op, d, bad, "has %u inputs but %u results", n, o->n_results);
        return;
    }
    const int64_t *dv;
    uint32_t nd;
    if (!ints_attr(m, op, "dimensions", false, &dv, &nd, d, bad)) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const sp_type *t = tensor_of(m, o->operands[i]);
        if (t == NULL) {
            continue;
        }
        int64_t dims[SP_MAX_RANK];
        uint32_t r = 0;
        for (uint32_t k = 0; k < nd; k++) {
            if (dv[k] < 0 || dv[k] >= (int64_t)t->rank) {
                fail(m, op, d, bad, "dimensions contains an invalid value %lld for rank %u",
                     (long long)dv[k], t->rank);
                return;
            }
            for (uint32_t j = 0; j < k; j++) {
                if (dv[j] == dv[k]) {
                    fail(m, op, d, bad, "dimensions should not have duplicates");
                    return;
                }
            }
        }
        for (uint32_t k = 0; k < t->rank; k++) {
            bool reduced = false;
            for (uint32_t j = 0; j < nd; j++) {
                reduced = reduced || dv[j] == (int64_t)k;
            }
            if (!reduced) {
                dims[r++] = t->dims[k];
            }
        }
        expect_shape(m, op, i, dims, r, d, bad);
        if (*bad) {
            return;
        }
    }
}

/* The dimension-number accessors of sp_attrs.h check ranges and ranks. */
static void verify_by_accessor(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    cm_error e;
    cm_error_clear(&e);
    cm_status st = CM_OK;
    switch ((sp_op_kind)m->ops[op].kind) {
    case SP_OP_CONVOLUTION: {
        sp_conv_dims cd;
        st = sp_conv_dims_get(m, op, &cd, &e);
        break;
    }
    case SP_OP_GATHER:
    case SP_OP_SCATTER: {
        sp_gather_dims gd;
        st = sp_gather_dims_get(m, op, &gd, &e);
        break;
    }
    default:
        break;
    }
    if (st != CM_OK && st != CM_ENOMEM) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s", e.msg);
        *bad = true;
    }
}

void sp_verify_op_shapes(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    sp_op_kind k = (sp_op_kind)m->ops[op].kind;
    if (sp_op_is_elementwise(k)) {
        verify_elementwise(m, op, d, bad);
        return;
    }
    switch (k) {
    case SP_OP_DOT:
    case SP_OP_DOT_GENERAL:
        verify_dot(m, op, d, bad);
        break;
    case SP_OP_BROADCAST_IN_DIM:
        verify_broadcast_in_dim(m, op, d, bad);
        break;
    case SP_OP_RESHAPE:
        verify_reshape(m, op, d, bad);
        break;
    case SP_OP_TRANSPOSE:
        verify_transpose(m, op, d, bad);
        break;
    case SP_OP_CONCATENATE:
        verify_concatenate(m, op, d, bad);
        break;
    case SP_OP_SLICE:
        verify_slice(m, op, d, bad);
        break;
    case SP_OP_REDUCE:
        verify_reduce(m, op, d, bad);
        break;
    case SP_OP_CONVOLUTION:
    case SP_OP_GATHER:
    case SP_OP_SCATTER:
        verify_by_accessor(m, op, d, bad);
        break;
    default:
        break;
    }
}
