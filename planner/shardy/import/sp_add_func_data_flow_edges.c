/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-add-func-data-flow-edges (Shardy's
 * import/add_func_data_flow_edges.cc; see sp_import.h). Function boundaries
 * become data-flow edges: every argument of a function other than the main
 * one (the module's only function, else @main) and every result of every
 * func.call, when its type is a static-shaped tensor, gets an
 * sdy.func_data_flow_edge that all its other uses read instead. Argument
 * edges open the function body in argument order; result edges follow their
 * call in result order. An edge carries its value's sharding (the argument's
 * sdy.sharding, the call's sdy.sharding entry) as its own sdy.sharding. */
#include <string.h>

#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

typedef struct ectx {
    uint32_t *funcs; /* func.func ops but the main one */
    uint32_t n_funcs, cap_funcs;
    uint32_t *calls; /* func.call ops in program order */
    uint32_t n_calls, cap_calls;
    uint32_t *image; /* per value: its edge's result, or SP_NONE */
    uint32_t n_image;
} ectx;

static cm_status collect(sp_module *m, uint32_t op, void *vctx)
{
    ectx *c = vctx;
    uint32_t kind = m->ops[op].kind;
    if (kind == SP_OP_FUNC_FUNC) {
        if (CM_GROW_U32(c->funcs, c->cap_funcs, c->n_funcs + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        c->funcs[c->n_funcs++] = op;
    } else if (kind == SP_OP_FUNC_CALL) {
        if (CM_GROW_U32(c->calls, c->cap_calls, c->n_calls + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        c->calls[c->n_calls++] = op;
    }
    return CM_OK;
}

static bool is_static_tensor(const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return false;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] == SP_DIM_DYNAMIC) {
            return false;
        }
    }
    return true;
}

/* Creates the edge on v at index of block, with v's sharding s (may be
 * NULL), recording it as v's image. */
static cm_status add_edge(sp_module *m, ectx *c, uint32_t v, sp_sharding *s, uint32_t block,
                          uint32_t index, uint32_t loc_op)
{
    sp_attr *a = NULL;
    if (s != NULL) {
        a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
        sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items);
        if (a == NULL || items == NULL) {
            return CM_ENOMEM;
        }
        items[0] = s;
        a->u.shardings.items = items;
        a->u.shardings.n = 1;
    }
    return sp_pass_insert_edge(m, "sdy.func_data_flow_edge", v, "sdy.sharding", a, block, index,
                               m->ops[loc_op].loc, m->ops[loc_op].where, &c->image[v]);
}

static cm_status func_edges(sp_module *m, ectx *c, uint32_t f)
{
    const sp_op *op = &m->ops[f];
    if (op->n_regions != 1 || op->regions[0].n_blocks == 0) {
        return CM_OK; /* a declaration */
    }
    uint32_t blk = op->regions[0].blocks[0], at = 0;
    for (uint32_t i = 0; i < m->blocks[blk].n_args; i++) {
        uint32_t v = m->blocks[blk].first_arg + i;
        if (!is_static_tensor(sp_value_type(m, v))) {
            continue;
        }
        cm_status st = add_edge(m, c, v, sp_value_sharding(m, v), blk, at++, f);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static cm_status call_edges(sp_module *m, ectx *c, uint32_t call)
{
    uint32_t idx = sp_op_index_in_block(m, call);
    if (idx == SP_NONE) {
        return CM_OK;
    }
    uint32_t block = m->ops[call].parent_block, at = idx + 1;
    for (uint32_t i = 0; i < m->ops[call].n_results; i++) {
        uint32_t v = m->ops[call].first_result + i;
        if (!is_static_tensor(sp_value_type(m, v))) {
            continue;
        }
        cm_status st = add_edge(m, c, v, sp_value_sharding(m, v), block, at++, call);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static cm_status redirect(sp_module *m, uint32_t opid, void *vctx)
{
    const ectx *c = vctx;
    sp_op *op = &m->ops[opid];
    if (op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t v = op->operands[i];
        if (v < c->n_image && c->image[v] != SP_NONE) {
            op->operands[i] = c->image[v];
        }
    }
    return CM_OK;
}

/* The main function: the module's only func.func, else @main; SP_NONE. */
static uint32_t main_func(const sp_module *m, const ectx *c)
{
    return c->n_funcs == 1 ? c->funcs[0] : sp_module_func(m, "main");
}

cm_status sp_pass_add_func_data_flow_edges(sp_module *m, cm_error *err)
{
    ectx c;
    memset(&c, 0, sizeof c);
    cm_status st = sp_pass_walk(m, m->body, collect, &c);
    if (st != CM_OK) {
        st = cm_error_oom(err);
        goto out;
    }
    uint32_t main_f = main_func(m, &c);
    if (main_f == SP_NONE) {
        st = cm_error_set(err, CM_EINVAL, "", "Failed to lookup function: main");
        goto out;
    }
    c.n_image = m->n_values;
    c.image = cm_alloc(sizeof *c.image * ((size_t)c.n_image + 1u));
    if (c.image == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    for (uint32_t v = 0; v < c.n_image; v++) {
        c.image[v] = SP_NONE;
    }
    for (uint32_t i = 0; i < c.n_funcs && st == CM_OK; i++) {
        if (c.funcs[i] != main_f) {
            st = func_edges(m, &c, c.funcs[i]);
        }
    }
    for (uint32_t i = 0; i < c.n_calls && st == CM_OK; i++) {
        st = call_edges(m, &c, c.calls[i]);
    }
    if (st == CM_OK) {
        st = sp_pass_walk(m, m->body, redirect, &c);
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
out:
    cm_free(c.image);
    cm_free(c.funcs);
    cm_free(c.calls);
    return st;
}
