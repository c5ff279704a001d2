/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/advise/sp_suggest (sp_suggest.h): on an MLP whose
 * big weights are left unannotated on a data x model mesh, suggestions
 * exist and every suggestion's predicted figures are those of an
 * independent lint run (sp_advise_run: read, propagate, partition, cost) of
 * the input with its constraints written into the MLIR text by this file;
 * the memory objective lowers the peak; a module already sharded over every
 * device gets no suggestion; JSON follows the advisor contract; bad options
 * and bad input are errors with a path; --check measures with the executor;
 * OOM. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "cmd.h"
#include "sp_lint.h"
#include "sp_suggest.h"
#include "sp_example.h"
#include "sp_input.h"
#include "sp_plan_json.h"
#include "tu_oom.h"

/* Two layers, weights without a sharding, x sharded on data. */
static const char mlp[] =
    "module @mlp {\n"
    "  sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
    "  func.func @main(%arg0: tensor<1024x4096xf32>, %arg1: tensor<4096x1024xf32>, "
    "%arg2: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, {}]>}) "
    "-> tensor<64x1024xf32> {\n"
    "    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0] : "
    "(tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>\n"
    "    %1 = stablehlo.tanh %0 : tensor<64x4096xf32>\n"
    "    %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : "
    "(tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32>\n"
    "    return %2 : tensor<64x1024xf32>\n"
    "  }\n"
    "}\n";

/* Sharded over all 8 devices from the input on: nothing left to divide. */
static const char sharded[] =
    "module @full {\n"
    "  sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
    "  func.func @main(%arg0: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"data\"}, {\"model\"}]>}) -> tensor<64x1024xf32> {\n"
    "    %0 = stablehlo.add %arg0, %arg0 : tensor<64x1024xf32>\n"
    "    %1 = stablehlo.tanh %0 : tensor<64x1024xf32>\n"
    "    return %1 : tensor<64x1024xf32>\n"
    "  }\n"
    "}\n";

static sp_suggest *suggest_in(const char *text, const sp_input_opts *io, const sp_suggest_opts *o)
{
    sp_suggest *s = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_suggest_run(text, strlen(text), io, o, &s, &err);
    if (st != CM_OK) {
        fprintf(stderr, "suggest: %s %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_non_null(s);
    return s;
}

static sp_suggest *suggest(const char *text, const sp_suggest_opts *o)
{
    return suggest_in(text, NULL, o);
}

/* ---- the constraints written into the text, independently of sp_suggest ---- */

/* The last "tensor<...>" of line [p, end). */
static void last_type(const char *p, const char *end, char *out, size_t n)
{
    const char *t = NULL;
    for (const char *q = p; q + 7 <= end; q++) {
        if (strncmp(q, "tensor<", 7) == 0) {
            t = q;
        }
    }
    assert_non_null(t);
    const char *e = memchr(t, '>', (size_t)(end - t));
    assert_non_null(e);
    snprintf(out, n, "%.*s", (int)(e + 1 - t), t);
}

/* The type of %argN in the func.func line [p, end). */
static void arg_type(const char *p, const char *end, uint32_t n, char *out, size_t cap)
{
    char key[32];
    snprintf(key, sizeof key, "%%arg%u: ", n);
    const char *a = strstr(p, key);
    assert_true(a != NULL && a < end);
    a += strlen(key);
    const char *e = strchr(a, '>');
    snprintf(out, cap, "%.*s", (int)(e + 1 - a), a);
}

typedef struct renaming {
    char from[32], to[32];
} renaming;

/* Appends s[0..n) with every whole SSA name `from` replaced by `to`. */
static void put_renamed(cm_buf *b, const char *s, size_t n, const renaming *r, uint32_t nr)
{
    for (size_t i = 0; i < n;) {
        bool done = false;
        for (uint32_t k = 0; k < nr && !done; k++) {
            size_t l = strlen(r[k].from);
            char next = i + l < n ? s[i + l] : '\0';
            if (i + l <= n && strncmp(s + i, r[k].from, l) == 0 && next != '_' &&
                !(next >= '0' && next <= '9') && !(next >= 'a' && next <= 'z')) {
                cm_buf_puts(b, r[k].to);
                i += l;
                done = true;
            }
        }
        if (!done) {
            cm_buf_putc(b, s[i++]);
        }
    }
}

/* The input module with s's edits written into its text: after the line
 * defining each edited value (the func.func line for an argument), a line
 * `%sugK = sdy.sharding_constraint NAME SHARDING : TYPE`, and NAME renamed
 * to %sugK in the operands of the lines after it. Top-level op I is the I-th
 * line after the func.func line. */
static void apply_text(const char *text, const sp_suggestion *s, cm_buf *out)
{
    renaming ren[8];
    uint32_t nr = 0;
    int line_of[8]; /* -1: an argument */
    uint32_t arg_of[8];
    for (uint32_t k = 0; k < s->n_edits; k++) {
        json_error_t je;
        json_t *v = json_loads(s->edits[k].value, 0, &je);
        assert_non_null(v);
        if (json_object_get(v, "input") != NULL) {
            line_of[k] = -1;
            arg_of[k] = (uint32_t)json_integer_value(json_object_get(v, "input"));
        } else {
            const char *path = json_string_value(json_object_get(v, "op"));
            assert_non_null(path);
            assert_int_equal(strncmp(path, "/ops/", 5), 0);
            line_of[k] = atoi(path + 5);
            assert_int_equal(json_integer_value(json_object_get(v, "result")), 0);
        }
        json_decref(v);
    }
    int body = -2; /* index of the line in the function body; -1: the func.func line */
    for (const char *p = text; *p != '\0';) {
        const char *end = strchr(p, '\n');
        end = end != NULL ? end : p + strlen(p);
        const char *eq = strstr(p, " = ");
        bool is_func = strstr(p, "func.func") != NULL && strstr(p, "func.func") < end;
        if (body >= -1 && !is_func) {
            body++;
        }
        if (is_func) {
            body = -1;
        }
        /* operands: everything after " = " (or the whole line) */
        const char *rhs = body >= 0 && eq != NULL && eq < end ? eq + 3 : p;
        cm_buf_append(out, p, (size_t)(rhs - p));
        if (body >= 0) {
            put_renamed(out, rhs, (size_t)(end - rhs), ren, nr);
        } else {
            cm_buf_append(out, rhs, (size_t)(end - rhs));
        }
        cm_buf_putc(out, '\n');
        for (uint32_t k = 0; k < s->n_edits; k++) {
            char name[32], type[128];
            if (line_of[k] == -1 && is_func) {
                snprintf(name, sizeof name, "%%arg%u", arg_of[k]);
                arg_type(p, end, arg_of[k], type, sizeof type);
            } else if (line_of[k] >= 0 && line_of[k] == body) {
                const char *nm = p;
                while (*nm == ' ') {
                    nm++;
                }
                snprintf(name, sizeof name, "%.*s", (int)(eq - nm), nm);
                last_type(p, end, type, sizeof type);
            } else {
                continue;
            }
            cm_buf_printf(out, "    %%sug%u = sdy.sharding_constraint %s %s : %s\n", k, name,
                          s->edits[k].sharding, type);
            snprintf(ren[nr].from, sizeof ren[nr].from, "%s", name);
            snprintf(ren[nr].to, sizeof ren[nr].to, "%%sug%u", k);
            nr++;
        }
        p = *end == '\n' ? end + 1 : end;
    }
    assert_false(out->oom);
}

static void assert_close(double a, double b)
{
    double scale = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    if (fabs(a - b) > 1e-9 * scale) {
        fprintf(stderr, "%.17g != %.17g\n", a, b);
    }
    assert_true(fabs(a - b) <= 1e-9 * scale);
}

/* Lints text under the input options io (an independent full run) and
 * compares its cost with f. */
static void assert_figures_in(const char *text, const sp_input_opts *io,
                              const sp_suggest_figures *f)
{
    sp_advise *a = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_advise_run(text, strlen(text), io, NULL, &a, &err);
    if (st != CM_OK) {
        fprintf(stderr, "advise: %s %s\n%s", err.path, err.msg, text);
    }
    assert_int_equal(st, CM_OK);
    const sp_cost_summary *c = sp_advise_summary(a);
    assert_close(c->step_s, f->step_s);
    assert_close(c->peak_bytes, f->peak_bytes);
    assert_close(c->comm_bytes, f->comm_bytes);
    sp_advise_destroy(a);
}

static void assert_figures_of(const char *text, const sp_suggest_figures *f)
{
    assert_figures_in(text, NULL, f);
}

/* Every suggestion's predicted figures are those of the edited text, linted
 * under the same input options io. */
static void assert_all_real_in(const sp_suggest *s, const char *text, const sp_input_opts *io)
{
    assert_figures_in(text, io, sp_suggest_baseline(s));
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        const sp_suggestion *g = sp_suggest_at(s, i);
        cm_buf b;
        cm_buf_init(&b);
        apply_text(text, g, &b);
        assert_figures_in(b.data, io, &g->predicted);
        cm_buf_fini(&b);
        /* what-if's application of the contract's edits gives the same module */
        cm_buf w;
        cm_buf_init(&w);
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_suggest_apply(s, i, &w, &err), CM_OK);
        assert_figures_in(w.data, io, &g->predicted);
        cm_buf_fini(&w);
        assert_close(g->gain_step_s, sp_suggest_baseline(s)->step_s - g->predicted.step_s);
        assert_close(g->gain_peak_bytes,
                     sp_suggest_baseline(s)->peak_bytes - g->predicted.peak_bytes);
    }
}

static void assert_all_real(const sp_suggest *s, const char *text)
{
    assert_all_real_in(s, text, NULL);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_sp_suggest_run_time_gain_is_real(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.threads = 2;
    sp_suggest *s = suggest(mlp, &o);
    assert_true(sp_suggest_n(s) >= 1);
    const sp_suggestion *g = sp_suggest_at(s, 0);
    assert_int_equal(g->rank, 1);
    assert_true(g->gain_step_s > 0);
    assert_true(g->predicted.step_s < sp_suggest_baseline(s)->step_s);
    for (uint32_t i = 1; i < sp_suggest_n(s); i++) {
        assert_int_equal(sp_suggest_at(s, i)->rank, i + 1);
        assert_true(sp_suggest_at(s, i)->gain_step_s <= sp_suggest_at(s, i - 1)->gain_step_s);
        assert_true(sp_suggest_at(s, i)->gain_step_s > 0);
    }
    /* the replicated weights are what is worth sharding */
    bool weight = false;
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        for (uint32_t k = 0; k < sp_suggest_at(s, i)->n_edits; k++) {
            const sp_suggest_edit *e = &sp_suggest_at(s, i)->edits[k];
            weight = weight || strcmp(e->value, "{\"input\":0}") == 0 ||
                     strcmp(e->value, "{\"input\":1}") == 0;
            assert_non_null(strstr(e->sharding, "\"model\""));
        }
    }
    assert_true(weight);
    const sp_suggest_stats *st = sp_suggest_get_stats(s);
    assert_int_equal(st->values, 5); /* arg0, arg1 and the three op results */
    assert_true(st->evaluated >= st->candidates || st->evaluated >= o.max_candidates);
    assert_int_equal(st->failed, 0);
    assert_all_real(s, mlp);
    sp_suggest_destroy(s);
}

static void test_sp_suggest_run_memory_reduces_peak(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.objective = SP_SUGGEST_MEMORY;
    o.k = 3;
    sp_suggest *s = suggest(mlp, &o);
    assert_true(sp_suggest_n(s) >= 1 && sp_suggest_n(s) <= 3);
    const sp_suggestion *g = sp_suggest_at(s, 0);
    assert_true(g->gain_peak_bytes > 0);
    assert_true(g->predicted.peak_bytes < sp_suggest_baseline(s)->peak_bytes);
    for (uint32_t i = 1; i < sp_suggest_n(s); i++) {
        assert_true(sp_suggest_at(s, i)->gain_peak_bytes <=
                    sp_suggest_at(s, i - 1)->gain_peak_bytes);
    }
    /* both weights sharded: the greedy combination beats any single constraint */
    assert_true(g->n_edits >= 2);
    assert_all_real(s, mlp);
    sp_suggest_destroy(s);
}

/* The threads share nothing but the job counter: one thread or four, the same answer. */
static void test_sp_suggest_run_same_on_any_thread_count(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.threads = 1;
    sp_suggest *a = suggest(mlp, &o);
    o.threads = 4;
    sp_suggest *b = suggest(mlp, &o);
    assert_int_equal(sp_suggest_n(a), sp_suggest_n(b));
    for (uint32_t i = 0; i < sp_suggest_n(a); i++) {
        const sp_suggestion *x = sp_suggest_at(a, i), *y = sp_suggest_at(b, i);
        assert_string_equal(x->label, y->label);
        assert_string_equal(x->fix_shardy, y->fix_shardy);
        assert_true(x->predicted.step_s == y->predicted.step_s);
        assert_true(x->predicted.peak_bytes == y->predicted.peak_bytes);
    }
    assert_int_equal(sp_suggest_get_stats(a)->evaluated, sp_suggest_get_stats(b)->evaluated);
    sp_suggest_destroy(a);
    sp_suggest_destroy(b);
}

static void test_sp_suggest_run_single_edit_when_asked(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.objective = SP_SUGGEST_MEMORY;
    o.max_edits = 1;
    sp_suggest *s = suggest(mlp, &o);
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        assert_int_equal(sp_suggest_at(s, i)->n_edits, 1);
    }
    sp_suggest_destroy(s);
}

static void test_sp_suggest_run_nothing_helps_when_fully_sharded(void **state)
{
    (void)state;
    for (int obj = 0; obj < 2; obj++) {
        sp_suggest_opts o;
        sp_suggest_opts_init(&o);
        o.objective = obj == 0 ? SP_SUGGEST_TIME : SP_SUGGEST_MEMORY;
        sp_suggest *s = suggest(sharded, &o);
        const sp_suggest_stats *st = sp_suggest_get_stats(s);
        assert_int_equal(st->values, 2);
        assert_true(st->candidates > 0); /* there were constraints to try */
        assert_true(st->evaluated > 0);
        assert_int_equal(sp_suggest_n(s), 0);
        cm_buf b;
        cm_buf_init(&b);
        sp_suggest_write_text(s, &b);
        assert_non_null(strstr(b.data, "no constraint reduces"));
        cm_buf_fini(&b);
        sp_suggest_destroy(s);
    }
}

static void test_sp_suggest_write_json_follows_contract(void **state)
{
    (void)state;
    sp_suggest *s = suggest(mlp, NULL);
    cm_buf b;
    cm_buf_init(&b);
    sp_suggest_write_json(s, &b);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    if (j == NULL) {
        fprintf(stderr, "%s: %s\n", je.text, b.data);
    }
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "objective")), "time");
    assert_string_equal(json_string_value(json_object_get(j, "profile")), "cpu-local");
    json_t *base = json_object_get(j, "baseline");
    assert_true(json_number_value(json_object_get(base, "step_s")) > 0);
    assert_true(json_is_number(json_object_get(base, "peak_bytes")));
    assert_true(json_is_number(json_object_get(base, "comm_bytes")));
    json_t *sug = json_object_get(j, "suggestions");
    assert_int_equal(json_array_size(sug), sp_suggest_n(s));
    for (size_t i = 0; i < json_array_size(sug); i++) {
        json_t *x = json_array_get(sug, i);
        const sp_suggestion *g = sp_suggest_at(s, (uint32_t)i);
        assert_int_equal(json_integer_value(json_object_get(x, "rank")), i + 1);
        json_t *ed = json_object_get(x, "edits");
        assert_int_equal(json_array_size(ed), g->n_edits);
        json_t *e0 = json_array_get(ed, 0);
        assert_string_equal(json_string_value(json_object_get(e0, "kind")), "constrain");
        assert_string_equal(json_string_value(json_object_get(e0, "sharding")),
                            g->edits[0].sharding);
        json_t *v = json_object_get(e0, "value");
        assert_true(json_is_integer(json_object_get(v, "input")) ||
                    json_is_string(json_object_get(v, "op")));
        assert_non_null(
            strstr(json_string_value(json_object_get(json_object_get(x, "fix"), "shardy")),
                   "sdy.sharding_constraint"));
        assert_non_null(strstr(json_string_value(json_object_get(json_object_get(x, "fix"), "jax")),
                               "NamedSharding(mesh, P("));
        assert_true(json_is_string(json_object_get(x, "label")));
        assert_true(json_is_string(json_object_get(x, "op")));
        assert_true(json_is_integer(json_object_get(x, "line")));
        json_t *gain = json_object_get(x, "gain");
        assert_true(json_number_value(json_object_get(gain, "step_s")) > 0);
        assert_true(json_is_number(json_object_get(gain, "peak_bytes")));
        assert_true(json_is_number(json_object_get(json_object_get(x, "predicted"), "step_s")));
    }
    assert_int_equal(json_integer_value(json_object_get(j, "candidates")),
                     sp_suggest_get_stats(s)->candidates);
    assert_int_equal(json_integer_value(json_object_get(j, "evaluated")),
                     sp_suggest_get_stats(s)->evaluated);
    assert_true(json_is_number(json_object_get(j, "seconds")));
    json_decref(j);
    cm_buf_fini(&b);
    sp_suggest_destroy(s);
}

/* A graph document: values are named by the graph, ops by their path. */
static void test_sp_suggest_run_graph_document(void **state)
{
    (void)state;
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.layers = 1;
    eo.strategy = SP_EXAMPLE_DP;
    cm_buf g;
    cm_buf_init(&g);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_example_graph_json(&eo, &g, &err), CM_OK);
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.max_candidates = 16;
    sp_suggest *s = suggest(g.data, &o);
    assert_true(sp_suggest_get_stats(s)->values > 0);
    assert_true(sp_suggest_n(s) > 0);
    /* an op VREF's path is that op's path in the plan document */
    cm_buf plan;
    cm_buf_init(&plan);
    assert_int_equal(sp_plan_graph_json(g.data, g.len, SP_PLAN_PIPELINE, &plan, &err), CM_OK);
    json_error_t je;
    json_t *pj = json_loadb(plan.data, plan.len, 0, &je);
    assert_non_null(pj);
    json_t *ops = json_object_get(json_array_get(json_object_get(pj, "functions"), 0), "ops");
    uint32_t n_ops_seen = 0;
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        const sp_suggestion *sg = sp_suggest_at(s, i);
        json_t *v = json_loads(sg->edits[0].value, 0, &je);
        const char *path = json_string_value(json_object_get(v, "op"));
        for (size_t k = 0; path != NULL && k < json_array_size(ops); k++) {
            json_t *op = json_array_get(ops, k);
            if (strcmp(json_string_value(json_object_get(op, "path")), path) == 0) {
                assert_string_equal(json_string_value(json_object_get(op, "op")), sg->op);
                n_ops_seen++;
            }
        }
        json_decref(v);
    }
    assert_true(n_ops_seen > 0);
    json_decref(pj);
    cm_buf_fini(&plan);
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        const sp_suggest_edit *e = &sp_suggest_at(s, i)->edits[0];
        assert_true(strncmp(e->value, "{\"op\":\"/ops/", 12) == 0 ||
                    strncmp(e->value, "{\"input\":", 9) == 0);
        /* the JAX fix names the tensor by its graph name, never bare x */
        const char *jax = sp_suggest_at(s, i)->fix_jax;
        if (e->value[2] == 'o') {
            assert_true(strncmp(jax, "jax.lax.with_sharding_constraint(v", 34) == 0);
        } else {
            assert_non_null(strstr(jax, "in_shardings for "));
        }
        assert_null(strstr(jax, "(x, "));
    }
    /* the graph with the edits applied by what-if costs what was predicted */
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        cm_buf m;
        cm_buf_init(&m);
        assert_int_equal(sp_suggest_apply(s, i, &m, &err), CM_OK);
        assert_non_null(strstr(m.data, "sdy.sharding_constraint"));
        assert_figures_of(m.data, &sp_suggest_at(s, i)->predicted);
        cm_buf_fini(&m);
    }
    sp_suggest_destroy(s);
    cm_buf_fini(&g);
}

/* Several functions: op paths in the functions form, inputs of another
 * function named by "function"; what-if's application of the edits costs
 * what was predicted. */
static void test_sp_suggest_run_several_functions(void **state)
{
    (void)state;
    static const char two[] =
        "module @two {\n"
        "  sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
        "  func.func @main(%arg0: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"data\"}, {}]>}, %arg1: tensor<1024x1024xf32>) -> tensor<64x1024xf32> {\n"
        "    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>\n"
        "    return %0 : tensor<64x1024xf32>\n"
        "  }\n"
        "  func.func @other(%arg0: tensor<64x2048xf32> {sdy.sharding = #sdy.sharding<@mesh, "
        "[{\"data\"}, {}]>}, %arg1: tensor<2048x2048xf32>) -> tensor<64x2048xf32> {\n"
        "    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<64x2048xf32>, tensor<2048x2048xf32>) -> tensor<64x2048xf32>\n"
        "    %1 = stablehlo.tanh %0 : tensor<64x2048xf32>\n"
        "    return %1 : tensor<64x2048xf32>\n"
        "  }\n"
        "}\n";
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.objective = SP_SUGGEST_MEMORY;
    o.k = 10;
    sp_suggest *s = suggest(two, &o);
    assert_true(sp_suggest_n(s) >= 2);
    bool other = false, path = false;
    for (uint32_t i = 0; i < sp_suggest_n(s); i++) {
        const sp_suggestion *g = sp_suggest_at(s, i);
        for (uint32_t k = 0; k < g->n_edits; k++) {
            other = other || strstr(g->edits[k].value, "\"function\":\"other\"") != NULL;
            path = path || strncmp(g->edits[k].value, "{\"op\":\"/functions/", 17) == 0;
            assert_null(strstr(g->edits[k].value, "\"op\":\"/ops/"));
        }
        cm_buf m;
        cm_buf_init(&m);
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_suggest_apply(s, i, &m, &err), CM_OK);
        assert_figures_of(m.data, &g->predicted);
        cm_buf_fini(&m);
    }
    assert_true(other);
    assert_true(path);
    sp_suggest_destroy(s);
}

static void test_sp_suggest_run_rejects_bad_options(void **state)
{
    (void)state;
    static const struct {
        int field;
        uint32_t value;
        const char *path;
    } bad[] = {{0, 0, "/k"},         {0, 101, "/k"},       {1, 0, "/max_candidates"},
               {2, 0, "/max_edits"}, {2, 9, "/max_edits"}, {3, 7, "/objective"},
               {4, 65, "/threads"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sp_suggest_opts o;
        sp_suggest_opts_init(&o);
        uint32_t *f[] = {&o.k, &o.max_candidates, &o.max_edits, NULL, &o.threads};
        if (bad[i].field == 3) {
            o.objective = (sp_suggest_objective)bad[i].value;
        } else {
            *f[bad[i].field] = bad[i].value;
        }
        sp_suggest *s = NULL;
        cm_error err;
        cm_error_clear(&err);
        assert_int_equal(sp_suggest_run(mlp, strlen(mlp), NULL, &o, &s, &err), CM_EINVAL);
        assert_null(s);
        assert_string_equal(err.path, bad[i].path);
    }
    sp_suggest_objective ob;
    assert_true(sp_suggest_objective_parse("memory", &ob) && ob == SP_SUGGEST_MEMORY);
    assert_false(sp_suggest_objective_parse("speed", &ob));
}

static void test_sp_suggest_run_rejects_bad_input(void **state)
{
    (void)state;
    const char *t = "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %0 = stablehlo.add %arg0, %nope : tensor<4xf32>\n"
                    "  return %0 : tensor<4xf32>\n}\n";
    sp_suggest *s = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_suggest_run(t, strlen(t), NULL, NULL, &s, &err), CM_EINVAL);
    assert_null(s);
    assert_string_equal(err.path, "2:29");
    cm_error_clear(&err);
    assert_int_equal(sp_suggest_run("{\"ops\": 3}", 10, NULL, NULL, &s, &err), CM_EINVAL);
    assert_null(s);
    assert_true(err.path[0] == '/');
    /* a suggestion number out of range */
    s = suggest(sharded, NULL);
    cm_buf b;
    cm_buf_init(&b);
    cm_error_clear(&err);
    assert_int_equal(sp_suggest_apply(s, 0, &b, &err), CM_EINVAL);
    assert_string_equal(err.path, "/suggestion");
    assert_int_equal(sp_suggest_apply(s, UINT32_MAX, &b, &err), CM_OK);
    cm_buf_fini(&b);
    sp_suggest_destroy(s);
}

/* Runs cmd_suggest on a copy of text in a temporary file; returns the
 * exit status and the output in out (heap, freed by the caller). */
static int run_main(const char *text, const char *const *args, int n_args, char **out)
{
    char path[] = "/tmp/test_sp_suggest_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char store[16][64], *argv[16];
    snprintf(store[0], sizeof store[0], "suggest");
    snprintf(store[1], sizeof store[1], "%s", path);
    for (int i = 0; i < 2 + n_args && i < 16; i++) {
        if (i >= 2) {
            snprintf(store[i], sizeof store[i], "%s", args[i - 2]);
        }
        argv[i] = store[i];
    }
    char *buf = NULL, *ebuf = NULL;
    size_t len = 0, elen = 0;
    FILE *o = open_memstream(&buf, &len), *e = open_memstream(&ebuf, &elen);
    int rc = cmd_suggest(2 + n_args, argv, o, e);
    fclose(o);
    fclose(e);
    unlink(path);
    free(ebuf);
    *out = buf;
    return rc;
}

static void test_cmd_suggest_options_and_check(void **state)
{
    (void)state;
    char *out = NULL;
    const char *bad_k[] = {"-k", "0"};
    assert_int_equal(run_main(mlp, bad_k, 2, &out), 2);
    free(out);
    const char *bad_obj[] = {"--objective", "speed"};
    assert_int_equal(run_main(mlp, bad_obj, 2, &out), 2);
    free(out);
    const char *check[] = {"--check", "--iters", "1", "-k", "1", "--max-candidates", "8"};
    assert_int_equal(run_main(mlp, check, 7, &out), 0);
    assert_non_null(strstr(out, "1. constrain"));
    assert_non_null(strstr(out, "baseline: predicted"));
    assert_non_null(strstr(out, "rank 1:"));
    assert_non_null(strstr(out, "measured"));
    assert_non_null(strstr(out, "numerics: match"));
    free(out);
    const char *json[] = {"--json", "--objective", "memory", "--check", "--iters", "1"};
    assert_int_equal(run_main(mlp, json, 6, &out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_t *chk = json_object_get(j, "check");
    assert_true(json_number_value(json_object_get(json_object_get(chk, "baseline"), "measured_s")) >
                0);
    assert_true(json_number_value(json_object_get(json_object_get(chk, "top"), "measured_s")) > 0);
    json_decref(j);
    free(out);
}

/* ---- the plan's input options ------------------------------------------------------------ */

/* An input on an axis that does not divide it, next to an unannotated one:
 * the pipeline's export passes drop the axis at the function boundary, so
 * the output is gathered; -sdy-basic-propagate keeps the padded sharding. */
static const char nondiv[] =
    "sdy.mesh @mesh = <[\"x\"=4]>\n"
    "func.func @main(%arg0: tensor<6x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"x\"}, {}]>}, %arg1: tensor<6x16xf32>) -> tensor<6x16xf32> {\n"
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<6x16xf32>\n"
    "  %1 = stablehlo.tanh %0 : tensor<6x16xf32>\n"
    "  return %1 : tensor<6x16xf32>\n"
    "}\n";

static void test_sp_suggest_run_honours_the_pass(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.objective = SP_SUGGEST_MEMORY;
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.pass = SP_PLAN_BASIC;
    sp_suggest *pipe = suggest(nondiv, &o), *basic = suggest_in(nondiv, &io, &o);
    /* the baseline and every candidate are scored under the input's pass */
    assert_all_real(pipe, nondiv);
    assert_all_real_in(basic, nondiv, &io);
    assert_true(sp_suggest_baseline(pipe)->comm_bytes > 0);
    assert_true(sp_suggest_baseline(basic)->comm_bytes == 0);
    sp_suggest_destroy(pipe);
    sp_suggest_destroy(basic);
    /* the MLP under basic propagation: every suggestion is real too */
    o.objective = SP_SUGGEST_TIME;
    o.max_candidates = 12;
    sp_suggest *m = suggest_in(mlp, &io, &o);
    assert_true(sp_suggest_n(m) > 0);
    assert_all_real_in(m, mlp, &io);
    sp_suggest_destroy(m);
}

/* A custom call whose rule only a rules document gives (an MLIR input): the
 * runs propagate through it, and sp_suggest_apply writes the rule into the
 * text so that it stands alone. */
static const char kernel[] =
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
    "func.func @main(%arg0: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"data\"}, {}]>}, %arg1: tensor<1024x1024xf32>) -> tensor<64x1024xf32> {\n"
    "  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<64x1024xf32>) -> "
    "tensor<64x1024xf32>\n"
    "  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : "
    "(tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>\n"
    "  return %1 : tensor<64x1024xf32>\n"
    "}\n";

#define RULES_DOC                                                                                  \
    "{\"custom_rules\": {\"my_kernel\": \"i j -> i j\"}, "                                         \
    "\"inputs\": [], \"ops\": [], \"outputs\": []}"

static void test_sp_suggest_run_honours_the_rules_document(void **state)
{
    (void)state;
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    o.max_candidates = 12;
    sp_input_opts io;
    sp_input_opts_init(&io);
    io.rules = RULES_DOC;
    io.rules_len = strlen(RULES_DOC);
    sp_suggest *without = suggest(kernel, &o), *with = suggest_in(kernel, &io, &o);
    assert_all_real_in(with, kernel, &io);
    assert_figures_of(kernel, sp_suggest_baseline(without));
    /* through the rule, the call's result keeps "data": less to hold */
    assert_true(sp_suggest_baseline(with)->peak_bytes < sp_suggest_baseline(without)->peak_bytes);
    cm_buf b;
    cm_buf_init(&b);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_suggest_apply(with, UINT32_MAX, &b, &err), CM_OK);
    assert_non_null(strstr(b.data, "sdy.sharding_rule"));
    assert_figures_of(b.data, sp_suggest_baseline(with)); /* no rules document needed now */
    cm_buf_fini(&b);
    sp_suggest_destroy(without);
    sp_suggest_destroy(with);
}

/* The OOM loop's attempt (tests/unit/tu_oom.h): one memory-objective run. */
typedef struct suggest_oom {
    sp_suggest_opts o;
    sp_suggest *s;
} suggest_oom;

static cm_status suggest_oom_run(void *ctx)
{
    suggest_oom *t = ctx;
    t->s = NULL;
    cm_error err;
    cm_error_clear(&err);
    return sp_suggest_run(mlp, strlen(mlp), NULL, &t->o, &t->s, &err);
}

static void suggest_oom_done(void *ctx, cm_status st)
{
    suggest_oom *t = ctx;
    if (st == CM_OK) {
        assert_true(sp_suggest_n(t->s) > 0);
    } else {
        assert_null(t->s);
    }
    sp_suggest_destroy(t->s);
}

static void test_sp_suggest_run_oom(void **state)
{
    (void)state;
    suggest_oom t;
    sp_suggest_opts_init(&t.o);
    t.o.threads = 1;
    t.o.max_candidates = 3;
    t.o.max_edits = 2;
    t.o.objective = SP_SUGGEST_MEMORY;
    static const tu_oom loop = {NULL, suggest_oom_run, suggest_oom_done};
    tu_oom_loop(&loop, &t, 200000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_suggest_run_time_gain_is_real),
        cmocka_unit_test(test_sp_suggest_run_memory_reduces_peak),
        cmocka_unit_test(test_sp_suggest_run_same_on_any_thread_count),
        cmocka_unit_test(test_sp_suggest_run_single_edit_when_asked),
        cmocka_unit_test(test_sp_suggest_run_nothing_helps_when_fully_sharded),
        cmocka_unit_test(test_sp_suggest_write_json_follows_contract),
        cmocka_unit_test(test_sp_suggest_run_graph_document),
        cmocka_unit_test(test_sp_suggest_run_several_functions),
        cmocka_unit_test(test_sp_suggest_run_rejects_bad_options),
        cmocka_unit_test(test_sp_suggest_run_rejects_bad_input),
        cmocka_unit_test(test_cmd_suggest_options_and_check),
        cmocka_unit_test(test_sp_suggest_run_honours_the_pass),
        cmocka_unit_test(test_sp_suggest_run_honours_the_rules_document),
        cmocka_unit_test(test_sp_suggest_run_oom),
    };
    return cmocka_run_group_tests_name("sp_suggest", tests, NULL, NULL);
}
