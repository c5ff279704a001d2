/* SPDX-License-Identifier: Apache-2.0
 * executor: per-op timers beside the cost model (see ex_timing.h). */
#include "ex_timing.h"

#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "ex_exec.h"
#include "sp_input.h"

sp_cost *ex_timing_cost(const sp_input *part)
{
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    if (part->g != NULL) {
        co.value_names = sp_graph_value_names(part->g, &co.n_value_names);
    }
    co.custom = part->custom;
    co.per_op = true;
    sp_cost *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    return sp_cost_compute(part->m, &co, &c, &err) == CM_OK ? c : NULL;
}

double *ex_timing_timers(const sp_module *m, uint64_t devices, uint32_t *n_dev)
{
    *n_dev = devices > 0 && devices <= UINT32_MAX ? (uint32_t)devices : ex_module_devices(m);
    if ((size_t)*n_dev * m->n_ops > EX_TIMING_MAX) {
        return NULL;
    }
    return cm_calloc((size_t)*n_dev * m->n_ops + 1u, sizeof(double));
}

/* What the writers share: each op's first explicit cost entry (or -1) and
 * the compute ops that took time, slowest first. */
typedef struct ranked {
    uint32_t op;
    double total; /* seconds over devices and runs */
} ranked;

typedef struct table {
    int32_t *coll; /* by op id: first cost entry of the collective, or -1 */
    ranked *ops;
    uint32_t n_ops;
} table;

static int slower_first(const void *a, const void *b)
{
    double x = ((const ranked *)a)->total, y = ((const ranked *)b)->total;
    return x > y ? -1 : x < y;
}

static void table_fini(table *tb)
{
    cm_free(tb->coll);
    cm_free(tb->ops);
}

static cm_status table_init(const ex_timing *t, table *tb)
{
    uint32_t n = t->m->n_ops;
    tb->coll = cm_alloc(sizeof(int32_t) * (n + 1u));
    tb->ops = cm_alloc(sizeof(ranked) * (n + 1u));
    tb->n_ops = 0;
    if (tb->coll == NULL || tb->ops == NULL) {
        table_fini(tb);
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        tb->coll[i] = -1;
    }
    uint32_t nc = t->c != NULL ? sp_cost_n_colls(t->c) : 0;
    for (uint32_t i = 0; i < nc && i <= INT32_MAX; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(t->c, i);
        if (!k->implied && k->op < n && tb->coll[k->op] < 0) {
            tb->coll[k->op] = (int32_t)i;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        double total = 0;
        for (uint32_t d = 0; d < t->n_dev; d++) {
            total += t->op_s[(size_t)d * n + i];
        }
        if (total > 0 && tb->coll[i] < 0) {
            tb->ops[tb->n_ops].op = i;
            tb->ops[tb->n_ops++].total = total;
        }
    }
    qsort(tb->ops, tb->n_ops, sizeof tb->ops[0], slower_first);
    return CM_OK;
}

/* Mean per run on device d, and the mean and max over devices. */
static double per_run(const ex_timing *t, uint32_t op, uint32_t d)
{
    return t->op_s[(size_t)d * t->m->n_ops + op] / (double)t->runs;
}

static void over_devices(const ex_timing *t, uint32_t op, double *mean, double *max)
{
    *mean = *max = 0;
    for (uint32_t d = 0; d < t->n_dev; d++) {
        double s = per_run(t, op, d);
        *mean += s / (double)t->n_dev;
        *max = s > *max ? s : *max;
    }
}

/* A collective's cost entries (an op may be several, as an all_to_all over
 * several dimensions): bytes and predicted seconds per run. */
static void coll_figures(const ex_timing *t, const table *tb, uint32_t op, double *bytes,
                         double *pred)
{
    *bytes = *pred = 0;
    for (uint32_t j = (uint32_t)tb->coll[op]; j < sp_cost_n_colls(t->c); j++) {
        const sp_cost_coll *e = sp_cost_coll_at(t->c, j);
        if (e->op == op && !e->implied) {
            *bytes += e->bytes * e->count; /* per run: times its function runs */
            *pred += e->time_s * e->count;
        }
    }
}

/* The value name the graph document gave an op's first result, or else its
 * first operand's (collectives the partitioner inserted); NULL for MLIR. */
static const char *value_name(const ex_timing *t, const sp_op *o, bool *operand)
{
    *operand = false;
    if (t->g == NULL) {
        return NULL;
    }
    const char *n = o->n_results > 0 ? sp_graph_value_name(t->g, o->first_result) : NULL;
    if (n == NULL && o->n_operands > 0) {
        n = sp_graph_value_name(t->g, o->operands[0]);
        *operand = n != NULL;
    }
    return n;
}

/* ---- JSON ------------------------------------------------------------------------ */

static void put_named(cm_buf *b, const char *key, const char *s)
{
    if (s != NULL) {
        cm_json_put_kv_str(b, key, s);
    }
}

/* {"op", "line"/"col" (MLIR), "loc", "result"/"operand" (graph), and
 * "measured_s": [per device, mean per run]: the head of an entry. */
static void put_head(cm_buf *b, const ex_timing *t, uint32_t op)
{
    const sp_op *o = &t->m->ops[op];
    cm_buf_puts(b, "{\"op\":");
    cm_json_put_cstr(b, o->name);
    if (o->line > 0) {
        cm_buf_printf(b, ",\"line\":%u,\"col\":%u", o->line, o->col);
    }
    put_named(b, "loc", o->loc);
    bool operand = false;
    const char *name = value_name(t, o, &operand);
    put_named(b, operand ? "operand" : "result", name);
    cm_buf_puts(b, ",\"measured_s\":[");
    for (uint32_t d = 0; d < t->n_dev; d++) {
        cm_json_put_sep(b);
        cm_json_put_g(b, per_run(t, op, d), 6);
    }
    cm_buf_putc(b, ']');
}

cm_status ex_timing_json(const ex_timing *t, cm_buf *b)
{
    table tb;
    if (table_init(t, &tb) != CM_OK) {
        return CM_ENOMEM;
    }
    cm_buf_printf(b, ",\"ops_timed\":%u,\"ops\":[", tb.n_ops);
    for (uint32_t i = 0; i < tb.n_ops && i < EX_TIMING_LISTED; i++) {
        uint32_t op = tb.ops[i].op;
        sp_cost_op p = t->c != NULL ? sp_cost_op_at(t->c, op) : (sp_cost_op){0, 0};
        cm_buf_puts(b, i > 0 ? "," : "");
        put_head(b, t, op);
        cm_json_put_key(b, "predicted_s");
        cm_json_put_g(b, p.time_s, 6);
        cm_json_put_key(b, "flops");
        cm_json_put_f64(b, p.flops); /* a count: exact */
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\"collectives\":[");
    uint32_t listed = 0;
    for (uint32_t op = 0; op < t->m->n_ops && listed < EX_TIMING_LISTED; op++) {
        if (tb.coll[op] < 0) {
            continue;
        }
        const sp_cost_coll *k = sp_cost_coll_at(t->c, (uint32_t)tb.coll[op]);
        double bytes, pred;
        coll_figures(t, &tb, op, &bytes, &pred);
        cm_buf_puts(b, listed++ > 0 ? "," : "");
        put_head(b, t, op);
        cm_json_put_kv_str(b, "kind", sp_coll_kind_name(k->kind));
        cm_buf_puts(b, ",\"axes\":[");
        for (uint32_t a = 0; a < k->n_axes; a++) {
            cm_json_put_sep(b);
            cm_json_put_cstr(b, k->axes[a]);
        }
        cm_buf_printf(b, "],\"group\":%lld", (long long)k->group);
        cm_json_put_key(b, "bytes");
        cm_json_put_f64(b, bytes);
        cm_json_put_key(b, "predicted_s");
        cm_json_put_g(b, pred, 6);
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
    table_fini(&tb);
    return b->oom ? CM_ENOMEM : CM_OK;
}

/* ---- text ------------------------------------------------------------------------ */

/* "line:col", the graph's value name, or for an op the partitioner
 * inserted, "of line:col" of its operand's defining op, into buf. */
static void where(const ex_timing *t, uint32_t op, char *buf, size_t len)
{
    const sp_op *o = &t->m->ops[op];
    bool operand = false;
    const char *name = value_name(t, o, &operand);
    uint32_t def = o->n_operands > 0 ? t->m->values[o->operands[0]].def : SP_NONE;
    if (o->line > 0) {
        snprintf(buf, len, "%u:%u", o->line, o->col);
    } else if (name == NULL && def != SP_NONE && t->m->ops[def].line > 0) {
        snprintf(buf, len, "of %u:%u", t->m->ops[def].line, t->m->ops[def].col);
    } else if (name != NULL) {
        snprintf(buf, len, "%s%s", operand ? "of " : "", name);
    } else {
        snprintf(buf, len, "op %u", op);
    }
}

cm_status ex_timing_text(const ex_timing *t, uint32_t top, FILE *out)
{
    table tb;
    if (table_init(t, &tb) != CM_OK) {
        return CM_ENOMEM;
    }
    char at[48];
    double sum = 0;
    for (uint32_t i = 0; i < tb.n_ops; i++) {
        sum += tb.ops[i].total / (double)t->n_dev / (double)t->runs;
    }
    fprintf(out, "slowest ops (%u of %u; per run, over %u devices; all ops: %.3f ms mean):\n",
            tb.n_ops < top ? tb.n_ops : top, tb.n_ops, t->n_dev, sum * 1e3);
    fprintf(out, "  %-28s %-16s %10s %10s %10s %9s\n", "op", "where", "mean ms", "max ms",
            "pred ms", "GFLOP/s");
    for (uint32_t i = 0; i < tb.n_ops && i < top; i++) {
        uint32_t op = tb.ops[i].op;
        double mean, max;
        over_devices(t, op, &mean, &max);
        sp_cost_op p = t->c != NULL ? sp_cost_op_at(t->c, op) : (sp_cost_op){0, 0};
        where(t, op, at, sizeof at);
        fprintf(out, "  %-28s %-16s %10.3f %10.3f %10.3f", t->m->ops[op].name, at, mean * 1e3,
                max * 1e3, p.time_s * 1e3);
        if (p.flops > 0 && mean > 0) {
            fprintf(out, " %9.2f", p.flops / mean * 1e-9);
        }
        fputc('\n', out);
    }
    uint32_t n_coll = 0;
    for (uint32_t op = 0; op < t->m->n_ops; op++) {
        n_coll += tb.coll[op] >= 0;
    }
    fprintf(out, "collectives (%u; per run; measured from before the first barrier to after the "
                 "second):\n",
            n_coll);
    if (n_coll > 0) {
        fprintf(out, "  %-16s %-12s %5s %-16s %10s %10s %10s %10s %8s\n", "kind", "axes", "group",
                "where", "bytes", "mean ms", "max ms", "pred ms", "GB/s");
    }
    for (uint32_t op = 0; op < t->m->n_ops; op++) {
        if (tb.coll[op] < 0) {
            continue;
        }
        const sp_cost_coll *k = sp_cost_coll_at(t->c, (uint32_t)tb.coll[op]);
        double bytes, pred, mean, max;
        coll_figures(t, &tb, op, &bytes, &pred);
        over_devices(t, op, &mean, &max);
        char axes[64] = "";
        for (uint32_t a = 0; a < k->n_axes; a++) {
            size_t l = strlen(axes);
            snprintf(axes + l, sizeof axes - l, "%s%s", a > 0 ? "," : "", k->axes[a]);
        }
        where(t, op, at, sizeof at);
        fprintf(out, "  %-16s %-12s %5lld %-16s %10.0f %10.3f %10.3f %10.3f",
                sp_coll_kind_name(k->kind), axes, (long long)k->group, at, bytes, mean * 1e3,
                max * 1e3, pred * 1e3);
        if (bytes > 0 && mean > 0) {
            fprintf(out, " %8.2f", bytes / mean * 1e-9);
        }
        fputc('\n', out);
    }
    table_fini(&tb);
    return CM_OK;
}

/* ---- the timeline ---------------------------------------------------------------- */

cm_status ex_trace_init(ex_trace *t, uint32_t n_dev, uint32_t run, cm_error *err)
{
    memset(t, 0, sizeof *t);
    if (n_dev == 0 || n_dev > 4096) {
        return cm_error_set(err, CM_EINVAL, NULL, "a timeline of %u devices", n_dev);
    }
    t->run = run;
    t->cap = EX_TRACE_EVENTS / n_dev > 64 ? EX_TRACE_EVENTS / n_dev : 64;
    t->dev = cm_calloc(n_dev, sizeof *t->dev);
    if (t->dev == NULL) {
        return cm_error_oom(err);
    }
    t->n_dev = n_dev;
    for (uint32_t d = 0; d < n_dev; d++) {
        t->dev[d].ev = cm_calloc(t->cap, sizeof(ex_trace_event));
        if (t->dev[d].ev == NULL) {
            return cm_error_oom(err);
        }
    }
    return CM_OK;
}

void ex_trace_fini(ex_trace *t)
{
    for (uint32_t d = 0; t->dev != NULL && d < t->n_dev; d++) {
        cm_free(t->dev[d].ev);
    }
    cm_free(t->dev);
    memset(t, 0, sizeof *t);
}

void ex_trace_run_begin(ex_trace *t, uint32_t dev, uint32_t run, double now)
{
    if (dev < t->n_dev) {
        t->dev[dev].on = run == t->run;
        t->dev[dev].wait = 0;
        if (run == t->run) {
            t->dev[dev].start = now;
        }
    }
}

void ex_trace_run_end(ex_trace *t, uint32_t dev, uint32_t run, uint32_t runs)
{
    if (dev < t->n_dev) {
        t->dev[dev].on = false;
    }
    if (dev == 0 && t->on_run != NULL) {
        t->on_run(t->ctx, run, runs);
    }
}

void ex_trace_wait(ex_trace *t, uint32_t dev, double seconds)
{
    if (ex_trace_on(t, dev)) {
        t->dev[dev].wait = seconds;
    }
}

void ex_trace_op(ex_trace *t, uint32_t dev, uint32_t op, double start, double end)
{
    if (!ex_trace_on(t, dev)) {
        return;
    }
    ex_trace_dev *d = &t->dev[dev];
    if (d->n < t->cap) {
        d->ev[d->n++] = (ex_trace_event){op, start, end, d->wait};
    } else {
        d->dropped++;
    }
    d->wait = 0;
}

/* Appends printf text to a bounded buffer (cut at its end). */
typedef struct words {
    char *p;
    size_t left;
} words;

static void words_put(words *w, const char *s)
{
    size_t n = strlen(s);
    if (w->left <= 1) {
        return;
    }
    n = n < w->left - 1 ? n : w->left - 1;
    memcpy(w->p, s, n);
    w->p += n;
    w->left -= n;
    *w->p = '\0';
}

/* Whether a value name is one a generator numbered ("v70"): it tells the
 * reader nothing. */
static bool generated_name(const char *n)
{
    if (n[0] != 'v' || n[1] == '\0') {
        return false;
    }
    for (const char *c = n + 1; *c != '\0'; c++) {
        if (*c < '0' || *c > '9') {
            return false;
        }
    }
    return true;
}

/* The name of value v as the user gave it (graph value name, or the MLIR
 * location's), NULL when it has none or only a generated one. */
static const char *good_name(const ex_timing *t, uint32_t v)
{
    const char *n = t->g != NULL ? sp_graph_value_name(t->g, v) : NULL;
    n = n != NULL ? n : sp_value_name(t->m, v);
    return n != NULL && !generated_name(n) ? n : NULL;
}

static const char *short_kind(const char *name)
{
    const char *dot = strchr(name, '.');
    return dot != NULL ? dot + 1 : name;
}

/* What value v is known by: its name, else where its op is in the source
 * (loc text, "line:col"), else what makes it, "kind(a, b)" over its
 * operands, depth levels down ("reshape(dot_general(x, layer0.Wq))"). */
static void value_words(const ex_timing *t, uint32_t v, int depth, words *w)
{
    const char *n = good_name(t, v);
    uint32_t def = t->m->values[v].def;
    const sp_op *d = def != SP_NONE ? &t->m->ops[def] : NULL;
    char at[32];
    if (n != NULL) {
        words_put(w, n);
    } else if (d != NULL && d->loc != NULL && d->loc[0] != '\0') {
        words_put(w, d->loc);
    } else if (d != NULL && d->line > 0) {
        snprintf(at, sizeof at, "%u:%u", d->line, d->col);
        words_put(w, at);
    } else if (d != NULL && depth > 0) {
        words_put(w, short_kind(d->name));
        words_put(w, "(");
        for (uint32_t i = 0; i < d->n_operands && i < 3; i++) {
            words_put(w, i > 0 ? ", " : "");
            value_words(t, d->operands[i], depth - 1, w);
        }
        words_put(w, d->n_operands > 3 ? ", ...)" : ")");
    } else {
        words_put(w, "..."); /* deeper, or a block argument without a name */
    }
}

/* An op's name on the timeline: its kind without the dialect, then what
 * the user knows it by: its result's value name (graph or loc), the op's
 * loc(...) text or "line:col", or else what it computes from
 * ("dot_general(x, layer0.Wq)"; an op on one operand, as one the
 * partitioner inserted: "all_reduce of l0.z"), three levels deep at most
 * ("..." below). Generated names ("v70") are looked through. */
static void trace_name(const ex_timing *t, uint32_t op, char *buf, size_t len)
{
    const sp_op *o = &t->m->ops[op];
    const char *kind = short_kind(o->name);
    const char *name = o->n_results > 0 ? good_name(t, o->first_result) : NULL;
    words w = {buf, len};
    buf[0] = '\0';
    words_put(&w, kind);
    if (name != NULL) {
        words_put(&w, " ");
        words_put(&w, name);
    } else if (o->loc != NULL && o->loc[0] != '\0') {
        words_put(&w, " ");
        words_put(&w, o->loc);
    } else if (o->line > 0) {
        char at[32];
        snprintf(at, sizeof at, " %u:%u", o->line, o->col);
        words_put(&w, at);
    } else if (o->n_operands == 1) {
        words_put(&w, " of ");
        value_words(t, o->operands[0], 3, &w);
    } else if (o->n_operands > 1) {
        words_put(&w, "(");
        for (uint32_t i = 0; i < o->n_operands && i < 3; i++) {
            words_put(&w, i > 0 ? ", " : "");
            value_words(t, o->operands[i], 2, &w);
        }
        words_put(&w, o->n_operands > 3 ? ", ...)" : ")");
    } else {
        char at[32];
        snprintf(at, sizeof at, " (op %u)", op);
        words_put(&w, at);
    }
}

/* The sdy collectives, for a run without a cost. */
static bool is_collective_kind(const char *name)
{
    static const char *const kinds[] = {"sdy.all_gather",   "sdy.all_reduce",
                                        "sdy.reduce_scatter", "sdy.all_to_all",
                                        "sdy.all_slice",    "sdy.collective_permute"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(name, kinds[i]) == 0) {
            return true;
        }
    }
    return false;
}

static double us(double s)
{
    return s * 1e6;
}

cm_status ex_trace_json(const ex_trace *t, const ex_timing *tm, cm_buf *b)
{
    uint32_t n = tm->m->n_ops;
    int32_t *ref = cm_alloc(sizeof(int32_t) * (n + 1u));
    int32_t *coll = cm_alloc(sizeof(int32_t) * (n + 1u));
    if (ref == NULL || coll == NULL) {
        cm_free(ref);
        cm_free(coll);
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        ref[i] = coll[i] = -1;
    }
    uint32_t nc = tm->c != NULL ? sp_cost_n_colls(tm->c) : 0;
    for (uint32_t i = 0; i < nc && i <= INT32_MAX; i++) {
        const sp_cost_coll *k = sp_cost_coll_at(tm->c, i);
        if (!k->implied && k->op < n && coll[k->op] < 0) {
            coll[k->op] = (int32_t)i;
        }
    }
    /* the run's start: the first device to begin it */
    double t0 = 0;
    uint64_t dropped = 0;
    bool any = false;
    for (uint32_t d = 0; d < t->n_dev; d++) {
        if (t->dev[d].n > 0 && (!any || t->dev[d].start < t0)) {
            t0 = t->dev[d].start;
            any = true;
        }
        dropped += t->dev[d].dropped;
    }
    cm_buf_printf(b, ",\"timeline\":{\"run\":%u,\"devices\":%u,\"dropped\":%llu,\"ops\":[",
                  t->run, t->n_dev, (unsigned long long)dropped);
    int32_t n_ref = 0;
    char name[192];
    for (uint32_t d = 0; d < t->n_dev; d++) {
        for (uint32_t i = 0; i < t->dev[d].n; i++) {
            uint32_t op = t->dev[d].ev[i].op;
            if (op >= n || ref[op] >= 0) {
                continue;
            }
            ref[op] = n_ref++;
            const sp_op *o = &tm->m->ops[op];
            trace_name(tm, op, name, sizeof name);
            cm_buf_puts(b, n_ref > 1 ? ",{" : "{");
            cm_json_put_kv_i64(b, "op", op);
            cm_json_put_kv_str(b, "name", name);
            cm_json_put_kv_str(b, "kind", o->name);
            if (o->line > 0) {
                cm_buf_printf(b, ",\"line\":%u,\"col\":%u", o->line, o->col);
            }
            put_named(b, "loc", o->loc);
            if (coll[op] >= 0) {
                const sp_cost_coll *k = sp_cost_coll_at(tm->c, (uint32_t)coll[op]);
                cm_json_put_kv_str(b, "collective", sp_coll_kind_name(k->kind));
                cm_buf_puts(b, ",\"axes\":[");
                for (uint32_t a = 0; a < k->n_axes; a++) {
                    cm_json_put_sep(b);
                    cm_json_put_cstr(b, k->axes[a]);
                }
                cm_buf_printf(b, "],\"group\":%lld", (long long)k->group);
            } else if (is_collective_kind(o->name)) {
                cm_json_put_kv_str(b, "collective", o->name + 4);
            }
            cm_buf_putc(b, '}');
        }
    }
    cm_buf_puts(b, "],\"events\":[");
    bool first = true;
    for (uint32_t d = 0; d < t->n_dev; d++) {
        for (uint32_t i = 0; i < t->dev[d].n; i++) {
            const ex_trace_event *e = &t->dev[d].ev[i];
            if (e->op >= n) {
                continue;
            }
            cm_buf_printf(b, "%s[%u,%d,", first ? "" : ",", d, ref[e->op]);
            first = false;
            cm_json_put_g(b, us(e->start - t0), 9);
            cm_buf_putc(b, ',');
            cm_json_put_g(b, us(e->end > e->start ? e->end - e->start : 0), 7);
            cm_buf_putc(b, ',');
            cm_json_put_g(b, us(e->wait), 6);
            cm_buf_putc(b, ']');
        }
    }
    cm_buf_puts(b, "]}");
    cm_free(ref);
    cm_free(coll);
    return b->oom ? CM_ENOMEM : CM_OK;
}
