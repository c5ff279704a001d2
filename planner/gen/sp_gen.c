/* SPDX-License-Identifier: Apache-2.0
 * planner: synthetic transformer modules (see sp_gen.h). Ops are created
 * with sp_module_new_op; attribute lists go straight into the module arena as
 * the reader does (cap_attrs = 0, so sp_op_set_attr copies before growing),
 * and attribute values are shared between ops, as MLIR uniques them, so a
 * million-op module costs little more than its op and value tables. */
#include "sp_gen.h"

#include <stdio.h>
#include <string.h>

#define N_PARAMS 11   /* parameters per layer, in argument order: see enum param */
#define MAX_ARGS 4096 /* function type inputs sp_module_intern_type accepts */

enum param { P_WQ, P_WK, P_WV, P_WO, P_W1, P_W2, P_BO, P_B1, P_B2, P_G1, P_G2 };

/* Shared attribute values. */
typedef struct gattrs {
    sp_attr *bd_none, *bd_2, *bd_01, *bd_012;  /* broadcast_dimensions */
    sp_attr *perm_0213, *perm_10;              /* permutation */
    sp_attr *red_2, *red_3, *red_01, *red_012; /* reduce dimensions */
    sp_attr *dot_proj;                         /* [B,S,in] x [in,out], contracting 2 x 0 */
    sp_attr *dot_wgrad; /* [B,S,in] x [B,S,out] -> [in,out], contracting [0,1] x [0,1] */
    sp_attr *dot_qk;    /* batching [0,1], contracting 3 x 3 */
    sp_attr *dot_pv;    /* batching [0,1], contracting 3 x 2 */
    sp_attr *dot_tq;    /* batching [0,1], contracting 2 x 2 */
    sp_attr *c_zero, *c_inv_d, *c_eps, *c_scale, *c_ninf, *c_one, *c_lr; /* constant values */
    sp_attr *sh_x;                                                       /* [{"data"}, {}, {}] */
    sp_attr *sh_xm;              /* [{"data"}, {}, {"model"}] */
    sp_attr *arg_dict[N_PARAMS]; /* {sdy.sharding = ...} per parameter kind */
    sp_attr *x_dict;             /* {sdy.sharding = [{"data"}, {}, {}]} */
    sp_attr *empty_dict;
} gattrs;

typedef struct gen {
    sp_module *m;
    const sp_gen_opts *o;
    cm_status st;
    cm_error *err; /* gets the first non-OOM error */
    uint32_t blk;  /* block ops are appended to */
    /* tensor types */
    uint32_t t_s, t_x, t_bs, t_bshe, t_bhse, t_bhss, t_bhs, t_bsf, t_dd, t_df, t_fd, t_d, t_f;
    uint32_t t_param[N_PARAMS];
    gattrs a;
    uint32_t ops_layer0, ops_layer1; /* op counts around the first layer built */
} gen;

/* Values a layer's backward pass needs from its forward pass. */
typedef struct saved {
    uint32_t x, h, xn1, rs1, q4, k4, v4, p, scale_b, ctx, h1, h2, xn2, rs2, a, out;
} saved;

/* ---- attributes ---------------------------------------------------------------- */

static sp_attr *attr_new(gen *g, sp_attr_kind kind)
{
    sp_attr *a = g->st == CM_OK ? sp_attr_new(g->m, kind) : NULL;
    if (a == NULL && g->st == CM_OK) {
        g->st = CM_ENOMEM;
    }
    return a;
}

static void *arena(gen *g, size_t bytes)
{
    void *p = g->st == CM_OK ? cm_arena_zalloc(&g->m->arena, bytes) : NULL;
    if (p == NULL && g->st == CM_OK) {
        g->st = CM_ENOMEM;
    }
    return p;
}

static sp_attr *darr(gen *g, const int64_t *v, uint32_t n)
{
    sp_attr *a = attr_new(g, SP_ATTR_DENSE_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    a->u.darr.elem = "i64";
    a->u.darr.n = n;
    if (n > 0) {
        a->u.darr.v = arena(g, sizeof(int64_t) * n);
        if (a->u.darr.v != NULL) {
            memcpy(a->u.darr.v, v, sizeof(int64_t) * n);
        }
    }
    return a;
}

/* An SP_ATTR_ARRAY of SP_ATTR_INT, as the reader builds dot dimension lists. */
static sp_attr *int_array(gen *g, const int64_t *v, uint32_t n)
{
    sp_attr *a = attr_new(g, SP_ATTR_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    a->u.arr.n = n;
    a->u.arr.items = arena(g, sizeof(sp_attr *) * (n + 1u));
    for (uint32_t i = 0; i < n && g->st == CM_OK; i++) {
        sp_attr *e = attr_new(g, SP_ATTR_INT);
        if (e != NULL) {
            e->u.i.v = v[i];
            a->u.arr.items[i] = e;
        }
    }
    return a;
}

/* #stablehlo.dot<...>; the batching lists are left out when empty, like the
 * reader does for the pretty form. */
static sp_attr *dot_dims(gen *g, const int64_t *batch, uint32_t n_batch, int64_t lc, int64_t rc)
{
    sp_attr *a = attr_new(g, SP_ATTR_PARAMS);
    if (a == NULL) {
        return NULL;
    }
    a->u.params.name = "stablehlo.dot";
    a->u.params.items = arena(g, sizeof(sp_named_attr) * 4);
    if (a->u.params.items == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    if (n_batch > 0) {
        a->u.params.items[k].name = "lhs_batching_dimensions";
        a->u.params.items[k++].value = int_array(g, batch, n_batch);
        a->u.params.items[k].name = "rhs_batching_dimensions";
        a->u.params.items[k++].value = int_array(g, batch, n_batch);
    }
    a->u.params.items[k].name = "lhs_contracting_dimensions";
    a->u.params.items[k++].value = int_array(g, &lc, 1);
    a->u.params.items[k].name = "rhs_contracting_dimensions";
    a->u.params.items[k++].value = int_array(g, &rc, 1);
    a->u.params.n = k;
    return a;
}

/* The weight-gradient contraction [0, 1] x [0, 1]. */
static sp_attr *dot_wgrad(gen *g)
{
    static const int64_t bs[2] = {0, 1};
    sp_attr *a = attr_new(g, SP_ATTR_PARAMS);
    if (a == NULL) {
        return NULL;
    }
    a->u.params.name = "stablehlo.dot";
    a->u.params.items = arena(g, sizeof(sp_named_attr) * 2);
    if (a->u.params.items == NULL) {
        return NULL;
    }
    a->u.params.items[0].name = "lhs_contracting_dimensions";
    a->u.params.items[0].value = int_array(g, bs, 2);
    a->u.params.items[1].name = "rhs_contracting_dimensions";
    a->u.params.items[1].value = int_array(g, bs, 2);
    a->u.params.n = 2;
    return a;
}

static sp_attr *dense(gen *g, const char *body)
{
    sp_attr *a = attr_new(g, SP_ATTR_DENSE);
    if (a != NULL) {
        a->u.dense.body = body;
        a->u.dense.type = g->t_s;
    }
    return a;
}

/* A closed sharding on @mesh; axis[d] is the axis name of dim d or NULL. */
static sp_sharding *sharding(gen *g, const char *const *axis, uint32_t rank)
{
    sp_sharding *s = arena(g, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->mesh_name = "mesh";
    s->rank = rank;
    s->dims = arena(g, sizeof(sp_dim_sharding) * (rank + 1u));
    for (uint32_t d = 0; d < rank && g->st == CM_OK; d++) {
        s->dims[d].is_closed = true;
        s->dims[d].priority = -1;
        if (axis[d] != NULL) {
            s->dims[d].axes = arena(g, sizeof(sp_axis_ref));
            if (s->dims[d].axes != NULL) {
                s->dims[d].axes[0].name = axis[d]; /* full axis: pre_size and size 0 */
                s->dims[d].n_axes = 1;
            }
        }
    }
    return s;
}

static sp_attr *sharding_attr(gen *g, const char *const *axis, uint32_t rank)
{
    sp_attr *a = attr_new(g, SP_ATTR_SHARDING);
    if (a != NULL) {
        a->u.sharding = sharding(g, axis, rank);
    }
    return a;
}

/* {sdy.sharding = <@mesh, ...>} */
static sp_attr *sharding_dict(gen *g, const char *const *axis, uint32_t rank)
{
    sp_attr *d = attr_new(g, SP_ATTR_DICT);
    if (d == NULL) {
        return NULL;
    }
    d->u.dict.items = arena(g, sizeof(sp_named_attr));
    if (d->u.dict.items != NULL) {
        d->u.dict.items[0].name = "sdy.sharding";
        d->u.dict.items[0].value = sharding_attr(g, axis, rank);
        d->u.dict.n = 1;
    }
    return d;
}

static void make_attrs(gen *g)
{
    static const int64_t i2[1] = {2}, i01[2] = {0, 1}, i012[3] = {0, 1, 2}, i3[1] = {3};
    static const int64_t p0213[4] = {0, 2, 1, 3}, p10[2] = {1, 0};
    static const char *const none3[3] = {NULL, NULL, NULL};
    static const char *const x_ax[3] = {"data", NULL, NULL};
    static const char *const xm_ax[3] = {"data", NULL, "model"};
    static const char *const cols[2] = {NULL, "model"};
    static const char *const rows[2] = {"model", NULL};
    static const char *const vec_m[1] = {"model"};
    gattrs *a = &g->a;
    a->bd_none = darr(g, NULL, 0);
    a->bd_2 = darr(g, i2, 1);
    a->bd_01 = darr(g, i01, 2);
    a->bd_012 = darr(g, i012, 3);
    a->perm_0213 = darr(g, p0213, 4);
    a->perm_10 = darr(g, p10, 2);
    a->red_2 = darr(g, i2, 1);
    a->red_3 = darr(g, i3, 1);
    a->red_01 = darr(g, i01, 2);
    a->red_012 = darr(g, i012, 3);
    a->dot_proj = dot_dims(g, NULL, 0, 2, 0);
    a->dot_wgrad = dot_wgrad(g);
    a->dot_qk = dot_dims(g, i01, 2, 3, 3);
    a->dot_pv = dot_dims(g, i01, 2, 3, 2);
    a->dot_tq = dot_dims(g, i01, 2, 2, 2);
    a->c_zero = dense(g, "0.000000e+00");
    a->c_inv_d = dense(g, "1.953125e-03");
    a->c_eps = dense(g, "9.99999974E-6");
    a->c_scale = dense(g, "1.250000e-01");
    a->c_ninf = dense(g, "-3.40282347E+38");
    a->c_one = dense(g, "1.000000e+00");
    a->c_lr = dense(g, "1.000000e-03");
    a->sh_x = sharding_attr(g, x_ax, 3);
    a->sh_xm = sharding_attr(g, xm_ax, 3);
    a->x_dict = sharding_dict(g, x_ax, 3);
    a->empty_dict = attr_new(g, SP_ATTR_DICT);
    /* Megatron: column-parallel q/k/v and w1, row-parallel wo and w2 */
    a->arg_dict[P_WQ] = sharding_dict(g, cols, 2);
    a->arg_dict[P_WK] = a->arg_dict[P_WQ];
    a->arg_dict[P_WV] = a->arg_dict[P_WQ];
    a->arg_dict[P_W1] = a->arg_dict[P_WQ];
    a->arg_dict[P_WO] = sharding_dict(g, rows, 2);
    a->arg_dict[P_W2] = a->arg_dict[P_WO];
    a->arg_dict[P_B1] = sharding_dict(g, vec_m, 1);
    a->arg_dict[P_BO] = sharding_dict(g, none3, 1);
    a->arg_dict[P_B2] = a->arg_dict[P_BO];
    a->arg_dict[P_G1] = a->arg_dict[P_BO];
    a->arg_dict[P_G2] = a->arg_dict[P_BO];
}

/* ---- types ----------------------------------------------------------------------- */

static uint32_t tensor(gen *g, const int64_t *dims, uint32_t rank)
{
    uint32_t id = 0;
    if (g->st == CM_OK) {
        g->st = sp_module_tensor_type(g->m, SP_ELEM_F32, dims, rank, &id, NULL);
    }
    return id;
}

static void make_types(gen *g)
{
    const sp_gen_opts *o = g->o;
    int64_t b = o->batch, s = o->seq, d = o->d_model, h = o->heads, e = o->d_model / o->heads;
    int64_t f = o->d_ff;
    g->t_s = tensor(g, NULL, 0);
    g->t_x = tensor(g, (int64_t[]){b, s, d}, 3);
    g->t_bs = tensor(g, (int64_t[]){b, s}, 2);
    g->t_bshe = tensor(g, (int64_t[]){b, s, h, e}, 4);
    g->t_bhse = tensor(g, (int64_t[]){b, h, s, e}, 4);
    g->t_bhss = tensor(g, (int64_t[]){b, h, s, s}, 4);
    g->t_bhs = tensor(g, (int64_t[]){b, h, s}, 3);
    g->t_bsf = tensor(g, (int64_t[]){b, s, f}, 3);
    g->t_dd = tensor(g, (int64_t[]){d, d}, 2);
    g->t_df = tensor(g, (int64_t[]){d, f}, 2);
    g->t_fd = tensor(g, (int64_t[]){f, d}, 2);
    g->t_d = tensor(g, (int64_t[]){d}, 1);
    g->t_f = tensor(g, (int64_t[]){f}, 1);
    uint32_t *t = g->t_param;
    t[P_WQ] = t[P_WK] = t[P_WV] = t[P_WO] = g->t_dd;
    t[P_W1] = g->t_df;
    t[P_W2] = g->t_fd;
    t[P_BO] = t[P_B2] = t[P_G1] = t[P_G2] = g->t_d;
    t[P_B1] = g->t_f;
}

/* ---- ops ------------------------------------------------------------------------------ */

/* Appends op `name` to the current block with at most one result (type
 * SP_NONE: none) and at most one attribute; returns the result value, or 0
 * after a failure (recorded in g->st), so callers can chain freely. */
static uint32_t emit(gen *g, const char *name, const uint32_t *ins, uint32_t n_in, uint32_t type,
                     const char *attr_name, sp_attr *attr)
{
    if (g->st != CM_OK) {
        return 0;
    }
    uint32_t id;
    uint32_t n_res = type != SP_NONE ? 1u : 0u;
    if (sp_module_new_op(g->m, g->blk, name, ins, n_in, &type, n_res, &id) != CM_OK) {
        g->st = CM_ENOMEM;
        return 0;
    }
    if (attr_name != NULL) {
        sp_named_attr *na = arena(g, sizeof *na);
        if (na == NULL) {
            return 0;
        }
        na->name = attr_name;
        na->value = attr;
        g->m->ops[id].attrs = na;
        g->m->ops[id].n_attrs = 1;
    }
    return g->m->ops[id].first_result;
}

static uint32_t cst(gen *g, sp_attr *value)
{
    return emit(g, "stablehlo.constant", NULL, 0, g->t_s, "value", value);
}

static uint32_t bin(gen *g, const char *name, uint32_t x, uint32_t y, uint32_t type)
{
    uint32_t ins[2] = {x, y};
    return emit(g, name, ins, 2, type, NULL, NULL);
}

static uint32_t un(gen *g, const char *name, uint32_t x, uint32_t type)
{
    return emit(g, name, &x, 1, type, NULL, NULL);
}

static uint32_t bcast(gen *g, uint32_t x, sp_attr *dims, uint32_t type)
{
    return emit(g, "stablehlo.broadcast_in_dim", &x, 1, type, "broadcast_dimensions", dims);
}

static uint32_t transpose(gen *g, uint32_t x, sp_attr *perm, uint32_t type)
{
    return emit(g, "stablehlo.transpose", &x, 1, type, "permutation", perm);
}

static uint32_t dot(gen *g, uint32_t x, uint32_t y, sp_attr *dims, uint32_t type)
{
    uint32_t ins[2] = {x, y};
    return emit(g, "stablehlo.dot_general", ins, 2, type, "dot_dimension_numbers", dims);
}

static uint32_t constraint(gen *g, uint32_t x, sp_attr *sh, uint32_t type)
{
    if (!g->o->constraints) {
        return x;
    }
    return emit(g, "sdy.sharding_constraint", &x, 1, type, "sharding", sh);
}

/* stablehlo.reduce of x with a scalar init and a one-op body (three ops). */
static uint32_t reduce(gen *g, uint32_t x, uint32_t init, const char *body_op, sp_attr *dims,
                       uint32_t type)
{
    uint32_t ins[2] = {x, init};
    uint32_t r = emit(g, "stablehlo.reduce", ins, 2, type, "dimensions", dims);
    if (g->st != CM_OK) {
        return 0;
    }
    uint32_t op = g->m->values[r].def, blk, a0, a1, outer = g->blk;
    if (sp_module_new_block(g->m, op, &blk) != CM_OK ||
        sp_module_add_block_arg(g->m, blk, g->t_s, &a0) != CM_OK ||
        sp_module_add_block_arg(g->m, blk, g->t_s, &a1) != CM_OK ||
        sp_op_add_regions(g->m, op, 1) != CM_OK || sp_region_add_block(g->m, op, 0, blk) != CM_OK) {
        g->st = CM_ENOMEM;
        return 0;
    }
    g->blk = blk;
    uint32_t s = bin(g, body_op, a0, a1, g->t_s);
    emit(g, "stablehlo.return", &s, 1, SP_NONE, NULL, NULL);
    g->blk = outer;
    return r;
}

static uint32_t reduce_sum(gen *g, uint32_t x, sp_attr *dims, uint32_t type)
{
    uint32_t zero = cst(g, g->a.c_zero);
    return reduce(g, x, zero, "stablehlo.add", dims, type);
}

/* ---- the model ---------------------------------------------------------------------- */

/* Layer norm over the last dim of x ([B,S,D]); returns gamma * xn and the
 * normalised xn and broadcast inverse deviation for the backward pass. */
static uint32_t layernorm(gen *g, uint32_t x, uint32_t gamma, uint32_t *xn_out, uint32_t *rs_out)
{
    uint32_t sum = reduce_sum(g, x, g->a.red_2, g->t_bs);
    uint32_t inv_b = bcast(g, cst(g, g->a.c_inv_d), g->a.bd_none, g->t_bs);
    uint32_t mean = bin(g, "stablehlo.multiply", sum, inv_b, g->t_bs);
    uint32_t xc = bin(g, "stablehlo.subtract", x, bcast(g, mean, g->a.bd_01, g->t_x), g->t_x);
    uint32_t sq = bin(g, "stablehlo.multiply", xc, xc, g->t_x);
    uint32_t var =
        bin(g, "stablehlo.multiply", reduce_sum(g, sq, g->a.red_2, g->t_bs), inv_b, g->t_bs);
    uint32_t eps_b = bcast(g, cst(g, g->a.c_eps), g->a.bd_none, g->t_bs);
    uint32_t rs = un(g, "stablehlo.rsqrt", bin(g, "stablehlo.add", var, eps_b, g->t_bs), g->t_bs);
    uint32_t rs_b = bcast(g, rs, g->a.bd_01, g->t_x);
    uint32_t xn = bin(g, "stablehlo.multiply", xc, rs_b, g->t_x);
    uint32_t gam = bcast(g, gamma, g->a.bd_2, g->t_x);
    *xn_out = xn;
    *rs_out = rs_b;
    return bin(g, "stablehlo.multiply", xn, gam, g->t_x);
}

/* [B,S,D] -> [B,H,S,E] */
static uint32_t to_heads(gen *g, uint32_t x)
{
    uint32_t r = un(g, "stablehlo.reshape", x, g->t_bshe);
    return transpose(g, r, g->a.perm_0213, g->t_bhse);
}

/* [B,H,S,E] -> [B,S,D] */
static uint32_t from_heads(gen *g, uint32_t x)
{
    uint32_t t = transpose(g, x, g->a.perm_0213, g->t_bshe);
    return un(g, "stablehlo.reshape", t, g->t_x);
}

static uint32_t forward(gen *g, uint32_t x, const uint32_t *w, saved *sv)
{
    const gattrs *a = &g->a;
    sv->x = x;
    uint32_t h = layernorm(g, x, w[P_G1], &sv->xn1, &sv->rs1);
    sv->h = h;

    /* attention */
    uint32_t q = constraint(g, dot(g, h, w[P_WQ], a->dot_proj, g->t_x), a->sh_xm, g->t_x);
    sv->q4 = to_heads(g, q);
    sv->k4 = to_heads(g, dot(g, h, w[P_WK], a->dot_proj, g->t_x));
    sv->v4 = to_heads(g, dot(g, h, w[P_WV], a->dot_proj, g->t_x));
    uint32_t sc = dot(g, sv->q4, sv->k4, a->dot_qk, g->t_bhss);
    sv->scale_b = bcast(g, cst(g, a->c_scale), a->bd_none, g->t_bhss);
    sc = bin(g, "stablehlo.multiply", sc, sv->scale_b, g->t_bhss);
    uint32_t mx = reduce(g, sc, cst(g, a->c_ninf), "stablehlo.maximum", a->red_3, g->t_bhs);
    uint32_t sh = bin(g, "stablehlo.subtract", sc, bcast(g, mx, a->bd_012, g->t_bhss), g->t_bhss);
    uint32_t ex = un(g, "stablehlo.exponential", sh, g->t_bhss);
    uint32_t den = reduce_sum(g, ex, a->red_3, g->t_bhs);
    sv->p = bin(g, "stablehlo.divide", ex, bcast(g, den, a->bd_012, g->t_bhss), g->t_bhss);
    sv->ctx = from_heads(g, dot(g, sv->p, sv->v4, a->dot_pv, g->t_bhse));
    uint32_t o = dot(g, sv->ctx, w[P_WO], a->dot_proj, g->t_x);
    o = bin(g, "stablehlo.add", o, bcast(g, w[P_BO], a->bd_2, g->t_x), g->t_x);
    sv->h1 = bin(g, "stablehlo.add", x, o, g->t_x);

    /* MLP */
    sv->h2 = layernorm(g, sv->h1, w[P_G2], &sv->xn2, &sv->rs2);
    uint32_t f = constraint(g, dot(g, sv->h2, w[P_W1], a->dot_proj, g->t_bsf), a->sh_xm, g->t_bsf);
    f = bin(g, "stablehlo.add", f, bcast(g, w[P_B1], a->bd_2, g->t_bsf), g->t_bsf);
    if (g->o->act == SP_GEN_ACT_TANH) {
        sv->a = un(g, "stablehlo.tanh", f, g->t_bsf);
    } else {
        uint32_t zb = bcast(g, cst(g, a->c_zero), a->bd_none, g->t_bsf);
        sv->a = bin(g, "stablehlo.maximum", f, zb, g->t_bsf);
    }
    uint32_t y = dot(g, sv->a, w[P_W2], a->dot_proj, g->t_x);
    y = bin(g, "stablehlo.add", y, bcast(g, w[P_B2], a->bd_2, g->t_x), g->t_x);
    y = constraint(g, y, a->sh_x, g->t_x);
    sv->out = bin(g, "stablehlo.add", sv->h1, y, g->t_x);
    return sv->out;
}

/* dx of y = dot(x, w) for w of type wt ([in,out]) transposed to wtt ([out,in]). */
static uint32_t dx_of(gen *g, uint32_t dy, uint32_t w, uint32_t wtt, uint32_t xt)
{
    uint32_t t = transpose(g, w, g->a.perm_10, wtt);
    return dot(g, dy, t, g->a.dot_proj, xt);
}

/* w - lr * grad */
static uint32_t sgd(gen *g, uint32_t w, uint32_t grad, uint32_t lr, uint32_t type)
{
    uint32_t lr_b = bcast(g, lr, g->a.bd_none, type);
    uint32_t step = bin(g, "stablehlo.multiply", grad, lr_b, type);
    return bin(g, "stablehlo.subtract", w, step, type);
}

/* Backward pass of one layer given dy = d loss / d out; writes the updated
 * parameters to nw and returns d loss / d x. */
static uint32_t backward(gen *g, uint32_t dy, const uint32_t *w, const saved *sv, uint32_t *nw)
{
    const gattrs *a = &g->a;
    uint32_t grad[N_PARAMS];

    /* MLP */
    grad[P_B2] = reduce_sum(g, dy, a->red_01, g->t_d);
    grad[P_W2] = dot(g, sv->a, dy, a->dot_wgrad, g->t_fd);
    uint32_t da = dx_of(g, dy, w[P_W2], g->t_df, g->t_bsf);
    uint32_t df;
    if (g->o->act == SP_GEN_ACT_TANH) {
        uint32_t aa = bin(g, "stablehlo.multiply", sv->a, sv->a, g->t_bsf);
        uint32_t one_b = bcast(g, cst(g, a->c_one), a->bd_none, g->t_bsf);
        uint32_t d = bin(g, "stablehlo.subtract", one_b, aa, g->t_bsf);
        df = bin(g, "stablehlo.multiply", da, d, g->t_bsf);
    } else {
        uint32_t mask = un(g, "stablehlo.sign", sv->a, g->t_bsf);
        df = bin(g, "stablehlo.multiply", da, mask, g->t_bsf);
    }
    grad[P_B1] = reduce_sum(g, df, a->red_01, g->t_f);
    grad[P_W1] = dot(g, sv->h2, df, a->dot_wgrad, g->t_df);
    uint32_t dh2 = dx_of(g, df, w[P_W1], g->t_fd, g->t_x);
    grad[P_G2] =
        reduce_sum(g, bin(g, "stablehlo.multiply", dh2, sv->xn2, g->t_x), a->red_01, g->t_d);
    uint32_t dh1 =
        bin(g, "stablehlo.add", dy, bin(g, "stablehlo.multiply", dh2, sv->rs2, g->t_x), g->t_x);

    /* attention */
    grad[P_BO] = reduce_sum(g, dh1, a->red_01, g->t_d);
    grad[P_WO] = dot(g, sv->ctx, dh1, a->dot_wgrad, g->t_dd);
    uint32_t dctx = to_heads(g, dx_of(g, dh1, w[P_WO], g->t_dd, g->t_x));
    uint32_t dp = dot(g, dctx, sv->v4, a->dot_qk, g->t_bhss);
    uint32_t dv = dot(g, sv->p, dctx, a->dot_tq, g->t_bhse);
    uint32_t t = bin(g, "stablehlo.multiply", dp, sv->p, g->t_bhss);
    uint32_t s = bcast(g, reduce_sum(g, t, a->red_3, g->t_bhs), a->bd_012, g->t_bhss);
    uint32_t ds = bin(g, "stablehlo.multiply", sv->p,
                      bin(g, "stablehlo.subtract", dp, s, g->t_bhss), g->t_bhss);
    ds = bin(g, "stablehlo.multiply", ds, sv->scale_b, g->t_bhss);
    uint32_t dq = from_heads(g, dot(g, ds, sv->k4, a->dot_pv, g->t_bhse));
    uint32_t dk = from_heads(g, dot(g, ds, sv->q4, a->dot_tq, g->t_bhse));
    dv = from_heads(g, dv);
    grad[P_WQ] = dot(g, sv->h, dq, a->dot_wgrad, g->t_dd);
    grad[P_WK] = dot(g, sv->h, dk, a->dot_wgrad, g->t_dd);
    grad[P_WV] = dot(g, sv->h, dv, a->dot_wgrad, g->t_dd);
    uint32_t dh = bin(g, "stablehlo.add", dx_of(g, dq, w[P_WQ], g->t_dd, g->t_x),
                      dx_of(g, dk, w[P_WK], g->t_dd, g->t_x), g->t_x);
    dh = bin(g, "stablehlo.add", dh, dx_of(g, dv, w[P_WV], g->t_dd, g->t_x), g->t_x);
    grad[P_G1] =
        reduce_sum(g, bin(g, "stablehlo.multiply", dh, sv->xn1, g->t_x), a->red_01, g->t_d);
    uint32_t dx =
        bin(g, "stablehlo.add", dh1, bin(g, "stablehlo.multiply", dh, sv->rs1, g->t_x), g->t_x);

    /* SGD */
    uint32_t lr = cst(g, a->c_lr);
    for (int i = 0; i < N_PARAMS; i++) {
        nw[i] = sgd(g, w[i], grad[i], lr, g->t_param[i]);
    }
    return dx;
}

/* Sets the attribute list of op from parallel arrays (arena copy). */
static void set_attrs(gen *g, uint32_t op, const char *const *names, sp_attr *const *vals,
                      uint32_t n)
{
    sp_named_attr *na = arena(g, sizeof *na * n);
    if (na == NULL) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        na[i].name = names[i];
        na[i].value = vals[i];
    }
    g->m->ops[op].attrs = na;
    g->m->ops[op].n_attrs = n;
}

static sp_attr *dict_array(gen *g, sp_attr **items, uint32_t n)
{
    sp_attr *a = attr_new(g, SP_ATTR_ARRAY);
    if (a != NULL) {
        a->u.arr.items = items;
        a->u.arr.n = n;
    }
    return a;
}

/* The argument values of layer l's parameters (arguments are consecutive). */
static void params(uint32_t first_arg, uint32_t l, uint32_t *w)
{
    for (uint32_t i = 0; i < N_PARAMS; i++) {
        w[i] = first_arg + 1 + N_PARAMS * l + i;
    }
}

/* One func.func with n_layers layers. Arguments: x, then N_PARAMS per layer.
 * Results: the output (forward only), or the loss and every updated
 * parameter (backward). */
static void function(gen *g, uint32_t index, uint32_t n_layers, bool single)
{
    sp_module *m = g->m;
    bool bw = g->o->backward;
    uint32_t n_args = 1 + N_PARAMS * n_layers;
    uint32_t n_res = bw ? 1 + N_PARAMS * n_layers : 1;
    sp_attr **arg_dicts = arena(g, sizeof(sp_attr *) * n_args);
    sp_attr **res_dicts = arena(g, sizeof(sp_attr *) * n_res);
    uint32_t *res = cm_alloc(sizeof(uint32_t) * n_res);
    saved *sv = bw ? cm_alloc(sizeof(saved) * n_layers) : NULL;
    cm_buf ft;
    cm_buf_init(&ft);
    if (g->st != CM_OK || res == NULL || (bw && sv == NULL)) {
        g->st = g->st != CM_OK ? g->st : CM_ENOMEM;
        goto out;
    }

    /* the function type and the argument and result attributes */
    cm_buf_putc(&ft, '(');
    for (uint32_t i = 0; i < n_args; i++) {
        uint32_t t = i == 0 ? g->t_x : g->t_param[(i - 1) % N_PARAMS];
        cm_buf_puts(&ft, i ? ", " : "");
        cm_buf_puts(&ft, m->types[t].text);
        arg_dicts[i] = i == 0 ? g->a.x_dict : g->a.arg_dict[(i - 1) % N_PARAMS];
    }
    cm_buf_puts(&ft, ") -> (");
    for (uint32_t i = 0; i < n_res; i++) {
        uint32_t t = !bw ? g->t_x : i == 0 ? g->t_s : g->t_param[(i - 1) % N_PARAMS];
        cm_buf_puts(&ft, i ? ", " : "");
        cm_buf_puts(&ft, m->types[t].text);
        res_dicts[i] = !bw      ? g->a.x_dict
                       : i == 0 ? g->a.empty_dict
                                : g->a.arg_dict[(i - 1) % N_PARAMS];
    }
    cm_buf_putc(&ft, ')');
    sp_attr *fty = attr_new(g, SP_ATTR_TYPE);
    sp_attr *name = attr_new(g, SP_ATTR_STRING);
    if (ft.oom || fty == NULL || name == NULL) {
        g->st = CM_ENOMEM;
        goto out;
    }
    cm_status st = sp_module_intern_type(m, ft.data, ft.len, &fty->u.type, g->err);
    if (st != CM_OK) {
        g->st = st;
        goto out;
    }
    char nb[32];
    int nl = single ? snprintf(nb, sizeof nb, "main") : snprintf(nb, sizeof nb, "stage_%u", index);
    name->u.str.s = sp_module_str(m, nb, (size_t)nl);
    name->u.str.len = (size_t)nl;
    if (name->u.str.s == NULL) {
        g->st = CM_ENOMEM;
        goto out;
    }

    uint32_t f, blk, first_arg = 0;
    if (sp_module_new_op(m, m->body, "func.func", NULL, 0, NULL, 0, &f) != CM_OK ||
        sp_op_add_regions(m, f, 1) != CM_OK || sp_module_new_block(m, f, &blk) != CM_OK ||
        sp_region_add_block(m, f, 0, blk) != CM_OK) {
        g->st = CM_ENOMEM;
        goto out;
    }
    static const char *const fnames[4] = {"sym_name", "function_type", "arg_attrs", "res_attrs"};
    sp_attr *fvals[4] = {name, fty, dict_array(g, arg_dicts, n_args),
                         dict_array(g, res_dicts, n_res)};
    set_attrs(g, f, fnames, fvals, 4);
    for (uint32_t i = 0; i < n_args && g->st == CM_OK; i++) {
        uint32_t t = i == 0 ? g->t_x : g->t_param[(i - 1) % N_PARAMS], v;
        if (sp_module_add_block_arg(m, blk, t, &v) != CM_OK) {
            g->st = CM_ENOMEM;
        }
        if (i == 0) {
            first_arg = v;
        }
    }

    g->blk = blk;
    uint32_t x = first_arg;
    saved one;
    uint32_t w[N_PARAMS];
    for (uint32_t l = 0; l < n_layers && g->st == CM_OK; l++) {
        bool probe = g->ops_layer0 == 0;
        if (probe) {
            g->ops_layer0 = m->n_ops;
        }
        params(first_arg, l, w);
        x = forward(g, x, w, bw ? &sv[l] : &one);
        if (probe) {
            g->ops_layer1 = m->n_ops;
        }
    }
    if (bw) {
        uint32_t loss =
            reduce_sum(g, bin(g, "stablehlo.multiply", x, x, g->t_x), g->a.red_012, g->t_s);
        res[0] = loss;
        uint32_t dy = x; /* d(0.5 * sum(y^2)) / dy */
        for (uint32_t l = n_layers; l-- > 0 && g->st == CM_OK;) {
            uint32_t before = m->n_ops;
            params(first_arg, l, w);
            dy = backward(g, dy, w, &sv[l], &res[1 + N_PARAMS * l]);
            if (l == 0 && index == 0) {
                g->ops_layer1 += m->n_ops - before;
            }
        }
    } else {
        res[0] = x;
    }
    emit(g, "func.return", res, n_res, SP_NONE, NULL, NULL);
    g->blk = m->body;
out:
    cm_buf_fini(&ft);
    cm_free(res);
    cm_free(sv);
}

static cm_status check_opts(const sp_gen_opts *o, cm_error *err)
{
    static const struct {
        const char *path;
        size_t off;
    } pos[] = {
        {"/batch", offsetof(sp_gen_opts, batch)},
        {"/seq", offsetof(sp_gen_opts, seq)},
        {"/d_model", offsetof(sp_gen_opts, d_model)},
        {"/heads", offsetof(sp_gen_opts, heads)},
        {"/mesh_data", offsetof(sp_gen_opts, mesh_data)},
        {"/mesh_model", offsetof(sp_gen_opts, mesh_model)},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        int64_t v;
        memcpy(&v, (const char *)o + pos[i].off, sizeof v);
        if (v <= 0 || v > ((int64_t)1 << 40)) {
            return cm_error_set(err, CM_EINVAL, pos[i].path, "must be in [1, 2^40]");
        }
    }
    if (o->d_ff < 0 || o->d_ff > ((int64_t)1 << 40)) {
        return cm_error_set(err, CM_EINVAL, "/d_ff", "must be 0 (4 * d_model) or in [1, 2^40]");
    }
    if (o->d_model % o->heads != 0) {
        return cm_error_set(err, CM_EINVAL, "/d_model",
                            "d_model %lld is not a multiple of heads %lld", (long long)o->d_model,
                            (long long)o->heads);
    }
    if (o->act != SP_GEN_ACT_RELU && o->act != SP_GEN_ACT_TANH) {
        return cm_error_set(err, CM_EINVAL, "/act", "unknown activation");
    }
    if (o->layers_per_func > 100000 || o->n_layers > 100000000) {
        return cm_error_set(err, CM_EINVAL,
                            o->n_layers > 100000000 ? "/n_layers" : "/layers_per_func",
                            "too large");
    }
    return CM_OK;
}

void sp_gen_opts_init(sp_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->layers_per_func = 16;
    o->batch = 8;
    o->seq = 128;
    o->d_model = 512;
    o->heads = 8;
    o->d_ff = 0;
    o->mesh_data = 2;
    o->mesh_model = 4;
    o->act = SP_GEN_ACT_RELU;
    o->backward = true;
    o->constraints = true;
}

/* Builds the module of n_layers layers split into functions of lpf layers. */
static cm_status build(const sp_gen_opts *o, uint32_t n_layers, uint32_t lpf, sp_module **out,
                       sp_gen_info *info, cm_error *err)
{
    gen g;
    memset(&g, 0, sizeof g);
    g.o = o;
    g.err = err;
    g.m = sp_module_create();
    if (g.m == NULL) {
        return CM_ENOMEM;
    }
    sp_module *m = g.m;
    m->had_module_op = true;
    m->sym_name = "jit_train_step";
    make_types(&g);
    make_attrs(&g);
    g.blk = m->body;

    /* module attributes {mhlo.num_partitions = N : i32} and the mesh */
    sp_attr *np = attr_new(&g, SP_ATTR_INT);
    m->attrs = arena(&g, sizeof(sp_named_attr));
    sp_mesh *mesh = arena(&g, sizeof *mesh);
    sp_attr *mesh_attr = attr_new(&g, SP_ATTR_MESH);
    sp_attr *mesh_name = attr_new(&g, SP_ATTR_STRING);
    if (g.st == CM_OK) {
        np->u.i.v = o->mesh_data * o->mesh_model;
        np->u.i.type = "i32";
        m->attrs[0].name = "mhlo.num_partitions";
        m->attrs[0].value = np;
        m->n_attrs = 1;
        mesh->axes = arena(&g, sizeof(sp_mesh_axis) * 2);
    }
    uint32_t mop;
    if (g.st == CM_OK) {
        mesh->axes[0].name = "data";
        mesh->axes[0].size = o->mesh_data;
        mesh->axes[1].name = "model";
        mesh->axes[1].size = o->mesh_model;
        mesh->n_axes = 2;
        mesh_attr->u.mesh = mesh;
        mesh_name->u.str.s = "mesh";
        mesh_name->u.str.len = 4;
        if (sp_module_new_op(m, m->body, "sdy.mesh", NULL, 0, NULL, 0, &mop) != CM_OK) {
            g.st = CM_ENOMEM;
        }
    }
    if (g.st == CM_OK) {
        static const char *const names[2] = {"sym_name", "mesh"};
        sp_attr *vals[2] = {mesh_name, mesh_attr};
        set_attrs(&g, mop, names, vals, 2);
    }

    uint32_t done = 0, index = 0;
    while (done < n_layers && g.st == CM_OK) {
        uint32_t k = lpf == 0 || n_layers - done < lpf ? n_layers - done : lpf;
        function(&g, index++, k, k == n_layers);
        done += k;
    }
    if (g.st != CM_OK) {
        sp_module_destroy(m);
        return g.st;
    }
    info->n_layers = n_layers;
    info->n_funcs = index;
    info->n_ops = m->n_ops;
    info->ops_per_layer = g.ops_layer1 - g.ops_layer0;
    *out = m;
    return CM_OK;
}

cm_status sp_gen_transformer(const sp_gen_opts *o_in, size_t target_ops, sp_module **out,
                             sp_gen_info *info_out, cm_error *err)
{
    *out = NULL;
    cm_status st = check_opts(o_in, err);
    if (st != CM_OK) {
        return st;
    }
    sp_gen_opts o = *o_in;
    if (o.d_ff == 0) {
        o.d_ff = 4 * o.d_model;
    }
    sp_gen_info info;
    memset(&info, 0, sizeof info);
    uint32_t n_layers = o.n_layers;
    if (n_layers == 0) {
        /* probe one- and two-layer modules for the per-layer and per-function op counts */
        sp_module *p1 = NULL, *p2 = NULL;
        sp_gen_info i1, i2;
        st = build(&o, 1, 1, &p1, &i1, err);
        if (st == CM_OK) {
            st = build(&o, 2, 2, &p2, &i2, err);
        }
        sp_module_destroy(p1);
        sp_module_destroy(p2);
        if (st != CM_OK) {
            return cm_error_set(err, st, NULL, "out of memory generating a module");
        }
        uint64_t per_layer = i2.n_ops - i1.n_ops;
        uint64_t per_func = i1.n_ops - per_layer - 1; /* minus the mesh */
        uint64_t lpf = o.layers_per_func;
        uint64_t l = 1;
        if (target_ops > i1.n_ops) {
            l = (target_ops - i1.n_ops + per_layer - 1) / per_layer + 1;
        }
        for (;;) {
            uint64_t funcs = lpf == 0 ? 1 : (l + lpf - 1) / lpf;
            uint64_t predicted = 1 + funcs * per_func + l * per_layer;
            if (predicted >= target_ops || predicted >= UINT32_MAX / 2) {
                break;
            }
            l++;
        }
        /* and drop layers that overshoot thanks to fewer functions than assumed */
        while (l > 1) {
            uint64_t k = l - 1;
            uint64_t funcs = lpf == 0 ? 1 : (k + lpf - 1) / lpf;
            if (1 + funcs * per_func + k * per_layer < target_ops) {
                break;
            }
            l = k;
        }
        if (l * per_layer >= UINT32_MAX / 2) {
            return cm_error_set(err, CM_EINVAL, NULL, "target of %zu ops is too large", target_ops);
        }
        n_layers = (uint32_t)l;
    }
    uint32_t per_func =
        o.layers_per_func == 0 || o.layers_per_func > n_layers ? n_layers : o.layers_per_func;
    if ((uint64_t)per_func * N_PARAMS + 1 > MAX_ARGS) {
        return cm_error_set(err, CM_EINVAL,
                            o.layers_per_func == 0 ? "/n_layers" : "/layers_per_func",
                            "a function of %u layers has %llu arguments; function types take at "
                            "most %d (at most %d layers per function)",
                            per_func, (unsigned long long)per_func * N_PARAMS + 1, MAX_ARGS,
                            (MAX_ARGS - 1) / N_PARAMS);
    }
    st = build(&o, n_layers, o.layers_per_func, out, &info, err);
    if (st != CM_OK) {
        return cm_error_set(err, st, NULL, "out of memory generating a module");
    }
    if (info_out != NULL) {
        *info_out = info;
    }
    return CM_OK;
}
