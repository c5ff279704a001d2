/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-resolve-permutation-factors (Shardy's
 * export/resolve_permutation_factors.cc; see sp_export.h). A dimension an
 * op's rule maps to a permutation factor (pad, slice, reverse, windows)
 * moves data between devices when it is sharded. With halo exchange a pad
 * or slice that needs neighbouring shards gets them through
 * stablehlo.collective_permute inside an sdy.manual_computation, and a
 * reverse runs on a mesh whose device order along the reversed axes is
 * flipped (after shifting non-divisible padding to the low side); every
 * other case, and everything without halo exchange, replicates the
 * permutation factors with sdy.reshard before the op and reshards the
 * results back; a reshape of non-divisible shardings gets a halo exchange
 * or reshards of its own. Ops are visited after the ops of their regions,
 * each block's ops in order, ops created for an op not visited again. */
#include "sp_export.h"
#include "sp_export_int.h"

#include <stdio.h>
#include <string.h>

#include "sp_ax.h"
#include "sp_ops.h"
#include "sp_rules.h"

#define MAX_HOPS    64        /* neighbours gathered per dimension at most */
#define MAX_DEVICES (1 << 16) /* halo exchange on meshes up to this size (tables per device) */

typedef struct rpf {
    sp_module *m;
    bool halo;
    int64_t replica_count, partition_count;
    int64_t next_channel;
    int64_t uniquing; /* SymbolTable's renaming counter: name_0, name_1, ... */
    sp_value_map repl;      /* replaced values: uses still to redirect */
    sp_value_map repl_skip; /* per replaced value, the one op whose use stays */
    uint32_t at;            /* index of the op being visited in its block */
} rpf;

/* ---- meshes and shardings -------------------------------------------------------- */

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    if (s->mesh != NULL) {
        return s->mesh;
    }
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static bool mesh_is_maximal(const sp_mesh *mesh)
{
    return mesh->n_axes == 0;
}

static int64_t ref_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 1 : mesh->axes[i].size;
}

static int64_t ref_pre(const sp_axis_ref *r)
{
    return r->pre_size > 0 ? r->pre_size : 1;
}

static int64_t dim_shards(const sp_mesh *mesh, const sp_dim_sharding *d)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < d->n_axes; i++) {
        n *= ref_size(mesh, &d->axes[i]);
    }
    return n;
}

static bool fully_replicated(const sp_sharding *s)
{
    if (s == NULL) {
        return true;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return s->n_unreduced == 0;
}

/* A set of mesh axis names (manual axes), in insertion order. */
typedef struct nameset {
    const char *v[SP_MAX_RANK * 4];
    uint32_t n;
} nameset;

static bool ns_has(const nameset *s, const char *name)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static void ns_add(nameset *s, const char *name)
{
    if (!ns_has(s, name) && s->n < sizeof s->v / sizeof s->v[0]) {
        s->v[s->n++] = name;
    }
}

/* The product of the sizes of d's axes that are in manual. */
static int64_t manual_shards(const sp_mesh *mesh, const sp_dim_sharding *d, const nameset *manual)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < d->n_axes; i++) {
        if (ns_has(manual, d->axes[i].name)) {
            n *= ref_size(mesh, &d->axes[i]);
        }
    }
    return n;
}

/* s without the axes named in names (Shardy's removeAxesFromSharding: the
 * dimension axes go, replicated and unreduced axes stay). NULL when out of
 * memory. */
static sp_sharding *without_axes(sp_module *m, const sp_sharding *s, const nameset *names)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < c->dims[d].n_axes; i++) {
            if (!ns_has(names, c->dims[d].axes[i].name)) {
                c->dims[d].axes[k++] = c->dims[d].axes[i];
            }
        }
        c->dims[d].n_axes = k;
    }
    c->reduction = SP_REDUCTION_SUM;
    return c;
}

/* s on the mesh named name. */
static sp_sharding *on_mesh(sp_module *m, const sp_sharding *s, const char *name)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c != NULL) {
        c->mesh_name = name;
        c->mesh = NULL;
    }
    return c;
}

/* ---- device coordinates ------------------------------------------------------------- */

static void mesh_coords(const sp_mesh *mesh, int64_t index, int64_t *coords)
{
    for (uint32_t j = mesh->n_axes; j-- > 0;) {
        coords[j] = index % mesh->axes[j].size;
        index /= mesh->axes[j].size;
    }
}

static int64_t mesh_linear(const sp_mesh *mesh, const int64_t *coords)
{
    int64_t index = 0, mul = 1;
    for (uint32_t j = mesh->n_axes; j-- > 0;) {
        index += coords[j] * mul;
        mul *= mesh->axes[j].size;
    }
    return index;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The (source, target) device pairs that move each device's data shift
 * shards along the axes of one dimension (Shardy's
 * getDataShiftSourceTargetPairs); pairs whose target falls off the end are
 * left out. *pairs_out is heap memory (2 entries a pair) the caller frees.
 * Errors: CM_ENOMEM. */
static cm_status shift_pairs(const sp_mesh *mesh, const sp_axis_ref *axes, uint32_t n_axes,
                             int64_t shift, int64_t **pairs_out, uint32_t *n_out)
{
    int64_t total = sp_mesh_size(mesh);
    int64_t *pairs = cm_alloc(sizeof *pairs * (size_t)(2 * total + 1));
    if (pairs == NULL) {
        return CM_ENOMEM;
    }
    uint32_t n = 0;
    int64_t coords[SP_MAX_RANK], next[SP_MAX_RANK];
    for (int64_t i = 0; i < total; i++) {
        mesh_coords(mesh, i, coords);
        memcpy(next, coords, sizeof coords[0] * mesh->n_axes);
        int64_t carry = shift;
        for (uint32_t k = n_axes; k-- > 0 && carry != 0;) {
            int32_t mi = sp_mesh_axis_index(mesh, axes[k].name);
            if (mi < 0) {
                continue;
            }
            int64_t full = mesh->axes[mi].size, sub = ref_size(mesh, &axes[k]);
            int64_t post = full / (ref_pre(&axes[k]) * sub);
            int64_t subc = (coords[mi] / post) % sub, nsub = subc + carry;
            carry = floor_div(nsub, sub);
            int64_t wrapped = nsub - carry * sub;
            next[mi] += (wrapped - subc) * post;
        }
        if (carry == 0) {
            int64_t j = mesh_linear(mesh, next);
            bool ids = mesh->n_device_ids > 0 && (int64_t)mesh->n_device_ids == total;
            pairs[2 * n] = ids ? mesh->device_ids[i] : i;
            pairs[2 * n + 1] = ids ? mesh->device_ids[j] : j;
            n++;
        }
    }
    *pairs_out = pairs;
    *n_out = n;
    return CM_OK;
}

/* The index of device dev's shard along axes (Shardy's getShardIndex). */
static int64_t shard_index(const sp_mesh *mesh, int64_t dev, const sp_axis_ref *axes, uint32_t n)
{
    int64_t logical = dev;
    for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
        if (mesh->device_ids[i] == dev) {
            logical = i;
        }
    }
    int64_t coords[SP_MAX_RANK];
    mesh_coords(mesh, logical, coords);
    int64_t idx = 0;
    for (uint32_t a = 0; a < n; a++) {
        int32_t mi = sp_mesh_axis_index(mesh, axes[a].name);
        if (mi < 0) {
            continue;
        }
        int64_t size = ref_size(mesh, &axes[a]);
        int64_t post = mesh->axes[mi].size / (ref_pre(&axes[a]) * size);
        idx = idx * size + (coords[mi] / post) % size;
    }
    return idx;
}

/* ---- building ops ------------------------------------------------------------------- */

/* A builder inserting ops into block at index at (advanced per op). */
typedef struct bld {
    rpf *c;
    uint32_t block, at;
    uint32_t like; /* the op whose location new ops take */
    cm_status st;
} bld;

/* A new op with one result of type ty (none when ty is SP_NONE); its result,
 * SP_NONE after a failure. */
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
    if (b->like != SP_NONE) {
        m->ops[op].loc = m->ops[b->like].loc;
        m->ops[op].where = m->ops[b->like].where;
    }
    if (op_out != NULL) {
        *op_out = op;
    }
    return ty == SP_NONE ? SP_NONE : m->ops[op].first_result;
}

static void set_attr(bld *b, uint32_t op, const char *name, sp_attr *a)
{
    if (b->st == CM_OK && op != SP_NONE) {
        b->st = a == NULL ? CM_ENOMEM : sp_op_set_attr(b->c->m, op, name, a);
    }
}

static void set_sharding(bld *b, uint32_t v, sp_sharding *s)
{
    if (b->st == CM_OK && v != SP_NONE) {
        b->st = s == NULL ? CM_ENOMEM : sp_value_set_sharding(b->c->m, v, s);
    }
}

static sp_attr *int_attr(sp_module *m, int64_t v)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
    if (a != NULL) {
        a->u.i.v = v;
        a->u.i.type = NULL;
    }
    return a;
}

static sp_attr *i64_attr(sp_module *m, int64_t v)
{
    sp_attr *a = int_attr(m, v);
    if (a != NULL) {
        a->u.i.type = "i64";
    }
    return a;
}

/* `dense<...> : tensor<dims x e>` of the n integers v, row major (a splat
 * when all are equal, as MLIR prints it). */
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
    if (splat || rank == 0) {
        cm_buf_put_i64(&b, n > 0 ? v[0] : 0);
    } else {
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
            for (uint32_t d = rank; d-- > 0;) {
                stride *= (size_t)dims[d];
                if ((i + 1) % stride != 0) {
                    break;
                }
                cm_buf_putc(&b, ']');
            }
            if (i + 1 < n) {
                cm_buf_puts(&b, ", ");
            }
        }
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *ints = cm_arena_alloc(&m->arena, sizeof *ints * (n + 1));
    const char *body = b.oom ? NULL : sp_module_str(m, b.data, b.len);
    cm_buf_fini(&b);
    if (a == NULL || body == NULL || ints == NULL) {
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

static uint32_t tensor_type(bld *b, sp_elem e, const int64_t *dims, uint32_t rank)
{
    uint32_t ty = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_module_tensor_type(b->c->m, e, dims, rank, &ty, NULL);
    }
    return ty;
}

/* The type of value v with dims in place of its own. */
static uint32_t retype(bld *b, uint32_t v, const int64_t *dims)
{
    const sp_type *t = sp_value_type(b->c->m, v);
    return tensor_type(b, t->elem, dims, t->rank);
}

/* `stablehlo.constant dense<v> : tensor<i64>`. */
static uint32_t const_i64(bld *b, int64_t v)
{
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, tensor_type(b, SP_ELEM_I64, NULL, 0), &op);
    set_attr(b, op, "value", dense_int(b->c->m, SP_ELEM_I64, &v, 1, NULL, 0));
    return r;
}

/* A zero scalar `stablehlo.constant` of element type e. */
static uint32_t zero_scalar(bld *b, sp_elem e)
{
    sp_module *m = b->c->m;
    uint32_t op = SP_NONE, ty = tensor_type(b, e, NULL, 0);
    uint32_t r = emit(b, "stablehlo.constant", NULL, 0, ty, &op);
    if (r == SP_NONE) {
        return r;
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *z = cm_arena_zalloc(&m->arena, sizeof *z);
    if (a == NULL || z == NULL) {
        b->st = CM_ENOMEM;
        return SP_NONE;
    }
    bool is_int = e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
    a->u.dense.body = e == SP_ELEM_I1 ? "false" : is_int ? "0" : "0.000000e+00";
    a->u.dense.type = ty;
    a->u.dense.ints = is_int ? z : NULL;
    a->u.dense.n_ints = is_int ? 1 : 0;
    set_attr(b, op, "value", a);
    return r;
}

static uint32_t binary(bld *b, const char *name, uint32_t x, uint32_t y)
{
    uint32_t ops[2] = {x, y};
    return x == SP_NONE || y == SP_NONE ? SP_NONE
                                        : emit(b, name, ops, 2, b->c->m->values[x].type, NULL);
}

/* `stablehlo.slice v [start:limit]` with sharding s. */
static uint32_t slice_op(bld *b, uint32_t v, const int64_t *start, const int64_t *limit,
                         sp_sharding *s)
{
    sp_module *m = b->c->m;
    if (v == SP_NONE) {
        return SP_NONE;
    }
    uint32_t rank = sp_value_type(m, v)->rank;
    int64_t dims[SP_MAX_RANK], one[SP_MAX_RANK];
    for (uint32_t i = 0; i < rank; i++) {
        dims[i] = limit[i] - start[i];
        one[i] = 1;
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.slice", &v, 1, retype(b, v, dims), &op);
    set_attr(b, op, "start_indices", sp_exp_i64_array(m, start, rank));
    set_attr(b, op, "limit_indices", sp_exp_i64_array(m, limit, rank));
    set_attr(b, op, "strides", sp_exp_i64_array(m, one, rank));
    if (s != NULL) {
        set_sharding(b, r, s);
    }
    return r;
}

/* `stablehlo.pad v, pv, low, high, interior` with sharding s (none when NULL). */
static uint32_t pad_op(bld *b, uint32_t v, uint32_t pv, const int64_t *low, const int64_t *high,
                       const int64_t *interior, sp_sharding *s)
{
    sp_module *m = b->c->m;
    if (v == SP_NONE || pv == SP_NONE) {
        b->st = b->st == CM_OK ? CM_ENOMEM : b->st;
        return SP_NONE;
    }
    const sp_type *t = sp_value_type(m, v);
    uint32_t rank = t->rank;
    int64_t dims[SP_MAX_RANK];
    for (uint32_t i = 0; i < rank; i++) {
        dims[i] = t->dims[i] > 0 ? (t->dims[i] - 1) * (interior[i] + 1) + 1 + low[i] + high[i]
                                 : low[i] + high[i];
    }
    uint32_t ops[2] = {v, pv}, op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.pad", ops, 2, retype(b, v, dims), &op);
    set_attr(b, op, "edge_padding_low", sp_exp_i64_array(m, low, rank));
    set_attr(b, op, "edge_padding_high", sp_exp_i64_array(m, high, rank));
    set_attr(b, op, "interior_padding", sp_exp_i64_array(m, interior, rank));
    if (s != NULL) {
        set_sharding(b, r, s);
    }
    return r;
}

/* `sdy.reshard v <s>`. */
static uint32_t reshard_op(bld *b, uint32_t v, sp_sharding *s)
{
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "sdy.reshard", &v, 1, v == SP_NONE ? SP_NONE : b->c->m->values[v].type,
                      &op);
    sp_attr *a = sp_attr_new(b->c->m, SP_ATTR_SHARDING);
    if (a != NULL) {
        a->u.sharding = s;
    }
    set_attr(b, op, "sharding", s == NULL ? NULL : a);
    return r;
}

/* `stablehlo.concatenate parts..., dim = d` with sharding s. */
static uint32_t concat_op(bld *b, const uint32_t *parts, uint32_t n, uint32_t d, sp_sharding *s)
{
    sp_module *m = b->c->m;
    for (uint32_t i = 0; i < n; i++) {
        if (parts[i] == SP_NONE) {
            b->st = b->st == CM_OK ? CM_ENOMEM : b->st;
            return SP_NONE;
        }
    }
    const sp_type *t = sp_value_type(m, parts[0]);
    int64_t dims[SP_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims[0] * t->rank);
    dims[d] = 0;
    for (uint32_t i = 0; i < n; i++) {
        dims[d] += sp_value_type(m, parts[i])->dims[d];
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.concatenate", parts, n, retype(b, parts[0], dims), &op);
    set_attr(b, op, "dimension", i64_attr(m, d));
    set_sharding(b, r, s);
    return r;
}

/* `#stablehlo.channel_handle<handle = h, type = 1>` with the next handle. */
static sp_attr *channel_attr(rpf *c)
{
    sp_module *m = c->m;
    sp_attr *a = sp_attr_new(m, SP_ATTR_PARAMS);
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof *items * 2);
    sp_attr *h = int_attr(m, c->next_channel++), *t = int_attr(m, 1);
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

/* `stablehlo.collective_permute v` over the n pairs. */
static uint32_t permute_op(bld *b, uint32_t v, const int64_t *pairs, uint32_t n)
{
    sp_module *m = b->c->m;
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.collective_permute", &v, 1,
                      v == SP_NONE ? SP_NONE : m->values[v].type, &op);
    int64_t dims[2] = {n, 2};
    set_attr(b, op, "channel_handle", channel_attr(b->c));
    set_attr(b, op, "source_target_pairs", dense_int(m, SP_ELEM_I64, pairs, 2 * (size_t)n, dims, 2));
    return r;
}

/* The device id as a scalar i64: replica_id when replica_count > 1, else
 * partition_id, converted from ui32 (Shardy's getDeviceId). */
static uint32_t device_id(bld *b)
{
    const char *name =
        b->c->replica_count > 1 ? "stablehlo.replica_id" : "stablehlo.partition_id";
    uint32_t id = emit(b, name, NULL, 0, tensor_type(b, SP_ELEM_UI32, NULL, 0), NULL);
    return emit(b, "stablehlo.convert", &id, 1, tensor_type(b, SP_ELEM_I64, NULL, 0), NULL);
}

/* Redirects the uses of value from to value to, except those of op skip
 * (SP_NONE: none). The uses are rewritten as the walk reaches them
 * (forward_operands), so each replacement costs O(1), not a module scan. */
static cm_status replace_uses(rpf *c, uint32_t from, uint32_t to, uint32_t skip)
{
    cm_status st = sp_value_map_set(&c->repl, from, to);
    if (st == CM_OK && skip != SP_NONE) {
        st = sp_value_map_set(&c->repl_skip, from, skip);
    }
    return st;
}

/* Rewrites the operands of op that were replaced (chains followed). */
static void forward_operands(rpf *c, uint32_t op)
{
    sp_module *m = c->m;
    if (c->repl.map.n == 0) {
        return;
    }
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        for (int guard = 0; guard < 64; guard++) {
            uint32_t v = m->ops[op].operands[i];
            uint32_t to = sp_value_map_get(&c->repl, v);
            if (to == SP_NONE || sp_value_map_get(&c->repl_skip, v) == op) {
                break;
            }
            m->ops[op].operands[i] = to;
        }
    }
}

/* The module's largest channel handle plus one (Shardy's getNextChannelId). */
static int64_t next_channel(const sp_module *m)
{
    int64_t best = 0;
    for (uint32_t op = 0; op < m->n_ops; op++) {
        const sp_attr *a = sp_op_attr(m, op, "channel_handle");
        if (a == NULL || a->kind != SP_ATTR_PARAMS || m->ops[op].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < a->u.params.n; k++) {
            const sp_attr *h = a->u.params.items[k].value;
            if (strcmp(a->u.params.items[k].name, "handle") == 0 && h->kind == SP_ATTR_INT &&
                h->u.i.v > best) {
                best = h->u.i.v;
            }
        }
    }
    return best + 1;
}

/* ---- replication ------------------------------------------------------------------- */

static const int64_t *darr(const sp_module *m, uint32_t op, const char *name, uint32_t rank)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    return a != NULL && a->kind == SP_ATTR_DENSE_ARRAY && a->u.darr.n == rank ? a->u.darr.v
                                                                             : NULL;
}

/* Shardy's isCommunicationFreeSliceDim: slicing dimension d of the operand
 * (sharded by s) keeps every device's data on it. */
static bool slice_dim_comm_free(const sp_module *m, uint32_t op, const sp_sharding *s,
                                const sp_mesh *mesh, uint32_t d)
{
    int64_t shards = dim_shards(mesh, &s->dims[d]);
    if (shards <= 1) {
        return true;
    }
    const sp_type *in = sp_value_type(m, m->ops[op].operands[0]);
    const sp_type *out = sp_value_type(m, m->ops[op].first_result);
    const int64_t *start = darr(m, op, "start_indices", in->rank);
    const int64_t *strides = darr(m, op, "strides", in->rank);
    if (start == NULL || start[d] != 0 || (strides != NULL && strides[d] != 1) ||
        in->dims[d] < 0 || out->dims[d] < 0) {
        return false;
    }
    return ceil_div(in->dims[d], shards) == ceil_div(out->dims[d], shards);
}

/* Shardy's isCommunicationFreePadDim. */
static bool pad_dim_comm_free(const sp_module *m, uint32_t op, const sp_sharding *s,
                              const sp_mesh *mesh, uint32_t d)
{
    int64_t shards = dim_shards(mesh, &s->dims[d]);
    if (shards <= 1) {
        return true;
    }
    const sp_type *in = sp_value_type(m, m->ops[op].operands[0]);
    const sp_type *out = sp_value_type(m, m->ops[op].first_result);
    const int64_t *low = darr(m, op, "edge_padding_low", in->rank);
    const int64_t *interior = darr(m, op, "interior_padding", in->rank);
    if (low == NULL || interior == NULL || interior[d] != 0 || in->dims[d] < 0) {
        return false;
    }
    int64_t s_in = ceil_div(in->dims[d], shards), s_out = ceil_div(out->dims[d], shards);
    for (int64_t t = 0; t < shards; t++) {
        int64_t start = t * s_out - low[d], limit = start + s_out - 1;
        int64_t vs = start > 0 ? start : 0, vl = limit < in->dims[d] - 1 ? limit : in->dims[d] - 1;
        if (vs <= vl && (vs / s_in != t || vl / s_in != t)) {
            return false;
        }
    }
    return true;
}

/* Shardy's shouldReshardToCommonMesh: s shards something on a mesh whose
 * device order differs from the common mesh's. */
static bool other_devices(const sp_module *m, const sp_sharding *s, const sp_mesh *common)
{
    const sp_mesh *mesh = mesh_of(m, s);
    if (fully_replicated(s) || mesh == NULL || mesh == common) {
        return false;
    }
    if (mesh->n_device_ids != common->n_device_ids) {
        return true;
    }
    for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
        if (mesh->device_ids[i] != common->device_ids[i]) {
            return true;
        }
    }
    return false;
}

/* The sharding of tensor s (mapping tm of the rule) on the mesh named
 * mesh_name with the axes of the factors flagged in clear removed, or NULL
 * when nothing changes and force is false (*changed false). A dimension holding a cleared factor among several loses its
 * axes from that factor on. */
static sp_sharding *cleared(sp_module *m, const sp_sharding *s, const sp_tensor_mapping *tm,
                            const bool *clear, const char *mesh_name, bool force, bool *changed)
{
    *changed = false;
    if (s == NULL || tm->rank != s->rank) {
        return NULL;
    }
    *changed = force;
    for (uint32_t d = 0; d < tm->rank; d++) {
        for (uint32_t k = 0; k < tm->dims[d].n_factors; k++) {
            if (clear[tm->dims[d].factors[k]] && s->dims[d].n_axes > 0) {
                *changed = true;
            }
        }
    }
    if (!*changed) {
        return NULL;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    c->mesh_name = mesh_name;
    c->mesh = NULL;
    for (uint32_t d = 0; d < tm->rank; d++) {
        for (uint32_t k = 0; k < tm->dims[d].n_factors; k++) {
            if (clear[tm->dims[d].factors[k]]) {
                c->dims[d].n_axes = 0;
            }
        }
    }
    return c;
}

/* Shardy's resolvePermutationFactorsViaReplication: the permutation factors
 * of op's rule (but communication-free slice and pad dimensions) lose their
 * axes; operands that had some are resharded before op, and results
 * computed with the new sharding are resharded back after it. */
static cm_status replicate(rpf *c, uint32_t op, const sp_rule *rule)
{
    sp_module *m = c->m;
    sp_op *o = &m->ops[op];
    uint32_t n_in = o->n_operands, n_out = o->n_results;
    if (rule->n_operands != n_in || rule->n_results != n_out) {
        return CM_OK;
    }
    sp_sharding *in[64], *out[64];
    if (n_in > 64 || n_out > 64) {
        return CM_OK;
    }
    /* Shardy's getCommonMeshOrRef, device order ignored: the first sharding
     * on a mesh with axes (a mesh without axes gives way), others on
     * meshes without axes skipped; any other axes: no common mesh; among
     * equal ones the one without explicit device ids wins */
    const sp_sharding *first = NULL;
    for (uint32_t i = 0; i < n_in + n_out; i++) {
        sp_sharding *s = i < n_in ? sp_value_sharding_partitioned(m, o->operands[i])
                                  : sp_value_sharding_partitioned(m, o->first_result + i - n_in);
        if (i < n_in) {
            in[i] = s;
        } else {
            out[i - n_in] = s;
        }
        const sp_mesh *mesh = mesh_of(m, s);
        if (s == NULL || mesh == NULL) {
            continue;
        }
        const sp_mesh *fm = mesh_of(m, first);
        if (first == NULL || fm->n_axes == 0) {
            first = s;
            continue;
        }
        if (mesh->n_axes == 0) {
            continue;
        }
        bool same = fm->n_axes == mesh->n_axes;
        for (uint32_t k = 0; same && k < fm->n_axes; k++) {
            same = strcmp(fm->axes[k].name, mesh->axes[k].name) == 0 &&
                   fm->axes[k].size == mesh->axes[k].size;
        }
        if (!same) {
            return CM_OK;
        }
        if (mesh->n_device_ids == 0) {
            first = s;
        }
    }
    if (first == NULL || first->mesh_name == NULL || mesh_is_maximal(mesh_of(m, first))) {
        return CM_OK;
    }
    const char *mesh_name = first->mesh_name;
    const sp_mesh *mesh = mesh_of(m, first);
    bool *clear = cm_arena_zalloc(&m->arena, rule->n_factors + 1u);
    if (clear == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t f = 0; f < rule->n_factors; f++) {
        if (rule->factor_kind[f] != SP_FACTOR_PERMUTATION) {
            continue;
        }
        if ((o->kind == SP_OP_SLICE || o->kind == SP_OP_PAD) && in[0] != NULL &&
            f < in[0]->rank) {
            bool free = o->kind == SP_OP_SLICE ? slice_dim_comm_free(m, op, in[0], mesh, f)
                                               : pad_dim_comm_free(m, op, in[0], mesh, f);
            if (free) {
                continue;
            }
        }
        clear[f] = true;
    }
    bld b = {c, o->parent_block, c->at, op, CM_OK};
    for (uint32_t i = 0; i < n_in; i++) {
        bool changed;
        sp_sharding *s = cleared(m, in[i], &rule->operands[i], clear, mesh_name,
                                 other_devices(m, in[i], mesh), &changed);
        if (!changed) {
            continue;
        }
        uint32_t r = reshard_op(&b, m->ops[op].operands[i], s);
        if (b.st != CM_OK) {
            return b.st;
        }
        m->ops[op].operands[i] = r;
    }
    b.at++; /* past op, which the reshards before it pushed to b.at */
    for (uint32_t i = 0; i < n_out; i++) {
        bool changed;
        sp_sharding *s = cleared(m, out[i], &rule->results[i], clear, mesh_name,
                                 other_devices(m, out[i], mesh), &changed);
        if (!changed) {
            continue;
        }
        uint32_t v = m->ops[op].first_result + i;
        uint32_t r = reshard_op(&b, v, out[i]);
        if (b.st != CM_OK) {
            return b.st;
        }
        b.st = replace_uses(c, v, r, m->values[r].def);
        if (b.st != CM_OK) {
            return b.st;
        }
        b.st = sp_value_set_sharding(m, v, s);
        if (b.st != CM_OK) {
            return b.st;
        }
    }
    return b.st;
}

/* ---- halo exchange ------------------------------------------------------------------ */

/* What one sharded dimension needs (Shardy's DimExchangeInfo). */
typedef struct dimx {
    uint32_t dim;
    int64_t s_out;       /* aligned output shard size */
    int64_t s_footprint; /* input footprint per device */
    int64_t left, right; /* hops to the left and right neighbours */
    bool needs_comm;
    bool can_halo;
    /* a reshape group: the output axes the running device's shard index is
     * taken along, and per target shard its source shard (-1: none) and
     * offset in it; NULL otherwise */
    const sp_dim_sharding *target;
    const int64_t *src, *loff;
    int64_t n_shards;
} dimx;

/* What a tensor needs (Shardy's DataExchangeInfo). */
typedef struct datax {
    int64_t divisible[SP_MAX_RANK]; /* input shape padded to divide */
    nameset manual;                 /* axes of the sharded dimensions */
    dimx dims[SP_MAX_RANK];         /* one per sharded dimension */
    uint32_t n_dims;
} datax;

static bool datax_needs_comm(const datax *x)
{
    for (uint32_t i = 0; i < x->n_dims; i++) {
        if (x->dims[i].needs_comm) {
            return true;
        }
    }
    return false;
}

static bool datax_can_halo(const datax *x)
{
    for (uint32_t i = 0; i < x->n_dims; i++) {
        if (!x->dims[i].can_halo) {
            return false;
        }
    }
    return true;
}

/* Shardy's getDimExchangeInfo for one dimension of shards shards. */
static dimx dim_exchange(uint32_t dim, int64_t shards, int64_t s_in, int64_t s_out,
                         int64_t footprint, int64_t pad_low, int64_t stride, int64_t dilation,
                         int64_t in_size)
{
    dimx x = {dim, s_out, footprint, 0, 0, false, true, NULL, NULL, NULL, 0};
    for (int64_t t = 0; t < shards; t++) {
        int64_t start = (t * s_out * stride - pad_low) / dilation;
        int64_t limit = start + footprint - 1;
        int64_t vs = start > 0 ? start : 0, vl = limit < in_size - 1 ? limit : in_size - 1;
        int64_t src = -1, last = -1;
        if (vs <= vl) {
            src = vs / s_in;
            last = vl / s_in;
        }
        if ((src != -1 && src != t) || (last != -1 && last != t) || src == -1) {
            x.needs_comm = true;
        }
        if (src != -1 && src < t && t - src > x.left) {
            x.left = t - src;
        }
        if (last != -1 && last > t && last - t > x.right) {
            x.right = last - t;
        }
    }
    if (x.left + x.right + 1 >= shards && (x.left > 1 || x.right > 1)) {
        x.can_halo = false;
    }
    if (x.left > MAX_HOPS || x.right > MAX_HOPS) {
        x.can_halo = false;
    }
    return x;
}

/* The exchange a pad (is_pad) or slice op needs on its operand sharded by
 * s (Shardy's getPadDataExchangeInfo / getSliceDataExchangeInfo). */
static bool op_exchange(const sp_module *m, uint32_t op, bool is_pad, const sp_sharding *s,
                        const sp_mesh *mesh, datax *x)
{
    const sp_type *in = sp_value_type(m, m->ops[op].operands[0]);
    const sp_type *out = sp_value_type(m, m->ops[op].first_result);
    if (in->rank != s->rank || out->rank != in->rank || in->rank > SP_MAX_RANK) {
        return false;
    }
    const int64_t *low = darr(m, op, is_pad ? "edge_padding_low" : "start_indices", in->rank);
    const int64_t *interior = is_pad ? darr(m, op, "interior_padding", in->rank) : NULL;
    if (low == NULL || (is_pad && interior == NULL)) {
        return false;
    }
    memset(x, 0, sizeof *x);
    for (uint32_t d = 0; d < in->rank; d++) {
        x->divisible[d] = in->dims[d];
        int64_t shards = dim_shards(mesh, &s->dims[d]);
        if (shards <= 1) {
            continue;
        }
        if (in->dims[d] < 0 || out->dims[d] < 0) {
            return false;
        }
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            ns_add(&x->manual, s->dims[d].axes[k].name);
        }
        x->divisible[d] = ceil_div(in->dims[d], shards) * shards;
        int64_t s_in = x->divisible[d] / shards, s_out = ceil_div(out->dims[d], shards);
        x->dims[x->n_dims++] =
            is_pad ? dim_exchange(d, shards, s_in, s_out, s_out, low[d], 1, interior[d] + 1,
                                  in->dims[d])
                   : dim_exchange(d, shards, s_in, s_out, s_out, -low[d], 1, 1, in->dims[d]);
    }
    return true;
}

/* v padded at the high side to dims (Shardy's padHighSideToShape), with pad
 * value pv (SP_NONE: a new zero constant); v itself when it has them. */
static uint32_t pad_high_to(bld *b, uint32_t v, const int64_t *dims, uint32_t pv, sp_sharding *s)
{
    const sp_type *t = sp_value_type(b->c->m, v);
    int64_t zero[SP_MAX_RANK], high[SP_MAX_RANK];
    bool same = true;
    for (uint32_t i = 0; i < t->rank; i++) {
        zero[i] = 0;
        high[i] = dims[i] - t->dims[i];
        same = same && high[i] == 0;
    }
    if (same) {
        return v;
    }
    if (pv == SP_NONE) {
        pv = zero_scalar(b, t->elem);
    }
    return pad_op(b, v, pv, zero, high, zero, s);
}

/* v sliced at the high side to dims (Shardy's sliceHighSideToShape). */
static uint32_t slice_high_to(bld *b, uint32_t v, const int64_t *dims, sp_sharding *s)
{
    if (v == SP_NONE) {
        return v;
    }
    const sp_type *t = sp_value_type(b->c->m, v);
    int64_t zero[SP_MAX_RANK];
    bool same = true;
    for (uint32_t i = 0; i < t->rank; i++) {
        zero[i] = 0;
        same = same && dims[i] == t->dims[i];
    }
    return same ? v : slice_op(b, v, zero, dims, s);
}

/* Shardy's convertPartitionIdToIdInGroup: the index of the running device's
 * shard along the axes of d, from device id id (i64): a lookup table for a
 * mesh with device ids, else division and remainder per axis. */
static uint32_t id_in_group(bld *b, uint32_t id, const sp_mesh *mesh, const sp_dim_sharding *d)
{
    sp_module *m = b->c->m;
    int64_t total = sp_mesh_size(mesh);
    if (mesh->n_device_ids > 0) {
        int64_t *table = cm_arena_alloc(&m->arena, sizeof *table * (size_t)(total + 1));
        if (table == NULL) {
            b->st = CM_ENOMEM;
            return SP_NONE;
        }
        for (int64_t dev = 0; dev < total; dev++) {
            table[dev] = shard_index(mesh, dev, d->axes, d->n_axes);
        }
        uint32_t op = SP_NONE;
        uint32_t c = emit(b, "stablehlo.constant", NULL, 0,
                          tensor_type(b, SP_ELEM_I64, &total, 1), &op);
        set_attr(b, op, "value", dense_int(m, SP_ELEM_I64, table, (size_t)total, &total, 1));
        int64_t one = 1;
        uint32_t ops[2] = {c, id};
        uint32_t ds = emit(b, "stablehlo.dynamic_slice", ops, 2,
                           tensor_type(b, SP_ELEM_I64, &one, 1), &op);
        set_attr(b, op, "slice_sizes", sp_exp_i64_array(m, &one, 1));
        return emit(b, "stablehlo.reshape", &ds, 1, tensor_type(b, SP_ELEM_I64, NULL, 0), NULL);
    }
    uint32_t acc = SP_NONE;
    for (uint32_t a = 0; a < d->n_axes; a++) {
        int32_t mi = sp_mesh_axis_index(mesh, d->axes[a].name);
        if (mi < 0) {
            continue;
        }
        int64_t size = ref_size(mesh, &d->axes[a]), suffix = 1;
        for (uint32_t k = (uint32_t)mi + 1; k < mesh->n_axes; k++) {
            suffix *= mesh->axes[k].size;
        }
        int64_t stride = mesh->axes[mi].size / (ref_pre(&d->axes[a]) * size);
        int64_t divisor = suffix * stride;
        uint32_t coord = id;
        if (divisor > 1) {
            coord = binary(b, "stablehlo.divide", coord, const_i64(b, divisor));
        }
        if (size < total) {
            coord = binary(b, "stablehlo.remainder", coord, const_i64(b, size));
        }
        if (acc == SP_NONE) {
            acc = coord;
        } else {
            acc = binary(b, "stablehlo.multiply", acc, const_i64(b, size));
            acc = binary(b, "stablehlo.add", acc, coord);
        }
    }
    return acc == SP_NONE ? const_i64(b, 0) : acc;
}

/* Shardy's assembleHaloExchangeBuffer: the left neighbours (farthest
 * first), the local shard and the right neighbours of local along dim,
 * concatenated and padded on both sides by edge (interior padding
 * interior). */
static uint32_t halo_buffer(bld *b, uint32_t local, uint32_t dim, int64_t edge, uint32_t pv,
                            const dimx *x, const sp_sharding *s, const sp_mesh *mesh,
                            const nameset *manual, sp_sharding *local_s, int64_t interior)
{
    sp_axis_ref axes[SP_MAX_RANK];
    uint32_t n_axes = 0;
    const sp_dim_sharding *ds = x->target != NULL ? x->target : &s->dims[dim];
    for (uint32_t k = 0; k < ds->n_axes && n_axes < SP_MAX_RANK; k++) {
        if (ns_has(manual, ds->axes[k].name)) {
            axes[n_axes++] = ds->axes[k];
        }
    }
    uint32_t parts[2 * MAX_HOPS + 1], n = 0;
    for (int64_t off = x->left; off >= -x->right; off--) {
        if (off == 0) {
            parts[n++] = local;
            continue;
        }
        int64_t *pairs = NULL;
        uint32_t np = 0;
        if (b->st == CM_OK) {
            b->st = shift_pairs(mesh, axes, n_axes, off, &pairs, &np);
        }
        if (b->st != CM_OK) {
            return SP_NONE;
        }
        parts[n++] = np == 0 ? local : permute_op(b, local, pairs, np);
        cm_free(pairs);
    }
    uint32_t cat = concat_op(b, parts, n, dim, local_s);
    if (cat == SP_NONE) {
        return SP_NONE;
    }
    int64_t lo[SP_MAX_RANK] = {0}, in[SP_MAX_RANK] = {0};
    lo[dim] = edge;
    in[dim] = interior;
    return pad_op(b, cat, pv, lo, lo, in, local_s);
}

/* Shardy's exchangeDimWithDynamicOffset for pad and slice (a dilated
 * buffer): the halo buffer of dim, sliced at the running device's offset. */
static uint32_t exchange_dim(bld *b, uint32_t local, uint32_t pv, const dimx *x,
                             const sp_sharding *s, const sp_mesh *mesh, const nameset *manual,
                             sp_sharding *local_s, int64_t pad_low, int64_t dilation)
{
    sp_module *m = b->c->m;
    uint32_t dim = x->dim;
    uint32_t buf = halo_buffer(b, local, dim, x->s_footprint * dilation, pv, x, s, mesh, manual,
                               local_s, dilation - 1);
    uint32_t id = device_id(b);
    if (buf == SP_NONE || id == SP_NONE) {
        return SP_NONE;
    }
    int64_t s_in = sp_value_type(m, local)->dims[dim];
    int64_t s_in_dil = s_in * dilation;
    int64_t s_out = x->s_out == 0 ? x->s_footprint : x->s_out;
    int64_t diff = s_out - s_in_dil;
    int64_t base = -pad_low + x->left * s_in_dil + x->s_footprint * dilation;
    uint32_t grp = id_in_group(b, id, mesh, x->target != NULL ? x->target : &s->dims[dim]);
    uint32_t off, zero;
    if (x->target != NULL) {
        /* a reshape group: each target shard's offset from a table */
        int64_t *offs = cm_arena_alloc(&m->arena, sizeof *offs * (size_t)(x->n_shards + 1));
        if (offs == NULL) {
            b->st = CM_ENOMEM;
            return SP_NONE;
        }
        for (int64_t t = 0; t < x->n_shards; t++) {
            int64_t src = x->src[t] != -1 ? x->src[t] : t;
            offs[t] = -pad_low + x->s_footprint + (x->left + src - t) * s_in + x->loff[t];
        }
        int64_t n = x->n_shards, one = 1;
        uint32_t top = SP_NONE;
        uint32_t tab = emit(b, "stablehlo.constant", NULL, 0, tensor_type(b, SP_ELEM_I64, &n, 1),
                            &top);
        set_attr(b, top, "value", dense_int(m, SP_ELEM_I64, offs, (size_t)n, &n, 1));
        uint32_t dops[2] = {tab, grp};
        uint32_t ds = emit(b, "stablehlo.dynamic_slice", dops, 2,
                           tensor_type(b, SP_ELEM_I64, &one, 1), &top);
        set_attr(b, top, "slice_sizes", sp_exp_i64_array(m, &one, 1));
        off = emit(b, "stablehlo.reshape", &ds, 1, tensor_type(b, SP_ELEM_I64, NULL, 0), NULL);
        zero = const_i64(b, 0);
    } else {
        uint32_t dv = const_i64(b, diff), bv = const_i64(b, base);
        off = binary(b, "stablehlo.add", binary(b, "stablehlo.multiply", grp, dv), bv);
        zero = const_i64(b, 0);
        off = binary(b, "stablehlo.maximum", off, zero);
    }
    if (off == SP_NONE) {
        return SP_NONE;
    }
    sp_type btt = *sp_value_type(m, buf);
    const sp_type *bt = &btt;
    uint32_t rank = bt->rank;
    uint32_t ops[1 + SP_MAX_RANK];
    int64_t sizes[SP_MAX_RANK];
    ops[0] = buf;
    for (uint32_t i = 0; i < rank; i++) {
        ops[1 + i] = i == dim ? off : zero;
        sizes[i] = i == dim ? x->s_footprint : bt->dims[i];
    }
    uint32_t op = SP_NONE;
    uint32_t r = emit(b, "stablehlo.dynamic_slice", ops, 1 + rank, retype(b, buf, sizes), &op);
    set_attr(b, op, "slice_sizes", sp_exp_i64_array(m, sizes, rank));
    set_sharding(b, r, local_s);
    return r;
}

/* The manual axes of a manual computation: those of manual, in mesh order. */
static sp_attr *manual_axes_attr(sp_module *m, const sp_mesh *mesh, const nameset *manual)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    sp_axis_ref *refs = cm_arena_zalloc(&m->arena, sizeof *refs * (mesh->n_axes + 1u));
    if (a == NULL || refs == NULL) {
        return NULL;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        if (ns_has(manual, mesh->axes[i].name)) {
            refs[n].name = mesh->axes[i].name;
            refs[n].pre_size = 0;
            refs[n].size = mesh->axes[i].size;
            n++;
        }
    }
    a->u.axes.axes = refs;
    a->u.axes.n = n;
    return a;
}

static sp_attr *sharding_list(sp_module *m, sp_sharding *const *s, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (a == NULL || items == NULL) {
        return NULL;
    }
    memcpy(items, s, sizeof *items * n);
    a->u.shardings.items = items;
    a->u.shardings.n = n;
    return a;
}

/* Starts an sdy.manual_computation of the n operands with in shardings ins,
 * one result of type rty sharded out, over the manual axes; body (the new
 * block, whose arguments have the local types largs) gets the caller's
 * builder; *mc is the op. */
static void manual_begin(bld *b, const uint32_t *operands, uint32_t n, sp_sharding *const *ins,
                         sp_sharding *out, uint32_t rty, const sp_mesh *mesh,
                         const nameset *manual, const uint32_t *largs, uint32_t *mc,
                         bld *body)
{
    sp_module *m = b->c->m;
    *mc = SP_NONE;
    uint32_t r = emit(b, "sdy.manual_computation", operands, n, rty, mc);
    (void)r;
    set_attr(b, *mc, "in_shardings", sharding_list(m, ins, n));
    set_attr(b, *mc, "out_shardings", sharding_list(m, &out, 1));
    set_attr(b, *mc, "manual_axes", manual_axes_attr(m, mesh, manual));
    uint32_t blk = SP_NONE;
    if (b->st == CM_OK) {
        b->st = sp_op_add_regions(m, *mc, 1);
    }
    if (b->st == CM_OK) {
        b->st = sp_module_new_block(m, *mc, &blk);
    }
    if (b->st == CM_OK) {
        b->st = sp_region_add_block(m, *mc, 0, blk);
    }
    for (uint32_t i = 0; i < n && b->st == CM_OK; i++) {
        uint32_t v;
        b->st = sp_module_add_block_arg(m, blk, largs[i], &v);
    }
    *body = (bld){b->c, blk, 0, b->like, b->st};
}

/* Ends the manual computation body with `sdy.return v`. */
static void manual_end(bld *b, bld *body, uint32_t v)
{
    if (body->st == CM_OK && v != SP_NONE) {
        uint32_t op;
        body->st = sp_module_new_op(b->c->m, body->block, "sdy.return", &v, 1, NULL, 0, &op);
    }
    if (b->st == CM_OK) {
        b->st = body->st == CM_OK && v == SP_NONE ? CM_ENOMEM : body->st;
    }
}

/* What a pad or slice does on the replicated dimensions, locally, after the
 * exchange (Shardy's handleReplicatedPadDims / handleReplicatedSliceDims). */
static uint32_t local_rest(bld *b, uint32_t op, bool is_pad, uint32_t v, uint32_t pv,
                           const int64_t *padded_out, const sp_sharding *s, const sp_mesh *mesh,
                           const nameset *manual, sp_sharding *local_s)
{
    sp_module *m = b->c->m;
    if (v == SP_NONE) {
        return v;
    }
    sp_type tt = *sp_value_type(m, v);
    const sp_type *t = &tt;
    uint32_t rank = t->rank;
    int64_t lo[SP_MAX_RANK] = {0}, hi[SP_MAX_RANK] = {0}, in[SP_MAX_RANK] = {0};
    int64_t st[SP_MAX_RANK] = {0}, lim[SP_MAX_RANK];
    bool need = false;
    const int64_t *a0 = darr(m, op, is_pad ? "edge_padding_low" : "start_indices", rank);
    const int64_t *a1 = darr(m, op, is_pad ? "edge_padding_high" : "limit_indices", rank);
    const int64_t *a2 = is_pad ? darr(m, op, "interior_padding", rank) : NULL;
    for (uint32_t i = 0; i < rank; i++) {
        lim[i] = t->dims[i];
        if (dim_shards(mesh, &s->dims[i]) > 1) {
            continue;
        }
        (void)padded_out;
        (void)manual;
        if (is_pad) {
            lo[i] = a0[i];
            hi[i] = a1[i];
            in[i] = a2[i];
            need = need || lo[i] != 0 || hi[i] != 0 || in[i] != 0;
        } else if (a0[i] != 0 || a1[i] != t->dims[i]) {
            st[i] = a0[i];
            lim[i] = a1[i];
            need = true;
        }
    }
    if (!need) {
        return v;
    }
    return is_pad ? pad_op(b, v, pv, lo, hi, in, local_s) : slice_op(b, v, st, lim, local_s);
}

/* Shardy's handlePadOp / handleSliceOp with halo exchange. *done is false
 * when halo exchange cannot do it (the caller replicates instead). */
static cm_status halo_pad_or_slice(rpf *c, uint32_t op, bool is_pad, bool *done)
{
    sp_module *m = c->m;
    *done = true;
    uint32_t in_v = m->ops[op].operands[0];
    sp_sharding *s = sp_value_sharding_partitioned(m, in_v);
    sp_type in_tt = *sp_value_type(m, in_v);
    const sp_type *in_t = &in_tt;
    if (fully_replicated(s) || in_t->kind != SP_TYPE_TENSOR) {
        return CM_OK;
    }
    const sp_mesh *mesh = mesh_of(m, s);
    if (mesh == NULL || mesh_is_maximal(mesh) || s->mesh_name == NULL) {
        return CM_OK;
    }
    if (sp_mesh_size(mesh) > MAX_DEVICES) {
        *done = false;
        return CM_OK;
    }
    datax x;
    if (!op_exchange(m, op, is_pad, s, mesh, &x)) {
        *done = false;
        return CM_OK;
    }
    if (x.manual.n == 0 || !datax_needs_comm(&x)) {
        return CM_OK;
    }
    if (!datax_can_halo(&x)) {
        *done = false;
        return CM_OK;
    }
    uint32_t rank = in_t->rank;
    sp_type out_tt = *sp_value_type(m, m->ops[op].first_result);
    const sp_type *out_t = &out_tt;
    int64_t out_dims[SP_MAX_RANK];
    memcpy(out_dims, out_t->dims, sizeof out_dims[0] * rank);
    bld b = {c, m->ops[op].parent_block, c->at, op, CM_OK};
    uint32_t pv_outer = is_pad ? m->ops[op].operands[1] : SP_NONE;
    uint32_t div = pad_high_to(&b, in_v, x.divisible, pv_outer, s);
    if (!is_pad) {
        pv_outer = zero_scalar(&b, in_t->elem);
    }
    sp_sharding *local_s = without_axes(m, s, &x.manual);
    sp_sharding *pv_s = sp_sharding_open(&m->arena, s->mesh_name, 0);
    int64_t local[SP_MAX_RANK], padded_out[SP_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++) {
        local[d] = x.divisible[d] / manual_shards(mesh, &s->dims[d], &x.manual);
        int64_t sc = dim_shards(mesh, &s->dims[d]);
        padded_out[d] = ceil_div(out_dims[d], sc) * sc;
    }
    if (local_s == NULL || pv_s == NULL || b.st != CM_OK || div == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    uint32_t largs[2] = {retype(&b, div, local), m->values[pv_outer].type};
    uint32_t operands[2] = {div, pv_outer}, mc;
    sp_sharding *ins[2] = {s, pv_s};
    bld body;
    manual_begin(&b, operands, 2, ins, s, retype(&b, in_v, padded_out), mesh, &x.manual, largs,
                 &mc, &body);
    if (b.st != CM_OK) {
        return b.st;
    }
    uint32_t blk = body.block;
    uint32_t cur = m->blocks[blk].first_arg, pv = cur + 1;
    const int64_t *low = darr(m, op, is_pad ? "edge_padding_low" : "start_indices", rank);
    const int64_t *interior = is_pad ? darr(m, op, "interior_padding", rank) : NULL;
    for (uint32_t k = 0; k < x.n_dims && cur != SP_NONE; k++) {
        if (!x.dims[k].needs_comm) {
            continue;
        }
        uint32_t d = x.dims[k].dim;
        int64_t pad_low = is_pad ? low[d] : -low[d];
        int64_t dil = is_pad ? interior[d] + 1 : 1;
        cur = exchange_dim(&body, cur, pv, &x.dims[k], s, mesh, &x.manual, local_s, pad_low, dil);
    }
    cur = local_rest(&body, op, is_pad, cur, pv, padded_out, s, mesh, &x.manual, local_s);
    manual_end(&b, &body, cur);
    if (b.st != CM_OK) {
        return b.st;
    }
    uint32_t res = slice_high_to(&b, m->ops[mc].first_result, out_dims, s);
    if (b.st != CM_OK || res == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    if (replace_uses(c, m->ops[op].first_result, res, SP_NONE) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_block_remove_op(m, m->ops[op].parent_block, b.at);
    return CM_OK;
}

/* ---- reverse ------------------------------------------------------------------------ */

/* mesh with the device order along each of the axes reversed (Shardy's
 * getMeshWithReversedAxes), in m's arena; NULL when out of memory. */
static sp_mesh *reversed_mesh(sp_module *m, const sp_mesh *mesh, const sp_axis_ref *axes,
                              uint32_t n)
{
    int64_t total = sp_mesh_size(mesh);
    sp_mesh *r = cm_arena_zalloc(&m->arena, sizeof *r);
    int64_t *ids = cm_arena_alloc(&m->arena, sizeof *ids * (size_t)(total + 1));
    if (r == NULL || ids == NULL || total > UINT32_MAX) {
        return NULL;
    }
    int64_t coords[SP_MAX_RANK];
    bool has_ids = mesh->n_device_ids > 0 && (int64_t)mesh->n_device_ids == total;
    for (int64_t i = 0; i < total; i++) {
        mesh_coords(mesh, i, coords);
        int64_t orig[SP_MAX_RANK];
        memcpy(orig, coords, sizeof coords[0] * mesh->n_axes);
        for (uint32_t k = 0; k < n; k++) {
            int32_t mi = sp_mesh_axis_index(mesh, axes[k].name);
            if (mi < 0) {
                continue;
            }
            int64_t full = mesh->axes[mi].size, sub = ref_size(mesh, &axes[k]);
            int64_t post = full / (ref_pre(&axes[k]) * sub);
            int64_t subc = (orig[mi] / post) % sub;
            coords[mi] += (sub - 1 - 2 * subc) * post;
        }
        int64_t j = mesh_linear(mesh, coords);
        ids[i] = has_ids ? mesh->device_ids[j] : j;
    }
    r->axes = mesh->axes;
    r->n_axes = mesh->n_axes;
    r->device_ids = ids;
    r->n_device_ids = (uint32_t)total;
    return r;
}

/* The name of an sdy.mesh equal to mesh, or a new one named base (renamed
 * base_N as MLIR's symbol table does on a clash) at the top of the
 * module. NULL when out of memory. */
static const char *mesh_named(rpf *c, sp_mesh *mesh, const char *base)
{
    sp_module *m = c->m;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        if (m->ops[op].kind != SP_OP_SDY_MESH) {
            continue;
        }
        const sp_attr *ma = sp_op_attr(m, op, "mesh");
        const sp_attr *na = sp_op_attr(m, op, "sym_name");
        if (ma != NULL && ma->kind == SP_ATTR_MESH && na != NULL && na->kind == SP_ATTR_STRING &&
            sp_mesh_equal(ma->u.mesh, mesh)) {
            return na->u.str.s;
        }
    }
    char name[300];
    snprintf(name, sizeof name, "%s", base);
    while (sp_module_mesh(m, name) != NULL || sp_module_func(m, name) != SP_NONE) {
        snprintf(name, sizeof name, "%s_%lld", base, (long long)c->uniquing++);
    }
    uint32_t op;
    sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
    const char *s = sp_module_str(m, name, strlen(name));
    if (n == NULL || ms == NULL || s == NULL ||
        sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        return NULL;
    }
    n->u.str.s = s;
    n->u.str.len = strlen(s);
    ms->u.mesh = mesh;
    if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK ||
        sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
        sp_block_insert_op(m, m->body, 0, op) != CM_OK) {
        return NULL;
    }
    return s;
}

/* Shardy's rightShiftData: local shifted by shift elements to the right
 * along dim across the devices of the dimension's manual axes. */
static uint32_t right_shift(bld *b, uint32_t local, uint32_t dim, int64_t shift,
                            const sp_sharding *s, const sp_mesh *mesh, const nameset *manual,
                            sp_sharding *local_s)
{
    sp_module *m = b->c->m;
    if (local == SP_NONE) {
        return local;
    }
    sp_type tt = *sp_value_type(m, local);
    const sp_type *t = &tt;
    uint32_t rank = t->rank;
    int64_t size = t->dims[dim];
    sp_axis_ref axes[SP_MAX_RANK];
    uint32_t n_axes = 0;
    for (uint32_t k = 0; k < s->dims[dim].n_axes && n_axes < SP_MAX_RANK; k++) {
        if (ns_has(manual, s->dims[dim].axes[k].name)) {
            axes[n_axes++] = s->dims[dim].axes[k];
        }
    }
    if (size <= 0) {
        return local;
    }
    int64_t hops = shift / size, frac = shift % size;
    uint32_t pieces[2];
    for (int k = 0; k < 2; k++) {
        int64_t off = hops + k;
        if (off == 0) {
            pieces[k] = local;
            continue;
        }
        int64_t *pairs = NULL;
        uint32_t np = 0;
        if (b->st == CM_OK) {
            b->st = shift_pairs(mesh, axes, n_axes, off, &pairs, &np);
        }
        if (b->st != CM_OK) {
            return SP_NONE;
        }
        if (np == 0) {
            uint32_t z = zero_scalar(b, t->elem), op = SP_NONE;
            pieces[k] = emit(b, "stablehlo.broadcast_in_dim", &z, 1, m->values[local].type, &op);
            set_attr(b, op, "broadcast_dimensions", sp_exp_i64_array(m, NULL, 0));
        } else {
            pieces[k] = permute_op(b, local, pairs, np);
        }
        set_sharding(b, pieces[k], local_s);
        cm_free(pairs);
    }
    int64_t zero[SP_MAX_RANK] = {0}, start[SP_MAX_RANK] = {0}, lim[SP_MAX_RANK];
    memcpy(lim, t->dims, sizeof lim[0] * rank);
    start[dim] = size - frac;
    uint32_t tail = slice_op(b, pieces[1], start, t->dims, local_s);
    lim[dim] = size - frac;
    uint32_t head = slice_op(b, pieces[0], zero, lim, local_s);
    uint32_t parts[2] = {tail, head};
    return concat_op(b, parts, 2, dim, local_s);
}

/* Shardy's handleReverseOp; *done is false on a mesh too large for the
 * device tables (the caller replicates instead). */
static cm_status halo_reverse(rpf *c, uint32_t op, bool *done)
{
    *done = true;
    sp_module *m = c->m;
    uint32_t in_v = m->ops[op].operands[0], res = m->ops[op].first_result;
    sp_sharding *s = sp_value_sharding_partitioned(m, in_v);
    sp_sharding *out_s = sp_value_sharding_partitioned(m, res);
    sp_type tt = *sp_value_type(m, in_v);
    const sp_type *t = &tt;
    if (fully_replicated(s) || t->kind != SP_TYPE_TENSOR || t->rank != s->rank ||
        t->rank > SP_MAX_RANK) {
        return CM_OK;
    }
    const sp_mesh *mesh = mesh_of(m, s);
    if (mesh == NULL || mesh_is_maximal(mesh) || s->mesh_name == NULL) {
        return CM_OK;
    }
    if (sp_mesh_size(mesh) > MAX_DEVICES) {
        *done = false;
        return CM_OK;
    }
    const sp_attr *da = sp_op_attr(m, op, "dimensions");
    const int64_t *rdims = NULL;
    uint32_t n_rdims = 0;
    if (!sp_attr_ints(da, &rdims, &n_rdims, &m->arena)) {
        return CM_OK;
    }
    uint32_t rank = t->rank;
    sp_axis_ref axes[SP_MAX_RANK * 4];
    uint32_t n_axes = 0;
    nameset manual = {{0}, 0};
    int64_t padded[SP_MAX_RANK];
    bool reversed[SP_MAX_RANK] = {false};
    for (uint32_t i = 0; i < n_rdims; i++) {
        if (rdims[i] >= 0 && rdims[i] < (int64_t)rank) {
            reversed[rdims[i]] = true;
        }
    }
    for (uint32_t d = 0; d < rank; d++) {
        padded[d] = t->dims[d];
        int64_t shards = dim_shards(mesh, &s->dims[d]);
        if (!reversed[d] || shards <= 1) {
            continue;
        }
        if (t->dims[d] < 0) {
            *done = false; /* a dynamic dimension: replicated instead */
            return CM_OK;
        }
        for (uint32_t k = 0; k < s->dims[d].n_axes && n_axes < SP_MAX_RANK * 4; k++) {
            axes[n_axes++] = s->dims[d].axes[k];
        }
        if (t->dims[d] % shards != 0) {
            for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
                ns_add(&manual, s->dims[d].axes[k].name);
            }
            padded[d] = ceil_div(t->dims[d], shards) * shards;
        }
    }
    if (n_axes == 0) {
        return CM_OK;
    }
    bld b = {c, m->ops[op].parent_block, c->at, op, CM_OK};
    uint32_t input = in_v;
    if (manual.n > 0) {
        input = pad_high_to(&b, in_v, padded, SP_NONE, s);
        sp_sharding *local_s = without_axes(m, s, &manual);
        int64_t local[SP_MAX_RANK];
        for (uint32_t d = 0; d < rank; d++) {
            local[d] = padded[d] / manual_shards(mesh, &s->dims[d], &manual);
        }
        if (local_s == NULL || b.st != CM_OK) {
            return b.st != CM_OK ? b.st : CM_ENOMEM;
        }
        uint32_t larg = retype(&b, input, local), mc;
        bld body;
        manual_begin(&b, &input, 1, &s, s, m->values[input].type, mesh, &manual, &larg, &mc,
                     &body);
        if (b.st != CM_OK) {
            return b.st;
        }
        uint32_t cur = m->blocks[body.block].first_arg;
        for (uint32_t d = 0; d < rank; d++) {
            if (reversed[d] && padded[d] > t->dims[d]) {
                cur = right_shift(&body, cur, d, padded[d] - t->dims[d], s, mesh, &manual,
                                  local_s);
            }
        }
        manual_end(&b, &body, cur);
        if (b.st != CM_OK) {
            return b.st;
        }
        input = m->ops[mc].first_result;
    }
    sp_mesh *rm = reversed_mesh(m, mesh, axes, n_axes);
    char base[256];
    snprintf(base, sizeof base, "%s_reversed", s->mesh_name);
    const char *name = rm == NULL ? NULL : mesh_named(c, rm, base);
    sp_sharding *rs = name == NULL ? NULL : on_mesh(m, s, name);
    if (rs == NULL) {
        return CM_ENOMEM;
    }
    rs->reduction = SP_REDUCTION_SUM;
    m->ops[op].operands[0] = input;
    if (manual.n > 0) {
        m->values[res].type = m->values[input].type;
    }
    cm_status st = sp_value_set_sharding(m, res, rs);
    if (st != CM_OK) {
        return st;
    }
    b.at++;
    uint32_t back = reshard_op(&b, res, out_s);
    uint32_t fin = back;
    if (manual.n > 0) {
        int64_t orig[SP_MAX_RANK];
        memcpy(orig, t->dims, sizeof orig[0] * rank);
        fin = slice_high_to(&b, back, orig, s);
    }
    if (b.st != CM_OK || fin == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    if (replace_uses(c, res, fin, m->values[back].def) != CM_OK) {
        return CM_ENOMEM;
    }
    return CM_OK;
}

/* ---- reshape ------------------------------------------------------------------------ */

/* An independent group of reshape dimensions whose volumes match (Shardy's
 * ReshapeGroupInfo): input dims [in0, in1), output dims [out0, out1). */
typedef struct rgroup {
    uint32_t in0, in1, out0, out1;
    uint32_t in_nt, out_nt; /* dimensions of size other than 1 */
} rgroup;

static bool rg_split(const rgroup *g)
{
    return g->in_nt <= 1 && g->out_nt > 1;
}

static bool rg_passthrough(const rgroup *g)
{
    return g->in_nt <= 1 && g->out_nt <= 1;
}

static bool rg_neither(const rgroup *g)
{
    return g->in_nt > 1 && g->out_nt > 1;
}

/* Shardy's buildReshapeGroupInfos. Returns the number of groups. */
static uint32_t reshape_groups(const sp_type *in, const sp_type *out, rgroup *g, uint32_t cap)
{
    uint32_t n = 0, i = 0, o = 0;
    while ((i < in->rank || o < out->rank) && n < cap) {
        uint32_t i0 = i, o0 = o;
        int64_t ip = i < in->rank ? in->dims[i++] : 1;
        int64_t op = o < out->rank ? out->dims[o++] : 1;
        while (ip != op && (i < in->rank || o < out->rank)) {
            if (ip < op && i < in->rank) {
                ip *= in->dims[i++];
            } else if (op < ip && o < out->rank) {
                op *= out->dims[o++];
            } else {
                break;
            }
        }
        rgroup r = {i0, i, o0, o, 0, 0};
        for (uint32_t d = i0; d < i; d++) {
            r.in_nt += in->dims[d] != 1;
        }
        for (uint32_t d = o0; d < o; d++) {
            r.out_nt += out->dims[d] != 1;
        }
        g[n++] = r;
    }
    return n;
}

/* One axis of a sharding with its linear stride (Shardy's AxisStrideInfo). */
typedef struct astride {
    ax a;
    double stride;
    int64_t prefix, dim_size;
} astride;

static bool near(double a, double b)
{
    double d = a - b, s = a < 0 ? -a : a;
    d = d < 0 ? -d : d;
    return d <= 1e-9 * (s > 1 ? s : 1);
}

/* Shardy's getAxisStrides: the axes of s on a tensor of type t, ordered by
 * linear stride, adjacent sub-axes of one axis merged. Returns the count, or
 * UINT32_MAX when an axis is unknown. */
static uint32_t axis_strides(const sp_sharding *s, const sp_type *t, const sp_mesh *mesh,
                             bool non_div, astride *out, uint32_t cap)
{
    uint32_t n = 0;
    double cum = 1.0;
    for (uint32_t i = t->rank; i-- > 0;) {
        const sp_dim_sharding *d = &s->dims[i];
        int64_t total = dim_shards(mesh, d);
        double cur = cum * (non_div ? (double)t->dims[i] / (double)total
                                    : (double)ceil_div(t->dims[i], total));
        int64_t prefix = 1;
        for (uint32_t k = 0; k < i; k++) {
            prefix *= t->dims[k];
        }
        int64_t preceding = total;
        for (uint32_t j = d->n_axes; j-- > 0;) {
            ax a;
            if (!ax_from_ref(mesh, &d->axes[j], &a) || n >= cap) {
                return UINT32_MAX;
            }
            preceding /= a.size;
            out[n++] = (astride){a, cur, prefix * preceding, t->dims[i]};
            cur *= (double)a.size;
        }
        cum *= (double)t->dims[i];
    }
    for (uint32_t i = 1; i < n; i++) { /* stable insertion sort by stride */
        for (uint32_t j = i; j > 0 && out[j].stride < out[j - 1].stride; j--) {
            astride x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        astride e = out[i];
        if (k > 0) {
            astride *back = &out[k - 1];
            ax p = back->a, c = e.a;
            bool ok = p.axis == c.axis && c.pre * c.size == p.pre &&
                      (non_div ? (back->prefix == e.prefix ||
                                  (back->prefix == e.prefix * e.dim_size && c.size == e.dim_size))
                               : near(e.stride, back->stride * (double)p.size));
            if (ok) {
                back->a.pre = p.pre < c.pre ? p.pre : c.pre;
                back->a.size = p.size * c.size;
                back->prefix = back->prefix < e.prefix ? back->prefix : e.prefix;
                continue;
            }
        }
        out[k++] = e;
    }
    return k;
}

static bool same_refs(const sp_axis_ref *a, uint32_t na, const sp_axis_ref *b, uint32_t nb)
{
    if (na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].pre_size != b[i].pre_size ||
            (a[i].pre_size != 0 && a[i].size != b[i].size)) {
            return false;
        }
    }
    return true;
}

/* Shardy's isShardingEquivalentAcrossReshapes. */
static bool equivalent_across_reshape(const sp_module *m, const sp_sharding *s1, const sp_type *t1,
                                      const sp_sharding *s2, const sp_type *t2, bool non_div)
{
    if (s1 == NULL || s2 == NULL || s1->mesh_name == NULL || s2->mesh_name == NULL ||
        strcmp(s1->mesh_name, s2->mesh_name) != 0) {
        return s1 == s2 && s1 == NULL && t1 == t2;
    }
    if (!same_refs(s1->replicated, s1->n_replicated, s2->replicated, s2->n_replicated) ||
        t1->encoding != NULL || t2->encoding != NULL || t1->rank != s1->rank ||
        t2->rank != s2->rank) {
        return false;
    }
    const sp_mesh *mesh = mesh_of(m, s1);
    if (mesh == NULL) {
        return false;
    }
    astride a[SP_MAX_RANK * 4], b[SP_MAX_RANK * 4];
    uint32_t na = axis_strides(s1, t1, mesh, non_div, a, SP_MAX_RANK * 4);
    uint32_t nb = axis_strides(s2, t2, mesh, non_div, b, SP_MAX_RANK * 4);
    if (na == UINT32_MAX || na != nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (!ax_eq(a[i].a, b[i].a)) {
            return false;
        }
        if (non_div ? a[i].prefix != b[i].prefix : !near(a[i].stride, b[i].stride)) {
            return false;
        }
    }
    return true;
}

/* Does a dimension of group g have a shard count that does not divide it? */
static bool rg_indivisible(const rgroup *g, const sp_sharding *in_s, const sp_type *in,
                           const sp_sharding *out_s, const sp_type *out, const sp_mesh *mesh)
{
    for (uint32_t d = g->in0; d < g->in1; d++) {
        int64_t sc = dim_shards(mesh, &in_s->dims[d]);
        if (sc > 1 && in->dims[d] % sc != 0) {
            return true;
        }
    }
    for (uint32_t d = g->out0; d < g->out1; d++) {
        int64_t sc = dim_shards(mesh, &out_s->dims[d]);
        if (sc > 1 && out->dims[d] % sc != 0) {
            return true;
        }
    }
    return false;
}

static int64_t volume(const int64_t *dims, uint32_t a, uint32_t b)
{
    int64_t v = 1;
    for (uint32_t d = a; d < b; d++) {
        v *= dims[d];
    }
    return v;
}

/* Converts an atom back to an axis ref of mesh (a full axis when it covers it). */
static sp_axis_ref atom_ref(const sp_mesh *mesh, ax a)
{
    sp_axis_ref r = {mesh->axes[a.axis].name, 0, mesh->axes[a.axis].size};
    if (!(a.pre == 1 && a.size == mesh->axes[a.axis].size)) {
        r.pre_size = a.pre;
        r.size = a.size;
    }
    return r;
}

/* s with every part of the atoms cut[] removed from its dimensions (Shardy's
 * removeAxisRefsFromSharding, by getAxisSetDiff). NULL when out of memory. */
static sp_sharding *without_atoms(sp_module *m, const sp_sharding *s, const sp_mesh *mesh,
                                  const ax *cut, uint32_t n_cut)
{
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    c->reduction = SP_REDUCTION_SUM;
    for (uint32_t d = 0; d < c->rank && n_cut > 0; d++) {
        sp_axis_ref *refs = cm_arena_alloc(&m->arena, sizeof *refs * (2 * c->dims[d].n_axes + 1));
        if (refs == NULL) {
            return NULL;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < c->dims[d].n_axes; i++) {
            ax cur;
            if (!ax_from_ref(mesh, &c->dims[d].axes[i], &cur)) {
                refs[k++] = c->dims[d].axes[i];
                continue;
            }
            bool alive = true;
            while (alive && k < 2 * c->dims[d].n_axes + 1) {
                uint32_t hit = n_cut;
                for (uint32_t j = 0; j < n_cut && hit == n_cut; j++) {
                    if (ax_overlap(cur, cut[j])) {
                        hit = j;
                    }
                }
                if (hit == n_cut) {
                    refs[k++] = atom_ref(mesh, cur);
                    break;
                }
                ax o = cut[hit];
                if (o.pre > cur.pre && o.pre % cur.pre == 0) {
                    refs[k++] = atom_ref(mesh, (ax){cur.axis, cur.pre, o.pre / cur.pre});
                }
                int64_t end = cur.pre * cur.size, oend = o.pre * o.size;
                if (oend < end && end % oend == 0) {
                    cur = (ax){cur.axis, oend, end / oend};
                } else {
                    alive = false;
                }
            }
        }
        c->dims[d].axes = refs;
        c->dims[d].n_axes = k;
    }
    return c;
}

/* Shardy's handleReshapeOpReplicate: the axes of the groups with a
 * non-divisible dimension leave both shardings; the reshape runs between
 * reshards. */
static cm_status reshape_replicate(rpf *c, uint32_t op, sp_sharding *in_s, sp_sharding *out_s,
                                   const sp_type *in, const sp_type *out, const rgroup *g,
                                   uint32_t ng, const sp_mesh *mesh)
{
    sp_module *m = c->m;
    ax cut[SP_MAX_RANK * 8];
    uint32_t n_cut = 0;
    for (uint32_t k = 0; k < ng; k++) {
        if (rg_passthrough(&g[k]) || !rg_indivisible(&g[k], in_s, in, out_s, out, mesh)) {
            continue;
        }
        for (int side = 0; side < 2; side++) {
            const sp_sharding *s = side == 0 ? in_s : out_s;
            uint32_t a = side == 0 ? g[k].in0 : g[k].out0, e = side == 0 ? g[k].in1 : g[k].out1;
            for (uint32_t d = a; d < e; d++) {
                for (uint32_t i = 0; i < s->dims[d].n_axes && n_cut < SP_MAX_RANK * 8; i++) {
                    if (ax_from_ref(mesh, &s->dims[d].axes[i], &cut[n_cut])) {
                        n_cut++;
                    }
                }
            }
        }
    }
    sp_sharding *nin = without_atoms(m, in_s, mesh, cut, n_cut);
    sp_sharding *nout = without_atoms(m, out_s, mesh, cut, n_cut);
    if (nin == NULL || nout == NULL) {
        return CM_ENOMEM;
    }
    bld b = {c, m->ops[op].parent_block, c->at, op, CM_OK};
    uint32_t r_in = reshard_op(&b, m->ops[op].operands[0], nin);
    uint32_t op_at = b.at++;
    uint32_t rop = SP_NONE;
    uint32_t nr = emit(&b, "stablehlo.reshape", &r_in, 1, m->values[m->ops[op].first_result].type,
                       &rop);
    set_sharding(&b, nr, nout);
    uint32_t back = reshard_op(&b, nr, out_s);
    if (b.st != CM_OK || back == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    if (replace_uses(c, m->ops[op].first_result, back, SP_NONE) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_block_remove_op(m, m->ops[op].parent_block, op_at);
    return CM_OK;
}

/* Shardy's getDimExchangeInfoForReshapeGroup for the one input dimension
 * dim of split group g. */
static bool reshape_dim_exchange(sp_module *m, const rgroup *g, uint32_t dim, int64_t shards,
                                 const int64_t *divisible, const sp_type *in, const sp_type *out,
                                 const sp_sharding *out_s, const sp_mesh *mesh, dimx *x)
{
    int64_t s_out = divisible[dim] / shards;
    sp_dim_sharding *target = cm_arena_zalloc(&m->arena, sizeof *target);
    uint32_t n_ax = 0;
    for (uint32_t d = g->out0; d < g->out1; d++) {
        n_ax += out_s->dims[d].n_axes;
    }
    sp_axis_ref *axes = cm_arena_alloc(&m->arena, sizeof *axes * (n_ax + 1));
    int64_t *src = cm_arena_alloc(&m->arena, sizeof *src * (size_t)(shards + 1));
    int64_t *loff = cm_arena_alloc(&m->arena, sizeof *loff * (size_t)(shards + 1));
    if (target == NULL || axes == NULL || src == NULL || loff == NULL) {
        return false;
    }
    n_ax = 0;
    for (uint32_t d = g->out0; d < g->out1; d++) {
        for (uint32_t i = 0; i < out_s->dims[d].n_axes; i++) {
            axes[n_ax++] = out_s->dims[d].axes[i];
        }
    }
    target->axes = axes;
    target->n_axes = n_ax;
    target->is_closed = true;
    target->priority = -1;
    int64_t strides[SP_MAX_RANK], st = 1;
    for (uint32_t d = g->out1; d-- > g->out0;) {
        strides[d] = st;
        st *= out->dims[d];
    }
    int64_t size = in->dims[dim], tile = ceil_div(size, shards);
    *x = (dimx){dim, s_out, s_out, 0, 0, false, true, target, src, loff, shards};
    for (int64_t t = 0; t < shards; t++) {
        int64_t start = 0, rem = t;
        for (uint32_t d = g->out1; d-- > g->out0;) {
            int64_t per = dim_shards(mesh, &out_s->dims[d]);
            int64_t coord = rem % per;
            rem /= per;
            start += coord * ceil_div(out->dims[d], per) * strides[d];
        }
        int64_t limit = start + s_out - 1, first = -1, last = -1, lo = 0;
        for (int64_t sh = 0; sh < shards; sh++) {
            int64_t ds = sh * tile, cnt = size - sh * tile;
            cnt = cnt < tile ? cnt : tile;
            if (cnt <= 0) {
                continue;
            }
            if (start >= ds && start < ds + cnt) {
                first = sh;
                lo = start - ds;
            }
            if (limit >= ds && limit < ds + cnt) {
                last = sh;
            }
        }
        if ((first != -1 && first != t) || (last != -1 && last != t)) {
            x->needs_comm = true;
        }
        if (first != -1 && first < t && t - first > x->left) {
            x->left = t - first;
        }
        if (last != -1 && last > t && last - t > x->right) {
            x->right = last - t;
        }
        src[t] = first;
        loff[t] = lo;
    }
    if (x->left > 1 || x->right > 1) {
        x->can_halo = false;
    }
    return true;
}

/* Shardy's handleReshapeOp. */
static cm_status visit_reshape(rpf *c, uint32_t op)
{
    sp_module *m = c->m;
    uint32_t in_v = m->ops[op].operands[0], res = m->ops[op].first_result;
    sp_sharding *in_s = sp_value_sharding_partitioned(m, in_v), *out_s = sp_value_sharding_partitioned(m, res);
    sp_type in = *sp_value_type(m, in_v), out = *sp_value_type(m, res);
    if (in_s == NULL || out_s == NULL || in.kind != SP_TYPE_TENSOR || out.kind != SP_TYPE_TENSOR ||
        in.rank != in_s->rank || out.rank != out_s->rank || in.rank > SP_MAX_RANK ||
        out.rank > SP_MAX_RANK) {
        return CM_OK;
    }
    for (uint32_t d = 0; d < in.rank; d++) {
        if (in.dims[d] <= 0) {
            return CM_OK;
        }
    }
    for (uint32_t d = 0; d < out.rank; d++) {
        if (out.dims[d] <= 0) {
            return CM_OK;
        }
    }
    const sp_mesh *mesh = mesh_of(m, in_s);
    if (mesh == NULL) {
        return CM_OK;
    }
    rgroup g[SP_MAX_RANK * 2];
    uint32_t ng = reshape_groups(&in, &out, g, SP_MAX_RANK * 2);
    if (equivalent_across_reshape(m, in_s, &in, out_s, &out, true)) {
        if (equivalent_across_reshape(m, in_s, &in, out_s, &out, false)) {
            return CM_OK;
        }
        bool all_pass = true;
        for (uint32_t k = 0; k < ng; k++) {
            all_pass = all_pass && rg_passthrough(&g[k]);
        }
        if (all_pass) {
            return CM_OK;
        }
    } else {
        return reshape_replicate(c, op, in_s, out_s, &in, &out, g, ng, mesh);
    }
    int64_t pin[SP_MAX_RANK], pout[SP_MAX_RANK];
    memcpy(pin, in.dims, sizeof pin[0] * in.rank);
    memcpy(pout, out.dims, sizeof pout[0] * out.rank);
    nameset nondiv = {{0}, 0};
    for (uint32_t k = 0; k < ng; k++) {
        bool ind = false;
        for (int side = 0; side < 2; side++) {
            const sp_sharding *s = side == 0 ? in_s : out_s;
            const sp_type *t = side == 0 ? &in : &out;
            int64_t *p = side == 0 ? pin : pout;
            uint32_t a = side == 0 ? g[k].in0 : g[k].out0, e = side == 0 ? g[k].in1 : g[k].out1;
            for (uint32_t d = a; d < e; d++) {
                int64_t sc = dim_shards(mesh, &s->dims[d]);
                if (sc > 1 && t->dims[d] % sc != 0) {
                    ind = true;
                    p[d] = ceil_div(t->dims[d], sc) * sc;
                }
            }
        }
        for (int side = 0; ind && side < 2; side++) {
            const sp_sharding *s = side == 0 ? in_s : out_s;
            uint32_t a = side == 0 ? g[k].in0 : g[k].out0, e = side == 0 ? g[k].in1 : g[k].out1;
            for (uint32_t d = a; d < e; d++) {
                for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
                    ns_add(&nondiv, s->dims[d].axes[i].name);
                }
            }
        }
    }
    /* Shardy's getReshapeHaloInfo: every group with a non-divisible
     * dimension must be a split of one input dimension */
    const rgroup *active[SP_MAX_RANK * 2];
    uint32_t n_active = 0;
    bool halo = c->halo && nondiv.n > 0 && sp_mesh_size(mesh) <= MAX_DEVICES;
    for (uint32_t k = 0; k < ng && halo; k++) {
        const rgroup *gk = &g[k];
        if (rg_passthrough(gk)) {
            continue;
        }
        bool ind = false;
        for (uint32_t d = gk->in0; d < gk->in1; d++) {
            ind = ind || pin[d] != in.dims[d];
        }
        for (uint32_t d = gk->out0; d < gk->out1; d++) {
            ind = ind || pout[d] != out.dims[d];
        }
        if (!ind) {
            continue;
        }
        int64_t is = in.dims[gk->in0], os = out.dims[gk->out0];
        if (rg_neither(gk) || gk->in_nt != gk->in1 - gk->in0 || gk->out_nt != gk->out1 - gk->out0 ||
            (is % os != 0 && os % is != 0) ||
            volume(pin, gk->in0, gk->in1) != volume(pout, gk->out0, gk->out1) || !rg_split(gk) ||
            gk->in1 - gk->in0 != 1) {
            halo = false;
            break;
        }
        active[n_active++] = gk;
    }
    if (!halo || n_active == 0) {
        return reshape_replicate(c, op, in_s, out_s, &in, &out, g, ng, mesh);
    }
    datax x;
    memset(&x, 0, sizeof x);
    x.manual = nondiv;
    memcpy(x.divisible, pin, sizeof pin[0] * in.rank);
    uint32_t ai = 0;
    for (uint32_t d = 0; d < in.rank; d++) {
        int64_t sc = dim_shards(mesh, &in_s->dims[d]);
        if (sc <= 1) {
            continue;
        }
        if (ai < n_active && active[ai]->in1 - 1 == d) {
            if (!reshape_dim_exchange(m, active[ai], d, sc, pin, &in, &out, out_s, mesh,
                                      &x.dims[x.n_dims])) {
                return CM_ENOMEM;
            }
            ai++;
        } else {
            int64_t loc = pin[d] / sc;
            x.dims[x.n_dims] = (dimx){d, loc, loc, 0, 0, false, true, NULL, NULL, NULL, 0};
        }
        x.n_dims++;
    }
    if (!datax_can_halo(&x)) {
        return reshape_replicate(c, op, in_s, out_s, &in, &out, g, ng, mesh);
    }
    bld b = {c, m->ops[op].parent_block, c->at, op, CM_OK};
    uint32_t pv_outer = zero_scalar(&b, out.elem);
    uint32_t div = pad_high_to(&b, in_v, pin, SP_NONE, in_s);
    sp_sharding *local_in = without_axes(m, in_s, &x.manual);
    sp_sharding *local_out = without_axes(m, out_s, &x.manual);
    sp_sharding *pv_s = sp_sharding_open(&m->arena, in_s->mesh_name, 0);
    if (local_in == NULL || local_out == NULL || pv_s == NULL || div == SP_NONE || b.st != CM_OK) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    int64_t local[SP_MAX_RANK], lout[SP_MAX_RANK], padded_res[SP_MAX_RANK];
    for (uint32_t d = 0; d < in.rank; d++) {
        local[d] = pin[d] / manual_shards(mesh, &in_s->dims[d], &x.manual);
    }
    for (uint32_t d = 0; d < out.rank; d++) {
        lout[d] = pout[d] / manual_shards(mesh, &out_s->dims[d], &x.manual);
        int64_t sc = dim_shards(mesh, &out_s->dims[d]);
        padded_res[d] = ceil_div(out.dims[d], sc) * sc;
    }
    uint32_t largs[2] = {retype(&b, div, local), m->values[pv_outer].type};
    uint32_t operands[2] = {div, pv_outer}, mc;
    sp_sharding *ins[2] = {in_s, pv_s};
    bld body;
    manual_begin(&b, operands, 2, ins, out_s, retype(&b, res, padded_res), mesh, &x.manual, largs,
                 &mc, &body);
    if (b.st != CM_OK) {
        return b.st;
    }
    uint32_t cur = m->blocks[body.block].first_arg, pv = cur + 1;
    for (uint32_t k = 0; k < x.n_dims && cur != SP_NONE; k++) {
        if (x.dims[k].needs_comm) {
            cur = exchange_dim(&body, cur, pv, &x.dims[k], in_s, mesh, &x.manual, local_in, 0, 1);
        }
    }
    uint32_t rop = SP_NONE;
    cur = cur == SP_NONE ? SP_NONE
                         : emit(&body, "stablehlo.reshape", &cur, 1, retype(&body, res, lout), &rop);
    set_sharding(&body, cur, local_out);
    manual_end(&b, &body, cur);
    if (b.st != CM_OK) {
        return b.st;
    }
    uint32_t fin = slice_high_to(&b, m->ops[mc].first_result, out.dims, out_s);
    if (b.st != CM_OK || fin == SP_NONE) {
        return b.st != CM_OK ? b.st : CM_ENOMEM;
    }
    if (replace_uses(c, res, fin, SP_NONE) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_block_remove_op(m, m->ops[op].parent_block, b.at);
    return CM_OK;
}

/* ---- the pass ----------------------------------------------------------------------- */

static bool is_stablehlo(const sp_op *o)
{
    return strncmp(o->name, "stablehlo.", 10) == 0;
}

static bool is_terminator(const sp_op *o)
{
    return o->kind == SP_OP_RETURN || o->kind == SP_OP_FUNC_RETURN || o->kind == SP_OP_SDY_RETURN;
}

static cm_status visit_op(rpf *c, uint32_t op, cm_error *err)
{
    sp_module *m = c->m;
    const sp_op *o = &m->ops[op];
    if (is_terminator(o) || !is_stablehlo(o)) {
        return CM_OK;
    }
    if (o->kind == SP_OP_RESHAPE) {
        return visit_reshape(c, op) == CM_OK ? CM_OK : cm_error_oom(err);
    }
    sp_rule *rule = NULL;
    sp_rule_opts ro = {false, NULL, false};
    cm_error rerr;
    cm_error_clear(&rerr);
    cm_status st = sp_rule_for_op(m, op, &ro, &rule, NULL, &rerr);
    if (st == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    if (st != CM_OK || rule == NULL || rule->is_custom) {
        return CM_OK;
    }
    bool any = false;
    for (uint32_t f = 0; f < rule->n_factors && !any; f++) {
        any = rule->factor_kind[f] == SP_FACTOR_PERMUTATION;
    }
    if (!any) {
        return CM_OK;
    }
    if (c->halo) {
        bool done = false;
        if (o->kind == SP_OP_PAD || o->kind == SP_OP_SLICE) {
            st = halo_pad_or_slice(c, op, o->kind == SP_OP_PAD, &done);
        } else if (o->kind == SP_OP_REVERSE) {
            st = halo_reverse(c, op, &done);
        }
        if (st != CM_OK) {
            return cm_error_oom(err);
        }
        if (done) {
            return CM_OK;
        }
    }
    st = replicate(c, op, rule);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

/* Visits the ops of block in order, each after the ops of its regions; an
 * op's successor is fixed before the op is visited, so ops it creates are
 * not visited. */
static cm_status visit_block(rpf *c, uint32_t block, int depth, cm_error *err)
{
    sp_module *m = c->m;
    if (depth > 256) {
        return CM_OK;
    }
    uint32_t i = 0;
    while (i < m->blocks[block].n_ops) {
        uint32_t op = m->blocks[block].ops[i];
        uint32_t next = i + 1 < m->blocks[block].n_ops ? m->blocks[block].ops[i + 1] : SP_NONE;
        forward_operands(c, op);
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                cm_status st = visit_block(c, m->ops[op].regions[r].blocks[k], depth + 1, err);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        c->at = i;
        cm_status st = visit_op(c, op, err);
        if (st != CM_OK) {
            return st;
        }
        if (next == SP_NONE) {
            break;
        }
        /* next moved only by the ops inserted before it: search forward */
        while (i < m->blocks[block].n_ops && m->blocks[block].ops[i] != next) {
            i++;
        }
        if (i == m->blocks[block].n_ops) {
            break;
        }
    }
    return CM_OK;
}

cm_status sp_pass_resolve_permutation_factors(sp_module *m, const sp_rpf_opts *o, sp_diags *d,
                                              cm_error *err)
{
    (void)d;
    if (o->replica_count > 1 && o->partition_count > 1) {
        return cm_error_set(err, CM_EINVAL, "",
                            "Shardy partitioner does not support replica_count > 1 && "
                            "partition_count > 1 yet.");
    }
    rpf c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.halo = o->enable_halo_exchange;
    c.replica_count = o->replica_count;
    c.partition_count = o->partition_count;
    c.next_channel = next_channel(m);
    cm_status st = visit_block(&c, m->body, 0, err);
    sp_value_map_free(&c.repl);
    sp_value_map_free(&c.repl_skip);
    return st;
}
