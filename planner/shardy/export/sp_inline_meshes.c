/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-inline-meshes (Shardy's transforms/common/inline_meshes.cc;
 * see sp_export.h): every sharding that names an sdy.mesh gets the mesh
 * itself (as do the replica_groups of StableHLO collectives, in StableHLO's
 * spelling), and the sdy.mesh ops go. */
#include "sp_export.h"

#include <string.h>

#include "sp_export_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

static cm_status inline_one(sp_module *m, const sp_sharding *s, sp_sharding **out, void *ctx)
{
    (void)ctx;
    if (s->mesh_name == NULL) {
        return CM_OK;
    }
    const sp_mesh *mesh = sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return CM_OK;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return CM_ENOMEM;
    }
    c->mesh_name = NULL;
    c->mesh = (sp_mesh *)(uintptr_t)mesh;
    *out = c;
    return CM_OK;
}

/* `#stablehlo.mesh<axes=[<name = "x", size = 2>], device_ids=dense<[1, 0]> :
 * tensor<2xi64>>`, the StableHLO spelling of mesh, into b. */
static void stablehlo_mesh(const sp_mesh *mesh, cm_buf *b)
{
    cm_buf_puts(b, "#stablehlo.mesh<axes=[");
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        cm_buf_printf(b, "%s<name = \"%s\", size = %lld>", i ? ", " : "", mesh->axes[i].name,
                      (long long)mesh->axes[i].size);
    }
    cm_buf_putc(b, ']');
    if (mesh->device_ids != NULL) {
        cm_buf_puts(b, ", device_ids=dense<[");
        for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
            cm_buf_printf(b, "%s%lld", i ? ", " : "", (long long)mesh->device_ids[i]);
        }
        cm_buf_printf(b, "]> : tensor<%uxi64>", mesh->n_device_ids);
    }
    cm_buf_putc(b, '>');
}

/* A collective's replica_groups = #stablehlo.replica_group_mesh_axes<mesh =
 * @m, ...> gets mesh @m inlined in StableHLO's spelling. */
static cm_status inline_replica_groups(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    const sp_attr *a = sp_op_attr(m, op, "replica_groups");
    if (a == NULL || a->kind != SP_ATTR_PARAMS ||
        strcmp(a->u.params.name, "stablehlo.replica_group_mesh_axes") != 0) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < a->u.params.n; i++) {
        const sp_named_attr *it = &a->u.params.items[i];
        if (it->name == NULL || strcmp(it->name, "mesh") != 0 || it->value->kind != SP_ATTR_SYMBOL) {
            continue;
        }
        const sp_mesh *mesh = sp_module_mesh(m, it->value->u.sym);
        if (mesh == NULL) {
            return CM_OK;
        }
        cm_buf b;
        cm_buf_init(&b);
        stablehlo_mesh(mesh, &b);
        sp_attr *text = sp_attr_new(m, SP_ATTR_OPAQUE);
        sp_attr *na = sp_attr_new(m, SP_ATTR_PARAMS);
        sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * (a->u.params.n + 1u));
        const char *t = b.oom ? NULL : sp_module_str(m, b.data, b.len);
        cm_buf_fini(&b);
        if (text == NULL || na == NULL || items == NULL || t == NULL) {
            return CM_ENOMEM;
        }
        text->u.opaque.text = t;
        memcpy(items, a->u.params.items, sizeof *items * a->u.params.n);
        items[i].value = text;
        na->u.params.name = a->u.params.name;
        na->u.params.items = items;
        na->u.params.n = a->u.params.n;
        return sp_op_set_attr(m, op, "replica_groups", na);
    }
    return CM_OK;
}

cm_status sp_pass_inline_meshes(sp_module *m, cm_error *err)
{
    if (sp_exp_transform_shardings(m, inline_one, NULL) != CM_OK ||
        sp_pass_walk(m, m->body, inline_replica_groups, NULL) != CM_OK) {
        return cm_error_oom(err);
    }
    for (uint32_t i = m->blocks[m->body].n_ops; i-- > 0;) {
        if (m->ops[m->blocks[m->body].ops[i]].kind == SP_OP_SDY_MESH) {
            sp_block_remove_op(m, m->body, i);
        }
    }
    return CM_OK;
}
