/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-propagate-sharding-from-func-to-call (Shardy's
 * import/propagate_sharding_from_func_to_call.cc; see sp_import.h). A
 * func.call without an sdy.sharding takes its callee's result shardings
 * when some result has one on a non-maximal mesh: the callee's result
 * shardings, results without one fully open on the mesh of the first such
 * result. A call that has an sdy.sharding keeps it as it is. */
#include <string.h>

#include "sp_import.h"
#include "sp_ops.h"
#include "sp_pass.h"

typedef struct pctx {
    cm_error *err;
} pctx;

static bool is_maximal(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = s->mesh != NULL        ? s->mesh
                          : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                 : NULL;
    return mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1;
}

/* Shardy's getFuncResultShardings of function f, or NULL in *out when no
 * result is sharded on a non-maximal mesh. */
static cm_status result_shardings(sp_module *m, uint32_t f, sp_attr **out)
{
    *out = NULL;
    const sp_type *ft = sp_func_type(m, f);
    if (ft == NULL) {
        return CM_OK;
    }
    uint32_t n = ft->n_results;
    const sp_sharding *src = NULL;
    for (uint32_t i = 0; i < n && src == NULL; i++) {
        const sp_sharding *s = sp_func_result_sharding(m, f, i);
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
        sp_sharding *s = sp_func_result_sharding(m, f, i);
        if (s == NULL) {
            const sp_type *t = &m->types[ft->results[i]];
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

static cm_status visit(sp_module *m, uint32_t op, void *vctx)
{
    pctx *c = vctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    const sp_attr *callee = sp_op_attr(m, op, "callee");
    const char *name = callee != NULL && callee->kind == SP_ATTR_SYMBOL ? callee->u.sym : "";
    uint32_t f = sp_module_func(m, name);
    if (f == SP_NONE) {
        return cm_error_set(c->err, CM_EINVAL, "", "%u:%u: Failed to lookup function: %s",
                            m->ops[op].line, m->ops[op].col, name);
    }
    if (sp_op_attr(m, op, "sdy.sharding") != NULL) {
        return CM_OK;
    }
    sp_attr *list = NULL;
    if (result_shardings(m, f, &list) != CM_OK ||
        (list != NULL && sp_op_set_attr(m, op, "sdy.sharding", list) != CM_OK)) {
        return cm_error_oom(c->err);
    }
    return CM_OK;
}

cm_status sp_pass_propagate_sharding_from_func_to_call(sp_module *m, cm_error *err)
{
    pctx c = {err};
    return sp_pass_walk(m, m->body, visit, &c);
}
