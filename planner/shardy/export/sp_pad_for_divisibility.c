/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-pad-for-divisibility (Shardy's
 * export/pad_for_divisibility.cc; see sp_export.h). Runs on a globally
 * shaped module with explicit collectives, before the partitioner: every
 * tensor whose sharding does not divide a dimension grows along it to the
 * next multiple of its shard count, so that each device later holds an
 * equal part. Function inputs and outputs must already divide (an error
 * otherwise). sdy.all_slice, sdy.reduce_scatter and sdy.all_to_all pad
 * their input with stablehlo.pad (zero, or the padding value the input is
 * already known to carry); sdy.all_gather and sdy.all_to_all slice the
 * gathered dimensions back to their original size; stablehlo.slice and
 * stablehlo.pad widen their limits and trailing padding; dot_general masks
 * the padding of its contracting dimensions to zero (iota < size, select)
 * unless the operand is known to be zero-padded; the other ops only take
 * the padded result types. The module is retyped in place, walking each
 * function in program order; values that get a trimmed replacement are
 * substituted in the operands of later ops. */
#include "sp_export.h"
#include "sp_export_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_attrs.h"
#include "sp_ops.h"

enum { PAD_UNKNOWN = 0, PAD_ZERO = 1 }; /* what a value's padding region holds */

typedef struct pfd {
    sp_module *m;
    sp_diags *d;
    uint32_t n_orig;   /* values that existed before the pass */
    uint32_t *orig_ty; /* per original value: its type before the pass */
    uint32_t *repl;    /* per original value: its replacement, or SP_NONE */
    uint8_t *kind;     /* per value: PAD_*; grown as values are made */
    size_t kind_cap;
    bool failed;
} pfd;

/* ---- types and shardings ---------------------------------------------------------- */

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    return s->mesh != NULL ? s->mesh : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static int64_t shard_count(const sp_mesh *mesh, const sp_dim_sharding *d)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < d->n_axes; i++) {
        const sp_axis_ref *r = &d->axes[i];
        if (r->pre_size > 0) {
            p *= r->size;
        } else {
            int32_t k = sp_mesh_axis_index(mesh, r->name);
            p *= k < 0 ? 1 : mesh->axes[k].size;
        }
    }
    return p;
}

/* Interns `tensor<dims x elem>` keeping type t's element type and encoding. */
static cm_status retyped(sp_module *m, const sp_type *t, const int64_t *dims, uint32_t *out)
{
    const char *p = t->text + strlen("tensor<");
    for (uint32_t i = 0; i < t->rank; i++) {
        const char *x = strchr(p, 'x');
        if (x == NULL) {
            return CM_EINVAL;
        }
        p = x + 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "tensor<");
    for (uint32_t i = 0; i < t->rank; i++) {
        if (dims[i] == SP_DIM_DYNAMIC) {
            cm_buf_putc(&b, '?');
        } else {
            cm_buf_put_i64(&b, dims[i]);
        }
        cm_buf_putc(&b, 'x');
    }
    cm_buf_puts(&b, p);
    cm_status st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, out, NULL);
    cm_buf_fini(&b);
    return st;
}

/* Shardy's getDivisiblePaddedType: type ty with every dimension that s's
 * axes do not divide rounded up to a multiple of its shard count (ty itself
 * when s, its mesh or a tensor of s's rank is missing). */
static cm_status padded_type(sp_module *m, uint32_t ty, const sp_sharding *s, uint32_t *out)
{
    *out = ty;
    sp_type t = m->types[ty]; /* a copy: interning may move m->types */
    const sp_mesh *mesh = mesh_of(m, s);
    if (mesh == NULL || t.kind != SP_TYPE_TENSOR || t.rank != s->rank || t.rank > SP_MAX_RANK) {
        return CM_OK;
    }
    int64_t dims[SP_MAX_RANK];
    bool changed = false;
    for (uint32_t i = 0; i < t.rank; i++) {
        int64_t n = shard_count(mesh, &s->dims[i]);
        dims[i] = t.dims[i];
        if (n > 1 && dims[i] != SP_DIM_DYNAMIC && dims[i] % n != 0) {
            dims[i] += n - dims[i] % n;
            changed = true;
        }
    }
    return changed ? retyped(m, &t, dims, out) : CM_OK;
}

/* The type with, per dimension, the larger of a's and b's sizes (a when
 * the ranks differ). */
static cm_status max_type(sp_module *m, uint32_t a, uint32_t b, uint32_t *out)
{
    *out = a;
    sp_type ta = m->types[a], tb = m->types[b];
    if (ta.kind != SP_TYPE_TENSOR || tb.kind != SP_TYPE_TENSOR || ta.rank != tb.rank ||
        ta.rank > SP_MAX_RANK) {
        return CM_OK;
    }
    int64_t dims[SP_MAX_RANK];
    bool changed = false;
    for (uint32_t i = 0; i < ta.rank; i++) {
        dims[i] = ta.dims[i];
        if (tb.dims[i] != SP_DIM_DYNAMIC && ta.dims[i] != SP_DIM_DYNAMIC && tb.dims[i] > dims[i]) {
            dims[i] = tb.dims[i];
            changed = true;
        }
    }
    return changed ? retyped(m, &ta, dims, out) : CM_OK;
}

static uint32_t orig_type(const pfd *c, uint32_t v)
{
    return v < c->n_orig ? c->orig_ty[v] : c->m->values[v].type;
}

static uint8_t kind_get(const pfd *c, uint32_t v)
{
    return v < c->kind_cap ? c->kind[v] : PAD_UNKNOWN;
}

static cm_status kind_set(pfd *c, uint32_t v, uint8_t k)
{
    if (v >= c->kind_cap) {
        size_t cap = (size_t)c->m->n_values + 64;
        uint8_t *n = cm_realloc(c->kind, cap);
        if (n == NULL) {
            return CM_ENOMEM;
        }
        memset(n + c->kind_cap, 0, cap - c->kind_cap);
        c->kind = n;
        c->kind_cap = cap;
    }
    c->kind[v] = k;
    return CM_OK;
}

/* ---- building ops ------------------------------------------------------------------- */

typedef struct bld {
    pfd *c;
    uint32_t block, at; /* insertion point, advanced per op */
    cm_status st;
} bld;

static uint32_t emit(bld *b, const char *name, const uint32_t *operands, uint32_t n, uint32_t ty,
                     uint32_t *op_out)
{
    if (b->st != CM_OK) {
        return SP_NONE;
    }
    sp_module *m = b->c->m;
    uint32_t op;
    b->st = sp_module_new_op(m, SP_NONE, name, operands, n, &ty, 1, &op);
    if (b->st == CM_OK) {
        b->st = sp_block_insert_op(m, b->block, b->at++, op);
    }
    if (b->st != CM_OK) {
        return SP_NONE;
    }
    if (op_out != NULL) {
        *op_out = op;
    }
    return m->ops[op].first_result;
}

static void set_attr(bld *b, uint32_t op, const char *name, sp_attr *a)
{
    if (b->st == CM_OK) {
        b->st = a == NULL ? CM_ENOMEM : sp_op_set_attr(b->c->m, op, name, a);
    }
}

static void set_sharding(bld *b, uint32_t v, sp_sharding *s)
{
    if (b->st == CM_OK && v != SP_NONE && s != NULL) {
        b->st = sp_value_set_sharding(b->c->m, v, s);
    }
}

static uint32_t scalar_type(bld *b, sp_elem e)
{
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(b->c->m, e, NULL, 0, &ty, NULL);
    }
    return ty;
}

/* A scalar `stablehlo.constant` of element type e holding v (0 or 1). */
static uint32_t scalar_const(bld *b, sp_elem e, int64_t v)
{
    sp_module *m = b->c->m;
    uint32_t op = SP_NONE, ty = scalar_type(b, e);
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, ty, &op);
    if (r == SP_NONE) {
        return r;
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *z = cm_arena_alloc(&m->arena, sizeof *z);
    if (a == NULL || z == NULL) {
        b->st = CM_ENOMEM;
        return SP_NONE;
    }
    bool is_int = e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
    *z = v;
    a->u.dense.body = e == SP_ELEM_I1       ? (v ? "true" : "false")
                      : is_int              ? (v ? "1" : "0")
                      : v ? "1.000000e+00" : "0.000000e+00";
    a->u.dense.type = ty;
    a->u.dense.ints = is_int ? z : NULL;
    a->u.dense.n_ints = is_int ? 1 : 0;
    set_attr(b, op, "value", a);
    return r;
}

/* `stablehlo.slice v [0:limit]` of type ty with sharding s. */
static uint32_t trim_slice(bld *b, uint32_t v, uint32_t ty, sp_sharding *s)
{
    sp_module *m = b->c->m;
    sp_type t = m->types[ty];
    int64_t zero[SP_MAX_RANK], one[SP_MAX_RANK];
    for (uint32_t i = 0; i < t.rank; i++) {
        zero[i] = 0;
        one[i] = 1;
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.slice", &v, 1, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "start_indices", sp_exp_i64_array(m, zero, t.rank));
        set_attr(b, op, "limit_indices", sp_exp_i64_array(m, t.dims, t.rank));
        set_attr(b, op, "strides", sp_exp_i64_array(m, one, t.rank));
    }
    set_sharding(b, r, s);
    return r;
}

/* Slices res (of the padded type) back to orig_ty's sizes on the dimensions
 * flagged in dims where it is larger; res itself when none is. */
static uint32_t trim_dims(bld *b, uint32_t res, uint32_t orig_ty, const bool *dims,
                          sp_sharding *s)
{
    sp_module *m = b->c->m;
    sp_type rt = *sp_value_type(m, res), ot = m->types[orig_ty];
    if (rt.kind != SP_TYPE_TENSOR || ot.kind != SP_TYPE_TENSOR || rt.rank != ot.rank ||
        rt.rank > SP_MAX_RANK) {
        return res;
    }
    int64_t lim[SP_MAX_RANK];
    bool need = false;
    for (uint32_t i = 0; i < rt.rank; i++) {
        lim[i] = rt.dims[i];
        if (dims[i] && rt.dims[i] > ot.dims[i]) {
            lim[i] = ot.dims[i];
            need = true;
        }
    }
    if (!need) {
        return res;
    }
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = retyped(m, &rt, lim, &ty);
    }
    return b->st == CM_OK ? trim_slice(b, res, ty, s) : SP_NONE;
}

/* `stablehlo.pad v, pad, high = padded - current` to type ty, sharded like v. */
static uint32_t pad_to(bld *b, uint32_t v, uint32_t ty, uint32_t padval)
{
    sp_module *m = b->c->m;
    sp_type vt = *sp_value_type(m, v), t = m->types[ty];
    int64_t zero[SP_MAX_RANK], high[SP_MAX_RANK];
    for (uint32_t i = 0; i < t.rank; i++) {
        zero[i] = 0;
        high[i] = t.dims[i] - vt.dims[i];
    }
    uint32_t ops[2] = {v, padval}, op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.pad", ops, 2, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "edge_padding_low", sp_exp_i64_array(m, zero, t.rank));
        set_attr(b, op, "edge_padding_high", sp_exp_i64_array(m, high, t.rank));
        set_attr(b, op, "interior_padding", sp_exp_i64_array(m, zero, t.rank));
    }
    set_sharding(b, r, sp_value_sharding_partitioned(m, v));
    return r;
}

/* Shardy's ensurePaddingWithValue: v (padded from orig_ty) with the padding
 * region of the dimensions flagged in only (all padded ones when NULL)
 * replaced by the scalar padval: iota < size masks, and-ed, then select. */
static uint32_t mask_padding(bld *b, uint32_t v, uint32_t orig_ty, uint32_t padval, const bool *only)
{
    sp_module *m = b->c->m;
    if (v == SP_NONE || m->values[v].type == orig_ty) {
        return v;
    }
    sp_type pt = *sp_value_type(m, v), ot = m->types[orig_ty];
    if (pt.kind != SP_TYPE_TENSOR || ot.kind != SP_TYPE_TENSOR || pt.rank != ot.rank) {
        return v;
    }
    sp_sharding *s = sp_value_sharding_partitioned(m, v);
    uint32_t mask = SP_NONE, ity = SP_NONE, bty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(m, SP_ELEM_I32, pt.dims, pt.rank, &ity, NULL);
    }
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(m, SP_ELEM_I1, pt.dims, pt.rank, &bty, NULL);
    }
    for (uint32_t d = 0; d < pt.rank && b->st == CM_OK; d++) {
        if (ot.dims[d] == pt.dims[d] || (only != NULL && !only[d])) {
            continue;
        }
        uint32_t op = SP_NONE;
        uint32_t iota = emit(b, "stablehlo.iota", NULL, 0, ity, &op);
        if (iota != SP_NONE) {
            sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
            if (a != NULL) {
                a->u.i.v = d;
                a->u.i.type = "i64";
            }
            set_attr(b, op, "iota_dimension", a);
        }
        set_sharding(b, iota, s);
        uint32_t lim = emit(b, "stablehlo.constant", NULL, 0, scalar_type(b, SP_ELEM_I32), &op);
        if (lim != SP_NONE) {
            sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
            int64_t *z = cm_arena_alloc(&m->arena, sizeof *z);
            char buf[32];
            snprintf(buf, sizeof buf, "%lld", (long long)ot.dims[d]);
            const char *body = sp_module_str(m, buf, strlen(buf));
            if (a == NULL || z == NULL || body == NULL) {
                b->st = CM_ENOMEM;
                return SP_NONE;
            }
            *z = ot.dims[d];
            a->u.dense.body = body;
            a->u.dense.type = m->values[lim].type;
            a->u.dense.ints = z;
            a->u.dense.n_ints = 1;
            set_attr(b, op, "value", a);
        }
        uint32_t blim = emit(b, "stablehlo.broadcast_in_dim", &lim, 1, ity, &op);
        if (blim != SP_NONE) {
            set_attr(b, op, "broadcast_dimensions", sp_exp_i64_array(m, NULL, 0));
        }
        set_sharding(b, blim, s);
        uint32_t cops[2] = {iota, blim};
        uint32_t cmp = emit(b, "stablehlo.compare", cops, 2, bty, &op);
        if (cmp != SP_NONE) {
            sp_attr *a = sp_attr_new(m, SP_ATTR_ENUM);
            if (a != NULL) {
                a->u.enm.dialect = "stablehlo";
                a->u.enm.kind = "comparison_direction";
                a->u.enm.value = "LT";
            }
            set_attr(b, op, "comparison_direction", a);
        }
        set_sharding(b, cmp, s);
        if (mask == SP_NONE) {
            mask = cmp;
        } else {
            uint32_t aops[2] = {mask, cmp};
            mask = emit(b, "stablehlo.and", aops, 2, bty, NULL);
            set_sharding(b, mask, s);
        }
    }
    if (mask == SP_NONE || b->st != CM_OK) {
        return b->st == CM_OK ? v : SP_NONE;
    }
    uint32_t op = SP_NONE;
    uint32_t bpad = emit(b, "stablehlo.broadcast_in_dim", &padval, 1, m->values[v].type, &op);
    if (bpad != SP_NONE) {
        set_attr(b, op, "broadcast_dimensions", sp_exp_i64_array(m, NULL, 0));
    }
    set_sharding(b, bpad, s);
    uint32_t sops[3] = {mask, v, bpad};
    uint32_t sel = emit(b, "stablehlo.select", sops, 3, m->values[v].type, NULL);
    set_sharding(b, sel, s);
    return sel;
}

/* Shardy's ensurePaddingWithKind for zero: v unless it is unpadded or
 * known to be zero-padded. */
static uint32_t ensure_zero(bld *b, uint32_t v, uint32_t orig_ty, const bool *only)
{
    pfd *c = b->c;
    if (c->m->values[v].type == orig_ty || kind_get(c, v) == PAD_ZERO) {
        return v;
    }
    uint32_t z = scalar_const(b, sp_value_type(c->m, v)->elem, 0);
    uint32_t r = mask_padding(b, v, orig_ty, z, only);
    if (r != v && r != SP_NONE && only == NULL && b->st == CM_OK) {
        b->st = kind_set(c, r, PAD_ZERO);
    }
    return r;
}

static void replace_later(pfd *c, uint32_t v, uint32_t w);

/* ---- the patterns ------------------------------------------------------------------- */

static void op_error(pfd *c, uint32_t op, const char *msg)
{
    sp_diags_add(c->d, c->m, op, SP_DIAG_ERROR, "'%s' op %s", c->m->ops[op].name, msg);
    c->failed = true;
}

/* Function inputs and outputs must divide: an error per offending one. */
static bool func_io_ok(pfd *c, uint32_t f)
{
    sp_module *m = c->m;
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL) {
        return true;
    }
    uint32_t n_in = ft->n_inputs, n_res = ft->n_results;
    for (int pass = 0; pass < 2; pass++) {
        bool is_arg = pass == 0;
        uint32_t n = is_arg ? n_in : n_res;
        for (uint32_t i = 0; i < n; i++) {
            const sp_type *t2 = sp_func_type(m, f);
            uint32_t ty = is_arg ? t2->inputs[i] : t2->results[i], pty;
            const sp_sharding *s =
                is_arg ? (m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0 &&
                                  i < m->blocks[m->ops[f].regions[0].blocks[0]].n_args
                              ? sp_value_sharding(
                                    m, m->blocks[m->ops[f].regions[0].blocks[0]].first_arg + i)
                              : NULL)
                       : sp_func_result_sharding(m, f, i);
            if (padded_type(m, ty, s, &pty) == CM_OK && pty != ty) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         "%s #%u has a non-divisible sharding. Shardy expects function IO to be "
                         "divisible.",
                         is_arg ? "argument" : "result", i);
                op_error(c, f, msg);
                sp_diags_add(c->d, m, f, SP_DIAG_ERROR, "failed to legalize operation '%s'",
                             m->ops[f].name);
                return false;
            }
        }
    }
    return true;
}

/* Result r of op takes its padded type, widened to `inferred` (SP_NONE: none). */
static cm_status pad_result(pfd *c, uint32_t r, uint32_t inferred)
{
    sp_module *m = c->m;
    uint32_t pty;
    cm_status st = padded_type(m, orig_type(c, r), sp_value_sharding_partitioned(m, r), &pty);
    if (st == CM_OK && inferred != SP_NONE) {
        st = max_type(m, pty, inferred, &pty);
    }
    if (st == CM_OK) {
        m->values[r].type = pty;
    }
    return st;
}

/* The result type an elementwise op infers from its current operand 0: the
 * operand's sizes with the result's element type, when the op kept its
 * operand's shape; else SP_NONE. */
static uint32_t inferred_elementwise(pfd *c, uint32_t op, const uint32_t *orig, uint32_t r)
{
    sp_module *m = c->m;
    const sp_op *o = &m->ops[op];
    if (o->n_operands == 0 || orig == NULL) {
        return SP_NONE;
    }
    sp_type ot = m->types[orig_type(c, orig[0])], rt = m->types[orig_type(c, r)];
    sp_type cur = *sp_value_type(m, o->operands[0]);
    if (ot.kind != SP_TYPE_TENSOR || rt.kind != SP_TYPE_TENSOR || cur.kind != SP_TYPE_TENSOR ||
        ot.rank != rt.rank || cur.rank != rt.rank) {
        return SP_NONE;
    }
    for (uint32_t i = 0; i < rt.rank; i++) {
        if (ot.dims[i] != rt.dims[i]) {
            return SP_NONE;
        }
    }
    uint32_t ty;
    return retyped(m, &rt, cur.dims, &ty) == CM_OK ? ty : SP_NONE;
}

static cm_status pad_generic(pfd *c, uint32_t op, const uint32_t *orig)
{
    sp_module *m = c->m;
    cm_status st = CM_OK;
    for (uint32_t k = 0; k < m->ops[op].n_results && st == CM_OK; k++) {
        uint32_t r = m->ops[op].first_result + k;
        st = pad_result(c, r, inferred_elementwise(c, op, orig, r));
    }
    return st;
}

static const int64_t *darr_of(sp_module *m, uint32_t op, const char *name, uint32_t rank)
{
    const int64_t *v = NULL;
    uint32_t n = 0;
    if (!sp_attr_ints(sp_op_attr(m, op, name), &v, &n, &m->arena) || n != rank) {
        return NULL;
    }
    return v;
}

/* stablehlo.slice: a padded result widens its limits to start + padded size. */
static cm_status pad_slice(pfd *c, uint32_t op)
{
    sp_module *m = c->m;
    uint32_t r = m->ops[op].first_result, pty;
    cm_status st = padded_type(m, orig_type(c, r), sp_value_sharding_partitioned(m, r), &pty);
    if (st != CM_OK || pty == m->values[r].type) {
        return st;
    }
    sp_type pt = m->types[pty];
    const int64_t *start = darr_of(m, op, "start_indices", pt.rank);
    if (start == NULL || pt.rank > SP_MAX_RANK) {
        op_error(c, op, "has malformed slice indices");
        return CM_EINVAL;
    }
    sp_type it = *sp_value_type(m, m->ops[op].operands[0]);
    int64_t lim[SP_MAX_RANK];
    for (uint32_t i = 0; i < pt.rank; i++) {
        lim[i] = start[i] + pt.dims[i];
        if (it.kind == SP_TYPE_TENSOR && it.rank == pt.rank && it.dims[i] != SP_DIM_DYNAMIC &&
            lim[i] > it.dims[i]) {
            /* Shardy asserts this cannot happen: resolve-permutation-factors
             * leaves only communication-free slices of padded dimensions */
            op_error(c, op, "pads a sliced dimension past its operand; the slice needs "
                            "communication (run -sdy-resolve-permutation-factors first)");
            return CM_EINVAL;
        }
    }
    sp_attr *a = sp_exp_i64_array(m, lim, pt.rank);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    st = sp_op_set_attr(m, op, "limit_indices", a);
    if (st == CM_OK) {
        m->values[r].type = pty;
    }
    return st;
}

/* stablehlo.pad: the trailing padding becomes what gives the padded result
 * from the current input; when that shrinks it, the input's own padding
 * region is first set to the padding value. */
static cm_status pad_pad(pfd *c, uint32_t op, const uint32_t *orig, uint32_t block, uint32_t *at)
{
    sp_module *m = c->m;
    sp_op *o = &m->ops[op];
    if (o->n_operands != 2 || orig == NULL) {
        return CM_OK;
    }
    uint32_t r = o->first_result, pty;
    cm_status st = padded_type(m, orig_type(c, r), sp_value_sharding_partitioned(m, r), &pty);
    if (st != CM_OK) {
        return st;
    }
    sp_type it = *sp_value_type(m, o->operands[0]), pt = m->types[pty];
    if (it.kind != SP_TYPE_TENSOR || it.rank != pt.rank || it.rank > SP_MAX_RANK) {
        return CM_OK;
    }
    const int64_t *low = darr_of(m, op, "edge_padding_low", it.rank);
    const int64_t *high = darr_of(m, op, "edge_padding_high", it.rank);
    const int64_t *intr = darr_of(m, op, "interior_padding", it.rank);
    if (low == NULL || high == NULL || intr == NULL) {
        op_error(c, op, "has malformed padding");
        return CM_EINVAL;
    }
    int64_t nh[SP_MAX_RANK];
    bool reduced = false;
    for (uint32_t d = 0; d < it.rank; d++) {
        int64_t in = it.dims[d];
        nh[d] = pt.dims[d] - in - low[d] - (in > 1 ? in - 1 : 0) * intr[d];
        reduced = reduced || nh[d] < high[d];
    }
    if (reduced) {
        bld b = {c, block, *at, CM_OK};
        uint32_t in = mask_padding(&b, m->ops[op].operands[0], orig_type(c, orig[0]),
                                   m->ops[op].operands[1], NULL);
        if (b.st != CM_OK) {
            return b.st;
        }
        m->ops[op].operands[0] = in;
        *at = b.at;
    }
    sp_attr *a = sp_exp_i64_array(m, nh, it.rank);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    st = sp_op_set_attr(m, op, "edge_padding_high", a);
    if (st == CM_OK) {
        m->values[r].type = pty;
    }
    return st;
}

/* stablehlo.dot_general: zero padding on the contracting dimensions, then
 * the result type the operands give (batch, lhs free, rhs free sizes),
 * widened to the padded one. */
static cm_status pad_dot(pfd *c, uint32_t op, const uint32_t *orig, uint32_t block, uint32_t *at,
                         cm_error *err)
{
    sp_module *m = c->m;
    sp_dot_dims dd;
    if (orig == NULL || sp_dot_dims_get(m, op, &dd, err) != CM_OK) {
        op_error(c, op, "has malformed dot dimension numbers");
        return CM_EINVAL;
    }
    bld b = {c, block, *at, CM_OK};
    for (uint32_t side = 0; side < 2; side++) {
        bool only[SP_MAX_RANK] = {false};
        for (uint32_t k = 0; k < dd.n_contract; k++) {
            int64_t d = side == 0 ? dd.lhs_contract[k] : dd.rhs_contract[k];
            if (d >= 0 && d < SP_MAX_RANK) {
                only[d] = true;
            }
        }
        uint32_t v = ensure_zero(&b, m->ops[op].operands[side], orig_type(c, orig[side]), only);
        if (b.st != CM_OK) {
            return b.st;
        }
        m->ops[op].operands[side] = v;
    }
    *at = b.at;
    sp_type lt = *sp_value_type(m, m->ops[op].operands[0]);
    sp_type rt = *sp_value_type(m, m->ops[op].operands[1]);
    uint32_t r = m->ops[op].first_result;
    sp_type res = m->types[orig_type(c, r)];
    int64_t dims[SP_MAX_RANK];
    uint32_t n = 0;
    bool used[2][SP_MAX_RANK] = {{false}};
    for (uint32_t k = 0; k < dd.n_batch && n < SP_MAX_RANK; k++) {
        dims[n++] = lt.dims[dd.lhs_batch[k]];
        used[0][dd.lhs_batch[k]] = used[1][dd.rhs_batch[k]] = true;
    }
    for (uint32_t k = 0; k < dd.n_contract; k++) {
        used[0][dd.lhs_contract[k]] = used[1][dd.rhs_contract[k]] = true;
    }
    for (uint32_t d = 0; d < lt.rank && n < SP_MAX_RANK; d++) {
        if (!used[0][d]) {
            dims[n++] = lt.dims[d];
        }
    }
    for (uint32_t d = 0; d < rt.rank && n < SP_MAX_RANK; d++) {
        if (!used[1][d]) {
            dims[n++] = rt.dims[d];
        }
    }
    uint32_t inferred = SP_NONE;
    if (n == res.rank && retyped(m, &res, dims, &inferred) != CM_OK) {
        inferred = SP_NONE;
    }
    return pad_result(c, r, inferred);
}

/* A convolution window list attribute of n entries, or def when absent. */
static void window_list(sp_module *m, uint32_t op, const char *name, uint32_t n, int64_t def,
                        int64_t *out)
{
    const int64_t *v = NULL;
    uint32_t k = 0;
    bool ok = sp_attr_ints(sp_op_attr(m, op, name), &v, &k, &m->arena) && k == n;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = ok ? v[i] : def;
    }
}

/* stablehlo.convolution: zero padding on the lhs feature and spatial
 * dimensions and the kernel's input feature and spatial dimensions; the
 * result takes the type the padded operands give (Shardy's convolution
 * shape inference), then its spatial dimensions are sliced back to the
 * padded result's sizes. A spatial size smaller than the padded one is an
 * error (resolve-permutation-factors should have made it divisible). */
static cm_status pad_conv(pfd *c, uint32_t op, const uint32_t *orig, uint32_t block, uint32_t *at,
                          cm_error *err)
{
    sp_module *m = c->m;
    sp_conv_dims cd;
    if (orig == NULL || sp_conv_dims_get(m, op, &cd, err) != CM_OK) {
        op_error(c, op, "has malformed convolution dimension numbers");
        return CM_EINVAL;
    }
    bld b = {c, block, *at, CM_OK};
    for (uint32_t side = 0; side < 2; side++) {
        bool only[SP_MAX_RANK] = {false};
        int64_t f = side == 0 ? cd.input_feature : cd.kernel_input_feature;
        only[f] = true;
        for (uint32_t k = 0; k < cd.n_spatial; k++) {
            only[side == 0 ? cd.input_spatial[k] : cd.kernel_spatial[k]] = true;
        }
        uint32_t v = ensure_zero(&b, m->ops[op].operands[side], orig_type(c, orig[side]), only);
        if (b.st != CM_OK) {
            return b.st;
        }
        m->ops[op].operands[side] = v;
    }
    sp_type lt = *sp_value_type(m, m->ops[op].operands[0]);
    sp_type kt = *sp_value_type(m, m->ops[op].operands[1]);
    uint32_t r = m->ops[op].first_result, pty, ity;
    sp_type res = m->types[orig_type(c, r)];
    if (lt.rank != res.rank || kt.rank != res.rank || res.rank > SP_MAX_RANK) {
        op_error(c, op, "has operands and result of different ranks");
        return CM_EINVAL;
    }
    uint32_t ns = cd.n_spatial;
    int64_t strides[SP_MAX_RANK], ld[SP_MAX_RANK], rd[SP_MAX_RANK], padv[2 * SP_MAX_RANK];
    window_list(m, op, "window_strides", ns, 1, strides);
    window_list(m, op, "lhs_dilation", ns, 1, ld);
    window_list(m, op, "rhs_dilation", ns, 1, rd);
    window_list(m, op, "padding", 2 * ns, 0, padv);
    int64_t dims[SP_MAX_RANK];
    for (uint32_t i = 0; i < res.rank; i++) {
        dims[i] = res.dims[i];
    }
    dims[cd.output_batch] = lt.dims[cd.input_batch] / (cd.batch_group_count > 0 ? cd.batch_group_count : 1);
    dims[cd.output_feature] = kt.dims[cd.kernel_output_feature];
    for (uint32_t k = 0; k < ns; k++) {
        int64_t in = lt.dims[cd.input_spatial[k]], kw = kt.dims[cd.kernel_spatial[k]];
        int64_t din = (in > 0 ? (in - 1) * ld[k] + 1 : 0) + padv[2 * k] + padv[2 * k + 1];
        int64_t dk = kw > 0 ? (kw - 1) * rd[k] + 1 : 0;
        int64_t st = strides[k] > 0 ? strides[k] : 1;
        dims[cd.output_spatial[k]] = din < dk ? 0 : (din - dk) / st + 1;
    }
    cm_status st = retyped(m, &res, dims, &ity);
    if (st == CM_OK) {
        st = padded_type(m, orig_type(c, r), sp_value_sharding_partitioned(m, r), &pty);
    }
    if (st != CM_OK) {
        return st;
    }
    bool trim[SP_MAX_RANK] = {false};
    for (uint32_t k = 0; k < ns; k++) {
        int64_t d = cd.output_spatial[k];
        trim[d] = true;
        if (dims[d] < m->types[pty].dims[d]) {
            op_error(c, op,
                     "inferred convolution output spatial size is smaller than the target padded "
                     "size. Spatial sharding must be resolved by resolve-permutation-factors to "
                     "be divisible or replicated.");
            sp_diags_add(c->d, m, op, SP_DIAG_ERROR, "failed to legalize operation '%s'",
                         m->ops[op].name);
            return CM_EINVAL;
        }
    }
    m->values[r].type = ity;
    *at = b.at;
    b.at = *at + 1;
    uint32_t t = trim_dims(&b, r, pty, trim, sp_value_sharding_partitioned(m, r));
    if (b.st == CM_OK && t != r) {
        b.st = kind_set(c, t, PAD_ZERO);
    }
    if (b.st == CM_OK) {
        replace_later(c, r, t);
        *at = b.at - 1;
    }
    return b.st;
}

/* sdy.all_slice, sdy.reduce_scatter, sdy.all_to_all: the input padded to
 * the divisible type under the out sharding (with the padding it is known
 * to carry when already padded, else zero), the result of that type. */
static cm_status pad_collective(pfd *c, uint32_t op, const uint32_t *orig, uint32_t block,
                                uint32_t *at, uint8_t *kind_out)
{
    sp_module *m = c->m;
    uint32_t in = m->ops[op].operands[0], r = m->ops[op].first_result, pty;
    const sp_sharding *out = sp_value_sharding_partitioned(m, r);
    cm_status st = padded_type(m, m->values[in].type, out, &pty);
    if (st != CM_OK) {
        return st;
    }
    uint8_t kind = kind_get(c, in);
    bool padded_before = m->values[in].type != orig_type(c, orig[0]);
    if (pty != m->values[in].type) {
        bld b = {c, block, *at, CM_OK};
        uint32_t z = scalar_const(&b, sp_value_type(m, in)->elem, 0);
        uint32_t p = pad_to(&b, in, pty, z);
        if (!padded_before) {
            kind = PAD_ZERO;
        }
        if (b.st == CM_OK && kind != PAD_UNKNOWN) {
            b.st = kind_set(c, p, kind);
        }
        if (b.st != CM_OK) {
            return b.st;
        }
        m->ops[op].operands[0] = p;
        *at = b.at;
    }
    m->values[r].type = pty;
    *kind_out = kind;
    return kind != PAD_UNKNOWN ? kind_set(c, r, kind) : CM_OK;
}

/* Records that later uses of original value v read w instead. */
static void replace_later(pfd *c, uint32_t v, uint32_t w)
{
    if (v < c->n_orig && w != v) {
        c->repl[v] = w;
    }
}

static cm_status pad_all_to_all(pfd *c, uint32_t op, const uint32_t *orig, uint32_t block,
                                uint32_t *at)
{
    sp_module *m = c->m;
    uint8_t kind = PAD_UNKNOWN;
    cm_status st = pad_collective(c, op, orig, block, at, &kind);
    const sp_attr *p = sp_op_attr(m, op, "params");
    if (st != CM_OK || p == NULL || p->kind != SP_ATTR_ALL_TO_ALL) {
        return st;
    }
    bool dims[SP_MAX_RANK] = {false};
    for (uint32_t k = 0; k < p->u.a2a.n; k++) {
        int64_t d = p->u.a2a.items[k].src_dim;
        if (d >= 0 && d < SP_MAX_RANK) {
            dims[d] = true;
        }
    }
    uint32_t r = m->ops[op].first_result;
    bld b = {c, block, *at + 1, CM_OK};
    uint32_t t = trim_dims(&b, r, orig_type(c, orig[0]), dims, sp_value_sharding_partitioned(m, r));
    if (b.st == CM_OK && t != r && kind != PAD_UNKNOWN) {
        b.st = kind_set(c, t, kind);
    }
    if (b.st == CM_OK) {
        replace_later(c, r, t);
        *at = b.at - 1;
    }
    return b.st;
}

/* sdy.all_gather: the result is the input's type widened to the padded
 * result type; the gathered dimensions are sliced back to their size. */
static cm_status pad_all_gather(pfd *c, uint32_t op, uint32_t block, uint32_t *at)
{
    sp_module *m = c->m;
    uint32_t in = m->ops[op].operands[0], r = m->ops[op].first_result;
    cm_status st = pad_result(c, r, m->values[in].type);
    uint8_t kind = kind_get(c, in);
    if (st == CM_OK && kind != PAD_UNKNOWN) {
        st = kind_set(c, r, kind);
    }
    const sp_attr *g = sp_op_attr(m, op, "gathering_axes");
    if (st != CM_OK || g == NULL || g->kind != SP_ATTR_AXIS_LISTS) {
        return st;
    }
    bool dims[SP_MAX_RANK] = {false};
    for (uint32_t d = 0; d < g->u.axis_lists.n && d < SP_MAX_RANK; d++) {
        dims[d] = g->u.axis_lists.items[d].n > 0;
    }
    bld b = {c, block, *at + 1, CM_OK};
    uint32_t t = trim_dims(&b, r, orig_type(c, r), dims, sp_value_sharding_partitioned(m, r));
    if (b.st == CM_OK && t != r && kind != PAD_UNKNOWN) {
        b.st = kind_set(c, t, kind);
    }
    if (b.st == CM_OK) {
        replace_later(c, r, t);
        *at = b.at - 1;
    }
    return b.st;
}

/* ---- the walk ----------------------------------------------------------------------- */

static bool is_generic(const sp_op *o)
{
    if (strncmp(o->name, "stablehlo.", 10) == 0) {
        return true;
    }
    return o->kind == SP_OP_SDY_RETURN || o->kind == SP_OP_SDY_ALL_REDUCE ||
           o->kind == SP_OP_SDY_SHARDED_TO_UNREDUCED ||
           o->kind == SP_OP_SDY_REPLICATED_TO_UNREDUCED;
}

static cm_status pad_block(pfd *c, uint32_t block, cm_error *err)
{
    sp_module *m = c->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        sp_op *o = &m->ops[op];
        uint32_t *orig = NULL;
        if (o->n_operands > 0) {
            orig = cm_alloc(sizeof *orig * o->n_operands);
            if (orig == NULL) {
                return CM_ENOMEM;
            }
            memcpy(orig, o->operands, sizeof *orig * o->n_operands);
        }
        for (uint32_t k = 0; k < o->n_operands; k++) {
            uint32_t v = o->operands[k];
            while (v < c->n_orig && c->repl[v] != SP_NONE) {
                v = c->repl[v];
            }
            o->operands[k] = v;
        }
        cm_status st = CM_OK;
        uint32_t at = i;
        bool walk_regions = true;
        uint8_t kind = PAD_UNKNOWN;
        uint32_t okind = o->kind;
        if (okind != SP_OP_FUNC_FUNC && (o->n_operands == 0 || o->n_results == 0)) {
            okind = SP_OP_UNKNOWN; /* malformed: only the generic retyping applies */
        }
        switch (okind) {
        case SP_OP_FUNC_FUNC:
            walk_regions = func_io_ok(c, op);
            break;
        case SP_OP_SLICE:
            st = pad_slice(c, op);
            break;
        case SP_OP_PAD:
            st = pad_pad(c, op, orig, block, &at);
            break;
        case SP_OP_DOT_GENERAL:
            st = pad_dot(c, op, orig, block, &at, err);
            break;
        case SP_OP_CONVOLUTION:
            st = pad_conv(c, op, orig, block, &at, err);
            break;
        case SP_OP_SDY_ALL_SLICE:
        case SP_OP_SDY_REDUCE_SCATTER:
            st = pad_collective(c, op, orig, block, &at, &kind);
            break;
        case SP_OP_SDY_ALL_TO_ALL:
            st = pad_all_to_all(c, op, orig, block, &at);
            break;
        case SP_OP_SDY_ALL_GATHER:
            st = pad_all_gather(c, op, block, &at);
            break;
        default:
            if (is_generic(o)) {
                st = pad_generic(c, op, orig);
            }
            break;
        }
        cm_free(orig);
        if (st != CM_OK) {
            return st;
        }
        /* at is where op now sits (ops were inserted before it) or the last op inserted after it */
        for (uint32_t r = 0; walk_regions && r < m->ops[op].n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks && st == CM_OK; k++) {
                st = pad_block(c, m->ops[op].regions[r].blocks[k], err);
            }
        }
        if (st != CM_OK) {
            return st;
        }
        i = at;
    }
    return CM_OK;
}

cm_status sp_pass_pad_for_divisibility(sp_module *m, sp_diags *d, cm_error *err)
{
    pfd c = {m, d, m->n_values, NULL, NULL, NULL, 0, false};
    c.orig_ty = cm_alloc(sizeof *c.orig_ty * ((size_t)m->n_values + 1));
    c.repl = cm_alloc(sizeof *c.repl * ((size_t)m->n_values + 1));
    if (c.orig_ty == NULL || c.repl == NULL) {
        cm_free(c.orig_ty);
        cm_free(c.repl);
        return cm_error_oom(err);
    }
    for (uint32_t v = 0; v < m->n_values; v++) {
        c.orig_ty[v] = m->values[v].type;
        c.repl[v] = SP_NONE;
    }
    cm_status st = pad_block(&c, m->body, err);
    cm_free(c.orig_ty);
    cm_free(c.repl);
    cm_free(c.kind);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (st != CM_OK || c.failed) {
        return cm_error_set(err, CM_EINVAL, NULL, "-sdy-pad-for-divisibility failed");
    }
    return CM_OK;
}
