/* SPDX-License-Identifier: Apache-2.0
 * planner: function and call helpers of the export passes (sp_export_int.h;
 * Shardy's ir/utils.cc and TensorShardingAttr::isEquivalent), and the
 * attribute builders the rewriting passes share. */
#include "sp_export_int.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

const sp_sharding *sp_exp_io_sharding(const sp_module *m, uint32_t f, bool is_arg, uint32_t i)
{
    if (!is_arg) {
        return sp_func_result_sharding(m, f, i);
    }
    const sp_op *op = &m->ops[f];
    if (op->n_regions == 0 || op->regions[0].n_blocks == 0) {
        return NULL;
    }
    const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
    return i < b->n_args ? sp_value_sharding(m, b->first_arg + i) : NULL;
}

uint32_t sp_exp_io_count(const sp_module *m, uint32_t f, bool is_arg)
{
    const sp_type *t = sp_func_type(m, f);
    return t == NULL ? 0 : (is_arg ? t->n_inputs : t->n_results);
}

uint32_t sp_exp_io_rank(const sp_module *m, uint32_t f, bool is_arg, uint32_t i)
{
    const sp_type *t = sp_func_type(m, f);
    if (t == NULL || i >= (is_arg ? t->n_inputs : t->n_results)) {
        return 0;
    }
    const sp_type *v = &m->types[is_arg ? t->inputs[i] : t->results[i]];
    return v->kind == SP_TYPE_TENSOR ? v->rank : 0;
}

bool sp_exp_is_maximal(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh
                          : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                 : NULL;
    return mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1;
}

const sp_sharding *sp_exp_mesh_source(const sp_module *m, uint32_t f, bool is_arg)
{
    uint32_t n = sp_exp_io_count(m, f, is_arg);
    for (uint32_t i = 0; i < n; i++) {
        const sp_sharding *s = sp_exp_io_sharding(m, f, is_arg, i);
        if (s != NULL && !sp_exp_is_maximal(m, s)) {
            return s;
        }
    }
    return NULL;
}

sp_sharding *sp_exp_fully_closed_like(sp_module *m, const sp_sharding *s)
{
    sp_sharding *c = sp_sharding_open(&m->arena, s->mesh_name, s->rank);
    if (c == NULL) {
        return NULL;
    }
    c->mesh = s->mesh;
    for (uint32_t d = 0; d < c->rank; d++) {
        c->dims[d].is_closed = true;
    }
    return c;
}

uint32_t sp_exp_callee(const sp_module *m, uint32_t call)
{
    const sp_attr *a = sp_op_attr(m, call, "callee");
    return a != NULL && a->kind == SP_ATTR_SYMBOL ? sp_module_func(m, a->u.sym) : SP_NONE;
}

/* ---- every sharding of the module ------------------------------------------------- */

typedef struct tctx {
    sp_exp_sharding_fn fn;
    void *ctx;
} tctx;

/* The list form of transform_attr: fn ignores the entry's index. */
static cm_status list_item(sp_module *m, uint32_t i, const sp_sharding *s, sp_sharding **out,
                           const void *vt)
{
    (void)i;
    const tctx *t = vt;
    return t->fn(m, s, out, t->ctx);
}

cm_status sp_exp_rewrite_sharding_list(sp_module *m, uint32_t op, const char *name,
                                       sp_exp_item_fn fn, const void *ctx)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST) {
        return CM_OK;
    }
    sp_sharding **items = NULL;
    uint32_t n = a->u.shardings.n;
    for (uint32_t i = 0; i < n; i++) {
        if (a->u.shardings.items[i] == NULL) {
            continue;
        }
        sp_sharding *s = NULL;
        cm_status st = fn(m, i, a->u.shardings.items[i], &s, ctx);
        if (st != CM_OK) {
            return st;
        }
        if (s == NULL) {
            continue;
        }
        if (items == NULL) {
            items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
            if (items == NULL) {
                return CM_ENOMEM;
            }
            memcpy(items, a->u.shardings.items, sizeof *items * n);
        }
        items[i] = s;
    }
    if (items == NULL) {
        return CM_OK;
    }
    sp_attr *na = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (na == NULL) {
        return CM_ENOMEM;
    }
    na->u.shardings.items = items;
    na->u.shardings.n = n;
    return sp_op_set_attr(m, op, name, na);
}

/* Rewrites one sharding attribute in place of a copy: a new attribute when
 * fn changes any sharding in it. */
static cm_status transform_attr(sp_module *m, uint32_t op, const char *name, const tctx *t)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    if (a == NULL) {
        return CM_OK;
    }
    if (a->kind == SP_ATTR_SHARDING) {
        sp_sharding *s = NULL;
        cm_status st = t->fn(m, a->u.sharding, &s, t->ctx);
        if (st != CM_OK || s == NULL) {
            return st;
        }
        sp_attr *n = sp_attr_new(m, SP_ATTR_SHARDING);
        if (n == NULL) {
            return CM_ENOMEM;
        }
        n->u.sharding = s;
        return sp_op_set_attr(m, op, name, n);
    }
    if (a->kind != SP_ATTR_SHARDING_LIST) {
        return CM_OK;
    }
    return sp_exp_rewrite_sharding_list(m, op, name, list_item, t);
}

static cm_status transform_op(sp_module *m, uint32_t op, void *vctx)
{
    const tctx *t = vctx;
    if (m->ops[op].kind == SP_OP_FUNC_FUNC) {
        for (int which = 0; which < 2; which++) {
            uint32_t n = sp_exp_io_count(m, op, which == 0);
            for (uint32_t i = 0; i < n; i++) {
                const sp_sharding *s = sp_exp_io_sharding(m, op, which == 0, i);
                sp_sharding *ns = NULL;
                cm_status st = s == NULL ? CM_OK : t->fn(m, s, &ns, t->ctx);
                if (st != CM_OK) {
                    return st;
                }
                if (ns == NULL) {
                    continue;
                }
                sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
                if (a == NULL) {
                    return CM_ENOMEM;
                }
                a->u.sharding = ns;
                st = which == 0 ? sp_func_set_arg_attr(m, op, i, "sdy.sharding", a)
                                : sp_func_set_result_attr(m, op, i, "sdy.sharding", a);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        return CM_OK;
    }
    static const char *const names[] = {"sdy.sharding", "in_shardings", "out_shardings",
                                        "sharding", "out_sharding"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cm_status st = transform_attr(m, op, names[k], t);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

cm_status sp_exp_transform_shardings(sp_module *m, sp_exp_sharding_fn fn, void *ctx)
{
    tctx t = {fn, ctx};
    return sp_pass_walk(m, m->body, transform_op, &t);
}

sp_attr *sp_exp_i64_array(sp_module *m, const int64_t *v, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE_ARRAY);
    int64_t *copy = n > 0 ? cm_arena_alloc(&m->arena, sizeof *copy * n) : NULL;
    if (a == NULL || (n > 0 && copy == NULL)) {
        return NULL;
    }
    if (n > 0) {
        memcpy(copy, v, sizeof *copy * n);
    }
    a->u.darr.elem = "i64";
    a->u.darr.v = copy;
    a->u.darr.n = n;
    return a;
}

bool sp_exp_attr_equal(const sp_attr *a, const sp_attr *b)
{
    if (a == NULL || b == NULL || a == b) {
        return a == b;
    }
    if (a->kind != b->kind) {
        return false;
    }
    if (a->kind == SP_ATTR_SHARDING_LIST) {
        if (a->u.shardings.n != b->u.shardings.n) {
            return false;
        }
        for (uint32_t i = 0; i < a->u.shardings.n; i++) {
            if (!sp_sharding_equal(a->u.shardings.items[i], b->u.shardings.items[i])) {
                return false;
            }
        }
        return true;
    }
    if (a->kind != SP_ATTR_AXIS_LIST) {
        return sp_attr_equal(a, b);
    }
    if (a->u.axes.n != b->u.axes.n) {
        return false;
    }
    for (uint32_t i = 0; i < a->u.axes.n; i++) {
        const sp_axis_ref *x = &a->u.axes.axes[i], *y = &b->u.axes.axes[i];
        if (strcmp(x->name, y->name) != 0 || x->pre_size != y->pre_size || x->size != y->size) {
            return false;
        }
    }
    return true;
}
