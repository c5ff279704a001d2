/* SPDX-License-Identifier: Apache-2.0
 * planner: MLIR's -symbol-dce, which Shardy's import pipeline runs (see
 * sp_import.h). A private function (sym_visibility "private") that no
 * public symbol reaches through symbol references (a call's callee, or any
 * @symbol in an op's attributes, arrays and dictionaries included) is
 * removed from the module, with every private function only it reached. */
#include <string.h>

#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define MAX_ATTR_DEPTH 16

typedef struct dctx {
    uint8_t *live;  /* per op */
    uint32_t *work; /* live functions whose bodies are not yet scanned */
    uint32_t n_work, cap_work;
} dctx;

static bool is_private(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "sym_visibility");
    return a != NULL && a->kind == SP_ATTR_STRING && strcmp(a->u.str.s, "private") == 0;
}

static cm_status mark(sp_module *m, dctx *c, const char *sym)
{
    uint32_t f = sp_module_func(m, sym);
    if (f == SP_NONE || c->live[f]) {
        return CM_OK;
    }
    c->live[f] = 1;
    if (CM_GROW_U32(c->work, c->cap_work, c->n_work + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->work[c->n_work++] = f;
    return CM_OK;
}

static cm_status mark_attr(sp_module *m, dctx *c, const sp_attr *a, uint32_t depth)
{
    if (a == NULL || depth > MAX_ATTR_DEPTH) {
        return CM_OK;
    }
    cm_status st = CM_OK;
    if (a->kind == SP_ATTR_SYMBOL) {
        st = mark(m, c, a->u.sym);
    } else if (a->kind == SP_ATTR_ARRAY) {
        for (uint32_t i = 0; i < a->u.arr.n && st == CM_OK; i++) {
            st = mark_attr(m, c, a->u.arr.items[i], depth + 1);
        }
    } else if (a->kind == SP_ATTR_DICT) {
        for (uint32_t i = 0; i < a->u.dict.n && st == CM_OK; i++) {
            st = mark_attr(m, c, a->u.dict.items[i].value, depth + 1);
        }
    }
    return st;
}

static cm_status scan_op(sp_module *m, uint32_t op, void *vctx)
{
    dctx *c = vctx;
    for (uint32_t i = 0; i < m->ops[op].n_attrs; i++) {
        cm_status st = mark_attr(m, c, m->ops[op].attrs[i].value, 0);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static cm_status scan_func(sp_module *m, dctx *c, uint32_t f)
{
    const sp_op *op = &m->ops[f];
    for (uint32_t r = 0; r < op->n_regions; r++) {
        for (uint32_t b = 0; b < m->ops[f].regions[r].n_blocks; b++) {
            cm_status st = sp_pass_walk(m, m->ops[f].regions[r].blocks[b], scan_op, c);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

cm_status sp_pass_symbol_dce(sp_module *m, cm_error *err)
{
    dctx c = {0};
    c.live = cm_calloc((size_t)m->n_ops + 1u, 1);
    cm_status st = c.live == NULL ? CM_ENOMEM : CM_OK;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        uint32_t op = body->ops[i];
        if (m->ops[op].kind != SP_OP_FUNC_FUNC) {
            st = scan_op(m, op, &c); /* non-function ops keep what they name */
            continue;
        }
        if (!is_private(m, op) && !c.live[op]) {
            c.live[op] = 1;
            if (CM_GROW_U32(c.work, c.cap_work, c.n_work + 1, NULL) != CM_OK) {
                st = CM_ENOMEM;
                break;
            }
            c.work[c.n_work++] = op;
        }
    }
    while (st == CM_OK && c.n_work > 0) {
        uint32_t f = c.work[--c.n_work];
        st = scan_op(m, f, &c);
        if (st == CM_OK) {
            st = scan_func(m, &c, f);
        }
    }
    if (st == CM_OK) {
        sp_block *b = &m->blocks[m->body];
        uint32_t k = 0;
        for (uint32_t i = 0; i < b->n_ops; i++) {
            uint32_t op = b->ops[i];
            if (m->ops[op].kind != SP_OP_FUNC_FUNC || c.live[op]) {
                b->ops[k++] = op;
            } else {
                m->ops[op].parent_block = SP_NONE;
            }
        }
        b->n_ops = k;
    }
    cm_free(c.live);
    cm_free(c.work);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
