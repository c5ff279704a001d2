/* SPDX-License-Identifier: Apache-2.0
 * planner: the advisor's what-if (sp_whatif.h, docs/advisor.md "What-if").
 * Edits are resolved against the input as given (op paths of the plan
 * document), then applied to the module. The run propagates the original
 * (import passes, propagation, export passes), applies the edits to a second
 * copy, runs its import passes, and re-propagates only the ops the edits can
 * reach.
 *
 * Why the region is exact: propagation only reads and writes the shardings
 * of an op's own tensors, and a tensor whose sharding has every dimension
 * closed never changes (a closed dimension takes no axes; hidden priority
 * dimensions are closed too). The region is the closure of the edited
 * tensors over "tensor -> its def and users -> their tensors", not passing
 * through such fixed tensors. Ops outside meet region ops only through fixed
 * tensors, so in a full run the two parts evolve independently: the
 * worklist is a LIFO stack with de-duplication, and the subsequence of
 * region ops it pops is the same whether outside ops are interleaved or not.
 * The outside, identical to the original's outside (same annotations, same
 * rounds of user priority, which we check), ends at the original's fixed
 * point, which we copy. Function results are tensors like values (a return
 * op is their def); a func.call has no sharding rule, so nothing crosses it.
 * Modules where ops share shardings beyond their own tensors (while/case/if,
 * manual and named computations, sharding groups) or whose structure after
 * the import passes cannot be matched to the original are re-propagated in
 * full. */
#include "sp_whatif.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_collectives.h"
#include "sp_graph_json.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_profile_json.h"
#include "sp_reshard.h"
#include "sp_rules.h"
#include "sp_diag.h"
#include "sp_mlir.h"

/* ---- edit lists ------------------------------------------------------------------------ */

static const char *const edit_kind_names[SP_EDIT_N_KINDS] = {
    "constrain", "unconstrain", "set_sharding", "barrier", "unbarrier", "rule", "custom_rule"};

const char *sp_edit_kind_name(sp_edit_kind k)
{
    return (unsigned)k < SP_EDIT_N_KINDS ? edit_kind_names[k] : "?";
}

bool sp_edit_kind_parse(const char *name, sp_edit_kind *out)
{
    for (int k = 0; k < SP_EDIT_N_KINDS; k++) {
        if (strcmp(name, edit_kind_names[k]) == 0) {
            *out = (sp_edit_kind)k;
            return true;
        }
    }
    return false;
}

void sp_edit_list_init(sp_edit_list *l)
{
    memset(l, 0, sizeof *l);
    cm_arena_init(&l->arena, 4096);
}

void sp_edit_list_fini(sp_edit_list *l)
{
    cm_free(l->items);
    cm_arena_fini(&l->arena);
    memset(l, 0, sizeof *l);
}

static bool copy_str(cm_arena *a, const char **s)
{
    if (*s == NULL) {
        return true;
    }
    *s = cm_arena_strdup(a, *s);
    return *s != NULL;
}

static bool copy_names(cm_arena *a, const char ***names, uint32_t n)
{
    if (*names == NULL) {
        return true;
    }
    const char **c = cm_arena_alloc(a, sizeof(char *) * (n + 1u));
    if (c == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        c[i] = (*names)[i];
        if (!copy_str(a, &c[i])) {
            return false;
        }
    }
    *names = c;
    return true;
}

cm_status sp_edit_list_add(sp_edit_list *l, const sp_edit *e, cm_error *err)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap < 8 ? 8 : l->cap * 2;
        sp_edit *items = cm_realloc(l->items, sizeof *items * cap);
        if (items == NULL) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory adding an edit");
        }
        l->items = items;
        l->cap = cap;
    }
    sp_edit c = *e;
    cm_arena *a = &l->arena;
    if (!copy_str(a, &c.value.function) || !copy_str(a, &c.value.op) || !copy_str(a, &c.op) ||
        !copy_str(a, &c.sharding) || !copy_str(a, &c.direction) || !copy_str(a, &c.rule) ||
        !copy_str(a, &c.target) || !copy_names(a, &c.reduction, c.n_reduction) ||
        !copy_names(a, &c.need_replication, c.n_need_replication)) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory adding an edit");
    }
    snprintf(c.path, sizeof c.path, "/edits/%u", l->n);
    l->items[l->n++] = c;
    return CM_OK;
}

static bool parse_u32(const char *s, const char **end, uint32_t *out)
{
    if (!isdigit((unsigned char)*s)) {
        return false;
    }
    uint64_t v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v >= UINT32_MAX) {
            return false;
        }
        s++;
    }
    *end = s;
    *out = (uint32_t)v;
    return true;
}

cm_status sp_vref_parse_text(const char *text, cm_arena *a, sp_vref *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    const char *s = text;
    if (*s == '@') {
        const char *colon = strchr(s, ':');
        if (colon == NULL || colon == s + 1) {
            return cm_error_set(err, CM_EINVAL, "", "'%s': expected @FUNCTION: before the value",
                                text);
        }
        out->function = cm_arena_strndup(a, s + 1, (size_t)(colon - s - 1));
        if (out->function == NULL) {
            return cm_error_oom(err);
        }
        s = colon + 1;
    }
    const char *end = NULL;
    if (strncmp(s, "in:", 3) == 0 || strncmp(s, "out:", 4) == 0) {
        out->kind = s[0] == 'i' ? SP_VREF_INPUT : SP_VREF_OUTPUT;
        s += out->kind == SP_VREF_INPUT ? 3 : 4;
        if (!parse_u32(s, &end, &out->index) || *end != '\0') {
            return cm_error_set(err, CM_EINVAL, "", "'%s': expected a number after ':'", text);
        }
        return CM_OK;
    }
    if (*s != '/') {
        return cm_error_set(err, CM_EINVAL, "",
                            "'%s': expected in:N, out:N, /ops/N or /ops/N#RESULT", text);
    }
    out->kind = SP_VREF_OP;
    const char *hash = strchr(s, '#');
    size_t plen = hash != NULL ? (size_t)(hash - s) : strlen(s);
    if (hash != NULL && (!parse_u32(hash + 1, &end, &out->result) || *end != '\0')) {
        return cm_error_set(err, CM_EINVAL, "", "'%s': expected a result number after '#'", text);
    }
    out->op = cm_arena_strndup(a, s, plen);
    return out->op == NULL ? cm_error_oom(err) : CM_OK;
}

void sp_vref_write_json(const sp_vref *v, cm_buf *b)
{
    cm_buf_putc(b, '{');
    if (v->kind == SP_VREF_OP) {
        cm_buf_puts(b, "\"op\":");
        sp_advise_put_jstr(b, v->op);
        cm_buf_printf(b, ",\"result\":%u", v->result);
    } else {
        cm_buf_printf(b, "\"%s\":%u", v->kind == SP_VREF_INPUT ? "input" : "output", v->index);
    }
    if (v->function != NULL) {
        cm_buf_puts(b, ",\"function\":");
        sp_advise_put_jstr(b, v->function);
    }
    cm_buf_putc(b, '}');
}

static void put_names(cm_buf *b, const char *key, const char *const *names, uint32_t n)
{
    if (names == NULL) {
        return;
    }
    cm_buf_printf(b, ",\"%s\":[", key);
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        sp_advise_put_jstr(b, names[i]);
    }
    cm_buf_putc(b, ']');
}

void sp_edit_write_json(const sp_edit *e, cm_buf *b)
{
    cm_buf_puts(b, "{\"kind\":");
    sp_advise_put_jstr(b, sp_edit_kind_name(e->kind));
    switch (e->kind) {
    case SP_EDIT_CONSTRAIN:
    case SP_EDIT_SET_SHARDING:
        cm_buf_puts(b, ",\"value\":");
        sp_vref_write_json(&e->value, b);
        cm_buf_puts(b, ",\"sharding\":");
        if (e->sharding != NULL) {
            sp_advise_put_jstr(b, e->sharding);
        } else {
            cm_buf_puts(b, "null");
        }
        break;
    case SP_EDIT_BARRIER:
        cm_buf_puts(b, ",\"value\":");
        sp_vref_write_json(&e->value, b);
        cm_buf_puts(b, ",\"direction\":");
        sp_advise_put_jstr(b, e->direction != NULL ? e->direction : "BOTH");
        break;
    case SP_EDIT_UNCONSTRAIN:
    case SP_EDIT_UNBARRIER:
        cm_buf_puts(b, ",\"op\":");
        sp_advise_put_jstr(b, e->op);
        break;
    case SP_EDIT_RULE:
    case SP_EDIT_CUSTOM_RULE:
        cm_buf_puts(b, e->kind == SP_EDIT_RULE ? ",\"op\":" : ",\"target\":");
        sp_advise_put_jstr(b, e->kind == SP_EDIT_RULE ? e->op : e->target);
        cm_buf_puts(b, ",\"rule\":");
        sp_advise_put_jstr(b, e->rule);
        put_names(b, "reduction", e->reduction, e->n_reduction);
        put_names(b, "need_replication", e->need_replication, e->n_need_replication);
        break;
    default:
        break;
    }
    cm_buf_putc(b, '}');
}

/* ---- small vectors ----------------------------------------------------------------------- */

typedef struct u32v {
    uint32_t *v;
    uint32_t n, cap;
    bool oom;
} u32v;

static void u32v_push(u32v *x, uint32_t id)
{
    if (x->n == x->cap) {
        uint32_t cap = x->cap < 16 ? 16 : x->cap * 2;
        uint32_t *v = cm_realloc(x->v, sizeof(uint32_t) * cap);
        if (v == NULL) {
            x->oom = true;
            return;
        }
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = id;
}

/* ---- a decoded input ------------------------------------------------------------------- */

typedef struct src {
    sp_input in;  /* the input as read (owns m, g and a rules document) */
    sp_module *m; /* in.m */
    sp_graph *g;  /* in.g, or NULL */
    const sp_custom_rules *custom; /* in.custom: the rules in force, may be NULL */
    bool functions_form; /* op paths /functions/F/ops/I */
    uint32_t *funcs;     /* func.func op ids in module order (heap) */
    uint32_t n_funcs;
    uint32_t n_ops0, n_values0; /* before any edit or pass */
    uint32_t *pos;              /* per original op: index in its block (heap) */
    u32v walk;                  /* original ops in plan order */
    /* filled by apply_edits */
    u32v seed_ops, seed_vals, seed_outs; /* seed_outs: (func op, result number) pairs */
    uint8_t *removed;                    /* per original op: removed by an edit */
    uint32_t first_new_op, end_new_op;   /* ops created by edits */
} src;

static void src_destroy(src *s)
{
    if (s == NULL) {
        return;
    }
    sp_input_fini(&s->in);
    cm_free(s->funcs);
    cm_free(s->pos);
    cm_free(s->walk.v);
    cm_free(s->seed_ops.v);
    cm_free(s->seed_vals.v);
    cm_free(s->seed_outs.v);
    cm_free(s->removed);
    cm_free(s);
}

static void walk_block(src *s, uint32_t blk)
{
    const sp_block *b = &s->m->blocks[blk];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        uint32_t id = b->ops[i];
        s->pos[id] = i;
        u32v_push(&s->walk, id);
        const sp_op *op = &s->m->ops[id];
        for (uint32_t r = 0; r < op->n_regions; r++) {
            if (op->regions[r].n_blocks > 0) {
                walk_block(s, op->regions[r].blocks[0]);
            }
        }
    }
}

/* Reads the input through the loader with in_opts' rules and limits, before
 * propagation (NULL: the defaults). */
static cm_status src_load(const char *text, size_t len, const sp_input_opts *in_opts, src **out,
                          cm_error *err)
{
    *out = NULL;
    src *s = cm_calloc(1, sizeof *s);
    if (s == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory reading the module");
    }
    sp_input_opts io;
    if (in_opts != NULL) {
        io = *in_opts;
    } else {
        sp_input_opts_init(&io);
    }
    io.propagate = false; /* edits resolve against the input as given */
    io.record_edges = false;
    cm_status st = sp_input_read(text, len, &io, &s->in, err);
    if (st == CM_OK) {
        s->m = s->in.m;
        s->g = s->in.g;
        s->custom = s->in.custom;
        if (s->g != NULL) {
            s->functions_form = s->in.functions_form;
        }
    }
    if (st != CM_OK) {
        src_destroy(s);
        return st;
    }
    sp_module *m = s->m;
    const sp_block *body = &m->blocks[m->body];
    s->funcs = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    s->pos = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    s->removed = cm_calloc(m->n_ops + 1u, 1);
    if (s->funcs == NULL || s->pos == NULL || s->removed == NULL) {
        src_destroy(s);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory reading the module");
    }
    memset(s->pos, 0xff, sizeof(uint32_t) * (m->n_ops + 1u));
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t f = body->ops[i];
        const sp_op *o = &m->ops[f];
        if (o->kind != SP_OP_FUNC_FUNC || o->n_regions != 1 || o->regions[0].n_blocks == 0) {
            continue;
        }
        s->pos[f] = s->n_funcs;
        s->funcs[s->n_funcs++] = f;
        walk_block(s, o->regions[0].blocks[0]);
    }
    if (s->g == NULL) {
        s->functions_form = s->n_funcs != 1;
    }
    s->n_ops0 = m->n_ops;
    s->n_values0 = m->n_values;
    if (s->walk.oom) {
        src_destroy(s);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory reading the module");
    }
    *out = s;
    return CM_OK;
}

/* The plan document's path of original op `op`. */
static void op_path(const src *s, uint32_t op, cm_buf *b)
{
    const sp_module *m = s->m;
    uint32_t chain[64];
    uint32_t n = 0;
    for (uint32_t o = op; o != SP_NONE && n < 64;) {
        chain[n++] = o;
        uint32_t parent = m->blocks[m->ops[o].parent_block].parent_op;
        if (parent == SP_NONE || m->ops[parent].kind == SP_OP_FUNC_FUNC) {
            if (s->functions_form && parent != SP_NONE) {
                cm_buf_printf(b, "/functions/%u", s->pos[parent]);
            }
            break;
        }
        o = parent;
    }
    for (uint32_t i = n; i-- > 0;) {
        uint32_t o = chain[i];
        if (i + 1 < n) {
            /* the region of the parent that holds o's block */
            const sp_op *p = &m->ops[chain[i + 1]];
            uint32_t r = 0;
            for (uint32_t k = 0; k < p->n_regions; k++) {
                if (p->regions[k].n_blocks > 0 &&
                    p->regions[k].blocks[0] == m->ops[o].parent_block) {
                    r = k;
                }
            }
            cm_buf_printf(b, "/regions/%u", r);
        }
        cm_buf_printf(b, "/ops/%u", s->pos[o]);
    }
}

/* Resolves an op path of the plan document to an (attached, original) op. */
static cm_status resolve_path(const src *s, const char *path, const char *where, uint32_t *op_out,
                              cm_error *err)
{
    const sp_module *m = s->m;
    const char *p = path;
    const char *end;
    uint32_t fi = 0;
    if (strncmp(p, "/functions/", 11) == 0) {
        if (!parse_u32(p + 11, &end, &fi) || fi >= s->n_funcs) {
            return cm_error_set(err, CM_EINVAL, where, "no function at %s", path);
        }
        p = end;
    }
    if (s->n_funcs == 0) {
        return cm_error_set(err, CM_EINVAL, where, "the module has no function");
    }
    uint32_t blk = m->ops[s->funcs[fi]].regions[0].blocks[0];
    uint32_t op = SP_NONE;
    for (int depth = 0; depth < 64; depth++) {
        uint32_t idx;
        if (strncmp(p, "/ops/", 5) != 0 || !parse_u32(p + 5, &end, &idx)) {
            return cm_error_set(err, CM_EINVAL, where,
                                "expected an op path such as /ops/5 or /functions/0/ops/5, not %s",
                                path);
        }
        const sp_block *b = &m->blocks[blk];
        if (idx >= b->n_ops) {
            return cm_error_set(err, CM_EINVAL, where, "no op at %s", path);
        }
        op = b->ops[idx];
        p = end;
        if (*p == '\0') {
            *op_out = op;
            return CM_OK;
        }
        uint32_t r;
        if (strncmp(p, "/regions/", 9) != 0 || !parse_u32(p + 9, &end, &r)) {
            return cm_error_set(err, CM_EINVAL, where, "expected /regions/R/ops/I in %s", path);
        }
        if (r >= m->ops[op].n_regions || m->ops[op].regions[r].n_blocks == 0) {
            return cm_error_set(err, CM_EINVAL, where, "no region at %s", path);
        }
        blk = m->ops[op].regions[r].blocks[0];
        p = end;
    }
    return cm_error_set(err, CM_EINVAL, where, "op path nested too deep: %s", path);
}

static cm_status resolve_func(const src *s, const char *name, const char *where, uint32_t *fi_out,
                              cm_error *err)
{
    const char *want = name != NULL ? name : "main";
    for (uint32_t i = 0; i < s->n_funcs; i++) {
        const sp_attr *nm = sp_op_attr(s->m, s->funcs[i], "sym_name");
        if (nm != NULL && nm->kind == SP_ATTR_STRING && strcmp(nm->u.str.s, want) == 0) {
            *fi_out = i;
            return CM_OK;
        }
    }
    if (name == NULL && s->n_funcs > 0) {
        *fi_out = 0;
        return CM_OK;
    }
    return cm_error_set(err, CM_EINVAL, where, "no function named \"%s\"", want);
}

/* A resolved VREF: a value id, or (function, output) for outputs. */
typedef struct target {
    uint32_t value; /* SP_NONE for an output */
    uint32_t func;  /* func op id */
    uint32_t out;   /* output number */
} target;

static cm_status resolve_vref(const src *s, const sp_vref *v, const char *base, target *t,
                              cm_error *err)
{
    char where[96];
    const sp_module *m = s->m;
    t->value = SP_NONE;
    t->func = SP_NONE;
    t->out = 0;
    if (v->kind == SP_VREF_OP) {
        snprintf(where, sizeof where, "%s/op", base);
        uint32_t op = SP_NONE;
        cm_status st = resolve_path(s, v->op, where, &op, err);
        if (st != CM_OK) {
            return st;
        }
        if (v->result >= m->ops[op].n_results) {
            snprintf(where, sizeof where, "%s/result", base);
            return cm_error_set(err, CM_EINVAL, where, "%s (%s) has %u result(s), not result %u",
                                v->op, m->ops[op].name, m->ops[op].n_results, v->result);
        }
        t->value = m->ops[op].first_result + v->result;
        return CM_OK;
    }
    snprintf(where, sizeof where, "%s/function", base);
    uint32_t fi = 0;
    cm_status st = resolve_func(s, v->function, where, &fi, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t f = s->funcs[fi];
    t->func = f;
    snprintf(where, sizeof where, "%s/%s", base, v->kind == SP_VREF_INPUT ? "input" : "output");
    if (v->kind == SP_VREF_INPUT) {
        const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
        if (v->index >= entry->n_args) {
            return cm_error_set(err, CM_EINVAL, where, "the function has %u input(s), not input %u",
                                entry->n_args, v->index);
        }
        t->value = entry->first_arg + v->index;
        return CM_OK;
    }
    const sp_type *ft = sp_func_type(m, f);
    uint32_t n_out = ft != NULL ? ft->n_results : 0;
    if (v->index >= n_out) {
        return cm_error_set(err, CM_EINVAL, where, "the function has %u output(s), not output %u",
                            n_out, v->index);
    }
    t->out = v->index;
    return CM_OK;
}

/* ---- applying edits --------------------------------------------------------------------- */

static bool static_tensor(const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return false;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0) {
            return false;
        }
    }
    return true;
}

/* Parses and verifies a sharding for a tensor of type t. */
static cm_status edit_sharding(sp_module *m, const char *text, const sp_type *t, const char *where,
                               sp_sharding **out, cm_error *err)
{
    cm_buf b;
    cm_buf_init(&b);
    while (isspace((unsigned char)*text)) {
        text++;
    }
    if (strncmp(text, "#sdy.sharding", 13) != 0) {
        cm_buf_puts(&b, "#sdy.sharding");
    }
    cm_buf_puts(&b, text);
    if (b.oom) {
        cm_buf_fini(&b);
        return cm_error_oom(err);
    }
    sp_attr *a = NULL;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_mlir_parse_attr(m, b.data, b.len, &a, &e);
    cm_buf_fini(&b);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (st != CM_OK || a->kind != SP_ATTR_SHARDING) {
        return cm_error_set(err, CM_EINVAL, where,
                            "not a sharding such as <@mesh, [{\"x\"}, {}]>%s%s",
                            st != CM_OK ? ": " : "", st != CM_OK ? e.msg : "");
    }
    sp_sharding *s = a->u.sharding;
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return cm_error_set(err, CM_EINVAL, where, "no mesh named \"%s\" in the module",
                            s->mesh_name != NULL ? s->mesh_name : "");
    }
    if (t->kind != SP_TYPE_TENSOR) {
        return cm_error_set(err, CM_EINVAL, where, "the value is not a tensor");
    }
    cm_error_clear(&e);
    if (sp_sharding_verify(s, mesh, t->rank, static_tensor(t) ? t->dims : NULL, &e) != CM_OK) {
        return cm_error_set(err, CM_EINVAL, where, "%s", e.msg);
    }
    *out = s;
    return CM_OK;
}

/* Points every use of `from` (but in op `except`) at `to`. */
static void redirect_uses(sp_module *m, uint32_t from, uint32_t to, uint32_t except, u32v *touched)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op *op = &m->ops[i];
        if (i == except || op->parent_block == SP_NONE) {
            continue;
        }
        bool hit = false;
        for (uint32_t k = 0; k < op->n_operands; k++) {
            if (op->operands[k] == from) {
                op->operands[k] = to;
                hit = true;
            }
        }
        if (hit && touched != NULL) {
            u32v_push(touched, i);
        }
    }
}

/* Inserts a one-operand op `name` on value v right after its definition. */
static cm_status insert_on(sp_module *m, uint32_t v, const char *name, uint32_t *op_out,
                           cm_error *err)
{
    uint32_t type = m->values[v].type, op;
    if (sp_module_new_op(m, SP_NONE, name, &v, 1, &type, 1, &op) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory inserting %s", name);
    }
    uint32_t def = m->values[v].def, blk, at;
    if (def != SP_NONE) {
        blk = m->ops[def].parent_block;
        at = sp_op_index_in_block(m, def) + 1;
    } else {
        blk = m->values[v].block;
        at = 0;
    }
    if (sp_block_insert_op(m, blk, at, op) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory inserting %s", name);
    }
    redirect_uses(m, v, m->ops[op].first_result, op, NULL);
    *op_out = op;
    return CM_OK;
}

/* ---- sharding rules from text ---------------------------------------------------------- */

static bool name_char(char c, bool first)
{
    return isalpha((unsigned char)c) || (!first && (isdigit((unsigned char)c) || c == '_'));
}

/* `([i, k], [k, j])->([i, j])` (Shardy's rule without sizes) to `i k, k j -> i j`. */
static bool shardy_to_einsum(const char *t, cm_buf *b)
{
    int depth = 0;
    bool need_sep = false;
    for (const char *p = t; *p != '\0';) {
        char c = *p;
        if (isspace((unsigned char)c) || c == '(' || c == ')') {
            p++;
        } else if (c == '[') {
            if (depth != 0) {
                return false;
            }
            depth = 1;
            need_sep = false;
            p++;
        } else if (c == ']') {
            depth = 0;
            p++;
        } else if (c == ',') {
            cm_buf_puts(b, depth ? " " : ", ");
            need_sep = false;
            p++;
        } else if (c == '-' && p[1] == '>') {
            cm_buf_puts(b, " -> ");
            p += 2;
        } else if (depth && name_char(c, true)) {
            /* one dim: factor names (a letter, optionally _digits), several = compound */
            const char *names[16];
            size_t lens[16];
            uint32_t n = 0;
            while (name_char(*p, true) && n < 16) {
                const char *s = p++;
                if (*p == '_') {
                    p++;
                    while (isdigit((unsigned char)*p)) {
                        p++;
                    }
                }
                names[n] = s;
                lens[n++] = (size_t)(p - s);
            }
            if (need_sep) {
                cm_buf_putc(b, ' ');
            }
            if (n > 1) {
                cm_buf_putc(b, '(');
            }
            for (uint32_t k = 0; k < n; k++) {
                if (k > 0) {
                    cm_buf_putc(b, ' ');
                }
                cm_buf_append(b, names[k], lens[k]);
            }
            if (n > 1) {
                cm_buf_putc(b, ')');
            }
            need_sep = true;
        } else {
            return false;
        }
    }
    return !b->oom;
}

/* Factor names of an einsum spec, split at "->": operands-only names are reductions. */
static uint32_t einsum_reductions(const char *spec, cm_arena *a, const char ***out)
{
    const char *arrow = strstr(spec, "->");
    const char *names[256];
    uint32_t n = 0;
    for (const char *p = spec; arrow != NULL && p < arrow && n < 256;) {
        if (!name_char(*p, true)) {
            p++;
            continue;
        }
        const char *s = p;
        while (name_char(*p, false)) {
            p++;
        }
        size_t len = (size_t)(p - s);
        bool in_result = false;
        for (const char *q = arrow + 2; *q != '\0' && !in_result;) {
            if (!name_char(*q, true)) {
                q++;
                continue;
            }
            const char *r = q;
            while (name_char(*q, false)) {
                q++;
            }
            in_result = (size_t)(q - r) == len && memcmp(r, s, len) == 0;
        }
        bool seen = false;
        for (uint32_t k = 0; k < n && !seen; k++) {
            seen = strlen(names[k]) == len && memcmp(names[k], s, len) == 0;
        }
        if (!in_result && !seen) {
            names[n] = cm_arena_strndup(a, s, len);
            if (names[n] == NULL) {
                return 0;
            }
            n++;
        }
    }
    *out = cm_arena_memdup(a, names, n > 0 ? n : 1, sizeof(char *));
    return *out != NULL ? n : 0;
}

/* Checks a parsed rule against op's tensors: counts, ranks and factor sizes. */
static cm_status rule_fits(const sp_module *m, uint32_t op, const sp_rule *r, const char *where,
                           cm_error *err)
{
    const sp_op *o = &m->ops[op];
    if (r->n_operands != o->n_operands || r->n_results != o->n_results) {
        return cm_error_set(err, CM_EINVAL, where,
                            "the rule has %u operand(s) and %u result(s); %s has %u and %u",
                            r->n_operands, r->n_results, o->name, o->n_operands, o->n_results);
    }
    for (uint32_t i = 0; i < o->n_operands + o->n_results; i++) {
        bool res = i >= o->n_operands;
        uint32_t k = res ? i - o->n_operands : i;
        const sp_tensor_mapping *tm = res ? &r->results[k] : &r->operands[k];
        const sp_type *t = sp_value_type(m, res ? o->first_result + k : o->operands[k]);
        if (t->kind != SP_TYPE_TENSOR || tm->rank != t->rank) {
            return cm_error_set(err, CM_EINVAL, where, "%s %u has rank %u, the rule gives %u",
                                res ? "result" : "operand", k,
                                t->kind == SP_TYPE_TENSOR ? t->rank : 0, tm->rank);
        }
        for (uint32_t d = 0; d < t->rank; d++) {
            int64_t p = 1;
            for (uint32_t f = 0; f < tm->dims[d].n_factors; f++) {
                uint32_t fx = tm->dims[d].factors[f];
                if (fx >= r->n_factors || !cm_mul_i64(p, r->factor_sizes[fx], &p)) {
                    p = -1;
                    break;
                }
            }
            if (t->dims[d] >= 0 && p != t->dims[d]) {
                return cm_error_set(err, CM_EINVAL, where,
                                    "%s %u dimension %u has size %lld, the rule's factors %lld",
                                    res ? "result" : "operand", k, d, (long long)t->dims[d],
                                    (long long)p);
            }
        }
    }
    return CM_OK;
}

static cm_status edit_rule(sp_module *m, uint32_t op, const sp_edit *e, sp_rule **out,
                           cm_error *err)
{
    char where[64];
    snprintf(where, sizeof where, "%s/rule", e->path);
    const char *t = e->rule;
    while (isspace((unsigned char)*t)) {
        t++;
    }
    cm_error ie;
    cm_error_clear(&ie);
    if (strchr(t, '{') != NULL || t[0] == '<' || t[0] == '#') {
        cm_buf b;
        cm_buf_init(&b);
        if (t[0] != '#') {
            cm_buf_puts(&b, "#sdy.op_sharding_rule");
            if (t[0] != '<') {
                cm_buf_putc(&b, '<');
            }
        }
        cm_buf_puts(&b, t);
        if (t[0] != '#' && t[0] != '<') {
            cm_buf_putc(&b, '>');
        }
        sp_attr *a = NULL;
        cm_status st = b.oom ? CM_ENOMEM : sp_mlir_parse_attr(m, b.data, b.len, &a, &ie);
        cm_buf_fini(&b);
        if (st == CM_ENOMEM) {
            return cm_error_oom(err);
        }
        if (st != CM_OK || a->kind != SP_ATTR_RULE) {
            return cm_error_set(err, CM_EINVAL, where, "not a sharding rule: %s",
                                st != CM_OK ? ie.msg : "wrong attribute kind");
        }
        cm_status fs = rule_fits(m, op, a->u.rule, where, err);
        if (fs == CM_OK) {
            *out = a->u.rule;
        }
        return fs;
    }
    cm_buf spec;
    cm_buf_init(&spec);
    if (strchr(t, '[') != NULL) {
        if (!shardy_to_einsum(t, &spec)) {
            cm_buf_fini(&spec);
            return cm_error_set(err, CM_EINVAL, where,
                                "expected a rule such as ([i, k], [k, j])->([i, j]) or "
                                "i k, k j -> i j");
        }
    } else {
        cm_buf_puts(&spec, t);
    }
    if (spec.oom || spec.data == NULL) {
        cm_buf_fini(&spec);
        return cm_error_oom(err);
    }
    const sp_op *o = &m->ops[op];
    uint32_t n = o->n_operands + o->n_results;
    const int64_t **dims = cm_arena_alloc(&m->arena, sizeof(int64_t *) * (n + 1u));
    uint32_t *ranks = cm_arena_alloc(&m->arena, sizeof(uint32_t) * (n + 1u));
    if (dims == NULL || ranks == NULL) {
        cm_buf_fini(&spec);
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < n; i++) {
        bool res = i >= o->n_operands;
        const sp_type *ty =
            sp_value_type(m, res ? o->first_result + (i - o->n_operands) : o->operands[i]);
        if (!static_tensor(ty)) {
            cm_buf_fini(&spec);
            return cm_error_set(err, CM_EINVAL, where, "%s %u of %s is not a static tensor",
                                res ? "result" : "operand", res ? i - o->n_operands : i, o->name);
        }
        dims[i] = ty->dims;
        ranks[i] = ty->rank;
    }
    sp_einsum_opts eo;
    memset(&eo, 0, sizeof eo);
    if (e->reduction != NULL) {
        eo.reduction = e->reduction;
        eo.n_reduction = e->n_reduction;
    } else {
        eo.n_reduction = einsum_reductions(spec.data, &m->arena, &eo.reduction);
    }
    eo.need_replication = e->need_replication;
    eo.n_need_replication = e->n_need_replication;
    cm_status st =
        sp_rule_from_einsum(spec.data, &eo, dims, ranks, o->n_operands, dims + o->n_operands,
                            ranks + o->n_operands, o->n_results, &m->arena, out, &ie);
    cm_buf_fini(&spec);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (st != CM_OK) {
        return cm_error_set(err, CM_EINVAL, where, "%s%s%s", ie.path, ie.path[0] ? ": " : "",
                            ie.msg);
    }
    return CM_OK;
}

static cm_status set_rule(sp_module *m, uint32_t op, sp_rule *r, cm_error *err)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_RULE);
    if (a == NULL) {
        return cm_error_oom(err);
    }
    a->u.rule = r;
    return sp_op_set_attr(m, op, "sdy.sharding_rule", a) == CM_OK
               ? CM_OK
               : cm_error_oom(err);
}

static const char *call_target(const sp_module *m, uint32_t op)
{
    const sp_attr *t = sp_op_attr(m, op, "call_target_name");
    return t != NULL && t->kind == SP_ATTR_STRING ? t->u.str.s : NULL;
}

/* A graph document's custom-call rules as `sdy.sharding_rule` attributes. */
static cm_status materialise_custom(src *s, cm_error *err)
{
    if (s->custom == NULL) {
        return CM_OK;
    }
    sp_module *m = s->m;
    sp_rule_opts ro = {false, s->custom, false};
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind != SP_OP_CUSTOM_CALL || m->ops[i].parent_block == SP_NONE ||
            sp_op_attr(m, i, "sdy.sharding_rule") != NULL) {
            continue;
        }
        sp_rule *r = NULL;
        cm_error e;
        cm_error_clear(&e);
        cm_status st = sp_rule_for_op(m, i, &ro, &r, NULL, &e);
        if (st == CM_ENOMEM) {
            return cm_error_oom(err);
        }
        if (st == CM_OK && r != NULL && r->is_custom) {
            st = set_rule(m, i, r, err);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

/* What an edit resolved to, before anything changes. */
typedef struct resolved {
    target t;
    uint32_t op;
} resolved;

static cm_status resolve_edit(const src *s, const sp_edit *e, resolved *r, cm_error *err)
{
    char where[64];
    r->op = SP_NONE;
    r->t.value = SP_NONE;
    r->t.func = SP_NONE;
    switch (e->kind) {
    case SP_EDIT_CONSTRAIN:
    case SP_EDIT_SET_SHARDING:
    case SP_EDIT_BARRIER:
        snprintf(where, sizeof where, "%s/value", e->path);
        return resolve_vref(s, &e->value, where, &r->t, err);
    case SP_EDIT_UNCONSTRAIN:
    case SP_EDIT_UNBARRIER:
    case SP_EDIT_RULE: {
        snprintf(where, sizeof where, "%s/op", e->path);
        cm_status st = resolve_path(s, e->op != NULL ? e->op : "", where, &r->op, err);
        if (st != CM_OK) {
            return st;
        }
        sp_op_kind want = e->kind == SP_EDIT_UNCONSTRAIN ? SP_OP_SDY_SHARDING_CONSTRAINT
                                                         : SP_OP_SDY_PROPAGATION_BARRIER;
        const sp_op *op = &s->m->ops[r->op];
        if (e->kind != SP_EDIT_RULE && op->kind != (uint32_t)want) {
            return cm_error_set(err, CM_EINVAL, where, "%s is %s, not %s", e->op, op->name,
                                sp_op_kind_name(want));
        }
        if (e->kind == SP_EDIT_RULE && (op->kind == SP_OP_FUNC_RETURN || op->n_results == 0 ||
                                        op->kind == SP_OP_SDY_SHARDING_CONSTRAINT ||
                                        op->kind == SP_OP_SDY_PROPAGATION_BARRIER)) {
            return cm_error_set(err, CM_EINVAL, where, "%s (%s) takes no sharding rule", e->op,
                                op->name);
        }
        return CM_OK;
    }
    case SP_EDIT_CUSTOM_RULE:
        return CM_OK;
    default:
        return cm_error_set(err, CM_EINVAL, e->path, "unknown edit kind");
    }
}

static cm_status apply_one(src *s, const sp_edit *e, const resolved *r, cm_error *err)
{
    sp_module *m = s->m;
    char where[64];
    switch (e->kind) {
    case SP_EDIT_CONSTRAIN:
    case SP_EDIT_BARRIER: {
        uint32_t v = r->t.value;
        const sp_type *t = sp_value_type(m, v);
        if (t->kind != SP_TYPE_TENSOR) {
            snprintf(where, sizeof where, "%s/value", e->path);
            return cm_error_set(err, CM_EINVAL, where, "the value is not a tensor");
        }
        sp_attr *a;
        if (e->kind == SP_EDIT_CONSTRAIN) {
            snprintf(where, sizeof where, "%s/sharding", e->path);
            sp_sharding *sh;
            cm_status st = edit_sharding(m, e->sharding, t, where, &sh, err);
            if (st != CM_OK) {
                return st;
            }
            a = sp_attr_new(m, SP_ATTR_SHARDING);
            if (a != NULL) {
                a->u.sharding = sh;
            }
        } else {
            a = sp_attr_new(m, SP_ATTR_ENUM);
            if (a != NULL) {
                a->u.enm.dialect = "sdy";
                a->u.enm.kind = "propagation_direction";
                a->u.enm.value = sp_module_str(m, e->direction, strlen(e->direction));
            }
        }
        if (a == NULL) {
            return cm_error_oom(err);
        }
        uint32_t op = SP_NONE;
        const char *name =
            e->kind == SP_EDIT_CONSTRAIN ? "sdy.sharding_constraint" : "sdy.propagation_barrier";
        cm_status st = insert_on(m, v, name, &op, err);
        if (st != CM_OK) {
            return st;
        }
        if (sp_op_set_attr(m, op, e->kind == SP_EDIT_CONSTRAIN ? "sharding" : "allowed_direction",
                           a) != CM_OK) {
            return cm_error_oom(err);
        }
        u32v_push(&s->seed_ops, op);
        return CM_OK;
    }
    case SP_EDIT_UNCONSTRAIN:
    case SP_EDIT_UNBARRIER: {
        const sp_op *op = &m->ops[r->op];
        if (op->parent_block == SP_NONE) {
            snprintf(where, sizeof where, "%s/op", e->path);
            return cm_error_set(err, CM_EINVAL, where, "%s was removed by an earlier edit", e->op);
        }
        uint32_t in = op->operands[0];
        redirect_uses(m, op->first_result, in, r->op, &s->seed_ops);
        sp_block_remove_op(m, op->parent_block, sp_op_index_in_block(m, r->op));
        if (r->op < s->n_ops0) {
            s->removed[r->op] = 1;
        }
        u32v_push(&s->seed_vals, in);
        return CM_OK;
    }
    case SP_EDIT_SET_SHARDING: {
        snprintf(where, sizeof where, "%s/sharding", e->path);
        const sp_type *t = r->t.value != SP_NONE
                               ? sp_value_type(m, r->t.value)
                               : &m->types[sp_func_type(m, r->t.func)->results[r->t.out]];
        sp_sharding *sh = NULL;
        if (e->sharding != NULL) {
            cm_status st = edit_sharding(m, e->sharding, t, where, &sh, err);
            if (st != CM_OK) {
                return st;
            }
        }
        cm_status st;
        if (r->t.value == SP_NONE) {
            st = sp_func_set_result_sharding(m, r->t.func, r->t.out, sh);
            u32v_push(&s->seed_outs, r->t.func);
            u32v_push(&s->seed_outs, r->t.out);
        } else {
            uint32_t v = r->t.value, def = m->values[v].def;
            if (def != SP_NONE && m->ops[def].kind == SP_OP_SDY_SHARDING_CONSTRAINT && sh == NULL) {
                snprintf(where, sizeof where, "%s/value", e->path);
                return cm_error_set(err, CM_EINVAL, where,
                                    "a sharding constraint cannot lose its sharding; use "
                                    "unconstrain");
            }
            if (sh == NULL && def != SP_NONE && m->ops[def].n_results == 1) {
                sp_op_remove_attr(m, def, "sdy.sharding");
                st = CM_OK;
            } else {
                st = sp_value_set_sharding(m, v, sh);
            }
            u32v_push(&s->seed_vals, v);
        }
        return st == CM_OK ? CM_OK : cm_error_oom(err);
    }
    case SP_EDIT_RULE: {
        sp_rule *rule;
        cm_status st = edit_rule(m, r->op, e, &rule, err);
        if (st == CM_OK) {
            st = set_rule(m, r->op, rule, err);
        }
        u32v_push(&s->seed_ops, r->op);
        return st;
    }
    case SP_EDIT_CUSTOM_RULE: {
        uint32_t hits = 0;
        for (uint32_t i = 0; i < m->n_ops; i++) {
            const char *tg = call_target(m, i);
            if (m->ops[i].kind != SP_OP_CUSTOM_CALL || m->ops[i].parent_block == SP_NONE ||
                tg == NULL || strcmp(tg, e->target) != 0) {
                continue;
            }
            sp_rule *rule;
            cm_status st = edit_rule(m, i, e, &rule, err);
            if (st == CM_OK) {
                st = set_rule(m, i, rule, err);
            }
            if (st != CM_OK) {
                return st;
            }
            u32v_push(&s->seed_ops, i);
            hits++;
        }
        if (hits == 0) {
            snprintf(where, sizeof where, "%s/target", e->path);
            return cm_error_set(err, CM_EINVAL, where,
                                "no custom_call with call_target_name \"%s\"", e->target);
        }
        return CM_OK;
    }
    default:
        return cm_error_set(err, CM_EINVAL, e->path, "unknown edit kind");
    }
}

/* Resolves every edit against the input as given, then applies them in order. */
static cm_status apply_edits(src *s, const sp_edit_list *l, cm_error *err)
{
    cm_status st = materialise_custom(s, err);
    if (st != CM_OK) {
        return st;
    }
    resolved *rs = cm_calloc(l->n + 1u, sizeof *rs);
    if (rs == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < l->n && st == CM_OK; i++) {
        st = resolve_edit(s, &l->items[i], &rs[i], err);
    }
    s->first_new_op = s->m->n_ops;
    for (uint32_t i = 0; i < l->n && st == CM_OK; i++) {
        st = apply_one(s, &l->items[i], &rs[i], err);
    }
    s->end_new_op = s->m->n_ops;
    cm_free(rs);
    if (st == CM_OK && (s->seed_ops.oom || s->seed_vals.oom || s->seed_outs.oom)) {
        st = cm_error_oom(err);
    }
    return st;
}

cm_status sp_whatif_edit_text(const char *text, size_t len, const sp_input_opts *in_opts,
                              const sp_edit_list *edits, cm_buf *mlir, cm_error *err)
{
    src *s;
    cm_status st = src_load(text, len, in_opts, &s, err);
    if (st != CM_OK) {
        return st;
    }
    st = apply_edits(s, edits, err);
    if (st == CM_OK) {
        sp_print_opts po = {false, true};
        sp_mlir_print(s->m, &po, mlir);
        if (mlir->oom) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory printing the module");
        }
    }
    src_destroy(s);
    return st;
}

/* ---- the what-if run -------------------------------------------------------------------- */

struct sp_whatif {
    cm_arena arena;
    sp_whatif_change *changes; /* heap */
    uint32_t n_changes, cap_changes;
    uint32_t n_edits;
    sp_whatif_stats stats;
    sp_cost_summary before, after;
    uint32_t colls_before, colls_after; /* collectives of the partitioned modules */
    bool costed;
    cm_buf mlir;       /* edited module before propagation */
    cm_buf propagated; /* after propagation (keep_propagated) */
};

void sp_whatif_opts_init(sp_whatif_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* The propagation of the plan's pass: -sdy-propagation-pipeline is its
 * import passes, user-priority propagation and its export passes (run apart
 * here, the region found between them); the other passes are propagation
 * alone at their level (planner/doc/sp_input.c sp_input_propagate). */
static void prop_opts(sp_prop_opts *po, const src *s, sp_plan_pass pass)
{
    sp_prop_level level = pass == SP_PLAN_OP_PRIORITY  ? SP_PROP_OP_PRIORITY
                          : pass == SP_PLAN_AGGRESSIVE ? SP_PROP_AGGRESSIVE
                          : pass == SP_PLAN_BASIC      ? SP_PROP_BASIC
                                                       : SP_PROP_USER_PRIORITY;
    sp_prop_opts_init(po, level);
    po->custom = s != NULL ? s->custom : NULL;
}

/* The function results of a module as slots: the results of its func.func
 * ops in module order, numbered 0..n-1 (after the values, for propagation). */
typedef struct fres {
    uint32_t *func; /* func op ids in module order (heap) */
    uint32_t *base; /* per function: number of its result 0 */
    uint32_t n_funcs;
    uint32_t *owner; /* per result: function index */
    uint32_t n;      /* results of all functions */
} fres;

static void fres_fini(fres *f)
{
    cm_free(f->func);
    cm_free(f->base);
    cm_free(f->owner);
    memset(f, 0, sizeof *f);
}

static cm_status fres_init(const sp_module *m, fres *f, cm_error *err)
{
    memset(f, 0, sizeof *f);
    const sp_block *body = &m->blocks[m->body];
    f->func = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    f->base = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    if (f->func == NULL || f->base == NULL) {
        fres_fini(f);
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        const sp_type *ft = m->ops[op].kind == SP_OP_FUNC_FUNC ? sp_func_type(m, op) : NULL;
        if (ft == NULL || m->ops[op].n_regions != 1 || m->ops[op].regions[0].n_blocks == 0) {
            continue;
        }
        f->func[f->n_funcs] = op;
        f->base[f->n_funcs++] = f->n;
        f->n += ft->n_results;
    }
    f->owner = cm_alloc(sizeof(uint32_t) * (f->n + 1u));
    if (f->owner == NULL) {
        fres_fini(f);
        return cm_error_oom(err);
    }
    for (uint32_t fi = 0; fi < f->n_funcs; fi++) {
        uint32_t end = fi + 1 < f->n_funcs ? f->base[fi + 1] : f->n;
        for (uint32_t k = f->base[fi]; k < end; k++) {
            f->owner[k] = fi;
        }
    }
    return CM_OK;
}

static const sp_sharding *fres_sharding(const sp_module *m, const fres *f, uint32_t k)
{
    uint32_t fi = f->owner[k];
    return sp_func_result_sharding(m, f->func[fi], k - f->base[fi]);
}

static const sp_type *fres_type(const sp_module *m, const fres *f, uint32_t k)
{
    uint32_t fi = f->owner[k];
    return &m->types[sp_func_type(m, f->func[fi])->results[k - f->base[fi]]];
}

/* The function index of func op `op`, or SP_NONE. */
static uint32_t fres_index(const fres *f, uint32_t op)
{
    for (uint32_t i = 0; i < f->n_funcs; i++) {
        if (f->func[i] == op) {
            return i;
        }
    }
    return SP_NONE;
}

/* Per-slot shardings of a module (values, then every function result);
 * pointers into the module's arena. */
typedef struct snap {
    const sp_sharding **v;
    uint32_t n_values;
    const sp_sharding **out;
    uint32_t n_out;
} snap;

static void snap_fini(snap *x)
{
    cm_free(x->v);
    cm_free(x->out);
    memset(x, 0, sizeof *x);
}

static cm_status snap_take(const sp_module *m, snap *x, cm_error *err)
{
    fres f;
    cm_status st = fres_init(m, &f, err);
    if (st != CM_OK) {
        return st;
    }
    x->n_values = m->n_values;
    x->n_out = f.n;
    x->v = cm_alloc(sizeof(sp_sharding *) * (x->n_values + 1u));
    x->out = cm_alloc(sizeof(sp_sharding *) * (x->n_out + 1u));
    if (x->v == NULL || x->out == NULL) {
        snap_fini(x);
        fres_fini(&f);
        return cm_error_oom(err);
    }
    for (uint32_t v = 0; v < x->n_values; v++) {
        x->v[v] = sp_value_sharding(m, v);
    }
    for (uint32_t i = 0; i < x->n_out; i++) {
        x->out[i] = fres_sharding(m, &f, i);
    }
    fres_fini(&f);
    return CM_OK;
}

/* Ops sp_propagate walks: every attached op but func.func and sdy.mesh. */
static bool prop_op(const sp_module *m, uint32_t i)
{
    const sp_op *op = &m->ops[i];
    if (op->parent_block == SP_NONE || op->kind == SP_OP_FUNC_FUNC || op->kind == SP_OP_SDY_MESH) {
        return false;
    }
    /* attached to a block of a detached op? */
    for (uint32_t p = m->blocks[op->parent_block].parent_op; p != SP_NONE;
         p = m->blocks[m->ops[p].parent_block].parent_op) {
        if (m->ops[p].parent_block == SP_NONE) {
            return false;
        }
    }
    return true;
}

static int max_priority(const sp_module *m, const fres *f)
{
    int mx = -1;
    uint32_t n = m->n_values + f->n;
    for (uint32_t s = 0; s < n; s++) {
        const sp_sharding *sh =
            s < m->n_values ? sp_value_sharding(m, s) : fres_sharding(m, f, s - m->n_values);
        for (uint32_t d = 0; sh != NULL && d < sh->rank; d++) {
            mx = sh->dims[d].priority > mx ? sh->dims[d].priority : mx;
        }
    }
    return mx;
}

/* Why the region argument does not hold for m (NULL: it does). */
static const char *not_local(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->parent_block == SP_NONE) {
            continue;
        }
        if (sp_op_is_data_flow((sp_op_kind)op->kind)) {
            return "the module has data-flow ops (while, case, if, optimization_barrier)";
        }
        switch ((sp_op_kind)op->kind) {
        case SP_OP_FUNC_FUNC:
        case SP_OP_FUNC_CALL: /* an op like any other: propagation knows no rule for it */
            continue;
        case SP_OP_SDY_MANUAL_COMPUTATION:
        case SP_OP_SDY_NAMED_COMPUTATION:
            return "the module has manual or named computations";
        case SP_OP_SDY_SHARDING_GROUP:
            return "the module has sharding groups";
        case SP_OP_REDUCE:
        case SP_OP_SCATTER:
        case SP_OP_SORT:
        case SP_OP_REDUCE_WINDOW:
        case SP_OP_SELECT_AND_SCATTER:
        case SP_OP_MAP:
        case SP_OP_ALL_REDUCE:
        case SP_OP_REDUCE_SCATTER:
            continue;
        default:
            if (op->n_regions > 0) {
                return "the module has ops with regions";
            }
        }
    }
    return NULL;
}

/* The run's state for the incremental part. */
typedef struct inc {
    const src *s0, *s1;
    sp_module *m0, *m1;
    fres fr0, fr1;    /* function results of m0 and m1 */
    uint32_t *map;    /* m1 value -> m0 value (SP_NONE: none) */
    uint32_t *op_map; /* m1 op -> m0 op (SP_NONE: none) */
    uint8_t *region;  /* per m1 op */
    uint8_t *seen;    /* per m1 slot (values, then function results) */
    u32v seeds;       /* m1 slots */
    u32v seed_ops;    /* m1 ops */
    const char *why;
    bool oom;
} inc;

static bool is_new_op(const src *s, uint32_t op)
{
    return op >= s->first_new_op && op < s->end_new_op;
}

static bool is_identity_op(const sp_module *m, uint32_t op)
{
    return m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT ||
           m->ops[op].kind == SP_OP_SDY_PROPAGATION_BARRIER;
}

/* Follows m1 values through edit-inserted constraints and barriers. */
static uint32_t root1(const inc *c, uint32_t v)
{
    for (int k = 0; k < 4096; k++) {
        uint32_t d = c->m1->values[v].def;
        if (d == SP_NONE || !is_new_op(c->s1, d) || !is_identity_op(c->m1, d)) {
            return v;
        }
        v = c->m1->ops[d].operands[0];
    }
    return v;
}

/* Follows m0 values through ops removed by edits. */
static uint32_t root0(const inc *c, uint32_t v)
{
    for (int k = 0; k < 4096; k++) {
        uint32_t d = c->m0->values[v].def;
        if (d == SP_NONE || d >= c->s1->n_ops0 || !c->s1->removed[d]) {
            return v;
        }
        v = c->m0->ops[d].operands[0];
    }
    return v;
}

static void collect(const sp_module *m, uint32_t blk, u32v *out)
{
    const sp_block *b = &m->blocks[blk];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        uint32_t id = b->ops[i];
        const sp_op *op = &m->ops[id];
        if (op->kind != SP_OP_FUNC_FUNC && op->kind != SP_OP_SDY_MESH) {
            u32v_push(out, id);
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < op->regions[r].n_blocks; k++) {
                collect(m, op->regions[r].blocks[k], out);
            }
        }
    }
}

static bool same_type_text(const sp_module *a, uint32_t va, const sp_module *b, uint32_t vb)
{
    return strcmp(sp_value_type(a, va)->text, sp_value_type(b, vb)->text) == 0;
}

/* Pairs the ops of m1 with those of m0 (both after the import passes) in
 * program order, skipping ops the edits inserted (m1) or removed (m0), and
 * collects seeds: ops whose operands differ, values whose sharding
 * differs before propagation. False (c->why set) when the structures differ. */
static bool pair_modules(inc *c)
{
    u32v w0 = {0}, w1 = {0};
    bool ok = true;
    collect(c->m0, c->m0->body, &w0);
    collect(c->m1, c->m1->body, &w1);
    if (w0.oom || w1.oom) {
        c->oom = true;
        ok = false;
    }
    /* entry arguments and original values map to themselves */
    for (uint32_t v = 0; v < c->s1->n_values0; v++) {
        c->map[v] = v;
    }
    uint32_t i0 = 0, i1 = 0;
    while (ok) {
        while (i1 < w1.n && is_new_op(c->s1, w1.v[i1])) {
            i1++;
        }
        while (i0 < w0.n && w0.v[i0] < c->s1->n_ops0 && c->s1->removed[w0.v[i0]]) {
            i0++;
        }
        if (i0 == w0.n || i1 == w1.n) {
            ok = i0 == w0.n && i1 == w1.n;
            break;
        }
        uint32_t a = w0.v[i0++], b = w1.v[i1++];
        const sp_op *oa = &c->m0->ops[a], *ob = &c->m1->ops[b];
        bool orig_a = a < c->s1->n_ops0, orig_b = b < c->s1->n_ops0;
        if (orig_a != orig_b || (orig_a && a != b) || strcmp(oa->name, ob->name) != 0 ||
            oa->n_results != ob->n_results || oa->n_operands != ob->n_operands) {
            ok = false;
            break;
        }
        c->op_map[b] = a;
        for (uint32_t k = 0; k < ob->n_results; k++) {
            if (!same_type_text(c->m0, oa->first_result + k, c->m1, ob->first_result + k)) {
                ok = false;
            }
            c->map[ob->first_result + k] = oa->first_result + k;
        }
        bool seed = false;
        for (uint32_t k = 0; k < ob->n_operands && ok; k++) {
            uint32_t x1 = ob->operands[k], x0 = oa->operands[k];
            uint32_t r1 = root1(c, x1), r0 = root0(c, x0);
            if (r1 >= c->m1->n_values || c->map[r1] != r0) {
                ok = false;
            }
            seed = seed || c->map[x1] != x0;
        }
        if (seed) {
            u32v_push(&c->seed_ops, b);
        }
    }
    cm_free(w0.v);
    cm_free(w1.v);
    if (!ok) {
        c->why =
            "the edited module's structure after the import passes differs from the original's";
        return false;
    }
    /* annotations that differ before propagation */
    for (uint32_t v = 0; v < c->m1->n_values; v++) {
        if (c->map[v] == SP_NONE) {
            continue;
        }
        if (!sp_sharding_equal(sp_value_sharding(c->m1, v), sp_value_sharding(c->m0, c->map[v]))) {
            u32v_push(&c->seeds, v);
        }
    }
    for (uint32_t i = 0; i < c->fr1.n; i++) {
        if (!sp_sharding_equal(fres_sharding(c->m1, &c->fr1, i),
                               fres_sharding(c->m0, &c->fr0, i))) {
            u32v_push(&c->seeds, c->m1->n_values + i);
        }
    }
    return true;
}

/* A slot whose sharding propagation cannot change: every dimension closed
 * (hidden priority dimensions are closed as well), or not a static tensor. */
static bool fixed_slot(const inc *c, uint32_t slot)
{
    const sp_module *m = c->m1;
    const sp_sharding *s;
    const sp_type *t;
    if (slot < m->n_values) {
        s = sp_value_sharding(m, slot);
        t = sp_value_type(m, slot);
    } else {
        s = fres_sharding(m, &c->fr1, slot - m->n_values);
        t = fres_type(m, &c->fr1, slot - m->n_values);
    }
    if (!static_tensor(t)) {
        return true;
    }
    if (s == NULL) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (!s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

/* For a func.return of m1, the slots of its function's results (returns
 * their count, *first the first slot); 0 for other ops. */
static uint32_t ret_slots(const inc *c, uint32_t op, uint32_t *first)
{
    const sp_module *m = c->m1;
    *first = 0;
    if (m->ops[op].kind != SP_OP_FUNC_RETURN) {
        return 0;
    }
    uint32_t fi = fres_index(&c->fr1, m->blocks[m->ops[op].parent_block].parent_op);
    if (fi == SP_NONE) {
        return 0;
    }
    uint32_t end = fi + 1 < c->fr1.n_funcs ? c->fr1.base[fi + 1] : c->fr1.n;
    *first = m->n_values + c->fr1.base[fi];
    return end - c->fr1.base[fi];
}

/* Puts op (SP_NONE: none) in the region and pushes its tensors not seen yet
 * that may change. */
static void add_op(inc *c, uint32_t op, u32v *stack)
{
    const sp_module *m = c->m1;
    if (op == SP_NONE || !prop_op(m, op) || c->region[op]) {
        return;
    }
    c->region[op] = 1;
    const sp_op *o = &m->ops[op];
    uint32_t first, n_t = o->n_operands + o->n_results + ret_slots(c, op, &first);
    for (uint32_t j = 0; j < n_t; j++) {
        uint32_t t = j < o->n_operands ? o->operands[j]
                     : j < o->n_operands + o->n_results
                         ? o->first_result + (j - o->n_operands)
                         : first + (j - o->n_operands - o->n_results);
        if (!c->seen[t]) {
            c->seen[t] = 1;
            if (!fixed_slot(c, t)) {
                u32v_push(stack, t);
            }
        }
    }
}

/* The region: closure of the seeds over def/users, stopping at fixed slots. */
static cm_status grow_region(inc *c, uint32_t *n_region, cm_error *err)
{
    sp_module *m = c->m1;
    uint32_t n_slots = m->n_values + c->fr1.n;
    uint32_t *start = cm_calloc(n_slots + 2u, sizeof(uint32_t));
    uint32_t *fill = NULL, *uses = NULL;
    u32v stack = {0};
    cm_status st = CM_OK;
    if (start == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (!prop_op(m, i)) {
            continue;
        }
        for (uint32_t k = 0; k < op->n_operands; k++) {
            start[op->operands[k] + 1]++;
        }
        uint32_t first, n_out = ret_slots(c, i, &first);
        for (uint32_t k = 0; k < n_out; k++) {
            start[first + k + 1]++;
        }
    }
    for (uint32_t s = 0; s < n_slots; s++) {
        start[s + 1] += start[s];
    }
    fill = cm_alloc(sizeof(uint32_t) * (n_slots + 1u));
    uses = cm_alloc(sizeof(uint32_t) * (start[n_slots] + 1u));
    if (fill == NULL || uses == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    memcpy(fill, start, sizeof(uint32_t) * n_slots);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (!prop_op(m, i)) {
            continue;
        }
        for (uint32_t k = 0; k < op->n_operands; k++) {
            uses[fill[op->operands[k]]++] = i;
        }
        uint32_t first, n_out = ret_slots(c, i, &first);
        for (uint32_t k = 0; k < n_out; k++) {
            uses[fill[first + k]++] = i;
        }
    }
    /* seeds: expanded whether fixed or not (their neighbours see a new sharding) */
    for (uint32_t k = 0; k < c->seeds.n; k++) {
        uint32_t s = c->seeds.v[k];
        if (!c->seen[s]) {
            c->seen[s] = 2;
            u32v_push(&stack, s);
        }
    }
    /* seed ops: their tensors that may change carry the change on (ops whose
     * operands the edits redirected are seed ops themselves) */
    for (uint32_t k = 0; k < c->seed_ops.n; k++) {
        add_op(c, c->seed_ops.v[k], &stack);
    }
    while (stack.n > 0 && !stack.oom) {
        uint32_t s = stack.v[--stack.n];
        /* the ops that read or write slot s */
        uint32_t def = s < m->n_values ? m->values[s].def : SP_NONE;
        uint32_t n_adj = start[s + 1] - start[s] + 1;
        for (uint32_t a = 0; a < n_adj; a++) {
            add_op(c, a + 1 == n_adj ? def : uses[start[s] + a], &stack);
        }
    }
    if (stack.oom) {
        st = cm_error_oom(err);
    }
    *n_region = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        *n_region += c->region[i];
    }
out:
    cm_free(start);
    cm_free(fill);
    cm_free(uses);
    cm_free(stack.v);
    return st;
}

static sp_sharding *clone_into(sp_module *m, const sp_sharding *s)
{
    return s != NULL ? sp_sharding_clone(&m->arena, s) : NULL;
}

/* A pointer -> pointer map (open addressing), to copy each of the original's
 * interned shardings once and share single-result sharding lists. */
typedef struct pmap {
    const void **key;
    void **val;
    uint32_t cap, n;
    bool oom;
} pmap;

static void **pmap_slot(pmap *t, const void *k)
{
    if ((t->n + 1) * 2 > t->cap) {
        uint32_t cap = t->cap < 256 ? 256 : t->cap * 2;
        const void **nk = cm_calloc(cap, sizeof(void *));
        void **nv = cm_calloc(cap, sizeof(void *));
        if (nk == NULL || nv == NULL) {
            cm_free(nk);
            cm_free(nv);
            t->oom = true;
            return NULL;
        }
        for (uint32_t i = 0; i < t->cap; i++) {
            if (t->key[i] != NULL) {
                uint32_t j = (uint32_t)(((uintptr_t)t->key[i] >> 4) * 2654435761u) & (cap - 1);
                while (nk[j] != NULL) {
                    j = (j + 1) & (cap - 1);
                }
                nk[j] = t->key[i];
                nv[j] = t->val[i];
            }
        }
        cm_free(t->key);
        cm_free(t->val);
        t->key = nk;
        t->val = nv;
        t->cap = cap;
    }
    uint32_t j = (uint32_t)(((uintptr_t)k >> 4) * 2654435761u) & (t->cap - 1);
    while (t->key[j] != NULL && t->key[j] != k) {
        j = (j + 1) & (t->cap - 1);
    }
    if (t->key[j] == NULL) {
        t->key[j] = k;
        t->n++;
    }
    return &t->val[j];
}

static void pmap_fini(pmap *t)
{
    cm_free(t->key);
    cm_free(t->val);
}

/* The copy of the original's sharding s0 in m (one per distinct s0). */
static sp_sharding *clone_shared(sp_module *m, pmap *t, const sp_sharding *s0)
{
    if (s0 == NULL) {
        return NULL;
    }
    void **slot = pmap_slot(t, s0);
    if (slot == NULL) {
        return NULL;
    }
    if (*slot == NULL) {
        *slot = sp_sharding_clone(&m->arena, s0);
    }
    return *slot;
}

/* Outside the region, m1 takes the original's propagated shardings (p0). */
static cm_status copy_outside(inc *c, const snap *p0, cm_error *err)
{
    sp_module *m = c->m1;
    bool oom = false;
    pmap clones = {0}, lists = {0};
    for (uint32_t i = 0; i < m->n_ops && !oom; i++) {
        const sp_op *op = &m->ops[i];
        if (c->region[i] || !prop_op(m, i) || op->n_results == 0 || c->op_map[i] == SP_NONE) {
            continue;
        }
        bool differs = false, any = false;
        for (uint32_t k = 0; k < op->n_results; k++) {
            const sp_sharding *s0 = p0->v[c->map[op->first_result + k]];
            differs = differs || !sp_sharding_equal(s0, sp_value_sharding(m, op->first_result + k));
            any = any || s0 != NULL;
        }
        if (!differs) {
            continue;
        }
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
            sp_sharding *x = clone_shared(m, &clones, p0->v[c->map[op->first_result]]);
            oom = x == NULL || sp_value_set_sharding(m, op->first_result, x) != CM_OK;
            continue;
        }
        if (!any) {
            sp_op_remove_attr(m, i, "sdy.sharding");
            continue;
        }
        void **shared = NULL;
        if (op->n_results == 1) {
            shared = pmap_slot(&lists, p0->v[c->map[op->first_result]]);
            if (shared != NULL && *shared != NULL) {
                oom = sp_op_set_attr(m, i, "sdy.sharding", *shared) != CM_OK;
                continue;
            }
            oom = shared == NULL;
        }
        sp_attr *a = oom ? NULL : sp_attr_new(m, SP_ATTR_SHARDING_LIST);
        sp_sharding **items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * op->n_results);
        oom = a == NULL || items == NULL;
        for (uint32_t k = 0; k < op->n_results && !oom; k++) {
            const sp_sharding *s0 = p0->v[c->map[op->first_result + k]];
            items[k] = s0 != NULL ? clone_shared(m, &clones, s0)
                                  : sp_sharding_open(&m->arena, NULL,
                                                     sp_value_type(m, op->first_result + k)->rank);
            oom = items[k] == NULL;
        }
        if (!oom) {
            a->u.shardings.items = items;
            a->u.shardings.n = op->n_results;
            oom = sp_op_set_attr(m, i, "sdy.sharding", a) != CM_OK;
            if (shared != NULL) {
                *shared = a;
            }
        }
    }
    oom = oom || clones.oom || lists.oom;
    pmap_fini(&clones);
    pmap_fini(&lists);
    for (uint32_t fi = 0; fi < c->fr1.n_funcs && !oom; fi++) {
        const sp_block *entry = &m->blocks[m->ops[c->fr1.func[fi]].regions[0].blocks[0]];
        for (uint32_t k = 0; k < entry->n_args && !oom; k++) {
            uint32_t v = entry->first_arg + k;
            const sp_sharding *s0 = p0->v[c->map[v]];
            if (!c->seen[v] && !sp_sharding_equal(s0, sp_value_sharding(m, v))) {
                oom = sp_value_set_sharding(m, v, clone_into(m, s0)) != CM_OK;
            }
        }
    }
    for (uint32_t k = 0; k < c->fr1.n && !oom; k++) {
        const sp_sharding *s0 = k < p0->n_out ? p0->out[k] : NULL;
        uint32_t fi = c->fr1.owner[k];
        if (!c->seen[m->n_values + k] && !sp_sharding_equal(s0, fres_sharding(m, &c->fr1, k))) {
            oom = sp_func_set_result_sharding(m, c->fr1.func[fi], k - c->fr1.base[fi],
                                              clone_into(m, s0)) != CM_OK;
        }
    }
    return oom ? cm_error_oom(err) : CM_OK;
}

/* Finds the edits' region in m1, both modules after their import passes
 * and before propagation; *ok false (c->why set) when the region argument
 * does not hold. */
static cm_status prepare_region(inc *c, bool *ok, cm_error *err)
{
    *ok = false;
    sp_module *m1 = c->m1;
    c->why = not_local(m1);
    if (c->why == NULL && not_local(c->m0) != NULL) {
        c->why = not_local(c->m0);
    }
    if (c->why != NULL) {
        return CM_OK;
    }
    cm_status fst = fres_init(c->m0, &c->fr0, err);
    if (fst == CM_OK) {
        fst = fres_init(m1, &c->fr1, err);
    }
    if (fst != CM_OK) {
        return fst;
    }
    bool same_funcs = c->fr0.n_funcs == c->fr1.n_funcs && c->fr0.n == c->fr1.n;
    for (uint32_t i = 0; same_funcs && i < c->fr1.n_funcs; i++) {
        same_funcs = c->fr0.func[i] == c->fr1.func[i] && c->fr0.base[i] == c->fr1.base[i];
    }
    if (!same_funcs) {
        c->why = "the edited module's functions differ from the original's";
        return CM_OK;
    }
    if (max_priority(m1, &c->fr1) != max_priority(c->m0, &c->fr0)) {
        c->why = "the edits change the rounds of user-priority propagation";
        return CM_OK;
    }
    uint32_t n_slots = m1->n_values + c->fr1.n;
    c->map = cm_alloc(sizeof(uint32_t) * (m1->n_values + 1u));
    c->op_map = cm_alloc(sizeof(uint32_t) * (m1->n_ops + 1u));
    c->region = cm_calloc(m1->n_ops + 1u, 1);
    c->seen = cm_calloc(n_slots + 1u, 1);
    if (c->map == NULL || c->op_map == NULL || c->region == NULL || c->seen == NULL) {
        return cm_error_oom(err);
    }
    memset(c->map, 0xff, sizeof(uint32_t) * (m1->n_values + 1u));
    memset(c->op_map, 0xff, sizeof(uint32_t) * (m1->n_ops + 1u));
    /* the edits' own seeds (ids are stable through the import passes) */
    for (uint32_t k = 0; k < c->s1->seed_ops.n; k++) {
        u32v_push(&c->seed_ops, c->s1->seed_ops.v[k]);
    }
    for (uint32_t k = c->s1->first_new_op; k < c->s1->end_new_op; k++) {
        u32v_push(&c->seed_ops, k);
    }
    for (uint32_t k = 0; k < c->s1->seed_vals.n; k++) {
        u32v_push(&c->seeds, c->s1->seed_vals.v[k]);
    }
    for (uint32_t k = 0; k + 1 < c->s1->seed_outs.n; k += 2) {
        uint32_t fi = fres_index(&c->fr1, c->s1->seed_outs.v[k]);
        if (fi != SP_NONE) {
            u32v_push(&c->seeds, m1->n_values + c->fr1.base[fi] + c->s1->seed_outs.v[k + 1]);
        }
    }
    if (!pair_modules(c)) {
        return c->oom ? cm_error_oom(err) : CM_OK;
    }
    if (c->seeds.oom || c->seed_ops.oom) {
        return cm_error_oom(err);
    }
    uint32_t n_region = 0;
    cm_status st = grow_region(c, &n_region, err);
    *ok = st == CM_OK;
    return st;
}

/* Propagates m1 over the region only, then copies the original's fixed
 * point (p0) to the rest. */
static cm_status run_region(inc *c, const snap *p0, const sp_prop_opts *po, double *copy_s,
                            cm_error *err)
{
    sp_prop_opts o = *po;
    o.op_mask = c->region;
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = sp_propagate(c->m1, &o, &d, err);
    sp_diags_fini(&d);
    double t = cm_now();
    if (st == CM_OK) {
        st = copy_outside(c, p0, err);
    }
    *copy_s = cm_now() - t;
    return st;
}

static void inc_fini(inc *c)
{
    fres_fini(&c->fr0);
    fres_fini(&c->fr1);
    cm_free(c->map);
    cm_free(c->op_map);
    cm_free(c->region);
    cm_free(c->seen);
    cm_free(c->seeds.v);
    cm_free(c->seed_ops.v);
}

/* Partitions m and costs it (explicit mode, as lint does). */
static cm_status cost_of(sp_module *m, const src *s, const sp_whatif_opts *o, sp_cost_summary *out,
                         uint32_t *n_colls, cm_error *err)
{
    sp_cost *cost = NULL;
    cm_status st = sp_advise_partition_cost(m, false, o->profile, -1, s->custom, s->g, &cost, err);
    if (st == CM_OK) {
        *out = *sp_cost_get_summary(cost);
        *n_colls = sp_cost_n_colls(cost);
    }
    sp_cost_destroy(cost);
    return st;
}

static uint32_t n_prop_ops(const sp_module *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        n += prop_op(m, i);
    }
    return n;
}

__attribute__((format(printf, 2, 3))) static const char *wstr(sp_whatif *w, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cm_arena_strdup(&w->arena, buf);
}

static const char *sharding_str(sp_whatif *w, const sp_sharding *s, bool *oom)
{
    if (s == NULL) {
        return NULL;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sharding_print(s, &b);
    const char *r = b.oom || b.data == NULL ? NULL : cm_arena_strndup(&w->arena, b.data, b.len);
    cm_buf_fini(&b);
    *oom = *oom || r == NULL;
    return r;
}

static void add_change(sp_whatif *w, const sp_vref *v, const char *label, const sp_sharding *a,
                       const sp_sharding *b, bool *oom)
{
    if (sp_sharding_equal(a, b) || *oom) {
        return;
    }
    if (w->n_changes == w->cap_changes) {
        uint32_t cap = w->cap_changes < 16 ? 16 : w->cap_changes * 2;
        sp_whatif_change *c = cm_realloc(w->changes, sizeof *c * cap);
        if (c == NULL) {
            *oom = true;
            return;
        }
        w->changes = c;
        w->cap_changes = cap;
    }
    sp_whatif_change *c = &w->changes[w->n_changes];
    c->value = *v;
    c->label = label;
    c->before = sharding_str(w, a, oom);
    c->after = sharding_str(w, b, oom);
    *oom = *oom || label == NULL;
    if (!*oom) {
        w->n_changes++;
    }
}

/* Every input, original op result and output whose final sharding differs. */
static cm_status diff(sp_whatif *w, const src *s0, const src *s1, const snap *f0, const snap *f1,
                      cm_error *err)
{
    bool oom = false;
    const sp_module *m = s0->m;
    for (uint32_t fi = 0; fi < s0->n_funcs && !oom; fi++) {
        uint32_t f = s0->funcs[fi];
        const sp_attr *nm = sp_op_attr(m, f, "sym_name");
        const char *fname = s0->n_funcs > 1 && nm != NULL && nm->kind == SP_ATTR_STRING
                                ? cm_arena_strdup(&w->arena, nm->u.str.s)
                                : NULL;
        const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
        for (uint32_t k = 0; k < entry->n_args; k++) {
            uint32_t v = entry->first_arg + k;
            sp_vref r = {SP_VREF_INPUT, fname, k, NULL, 0};
            const char *gn = s0->g != NULL ? sp_graph_value_name(s0->g, v) : NULL;
            add_change(w, &r,
                       gn != NULL      ? wstr(w, "%%%s", gn)
                       : fname != NULL ? wstr(w, "%%arg%u of @%s", k, fname)
                                       : wstr(w, "%%arg%u", k),
                       f0->v[v], f1->v[v], &oom);
        }
    }
    cm_buf path;
    cm_buf_init(&path);
    for (uint32_t i = 0; i < s0->walk.n && !oom; i++) {
        uint32_t op = s0->walk.v[i];
        /* an op the pipeline merged away (constant merger) has no block left */
        if (s1->removed[op] || s0->m->ops[op].parent_block == SP_NONE) {
            continue;
        }
        const sp_op *o = &m->ops[op];
        cm_buf_reset(&path);
        op_path(s0, op, &path);
        const char *p =
            path.oom || path.data == NULL ? NULL : cm_arena_strndup(&w->arena, path.data, path.len);
        for (uint32_t k = 0; k < o->n_results && p != NULL; k++) {
            uint32_t v = o->first_result + k;
            if (sp_sharding_equal(f0->v[v], f1->v[v])) {
                continue;
            }
            sp_vref r = {SP_VREF_OP, NULL, 0, p, k};
            const char *gn = s0->g != NULL ? sp_graph_value_name(s0->g, v) : NULL;
            add_change(w, &r,
                       gn != NULL ? wstr(w, "%%%s", gn)
                                  : wstr(w, "result %u of %s (%s)", k, p, o->name),
                       f0->v[v], f1->v[v], &oom);
        }
        oom = oom || p == NULL;
    }
    cm_buf_fini(&path);
    /* outputs: the snapshots number them over s0->funcs in order */
    uint32_t k = 0;
    for (uint32_t fi = 0; fi < s0->n_funcs && !oom; fi++) {
        const sp_type *ft = sp_func_type(m, s0->funcs[fi]);
        const sp_attr *nm = sp_op_attr(m, s0->funcs[fi], "sym_name");
        const char *fname = s0->n_funcs > 1 && nm != NULL && nm->kind == SP_ATTR_STRING
                                ? cm_arena_strdup(&w->arena, nm->u.str.s)
                                : NULL;
        for (uint32_t i = 0; ft != NULL && i < ft->n_results && !oom; i++, k++) {
            if (k >= f0->n_out || k >= f1->n_out) {
                break;
            }
            sp_vref r = {SP_VREF_OUTPUT, fname, i, NULL, 0};
            add_change(w, &r,
                       fname != NULL ? wstr(w, "output %u of @%s", i, fname)
                                     : wstr(w, "output %u", i),
                       f0->out[k], f1->out[k], &oom);
        }
    }
    return oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the what-if") : CM_OK;
}

/* CM_EIO once the caller's cancel hook says stop, else CM_OK. */
static cm_status stop_check(const sp_whatif_opts *o, cm_error *err)
{
    if (o->cancel != NULL && o->cancel(o->cancel_ctx)) {
        return cm_error_set(err, CM_EIO, NULL, "what-if stopped before its end (cancelled)");
    }
    return CM_OK;
}

cm_status sp_whatif_run(const char *text, size_t len, const sp_input_opts *in_opts,
                        const sp_edit_list *edits, const sp_whatif_opts *o, sp_whatif **out,
                        cm_error *err)
{
    *out = NULL;
    sp_plan_pass pass = in_opts != NULL ? in_opts->pass : SP_PLAN_PIPELINE;
    if ((unsigned)pass >= SP_PLAN_N_PASSES) {
        return cm_error_set(err, CM_EINVAL, "/options/pass", "unknown pass %d", (int)pass);
    }
    bool pipeline = pass == SP_PLAN_PIPELINE;
    sp_whatif_opts defo;
    if (o == NULL) {
        sp_whatif_opts_init(&defo);
        o = &defo;
    }
    sp_whatif *w = cm_calloc(1, sizeof *w);
    if (w == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the what-if");
    }
    cm_arena_init(&w->arena, 8192);
    cm_buf_init(&w->mlir);
    cm_buf_init(&w->propagated);
    w->n_edits = edits->n;
    w->stats.why_full = "";
    src *s0 = NULL, *s1 = NULL;
    snap p0 = {0}, f0 = {0}, f1 = {0};
    inc c;
    memset(&c, 0, sizeof c);
    sp_diags d;
    sp_diags_init(&d);
    cm_status st = src_load(text, len, in_opts, &s0, err);
    if (st == CM_OK) {
        st = src_load(text, len, in_opts, &s1, err);
    }
    /* the edited module */
    if (st == CM_OK) {
        st = stop_check(o, err);
    }
    if (st == CM_OK) {
        st = materialise_custom(s0, err);
    }
    if (st == CM_OK) {
        st = apply_edits(s1, edits, err);
    }
    if (st == CM_OK) {
        sp_print_opts po = {false, true};
        sp_mlir_print(s1->m, &po, &w->mlir);
        if (w->mlir.oom) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory printing the module");
        }
    }
    /* both through the import passes (the pipeline's); the region is found
     * before propagation */
    sp_prop_opts po;
    prop_opts(&po, s0 != NULL ? s0 : s1, pass);
    cm_cancel stop = {o->cancel, o->cancel_ctx};
    po.cancel = &stop;
    if (st == CM_OK && pipeline) {
        st = sp_pass_propagation_import(s0->m, &po, &d, err);
    }
    double t0 = cm_now();
    if (st == CM_OK && pipeline) {
        st = sp_pass_propagation_import(s1->m, &po, &d, err);
    }
    w->stats.import_s = cm_now() - t0;
    bool use_region = false;
    if (st == CM_OK && !o->full) {
        c.s0 = s0;
        c.s1 = s1;
        c.m0 = s0->m;
        c.m1 = s1->m;
        st = prepare_region(&c, &use_region, err);
    }
    double t_prep = cm_now() - t0;
    w->stats.region_s = t_prep - w->stats.import_s;
    /* the original, propagated in full (not part of the edit's cost) */
    if (st == CM_OK) {
        st = stop_check(o, err);
    }
    if (st == CM_OK) {
        st = sp_propagate(s0->m, &po, &d, err);
    }
    if (st == CM_OK) {
        st = snap_take(s0->m, &p0, err);
    }
    if (st == CM_OK && pipeline) {
        st = sp_pass_propagation_export(s0->m, &po, err);
    }
    if (st == CM_OK) {
        st = snap_take(s0->m, &f0, err);
    }
    /* the edited one: over the region, or in full */
    if (st == CM_OK) {
        st = stop_check(o, err);
    }
    double t1 = cm_now(), tp = 0;
    if (st == CM_OK && use_region) {
        st = run_region(&c, &p0, &po, &w->stats.copy_s, err);
        tp = cm_now() - t1 - w->stats.copy_s;
    } else if (st == CM_OK) {
        st = sp_propagate(s1->m, &po, &d, err);
        tp = cm_now() - t1;
        w->stats.why_full = o->full ? "asked for a full re-propagation" : c.why;
    }
    double t2 = cm_now();
    if (st == CM_OK && pipeline) {
        st = sp_pass_propagation_export(s1->m, &po, err);
    }
    w->stats.export_s = cm_now() - t2;
    w->stats.incremental_s = t_prep + (cm_now() - t1);
    w->stats.propagate_s = tp;
    bool done = use_region;
    if (st == CM_OK) {
        w->stats.total_ops = n_prop_ops(s1->m);
        w->stats.incremental = done;
        w->stats.region_ops = w->stats.total_ops;
        if (done) {
            w->stats.region_ops = 0;
            for (uint32_t i = 0; i < s1->m->n_ops; i++) {
                w->stats.region_ops += c.region[i] && prop_op(s1->m, i);
            }
        }
        if (w->stats.why_full == NULL) {
            w->stats.why_full = "";
        }
        st = snap_take(s1->m, &f1, err);
    }
    if (st == CM_OK && o->keep_propagated) {
        sp_print_opts pp = {false, false};
        sp_mlir_print(s1->m, &pp, &w->propagated);
        if (w->propagated.oom) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory printing the module");
        }
    }
    if (st == CM_OK) {
        st = diff(w, s0, s1, &f0, &f1, err);
    }
    if (st == CM_OK && !o->no_cost) {
        st = stop_check(o, err);
        if (st == CM_OK) {
            st = cost_of(s0->m, s0, o, &w->before, &w->colls_before, err);
        }
        if (st == CM_OK) {
            st = stop_check(o, err);
        }
        if (st == CM_OK) {
            st = cost_of(s1->m, s1, o, &w->after, &w->colls_after, err);
        }
        w->costed = st == CM_OK;
    }
    inc_fini(&c);
    snap_fini(&p0);
    snap_fini(&f0);
    snap_fini(&f1);
    sp_diags_fini(&d);
    src_destroy(s0);
    src_destroy(s1);
    if (st != CM_OK) {
        sp_whatif_destroy(w);
        return st;
    }
    *out = w;
    return CM_OK;
}

void sp_whatif_destroy(sp_whatif *w)
{
    if (w == NULL) {
        return;
    }
    cm_free(w->changes);
    cm_buf_fini(&w->mlir);
    cm_buf_fini(&w->propagated);
    cm_arena_fini(&w->arena);
    cm_free(w);
}

uint32_t sp_whatif_n_changed(const sp_whatif *w)
{
    return w->n_changes;
}

const sp_whatif_change *sp_whatif_changed_at(const sp_whatif *w, uint32_t i)
{
    return i < w->n_changes ? &w->changes[i] : NULL;
}

const sp_whatif_stats *sp_whatif_get_stats(const sp_whatif *w)
{
    return &w->stats;
}

const sp_cost_summary *sp_whatif_cost_before(const sp_whatif *w)
{
    return &w->before;
}

const sp_cost_summary *sp_whatif_cost_after(const sp_whatif *w)
{
    return &w->after;
}

const char *sp_whatif_mlir(const sp_whatif *w, size_t *len_out)
{
    if (len_out != NULL) {
        *len_out = w->mlir.len;
    }
    return w->mlir.data != NULL ? w->mlir.data : "";
}

const char *sp_whatif_propagated(const sp_whatif *w, size_t *len_out)
{
    if (len_out != NULL) {
        *len_out = w->propagated.len;
    }
    return w->propagated.data != NULL ? w->propagated.data : "";
}

/* ---- reports ------------------------------------------------------------------------------ */

static void put_cost(cm_buf *b, const sp_cost_summary *c, uint32_t n_colls)
{
    cm_buf_puts(b, "{\"step_s\":");
    cm_json_put_g(b, c->step_s, 6);
    cm_json_put_key(b, "peak_bytes");
    cm_json_put_f64(b, c->peak_bytes); /* exact: a byte count */
    cm_json_put_key(b, "comm_bytes");
    cm_json_put_f64(b, c->comm_bytes);
    cm_buf_puts(b, ",\"collectives\":");
    cm_buf_put_i64(b, n_colls);
    cm_buf_putc(b, '}');
}

void sp_whatif_write_json(const sp_whatif *w, int64_t plan_id, cm_buf *b)
{
    cm_buf_printf(b, "{\"edits\":%u,\"changed\":[", w->n_edits);
    for (uint32_t i = 0; i < w->n_changes; i++) {
        const sp_whatif_change *c = &w->changes[i];
        cm_buf_puts(b, i > 0 ? ",\n  {\"value\":" : "\n  {\"value\":");
        sp_vref_write_json(&c->value, b);
        cm_buf_puts(b, ",\"label\":");
        sp_advise_put_jstr(b, c->label);
        cm_buf_puts(b, ",\"before\":");
        cm_json_put_cstr(b, c->before);
        cm_buf_puts(b, ",\"after\":");
        cm_json_put_cstr(b, c->after);
        cm_buf_putc(b, '}');
    }
    cm_buf_printf(b,
                  "],\n \"n_changed\":%u,\n \"region\":{\"ops\":%u,\"total_ops\":%u,"
                  "\"incremental\":%s,\"why_full\":",
                  w->n_changes, w->stats.region_ops, w->stats.total_ops,
                  w->stats.incremental ? "true" : "false");
    sp_advise_put_jstr(b, w->stats.why_full);
    cm_buf_puts(b, "},\n \"seconds\":{\"incremental\":");
    cm_json_put_g(b, w->stats.incremental_s, 6);
    cm_json_put_key(b, "propagation");
    cm_json_put_g(b, w->stats.propagate_s, 6);
    cm_buf_puts(b, "},\n \"cost\":");
    if (w->costed) {
        cm_buf_puts(b, "{\"before\":");
        put_cost(b, &w->before, w->colls_before);
        cm_buf_puts(b, ",\"after\":");
        put_cost(b, &w->after, w->colls_after);
        cm_buf_putc(b, '}');
    } else {
        cm_buf_puts(b, "null");
    }
    cm_buf_puts(b, ",\n \"mlir\":");
    sp_advise_put_jstr(b, sp_whatif_mlir(w, NULL));
    if (plan_id > 0) {
        cm_buf_puts(b, ",\n \"plan_id\":");
        cm_buf_put_i64(b, plan_id);
    }
    cm_buf_puts(b, "}");
}

void sp_whatif_write_text(const sp_whatif *w, cm_buf *b)
{
    cm_buf_printf(b, "%u edit(s): %u value(s) change sharding\n", w->n_edits, w->n_changes);
    for (uint32_t i = 0; i < w->n_changes; i++) {
        const sp_whatif_change *c = &w->changes[i];
        cm_buf_printf(b, "  %s\n      before %s\n      after  %s\n", c->label,
                      c->before != NULL ? c->before : "(none)",
                      c->after != NULL ? c->after : "(none)");
    }
    cm_buf_printf(b, "region: %u of %u ops re-propagated%s%s%s in %.4f s\n", w->stats.region_ops,
                  w->stats.total_ops, w->stats.incremental ? "" : " (full: ",
                  w->stats.incremental ? "" : w->stats.why_full, w->stats.incremental ? "" : ")",
                  w->stats.incremental_s);
    if (w->costed) {
        cm_buf_printf(b,
                      "cost:   step %.6g s -> %.6g s, peak %.6g -> %.6g bytes, "
                      "communication %.6g -> %.6g bytes per device\n",
                      w->before.step_s, w->after.step_s, w->before.peak_bytes, w->after.peak_bytes,
                      w->before.comm_bytes, w->after.comm_bytes);
    }
}
