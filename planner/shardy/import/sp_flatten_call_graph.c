/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-flatten-call-graph (Shardy's import/flatten_call_graph.cc;
 * see sp_import.h). After it, every function is called at most once: calls
 * are visited callees first (the call graph in post order, each function's
 * calls in program order); the first call of a function keeps it, and every
 * later call gets a copy of the function and, recursively, of everything it
 * calls. A copy is tagged sdy.original_func_name (the original's own tag, or
 * its name) and appended to the module under a fresh name: the original
 * name, or `NAME_N` with N from one counter for the whole pass (MLIR's
 * symbol-table uniquing); a function's callees are copied, and named, before
 * the function itself. A call cycle met while copying is an error. */
#include <stdio.h>
#include <string.h>

#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

/* Copies nested deeper than this are refused. */
#define MAX_CLONE_DEPTH 256

typedef struct gctx {
    uint32_t *calls; /* gathered call ops */
    uint32_t n_calls, cap_calls;
    uint8_t *called; /* per op: a func.func that has its first call */
    uint32_t n_called;
    uint32_t counter; /* the symbol uniquing counter */
} gctx;

/* What one recursive copy needs: the pass's uniquing counter and the
 * functions being copied, outermost first (a repeat is a call cycle). */
typedef struct clone_ctx {
    uint32_t *counter;
    uint32_t stack[MAX_CLONE_DEPTH + 1];
} clone_ctx;

static cm_status gather_call(sp_module *m, uint32_t op, void *vctx)
{
    gctx *c = vctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->calls, c->cap_calls, c->n_calls + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->calls[c->n_calls++] = op;
    return CM_OK;
}

static const char *str_attr(const sp_module *m, uint32_t op, const char *name)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : NULL;
}

static const char *name_of(const sp_module *m, uint32_t f)
{
    const char *s = str_attr(m, f, "sym_name");
    return s != NULL ? s : "";
}

static uint32_t func_block(const sp_module *m, uint32_t f)
{
    const sp_op *op = &m->ops[f];
    return op->n_regions == 1 && op->regions[0].n_blocks == 1 ? op->regions[0].blocks[0] : SP_NONE;
}

/* The callee of call, or SP_NONE with an error set. */
static uint32_t callee_of(const sp_module *m, uint32_t call, cm_error *err)
{
    const sp_attr *a = sp_op_attr(m, call, "callee");
    const char *name = a != NULL && a->kind == SP_ATTR_SYMBOL ? a->u.sym : "";
    uint32_t f = sp_module_func(m, name);
    if (f == SP_NONE) {
        cm_error_set(err, CM_EINVAL, "", "%u:%u: Failed to lookup function: %s", m->ops[call].line,
                     m->ops[call].col, name);
    }
    return f;
}

static bool symbol_taken(const sp_module *m, const char *name)
{
    const sp_block *b = &m->blocks[m->body];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        const char *s = str_attr(m, b->ops[i], "sym_name");
        if (s != NULL && strcmp(s, name) == 0) {
            return true;
        }
    }
    return false;
}

static sp_attr *string_attr(sp_module *m, const char *s, size_t len)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_STRING);
    const char *d = a == NULL ? NULL : sp_module_str(m, s, len);
    if (d == NULL) {
        return NULL;
    }
    a->u.str.s = d;
    a->u.str.len = len;
    return a;
}

/* Appends detached function g to the module under a name not yet taken
 * (its own, else NAME_N); *name_out is that name. */
static cm_status insert_func(sp_module *m, clone_ctx *c, uint32_t g, const char **name_out,
                             cm_error *err)
{
    const char *base = str_attr(m, g, "sym_name");
    base = base != NULL ? base : "";
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s", base);
    while (n > 0 && (size_t)n < sizeof buf && symbol_taken(m, buf)) {
        n = snprintf(buf, sizeof buf, "%s_%u", base, (*c->counter)++);
    }
    if (n <= 0 || (size_t)n >= sizeof buf) {
        return cm_error_set(err, CM_EINVAL, "", "function name too long to copy: %s", base);
    }
    sp_attr *sym = string_attr(m, buf, (size_t)n);
    if (sym == NULL || sp_op_set_attr(m, g, "sym_name", sym) != CM_OK ||
        sp_block_insert_op(m, m->body, m->blocks[m->body].n_ops, g) != CM_OK) {
        return cm_error_oom(err);
    }
    *name_out = sym->u.str.s;
    return CM_OK;
}

static cm_status set_callee(sp_module *m, uint32_t call, const char *name, cm_error *err)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SYMBOL);
    if (a == NULL) {
        return cm_error_oom(err);
    }
    a->u.sym = name;
    return sp_op_set_attr(m, call, "callee", a) == CM_OK ? CM_OK : cm_error_oom(err);
}

/* Shardy's cloneFuncRecursively followed by the symbol-table insert: copies
 * f and everything it calls, inserting the copies; *name_out names f's. */
static cm_status clone_rec(sp_module *m, clone_ctx *c, uint32_t f, uint32_t depth,
                           const char **name_out, cm_error *err)
{
    if (depth > MAX_CLONE_DEPTH) {
        return cm_error_set(err, CM_EINVAL, "", "call graph too deep to copy at @%s",
                            name_of(m, f));
    }
    for (uint32_t i = 0; i < depth; i++) {
        if (c->stack[i] == f) {
            return cm_error_set(err, CM_EINVAL, "", "recursive call of @%s", name_of(m, f));
        }
    }
    c->stack[depth] = f;
    const char *orig = str_attr(m, f, "sdy.original_func_name");
    if (orig == NULL) {
        orig = str_attr(m, f, "sym_name");
    }
    sp_value_map map = {0};
    uint32_t g;
    cm_status st = sp_op_clone_deep(m, f, &map, &g);
    sp_value_map_free(&map);
    if (st != CM_OK) {
        return st == CM_ENOMEM
                   ? cm_error_oom(err)
                   : cm_error_set(err, st, "", "cannot copy function @%s", name_of(m, f));
    }
    sp_attr *oa = string_attr(m, orig != NULL ? orig : "", orig != NULL ? strlen(orig) : 0);
    if (oa == NULL || sp_op_set_attr(m, g, "sdy.original_func_name", oa) != CM_OK) {
        return cm_error_oom(err);
    }
    /* the copy's calls, gathered before copying adds ops */
    gctx inner = {0};
    uint32_t blk = func_block(m, g);
    if (blk != SP_NONE && sp_pass_walk(m, blk, gather_call, &inner) != CM_OK) {
        cm_free(inner.calls);
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < inner.n_calls && st == CM_OK; i++) {
        uint32_t h = callee_of(m, inner.calls[i], err);
        const char *hn = NULL;
        st = h == SP_NONE ? CM_EINVAL : clone_rec(m, c, h, depth + 1, &hn, err);
        if (st == CM_OK) {
            st = set_callee(m, inner.calls[i], hn, err);
        }
    }
    cm_free(inner.calls);
    return st != CM_OK ? st : insert_func(m, c, g, name_out, err);
}

cm_status sp_import_func_clone(sp_module *m, uint32_t f, uint32_t *counter, const char **name_out,
                               cm_error *err)
{
    clone_ctx c;
    c.counter = counter;
    return clone_rec(m, &c, f, 0, name_out, err);
}

cm_status sp_pass_flatten_call_graph(sp_module *m, cm_error *err)
{
    gctx c = {0};
    uint32_t *funcs = NULL, n_funcs = 0;
    cm_status st = sp_import_funcs_order(m, false, &funcs, &n_funcs, err);
    for (uint32_t i = 0; i < n_funcs && st == CM_OK; i++) {
        uint32_t blk = func_block(m, funcs[i]);
        if (blk != SP_NONE && sp_pass_walk(m, blk, gather_call, &c) != CM_OK) {
            st = cm_error_oom(err);
        }
    }
    if (st == CM_OK) {
        c.n_called = m->n_ops;
        c.called = cm_calloc((size_t)c.n_called + 1u, 1);
        if (c.called == NULL) {
            st = cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; i < c.n_calls && st == CM_OK; i++) {
        uint32_t f = callee_of(m, c.calls[i], err);
        if (f == SP_NONE) {
            st = CM_EINVAL;
            break;
        }
        if (f < c.n_called && !c.called[f]) {
            c.called[f] = 1;
            continue;
        }
        const char *name = NULL;
        st = sp_import_func_clone(m, f, &c.counter, &name, err);
        if (st == CM_OK) {
            st = set_callee(m, c.calls[i], name, err);
        }
    }
    cm_free(funcs);
    cm_free(c.calls);
    cm_free(c.called);
    return st;
}
