/* SPDX-License-Identifier: Apache-2.0
 * planner: generated programs written as MLIR text (see sp_gen.h): the Flax
 * guide's MLP unrolled or as the stablehlo.while that nn.scan lowers to, and
 * Megatron GPT layers (bf16 activations, dropout masks, forward and backward
 * pass, optionally a mixed-precision Adam update with ZeRO stages). They are
 * shapes only: the planner allocates no data for them, so the paper-sized
 * ones (a 7.5B-parameter step, a GPT-3 175B layer) cost like small ones. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_gen.h"

/* ---- writing ----------------------------------------------------------------------- */

typedef struct tw {
    cm_buf *b;
    uint32_t next; /* next value number: %vN */
    char loc[96];  /* loc("...") of the ops written now; "" for none */
} tw;

/* Writes `    %vN = <text> loc(...)` and returns N. */
static uint32_t op(tw *w, const char *fmt, ...)
{
    uint32_t n = w->next++;
    cm_buf_printf(w->b, "    %%v%u = ", n);
    va_list ap;
    va_start(ap, fmt);
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cm_buf_puts(w->b, line);
    if (w->loc[0] != '\0') {
        cm_buf_printf(w->b, " loc(\"%s\")", w->loc);
    }
    cm_buf_putc(w->b, '\n');
    return n;
}

static void set_loc(tw *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->loc, sizeof w->loc, fmt, ap);
    va_end(ap);
}

/* A tensor type text into buf: dims joined by 'x', then the element type. */
static const char *ty(char *buf, size_t n, const int64_t *dims, uint32_t rank, const char *elem)
{
    size_t l = 0;
    l += (size_t)snprintf(buf + l, n - l, "tensor<");
    for (uint32_t i = 0; i < rank && l < n; i++) {
        l += (size_t)snprintf(buf + l, n - l, "%lldx", (long long)dims[i]);
    }
    if (l < n) {
        snprintf(buf + l, n - l, "%s>", elem);
    }
    return buf;
}

/* A sharding `<@mesh, [{"a"}, {}]>` into buf; ax[d] names dim d's axis or is
 * NULL. */
static const char *shd(char *buf, size_t n, const char *const *ax, uint32_t rank)
{
    size_t l = (size_t)snprintf(buf, n, "<@mesh, [");
    for (uint32_t d = 0; d < rank && l < n; d++) {
        l += (size_t)snprintf(buf + l, n - l, "%s%s%s%s", d > 0 ? ", " : "", ax[d] ? "{\"" : "{",
                              ax[d] ? ax[d] : "", ax[d] ? "\"}" : "}");
    }
    if (l < n) {
        snprintf(buf + l, n - l, "]>");
    }
    return buf;
}

static cm_status bad(cm_error *err, const char *path, const char *msg)
{
    return cm_error_set(err, CM_EINVAL, path, "%s", msg);
}

/* ---- the Flax guide's MLP ------------------------------------------------------------ */

void sp_gen_mlp_opts_init(sp_gen_mlp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->layers = 4;
    o->d_model = 1024;
    o->depth = 4096;
    o->batch = 8;
    o->mesh_data = 2;
    o->mesh_model = 4;
}

cm_status sp_gen_mlp_mlir(const sp_gen_mlp_opts *o, cm_buf *out, cm_error *err)
{
    if (o->layers < 1 || o->layers > 10000) {
        return bad(err, "/layers", "layers must be 1..10000");
    }
    if (!o->scan && 2 * (uint64_t)o->layers + 1 > 4096) {
        return bad(err, "/layers",
                   "unrolled, at most 2047 layers: a function takes at most 4096 arguments");
    }
    if (o->d_model < 1 || o->depth < 1 || o->batch < 1 || o->mesh_data < 1 || o->mesh_model < 1 ||
        o->d_model > (1 << 20) || o->depth > (1 << 20) || o->batch > (1 << 20) ||
        o->mesh_data > 4096 || o->mesh_model > 4096) {
        return bad(err,
                   o->d_model < 1 || o->d_model > (1 << 20) ? "/d_model"
                   : o->depth < 1 || o->depth > (1 << 20)   ? "/depth"
                   : o->batch < 1 || o->batch > (1 << 20)   ? "/batch"
                                                            : "/mesh",
                   "sizes must be positive (at most 2^20, mesh axes at most 4096)");
    }
    long long L = o->layers, d = o->d_model, f = o->depth, b = o->batch;
    tw w = {out, 0, ""};
    cm_buf_printf(out,
                  "module @jit_apply_fn {\n  sdy.mesh @mesh = <[\"data\"=%lld, \"model\"=%lld]>\n",
                  (long long)o->mesh_data, (long long)o->mesh_model);
    const char *xs = "#sdy.sharding<@mesh, [{\"data\"}, {}]>";
    if (!o->scan) {
        cm_buf_puts(out, "  func.func public @main(");
        for (long long l = 0; l < L; l++) {
            cm_buf_printf(
                out,
                "%%w1_%lld: tensor<%lldx%lldxf32> {sdy.sharding = #sdy.sharding<@mesh, "
                "[{}, {\"model\"}]>} loc(\"params['layers_%lld']['Dense_0']['kernel']\"), "
                "%%w2_%lld: tensor<%lldx%lldxf32> {sdy.sharding = #sdy.sharding<@mesh, "
                "[{\"model\"}, {}]>} loc(\"params['layers_%lld']['W2']\"), ",
                l, d, f, l, l, f, d, l);
        }
        cm_buf_printf(out,
                      "%%x: tensor<%lldx%lldxf32> {sdy.sharding = %s} loc(\"x\")) -> "
                      "(tensor<%lldx%lldxf32> {sdy.sharding = %s}) {\n",
                      b, d, xs, b, d, xs);
        char prev[32] = "%x";
        for (long long l = 0; l < L; l++) {
            uint32_t y = op(&w,
                            "stablehlo.dot_general %s, %%w1_%lld, contracting_dims = [1] x [0] "
                            ": (tensor<%lldx%lldxf32>, tensor<%lldx%lldxf32>) -> "
                            "tensor<%lldx%lldxf32>",
                            prev, l, b, d, d, f, b, f);
            uint32_t z = op(&w, "stablehlo.constant dense<0.000000e+00> : tensor<f32>");
            uint32_t zb = op(&w,
                             "stablehlo.broadcast_in_dim %%v%u, dims = [] : (tensor<f32>) -> "
                             "tensor<%lldx%lldxf32>",
                             z, b, f);
            uint32_t r =
                op(&w, "stablehlo.maximum %%v%u, %%v%u : tensor<%lldx%lldxf32>", y, zb, b, f);
            uint32_t rc = op(&w,
                             "sdy.sharding_constraint %%v%u <@mesh, [{\"data\"}, {\"model\"}]> : "
                             "tensor<%lldx%lldxf32>",
                             r, b, f);
            uint32_t o2 = op(&w,
                             "stablehlo.dot_general %%v%u, %%w2_%lld, contracting_dims = [1] x [0] "
                             ": (tensor<%lldx%lldxf32>, tensor<%lldx%lldxf32>) -> "
                             "tensor<%lldx%lldxf32>",
                             rc, l, b, f, f, d, b, d);
            uint32_t oc = op(&w,
                             "sdy.sharding_constraint %%v%u <@mesh, [{\"data\"}, {}]> : "
                             "tensor<%lldx%lldxf32>",
                             o2, b, d);
            snprintf(prev, sizeof prev, "%%v%u", oc);
        }
        cm_buf_printf(out, "    return %s : tensor<%lldx%lldxf32>\n  }\n}\n", prev, b, d);
        return out->oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory") : CM_OK;
    }
    /* nn.scan: the kernels stacked on a leading layer axis, a while loop
     * whose body slices layer i out of each stack. */
    cm_buf_printf(out,
                  "  func.func public @main(%%w1: tensor<%lldx%lldx%lldxf32> {sdy.sharding = "
                  "#sdy.sharding<@mesh, [{}, {}, {\"model\"}]>} loc(\"params['ScanDotReluDot_0']"
                  "['Dense_0']['kernel']\"), %%w2: tensor<%lldx%lldx%lldxf32> {sdy.sharding = "
                  "#sdy.sharding<@mesh, [{}, {\"model\"}, {}]>} loc(\"params['ScanDotReluDot_0']"
                  "['W2']\"), %%x: tensor<%lldx%lldxf32> {sdy.sharding = %s} loc(\"x\")) -> "
                  "(tensor<%lldx%lldxf32> {sdy.sharding = %s}) {\n",
                  L, d, f, L, f, d, b, d, xs, b, d, xs);
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "tensor<%lldx%lldx%lldxf32>", L, d, f);
    snprintf(t2, sizeof t2, "tensor<%lldx%lldx%lldxf32>", L, f, d);
    uint32_t c0 = op(&w, "stablehlo.constant dense<0> : tensor<i32>");
    cm_buf_printf(
        out,
        "    %%loop:4 = stablehlo.while(%%s1 = %%w1, %%s2 = %%w2, %%i = %%v%u, %%h = %%x) : "
        "%s, %s, tensor<i32>, tensor<%lldx%lldxf32>\n     cond {\n",
        c0, t1, t2, b, d);
    uint32_t n = op(&w, "stablehlo.constant dense<%lld> : tensor<i32>", L);
    uint32_t lt = op(&w,
                     "stablehlo.compare LT, %%i, %%v%u, SIGNED : (tensor<i32>, tensor<i32>) -> "
                     "tensor<i1>",
                     n);
    cm_buf_printf(out, "      stablehlo.return %%v%u : tensor<i1>\n    } do {\n", lt);
    uint32_t z = op(&w, "stablehlo.constant dense<0> : tensor<i32>");
    uint32_t s1 = op(&w,
                     "stablehlo.dynamic_slice %%s1, %%i, %%v%u, %%v%u, sizes = [1, %lld, %lld] : "
                     "(%s, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x%lldx%lldxf32>",
                     z, z, d, f, t1, d, f);
    uint32_t k1 =
        op(&w, "stablehlo.reshape %%v%u : (tensor<1x%lldx%lldxf32>) -> tensor<%lldx%lldxf32>", s1,
           d, f, d, f);
    uint32_t s2 = op(&w,
                     "stablehlo.dynamic_slice %%s2, %%i, %%v%u, %%v%u, sizes = [1, %lld, %lld] : "
                     "(%s, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x%lldx%lldxf32>",
                     z, z, f, d, t2, f, d);
    uint32_t k2 =
        op(&w, "stablehlo.reshape %%v%u : (tensor<1x%lldx%lldxf32>) -> tensor<%lldx%lldxf32>", s2,
           f, d, f, d);
    uint32_t y = op(&w,
                    "stablehlo.dot_general %%h, %%v%u, contracting_dims = [1] x [0] : "
                    "(tensor<%lldx%lldxf32>, tensor<%lldx%lldxf32>) -> tensor<%lldx%lldxf32>",
                    k1, b, d, d, f, b, f);
    uint32_t zf = op(&w, "stablehlo.constant dense<0.000000e+00> : tensor<f32>");
    uint32_t zb = op(&w,
                     "stablehlo.broadcast_in_dim %%v%u, dims = [] : (tensor<f32>) -> "
                     "tensor<%lldx%lldxf32>",
                     zf, b, f);
    uint32_t r = op(&w, "stablehlo.maximum %%v%u, %%v%u : tensor<%lldx%lldxf32>", y, zb, b, f);
    uint32_t rc = op(&w,
                     "sdy.sharding_constraint %%v%u <@mesh, [{\"data\"}, {\"model\"}]> : "
                     "tensor<%lldx%lldxf32>",
                     r, b, f);
    uint32_t o2 = op(&w,
                     "stablehlo.dot_general %%v%u, %%v%u, contracting_dims = [1] x [0] : "
                     "(tensor<%lldx%lldxf32>, tensor<%lldx%lldxf32>) -> tensor<%lldx%lldxf32>",
                     rc, k2, b, f, f, d, b, d);
    uint32_t oc = op(&w,
                     "sdy.sharding_constraint %%v%u <@mesh, [{\"data\"}, {}]> : "
                     "tensor<%lldx%lldxf32>",
                     o2, b, d);
    uint32_t one = op(&w, "stablehlo.constant dense<1> : tensor<i32>");
    uint32_t inc = op(&w, "stablehlo.add %%i, %%v%u : tensor<i32>", one);
    cm_buf_printf(
        out,
        "      stablehlo.return %%s1, %%s2, %%v%u, %%v%u : %s, %s, tensor<i32>, "
        "tensor<%lldx%lldxf32>\n    }\n    return %%loop#3 : tensor<%lldx%lldxf32>\n  }\n}\n",
        inc, oc, t1, t2, b, d, b, d);
    return out->oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory") : CM_OK;
}

/* ---- Megatron GPT layers -------------------------------------------------------------- */

enum { K_G1, K_WQ, K_WK, K_WV, K_WO, K_G2, K_W1, K_W2, N_KINDS };
static const char *const kind_names[N_KINDS] = {"ln1_scale", "Wq",        "Wk", "Wv",
                                                "Wo",        "ln2_scale", "W1", "W2"};

void sp_gen_gpt_opts_init(sp_gen_gpt_opts *o)
{
    memset(o, 0, sizeof *o);
    o->layers = 2;
    o->seq = 128;
    o->batch = 8;
    o->hidden = 256;
    o->heads = 8;
    o->mesh_data = 2;
    o->mesh_model = 4;
}

typedef struct gpt {
    tw w;
    const sp_gen_gpt_opts *o;
    const char *D, *M, *S; /* data, model, sequence-parallel axis names (NULL: not used) */
    long long s, b, h, a, dh, f;
    /* types */
    char t_sbh[64], t_sbf[64], t_bass[64], t_bas[64], t_sbad[64], t_basd[64], t_sb[64];
    char m_bass[64], m_sbh[64];
    /* shardings */
    char s_x[96], s_xr[96], s_sc[96];
    uint32_t p16[N_KINDS], master[N_KINDS], mom[N_KINDS], var[N_KINDS]; /* args of a layer */
} gpt;

typedef struct fsaved {
    uint32_t x, y1, q4, k4, v4, p, mask1, pd, c3, mask2, x2, y2, u, gl, mask3;
} fsaved;

static void ptype(const gpt *g, int k, const char *elem, char *buf, size_t n)
{
    int64_t d[2];
    uint32_t r = 2;
    switch (k) {
    case K_G1:
    case K_G2:
        d[0] = g->h;
        r = 1;
        break;
    case K_W1:
        d[0] = g->h;
        d[1] = g->f;
        break;
    case K_W2:
        d[0] = g->f;
        d[1] = g->h;
        break;
    default:
        d[0] = g->h;
        d[1] = g->h;
        break;
    }
    ty(buf, n, d, r, elem);
}

/* The sharding of parameter kind k: its tensor-parallel axis, and the data
 * axis on its other dimension when with_data (ZeRO). */
static void pshard(const gpt *g, int k, bool with_data, char *buf, size_t n)
{
    const char *ax[2] = {NULL, NULL};
    const char *D = with_data ? g->D : NULL;
    switch (k) {
    case K_G1:
    case K_G2:
        ax[0] = D;
        shd(buf, n, ax, 1);
        return;
    case K_WQ:
    case K_WK:
    case K_WV:
    case K_W1: /* column-parallel: output features on model */
        ax[0] = D;
        ax[1] = g->M;
        break;
    default: /* row-parallel Wo, W2: input features on model */
        ax[0] = g->M;
        ax[1] = D;
        break;
    }
    shd(buf, n, ax, 2);
}

static uint32_t cst(gpt *g, const char *val, const char *elem)
{
    return op(&g->w, "stablehlo.constant dense<%s> : tensor<%s>", val, elem);
}

/* A scalar broadcast to type t (element elem). */
static uint32_t splat(gpt *g, const char *val, const char *elem, const char *t)
{
    uint32_t c = cst(g, val, elem);
    return op(&g->w, "stablehlo.broadcast_in_dim %%v%u, dims = [] : (tensor<%s>) -> %s", c, elem,
              t);
}

static uint32_t ew(gpt *g, const char *name, uint32_t a, uint32_t b, const char *t)
{
    return op(&g->w, "stablehlo.%s %%v%u, %%v%u : %s", name, a, b, t);
}

static uint32_t un(gpt *g, const char *name, uint32_t a, const char *t)
{
    return op(&g->w, "stablehlo.%s %%v%u : %s", name, a, t);
}

static uint32_t constrain(gpt *g, uint32_t v, const char *s, const char *t)
{
    return op(&g->w, "sdy.sharding_constraint %%v%u %s : %s", v, s, t);
}

static uint32_t reduce_add(gpt *g, uint32_t v, const char *dims, const char *tin, const char *tout)
{
    uint32_t z = cst(g, "0.000000e+00", "bf16");
    return op(&g->w,
              "stablehlo.reduce(%%v%u init: %%v%u) applies stablehlo.add across dimensions = [%s] "
              ": (%s, tensor<bf16>) -> %s",
              v, z, dims, tin, tout);
}

static uint32_t bcast(gpt *g, uint32_t v, const char *dims, const char *tin, const char *tout)
{
    return op(&g->w, "stablehlo.broadcast_in_dim %%v%u, dims = [%s] : (%s) -> %s", v, dims, tin,
              tout);
}

static uint32_t dot(gpt *g, uint32_t a, uint32_t b, const char *dims, const char *ta,
                    const char *tb, const char *tr)
{
    return op(&g->w, "stablehlo.dot_general %%v%u, %%v%u, %s : (%s, %s) -> %s", a, b, dims, ta, tb,
              tr);
}

/* 1 / rms(x) over the hidden dimension, [s, b]. */
static uint32_t rms_inv(gpt *g, uint32_t x)
{
    char eps[32], inv[32];
    snprintf(inv, sizeof inv, "%.9e", 1.0 / (double)g->h);
    snprintf(eps, sizeof eps, "%.9e", 1e-5);
    uint32_t sq = ew(g, "multiply", x, x, g->t_sbh);
    uint32_t ss = reduce_add(g, sq, "2", g->t_sbh, g->t_sb);
    uint32_t ms = ew(g, "multiply", ss, splat(g, inv, "bf16", g->t_sb), g->t_sb);
    uint32_t ve = ew(g, "add", ms, splat(g, eps, "bf16", g->t_sb), g->t_sb);
    return un(g, "rsqrt", ve, g->t_sb);
}

/* LayerNorm in its RMS form with a scale and no bias; it stores its input
 * (the backward pass recomputes the statistics from it). */
static uint32_t norm(gpt *g, uint32_t x, uint32_t scale)
{
    char th[32];
    snprintf(th, sizeof th, "tensor<%lldxbf16>", g->h);
    uint32_t r = rms_inv(g, x);
    uint32_t xn = ew(g, "multiply", x, bcast(g, r, "0, 1", g->t_sb, g->t_sbh), g->t_sbh);
    return ew(g, "multiply", xn, bcast(g, scale, "2", th, g->t_sbh), g->t_sbh);
}

/* dx and dscale of norm(x, scale) from dy. */
static uint32_t norm_bwd(gpt *g, uint32_t x, uint32_t scale, uint32_t dy, uint32_t *dscale)
{
    char th[32], inv[32];
    snprintf(th, sizeof th, "tensor<%lldxbf16>", g->h);
    snprintf(inv, sizeof inv, "%.9e", 1.0 / (double)g->h);
    uint32_t r = rms_inv(g, x);
    uint32_t rb = bcast(g, r, "0, 1", g->t_sb, g->t_sbh);
    uint32_t xn = ew(g, "multiply", x, rb, g->t_sbh);
    *dscale = reduce_add(g, ew(g, "multiply", dy, xn, g->t_sbh), "0, 1", g->t_sbh, th);
    uint32_t dxn = ew(g, "multiply", dy, bcast(g, scale, "2", th, g->t_sbh), g->t_sbh);
    uint32_t mt = reduce_add(g, ew(g, "multiply", dxn, xn, g->t_sbh), "2", g->t_sbh, g->t_sb);
    uint32_t mt2 = ew(g, "multiply", mt, splat(g, inv, "bf16", g->t_sb), g->t_sb);
    uint32_t c = ew(g, "multiply", xn, bcast(g, mt2, "0, 1", g->t_sb, g->t_sbh), g->t_sbh);
    return ew(g, "multiply", rb, ew(g, "subtract", dxn, c, g->t_sbh), g->t_sbh);
}

/* A dropout keep-mask of type t (i1, one byte an element) with sharding s. */
static uint32_t dropout_mask(gpt *g, const char *t, const char *tm, const char *s,
                             const int64_t *dims, uint32_t rank)
{
    char shape[128];
    size_t l = 0;
    for (uint32_t i = 0; i < rank && l < sizeof shape; i++) {
        l += (size_t)snprintf(shape + l, sizeof shape - l, "%s%lld", i > 0 ? ", " : "",
                              (long long)dims[i]);
    }
    uint32_t lo = cst(g, "0.000000e+00", "bf16"), hi = cst(g, "1.000000e+00", "bf16");
    uint32_t sh = op(&g->w, "stablehlo.constant dense<[%s]> : tensor<%uxi64>", shape, rank);
    uint32_t u = op(&g->w,
                    "stablehlo.rng %%v%u, %%v%u, %%v%u, distribution = UNIFORM : (tensor<bf16>, "
                    "tensor<bf16>, tensor<%uxi64>) -> %s",
                    lo, hi, sh, rank, t);
    uint32_t keep = splat(g, "9.000000e-01", "bf16", t);
    uint32_t m =
        op(&g->w, "stablehlo.compare LT, %%v%u, %%v%u, FLOAT : (%s, %s) -> %s", u, keep, t, t, tm);
    return constrain(g, m, s, tm);
}

static uint32_t dropout_apply(gpt *g, uint32_t mask, uint32_t x, const char *t, const char *tm)
{
    uint32_t sc = ew(g, "multiply", x, splat(g, "1.111111e+00", "bf16", t), t);
    uint32_t z = splat(g, "0.000000e+00", "bf16", t);
    return op(&g->w, "stablehlo.select %%v%u, %%v%u, %%v%u : %s, %s", mask, sc, z, tm, t);
}

/* A weight as the layer computes with it: gathered over data under ZeRO-3. */
static uint32_t weight_use(gpt *g, int k)
{
    if (g->o->zero_stage < 3 || g->D == NULL) {
        return g->p16[k];
    }
    char s[96], t[64];
    pshard(g, k, false, s, sizeof s);
    ptype(g, k, "bf16", t, sizeof t);
    return constrain(g, g->p16[k], s, t);
}

static uint32_t fwd_layer(gpt *g, uint32_t l, uint32_t x, fsaved *sv)
{
    char t_hh[64], t_hf[64], t_fh[64];
    ptype(g, K_WQ, "bf16", t_hh, sizeof t_hh);
    ptype(g, K_W1, "bf16", t_hf, sizeof t_hf);
    ptype(g, K_W2, "bf16", t_fh, sizeof t_fh);
    set_loc(&g->w, "layer%u/fwd/attention", l);
    sv->x = x;
    sv->y1 = norm(g, x, g->p16[K_G1]);
    if (g->S != NULL) {
        sv->y1 = constrain(g, sv->y1, g->s_x, g->t_sbh); /* stored sequence-sharded */
    }
    uint32_t yg = g->S != NULL ? constrain(g, sv->y1, g->s_xr, g->t_sbh) : sv->y1;
    const char *proj = "contracting_dims = [2] x [0]";
    uint32_t q = dot(g, yg, weight_use(g, K_WQ), proj, g->t_sbh, t_hh, g->t_sbh);
    uint32_t k = dot(g, yg, weight_use(g, K_WK), proj, g->t_sbh, t_hh, g->t_sbh);
    uint32_t v = dot(g, yg, weight_use(g, K_WV), proj, g->t_sbh, t_hh, g->t_sbh);
    sv->q4 = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", q, g->t_sbh, g->t_sbad);
    sv->k4 = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", k, g->t_sbh, g->t_sbad);
    sv->v4 = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", v, g->t_sbh, g->t_sbad);
    uint32_t sc =
        dot(g, sv->q4, sv->k4, "batching_dims = [1, 2] x [1, 2], contracting_dims = [3] x [3]",
            g->t_sbad, g->t_sbad, g->t_bass);
    char isd[32];
    snprintf(isd, sizeof isd, "%.9e", 1.0 / sqrt((double)g->dh));
    uint32_t scs = ew(g, "multiply", sc, splat(g, isd, "bf16", g->t_bass), g->t_bass);
    uint32_t ninf = cst(g, "0xFF80", "bf16");
    uint32_t mx = op(&g->w,
                     "stablehlo.reduce(%%v%u init: %%v%u) applies stablehlo.maximum across "
                     "dimensions = [3] : (%s, tensor<bf16>) -> %s",
                     scs, ninf, g->t_bass, g->t_bas);
    uint32_t e = un(g, "exponential",
                    ew(g, "subtract", scs, bcast(g, mx, "0, 1, 2", g->t_bas, g->t_bass), g->t_bass),
                    g->t_bass);
    uint32_t se = reduce_add(g, e, "3", g->t_bass, g->t_bas);
    sv->p = ew(g, "divide", e, bcast(g, se, "0, 1, 2", g->t_bas, g->t_bass), g->t_bass);
    int64_t dsc[4] = {g->b, g->a, g->s, g->s}, dx[3] = {g->s, g->b, g->h};
    sv->mask1 = dropout_mask(g, g->t_bass, g->m_bass, g->s_sc, dsc, 4);
    sv->pd = dropout_apply(g, sv->mask1, sv->p, g->t_bass, g->m_bass);
    uint32_t ctx =
        dot(g, sv->pd, sv->v4, "batching_dims = [0, 1] x [1, 2], contracting_dims = [3] x [0]",
            g->t_bass, g->t_sbad, g->t_basd);
    uint32_t ct = op(&g->w, "stablehlo.transpose %%v%u, dims = [2, 0, 1, 3] : (%s) -> %s", ctx,
                     g->t_basd, g->t_sbad);
    sv->c3 = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", ct, g->t_sbad, g->t_sbh);
    uint32_t o = dot(g, sv->c3, weight_use(g, K_WO), proj, g->t_sbh, t_hh, g->t_sbh);
    uint32_t oc = constrain(g, o, g->s_x, g->t_sbh);
    sv->mask2 = dropout_mask(g, g->t_sbh, g->m_sbh, g->s_x, dx, 3);
    uint32_t od = dropout_apply(g, sv->mask2, oc, g->t_sbh, g->m_sbh);
    sv->x2 = ew(g, "add", x, od, g->t_sbh);
    set_loc(&g->w, "layer%u/fwd/mlp", l);
    sv->y2 = norm(g, sv->x2, g->p16[K_G2]);
    if (g->S != NULL) {
        sv->y2 = constrain(g, sv->y2, g->s_x, g->t_sbh);
    }
    uint32_t y2g = g->S != NULL ? constrain(g, sv->y2, g->s_xr, g->t_sbh) : sv->y2;
    sv->u = dot(g, y2g, weight_use(g, K_W1), proj, g->t_sbh, t_hf, g->t_sbf);
    uint32_t t = ew(g, "multiply", sv->u, splat(g, "1.702000e+00", "bf16", g->t_sbf), g->t_sbf);
    sv->gl = ew(g, "multiply", sv->u, un(g, "logistic", t, g->t_sbf), g->t_sbf);
    uint32_t w2 = dot(g, sv->gl, weight_use(g, K_W2), proj, g->t_sbf, t_fh, g->t_sbh);
    uint32_t wc = constrain(g, w2, g->s_x, g->t_sbh);
    sv->mask3 = dropout_mask(g, g->t_sbh, g->m_sbh, g->s_x, dx, 3);
    uint32_t wd = dropout_apply(g, sv->mask3, wc, g->t_sbh, g->m_sbh);
    return ew(g, "add", sv->x2, wd, g->t_sbh);
}

/* The gradient of parameter kind k as the optimizer takes it: sharded over
 * data from ZeRO-2 on (a reduce-scatter), else replicated (an all-reduce). */
static uint32_t grad_out(gpt *g, int k, uint32_t v)
{
    char s[96], t[64];
    pshard(g, k, g->o->zero_stage >= 2, s, sizeof s);
    ptype(g, k, "bf16", t, sizeof t);
    return constrain(g, v, s, t);
}

static uint32_t bwd_layer(gpt *g, uint32_t l, const fsaved *sv, uint32_t dx3, uint32_t *grads)
{
    char t_hh[64], t_hf[64], t_fh[64];
    ptype(g, K_WQ, "bf16", t_hh, sizeof t_hh);
    ptype(g, K_W1, "bf16", t_hf, sizeof t_hf);
    ptype(g, K_W2, "bf16", t_fh, sizeof t_fh);
    const char *wg = "contracting_dims = [0, 1] x [0, 1]";
    const char *back = "contracting_dims = [2] x [1]";
    set_loc(&g->w, "transpose(layer%u)/bwd/mlp", l);
    uint32_t dw = dropout_apply(g, sv->mask3, dx3, g->t_sbh, g->m_sbh);
    uint32_t dgl = dot(g, dw, weight_use(g, K_W2), back, g->t_sbh, t_fh, g->t_sbf);
    grads[K_W2] = grad_out(g, K_W2, dot(g, sv->gl, dw, wg, g->t_sbf, g->t_sbh, t_fh));
    uint32_t t = ew(g, "multiply", sv->u, splat(g, "1.702000e+00", "bf16", g->t_sbf), g->t_sbf);
    uint32_t sg = un(g, "logistic", t, g->t_sbf);
    uint32_t om = ew(g, "subtract", splat(g, "1.000000e+00", "bf16", g->t_sbf), sg, g->t_sbf);
    uint32_t dg = ew(g, "add", sg,
                     ew(g, "multiply", t, ew(g, "multiply", sg, om, g->t_sbf), g->t_sbf), g->t_sbf);
    uint32_t du = ew(g, "multiply", dgl, dg, g->t_sbf);
    uint32_t dy2 = constrain(g, dot(g, du, weight_use(g, K_W1), back, g->t_sbf, t_hf, g->t_sbh),
                             g->s_x, g->t_sbh);
    uint32_t y2g = g->S != NULL ? constrain(g, sv->y2, g->s_xr, g->t_sbh) : sv->y2;
    grads[K_W1] = grad_out(g, K_W1, dot(g, y2g, du, wg, g->t_sbh, g->t_sbf, t_hf));
    uint32_t dsc2;
    uint32_t dxl = norm_bwd(g, sv->x2, g->p16[K_G2], dy2, &dsc2);
    grads[K_G2] = grad_out(g, K_G2, dsc2);
    uint32_t dx2 = ew(g, "add", dx3, dxl, g->t_sbh);
    set_loc(&g->w, "transpose(layer%u)/bwd/attention", l);
    uint32_t dov = dropout_apply(g, sv->mask2, dx2, g->t_sbh, g->m_sbh);
    uint32_t dc3 = dot(g, dov, weight_use(g, K_WO), back, g->t_sbh, t_hh, g->t_sbh);
    grads[K_WO] = grad_out(g, K_WO, dot(g, sv->c3, dov, wg, g->t_sbh, g->t_sbh, t_hh));
    uint32_t dc4 = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", dc3, g->t_sbh, g->t_sbad);
    uint32_t dctx = op(&g->w, "stablehlo.transpose %%v%u, dims = [1, 2, 0, 3] : (%s) -> %s", dc4,
                       g->t_sbad, g->t_basd);
    uint32_t dpd =
        dot(g, dctx, sv->v4, "batching_dims = [0, 1] x [1, 2], contracting_dims = [3] x [3]",
            g->t_basd, g->t_sbad, g->t_bass);
    uint32_t dvb =
        dot(g, sv->pd, dctx, "batching_dims = [0, 1] x [0, 1], contracting_dims = [2] x [2]",
            g->t_bass, g->t_basd, g->t_basd);
    uint32_t dp = dropout_apply(g, sv->mask1, dpd, g->t_bass, g->m_bass);
    uint32_t sp = reduce_add(g, ew(g, "multiply", dp, sv->p, g->t_bass), "3", g->t_bass, g->t_bas);
    uint32_t dsm = ew(
        g, "multiply", sv->p,
        ew(g, "subtract", dp, bcast(g, sp, "0, 1, 2", g->t_bas, g->t_bass), g->t_bass), g->t_bass);
    char isd[32];
    snprintf(isd, sizeof isd, "%.9e", 1.0 / sqrt((double)g->dh));
    uint32_t ds = ew(g, "multiply", dsm, splat(g, isd, "bf16", g->t_bass), g->t_bass);
    uint32_t dqb =
        dot(g, ds, sv->k4, "batching_dims = [0, 1] x [1, 2], contracting_dims = [3] x [0]",
            g->t_bass, g->t_sbad, g->t_basd);
    uint32_t dkb =
        dot(g, ds, sv->q4, "batching_dims = [0, 1] x [1, 2], contracting_dims = [2] x [0]",
            g->t_bass, g->t_sbad, g->t_basd);
    uint32_t dqkv[3], src[3] = {dqb, dkb, dvb};
    for (int i = 0; i < 3; i++) {
        uint32_t tt = op(&g->w, "stablehlo.transpose %%v%u, dims = [2, 0, 1, 3] : (%s) -> %s",
                         src[i], g->t_basd, g->t_sbad);
        dqkv[i] = op(&g->w, "stablehlo.reshape %%v%u : (%s) -> %s", tt, g->t_sbad, g->t_sbh);
    }
    uint32_t y1g = g->S != NULL ? constrain(g, sv->y1, g->s_xr, g->t_sbh) : sv->y1;
    static const int wk[3] = {K_WQ, K_WK, K_WV};
    uint32_t dy1 = SP_NONE;
    for (int i = 0; i < 3; i++) {
        grads[wk[i]] = grad_out(g, wk[i], dot(g, y1g, dqkv[i], wg, g->t_sbh, g->t_sbh, t_hh));
        uint32_t part = dot(g, dqkv[i], weight_use(g, wk[i]), back, g->t_sbh, t_hh, g->t_sbh);
        dy1 = dy1 == SP_NONE ? part : ew(g, "add", dy1, part, g->t_sbh);
    }
    dy1 = constrain(g, dy1, g->s_x, g->t_sbh);
    uint32_t dsc1;
    uint32_t dxl1 = norm_bwd(g, sv->x, g->p16[K_G1], dy1, &dsc1);
    grads[K_G1] = grad_out(g, K_G1, dsc1);
    return ew(g, "add", dx2, dxl1, g->t_sbh);
}

/* Mixed-precision Adam on one parameter: the f32 moments and master weight
 * move (sharded over data from ZeRO-1 on), the bf16 parameter is the master
 * rounded (gathered again unless ZeRO-3). Returns the new values in out[4]:
 * parameter, master, first and second moment. */
static void adam(gpt *g, int k, uint32_t l, uint32_t grad, const uint32_t st[4], uint32_t out[4])
{
    char t32[64], t16[64], s_state[96], s_p[96];
    ptype(g, k, "f32", t32, sizeof t32);
    ptype(g, k, "bf16", t16, sizeof t16);
    pshard(g, k, g->o->zero_stage >= 1, s_state, sizeof s_state);
    pshard(g, k, g->o->zero_stage >= 3, s_p, sizeof s_p);
    set_loc(&g->w, "adam/layer%u/%s", l, kind_names[k]);
    uint32_t g32 = constrain(g, op(&g->w, "stablehlo.convert %%v%u : (%s) -> %s", grad, t16, t32),
                             s_state, t32);
    uint32_t m1 = ew(g, "add", ew(g, "multiply", st[2], splat(g, "9.000000e-01", "f32", t32), t32),
                     ew(g, "multiply", g32, splat(g, "1.000000e-01", "f32", t32), t32), t32);
    uint32_t gg = ew(g, "multiply", g32, g32, t32);
    uint32_t v1 = ew(g, "add", ew(g, "multiply", st[3], splat(g, "9.990000e-01", "f32", t32), t32),
                     ew(g, "multiply", gg, splat(g, "1.000000e-03", "f32", t32), t32), t32);
    uint32_t den = ew(g, "add", un(g, "sqrt", v1, t32), splat(g, "1.000000e-08", "f32", t32), t32);
    uint32_t upd =
        ew(g, "multiply", ew(g, "divide", m1, den, t32), splat(g, "1.000000e-04", "f32", t32), t32);
    uint32_t mw = ew(g, "subtract", st[1], upd, t32);
    uint32_t p = op(&g->w, "stablehlo.convert %%v%u : (%s) -> %s", mw, t32, t16);
    out[0] = constrain(g, p, s_p, t16);
    out[1] = mw;
    out[2] = m1;
    out[3] = v1;
}

cm_status sp_gen_gpt_mlir(const sp_gen_gpt_opts *o, cm_buf *out, cm_error *err)
{
    int64_t f = o->ffn > 0 ? o->ffn : 4 * o->hidden;
    const int64_t lim = (int64_t)1 << 24;
    if (o->layers < 1 || o->layers > 1000) {
        return bad(err, "/layers", "layers must be 1..1000");
    }
    if (o->seq < 1 || o->seq > lim) {
        return bad(err, "/seq", "seq must be 1..2^24");
    }
    if (o->batch < 1 || o->batch > lim) {
        return bad(err, "/batch", "batch must be 1..2^24");
    }
    if (o->hidden < 1 || o->hidden > lim) {
        return bad(err, "/hidden", "hidden must be 1..2^24");
    }
    if (o->heads < 1 || o->hidden % o->heads != 0) {
        return bad(err, "/heads", "heads must divide hidden");
    }
    if (f < 1 || f > lim) {
        return bad(err, "/ffn", "ffn must be 1..2^24");
    }
    if (o->mesh_data < 1 || o->mesh_data > 65536 || o->batch % o->mesh_data != 0) {
        return bad(err, "/mesh_data", "mesh_data must be 1..65536 and divide batch");
    }
    if (o->mesh_model < 1 || o->mesh_model > 65536 || o->heads % o->mesh_model != 0 ||
        f % o->mesh_model != 0 || (o->sequence_parallel && o->seq % o->mesh_model != 0)) {
        return bad(err, "/mesh_model",
                   "mesh_model must be 1..65536 and divide heads, ffn (and seq with sequence "
                   "parallelism)");
    }
    if (o->zero_stage < 0 || o->zero_stage > 3 ||
        (o->zero_stage > 0 && (o->optimizer != SP_GEN_OPTIM_ADAM || o->hidden % o->mesh_data != 0 ||
                               f % o->mesh_data != 0))) {
        return bad(err, "/zero_stage",
                   "zero_stage is 0..3, needs the Adam optimizer and mesh_data dividing hidden "
                   "and ffn");
    }
    uint32_t per = o->optimizer == SP_GEN_OPTIM_ADAM ? 4u : 1u;
    if ((uint64_t)o->layers * N_KINDS * per + 1 > 4096) {
        return bad(err, "/layers", "too many layers: a function takes at most 4096 arguments");
    }
    gpt g;
    memset(&g, 0, sizeof g);
    g.w.b = out;
    g.o = o;
    g.D = o->mesh_data > 1 ? "data" : NULL;
    g.M = o->mesh_model > 1 ? "model" : NULL;
    g.S = o->sequence_parallel ? g.M : NULL;
    g.s = o->seq;
    g.b = o->batch;
    g.h = o->hidden;
    g.a = o->heads;
    g.dh = o->hidden / o->heads;
    g.f = f;
    int64_t d_sbh[3] = {g.s, g.b, g.h}, d_sbf[3] = {g.s, g.b, g.f};
    int64_t d_bass[4] = {g.b, g.a, g.s, g.s}, d_bas[3] = {g.b, g.a, g.s};
    int64_t d_sbad[4] = {g.s, g.b, g.a, g.dh}, d_basd[4] = {g.b, g.a, g.s, g.dh};
    int64_t d_sb[2] = {g.s, g.b};
    ty(g.t_sbh, sizeof g.t_sbh, d_sbh, 3, "bf16");
    ty(g.t_sbf, sizeof g.t_sbf, d_sbf, 3, "bf16");
    ty(g.t_bass, sizeof g.t_bass, d_bass, 4, "bf16");
    ty(g.t_bas, sizeof g.t_bas, d_bas, 3, "bf16");
    ty(g.t_sbad, sizeof g.t_sbad, d_sbad, 4, "bf16");
    ty(g.t_basd, sizeof g.t_basd, d_basd, 4, "bf16");
    ty(g.t_sb, sizeof g.t_sb, d_sb, 2, "bf16");
    ty(g.m_bass, sizeof g.m_bass, d_bass, 4, "i1");
    ty(g.m_sbh, sizeof g.m_sbh, d_sbh, 3, "i1");
    const char *ax_x[3] = {g.S, g.D, NULL}, *ax_xr[3] = {NULL, g.D, NULL};
    const char *ax_sc[4] = {g.D, g.M, NULL, NULL};
    shd(g.s_x, sizeof g.s_x, ax_x, 3);
    shd(g.s_xr, sizeof g.s_xr, ax_xr, 3);
    shd(g.s_sc, sizeof g.s_sc, ax_sc, 4);
    cm_buf_puts(out, "module @jit_train_step {\n  sdy.mesh @mesh = <[");
    if (g.D != NULL) {
        cm_buf_printf(out, "\"data\"=%lld%s", (long long)o->mesh_data, g.M != NULL ? ", " : "");
    }
    if (g.M != NULL) {
        cm_buf_printf(out, "\"model\"=%lld", (long long)o->mesh_model);
    }
    if (g.D == NULL && g.M == NULL) {
        cm_buf_puts(out, "\"data\"=1");
    }
    cm_buf_puts(out, "]>\n  func.func public @main(");
    /* arguments: per layer and parameter kind the bf16 parameter, then (Adam)
     * its f32 master copy and moments, donated to their new values */
    uint32_t n_layers = o->layers;
    uint32_t n_out = 1; /* the loss first */
    for (uint32_t l = 0; l < n_layers; l++) {
        for (int k = 0; k < N_KINDS; k++) {
            static const char *const what[4] = {"", "master", "mu", "nu"};
            for (uint32_t j = 0; j < per; j++) {
                char t[64], s[96];
                ptype(&g, k, j == 0 ? "bf16" : "f32", t, sizeof t);
                pshard(&g, k, j == 0 ? o->zero_stage >= 3 : o->zero_stage >= 1, s, sizeof s);
                uint32_t v = g.w.next++;
                cm_buf_printf(out, "%%v%u: %s {sdy.sharding = #sdy.sharding%s", v, t, s);
                if (per > 1) {
                    cm_buf_printf(out, ", tf.aliasing_output = %u : i32", n_out);
                }
                n_out++;
                if (j == 0) {
                    cm_buf_printf(out, "} loc(\"params['layer%u']['%s']\"), ", l, kind_names[k]);
                } else {
                    cm_buf_printf(out, "} loc(\"opt_state['%s']['layer%u']['%s']\"), ", what[j], l,
                                  kind_names[k]);
                }
            }
        }
    }
    uint32_t x0 = g.w.next++;
    cm_buf_printf(out, "%%v%u: %s {sdy.sharding = #sdy.sharding%s} loc(\"x\")) -> (tensor<bf16>",
                  x0, g.t_sbh, g.s_x);
    for (uint32_t l = 0; l < n_layers; l++) {
        for (int k = 0; k < N_KINDS; k++) {
            for (uint32_t j = 0; j < per; j++) {
                char t[64];
                ptype(&g, k, j == 0 ? "bf16" : "f32", t, sizeof t);
                cm_buf_printf(out, ", %s", t);
            }
        }
    }
    cm_buf_puts(out, ") {\n");
    fsaved *sv = cm_calloc(n_layers, sizeof(fsaved));
    uint32_t *grads = cm_calloc((size_t)n_layers * N_KINDS, sizeof(uint32_t));
    if (sv == NULL || grads == NULL) {
        cm_free(sv);
        cm_free(grads);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    uint32_t x = x0;
    for (uint32_t l = 0; l < n_layers; l++) {
        for (int k = 0; k < N_KINDS; k++) {
            g.p16[k] = (l * N_KINDS + (uint32_t)k) * per;
        }
        x = fwd_layer(&g, l, x, &sv[l]);
    }
    set_loc(&g.w, "loss");
    uint32_t ls =
        reduce_add(&g, ew(&g, "multiply", x, x, g.t_sbh), "0, 1, 2", g.t_sbh, "tensor<bf16>");
    uint32_t loss = ew(&g, "multiply", ls, cst(&g, "5.000000e-01", "bf16"), "tensor<bf16>");
    uint32_t dx = x; /* d(sum(x*x)/2)/dx */
    for (uint32_t l = n_layers; l-- > 0;) {
        for (int k = 0; k < N_KINDS; k++) {
            g.p16[k] = (l * N_KINDS + (uint32_t)k) * per;
        }
        dx = bwd_layer(&g, l, &sv[l], dx, &grads[l * N_KINDS]);
    }
    cm_buf *b = out;
    uint32_t *res = cm_calloc((size_t)n_layers * N_KINDS * per + 1, sizeof(uint32_t));
    if (res == NULL) {
        cm_free(sv);
        cm_free(grads);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    for (uint32_t l = 0; l < n_layers; l++) {
        for (int k = 0; k < N_KINDS; k++) {
            uint32_t i = l * N_KINDS + (uint32_t)k;
            if (per == 1) {
                res[i] = grads[i];
                continue;
            }
            uint32_t st[4] = {i * per, i * per + 1, i * per + 2, i * per + 3};
            adam(&g, k, l, grads[i], st, &res[i * per]);
        }
    }
    cm_buf_printf(b, "    return %%v%u", loss);
    for (uint32_t i = 0; i < n_layers * N_KINDS * per; i++) {
        cm_buf_printf(b, ", %%v%u", res[i]);
    }
    cm_buf_puts(b, " : tensor<bf16>");
    for (uint32_t l = 0; l < n_layers; l++) {
        for (int k = 0; k < N_KINDS; k++) {
            for (uint32_t j = 0; j < per; j++) {
                char t[64];
                ptype(&g, k, j == 0 ? "bf16" : "f32", t, sizeof t);
                cm_buf_printf(b, ", %s", t);
            }
        }
    }
    cm_buf_puts(b, "\n  }\n}\n");
    cm_free(sv);
    cm_free(grads);
    cm_free(res);
    (void)dx;
    return out->oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory") : CM_OK;
}
