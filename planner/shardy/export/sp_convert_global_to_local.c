/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-convert-global-to-local (Shardy's
 * export/convert_global_to_local.cc; see sp_export.h), Shardy's own SPMD
 * partitioner. The input is a globally shaped module whose shardings are
 * consistent and whose data movement is explicit (sdy collectives inserted
 * by -sdy-reshard-to-collectives); the output is the program one device
 * runs. Every tensor whose value is sharded takes its local (per-device)
 * shape: function signatures, block arguments of functions and of named
 * and manual computations, and op results. Most ops only change type; the
 * sdy collectives become stablehlo collectives over replica groups
 * (use_global_device_ids, fresh channel handles numbered after the largest
 * one in the module), sdy.constant becomes stablehlo.constant (a sharded
 * dense constant is sliced by the device's offsets, looked up by
 * partition_id or replica_id in a per-device table), a sharded iota adds
 * its shard's offset, and sdy.manual_computation is inlined. The walk is
 * in program order, so channel handles follow the order of the collectives. */
#include "sp_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_attrs.h"
#include "sp_export_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define G2L_MAX_AXES 64 /* axis refs a replica-group computation handles */

typedef struct g2l {
    sp_module *m;
    const sp_g2l_opts *o;
    sp_diags *d;
    cm_error *err;
    int64_t next_channel;
    uint32_t n_orig;          /* values that existed before the pass */
    uint32_t *repl;           /* per original value: its replacement, or SP_NONE */
    const sp_sharding **arg_sh; /* per original value: a block argument's owner sharding */
    uint32_t *gty;            /* per original value: its global type */
    bool failed;              /* a diagnostic was added */
} g2l;

/* ---- shardings, meshes and local types -------------------------------------------- */

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    return s->mesh != NULL ? s->mesh : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

/* The size of axis ref r on mesh (a full axis: the mesh axis's size; 1 when unknown). */
static int64_t axis_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 1 : mesh->axes[i].size;
}

static int64_t axes_size(const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < n; i++) {
        p *= axis_size(mesh, &axes[i]);
    }
    return p;
}

static bool fully_replicated(const sp_sharding *s)
{
    if (s == NULL) {
        return true;
    }
    for (uint32_t i = 0; i < s->rank; i++) {
        if (s->dims[i].n_axes > 0) {
            return false;
        }
    }
    return true;
}

/* The sharding of value v as Shardy's converter reads it: a block argument
 * takes its owner's (function argument, named or manual computation in
 * sharding), an op result its op's. */
static const sp_sharding *value_sharding(const g2l *c, uint32_t v)
{
    if (c->m->values[v].def == SP_NONE) {
        return v < c->n_orig ? c->arg_sh[v] : NULL;
    }
    return sp_value_sharding_partitioned(c->m, v);
}

/* Interns the tensor type `tensor<dims x rest>` of the given rank, where
 * rest is what follows the dimensions of type t (element type and encoding). */
static cm_status retyped_rank(sp_module *m, const sp_type *t, const int64_t *dims, uint32_t rank,
                              uint32_t *out)
{
    const char *p = t->text + strlen("tensor<");
    for (uint32_t i = 0; i < t->rank; i++) {
        const char *x = strchr(p, 'x');
        if (x == NULL) {
            return CM_EINVAL;
        }
        p = x + 1;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "tensor<");
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] == SP_DIM_DYNAMIC) {
            cm_buf_putc(&b, '?');
        } else {
            cm_buf_put_i64(&b, dims[i]);
        }
        cm_buf_putc(&b, 'x');
    }
    cm_buf_puts(&b, p);
    cm_status st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, out, NULL);
    cm_buf_fini(&b);
    return st;
}

static cm_status retyped(sp_module *m, const sp_type *t, const int64_t *dims, uint32_t *out)
{
    return retyped_rank(m, t, dims, t->rank, out);
}

/* The local type of type id ty under sharding s (ty itself when s or its
 * mesh is missing, or ty is not a ranked tensor of s's rank). A dimension
 * its axes do not divide is an error (CM_EINVAL, *bad_dim set). */
static cm_status local_type(sp_module *m, uint32_t ty, const sp_sharding *s, uint32_t *out,
                            int64_t *bad_dim)
{
    *out = ty;
    sp_type t_v = *&m->types[ty]; /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    const sp_mesh *mesh = mesh_of(m, s);
    if (mesh == NULL || t->kind != SP_TYPE_TENSOR || t->rank != s->rank || t->rank > SP_MAX_RANK) {
        return CM_OK;
    }
    int64_t dims[SP_MAX_RANK];
    bool changed = false;
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t n = axes_size(mesh, s->dims[i].axes, s->dims[i].n_axes);
        dims[i] = t->dims[i];
        if (n <= 1 || dims[i] == SP_DIM_DYNAMIC) {
            continue;
        }
        if (dims[i] % n != 0) {
            *bad_dim = i;
            return CM_EINVAL;
        }
        dims[i] /= n;
        changed = true;
    }
    return changed ? retyped(m, t, dims, out) : CM_OK;
}

static void op_error(g2l *c, uint32_t op, const char *msg)
{
    sp_diags_add(c->d, c->m, op, SP_DIAG_ERROR, "'%s' op %s", c->m->ops[op].name, msg);
    c->failed = true;
}

/* A pattern's failure on op: its message, then the conversion's own
 * "failed to legalize" error, as Shardy's dialect conversion reports it. */
static void op_fail(g2l *c, uint32_t op, const char *msg)
{
    if (msg != NULL) {
        op_error(c, op, msg);
    }
    sp_diags_add(c->d, c->m, op, SP_DIAG_ERROR,
                 "failed to legalize operation '%s' that was explicitly marked illegal",
                 c->m->ops[op].name);
    c->failed = true;
}

/* The local type of value v (its current type when it has no sharding). */
static cm_status value_local_type(g2l *c, uint32_t v, uint32_t owner, uint32_t *out)
{
    int64_t bad = -1;
    cm_status st = local_type(c->m, c->m->values[v].type, value_sharding(c, v), out, &bad);
    if (st == CM_EINVAL) {
        op_error(c, owner, "failed to compute local type due to non-divisible sharding");
    }
    return st;
}

/* ---- attributes and ops ------------------------------------------------------------- */

static sp_attr *int_attr(sp_module *m, int64_t v, const char *type)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
    if (a != NULL) {
        a->u.i.v = v;
        a->u.i.type = type;
    }
    return a;
}

/* `dense<...> : tensor<d0 x ... x i64>` of the n values v, row major (a
 * splat body when they are all equal, as MLIR prints them). */
static sp_attr *dense_int(sp_module *m, sp_elem e, const int64_t *v, size_t n, const int64_t *dims,
                          uint32_t rank)
{
    uint32_t ty;
    if (sp_module_tensor_type(m, e, dims, rank, &ty, NULL) != CM_OK || n > UINT32_MAX) {
        return NULL;
    }
    bool splat = n > 0;
    for (size_t i = 1; i < n && splat; i++) {
        splat = v[i] == v[0];
    }
    cm_buf b;
    cm_buf_init(&b);
    if (splat) {
        cm_buf_put_i64(&b, v[0]);
    } else {
        /* the nesting: a '[' opens at each index that starts a row of a dimension */
        for (size_t i = 0; i < n; i++) {
            size_t stride = 1;
            for (uint32_t d = rank; d-- > 0;) {
                stride *= (size_t)dims[d];
                if (i % stride == 0) {
                    cm_buf_putc(&b, '[');
                }
            }
            cm_buf_put_i64(&b, v[i]);
            stride = 1;
            bool closed = false;
            for (uint32_t d = rank; d-- > 0;) {
                stride *= (size_t)dims[d];
                if ((i + 1) % stride == 0) {
                    cm_buf_putc(&b, ']');
                    closed = true;
                } else {
                    break;
                }
            }
            (void)closed;
            if (i + 1 < n) {
                cm_buf_puts(&b, ", ");
            }
        }
        if (n == 0) {
            cm_buf_puts(&b, "[]");
        }
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *ints = n > 0 ? cm_arena_alloc(&m->arena, sizeof *ints * n) : NULL;
    const char *body = b.oom ? NULL : sp_module_str(m, b.data, b.len);
    cm_buf_fini(&b);
    if (a == NULL || body == NULL || (n > 0 && ints == NULL)) {
        return NULL;
    }
    if (n > 0) {
        memcpy(ints, v, sizeof *ints * n);
    }
    a->u.dense.body = body;
    a->u.dense.type = ty;
    a->u.dense.ints = ints;
    a->u.dense.n_ints = (uint32_t)n;
    return a;
}

static sp_attr *dense_i64(sp_module *m, const int64_t *v, size_t n, const int64_t *dims,
                          uint32_t rank)
{
    return dense_int(m, SP_ELEM_I64, v, n, dims, rank);
}

/* `#stablehlo.channel_handle<handle = h, type = 1>` with the next handle. */
static sp_attr *channel_attr(g2l *c)
{
    sp_module *m = c->m;
    sp_attr *a = sp_attr_new(m, SP_ATTR_PARAMS);
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * 2);
    sp_attr *h = int_attr(m, c->next_channel++, NULL), *t = int_attr(m, 1, NULL);
    if (a == NULL || items == NULL || h == NULL || t == NULL) {
        return NULL;
    }
    items[0].name = "handle";
    items[0].value = h;
    items[1].name = "type";
    items[1].value = t;
    a->u.params.name = "stablehlo.channel_handle";
    a->u.params.items = items;
    a->u.params.n = 2;
    return a;
}

/* A builder of new ops before the op being replaced. */
typedef struct bld {
    g2l *c;
    uint32_t block, at; /* insertion point, advanced per op */
    cm_status st;
} bld;

/* A new op with one result of type ty (none when ty is SP_NONE); its result
 * (or SP_NONE), and SP_NONE after a failure. */
static uint32_t emit(bld *b, const char *name, const uint32_t *operands, uint32_t n, uint32_t ty,
                     uint32_t *op_out)
{
    if (b->st != CM_OK) {
        return SP_NONE;
    }
    sp_module *m = b->c->m;
    uint32_t op;
    b->st = sp_module_new_op(m, SP_NONE, name, operands, n, &ty, ty == SP_NONE ? 0 : 1, &op);
    if (b->st == CM_OK) {
        b->st = sp_block_insert_op(m, b->block, b->at++, op);
    }
    if (b->st != CM_OK) {
        return SP_NONE;
    }
    if (op_out != NULL) {
        *op_out = op;
    }
    return ty == SP_NONE ? SP_NONE : m->ops[op].first_result;
}

static void set_attr(bld *b, uint32_t op, const char *name, sp_attr *a)
{
    if (b->st == CM_OK) {
        b->st = a == NULL ? CM_ENOMEM : sp_op_set_attr(b->c->m, op, name, a);
    }
}

static uint32_t scalar_type(bld *b, sp_elem e)
{
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(b->c->m, e, NULL, 0, &ty, NULL);
    }
    return ty;
}

static uint32_t tensor_type(bld *b, sp_elem e, const int64_t *dims, uint32_t rank)
{
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(b->c->m, e, dims, rank, &ty, NULL);
    }
    return ty;
}

/* `stablehlo.constant` of an i64 tensor. */
static uint32_t const_i64(bld *b, const int64_t *v, size_t n, const int64_t *dims, uint32_t rank)
{
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, tensor_type(b, SP_ELEM_I64, dims, rank), &op);
    if (r != SP_NONE) {
        set_attr(b, op, "value", dense_i64(b->c->m, v, n, dims, rank));
    }
    return r;
}

/* `stablehlo.constant` of an integer tensor of element type e. */
static uint32_t const_int(bld *b, sp_elem e, const int64_t *v, size_t n, const int64_t *dims,
                          uint32_t rank)
{
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, tensor_type(b, e, dims, rank), &op);
    if (r != SP_NONE) {
        set_attr(b, op, "value", dense_int(b->c->m, e, v, n, dims, rank));
    }
    return r;
}

/* The device id as a scalar i64: partition_id (replica_id when
 * replica_count > 1) converted from ui32. */
static uint32_t device_id(bld *b)
{
    const char *name = b->c->o->replica_count > 1 ? "stablehlo.replica_id" : "stablehlo.partition_id";
    uint32_t id = emit(b, name, NULL, 0, scalar_type(b, SP_ELEM_UI32), NULL);
    return emit(b, "stablehlo.convert", &id, 1, scalar_type(b, SP_ELEM_I64), NULL);
}

/* The index of device dev's shard along axes (Shardy's getShardIndex). */
static int64_t shard_index(const sp_mesh *mesh, int64_t dev, const sp_axis_ref *axes, uint32_t n)
{
    int64_t logical = dev;
    if (mesh->n_device_ids > 0) {
        for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
            if (mesh->device_ids[i] == dev) {
                logical = i;
            }
        }
    }
    int64_t idx = 0;
    for (uint32_t a = 0; a < n; a++) {
        int64_t size = axis_size(mesh, &axes[a]);
        int32_t ai = sp_mesh_axis_index(mesh, axes[a].name);
        if (ai < 0) {
            return 0;
        }
        int64_t suffix = 1;
        for (uint32_t k = (uint32_t)ai + 1; k < mesh->n_axes; k++) {
            suffix *= mesh->axes[k].size;
        }
        int64_t pre = axes[a].pre_size > 0 ? axes[a].pre_size : 1;
        int64_t stride = mesh->axes[ai].size / (pre * size);
        int64_t coord = (logical / (suffix * (stride > 0 ? stride : 1))) % size;
        idx = idx * size + coord;
    }
    return idx;
}

/* The scalar i64 offset of this device's shard along axes, for shards of
 * shard_size elements: a per-device table indexed by the device id. */
static uint32_t dim_offset(bld *b, const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                           int64_t shard_size)
{
    int64_t devices = sp_mesh_size(mesh);
    if (b->st != CM_OK) {
        return SP_NONE;
    }
    uint32_t id = device_id(b);
    int64_t *table = cm_alloc(sizeof *table * (size_t)(devices > 0 ? devices : 1));
    if (table == NULL) {
        b->st = CM_ENOMEM;
        return SP_NONE;
    }
    for (int64_t dev = 0; dev < devices; dev++) {
        int64_t did = mesh->n_device_ids > 0 ? mesh->device_ids[dev] : dev;
        (void)did;
        table[dev] = shard_index(mesh, dev, axes, n) * shard_size;
    }
    uint32_t t = const_i64(b, table, (size_t)devices, &devices, 1);
    cm_free(table);
    int64_t one = 1;
    uint32_t ops[2] = {t, id}, op = SP_NONE;
    uint32_t s = emit(b, "stablehlo.dynamic_slice", ops, 2, tensor_type(b, SP_ELEM_I64, &one, 1), &op);
    if (s != SP_NONE) {
        set_attr(b, op, "slice_sizes", sp_exp_i64_array(b->c->m, &one, 1));
    }
    return emit(b, "stablehlo.reshape", &s, 1, scalar_type(b, SP_ELEM_I64), NULL);
}

/* The local slice of global value g (type local_ty) for the slicing axes of
 * each dimension (Shardy's emitDynamicSliceForAxes). */
static uint32_t slice_for_axes(bld *b, uint32_t g, const sp_mesh *mesh, const sp_axis_list *axes,
                               uint32_t local_ty)
{
    sp_module *m = b->c->m;
    sp_type lt_v = *&m->types[local_ty]; /* a copy: interning may move m->types */
    const sp_type *lt = &lt_v;
    uint32_t rank = lt->rank;
    uint32_t ops[SP_MAX_RANK + 1];
    ops[0] = g;
    for (uint32_t i = 0; i < rank && b->st == CM_OK; i++) {
        if (axes[i].n == 0) {
            int64_t zero = 0;
            ops[i + 1] = const_i64(b, &zero, 1, NULL, 0);
        } else {
            ops[i + 1] = dim_offset(b, mesh, axes[i].axes, axes[i].n, lt->dims[i]);
        }
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.dynamic_slice", ops, rank + 1, local_ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "slice_sizes", sp_exp_i64_array(m, lt->dims, rank));
    }
    return r;
}

/* ---- replica groups ----------------------------------------------------------------- */

static bool has_sub_axis(const sp_axis_ref *axes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (axes[i].pre_size > 0) {
            return true;
        }
    }
    return false;
}

/* A normalised axis ref: pre-size and size (a full axis: 1 and its size). */
typedef struct nref {
    const char *name;
    int64_t pre, size;
} nref;

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Shardy's getOrderedAxisRefs: the mesh axes in order, each split into
 * the sub-axes the pre-sizes of axes cut it into; their count, or
 * UINT32_MAX when there would be more than G2L_MAX_AXES. */
static uint32_t ordered_axes(const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                             nref *ordered)
{
    uint32_t n_ord = 0;
    if (n > G2L_MAX_AXES) {
        return UINT32_MAX;
    }
    for (uint32_t a = 0; a < mesh->n_axes; a++) {
        int64_t pres[2 * G2L_MAX_AXES + 2];
        uint32_t np = 0;
        pres[np++] = 1;
        pres[np++] = mesh->axes[a].size;
        for (uint32_t i = 0; i < n; i++) {
            if (axes[i].pre_size > 0 && strcmp(axes[i].name, mesh->axes[a].name) == 0) {
                pres[np++] = axes[i].pre_size;
                pres[np++] = axes[i].pre_size * axes[i].size;
            }
        }
        qsort(pres, np, sizeof pres[0], cmp_i64);
        uint32_t u = 0;
        for (uint32_t i = 0; i < np; i++) {
            if (u == 0 || pres[u - 1] != pres[i]) {
                pres[u++] = pres[i];
            }
        }
        for (uint32_t i = 0; i + 1 < u; i++) {
            if (n_ord == G2L_MAX_AXES) {
                return UINT32_MAX;
            }
            ordered[n_ord++] = (nref){mesh->axes[a].name, pres[i], pres[i + 1] / pres[i]};
        }
    }
    return n_ord;
}

/* Shardy's V1 replica groups of axes on mesh: the device ids arranged on
 * the mesh axes (split where the axes use sub-axes), the other axes first
 * and the given axes last in their order, as a [groups, group size] i64
 * tensor. *group_size gets the group size. NULL when out of memory or the
 * axes are too many. */
static sp_attr *replica_groups_v1(sp_module *m, const sp_mesh *mesh, const sp_axis_ref *axes,
                                  uint32_t n, int64_t *group_size)
{
    nref ordered[G2L_MAX_AXES];
    uint32_t n_ord = ordered_axes(mesh, axes, n, ordered);
    if (n_ord == UINT32_MAX) {
        return NULL;
    }
    int64_t gsize = 1, total = sp_mesh_size(mesh);
    for (uint32_t i = 0; i < n; i++) {
        gsize *= axis_size(mesh, &axes[i]);
    }
    if (gsize <= 0 || total % gsize != 0) {
        return NULL;
    }
    /* perm[k]: the ordered axis at position k of the transposed array */
    uint32_t perm[G2L_MAX_AXES];
    uint32_t non_red = 0, n_non = n_ord - (n <= n_ord ? n : n_ord);
    for (uint32_t k = 0; k < n_ord; k++) {
        int64_t red = -1;
        for (uint32_t i = 0; i < n; i++) {
            int64_t pre = axes[i].pre_size > 0 ? axes[i].pre_size : 1;
            if (strcmp(axes[i].name, ordered[k].name) == 0 && pre == ordered[k].pre &&
                axis_size(mesh, &axes[i]) == ordered[k].size) {
                red = i;
            }
        }
        if (red < 0) {
            perm[non_red++] = k;
        } else {
            perm[n_non + (uint32_t)red] = k;
        }
    }
    int64_t *out = cm_alloc(sizeof *out * (size_t)total);
    if (out == NULL) {
        return NULL;
    }
    /* strides of the ordered (row-major) array, and the transposed walk */
    int64_t stride[G2L_MAX_AXES], idx[G2L_MAX_AXES];
    int64_t s = 1;
    for (uint32_t k = n_ord; k-- > 0;) {
        stride[k] = s;
        s *= ordered[k].size;
    }
    for (uint32_t k = 0; k < n_ord; k++) {
        idx[k] = 0;
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t src = 0;
        for (uint32_t k = 0; k < n_ord; k++) {
            src += idx[k] * stride[perm[k]];
        }
        out[i] = mesh->n_device_ids > 0 && (uint64_t)src < mesh->n_device_ids ? mesh->device_ids[src]
                                                                              : src;
        for (uint32_t k = n_ord; k-- > 0;) {
            if (++idx[k] < ordered[perm[k]].size) {
                break;
            }
            idx[k] = 0;
        }
    }
    int64_t dims[2] = {total / gsize, gsize};
    sp_attr *a = dense_i64(m, out, (size_t)total, dims, 2);
    cm_free(out);
    *group_size = gsize;
    return a;
}

/* `#stablehlo.replica_group_mesh_axes<mesh = @name, axes = [...]>` (kept verbatim). */
static sp_attr *replica_groups_v3(sp_module *m, const char *mesh_name, const sp_axis_ref *axes,
                                  uint32_t n)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#stablehlo.replica_group_mesh_axes<mesh = @");
    cm_buf_puts(&b, mesh_name);
    cm_buf_puts(&b, ", axes = [");
    for (uint32_t i = 0; i < n; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, "#stablehlo.axis_ref<name = \"");
        cm_buf_puts(&b, axes[i].name);
        cm_buf_puts(&b, "\">");
    }
    cm_buf_puts(&b, "]>");
    sp_attr *a = sp_attr_new(m, SP_ATTR_OPAQUE);
    const char *t = b.oom ? NULL : sp_module_str(m, b.data, b.len);
    cm_buf_fini(&b);
    if (a == NULL || t == NULL) {
        return NULL;
    }
    a->u.opaque.text = t;
    return a;
}

/* The replica groups of axes on s's mesh (V3 when enabled, the mesh is
 * named and no axis is a sub-axis), and the group size. */
static sp_attr *replica_groups(g2l *c, const sp_sharding *s, const sp_mesh *mesh,
                               const sp_axis_ref *axes, uint32_t n, int64_t *group_size)
{
    if (c->o->enable_rgv3 && s->mesh_name != NULL && !has_sub_axis(axes, n)) {
        *group_size = axes_size(mesh, axes, n);
        return replica_groups_v3(c->m, s->mesh_name, axes, n);
    }
    return replica_groups_v1(c->m, mesh, axes, n, group_size);
}

static void replace_op(g2l *c, uint32_t op, const uint32_t *vals, uint32_t n);
static const sp_sharding *out_sharding(const sp_module *m, uint32_t op);
static cm_status reduce_body(g2l *c, uint32_t op, sp_elem elem, const char *kind);
static const char *reduction_kind(const sp_module *m, uint32_t op);

/* A reshape of v to dims (rank entries) of v's element type. */
static uint32_t reshape_to(bld *b, uint32_t v, const int64_t *dims, uint32_t rank)
{
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = retyped_rank(b->c->m, sp_value_type(b->c->m, v), dims, rank, &ty);
    }
    return emit(b, "stablehlo.reshape", &v, 1, ty, NULL);
}

/* A transpose of v by perm (rank entries). */
static uint32_t transpose_by(bld *b, uint32_t v, const int64_t *perm, uint32_t rank)
{
    sp_module *m = b->c->m;
    sp_type t_v = *sp_value_type(m, v); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    int64_t dims[SP_MAX_RANK];
    uint32_t ty = SP_NONE, op = SP_NONE;
    for (uint32_t i = 0; i < rank && i < t->rank; i++) {
        dims[i] = t->dims[perm[i]];
    }
    if (b->st == CM_OK) {
        b->st = retyped_rank(m, t, dims, rank, &ty);
    }
    uint32_t r = emit(b, "stablehlo.transpose", &v, 1, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "permutation", sp_exp_i64_array(m, perm, rank));
    }
    return r;
}

/* `stablehlo.all_to_all` of v (result type ty) splitting split, concatenating concat. */
static uint32_t all_to_all_op(bld *b, uint32_t v, uint32_t ty, int64_t split, int64_t concat,
                              int64_t count, sp_attr *rg)
{
    sp_module *m = b->c->m;
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.all_to_all", &v, 1, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "channel_handle", channel_attr(b->c));
        set_attr(b, op, "concat_dimension", int_attr(m, concat, "i64"));
        set_attr(b, op, "replica_groups", rg);
        set_attr(b, op, "split_count", int_attr(m, count, "i64"));
        set_attr(b, op, "split_dimension", int_attr(m, split, "i64"));
    }
    return r;
}

/* sdy.all_to_all -> stablehlo.all_to_all: one parameter directly; several
 * by splitting each target dimension, moving the factors to the front,
 * one all_to_all on the merged leading dimension, and moving them back to
 * their source dimensions. */
static cm_status convert_all_to_all(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    const sp_sharding *s = out_sharding(m, op);
    const sp_mesh *mesh = mesh_of(m, s);
    const sp_attr *pa = sp_op_attr(m, op, "params");
    uint32_t in = m->ops[op].operands[0];
    sp_type t_v = *sp_value_type(m, in); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    if (mesh == NULL || pa == NULL || pa->kind != SP_ATTR_ALL_TO_ALL || pa->u.a2a.n == 0) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    uint32_t rank = t->rank, np = pa->u.a2a.n;
    for (uint32_t i = 0; i < np; i++) {
        const sp_all_to_all_param *q = &pa->u.a2a.items[i];
        if (q->src_dim < 0 || q->tgt_dim < 0 || (uint64_t)q->src_dim >= rank ||
            (uint64_t)q->tgt_dim >= rank || q->axes.n == 0) {
            op_fail(c, op, "failed to resolve axes");
            return CM_EINVAL;
        }
    }
    bld b = {c, block, at, CM_OK};
    uint32_t r = SP_NONE;
    if (np == 1) {
        const sp_all_to_all_param *q = &pa->u.a2a.items[0];
        int64_t gs = 1;
        sp_attr *rg = replica_groups(c, s, mesh, q->axes.axes, q->axes.n, &gs);
        int64_t dims[SP_MAX_RANK];
        for (uint32_t i = 0; i < rank; i++) {
            dims[i] = t->dims[i];
        }
        uint32_t sd = (uint32_t)q->src_dim, td = (uint32_t)q->tgt_dim;
        if (dims[sd] == SP_DIM_DYNAMIC || dims[td] == SP_DIM_DYNAMIC) {
            op_fail(c, op, "dynamic shape not supported");
            return CM_EINVAL;
        }
        if (gs <= 0 || dims[td] % gs != 0) {
            op_fail(c, op, "dimension not divisible by num devices per group");
            return CM_EINVAL;
        }
        dims[sd] *= gs;
        dims[td] /= gs;
        uint32_t ty = SP_NONE;
        b.st = retyped(m, t, dims, &ty);
        r = all_to_all_op(&b, in, ty, td, sd, gs, rg);
    } else {
        if (np > SP_MAX_RANK || rank + np > SP_MAX_RANK) {
            op_fail(c, op, "has too many parameters");
            return CM_EINVAL;
        }
        /* parameters sorted by target dimension */
        uint32_t order[SP_MAX_RANK];
        for (uint32_t i = 0; i < np; i++) {
            order[i] = i;
        }
        for (uint32_t i = 1; i < np; i++) {
            for (uint32_t j = i; j > 0 && pa->u.a2a.items[order[j]].tgt_dim <
                                              pa->u.a2a.items[order[j - 1]].tgt_dim; j--) {
                uint32_t x = order[j];
                order[j] = order[j - 1];
                order[j - 1] = x;
            }
        }
        int64_t per[SP_MAX_RANK];
        sp_axis_ref all[G2L_MAX_AXES] = {{NULL, 0, 0}};
        uint32_t n_all = 0;
        for (uint32_t i = 0; i < np; i++) {
            const sp_axis_list *l = &pa->u.a2a.items[order[i]].axes;
            per[i] = axes_size(mesh, l->axes, l->n);
            for (uint32_t k = 0; k < l->n; k++) {
                if (n_all == G2L_MAX_AXES) {
                    op_fail(c, op, "has too many axes");
                    return CM_EINVAL;
                }
                all[n_all++] = l->axes[k];
            }
        }
        int64_t shape0[2 * SP_MAX_RANK], perm0[2 * SP_MAX_RANK];
        uint32_t n0 = 0, nperm = 0;
        for (uint32_t d = 0; d < rank; d++) {
            int64_t found = -1;
            for (uint32_t i = 0; i < np; i++) {
                if (pa->u.a2a.items[order[i]].tgt_dim == (int64_t)d) {
                    found = i;
                    break;
                }
            }
            if (found < 0) {
                shape0[n0++] = t->dims[d];
                continue;
            }
            int64_t f = per[found];
            perm0[nperm++] = n0;
            shape0[n0++] = f;
            if (t->dims[d] == SP_DIM_DYNAMIC || f <= 0 || t->dims[d] % f != 0) {
                op_fail(c, op, "dynamic shape or dimension not divisible by num devices per param");
                return CM_EINVAL;
            }
            shape0[n0++] = t->dims[d] / f;
        }
        for (uint32_t i = 0; i < n0; i++) {
            bool in_perm = false;
            for (uint32_t k = 0; k < nperm; k++) {
                in_perm = in_perm || perm0[k] == (int64_t)i;
            }
            if (!in_perm) {
                perm0[nperm++] = i;
            }
        }
        uint32_t v = reshape_to(&b, in, shape0, n0);
        uint32_t tr0 = transpose_by(&b, v, perm0, n0);
        int64_t gs = 1;
        sp_attr *rg = replica_groups(c, s, mesh, all, n_all, &gs);
        if (b.st != CM_OK) {
            return b.st;
        }
        sp_type t0_v = *sp_value_type(m, tr0); /* a copy: interning may move m->types */
        const sp_type *t0 = &t0_v;
        int64_t shape1[2 * SP_MAX_RANK];
        uint32_t n1 = 0;
        shape1[n1++] = gs;
        for (uint32_t i = np; i < t0->rank; i++) {
            shape1[n1++] = t0->dims[i];
        }
        uint32_t r1 = reshape_to(&b, tr0, shape1, n1);
        uint32_t a2a = all_to_all_op(&b, r1, r1 != SP_NONE ? m->values[r1].type : SP_NONE, 0, 0,
                                     gs, rg);
        uint32_t r2 = SP_NONE;
        if (a2a != SP_NONE) {
            r2 = emit(&b, "stablehlo.reshape", &a2a, 1, m->values[tr0].type, NULL);
        }
        int64_t perm1[2 * SP_MAX_RANK];
        uint32_t n_p1 = 0;
        for (uint32_t d = 0; d < rank; d++) {
            perm1[n_p1++] = d + np;
        }
        for (uint32_t i = 0; i < np; i++) {
            int64_t want = pa->u.a2a.items[order[i]].src_dim + np;
            uint32_t pos = 0;
            while (pos < n_p1 && perm1[pos] != want) {
                pos++;
            }
            memmove(&perm1[pos + 1], &perm1[pos], sizeof perm1[0] * (n_p1 - pos));
            perm1[pos] = i;
            n_p1++;
        }
        uint32_t tr1 = transpose_by(&b, r2, perm1, n_p1);
        if (b.st != CM_OK) {
            return b.st;
        }
        sp_type t1_v = *sp_value_type(m, tr1); /* a copy: interning may move m->types */
        const sp_type *t1 = &t1_v;
        int64_t fin[SP_MAX_RANK];
        uint32_t nf = 0;
        for (uint32_t i = 0; i < n_p1; i++) {
            if (perm1[i] < (int64_t)np && i + 1 < n_p1) {
                fin[nf++] = t1->dims[i] * t1->dims[i + 1];
                i++;
            } else {
                fin[nf++] = t1->dims[i];
            }
        }
        r = reshape_to(&b, tr1, fin, nf);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* A `stablehlo.<name>` reduction collective (all_reduce, reduce_scatter)
 * of v to type ty over axes, with the body of sdy op op's reduction. */
static uint32_t reduce_coll(bld *b, const char *name, uint32_t v, uint32_t ty, sp_attr *rg,
                            int64_t scatter_dim, uint32_t op)
{
    g2l *c = b->c;
    sp_module *m = c->m;
    uint32_t nop = SP_NONE;
    uint32_t r = emit(b, name, &v, 1, ty, &nop);
    if (r == SP_NONE) {
        return r;
    }
    set_attr(b, nop, "channel_handle", channel_attr(c));
    set_attr(b, nop, "replica_groups", rg);
    if (scatter_dim >= 0) {
        set_attr(b, nop, "scatter_dimension", int_attr(m, scatter_dim, "i64"));
    }
    set_attr(b, nop, "use_global_device_ids", sp_attr_new(m, SP_ATTR_UNIT));
    if (b->st == CM_OK) {
        b->st = reduce_body(c, nop, sp_value_type(m, v)->elem, reduction_kind(m, op));
    }
    return r;
}

/* sdy.reduce_scatter -> stablehlo.reduce_scatter for one dimension; for
 * several, one all_reduce over all axes and a dynamic_slice, or (with
 * combine-multi-dimension-reduce-scatter) one reduce_scatter on a leading
 * dimension the scattered factors are moved into. */
static cm_status convert_reduce_scatter(g2l *c, uint32_t op, uint32_t orig_in, uint32_t block,
                                        uint32_t at)
{
    sp_module *m = c->m;
    const sp_sharding *s = value_sharding(c, orig_in);
    if (s == NULL) {
        s = out_sharding(m, op);
    }
    const sp_mesh *mesh = mesh_of(m, s);
    const sp_attr *ax = sp_op_attr(m, op, "reduce_scatter_axes");
    uint32_t in = m->ops[op].operands[0], lty;
    sp_type t_v = *sp_value_type(m, in); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    if (mesh == NULL || ax == NULL || ax->kind != SP_ATTR_AXIS_LISTS ||
        ax->u.axis_lists.n != t->rank || t->rank > SP_MAX_RANK) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, m->ops[op].first_result, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    uint32_t rank = t->rank, n_dims = 0, last = 0, n_all = 0;
    sp_axis_ref all[G2L_MAX_AXES] = {{NULL, 0, 0}};
    for (uint32_t d = 0; d < rank; d++) {
        const sp_axis_list *l = &ax->u.axis_lists.items[d];
        if (l->n == 0) {
            continue;
        }
        last = d;
        n_dims++;
        for (uint32_t i = 0; i < l->n; i++) {
            if (n_all == G2L_MAX_AXES) {
                op_fail(c, op, "has too many axes");
                return CM_EINVAL;
            }
            all[n_all++] = l->axes[i];
        }
    }
    if (n_dims == 0) {
        op_fail(c, op, "has no reduce-scatter axes");
        return CM_EINVAL;
    }
    bld b = {c, block, at, CM_OK};
    int64_t gs = 1;
    uint32_t r = SP_NONE;
    if (n_dims == 1) {
        const sp_axis_list *l = &ax->u.axis_lists.items[last];
        sp_attr *rg = replica_groups(c, s, mesh, l->axes, l->n, &gs);
        r = reduce_coll(&b, "stablehlo.reduce_scatter", in, lty, rg, last, op);
    } else if (c->o->combine_multi_dimension_reduce_scatter) {
        int64_t split[2 * SP_MAX_RANK], perm[2 * SP_MAX_RANK];
        uint32_t ns = 0, nf = 0;
        int64_t total = 1;
        for (uint32_t d = 0; d < rank; d++) {
            const sp_axis_list *l = &ax->u.axis_lists.items[d];
            if (l->n == 0) {
                split[ns++] = t->dims[d];
                continue;
            }
            int64_t f = axes_size(mesh, l->axes, l->n);
            if (t->dims[d] == SP_DIM_DYNAMIC || f <= 0 || t->dims[d] % f != 0) {
                op_fail(c, op, "dimension not divisible by scattering factor");
                return CM_EINVAL;
            }
            perm[nf++] = ns;
            split[ns++] = f;
            split[ns++] = t->dims[d] / f;
            total *= f;
        }
        uint32_t np = nf;
        for (uint32_t i = 0; i < ns; i++) {
            bool is_f = false;
            for (uint32_t k = 0; k < nf; k++) {
                is_f = is_f || perm[k] == (int64_t)i;
            }
            if (!is_f) {
                perm[np++] = i;
            }
        }
        uint32_t v = reshape_to(&b, in, split, ns);
        v = transpose_by(&b, v, perm, np);
        int64_t comb[SP_MAX_RANK + 1];
        sp_type ltt_v = *&m->types[lty]; /* a copy: interning may move m->types */
        const sp_type *ltt = &ltt_v;
        comb[0] = total;
        for (uint32_t d = 0; d < rank; d++) {
            comb[d + 1] = ltt->dims[d];
        }
        v = reshape_to(&b, v, comb, rank + 1);
        sp_attr *rg = replica_groups(c, s, mesh, all, n_all, &gs);
        comb[0] = 1;
        uint32_t rty = SP_NONE;
        if (b.st == CM_OK) {
            b.st = retyped_rank(m, t, comb, rank + 1, &rty);
        }
        v = reduce_coll(&b, "stablehlo.reduce_scatter", v, rty, rg, 0, op);
        r = emit(&b, "stablehlo.reshape", &v, 1, lty, NULL);
    } else {
        sp_attr *rg = replica_groups(c, s, mesh, all, n_all, &gs);
        uint32_t v = reduce_coll(&b, "stablehlo.all_reduce", in, m->values[in].type, rg, -1, op);
        r = slice_for_axes(&b, v, mesh, ax->u.axis_lists.items, lty);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* Does axis ref a (on mesh) contain the atomic sub-axis x of the same axis? */
static bool axis_contains(const sp_mesh *mesh, const sp_axis_ref *a, const nref *x)
{
    if (strcmp(a->name, x->name) != 0) {
        return false;
    }
    int64_t pre = a->pre_size > 0 ? a->pre_size : 1;
    int64_t end = pre * axis_size(mesh, a);
    return x->pre >= pre && x->pre * x->size <= end;
}

/* The atomic axes of s in its dimension order, then the other atomic axes. */
static uint32_t sharding_atoms(const sp_mesh *mesh, const sp_sharding *s, const nref *atoms,
                               uint32_t n_atoms, sp_axis_ref *out)
{
    bool used[G2L_MAX_AXES] = {false};
    uint32_t n = 0;
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
            for (uint32_t k = 0; k < n_atoms; k++) {
                if (!used[k] && axis_contains(mesh, &s->dims[d].axes[i], &atoms[k])) {
                    used[k] = true;
                    out[n++] = (sp_axis_ref){atoms[k].name, atoms[k].pre, atoms[k].size};
                }
            }
        }
    }
    for (uint32_t k = 0; k < n_atoms; k++) {
        if (!used[k]) {
            out[n++] = (sp_axis_ref){atoms[k].name, atoms[k].pre, atoms[k].size};
        }
    }
    return n;
}

/* sdy.collective_permute -> stablehlo.collective_permute: each device
 * sends its shard to the device holding the same shard under the out
 * sharding. */
static cm_status convert_collective_permute(g2l *c, uint32_t op, uint32_t orig_in, uint32_t block,
                                            uint32_t at)
{
    sp_module *m = c->m;
    const sp_sharding *os = out_sharding(m, op), *is = value_sharding(c, orig_in);
    const sp_mesh *om = mesh_of(m, os), *im = mesh_of(m, is);
    if (om == NULL || im == NULL) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    if (sp_mesh_size(om) != sp_mesh_size(im)) {
        op_fail(c, op, "collective-permute between meshes of different sizes is not supported.");
        return CM_EINVAL;
    }
    sp_axis_ref refs[G2L_MAX_AXES];
    uint32_t nr = 0;
    const sp_sharding *both[2] = {is, os};
    for (int w = 0; w < 2; w++) {
        for (uint32_t d = 0; d < both[w]->rank; d++) {
            for (uint32_t i = 0; i < both[w]->dims[d].n_axes; i++) {
                if (nr == G2L_MAX_AXES) {
                    op_fail(c, op, "has too many axes");
                    return CM_EINVAL;
                }
                refs[nr++] = both[w]->dims[d].axes[i];
            }
        }
    }
    nref atoms[G2L_MAX_AXES];
    uint32_t na = ordered_axes(om, refs, nr, atoms);
    if (na == UINT32_MAX) {
        op_fail(c, op, "has too many axes");
        return CM_EINVAL;
    }
    sp_axis_ref out_ax[G2L_MAX_AXES], in_ax[G2L_MAX_AXES];
    uint32_t no = sharding_atoms(om, os, atoms, na, out_ax);
    uint32_t ni = sharding_atoms(im, is, atoms, na, in_ax);
    int64_t n = sp_mesh_size(om);
    int64_t *by_logical = cm_calloc((size_t)n + 1, sizeof *by_logical);
    int64_t *pairs = cm_alloc(sizeof *pairs * (size_t)(2 * n + 1));
    if (by_logical == NULL || pairs == NULL) {
        cm_free(by_logical);
        cm_free(pairs);
        return CM_ENOMEM;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t l = shard_index(om, j, out_ax, no);
        if (l >= 0 && l < n) {
            by_logical[l] = j;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t l = shard_index(im, i, in_ax, ni);
        pairs[2 * i] = i;
        pairs[2 * i + 1] = l >= 0 && l < n ? by_logical[l] : 0;
    }
    int64_t dims[2] = {n, 2};
    sp_attr *pa = dense_i64(m, pairs, (size_t)(2 * n), dims, 2);
    cm_free(by_logical);
    cm_free(pairs);
    bld b = {c, block, at, CM_OK};
    uint32_t nop = SP_NONE, in = m->ops[op].operands[0];
    uint32_t r = emit(&b, "stablehlo.collective_permute", &in, 1, m->values[in].type, &nop);
    if (r != SP_NONE) {
        set_attr(&b, nop, "channel_handle", channel_attr(c));
        set_attr(&b, nop, "source_target_pairs", pa);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* ---- the walk ---------------------------------------------------------------------- */

static cm_status convert_block(g2l *c, uint32_t block);

/* Sets value v's type to its local type (v is an original value). */
static cm_status localize_value(g2l *c, uint32_t v, uint32_t owner)
{
    uint32_t ty;
    cm_status st = value_local_type(c, v, owner, &ty);
    if (st == CM_OK) {
        c->m->values[v].type = ty;
    }
    return st;
}

/* Replaces the results of op by vals (n of them) and removes op. */
static void replace_op(g2l *c, uint32_t op, const uint32_t *vals, uint32_t n)
{
    sp_module *m = c->m;
    for (uint32_t i = 0; i < n && i < m->ops[op].n_results; i++) {
        uint32_t r = m->ops[op].first_result + i;
        if (r < c->n_orig) {
            c->repl[r] = vals[i];
        }
    }
    uint32_t idx = sp_op_index_in_block(m, op);
    if (idx != SP_NONE) {
        sp_block_remove_op(m, m->ops[op].parent_block, idx);
    }
}

/* The function type `(args) -> (results)` of func f from its entry block
 * and result types. */
static cm_status func_signature(g2l *c, uint32_t f)
{
    sp_module *m = c->m;
    const sp_type *ftp = sp_func_type(m, f);
    if (ftp == NULL || m->ops[f].n_regions == 0 || m->ops[f].regions[0].n_blocks == 0) {
        return CM_OK; /* a declaration */
    }
    sp_type ft_v = *ftp; /* a copy: interning may move m->types */
    const sp_type *ft = &ft_v;
    uint32_t blk = m->ops[f].regions[0].blocks[0];
    uint32_t n_res = ft->n_results;
    uint32_t *res = cm_alloc(sizeof *res * (n_res + 1u));
    if (res == NULL) {
        return CM_ENOMEM;
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < n_res && st == CM_OK; i++) {
        int64_t bad = -1;
        st = local_type(m, ft->results[i], sp_func_result_sharding(m, f, i), &res[i], &bad);
        if (st == CM_EINVAL) {
            op_error(c, f, "failed to compute local type due to non-divisible sharding");
        }
    }
    for (uint32_t i = 0; i < m->blocks[blk].n_args && st == CM_OK; i++) {
        st = localize_value(c, m->blocks[blk].first_arg + i, f);
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '(');
    for (uint32_t i = 0; i < m->blocks[blk].n_args; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, sp_value_type(m, m->blocks[blk].first_arg + i)->text);
    }
    cm_buf_puts(&b, ") -> (");
    for (uint32_t i = 0; i < n_res; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, m->types[res[i]].text);
    }
    cm_buf_putc(&b, ')');
    uint32_t fty = SP_NONE;
    if (st == CM_OK) {
        st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, &fty, NULL);
    }
    cm_buf_fini(&b);
    cm_free(res);
    if (st == CM_OK) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_TYPE);
        if (a == NULL) {
            return CM_ENOMEM;
        }
        a->u.type = fty;
        st = sp_op_set_attr(m, f, "function_type", a);
    }
    return st;
}

/* The reduction body `^bb0(a, b): r = kind a, b; return r` in region 0 of op. */
static cm_status reduce_body(g2l *c, uint32_t op, sp_elem elem, const char *kind)
{
    sp_module *m = c->m;
    uint32_t blk, a0, a1, sty, add, ret, r;
    cm_status st = sp_module_tensor_type(m, elem, NULL, 0, &sty, NULL);
    if (st == CM_OK) {
        st = sp_op_add_regions(m, op, 1);
    }
    if (st == CM_OK) {
        st = sp_module_new_block(m, op, &blk);
    }
    if (st == CM_OK) {
        st = sp_region_add_block(m, op, 0, blk);
    }
    if (st == CM_OK) {
        st = sp_module_add_block_arg(m, blk, sty, &a0);
    }
    if (st == CM_OK) {
        st = sp_module_add_block_arg(m, blk, sty, &a1);
    }
    if (st == CM_OK) {
        uint32_t args[2] = {a0, a1};
        st = sp_module_new_op(m, blk, kind, args, 2, &sty, 1, &add);
    }
    if (st == CM_OK) {
        r = m->ops[add].first_result;
        st = sp_module_new_op(m, blk, "stablehlo.return", &r, 1, NULL, 0, &ret);
    }
    return st;
}

cm_status sp_export_build_all_reduce(sp_module *m, uint32_t block, uint32_t at, uint32_t v,
                                     const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n,
                                     int64_t channel, const char *kind, uint32_t *op_out)
{
    g2l c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.next_channel = channel;
    int64_t gsize = 0;
    sp_attr *rg = replica_groups_v1(m, mesh, axes, n, &gsize);
    if (rg == NULL) {
        /* out of memory, or axes it cannot lay out: tell them apart */
        int64_t prod = 1;
        for (uint32_t i = 0; i < n; i++) {
            prod *= axis_size(mesh, &axes[i]);
        }
        return n > G2L_MAX_AXES || prod <= 0 || sp_mesh_size(mesh) % prod != 0 ? CM_EINVAL
                                                                               : CM_ENOMEM;
    }
    uint32_t ty = m->values[v].type, op;
    cm_status st = sp_module_new_op(m, SP_NONE, "stablehlo.all_reduce", &v, 1, &ty, 1, &op);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, block, at, op);
    }
    sp_attr *ch = st == CM_OK ? channel_attr(&c) : NULL;
    sp_attr *unit = st == CM_OK ? sp_attr_new(m, SP_ATTR_UNIT) : NULL;
    if (st == CM_OK &&
        (ch == NULL || unit == NULL || sp_op_set_attr(m, op, "channel_handle", ch) != CM_OK ||
         sp_op_set_attr(m, op, "replica_groups", rg) != CM_OK ||
         sp_op_set_attr(m, op, "use_global_device_ids", unit) != CM_OK)) {
        st = CM_ENOMEM;
    }
    if (st == CM_OK) {
        st = reduce_body(&c, op, sp_value_type(m, v)->elem, kind);
    }
    if (st == CM_OK) {
        *op_out = op;
    }
    return st;
}

static const char *reduction_kind(const sp_module *m, uint32_t op)
{
    const sp_attr *k = sp_op_attr(m, op, "reduction_op");
    if (k != NULL && k->kind == SP_ATTR_ENUM && k->u.enm.value != NULL) {
        if (strcmp(k->u.enm.value, "max") == 0) {
            return "stablehlo.maximum";
        }
        if (strcmp(k->u.enm.value, "min") == 0) {
            return "stablehlo.minimum";
        }
    }
    return "stablehlo.add";
}

static const sp_sharding *out_sharding(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "out_sharding");
    return a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
}

/* sdy.all_reduce -> stablehlo.all_reduce over the reduction axes. */
static cm_status convert_all_reduce(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    const sp_sharding *s = out_sharding(m, op);
    const sp_mesh *mesh = mesh_of(m, s);
    const sp_attr *ax = sp_op_attr(m, op, "reduction_axes");
    if (mesh == NULL || ax == NULL || ax->kind != SP_ATTR_AXIS_LIST) {
        op_error(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    uint32_t ty;
    cm_status st = value_local_type(c, m->ops[op].first_result, op, &ty);
    if (st != CM_OK) {
        return st;
    }
    int64_t gs;
    sp_attr *rg = replica_groups(c, s, mesh, ax->u.axes.axes, ax->u.axes.n, &gs);
    bld b = {c, block, at, CM_OK};
    uint32_t nop = SP_NONE, in = m->ops[op].operands[0];
    uint32_t r = emit(&b, "stablehlo.all_reduce", &in, 1, ty, &nop);
    if (r == SP_NONE) {
        return b.st;
    }
    set_attr(&b, nop, "channel_handle", channel_attr(c));
    set_attr(&b, nop, "replica_groups", rg);
    set_attr(&b, nop, "use_global_device_ids", sp_attr_new(m, SP_ATTR_UNIT));
    if (b.st == CM_OK) {
        b.st = reduce_body(c, nop, m->types[ty].elem, reduction_kind(m, op));
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* `stablehlo.all_gather` of v along dim over axes. */
static uint32_t all_gather_dim(bld *b, uint32_t v, int64_t dim, const sp_sharding *s,
                               const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n)
{
    g2l *c = b->c;
    sp_module *m = c->m;
    sp_type t_v = *sp_value_type(m, v); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    int64_t gs = 1;
    sp_attr *rg = replica_groups(c, s, mesh, axes, n, &gs);
    int64_t dims[SP_MAX_RANK];
    uint32_t ty = SP_NONE;
    for (uint32_t i = 0; i < t->rank; i++) {
        dims[i] = t->dims[i];
    }
    if (dims[dim] != SP_DIM_DYNAMIC) {
        dims[dim] *= gs;
    }
    if (b->st == CM_OK) {
        b->st = retyped(m, t, dims, &ty);
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.all_gather", &v, 1, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "all_gather_dim", int_attr(m, dim, "i64"));
        set_attr(b, op, "channel_handle", channel_attr(c));
        set_attr(b, op, "replica_groups", rg);
        set_attr(b, op, "use_global_device_ids", sp_attr_new(m, SP_ATTR_UNIT));
    }
    return r;
}

/* sdy.all_gather -> one stablehlo.all_gather per gathering dimension (last
 * dimension first), or, for several dimensions without per-dim-all-gather,
 * one all_gather of all axes on a new leading dimension, then reshape,
 * transpose and reshape back. */
static cm_status convert_all_gather(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    const sp_sharding *s = out_sharding(m, op);
    const sp_mesh *mesh = mesh_of(m, s);
    const sp_attr *ax = sp_op_attr(m, op, "gathering_axes");
    if (mesh == NULL || ax == NULL || ax->kind != SP_ATTR_AXIS_LISTS) {
        op_error(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    uint32_t n_dims = 0;
    for (uint32_t d = 0; d < ax->u.axis_lists.n; d++) {
        n_dims += ax->u.axis_lists.items[d].n > 0;
    }
    uint32_t in = m->ops[op].operands[0];
    sp_type t_v = *sp_value_type(m, in); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    if (n_dims == 0 || t->kind != SP_TYPE_TENSOR || t->rank != ax->u.axis_lists.n) {
        op_error(c, op, "has no gathering axes");
        return CM_EINVAL;
    }
    bld b = {c, block, at, CM_OK};
    uint32_t cur = in;
    if (c->o->per_dim_all_gather || n_dims == 1) {
        for (uint32_t d = ax->u.axis_lists.n; d-- > 0 && b.st == CM_OK;) {
            const sp_axis_list *l = &ax->u.axis_lists.items[d];
            if (l->n > 0) {
                cur = all_gather_dim(&b, cur, d, s, mesh, l->axes, l->n);
            }
        }
    } else {
        uint32_t rank = t->rank;
        if (rank + n_dims > SP_MAX_RANK) {
            op_error(c, op, "has too high a rank");
            return CM_EINVAL;
        }
        sp_axis_ref all[G2L_MAX_AXES] = {{NULL, 0, 0}};
        uint32_t n_all = 0;
        int64_t factors[SP_MAX_RANK];
        uint32_t gdims[SP_MAX_RANK], ng = 0;
        for (uint32_t d = 0; d < rank; d++) {
            const sp_axis_list *l = &ax->u.axis_lists.items[d];
            if (l->n == 0) {
                continue;
            }
            gdims[ng] = d;
            factors[ng] = axes_size(mesh, l->axes, l->n);
            ng++;
            for (uint32_t i = 0; i < l->n; i++) {
                if (n_all == G2L_MAX_AXES) {
                    op_error(c, op, "has too many gathering axes");
                    return CM_EINVAL;
                }
                all[n_all++] = l->axes[i];
            }
        }
        int64_t shape[SP_MAX_RANK];
        shape[0] = 1;
        for (uint32_t d = 0; d < rank; d++) {
            shape[d + 1] = t->dims[d];
        }
        uint32_t ty = SP_NONE;
        b.st = retyped_rank(m, t, shape, rank + 1, &ty);
        cur = emit(&b, "stablehlo.reshape", &cur, 1, ty, NULL);
        cur = all_gather_dim(&b, cur, 0, s, mesh, all, n_all);
        /* split the leading dimension into the gathering factors */
        for (uint32_t g = 0; g < ng; g++) {
            shape[g] = factors[g];
        }
        for (uint32_t d = 0; d < rank; d++) {
            shape[ng + d] = t->dims[d];
        }
        if (b.st == CM_OK) {
            b.st = retyped_rank(m, t, shape, rank + ng, &ty);
        }
        cur = emit(&b, "stablehlo.reshape", &cur, 1, ty, NULL);
        /* each factor next to its dimension */
        int64_t perm[2 * SP_MAX_RANK], tshape[2 * SP_MAX_RANK];
        uint32_t np = 0, next = 0;
        for (uint32_t d = 0; d < rank; d++) {
            if (next < ng && gdims[next] == d) {
                perm[np++] = next++;
            }
            perm[np++] = d + ng;
        }
        for (uint32_t i = 0; i < np; i++) {
            tshape[i] = shape[perm[i]];
        }
        if (b.st == CM_OK) {
            b.st = retyped_rank(m, t, tshape, np, &ty);
        }
        uint32_t top = SP_NONE;
        cur = emit(&b, "stablehlo.transpose", &cur, 1, ty, &top);
        if (cur != SP_NONE) {
            set_attr(&b, top, "permutation", sp_exp_i64_array(m, perm, np));
        }
        for (uint32_t d = 0; d < rank; d++) {
            shape[d] = t->dims[d];
        }
        for (uint32_t g = 0; g < ng; g++) {
            shape[gdims[g]] *= factors[g];
        }
        if (b.st == CM_OK) {
            b.st = retyped_rank(m, t, shape, rank, &ty);
        }
        cur = emit(&b, "stablehlo.reshape", &cur, 1, ty, NULL);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &cur, 1);
    }
    return b.st;
}

/* sdy.all_slice -> a dynamic_slice at this device's offsets. */
static cm_status convert_all_slice(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    const sp_mesh *mesh = mesh_of(m, out_sharding(m, op));
    const sp_attr *ax = sp_op_attr(m, op, "slicing_axes");
    uint32_t in = m->ops[op].operands[0], ty;
    if (mesh == NULL || ax == NULL || ax->kind != SP_ATTR_AXIS_LISTS) {
        op_error(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, m->ops[op].first_result, op, &ty);
    if (st != CM_OK) {
        return st;
    }
    if (m->types[ty].kind != SP_TYPE_TENSOR || m->types[ty].rank != ax->u.axis_lists.n) {
        op_error(c, op, "has slicing axes that do not match its rank");
        return CM_EINVAL;
    }
    bld b = {c, block, at, CM_OK};
    uint32_t r = slice_for_axes(&b, in, mesh, ax->u.axis_lists.items, ty);
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* op's attribute name, writable (to share it with a new op), or NULL. */
static sp_attr *attr_mut(sp_module *m, uint32_t op, const char *name)
{
    for (uint32_t i = 0; i < m->ops[op].n_attrs; i++) {
        if (strcmp(m->ops[op].attrs[i].name, name) == 0) {
            return m->ops[op].attrs[i].value;
        }
    }
    return NULL;
}

/* Is the dense body a splat (one value for the whole tensor)? */
static bool dense_is_splat(const sp_attr *a)
{
    const char *p = a->u.dense.body;
    while (*p == ' ') {
        p++;
    }
    if (*p != '[') {
        return true;
    }
    if (a->u.dense.ints != NULL && a->u.dense.n_ints > 1) {
        for (uint32_t i = 1; i < a->u.dense.n_ints; i++) {
            if (a->u.dense.ints[i] != a->u.dense.ints[0]) {
                return false;
            }
        }
        return false; /* a list MLIR keeps as written */
    }
    return false;
}

/* The dense body of an f32 or f64 tensor with each decimal literal as MLIR
 * prints it (`1.0` -> `1.000000e+00`: six digits after the point when they
 * give the element back exactly; other literals stay as written), in m's
 * arena; NULL (keep the body) for other element types or bodies (hex,
 * inf/nan, strings) or when out of memory. The module printer keeps float
 * bodies verbatim; the constants this pass builds are new ops MLIR would
 * print canonically. */
static const char *canonical_float_body(sp_module *m, const char *body, sp_elem e)
{
    if (e != SP_ELEM_F32 && e != SP_ELEM_F64) {
        return NULL;
    }
    for (const char *q = body; *q != '\0'; q++) {
        if (strchr("0123456789.eE+-[], ", *q) == NULL) {
            return NULL;
        }
    }
    cm_buf out;
    cm_buf_init(&out);
    const char *q = body;
    bool ok = true;
    while (*q != '\0' && ok) {
        if (*q == ' ') {
            q++;
        } else if (*q == '[' || *q == ']') {
            cm_buf_putc(&out, *q++);
        } else if (*q == ',') {
            cm_buf_puts(&out, ", ");
            q++;
        } else {
            size_t n = strspn(q, "0123456789.eE+-");
            char lit[64], six[64];
            if (n == 0 || n >= sizeof lit) {
                ok = false;
                break;
            }
            memcpy(lit, q, n);
            lit[n] = '\0';
            char *end = NULL;
            double v = strtod(lit, &end);
            ok = end != NULL && *end == '\0';
            if (e == SP_ELEM_F32) {
                v = (double)(float)v;
            }
            snprintf(six, sizeof six, "%.6e", v);
            double back = strtod(six, NULL);
            if (e == SP_ELEM_F32) {
                back = (double)(float)back;
            }
            cm_buf_puts(&out, ok && back == v ? six : lit);
            q += n;
        }
    }
    const char *r = ok && !out.oom ? sp_module_str(m, out.data, out.len) : NULL;
    cm_buf_fini(&out);
    return r;
}

/* A copy of dense attribute a of type ty, with its float literals in
 * MLIR's form; NULL when out of memory. */
static sp_attr *dense_retyped(sp_module *m, const sp_attr *a, uint32_t ty, bool splat)
{
    sp_attr *c = sp_attr_new(m, SP_ATTR_DENSE);
    if (c == NULL) {
        return NULL;
    }
    *c = *a;
    c->u.dense.type = ty;
    if (splat && a->u.dense.ints != NULL && a->u.dense.n_ints >= 1) {
        c->u.dense.n_ints = 1;
    }
    const char *body = canonical_float_body(m, a->u.dense.body, m->types[ty].elem);
    if (body != NULL) {
        c->u.dense.body = body;
    }
    return c;
}

/* sdy.constant -> stablehlo.constant: of the local type when unsharded or
 * a splat, else the global constant sliced at this device's offsets. */
static cm_status convert_constant(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    uint32_t res = m->ops[op].first_result, gty = m->values[res].type, lty;
    sp_attr *val = attr_mut(m, op, "value");
    if (val == NULL || val->kind != SP_ATTR_DENSE) {
        op_error(c, op, "has no dense value");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, res, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    bld b = {c, block, at, CM_OK};
    uint32_t nop = SP_NONE, r;
    if (lty == gty || dense_is_splat(val)) {
        sp_attr *a = dense_retyped(m, val, lty, lty != gty);
        if (a == NULL) {
            return CM_ENOMEM;
        }
        r = emit(&b, "stablehlo.constant", NULL, 0, lty, &nop);
        if (r != SP_NONE) {
            set_attr(&b, nop, "value", a);
        }
    } else {
        const sp_sharding *s = value_sharding(c, res);
        const sp_mesh *mesh = mesh_of(m, s);
        if (mesh == NULL || s->rank > SP_MAX_RANK) {
            op_error(c, op, "failed to resolve mesh for constant");
            return CM_EINVAL;
        }
        uint32_t g = emit(&b, "stablehlo.constant", NULL, 0, gty, &nop);
        if (g != SP_NONE) {
            set_attr(&b, nop, "value", dense_retyped(m, val, gty, false));
        }
        sp_axis_list axes[SP_MAX_RANK];
        for (uint32_t i = 0; i < s->rank; i++) {
            axes[i].axes = s->dims[i].axes;
            axes[i].n = s->dims[i].n_axes;
        }
        r = slice_for_axes(&b, g, mesh, axes, lty);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* stablehlo.iota: a sharded one becomes the local iota, plus this shard's
 * offset when its iota dimension is sharded. */
static cm_status convert_iota(g2l *c, uint32_t op, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    uint32_t res = m->ops[op].first_result, lty;
    const sp_sharding *s = value_sharding(c, res);
    if (fully_replicated(s)) {
        return CM_OK;
    }
    const sp_mesh *mesh = mesh_of(m, s);
    const sp_attr *dim = sp_op_attr(m, op, "iota_dimension");
    if (mesh == NULL || dim == NULL || dim->kind != SP_ATTR_INT || dim->u.i.v < 0 ||
        (uint64_t)dim->u.i.v >= s->rank) {
        op_error(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, res, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    uint32_t d = (uint32_t)dim->u.i.v;
    bld b = {c, block, at, CM_OK};
    uint32_t nop = SP_NONE;
    uint32_t r = emit(&b, "stablehlo.iota", NULL, 0, lty, &nop);
    if (r != SP_NONE) {
        set_attr(&b, nop, "iota_dimension", int_attr(m, d, "i64"));
    }
    if (s->dims[d].n_axes > 0) {
        sp_type lt_v = *&m->types[lty]; /* a copy: interning may move m->types */
        const sp_type *lt = &lt_v;
        uint32_t off = dim_offset(&b, mesh, s->dims[d].axes, s->dims[d].n_axes, lt->dims[d]);
        uint32_t conv = emit(&b, "stablehlo.convert", &off, 1, scalar_type(&b, lt->elem), NULL);
        uint32_t bop = SP_NONE;
        uint32_t bc = emit(&b, "stablehlo.broadcast_in_dim", &conv, 1, lty, &bop);
        if (bc != SP_NONE) {
            set_attr(&b, bop, "broadcast_dimensions", sp_exp_i64_array(m, NULL, 0));
        }
        uint32_t ops[2] = {r, bc};
        r = emit(&b, "stablehlo.add", ops, 2, lty, NULL);
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* Axis ref lists equal element for element? */
static bool axes_equal(const sp_dim_sharding *a, const sp_dim_sharding *b)
{
    uint32_t na = a != NULL ? a->n_axes : 0, nb = b != NULL ? b->n_axes : 0;
    if (na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (strcmp(a->axes[i].name, b->axes[i].name) != 0 ||
            a->axes[i].pre_size != b->axes[i].pre_size ||
            (a->axes[i].pre_size > 0 && a->axes[i].size != b->axes[i].size)) {
            return false;
        }
    }
    return true;
}

static const int64_t *darr_of(const sp_module *m, uint32_t op, const char *name, uint32_t rank)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    return a != NULL && a->kind == SP_ATTR_DENSE_ARRAY && a->u.darr.n == rank ? a->u.darr.v : NULL;
}

/* stablehlo.slice: every dimension keeps its sharding; a sharded one must
 * be sliced whole from 0 (its local limit is then the operand's local
 * size) or be communication free (then the result's local size). The new
 * slice carries no attributes but its indices, as Shardy builds it. */
static cm_status convert_slice(g2l *c, uint32_t op, uint32_t orig_in, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    uint32_t in = m->ops[op].operands[0], res = m->ops[op].first_result, lty;
    const sp_sharding *is = value_sharding(c, orig_in), *os = value_sharding(c, res);
    sp_type gt_v = *&m->types[orig_in < c->n_orig ? c->gty[orig_in] : m->values[orig_in].type]; /* a copy: interning may move m->types */
    const sp_type *gt = &gt_v;
    if (fully_replicated(is) && fully_replicated(os)) {
        return localize_value(c, res, op);
    }
    uint32_t rank = gt->rank;
    const int64_t *start = darr_of(m, op, "start_indices", rank);
    const int64_t *limit = darr_of(m, op, "limit_indices", rank);
    const int64_t *strides = darr_of(m, op, "strides", rank);
    sp_type rt_v = *sp_value_type(m, res); /* a copy: interning may move m->types */
    const sp_type *rt = &rt_v;
    if (start == NULL || limit == NULL || strides == NULL || rank > SP_MAX_RANK ||
        (is != NULL && is->rank != rank) || (os != NULL && os->rank != rank)) {
        op_error(c, op, "has malformed slice indices");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, res, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    const sp_mesh *mesh = mesh_of(m, is != NULL ? is : os);
    int64_t ns[SP_MAX_RANK], nl[SP_MAX_RANK];
    for (uint32_t i = 0; i < rank; i++) {
        const sp_dim_sharding *id = is != NULL ? &is->dims[i] : NULL;
        const sp_dim_sharding *od = os != NULL ? &os->dims[i] : NULL;
        if (!axes_equal(id, od)) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "dimension %u has mismatched sharding axes. This requires a reshard "
                     "which should have been handled by previous passes.",
                     i);
            op_fail(c, op, msg);
            return CM_EINVAL;
        }
        if (id == NULL || id->n_axes == 0) {
            ns[i] = start[i];
            nl[i] = limit[i];
            continue;
        }
        int64_t shards = mesh != NULL ? axes_size(mesh, id->axes, id->n_axes) : 1;
        bool free_dim = shards <= 1 ||
                        (start[i] == 0 && strides[i] == 1 && gt->dims[i] != SP_DIM_DYNAMIC &&
                         rt->dims[i] != SP_DIM_DYNAMIC &&
                         (gt->dims[i] + shards - 1) / shards == (rt->dims[i] + shards - 1) / shards);
        if (start[i] != 0 || (limit[i] != gt->dims[i] && !free_dim)) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "dimension %u is sharded but the slice is not a full slice and requires "
                     "device communication.",
                     i);
            op_fail(c, op, msg);
            return CM_EINVAL;
        }
        ns[i] = 0;
        nl[i] = limit[i] == gt->dims[i] ? sp_value_type(m, in)->dims[i] : m->types[lty].dims[i];
    }
    bld b = {c, block, at, CM_OK};
    uint32_t nop = SP_NONE;
    uint32_t r = emit(&b, "stablehlo.slice", &in, 1, lty, &nop);
    if (r != SP_NONE) {
        set_attr(&b, nop, "start_indices", sp_exp_i64_array(m, ns, rank));
        set_attr(&b, nop, "limit_indices", sp_exp_i64_array(m, nl, rank));
        set_attr(&b, nop, "strides", sp_exp_i64_array(m, strides, rank));
    }
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* stablehlo.concatenate: the concatenated dimension must be unsharded in
 * the result and every operand, and the operands' other dimensions sharded
 * as the result's; then only the types change. */
static cm_status check_concatenate(g2l *c, uint32_t op, const uint32_t *orig)
{
    sp_module *m = c->m;
    const sp_attr *da = sp_op_attr(m, op, "dimension");
    const sp_sharding *os = value_sharding(c, m->ops[op].first_result);
    if (da == NULL || da->kind != SP_ATTR_INT || da->u.i.v < 0) {
        return CM_OK;
    }
    uint32_t cd = (uint32_t)da->u.i.v;
    char msg[200];
    if (os != NULL && cd < os->rank && os->dims[cd].n_axes > 0) {
        snprintf(msg, sizeof msg,
                 "dimension %u is sharded but the concatenation is on this dimension.", cd);
        op_fail(c, op, msg);
        return CM_EINVAL;
    }
    for (uint32_t k = 0; k < m->ops[op].n_operands; k++) {
        const sp_sharding *is = value_sharding(c, orig[k]);
        if (fully_replicated(is)) {
            continue;
        }
        if (cd < is->rank && is->dims[cd].n_axes > 0) {
            snprintf(msg, sizeof msg,
                     "operand %u is sharded on concatenation dimension %u. This is not supported.",
                     k, cd);
            op_fail(c, op, msg);
            return CM_EINVAL;
        }
        for (uint32_t i = 0; i < is->rank; i++) {
            if (i != cd && !axes_equal(&is->dims[i], os != NULL && i < os->rank ? &os->dims[i] : NULL)) {
                snprintf(msg, sizeof msg,
                         "dimension %u has mismatched sharding axes. This requires a reshard "
                         "which should have been handled by previous passes.",
                         i);
                op_fail(c, op, msg);
                return CM_EINVAL;
            }
        }
    }
    return CM_OK;
}

/* stablehlo.pad of a sharded operand: per dimension, the offset of each
 * device's input data within its output shard; when every device has the
 * same offsets, a local pad; otherwise a pad wide enough for every shift,
 * then a dynamic_slice at this device's offsets (Shardy's pad pattern). */
static cm_status convert_pad(g2l *c, uint32_t op, uint32_t orig_in, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    uint32_t res = m->ops[op].first_result, in = m->ops[op].operands[0], lty;
    const sp_sharding *is = value_sharding(c, orig_in), *os = value_sharding(c, res);
    if (fully_replicated(is)) {
        if (!fully_replicated(os)) {
            op_fail(c, op, "has a replicated operand but a sharded result");
            return CM_EINVAL;
        }
        return localize_value(c, res, op);
    }
    const sp_mesh *mesh = mesh_of(m, is);
    if (mesh == NULL) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    sp_type git_v = *&m->types[orig_in < c->n_orig ? c->gty[orig_in] : m->values[orig_in].type]; /* a copy: interning may move m->types */
    const sp_type *git = &git_v;
    sp_type grt_v = *sp_value_type(m, res); /* a copy: interning may move m->types */
    const sp_type *grt = &grt_v;
    uint32_t rank = git->rank;
    const int64_t *low = darr_of(m, op, "edge_padding_low", rank);
    const int64_t *intr = darr_of(m, op, "interior_padding", rank);
    if (low == NULL || intr == NULL || rank > SP_MAX_RANK || is->rank != rank || os == NULL ||
        os->rank != rank) {
        op_fail(c, op, "has malformed padding");
        return CM_EINVAL;
    }
    cm_status st = value_local_type(c, res, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    int64_t nd = sp_mesh_size(mesh);
    int64_t *offs = cm_alloc(sizeof *offs * (size_t)(nd * rank + 1));
    if (offs == NULL) {
        return CM_ENOMEM;
    }
    bool uniform[SP_MAX_RANK], all_uniform = true;
    for (uint32_t i = 0; i < rank; i++) {
        if (!axes_equal(&is->dims[i], &os->dims[i])) {
            cm_free(offs);
            op_fail(c, op, "has mismatched sharding axes; this requires a reshard collective");
            return CM_EINVAL;
        }
        const sp_dim_sharding *dd = &is->dims[i];
        int64_t n = dd->n_axes == 0 ? 1 : axes_size(mesh, dd->axes, dd->n_axes);
        int64_t s_in = git->dims[i] / n, s_out = grt->dims[i] / n;
        uniform[i] = true;
        for (int64_t dev = 0; dev < nd; dev++) {
            int64_t k = shard_index(mesh, dev, dd->axes, dd->n_axes);
            int64_t o = (k * s_in) * (intr[i] + 1) + low[i] - k * s_out;
            offs[(size_t)i * (size_t)nd + (size_t)dev] = o;
            if (o != offs[(size_t)i * (size_t)nd]) {
                uniform[i] = false;
            }
        }
        all_uniform = all_uniform && uniform[i];
    }
    sp_type lit_v = *sp_value_type(m, in); /* a copy: interning may move m->types */
    const sp_type *lit = &lit_v;
    sp_type lrt_v = *&m->types[lty]; /* a copy: interning may move m->types */
    const sp_type *lrt = &lrt_v;
    bld b = {c, block, at, CM_OK};
    uint32_t ops[2] = {in, m->ops[op].operands[1]}, nop = SP_NONE, r = SP_NONE;
    int64_t plo[SP_MAX_RANK], phi[SP_MAX_RANK], shape[SP_MAX_RANK];
    if (all_uniform) {
        for (uint32_t i = 0; i < rank; i++) {
            plo[i] = offs[(size_t)i * (size_t)nd];
            int64_t expanded = (lit->dims[i] - 1) * (intr[i] + 1) + 1;
            phi[i] = lrt->dims[i] - (expanded + plo[i]);
        }
        r = emit(&b, "stablehlo.pad", ops, 2, lty, &nop);
    } else {
        for (uint32_t i = 0; i < rank; i++) {
            const int64_t *row = &offs[(size_t)i * (size_t)nd];
            int64_t mx = row[0], mn = row[0];
            for (int64_t dev = 1; dev < nd; dev++) {
                mx = row[dev] > mx ? row[dev] : mx;
                mn = row[dev] < mn ? row[dev] : mn;
            }
            int64_t expanded = (lit->dims[i] - 1) * (intr[i] + 1) + 1;
            plo[i] = mx > 0 ? mx : 0;
            int64_t h = lrt->dims[i] - mn - expanded;
            phi[i] = h > 0 ? h : 0;
            shape[i] = plo[i] + expanded + phi[i];
        }
        uint32_t sty = SP_NONE;
        b.st = retyped(m, lit, shape, &sty);
        r = emit(&b, "stablehlo.pad", ops, 2, sty, &nop);
    }
    if (r != SP_NONE) {
        set_attr(&b, nop, "edge_padding_high", sp_exp_i64_array(m, phi, rank));
        set_attr(&b, nop, "edge_padding_low", sp_exp_i64_array(m, plo, rank));
        set_attr(&b, nop, "interior_padding", sp_exp_i64_array(m, intr, rank));
    }
    if (!all_uniform && b.st == CM_OK) {
        uint32_t dsops[SP_MAX_RANK + 1];
        dsops[0] = r;
        uint32_t id = device_id(&b);
        int64_t *table = cm_alloc(sizeof *table * (size_t)(nd + 1));
        if (table == NULL) {
            cm_free(offs);
            return CM_ENOMEM;
        }
        for (uint32_t i = 0; i < rank && b.st == CM_OK; i++) {
            const int64_t *row = &offs[(size_t)i * (size_t)nd];
            for (int64_t dev = 0; dev < nd; dev++) {
                table[dev] = plo[i] - row[dev];
            }
            if (uniform[i]) {
                dsops[i + 1] = const_i64(&b, table, 1, NULL, 0);
            } else {
                int64_t one = 1;
                uint32_t t = const_i64(&b, table, (size_t)nd, &nd, 1), sop = SP_NONE;
                uint32_t two[2] = {t, id};
                uint32_t sl = emit(&b, "stablehlo.dynamic_slice", two, 2,
                                   tensor_type(&b, SP_ELEM_I64, &one, 1), &sop);
                if (sl != SP_NONE) {
                    set_attr(&b, sop, "slice_sizes", sp_exp_i64_array(m, &one, 1));
                }
                dsops[i + 1] = emit(&b, "stablehlo.reshape", &sl, 1, scalar_type(&b, SP_ELEM_I64), NULL);
            }
        }
        cm_free(table);
        uint32_t dop = SP_NONE;
        r = emit(&b, "stablehlo.dynamic_slice", dsops, rank + 1, lty, &dop);
        if (r != SP_NONE) {
            set_attr(&b, dop, "slice_sizes", sp_exp_i64_array(m, lrt->dims, rank));
        }
    }
    cm_free(offs);
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* The integer parameter name of a dialect attribute (dimension numbers), or -1. */
static int64_t param_int(const sp_attr *a, const char *name)
{
    if (a == NULL || a->kind != SP_ATTR_PARAMS) {
        return -1;
    }
    for (uint32_t i = 0; i < a->u.params.n; i++) {
        const sp_attr *v = a->u.params.items[i].value;
        if (strcmp(a->u.params.items[i].name, name) == 0 && v->kind == SP_ATTR_INT) {
            return v->u.i.v;
        }
    }
    return -1;
}

/* A group count divided by the size of the axes sharding its dimension (at
 * most down to 1), as Shardy's getLocalGroupCount. */
static int64_t local_group_count(int64_t global, const sp_sharding *s, int64_t dim,
                                 const sp_mesh *mesh)
{
    if (global <= 1 || s == NULL || dim < 0 || (uint64_t)dim >= s->rank ||
        s->dims[dim].n_axes == 0) {
        return global;
    }
    int64_t n = axes_size(mesh, s->dims[dim].axes, s->dims[dim].n_axes);
    int64_t div = n < global ? n : global;
    return div > 0 ? global / div : global;
}

/* stablehlo.convolution: the local op with the group counts divided by
 * the sharding of their dimensions; like Shardy's rebuilt op it keeps only
 * the convolution's own attributes. */
static cm_status convert_convolution(g2l *c, uint32_t op, uint32_t lhs, uint32_t rhs)
{
    sp_module *m = c->m;
    uint32_t res = m->ops[op].first_result;
    const sp_sharding *ls = value_sharding(c, lhs), *rs = value_sharding(c, rhs);
    const sp_sharding *os = value_sharding(c, res);
    if (fully_replicated(ls) && fully_replicated(rs) && fully_replicated(os)) {
        return localize_value(c, res, op);
    }
    const sp_mesh *mesh = mesh_of(m, ls);
    mesh = mesh != NULL ? mesh : mesh_of(m, rs);
    mesh = mesh != NULL ? mesh : mesh_of(m, os);
    if (mesh == NULL) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    cm_status st = localize_value(c, res, op);
    if (st != CM_OK) {
        return st;
    }
    const sp_attr *dn = sp_op_attr(m, op, "dimension_numbers");
    const sp_attr *fg = sp_op_attr(m, op, "feature_group_count");
    const sp_attr *bg = sp_op_attr(m, op, "batch_group_count");
    int64_t f = fg != NULL && fg->kind == SP_ATTR_INT ? fg->u.i.v : 1;
    int64_t bgc = bg != NULL && bg->kind == SP_ATTR_INT ? bg->u.i.v : 1;
    int64_t lf = local_group_count(f, rs, param_int(dn, "kernel_output_feature_dimension"), mesh);
    int64_t lb = local_group_count(bgc, ls, param_int(dn, "input_batch_dimension"), mesh);
    /* drop the discardable attributes (sdy.sharding and other dialects') */
    for (uint32_t i = m->ops[op].n_attrs; i-- > 0;) {
        if (strchr(m->ops[op].attrs[i].name, '.') != NULL) {
            sp_op_remove_attr(m, op, m->ops[op].attrs[i].name);
        }
    }
    sp_attr *fa = int_attr(m, lf, "i64"), *ba = int_attr(m, lb, "i64");
    if (fa == NULL || ba == NULL || sp_op_set_attr(m, op, "feature_group_count", fa) != CM_OK ||
        sp_op_set_attr(m, op, "batch_group_count", ba) != CM_OK) {
        return CM_ENOMEM;
    }
    return CM_OK;
}

/* The integers of parameter name of a dialect attribute (none: n = 0). */
static const int64_t *param_ints(sp_module *m, const sp_attr *a, const char *name, uint32_t *n)
{
    *n = 0;
    if (a == NULL || a->kind != SP_ATTR_PARAMS) {
        return NULL;
    }
    for (uint32_t i = 0; i < a->u.params.n; i++) {
        const int64_t *v = NULL;
        if (strcmp(a->u.params.items[i].name, name) == 0 &&
            sp_attr_ints(a->u.params.items[i].value, &v, n, &m->arena)) {
            return v;
        }
    }
    *n = 0;
    return NULL;
}

static bool contains(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return true;
        }
    }
    return false;
}

/* `stablehlo.compare dir, a, b` with an i1 result shaped as a. */
static uint32_t compare(bld *b, uint32_t x, uint32_t y, const char *dir)
{
    sp_module *m = b->c->m;
    sp_type t_v = *sp_value_type(m, x); /* a copy: interning may move m->types */
    const sp_type *t = &t_v;
    uint32_t ops[2] = {x, y}, op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.compare", ops, 2, tensor_type(b, SP_ELEM_I1, t->dims, t->rank),
                      &op);
    if (r != SP_NONE) {
        sp_attr *d = sp_attr_new(m, SP_ATTR_ENUM);
        if (d != NULL) {
            d->u.enm.dialect = "stablehlo";
            d->u.enm.kind = "comparison_direction";
            d->u.enm.value = dir;
        }
        set_attr(b, op, "comparison_direction", d);
    }
    return r;
}

static uint32_t binop(bld *b, const char *name, uint32_t x, uint32_t y)
{
    uint32_t ops[2] = {x, y};
    return emit(b, name, ops, 2, x != SP_NONE ? b->c->m->values[x].type : SP_NONE, NULL);
}

static uint32_t broadcast(bld *b, uint32_t v, uint32_t ty, const int64_t *dims, uint32_t n)
{
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.broadcast_in_dim", &v, 1, ty, &op);
    if (r != SP_NONE) {
        set_attr(b, op, "broadcast_dimensions", sp_exp_i64_array(b->c->m, dims, n));
    }
    return r;
}

/* Shardy's computeLocalIndicesAndMask for a gather (is_gather: indices
 * clamped to the global bounds first) or scatter: indices made local along
 * the trivially sliced sharded dimensions they index, and (want_mask) the
 * i1 mask of the indices this device's shard holds; *mask is SP_NONE when
 * none is needed. */
static uint32_t local_indices(bld *b, uint32_t idx, const sp_mesh *mesh, const sp_sharding *s,
                              const sp_type *gt, const sp_type *lt, int64_t ivd,
                              const int64_t *sim, uint32_t n_sim, const int64_t *triv,
                              uint32_t n_triv, bool is_gather, bool want_mask, uint32_t *mask)
{
    sp_module *m = b->c->m;
    sp_type it_v = *sp_value_type(m, idx); /* a copy: interning may move m->types */
    const sp_type *it = &it_v;
    sp_elem ie = it->elem;
    uint32_t ity = idx != SP_NONE ? m->values[idx].type : SP_NONE;
    uint32_t adjusted = idx;
    *mask = SP_NONE;
    bool by_index = false, by_device = false;
    for (uint32_t k = 0; k < n_triv; k++) {
        by_index = by_index || contains(sim, n_sim, triv[k]);
        by_device = by_device || !contains(sim, n_sim, triv[k]);
    }
    if (by_index && n_sim <= SP_MAX_RANK) {
        uint32_t base = idx;
        if (is_gather) {
            int64_t zero = 0;
            uint32_t lo = const_int(b, ie, &zero, 1, it->dims, it->rank);
            int64_t maxv[SP_MAX_RANK];
            for (uint32_t k = 0; k < n_sim; k++) {
                maxv[k] = gt->dims[sim[k]] - 1;
            }
            uint32_t hi;
            if (ivd < (int64_t)it->rank && n_sim > 1) {
                int64_t nn = n_sim;
                uint32_t cst = const_int(b, ie, maxv, n_sim, &nn, 1);
                hi = broadcast(b, cst, ity, &ivd, 1);
            } else {
                hi = const_int(b, ie, maxv, 1, it->dims, it->rank);
            }
            uint32_t ops[3] = {lo, idx, hi};
            base = emit(b, "stablehlo.clamp", ops, 3, ity, NULL);
        }
        uint32_t mins[SP_MAX_RANK], maxs[SP_MAX_RANK];
        uint32_t sty = scalar_type(b, ie);
        for (uint32_t k = 0; k < n_sim; k++) {
            int64_t d = sim[k];
            if (!contains(triv, n_triv, d)) {
                int64_t zero = 0, mx = gt->dims[d] - 1;
                mins[k] = const_int(b, ie, &zero, 1, NULL, 0);
                if (want_mask) {
                    maxs[k] = const_int(b, ie, &mx, 1, NULL, 0);
                }
                continue;
            }
            int64_t shard = lt->dims[d];
            uint32_t off = dim_offset(b, mesh, s->dims[d].axes, s->dims[d].n_axes, shard);
            off = emit(b, "stablehlo.convert", &off, 1, sty, NULL);
            mins[k] = off;
            if (want_mask) {
                int64_t sm1 = shard - 1;
                uint32_t cst = const_int(b, ie, &sm1, 1, NULL, 0);
                maxs[k] = binop(b, "stablehlo.add", off, cst);
            }
        }
        uint32_t bounds_t[2] = {SP_NONE, SP_NONE};
        for (int w = 0; w < (want_mask ? 2 : 1); w++) {
            const uint32_t *bv = w == 0 ? mins : maxs;
            if (ivd >= (int64_t)it->rank || it->dims[ivd] == 1) {
                bounds_t[w] = broadcast(b, bv[0], ity, NULL, 0);
            } else {
                uint32_t parts[SP_MAX_RANK];
                int64_t one = 1, nn = n_sim;
                for (uint32_t k = 0; k < n_sim; k++) {
                    parts[k] = emit(b, "stablehlo.reshape", &bv[k], 1,
                                    tensor_type(b, ie, &one, 1), NULL);
                }
                uint32_t cop = SP_NONE;
                uint32_t cat = emit(b, "stablehlo.concatenate", parts, n_sim,
                                    tensor_type(b, ie, &nn, 1), &cop);
                if (cat != SP_NONE) {
                    set_attr(b, cop, "dimension", int_attr(m, 0, "i64"));
                }
                bounds_t[w] = broadcast(b, cat, ity, &ivd, 1);
            }
        }
        adjusted = binop(b, "stablehlo.subtract", base, bounds_t[0]);
        if (want_mask) {
            uint32_t ge = compare(b, base, bounds_t[0], "GE");
            uint32_t le = compare(b, base, bounds_t[1], "LE");
            *mask = binop(b, "stablehlo.and", ge, le);
        }
    }
    if (want_mask && by_device) {
        uint32_t pm = SP_NONE;
        for (uint32_t k = 0; k < n_triv; k++) {
            int64_t d = triv[k];
            if (contains(sim, n_sim, d)) {
                continue;
            }
            uint32_t off = dim_offset(b, mesh, s->dims[d].axes, s->dims[d].n_axes, lt->dims[d]);
            int64_t zero = 0;
            uint32_t z = const_int(b, SP_ELEM_I64, &zero, 1, NULL, 0);
            uint32_t eq = compare(b, off, z, "EQ");
            pm = pm == SP_NONE ? eq : binop(b, "stablehlo.and", pm, eq);
        }
        if (*mask != SP_NONE) {
            pm = broadcast(b, pm, m->values[*mask].type, NULL, 0);
            *mask = binop(b, "stablehlo.and", *mask, pm);
        } else {
            *mask = pm;
        }
    }
    return adjusted;
}

/* A dense zero of tensor type ty, as a constant. */
static uint32_t zero_const(bld *b, uint32_t ty)
{
    sp_module *m = b->c->m;
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, ty, &op);
    if (r == SP_NONE) {
        return r;
    }
    sp_elem e = m->types[ty].elem;
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *z = cm_arena_alloc(&m->arena, sizeof *z);
    if (a == NULL || z == NULL) {
        b->st = CM_ENOMEM;
        return SP_NONE;
    }
    bool is_int = e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
    *z = 0;
    a->u.dense.body = e == SP_ELEM_I1 ? "false" : is_int ? "0" : "0.000000e+00";
    a->u.dense.type = ty;
    a->u.dense.ints = is_int ? z : NULL;
    a->u.dense.n_ints = is_int ? 1 : 0;
    set_attr(b, op, "value", a);
    return r;
}

/* stablehlo.gather of a sharded operand: local slice sizes; when a sharded
 * dimension is sliced trivially (size 1, not batching), local indices, a
 * mask of the indices this device holds, and a select that zeroes the
 * rest (the sdy.all_reduce after it combines the shards). */
static cm_status convert_gather(g2l *c, uint32_t op, uint32_t orig_in, uint32_t block, uint32_t at)
{
    sp_module *m = c->m;
    uint32_t res = m->ops[op].first_result, lty;
    const sp_sharding *s = value_sharding(c, orig_in);
    if (fully_replicated(s) || m->ops[op].n_operands != 2) {
        return localize_value(c, res, op);
    }
    const sp_mesh *mesh = mesh_of(m, s);
    sp_type gt_v = *&m->types[orig_in < c->n_orig ? c->gty[orig_in] : m->values[orig_in].type]; /* a copy: interning may move m->types */
    const sp_type *gt = &gt_v;
    uint32_t rank = gt->rank;
    const int64_t *ss = darr_of(m, op, "slice_sizes", rank);
    const sp_attr *dn = sp_op_attr(m, op, "dimension_numbers");
    if (mesh == NULL || ss == NULL || dn == NULL || s->rank != rank || rank > SP_MAX_RANK) {
        op_fail(c, op, "failed to resolve mesh");
        return CM_EINVAL;
    }
    uint32_t n_bat, n_sim, n_off;
    const int64_t *bat = param_ints(m, dn, "operand_batching_dims", &n_bat);
    const int64_t *sim = param_ints(m, dn, "start_index_map", &n_sim);
    const int64_t *offd = param_ints(m, dn, "offset_dims", &n_off);
    int64_t ivd = param_int(dn, "index_vector_dim");
    for (uint32_t k = 0; k < n_sim; k++) {
        if (sim[k] < 0 || (uint64_t)sim[k] >= rank) {
            op_fail(c, op, "has a start_index_map entry outside the operand's rank");
            return CM_EINVAL;
        }
    }
    if (ivd < 0) {
        ivd = sp_value_type(m, m->ops[op].operands[1])->rank;
    }
    int64_t triv[SP_MAX_RANK], lss[SP_MAX_RANK];
    uint32_t n_triv = 0;
    for (uint32_t i = 0; i < rank; i++) {
        const sp_dim_sharding *d = &s->dims[i];
        int64_t n = d->n_axes > 0 ? axes_size(mesh, d->axes, d->n_axes) : 1;
        lss[i] = ss[i];
        if (d->n_axes > 0 && n > 1 && ss[i] == 1 && !contains(bat, n_bat, i)) {
            triv[n_triv++] = i;
        }
        if (ss[i] == 1 || contains(bat, n_bat, i) || d->n_axes == 0) {
            continue;
        }
        if (ss[i] != gt->dims[i] || ss[i] % n != 0) {
            op_fail(c, op, "has a sharded dimension that is neither sliced whole nor trivially");
            return CM_EINVAL;
        }
        lss[i] = ss[i] / n;
    }
    cm_status st = value_local_type(c, res, op, &lty);
    if (st != CM_OK) {
        return st;
    }
    sp_attr *sa = sp_exp_i64_array(m, lss, rank);
    if (sa == NULL) {
        return CM_ENOMEM;
    }
    if (n_triv == 0) {
        m->values[res].type = lty;
        return sp_op_set_attr(m, op, "slice_sizes", sa);
    }
    bld b = {c, block, at, CM_OK};
    uint32_t operand = m->ops[op].operands[0], idx = m->ops[op].operands[1], mask;
    sp_type lt_v = *sp_value_type(m, operand); /* a copy: interning may move m->types */
    const sp_type *lt = &lt_v;
    uint32_t adj = local_indices(&b, idx, mesh, s, gt, lt, ivd, sim, n_sim, triv, n_triv, true,
                                 true, &mask);
    uint32_t gop = SP_NONE, ops[2] = {operand, adj};
    uint32_t g = emit(&b, "stablehlo.gather", ops, 2, lty, &gop);
    if (g != SP_NONE) {
        for (uint32_t i = 0; i < m->ops[op].n_attrs && b.st == CM_OK; i++) {
            b.st = sp_op_set_attr(m, gop, m->ops[op].attrs[i].name, m->ops[op].attrs[i].value);
        }
        set_attr(&b, gop, "slice_sizes", sa);
    }
    if (b.st != CM_OK || mask == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_EINVAL;
    }
    sp_type mt_v = *sp_value_type(m, mask); /* a copy: interning may move m->types */
    const sp_type *mt = &mt_v;
    if (mt->rank > 0 && ivd >= 0 && ivd < (int64_t)mt->rank) {
        int64_t red[SP_MAX_RANK];
        uint32_t nr = 0;
        for (uint32_t i = 0; i < mt->rank; i++) {
            if ((int64_t)i != ivd) {
                red[nr++] = mt->dims[i];
            }
        }
        int64_t one = 1;
        uint32_t init = const_int(&b, SP_ELEM_I1, &one, 1, NULL, 0), rop = SP_NONE;
        uint32_t rops[2] = {mask, init};
        mask = emit(&b, "stablehlo.reduce", rops, 2, tensor_type(&b, SP_ELEM_I1, red, nr), &rop);
        if (mask != SP_NONE) {
            set_attr(&b, rop, "dimensions", sp_exp_i64_array(m, &ivd, 1));
            if (b.st == CM_OK) {
                b.st = reduce_body(c, rop, SP_ELEM_I1, "stablehlo.and");
            }
        }
        if (b.st != CM_OK) {
            return b.st;
        }
        mt_v = *sp_value_type(m, mask);
        mt = &mt_v;
    }
    sp_type rt_v = *&m->types[lty]; /* a copy: interning may move m->types */
    const sp_type *rt = &rt_v;
    int64_t bd[SP_MAX_RANK];
    uint32_t nb = 0;
    if (mt->rank > 0) {
        for (uint32_t i = 0; i < rt->rank; i++) {
            if (!contains(offd, n_off, i)) {
                bd[nb++] = i;
            }
        }
    }
    uint32_t bm = broadcast(&b, mask, tensor_type(&b, SP_ELEM_I1, rt->dims, rt->rank), bd, nb);
    uint32_t z = zero_const(&b, lty);
    uint32_t sops[3] = {bm, g, z};
    uint32_t r = emit(&b, "stablehlo.select", sops, 3, lty, NULL);
    if (b.st == CM_OK) {
        replace_op(c, op, &r, 1);
    }
    return b.st;
}

/* The scalar identity constant of a scatter reduction kind for element e. */
static uint32_t identity_const(bld *b, const char *kind, sp_elem e)
{
    sp_module *m = b->c->m;
    uint32_t ty = scalar_type(b, e), op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, ty, &op);
    if (r == SP_NONE) {
        return r;
    }
    bool is_int = e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
    bool one = strcmp(kind, "stablehlo.multiply") == 0 || strcmp(kind, "stablehlo.and") == 0;
    bool mx = strcmp(kind, "stablehlo.maximum") == 0, mn = strcmp(kind, "stablehlo.minimum") == 0;
    int64_t v = one ? 1 : 0;
    const char *body = one ? "1.000000e+00" : "0.000000e+00";
    if (mx || mn) {
        if (is_int) {
            int bits = e == SP_ELEM_I8 ? 8 : e == SP_ELEM_I16 ? 16 : e == SP_ELEM_I32 ? 32 : 64;
            int64_t big = bits == 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
            v = mx ? -big - 1 : big;
        } else if (e == SP_ELEM_F32) {
            body = mx ? "-3.40282347E+38" : "3.40282347E+38";
        } else if (e == SP_ELEM_F64) {
            body = mx ? "-1.7976931348623157E+308" : "1.7976931348623157E+308";
        } else {
            op_fail(b->c, op, "failed to get scatter reduction identity.");
            b->st = CM_EINVAL;
            return SP_NONE;
        }
    }
    if (is_int) {
        set_attr(b, op, "value", dense_int(m, e, &v, 1, NULL, 0));
        return r;
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    if (a == NULL) {
        b->st = CM_ENOMEM;
        return SP_NONE;
    }
    a->u.dense.body = body;
    a->u.dense.type = ty;
    set_attr(b, op, "value", a);
    return r;
}

/* stablehlo.scatter: when the updates are sharded on batch dimensions the
 * operand is not, only one device per group of those axes keeps the
 * operand (the others scatter into the identity, and the sdy.all_reduce
 * after combines them); indices into sharded indexed dimensions of the
 * operand are made local (writes outside the shard fall away). */
static cm_status convert_scatter(g2l *c, uint32_t op, const uint32_t *orig, uint32_t block,
                                 uint32_t at)
{
    sp_module *m = c->m;
    sp_op *o = &m->ops[op];
    if (o->n_operands < 3 || o->n_operands % 2 == 0 || o->n_results != (o->n_operands - 1) / 2) {
        op_fail(c, op, "has a malformed operand list");
        return CM_EINVAL;
    }
    uint32_t n_in = (o->n_operands - 1) / 2;
    const sp_sharding *is = value_sharding(c, orig[0]), *us = value_sharding(c, orig[n_in + 1]);
    uint32_t first = o->first_result;
    if (fully_replicated(is) && fully_replicated(us)) {
        for (uint32_t r = 0; r < n_in; r++) {
            cm_status st = localize_value(c, first + r, op);
            if (st != CM_OK) {
                return st;
            }
        }
        return CM_OK;
    }
    const sp_mesh *mesh = mesh_of(m, is != NULL ? is : us);
    const sp_attr *dn = sp_op_attr(m, op, "scatter_dimension_numbers");
    if (mesh == NULL) {
        op_fail(c, op, "failed to resolve mesh.");
        return CM_EINVAL;
    }
    uint32_t n_uwd, n_sdod, n_iwd;
    const int64_t *uwd = param_ints(m, dn, "update_window_dims", &n_uwd);
    const int64_t *sdod = param_ints(m, dn, "scatter_dims_to_operand_dims", &n_sdod);
    const int64_t *iwd = param_ints(m, dn, "inserted_window_dims", &n_iwd);
    int64_t ivd = param_int(dn, "index_vector_dim");
    for (uint32_t k = 0; k < n_sdod; k++) {
        if (sdod[k] < 0 || (uint64_t)sdod[k] >= sp_value_type(m, orig[0])->rank) {
            op_fail(c, op, "has a scatter_dims_to_operand_dims entry outside the operand's rank");
            return CM_EINVAL;
        }
    }
    if (ivd < 0) {
        ivd = sp_value_type(m, o->operands[n_in])->rank;
    }
    /* reduction axes: the updates' batch-dimension axes the operand does not use */
    sp_axis_ref red[G2L_MAX_AXES];
    uint32_t n_red = 0;
    if (!fully_replicated(us)) {
        for (uint32_t d = 0; d < us->rank; d++) {
            if (contains(uwd, n_uwd, d)) {
                continue;
            }
            for (uint32_t k = 0; k < us->dims[d].n_axes; k++) {
                const sp_axis_ref *ax = &us->dims[d].axes[k];
                bool in_operand = false;
                for (uint32_t e = 0; !fully_replicated(is) && e < is->rank; e++) {
                    for (uint32_t j = 0; j < is->dims[e].n_axes; j++) {
                        const sp_axis_ref *y = &is->dims[e].axes[j];
                        in_operand = in_operand || (strcmp(y->name, ax->name) == 0 &&
                                                    y->pre_size == ax->pre_size &&
                                                    (ax->pre_size == 0 || y->size == ax->size));
                    }
                }
                if (!in_operand && n_red < G2L_MAX_AXES) {
                    red[n_red++] = *ax;
                }
            }
        }
    }
    if (n_red == 0 && fully_replicated(is)) {
        for (uint32_t r = 0; r < n_in; r++) {
            cm_status st = localize_value(c, first + r, op);
            if (st != CM_OK) {
                return st;
            }
        }
        return CM_OK;
    }
    bld b = {c, block, at, CM_OK};
    uint32_t ops[2 * SP_MAX_RANK + 1];
    if (o->n_operands > 2 * SP_MAX_RANK + 1) {
        op_fail(c, op, "has too many operands");
        return CM_EINVAL;
    }
    memcpy(ops, o->operands, sizeof ops[0] * o->n_operands);
    sp_type lit_v = *sp_value_type(m, ops[0]);
    if (n_red > 0) {
        const char *kind = sp_scatter_reduction(m, op);
        if (kind == NULL) {
            op_fail(c, op, "failed to get scatter reduction identity.");
            return CM_EINVAL;
        }
        uint32_t idv = identity_const(&b, kind, lit_v.elem);
        int64_t nd = sp_mesh_size(mesh);
        int64_t *leader = cm_alloc(sizeof *leader * (size_t)(nd + 1));
        if (leader == NULL) {
            return CM_ENOMEM;
        }
        for (int64_t dev = 0; dev < nd; dev++) {
            leader[dev] = shard_index(mesh, dev, red, n_red) == 0;
        }
        uint32_t id = device_id(&b);
        uint32_t table = const_int(&b, SP_ELEM_I1, leader, (size_t)nd, &nd, 1);
        cm_free(leader);
        int64_t one = 1, zero_dim = 0;
        uint32_t two[2] = {table, id}, sop = SP_NONE;
        uint32_t isl = emit(&b, "stablehlo.dynamic_slice", two, 2,
                            tensor_type(&b, SP_ELEM_I1, &one, 1), &sop);
        if (isl != SP_NONE) {
            set_attr(&b, sop, "slice_sizes", sp_exp_i64_array(m, &one, 1));
        }
        isl = broadcast(&b, isl, tensor_type(&b, SP_ELEM_I1, lit_v.dims, lit_v.rank), &zero_dim, 1);
        uint32_t bid = broadcast(&b, idv, m->values[ops[0]].type, NULL, 0);
        for (uint32_t k = 0; k < n_in; k++) {
            uint32_t sel[3] = {isl, ops[k], bid};
            ops[k] = emit(&b, "stablehlo.select", sel, 3, m->values[ops[k]].type, NULL);
        }
        if (b.st != CM_OK) {
            return b.st;
        }
    }
    const sp_type *git = &m->types[orig[0] < c->n_orig ? c->gty[orig[0]] : m->values[orig[0]].type];
    sp_type gi_v = *git;
    int64_t idx_dims[SP_MAX_RANK];
    uint32_t n_idx = 0;
    if (!fully_replicated(is)) {
        for (uint32_t i = 0; i < gi_v.rank && i < is->rank; i++) {
            if (is->dims[i].n_axes == 0) {
                continue;
            }
            if (contains(sdod, n_sdod, i)) {
                idx_dims[n_idx++] = i;
            } else if (contains(iwd, n_iwd, i)) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         "sharding operand dimension %u that is not indexed but in inserted window "
                         "dimension is not supported.",
                         i);
                op_fail(c, op, msg);
                return CM_EINVAL;
            }
        }
    }
    if (n_idx == 0 && n_red == 0) {
        for (uint32_t r = 0; r < n_in; r++) {
            cm_status st = localize_value(c, first + r, op);
            if (st != CM_OK) {
                return st;
            }
        }
        return CM_OK;
    }
    if (!fully_replicated(is)) {
        uint32_t mask;
        ops[n_in] = local_indices(&b, ops[n_in], mesh, is, &gi_v, &lit_v, ivd, sdod, n_sdod,
                                  idx_dims, n_idx, false, false, &mask);
    }
    uint32_t rtys[SP_MAX_RANK];
    for (uint32_t r = 0; r < n_in; r++) {
        cm_status st = value_local_type(c, first + r, op, &rtys[r]);
        if (st != CM_OK) {
            return st;
        }
    }
    if (b.st != CM_OK) {
        return b.st;
    }
    uint32_t nop;
    cm_status st = sp_module_new_op(m, SP_NONE, "stablehlo.scatter", ops, m->ops[op].n_operands,
                                    rtys, n_in, &nop);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, block, b.at++, nop);
    }
    for (uint32_t i = 0; i < m->ops[op].n_attrs && st == CM_OK; i++) {
        st = sp_op_set_attr(m, nop, m->ops[op].attrs[i].name, m->ops[op].attrs[i].value);
    }
    /* the update computation moves to the new op */
    if (st == CM_OK && m->ops[op].n_regions == 1) {
        st = sp_op_add_regions(m, nop, 1);
        for (uint32_t k = 0; st == CM_OK && k < m->ops[op].regions[0].n_blocks; k++) {
            uint32_t blk = m->ops[op].regions[0].blocks[k];
            st = sp_region_add_block(m, nop, 0, blk);
            m->blocks[blk].parent_op = nop;
        }
        if (st == CM_OK) {
            m->ops[op].regions[0].n_blocks = 0;
        }
    }
    if (st != CM_OK) {
        return st;
    }
    uint32_t vals[SP_MAX_RANK];
    for (uint32_t r = 0; r < n_in; r++) {
        vals[r] = m->ops[nop].first_result + r;
    }
    replace_op(c, op, vals, n_in);
    return CM_OK;
}

/* s without the axes named in manual (a manual computation's body view of
 * its in sharding), in m's arena; NULL when out of memory. */
static sp_sharding *without_manual(sp_module *m, const sp_sharding *s, const sp_attr *manual)
{
    sp_sharding *t = sp_sharding_clone(&m->arena, s);
    if (t == NULL || manual == NULL || manual->kind != SP_ATTR_AXIS_LIST) {
        return t;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < t->dims[d].n_axes; i++) {
            bool is_manual = false;
            for (uint32_t j = 0; j < manual->u.axes.n; j++) {
                is_manual = is_manual || strcmp(manual->u.axes.axes[j].name, t->dims[d].axes[i].name) == 0;
            }
            if (!is_manual) {
                t->dims[d].axes[k++] = t->dims[d].axes[i];
            }
        }
        t->dims[d].n_axes = k;
    }
    return t;
}

/* Records the owner shardings of the body arguments of every function
 * and named or manual computation in block (recursively). */
static cm_status collect_arg_shardings(g2l *c, uint32_t block)
{
    sp_module *m = c->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        const sp_op *o = &m->ops[op];
        if (o->n_regions > 0 && o->regions[0].n_blocks > 0) {
            uint32_t body = o->regions[0].blocks[0];
            const sp_block *bb = &m->blocks[body];
            const sp_attr *ins = sp_op_attr(m, op, "in_shardings");
            for (uint32_t a = 0; a < bb->n_args; a++) {
                uint32_t v = bb->first_arg + a;
                const sp_sharding *s = NULL;
                if (o->kind == SP_OP_FUNC_FUNC) {
                    s = sp_exp_io_sharding(m, op, true, a);
                } else if ((o->kind == SP_OP_SDY_NAMED_COMPUTATION ||
                            o->kind == SP_OP_SDY_MANUAL_COMPUTATION) &&
                           ins != NULL && ins->kind == SP_ATTR_SHARDING_LIST &&
                           a < ins->u.shardings.n) {
                    s = ins->u.shardings.items[a];
                    if (o->kind == SP_OP_SDY_MANUAL_COMPUTATION && s != NULL) {
                        s = without_manual(m, s, sp_op_attr(m, op, "manual_axes"));
                        if (s == NULL) {
                            return CM_ENOMEM;
                        }
                    }
                }
                if (v < c->n_orig) {
                    c->arg_sh[v] = s;
                }
            }
        }
        for (uint32_t r = 0; r < o->n_regions; r++) {
            for (uint32_t k = 0; k < o->regions[r].n_blocks; k++) {
                cm_status st = collect_arg_shardings(c, o->regions[r].blocks[k]);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

/* sdy.manual_computation: its body (arguments localized, then converted)
 * replaces it, its arguments being the operands and its results the
 * values the body returns. */
static cm_status inline_manual(g2l *c, uint32_t op, uint32_t block, uint32_t *at)
{
    sp_module *m = c->m;
    sp_op *o = &m->ops[op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        op_error(c, op, "has a malformed body");
        return CM_EINVAL;
    }
    uint32_t body = o->regions[0].blocks[0];
    sp_block *bb = &m->blocks[body];
    if (bb->n_args != o->n_operands || bb->n_ops == 0) {
        op_error(c, op, "has a malformed body");
        return CM_EINVAL;
    }
    for (uint32_t a = 0; a < bb->n_args; a++) {
        uint32_t v = bb->first_arg + a;
        if (v < c->n_orig) {
            c->repl[v] = o->operands[a];
        }
    }
    cm_status st = convert_block(c, body);
    if (st != CM_OK) {
        return st;
    }
    bb = &m->blocks[body];
    uint32_t ret = bb->ops[bb->n_ops - 1];
    if (m->ops[ret].kind != SP_OP_SDY_RETURN) {
        op_error(c, op, "has a body without sdy.return");
        return CM_EINVAL;
    }
    /* move the body's ops but the return before op */
    uint32_t n_move = bb->n_ops - 1, idx = *at;
    for (uint32_t k = 0; k < n_move; k++) {
        uint32_t x = m->blocks[body].ops[0];
        sp_block_remove_op(m, body, 0);
        st = sp_block_insert_op(m, block, idx++, x);
        if (st != CM_OK) {
            return st;
        }
    }
    uint32_t n = m->ops[ret].n_results == 0 ? m->ops[ret].n_operands : 0;
    uint32_t *vals = cm_alloc(sizeof *vals * (n + 1u));
    if (vals == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t k = 0; k < n; k++) {
        vals[k] = m->ops[ret].operands[k];
    }
    replace_op(c, op, vals, n);
    cm_free(vals);
    *at = idx;
    return CM_OK;
}

static bool is_stablehlo(const sp_op *o)
{
    return strncmp(o->name, "stablehlo.", 10) == 0;
}

/* Converts the ops of block in order; *at tracks the op being converted as
 * replacements are inserted and removed. */
static cm_status convert_block(g2l *c, uint32_t block)
{
    sp_module *m = c->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        sp_op *o = &m->ops[op];
        uint32_t orig0 = o->n_operands > 0 ? o->operands[0] : SP_NONE;
        uint32_t *orig = NULL;
        if (o->kind == SP_OP_CONCATENATE || o->kind == SP_OP_SCATTER ||
            (o->kind == SP_OP_CONVOLUTION && o->n_operands == 2)) {
            orig = cm_alloc(sizeof *orig * (o->n_operands + 1u));
            if (orig == NULL) {
                return CM_ENOMEM;
            }
            memcpy(orig, o->operands, sizeof *orig * o->n_operands);
        }
        for (uint32_t k = 0; k < o->n_operands; k++) {
            uint32_t v = o->operands[k];
            while (v < c->n_orig && c->repl[v] != SP_NONE) {
                v = c->repl[v];
            }
            o->operands[k] = v;
        }
        cm_status st = CM_OK;
        uint32_t n_before = m->blocks[block].n_ops;
        bool regions = true;
        switch (o->kind) {
        case SP_OP_SDY_MESH:
            continue;
        case SP_OP_FUNC_FUNC:
            st = func_signature(c, op);
            break;
        case SP_OP_SDY_ALL_REDUCE:
            st = convert_all_reduce(c, op, block, i);
            regions = false;
            break;
        case SP_OP_SDY_ALL_GATHER:
            st = convert_all_gather(c, op, block, i);
            regions = false;
            break;
        case SP_OP_SDY_ALL_SLICE:
            st = convert_all_slice(c, op, block, i);
            regions = false;
            break;
        case SP_OP_SDY_REDUCE_SCATTER:
            st = convert_reduce_scatter(c, op, orig0, block, i);
            regions = false;
            break;
        case SP_OP_SDY_ALL_TO_ALL:
            st = convert_all_to_all(c, op, block, i);
            regions = false;
            break;
        case SP_OP_SDY_COLLECTIVE_PERMUTE:
            st = convert_collective_permute(c, op, orig0, block, i);
            regions = false;
            break;
        case SP_OP_SDY_CONSTANT:
            st = convert_constant(c, op, block, i);
            regions = false;
            break;
        case SP_OP_IOTA:
            st = convert_iota(c, op, block, i);
            regions = false;
            break;
        case SP_OP_CONVOLUTION:
            /* a convolution without two operands only changes types */
            regions = orig == NULL;
            st = orig != NULL ? convert_convolution(c, op, orig[0], orig[1]) : CM_OK;
            cm_free(orig);
            break;
        case SP_OP_SCATTER:
            st = convert_scatter(c, op, orig, block, i);
            cm_free(orig);
            regions = false;
            break;
        case SP_OP_GATHER:
            st = convert_gather(c, op, orig0, block, i);
            regions = false;
            break;
        case SP_OP_PAD:
            st = convert_pad(c, op, orig0, block, i);
            regions = false;
            break;
        case SP_OP_SLICE:
            st = convert_slice(c, op, orig0, block, i);
            regions = false;
            break;
        case SP_OP_SDY_MANUAL_COMPUTATION: {
            uint32_t at = i;
            st = inline_manual(c, op, block, &at);
            if (st == CM_OK) {
                /* the inlined ops are converted; resume after them */
                i = at - 1;
            }
            if (st != CM_OK) {
                return st;
            }
            continue;
        }
        case SP_OP_CONCATENATE:
            st = check_concatenate(c, op, orig);
            cm_free(orig);
            break;
        case SP_OP_SDY_NAMED_COMPUTATION:
        case SP_OP_SDY_RETURN:
        case SP_OP_FUNC_RETURN:
        case SP_OP_FUNC_CALL:
            break;
        default:
            if (strncmp(o->name, "sdy.", 4) == 0 && !is_stablehlo(o)) {
                op_fail(c, op, NULL);
                return CM_EINVAL;
            }
            break;
        }
        if (st != CM_OK) {
            return st;
        }
        if (!regions) {
            /* replaced: the new ops sit at i.. and the old one is gone */
            i += m->blocks[block].n_ops - n_before;
            continue;
        }
        o = &m->ops[op];
        if (o->kind != SP_OP_FUNC_FUNC) {
            for (uint32_t r = 0; r < o->n_results && st == CM_OK; r++) {
                st = localize_value(c, o->first_result + r, op);
            }
            if (o->kind == SP_OP_SDY_NAMED_COMPUTATION && o->n_regions > 0 &&
                o->regions[0].n_blocks > 0) {
                const sp_block *bb = &m->blocks[o->regions[0].blocks[0]];
                for (uint32_t a = 0; a < bb->n_args && st == CM_OK; a++) {
                    st = localize_value(c, bb->first_arg + a, op);
                }
            }
        }
        for (uint32_t r = 0; r < m->ops[op].n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks && st == CM_OK; k++) {
                st = convert_block(c, m->ops[op].regions[r].blocks[k]);
            }
        }
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* The largest channel handle of the module's ops (recursively), or 0. */
static int64_t max_channel(const sp_module *m, uint32_t block)
{
    int64_t best = 0;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        const sp_attr *a = sp_op_attr(m, op, "channel_handle");
        if (a != NULL && a->kind == SP_ATTR_PARAMS) {
            for (uint32_t k = 0; k < a->u.params.n; k++) {
                const sp_attr *h = a->u.params.items[k].value;
                if (strcmp(a->u.params.items[k].name, "handle") == 0 && h->kind == SP_ATTR_INT &&
                    h->u.i.v > best) {
                    best = h->u.i.v;
                }
            }
        }
        const sp_op *o = &m->ops[op];
        for (uint32_t r = 0; r < o->n_regions; r++) {
            for (uint32_t k = 0; k < o->regions[r].n_blocks; k++) {
                int64_t x = max_channel(m, o->regions[r].blocks[k]);
                best = x > best ? x : best;
            }
        }
    }
    return best;
}

cm_status sp_pass_convert_global_to_local(sp_module *m, const sp_g2l_opts *o, sp_diags *d,
                                          cm_error *err)
{
    if (o->replica_count > 1 && o->partition_count > 1) {
        sp_diags_add(d, m, SP_NONE, SP_DIAG_ERROR,
                     "Shardy partitioner convert_global_to_local does not support both "
                     "replica_count > 1 and partition_count > 1 yet.");
        return cm_error_set(err, CM_EINVAL, NULL, "replica_count and partition_count both exceed 1");
    }
    g2l c = {m, o, d, err, 0, m->n_values, NULL, NULL, NULL, false};
    c.repl = cm_alloc(sizeof *c.repl * ((size_t)m->n_values + 1));
    c.gty = cm_alloc(sizeof *c.gty * ((size_t)m->n_values + 1));
    c.arg_sh = cm_calloc((size_t)m->n_values + 1, sizeof *c.arg_sh);
    if (c.repl == NULL || c.arg_sh == NULL || c.gty == NULL) {
        cm_free(c.repl);
        cm_free(c.gty);
        cm_free(c.arg_sh);
        return cm_error_oom(err);
    }
    for (uint32_t v = 0; v < m->n_values; v++) {
        c.repl[v] = SP_NONE;
        c.gty[v] = m->values[v].type;
    }
    c.next_channel = max_channel(m, m->body) + 1;
    cm_status st = collect_arg_shardings(&c, m->body);
    if (st == CM_OK) {
        st = convert_block(&c, m->body);
    }
    cm_free(c.repl);
    cm_free(c.gty);
    cm_free(c.arg_sh);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (st != CM_OK || c.failed) {
        return cm_error_set(err, CM_EINVAL, NULL, "-sdy-convert-global-to-local failed");
    }
    return CM_OK;
}
