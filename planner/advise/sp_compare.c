/* SPDX-License-Identifier: Apache-2.0
 * planner: plans side by side (see sp_compare.h). Each plan's tensors are
 * listed in one order — per function its inputs, the results of its ops in
 * program order (nested regions included) and its outputs — and aligned by
 * position while the ops agree; plans of structurally different modules are
 * compared up to the first op that differs. */
#include "sp_compare.h"

#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_cost.h"
#include "sp_ops.h"
#include "sp_profile_json.h"
#include "sp_shard.h"
#include "sp_input.h"

#define MAX_PLANS     SP_COMPARE_MAX_PLANS
#define TEXT_MAX_DIFF 30u

typedef enum slot_kind { SLOT_INPUT, SLOT_RESULT, SLOT_OUTPUT } slot_kind;

/* One tensor of a plan. */
typedef struct slot {
    slot_kind kind;
    uint32_t func;   /* func.func op id */
    uint32_t op;     /* op id for results, SP_NONE otherwise */
    uint32_t index;  /* argument, result or output number */
    uint32_t value;  /* value id, SP_NONE for outputs */
    const sp_sharding *s;
} slot;

typedef struct plan {
    char *name; /* the input's label (heap) */
    sp_input in;
    sp_cost *cost;
    slot *slots;
    uint32_t n_slots, cap_slots;
    bool oom;
} plan;

static void push(plan *p, slot s)
{
    if (p->n_slots == p->cap_slots) {
        uint32_t cap = p->cap_slots ? p->cap_slots * 2 : 256;
        slot *n = cm_realloc(p->slots, sizeof(slot) * cap);
        if (n == NULL) {
            p->oom = true;
            return;
        }
        p->slots = n;
        p->cap_slots = cap;
    }
    p->slots[p->n_slots++] = s;
}

static void walk_block(plan *p, uint32_t func, uint32_t blk)
{
    const sp_module *m = p->in.m;
    const sp_block *bl = &m->blocks[blk];
    for (uint32_t i = 0; i < bl->n_ops && !p->oom; i++) {
        uint32_t id = bl->ops[i];
        const sp_op *o = &m->ops[id];
        for (uint32_t r = 0; r < o->n_results; r++) {
            push(p, (slot){SLOT_RESULT, func, id, r, o->first_result + r,
                           sp_value_sharding(m, o->first_result + r)});
        }
        for (uint32_t r = 0; r < o->n_regions; r++) {
            for (uint32_t b = 0; b < o->regions[r].n_blocks; b++) {
                walk_block(p, func, o->regions[r].blocks[b]);
            }
        }
    }
}

static void collect(plan *p)
{
    const sp_module *m = p->in.m;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && !p->oom; i++) {
        uint32_t f = body->ops[i];
        const sp_op *o = &m->ops[f];
        if (o->kind != SP_OP_FUNC_FUNC || o->n_regions != 1 || o->regions[0].n_blocks == 0) {
            continue;
        }
        const sp_block *entry = &m->blocks[o->regions[0].blocks[0]];
        for (uint32_t a = 0; a < entry->n_args; a++) {
            uint32_t v = entry->first_arg + a;
            push(p, (slot){SLOT_INPUT, f, SP_NONE, a, v, sp_value_sharding(m, v)});
        }
        walk_block(p, f, o->regions[0].blocks[0]);
        const sp_type *ft = sp_func_type(m, f);
        for (uint32_t r = 0; ft != NULL && r < ft->n_results; r++) {
            push(p, (slot){SLOT_OUTPUT, f, SP_NONE, r, SP_NONE, sp_func_result_sharding(m, f, r)});
        }
    }
}

/* The sharding's axes per dimension, `@mesh [{"data"}, {}]` (open/closed and
 * priorities ignored: they do not change the partitioned program). */
static void sig(const sp_sharding *s, cm_buf *b)
{
    if (s == NULL) {
        cm_buf_puts(b, "replicated");
        return;
    }
    bool any = false;
    for (uint32_t d = 0; d < s->rank && !any; d++) {
        any = s->dims[d].n_axes > 0;
    }
    if (!any && s->n_unreduced == 0) {
        cm_buf_puts(b, "replicated");
        return;
    }
    cm_buf_printf(b, "@%s [", s->mesh_name != NULL ? s->mesh_name : "(inline)");
    for (uint32_t d = 0; d < s->rank; d++) {
        cm_buf_puts(b, d > 0 ? ", {" : "{");
        for (uint32_t a = 0; a < s->dims[d].n_axes; a++) {
            if (a > 0) {
                cm_buf_puts(b, ", ");
            }
            sp_axis_ref_print(&s->dims[d].axes[a], b);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
    if (s->n_unreduced > 0) {
        cm_buf_puts(b, " unreduced={");
        for (uint32_t a = 0; a < s->n_unreduced; a++) {
            if (a > 0) {
                cm_buf_puts(b, ", ");
            }
            sp_axis_ref_print(&s->unreduced[a], b);
        }
        cm_buf_putc(b, '}');
    }
}

static bool same_sig(const sp_sharding *a, const sp_sharding *b)
{
    cm_buf x, y;
    cm_buf_init(&x);
    cm_buf_init(&y);
    sig(a, &x);
    sig(b, &y);
    bool eq = x.len == y.len && (x.len == 0 || memcmp(x.data, y.data, x.len) == 0);
    cm_buf_fini(&x);
    cm_buf_fini(&y);
    return eq;
}

static const char *func_name(const sp_module *m, uint32_t f)
{
    const sp_attr *a = sp_op_attr(m, f, "sym_name");
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : "?";
}

/* Human label of a slot: the graph's value name when there is one. */
static void label(const plan *p, const slot *s, cm_buf *b)
{
    const sp_module *m = p->in.m;
    const char *nm = p->in.g != NULL && s->value != SP_NONE
                         ? sp_graph_value_name(p->in.g, s->value)
                         : NULL;
    switch (s->kind) {
    case SLOT_INPUT:
        cm_buf_printf(b, "@%s input %u", func_name(m, s->func), s->index);
        break;
    case SLOT_OUTPUT:
        cm_buf_printf(b, "@%s output %u", func_name(m, s->func), s->index);
        break;
    case SLOT_RESULT: {
        const sp_op *o = &m->ops[s->op];
        cm_buf_printf(b, "%s", o->name);
        if (o->n_results > 1) {
            cm_buf_printf(b, " result %u", s->index);
        }
        if (o->line > 0) {
            cm_buf_printf(b, " (line %u)", o->line);
        }
        break;
    }
    }
    if (nm != NULL) {
        cm_buf_printf(b, " \"%s\"", nm);
    }
}

static const sp_attr *list_item(const sp_attr *list, uint32_t i)
{
    if (list == NULL || list->kind != SP_ATTR_ARRAY || i >= list->u.arr.n) {
        return NULL;
    }
    return list->u.arr.items[i];
}

static const sp_attr *dict_get(const sp_attr *d, const char *key)
{
    return d != NULL && d->kind == SP_ATTR_DICT ? sp_attrs_get(d->u.dict.items, d->u.dict.n, key)
                                                : NULL;
}

/* Where a named origin ("constraint_0") comes from: the op that carries it. */
static void origin_where(const sp_module *m, const char *name, cm_buf *b)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_attr *a = sp_op_attr(m, i, "sdy.sharding_origin_name");
        if (a != NULL && a->kind == SP_ATTR_STRING && strcmp(a->u.str.s, name) == 0) {
            cm_buf_printf(b, " (%s", m->ops[i].name);
            if (m->ops[i].line > 0) {
                cm_buf_printf(b, " at line %u", m->ops[i].line);
            }
            cm_buf_putc(b, ')');
            return;
        }
    }
}

/* "data: constraint_0 (sdy.sharding_constraint at line 12); model: self". */
static void origin(const plan *p, const slot *s, cm_buf *b)
{
    const sp_module *m = p->in.m;
    const sp_attr *d = NULL;
    if (s->kind == SLOT_INPUT) {
        d = dict_get(list_item(sp_op_attr(m, s->func, "arg_attrs"), s->index),
                     "sdy.sharding_origins");
    } else if (s->kind == SLOT_OUTPUT) {
        d = dict_get(list_item(sp_op_attr(m, s->func, "res_attrs"), s->index),
                     "sdy.sharding_origins");
    } else {
        d = sp_op_attr(m, s->op, "sdy.sharding_origins");
        if (d != NULL && d->kind == SP_ATTR_ARRAY) {
            d = list_item(d, s->index);
        }
    }
    if (d == NULL || d->kind != SP_ATTR_DICT || d->u.dict.n == 0) {
        cm_buf_puts(b, "no origin recorded: no sharding reached this tensor or it stayed replicated");
        return;
    }
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        const sp_named_attr *e = &d->u.dict.items[i];
        const char *v = e->value->kind == SP_ATTR_STRING ? e->value->u.str.s : "?";
        cm_buf_printf(b, "%s%s: %s", i > 0 ? "; " : "", e->name, v);
        if (strcmp(v, "self") == 0) {
            cm_buf_puts(b, " (set on this tensor)");
        } else {
            origin_where(m, v, b);
        }
    }
}

/* ---- the report ------------------------------------------------------------------------ */

typedef struct cmp {
    plan *p;
    uint32_t n;
    uint32_t n_aligned;    /* slots aligned across all plans */
    bool structure_differs;
    uint32_t first_diff;   /* slot index, SP_NONE when none */
    uint32_t *diffs;       /* slot indices that differ */
    uint32_t n_diffs;
} cmp;

static bool slot_match(const plan *a, const slot *x, const plan *b, const slot *y)
{
    if (x->kind != y->kind || x->index != y->index) {
        return false;
    }
    if (x->kind == SLOT_RESULT) {
        return strcmp(a->in.m->ops[x->op].name, b->in.m->ops[y->op].name) == 0;
    }
    return true;
}

static bool align(cmp *c)
{
    uint32_t n = c->p[0].n_slots;
    for (uint32_t k = 1; k < c->n; k++) {
        if (c->p[k].n_slots != n) {
            c->structure_differs = true;
        }
        n = c->p[k].n_slots < n ? c->p[k].n_slots : n;
    }
    c->diffs = cm_alloc(sizeof(uint32_t) * (n + 1u));
    if (c->diffs == NULL) {
        return false;
    }
    c->first_diff = SP_NONE;
    uint32_t i = 0;
    for (; i < n; i++) {
        bool ok = true, differ = false;
        for (uint32_t k = 1; k < c->n && ok; k++) {
            ok = slot_match(&c->p[0], &c->p[0].slots[i], &c->p[k], &c->p[k].slots[i]);
            differ = differ || !same_sig(c->p[0].slots[i].s, c->p[k].slots[i].s);
        }
        if (!ok) {
            c->structure_differs = true;
            break;
        }
        if (differ) {
            if (c->first_diff == SP_NONE) {
                c->first_diff = i;
            }
            c->diffs[c->n_diffs++] = i;
        }
    }
    c->n_aligned = i;
    return true;
}

/* Appends what fn writes for (plan, slot) as a JSON string. */
static void jfn(cm_buf *b, void (*fn)(const plan *, const slot *, cm_buf *), const plan *p,
                const slot *s)
{
    cm_buf t;
    cm_buf_init(&t);
    fn(p, s, &t);
    cm_json_put_str(b, t.data != NULL ? t.data : "", t.len);
    cm_buf_fini(&t);
}

static void sig_of(const plan *p, const slot *s, cm_buf *b)
{
    (void)p;
    sig(s->s, b);
}

static double axis_bytes(const sp_cost *c, const char *axes)
{
    for (uint32_t i = 0; i < sp_cost_n_axes(c); i++) {
        if (strcmp(sp_cost_axis_at(c, i)->axes, axes) == 0) {
            return sp_cost_axis_at(c, i)->bytes;
        }
    }
    return 0;
}

/* Every axis set that any plan communicates over, into keys (up to cap). */
static uint32_t all_axis_sets(const cmp *c, const char **keys, uint32_t cap)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->n; k++) {
        for (uint32_t i = 0; i < sp_cost_n_axes(c->p[k].cost); i++) {
            const char *a = sp_cost_axis_at(c->p[k].cost, i)->axes;
            bool seen = false;
            for (uint32_t j = 0; j < n && !seen; j++) {
                seen = strcmp(keys[j], a) == 0;
            }
            if (!seen && n < cap) {
                keys[n++] = a;
            }
        }
    }
    return n;
}

static void hb(char *buf, size_t len, double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, len, i == 0 ? "%.0f %s" : "%.1f %s", v, u[i]);
}

static void ht(char *buf, size_t len, double s)
{
    if (s < 1e-3) {
        snprintf(buf, len, "%.1f us", s * 1e6);
    } else if (s < 1) {
        snprintf(buf, len, "%.2f ms", s * 1e3);
    } else {
        snprintf(buf, len, "%.2f s", s);
    }
}

typedef enum fmt_kind { F_BYTES, F_TIME, F_FLOPS, F_TEXT } fmt_kind;

static void row(cm_buf *b, const cmp *c, const char *name, fmt_kind f, const double *v,
                const char *const *txt)
{
    cm_buf_printf(b, "%-24s", name);
    for (uint32_t k = 0; k < c->n; k++) {
        char t[48];
        switch (f) {
        case F_BYTES:
            hb(t, sizeof t, v[k]);
            break;
        case F_TIME:
            ht(t, sizeof t, v[k]);
            break;
        case F_FLOPS:
            snprintf(t, sizeof t, "%.4g GFLOP", v[k] / 1e9);
            break;
        case F_TEXT:
            snprintf(t, sizeof t, "%s", txt[k]);
            break;
        }
        cm_buf_printf(b, "  %-22s", t);
    }
    cm_buf_putc(b, '\n');
}

#define ROW(name, f, field)                                                                       \
    do {                                                                                          \
        double v_[MAX_PLANS] = {0};                                                                  \
        for (uint32_t k_ = 0; k_ < c->n; k_++) {                                                  \
            v_[k_] = sp_cost_get_summary(c->p[k_].cost)->field;                                   \
        }                                                                                         \
        row(b, c, name, f, v_, NULL);                                                             \
    } while (0)

static void text_report(const cmp *c, cm_buf *b)
{
    const char *hdr[MAX_PLANS] = {NULL};
    char hbuf[MAX_PLANS][24];
    for (uint32_t k = 0; k < c->n; k++) {
        const char *base = strrchr(c->p[k].name, '/');
        snprintf(hbuf[k], sizeof hbuf[k], "%c: %.19s", 'A' + k,
                 base != NULL ? base + 1 : c->p[k].name);
        hdr[k] = hbuf[k];
    }
    row(b, c, "", F_TEXT, NULL, hdr);
    const char *mode[MAX_PLANS] = {NULL};
    for (uint32_t k = 0; k < c->n; k++) {
        mode[k] = sp_cost_get_summary(c->p[k].cost)->partitioned ? "explicit" : "implied";
    }
    row(b, c, "communication from", F_TEXT, NULL, mode);
    cm_buf_puts(b, "memory per device\n");
    ROW("  parameters", F_BYTES, param_bytes);
    ROW("  inputs", F_BYTES, input_bytes);
    ROW("  peak activations", F_BYTES, peak_activation_bytes);
    ROW("  peak total", F_BYTES, peak_bytes);
    const char *fit[MAX_PLANS] = {NULL};
    for (uint32_t k = 0; k < c->n; k++) {
        fit[k] = sp_cost_get_summary(c->p[k].cost)->fits ? "fits" : "OOM predicted";
    }
    row(b, c, "  fits", F_TEXT, NULL, fit);
    cm_buf_puts(b, "compute per device\n");
    ROW("  FLOPs", F_FLOPS, flops);
    cm_buf_puts(b, "communication per device\n");
    ROW("  total", F_BYTES, comm_bytes);
    const char *keys[32];
    uint32_t nk = all_axis_sets(c, keys, 32);
    for (uint32_t i = 0; i < nk; i++) {
        double v[MAX_PLANS] = {0};
        for (uint32_t k = 0; k < c->n; k++) {
            v[k] = axis_bytes(c->p[k].cost, keys[i]);
        }
        char nm[48];
        snprintf(nm, sizeof nm, "  axes %s", keys[i]);
        row(b, c, nm, F_BYTES, v, NULL);
    }
    cm_buf_puts(b, "predicted time\n");
    ROW("  compute", F_TIME, compute_s);
    ROW("  communication", F_TIME, comm_s);
    ROW("  step", F_TIME, step_s);
    cm_buf_putc(b, '\n');
    if (c->structure_differs) {
        cm_buf_puts(b, "the modules differ in structure; tensors are compared up to ");
        if (c->n_aligned < c->p[0].n_slots) {
            cm_buf lb;
            cm_buf_init(&lb);
            label(&c->p[0], &c->p[0].slots[c->n_aligned], &lb);
            cm_buf_printf(b, "A's %s\n", lb.data != NULL ? lb.data : "");
            cm_buf_fini(&lb);
        } else {
            cm_buf_puts(b, "the end of A\n");
        }
    }
    if (c->first_diff == SP_NONE) {
        cm_buf_printf(b, "the plans shard all %u compared tensors alike\n", c->n_aligned);
        return;
    }
    const slot *s0 = &c->p[0].slots[c->first_diff];
    cm_buf lb;
    cm_buf_init(&lb);
    label(&c->p[0], s0, &lb);
    cm_buf_printf(b, "first divergence: %s\n", lb.data != NULL ? lb.data : "");
    cm_buf_fini(&lb);
    for (uint32_t k = 0; k < c->n; k++) {
        const slot *s = &c->p[k].slots[c->first_diff];
        cm_buf t;
        cm_buf_init(&t);
        sig(s->s, &t);
        cm_buf_printf(b, "  %c: %s\n     why: ", 'A' + k, t.data != NULL ? t.data : "");
        cm_buf_reset(&t);
        origin(&c->p[k], s, &t);
        cm_buf_printf(b, "%s\n", t.data != NULL ? t.data : "");
        cm_buf_fini(&t);
    }
    cm_buf_printf(b, "\nsharding differences: %u of %u tensors\n", c->n_diffs, c->n_aligned);
    for (uint32_t i = 0; i < c->n_diffs && i < TEXT_MAX_DIFF; i++) {
        const slot *s = &c->p[0].slots[c->diffs[i]];
        cm_buf t;
        cm_buf_init(&t);
        label(&c->p[0], s, &t);
        cm_buf_printf(b, "  %s\n", t.data != NULL ? t.data : "");
        for (uint32_t k = 0; k < c->n; k++) {
            cm_buf_reset(&t);
            sig(c->p[k].slots[c->diffs[i]].s, &t);
            cm_buf_printf(b, "    %c: %s\n", 'A' + k, t.data != NULL ? t.data : "");
        }
        cm_buf_fini(&t);
    }
    if (c->n_diffs > TEXT_MAX_DIFF) {
        cm_buf_printf(b, "  ... %u more (--format json lists them all)\n", c->n_diffs - TEXT_MAX_DIFF);
    }
}

static void json_report(const cmp *c, cm_buf *b)
{
    cm_buf_puts(b, "{\"format\":\"shardplan.compare/v1\",\"plans\":[");
    for (uint32_t k = 0; k < c->n; k++) {
        cm_buf_puts(b, k > 0 ? ",\n {\"file\":" : "\n {\"file\":");
        cm_json_put_cstr(b, c->p[k].name);
        cm_buf_puts(b, ",\"cost\":");
        sp_cost_write_json(c->p[k].cost, c->p[k].in.m, b);
        cm_buf_putc(b, '}');
    }
    cm_buf_printf(b, "],\n\"structure_differs\":%s,\"compared_tensors\":%u,\"first_divergence\":",
                  c->structure_differs ? "true" : "false", c->n_aligned);
    if (c->first_diff == SP_NONE) {
        cm_buf_puts(b, "null");
    } else {
        const slot *s0 = &c->p[0].slots[c->first_diff];
        cm_buf_puts(b, "{\"tensor\":");
        jfn(b, label, &c->p[0], s0);
        cm_buf_puts(b, ",\"plans\":[");
        for (uint32_t k = 0; k < c->n; k++) {
            const slot *s = &c->p[k].slots[c->first_diff];
            cm_buf_puts(b, k > 0 ? ",{\"sharding\":" : "{\"sharding\":");
            jfn(b, sig_of, &c->p[k], s);
            cm_buf_puts(b, ",\"origin\":");
            jfn(b, origin, &c->p[k], s);
            cm_buf_putc(b, '}');
        }
        cm_buf_puts(b, "]}");
    }
    cm_buf_puts(b, ",\n\"differences\":[");
    for (uint32_t i = 0; i < c->n_diffs; i++) {
        const slot *s = &c->p[0].slots[c->diffs[i]];
        cm_buf_puts(b, i > 0 ? ",\n {\"tensor\":" : "\n {\"tensor\":");
        jfn(b, label, &c->p[0], s);
        cm_buf_puts(b, ",\"shardings\":[");
        for (uint32_t k = 0; k < c->n; k++) {
            if (k > 0) {
                cm_buf_putc(b, ',');
            }
            jfn(b, sig_of, &c->p[k], &c->p[k].slots[c->diffs[i]]);
        }
        cm_buf_puts(b, "]}");
    }
    cm_buf_puts(b, "]}\n");
}

/* ---- the run ---------------------------------------------------------------------------- */

struct sp_compare {
    plan p[MAX_PLANS];
    cmp c; /* c.p is p */
};

void sp_compare_opts_init(sp_compare_opts *o)
{
    memset(o, 0, sizeof *o);
    o->overlap = -1;
}

/* Whether the caller's cancel hook says stop; then err says so (CM_EIO). */
static bool stopped(const sp_compare_opts *o, cm_error *err)
{
    if (o->cancel == NULL || !o->cancel(o->cancel_ctx)) {
        return false;
    }
    cm_error_set(err, CM_EIO, NULL, "compare stopped before its end (cancelled)");
    return true;
}

/* Loads, lists and costs input k into x->p[k]; errors name the input by its label. */
static cm_status load_plan(sp_compare *x, uint32_t k, const sp_compare_input *in,
                           const sp_compare_opts *o, cm_error *err)
{
    plan *p = &x->p[k];
    const char *lab = in->label != NULL ? in->label : "";
    size_t n = strlen(lab);
    p->name = cm_alloc(n + 1);
    if (p->name == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in compare");
    }
    memcpy(p->name, lab, n + 1);
    /* the plan's own pass and rules; always planned: the propagated
       shardings are what is compared */
    sp_input_opts io;
    if (in->in_opts != NULL) {
        io = *in->in_opts;
    } else {
        sp_input_opts_init(&io);
    }
    io.propagate = true;
    io.record_edges = false;
    cm_cancel stop = {o->cancel, o->cancel_ctx};
    io.cancel = &stop;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_input_read(in->text, in->len, &io, &p->in, &e);
    x->c.n = k + 1;
    if (st == CM_EIO && stopped(o, err)) {
        return st; /* propagation saw the hook say stop */
    }
    if (st == CM_OK) {
        /* the propagated shardings are compared; the cost is the partitioned
           program's, as lint, suggest and what-if give it */
        collect(p);
        if (p->oom) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in compare");
        }
        st = stopped(o, err) ? CM_EIO
                             : sp_advise_partition_cost(p->in.m, !p->in.propagated, o->profile,
                                                        o->overlap, p->in.custom, p->in.g,
                                                        &p->cost, &e);
        if (st == CM_EIO && err->code == CM_EIO) {
            return st;
        }
    }
    if (st == CM_ENOMEM) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in compare");
    }
    if (st != CM_OK) {
        return cm_error_wrap(err, &e, "%s", lab);
    }
    return CM_OK;
}

cm_status sp_compare_run(const sp_compare_input *plans, uint32_t n, const sp_compare_opts *o,
                         sp_compare **out, cm_error *err)
{
    *out = NULL;
    sp_compare_opts defo;
    if (o == NULL) {
        sp_compare_opts_init(&defo);
        o = &defo;
    }
    if (n < 2 || n > MAX_PLANS) {
        return cm_error_set(err, CM_EINVAL, "/plans", "give 2 to %d plans, not %u", MAX_PLANS,
                            n);
    }
    if (!(o->overlap <= 1)) {
        return cm_error_set(err, CM_EINVAL, "/overlap", "overlap is a fraction in [0, 1]");
    }
    sp_compare *x = cm_calloc(1, sizeof *x);
    if (x == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in compare");
    }
    x->c.p = x->p;
    cm_status st = CM_OK;
    for (uint32_t k = 0; k < n && st == CM_OK; k++) {
        st = stopped(o, err) ? CM_EIO : load_plan(x, k, &plans[k], o, err);
    }
    if (st == CM_OK && !align(&x->c)) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in compare");
    }
    if (st != CM_OK) {
        sp_compare_destroy(x);
        return st;
    }
    *out = x;
    return CM_OK;
}

void sp_compare_destroy(sp_compare *x)
{
    if (x == NULL) {
        return;
    }
    for (uint32_t k = 0; k < x->c.n; k++) {
        sp_cost_destroy(x->p[k].cost);
        cm_free(x->p[k].slots);
        sp_input_fini(&x->p[k].in);
        cm_free(x->p[k].name);
    }
    cm_free(x->c.diffs);
    cm_free(x);
}

uint32_t sp_compare_n_plans(const sp_compare *x)
{
    return x->c.n;
}

uint32_t sp_compare_n_tensors(const sp_compare *x)
{
    return x->c.n_aligned;
}

uint32_t sp_compare_n_differences(const sp_compare *x)
{
    return x->c.n_diffs;
}

bool sp_compare_structure_differs(const sp_compare *x)
{
    return x->c.structure_differs;
}

const sp_cost_summary *sp_compare_summary(const sp_compare *x, uint32_t k)
{
    return k < x->c.n ? sp_cost_get_summary(x->p[k].cost) : NULL;
}

void sp_compare_write_json(const sp_compare *x, cm_buf *b)
{
    json_report(&x->c, b);
}

void sp_compare_write_text(const sp_compare *x, cm_buf *b)
{
    text_report(&x->c, b);
}
