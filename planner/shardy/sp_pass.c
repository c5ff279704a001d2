/* SPDX-License-Identifier: Apache-2.0
 * planner: the helpers the Shardy passes share (see sp_pass.h). */
#include "sp_pass.h"

#include <string.h>

#include "sp_ops.h"

/* ---- errors and the op walk ------------------------------------------------------------ */

cm_status sp_pass_oom(cm_error *err)
{
    return cm_error_oom(err);
}

cm_status sp_pass_walk(sp_module *m, uint32_t block, sp_pass_op_fn fn, void *ctx)
{
    /* the block may change under fn (insertions): index by position */
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        cm_status st = fn(m, op, ctx);
        if (st != CM_OK) {
            return st;
        }
        const sp_op *o = &m->ops[op];
        for (uint32_t r = 0; r < o->n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                st = sp_pass_walk(m, m->ops[op].regions[r].blocks[k], fn, ctx);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

/* ---- use lists and op positions ------------------------------------------------------ */

cm_status sp_uses_add(sp_uses *u, uint32_t v, uint32_t op, uint32_t idx)
{
    if (u->want != NULL && !u->want[v]) {
        return CM_OK;
    }
    if (CM_GROW_U32(u->pool, u->cap, u->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    u->pool[u->n] = (sp_use){op, idx, u->head[v]};
    u->head[v] = u->n++;
    return CM_OK;
}

static cm_status uses_build_op(sp_module *m, uint32_t op, void *ctx)
{
    sp_uses *u = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        if (sp_uses_add(u, m->ops[op].operands[i], op, i) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

cm_status sp_uses_build(sp_module *m, sp_uses *u, uint32_t cap_values, const uint8_t *want)
{
    memset(u, 0, sizeof *u);
    u->n_values = cap_values;
    u->want = want;
    u->head = cm_alloc(sizeof(uint32_t) * (cap_values + 1u));
    if (u->head == NULL) {
        return CM_ENOMEM;
    }
    memset(u->head, 0xff, sizeof(uint32_t) * (cap_values + 1u));
    return sp_pass_walk(m, m->body, uses_build_op, u);
}

void sp_uses_free(sp_uses *u)
{
    cm_free(u->head);
    cm_free(u->pool);
}

uint32_t sp_uses_count(const sp_uses *u, uint32_t v)
{
    uint32_t n = 0;
    for (uint32_t i = u->head[v]; i != SP_NONE; i = u->pool[i].next) {
        n++;
    }
    return n;
}

cm_status sp_csr_build(sp_csr *c, uint32_t n_keys, sp_csr_edges_fn edges, void *ctx,
                       cm_error *err)
{
    memset(c, 0, sizeof *c);
    c->n_keys = n_keys;
    /* count: start[k + 1] = the items of key k; then prefix sums */
    c->start = cm_calloc((size_t)n_keys + 2u, sizeof(uint32_t));
    if (c->start == NULL) {
        return cm_error_oom(err);
    }
    edges(c, ctx);
    for (uint32_t k = 0; k < n_keys; k++) {
        c->start[k + 1] += c->start[k];
    }
    /* fill, each key from its start */
    c->items = cm_alloc(sizeof(uint32_t) * ((size_t)c->start[n_keys] + 1u));
    c->fill = cm_alloc(sizeof(uint32_t) * ((size_t)n_keys + 1u));
    if (c->items == NULL || c->fill == NULL) {
        return cm_error_oom(err);
    }
    memcpy(c->fill, c->start, sizeof(uint32_t) * n_keys);
    edges(c, ctx);
    cm_free(c->fill);
    c->fill = NULL;
    return CM_OK;
}

void sp_csr_fini(sp_csr *c)
{
    cm_free(c->start);
    cm_free(c->items);
    cm_free(c->fill);
    memset(c, 0, sizeof *c);
}

uint32_t *sp_pass_op_positions(const sp_module *m)
{
    uint32_t *pos = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (pos == NULL) {
        return NULL;
    }
    memset(pos, 0xff, sizeof(uint32_t) * (m->n_ops + 1u));
    for (uint32_t b = 0; b < m->n_blocks; b++) {
        for (uint32_t i = 0; i < m->blocks[b].n_ops; i++) {
            pos[m->blocks[b].ops[i]] = i;
        }
    }
    return pos;
}

/* ---- constant expressions (splitter and merger) ------------------------------------ */

static bool is_const_root(const sp_op *op)
{
    return (op->kind == SP_OP_CONSTANT || op->kind == SP_OP_SDY_CONSTANT ||
            op->kind == SP_OP_IOTA) &&
           op->n_operands == 0;
}

bool sp_pass_is_const_expr(const sp_module *m, uint32_t opid, uint8_t *memo)
{
    if (memo[opid] != 0) {
        return memo[opid] == 1;
    }
    const sp_op *op = &m->ops[opid];
    bool r;
    if (is_const_root(op)) {
        r = true;
    } else if (op->n_regions == 0 && op->n_results == 1 &&
               (op->kind == SP_OP_BROADCAST_IN_DIM || op->kind == SP_OP_RESHAPE ||
                op->kind == SP_OP_SLICE || op->kind == SP_OP_BROADCAST ||
                sp_op_is_elementwise((sp_op_kind)op->kind)) &&
               op->n_operands > 0) {
        r = true;
        for (uint32_t i = 0; i < op->n_operands && r; i++) {
            uint32_t d = m->values[op->operands[i]].def;
            r = d != SP_NONE && sp_pass_is_const_expr(m, d, memo);
        }
    } else {
        r = false;
    }
    memo[opid] = r ? 1 : 2;
    return r;
}

bool sp_pass_is_scalar_expansion(const sp_module *m, const sp_op *op)
{
    if (op->kind != SP_OP_BROADCAST_IN_DIM || op->n_operands != 1) {
        return false;
    }
    const sp_type *t = &m->types[m->values[op->operands[0]].type];
    return t->kind == SP_TYPE_TENSOR && t->rank == 0;
}

/* ---- function boundary shardings --------------------------------------------------------- */

cm_status sp_pass_io_shardings_fix(sp_module *m, sp_pass_sharding_fix fix, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t f = body->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        const sp_type *ft = sp_func_type(m, f);
        if (ft == NULL) {
            continue;
        }
        if (m->ops[f].n_regions == 1 && m->ops[f].regions[0].n_blocks > 0) {
            const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
            for (uint32_t k = 0; k < entry->n_args; k++) {
                uint32_t v = entry->first_arg + k;
                sp_sharding *s = sp_value_sharding(m, v);
                if (s == NULL) {
                    continue;
                }
                sp_sharding *n;
                if (fix(m, s, &m->types[m->values[v].type], &n) != CM_OK ||
                    (n != NULL && sp_value_set_sharding(m, v, n) != CM_OK)) {
                    return cm_error_oom(err);
                }
                entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
            }
        }
        for (uint32_t k = 0; k < ft->n_results; k++) {
            sp_sharding *s = sp_func_result_sharding(m, f, k);
            if (s == NULL) {
                continue;
            }
            sp_sharding *n;
            if (fix(m, s, &m->types[ft->results[k]], &n) != CM_OK ||
                (n != NULL && sp_func_set_result_sharding(m, f, k, n) != CM_OK)) {
                return cm_error_oom(err);
            }
        }
    }
    return CM_OK;
}

cm_status sp_pass_insert_edge(sp_module *m, const char *name, uint32_t v, const char *attr_name,
                              sp_attr *attr, uint32_t block, uint32_t index, const char *loc,
                              const sp_loc *where, uint32_t *result)
{
    uint32_t type = m->values[v].type, op;
    cm_status st = sp_module_new_op(m, SP_NONE, name, &v, 1, &type, 1, &op);
    if (st == CM_OK && attr != NULL) {
        st = sp_op_set_attr(m, op, attr_name, attr);
    }
    if (st != CM_OK) {
        return st;
    }
    m->ops[op].loc = loc;
    m->ops[op].where = where;
    if ((st = sp_block_insert_op(m, block, index, op)) != CM_OK) {
        return st;
    }
    *result = m->ops[op].first_result;
    return CM_OK;
}
