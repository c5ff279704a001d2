/* SPDX-License-Identifier: Apache-2.0
 * planner: model templates (see sp_example.h). The graph document is written
 * as text straight into a cm_buf; `--format mlir` decodes it with the graph
 * reader and prints the module, so both outputs describe the same IR. */
#include "sp_example.h"

#include <stdlib.h>
#include <string.h>

#include "sp_graph_json.h"
#include "sp_ir.h"

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
    /* loss = sum(y * y) / 2, so dloss/dy = y */
    char sq[16], zero[16], loss[16], lr[16];
    op(e, "stablehlo.multiply", (const char *const[]){x, x}, 2, fresh(e, sq, sizeof sq), t_x, NULL);
    op(e, "stablehlo.constant", NULL, 0, fresh(e, zero, sizeof zero), "tensor<f32>",
       "\"attributes\": {\"value\": \"dense<0.000000e+00> : tensor<f32>\"}");
    op(e, "stablehlo.reduce", (const char *const[]){sq, zero}, 2, fresh(e, loss, sizeof loss),
       "tensor<f32>",
       "\"attributes\": {\"dimensions\": [0, 1]}, \"regions\": [{\"args\": [{\"name\": \"a\", "
       "\"type\": \"tensor<f32>\"}, {\"name\": \"b\", \"type\": \"tensor<f32>\"}], \"ops\": [{\"op\":"
       " \"stablehlo.add\", \"operands\": [\"a\", \"b\"], \"result\": \"s\", \"type\": "
       "\"tensor<f32>\"}, {\"op\": \"stablehlo.return\", \"operands\": [\"s\"]}]}]");
    op(e, "stablehlo.constant", NULL, 0, fresh(e, lr, sizeof lr), "tensor<f32>",
       "\"attributes\": {\"value\": \"dense<1.000000e-03> : tensor<f32>\"}");
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
            const char *t = k == 0 ? t_w1 : t_w2;
            char lb[16], step[16];
            op(e, "stablehlo.broadcast_in_dim", (const char *const[]){lr}, 1,
               fresh(e, lb, sizeof lb), t, "\"attributes\": {\"broadcast_dimensions\": []}");
            op(e, "stablehlo.multiply", (const char *const[]){lb, g}, 2,
               fresh(e, step, sizeof step), t, NULL);
            op(e, "stablehlo.subtract", (const char *const[]){w, step}, 2,
               fresh(e, nw[l][k], sizeof nw[l][k]), t, NULL);
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

/* ---- transformer (forward) ------------------------------------------------------------- */

static void transformer(ex *e)
{
    const sp_example_opts *o = e->o;
    int64_t b = o->batch, s = o->seq, d = o->d_model, h = o->heads, hd = d / h, f = 4 * d;
    char t_x[64], t_4[64], t_att[64], t_ctx[64], t_ct[64], t_dd[64], t_df[64], t_fd[64],
        t_h[64];
    tensor(t_x, sizeof t_x, (int64_t[]){b, s, d}, 3);
    tensor(t_4, sizeof t_4, (int64_t[]){b, s, h, hd}, 4);
    tensor(t_att, sizeof t_att, (int64_t[]){b, h, s, s}, 4);
    tensor(t_ctx, sizeof t_ctx, (int64_t[]){b, h, s, hd}, 4);
    tensor(t_ct, sizeof t_ct, (int64_t[]){b, s, h, hd}, 4);
    tensor(t_dd, sizeof t_dd, (int64_t[]){d, d}, 2);
    tensor(t_df, sizeof t_df, (int64_t[]){d, f}, 2);
    tensor(t_fd, sizeof t_fd, (int64_t[]){f, d}, 2);
    tensor(t_h, sizeof t_h, (int64_t[]){b, s, f}, 3);
    header(e, "jit_apply_fn");
    cm_buf_puts(e->b, " \"inputs\": [");
    static const char *const pn[6] = {"Wq", "Wk", "Wv", "Wo", "W1", "W2"};
    static const char *const pl[6] = {"[\"embed\", \"heads\"]", "[\"embed\", \"heads\"]",
                                      "[\"embed\", \"heads\"]", "[\"heads\", \"embed\"]",
                                      "[\"embed\", \"mlp\"]",   "[\"mlp\", \"embed\"]"};
    const char *pt[6] = {t_dd, t_dd, t_dd, t_dd, t_df, t_fd};
    char nm[64];
    for (uint32_t l = 0; l < o->layers; l++) {
        for (int k = 0; k < 6; k++) {
            snprintf(nm, sizeof nm, "layer%u.%s", l, pn[k]);
            input(e, l == 0 && k == 0, nm, pt[k], pl[k]);
        }
    }
    input(e, false, "x", t_x, "[\"batch\", \"seq\", \"embed\"]");
    cm_buf_puts(e->b, "],\n \"ops\": [");
    char x[16] = "x";
    for (uint32_t l = 0; l < o->layers; l++) {
        char w[6][32], p3[3][16], p4[3][16];
        for (int k = 0; k < 6; k++) {
            snprintf(w[k], sizeof w[k], "layer%u.%s", l, pn[k]);
        }
        for (int k = 0; k < 3; k++) {
            dot(e, x, w[k], fresh(e, p3[k], sizeof p3[k]), t_x, 2, 0);
            op(e, "stablehlo.reshape", (const char *const[]){p3[k]}, 1,
               fresh(e, p4[k], sizeof p4[k]), t_4, NULL);
        }
        char sc[16], pr[16], ctx[16], ct[16], c3[16], a[16], x1[16], x1c[16], hh[16], r[16],
            rc[16], mo[16], x2[16];
        op(e, "stablehlo.dot_general", (const char *const[]){p4[0], p4[1]}, 2,
           fresh(e, sc, sizeof sc), t_att,
           "\"attributes\": {\"dot_dimension_numbers\": {\"lhs_batching_dimensions\": [0, 2], "
           "\"rhs_batching_dimensions\": [0, 2], \"lhs_contracting_dimensions\": [3], "
           "\"rhs_contracting_dimensions\": [3]}}");
        op(e, "stablehlo.exponential", (const char *const[]){sc}, 1, fresh(e, pr, sizeof pr),
           t_att, NULL);
        op(e, "stablehlo.dot_general", (const char *const[]){pr, p4[2]}, 2,
           fresh(e, ctx, sizeof ctx), t_ctx,
           "\"attributes\": {\"dot_dimension_numbers\": {\"lhs_batching_dimensions\": [0, 1], "
           "\"rhs_batching_dimensions\": [0, 2], \"lhs_contracting_dimensions\": [3], "
           "\"rhs_contracting_dimensions\": [1]}}");
        op(e, "stablehlo.transpose", (const char *const[]){ctx}, 1, fresh(e, ct, sizeof ct), t_ct,
           "\"attributes\": {\"permutation\": [0, 2, 1, 3]}");
        op(e, "stablehlo.reshape", (const char *const[]){ct}, 1, fresh(e, c3, sizeof c3), t_x,
           NULL);
        dot(e, c3, w[3], fresh(e, a, sizeof a), t_x, 2, 0);
        op(e, "stablehlo.add", (const char *const[]){x, a}, 2, fresh(e, x1, sizeof x1), t_x, NULL);
        constraint(e, x1, fresh(e, x1c, sizeof x1c), "[\"batch\", \"seq\", \"embed\"]");
        dot(e, x1c, w[4], fresh(e, hh, sizeof hh), t_h, 2, 0);
        relu(e, hh, fresh(e, r, sizeof r), t_h, 3, NULL);
        constraint(e, r, fresh(e, rc, sizeof rc), "[\"batch\", \"seq\", \"mlp\"]");
        dot(e, rc, w[5], fresh(e, mo, sizeof mo), t_x, 2, 0);
        op(e, "stablehlo.add", (const char *const[]){x1c, mo}, 2, fresh(e, x2, sizeof x2), t_x,
           NULL);
        constraint(e, x2, fresh(e, x, sizeof x), "[\"batch\", \"seq\", \"embed\"]");
    }
    cm_buf_printf(e->b,
                  "],\n \"outputs\": [{\"value\": \"%s\", \"logical_axes\": [\"batch\", \"seq\", "
                  "\"embed\"]}]}\n",
                  x);
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
    if (o->model == SP_EXAMPLE_TRANSFORMER && o->train) {
        return cm_error_set(err, CM_EINVAL, "/train",
                            "--train is implemented for the mlp template only");
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
    return out->oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory") : CM_OK;
}

/* ---- `shardplan example` -------------------------------------------------------------------- */

static bool parse_mesh(const char *s, sp_example_opts *o)
{
    o->n_axes = 0;
    while (*s != '\0') {
        const char *eq = strchr(s, '=');
        if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof o->axis_names[0] ||
            o->n_axes >= SP_EXAMPLE_MAX_AXES) {
            return false;
        }
        char *end;
        long long v = strtoll(eq + 1, &end, 10);
        if (end == eq + 1 || v < 1 || v > 65536 || (*end != ',' && *end != '\0')) {
            return false;
        }
        memcpy(o->axis_names[o->n_axes], s, (size_t)(eq - s));
        o->axis_names[o->n_axes][eq - s] = '\0';
        o->axis_sizes[o->n_axes++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    return o->n_axes > 0;
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

int sp_example_main(int argc, char **argv, FILE *out, FILE *errs)
{
    sp_example_opts o;
    sp_example_opts_init(&o);
    const char *format = "json";
    bool have_model = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        bool ok = true;
        if (strcmp(a, "mlp") == 0 || strcmp(a, "transformer") == 0) {
            o.model = a[0] == 'm' ? SP_EXAMPLE_MLP : SP_EXAMPLE_TRANSFORMER;
            have_model = true;
            continue;
        }
        if (strcmp(a, "--train") == 0) {
            o.train = true;
            continue;
        }
        if (v == NULL) {
            ok = false;
        } else if (strcmp(a, "--layers") == 0) {
            ok = parse_i64(v, &n) && n >= 1 && n <= 100000;
            o.layers = (uint32_t)(ok ? n : 1);
        } else if (strcmp(a, "--d-model") == 0) {
            ok = parse_i64(v, &o.d_model);
        } else if (strcmp(a, "--heads") == 0) {
            ok = parse_i64(v, &o.heads);
        } else if (strcmp(a, "--seq") == 0) {
            ok = parse_i64(v, &o.seq);
        } else if (strcmp(a, "--batch") == 0) {
            ok = parse_i64(v, &o.batch);
        } else if (strcmp(a, "--mesh") == 0) {
            ok = parse_mesh(v, &o);
        } else if (strcmp(a, "--format") == 0) {
            format = v;
            ok = strcmp(v, "json") == 0 || strcmp(v, "mlir") == 0;
        } else if (strcmp(a, "--strategy") == 0) {
            ok = false;
            for (int k = 0; k < 4; k++) {
                if (strcmp(v, strategy_names[k]) == 0) {
                    o.strategy = (sp_example_strategy)k;
                    ok = true;
                }
            }
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(errs, "shardplan example: bad option '%s%s%s'\n", a, v != NULL ? " " : "",
                    v != NULL ? v : "");
            have_model = false;
            break;
        }
        i++;
    }
    if (!have_model) {
        fprintf(errs, "usage: shardplan example mlp|transformer [--layers N --d-model D --heads H "
                      "--seq S --batch B --mesh data=2,model=4 --strategy dp|fsdp|tp|dp+tp] "
                      "[--train] [--format json|mlir]\n");
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    cm_buf b;
    cm_buf_init(&b);
    cm_status st = sp_example_graph_json(&o, &b, &err);
    if (st == CM_OK && strcmp(format, "mlir") == 0) {
        sp_graph *g = NULL;
        st = sp_graph_decode(b.data, b.len, NULL, &g, &err);
        if (st == CM_OK) {
            cm_buf_reset(&b);
            sp_print_opts po = {false, false};
            sp_mlir_print(sp_graph_module(g), &po, &b);
            sp_graph_destroy(g);
            if (b.oom) {
                st = cm_error_set(&err, CM_ENOMEM, NULL, "out of memory");
            }
        }
    }
    int rc = 0;
    if (st != CM_OK) {
        fprintf(errs, "shardplan example: %s%s%s: %s\n", cm_status_name(st),
                err.path[0] != '\0' ? " at " : "", err.path, err.msg);
        rc = 1;
    } else if (fwrite(b.data, 1, b.len, out) != b.len) {
        rc = 1;
    }
    cm_buf_fini(&b);
    return rc;
}
