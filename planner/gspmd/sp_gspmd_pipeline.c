/* SPDX-License-Identifier: Apache-2.0
 * planner: XLA's import pipeline for a StableHLO (or MHLO) module with
 * `mhlo.sharding` strings (-xla-sdy-stablehlo-import-pipeline,
 * -xla-sdy-mhlo-import-pipeline, sp_gspmd.h): custom calls lose their
 * tuples (XLA's flatten-tuple pass and the canonicalizer's folding of
 * get_tuple_element of a tuple), then the shardings, shard_maps and
 * sharding custom calls are imported and the constants become
 * sdy.constant. Ownership: everything is built in the module's arena. */
#include <stdio.h>
#include <string.h>

#include "sp_export.h"
#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define MAX_ELEMS 1024 /* elements of one flattened tuple */
#define MAX_DEPTH 32   /* nesting of tuples opened */

cm_status sp_gspmd_walk_funcs(sp_module *m, sp_pass_op_fn fn, void *ctx)
{
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->blocks[m->body].n_ops && st == CM_OK; i++) {
        uint32_t f = m->blocks[m->body].ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], fn, ctx);
        }
    }
    return st;
}

/* ---- tuple types ---------------------------------------------------------------------- */

static bool is_tuple(const sp_module *m, uint32_t type)
{
    const sp_type *t = &m->types[type];
    return t->kind == SP_TYPE_OTHER && strncmp(t->text, "tuple<", 6) == 0;
}

/* The element type ids of tuple type `type`, interned in m; nested tuples
 * are left as elements (leaf_types opens them). Errors: CM_EINVAL for
 * more than cap elements or text that does not split, CM_ENOMEM. */
static cm_status tuple_elems(sp_module *m, uint32_t type, uint32_t *out, uint32_t cap,
                             uint32_t *n_out, cm_error *err)
{
    const char *s = m->types[type].text + 6;
    size_t len = strlen(s);
    *n_out = 0;
    if (len == 0 || s[len - 1] != '>') {
        return cm_error_set(err, CM_EINVAL, "", "a tuple type that does not split");
    }
    len--;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : ',';
        if (c == '<' || c == '(' || c == '[' || c == '{') {
            depth++;
        } else if ((c == '>' && (i == 0 || s[i - 1] != '-')) || c == ')' || c == ']' ||
                   c == '}') {
            depth--;
        } else if (c == ',' && depth == 0) {
            size_t a = start, b = i;
            while (a < b && s[a] == ' ') {
                a++;
            }
            while (b > a && s[b - 1] == ' ') {
                b--;
            }
            start = i + 1;
            if (a == b && i == len && *n_out == 0) {
                break; /* tuple<> */
            }
            if (a == b || *n_out >= cap) {
                return cm_error_set(err, CM_EINVAL, "", "a tuple type that does not split");
            }
            cm_status st = sp_module_intern_type(m, s + a, b - a, &out[*n_out], err);
            if (st != CM_OK) {
                return st;
            }
            (*n_out)++;
        }
    }
    return CM_OK;
}

/* ---- flattening custom calls ------------------------------------------------------------ */

static void replace_uses(sp_module *m, uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op *o = &m->ops[i];
        for (uint32_t k = 0; o->parent_block != SP_NONE && k < o->n_operands; k++) {
            if (o->operands[k] == from) {
                o->operands[k] = to;
            }
        }
    }
}

static bool has_uses(const sp_module *m, uint32_t v)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        for (uint32_t k = 0; o->parent_block != SP_NONE && k < o->n_operands; k++) {
            if (o->operands[k] == v) {
                return true;
            }
        }
    }
    return false;
}

static void detach(sp_module *m, uint32_t op)
{
    uint32_t idx = sp_op_index_in_block(m, op);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[op].parent_block, idx);
    }
}

typedef struct flat_ctx {
    uint32_t *dead_tuples; /* stablehlo.tuple ops whose use went away */
    uint32_t n_dead, cap_dead;
    cm_error *err;
} flat_ctx;

static cm_status note_tuple(flat_ctx *c, uint32_t op)
{
    if (CM_GROW_U32(c->dead_tuples, c->cap_dead, c->n_dead + 1, c->err) != CM_OK) {
        return CM_ENOMEM;
    }
    c->dead_tuples[c->n_dead++] = op;
    return CM_OK;
}

/* The leaf (non-tuple) types of `type`, nested tuples opened in order,
 * appended to out[*n..cap). Errors (at op): CM_EINVAL for more than cap
 * leaves, nesting deeper than MAX_DEPTH or a type that does not split;
 * CM_ENOMEM. */
static cm_status leaf_types(sp_module *m, uint32_t op, uint32_t type, uint32_t *out, uint32_t cap,
                            uint32_t *n, int depth, cm_error *err)
{
    if (!is_tuple(m, type)) {
        if (*n >= cap) {
            return sp_gspmd_op_error(m, op, err, "has a tuple with too many elements");
        }
        out[(*n)++] = type;
        return CM_OK;
    }
    if (depth >= MAX_DEPTH) {
        return sp_gspmd_op_error(m, op, err, "has tuples nested too deep");
    }
    uint32_t *el = cm_alloc(sizeof *el * MAX_ELEMS), ne = 0;
    if (el == NULL) {
        return cm_error_oom(err);
    }
    cm_status st = tuple_elems(m, type, el, MAX_ELEMS, &ne, err);
    for (uint32_t e = 0; e < ne && st == CM_OK; e++) {
        st = leaf_types(m, op, el[e], out, cap, n, depth + 1, err);
    }
    cm_free(el);
    return st;
}

/* The leaves of value v, an operand of custom call op, appended to
 * out[*n..MAX_ELEMS): a tuple made by stablehlo.tuple gives its operands'
 * leaves, any other tuple is read with new get_tuple_element ops placed
 * before op (nested ones read in turn). */
static cm_status flat_value(sp_module *m, uint32_t op, flat_ctx *c, uint32_t v, uint32_t *out,
                            uint32_t *n, int depth)
{
    if (!is_tuple(m, m->values[v].type)) {
        if (*n >= MAX_ELEMS) {
            return sp_gspmd_op_error(m, op, c->err, "has a tuple with too many elements");
        }
        out[(*n)++] = v;
        return CM_OK;
    }
    if (depth >= MAX_DEPTH) {
        return sp_gspmd_op_error(m, op, c->err, "has tuples nested too deep");
    }
    uint32_t *types = cm_alloc(sizeof *types * MAX_ELEMS), ne = 0;
    if (types == NULL) {
        return cm_error_oom(c->err);
    }
    cm_status st = tuple_elems(m, m->values[v].type, types, MAX_ELEMS, &ne, c->err);
    uint32_t def = m->values[v].def;
    if (st == CM_OK && def != SP_NONE && m->ops[def].kind == SP_OP_TUPLE &&
        m->ops[def].n_operands == ne) {
        st = note_tuple(c, def);
        for (uint32_t e = 0; e < ne && st == CM_OK; e++) {
            st = flat_value(m, op, c, m->ops[def].operands[e], out, n, depth + 1);
        }
        cm_free(types);
        return st;
    }
    for (uint32_t e = 0; e < ne && st == CM_OK; e++) {
        uint32_t g;
        sp_attr *ix = sp_attr_new(m, SP_ATTR_INT);
        if (ix == NULL || sp_module_new_op(m, SP_NONE, "stablehlo.get_tuple_element", &v, 1,
                                           &types[e], 1, &g) != CM_OK) {
            st = cm_error_oom(c->err);
            break;
        }
        ix->u.i.v = e;
        ix->u.i.type = "i32";
        m->ops[g].kind = SP_OP_GET_TUPLE_ELEMENT;
        if (sp_op_set_attr(m, g, "index", ix) != CM_OK ||
            sp_block_insert_op(m, m->ops[op].parent_block, sp_op_index_in_block(m, op), g) !=
                CM_OK) {
            st = cm_error_oom(c->err);
            break;
        }
        st = flat_value(m, op, c, m->ops[g].first_result, out, n, depth + 1);
    }
    cm_free(types);
    return st;
}

/* The flat operands of custom call op, every tuple operand opened to its
 * leaves (flat_value). */
static cm_status flat_operands(sp_module *m, uint32_t op, flat_ctx *c, uint32_t *out,
                               uint32_t *n_out)
{
    *n_out = 0;
    cm_status st = CM_OK;
    for (uint32_t k = 0; k < m->ops[op].n_operands && st == CM_OK; k++) {
        st = flat_value(m, op, c, m->ops[op].operands[k], out, n_out, 0);
    }
    return st;
}

/* Where the new results go: the flattened op's results hold the leaves of
 * its old tuple result in order; tuples rebuilt for users other than
 * get_tuple_element are placed after it, at block index *at. */
typedef struct res_ctx {
    uint32_t op, first, block, at; /* flattened op, its first result, its block, insert index */
    flat_ctx *c;
} res_ctx;

/* A stablehlo.tuple of leaves first.. of `type` (nested tuples rebuilt
 * inside out) in *out. */
static cm_status rebuild_tuple(sp_module *m, res_ctx *r, uint32_t type, uint32_t *leaf,
                               uint32_t *out, int depth)
{
    if (!is_tuple(m, type)) {
        *out = r->first + (*leaf)++;
        return CM_OK;
    }
    if (depth >= MAX_DEPTH) {
        return sp_gspmd_op_error(m, r->op, r->c->err, "has tuples nested too deep");
    }
    uint32_t *el = cm_alloc(sizeof *el * MAX_ELEMS), ne = 0;
    uint32_t *vals = cm_alloc(sizeof *vals * MAX_ELEMS);
    cm_status st = el == NULL || vals == NULL ? cm_error_oom(r->c->err) : CM_OK;
    if (st == CM_OK) {
        st = tuple_elems(m, type, el, MAX_ELEMS, &ne, r->c->err);
    }
    for (uint32_t e = 0; e < ne && st == CM_OK; e++) {
        st = rebuild_tuple(m, r, el[e], leaf, &vals[e], depth + 1);
    }
    uint32_t tup;
    if (st == CM_OK &&
        (sp_module_new_op(m, SP_NONE, "stablehlo.tuple", vals, ne, &type, 1, &tup) != CM_OK ||
         sp_block_insert_op(m, r->block, r->at, tup) != CM_OK)) {
        st = cm_error_oom(r->c->err);
    }
    if (st == CM_OK) {
        r->at++;
        m->ops[tup].kind = SP_OP_TUPLE;
        *out = m->ops[tup].first_result;
    }
    cm_free(el);
    cm_free(vals);
    return st;
}

/* Value v of tuple type `type`, whose leaves are results first..: its
 * get_tuple_element users read the matching result (or, for a nested
 * tuple, are resolved in turn), and any other user reads a rebuilt
 * stablehlo.tuple. */
static cm_status resolve_users(sp_module *m, res_ctx *r, uint32_t v, uint32_t type, uint32_t first,
                               int depth)
{
    if (depth >= MAX_DEPTH) {
        return sp_gspmd_op_error(m, r->op, r->c->err, "has tuples nested too deep");
    }
    uint32_t *el = cm_alloc(sizeof *el * MAX_ELEMS), ne = 0;
    uint32_t *base = cm_alloc(sizeof *base * (MAX_ELEMS + 1u));
    cm_status st = el == NULL || base == NULL ? cm_error_oom(r->c->err) : CM_OK;
    if (st == CM_OK) {
        st = tuple_elems(m, type, el, MAX_ELEMS, &ne, r->c->err);
    }
    /* base[e]: the leaf index where element e starts */
    if (st == CM_OK) {
        base[0] = first;
    }
    for (uint32_t e = 0; e < ne && st == CM_OK; e++) {
        uint32_t cnt = 0, *scratch = cm_alloc(sizeof *scratch * MAX_ELEMS);
        st = scratch == NULL
                 ? cm_error_oom(r->c->err)
                 : leaf_types(m, r->op, el[e], scratch, MAX_ELEMS, &cnt, depth + 1, r->c->err);
        cm_free(scratch);
        base[e + 1] = base[e] + cnt;
    }
    for (uint32_t i = 0; i < m->n_ops && st == CM_OK; i++) {
        const sp_op *u = &m->ops[i];
        const sp_attr *ix = u->kind == SP_OP_GET_TUPLE_ELEMENT ? sp_op_attr(m, i, "index") : NULL;
        if (u->parent_block == SP_NONE || u->n_operands != 1 || u->operands[0] != v || ix == NULL ||
            ix->kind != SP_ATTR_INT || ix->u.i.v < 0 || ix->u.i.v >= (int64_t)ne) {
            continue;
        }
        uint32_t e = (uint32_t)ix->u.i.v, g = m->ops[i].first_result;
        if (is_tuple(m, el[e])) {
            st = resolve_users(m, r, g, el[e], base[e], depth + 1);
        } else {
            replace_uses(m, g, r->first + base[e]);
        }
        if (st == CM_OK && !has_uses(m, g)) {
            detach(m, i);
        }
    }
    if (st == CM_OK && has_uses(m, v)) {
        uint32_t leaf = first, tup;
        st = rebuild_tuple(m, r, type, &leaf, &tup, depth);
        if (st == CM_OK) {
            replace_uses(m, v, tup);
        }
    }
    cm_free(el);
    cm_free(base);
    return st;
}

/* A custom call with tuple operands takes their leaves instead, and one
 * with a tuple result gets one result per leaf (nested tuples opened):
 * get_tuple_element users read the matching result, other users a
 * rebuilt stablehlo.tuple of the results. */
static cm_status flatten_call(sp_module *m, uint32_t op, void *vctx)
{
    flat_ctx *c = vctx;
    sp_op *o = &m->ops[op];
    if (o->kind != SP_OP_CUSTOM_CALL) {
        return CM_OK;
    }
    bool tuple_result = o->n_results == 1 && is_tuple(m, m->values[o->first_result].type);
    bool tuple_operand = false;
    for (uint32_t k = 0; k < o->n_operands; k++) {
        tuple_operand = tuple_operand || is_tuple(m, m->values[o->operands[k]].type);
    }
    if (!tuple_result && !tuple_operand) {
        return CM_OK;
    }
    uint32_t *rtypes = cm_alloc(sizeof *rtypes * MAX_ELEMS), nr = 0;
    uint32_t *ops = cm_alloc(sizeof *ops * MAX_ELEMS), n = 0;
    cm_status st = rtypes == NULL || ops == NULL ? cm_error_oom(c->err) : CM_OK;
    if (st == CM_OK && tuple_result) {
        st = leaf_types(m, op, m->values[m->ops[op].first_result].type, rtypes, MAX_ELEMS, &nr, 0,
                        c->err);
    }
    if (st == CM_OK) {
        st = flat_operands(m, op, c, ops, &n);
    }
    if (st != CM_OK) {
        goto out;
    }
    if (!tuple_result) {
        uint32_t *copy = cm_arena_memdup(&m->arena, ops, n, sizeof *ops);
        if (copy == NULL && n > 0) {
            st = cm_error_oom(c->err);
            goto out;
        }
        m->ops[op].operands = copy;
        m->ops[op].n_operands = n;
        goto out;
    }
    uint32_t nop;
    if (sp_module_new_op(m, SP_NONE, m->ops[op].name, ops, n, rtypes, nr, &nop) != CM_OK) {
        st = cm_error_oom(c->err);
        goto out;
    }
    o = &m->ops[op];
    sp_op *no = &m->ops[nop];
    no->kind = o->kind;
    no->attrs = o->attrs;
    no->n_attrs = o->n_attrs;
    no->line = o->line;
    no->col = o->col;
    no->loc = o->loc;
    no->where = o->where;
    uint32_t old = o->first_result, block = o->parent_block, at = sp_op_index_in_block(m, op);
    if (sp_block_insert_op(m, block, at, nop) != CM_OK) {
        st = cm_error_oom(c->err);
        goto out;
    }
    detach(m, op);
    res_ctx r = {nop, m->ops[nop].first_result, block, at + 1, c};
    st = resolve_users(m, &r, old, m->values[old].type, 0, 0);
out:
    cm_free(rtypes);
    cm_free(ops);
    return st;
}

cm_status sp_gspmd_flatten_tuples(sp_module *m, cm_error *err)
{
    flat_ctx c = {NULL, 0, 0, err};
    cm_status st = sp_gspmd_walk_funcs(m, flatten_call, &c);
    for (uint32_t i = 0; st == CM_OK && i < c.n_dead; i++) {
        uint32_t t = c.dead_tuples[i];
        if (m->ops[t].parent_block != SP_NONE && !has_uses(m, m->ops[t].first_result)) {
            detach(m, t);
        }
    }
    cm_free(c.dead_tuples);
    return st;
}

/* ---- export: sdy ops HLO has no form for --------------------------------------------- */

typedef struct ops_ctx {
    uint32_t *dead; /* all_reduce and propagation_barrier ops, now unused */
    uint32_t n_dead, cap_dead;
    cm_error *err;
} ops_ctx;

/* The mesh of s, resolved (NULL: s is NULL or names no mesh of m). */
static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    return s->mesh != NULL        ? s->mesh
           : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                  : NULL;
}

/* Whether s is on a single-device (maximal) mesh. */
static bool is_maximal(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = sharding_mesh(m, s);
    return mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1;
}

/* Whether s places no data: NULL, or no axis on any dimension and no
 * unreduced axes. */
static bool places_nothing(const sp_sharding *s)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return s == NULL || s->n_unreduced == 0;
}

/* A reshard between a maximal sharding and one that places nothing (none,
 * or fully replicated) needs no copy in HLO: the tensor is whole on the
 * device either way, and XLA's export gives way to the operand. A reshard
 * from maximal to a sharded layout, or to another device, stays a copy. */
static bool maximal_noop_reshard(const sp_module *m, uint32_t op)
{
    const sp_sharding *in = sp_value_sharding_partitioned(m, m->ops[op].operands[0]);
    const sp_attr *a = sp_op_attr(m, op, "sharding");
    const sp_sharding *out = a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
    if (out == NULL || m->ops[op].n_operands != 1) {
        return false;
    }
    return (is_maximal(m, out) && !is_maximal(m, in) && places_nothing(in)) ||
           (is_maximal(m, in) && !is_maximal(m, out) && places_nothing(out));
}

/* Replaces op's one result by its operand and marks op for removal. */
static cm_status drop_op(sp_module *m, uint32_t op, ops_ctx *c)
{
    const sp_op *o = &m->ops[op];
    if (o->n_operands != 1 || o->n_results != 1) {
        return sp_gspmd_op_error(m, op, c->err, "expected one operand and one result");
    }
    replace_uses(m, o->first_result, o->operands[0]);
    if (CM_GROW_U32(c->dead, c->cap_dead, c->n_dead + 1, c->err) != CM_OK) {
        return CM_ENOMEM;
    }
    c->dead[c->n_dead++] = op;
    return CM_OK;
}

/* XLA's -xla-sdy-export-ops: a reshard or sharding constraint becomes an
 * mhlo.copy with its sharding (a reshard next to a maximal sharding as
 * maximal_noop_reshard says gives way to its operand), an explicit
 * collective one with its out sharding; all_reduce (which moves no data
 * between shards outside a manual computation) and propagation_barrier give
 * way to their operand. */
static cm_status export_sdy_op(sp_module *m, uint32_t op, void *vctx)
{
    ops_ctx *c = vctx;
    sp_op *o = &m->ops[op];
    const char *key = NULL;
    switch (o->kind) {
    case SP_OP_SDY_RESHARD:
        if (maximal_noop_reshard(m, op)) {
            return drop_op(m, op, c);
        }
        key = "sharding";
        break;
    case SP_OP_SDY_SHARDING_CONSTRAINT:
        key = "sharding";
        break;
    case SP_OP_SDY_ALL_GATHER:
    case SP_OP_SDY_ALL_SLICE:
    case SP_OP_SDY_ALL_TO_ALL:
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_REDUCE_SCATTER:
        key = "out_sharding";
        break;
    case SP_OP_SDY_ALL_REDUCE:
    case SP_OP_SDY_PROPAGATION_BARRIER:
        /* an all_reduce left here (its operand has no unreduced axes) is
         * one XLA's partitioner makes again from the shardings around it */
        return drop_op(m, op, c);
    default:
        return CM_OK;
    }
    const sp_attr *a = sp_op_attr(m, op, key);
    if (a == NULL || a->kind != SP_ATTR_SHARDING || o->n_operands != 1 || o->n_results != 1) {
        return sp_gspmd_op_error(m, op, c->err, "expected one operand, one result and a sharding");
    }
    sp_attr *l = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
    sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
    if (l == NULL || items == NULL || attrs == NULL) {
        return cm_error_oom(c->err);
    }
    items[0] = a->u.sharding;
    l->u.shardings.items = items;
    l->u.shardings.n = 1;
    attrs[0] = (sp_named_attr){"sdy.sharding", l};
    o = &m->ops[op];
    o->name = "mhlo.copy";
    o->kind = SP_OP_MHLO_COPY;
    o->attrs = attrs;
    o->n_attrs = 1;
    return CM_OK;
}

static cm_status export_ops(sp_module *m, cm_error *err)
{
    ops_ctx c = {NULL, 0, 0, err};
    cm_status st = sp_gspmd_walk_funcs(m, export_sdy_op, &c);
    for (uint32_t i = 0; st == CM_OK && i < c.n_dead; i++) {
        detach(m, c.dead[i]);
    }
    cm_free(c.dead);
    return st;
}

/* ---- export: manual reduction collectives ------------------------------------------------ */

/* The largest channel handle among m's ops (0 when none). */
static int64_t max_channel(const sp_module *m)
{
    int64_t best = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        const sp_attr *a = sp_op_attr(m, i, "channel_handle");
        for (uint32_t k = 0; a != NULL && a->kind == SP_ATTR_PARAMS && k < a->u.params.n; k++) {
            const sp_attr *h = a->u.params.items[k].value;
            if (strcmp(a->u.params.items[k].name, "handle") == 0 && h != NULL &&
                h->kind == SP_ATTR_INT && h->u.i.v > best) {
                best = h->u.i.v;
            }
        }
    }
    return best;
}

/* The size of axis ref r on mesh (0 when it names no axis of mesh). */
static int64_t ref_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 0 : mesh->axes[i].size;
}

typedef struct mrc_ctx {
    uint32_t *ops; /* the sdy.all_reduce ops whose operand has unreduced axes */
    uint32_t n, cap;
    cm_error *err;
} mrc_ctx;

static cm_status find_unreduced_all_reduce(sp_module *m, uint32_t op, void *vctx)
{
    mrc_ctx *c = vctx;
    uint32_t kind = m->ops[op].kind;
    if (kind == SP_OP_SDY_SHARDED_TO_UNREDUCED || kind == SP_OP_SDY_REPLICATED_TO_UNREDUCED) {
        return sp_gspmd_op_error(m, op, c->err,
                                 "is not exported here (XLA's manual form of it is not done)");
    }
    if ((kind != SP_OP_SDY_ALL_REDUCE && kind != SP_OP_SDY_REDUCE_SCATTER) ||
        m->ops[op].n_operands != 1) {
        return CM_OK;
    }
    const sp_sharding *in = sp_value_sharding_partitioned(m, m->ops[op].operands[0]);
    if (in == NULL || in->n_unreduced == 0) {
        return CM_OK;
    }
    if (kind == SP_OP_SDY_REDUCE_SCATTER) {
        return sp_gspmd_op_error(m, op, c->err,
                                 "of a value with unreduced axes is not exported here (XLA's "
                                 "manual form of it is not done)");
    }
    if (CM_GROW_U32(c->ops, c->cap, c->n + 1, c->err) != CM_OK) {
        return CM_ENOMEM;
    }
    c->ops[c->n++] = op;
    return CM_OK;
}

/* One sdy.all_reduce whose operand has unreduced axes becomes a fully manual
 * sdy.manual_computation (every mesh axis manual; in sharding the operand's,
 * out sharding the all_reduce's) whose body is a stablehlo.all_reduce over
 * the reduction axes with channel handle `channel`, summing. */
static cm_status manual_all_reduce(sp_module *m, uint32_t op, int64_t channel, cm_error *err)
{
    const sp_attr *oa = sp_op_attr(m, op, "out_sharding");
    const sp_attr *ax = sp_op_attr(m, op, "reduction_axes");
    uint32_t v = m->ops[op].operands[0];
    sp_sharding *in = sp_value_sharding_partitioned(m, v);
    sp_sharding *out = oa != NULL && oa->kind == SP_ATTR_SHARDING ? oa->u.sharding : NULL;
    const sp_mesh *mesh = sharding_mesh(m, out);
    if (out == NULL || ax == NULL || ax->kind != SP_ATTR_AXIS_LIST || m->ops[op].n_results != 1) {
        return sp_gspmd_op_error(m, op, err, "expected an out sharding and reduction axes");
    }
    if (mesh == NULL) {
        return sp_gspmd_op_error(m, op, err, "failed to resolve mesh");
    }
    const sp_type *gt = sp_value_type(m, v);
    if (gt->kind != SP_TYPE_TENSOR || gt->rank != in->rank || gt->rank > SP_MAX_RANK) {
        return sp_gspmd_op_error(m, op, err,
                                 "expected a ranked tensor operand of its sharding's rank");
    }
    int64_t dims[SP_MAX_RANK];
    for (uint32_t d = 0; d < gt->rank; d++) {
        int64_t shards = 1;
        for (uint32_t k = 0; k < in->dims[d].n_axes; k++) {
            int64_t z = ref_size(mesh, &in->dims[d].axes[k]);
            if (z <= 0 || shards > INT64_MAX / z) {
                return sp_gspmd_op_error(m, op, err, "has an operand sharding off its mesh");
            }
            shards *= z;
        }
        if (gt->dims[d] < 0 || gt->dims[d] % shards != 0) {
            return sp_gspmd_op_error(m, op, err,
                                     "Non-divisible sharding with unreduced axes isn't supported");
        }
        dims[d] = gt->dims[d] / shards;
    }
    uint32_t local, gty = m->values[v].type, mc, blk, arg, ar, ret;
    sp_attr *ins = sp_attr_new(m, SP_ATTR_SHARDING_LIST),
            *outs = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_attr *manual = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    sp_sharding **in_items = cm_arena_alloc(&m->arena, sizeof *in_items);
    sp_sharding **out_items = cm_arena_alloc(&m->arena, sizeof *out_items);
    sp_axis_ref *names = cm_arena_zalloc(&m->arena, sizeof *names * (mesh->n_axes + 1u));
    if (ins == NULL || outs == NULL || manual == NULL || in_items == NULL || out_items == NULL ||
        names == NULL) {
        return cm_error_oom(err);
    }
    in_items[0] = in;
    out_items[0] = out;
    ins->u.shardings.items = in_items;
    ins->u.shardings.n = 1;
    outs->u.shardings.items = out_items;
    outs->u.shardings.n = 1;
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        names[i] = (sp_axis_ref){mesh->axes[i].name, 0, 0};
    }
    manual->u.axes.axes = names;
    manual->u.axes.n = mesh->n_axes;
    manual->u.axes.manual = true;
    cm_status st = sp_module_tensor_type(m, gt->elem, dims, gt->rank, &local, err);
    if (st == CM_OK) {
        st = sp_module_new_op(m, SP_NONE, "sdy.manual_computation", &v, 1, &gty, 1, &mc);
    }
    if (st == CM_OK) {
        m->ops[mc].line = m->ops[op].line;
        m->ops[mc].col = m->ops[op].col;
        m->ops[mc].loc = m->ops[op].loc;
        m->ops[mc].where = m->ops[op].where;
        st = sp_op_add_regions(m, mc, 1);
    }
    if (st == CM_OK) {
        st = sp_module_new_block(m, mc, &blk);
    }
    if (st == CM_OK) {
        st = sp_region_add_block(m, mc, 0, blk);
    }
    if (st == CM_OK) {
        st = sp_module_add_block_arg(m, blk, local, &arg);
    }
    if (st == CM_OK && (sp_op_set_attr(m, mc, "in_shardings", ins) != CM_OK ||
                        sp_op_set_attr(m, mc, "out_shardings", outs) != CM_OK ||
                        sp_op_set_attr(m, mc, "manual_axes", manual) != CM_OK)) {
        st = CM_ENOMEM;
    }
    if (st == CM_OK) {
        st = sp_export_build_all_reduce(m, blk, 0, arg, mesh, ax->u.axes.axes, ax->u.axes.n,
                                        channel, "stablehlo.add", &ar);
        if (st == CM_EINVAL) {
            return sp_gspmd_op_error(m, op, err, "has reduction axes that do not fit its mesh");
        }
    }
    if (st == CM_OK) {
        uint32_t r = m->ops[ar].first_result;
        st = sp_module_new_op(m, blk, "sdy.return", &r, 1, NULL, 0, &ret);
    }
    if (st == CM_OK) {
        st = sp_block_insert_op(m, m->ops[op].parent_block, sp_op_index_in_block(m, op), mc);
    }
    if (st != CM_OK) {
        return st == CM_ENOMEM ? cm_error_oom(err) : st;
    }
    replace_uses(m, m->ops[op].first_result, m->ops[mc].first_result);
    detach(m, op);
    return CM_OK;
}

/* XLA's -xla-sdy-stablehlo-export-manual-reduction-collectives, for the
 * all_reduce: each sdy.all_reduce whose operand has unreduced axes, in
 * module order, with channel handles after the module's largest. */
static cm_status export_manual_reduction_collectives(sp_module *m, cm_error *err)
{
    mrc_ctx c = {NULL, 0, 0, err};
    cm_status st = sp_gspmd_walk_funcs(m, find_unreduced_all_reduce, &c);
    int64_t channel = max_channel(m);
    for (uint32_t i = 0; st == CM_OK && i < c.n; i++) {
        if (channel == INT64_MAX) {
            st = sp_gspmd_op_error(m, c.ops[i], err, "has no channel handle left");
            break;
        }
        st = manual_all_reduce(m, c.ops[i], ++channel, err);
    }
    cm_free(c.ops);
    return st;
}

/* ---- export: host callbacks ------------------------------------------------------------- */

static bool is_python_callback(const sp_module *m, uint32_t op)
{
    static const char *const names[] = {"xla_python_cpu_callback", "xla_python_gpu_callback",
                                        "xla_ffi_python_cpu_callback",
                                        "xla_ffi_python_gpu_callback"};
    const sp_attr *t = sp_op_attr(m, op, "call_target_name");
    const char *s = t == NULL                   ? NULL
                    : t->kind == SP_ATTR_SYMBOL ? t->u.sym
                    : t->kind == SP_ATTR_STRING ? t->u.str.s
                                                : NULL;
    for (size_t i = 0; s != NULL && i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* XLA's -xla-sdy-stablehlo-round-trip-export-callback-custom-calls: a used
 * host callback with one non-tuple result T returns tuple<T> instead (the
 * form XLA's compiler recognizes), read by a get_tuple_element [0] that
 * carries the callback's mhlo.sharding. */
static cm_status tuple_callback(sp_module *m, uint32_t op, void *vctx)
{
    cm_error *err = vctx;
    const sp_op *o = &m->ops[op];
    if (o->kind != SP_OP_CUSTOM_CALL || o->n_results != 1 || !is_python_callback(m, op)) {
        return CM_OK;
    }
    uint32_t r = o->first_result, type = m->values[r].type;
    if (is_tuple(m, type) || !has_uses(m, r)) {
        return CM_OK;
    }
    const sp_type *t = &m->types[type];
    size_t len = (size_t)t->text_len + 7u;
    char *text = cm_arena_alloc(&m->arena, len + 1u);
    if (text == NULL) {
        return cm_error_oom(err);
    }
    snprintf(text, len + 1u, "tuple<%s>", t->text);
    uint32_t tuple_type, g;
    cm_status st = sp_module_intern_type(m, text, len, &tuple_type, err);
    if (st != CM_OK) {
        return st;
    }
    sp_attr *ix = sp_attr_new(m, SP_ATTR_INT);
    if (ix == NULL ||
        sp_module_new_op(m, SP_NONE, "stablehlo.get_tuple_element", &r, 1, &type, 1, &g) != CM_OK) {
        return cm_error_oom(err);
    }
    ix->u.i.v = 0;
    ix->u.i.type = "i32";
    m->ops[g].kind = SP_OP_GET_TUPLE_ELEMENT;
    m->ops[g].line = m->ops[op].line;
    m->ops[g].col = m->ops[op].col;
    m->ops[g].loc = m->ops[op].loc;
    const sp_attr *sh = sp_op_attr(m, op, "mhlo.sharding");
    sp_attr *copy = sh != NULL ? sp_attr_new(m, sh->kind) : NULL;
    if (sh != NULL && copy == NULL) {
        return cm_error_oom(err);
    }
    if (copy != NULL) {
        *copy = *sh;
    }
    /* the callback's uses move to the element (detached, so its own
     * operand stays the callback's result) */
    replace_uses(m, r, m->ops[g].first_result);
    m->values[r].type = tuple_type;
    if (sp_op_set_attr(m, g, "index", ix) != CM_OK ||
        (copy != NULL && sp_op_set_attr(m, g, "mhlo.sharding", copy) != CM_OK) ||
        sp_block_insert_op(m, m->ops[op].parent_block, sp_op_index_in_block(m, op) + 1u, g) !=
            CM_OK) {
        return cm_error_oom(err);
    }
    return CM_OK;
}

/* ---- the pipelines ---------------------------------------------------------------------- */

cm_status sp_gspmd_stablehlo_export_pipeline(sp_module *m, const sp_gspmd_export_opts *o,
                                             cm_error *err)
{
    cm_status st = export_manual_reduction_collectives(m, err);
    if (st == CM_OK) {
        st = export_ops(m, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_stablehlo_shard_map_export(m, err);
    }
    sp_gspmd_export_opts with = {false, false, true};
    if (o != NULL) {
        with = *o;
        with.control_flow = true;
    }
    if (st == CM_OK) {
        st = sp_gspmd_export(m, &with, err);
    }
    return st == CM_OK ? sp_gspmd_walk_funcs(m, tuple_callback, err) : st;
}

cm_status sp_gspmd_stablehlo_import_pipeline(sp_module *m, cm_error *err)
{
    cm_status st = sp_gspmd_flatten_tuples(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_import_as(m, "axis_", err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_import_sdy_custom_calls(m, NULL, err);
    }
    return st == CM_OK ? sp_gspmd_import_constants(m, err) : st;
}
