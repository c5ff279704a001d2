/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-lift-inlined-meshes (Shardy's import/lift_inlined_meshes.cc):
 * meshes inlined in shardings become sdy.mesh symbols (see sp_import.h). */
#include "sp_import.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

/* The name of an sdy.mesh equal to mesh, creating one (that holds mesh
 * itself) when needed. */
static const char *mesh_symbol(sp_module *m, sp_mesh *mesh, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t last_mesh = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        if (op->kind != SP_OP_SDY_MESH) {
            continue;
        }
        last_mesh = i + 1;
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *ms = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (n != NULL && ms != NULL && ms->kind == SP_ATTR_MESH &&
            sp_mesh_equal(ms->u.mesh, mesh)) {
            return n->u.str.s;
        }
    }
    char name[64];
    if (mesh->n_axes == 0 && mesh->n_device_ids == 1) {
        snprintf(name, sizeof name, "maximal_mesh_%lld", (long long)mesh->device_ids[0]);
    } else {
        snprintf(name, sizeof name, "mesh");
        for (int k = -1; sp_module_mesh(m, name) != NULL; k++) {
            snprintf(name, sizeof name, "mesh_%d", k + 1);
        }
    }
    uint32_t op;
    if (sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        cm_error_oom(err);
        return NULL;
    }
    sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
    const char *s = sp_module_str(m, name, strlen(name));
    if (n == NULL || ms == NULL || s == NULL) {
        cm_error_oom(err);
        return NULL;
    }
    n->u.str.s = s;
    n->u.str.len = strlen(s);
    ms->u.mesh = mesh;
    if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK ||
        sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
        sp_block_insert_op(m, m->body, last_mesh, op) != CM_OK) {
        cm_error_oom(err);
        return NULL;
    }
    return s;
}

static cm_status lift_sharding(sp_module *m, sp_sharding *s, cm_error *err)
{
    if (s == NULL || s->mesh == NULL) {
        return CM_OK;
    }
    const char *name = mesh_symbol(m, s->mesh, err);
    if (name == NULL) {
        return err != NULL ? err->code : CM_ENOMEM;
    }
    s->mesh_name = name;
    s->mesh = NULL;
    return CM_OK;
}

static cm_status lift_attr(sp_module *m, sp_attr *a, cm_error *err)
{
    cm_status st = CM_OK;
    switch (a->kind) {
    case SP_ATTR_SHARDING:
        return lift_sharding(m, a->u.sharding, err);
    case SP_ATTR_SHARDING_LIST:
        for (uint32_t i = 0; i < a->u.shardings.n && st == CM_OK; i++) {
            st = lift_sharding(m, a->u.shardings.items[i], err);
        }
        return st;
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n && st == CM_OK; i++) {
            st = lift_attr(m, a->u.arr.items[i], err);
        }
        return st;
    case SP_ATTR_DICT:
        for (uint32_t i = 0; i < a->u.dict.n && st == CM_OK; i++) {
            st = lift_attr(m, a->u.dict.items[i].value, err);
        }
        return st;
    default:
        return CM_OK;
    }
}

static cm_status lift_op(sp_module *m, uint32_t op, void *ctx)
{
    cm_error *err = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_attrs; i++) {
        cm_status st = lift_attr(m, m->ops[op].attrs[i].value, err);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

cm_status sp_pass_lift_inlined_meshes(sp_module *m, cm_error *err)
{
    return sp_pass_walk(m, m->body, lift_op, err);
}
