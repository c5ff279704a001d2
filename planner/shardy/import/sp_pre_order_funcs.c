/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-pre-order-funcs (Shardy's import/pre_order_funcs.cc), and
 * the call-graph order Shardy's iterateFuncs uses. The call graph is MLIR's:
 * an external node with an edge to every function in module order, and an
 * edge from a function to each function it calls, in the pre-order of its
 * calls (repeats dropped). The reverse post-order of a depth-first walk
 * from the external node is the pre-order (callers before callees); its
 * reverse is the post-order. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct callees_ctx {
    uint32_t *list;
    uint32_t n, cap;
} callees_ctx;

static cm_status collect_call(sp_module *m, uint32_t op, void *ctx)
{
    callees_ctx *c = ctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    const sp_attr *a = sp_op_attr(m, op, "callee");
    if (a == NULL || a->kind != SP_ATTR_SYMBOL || a->u.sym == NULL) {
        return CM_OK;
    }
    uint32_t f = sp_module_func(m, a->u.sym);
    if (f == SP_NONE) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->list[i] == f) {
            return CM_OK;
        }
    }
    if (CM_GROW_U32(c->list, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->list[c->n++] = f;
    return CM_OK;
}

/* Appends the post-order of the walk from func f to out. */
static cm_status post_order(sp_module *m, uint32_t f, uint8_t *seen, uint32_t *out, uint32_t *n_out)
{
    seen[f] = 1;
    callees_ctx c = {NULL, 0, 0};
    cm_status st = CM_OK;
    for (uint32_t r = 0; r < m->ops[f].n_regions && st == CM_OK; r++) {
        for (uint32_t b = 0; b < m->ops[f].regions[r].n_blocks && st == CM_OK; b++) {
            st = sp_pass_walk(m, m->ops[f].regions[r].blocks[b], collect_call, &c);
        }
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        if (!seen[c.list[i]]) {
            st = post_order(m, c.list[i], seen, out, n_out);
        }
    }
    cm_free(c.list);
    if (st == CM_OK) {
        out[(*n_out)++] = f;
    }
    return st;
}

cm_status sp_import_funcs_order(sp_module *m, bool pre_order, uint32_t **funcs_out,
                                uint32_t *n_out, cm_error *err)
{
    *funcs_out = NULL;
    *n_out = 0;
    const sp_block *body = &m->blocks[m->body];
    uint32_t *out = cm_alloc(sizeof(uint32_t) * (body->n_ops + 1u));
    uint8_t *seen = cm_calloc(m->n_ops + 1u, 1);
    if (out == NULL || seen == NULL) {
        cm_free(out);
        cm_free(seen);
        return cm_error_oom(err);
    }
    uint32_t n = 0;
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->blocks[m->body].n_ops && st == CM_OK; i++) {
        uint32_t f = m->blocks[m->body].ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && !seen[f]) {
            st = post_order(m, f, seen, out, &n);
        }
    }
    cm_free(seen);
    if (st != CM_OK) {
        cm_free(out);
        return cm_error_oom(err);
    }
    if (pre_order) {
        for (uint32_t i = 0; i < n / 2u; i++) {
            uint32_t t = out[i];
            out[i] = out[n - 1u - i];
            out[n - 1u - i] = t;
        }
    }
    *funcs_out = out;
    *n_out = n;
    return CM_OK;
}

cm_status sp_pass_pre_order_funcs(sp_module *m, cm_error *err)
{
    uint32_t *order, n;
    cm_status st = sp_import_funcs_order(m, true, &order, &n, err);
    if (st != CM_OK) {
        return st;
    }
    sp_block *body = &m->blocks[m->body];
    uint32_t k = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        if (m->ops[body->ops[i]].kind != SP_OP_FUNC_FUNC) {
            body->ops[k++] = body->ops[i];
        }
    }
    /* every function is in order exactly once */
    for (uint32_t i = 0; i < n; i++) {
        body->ops[k++] = order[i];
    }
    body->n_ops = k;
    cm_free(order);
    return CM_OK;
}
