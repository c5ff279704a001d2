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

#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define MAX_ELEMS 1024 /* elements of one flattened tuple */

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
 * are left as elements (the caller declines them). Errors: CM_EINVAL for
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

/* The flat operands of custom call op: a tuple operand made by
 * stablehlo.tuple is its elements, any other tuple operand is read with new
 * get_tuple_element ops placed before op. *n_out = SP_NONE when an operand
 * holds nested tuples (the op is left alone). */
static cm_status flat_operands(sp_module *m, uint32_t op, flat_ctx *c, uint32_t *out,
                               uint32_t *n_out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < m->ops[op].n_operands; k++) {
        uint32_t v = m->ops[op].operands[k];
        if (!is_tuple(m, m->values[v].type)) {
            if (n >= MAX_ELEMS) {
                *n_out = SP_NONE;
                return CM_OK;
            }
            out[n++] = v;
            continue;
        }
        uint32_t types[MAX_ELEMS], ne;
        cm_status st = tuple_elems(m, m->values[v].type, types, MAX_ELEMS - n, &ne, c->err);
        if (st != CM_OK) {
            return st;
        }
        for (uint32_t e = 0; e < ne; e++) {
            if (is_tuple(m, types[e])) {
                *n_out = SP_NONE;
                return CM_OK;
            }
        }
        uint32_t def = m->values[v].def;
        if (def != SP_NONE && m->ops[def].kind == SP_OP_TUPLE && m->ops[def].n_operands == ne) {
            memcpy(out + n, m->ops[def].operands, sizeof *out * ne);
            n += ne;
            if ((st = note_tuple(c, def)) != CM_OK) {
                return st;
            }
            continue;
        }
        for (uint32_t e = 0; e < ne; e++) {
            uint32_t g;
            sp_attr *ix = sp_attr_new(m, SP_ATTR_INT);
            if (ix == NULL ||
                sp_module_new_op(m, SP_NONE, "stablehlo.get_tuple_element", &v, 1, &types[e], 1,
                                 &g) != CM_OK) {
                return cm_error_oom(c->err);
            }
            ix->u.i.v = e;
            ix->u.i.type = "i32";
            if (sp_op_set_attr(m, g, "index", ix) != CM_OK ||
                sp_block_insert_op(m, m->ops[op].parent_block, sp_op_index_in_block(m, op), g) !=
                    CM_OK) {
                return cm_error_oom(c->err);
            }
            out[n++] = m->ops[g].first_result;
        }
    }
    *n_out = n;
    return CM_OK;
}

/* A custom call with tuple operands takes their elements instead, and one
 * with a tuple result gets one result per element: get_tuple_element users
 * read the matching result, other users a stablehlo.tuple of the results. */
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
    uint32_t rtypes[MAX_ELEMS], nr = 0;
    if (tuple_result) {
        cm_status st =
            tuple_elems(m, m->values[o->first_result].type, rtypes, MAX_ELEMS, &nr, c->err);
        if (st != CM_OK) {
            return st;
        }
        for (uint32_t e = 0; e < nr; e++) {
            if (is_tuple(m, rtypes[e])) {
                return CM_OK;
            }
        }
    }
    uint32_t *ops = cm_alloc(sizeof *ops * MAX_ELEMS);
    if (ops == NULL) {
        return cm_error_oom(c->err);
    }
    uint32_t n;
    cm_status st = flat_operands(m, op, c, ops, &n);
    if (st != CM_OK || n == SP_NONE) {
        cm_free(ops);
        return st;
    }
    if (!tuple_result) {
        uint32_t *copy = cm_arena_memdup(&m->arena, ops, n, sizeof *ops);
        cm_free(ops);
        if (copy == NULL && n > 0) {
            return cm_error_oom(c->err);
        }
        m->ops[op].operands = copy;
        m->ops[op].n_operands = n;
        return CM_OK;
    }
    uint32_t nop;
    st = sp_module_new_op(m, SP_NONE, m->ops[op].name, ops, n, rtypes, nr, &nop);
    cm_free(ops);
    if (st != CM_OK) {
        return cm_error_oom(c->err);
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
        return cm_error_oom(c->err);
    }
    detach(m, op);
    /* get_tuple_element users read the new results directly */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op *u = &m->ops[i];
        const sp_attr *ix = u->kind == SP_OP_GET_TUPLE_ELEMENT ? sp_op_attr(m, i, "index") : NULL;
        if (u->parent_block == SP_NONE || u->n_operands != 1 || u->operands[0] != old ||
            ix == NULL || ix->kind != SP_ATTR_INT || ix->u.i.v < 0 || ix->u.i.v >= (int64_t)nr) {
            continue;
        }
        replace_uses(m, m->ops[i].first_result, m->ops[nop].first_result + (uint32_t)ix->u.i.v);
        detach(m, i);
    }
    if (!has_uses(m, old)) {
        return CM_OK;
    }
    uint32_t *res = cm_alloc(sizeof *res * (nr + 1u));
    uint32_t tup;
    if (res == NULL) {
        return cm_error_oom(c->err);
    }
    for (uint32_t e = 0; e < nr; e++) {
        res[e] = m->ops[nop].first_result + e;
    }
    st = sp_module_new_op(m, SP_NONE, "stablehlo.tuple", res, nr, &m->values[old].type, 1, &tup);
    cm_free(res);
    if (st != CM_OK || sp_block_insert_op(m, block, at + 1, tup) != CM_OK) {
        return cm_error_oom(c->err);
    }
    m->ops[tup].kind = SP_OP_TUPLE;
    replace_uses(m, old, m->ops[tup].first_result);
    return CM_OK;
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

static bool in_manual_computation(const sp_module *m, uint32_t op)
{
    for (int depth = 0; depth < 256 && op != SP_NONE; depth++) {
        uint32_t blk = m->ops[op].parent_block;
        op = blk != SP_NONE ? m->blocks[blk].parent_op : SP_NONE;
        if (op != SP_NONE && m->ops[op].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            return true;
        }
    }
    return false;
}

/* XLA's -xla-sdy-export-ops: a reshard or sharding constraint becomes an
 * mhlo.copy with its sharding, an explicit collective one with its out
 * sharding; all_reduce (which moves no data between shards outside a
 * manual computation) and propagation_barrier give way to their operand. */
static cm_status export_sdy_op(sp_module *m, uint32_t op, void *vctx)
{
    ops_ctx *c = vctx;
    sp_op *o = &m->ops[op];
    const char *key = NULL;
    switch (o->kind) {
    case SP_OP_SDY_RESHARD:
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
        if (o->kind == SP_OP_SDY_ALL_REDUCE && in_manual_computation(m, op)) {
            return sp_gspmd_op_error(m, op, c->err,
                                     "inside a manual computation is not exported (XLA's "
                                     "export of manual reduction collectives is not done here)");
        }
        if (o->n_operands != 1 || o->n_results != 1) {
            return sp_gspmd_op_error(m, op, c->err, "expected one operand and one result");
        }
        replace_uses(m, o->first_result, o->operands[0]);
        if (CM_GROW_U32(c->dead, c->cap_dead, c->n_dead + 1, c->err) != CM_OK) {
            return CM_ENOMEM;
        }
        c->dead[c->n_dead++] = op;
        return CM_OK;
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

/* ---- the pipelines ---------------------------------------------------------------------- */

cm_status sp_gspmd_stablehlo_export_pipeline(sp_module *m, const sp_gspmd_export_opts *o,
                                             cm_error *err)
{
    cm_status st = export_ops(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_stablehlo_shard_map_export(m, err);
    }
    sp_gspmd_export_opts with = {false, false, true};
    if (o != NULL) {
        with = *o;
        with.control_flow = true;
    }
    return st == CM_OK ? sp_gspmd_export(m, &with, err) : st;
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
