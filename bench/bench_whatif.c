/* SPDX-License-Identifier: Apache-2.0
 * `make bench-whatif`: one "constrain" edit of the advisor's what-if
 * (planner/advise/sp_whatif.h, sp_whatif_run) on the transformer training step of
 * sp_gen (the generator of bench-propagation: attention + MLP blocks, backward
 * pass, SGD update, constraints; 16 layers per function) of ~100k ops,
 * re-propagated incrementally (only the region the edit reaches) and in
 * full. Prints both times (import passes + region + propagation + export of
 * the edited module; and the propagation alone), their ratio, the region
 * size, and whether the two propagated modules print identically.
 * Usage: bench_whatif [--ops N] [--one-function] [--forward] [--reps R] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "sp_whatif.h"
#include "sp_gen.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_mlir.h"

typedef struct best {
    double total_s, prop_s;
    sp_whatif_stats st;
    uint32_t region, ops;
    bool incremental;
} best;

static int once(const char *text, size_t len, const sp_edit_list *l, bool full, best *b,
                cm_buf *keep)
{
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    o.full = full;
    o.no_cost = true;
    o.keep_propagated = keep != NULL;
    sp_whatif *w = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_whatif_run(text, len, NULL, l, &o, &w, &err) != CM_OK) {
        fprintf(stderr, "bench_whatif: %s %s\n", err.path, err.msg);
        return 1;
    }
    const sp_whatif_stats *s = sp_whatif_get_stats(w);
    if (b->total_s == 0 || s->incremental_s < b->total_s) {
        b->total_s = s->incremental_s;
        b->prop_s = s->propagate_s;
        b->st = *s;
    }
    b->region = s->region_ops;
    b->ops = s->total_ops;
    b->incremental = s->incremental;
    if (keep != NULL) {
        size_t n;
        const char *t = sp_whatif_propagated(w, &n);
        cm_buf_append(keep, t, n);
    }
    sp_whatif_destroy(w);
    return 0;
}

int main(int argc, char **argv)
{
    sp_gen_opts go;
    sp_gen_opts_init(&go);
    size_t target = 100000; /* ops; 16 layers per function (sp_gen's default) */
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
            target = (size_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--one-function") == 0) {
            go.layers_per_func = 0;
            go.n_layers = 372; /* the most one function holds (4096 arguments) */
        } else if (strcmp(argv[i], "--forward") == 0) {
            go.backward = false;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        }
    }
    cm_error err;
    cm_error_clear(&err);
    cm_buf text;
    cm_buf_init(&text);
    sp_edit_list l;
    sp_edit_list_init(&l);
    sp_module *m = NULL;
    sp_gen_info info;
    if (sp_gen_transformer(&go, target, &m, &info, &err) != CM_OK) {
        fprintf(stderr, "bench_whatif: %s %s\n", err.path, err.msg);
        return 1;
    }
    sp_print_opts po = {false, false};
    sp_mlir_print(m, &po, &text);
    sp_module_destroy(m);
    m = NULL;
    /* the edit: the first rank-3 dot_general result in the second half of the
     * middle function that has one (/functions/F/ops/I) */
    if (sp_mlir_read(text.data, text.len, 0, &m, &err) != CM_OK) {
        fprintf(stderr, "bench_whatif: %s %s\n", err.path, err.msg);
        return 1;
    }
    const sp_block *body = &m->blocks[m->body];
    uint32_t funcs[4096], n_funcs = 0;
    for (uint32_t i = 0; i < body->n_ops && n_funcs < 4096; i++) {
        if (m->ops[body->ops[i]].kind == SP_OP_FUNC_FUNC) {
            funcs[n_funcs++] = body->ops[i];
        }
    }
    uint32_t at = SP_NONE, at_f = 0;
    for (uint32_t k = 0; k < n_funcs && at == SP_NONE; k++) {
        at_f = (n_funcs / 2 + k) % n_funcs;
        const sp_block *blk = &m->blocks[m->ops[funcs[at_f]].regions[0].blocks[0]];
        for (uint32_t i = blk->n_ops / 2; i < blk->n_ops && at == SP_NONE; i++) {
            const sp_op *op = &m->ops[blk->ops[i]];
            if (op->kind == SP_OP_DOT_GENERAL && sp_value_type(m, op->first_result)->rank == 3) {
                at = i;
            }
        }
    }
    sp_module_destroy(m);
    if (at == SP_NONE) {
        fprintf(stderr, "bench_whatif: no rank-3 dot_general\n");
        return 1;
    }
    char edit[256];
    snprintf(edit, sizeof edit,
             "{\"kind\":\"constrain\",\"value\":{\"op\":\"/functions/%u/ops/%u\"},"
             "\"sharding\":\"<@mesh, [{\\\"data\\\"}, {}, {\\\"model\\\"}]>\"}",
             at_f, at);
    if (sp_edit_list_decode(&l, edit, strlen(edit), &err) != CM_OK) {
        fprintf(stderr, "bench_whatif: %s %s\n", err.path, err.msg);
        return 1;
    }
    best inc = {0}, full = {0};
    cm_buf a, b;
    cm_buf_init(&a);
    cm_buf_init(&b);
    for (int r = 0; r < reps; r++) {
        if (once(text.data, text.len, &l, false, &inc, r == 0 ? &a : NULL) != 0 ||
            once(text.data, text.len, &l, true, &full, r == 0 ? &b : NULL) != 0) {
            return 1;
        }
    }
    bool same = a.len == b.len && !a.oom && !b.oom && memcmp(a.data, b.data, a.len) == 0;
    printf("whatif: generated transformer %s (sp_gen), %u layers, %u ops, %u function(s);\n"
           "  edit: constrain /functions/%u/ops/%u <@mesh, [{\"data\"}, {}, {\"model\"}]> "
           "(best of %d)\n",
           go.backward ? "training step" : "forward pass", info.n_layers, full.ops, info.n_funcs,
           at_f, at, reps);
    printf("  region: %u of %u ops (%.3f%%)%s\n", inc.region, inc.ops,
           inc.ops > 0 ? 100.0 * inc.region / inc.ops : 0.0,
           inc.incremental ? "" : " (FULL: not incremental)");
    printf("  incremental: %.4f s = import %.4f + region %.4f + propagation %.4f + copy %.4f + "
           "export %.4f\n",
           inc.total_s, inc.st.import_s, inc.st.region_s, inc.prop_s, inc.st.copy_s,
           inc.st.export_s);
    printf("  full:        %.4f s = import %.4f + propagation %.4f + export %.4f\n", full.total_s,
           full.st.import_s, full.prop_s, full.st.export_s);
    printf("  ratio full/incremental: %.1fx (propagation alone %.1fx)\n",
           inc.total_s > 0 ? full.total_s / inc.total_s : 0.0,
           inc.prop_s > 0 ? full.prop_s / inc.prop_s : 0.0);
    printf("  propagated modules identical: %s\n", same ? "yes" : "NO");
    cm_buf_fini(&a);
    cm_buf_fini(&b);
    cm_buf_fini(&text);
    sp_edit_list_fini(&l);
    return same ? 0 : 1;
}
