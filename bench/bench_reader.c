/* SPDX-License-Identifier: Apache-2.0
 * Throughput of the MLIR reader and printer on one core. Generates in memory
 * a transformer-like StableHLO module with sdy shardings (about 200k ops by
 * default: dot_general, add, multiply, broadcast_in_dim, reshape, transpose,
 * reduce with bodies, constants, sharding constraints, sharded arguments; a
 * quarter of the layers in generic form), then times sp_mlir_read and
 * sp_mlir_print (median of 5 runs each) against a memchr scan and a memcpy
 * of the same bytes measured in the same run. The target is
 * 100 MB/s (1 MB = 10^6 bytes) for reading and for printing.
 * Usage: bench_reader [OPS] [--dump FILE]   FILE gets the generated text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_mlir.h"

#define RUNS          5
#define TARGET_MBS    100.0
#define DEFAULT_OPS   200000u
#define LAYERS_PER_FN 8u

/* Model shape: batch, sequence, model width, heads, head width, MLP width. */
#define T_X    "tensor<8x128x512xf32>"
#define T_BS   "tensor<8x128xf32>"
#define T_BSHE "tensor<8x128x8x64xf32>"
#define T_BHSE "tensor<8x8x128x64xf32>"
#define T_BHES "tensor<8x8x64x128xf32>"
#define T_BHSS "tensor<8x8x128x128xf32>"
#define T_BHS  "tensor<8x8x128xf32>"
#define T_BSF  "tensor<8x128x2048xf32>"
#define T_DD   "tensor<512x512xf32>"
#define T_DF   "tensor<512x2048xf32>"
#define T_FD   "tensor<2048x512xf32>"
#define T_D    "tensor<512xf32>"
#define T_S    "tensor<f32>"

/* An SSA name such as "%12", "%cst_3" or "%arg5". */
typedef struct val {
    char s[24];
} val;

typedef struct gen {
    cm_buf *b;
    unsigned next;   /* next %N in the current function */
    unsigned n_cst;  /* named constants so far in the current function */
    unsigned n_args; /* %argN names used so far in the current function */
    size_t n_ops;    /* ops written, nested ones and terminators included */
    bool generic;    /* write the current layer in generic form */
} gen;

static val num_val(unsigned n)
{
    val v;
    snprintf(v.s, sizeof v.s, "%%%u", n);
    return v;
}

static val arg_val(unsigned n)
{
    val v;
    snprintf(v.s, sizeof v.s, "%%arg%u", n);
    return v;
}

static val new_val(gen *g)
{
    return num_val(g->next++);
}

static val new_cst(gen *g)
{
    val v;
    if (g->n_cst == 0) {
        snprintf(v.s, sizeof v.s, "%%cst");
    } else {
        snprintf(v.s, sizeof v.s, "%%cst_%u", g->n_cst - 1);
    }
    g->n_cst++;
    return v;
}

static val constant(gen *g, const char *lit)
{
    val r = new_cst(g);
    if (g->generic) {
        cm_buf_printf(g->b,
                      "    %s = \"stablehlo.constant\"() {value = dense<%s> : " T_S "} : () -> " T_S
                      "\n",
                      r.s, lit);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.constant dense<%s> : " T_S "\n", r.s, lit);
    }
    g->n_ops++;
    return r;
}

/* Elementwise binary op on operands of type t. */
static val binary(gen *g, const char *op, val a, val b, const char *t)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(g->b, "    %s = \"stablehlo.%s\"(%s, %s) : (%s, %s) -> %s\n", r.s, op, a.s,
                      b.s, t, t, t);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.%s %s, %s : %s\n", r.s, op, a.s, b.s, t);
    }
    g->n_ops++;
    return r;
}

static val unary(gen *g, const char *op, val a, const char *t)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(g->b, "    %s = \"stablehlo.%s\"(%s) : (%s) -> %s\n", r.s, op, a.s, t, t);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.%s %s : %s\n", r.s, op, a.s, t);
    }
    g->n_ops++;
    return r;
}

/* dims is the text of the dimension list without brackets, e.g. "0, 1". */
static val broadcast(gen *g, val a, const char *dims, const char *tin, const char *tout)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(g->b,
                      "    %s = \"stablehlo.broadcast_in_dim\"(%s) {broadcast_dimensions = "
                      "array<i64%s%s>} : (%s) -> %s\n",
                      r.s, a.s, dims[0] ? ": " : "", dims, tin, tout);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.broadcast_in_dim %s, dims = [%s] : (%s) -> %s\n",
                      r.s, a.s, dims, tin, tout);
    }
    g->n_ops++;
    return r;
}

static val reshape(gen *g, val a, const char *tin, const char *tout)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(g->b, "    %s = \"stablehlo.reshape\"(%s) : (%s) -> %s\n", r.s, a.s, tin,
                      tout);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.reshape %s : (%s) -> %s\n", r.s, a.s, tin, tout);
    }
    g->n_ops++;
    return r;
}

static val transpose(gen *g, val a, const char *perm, const char *tin, const char *tout)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(
            g->b,
            "    %s = \"stablehlo.transpose\"(%s) {permutation = array<i64: %s>} : (%s) -> "
            "%s\n",
            r.s, a.s, perm, tin, tout);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.transpose %s, dims = [%s] : (%s) -> %s\n", r.s, a.s,
                      perm, tin, tout);
    }
    g->n_ops++;
    return r;
}

/* dot_general; batch is "" for no batching dimensions, else e.g. "0, 1". */
static val dot(gen *g, val a, val b, const char *batch, const char *lc, const char *rc,
               const char *ta, const char *tb, const char *tout)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(g->b,
                      "    %s = \"stablehlo.dot_general\"(%s, %s) {dot_dimension_numbers = "
                      "#stablehlo.dot<",
                      r.s, a.s, b.s);
        if (batch[0]) {
            cm_buf_printf(g->b, "lhs_batching_dimensions = [%s], rhs_batching_dimensions = [%s], ",
                          batch, batch);
        }
        cm_buf_printf(g->b,
                      "lhs_contracting_dimensions = [%s], rhs_contracting_dimensions = [%s]>, "
                      "precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision "
                      "DEFAULT>]} : (%s, %s) -> %s\n",
                      lc, rc, ta, tb, tout);
    } else {
        cm_buf_printf(g->b, "    %s = stablehlo.dot_general %s, %s, ", r.s, a.s, b.s);
        if (batch[0]) {
            cm_buf_printf(g->b, "batching_dims = [%s] x [%s], ", batch, batch);
        }
        cm_buf_printf(
            g->b,
            "contracting_dims = [%s] x [%s], precision = [DEFAULT, DEFAULT] : (%s, %s) -> "
            "%s\n",
            lc, rc, ta, tb, tout);
    }
    g->n_ops++;
    return r;
}

/* Reduce with a scalar init and a one-op body (add or maximum); three ops. */
static val reduce(gen *g, val a, val init, const char *op, const char *dims, const char *tin,
                  const char *tout)
{
    val r = new_val(g);
    if (g->generic) {
        val x = arg_val(g->n_args++);
        val y = arg_val(g->n_args++);
        val s = new_val(g);
        cm_buf_printf(g->b, "    %s = \"stablehlo.reduce\"(%s, %s) ({\n", r.s, a.s, init.s);
        cm_buf_printf(g->b, "    ^bb0(%s: " T_S ", %s: " T_S "):\n", x.s, y.s);
        cm_buf_printf(g->b, "      %s = \"stablehlo.%s\"(%s, %s) : (" T_S ", " T_S ") -> " T_S "\n",
                      s.s, op, x.s, y.s);
        cm_buf_printf(g->b, "      \"stablehlo.return\"(%s) : (" T_S ") -> ()\n", s.s);
        cm_buf_printf(g->b, "    }) {dimensions = array<i64: %s>} : (%s, " T_S ") -> %s\n", dims,
                      tin, tout);
    } else {
        cm_buf_printf(
            g->b,
            "    %s = stablehlo.reduce(%s init: %s) applies stablehlo.%s across dimensions "
            "= [%s] : (%s, " T_S ") -> %s\n",
            r.s, a.s, init.s, op, dims, tin, tout);
    }
    g->n_ops += 3;
    return r;
}

/* spec is the dimension list of the sharding, e.g. [{"data"}, {}, {}]. */
static val constraint(gen *g, val a, const char *spec, const char *t)
{
    val r = new_val(g);
    if (g->generic) {
        cm_buf_printf(
            g->b,
            "    %s = \"sdy.sharding_constraint\"(%s) {sharding = #sdy.sharding<@mesh, %s>} "
            ": (%s) -> %s\n",
            r.s, a.s, spec, t, t);
    } else {
        cm_buf_printf(g->b, "    %s = sdy.sharding_constraint %s <@mesh, %s> : %s\n", r.s, a.s,
                      spec, t);
    }
    g->n_ops++;
    return r;
}

#define SH_X    "[{\"data\"}, {}, {}]"
#define SH_XM   "[{\"data\"}, {}, {\"model\"}]"
#define SH_COLS "[{}, {\"model\"}]"
#define SH_ROWS "[{\"model\"}, {}]"

/* One pre-norm transformer block. w is the first of the layer's 7 argument
 * numbers: wq, wk, wv, wo, w1, w2, gamma. */
static val layer(gen *g, val x, unsigned w)
{
    /* layer norm */
    val zero = constant(g, "0.000000e+00");
    val sum = reduce(g, x, zero, "add", "2", T_X, T_BS);
    val inv = constant(g, "1.953125e-03");
    val inv_b = broadcast(g, inv, "", T_S, T_BS);
    val mean = binary(g, "multiply", sum, inv_b, T_BS);
    val mean_b = broadcast(g, mean, "0, 1", T_BS, T_X);
    val xc = binary(g, "subtract", x, mean_b, T_X);
    val sq = binary(g, "multiply", xc, xc, T_X);
    val var = reduce(g, sq, zero, "add", "2", T_X, T_BS);
    val var_m = binary(g, "multiply", var, inv_b, T_BS);
    val eps = constant(g, "9.99999974E-6");
    val eps_b = broadcast(g, eps, "", T_S, T_BS);
    val var_e = binary(g, "add", var_m, eps_b, T_BS);
    val rs = unary(g, "rsqrt", var_e, T_BS);
    val rs_b = broadcast(g, rs, "0, 1", T_BS, T_X);
    val xn = binary(g, "multiply", xc, rs_b, T_X);
    val gam = broadcast(g, arg_val(w + 6), "2", T_D, T_X);
    val h0 = binary(g, "multiply", xn, gam, T_X);

    /* attention */
    val q = dot(g, h0, arg_val(w), "", "2", "0", T_X, T_DD, T_X);
    q = constraint(g, q, SH_XM, T_X);
    q = reshape(g, q, T_X, T_BSHE);
    q = transpose(g, q, "0, 2, 1, 3", T_BSHE, T_BHSE);
    val k = dot(g, h0, arg_val(w + 1), "", "2", "0", T_X, T_DD, T_X);
    k = reshape(g, k, T_X, T_BSHE);
    k = transpose(g, k, "0, 2, 3, 1", T_BSHE, T_BHES);
    val v = dot(g, h0, arg_val(w + 2), "", "2", "0", T_X, T_DD, T_X);
    v = reshape(g, v, T_X, T_BSHE);
    v = transpose(g, v, "0, 2, 1, 3", T_BSHE, T_BHSE);
    val sc = dot(g, q, k, "0, 1", "3", "2", T_BHSE, T_BHES, T_BHSS);
    val scale = constant(g, "1.250000e-01");
    val scale_b = broadcast(g, scale, "", T_S, T_BHSS);
    sc = binary(g, "multiply", sc, scale_b, T_BHSS);
    val ninf = constant(g, "-3.40282347E+38");
    val mx = reduce(g, sc, ninf, "maximum", "3", T_BHSS, T_BHS);
    val mx_b = broadcast(g, mx, "0, 1, 2", T_BHS, T_BHSS);
    val sh = binary(g, "subtract", sc, mx_b, T_BHSS);
    val ex = unary(g, "exponential", sh, T_BHSS);
    val den = reduce(g, ex, zero, "add", "3", T_BHSS, T_BHS);
    val den_b = broadcast(g, den, "0, 1, 2", T_BHS, T_BHSS);
    val p = binary(g, "divide", ex, den_b, T_BHSS);
    val ctx = dot(g, p, v, "0, 1", "3", "2", T_BHSS, T_BHSE, T_BHSE);
    ctx = transpose(g, ctx, "0, 2, 1, 3", T_BHSE, T_BSHE);
    ctx = reshape(g, ctx, T_BSHE, T_X);
    val o = dot(g, ctx, arg_val(w + 3), "", "2", "0", T_X, T_DD, T_X);
    o = constraint(g, o, SH_X, T_X);
    val h1 = binary(g, "add", x, o, T_X);

    /* MLP with relu */
    val f = dot(g, h1, arg_val(w + 4), "", "2", "0", T_X, T_DF, T_BSF);
    f = constraint(g, f, SH_XM, T_BSF);
    val zero_b = broadcast(g, zero, "", T_S, T_BSF);
    f = binary(g, "maximum", f, zero_b, T_BSF);
    val y = dot(g, f, arg_val(w + 5), "", "2", "0", T_BSF, T_FD, T_X);
    y = constraint(g, y, SH_X, T_X);
    return binary(g, "add", h1, y, T_X);
}

static void function(gen *g, unsigned index, unsigned first_layer, unsigned n_layers)
{
    cm_buf *b = g->b;
    static const char *const weight_types[6] = {T_DD, T_DD, T_DD, T_DD, T_DF, T_FD};
    static const char *const weight_shardings[6] = {SH_COLS, SH_COLS, SH_COLS,
                                                    SH_ROWS, SH_COLS, SH_ROWS};

    g->next = 0;
    g->n_cst = 0;
    cm_buf_printf(
        b, "  func.func @layers_%u(%%arg0: " T_X " {sdy.sharding = #sdy.sharding<@mesh, " SH_X ">}",
        index);
    for (unsigned l = 0; l < n_layers; l++) {
        for (unsigned i = 0; i < 6; i++) {
            cm_buf_printf(b, ", %%arg%u: %s {sdy.sharding = #sdy.sharding<@mesh, %s>}",
                          1 + 7 * l + i, weight_types[i], weight_shardings[i]);
        }
        cm_buf_printf(b, ", %%arg%u: " T_D, 1 + 7 * l + 6);
    }
    cm_buf_puts(b, ") -> (" T_X " {sdy.sharding = #sdy.sharding<@mesh, " SH_X ">}) {\n");
    g->n_args = 1 + 7 * n_layers;
    g->n_ops++;

    val x = arg_val(0);
    for (unsigned l = 0; l < n_layers; l++) {
        g->generic = (first_layer + l) % 4 == 3;
        x = layer(g, x, 1 + 7 * l);
    }
    cm_buf_printf(b, "    return %s : " T_X "\n  }\n", x.s);
    g->n_ops++;
}

/* Writes a module of at least target_ops ops; returns the layer count. */
static unsigned generate(cm_buf *b, size_t target_ops, unsigned *n_funcs_out, size_t *n_ops_out)
{
    gen g = {.b = b};
    unsigned n_layers = 0, n_funcs = 0;

    cm_buf_puts(b, "module @jit_bench attributes {mhlo.num_partitions = 8 : i32, "
                   "mhlo.num_replicas = 1 : i32} {\n"
                   "  sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n");
    g.n_ops = 1;
    while (g.n_ops < target_ops) {
        function(&g, n_funcs, n_layers, LAYERS_PER_FN);
        n_layers += LAYERS_PER_FN;
        n_funcs++;
    }
    cm_buf_puts(b, "}\n");
    *n_funcs_out = n_funcs;
    *n_ops_out = g.n_ops;
    return n_layers;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts t ascending (so t[0] is the fastest run) and returns the median. */
static double median(double *t, size_t n)
{
    qsort(t, n, sizeof *t, cmp_double);
    return t[n / 2];
}

/* CPU seconds of this thread: unlike wall time, not inflated when other
 * processes share the core. */
static double cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double mbs(size_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / 1e6 / seconds : 0;
}

static volatile size_t sink; /* keeps the baseline loops from being optimised out */

static double time_memchr(const char *text, size_t len)
{
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = cm_now();
        size_t lines = 0;
        const char *p = text, *end = text + len;
        while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            lines++;
            p++;
        }
        t[r] = cm_now() - t0;
        sink = lines;
    }
    return median(t, RUNS);
}

static double time_memcpy(const char *text, size_t len, char *dst)
{
    double t[RUNS];
    memset(dst, 0, len); /* fault the pages in before timing */
    for (int r = 0; r < RUNS; r++) {
        double t0 = cm_now();
        memcpy(dst, text, len);
        t[r] = cm_now() - t0;
        sink = (size_t)dst[r];
    }
    return median(t, RUNS);
}

/* Prints one line: wall-clock median and fastest run, and the median of the
 * thread's CPU time, which decides the verdict since other load on the
 * machine inflates wall time but not CPU time. */
static void report(const char *what, size_t bytes, double wall, double best, double cpu,
                   const char *vs, double base_mbs)
{
    double rate = mbs(bytes, wall);
    double cpu_rate = mbs(bytes, cpu);
    printf("%-22s wall %6.3f s %7.1f MB/s (best %.1f)  cpu %7.1f MB/s  %4.1f%% of %s  "
           "target %.0f MB/s: %s\n",
           what, wall, rate, mbs(bytes, best), cpu_rate,
           base_mbs > 0 ? 100.0 * rate / base_mbs : 0.0, vs, TARGET_MBS,
           cpu_rate >= TARGET_MBS ? "met" : "NOT MET");
}

int main(int argc, char **argv)
{
    size_t target_ops = DEFAULT_OPS;
    const char *dump = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            dump = argv[++i];
        } else if (argv[i][0] >= '1' && argv[i][0] <= '9') {
            target_ops = (size_t)strtoul(argv[i], NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_reader [OPS] [--dump FILE]\n");
            return 2;
        }
    }

    cm_buf text;
    cm_buf_init(&text);
    unsigned n_funcs = 0;
    size_t gen_ops = 0;
    unsigned n_layers = generate(&text, target_ops, &n_funcs, &gen_ops);
    if (text.oom) {
        fprintf(stderr, "bench_reader: out of memory generating the input\n");
        return 1;
    }
    if (dump != NULL) {
        FILE *f = fopen(dump, "w");
        if (f == NULL || fwrite(text.data, 1, text.len, f) != text.len || fclose(f) != 0) {
            fprintf(stderr, "bench_reader: cannot write %s\n", dump);
            return 1;
        }
    }

    printf("shardplan MLIR reader/printer benchmark: one core, median of %d runs, 1 MB = 10^6 B\n",
           RUNS);
    printf("input: %.1f MB, %u functions, %u transformer layers (1 in 4 in generic form), "
           "%zu ops\n",
           (double)text.len / 1e6, n_funcs, n_layers, gen_ops);

    /* reading */
    double t_read[RUNS], c_read[RUNS];
    sp_module *m = NULL;
    for (int r = 0; r < RUNS; r++) {
        cm_error err;
        cm_error_clear(&err);
        if (m != NULL) {
            sp_module_destroy(m);
            m = NULL;
        }
        double t0 = cm_now(), c0 = cpu_now();
        cm_status st = sp_mlir_read(text.data, text.len, 0, &m, &err);
        t_read[r] = cm_now() - t0;
        c_read[r] = cpu_now() - c0;
        if (st != CM_OK) {
            fprintf(stderr, "bench_reader: sp_mlir_read failed (%s) at %s: %s\n",
                    cm_status_name(st), err.path, err.msg);
            fprintf(stderr, "(rerun with --dump FILE to see the generated text)\n");
            return 1;
        }
    }
    double read_s = median(t_read, RUNS);
    double read_cpu = median(c_read, RUNS);

    /* printing */
    double t_print[RUNS], c_print[RUNS];
    size_t out_len = 0;
    sp_print_opts opts = {.generic = false, .debug_info = false};
    cm_buf out;
    for (int r = 0; r < RUNS; r++) {
        cm_buf_init(&out);
        double t0 = cm_now(), c0 = cpu_now();
        sp_mlir_print(m, &opts, &out);
        t_print[r] = cm_now() - t0;
        c_print[r] = cpu_now() - c0;
        if (out.oom) {
            fprintf(stderr, "bench_reader: out of memory printing\n");
            return 1;
        }
        out_len = out.len;
        if (r + 1 < RUNS) {
            cm_buf_fini(&out);
        }
    }
    double print_s = median(t_print, RUNS);
    double print_cpu = median(c_print, RUNS);

    /* baselines on the same bytes */
    char *copy = cm_alloc(text.len);
    if (copy == NULL) {
        fprintf(stderr, "bench_reader: out of memory for the memcpy baseline\n");
        return 1;
    }
    double memchr_s = time_memchr(text.data, text.len);
    double memcpy_s = time_memcpy(text.data, text.len, copy);
    cm_free(copy);
    double memchr_mbs = mbs(text.len, memchr_s);
    double memcpy_mbs = mbs(text.len, memcpy_s);

    printf("module: %u ops, %u values, %u blocks, %u distinct types\n", m->n_ops, m->n_values,
           m->n_blocks, m->n_types);
    report("read  sp_mlir_read", text.len, read_s, t_read[0], read_cpu, "memchr", memchr_mbs);
    printf("%-22s printed text: %.1f MB\n", "", (double)out_len / 1e6);
    report("print sp_mlir_print", out_len, print_s, t_print[0], print_cpu, "memcpy", memcpy_mbs);
    printf("%-22s wall %6.3f s %7.1f MB/s\n", "baseline memchr('\\n')", memchr_s, memchr_mbs);
    printf("%-22s wall %6.3f s %7.1f MB/s\n", "baseline memcpy", memcpy_s, memcpy_mbs);
    printf("ratio: memchr is %.1fx faster than reading; memcpy is %.1fx faster than printing\n",
           read_s > 0 && memchr_s > 0 ? read_s / memchr_s : 0.0,
           print_s > 0 && memcpy_s > 0 ? print_s / memcpy_s : 0.0);

    /* the printed text must read back to the same number of ops */
    sp_module *m2 = NULL;
    cm_error err2;
    cm_error_clear(&err2);
    cm_status st2 = sp_mlir_read(out.data, out.len, 0, &m2, &err2);
    int rc = 0;
    if (st2 != CM_OK) {
        printf("round trip: printed text does not read back (%s at %s: %s)\n", cm_status_name(st2),
               err2.path, err2.msg);
        rc = 1;
    } else if (m2->n_ops != m->n_ops) {
        printf("round trip: printed text reads back with %u ops instead of %u\n", m2->n_ops,
               m->n_ops);
        rc = 1;
    } else {
        printf("round trip: printed text reads back with the same %u ops\n", m2->n_ops);
    }
    printf("peak RSS: %.1f MB\n", (double)cm_peak_rss() / 1e6);

    sp_module_destroy(m2);
    sp_module_destroy(m);
    cm_buf_fini(&out);
    cm_buf_fini(&text);
    return rc;
}
