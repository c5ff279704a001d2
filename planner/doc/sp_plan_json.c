/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan document writer (see sp_plan_json.h; the `shardplan
 * plan` command is cmd/cmd_plan.c). The plan is written straight into a cm_buf rather than
 * through a jansson tree: it is write-only, and this keeps a million-op plan
 * at one pass over the module. Before propagation the functions are walked
 * once to record every op's position (its path in the graph document), so
 * ops that passes add later are not reported and paths stay those of the
 * input. */
#include "sp_plan_json.h"

#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "sp_cost.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_prop.h"
#include "sp_shard.h"
#include "sp_diag.h"
#include "sp_mlir.h"

void sp_plan_opts_init(sp_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->pass = SP_PLAN_PIPELINE;
}

/* ---- the walk before propagation ---------------------------------------------------- */

typedef struct rec {
    uint32_t op;
    uint32_t parent; /* record of the op owning the region, SP_NONE at function level */
    uint32_t region;
    uint32_t index;  /* position in its block */
    uint32_t func;   /* function number */
} rec;

typedef struct plan {
    sp_module *m;
    const sp_plan_opts *o;
    cm_buf *b;
    rec *recs;
    uint32_t n_recs, cap_recs;
    uint32_t *funcs; /* func.func op ids in module order */
    uint32_t n_funcs;
    uint32_t *op_rec; /* op id -> record, SP_NONE (sized to the ops before the pass) */
    uint32_t n_op_rec;
    bool oom;
    cm_buf *tmp; /* N_TMP scratch buffers, reset before each use: the per-value
                  * texts (sharding, PartitionSpec, rule) cost no allocation */
    struct sh_memo *memo;
} plan;

enum { SH_MEMO_N = 32 };

/* The shardings whose "sharding" member is written: its text at off (len
 * bytes) in txt. */
typedef struct sh_memo_entry {
    const sp_sharding *s;
    size_t off, len;
} sh_memo_entry;

typedef struct sh_memo {
    sh_memo_entry items[SH_MEMO_N];
    uint32_t n;
    cm_buf txt;
    /* the same for rules (keyed by the rule: ops of one shape share it),
     * each escaped for a JSON string's inside */
    struct rule_memo {
        const sp_rule *r;
        size_t off, len;
    } rules[SH_MEMO_N];
    uint32_t n_rules;
} sh_memo;

enum { N_TMP = 3 };

/* Scratch buffer i of p, emptied. */
static cm_buf *scratch(const plan *p, int i)
{
    cm_buf *b = &p->tmp[i];
    cm_buf_reset(b);
    return b;
}

static void rec_push(plan *p, uint32_t op, uint32_t parent, uint32_t region, uint32_t index,
                     uint32_t func)
{
    if (p->n_recs == p->cap_recs) {
        uint32_t cap = p->cap_recs ? p->cap_recs * 2 : 1024;
        rec *r = cm_realloc(p->recs, sizeof(rec) * cap);
        if (r == NULL) {
            p->oom = true;
            return;
        }
        p->recs = r;
        p->cap_recs = cap;
    }
    p->recs[p->n_recs++] = (rec){op, parent, region, index, func};
}

static void walk_block(plan *p, uint32_t blk, uint32_t parent, uint32_t region, uint32_t func)
{
    const sp_block *bl = &p->m->blocks[blk];
    for (uint32_t i = 0; i < bl->n_ops && !p->oom; i++) {
        uint32_t op = bl->ops[i];
        uint32_t me = p->n_recs;
        rec_push(p, op, parent, region, i, func);
        const sp_op *o = &p->m->ops[op];
        for (uint32_t r = 0; r < o->n_regions && !p->oom; r++) {
            if (o->regions[r].n_blocks > 0) {
                walk_block(p, o->regions[r].blocks[0], me, r, func);
            }
        }
    }
}

static void snapshot(plan *p)
{
    sp_module *m = p->m;
    const sp_block *body = &m->blocks[m->body];
    p->funcs = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    p->op_rec = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (p->funcs == NULL || p->op_rec == NULL) {
        p->oom = true;
        return;
    }
    p->n_op_rec = m->n_ops;
    memset(p->op_rec, 0xff, sizeof(uint32_t) * (m->n_ops + 1u));
    for (uint32_t i = 0; i < body->n_ops && !p->oom; i++) {
        uint32_t f = body->ops[i];
        const sp_op *o = &m->ops[f];
        if (o->kind != SP_OP_FUNC_FUNC || o->n_regions != 1 || o->regions[0].n_blocks == 0) {
            continue;
        }
        p->funcs[p->n_funcs] = f;
        walk_block(p, o->regions[0].blocks[0], SP_NONE, 0, p->n_funcs);
        p->n_funcs++;
    }
    for (uint32_t i = 0; i < p->n_recs && !p->oom; i++) {
        p->op_rec[p->recs[i].op] = i;
    }
}

static void func_prefix(const plan *p, uint32_t func, cm_buf *b)
{
    if (p->o->functions_form) {
        cm_buf_puts(b, "/functions/");
        cm_buf_put_i64(b, func);
    }
}

static void rec_path(const plan *p, uint32_t r, cm_buf *b)
{
    const rec *x = &p->recs[r];
    if (x->parent == SP_NONE) {
        func_prefix(p, x->func, b);
    } else {
        rec_path(p, x->parent, b);
        cm_buf_puts(b, "/regions/");
        cm_buf_put_i64(b, x->region);
    }
    cm_buf_puts(b, "/ops/");
    cm_buf_put_i64(b, x->index);
}

/* ---- values ------------------------------------------------------------------------- */

static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    return s->mesh != NULL ? s->mesh : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static int64_t axis_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    int32_t i = mesh != NULL ? sp_mesh_axis_index(mesh, r->name) : -1;
    return i >= 0 ? mesh->axes[i].size : (r->size > 0 ? r->size : 1);
}

static void axis_json(cm_buf *b, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        cm_buf_puts(b, "{\"name\":");
        cm_json_put_cstr(b, r->name);
        cm_buf_puts(b, ",\"pre_size\":");
        cm_buf_put_i64(b, r->pre_size);
        cm_buf_puts(b, ",\"size\":");
        cm_buf_put_i64(b, r->size);
        cm_buf_putc(b, '}');
    } else {
        cm_json_put_cstr(b, r->name);
    }
}

static void axes_json(cm_buf *b, const sp_axis_ref *a, uint32_t n)
{
    cm_buf_putc(b, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        axis_json(b, &a[i]);
    }
    cm_buf_putc(b, ']');
}

static void shape_json(cm_buf *b, const sp_type *t)
{
    cm_buf_putc(b, '[');
    for (uint32_t i = 0; i < t->rank; i++) {
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        if (t->dims[i] == SP_DIM_DYNAMIC) {
            cm_buf_puts(b, "null");
        } else {
            cm_buf_put_i64(b, t->dims[i]);
        }
    }
    cm_buf_putc(b, ']');
}

/* ---- JAX spelling --------------------------------------------------------------------- */

/* A mesh axis name as a Python string literal. */
static void py_str(cm_buf *b, const char *s)
{
    cm_buf_putc(b, '\'');
    for (; *s != '\0'; s++) {
        if (*s == '\'' || *s == '\\') {
            cm_buf_putc(b, '\\');
        }
        cm_buf_putc(b, *s);
    }
    cm_buf_putc(b, '\'');
}

/* s as JAX's NamedSharding spells it, following NamedSharding._to_sdy_sharding
 * backwards: a PartitionSpec entry None is a closed empty dim, an axis name or
 * a tuple of names a closed dim with those axes, P.UNCONSTRAINED an open empty
 * dim, dims past the spec closed and empty, `unreduced=` the axes Shardy
 * reduces by sum. Writes the spelling to spec (P() when nothing is sharded)
 * and returns true when it says exactly what s says. What it cannot say
 * (sub-axes, an open dim that already has axes, replicated axes beside an
 * open dim, max/min unreduced axes, priorities) goes to note; spec then holds
 * the nearest closed spelling, or stays empty when there is none (sub-axes).
 * jit: the spelling is for jax.jit's in_shardings/out_shardings, which reject
 * P.UNCONSTRAINED: an open dim without axes is None there, and not exact. */
static bool pspec_write(const sp_sharding *s, bool jit, cm_buf *spec, cm_buf *note)
{
    bool exact = true, any = false, any_open = false;
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        for (uint32_t a = 0; a < ds->n_axes; a++) {
            if (ds->axes[a].pre_size > 0) {
                cm_buf_printf(note,
                              "%sdim %u uses the sub-axis \"%s\":(%lld)%lld, a part of size %lld "
                              "of mesh axis \"%s\"; a PartitionSpec names whole mesh axes only, "
                              "so no PartitionSpec says this sharding (a mesh that splits \"%s\" "
                              "into separate axes would)",
                              note->len > 0 ? "; " : "", d, ds->axes[a].name,
                              (long long)ds->axes[a].pre_size, (long long)ds->axes[a].size,
                              (long long)ds->axes[a].size, ds->axes[a].name, ds->axes[a].name);
                return false;
            }
        }
        any = any || ds->n_axes > 0 || !ds->is_closed;
        any_open = any_open || !ds->is_closed;
    }
    for (uint32_t a = 0; a < s->n_unreduced; a++) {
        if (s->unreduced[a].pre_size > 0) {
            cm_buf_printf(note, "%sthe unreduced sub-axis \"%s\":(%lld)%lld has no PartitionSpec",
                          note->len > 0 ? "; " : "", s->unreduced[a].name,
                          (long long)s->unreduced[a].pre_size, (long long)s->unreduced[a].size);
            return false;
        }
    }
    cm_buf open_axes, open_empty; /* the dims that are open with axes; open without */
    cm_buf_init(&open_axes);
    cm_buf_init(&open_empty);
    cm_buf_puts(spec, "P(");
    for (uint32_t d = 0; any && d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        cm_buf_puts(spec, d > 0 ? ", " : "");
        if (ds->n_axes == 0) {
            cm_buf_puts(spec, ds->is_closed ? "None" : jit ? "None" : "P.UNCONSTRAINED");
            if (!ds->is_closed && jit) {
                exact = false;
                cm_buf_printf(&open_empty, "%s%u", open_empty.len > 0 ? ", " : "", d);
            }
        } else {
            cm_buf_puts(spec, ds->n_axes > 1 ? "(" : "");
            for (uint32_t a = 0; a < ds->n_axes; a++) {
                cm_buf_puts(spec, a > 0 ? ", " : "");
                py_str(spec, ds->axes[a].name);
            }
            cm_buf_puts(spec, ds->n_axes > 1 ? ")" : "");
            if (!ds->is_closed) {
                exact = false;
                cm_buf_printf(&open_axes, "%s%u", open_axes.len > 0 ? ", " : "", d);
            }
        }
        if (ds->priority >= 0) {
            exact = false;
            cm_buf_printf(note, "%sdim %u has priority p%d, which a PartitionSpec cannot carry",
                          note->len > 0 ? "; " : "", d, (int)ds->priority);
        }
    }
    if (s->n_unreduced > 0) {
        cm_buf_puts(spec, any ? ", unreduced={" : "unreduced={");
        for (uint32_t a = 0; a < s->n_unreduced; a++) {
            cm_buf_puts(spec, a > 0 ? ", " : "");
            py_str(spec, s->unreduced[a].name);
        }
        cm_buf_putc(spec, '}');
        if (s->reduction != SP_REDUCTION_SUM) {
            exact = false;
            cm_buf_printf(note, "%sJAX's unreduced axes reduce by sum, these by %s",
                          note->len > 0 ? "; " : "",
                          s->reduction == SP_REDUCTION_MAX ? "max" : "min");
        }
    }
    cm_buf_putc(spec, ')');
    if (open_axes.len > 0) {
        cm_buf_printf(note,
                      "%sdim%s %s %s open with axes (Shardy {\"x\", ?}: these axes and maybe "
                      "more); a PartitionSpec entry is either fixed axes or P.UNCONSTRAINED, so "
                      "the spelling fixes %s to these axes",
                      note->len > 0 ? "; " : "", strchr(open_axes.data, ',') ? "s" : "",
                      open_axes.data, strchr(open_axes.data, ',') ? "are" : "is",
                      strchr(open_axes.data, ',') ? "them" : "it");
    }
    if (open_empty.len > 0) {
        cm_buf_printf(note,
                      "%sdim%s %s %s open ({?}, P.UNCONSTRAINED), which jax.jit's "
                      "in_shardings/out_shardings do not take: None (replicated) stands for %s",
                      note->len > 0 ? "; " : "", strchr(open_empty.data, ',') ? "s" : "",
                      open_empty.data, strchr(open_empty.data, ',') ? "are" : "is",
                      strchr(open_empty.data, ',') ? "them" : "it");
    }
    note->oom = note->oom || open_axes.oom || open_empty.oom;
    cm_buf_fini(&open_axes);
    cm_buf_fini(&open_empty);
    if (s->n_replicated > 0 && any_open) {
        exact = false;
        cm_buf_printf(note,
                      "%sthe axes replicated={...} may not be added to the open dims, which "
                      "P.UNCONSTRAINED cannot say",
                      note->len > 0 ? "; " : "");
    }
    return exact;
}

/* ,"partition_spec":"P(...)" or null, and its note when there is one. */
static void pspec_json(const plan *p, cm_buf *b, const sp_sharding *s)
{
    cm_buf *spec = scratch(p, 0), *note = scratch(p, 1);
    bool exact = pspec_write(s, false, spec, note);
    cm_buf_puts(b, ",\"partition_spec\":");
    if (exact && spec->data != NULL) {
        cm_json_put_str(b, spec->data, spec->len);
    } else {
        cm_buf_puts(b, "null");
    }
    if (note->len > 0) {
        if (!exact && spec->len > 0) {
            cm_buf_puts(note, "; nearest: ");
            cm_buf_append(note, spec->data, spec->len);
        }
        cm_buf_puts(b, ",\"partition_spec_note\":");
        cm_json_put_str(b, note->data != NULL ? note->data : "", note->len);
    }
    b->oom = b->oom || spec->oom || note->oom;
}

/* "sharding": {...}, "local_shape": [...] for a value of type t. */
/* The local size divisor of dim d of s on mesh: the product of its axes'
 * sizes, INT64_MAX past int64. */
static int64_t dim_divisor(const sp_mesh *mesh, const sp_sharding *s, uint32_t d)
{
    int64_t k = 1;
    for (uint32_t a = 0; a < s->dims[d].n_axes; a++) {
        int64_t z = axis_size(mesh, &s->dims[d].axes[a]);
        if (z <= 0 || !cm_mul_i64(k, z, &k)) {
            return INT64_MAX;
        }
    }
    return k;
}

/* ,"sharding":{...} of s into b. */
static void sharding_part(const plan *p, const sp_sharding *s, cm_buf *b)
{
    cm_buf *txt = scratch(p, 0);
    sp_sharding_print(s, txt);
    cm_buf_puts(b, ",\"sharding\":{\"text\":");
    cm_json_put_str(b, txt->data != NULL ? txt->data : "", txt->len);
    b->oom = b->oom || txt->oom;
    cm_buf_puts(b, ",\"mesh\":");
    if (s->mesh_name != NULL) {
        cm_json_put_cstr(b, s->mesh_name);
    } else {
        cm_buf_puts(b, "null");
    }
    cm_buf_puts(b, ",\"dims\":[");
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        cm_buf_puts(b, d > 0 ? ",{\"axes\":" : "{\"axes\":");
        axes_json(b, ds->axes, ds->n_axes);
        cm_buf_puts(b, ds->is_closed ? ",\"closed\":true" : ",\"closed\":false");
        if (ds->priority >= 0) {
            cm_buf_puts(b, ",\"priority\":");
            cm_buf_put_i64(b, (int)ds->priority);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
    if (s->n_replicated > 0) {
        cm_buf_puts(b, ",\"replicated\":");
        axes_json(b, s->replicated, s->n_replicated);
    }
    if (s->n_unreduced > 0) {
        cm_buf_puts(b, ",\"unreduced\":");
        axes_json(b, s->unreduced, s->n_unreduced);
    }
    pspec_json(p, b, s);
    cm_buf_putc(b, '}');
}

/* "sharding": {...}, "local_shape": [...] for a value of type t. Most
 * values of a module share a few shardings, so each distinct sharding's
 * member is written once into p's memo and copied from there: equal
 * shardings (sp_sharding_equal, the same inlined mesh if any) write the
 * same text. */
static void sharding_json(const plan *p, const sp_sharding *s, const sp_type *t)
{
    cm_buf *b = p->b;
    if (s == NULL) {
        cm_buf_puts(b, ",\"sharding\":null");
        if (t->kind == SP_TYPE_TENSOR) {
            cm_buf_puts(b, ",\"local_shape\":");
            shape_json(b, t);
        }
        return;
    }
    sh_memo *memo = p->memo;
    const sh_memo_entry *e = NULL;
    for (uint32_t i = 0; i < memo->n && e == NULL; i++) {
        const sp_sharding *x = memo->items[i].s;
        e = x == s || (x->mesh == s->mesh && sp_sharding_equal(x, s)) ? &memo->items[i] : NULL;
    }
    if (e == NULL && memo->n < SH_MEMO_N && !memo->txt.oom) {
        sh_memo_entry *w = &memo->items[memo->n];
        w->s = s;
        w->off = memo->txt.len;
        sharding_part(p, s, &memo->txt);
        w->len = memo->txt.len - w->off;
        if (!memo->txt.oom) {
            memo->n++;
            e = w;
        }
    }
    if (e != NULL) {
        cm_buf_append(b, memo->txt.data + e->off, e->len);
    } else {
        sharding_part(p, s, b);
    }
    const sp_mesh *mesh = sharding_mesh(p->m, s);
    if (t->kind != SP_TYPE_TENSOR) {
        return;
    }
    cm_buf_puts(b, ",\"local_shape\":[");
    for (uint32_t d = 0; d < t->rank; d++) {
        if (d > 0) {
            cm_buf_putc(b, ',');
        }
        int64_t x = t->dims[d];
        if (x == SP_DIM_DYNAMIC) {
            cm_buf_puts(b, "null");
            continue;
        }
        int64_t kd = d < s->rank ? dim_divisor(mesh, s, d) : 1;
        cm_buf_put_i64(b, x / kd + (x % kd != 0));
    }
    cm_buf_putc(b, ']');
}

/* An attribute that is a dict of strings, as JSON; false when it is not one. */
static bool string_dict_json(cm_buf *b, const sp_attr *a)
{
    if (a == NULL || a->kind != SP_ATTR_DICT) {
        return false;
    }
    cm_buf_putc(b, '{');
    for (uint32_t i = 0; i < a->u.dict.n; i++) {
        const sp_named_attr *e = &a->u.dict.items[i];
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        cm_json_put_cstr(b, e->name);
        cm_buf_putc(b, ':');
        if (e->value->kind == SP_ATTR_STRING) {
            cm_json_put_str(b, e->value->u.str.s, e->value->u.str.len);
        } else {
            cm_buf_puts(b, "null");
        }
    }
    cm_buf_putc(b, '}');
    return true;
}

static void origin_json(cm_buf *b, const sp_attr *dict)
{
    cm_buf_puts(b, ",\"origin\":");
    if (!string_dict_json(b, dict)) {
        cm_buf_puts(b, "null");
    }
}

static const sp_attr *list_dict(const sp_attr *list, uint32_t i, const char *key)
{
    if (list == NULL || list->kind != SP_ATTR_ARRAY || i >= list->u.arr.n) {
        return NULL;
    }
    const sp_attr *d = list->u.arr.items[i];
    return d != NULL && d->kind == SP_ATTR_DICT ? sp_attrs_get(d->u.dict.items, d->u.dict.n, key)
                                                : NULL;
}

/* A value's entry up to its type. Its name is the graph document's, else
 * the one its MLIR location gives (`loc("params['w1']")`), else for a
 * function output (v SP_NONE) name, its `jax.result_info`. */
static void value_head(const plan *p, uint32_t index, uint32_t v, const sp_type *t,
                       const char *name)
{
    cm_buf *b = p->b;
    cm_buf_puts(b, "{\"index\":");
    cm_buf_put_i64(b, index);
    if (v != SP_NONE && p->o->graph != NULL) {
        name = sp_graph_value_name(p->o->graph, v);
    } else if (v != SP_NONE) {
        name = sp_value_name(p->m, v);
    }
    if (name != NULL) {
        cm_buf_puts(b, ",\"name\":");
        cm_json_put_cstr(b, name);
    }
    const char *logical =
        v != SP_NONE && p->o->graph != NULL ? sp_graph_value_logical_axes(p->o->graph, v) : NULL;
    if (logical != NULL) {
        cm_buf_puts(b, ",\"logical_axes\":");
        cm_buf_puts(b, logical);
    }
    cm_buf_puts(b, ",\"type\":");
    cm_json_put_str(b, t->text, t->text_len);
    if (t->kind == SP_TYPE_TENSOR) {
        cm_buf_puts(b, ",\"shape\":");
        shape_json(b, t);
    }
}

/* ---- diagnostics ------------------------------------------------------------------------- */

typedef struct diag_out {
    cm_buf *b;
    uint32_t n;
} diag_out;

static void diag_begin(diag_out *d, const char *severity, const char *kind)
{
    cm_buf_puts(d->b, d->n++ > 0 ? ",\n  {\"severity\":" : "\n  {\"severity\":");
    cm_json_put_cstr(d->b, severity);
    cm_buf_puts(d->b, ",\"kind\":");
    cm_json_put_cstr(d->b, kind);
}

static void diag_path(const plan *p, diag_out *d, uint32_t op)
{
    uint32_t r = op != SP_NONE && op < p->n_op_rec ? p->op_rec[op] : SP_NONE;
    if (r == SP_NONE) {
        return;
    }
    cm_buf path;
    cm_buf_init(&path);
    rec_path(p, r, &path);
    cm_buf_puts(d->b, ",\"path\":");
    cm_json_put_str(d->b, path.data != NULL ? path.data : "", path.len);
    cm_buf_fini(&path);
}

/* Axes of factor f in tensor mapping tm under sharding s: the dim holding f
 * alone; NULL/0 when f is absent, compound or the tensor is unsharded. */
static bool factor_axes(const sp_tensor_mapping *tm, const sp_sharding *s, uint32_t f,
                        const sp_dim_sharding **out)
{
    for (uint32_t d = 0; d < tm->rank; d++) {
        const sp_dim_mapping *dm = &tm->dims[d];
        if (dm->n_factors == 1 && dm->factors[0] == f) {
            *out = s != NULL && d < s->rank ? &s->dims[d] : NULL;
            return true;
        }
    }
    return false;
}

static bool same_axes(const sp_dim_sharding *a, const sp_dim_sharding *b)
{
    if (a->n_axes != b->n_axes) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_axes; i++) {
        if (strcmp(a->axes[i].name, b->axes[i].name) != 0 ||
            a->axes[i].pre_size != b->axes[i].pre_size ||
            (a->axes[i].pre_size > 0 && a->axes[i].size != b->axes[i].size)) {
            return false;
        }
    }
    return true;
}

/* Factors that two tensors of an op shard along different axes: Shardy
 * resolved the conflict, and the partitioner will reshard one of them. */
static void conflict_diags(const plan *p, diag_out *d, uint32_t op, const sp_rule *rule)
{
    const sp_op *o = &p->m->ops[op];
    if (rule->n_operands != o->n_operands || rule->n_results != o->n_results) {
        return;
    }
    /* each tensor's sharding, looked up once rather than once per factor */
    enum { N_SH = 16 };
    const sp_sharding *shs[N_SH];
    uint32_t n_t = rule->n_operands + rule->n_results;
    for (uint32_t t = 0; t < n_t && t < N_SH; t++) {
        bool is_res = t >= rule->n_operands;
        shs[t] = sp_value_sharding(p->m, is_res ? o->first_result + (t - rule->n_operands)
                                                : o->operands[t]);
    }
    for (uint32_t f = 0; f < rule->n_factors; f++) {
        const sp_dim_sharding *first = NULL;
        uint32_t first_t = 0;
        for (uint32_t t = 0; t < rule->n_operands + rule->n_results; t++) {
            bool is_res = t >= rule->n_operands;
            uint32_t i = is_res ? t - rule->n_operands : t;
            const sp_tensor_mapping *tm = is_res ? &rule->results[i] : &rule->operands[i];
            uint32_t v = is_res ? o->first_result + i : o->operands[i];
            const sp_dim_sharding *ds = NULL;
            const sp_sharding *sh = t < N_SH ? shs[t] : sp_value_sharding(p->m, v);
            if (!factor_axes(tm, sh, f, &ds) || ds == NULL || ds->n_axes == 0) {
                continue;
            }
            if (first == NULL) {
                first = ds;
                first_t = t;
                continue;
            }
            if (same_axes(first, ds)) {
                continue;
            }
            diag_begin(d, "warning", "conflict");
            diag_path(p, d, op);
            cm_buf msg;
            cm_buf_init(&msg);
            cm_buf_printf(&msg, "%s: factor %u is sharded along ", o->name, f);
            for (uint32_t k = 0; k < first->n_axes; k++) {
                sp_axis_ref_print(&first->axes[k], &msg);
                cm_buf_puts(&msg, k + 1 < first->n_axes ? "," : "");
            }
            cm_buf_printf(&msg, " in %s %u but along ", first_t < rule->n_operands ? "operand" : "result",
                          first_t < rule->n_operands ? first_t : first_t - rule->n_operands);
            for (uint32_t k = 0; k < ds->n_axes; k++) {
                sp_axis_ref_print(&ds->axes[k], &msg);
                cm_buf_puts(&msg, k + 1 < ds->n_axes ? "," : "");
            }
            cm_buf_printf(&msg, " in %s %u; resolved by resharding", is_res ? "result" : "operand",
                          i);
            cm_buf_puts(d->b, ",\"message\":");
            cm_json_put_str(d->b, msg.data != NULL ? msg.data : "", msg.len);
            cm_buf_fini(&msg);
            cm_buf_putc(d->b, '}');
            break;
        }
    }
}

/* jax.export needs every input and output of a function on one mesh. */
static void mesh_diags(const plan *p, diag_out *d, uint32_t fi)
{
    uint32_t f = p->funcs[fi];
    const sp_type *ft = sp_func_type(p->m, f);
    const sp_block *entry = &p->m->blocks[p->m->ops[f].regions[0].blocks[0]];
    const char *first = NULL, *other = NULL;
    uint32_t n = entry->n_args + (ft != NULL ? ft->n_results : 0);
    for (uint32_t i = 0; i < n && other == NULL; i++) {
        const sp_sharding *s = i < entry->n_args
                                   ? sp_value_sharding(p->m, entry->first_arg + i)
                                   : sp_func_result_sharding(p->m, f, i - entry->n_args);
        if (s == NULL || s->mesh_name == NULL) {
            continue;
        }
        if (first == NULL) {
            first = s->mesh_name;
        } else if (strcmp(first, s->mesh_name) != 0) {
            other = s->mesh_name;
        }
    }
    if (other == NULL) {
        return;
    }
    const sp_attr *nm = sp_op_attr(p->m, f, "sym_name");
    diag_begin(d, "warning", "mesh_mismatch");
    if (p->o->functions_form) {
        cm_buf_printf(d->b, ",\"path\":\"/functions/%u\"", fi);
    }
    cm_buf msg;
    cm_buf_init(&msg);
    cm_buf_printf(&msg,
                  "inputs and outputs of @%s are on different meshes (@%s and @%s); jax.export "
                  "requires them on one mesh",
                  nm != NULL && nm->kind == SP_ATTR_STRING ? nm->u.str.s : "?", first, other);
    cm_buf_puts(d->b, ",\"message\":");
    cm_json_put_str(d->b, msg.data != NULL ? msg.data : "", msg.len);
    cm_buf_fini(&msg);
    cm_buf_putc(d->b, '}');
}

/* ---- the document -------------------------------------------------------------------------- */

static void write_meshes(const plan *p)
{
    cm_buf *b = p->b;
    const sp_block *body = &p->m->blocks[p->m->body];
    bool first = true;
    cm_buf_puts(b, "\"meshes\":[");
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *o = &p->m->ops[body->ops[i]];
        const sp_attr *nm = sp_attrs_get(o->attrs, o->n_attrs, "sym_name");
        const sp_attr *ma = sp_attrs_get(o->attrs, o->n_attrs, "mesh");
        if (o->kind != SP_OP_SDY_MESH || nm == NULL || ma == NULL || ma->kind != SP_ATTR_MESH) {
            continue;
        }
        const sp_mesh *mesh = ma->u.mesh;
        cm_buf_puts(b, first ? "\n  {\"name\":" : ",\n  {\"name\":");
        first = false;
        cm_json_put_str(b, nm->u.str.s, nm->u.str.len);
        cm_buf_puts(b, ",\"axes\":[");
        for (uint32_t a = 0; a < mesh->n_axes; a++) {
            cm_buf_puts(b, a > 0 ? ",{\"name\":" : "{\"name\":");
            cm_json_put_cstr(b, mesh->axes[a].name);
            cm_buf_puts(b, ",\"size\":");
            cm_buf_put_i64(b, mesh->axes[a].size);
            cm_buf_putc(b, '}');
        }
        cm_buf_puts(b, "],\"devices\":");
        cm_buf_put_i64(b, sp_mesh_size(mesh));
        if (mesh->n_device_ids > 0) {
            cm_buf_puts(b, ",\"device_ids\":[");
            for (uint32_t k = 0; k < mesh->n_device_ids; k++) {
                if (k > 0) {
                    cm_buf_putc(b, ',');
                }
                cm_buf_put_i64(b, mesh->device_ids[k]);
            }
            cm_buf_putc(b, ']');
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\n");
}

static void write_op(const plan *p, uint32_t r)
{
    cm_buf *b = p->b;
    uint32_t op = p->recs[r].op;
    const sp_op *o = &p->m->ops[op];
    cm_buf_puts(b, "{\"path\":\"");
    rec_path(p, r, b);
    cm_buf_puts(b, "\",\"op\":");
    cm_json_put_cstr(b, o->name);
    /* where the producer says the op comes from: JAX's name stack and the
     * Python line (`"jit(f)/dot_general"("model.py":14:9)`) */
    const char *lname = sp_loc_name(o->where);
    if (lname != NULL) {
        cm_buf_puts(b, ",\"loc_name\":");
        cm_json_put_cstr(b, lname);
    }
    char src[512];
    if (sp_op_source(p->m, op, src, sizeof src)) {
        cm_buf_puts(b, ",\"source\":");
        cm_json_put_cstr(b, src);
    }
    /* the three sdy.* attributes written, in one pass over the op's
     * attributes (the first of each name, as sp_attrs_get finds) */
    const sp_attr *rule = NULL, *edges = NULL, *origins = NULL;
    for (uint32_t i = 0; i < o->n_attrs; i++) {
        const char *n = o->attrs[i].name;
        if (!(n[0] == 's' && n[1] == 'd' && n[2] == 'y' && n[3] == '.')) {
            continue;
        }
        if (rule == NULL && strcmp(n + 4, "sharding_rule") == 0) {
            rule = o->attrs[i].value;
        } else if (edges == NULL && strcmp(n + 4, "propagation_edges") == 0) {
            edges = o->attrs[i].value;
        } else if (origins == NULL && strcmp(n + 4, "sharding_origins") == 0) {
            origins = o->attrs[i].value;
        }
    }
    if (rule != NULL && rule->kind == SP_ATTR_RULE) {
        cm_buf_puts(b, ",\"rule\":\"#sdy.op_sharding_rule");
        sh_memo *memo = p->memo;
        const struct rule_memo *e = NULL;
        for (uint32_t i = 0; i < memo->n_rules && e == NULL; i++) {
            e = memo->rules[i].r == rule->u.rule ? &memo->rules[i] : NULL;
        }
        if (e != NULL) {
            cm_buf_append(b, memo->txt.data + e->off, e->len);
        } else {
            cm_buf *txt = scratch(p, 0);
            sp_rule_print(rule->u.rule, txt);
            if (txt->data != NULL) {
                /* rule text has quotes only inside factor names, which are plain letters */
                cm_buf *txt2 = scratch(p, 1);
                cm_json_put_str(txt2, txt->data, txt->len);
                if (txt2->data != NULL) {
                    cm_buf_append(b, txt2->data + 1, txt2->len - 2);
                    if (memo->n_rules < SH_MEMO_N && !memo->txt.oom && !txt2->oom) {
                        struct rule_memo *w = &memo->rules[memo->n_rules];
                        w->r = rule->u.rule;
                        w->off = memo->txt.len;
                        cm_buf_append(&memo->txt, txt2->data + 1, txt2->len - 2);
                        w->len = memo->txt.len - w->off;
                        memo->n_rules += !memo->txt.oom;
                    }
                }
            }
        }
        cm_buf_putc(b, '"');
    }
    if (edges != NULL && edges->kind == SP_ATTR_OPAQUE) {
        cm_buf_puts(b, ",\"edges\":");
        cm_json_put_cstr(b, edges->u.opaque.text);
    }
    cm_buf_puts(b, ",\"results\":[");
    for (uint32_t i = 0; i < o->n_results; i++) {
        uint32_t v = o->first_result + i;
        const sp_type *t = sp_value_type(p->m, v);
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        value_head(p, i, v, t, NULL);
        sharding_json(p, sp_value_sharding(p->m, v), t);
        const sp_attr *od = origins;
        if (od != NULL && od->kind == SP_ATTR_ARRAY) {
            od = i < od->u.arr.n ? od->u.arr.items[i] : NULL;
        }
        origin_json(b, od);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "]}");
}

/* The Python variable a snippet names mesh by: its symbol when that is an
 * identifier, else `mesh`. */
static void mesh_var(cm_buf *b, const char *name)
{
    bool ok = name != NULL && name[0] != '\0' && !(name[0] >= '0' && name[0] <= '9');
    for (const char *c = name; ok && *c != '\0'; c++) {
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '_';
    }
    cm_buf_puts(b, ok ? name : "mesh");
}

/* A comment's text on one line. */
static void py_comment(cm_buf *b, const char *s)
{
    for (; *s != '\0'; s++) {
        cm_buf_putc(b, *s == '\n' || *s == '\r' ? ' ' : *s);
    }
}

/* One entry of an in_shardings/out_shardings tuple: `NamedSharding(mesh,
 * P(...)),  # name`; a value Shardy left unsharded is replicated, P(); a
 * sharding with no PartitionSpec is None with a comment saying why. */
static void snippet_entry(const plan *p, cm_buf *b, const sp_sharding *s, const char *fallback_mesh,
                          const char *name, const char *kind, uint32_t i, const char *logical)
{
    cm_buf *specp = scratch(p, 0), *notep = scratch(p, 1);
    cm_buf spec = *specp, note = *notep; /* moved back to the scratch slots at the end */
    bool exact = s != NULL ? pspec_write(s, true, &spec, &note) : true;
    const char *mesh = s != NULL && s->mesh_name != NULL ? s->mesh_name : fallback_mesh;
    cm_buf_puts(b, "    ");
    if (spec.len == 0 && s != NULL) {
        cm_buf_puts(b, "None,");
    } else if (mesh == NULL && (s == NULL || s->mesh == NULL)) {
        cm_buf_puts(b, "None,");
    } else {
        cm_buf_puts(b, "NamedSharding(");
        mesh_var(b, mesh);
        cm_buf_puts(b, ", ");
        if (spec.len > 0) {
            cm_buf_append(b, spec.data, spec.len);
        } else {
            cm_buf_puts(b, "P()");
        }
        cm_buf_puts(b, "),");
    }
    cm_buf_puts(b, "  # ");
    if (name != NULL) {
        py_comment(b, name);
    } else {
        cm_buf_printf(b, "%s %u", kind, i);
    }
    if (logical != NULL) {
        cm_buf_puts(b, " ");
        sp_graph_logical_axes_py(logical, b);
    }
    if (s == NULL) {
        cm_buf_puts(b, ": unsharded (replicated)");
    } else if (spec.len == 0) {
        cm_buf_puts(b, ": no PartitionSpec says this sharding (see partition_spec_note)");
    } else if (!exact) {
        /* inexact for jit alone: open dims without axes, which the
         * document's partition_spec says as P.UNCONSTRAINED */
        cm_buf doc_spec, doc_note;
        cm_buf_init(&doc_spec);
        cm_buf_init(&doc_note);
        bool doc_exact = pspec_write(s, false, &doc_spec, &doc_note);
        cm_buf_puts(b, doc_exact ? ": its open dims (P.UNCONSTRAINED) are None here, as jax.jit's "
                                   "shardings take no P.UNCONSTRAINED"
                                 : ": nearest spelling, not exact (see partition_spec_note)");
        cm_buf_fini(&doc_spec);
        cm_buf_fini(&doc_note);
    }
    cm_buf_putc(b, '\n');
    b->oom = b->oom || spec.oom || note.oom;
    *specp = spec;
    *notep = note;
}

/* ,"in_shardings":"..." and ,"out_shardings":"..." of function fi: the
 * tuples a user pastes into jax.jit (from jax.sharding import NamedSharding,
 * PartitionSpec as P), one entry per input or output. */
static void snippets_json(const plan *p, uint32_t fi)
{
    const sp_module *m = p->m;
    uint32_t f = p->funcs[fi];
    const sp_type *ft = sp_func_type(m, f);
    const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
    uint32_t n_out = ft != NULL ? ft->n_results : 0;
    const char *mesh = NULL;
    for (uint32_t i = 0; i < entry->n_args + n_out && mesh == NULL; i++) {
        const sp_sharding *s = i < entry->n_args ? sp_value_sharding(m, entry->first_arg + i)
                                                 : sp_func_result_sharding(m, f, i - entry->n_args);
        mesh = s != NULL ? s->mesh_name : NULL;
    }
    for (int side = 0; side < 2; side++) {
        uint32_t n = side == 0 ? entry->n_args : n_out;
        cm_buf *codep = scratch(p, 2);
        cm_buf code = *codep; /* moved back to its slot below */
        cm_buf_puts(&code, side == 0 ? "in_shardings = (\n" : "out_shardings = (\n");
        if (n > 1) {
            /* the module's inputs are the jitted function's leaves */
            cm_buf_printf(&code,
                          "    # one per flattened %s, in jax.tree_util.tree_leaves order; for "
                          "pytree %s: jax.tree_util.tree_unflatten(treedef, %s_shardings)\n",
                          side == 0 ? "input" : "output", side == 0 ? "arguments" : "results",
                          side == 0 ? "in" : "out");
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t v = side == 0 ? entry->first_arg + i : SP_NONE;
            const char *name = NULL, *logical = NULL;
            if (side == 0) {
                name =
                    p->o->graph != NULL ? sp_graph_value_name(p->o->graph, v) : sp_value_name(m, v);
                logical = p->o->graph != NULL ? sp_graph_value_logical_axes(p->o->graph, v) : NULL;
            } else {
                name = sp_func_result_name(m, f, i);
            }
            snippet_entry(p, &code,
                          side == 0 ? sp_value_sharding(m, v) : sp_func_result_sharding(m, f, i),
                          mesh, name, side == 0 ? "input" : "output", i, logical);
        }
        cm_buf_puts(&code, ")");
        cm_buf_puts(p->b, side == 0 ? ",\n   \"in_shardings\":" : ",\n   \"out_shardings\":");
        cm_json_put_str(p->b, code.data != NULL ? code.data : "", code.len);
        p->b->oom = p->b->oom || code.oom;
        *codep = code;
    }
}

static void write_function(const plan *p, uint32_t fi, uint32_t *next_rec)
{
    cm_buf *b = p->b;
    uint32_t f = p->funcs[fi];
    const sp_module *m = p->m;
    const sp_attr *nm = sp_op_attr(m, f, "sym_name");
    const sp_type *ft = sp_func_type(m, f);
    const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
    const sp_attr *arg_attrs = sp_op_attr(m, f, "arg_attrs");
    const sp_attr *res_attrs = sp_op_attr(m, f, "res_attrs");
    cm_buf_puts(b, fi > 0 ? ",\n  {\"name\":" : "\n  {\"name\":");
    if (nm != NULL && nm->kind == SP_ATTR_STRING) {
        cm_json_put_str(b, nm->u.str.s, nm->u.str.len);
    } else {
        cm_buf_puts(b, "null");
    }
    cm_buf_puts(b, ",\"path\":\"");
    func_prefix(p, fi, b);
    cm_buf_puts(b, "\",\n   \"inputs\":[");
    for (uint32_t i = 0; i < entry->n_args; i++) {
        uint32_t v = entry->first_arg + i;
        const sp_type *t = sp_value_type(m, v);
        cm_buf_puts(b, i > 0 ? ",\n    " : "\n    ");
        value_head(p, i, v, t, NULL);
        sharding_json(p, sp_value_sharding(m, v), t);
        origin_json(b, list_dict(arg_attrs, i, "sdy.sharding_origins"));
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\n   \"ops\":[");
    uint32_t k = 0;
    while (*next_rec < p->n_recs && p->recs[*next_rec].func == fi) {
        cm_buf_puts(b, k++ > 0 ? ",\n    " : "\n    ");
        write_op(p, (*next_rec)++);
    }
    cm_buf_puts(b, "],\n   \"outputs\":[");
    for (uint32_t i = 0; ft != NULL && i < ft->n_results; i++) {
        const sp_type *t = &m->types[ft->results[i]];
        cm_buf_puts(b, i > 0 ? ",\n    " : "\n    ");
        value_head(p, i, SP_NONE, t, sp_func_result_name(m, f, i));
        sharding_json(p, sp_func_result_sharding(m, f, i), t);
        origin_json(b, list_dict(res_attrs, i, "sdy.sharding_origins"));
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
    snippets_json(p, fi);
    cm_buf_putc(b, '}');
}

cm_status sp_plan_run(sp_module *m, const sp_plan_opts *o, cm_buf *out, cm_error *err)
{
    plan p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.o = o;
    p.b = out;
    cm_buf tmp[N_TMP];
    for (int i = 0; i < N_TMP; i++) {
        cm_buf_init(&tmp[i]);
    }
    p.tmp = tmp;
    sh_memo memo;
    memo.n = 0;
    memo.n_rules = 0;
    cm_buf_init(&memo.txt);
    p.memo = &memo;
    cm_status st = CM_OK;
    sp_diags diags;
    sp_diags_init(&diags);
    /* the content hash: the module as MLIR text, then the pass */
    char hex[2 * CM_SHA256_LEN + 1];
    double t0 = cm_now(), t1 = t0, t2 = t0;
    if (o->input_sha256 != NULL) {
        memcpy(hex, o->input_sha256, sizeof hex - 1);
        hex[sizeof hex - 1] = '\0';
    } else {
        cm_buf txt;
        cm_buf_init(&txt);
        sp_print_opts popts = {false, false};
        sp_mlir_print(m, &popts, &txt);
        cm_buf_puts(&txt, "\n// pass: ");
        cm_buf_puts(&txt, sp_plan_pass_name(o->pass));
        if (txt.oom) {
            cm_buf_fini(&txt);
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory hashing the module");
        }
        cm_sha256_hex(txt.data, txt.len, hex);
        cm_buf_fini(&txt);
    }
    snapshot(&p);
    if (p.oom) {
        st = cm_error_oom(err);
        goto out;
    }
    t1 = cm_now();
    st = sp_input_propagate(m, o->pass, o->custom, true, o->cancel, &diags, err);
    if (st != CM_OK) {
        goto out;
    }
    t2 = cm_now();
    cm_buf_puts(out, "{\"format\":\"shardplan.plan/v1\",\"input_sha256\":\"");
    cm_buf_puts(out, hex);
    cm_buf_puts(out, "\",\"pass\":\"");
    cm_buf_puts(out, sp_plan_pass_name(o->pass));
    cm_buf_puts(out, "\",\n");
    write_meshes(&p);
    cm_buf_puts(out, "\"functions\":[");
    uint32_t next = 0;
    for (uint32_t fi = 0; fi < p.n_funcs; fi++) {
        write_function(&p, fi, &next);
    }
    cm_buf_puts(out, "],\n\"diagnostics\":[");
    diag_out d = {out, 0};
    for (uint32_t i = 0; i < diags.n; i++) {
        const sp_diag *x = &diags.items[i];
        bool cc = x->op != SP_NONE && x->op < m->n_ops && m->ops[x->op].kind == SP_OP_CUSTOM_CALL;
        diag_begin(&d, sp_diag_sev_name(x->sev), cc ? "custom_call_without_rule" : "propagation");
        diag_path(&p, &d, x->op);
        cm_buf_puts(out, ",\"message\":");
        cm_json_put_cstr(out, x->msg != NULL ? x->msg : "");
        cm_buf_putc(out, '}');
    }
    for (uint32_t r = 0; r < p.n_recs; r++) {
        const sp_op *op = &m->ops[p.recs[r].op];
        const sp_attr *rule = sp_attrs_get(op->attrs, op->n_attrs, "sdy.sharding_rule");
        if (rule != NULL && rule->kind == SP_ATTR_RULE) {
            conflict_diags(&p, &d, p.recs[r].op, rule->u.rule);
        }
    }
    for (uint32_t fi = 0; fi < p.n_funcs; fi++) {
        mesh_diags(&p, &d, fi);
    }
    cm_buf_puts(out, d.n > 0 ? "\n]" : "]");
    sp_cost_plan_section(m, o->custom, out); /* ,"cost":{...} (sp_cost.h) */
    cm_buf_puts(out, "}\n");
    if (out->oom || diags.oom) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory writing the plan");
    }
    if (o->timing != NULL) {
        o->timing->hash_s = t1 - t0;
        o->timing->pass_s = t2 - t1;
        o->timing->write_s = cm_now() - t2;
    }
out:
    sp_diags_fini(&diags);
    cm_free(p.recs);
    cm_free(p.funcs);
    cm_free(p.op_rec);
    for (int i = 0; i < N_TMP; i++) {
        cm_buf_fini(&tmp[i]);
    }
    cm_buf_fini(&memo.txt);
    return st;
}

cm_status sp_plan_graph_json(const char *text, size_t len, sp_plan_pass pass, cm_buf *out,
                             cm_error *err)
{
    sp_graph *g = NULL;
    cm_status st = sp_graph_decode(text, len, NULL, &g, err);
    if (st != CM_OK) {
        return st;
    }
    sp_plan_opts o;
    sp_plan_opts_init(&o);
    o.pass = pass;
    o.graph = g;
    o.custom = sp_graph_custom_rules(g);
    o.functions_form = sp_graph_has_functions(g);
    st = sp_plan_run(sp_graph_module(g), &o, out, err);
    sp_graph_destroy(g);
    return st;
}
