/* SPDX-License-Identifier: Apache-2.0
 * bench-json: the JSON reader (cm_json_read), the graph decoder built on it
 * and the plan writer on a generated graph of ~1M ops (a residual MLP-like
 * chain with sharding constraints), compared with jansson's load of the same
 * graph text (with JSON_REJECT_DUPLICATES, as the decoder used it) and dump
 * of the same plan document, measured in the same run. Prints MB/s and the
 * ratios against the targets (our parse at least 5x jansson's load; read +
 * write within 3x of jansson), the small-document figure (a parse of
 * examples/flax_mlp.json, us per document, ours vs jansson) and the peak RSS
 * of planning alone in a child process (target under 1.5 GiB at 1M ops).
 * BENCH_JSON_OPS overrides the op count; BENCH_JSON_SAVE=FILE also writes
 * the generated graph to FILE (to profile `shardplan plan FILE`);
 * BENCH_JSON_SMALL=FILE parses FILE instead of examples/flax_mlp.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cm.h"
#include "cm_json.h"
#include "sp_graph_json.h"
#include "sp_plan_json.h"

/* Eight ops per layer: dot, bias broadcast, add, tanh, dot, add residual,
 * multiply, sharding constraint. */
static void gen_graph(cm_buf *b, long layers)
{
    cm_buf_puts(b, "{\"format\": \"shardplan.graph/v1\", \"name\": \"bench\",\n"
                   "\"meshes\": [{\"name\": \"mesh\", \"axes\": [[\"data\", 2], [\"model\", 4]]}],\n"
                   "\"inputs\": [\n"
                   " {\"name\": \"x\", \"type\": \"tensor<64x512xf32>\", \"sharding\": [\"data\", null]},\n"
                   " {\"name\": \"w1\", \"type\": \"tensor<512x2048xf32>\", \"sharding\": [null, \"model\"]},\n"
                   " {\"name\": \"w2\", \"type\": \"tensor<2048x512xf32>\", \"sharding\": [\"model\", null]},\n"
                   " {\"name\": \"b1\", \"type\": \"tensor<2048xf32>\"}],\n\"ops\": [\n");
    const char *x = "x";
    char prev[32];
    for (long l = 0; l < layers; l++) {
        cm_buf_printf(
            b,
            "{\"op\": \"stablehlo.dot_general\", \"operands\": [\"%s\", \"w1\"], \"result\": \"h%ld\", "
            "\"type\": \"tensor<64x2048xf32>\", \"attributes\": {\"dot_dimension_numbers\": "
            "{\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}},\n"
            "{\"op\": \"stablehlo.broadcast_in_dim\", \"operands\": [\"b1\"], \"result\": \"bb%ld\", "
            "\"type\": \"tensor<64x2048xf32>\", \"attributes\": {\"broadcast_dimensions\": [1]}},\n"
            "{\"op\": \"stablehlo.add\", \"operands\": [\"h%ld\", \"bb%ld\"], \"result\": \"a%ld\", "
            "\"type\": \"tensor<64x2048xf32>\"},\n"
            "{\"op\": \"stablehlo.tanh\", \"operands\": [\"a%ld\"], \"result\": \"t%ld\", "
            "\"type\": \"tensor<64x2048xf32>\"},\n"
            "{\"op\": \"stablehlo.dot_general\", \"operands\": [\"t%ld\", \"w2\"], \"result\": \"o%ld\", "
            "\"type\": \"tensor<64x512xf32>\", \"attributes\": {\"dot_dimension_numbers\": "
            "{\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}},\n"
            "{\"op\": \"stablehlo.add\", \"operands\": [\"o%ld\", \"%s\"], \"result\": \"r%ld\", "
            "\"type\": \"tensor<64x512xf32>\"},\n"
            "{\"op\": \"stablehlo.multiply\", \"operands\": [\"r%ld\", \"r%ld\"], \"result\": \"m%ld\", "
            "\"type\": \"tensor<64x512xf32>\"},\n"
            "{\"op\": \"sdy.sharding_constraint\", \"operands\": [\"m%ld\"], \"result\": \"y%ld\", "
            "\"sharding\": [\"data\", null]}%s\n",
            x, l, l, l, l, l, l, l, l, l, l, x, l, l, l, l, l, l, l + 1 < layers ? "," : "");
        snprintf(prev, sizeof prev, "y%ld", l);
        x = prev;
    }
    cm_buf_printf(b, "],\n\"outputs\": [\"%s\"]}\n", x);
}

/* A sink that counts what the plan writer streams (as a file would take it). */
static bool count_sink(void *ctx, const char *data, size_t len)
{
    (void)data;
    *(size_t *)ctx += len;
    return true;
}

/* Decodes the graph and plans it in a child process, so that the child's
 * peak RSS is planning's alone (the figure: a 1M-op graph planned
 * under 1.5 GiB), not the bench's copies and jansson's trees. Returns the
 * child's peak RSS in bytes, or 0 when the child failed. */
static size_t plan_peak_in_child(const cm_buf *g)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        return 0;
    }
    if (pid == 0) {
        cm_error err;
        cm_error_clear(&err);
        sp_graph *gr = NULL;
        if (sp_graph_decode(g->data, g->len, NULL, &gr, &err) != CM_OK) {
            _exit(1);
        }
        sp_plan_opts o;
        sp_plan_opts_init(&o);
        o.graph = gr;
        o.custom = sp_graph_custom_rules(gr);
        /* the plan streams out as it is written, as `shardplan plan` does */
        size_t written = 0;
        cm_buf plan;
        cm_buf_init_sink(&plan, count_sink, &written);
        cm_status st = sp_plan_run(sp_graph_module(gr), &o, &plan, &err);
        if (st == CM_OK && !cm_buf_flush(&plan)) {
            st = CM_ENOMEM;
        }
        sp_graph_destroy(gr);
        cm_buf_fini(&plan);
        _exit(st == CM_OK && written > 0 ? 0 : 1);
    }
    int status = 0;
    struct rusage ru;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        getrusage(RUSAGE_CHILDREN, &ru) != 0) {
        return 0;
    }
    return (size_t)ru.ru_maxrss * 1024u;
}

/* Parses the small document text many times with ours and jansson's,
 * alternating in rounds and keeping each side's best round; prints us per
 * document. Returns false when either fails. */
static bool small_doc(const char *path)
{
    char *t = NULL;
    size_t n = 0;
    cm_error err;
    cm_error_clear(&err);
    if (cm_file_read(path, &t, &n, &err) != CM_OK) {
        fprintf(stderr, "bench-json: cannot read %s: %s\n", path, err.msg);
        return false;
    }
    /* about 0.2 s per side and round, whatever the document's size */
    long iters = (long)(40e6 / (double)(n + 1));
    iters = iters < 10 ? 10 : iters;
    double best_ours = 1e30, best_jansson = 1e30;
    size_t tree = 0;
    bool ok = true;
    for (int round = 0; round < 5 && ok; round++) {
        double t0 = cm_now();
        for (long i = 0; i < iters && ok; i++) {
            cm_json_doc *d = NULL;
            cm_json_read_error je;
            ok = cm_json_read(t, n, &d, &je) == CM_OK;
            tree = ok ? cm_json_doc_bytes(d) : 0;
            cm_json_doc_destroy(d);
        }
        double dt = (cm_now() - t0) / (double)iters;
        best_ours = dt < best_ours ? dt : best_ours;
        t0 = cm_now();
        for (long i = 0; i < iters && ok; i++) {
            json_error_t je;
            json_t *j = json_loadb(t, n, JSON_REJECT_DUPLICATES, &je);
            ok = j != NULL;
            json_decref(j);
        }
        dt = (cm_now() - t0) / (double)iters;
        best_jansson = dt < best_jansson ? dt : best_jansson;
    }
    if (ok) {
        printf("  small document %s (%.1f KB, %ld parses a round, best of 5): ours %.1f us"
               " (%.0f MB/s, tree %.1f KB), jansson %.1f us (%.0f MB/s): %.1fx (target >= 5x): %s\n",
               path, (double)n / 1e3, iters, best_ours * 1e6, (double)n / best_ours / 1e6,
               (double)tree / 1e3, best_jansson * 1e6, (double)n / best_jansson / 1e6,
               best_jansson / best_ours, best_jansson >= 5 * best_ours ? "met" : "NOT met");
    } else {
        fprintf(stderr, "bench-json: %s does not parse\n", path);
    }
    cm_free(t);
    return ok;
}

int main(void)
{
    long ops = 1000000;
    const char *env = getenv("BENCH_JSON_OPS");
    if (env != NULL && atol(env) > 0) {
        ops = atol(env);
    }
    long layers = (ops + 7) / 8;
    cm_buf g;
    cm_buf_init(&g);
    gen_graph(&g, layers);
    if (g.oom) {
        fprintf(stderr, "bench-json: out of memory generating the graph\n");
        return 1;
    }
    double mb_in = (double)g.len / 1e6;
    printf("bench-json: graph of %ld ops, %.1f MB of JSON\n", layers * 8, mb_in);
    const char *save = getenv("BENCH_JSON_SAVE");
    if (save != NULL && *save != '\0') {
        FILE *f = fopen(save, "wb");
        if (f == NULL || fwrite(g.data, 1, g.len, f) != g.len || fclose(f) != 0) {
            fprintf(stderr, "bench-json: cannot write %s\n", save);
            return 1;
        }
        printf("  graph written to %s\n", save);
    }
    size_t base_rss = cm_peak_rss();
    size_t child_rss = plan_peak_in_child(&g);
    if (child_rss == 0) {
        fprintf(stderr, "bench-json: planning in a child process failed\n");
        return 1;
    }
    /* The child starts as a copy of this process (its pages holding the
     * graph text count once touched); its peak is what one request costs. */
    printf("  planning alone (child process): peak RSS %.0f MB, %.1fx the JSON, bench before fork %.0f MB"
           " (target < 1536 MiB: %s)\n",
           (double)child_rss / 1e6, (double)child_rss / (double)g.len, (double)base_rss / 1e6,
           child_rss < 1536u * 1024u * 1024u ? "met" : "NOT met");

    const char *small = getenv("BENCH_JSON_SMALL");
    if (!small_doc(small != NULL && *small != '\0' ? small : "examples/flax_mlp.json")) {
        return 1;
    }

    /* Each side runs twice, alternating, and keeps its best time, so that
     * neither pays alone for the first touch of fresh heap pages. */
    cm_error err;
    double t_read = 1e30, t_write = 1e30, t_jload = 1e30, t_jdump = 1e30, t_parse = 1e30;
    size_t tree_bytes = 0;
    sp_plan_timing tm;
    memset(&tm, 0, sizeof tm);
    cm_buf plan;
    cm_buf_init(&plan);
    for (int round = 0; round < 2; round++) {
        json_error_t je;
        double t0 = cm_now();
        json_t *jg = json_loadb(g.data, g.len, JSON_REJECT_DUPLICATES, &je);
        double dt = cm_now() - t0;
        t_jload = dt < t_jload ? dt : t_jload;
        if (jg == NULL) {
            fprintf(stderr, "bench-json: jansson failed: %s\n", je.text);
            return 1;
        }
        json_decref(jg);

        cm_json_read_error re;
        cm_json_doc *doc = NULL;
        t0 = cm_now();
        if (cm_json_read(g.data, g.len, &doc, &re) != CM_OK) {
            fprintf(stderr, "bench-json: cm_json_read failed at %zu:%zu: %s\n", re.line, re.column,
                    re.msg);
            return 1;
        }
        dt = cm_now() - t0;
        t_parse = dt < t_parse ? dt : t_parse;
        tree_bytes = cm_json_doc_bytes(doc);
        cm_json_doc_destroy(doc);

        cm_error_clear(&err);
        t0 = cm_now();
        sp_graph *gr = NULL;
        if (sp_graph_decode(g.data, g.len, NULL, &gr, &err) != CM_OK) {
            fprintf(stderr, "bench-json: decode failed at %s: %s\n", err.path, err.msg);
            return 1;
        }
        dt = cm_now() - t0;
        t_read = dt < t_read ? dt : t_read;
        sp_plan_opts o;
        sp_plan_opts_init(&o);
        o.graph = gr;
        o.custom = sp_graph_custom_rules(gr);
        o.timing = &tm;
        cm_buf_reset(&plan);
        if (sp_plan_run(sp_graph_module(gr), &o, &plan, &err) != CM_OK) {
            fprintf(stderr, "bench-json: plan failed: %s\n", err.msg);
            return 1;
        }
        t_write = tm.write_s < t_write ? tm.write_s : t_write;
        sp_graph_destroy(gr);

        json_t *jp = json_loadb(plan.data, plan.len, 0, &je);
        if (jp == NULL) {
            fprintf(stderr, "bench-json: the plan is not JSON: %s\n", je.text);
            return 1;
        }
        t0 = cm_now();
        char *dump = json_dumps(jp, JSON_COMPACT);
        dt = cm_now() - t0;
        t_jdump = dt < t_jdump ? dt : t_jdump;
        free(dump);
        json_decref(jp);
    }
    double mb_out = (double)plan.len / 1e6;
    tm.write_s = t_write;

    double ours = t_read + tm.write_s, theirs = t_jload + t_jdump;
    printf("  parse graph   %7.3f s  %7.1f MB/s   (jansson load  %7.3f s  %7.1f MB/s): %.1fx"
           " (target >= 5x): %s; tree %.0f MB, %.1fx the JSON\n",
           t_parse, mb_in / t_parse, t_jload, mb_in / t_jload, t_jload / t_parse,
           t_jload >= 5 * t_parse ? "met" : "NOT met", (double)tree_bytes / 1e6,
           (double)tree_bytes / (double)g.len);
    printf("  read graph    %7.3f s  %7.1f MB/s   (parse and decode into the IR)\n", t_read,
           mb_in / t_read);
    printf("  write plan    %7.3f s  %7.1f MB/s   (jansson dump  %7.3f s  %7.1f MB/s), %.1f MB\n",
           tm.write_s, mb_out / tm.write_s, t_jdump, mb_out / t_jdump, mb_out);
    printf("  also: input hash %.3f s, propagation pipeline %.3f s, this bench's own peak RSS %.0f MB"
           " (with jansson's trees of the graph and the plan)\n",
           tm.hash_s,
           tm.pass_s, (double)cm_peak_rss() / 1e6);
    printf("  read+write %.3f s vs jansson %.3f s: %.2fx (target <= 3x): %s\n", ours, theirs,
           ours / theirs, ours <= 3 * theirs ? "met" : "NOT met");
    cm_buf_fini(&plan);
    cm_buf_fini(&g);
    return 0;
}
