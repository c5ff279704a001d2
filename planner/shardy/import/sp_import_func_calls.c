/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-import-func-calls (Shardy's import/import_func_calls.cc; see
 * sp_import.h). Every func.call becomes an sdy.named_computation named after
 * its callee (the callee's sdy.original_func_name when it has one) that holds
 * the callee's body. Calls are visited callees first (the call graph in post
 * order, each function's calls in program order), so a callee's own calls
 * are already named computations when its body moves. The first call of a
 * callee takes the body itself; later calls get a copy of it, with a warning
 * given once per diagnostics list (sp_diag.h: once per process, as Shardy
 * gives it, under `shardplan opt`; once per plan in a server). The named
 * computation takes the call's operands, its result shardings (the call's
 * sdy.sharding) as out shardings, the callee's argument shardings as in
 * shardings (when some argument has a sharding on a non-maximal mesh; the
 * others are then fully open on that mesh), the call's other discardable
 * attributes and the callee's execution_thread. Callees whose bodies moved are erased. With
 * add-data-flow-edges-on-named-computations (the default), every named
 * computation of the module then gets its data-flow edges: one per body
 * argument (its in sharding) and one per result (its out sharding), as
 * -sdy-add-data-flow-edges gives them. */
#include <stdlib.h>
#include <string.h>

#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

typedef struct fctx {
    uint32_t *calls; /* call ops, callees' calls first */
    uint32_t n_calls, cap_calls;
    uint32_t *moved_func; /* callees whose body moved ... */
    uint32_t *moved_nc;   /* ... into these named computations */
    uint32_t n_moved, cap_moved;
} fctx;

static cm_status collect_call(sp_module *m, uint32_t op, void *vctx)
{
    fctx *c = vctx;
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

/* The body block of function f, or SP_NONE. */
static uint32_t func_block(const sp_module *m, uint32_t f)
{
    const sp_op *op = &m->ops[f];
    return op->n_regions == 1 && op->regions[0].n_blocks == 1 ? op->regions[0].blocks[0] : SP_NONE;
}

static bool is_maximal(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = s->mesh != NULL        ? s->mesh
                          : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                 : NULL;
    return mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1;
}

/* Shardy's getFuncArgShardings: the argument shardings of f (block blk),
 * missing ones fully open on the mesh of the first argument sharded on a
 * non-maximal mesh; *out NULL when there is no such argument. */
static cm_status arg_shardings(sp_module *m, uint32_t blk, sp_attr **out)
{
    *out = NULL;
    uint32_t n = m->blocks[blk].n_args, first = m->blocks[blk].first_arg;
    const sp_sharding *src = NULL;
    for (uint32_t i = 0; i < n && src == NULL; i++) {
        const sp_sharding *s = sp_value_sharding(m, first + i);
        if (s != NULL && !is_maximal(m, s)) {
            src = s;
        }
    }
    if (src == NULL) {
        return CM_OK;
    }
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (list == NULL || items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        sp_sharding *s = sp_value_sharding(m, first + i);
        if (s == NULL) {
            const sp_type *t = sp_value_type(m, first + i);
            s = sp_sharding_open(&m->arena, src->mesh_name,
                                 t->kind == SP_TYPE_TENSOR ? t->rank : 0);
            if (s == NULL) {
                return CM_ENOMEM;
            }
            s->mesh = src->mesh;
        }
        items[i] = s;
    }
    list->u.shardings.items = items;
    list->u.shardings.n = n;
    *out = list;
    return CM_OK;
}

static int named_attr_cmp(const void *a, const void *b)
{
    return strcmp(((const sp_named_attr *)a)->name, ((const sp_named_attr *)b)->name);
}

/* Is name an attribute func.call defines itself (not a discardable one)? */
static bool is_call_inherent(const char *name)
{
    return strcmp(name, "callee") == 0 || strcmp(name, "arg_attrs") == 0 ||
           strcmp(name, "res_attrs") == 0 || strcmp(name, "no_inline") == 0;
}

/* Sets the named computation's attributes: name, in and out shardings, then
 * the call's discardable attributes but sdy.sharding and the callee's
 * execution_thread, sorted by name as an MLIR dictionary keeps them. */
static cm_status set_attrs(sp_module *m, uint32_t nc, uint32_t call, uint32_t f, sp_attr *ins)
{
    sp_attr *name = sp_attr_new(m, SP_ATTR_STRING);
    const char *s = str_attr(m, f, "sdy.original_func_name");
    if (s == NULL) {
        s = str_attr(m, f, "sym_name");
    }
    if (name == NULL) {
        return CM_ENOMEM;
    }
    name->u.str.s = s != NULL ? s : "";
    name->u.str.len = strlen(name->u.str.s);
    cm_status st = sp_op_set_attr(m, nc, "name", name);
    if (st == CM_OK && ins != NULL) {
        st = sp_op_set_attr(m, nc, "in_shardings", ins);
    }
    const sp_attr *outs = sp_op_attr(m, call, "sdy.sharding");
    if (st == CM_OK && outs != NULL && outs->kind == SP_ATTR_SHARDING_LIST) {
        st = sp_op_set_attr(m, nc, "out_shardings", (sp_attr *)(uintptr_t)outs);
    }
    if (st != CM_OK) {
        return st;
    }
    uint32_t n_call = m->ops[call].n_attrs;
    sp_named_attr *extra = cm_alloc(sizeof *extra * ((size_t)n_call + 1u));
    if (extra == NULL) {
        return CM_ENOMEM;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_call; i++) {
        const sp_named_attr *na = &m->ops[call].attrs[i];
        if (!is_call_inherent(na->name) && strcmp(na->name, "sdy.sharding") != 0 &&
            strcmp(na->name, "execution_thread") != 0) {
            extra[k++] = *na;
        }
    }
    const sp_attr *thread = sp_op_attr(m, f, "execution_thread");
    if (thread == NULL) {
        thread = sp_op_attr(m, call, "execution_thread");
    }
    if (thread != NULL) {
        extra[k].name = "execution_thread";
        extra[k++].value = (sp_attr *)(uintptr_t)thread;
    }
    qsort(extra, k, sizeof *extra, named_attr_cmp);
    for (uint32_t i = 0; i < k && st == CM_OK; i++) {
        st = sp_op_set_attr(m, nc, extra[i].name, extra[i].value);
    }
    cm_free(extra);
    return st;
}

/* The named computation whose block came from callee f, or SP_NONE. */
static uint32_t moved_into(const fctx *c, uint32_t f)
{
    for (uint32_t i = 0; i < c->n_moved; i++) {
        if (c->moved_func[i] == f) {
            return c->moved_nc[i];
        }
    }
    return SP_NONE;
}

static cm_status note_moved(fctx *c, uint32_t f, uint32_t nc)
{
    uint32_t cap = c->cap_moved;
    if (CM_GROW_U32(c->moved_func, c->cap_moved, c->n_moved + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    if (c->cap_moved != cap) {
        uint32_t *nn = cm_realloc(c->moved_nc, (size_t)c->cap_moved * sizeof *nn);
        if (nn == NULL) {
            return CM_ENOMEM;
        }
        c->moved_nc = nn;
    }
    c->moved_func[c->n_moved] = f;
    c->moved_nc[c->n_moved++] = nc;
    return CM_OK;
}

/* Replaces uses of the values first..first+n in the ops of block (and
 * nested blocks) by their images to..to+n. */
typedef struct rctx {
    uint32_t first, to, n;
} rctx;

static cm_status rename_uses(sp_module *m, uint32_t op, void *vctx)
{
    const rctx *r = vctx;
    sp_op *o = &m->ops[op];
    for (uint32_t i = 0; i < o->n_operands; i++) {
        uint32_t v = o->operands[i];
        if (v >= r->first && v - r->first < r->n) {
            o->operands[i] = r->to + (v - r->first);
        }
    }
    return CM_OK;
}

/* Turns call into a named computation; errors set err. */
static cm_status import_call(sp_module *m, fctx *c, uint32_t call, sp_diags *diags, cm_error *err)
{
    const sp_attr *callee = sp_op_attr(m, call, "callee");
    uint32_t f = callee != NULL && callee->kind == SP_ATTR_SYMBOL ? sp_module_func(m, callee->u.sym)
                                                                  : SP_NONE;
    uint32_t blk = f == SP_NONE ? SP_NONE : func_block(m, f);
    uint32_t prev = f == SP_NONE ? SP_NONE : moved_into(c, f);
    if (f == SP_NONE || (blk == SP_NONE && prev == SP_NONE)) {
        return cm_error_set(err, CM_EINVAL, "", "%u:%u: Failed to lookup function: %s",
                            m->ops[call].line, m->ops[call].col,
                            callee != NULL && callee->kind == SP_ATTR_SYMBOL ? callee->u.sym : "");
    }
    /* a call inside the body it would take (recursion) cannot be imported */
    for (uint32_t b = m->ops[call].parent_block; b != SP_NONE;) {
        uint32_t owner = m->blocks[b].parent_op;
        if (owner == SP_NONE) {
            break;
        }
        if (owner == f || owner == prev) {
            return cm_error_set(err, CM_EINVAL, "", "%u:%u: recursive call of @%s",
                                m->ops[call].line, m->ops[call].col, callee->u.sym);
        }
        b = m->ops[owner].parent_block;
    }
    uint32_t n_res = m->ops[call].n_results, nc;
    uint32_t tys[64];
    uint32_t *types = n_res <= 64 ? tys : cm_alloc(sizeof *types * n_res);
    if (types == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < n_res; i++) {
        types[i] = m->values[m->ops[call].first_result + i].type;
    }
    cm_status st = sp_module_new_op(m, SP_NONE, "sdy.named_computation", m->ops[call].operands,
                                    m->ops[call].n_operands, types, n_res, &nc);
    if (types != tys) {
        cm_free(types);
    }
    sp_attr *ins = NULL;
    if (st == CM_OK) {
        /* the in shardings come from the callee's arguments, which a moved
         * body keeps as its block arguments */
        uint32_t src = prev == SP_NONE ? blk : SP_NONE;
        if (src != SP_NONE) {
            st = arg_shardings(m, src, &ins);
        } else {
            const sp_attr *pi = sp_op_attr(m, prev, "in_shardings");
            ins = (sp_attr *)(uintptr_t)pi;
        }
    }
    if (st == CM_OK) {
        st = set_attrs(m, nc, call, f, ins);
    }
    if (st == CM_OK) {
        st = sp_op_add_regions(m, nc, 1);
    }
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    m->ops[nc].line = m->ops[call].line;
    m->ops[nc].col = m->ops[call].col;
    m->ops[nc].loc = m->ops[call].loc;
    m->ops[nc].where = m->ops[call].where;
    uint32_t body;
    if (prev != SP_NONE) {
        if (sp_diags_once(diags, SP_DIAG_ONCE_MULTI_CALL)) { /* once per process in Shardy */
            sp_diags_add(diags, m, call, SP_DIAG_WARNING,
                         "function @%s has multiple call ops, we need to clone the function "
                         "body for each call",
                         callee->u.sym);
        }
        sp_value_map map = {0};
        uint32_t copy;
        st = sp_op_clone_deep(m, prev, &map, &copy);
        sp_value_map_free(&map);
        if (st != CM_OK) {
            return st == CM_ENOMEM
                       ? cm_error_oom(err)
                       : cm_error_set(err, st, "", "%u:%u: cannot copy @%s", m->ops[call].line,
                                      m->ops[call].col, callee->u.sym);
        }
        body = m->ops[copy].regions[0].blocks[0];
        m->ops[copy].regions[0].n_blocks = 0;
    } else {
        body = blk;
        m->ops[f].regions[0].n_blocks = 0;
        sp_block *b = &m->blocks[body];
        if (b->n_ops > 0) {
            sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
            if (ret->kind == SP_OP_FUNC_RETURN) {
                ret->name = "sdy.return";
                ret->kind = SP_OP_SDY_RETURN;
            }
        }
        if (note_moved(c, f, nc) != CM_OK) {
            return cm_error_oom(err);
        }
    }
    m->blocks[body].parent_op = nc;
    if (sp_region_add_block(m, nc, 0, body) != CM_OK) {
        return cm_error_oom(err);
    }
    uint32_t parent = m->ops[call].parent_block, idx = sp_op_index_in_block(m, call);
    if (idx == SP_NONE) {
        return cm_error_set(err, CM_EINVAL, "", "%u:%u: detached func.call", m->ops[call].line,
                            m->ops[call].col);
    }
    if (sp_block_insert_op(m, parent, idx, nc) != CM_OK) {
        return cm_error_oom(err);
    }
    sp_block_remove_op(m, parent, idx + 1);
    /* the call's results are used in its function only */
    uint32_t top = parent;
    while (m->blocks[top].parent_op != SP_NONE &&
           m->ops[m->blocks[top].parent_op].kind != SP_OP_FUNC_FUNC) {
        top = m->ops[m->blocks[top].parent_op].parent_block;
    }
    rctx r = {m->ops[call].first_result, m->ops[nc].first_result, n_res};
    if (sp_pass_walk(m, top, rename_uses, &r) != CM_OK) {
        return cm_error_oom(err);
    }
    return CM_OK;
}

/* ---- the pass ----------------------------------------------------------------- */

cm_status sp_pass_import_func_calls(sp_module *m, bool add_edges, sp_diags *diags, cm_error *err)
{
    fctx c;
    memset(&c, 0, sizeof c);
    uint32_t *funcs = NULL, n_funcs = 0;
    cm_status st = sp_import_funcs_order(m, false, &funcs, &n_funcs, err);
    for (uint32_t i = 0; i < n_funcs && st == CM_OK; i++) {
        uint32_t blk = func_block(m, funcs[i]);
        if (blk != SP_NONE && sp_pass_walk(m, blk, collect_call, &c) != CM_OK) {
            st = cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; i < c.n_calls && st == CM_OK; i++) {
        st = import_call(m, &c, c.calls[i], diags, err);
    }
    /* erase the callees whose bodies moved */
    for (uint32_t i = 0; i < c.n_moved && st == CM_OK; i++) {
        uint32_t idx = sp_op_index_in_block(m, c.moved_func[i]);
        if (idx != SP_NONE) {
            sp_block_remove_op(m, m->ops[c.moved_func[i]].parent_block, idx);
        }
    }
    if (st == CM_OK && add_edges) {
        st = sp_import_add_data_flow_edges(m, true, err);
    }
    cm_free(funcs);
    cm_free(c.calls);
    cm_free(c.moved_func);
    cm_free(c.moved_nc);
    return st;
}
