/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-lift-inlined-meshes (Shardy's import/lift_inlined_meshes.cc):
 * meshes inlined in shardings, and in the mesh-axes replica groups of the
 * StableHLO collectives, become sdy.mesh symbols, and every sdy.mesh gets a
 * discardable `stablehlo.mesh` dictionary spelling it (see sp_import.h). */
#include "sp_import.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct lift_ctx {
    cm_error *err;
    const char **from, **to; /* deduplicated mesh names and their survivors */
    uint32_t n_renames;
    uint32_t counter;     /* the symbol table's uniquing counter (MLIR's) */
    bool lifting;         /* second walk: inlined meshes; first: renames */
    const sp_attr **shlo; /* StableHLO meshes lifted, and their symbols */
    const char **shlo_name;
    uint32_t n_shlo, cap_shlo;
    uint32_t *colls; /* collectives with replica groups, in walk order */
    uint32_t n_colls, cap_colls;
} lift_ctx;

static const char *mesh_create(sp_module *m, sp_mesh *mesh, const char *base, uint32_t last_mesh,
                               lift_ctx *c);

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
    char base[48];
    if (mesh->n_axes == 0 && mesh->n_device_ids == 1) {
        snprintf(base, sizeof base, "maximal_mesh_%lld", (long long)mesh->device_ids[0]);
    } else if (mesh->n_axes == 0) {
        snprintf(base, sizeof base, "empty_mesh");
    } else {
        snprintf(base, sizeof base, "mesh");
    }
    return mesh_create(m, mesh, base, last_mesh, c);
}

/* A new sdy.mesh holding mesh, named base made unique, inserted at index
 * last_mesh of the module body (after the last mesh); its name, or NULL
 * with err set when out of memory. */
static const char *mesh_create(sp_module *m, sp_mesh *mesh, const char *base, uint32_t last_mesh,
                               lift_ctx *c)
{
    char name[64];
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

/* Index after the last sdy.mesh of the module body (0 when none). */
static uint32_t after_last_mesh(const sp_module *m)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t last = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        if (m->ops[body->ops[i]].kind == SP_OP_SDY_MESH) {
            last = i + 1;
        }
    }
    return last;
}

/* The sdy mesh a `#stablehlo.mesh<axes = [#stablehlo.mesh_axis<name = "x",
 * size = 4>, ...]>` spells (its device ids are not carried over, as in
 * Shardy), or NULL when a is not one or is out of memory. */
static sp_mesh *shlo_mesh(sp_module *m, const sp_attr *a)
{
    if (a->kind != SP_ATTR_PARAMS || strcmp(a->u.params.name, "stablehlo.mesh") != 0) {
        return NULL;
    }
    const sp_attr *axes = NULL;
    for (uint32_t i = 0; i < a->u.params.n; i++) {
        if (strcmp(a->u.params.items[i].name, "axes") == 0) {
            axes = a->u.params.items[i].value;
        }
    }
    if (axes != NULL && axes->kind != SP_ATTR_ARRAY) {
        return NULL;
    }
    uint32_t n = axes != NULL ? axes->u.arr.n : 0;
    sp_mesh *mesh = cm_arena_zalloc(&m->arena, sizeof *mesh);
    sp_mesh_axis *ax = n > 0 ? cm_arena_alloc(&m->arena, sizeof *ax * n) : NULL;
    if (mesh == NULL || (n > 0 && ax == NULL)) {
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        const sp_attr *e = axes->u.arr.items[i];
        const char *name = NULL;
        int64_t size = 0;
        if (e->kind != SP_ATTR_PARAMS) {
            return NULL;
        }
        for (uint32_t k = 0; k < e->u.params.n; k++) {
            const sp_named_attr *it = &e->u.params.items[k];
            if (strcmp(it->name, "name") == 0 && it->value->kind == SP_ATTR_STRING) {
                name = it->value->u.str.s;
            } else if (strcmp(it->name, "size") == 0 && it->value->kind == SP_ATTR_INT) {
                size = it->value->u.i.v;
            }
        }
        if (name == NULL || size <= 0) {
            return NULL;
        }
        ax[i].name = name;
        ax[i].size = size;
    }
    mesh->axes = ax;
    mesh->n_axes = n;
    return mesh;
}

/* A collective's `replica_groups = #stablehlo.replica_group_mesh_axes<mesh =
 * M, axes = ...>`: an erased mesh's symbol becomes its survivor's, an
 * inlined sdy mesh the symbol of an equal one (lifted when new), a
 * StableHLO mesh a new `mesh` symbol (one per distinct mesh attribute). */
static cm_status lift_replica_groups(sp_module *m, uint32_t op, lift_ctx *c)
{
    const sp_attr *a = sp_op_attr(m, op, "replica_groups");
    if (a == NULL || a->kind != SP_ATTR_PARAMS ||
        strcmp(a->u.params.name, "stablehlo.replica_group_mesh_axes") != 0) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < a->u.params.n; i++) {
        const sp_named_attr *it = &a->u.params.items[i];
        if (strcmp(it->name, "mesh") != 0) {
            continue;
        }
        const char *name = NULL;
        const sp_attr *v = it->value;
        if (v->kind == SP_ATTR_SYMBOL) {
            for (uint32_t k = 0; k < c->n_renames && name == NULL; k++) {
                if (strcmp(c->from[k], v->u.sym) == 0) {
                    name = c->to[k];
                }
            }
        } else if (v->kind == SP_ATTR_MESH) {
            if ((name = mesh_symbol(m, v->u.mesh, c)) == NULL) {
                return CM_ENOMEM;
            }
        } else if (v->kind == SP_ATTR_PARAMS) {
            for (uint32_t k = 0; k < c->n_shlo && name == NULL; k++) {
                if (sp_attr_equal(c->shlo[k], v)) {
                    name = c->shlo_name[k];
                }
            }
            sp_mesh *mesh = name == NULL ? shlo_mesh(m, v) : NULL;
            if (mesh != NULL) {
                if ((name = mesh_create(m, mesh, "mesh", after_last_mesh(m), c)) == NULL) {
                    return CM_ENOMEM;
                }
                if (c->n_shlo == c->cap_shlo) {
                    uint32_t cap = c->cap_shlo == 0 ? 4u : c->cap_shlo * 2u;
                    const sp_attr **t = cm_realloc(c->shlo, sizeof *t * cap);
                    const char **tn = t == NULL ? NULL : cm_realloc(c->shlo_name, sizeof *tn * cap);
                    if (t != NULL) {
                        c->shlo = t;
                    }
                    if (tn == NULL) {
                        return CM_ENOMEM;
                    }
                    c->shlo_name = tn;
                    c->cap_shlo = cap;
                }
                c->shlo[c->n_shlo] = v;
                c->shlo_name[c->n_shlo++] = name;
            }
        }
        if (name == NULL) {
            return CM_OK;
        }
        sp_attr *sym = sp_attr_new(m, SP_ATTR_SYMBOL);
        sp_attr *na = sp_attr_new(m, SP_ATTR_PARAMS);
        sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * a->u.params.n);
        if (sym == NULL || na == NULL || items == NULL) {
            return CM_ENOMEM;
        }
        sym->u.sym = name;
        memcpy(items, a->u.params.items, sizeof *items * a->u.params.n);
        items[i].value = sym;
        na->u.params.name = a->u.params.name;
        na->u.params.items = items;
        na->u.params.n = a->u.params.n;
        return sp_op_set_attr(m, op, "replica_groups", na);
    }
    return CM_OK;
}

static bool has_replica_groups(uint32_t kind)
{
    return kind == SP_OP_ALL_GATHER || kind == SP_OP_ALL_REDUCE || kind == SP_OP_REDUCE_SCATTER ||
           kind == SP_OP_ALL_TO_ALL || kind == SP_OP_COLLECTIVE_BROADCAST;
}

static cm_status gather_colls(sp_module *m, uint32_t op, void *ctx)
{
    lift_ctx *c = ctx;
    if (!has_replica_groups(m->ops[op].kind)) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->colls, c->cap_colls, c->n_colls + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->colls[c->n_colls++] = op;
    return CM_OK;
}

/* `{axes = [{name = "x", size = 4 : i64}, ...], device_ids = dense<...> :
 * tensor<Nxi64>}` (device ids only when the mesh lists them): the
 * discardable stablehlo.mesh attribute Shardy puts on every sdy.mesh. */
static sp_attr *shlo_mesh_dict(sp_module *m, const sp_mesh *mesh)
{
    sp_attr *d = sp_attr_new(m, SP_ATTR_DICT), *axes = sp_attr_new(m, SP_ATTR_ARRAY);
    uint32_t nd = mesh->n_device_ids > 0 ? 2u : 1u;
    sp_named_attr *fields = cm_arena_alloc(&m->arena, sizeof *fields * nd);
    sp_attr **items =
        mesh->n_axes > 0 ? cm_arena_alloc(&m->arena, sizeof *items * mesh->n_axes) : NULL;
    if (d == NULL || axes == NULL || fields == NULL || (mesh->n_axes > 0 && items == NULL)) {
        return NULL;
    }
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        sp_attr *ax = sp_attr_new(m, SP_ATTR_DICT), *name = sp_attr_new(m, SP_ATTR_STRING);
        sp_attr *size = sp_attr_new(m, SP_ATTR_INT);
        sp_named_attr *kv = cm_arena_alloc(&m->arena, sizeof *kv * 2);
        if (ax == NULL || name == NULL || size == NULL || kv == NULL) {
            return NULL;
        }
        name->u.str.s = mesh->axes[i].name;
        name->u.str.len = strlen(mesh->axes[i].name);
        size->u.i.v = mesh->axes[i].size;
        size->u.i.type = "i64";
        kv[0] = (sp_named_attr){"name", name};
        kv[1] = (sp_named_attr){"size", size};
        ax->u.dict.items = kv;
        ax->u.dict.n = 2;
        items[i] = ax;
    }
    axes->u.arr.items = items;
    axes->u.arr.n = mesh->n_axes;
    fields[0] = (sp_named_attr){"axes", axes};
    if (mesh->n_device_ids > 0) {
        uint32_t n = mesh->n_device_ids, ty;
        int64_t dims[1] = {(int64_t)n};
        sp_attr *ids = sp_attr_new(m, SP_ATTR_DENSE);
        int64_t *v = cm_arena_alloc(&m->arena, sizeof *v * n);
        cm_buf b;
        cm_buf_init(&b);
        cm_buf_putc(&b, '[');
        for (uint32_t i = 0; i < n; i++) {
            cm_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)mesh->device_ids[i]);
        }
        cm_buf_putc(&b, ']');
        const char *body = b.oom ? NULL : sp_module_str(m, b.data, b.len);
        cm_buf_fini(&b);
        if (ids == NULL || v == NULL || body == NULL ||
            sp_module_tensor_type(m, SP_ELEM_I64, dims, 1, &ty, NULL) != CM_OK) {
            return NULL;
        }
        memcpy(v, mesh->device_ids, sizeof *v * n);
        ids->u.dense.body = body;
        ids->u.dense.type = ty;
        ids->u.dense.ints = v;
        ids->u.dense.n_ints = n;
        fields[1] = (sp_named_attr){"device_ids", ids};
    }
    d->u.dict.items = fields;
    d->u.dict.n = nd;
    return d;
}

cm_status sp_pass_lift_inlined_meshes(sp_module *m, cm_error *err)
{
    /* meshes equal to an earlier one are erased; their references move to it */
    sp_block *body = &m->blocks[m->body];
    lift_ctx c;
    memset(&c, 0, sizeof c);
    c.err = err;
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
    /* the replica groups, one collective kind after another as Shardy walks
     * (one walk gathers them) */
    static const sp_op_kind colls[] = {SP_OP_ALL_GATHER, SP_OP_ALL_REDUCE, SP_OP_REDUCE_SCATTER,
                                       SP_OP_ALL_TO_ALL, SP_OP_COLLECTIVE_BROADCAST};
    if (st == CM_OK) {
        st = sp_pass_walk(m, m->body, gather_colls, &c);
    }
    for (size_t ci = 0; ci < sizeof colls / sizeof colls[0] && st == CM_OK; ci++) {
        for (uint32_t i = 0; i < c.n_colls && st == CM_OK; i++) {
            if (m->ops[c.colls[i]].kind == (uint32_t)colls[ci]) {
                st = lift_replica_groups(m, c.colls[i], &c);
            }
        }
    }
    /* every mesh spelled for StableHLO */
    for (uint32_t i = 0; i < m->blocks[m->body].n_ops && st == CM_OK; i++) {
        uint32_t op = m->blocks[m->body].ops[i];
        const sp_attr *ms = sp_op_attr(m, op, "mesh");
        if (m->ops[op].kind != SP_OP_SDY_MESH || ms == NULL || ms->kind != SP_ATTR_MESH ||
            sp_op_attr(m, op, "stablehlo.mesh") != NULL) {
            continue;
        }
        sp_attr *d = shlo_mesh_dict(m, ms->u.mesh);
        st = d == NULL ? CM_ENOMEM : sp_op_set_attr(m, op, "stablehlo.mesh", d);
    }
    cm_free(c.from);
    cm_free(c.to);
    cm_free(c.shlo);
    cm_free(c.shlo_name);
    cm_free(c.colls);
    return st == CM_ENOMEM ? cm_error_oom(err) : st;
}
