/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-remove-size-one-axes (Shardy's
 * import/remove_size_one_axes.cc). When some sdy.mesh has an axis of size
 * one, every sharding in the module loses its references to axes of size
 * one (in dimensions, replicated and unreduced axes) of its own mesh; a
 * closed dimension left without axes also loses its priority. The meshes
 * themselves are kept as they are. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

static int64_t axis_size(const sp_mesh *mesh, const sp_axis_ref *a)
{
    if (a->pre_size > 0) {
        return a->size;
    }
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        if (strcmp(mesh->axes[i].name, a->name) == 0) {
            return mesh->axes[i].size;
        }
    }
    return 0; /* unknown: kept */
}

/* Keeps the axes of list that are not of size one; returns the new count. */
static uint32_t filter_axes(const sp_mesh *mesh, sp_axis_ref *list, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (axis_size(mesh, &list[i]) != 1) {
            list[k++] = list[i];
        }
    }
    return k;
}

static void fix_sharding(const sp_module *m, sp_sharding *s)
{
    if (s == NULL) {
        return;
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        sp_dim_sharding *ds = &s->dims[d];
        ds->n_axes = filter_axes(mesh, ds->axes, ds->n_axes);
        if (ds->n_axes == 0 && ds->is_closed) {
            ds->priority = -1;
        }
    }
    s->n_replicated = filter_axes(mesh, s->replicated, s->n_replicated);
    s->n_unreduced = filter_axes(mesh, s->unreduced, s->n_unreduced);
}

static void fix_attr(const sp_module *m, sp_attr *a)
{
    switch (a->kind) {
    case SP_ATTR_SHARDING:
        fix_sharding(m, a->u.sharding);
        break;
    case SP_ATTR_SHARDING_LIST:
        for (uint32_t i = 0; i < a->u.shardings.n; i++) {
            fix_sharding(m, a->u.shardings.items[i]);
        }
        break;
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            fix_attr(m, a->u.arr.items[i]);
        }
        break;
    case SP_ATTR_DICT:
        for (uint32_t i = 0; i < a->u.dict.n; i++) {
            fix_attr(m, a->u.dict.items[i].value);
        }
        break;
    default:
        break;
    }
}

static cm_status fix_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    if (m->ops[op].kind == SP_OP_SDY_MESH) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < m->ops[op].n_attrs; i++) {
        fix_attr(m, m->ops[op].attrs[i].value);
    }
    return CM_OK;
}

cm_status sp_pass_remove_size_one_axes(sp_module *m, cm_error *err)
{
    bool any = false;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && !any; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        const sp_attr *ms = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (op->kind != SP_OP_SDY_MESH || ms == NULL || ms->kind != SP_ATTR_MESH) {
            continue;
        }
        for (uint32_t k = 0; k < ms->u.mesh->n_axes; k++) {
            any = any || ms->u.mesh->axes[k].size == 1;
        }
    }
    if (!any) {
        return CM_OK;
    }
    cm_status st = sp_pass_walk(m, m->body, fix_op, NULL);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
