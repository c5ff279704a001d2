/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-resolve-single-device-sharding (Shardy's
 * export/resolve_single_device_sharding.cc; see sp_export.h). An op whose
 * tensor results are placed on one device (a maximal mesh such as
 * `<[], device_ids=[3]>`) runs inside `stablehlo.if (device id == 3)`; the
 * other devices produce zeros (tokens for token results), and an
 * sdy.all_reduce over every axis of the global mesh (the first sdy.mesh with
 * axes) then hands the value to all. Reshards of the operands onto the
 * device, and of the results to replicated on the global mesh, are folded
 * away. Ops of the sdy dialect are left alone. */
#include "sp_export.h"

#include <stdio.h>
#include <string.h>

#include "sp_export_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

typedef struct rctx {
    sp_module *m;
    sp_uses u;
    const char *global;        /* the global mesh's name */
    const sp_mesh *global_mesh;
    bool replica_id;           /* guard on replica_id (replica-count > 1), else partition_id */
    uint32_t *ops;             /* the single-device ops, in walk order */
    uint32_t n, cap;
    int64_t bad_line;          /* an op with a result on another device or sharded: its line */
} rctx;

/* The device of s when it is on a maximal mesh, else -1. */
static int64_t single_device(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return -1;
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh
                          : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                 : NULL;
    if (mesh == NULL || mesh->n_axes != 0 || mesh->n_device_ids != 1) {
        return -1;
    }
    return mesh->device_ids[0];
}

static bool fully_replicated(const sp_sharding *s)
{
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return s->n_unreduced == 0;
}

/* The device op's tensor results are placed on, or -1 (Shardy's
 * getSingleDeviceIdForOp). *bad: results disagree. */
static int64_t op_device(const sp_module *m, uint32_t op, bool *bad)
{
    int64_t dev = -1;
    bool other = false;
    for (uint32_t i = 0; i < m->ops[op].n_results; i++) {
        uint32_t r = m->ops[op].first_result + i;
        if (sp_value_type(m, r)->kind != SP_TYPE_TENSOR) {
            continue;
        }
        const sp_sharding *s = sp_value_sharding(m, r);
        if (s == NULL) {
            continue;
        }
        int64_t d = single_device(m, s);
        if (d >= 0) {
            *bad = *bad || (dev >= 0 && d != dev);
            dev = d;
        } else if (!fully_replicated(s)) {
            other = true;
        }
    }
    *bad = *bad || (dev >= 0 && other);
    return dev;
}

static cm_status collect(sp_module *m, uint32_t op, void *vctx)
{
    rctx *c = vctx;
    if (strncmp(m->ops[op].name, "sdy.", 4) == 0) {
        return CM_OK;
    }
    bool bad = false;
    int64_t dev = op_device(m, op, &bad);
    if (bad && c->bad_line < 0) {
        c->bad_line = m->ops[op].line;
    }
    if (dev < 0 || bad) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->ops, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->ops[c->n++] = op;
    return CM_OK;
}

static cm_status tensor_type(sp_module *m, sp_elem e, const int64_t *dims, uint32_t rank,
                             uint32_t *id)
{
    return sp_module_tensor_type(m, e, dims, rank, id, NULL);
}

/* A new op in block at *at (advanced), with one result of type ty (or none
 * when ty is SP_NONE). */
static cm_status add_op(sp_module *m, uint32_t block, uint32_t *at, const char *name,
                        const uint32_t *operands, uint32_t n_operands, uint32_t ty, uint32_t *op)
{
    cm_status st = sp_module_new_op(m, SP_NONE, name, operands, n_operands, &ty,
                                    ty == SP_NONE ? 0 : 1, op);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, block, (*at)++, *op);
    }
    return st;
}

/* `stablehlo.constant dense<body> : ty`. */
static cm_status constant(sp_module *m, uint32_t block, uint32_t *at, const char *body,
                          uint32_t ty, uint32_t *v)
{
    uint32_t op;
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    const char *b = sp_module_str(m, body, strlen(body));
    if (a == NULL || b == NULL || add_op(m, block, at, "stablehlo.constant", NULL, 0, ty, &op)) {
        return CM_ENOMEM;
    }
    a->u.dense.body = b;
    a->u.dense.type = ty;
    if (sp_op_set_attr(m, op, "value", a) != CM_OK) {
        return CM_ENOMEM;
    }
    *v = m->ops[op].first_result;
    return CM_OK;
}

/* The zero of an element type as a dense<> body. */
static const char *zero_body(sp_elem e)
{
    if (e == SP_ELEM_I1) {
        return "false";
    }
    if (e >= SP_ELEM_I2 && e <= SP_ELEM_UI64) {
        return "0";
    }
    if (e == SP_ELEM_C64 || e == SP_ELEM_C128) {
        return "(0.000000e+00,0.000000e+00)";
    }
    return "0.000000e+00";
}

/* The predicate `device id == dev` before index *at of block. */
static cm_status guard(rctx *c, uint32_t block, uint32_t *at, int64_t dev, uint32_t *pred)
{
    sp_module *m = c->m;
    uint32_t t_u32, t_i64, t_i1, op;
    if (tensor_type(m, SP_ELEM_UI32, NULL, 0, &t_u32) != CM_OK ||
        tensor_type(m, SP_ELEM_I64, NULL, 0, &t_i64) != CM_OK ||
        tensor_type(m, SP_ELEM_I1, NULL, 0, &t_i1) != CM_OK ||
        add_op(m, block, at, c->replica_id ? "stablehlo.replica_id" : "stablehlo.partition_id",
               NULL, 0, t_u32, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t id = m->ops[op].first_result;
    if (add_op(m, block, at, "stablehlo.convert", &id, 1, t_i64, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t args[2] = {m->ops[op].first_result, 0};
    char body[32];
    snprintf(body, sizeof body, "%lld", (long long)dev);
    if (constant(m, block, at, body, t_i64, &args[1]) != CM_OK ||
        add_op(m, block, at, "stablehlo.compare", args, 2, t_i1, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_attr *dir = sp_attr_new(m, SP_ATTR_ENUM);
    if (dir == NULL) {
        return CM_ENOMEM;
    }
    dir->u.enm.dialect = "stablehlo";
    dir->u.enm.kind = "comparison_direction";
    dir->u.enm.value = "EQ";
    if (sp_op_set_attr(m, op, "comparison_direction", dir) != CM_OK) {
        return CM_ENOMEM;
    }
    *pred = m->ops[op].first_result;
    return CM_OK;
}

/* Is v the result of an sdy.reshard onto a single device? Its op, else SP_NONE. */
static uint32_t device_reshard(const sp_module *m, uint32_t v)
{
    uint32_t def = m->values[v].def;
    if (def == SP_NONE || m->ops[def].kind != SP_OP_SDY_RESHARD) {
        return SP_NONE;
    }
    const sp_attr *a = sp_op_attr(m, def, "sharding");
    return a != NULL && a->kind == SP_ATTR_SHARDING && single_device(m, a->u.sharding) >= 0
               ? def
               : SP_NONE;
}

static void erase(sp_module *m, uint32_t op)
{
    uint32_t idx = sp_op_index_in_block(m, op);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[op].parent_block, idx);
    }
}

/* Is the sharding s fully replicated and closed on the global mesh? */
static bool is_global_replicated(const rctx *c, const sp_sharding *s)
{
    if (s->mesh_name == NULL || strcmp(s->mesh_name, c->global) != 0 || s->n_replicated > 0 ||
        s->n_unreduced > 0) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0 || !s->dims[d].is_closed || s->dims[d].priority >= 0) {
            return false;
        }
    }
    return true;
}

/* `sdy.all_reduce {global axes} v out_sharding=<@global, [{}, ...]>` at *at. */
static cm_status all_reduce(rctx *c, uint32_t block, uint32_t *at, uint32_t v, uint32_t *out)
{
    sp_module *m = c->m;
    const sp_type *t = sp_value_type(m, v);
    uint32_t op;
    sp_attr *axes = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    sp_attr *sh = sp_attr_new(m, SP_ATTR_SHARDING);
    sp_sharding *s = sp_sharding_open(&m->arena, c->global, t->rank);
    uint32_t na = c->global_mesh->n_axes;
    sp_axis_ref *refs = cm_arena_alloc(&m->arena, sizeof *refs * (na + 1u));
    if (axes == NULL || sh == NULL || s == NULL || refs == NULL ||
        add_op(m, block, at, "sdy.all_reduce", &v, 1, m->values[v].type, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        s->dims[d].is_closed = true;
    }
    for (uint32_t i = 0; i < na; i++) {
        refs[i].name = c->global_mesh->axes[i].name;
        refs[i].pre_size = 0;
        refs[i].size = c->global_mesh->axes[i].size;
    }
    axes->u.axes.axes = refs;
    axes->u.axes.n = na;
    sh->u.sharding = s;
    if (sp_op_set_attr(m, op, "reduction_axes", axes) != CM_OK ||
        sp_op_set_attr(m, op, "out_sharding", sh) != CM_OK) {
        return CM_ENOMEM;
    }
    *out = m->ops[op].first_result;
    return CM_OK;
}

static void redirect(rctx *c, uint32_t from, uint32_t to)
{
    for (uint32_t k = c->u.head[from]; k != SP_NONE; k = c->u.pool[k].next) {
        c->m->ops[c->u.pool[k].op].operands[c->u.pool[k].idx] = to;
    }
}

static cm_status resolve(rctx *c, uint32_t x)
{
    sp_module *m = c->m;
    bool bad = false;
    int64_t dev = op_device(m, x, &bad);
    uint32_t block = m->ops[x].parent_block;
    uint32_t at = sp_op_index_in_block(m, x);
    if (dev < 0 || at == SP_NONE) {
        return CM_OK;
    }
    uint32_t pred, ifop, n = m->ops[x].n_results;
    uint32_t stack[64];
    uint32_t *types = n <= 64 ? stack : cm_alloc(sizeof *types * n);
    if (types == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        types[i] = m->values[m->ops[x].first_result + i].type;
    }
    cm_status st = guard(c, block, &at, dev, &pred);
    if (st == CM_OK) {
        st = sp_module_new_op(m, SP_NONE, "stablehlo.if", &pred, 1, types, n, &ifop);
    }
    if (types != stack) {
        cm_free(types);
    }
    uint32_t tb, fb;
    if (st != CM_OK || sp_op_add_regions(m, ifop, 2) != CM_OK ||
        sp_module_new_block(m, ifop, &tb) != CM_OK || sp_region_add_block(m, ifop, 0, tb) != CM_OK ||
        sp_module_new_block(m, ifop, &fb) != CM_OK || sp_region_add_block(m, ifop, 1, fb) != CM_OK) {
        return CM_ENOMEM;
    }
    /* the op moves into the true branch, its single-device reshards folded */
    sp_block_remove_op(m, block, at);
    if (sp_block_insert_op(m, block, at++, ifop) != CM_OK ||
        sp_block_insert_op(m, tb, 0, x) != CM_OK) {
        return CM_ENOMEM;
    }
    m->ops[x].parent_block = tb;
    sp_op_remove_attr(m, x, "sdy.sharding");
    uint32_t folded[64], n_folded = 0;
    for (uint32_t i = 0; i < m->ops[x].n_operands; i++) {
        uint32_t r = device_reshard(m, m->ops[x].operands[i]);
        if (r == SP_NONE) {
            continue;
        }
        m->ops[x].operands[i] = m->ops[r].operands[0];
        if (n_folded < 64) {
            folded[n_folded++] = r;
        }
    }
    uint32_t ret, tat = 1, fat = 0;
    uint32_t *res = cm_alloc(sizeof *res * (n + 1u));
    if (res == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        res[i] = m->ops[x].first_result + i;
    }
    st = sp_module_new_op(m, SP_NONE, "stablehlo.return", res, n, NULL, 0, &ret);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, tb, tat, ret);
    }
    /* the other devices: zeros and tokens */
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        uint32_t ty = m->values[m->ops[x].first_result + i].type;
        const sp_type *t = &m->types[ty];
        if (t->kind == SP_TYPE_TENSOR) {
            st = constant(m, fb, &fat, zero_body(t->elem), ty, &res[i]);
        } else {
            uint32_t op;
            st = add_op(m, fb, &fat, "stablehlo.create_token", NULL, 0, ty, &op);
            res[i] = st == CM_OK ? m->ops[op].first_result : SP_NONE;
        }
    }
    if (st == CM_OK) {
        st = sp_module_new_op(m, SP_NONE, "stablehlo.return", res, n, NULL, 0, &ret);
    }
    if (st == CM_OK) {
        st = sp_block_insert_op(m, fb, fat, ret);
    }
    cm_free(res);
    /* then every device gets the value */
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        uint32_t orig = m->ops[x].first_result + i, ifr = m->ops[ifop].first_result + i;
        if (sp_value_type(m, orig)->kind != SP_TYPE_TENSOR) {
            redirect(c, orig, ifr);
            continue;
        }
        uint32_t ar;
        st = all_reduce(c, block, &at, ifr, &ar);
        for (uint32_t k = c->u.head[orig]; k != SP_NONE && st == CM_OK; k = c->u.pool[k].next) {
            sp_use use = c->u.pool[k];
            const sp_attr *a = sp_op_attr(m, use.op, "sharding");
            if (m->ops[use.op].kind == SP_OP_SDY_RESHARD && a != NULL &&
                a->kind == SP_ATTR_SHARDING && is_global_replicated(c, a->u.sharding)) {
                redirect(c, m->ops[use.op].first_result, ar);
                erase(m, use.op);
                continue;
            }
            m->ops[use.op].operands[use.idx] = ar;
        }
    }
    /* operand reshards nothing else reads go */
    for (uint32_t i = 0; i < n_folded && st == CM_OK; i++) {
        uint32_t r = m->ops[folded[i]].first_result;
        bool used = false;
        for (uint32_t k = c->u.head[r]; k != SP_NONE; k = c->u.pool[k].next) {
            used = used || c->u.pool[k].op != x;
        }
        if (!used) {
            erase(m, folded[i]);
        }
    }
    return st;
}

cm_status sp_pass_resolve_single_device_sharding(sp_module *m, int64_t replica_count,
                                                 int64_t partition_count, cm_error *err)
{
    if (replica_count > 1 && partition_count > 1) {
        return cm_error_set(err, CM_EINVAL, "",
                            "Shardy partitioner does not support replica_count > 1 && "
                            "partition_count > 1 yet.");
    }
    rctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.replica_id = replica_count > 1;
    c.bad_line = -1;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && c.global == NULL; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *mesh = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (op->kind == SP_OP_SDY_MESH && n != NULL && n->kind == SP_ATTR_STRING &&
            mesh != NULL && mesh->kind == SP_ATTR_MESH && mesh->u.mesh->n_axes > 0) {
            c.global = n->u.str.s;
            c.global_mesh = mesh->u.mesh;
        }
    }
    if (c.global == NULL) {
        return CM_OK;
    }
    cm_status st = sp_pass_walk(m, m->body, collect, &c);
    if (st == CM_OK && c.bad_line >= 0) {
        cm_free(c.ops);
        return cm_error_set(err, CM_EINVAL, "",
                            "line %lld: an op's results are on different single devices, or "
                            "on a single device and sharded",
                            (long long)c.bad_line);
    }
    if (st == CM_OK) {
        st = sp_uses_build(m, &c.u, m->n_values, NULL);
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        st = resolve(&c, c.ops[i]);
    }
    if (st != CM_OK) {
        cm_error_oom(err);
    }
    sp_uses_free(&c.u);
    cm_free(c.ops);
    return st;
}
