/* SPDX-License-Identifier: Apache-2.0
 * planner: the typed StableHLO attribute accessors (sp_attrs.h). The checks
 * and their messages are the sharding-rule registry's, which had the most;
 * the executor's extra ones (index map against the index vector, slice sizes
 * against the operand, positive windows) joined them here. */
#include "sp_attrs.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"

cm_status sp_op_errorv(const sp_module *m, uint32_t op, cm_error *err, const char *fmt, va_list ap)
{
    char msg[200];
    char path[48] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    const sp_op *o = &m->ops[op];
    if (o->line > 0) {
        snprintf(path, sizeof path, "%u:%u", o->line, o->col);
    }
    return cm_error_set(err, CM_EINVAL, path, "%s: %s", o->name, msg);
}

cm_status sp_op_error(const sp_module *m, uint32_t op, cm_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_status st = sp_op_errorv(m, op, err, fmt, ap);
    va_end(ap);
    return st;
}

/* What the checks of one op need: the op and where its errors go. */
typedef struct actx {
    const sp_module *m;
    uint32_t op;
    const sp_op *o;
    cm_error *err;
} actx;

#define bad(c, ...) sp_op_error((c)->m, (c)->op, (c)->err, __VA_ARGS__)

static uint32_t value_rank(const sp_module *m, uint32_t v)
{
    const sp_type *t = sp_value_type(m, v);
    return t->kind == SP_TYPE_TENSOR ? t->rank : 0u;
}

/* Size of dimension d of value v, or -1 when it is not a static tensor
 * dimension. */
static int64_t value_dim(const sp_module *m, uint32_t v, uint32_t d)
{
    const sp_type *t = sp_value_type(m, v);
    return t->kind == SP_TYPE_TENSOR && d < t->rank && t->dims[d] >= 0 ? t->dims[d] : -1;
}

static const sp_attr *param(const sp_attr *p, const char *name)
{
    if (p == NULL || p->kind != SP_ATTR_PARAMS) {
        return NULL;
    }
    return sp_attrs_get(p->u.params.items, p->u.params.n, name);
}

/* Copies the integer list a (an integer, array<i64: ...>, dense<...> or a
 * list of integers) named name into v (at most cap entries) and its length
 * into *n. An absent list is empty unless required. */
static cm_status ints_of(actx *c, const sp_attr *a, const char *name, bool required, int64_t *v,
                         uint32_t cap, uint32_t *n)
{
    *n = 0;
    if (a == NULL) {
        return required ? bad(c, "missing attribute %s", name) : CM_OK;
    }
    const int64_t *src = NULL;
    uint32_t len = 0;
    switch (a->kind) {
    case SP_ATTR_INT:
        src = &a->u.i.v;
        len = 1;
        break;
    case SP_ATTR_DENSE_ARRAY:
        src = a->u.darr.v;
        len = a->u.darr.n;
        break;
    case SP_ATTR_DENSE:
        if (a->u.dense.ints == NULL && a->u.dense.n_ints > 0) {
            return bad(c, "attribute %s is not a list of integers", name);
        }
        src = a->u.dense.ints;
        len = a->u.dense.n_ints;
        break;
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            if (a->u.arr.items[i]->kind != SP_ATTR_INT) {
                return bad(c, "attribute %s is not a list of integers", name);
            }
        }
        len = a->u.arr.n;
        break;
    default:
        return bad(c, "attribute %s is not a list of integers", name);
    }
    if (len > cap) {
        return bad(c, "attribute %s has %u entries, more than any rank allows", name, len);
    }
    for (uint32_t i = 0; i < len; i++) {
        v[i] = src != NULL ? src[i] : a->u.arr.items[i]->u.i.v;
    }
    *n = len;
    return CM_OK;
}

/* Reads one integer; an absent one is dflt unless required. */
static cm_status int_of(actx *c, const sp_attr *a, const char *name, bool required, int64_t dflt,
                        int64_t *out)
{
    *out = dflt;
    if (a == NULL) {
        return required ? bad(c, "missing attribute %s", name) : CM_OK;
    }
    if (a->kind != SP_ATTR_INT) {
        return bad(c, "attribute %s must be one integer", name);
    }
    *out = a->u.i.v;
    return CM_OK;
}

cm_status sp_op_dim_check(const sp_module *m, uint32_t op, int64_t v, uint32_t rank,
                          const char *what, cm_error *err)
{
    if (v < 0 || v >= (int64_t)rank) {
        return sp_op_error(m, op, err, "%s %lld is out of range for rank %u", what, (long long)v,
                           rank);
    }
    return CM_OK;
}

cm_status sp_op_dims_check(const sp_module *m, uint32_t op, const int64_t *v, uint32_t n,
                           uint32_t rank, const char *what, cm_error *err)
{
    for (uint32_t i = 0; i < n; i++) {
        cm_status st = sp_op_dim_check(m, op, v[i], rank, what, err);
        if (st != CM_OK) {
            return st;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (v[j] == v[i]) {
                return sp_op_error(m, op, err, "%s %lld is repeated", what, (long long)v[i]);
            }
        }
    }
    return CM_OK;
}

static cm_status dim_ok(actx *c, int64_t v, uint32_t rank, const char *what)
{
    return sp_op_dim_check(c->m, c->op, v, rank, what, c->err);
}

static cm_status dims_ok(actx *c, const int64_t *v, uint32_t n, uint32_t rank, const char *what)
{
    return sp_op_dims_check(c->m, c->op, v, n, rank, what, c->err);
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

static void actx_init(actx *c, const sp_module *m, uint32_t op, cm_error *err)
{
    c->m = m;
    c->op = op;
    c->o = &m->ops[op];
    c->err = err;
}

/* ---- dot ------------------------------------------------------------------ */

cm_status sp_dot_dims_get(const sp_module *m, uint32_t op, sp_dot_dims *out, cm_error *err)
{
    actx c;
    actx_init(&c, m, op, err);
    out->n_batch = out->n_contract = 0;
    if (c.o->n_operands != 2 || c.o->n_results != 1) {
        return bad(&c, "expected two operands and one result");
    }
    uint32_t lhs = c.o->operands[0], rhs = c.o->operands[1];
    uint32_t lr = value_rank(m, lhs), rr = value_rank(m, rhs);
    uint32_t orank = value_rank(m, c.o->first_result);
    cm_status st;
    if (c.o->kind == SP_OP_DOT) {
        if (lr < 1 || lr > 2 || rr < 1 || rr > 2) {
            return bad(&c, "operands must be vectors or matrices");
        }
        out->n_contract = 1;
        out->lhs_contract[0] = (int64_t)lr - 1;
        out->rhs_contract[0] = 0;
    } else {
        const sp_attr *dn = sp_op_attr(m, op, "dot_dimension_numbers");
        if (dn == NULL || dn->kind != SP_ATTR_PARAMS) {
            return bad(&c, "missing dot_dimension_numbers");
        }
        uint32_t nrb, nrc;
        if ((st = ints_of(&c, param(dn, "lhs_batching_dimensions"), "lhs_batching_dimensions",
                          false, out->lhs_batch, SP_MAX_RANK, &out->n_batch)) != CM_OK ||
            (st = ints_of(&c, param(dn, "rhs_batching_dimensions"), "rhs_batching_dimensions",
                          false, out->rhs_batch, SP_MAX_RANK, &nrb)) != CM_OK ||
            (st = ints_of(&c, param(dn, "lhs_contracting_dimensions"), "lhs_contracting_dimensions",
                          false, out->lhs_contract, SP_MAX_RANK, &out->n_contract)) != CM_OK ||
            (st = ints_of(&c, param(dn, "rhs_contracting_dimensions"), "rhs_contracting_dimensions",
                          false, out->rhs_contract, SP_MAX_RANK, &nrc)) != CM_OK) {
            return st;
        }
        if (out->n_batch != nrb || out->n_contract != nrc) {
            return bad(&c, "lhs and rhs dimension lists differ in length");
        }
        for (uint32_t i = 0; i < out->n_batch; i++) {
            int64_t lb = out->lhs_batch[i], rb = out->rhs_batch[i];
            if (lb >= 0 && rb >= 0 && lb < (int64_t)lr && rb < (int64_t)rr) {
                int64_t ls = value_dim(m, lhs, (uint32_t)lb), rs = value_dim(m, rhs, (uint32_t)rb);
                if (ls >= 0 && rs >= 0 && ls != rs) {
                    return bad(&c, "batching dimensions differ in size");
                }
            }
        }
    }
    uint32_t nb = out->n_batch, nc = out->n_contract;
    if ((st = dims_ok(&c, out->lhs_batch, nb, lr, "lhs batching dimension")) != CM_OK ||
        (st = dims_ok(&c, out->rhs_batch, nb, rr, "rhs batching dimension")) != CM_OK ||
        (st = dims_ok(&c, out->lhs_contract, nc, lr, "lhs contracting dimension")) != CM_OK ||
        (st = dims_ok(&c, out->rhs_contract, nc, rr, "rhs contracting dimension")) != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < nb; i++) {
        if (in_list(out->lhs_contract, nc, out->lhs_batch[i]) ||
            in_list(out->rhs_contract, nc, out->rhs_batch[i])) {
            return bad(&c, "a dimension is both batching and contracting");
        }
    }
    if (orank + 2u * nc + nb != lr + rr) {
        return bad(&c, "result rank %u does not match the dimension numbers", orank);
    }
    return CM_OK;
}

/* ---- convolution ------------------------------------------------------------ */

/* One of the six single dimensions of a convolution: present, in range. */
static cm_status conv_dim(actx *c, const sp_attr *dn, const char *name, uint32_t rank, int64_t *out)
{
    cm_status st = int_of(c, param(dn, name), name, true, 0, out);
    return st != CM_OK ? st : dim_ok(c, *out, rank, name);
}

cm_status sp_conv_dims_get(const sp_module *m, uint32_t op, sp_conv_dims *out, cm_error *err)
{
    actx c;
    actx_init(&c, m, op, err);
    out->n_spatial = 0;
    if (c.o->n_operands != 2 || c.o->n_results != 1) {
        return bad(&c, "expected two operands and one result");
    }
    uint32_t lr = value_rank(m, c.o->operands[0]), kr = value_rank(m, c.o->operands[1]);
    uint32_t orr = value_rank(m, c.o->first_result);
    const sp_attr *dn = sp_op_attr(m, op, "dimension_numbers");
    if (dn == NULL || dn->kind != SP_ATTR_PARAMS) {
        return bad(&c, "missing dimension_numbers");
    }
    uint32_t nis, nks, nos;
    cm_status st;
    if ((st = conv_dim(&c, dn, "input_batch_dimension", lr, &out->input_batch)) != CM_OK ||
        (st = conv_dim(&c, dn, "input_feature_dimension", lr, &out->input_feature)) != CM_OK ||
        (st = conv_dim(&c, dn, "kernel_input_feature_dimension", kr, &out->kernel_input_feature)) !=
            CM_OK ||
        (st = conv_dim(&c, dn, "kernel_output_feature_dimension", kr,
                       &out->kernel_output_feature)) != CM_OK ||
        (st = conv_dim(&c, dn, "output_batch_dimension", orr, &out->output_batch)) != CM_OK ||
        (st = conv_dim(&c, dn, "output_feature_dimension", orr, &out->output_feature)) != CM_OK ||
        (st = ints_of(&c, param(dn, "input_spatial_dimensions"), "input_spatial_dimensions", false,
                      out->input_spatial, SP_MAX_RANK, &nis)) != CM_OK ||
        (st = ints_of(&c, param(dn, "kernel_spatial_dimensions"), "kernel_spatial_dimensions",
                      false, out->kernel_spatial, SP_MAX_RANK, &nks)) != CM_OK ||
        (st = ints_of(&c, param(dn, "output_spatial_dimensions"), "output_spatial_dimensions",
                      false, out->output_spatial, SP_MAX_RANK, &nos)) != CM_OK ||
        (st = int_of(&c, sp_op_attr(m, op, "batch_group_count"), "batch_group_count", false, 1,
                     &out->batch_group_count)) != CM_OK ||
        (st = int_of(&c, sp_op_attr(m, op, "feature_group_count"), "feature_group_count", false, 1,
                     &out->feature_group_count)) != CM_OK) {
        return st;
    }
    if (nis != nks || nis != nos || lr != nis + 2u || kr != nis + 2u || orr != nis + 2u) {
        return bad(&c, "spatial dimension lists do not match the ranks");
    }
    out->n_spatial = nis;
    if ((st = dims_ok(&c, out->input_spatial, nis, lr, "input spatial dimension")) != CM_OK ||
        (st = dims_ok(&c, out->kernel_spatial, nks, kr, "kernel spatial dimension")) != CM_OK ||
        (st = dims_ok(&c, out->output_spatial, nos, orr, "output spatial dimension")) != CM_OK) {
        return st;
    }
    if (out->batch_group_count < 1 || out->feature_group_count < 1) {
        return bad(&c, "group counts do not divide the batch and feature sizes");
    }
    return CM_OK;
}

/* ---- gather and scatter ------------------------------------------------------- */

cm_status sp_gather_dims_get(const sp_module *m, uint32_t op, sp_gather_dims *out, cm_error *err)
{
    static const char *const gather_names[6] = {
        "offset_dims",           "collapsed_slice_dims",
        "operand_batching_dims", "start_indices_batching_dims",
        "start_index_map",       "index_vector_dim"};
    static const char *const scatter_names[6] = {
        "update_window_dims",           "inserted_window_dims",
        "input_batching_dims",          "scatter_indices_batching_dims",
        "scatter_dims_to_operand_dims", "index_vector_dim"};
    actx c;
    actx_init(&c, m, op, err);
    out->n_offset = out->n_collapsed = out->n_operand_batch = out->n_indices_batch = 0;
    out->n_index_map = 0;
    out->index_vector_dim = 0;
    out->decoded = false;
    bool scatter = c.o->kind == SP_OP_SCATTER;
    const char *const *names = scatter ? scatter_names : gather_names;
    uint32_t nops = c.o->n_operands;
    if (scatter ? nops < 3 || nops % 2u != 1u : nops != 2 || c.o->n_results < 1) {
        return bad(&c, "unexpected operands");
    }
    /* operand, indices and the value holding the window dims */
    uint32_t opd = c.o->operands[0];
    uint32_t idx = scatter ? c.o->operands[(nops - 1u) / 2u] : c.o->operands[1];
    uint32_t slices = scatter ? c.o->operands[(nops - 1u) / 2u + 1u] : c.o->first_result;
    uint32_t orank = value_rank(m, opd), irank = value_rank(m, idx), srank = value_rank(m, slices);
    const sp_attr *dn =
        sp_op_attr(m, op, scatter ? "scatter_dimension_numbers" : "dimension_numbers");
    if (dn == NULL || dn->kind != SP_ATTR_PARAMS) {
        return bad(&c, "missing dimension numbers");
    }
    cm_status st;
    if ((st = ints_of(&c, param(dn, names[0]), names[0], false, out->offset, SP_MAX_RANK,
                      &out->n_offset)) != CM_OK ||
        (st = ints_of(&c, param(dn, names[1]), names[1], false, out->collapsed, SP_MAX_RANK,
                      &out->n_collapsed)) != CM_OK ||
        (st = ints_of(&c, param(dn, names[2]), names[2], false, out->operand_batch, SP_MAX_RANK,
                      &out->n_operand_batch)) != CM_OK ||
        (st = ints_of(&c, param(dn, names[3]), names[3], false, out->indices_batch, SP_MAX_RANK,
                      &out->n_indices_batch)) != CM_OK ||
        (st = ints_of(&c, param(dn, names[4]), names[4], false, out->index_map, SP_MAX_RANK,
                      &out->n_index_map)) != CM_OK ||
        (st = int_of(&c, param(dn, names[5]), names[5], true, 0, &out->index_vector_dim)) !=
            CM_OK) {
        return st;
    }
    out->decoded = true;
    if (out->n_operand_batch != out->n_indices_batch) {
        return bad(&c, "%s and %s differ in length", names[2], names[3]);
    }
    if ((st = dims_ok(&c, out->offset, out->n_offset, srank, "window dimension")) != CM_OK ||
        (st = dims_ok(&c, out->collapsed, out->n_collapsed, orank, "collapsed dimension")) !=
            CM_OK ||
        (st = dims_ok(&c, out->operand_batch, out->n_operand_batch, orank,
                      "operand batching dimension")) != CM_OK ||
        (st = dims_ok(&c, out->indices_batch, out->n_indices_batch, irank,
                      "indices batching dimension")) != CM_OK ||
        (st = dims_ok(&c, out->index_map, out->n_index_map, orank, "index map dimension")) !=
            CM_OK) {
        return st;
    }
    int64_t ivd = out->index_vector_dim;
    if (ivd < 0 || ivd > (int64_t)irank) {
        return bad(&c, "index_vector_dim %lld is out of range", (long long)ivd);
    }
    if (in_list(out->indices_batch, out->n_indices_batch, ivd)) {
        return bad(&c, "index_vector_dim is a batching dimension");
    }
    for (uint32_t i = 0; i < out->n_collapsed; i++) {
        if (in_list(out->operand_batch, out->n_operand_batch, out->collapsed[i])) {
            return bad(&c, "a dimension is both collapsed and batching");
        }
    }
    uint32_t n_batch_dims = irank - (ivd < (int64_t)irank ? 1u : 0u);
    if (out->n_offset + out->n_collapsed + out->n_operand_batch != orank ||
        srank != out->n_offset + n_batch_dims) {
        return bad(&c, "dimension numbers do not match the operand, indices and result ranks");
    }
    int64_t vec = ivd < (int64_t)irank ? value_dim(m, idx, (uint32_t)ivd) : 1;
    if (vec >= 0 && (int64_t)out->n_index_map != vec) {
        return bad(&c, "%s has %u entries, the index vector %lld", names[4], out->n_index_map,
                   (long long)vec);
    }
    return CM_OK;
}

cm_status sp_gather_slice_sizes_get(const sp_module *m, uint32_t op, int64_t sizes[SP_MAX_RANK],
                                    uint32_t *n, cm_error *err)
{
    actx c;
    actx_init(&c, m, op, err);
    *n = 0;
    if (c.o->n_operands < 1) {
        return bad(&c, "unexpected operands");
    }
    uint32_t opd = c.o->operands[0], orank = value_rank(m, opd);
    cm_status st =
        ints_of(&c, sp_op_attr(m, op, "slice_sizes"), "slice_sizes", true, sizes, SP_MAX_RANK, n);
    if (st != CM_OK) {
        return st;
    }
    if (*n != orank) {
        return bad(&c, "slice_sizes has %u entries, operand rank is %u", *n, orank);
    }
    for (uint32_t d = 0; d < *n; d++) {
        int64_t size = value_dim(m, opd, d);
        if (sizes[d] < 0 || (size >= 0 && sizes[d] > size)) {
            return bad(&c, "slice size %lld does not fit operand dimension %u", (long long)sizes[d],
                       d);
        }
    }
    return CM_OK;
}

/* ---- windows ------------------------------------------------------------------- */

/* An optional per-dimension list of want entries when present; positive
 * says each entry must be at least 1. */
static cm_status window_list(actx *c, const char *name, uint32_t want, bool positive, int64_t *v,
                             uint32_t cap, uint32_t *n)
{
    cm_status st = ints_of(c, sp_op_attr(c->m, c->op, name), name, false, v, cap, n);
    if (st == CM_OK && *n != 0 && *n != want) {
        return bad(c, "%s has %u entries, expected %u", name, *n, want);
    }
    for (uint32_t i = 0; st == CM_OK && positive && i < *n; i++) {
        if (v[i] < 1) {
            return bad(c, "%s must be positive", name);
        }
    }
    return st;
}

cm_status sp_window_get(const sp_module *m, uint32_t op, sp_window *out, cm_error *err)
{
    actx c;
    actx_init(&c, m, op, err);
    out->n_dims = out->n_strides = out->n_base_dilations = out->n_window_dilations = 0;
    out->n_padding = 0;
    if (c.o->n_operands < 1) {
        return bad(&c, "unexpected operands");
    }
    uint32_t r = value_rank(m, c.o->operands[0]);
    cm_status st;
    if ((st = window_list(&c, "window_dimensions", r, true, out->dims, SP_MAX_RANK,
                          &out->n_dims)) != CM_OK ||
        (st = window_list(&c, "window_strides", r, true, out->strides, SP_MAX_RANK,
                          &out->n_strides)) != CM_OK ||
        (st = window_list(&c, "base_dilations", r, false, out->base_dilations, SP_MAX_RANK,
                          &out->n_base_dilations)) != CM_OK ||
        (st = window_list(&c, "window_dilations", r, false, out->window_dilations, SP_MAX_RANK,
                          &out->n_window_dilations)) != CM_OK ||
        (st = window_list(&c, "padding", 2u * r, false, out->padding, 2u * SP_MAX_RANK,
                          &out->n_padding)) != CM_OK) {
        return st;
    }
    return CM_OK;
}

/* ---- scatter ---------------------------------------------------------------------- */

const char *sp_scatter_reduction(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands < 3 || o->n_operands % 2u != 1u) {
        return NULL;
    }
    uint32_t n_in = (o->n_operands - 1u) / 2u;
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return NULL;
    }
    const sp_block *bb = &m->blocks[o->regions[0].blocks[0]];
    if (bb->n_args != 2 * n_in || bb->n_ops == 0) {
        return NULL;
    }
    const sp_op *ret = &m->ops[bb->ops[bb->n_ops - 1]];
    if (strcmp(ret->name, "stablehlo.return") != 0 || ret->n_operands != n_in) {
        return NULL;
    }
    static const char *const ok[] = {"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum",
                                     "stablehlo.minimum", "stablehlo.and", "stablehlo.or"};
    const char *kind = NULL;
    for (uint32_t i = 0; i < n_in; i++) {
        uint32_t v = ret->operands[i], def = m->values[v].def;
        if (def == SP_NONE || m->ops[def].n_operands != 2) {
            return NULL;
        }
        const char *name = m->ops[def].name;
        bool known = false;
        for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
            known = known || strcmp(name, ok[k]) == 0;
        }
        bool logical = strcmp(name, "stablehlo.and") == 0 || strcmp(name, "stablehlo.or") == 0;
        if (!known || (logical && sp_value_type(m, v)->elem != SP_ELEM_I1)) {
            return NULL;
        }
        if (kind != NULL && strcmp(kind, name) != 0) {
            return NULL;
        }
        kind = name;
        uint32_t a = m->ops[def].operands[0], b = m->ops[def].operands[1];
        uint32_t x = bb->first_arg + i, y = bb->first_arg + i + n_in;
        if (!((a == x && b == y) || (a == y && b == x))) {
            return NULL;
        }
    }
    return kind;
}
