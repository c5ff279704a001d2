/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-lift-inlined-meshes (Shardy's import/lift_inlined_meshes.cc):
 * meshes inlined in shardings become sdy.mesh symbols (see sp_import.h). */
#include "sp_import.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct lift_ctx {
    cm_error *err;
    const char **from, **to; /* deduplicated mesh names and their survivors */
    uint32_t n_renames;
    uint32_t counter; /* the symbol table's uniquing counter (MLIR's) */
    bool lifting;     /* second walk: inlined meshes; first: renames */
} lift_ctx;

/* The name of an sdy.mesh equal to mesh, creating one (that holds mesh
 * itself) when needed, named as Shardy's createNewMeshOp names it and made
 * unique as MLIR's SymbolTable::insert does (`_N` with one counter). */
static const char *mesh_symbol(sp_module *m, sp_mesh *mesh, lift_ctx *c)
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
    char base[48], name[64];
    if (mesh->n_axes == 0 && mesh->n_device_ids == 1) {
        snprintf(base, sizeof base, "maximal_mesh_%lld", (long long)mesh->device_ids[0]);
    } else if (mesh->n_axes == 0) {
        snprintf(base, sizeof base, "empty_mesh");
    } else {
        snprintf(base, sizeof base, "mesh");
    }
    snprintf(name, sizeof name, "%s", base);
    while (sp_module_mesh(m, name) != NULL || sp_module_func(m, name) != SP_NONE) {
        snprintf(name, sizeof name, "%s_%u", base, c->counter++);
    }
    cm_error *err = c->err;
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

static cm_status lift_sharding(sp_module *m, sp_sharding *s, lift_ctx *c)
{
    if (s == NULL) {
        return CM_OK;
    }
    if (!c->lifting) {
        for (uint32_t i = 0; s->mesh == NULL && s->mesh_name != NULL && i < c->n_renames; i++) {
            if (strcmp(c->from[i], s->mesh_name) == 0) {
                s->mesh_name = c->to[i];
                break;
            }
        }
        return CM_OK;
    }
    if (s->mesh == NULL) {
        return CM_OK;
    }
    const char *name = mesh_symbol(m, s->mesh, c);
    if (name == NULL) {
        return c->err != NULL ? c->err->code : CM_ENOMEM;
    }
    s->mesh_name = name;
    s->mesh = NULL;
    return CM_OK;
}

static cm_status lift_attr(sp_module *m, sp_attr *a, lift_ctx *err)
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
    lift_ctx *err = ctx;
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
    /* meshes equal to an earlier one are erased; their references move to it */
    sp_block *body = &m->blocks[m->body];
    lift_ctx c = {err, NULL, NULL, 0, 0, false};
    c.from = cm_alloc(sizeof(char *) * (body->n_ops + 1u));
    c.to = cm_alloc(sizeof(char *) * (body->n_ops + 1u));
    if (c.from == NULL || c.to == NULL) {
        cm_free(c.from);
        cm_free(c.to);
        return cm_error_oom(err);
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t opid = body->ops[i];
        const sp_op *op = &m->ops[opid];
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *ms = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        bool dup = false;
        if (op->kind == SP_OP_SDY_MESH && n != NULL && n->kind == SP_ATTR_STRING && ms != NULL &&
            ms->kind == SP_ATTR_MESH) {
            for (uint32_t j = 0; j < k && !dup; j++) {
                const sp_op *o = &m->ops[body->ops[j]];
                const sp_attr *on = sp_attrs_get(o->attrs, o->n_attrs, "sym_name");
                const sp_attr *oms = sp_attrs_get(o->attrs, o->n_attrs, "mesh");
                if (o->kind == SP_OP_SDY_MESH && on != NULL && oms != NULL &&
                    oms->kind == SP_ATTR_MESH && sp_mesh_equal(oms->u.mesh, ms->u.mesh)) {
                    dup = true;
                    c.from[c.n_renames] = n->u.str.s;
                    c.to[c.n_renames++] = on->u.str.s;
                }
            }
        }
        if (dup) {
            m->ops[opid].parent_block = SP_NONE;
        } else {
            body->ops[k++] = opid;
        }
    }
    body->n_ops = k;
    /* references to erased meshes first, then the inlined meshes: a walk
     * may meet one sharding twice, and a lifted mesh may take an erased
     * mesh's name */
    cm_status st = c.n_renames > 0 ? sp_pass_walk(m, m->body, lift_op, &c) : CM_OK;
    c.lifting = true;
    if (st == CM_OK) {
        st = sp_pass_walk(m, m->body, lift_op, &c);
    }
    cm_free(c.from);
    cm_free(c.to);
    return st;
}
