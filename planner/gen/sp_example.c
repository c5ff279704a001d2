/* SPDX-License-Identifier: Apache-2.0
 * planner: model templates (see sp_example.h). The graph document is written
 * as text straight into a cm_buf; sp_example_mlir (`--format mlir`) decodes it
 * with the graph reader and prints the module, so both outputs describe the
 * same IR. The `shardplan example` command is cmd/cmd_example.c. */
#include "sp_example.h"

#include <stdio.h>
#include <string.h>

#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_mlir.h"

void sp_example_opts_init(sp_example_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = SP_EXAMPLE_MLP;
    o->strategy = SP_EXAMPLE_DP_TP;
    o->layers = 4;
    o->d_model = 1024;
    o->heads = 8;
    o->seq = 128;
    o->batch = 8;
    o->n_axes = 2;
    strcpy(o->axis_names[0], "data");
    strcpy(o->axis_names[1], "model");
    o->axis_sizes[0] = 2;
    o->axis_sizes[1] = 4;
}

/* ---- writer ------------------------------------------------------------------------- */

typedef struct ex {
    cm_buf *b;
    const sp_example_opts *o;
    uint32_t n_ops;
    uint32_t tmp; /* next temporary value number */
} ex;

/* A fresh value name in buf. */
static const char *fresh(ex *e, char *buf, size_t n)
{
    snprintf(buf, n, "v%u", e->tmp++);
    return buf;
}

/* {"op": name, "operands": [...], "result": res, "type": type, extra} */
static void op(ex *e, const char *name, const char *const *ins, uint32_t n_in, const char *res,
               const char *type, const char *extra)
{
    cm_buf *b = e->b;
    cm_buf_puts(b, e->n_ops++ > 0 ? ",\n  {\"op\": \"" : "\n  {\"op\": \"");
    cm_buf_puts(b, name);
    cm_buf_puts(b, "\", \"operands\": [");
    for (uint32_t i = 0; i < n_in; i++) {
        cm_buf_printf(b, "%s\"%s\"", i > 0 ? ", " : "", ins[i]);
    }
    cm_buf_putc(b, ']');
    if (res != NULL) {
        cm_buf_printf(b, ", \"result\": \"%s\"", res);
    }
    if (type != NULL) {
        cm_buf_printf(b, ", \"type\": \"%s\"", type);
    }
    if (extra != NULL) {
        cm_buf_printf(b, ", %s", extra);
    }
    cm_buf_putc(b, '}');
}

static void tensor(char *buf, size_t n, const int64_t *dims, uint32_t rank)
{
    size_t k = (size_t)snprintf(buf, n, "tensor<");
    for (uint32_t i = 0; i < rank && k < n; i++) {
        k += (size_t)snprintf(buf + k, n - k, "%lldx", (long long)dims[i]);
    }
    if (k < n) {
        snprintf(buf + k, n - k, "f32>");
    }
}

static const char *dot_attr(int64_t lc, int64_t rc)
{
    static char buf[4][160];
    static int k;
    char *s = buf[k++ & 3];
    snprintf(s, 160,
             "\"attributes\": {\"dot_dimension_numbers\": {\"lhs_contracting_dimensions\": "
             "[%lld], \"rhs_contracting_dimensions\": [%lld]}}",
             (long long)lc, (long long)rc);
    return s;
}

static void dot(ex *e, const char *x, const char *w, const char *res, const char *type, int64_t lc,
                int64_t rc)
{
    const char *ins[2] = {x, w};
    op(e, "stablehlo.dot_general", ins, 2, res, type, dot_attr(lc, rc));
}

/* dot_general with explicit dimension numbers: dims is the body of the
 * dot_dimension_numbers object, e.g. "\"lhs_contracting_dimensions\": [0, 1], ...". */
static void dotg(ex *e, const char *x, const char *y, const char *res, const char *type,
                 const char *dims)
{
    char extra[320];
    snprintf(extra, sizeof extra, "\"attributes\": {\"dot_dimension_numbers\": {%s}}", dims);
    op(e, "stablehlo.dot_general", (const char *const[]){x, y}, 2, res, type, extra);
}

/* Weight gradient of y = dot(x, w) for x, y of rank 3: x^T dy over batch and seq. */
#define DOT_WGRAD "\"lhs_contracting_dimensions\": [0, 1], \"rhs_contracting_dimensions\": [0, 1]"

static void scalar(ex *e, const char *res, const char *value)
{
    char extra[96];
    snprintf(extra, sizeof extra, "\"attributes\": {\"value\": \"dense<%s> : tensor<f32>\"}",
             value);
    op(e, "stablehlo.constant", NULL, 0, res, "tensor<f32>", extra);
}

/* Sum of x over dims (a JSON list such as "[3]"), with its zero init; the
 * result gets a fresh name in res_out (16 bytes). */
static void reduce_sum(ex *e, const char *x, char *res_out, const char *type, const char *dims)
{
    char zero[16], extra[400];
    scalar(e, fresh(e, zero, sizeof zero), "0.000000e+00");
    const char *res = fresh(e, res_out, 16);
    snprintf(extra, sizeof extra,
             "\"attributes\": {\"dimensions\": %s}, \"regions\": [{\"args\": [{\"name\": \"a\", "
             "\"type\": \"tensor<f32>\"}, {\"name\": \"b\", \"type\": \"tensor<f32>\"}], \"ops\": "
             "[{\"op\": \"stablehlo.add\", \"operands\": [\"a\", \"b\"], \"result\": \"s\", "
             "\"type\": \"tensor<f32>\"}, {\"op\": \"stablehlo.return\", \"operands\": [\"s\"]}]}]",
             dims);
    op(e, "stablehlo.reduce", (const char *const[]){x, zero}, 2, res, type, extra);
}

static void bcast(ex *e, const char *x, const char *res, const char *type, const char *dims)
{
    char extra[96];
    snprintf(extra, sizeof extra, "\"attributes\": {\"broadcast_dimensions\": %s}", dims);
    op(e, "stablehlo.broadcast_in_dim", &x, 1, res, type, extra);
}

static void binary(ex *e, const char *name, const char *x, const char *y, const char *res,
                   const char *type)
{
    op(e, name, (const char *const[]){x, y}, 2, res, type, NULL);
}

/* The loss sum(y * y) / 2 of output y (all dims listed in dims), so that
 * d loss / d y = y; its name goes to loss_out (16 bytes). */
static void half_sum_squares(ex *e, const char *y, const char *type, const char *dims,
                             char *loss_out)
{
    char sq[16], sum[16], half[16];
    binary(e, "stablehlo.multiply", y, y, fresh(e, sq, sizeof sq), type);
    reduce_sum(e, sq, sum, "tensor<f32>", dims);
    scalar(e, fresh(e, half, sizeof half), "5.000000e-01");
    binary(e, "stablehlo.multiply", sum, half, fresh(e, loss_out, 16), "tensor<f32>");
}

/* SGD: res = w - broadcast(lr) * grad, for a parameter of type type. */
static void sgd(ex *e, const char *w, const char *grad, const char *lr, const char *res,
                const char *type)
{
    char lb[16], step[16];
    bcast(e, lr, fresh(e, lb, sizeof lb), type, "[]");
    binary(e, "stablehlo.multiply", lb, grad, fresh(e, step, sizeof step), type);
    binary(e, "stablehlo.subtract", w, step, res, type);
}

static void constraint(ex *e, const char *x, const char *res, const char *logical)
{
    char extra[160];
    snprintf(extra, sizeof extra, "\"logical_axes\": %s", logical);
    op(e, "sdy.sharding_constraint", &x, 1, res, NULL, extra);
}

/* relu(x) = maximum(x, broadcast(0)); the broadcast zero goes to zeros_out. */
static void relu(ex *e, const char *x, const char *res, const char *type, uint32_t rank,
                 char *zeros_out)
{
    char z[16], zs[16];
    fresh(e, z, sizeof z);
    op(e, "stablehlo.constant", NULL, 0, z, "tensor<f32>",
       "\"attributes\": {\"value\": \"dense<0.000000e+00> : tensor<f32>\"}");
    fresh(e, zs, sizeof zs);
    (void)rank;
    op(e, "stablehlo.broadcast_in_dim", (const char *const[]){z}, 1, zs, type,
       "\"attributes\": {\"broadcast_dimensions\": []}");
    op(e, "stablehlo.maximum", (const char *const[]){x, zs}, 2, res, type, NULL);
    if (zeros_out != NULL) {
        strcpy(zeros_out, zs);
    }
}

/* Strategy rules (flax logical_axis_rules). */
static const char *rules_of(sp_example_strategy s)
{
    switch (s) {
    case SP_EXAMPLE_DP:
        return "[[\"batch\", \"data\"]]";
    case SP_EXAMPLE_FSDP:
        return "[[\"batch\", \"data\"], [\"embed\", \"data\"]]";
    case SP_EXAMPLE_TP:
        return "[[\"mlp\", \"model\"], [\"heads\", \"model\"]]";
    case SP_EXAMPLE_DP_TP:
        return "[[\"batch\", \"data\"], [\"mlp\", \"model\"], [\"heads\", \"model\"]]";
    }
    return "[]";
}

static const char *const strategy_names[] = {"dp", "fsdp", "tp", "dp+tp"};

static void header(ex *e, const char *name)
{
    const sp_example_opts *o = e->o;
    cm_buf *b = e->b;
    cm_buf_printf(b,
                  "{\"format\": \"shardplan.graph/v1\",\n"
                  " \"comment\": \"shardplan example %s, strategy %s, %u layers%s\",\n"
                  " \"name\": \"%s\",\n \"meshes\": [{\"name\": \"mesh\", \"axes\": [",
                  o->model == SP_EXAMPLE_MLP ? "mlp" : "transformer",
                  strategy_names[o->strategy], o->layers, o->train ? ", training step" : "",
                  name);
    for (uint32_t i = 0; i < o->n_axes; i++) {
        cm_buf_printf(b, "%s[\"%s\", %lld]", i > 0 ? ", " : "", o->axis_names[i],
                      (long long)o->axis_sizes[i]);
    }
    cm_buf_printf(b, "]}],\n \"logical_axis_rules\": %s,\n", rules_of(o->strategy));
}

static void input(ex *e, bool first, const char *name, const char *type, const char *logical)
{
    cm_buf_printf(e->b, "%s  {\"name\": \"%s\", \"type\": \"%s\", \"logical_axes\": %s}",
                  first ? "\n" : ",\n", name, type, logical);
}

/* ---- MLP -------------------------------------------------------------------------------- */

static void mlp(ex *e)
{
    const sp_example_opts *o = e->o;
    int64_t b = o->batch, d = o->d_model, f = 4 * o->d_model;
    char t_x[64], t_h[64], t_w1[64], t_w2[64];
    tensor(t_x, sizeof t_x, (int64_t[]){b, d}, 2);
    tensor(t_h, sizeof t_h, (int64_t[]){b, f}, 2);
    tensor(t_w1, sizeof t_w1, (int64_t[]){d, f}, 2);
    tensor(t_w2, sizeof t_w2, (int64_t[]){f, d}, 2);
    header(e, o->train ? "jit_train_step" : "jit_apply_fn");
    cm_buf_puts(e->b, " \"inputs\": [");
    char nm[64];
    for (uint32_t l = 0; l < o->layers; l++) {
        snprintf(nm, sizeof nm, "layer%u.W1", l);
        input(e, l == 0, nm, t_w1, "[\"embed\", \"mlp\"]");
        snprintf(nm, sizeof nm, "layer%u.W2", l);
        input(e, false, nm, t_w2, "[\"mlp\", \"embed\"]");
    }
    input(e, false, "x", t_x, "[\"batch\", \"embed\"]");
    cm_buf_puts(e->b, "],\n \"ops\": [");
    /* saved per layer for the backward pass: input, post-relu, zeros */
    char(*sx)[16] = cm_calloc(o->layers, 16), (*sr)[16] = cm_calloc(o->layers, 16);
    char(*sz)[16] = cm_calloc(o->layers, 16);
    if (sx == NULL || sr == NULL || sz == NULL) {
        e->b->oom = true;
        goto out;
    }
    char x[16] = "x", h[16], r[16], rc[16], y[16], w1[32], w2[32];
    for (uint32_t l = 0; l < o->layers; l++) {
        snprintf(w1, sizeof w1, "layer%u.W1", l);
        snprintf(w2, sizeof w2, "layer%u.W2", l);
        strcpy(sx[l], x);
        dot(e, x, w1, fresh(e, h, sizeof h), t_h, 1, 0);
        relu(e, h, fresh(e, r, sizeof r), t_h, 2, sz[l]);
        constraint(e, r, fresh(e, rc, sizeof rc), "[\"batch\", \"mlp\"]");
        strcpy(sr[l], rc);
        dot(e, rc, w2, fresh(e, y, sizeof y), t_x, 1, 0);
        constraint(e, y, fresh(e, x, sizeof x), "[\"batch\", \"embed\"]");
    }
    if (!o->train) {
        cm_buf_printf(e->b, "],\n \"outputs\": [{\"value\": \"%s\", \"logical_axes\": [\"batch\", "
                            "\"embed\"]}]}\n",
                      x);
        goto out;
    }
    char loss[16], lr[16];
    half_sum_squares(e, x, t_x, "[0, 1]", loss);
    scalar(e, fresh(e, lr, sizeof lr), "1.000000e-03");
    char(*nw)[2][16] = cm_calloc(o->layers, sizeof *nw);
    if (nw == NULL) {
        e->b->oom = true;
        goto out;
    }
    char dy[16];
    strcpy(dy, x);
    for (uint32_t l = o->layers; l-- > 0;) {
        snprintf(w1, sizeof w1, "layer%u.W1", l);
        snprintf(w2, sizeof w2, "layer%u.W2", l);
        char dw2[16], dr[16], mask[16], dh[16], dw1[16], dx[16];
        /* dW2 = r^T dy; dr = dy W2^T; dh = dr where r > 0 */
        dot(e, sr[l], dy, fresh(e, dw2, sizeof dw2), t_w2, 0, 0);
        dot(e, dy, w2, fresh(e, dr, sizeof dr), t_h, 1, 1);
        char mask_t[64];
        snprintf(mask_t, sizeof mask_t, "tensor<%lldx%lldxi1>", (long long)b, (long long)f);
        op(e, "stablehlo.compare", (const char *const[]){sr[l], sz[l]}, 2,
           fresh(e, mask, sizeof mask), mask_t,
           "\"attributes\": {\"comparison_direction\": \"#stablehlo<comparison_direction GT>\"}");
        op(e, "stablehlo.select", (const char *const[]){mask, dr, sz[l]}, 3,
           fresh(e, dh, sizeof dh), t_h, NULL);
        /* dW1 = x^T dh; dx = dh W1^T */
        dot(e, sx[l], dh, fresh(e, dw1, sizeof dw1), t_w1, 0, 0);
        if (l > 0) {
            dot(e, dh, w1, fresh(e, dx, sizeof dx), t_x, 1, 1);
        }
        /* SGD: W -= lr * dW */
        for (int k = 0; k < 2; k++) {
            const char *w = k == 0 ? w1 : w2, *g = k == 0 ? dw1 : dw2;
            sgd(e, w, g, lr, fresh(e, nw[l][k], sizeof nw[l][k]), k == 0 ? t_w1 : t_w2);
        }
        if (l > 0) {
            constraint(e, dx, fresh(e, dy, sizeof dy), "[\"batch\", \"embed\"]");
        }
    }
    cm_buf_printf(e->b, "],\n \"outputs\": [\"%s\"", loss);
    for (uint32_t l = 0; l < o->layers; l++) {
        cm_buf_printf(e->b,
                      ",\n  {\"value\": \"%s\", \"logical_axes\": [\"embed\", \"mlp\"]},"
                      "\n  {\"value\": \"%s\", \"logical_axes\": [\"mlp\", \"embed\"]}",
                      nw[l][0], nw[l][1]);
    }
    cm_buf_puts(e->b, "]}\n");
    cm_free(nw);
out:
    cm_free(sx);
    cm_free(sr);
    cm_free(sz);
}

/* ---- transformer ------------------------------------------------------------------------ */

/* Dimension numbers of the attention's batched dot_generals. Q, K, V are
 * [B,S,H,E] (heads split by a reshape); scores and probabilities are
 * [B,H,S,T]; the context is [B,H,S,E]. */
#define DOT_QK                                                                                     \
    "\"lhs_batching_dimensions\": [0, 2], \"rhs_batching_dimensions\": [0, 2], "                   \
    "\"lhs_contracting_dimensions\": [3], \"rhs_contracting_dimensions\": [3]"
#define DOT_PV                                                                                     \
    "\"lhs_batching_dimensions\": [0, 1], \"rhs_batching_dimensions\": [0, 2], "                   \
    "\"lhs_contracting_dimensions\": [3], \"rhs_contracting_dimensions\": [1]"
/* d probs [B,H,S,T] = d ctx [B,H,S,E] . V [B,T,H,E] over E */
#define DOT_DP                                                                                     \
    "\"lhs_batching_dimensions\": [0, 1], \"rhs_batching_dimensions\": [0, 2], "                   \
    "\"lhs_contracting_dimensions\": [3], \"rhs_contracting_dimensions\": [3]"
/* d V [B,H,T,E] = probs [B,H,S,T] . d ctx [B,H,S,E] over S */
#define DOT_DV                                                                                     \
    "\"lhs_batching_dimensions\": [0, 1], \"rhs_batching_dimensions\": [0, 1], "                   \
    "\"lhs_contracting_dimensions\": [2], \"rhs_contracting_dimensions\": [2]"
/* d Q [B,H,S,E] = d scores [B,H,S,T] . K [B,T,H,E] over T */
#define DOT_DQ                                                                                     \
    "\"lhs_batching_dimensions\": [0, 1], \"rhs_batching_dimensions\": [0, 2], "                   \
    "\"lhs_contracting_dimensions\": [3], \"rhs_contracting_dimensions\": [1]"
/* d K [B,H,T,E] = d scores [B,H,S,T] . Q [B,S,H,E] over S */
#define DOT_DK                                                                                     \
    "\"lhs_batching_dimensions\": [0, 1], \"rhs_batching_dimensions\": [0, 2], "                   \
    "\"lhs_contracting_dimensions\": [2], \"rhs_contracting_dimensions\": [1]"

#define L_X "[\"batch\", \"seq\", \"embed\"]"
#define L_H "[\"batch\", \"seq\", \"mlp\"]"

/* Tensor types of the transformer, as MLIR text. */
typedef struct tt {
    char x[64];    /* [B,S,D] activations */
    char bshe[64]; /* [B,S,H,E] heads */
    char bhss[64]; /* [B,H,S,T] scores */
    char bhse[64]; /* [B,H,S,E] context */
    char bhs[64];  /* [B,H,S] softmax denominators */
    char h[64];    /* [B,S,F] MLP hidden */
    char mask[64]; /* [B,S,F] i1 ReLU mask */
    char p[6][64]; /* parameters: Wq, Wk, Wv, Wo [D,D], W1 [D,F], W2 [F,D] */
} tt;

static const char *const t_pn[6] = {"Wq", "Wk", "Wv", "Wo", "W1", "W2"};
static const char *const t_pl[6] = {"[\"embed\", \"heads\"]", "[\"embed\", \"heads\"]",
                                    "[\"embed\", \"heads\"]", "[\"heads\", \"embed\"]",
                                    "[\"embed\", \"mlp\"]",   "[\"mlp\", \"embed\"]"};

/* Values of one layer's forward pass that its backward pass reads. */
typedef struct saved {
    char x[16];      /* layer input [B,S,D] */
    char qkv[3][16]; /* Q, K, V [B,S,H,E] */
    char p[16];      /* softmax probabilities [B,H,S,T] */
    char c3[16];     /* context, heads merged [B,S,D] */
    char x1[16];     /* after the attention residual (constrained) */
    char r[16];      /* ReLU output (constrained) [B,S,F] */
    char zeros[16];  /* broadcast zero [B,S,F] */
} saved;

/* One layer: x + attention(x), then + MLP (residual, no layer norm); x is
 * replaced by the layer output and sv (may be NULL) gets what the backward
 * pass needs. The attention is softmax(Q K^T) V with the softmax normalised
 * by its sum over the keys (no max subtraction: shapes and shardings are what
 * matter here). */
static void t_forward(ex *e, const tt *t, uint32_t l, char *x, saved *sv)
{
    char w[6][32], p3[3][16], p4[3][16];
    for (int k = 0; k < 6; k++) {
        snprintf(w[k], sizeof w[k], "layer%u.%s", l, t_pn[k]);
    }
    for (int k = 0; k < 3; k++) {
        dot(e, x, w[k], fresh(e, p3[k], sizeof p3[k]), t->x, 2, 0);
        op(e, "stablehlo.reshape", (const char *const[]){p3[k]}, 1, fresh(e, p4[k], sizeof p4[k]),
           t->bshe, NULL);
    }
    char sc[16], ex_[16], den[16], denb[16], pr[16], ctx[16], ct[16], c3[16], a[16], x1[16],
        x1c[16], hh[16], r[16], rc[16], mo[16], x2[16], zeros[16];
    dotg(e, p4[0], p4[1], fresh(e, sc, sizeof sc), t->bhss, DOT_QK);
    op(e, "stablehlo.exponential", (const char *const[]){sc}, 1, fresh(e, ex_, sizeof ex_), t->bhss,
       NULL);
    reduce_sum(e, ex_, den, t->bhs, "[3]");
    bcast(e, den, fresh(e, denb, sizeof denb), t->bhss, "[0, 1, 2]");
    binary(e, "stablehlo.divide", ex_, denb, fresh(e, pr, sizeof pr), t->bhss);
    dotg(e, pr, p4[2], fresh(e, ctx, sizeof ctx), t->bhse, DOT_PV);
    op(e, "stablehlo.transpose", (const char *const[]){ctx}, 1, fresh(e, ct, sizeof ct), t->bshe,
       "\"attributes\": {\"permutation\": [0, 2, 1, 3]}");
    op(e, "stablehlo.reshape", (const char *const[]){ct}, 1, fresh(e, c3, sizeof c3), t->x, NULL);
    dot(e, c3, w[3], fresh(e, a, sizeof a), t->x, 2, 0);
    binary(e, "stablehlo.add", x, a, fresh(e, x1, sizeof x1), t->x);
    constraint(e, x1, fresh(e, x1c, sizeof x1c), L_X);
    dot(e, x1c, w[4], fresh(e, hh, sizeof hh), t->h, 2, 0);
    relu(e, hh, fresh(e, r, sizeof r), t->h, 3, zeros);
    constraint(e, r, fresh(e, rc, sizeof rc), L_H);
    dot(e, rc, w[5], fresh(e, mo, sizeof mo), t->x, 2, 0);
    binary(e, "stablehlo.add", x1c, mo, fresh(e, x2, sizeof x2), t->x);
    if (sv != NULL) {
        strcpy(sv->x, x);
        for (int k = 0; k < 3; k++) {
            strcpy(sv->qkv[k], p4[k]);
        }
        strcpy(sv->p, pr);
        strcpy(sv->c3, c3);
        strcpy(sv->x1, x1c);
        strcpy(sv->r, rc);
        strcpy(sv->zeros, zeros);
    }
    constraint(e, x2, fresh(e, x, 16), L_X);
}

/* Backward pass of layer l: dy (16 bytes) holds d loss / d output and gets d
 * loss / d input (left unchanged for layer 0, whose input gradient nothing
 * reads); nw (6 names) gets the SGD-updated parameters. Gradients of the
 * constrained activations are constrained to the same logical axes. */
static void t_backward(ex *e, const tt *t, uint32_t l, const saved *sv, char *dy, const char *lr,
                       char (*nw)[16])
{
    char w[6][32], g[6][16];
    for (int k = 0; k < 6; k++) {
        snprintf(w[k], sizeof w[k], "layer%u.%s", l, t_pn[k]);
    }
    /* MLP: out = x1 + relu(x1 W1) W2 */
    char dr[16], drc[16], mask[16], dh[16], dx1a[16], dx1[16], dx1c[16];
    dotg(e, sv->r, dy, fresh(e, g[5], sizeof g[5]), t->p[5], DOT_WGRAD);
    dot(e, dy, w[5], fresh(e, dr, sizeof dr), t->h, 2, 1);
    constraint(e, dr, fresh(e, drc, sizeof drc), L_H);
    op(e, "stablehlo.compare", (const char *const[]){sv->r, sv->zeros}, 2,
       fresh(e, mask, sizeof mask), t->mask,
       "\"attributes\": {\"comparison_direction\": \"#stablehlo<comparison_direction GT>\"}");
    op(e, "stablehlo.select", (const char *const[]){mask, drc, sv->zeros}, 3,
       fresh(e, dh, sizeof dh), t->h, NULL);
    dotg(e, sv->x1, dh, fresh(e, g[4], sizeof g[4]), t->p[4], DOT_WGRAD);
    dot(e, dh, w[4], fresh(e, dx1a, sizeof dx1a), t->x, 2, 1);
    binary(e, "stablehlo.add", dy, dx1a, fresh(e, dx1, sizeof dx1), t->x);
    constraint(e, dx1, fresh(e, dx1c, sizeof dx1c), L_X);

    /* attention: x1 = x + merge(softmax(Q K^T) V) Wo */
    char dc3[16], dct[16], dctx[16], dp[16], dvt[16], pdp[16], sm[16], smb[16], dd[16], ds[16],
        dqt[16], dkt[16], d4[3][16], d3[3][16];
    dotg(e, sv->c3, dx1c, fresh(e, g[3], sizeof g[3]), t->p[3], DOT_WGRAD);
    dot(e, dx1c, w[3], fresh(e, dc3, sizeof dc3), t->x, 2, 1);
    op(e, "stablehlo.reshape", (const char *const[]){dc3}, 1, fresh(e, dct, sizeof dct), t->bshe,
       NULL);
    op(e, "stablehlo.transpose", (const char *const[]){dct}, 1, fresh(e, dctx, sizeof dctx),
       t->bhse, "\"attributes\": {\"permutation\": [0, 2, 1, 3]}");
    dotg(e, dctx, sv->qkv[2], fresh(e, dp, sizeof dp), t->bhss, DOT_DP);
    dotg(e, sv->p, dctx, fresh(e, dvt, sizeof dvt), t->bhse, DOT_DV);
    /* softmax: ds = p * (dp - sum_T(p * dp)) */
    binary(e, "stablehlo.multiply", sv->p, dp, fresh(e, pdp, sizeof pdp), t->bhss);
    reduce_sum(e, pdp, sm, t->bhs, "[3]");
    bcast(e, sm, fresh(e, smb, sizeof smb), t->bhss, "[0, 1, 2]");
    binary(e, "stablehlo.subtract", dp, smb, fresh(e, dd, sizeof dd), t->bhss);
    binary(e, "stablehlo.multiply", sv->p, dd, fresh(e, ds, sizeof ds), t->bhss);
    dotg(e, ds, sv->qkv[1], fresh(e, dqt, sizeof dqt), t->bhse, DOT_DQ);
    dotg(e, ds, sv->qkv[0], fresh(e, dkt, sizeof dkt), t->bhse, DOT_DK);
    const char *dt[3] = {dqt, dkt, dvt};
    for (int k = 0; k < 3; k++) {
        /* [B,H,S,E] -> [B,S,H,E] -> [B,S,D], then the projection's gradients */
        op(e, "stablehlo.transpose", (const char *const[]){dt[k]}, 1, fresh(e, d4[k], sizeof d4[k]),
           t->bshe, "\"attributes\": {\"permutation\": [0, 2, 1, 3]}");
        op(e, "stablehlo.reshape", (const char *const[]){d4[k]}, 1, fresh(e, d3[k], sizeof d3[k]),
           t->x, NULL);
        dotg(e, sv->x, d3[k], fresh(e, g[k], sizeof g[k]), t->p[k], DOT_WGRAD);
    }
    if (l > 0) {
        char dxk[3][16], s1[16], s2[16], dx[16];
        for (int k = 0; k < 3; k++) {
            dot(e, d3[k], w[k], fresh(e, dxk[k], sizeof dxk[k]), t->x, 2, 1);
        }
        binary(e, "stablehlo.add", dxk[0], dxk[1], fresh(e, s1, sizeof s1), t->x);
        binary(e, "stablehlo.add", s1, dxk[2], fresh(e, s2, sizeof s2), t->x);
        binary(e, "stablehlo.add", dx1c, s2, fresh(e, dx, sizeof dx), t->x);
        constraint(e, dx, fresh(e, dy, 16), L_X);
    }
    for (int k = 0; k < 6; k++) {
        sgd(e, w[k], g[k], lr, fresh(e, nw[k], 16), t->p[k]);
    }
}

static void transformer(ex *e)
{
    const sp_example_opts *o = e->o;
    int64_t b = o->batch, s = o->seq, d = o->d_model, h = o->heads, hd = d / h, f = 4 * d;
    tt t;
    tensor(t.x, sizeof t.x, (int64_t[]){b, s, d}, 3);
    tensor(t.bshe, sizeof t.bshe, (int64_t[]){b, s, h, hd}, 4);
    tensor(t.bhss, sizeof t.bhss, (int64_t[]){b, h, s, s}, 4);
    tensor(t.bhse, sizeof t.bhse, (int64_t[]){b, h, s, hd}, 4);
    tensor(t.bhs, sizeof t.bhs, (int64_t[]){b, h, s}, 3);
    tensor(t.h, sizeof t.h, (int64_t[]){b, s, f}, 3);
    snprintf(t.mask, sizeof t.mask, "tensor<%lldx%lldx%lldxi1>", (long long)b, (long long)s,
             (long long)f);
    for (int k = 0; k < 4; k++) {
        tensor(t.p[k], sizeof t.p[k], (int64_t[]){d, d}, 2);
    }
    tensor(t.p[4], sizeof t.p[4], (int64_t[]){d, f}, 2);
    tensor(t.p[5], sizeof t.p[5], (int64_t[]){f, d}, 2);
    header(e, o->train ? "jit_train_step" : "jit_apply_fn");
    cm_buf_puts(e->b, " \"inputs\": [");
    char nm[64];
    for (uint32_t l = 0; l < o->layers; l++) {
        for (int k = 0; k < 6; k++) {
            snprintf(nm, sizeof nm, "layer%u.%s", l, t_pn[k]);
            input(e, l == 0 && k == 0, nm, t.p[k], t_pl[k]);
        }
    }
    input(e, false, "x", t.x, L_X);
    cm_buf_puts(e->b, "],\n \"ops\": [");
    saved *sv = NULL;
    char(*nw)[6][16] = NULL;
    if (o->train) {
        sv = cm_calloc(o->layers, sizeof *sv);
        nw = cm_calloc(o->layers, sizeof *nw);
        if (sv == NULL || nw == NULL) {
            e->b->oom = true;
            goto out;
        }
    }
    char x[16] = "x";
    for (uint32_t l = 0; l < o->layers; l++) {
        t_forward(e, &t, l, x, sv != NULL ? &sv[l] : NULL);
    }
    if (!o->train) {
        cm_buf_printf(e->b, "],\n \"outputs\": [{\"value\": \"%s\", \"logical_axes\": " L_X "}]}\n",
                      x);
        goto out;
    }
    char loss[16], lr[16], dy[16];
    half_sum_squares(e, x, t.x, "[0, 1, 2]", loss);
    scalar(e, fresh(e, lr, sizeof lr), "1.000000e-03");
    strcpy(dy, x);
    for (uint32_t l = o->layers; l-- > 0;) {
        t_backward(e, &t, l, &sv[l], dy, lr, nw[l]);
    }
    cm_buf_printf(e->b, "],\n \"outputs\": [\"%s\"", loss);
    for (uint32_t l = 0; l < o->layers; l++) {
        for (int k = 0; k < 6; k++) {
            cm_buf_printf(e->b, ",\n  {\"value\": \"%s\", \"logical_axes\": %s}", nw[l][k],
                          t_pl[k]);
        }
    }
    cm_buf_puts(e->b, "]}\n");
out:
    cm_free(sv);
    cm_free(nw);
}

cm_status sp_example_graph_json(const sp_example_opts *o, cm_buf *out, cm_error *err)
{
    if (o->layers < 1 || o->layers > 100000) {
        return cm_error_set(err, CM_EINVAL, "/layers", "must be in [1, 100000]");
    }
    const int64_t lim = (int64_t)1 << 20;
    if (o->d_model < 1 || o->d_model > lim || o->batch < 1 || o->batch > lim || o->heads < 1 ||
        o->heads > o->d_model || o->seq < 1 || o->seq > lim) {
        return cm_error_set(err, CM_EINVAL, o->d_model < 1 || o->d_model > lim ? "/d_model"
                                            : o->batch < 1 || o->batch > lim   ? "/batch"
                                            : o->seq < 1 || o->seq > lim       ? "/seq"
                                                                               : "/heads",
                            "out of range (sizes in [1, 2^20], heads <= d_model)");
    }
    if (o->model == SP_EXAMPLE_TRANSFORMER && o->d_model % o->heads != 0) {
        return cm_error_set(err, CM_EINVAL, "/heads", "d_model %lld is not a multiple of %lld",
                            (long long)o->d_model, (long long)o->heads);
    }
    bool need_data = o->strategy != SP_EXAMPLE_TP, need_model = o->strategy >= SP_EXAMPLE_TP;
    for (uint32_t i = 0; i < o->n_axes; i++) {
        need_data = need_data && strcmp(o->axis_names[i], "data") != 0;
        need_model = need_model && strcmp(o->axis_names[i], "model") != 0;
    }
    if (need_data || need_model) {
        return cm_error_set(err, CM_EINVAL, "/mesh", "strategy %s needs a mesh axis named \"%s\"",
                            strategy_names[o->strategy], need_data ? "data" : "model");
    }
    ex e = {out, o, 0, 0};
    if (o->model == SP_EXAMPLE_MLP) {
        mlp(&e);
    } else {
        transformer(&e);
    }
    return out->oom ? cm_error_oom(err) : CM_OK;
}

const char *sp_example_strategy_name(sp_example_strategy s)
{
    return (unsigned)s <= SP_EXAMPLE_DP_TP ? strategy_names[s] : "?";
}

bool sp_example_strategy_parse(const char *name, sp_example_strategy *out)
{
    for (int k = 0; k <= SP_EXAMPLE_DP_TP; k++) {
        if (strcmp(name, strategy_names[k]) == 0) {
            *out = (sp_example_strategy)k;
            return true;
        }
    }
    return false;
}

cm_status sp_example_mlir(const sp_example_opts *o, cm_buf *out, cm_error *err)
{
    cm_buf json;
    cm_buf_init(&json);
    cm_status st = sp_example_graph_json(o, &json, err);
    sp_graph *g = NULL;
    if (st == CM_OK) {
        st = sp_graph_decode(json.data, json.len, NULL, &g, err);
    }
    if (st == CM_OK) {
        sp_print_opts po = {false, false};
        sp_mlir_print(sp_graph_module(g), &po, out);
        if (out->oom) {
            st = cm_error_oom(err);
        }
    }
    sp_graph_destroy(g);
    cm_buf_fini(&json);
    return st;
}
