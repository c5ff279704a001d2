/* SPDX-License-Identifier: Apache-2.0
 * executor: the compiler from IR to program (ex_int.h). One pass, before any
 * worker starts, decodes every op of main and of the blocks it runs into an
 * xop (attributes, device groups, constants, regions), every value into its
 * per-device blocks (vinfo: local shape and offsets from its sharding), and
 * each op's list of buffers to release after it. Whatever the executor cannot
 * run is refused here, at its op. */
#include "ex_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ex_interp.h"
#include "sp_attrs.h"
#include "sp_collectives.h"
#include "sp_mlir.h"

#define EX_MAX_MANUAL_GROUPS 4096 /* manual groups of a reference run */

/* ---- the prepared program ---------------------------------------------------------- */

/* Reports an error located at op ("LINE:COL" when the op came from text). */
cm_status ex_op_error(const prog *p, uint32_t op, cm_error *err, const char *fmt, ...)
{
    char path[32];
    path[0] = '\0';
    const sp_op *o = &p->m->ops[op];
    if (o->line > 0) {
        snprintf(path, sizeof path, "%u:%u", o->line, o->col);
    }
    va_list ap;
    va_start(ap, fmt);
    cm_status st = cm_error_setv(err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    return st;
}

cm_status ex_op_wrap(const prog *p, uint32_t op, cm_error *err, const cm_error *inner,
                     const char *what)
{
    if (inner->code == CM_ENOMEM || inner->code == CM_OK) {
        return cm_error_wrap(err, inner, "%s", what);
    }
    char path[32];
    path[0] = '\0';
    const sp_op *o = &p->m->ops[op];
    if (o->line > 0) {
        snprintf(path, sizeof path, "%u:%u", o->line, o->col);
    }
    return cm_error_set(err, inner->code, path, "%s: %s%s%s", what, inner->msg,
                        inner->path[0] != '\0' ? " at " : "", inner->path);
}

static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : s->mesh;
}

/* The sharding a value is held with: collectives carry out_sharding, reshards
 * `sharding`, a while's condition and body arguments are sharded as its
 * results; everything else as sp_value_sharding. NULL: replicated. */
static const sp_sharding *held_sharding(const sp_module *m, uint32_t v)
{
    return sp_value_sharding_partitioned(m, v);
}

/* Mesh position of device dev (through the mesh's device_ids), or -1. */
static int64_t mesh_position(const sp_mesh *mesh, int64_t dev)
{
    if (mesh->device_ids == NULL || mesh->n_device_ids == 0) {
        return dev;
    }
    for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
        if (mesh->device_ids[i] == dev) {
            return (int64_t)i;
        }
    }
    return -1;
}

/* Fills the value's local dims and per-device offsets. */
static cm_status value_prepare(prog *p, uint32_t v, uint32_t op_for_err, cm_error *err)
{
    const sp_module *m = p->m;
    vinfo *vi = &p->vi[v];
    const sp_type *t = sp_value_type(m, v);
    if (t->kind != SP_TYPE_TENSOR || !elem_supported(t->elem) || t->rank > EX_MAX_RANK) {
        return ex_op_error(p, op_for_err, err, "type %s cannot be executed yet", t->text);
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0) {
            return ex_op_error(p, op_for_err, err, "dynamic type %s cannot be executed yet",
                            t->text);
        }
    }
    vi->live = true;
    vi->last_use = UINT32_MAX;
    vi->elem = t->elem;
    vi->rank = t->rank;
    vi->esz = sp_elem_bytes(t->elem);
    vi->gdims = t->dims;
    vi->ldims = cm_arena_alloc(&p->arena, sizeof(int64_t) * (t->rank + 1u));
    vi->off = cm_arena_zalloc(&p->arena, sizeof(int64_t) * (t->rank * p->n_dev + 1u));
    if (vi->ldims == NULL || vi->off == NULL) {
        return cm_error_oom(err);
    }
    size_t bytes = sp_elem_bytes(t->elem);
    for (uint32_t k = 0; k < t->rank; k++) {
        if (!cm_mul_size(bytes, (size_t)t->dims[k], &bytes) || bytes > (SIZE_MAX >> 2)) {
            return ex_op_error(p, op_for_err, err, "type %s is too large", t->text);
        }
    }
    memcpy(vi->ldims, t->dims, sizeof(int64_t) * t->rank);
    /* inside a manual computation's body every device holds its manual
     * group's whole (local) tensors: the partitioner leaves bodies alone */
    const sp_sharding *s = p->replicated || p->in_manual ? NULL : held_sharding(m, v);
    if (s != NULL && s->rank == t->rank) {
        const sp_mesh *mesh = sharding_mesh(m, s);
        if (mesh == NULL) {
            return ex_op_error(p, op_for_err, err, "sharding on unknown mesh %s",
                            s->mesh_name != NULL ? s->mesh_name : "?");
        }
        if (sp_mesh_size(mesh) != (int64_t)p->n_dev) {
            return ex_op_error(p, op_for_err, err,
                            "a value on a mesh whose size is not the device count (%s) cannot "
                            "be executed yet",
                            s->mesh_name != NULL ? s->mesh_name : "inlined mesh");
        }
        cm_error e2;
        cm_error_clear(&e2);
        if (sp_local_shape(s, mesh, t->dims, t->rank, vi->ldims, &e2) != CM_OK) {
            return ex_op_wrap(p, op_for_err, err, &e2, "bad sharding");
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            int64_t pos = mesh_position(mesh, d);
            if (pos < 0) {
                return ex_op_error(p, op_for_err, err, "device missing from mesh %s",
                                s->mesh_name != NULL ? s->mesh_name : "?");
            }
            int64_t coord[SP_MAX_RANK];
            for (uint32_t a = mesh->n_axes; a-- > 0;) {
                coord[a] = pos % mesh->axes[a].size;
                pos /= mesh->axes[a].size;
            }
            for (uint32_t k = 0; k < t->rank; k++) {
                int64_t idx = 0;
                for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
                    const sp_axis_ref *r = &s->dims[k].axes[j];
                    int32_t ai = sp_mesh_axis_index(mesh, r->name);
                    if (ai < 0) {
                        return ex_op_error(p, op_for_err, err, "unknown mesh axis %s", r->name);
                    }
                    int64_t c = coord[ai], size = mesh->axes[ai].size;
                    if (r->pre_size > 0) {
                        /* Shardy's pre-size is the product of the sub-axes
                         * major to this one (sp_collective_groups agrees) */
                        c = (c / (size / (r->pre_size * r->size))) % r->size;
                        size = r->size;
                    }
                    idx = idx * size + c;
                }
                vi->off[d * t->rank + k] = idx * vi->ldims[k];
            }
        }
    }
    vi->lcount = count_of(vi->ldims, t->rank);
    return CM_OK;
}

/* True when every device's block of v and of r is the same region of the
 * same shape: a reshard from v to r moves nothing between devices. */
static bool same_blocks(const prog *p, uint32_t v, uint32_t r)
{
    const vinfo *a = &p->vi[v], *b = &p->vi[r];
    if (p->replicated || a->rank != b->rank || a->elem != b->elem) {
        return false;
    }
    for (uint32_t k = 0; k < a->rank; k++) {
        if (a->ldims[k] != b->ldims[k]) {
            return false;
        }
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        if (memcmp(voff(p, v, d), voff(p, r, d), sizeof(int64_t) * a->rank) != 0) {
            return false;
        }
    }
    return true;
}

static bool ints_attr(prog *p, uint32_t op, const char *name, const int64_t **v, uint32_t *n)
{
    return sp_attr_ints(sp_op_attr(p->m, op, name), v, n, &p->arena);
}

/* Decodes a constant's dense<...> value exactly (sp_mlir_dense_values: every
 * element's bits, hex bodies and hex literals included) into the element
 * bytes of the executor's layout (little-endian hosts: each element is the
 * low esz bytes of its bits); a tensor whose elements are all equal is kept
 * as a splat. */
static cm_status parse_constant(prog *p, xop *x, const sp_attr *a, sp_elem e, size_t count,
                                cm_error *err)
{
    const char *nm = p->m->ops[x->op].name;
    if (a == NULL || a->kind != SP_ATTR_DENSE || a->u.dense.body == NULL) {
        return ex_op_error(p, x->op, err,
                           "%s: constant without a dense value cannot be executed yet", nm);
    }
    uint64_t *bits = NULL;
    size_t n = 0;
    cm_error e2;
    cm_error_clear(&e2);
    if (sp_mlir_dense_values(p->m, a, &p->arena, &bits, &n, &e2) != CM_OK) {
        if (e2.code == CM_ENOMEM) {
            return cm_error_oom(err);
        }
        return ex_op_wrap(p, x->op, err, &e2, "constant value");
    }
    size_t esz = sp_elem_bytes(e);
    if (n != count || esz == 0 || esz > sizeof(uint64_t)) {
        return ex_op_error(p, x->op, err, "%s: constant has %zu elements for %zu", nm, n, count);
    }
    bool splat = true;
    for (size_t i = 1; splat && i < n; i++) {
        splat = bits[i] == bits[0];
    }
    x->n_cval = n == 0 ? 0 : splat ? 1 : n;
    x->cval = cm_arena_zalloc(&p->arena, esz * (x->n_cval + 1u));
    if (x->cval == NULL) {
        return cm_error_oom(err);
    }
    char *dst = x->cval;
    for (size_t i = 0; i < x->n_cval; i++) {
        memcpy(dst + i * esz, &bits[i], esz);
    }
    return CM_OK;
}

/* True when v is one of main's arguments or a constant: a value given
 * whole, whose blocks on the devices of a reduction axis are copies of one
 * global value, not partial results. An sdy.all_reduce or reduce_scatter of
 * it would count each element once per device where the one-device run
 * (and the global view) counts it once: refused rather than run. (Shardy's
 * executable tests feed such programs a different block per device; a run
 * from one global input cannot.) */
static bool whole_input(const prog *p, uint32_t v)
{
    const sp_value *val = &p->m->values[v];
    if (p->in_manual) {
        return false;
    }
    if (val->def == SP_NONE) {
        return val->block == p->block;
    }
    sp_op_kind k = (sp_op_kind)p->m->ops[val->def].kind;
    return k == SP_OP_CONSTANT || k == SP_OP_SDY_CONSTANT;
}

static const char whole_input_what[] = "main's argument or a constant";
static const char not_partial[] = "its blocks are copies of one global value, not partial "
                                  "results, so the reduction would count it once per device "
                                  "(cannot be executed)";

/* Collects the axes of a collective and computes its device groups. */
static cm_status prepare_groups(prog *p, xop *x, const char *key, cm_error *err)
{
    const sp_module *m = p->m;
    sp_axis_ref refs[4 * SP_MAX_RANK];
    uint32_t n = 0;
    const sp_attr *axes = key != NULL ? sp_op_attr(m, x->op, key) : NULL;
    if (axes != NULL && axes->kind == SP_ATTR_AXIS_LIST) {
        for (uint32_t j = 0; j < axes->u.axes.n && n < 4 * SP_MAX_RANK; j++) {
            refs[n++] = axes->u.axes.axes[j];
        }
    } else if (axes != NULL && axes->kind == SP_ATTR_AXIS_LISTS) {
        for (uint32_t i = 0; i < axes->u.axis_lists.n; i++) {
            const sp_axis_list *l = &axes->u.axis_lists.items[i];
            for (uint32_t j = 0; j < l->n && n < 4 * SP_MAX_RANK; j++) {
                refs[n++] = l->axes[j];
            }
        }
    } else if (axes != NULL && axes->kind == SP_ATTR_ALL_TO_ALL) {
        for (uint32_t i = 0; i < axes->u.a2a.n; i++) {
            const sp_axis_list *l = &axes->u.a2a.items[i].axes;
            for (uint32_t j = 0; j < l->n && n < 4 * SP_MAX_RANK; j++) {
                refs[n++] = l->axes[j];
            }
        }
    }
    x->grp_of = cm_arena_alloc(&p->arena, sizeof(int64_t) * p->n_dev);
    if (x->grp_of == NULL) {
        return cm_error_oom(err);
    }
    const sp_sharding *s = held_sharding(m, m->ops[x->op].first_result);
    const sp_mesh *mesh = s != NULL ? sharding_mesh(m, s) : NULL;
    if (key == NULL || mesh == NULL) {
        /* Reshards and permutes: any device may hold what another needs. */
        x->groups = cm_arena_alloc(&p->arena, sizeof(int64_t) * p->n_dev);
        if (x->groups == NULL) {
            return cm_error_oom(err);
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            x->groups[d] = d;
            x->grp_of[d] = 0;
        }
        x->gsize = p->n_dev;
        return CM_OK;
    }
    uint32_t ng = 0, gs = 0;
    cm_error e2;
    cm_error_clear(&e2);
    if (sp_collective_groups(mesh, refs, n, &x->groups, &ng, &gs, &p->arena, &e2) != CM_OK) {
        return ex_op_wrap(p, x->op, err, &e2, "device groups");
    }
    x->gsize = gs;
    for (uint32_t d = 0; d < p->n_dev; d++) {
        x->grp_of[d] = -1;
    }
    for (uint32_t g = 0; g < ng; g++) {
        for (uint32_t j = 0; j < gs; j++) {
            int64_t dev = x->groups[(size_t)g * gs + j];
            if (dev < 0 || dev >= (int64_t)p->n_dev) {
                return ex_op_error(p, x->op, err, "%s: device id out of range",
                                m->ops[x->op].name);
            }
            x->grp_of[dev] = g;
        }
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        if (x->grp_of[d] < 0) {
            return ex_op_error(p, x->op, err, "%s: a device is in no group", m->ops[x->op].name);
        }
    }
    return CM_OK;
}

/* The one block of op's one region, or NULL. */
static const sp_block *body_block(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return NULL;
    }
    return &m->blocks[o->regions[0].blocks[0]];
}

/* The reduction of a body block of two ops (a binary op and the return), or -1. */
static int block_reduce_fn(const sp_module *m, const sp_block *b)
{
    if (b == NULL || b->n_ops != 2) {
        return -1;
    }
    switch ((sp_op_kind)m->ops[b->ops[0]].kind) {
    case SP_OP_ADD:
        return RED_ADD;
    case SP_OP_MAXIMUM:
        return RED_MAX;
    case SP_OP_MINIMUM:
        return RED_MIN;
    case SP_OP_MULTIPLY:
        return RED_MUL;
    case SP_OP_AND:
        return RED_AND;
    case SP_OP_OR:
        return RED_OR;
    default:
        return -1;
    }
}

static int reduce_body(const sp_module *m, uint32_t op)
{
    return block_reduce_fn(m, body_block(m, op));
}

/* The comparison direction of a compare op (CMP_*, -1: none); *total is set
 * when its compare_type is TOTALORDER. */
static int compare_dir(const sp_module *m, uint32_t op, bool *total)
{
    static const char *const names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    const sp_attr *a = sp_op_attr(m, op, "comparison_direction");
    const sp_attr *t = sp_op_attr(m, op, "compare_type");
    const char *v = a != NULL && a->kind == SP_ATTR_ENUM ? a->u.enm.value : "";
    *total = t != NULL && t->kind == SP_ATTR_ENUM && strcmp(t->u.enm.value, "TOTALORDER") == 0;
    for (int i = 0; i < 6; i++) {
        if (strcmp(v, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* ---- ops with a kernel in ex_kern.c: attributes ------------------------------------ */

/* A copy of the n integers at v in the program's arena (NULL when out of
 * memory): decoded attributes outlive the accessor's value. */
static const int64_t *ints_keep(prog *p, const int64_t *v, uint32_t n)
{
    int64_t *c = cm_arena_alloc(&p->arena, sizeof(int64_t) * (n + 1u));
    if (c != NULL && n > 0) {
        memcpy(c, v, sizeof(int64_t) * n);
    }
    return c;
}

static bool is_int_elem(sp_elem e)
{
    return elem_supported(e) && !elem_float(e) && e != SP_ELEM_I1;
}

/* gather / scatter dimension numbers (sp_gather_dims_get) into x->ext; ixv
 * the indices, wv the value holding the window dims (gather: the result,
 * scatter: the updates). The executor adds integer indices and one element
 * type throughout. */
static cm_status prepare_gather_dims(prog *p, xop *x, uint32_t ixv, uint32_t wv, cm_error *err)
{
    const sp_module *m = p->m;
    const char *nm = m->ops[x->op].name;
    uint32_t opv = m->ops[x->op].operands[0];
    ex_gather_dims *g = cm_arena_zalloc(&p->arena, sizeof *g);
    if (g == NULL) {
        return cm_error_oom(err);
    }
    sp_gather_dims d;
    if (sp_gather_dims_get(m, x->op, &d, NULL) != CM_OK) {
        return ex_op_error(p, x->op, err,
                           d.decoded ? "op %s: dimension numbers do not fit the operand shapes"
                                     : "op %s: attributes the executor cannot read",
                           nm);
    }
    const sp_type *it = sp_value_type(m, ixv);
    if (!is_int_elem(it->elem) || sp_value_type(m, wv)->elem != sp_value_type(m, opv)->elem ||
        sp_value_type(m, m->ops[x->op].first_result)->elem != sp_value_type(m, opv)->elem) {
        return ex_op_error(p, x->op, err, "op %s: dimension numbers do not fit the operand shapes",
                           nm);
    }
    g->n_offset = d.n_offset;
    g->n_collapsed = d.n_collapsed;
    g->n_obatch = d.n_operand_batch;
    g->n_ibatch = d.n_indices_batch;
    g->n_start_map = d.n_index_map;
    g->ivd = d.index_vector_dim;
    g->offset_dims = ints_keep(p, d.offset, d.n_offset);
    g->collapsed = ints_keep(p, d.collapsed, d.n_collapsed);
    g->obatch = ints_keep(p, d.operand_batch, d.n_operand_batch);
    g->ibatch = ints_keep(p, d.indices_batch, d.n_indices_batch);
    g->start_map = ints_keep(p, d.index_map, d.n_index_map);
    if (g->offset_dims == NULL || g->collapsed == NULL || g->obatch == NULL || g->ibatch == NULL ||
        g->start_map == NULL) {
        return cm_error_oom(err);
    }
    x->ext = g;
    return CM_OK;
}

static cm_status prepare_gather(prog *p, xop *x, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_operands != 2 || o->n_results != 1) {
        return ex_op_error(p, x->op, err, "op %s with these operands cannot be executed yet",
                           o->name);
    }
    cm_status st = prepare_gather_dims(p, x, o->operands[1], o->first_result, err);
    if (st != CM_OK) {
        return st;
    }
    ex_gather_dims *g = x->ext;
    uint32_t n = 0;
    int64_t ss[SP_MAX_RANK];
    if (sp_gather_slice_sizes_get(p->m, x->op, ss, &n, NULL) != CM_OK) {
        return ex_op_error(p, x->op, err, "op %s: slice_sizes do not fit the operand", o->name);
    }
    g->slice_sizes = ints_keep(p, ss, n);
    return g->slice_sizes != NULL ? CM_OK : cm_error_oom(err);
}

/* The combiner of a scatter's body: -1 replace (returns the update), else
 * EX_RED_*; -2 for anything else. */
static int scatter_body(const sp_module *m, uint32_t op)
{
    const sp_block *b = body_block(m, op);
    if (b == NULL) {
        return -2;
    }
    if (b->n_ops == 1 && b->n_args == 2) {
        const sp_op *ret = &m->ops[b->ops[0]];
        return ret->n_operands == 1 && ret->operands[0] == b->first_arg + 1 ? -1 : -2;
    }
    int fn = reduce_body(m, op);
    return fn == RED_ADD || fn == RED_MUL || fn == RED_MAX || fn == RED_MIN ? fn : -2;
}

static cm_status prepare_scatter(prog *p, xop *x, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_operands != 3 || o->n_results != 1) {
        return ex_op_error(p, x->op, err, "op %s with several inputs cannot be executed yet",
                           o->name);
    }
    x->fn = scatter_body(p->m, x->op);
    if (x->fn < -1) {
        return ex_op_error(p, x->op, err, "%s with this body cannot be executed yet", o->name);
    }
    return prepare_gather_dims(p, x, o->operands[1], o->operands[2], err);
}

/* The extent of n elements d apart, (n - 1) * d + 1 (0 for none); -1 past
 * 2^60. */
static int64_t dilated(int64_t n, int64_t d)
{
    int64_t r;
    if (n <= 0) {
        return 0;
    }
    if (!cm_mul_i64(n - 1, d, &r) || r > ((int64_t)1 << 60)) {
        return -1;
    }
    return r + 1;
}

static cm_status prepare_conv(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    ex_conv_dims *cd = cm_arena_zalloc(&p->arena, sizeof *cd);
    if (cd == NULL) {
        return cm_error_oom(err);
    }
    if (o->n_operands != 2 || o->n_results != 1) {
        return ex_op_error(p, x->op, err, "op %s with these operands cannot be executed yet", nm);
    }
    const sp_type *it = sp_value_type(m, o->operands[0]), *kt = sp_value_type(m, o->operands[1]),
                  *ot = sp_value_type(m, o->first_result);
    sp_conv_dims dims;
    bool ok = sp_conv_dims_get(m, x->op, &dims, NULL) == CM_OK && it->rank <= EX_KERN_MAX_RANK;
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    cd->ns = dims.n_spatial;
    cd->ib = dims.input_batch;
    cd->ifeat = dims.input_feature;
    cd->ki = dims.kernel_input_feature;
    cd->ko = dims.kernel_output_feature;
    cd->ob = dims.output_batch;
    cd->ofeat = dims.output_feature;
    cd->fgc = dims.feature_group_count;
    cd->bgc = dims.batch_group_count;
    for (uint32_t j = 0; j < cd->ns; j++) {
        cd->is[j] = dims.input_spatial[j];
        cd->ks[j] = dims.kernel_spatial[j];
        cd->os[j] = dims.output_spatial[j];
        cd->stride[j] = 1;
        cd->rdil[j] = 1;
    }
    const int64_t *a;
    uint32_t na;
    const int64_t big = (int64_t)1 << 60; /* window parameters beyond this are refused */
    if (ints_attr(p, x->op, "window_strides", &a, &na)) {
        ok = ok && na == cd->ns;
        for (uint32_t j = 0; ok && j < na; j++) {
            ok = a[j] >= 1 && a[j] <= big;
            cd->stride[j] = a[j];
        }
    }
    static const char *const dil[2] = {"lhs_dilation", "rhs_dilation"};
    for (int i = 0; i < 2; i++) {
        int64_t *to = i == 0 ? cd->ldil : cd->rdil;
        for (uint32_t j = 0; j < cd->ns; j++) {
            to[j] = 1;
        }
        if (ints_attr(p, x->op, dil[i], &a, &na)) {
            ok = ok && na == cd->ns;
            for (uint32_t j = 0; ok && j < na; j++) {
                ok = a[j] >= 1 && a[j] <= big;
                to[j] = a[j];
            }
        }
    }
    int64_t pad_hi[EX_KERN_MAX_RANK] = {0};
    if (ints_attr(p, x->op, "padding", &a, &na)) {
        ok = ok && na == 2 * cd->ns;
        for (uint32_t j = 0; ok && j < cd->ns; j++) {
            cd->pad_lo[j] = a[2 * j];
            pad_hi[j] = a[2 * j + 1];
            ok = a[2 * j] >= -big && a[2 * j] <= big && a[2 * j + 1] >= -big && a[2 * j + 1] <= big;
        }
    }
    if (ints_attr(p, x->op, "window_reversal", &a, &na)) {
        ok = ok && na == cd->ns;
        for (uint32_t j = 0; ok && j < na; j++) {
            cd->rev[j] = a[j] != 0;
        }
    }
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: window attributes the executor cannot read", nm);
    }
    /* the output shape must follow from the window and the groups (so no read
     * goes astray) */
    int64_t in_f = it->dims[cd->ifeat], in_b = it->dims[cd->ib], kout = kt->dims[cd->ko], kin;
    ok = (cd->fgc == 1 || cd->bgc == 1) && cm_mul_i64(kt->dims[cd->ki], cd->fgc, &kin) &&
         in_f == kin && kout % cd->fgc == 0 && kout % cd->bgc == 0 && in_b % cd->bgc == 0 &&
         ot->dims[cd->ofeat] == kout && ot->dims[cd->ob] == in_b / cd->bgc;
    for (uint32_t j = 0; ok && j < cd->ns; j++) {
        int64_t in = dilated(it->dims[cd->is[j]], cd->ldil[j]);
        int64_t span = dilated(kt->dims[cd->ks[j]], cd->rdil[j]);
        int64_t w = in + cd->pad_lo[j] + pad_hi[j] - span;
        ok = in >= 0 && span >= 0 && ot->dims[cd->os[j]] == (w < 0 ? 0 : w / cd->stride[j] + 1);
    }
    if (!ok || it->elem != ot->elem || kt->elem != ot->elem ||
        (ot->elem != SP_ELEM_F32 && ot->elem != SP_ELEM_F64 && ot->elem != SP_ELEM_BF16 &&
         ot->elem != SP_ELEM_F16)) {
        return ex_op_error(p, x->op, err, "op %s: shapes or types the executor cannot run", nm);
    }
    x->ext = cd;
    return CM_OK;
}

/* The window (sp_window_get, into *w) of a windowed op of the given rank:
 * window_dimensions (required here), window_strides (default 1) and padding
 * into x->a, x->b and x->c (lo, hi per dim; absent: x->nc 0); *ok false when
 * they are unreadable or too large for the kernels. CM_ENOMEM only. */
static cm_status window_attrs(prog *p, xop *x, uint32_t rank, sp_window *w, bool *ok,
                              cm_error *err)
{
    *ok = sp_window_get(p->m, x->op, w, NULL) == CM_OK && w->n_dims == rank;
    if (!*ok) {
        return CM_OK;
    }
    int64_t *keep = cm_arena_alloc(&p->arena, sizeof(int64_t) * (4u * rank + 1u));
    if (keep == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t k = 0; k < rank; k++) {
        keep[k] = w->dims[k];
        keep[rank + k] = w->n_strides != 0 ? w->strides[k] : 1;
        keep[2 * rank + 2 * k] = w->n_padding != 0 ? w->padding[2 * k] : 0;
        keep[2 * rank + 2 * k + 1] = w->n_padding != 0 ? w->padding[2 * k + 1] : 0;
    }
    x->a = keep;
    x->na = rank;
    x->b = keep + rank;
    x->nb = rank;
    x->c = keep + 2 * rank;
    x->nc = w->n_padding;
    const int64_t big = (int64_t)1 << 60; /* beyond this the window arithmetic could overflow */
    size_t nwin = 1; /* elements of one window: at most 2^32 */
    for (uint32_t k = 0; *ok && k < rank; k++) {
        *ok = x->a[k] >= 1 && x->a[k] <= big && x->b[k] >= 1 && x->b[k] <= big &&
              cm_mul_size(nwin, (size_t)x->a[k], &nwin) && nwin <= ((size_t)1 << 32);
    }
    for (uint32_t k = 0; *ok && k < x->nc; k++) {
        *ok = x->c[k] >= -big && x->c[k] <= big;
    }
    return CM_OK;
}

/* Whether w (the windowed result, or select_and_scatter's source) has one
 * element per window of the decoded window over t. */
static bool window_count_ok(const xop *x, const sp_type *t, const sp_type *w)
{
    if (w->rank != t->rank) {
        return false;
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        int64_t lo = x->nc ? x->c[2 * k] : 0, hi = x->nc ? x->c[2 * k + 1] : 0;
        if (t->dims[k] > ((int64_t)1 << 60)) {
            return false;
        }
        int64_t span = t->dims[k] + lo + hi - x->a[k];
        if (w->dims[k] != (span < 0 ? 0 : span / x->b[k] + 1)) {
            return false;
        }
    }
    return true;
}

/* reduce_window: window dims in x->a, strides in x->b, padding (lo, hi per
 * dim) in x->c; no dilations. */
static cm_status prepare_reduce_window(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    if (o->n_operands != 2 || o->n_results != 1) {
        return ex_op_error(p, x->op, err, "%s with several inputs cannot be executed yet", o->name);
    }
    x->fn = reduce_body(m, x->op);
    if (x->fn < 0) {
        return ex_op_error(p, x->op, err, "%s with this body cannot be executed yet", o->name);
    }
    const sp_type *t = sp_value_type(m, o->operands[0]), *rt = sp_value_type(m, o->first_result);
    uint32_t rank = t->rank;
    bool ok;
    sp_window w;
    cm_status st = window_attrs(p, x, rank, &w, &ok, err);
    if (st != CM_OK) {
        return st;
    }
    ok = ok && rt->elem == t->elem && sp_value_type(m, o->operands[1])->elem == t->elem;
    for (uint32_t k = 0; ok && k < w.n_base_dilations + w.n_window_dilations; k++) {
        int64_t d = k < w.n_base_dilations ? w.base_dilations[k]
                                           : w.window_dilations[k - w.n_base_dilations];
        if (d != 1) {
            return ex_op_error(p, x->op, err, "%s with dilations cannot be executed yet",
                               o->name);
        }
    }
    if (!ok || !window_count_ok(x, t, rt)) {
        return ex_op_error(p, x->op, err, "op %s: attributes the executor cannot read", o->name);
    }
    return CM_OK;
}

/* The block of region ri of op when that region has exactly one, or NULL. */
static const sp_block *region_block(const sp_module *m, uint32_t op, uint32_t ri)
{
    const sp_op *o = &m->ops[op];
    if (ri >= o->n_regions || o->regions[ri].n_blocks != 1) {
        return NULL;
    }
    return &m->blocks[o->regions[ri].blocks[0]];
}

/* The op defining v in block bi, or SP_NONE (an argument, or a value from
 * outside the block). */
static uint32_t def_in(const sp_module *m, uint32_t bi, uint32_t v)
{
    uint32_t d = m->values[v].def;
    return d != SP_NONE && m->ops[d].parent_block == bi ? d : SP_NONE;
}

/* Argument number of v when it is an argument of block bi, else -1. */
static int64_t arg_of(const sp_module *m, uint32_t bi, uint32_t v)
{
    const sp_value *val = &m->values[v];
    return val->def == SP_NONE && val->block == bi ? (int64_t)val->index : -1;
}

/* Whether op c (in block bi) compares arguments base and base + 1, and
 * whether swapped (base + 1 first). */
static bool compares_pair(const sp_module *m, uint32_t bi, uint32_t c, int64_t base, bool *swapped)
{
    const sp_op *o = &m->ops[c];
    if (o->kind != SP_OP_COMPARE || o->n_operands != 2) {
        return false;
    }
    int64_t a0 = arg_of(m, bi, o->operands[0]), a1 = arg_of(m, bi, o->operands[1]);
    *swapped = a0 == base + 1 && a1 == base;
    return *swapped || (a0 == base && a1 == base + 1);
}

/* The input index whose pair of arguments compare op c (in comparator block
 * bi) compares, or -1. */
static int64_t compare_input(const sp_module *m, uint32_t bi, uint32_t c, bool *swapped)
{
    const sp_op *o = &m->ops[c];
    if (o->kind != SP_OP_COMPARE || o->n_operands != 2) {
        return -1;
    }
    int64_t a0 = arg_of(m, bi, o->operands[0]);
    int64_t base = a0 < 0 ? -1 : a0 - a0 % 2;
    return base >= 0 && compares_pair(m, bi, c, base, swapped) ? base / 2 : -1;
}

/* Appends the keys of sort comparator value v (in block bi): a compare LT or
 * GT of one input's pair of arguments, or `or(that, and(compare EQ of the
 * same pair and type, rest))` with the operands of or and and in any order
 * (JAX's lexicographic comparators). false for any other form. */
static bool comparator_keys(const sp_module *m, uint32_t bi, uint32_t v, ex_sort_key *keys,
                            uint32_t *nk, uint32_t depth)
{
    uint32_t d = def_in(m, bi, v);
    if (d == SP_NONE || *nk >= EX_SORT_MAX_KEYS || depth > 2 * EX_SORT_MAX_KEYS) {
        return false;
    }
    const sp_op *o = &m->ops[d];
    if (o->kind == SP_OP_COMPARE) {
        bool total, swapped;
        int dir = compare_dir(m, d, &total);
        int64_t in = compare_input(m, bi, d, &swapped);
        if (in < 0 || (dir != CMP_LT && dir != CMP_GT)) {
            return false;
        }
        keys[(*nk)++] = (ex_sort_key){(uint32_t)in, (dir == CMP_GT) != swapped, total};
        return true;
    }
    if (o->kind != SP_OP_OR || o->n_operands != 2) {
        return false;
    }
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t lt = def_in(m, bi, o->operands[s]), an = def_in(m, bi, o->operands[1 - s]);
        if (lt == SP_NONE || an == SP_NONE || m->ops[an].kind != SP_OP_AND ||
            m->ops[an].n_operands != 2) {
            continue;
        }
        bool lt_total, lt_swapped;
        compare_dir(m, lt, &lt_total);
        int64_t in = compare_input(m, bi, lt, &lt_swapped);
        for (uint32_t t = 0; in >= 0 && t < 2; t++) {
            uint32_t eq = def_in(m, bi, m->ops[an].operands[t]);
            bool eq_total, eq_swapped;
            uint32_t mark = *nk;
            if (eq != SP_NONE && compare_dir(m, eq, &eq_total) == CMP_EQ && eq_total == lt_total &&
                compares_pair(m, bi, eq, 2 * in, &eq_swapped) &&
                comparator_keys(m, bi, o->operands[s], keys, nk, depth + 1) &&
                comparator_keys(m, bi, m->ops[an].operands[1 - t], keys, nk, depth + 1)) {
                return true;
            }
            *nk = mark;
        }
    }
    return false;
}

/* The value a one-block region returns (its last op a return of one value),
 * or SP_NONE. */
static uint32_t block_result(const sp_module *m, const sp_block *b)
{
    if (b == NULL || b->n_ops == 0) {
        return SP_NONE;
    }
    const sp_op *r = &m->ops[b->ops[b->n_ops - 1]];
    bool is_ret = r->kind == SP_OP_RETURN || r->kind == SP_OP_FUNC_RETURN;
    return is_ret && r->n_operands == 1 ? r->operands[0] : SP_NONE;
}

/* sort: the sort dimension in x->dim, the comparator's keys in x->ext (x->fn
 * of them). */
static cm_status prepare_sort(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    bool ok = o->n_operands >= 1 && o->n_results == o->n_operands;
    const sp_type *t0 = ok ? sp_value_type(m, o->operands[0]) : NULL;
    for (uint32_t j = 0; ok && j < o->n_operands; j++) {
        const sp_type *t = sp_value_type(m, o->operands[j]),
                      *rt = sp_value_type(m, o->first_result + j);
        ok = t->rank == t0->rank && rt->rank == t0->rank && rt->elem == t->elem;
        for (uint32_t k = 0; ok && k < t0->rank; k++) {
            ok = t->dims[k] == t0->dims[k] && rt->dims[k] == t0->dims[k];
        }
    }
    const sp_attr *d = sp_op_attr(m, x->op, "dimension");
    ok = ok && d != NULL && d->kind == SP_ATTR_INT;
    int64_t dim = ok ? d->u.i.v : 0;
    if (ok && dim < 0) {
        dim += (int64_t)t0->rank; /* the spec allows -rank <= dimension < 0 */
    }
    if (!ok || dim < 0 || dim >= (int64_t)t0->rank) {
        return ex_op_error(p, x->op, err,
                        "op %s: operands, results or dimension the executor cannot read", nm);
    }
    x->dim = dim;
    ex_sort_key *keys = cm_arena_alloc(&p->arena, sizeof *keys * EX_SORT_MAX_KEYS);
    if (keys == NULL) {
        return cm_error_oom(err);
    }
    const sp_block *b = body_block(m, x->op);
    uint32_t nk = 0, v = block_result(m, b);
    if (v == SP_NONE || b->n_args != 2 * o->n_operands ||
        !comparator_keys(m, o->regions[0].blocks[0], v, keys, &nk, 0)) {
        return ex_op_error(p, x->op, err,
                        "%s with this comparator cannot be executed yet (it runs compare LT or "
                        "GT of one input's pair, or such compares combined lexicographically "
                        "as JAX emits them)",
                        nm);
    }
    x->ext = keys;
    x->fn = (int)nk;
    return CM_OK;
}

/* select_and_scatter: the window as reduce_window's (x->a, x->b, x->c), the
 * scatter body in x->fn, the select direction (CMP_GE/GT/LE/LT of the
 * current pick against a candidate) in x->dim, x->nd 1 for TOTALORDER. */
static cm_status prepare_select_scatter(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    if (o->n_operands != 3 || o->n_results != 1 || o->n_regions != 2) {
        return ex_op_error(p, x->op, err, "op %s with these operands cannot be executed yet", nm);
    }
    const sp_block *sel = region_block(m, x->op, 0), *sc = region_block(m, x->op, 1);
    uint32_t cv = block_result(m, sel),
             c = cv == SP_NONE ? SP_NONE : def_in(m, o->regions[0].blocks[0], cv);
    bool total = false, swapped = false;
    int dir = c == SP_NONE ? -1 : compare_dir(m, c, &total);
    if (c == SP_NONE || sel->n_args != 2 ||
        !compares_pair(m, o->regions[0].blocks[0], c, 0, &swapped) ||
        (dir != CMP_GE && dir != CMP_GT && dir != CMP_LE && dir != CMP_LT)) {
        return ex_op_error(p, x->op, err,
                        "%s with this select body cannot be executed yet (it runs compare GE, "
                        "GT, LE or LT of the two arguments)",
                        nm);
    }
    if (swapped) { /* b GE a is a LE b */
        dir = dir == CMP_GE ? CMP_LE : dir == CMP_LE ? CMP_GE : dir == CMP_GT ? CMP_LT : CMP_GT;
    }
    x->fn = block_reduce_fn(m, sc);
    if (x->fn != RED_ADD && x->fn != RED_MUL && x->fn != RED_MAX && x->fn != RED_MIN) {
        return ex_op_error(p, x->op, err,
                        "%s with this scatter body cannot be executed yet (add, multiply, "
                        "maximum or minimum)",
                        nm);
    }
    x->dim = dir;
    x->nd = total ? 1u : 0u;
    const sp_type *t = sp_value_type(m, o->operands[0]), *srct = sp_value_type(m, o->operands[1]),
                  *rt = sp_value_type(m, o->first_result);
    bool ok;
    sp_window w;
    cm_status st = window_attrs(p, x, t->rank, &w, &ok, err);
    if (st != CM_OK) {
        return st;
    }
    if (!ok || !window_count_ok(x, t, srct) || rt->rank != t->rank) {
        return ex_op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    for (uint32_t k = 0; k < t->rank; k++) {
        ok = ok && rt->dims[k] == t->dims[k];
    }
    ok = ok && srct->elem == t->elem && rt->elem == t->elem &&
         sp_value_type(m, o->operands[2])->elem == t->elem &&
         sp_value_type(m, o->operands[2])->rank == 0;
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: shapes or types the executor cannot run", nm);
    }
    if (t->elem != SP_ELEM_F32 && t->elem != SP_ELEM_F64 && t->elem != SP_ELEM_BF16 &&
        t->elem != SP_ELEM_F16) {
        return ex_op_error(p, x->op, err,
                           "%s on %s cannot be executed yet (f32, f64, bf16 and f16 only)", nm,
                        t->text);
    }
    return CM_OK;
}

/* pad, dynamic_slice, dynamic_update_slice: attribute and operand checks. */
static cm_status prepare_slicing(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const sp_type *t = sp_value_type(m, o->operands[0]), *rt = sp_value_type(m, o->first_result);
    bool ok = o->n_results == 1 && t->rank == rt->rank;
    if (x->kind == SP_OP_PAD) {
        ok = ok && o->n_operands == 2 && ints_attr(p, x->op, "edge_padding_low", &x->a, &x->na) &&
             ints_attr(p, x->op, "edge_padding_high", &x->b, &x->nb) &&
             ints_attr(p, x->op, "interior_padding", &x->c, &x->nc) && x->na == t->rank &&
             x->nb == t->rank && x->nc == t->rank && sp_value_type(m, o->operands[1])->rank == 0 &&
             sp_value_type(m, o->operands[1])->elem == t->elem && rt->elem == t->elem;
        for (uint32_t k = 0; ok && k < t->rank; k++) {
            int64_t n = t->dims[k];
            ok = x->c[k] >= 0 &&
                 rt->dims[k] == x->a[k] + x->b[k] + n + (n > 0 ? (n - 1) * x->c[k] : 0);
        }
    } else {
        uint32_t first = x->kind == SP_OP_DYNAMIC_SLICE ? 1u : 2u;
        ok = ok && o->n_operands == first + t->rank;
        for (uint32_t j = first; ok && j < o->n_operands; j++) {
            const sp_type *sit = sp_value_type(m, o->operands[j]);
            ok = sit->rank == 0 && is_int_elem(sit->elem);
        }
        if (ok && x->kind == SP_OP_DYNAMIC_SLICE) {
            ok = ints_attr(p, x->op, "slice_sizes", &x->a, &x->na) && x->na == t->rank &&
                 rt->elem == t->elem;
            for (uint32_t k = 0; ok && k < t->rank; k++) {
                ok = x->a[k] >= 0 && x->a[k] <= t->dims[k] && rt->dims[k] == x->a[k];
            }
        } else if (ok) {
            const sp_type *ut = sp_value_type(m, o->operands[1]);
            ok = ut->rank == t->rank && ut->elem == t->elem && rt->elem == t->elem;
            for (uint32_t k = 0; ok && k < t->rank; k++) {
                ok = ut->dims[k] <= t->dims[k] && rt->dims[k] == t->dims[k];
            }
        }
    }
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: operands or attributes the executor cannot run",
                        o->name);
    }
    return CM_OK;
}

static cm_status prepare_op(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    x->kind = (sp_op_kind)o->kind;
    bool ok = true;
    switch (x->kind) {
    case SP_OP_ADD:
    case SP_OP_SUBTRACT:
    case SP_OP_MULTIPLY:
    case SP_OP_DIVIDE:
    case SP_OP_MAXIMUM:
    case SP_OP_MINIMUM:
    case SP_OP_AND:
    case SP_OP_OR:
    case SP_OP_XOR:
    case SP_OP_NOT:
    case SP_OP_NEGATE:
    case SP_OP_EXPONENTIAL:
    case SP_OP_TANH:
    case SP_OP_ABS:
    case SP_OP_SQRT:
    case SP_OP_RSQRT:
    case SP_OP_LOG:
    case SP_OP_LOGISTIC:
    case SP_OP_REMAINDER:
    case SP_OP_ATAN2:
    case SP_OP_POWER:
    case SP_OP_SHIFT_LEFT:
    case SP_OP_SHIFT_RIGHT_LOGICAL:
    case SP_OP_SHIFT_RIGHT_ARITHMETIC:
    case SP_OP_SIGN:
    case SP_OP_CBRT:
    case SP_OP_CEIL:
    case SP_OP_FLOOR:
    case SP_OP_COSINE:
    case SP_OP_SINE:
    case SP_OP_EXPONENTIAL_MINUS_ONE:
    case SP_OP_LOG_PLUS_ONE:
    case SP_OP_ROUND_NEAREST_AFZ:
    case SP_OP_ROUND_NEAREST_EVEN:
    case SP_OP_POPCNT:
    case SP_OP_IS_FINITE:
    case SP_OP_SELECT:
    case SP_OP_CONVERT:
    case SP_OP_RESHAPE:
    case SP_OP_FUNC_RETURN:
    case SP_OP_RETURN:
    case SP_OP_SDY_RETURN:
        break;
    case SP_OP_CLAMP:
        ok = o->n_operands == 3;
        break;
    case SP_OP_REVERSE: {
        /* runs as the slice start G-1, stride -1 of each reversed dim (and
         * 0, 1 of the others): the slice's reads across devices included */
        const sp_type *t = sp_value_type(m, o->operands[0]);
        const int64_t *dims = NULL;
        uint32_t nd = 0;
        ok = o->n_operands == 1 && ints_attr(p, x->op, "dimensions", &dims, &nd);
        int64_t *a = cm_arena_alloc(&p->arena, sizeof(int64_t) * (3u * t->rank + 1u));
        if (a == NULL) {
            return cm_error_oom(err);
        }
        for (uint32_t k = 0; k < t->rank; k++) {
            a[k] = 0;
            a[t->rank + k] = t->dims[k];
            a[2 * t->rank + k] = 1;
        }
        for (uint32_t i = 0; ok && i < nd; i++) {
            ok = dims[i] >= 0 && dims[i] < (int64_t)t->rank && a[2 * t->rank + dims[i]] == 1;
            if (ok) {
                a[dims[i]] = t->dims[dims[i]] - 1;
                a[2 * t->rank + dims[i]] = -1;
            }
        }
        x->kind = SP_OP_SLICE;
        x->a = a;
        x->b = a + t->rank;
        x->c = a + 2 * t->rank;
        x->na = x->nb = x->nc = t->rank;
        break;
    }
    case SP_OP_COMPARE: {
        bool total;
        x->fn = compare_dir(m, x->op, &total);
        ok = x->fn >= 0 && o->n_operands == 2;
        x->nd = ok && total && elem_float(sp_value_type(m, o->operands[0])->elem) ? 1u : 0u;
        break;
    }
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT:
        return parse_constant(p, x, sp_op_attr(m, x->op, "value"),
                              sp_value_type(m, o->first_result)->elem,
                              count_of(sp_value_type(m, o->first_result)->dims,
                                       sp_value_type(m, o->first_result)->rank),
                              err);
    case SP_OP_IOTA: {
        const sp_attr *a = sp_op_attr(m, x->op, "iota_dimension");
        ok = a != NULL && a->kind == SP_ATTR_INT;
        x->dim = ok ? a->u.i.v : 0;
        break;
    }
    case SP_OP_CONCATENATE: {
        const sp_attr *a = sp_op_attr(m, x->op, "dimension");
        ok = a != NULL && a->kind == SP_ATTR_INT;
        x->dim = ok ? a->u.i.v : 0;
        break;
    }
    case SP_OP_BROADCAST_IN_DIM:
        ok = ints_attr(p, x->op, "broadcast_dimensions", &x->a, &x->na);
        break;
    case SP_OP_TRANSPOSE:
        ok = ints_attr(p, x->op, "permutation", &x->a, &x->na);
        break;
    case SP_OP_SLICE:
        ok = ints_attr(p, x->op, "start_indices", &x->a, &x->na) &&
             ints_attr(p, x->op, "limit_indices", &x->b, &x->nb) &&
             ints_attr(p, x->op, "strides", &x->c, &x->nc);
        break;
    case SP_OP_REDUCE:
        ok = o->n_operands == 2 && o->n_results == 1 &&
             ints_attr(p, x->op, "dimensions", &x->a, &x->na);
        x->fn = reduce_body(m, x->op);
        if (ok && x->fn < 0) {
            return ex_op_error(p, x->op, err, "%s with this body cannot be executed yet", nm);
        }
        break;
    case SP_OP_DOT_GENERAL: {
        /* batching dims in x->a (lhs), x->b (rhs), contracting in x->c, x->d */
        sp_dot_dims dd;
        ok = sp_dot_dims_get(m, x->op, &dd, NULL) == CM_OK &&
             sp_value_type(m, o->operands[0])->rank <= EX_MAX_RANK &&
             sp_value_type(m, o->operands[1])->rank <= EX_MAX_RANK;
        if (ok) {
            x->na = x->nb = dd.n_batch;
            x->nc = x->nd = dd.n_contract;
            x->a = ints_keep(p, dd.lhs_batch, dd.n_batch);
            x->b = ints_keep(p, dd.rhs_batch, dd.n_batch);
            x->c = ints_keep(p, dd.lhs_contract, dd.n_contract);
            x->d = ints_keep(p, dd.rhs_contract, dd.n_contract);
            if (x->a == NULL || x->b == NULL || x->c == NULL || x->d == NULL) {
                return cm_error_oom(err);
            }
        }
        sp_elem e = sp_value_type(m, o->first_result)->elem;
        sp_elem le = sp_value_type(m, o->operands[0])->elem;
        sp_elem re = sp_value_type(m, o->operands[1])->elem;
        bool floats = (e == SP_ELEM_F32 || e == SP_ELEM_F64) && le == e && re == e;
        bool ints = is_int_elem(e) && is_int_elem(le) && is_int_elem(re);
        /* bf16/f16 (and f32) operands into a bf16, f16 or f32 result, one
         * of them a half: sgemm on f32 copies (ex_ops.c) */
#define F32ISH(t) ((t) == SP_ELEM_F32 || (t) == SP_ELEM_BF16 || (t) == SP_ELEM_F16)
        bool halves = F32ISH(e) && F32ISH(le) && F32ISH(re) &&
                      (e != SP_ELEM_F32 || le != SP_ELEM_F32 || re != SP_ELEM_F32);
#undef F32ISH
        if (ok && !floats && !ints && !halves) {
            return ex_op_error(p, x->op, err,
                            "%s on these element types cannot be executed yet (f32 or f64 "
                            "throughout, bf16/f16 with f32, or integers)",
                            nm);
        }
        break;
    }
    case SP_OP_PAD:
    case SP_OP_DYNAMIC_SLICE:
    case SP_OP_DYNAMIC_UPDATE_SLICE:
        return prepare_slicing(p, x, err);
    case SP_OP_GATHER:
        return prepare_gather(p, x, err);
    case SP_OP_SCATTER:
        return prepare_scatter(p, x, err);
    case SP_OP_CONVOLUTION:
        return prepare_conv(p, x, err);
    case SP_OP_REDUCE_WINDOW:
        return prepare_reduce_window(p, x, err);
    case SP_OP_SORT:
        return prepare_sort(p, x, err);
    case SP_OP_SELECT_AND_SCATTER:
        return prepare_select_scatter(p, x, err);
    case SP_OP_SDY_ALL_REDUCE:
        if (!p->replicated && !p->partial_inputs && whole_input(p, o->operands[0])) {
            return ex_op_error(p, x->op, err, "%s of %s: %s", nm, whole_input_what, not_partial);
        }
        return p->replicated ? CM_OK : prepare_groups(p, x, "reduction_axes", err);
    case SP_OP_SDY_ALL_GATHER:
        return p->replicated ? CM_OK : prepare_groups(p, x, "gathering_axes", err);
    case SP_OP_SDY_ALL_SLICE:
        return p->replicated ? CM_OK : prepare_groups(p, x, "slicing_axes", err);
    case SP_OP_SDY_ALL_TO_ALL:
        return p->replicated ? CM_OK : prepare_groups(p, x, "params", err);
    case SP_OP_SDY_REDUCE_SCATTER:
        if (!p->replicated && !p->partial_inputs && whole_input(p, o->operands[0])) {
            return ex_op_error(p, x->op, err, "%s of %s: %s", nm, whole_input_what, not_partial);
        }
        return p->replicated ? CM_OK : prepare_groups(p, x, "reduce_scatter_axes", err);
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_RESHARD:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
        /* Constraints and reshards move data when the shardings differ. */
        x->local = same_blocks(p, o->operands[0], o->first_result);
        return p->replicated || x->local ? CM_OK : prepare_groups(p, x, NULL, err);
    default:
        return ex_op_error(p, x->op, err, "op %s cannot be executed yet", nm);
    }
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: attributes the executor cannot read", nm);
    }
    return CM_OK;
}

/* ---- sharded dimensions: partial results, reads across devices -------------------- */

/* Whether dimension k of v is split over the devices (some block is smaller
 * than the value). */
static bool dim_split(const prog *p, uint32_t v, uint32_t k)
{
    return p->vi[v].ldims[k] < p->vi[v].gdims[k];
}

/* x->once for a partial result: a device starts from the init value (the
 * operand) when its block of v starts at 0 in every dimension of split[]. */
static cm_status once_make(prog *p, xop *x, uint32_t v, const bool *split, cm_error *err)
{
    x->once = cm_arena_zalloc(&p->arena, p->n_dev + 1u);
    if (x->once == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        bool first = true;
        for (uint32_t k = 0; k < p->vi[v].rank; k++) {
            first = first && (!split[k] || voff(p, v, d)[k] == 0);
        }
        x->once[d] = first ? 1u : 0u;
    }
    return CM_OK;
}

/* A reduce over a split dimension leaves partial results of its body's
 * kind for the all-reduce after it; an add or multiply applies its init
 * value on one device of each reduction group only (padding along the
 * split dimension: mask_padding, ex_ops.c). */
static cm_status partial_reduce(prog *p, xop *x, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t in = o->operands[0];
    bool split[EX_MAX_RANK] = {false}, any = false;
    for (uint32_t i = 0; i < x->na; i++) {
        uint32_t k = (uint32_t)x->a[i];
        if (x->a[i] < 0 || k >= p->vi[in].rank || !dim_split(p, in, k)) {
            continue;
        }
        split[k] = any = true;
    }
    if (!any) {
        return CM_OK;
    }
    p->vi[o->first_result].pkind = x->fn;
    return x->fn == RED_ADD || x->fn == RED_MUL ? once_make(p, x, in, split, err) : CM_OK;
}

/* True when update dim k (the i-th of the updates' scatter dims) is an
 * indices batching dim whose operand batching dim the result r holds in the
 * same blocks on every device: each device then scatters into its own batch
 * slice, and its result block is whole, not a partial result. */
static bool batch_aligned(const prog *p, const ex_gather_dims *g, uint32_t u, uint32_t k,
                          uint32_t i, uint32_t r)
{
    int64_t idim = g->ivd >= 0 && (int64_t)i >= g->ivd ? (int64_t)i + 1 : (int64_t)i;
    for (uint32_t j = 0; j < g->n_ibatch && j < g->n_obatch; j++) {
        if (g->ibatch[j] != idim) {
            continue;
        }
        int64_t ob = g->obatch[j];
        if (ob < 0 || ob >= (int64_t)p->vi[r].rank || p->vi[r].ldims[ob] != p->vi[u].ldims[k]) {
            return false;
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            if (voff(p, r, d)[ob] != voff(p, u, d)[k]) {
                return false;
            }
        }
        return true;
    }
    return false;
}

/* A scatter whose updates are split along their scatter (non-window)
 * dimensions leaves partial results for the all-reduce after it: each
 * device scatters its own updates, and only the first of each group starts
 * from the operand. A split batching dim that the result is split along in
 * the same blocks is no such dimension (batch_aligned). */
static cm_status partial_scatter(prog *p, xop *x, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    const ex_gather_dims *g = x->ext;
    uint32_t u = o->operands[2];
    bool split[EX_MAX_RANK] = {false}, any = false;
    uint32_t i = 0; /* position among the scatter dims */
    for (uint32_t k = 0; k < p->vi[u].rank; k++) {
        bool window = false;
        for (uint32_t j = 0; j < g->n_offset; j++) {
            window = window || g->offset_dims[j] == (int64_t)k;
        }
        if (window) {
            continue;
        }
        if (dim_split(p, u, k) && !batch_aligned(p, g, u, k, i, o->first_result)) {
            split[k] = any = true;
        }
        i++;
    }
    if (!any) {
        return CM_OK;
    }
    if (x->fn < 0) {
        return ex_op_error(p, x->op, err,
                           "%s that replaces, with its updates split over the devices along "
                           "a scatter dimension, cannot be executed (the devices' results "
                           "cannot be combined; replicate the updates first)",
                           o->name);
    }
    p->vi[o->first_result].pkind = x->fn;
    return x->fn == RED_ADD || x->fn == RED_MUL ? once_make(p, x, u, split, err) : CM_OK;
}

/* A slice runs on each device's blocks when its operand block holds every
 * element its result block reads; otherwise (a split dimension the slice
 * moves) each device reads its result block from the devices holding the
 * elements (x->peer_read): the operand is resharded, never read where the
 * block lacks the data. */
static cm_status local_slice(prog *p, xop *x)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    p->vi[r].pkind = I->pkind;
    if (x->na != I->rank || x->nb != I->rank || x->nc != I->rank || O->rank != I->rank) {
        return CM_OK; /* ex_ops.c reports it */
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t ro = voff(p, r, d)[k], n = valid_len(O, k, ro), io = voff(p, v, d)[k];
            if (n <= 0) {
                continue;
            }
            int64_t first = x->a[k] + x->c[k] * ro, last = x->a[k] + x->c[k] * (ro + n - 1);
            int64_t lo = first < last ? first : last, hi = (first < last ? last : first) + 1;
            if (lo < io || hi > io + valid_len(I, k, io)) {
                x->peer_read = true;
                return CM_OK;
            }
        }
    }
    return CM_OK;
}

/* Whether device d's block of v, in dims [from, to) of v seen as a tensor
 * of their own, is one run [*start, *start + *count) of it in row-major
 * order, without padding. */
static bool group_run(const prog *p, uint32_t v, uint32_t d, uint32_t from, uint32_t to,
                      int64_t *start, int64_t *count)
{
    const vinfo *vi = &p->vi[v];
    bool outer = true; /* only dims of extent 1 so far */
    int64_t s = 0, n = 1;
    for (uint32_t k = from; k < to; k++) {
        int64_t off = voff(p, v, d)[k];
        if (valid_len(vi, k, off) != vi->ldims[k] || (!outer && vi->ldims[k] != vi->gdims[k])) {
            return false;
        }
        if (vi->ldims[k] != 1) {
            outer = false;
        }
        s = s * vi->gdims[k] + off;
        n *= vi->ldims[k];
    }
    *start = s;
    *count = n;
    return true;
}

/* Whether a reshape of v into r is a copy of each device's block: the dims
 * fall into groups of equal extent (operand dims [i0, i) against result
 * dims [j0, j)), and in each group the two blocks are the same (one dim on
 * each side: same extent and offset, padding included) or the same run of
 * elements of the group. */
static bool reshape_is_local(const prog *p, uint32_t v, uint32_t r)
{
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    if (count_of(I->gdims, I->rank) == 0 || count_of(O->gdims, O->rank) == 0) {
        return I->lcount == O->lcount;
    }
    uint32_t i = 0, j = 0;
    while (i < I->rank || j < O->rank) {
        uint32_t i0 = i, j0 = j;
        int64_t pi = i < I->rank ? I->gdims[i++] : 1, pj = j < O->rank ? O->gdims[j++] : 1;
        while (pi != pj) {
            if (pi < pj && i < I->rank) {
                pi *= I->gdims[i++];
            } else if (pj < pi && j < O->rank) {
                pj *= O->gdims[j++];
            } else {
                return false;
            }
        }
        for (uint32_t d = 0; d < p->n_dev; d++) {
            if (i - i0 == 1 && j - j0 == 1) {
                if (I->ldims[i0] != O->ldims[j0] || voff(p, v, d)[i0] != voff(p, r, d)[j0]) {
                    return false;
                }
                continue;
            }
            int64_t sa = 0, na = 0, sb = 0, nb = 0;
            if (!group_run(p, v, d, i0, i, &sa, &na) || !group_run(p, r, d, j0, j, &sb, &nb) ||
                sa != sb || na != nb) {
                return false;
            }
        }
    }
    return true;
}

/* A reshape copies a device's block when operand and result blocks hold
 * the same elements in the same order (reshape_is_local); when the operand
 * is held whole each result element is read at its place; otherwise each
 * device reads its result block from the devices holding the elements
 * (x->peer_read). */
static void local_reshape(prog *p, xop *x)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v];
    p->vi[r].pkind = I->pkind;
    if (I->lcount == p->vi[r].lcount && reshape_is_local(p, v, r)) {
        return;
    }
    bool whole = true;
    for (uint32_t k = 0; k < I->rank; k++) {
        whole = whole && I->ldims[k] == I->gdims[k];
    }
    x->gather_reshape = whole;
    x->peer_read = !whole;
}

/* A pad runs on each device's blocks when its operand block holds every
 * source element that lands in its result block (the test ex_ops.c makes);
 * otherwise (a sharded dim whose padding shifts the elements across block
 * boundaries) each device reads its result block from the devices holding
 * them, the padding value where none lands (x->peer_read). */
static void local_pad(prog *p, xop *x)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    if (x->na != I->rank || x->nc != I->rank || O->rank != I->rank) {
        return; /* prepare_slicing refused it */
    }
    for (uint32_t d = 0; d < p->n_dev; d++) {
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t ro = voff(p, r, d)[k], rl = valid_len(O, k, ro), step = x->c[k] + 1;
            int64_t g0 = ro - x->a[k], g1 = ro + rl - x->a[k];
            g0 = g0 <= 0 ? 0 : (g0 + step - 1) / step;
            g1 = g1 <= 0 ? 0 : (g1 + step - 1) / step;
            g1 = g1 < I->gdims[k] ? g1 : I->gdims[k];
            int64_t io = voff(p, v, d)[k];
            if (g1 > g0 && (g0 < io || g1 > io + valid_len(I, k, io))) {
                x->peer_read = true;
                return;
            }
        }
    }
}

/* A dynamic_slice or dynamic_update_slice moves elements along a dim its
 * window does not span whole; where its operand (or update) is split along
 * such a dim, the elements a result block needs depend on the start
 * indices and may lie on other devices: each device then reads its result
 * block from the devices holding them (x->peer_read). Else the blocks hold
 * what they need (the test ex_ops.c makes). */
static void local_dynamic(prog *p, xop *x)
{
    const sp_op *o = &p->m->ops[x->op];
    uint32_t v = o->operands[0], r = o->first_result;
    const vinfo *I = &p->vi[v], *O = &p->vi[r];
    bool dus = x->kind == SP_OP_DYNAMIC_UPDATE_SLICE;
    const vinfo *U = dus ? &p->vi[o->operands[1]] : NULL;
    if (O->rank != I->rank || (dus ? U->rank != I->rank : x->na != I->rank)) {
        return; /* prepare_slicing refused it */
    }
    for (uint32_t k = 0; k < I->rank; k++) {
        int64_t win = dus ? U->gdims[k] : x->a[k];
        if (win >= I->gdims[k]) {
            continue;
        }
        if (dim_split(p, v, k) || (dus && dim_split(p, o->operands[1], k))) {
            x->peer_read = true;
            return;
        }
    }
}

/* After prepare_op, in a partitioned run: what sharded dimensions mean for
 * x (partial results and their kind, init values applied once, slices and
 * reshapes that need elements other devices hold). */
static cm_status prepare_sharded(prog *p, xop *x, cm_error *err)
{
    if (p->replicated) {
        return CM_OK;
    }
    const sp_op *o = &p->m->ops[x->op];
    uint32_t r0 = o->first_result;
    switch (x->kind) {
    case SP_OP_REDUCE:
        return partial_reduce(p, x, err);
    case SP_OP_SCATTER:
        return partial_scatter(p, x, err);
    case SP_OP_SLICE:
        return local_slice(p, x);
    case SP_OP_PAD:
        local_pad(p, x);
        return CM_OK;
    case SP_OP_DYNAMIC_SLICE:
    case SP_OP_DYNAMIC_UPDATE_SLICE:
        local_dynamic(p, x);
        return CM_OK;
    case SP_OP_RESHAPE:
        if (o->n_operands == 1 && o->n_results == 1 &&
            sp_value_type(p->m, o->operands[0])->elem == sp_value_type(p->m, r0)->elem) {
            local_reshape(p, x);
        }
        return CM_OK;
    case SP_OP_SDY_ALL_REDUCE:
        x->fn = p->vi[o->operands[0]].pkind;
        p->vi[o->first_result].pkind = x->fn; /* still partial over other axes, if any */
        return CM_OK;
    case SP_OP_SDY_REDUCE_SCATTER:
        if (p->vi[o->operands[0]].pkind != RED_ADD) {
            return ex_op_error(p, x->op, err,
                               "%s of partial results that are not sums (a max, min, product "
                               "or logical reduction) cannot be executed yet",
                               o->name);
        }
        return CM_OK;
    case SP_OP_TRANSPOSE:
    case SP_OP_SDY_RESHARD:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_ALL_GATHER:
    case SP_OP_SDY_ALL_SLICE:
    case SP_OP_SDY_ALL_TO_ALL:
        /* moving elements keeps what they are partials of */
        if (o->n_operands >= 1 && o->n_results == 1) {
            p->vi[o->first_result].pkind = p->vi[o->operands[0]].pkind;
        }
        return CM_OK;
    default:
        return CM_OK;
    }
}

void ex_prog_fini(prog *p)
{
    cm_free(p->vi);
    cm_free(p->pbs);
    cm_arena_fini(&p->arena);
}

/* An integer module attribute (mhlo.num_replicas): 1 when absent, 0 when
 * not an integer in [1, 4096]. */
static uint32_t grid_attr(const sp_module *m, const char *name)
{
    const sp_attr *a = sp_attrs_get(m->attrs, m->n_attrs, name);
    if (a == NULL) {
        return 1;
    }
    return a->kind == SP_ATTR_INT && a->u.i.v >= 1 && a->u.i.v <= 4096 ? (uint32_t)a->u.i.v : 0;
}

/* The function op lies in (SP_NONE at the module's top level), and whether
 * an sdy.manual_computation encloses it on the way. */
static uint32_t enclosing_func(const sp_module *m, uint32_t op, bool *in_manual)
{
    *in_manual = false;
    for (uint32_t guard = 0; op != SP_NONE && guard <= EX_MAX_NEST * 4u; guard++) {
        const sp_op *o = &m->ops[op];
        if (o->kind == SP_OP_FUNC_FUNC) {
            return op;
        }
        *in_manual = *in_manual || o->kind == SP_OP_SDY_MANUAL_COMPUTATION;
        uint32_t blk = o->parent_block;
        op = blk < m->n_blocks ? m->blocks[blk].parent_op : SP_NONE;
    }
    return SP_NONE;
}

cm_status ex_module_spmd(const sp_module *m, uint32_t *n_rep, uint32_t *n_part, uint32_t *at_out)
{
    *n_rep = grid_attr(m, "mhlo.num_replicas");
    *n_part = grid_attr(m, "mhlo.num_partitions");
    *at_out = SP_NONE;
    uint32_t mainf = sp_module_func(m, "main");
    if (mainf == SP_NONE) {
        return CM_OK;
    }
    /* the functions main reaches through func.call (not run_parallel's
     * programs), and whether a manual computation may call them */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (strcmp(m->ops[i].name, "interpreter.run_parallel") == 0) {
            return CM_OK; /* main drives a grid of programs: not one itself */
        }
    }
    uint8_t *reach = cm_calloc(m->n_ops + 1u, 1);
    if (reach == NULL) {
        return CM_ENOMEM;
    }
    reach[mainf] = 1;
    bool has_manual = false, grew = true;
    for (uint32_t pass = 0; grew && pass <= EX_MAX_NEST; pass++) {
        grew = false;
        for (uint32_t i = 0; i < m->n_ops; i++) {
            bool man;
            has_manual = has_manual || m->ops[i].kind == SP_OP_SDY_MANUAL_COMPUTATION;
            if (m->ops[i].kind != SP_OP_FUNC_CALL) {
                continue;
            }
            uint32_t f = enclosing_func(m, i, &man);
            const sp_attr *c = sp_op_attr(m, i, "callee");
            uint32_t g = f != SP_NONE && reach[f] && c != NULL && c->kind == SP_ATTR_SYMBOL
                             ? sp_module_func(m, c->u.sym)
                             : SP_NONE;
            if (g != SP_NONE && !reach[g]) {
                reach[g] = man || reach[f] == 2 ? 2 : 1; /* 2: called from a manual body */
                grew = true;
            }
        }
    }
    uint32_t at = SP_NONE;
    for (uint32_t i = 0; i < m->n_ops && at == SP_NONE; i++) {
        bool man;
        if (!is_spmd_op((sp_op_kind)m->ops[i].kind)) {
            continue;
        }
        uint32_t f = enclosing_func(m, i, &man);
        /* a function a manual computation may call runs inside it */
        if (f != SP_NONE && reach[f] && !man && !(f != mainf && has_manual) && reach[f] != 2) {
            at = i;
        }
    }
    cm_free(reach);
    *at_out = at != SP_NONE ? at : *n_rep != 1 ? mainf : SP_NONE;
    return CM_OK;
}


uint32_t ex_module_devices(const sp_module *m)
{
    uint32_t nr, np, at = SP_NONE;
    /* out of memory: the mesh's size (ex_prog_init reports it) */
    if (ex_module_spmd(m, &nr, &np, &at) == CM_OK && at != SP_NONE && nr > 0 && np > 0 &&
        nr * np <= 4096) {
        return nr * np;
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *o = &m->ops[body->ops[i]];
        if (o->kind == SP_OP_SDY_MESH) {
            const sp_attr *a = sp_attrs_get(o->attrs, o->n_attrs, "mesh");
            if (a != NULL && a->kind == SP_ATTR_MESH && a->u.mesh->n_axes > 0) {
                return (uint32_t)sp_mesh_size(a->u.mesh);
            }
        }
    }
    return 1;
}

/* ---- control flow: preparation ---------------------------------------------------
 * Every block the workers run (main, called functions, while conditions and
 * bodies, case/if branches, manual computation bodies) is prepared once, in
 * program order, into a
 * pblock indexed by its block id; a function called from several places
 * shares its pblock, and each call gets fresh buffers at run time. A value
 * belongs to the block that defines it (its home), which frees it after its
 * last use there: a use inside a nested region counts as a use by the
 * enclosing op of the home block, so a value read by a loop body lives until
 * the loop ends. */

/* Records that the op at index idx of block blk uses v. */
static cm_status note_use(prog *p, uint32_t v, uint32_t blk, uint32_t idx, uint32_t op,
                          cm_error *err)
{
    vinfo *vi = &p->vi[v];
    if (!vi->live) {
        return ex_op_error(p, op, err, "%s: operand defined outside the blocks the executor runs",
                        p->m->ops[op].name);
    }
    if (vi->home == blk) {
        vi->last_use = idx;
        vi->inner_last = false;
        return CM_OK;
    }
    for (uint32_t k = p->n_nest; k-- > p->nest_base;) {
        if (p->nest_blk[k] == vi->home) {
            vi->last_use = p->nest_idx[k];
            vi->inner_last = true;
            return CM_OK;
        }
    }
    return ex_op_error(p, op, err, "%s: operand from a block that does not enclose it",
                    p->m->ops[op].name);
}

/* Prepares a block's arguments and sets their home. */
static cm_status prepare_args(prog *p, uint32_t blk, uint32_t op_for_err, bool borrowed,
                              cm_error *err)
{
    const sp_block *b = &p->m->blocks[blk];
    for (uint32_t i = 0; i < b->n_args; i++) {
        uint32_t v = b->first_arg + i;
        cm_status st = value_prepare(p, v, op_for_err, err);
        if (st != CM_OK) {
            return st;
        }
        p->vi[v].home = blk;
        p->vi[v].def_idx = 0;
        p->vi[v].borrowed = borrowed;
    }
    return CM_OK;
}

/* Whether values a[i] and first_b + i have the same types (types are
 * interned). */
static bool same_types(const sp_module *m, const uint32_t *a, uint32_t first_b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (m->values[a[i]].type != m->values[first_b + i].type) {
            return false;
        }
    }
    return true;
}

/* The terminator of prepared block blk (*t_out), which must be a `kind`
 * return of n values (owner: the op to blame otherwise). */
static cm_status block_return(prog *p, uint32_t blk, uint32_t owner, sp_op_kind kind, uint32_t n,
                              const sp_op **t_out, cm_error *err)
{
    const pblock *pb = &p->pbs[blk];
    const sp_op *t = pb->n_ops > 0 ? &p->m->ops[pb->ops[pb->n_ops - 1].op] : NULL;
    if (t == NULL || t->kind != (uint32_t)kind) {
        return ex_op_error(p, owner, err, "%s: a region or function that does not end with %s",
                        p->m->ops[owner].name, sp_op_kind_name(kind));
    }
    if (t->n_operands != n) {
        return ex_op_error(p, pb->ops[pb->n_ops - 1].op, err, "%s: returns %u values, %u expected",
                        t->name, t->n_operands, n);
    }
    *t_out = t;
    return CM_OK;
}

static cm_status prepare_block(prog *p, uint32_t blk, uint32_t depth, cm_error *err);

/* Block blk, run like a called function by op x (func.call, or
 * sdy.named_computation with its region): arguments borrowed from x's
 * operands and a scope of its own (functions and named computations are
 * isolated from above), prepared once; ret: the kind of its return, whose
 * values become x's results. owner (the function, or x) and what name the
 * callee in errors. */
static cm_status prepare_callee(prog *p, xop *x, uint32_t blk, uint32_t owner, uint32_t depth,
                                sp_op_kind ret, const char *what, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const pblock *pb = &p->pbs[blk];
    const sp_block *b = &m->blocks[blk];
    if (b->n_args != o->n_operands || !same_types(m, o->operands, b->first_arg, b->n_args)) {
        return ex_op_error(p, x->op, err, "%s: operands do not match the arguments of %s", o->name,
                        what);
    }
    if (!pb->done) {
        uint32_t base = p->nest_base;
        p->nest_base = p->n_nest;
        cm_status st = prepare_args(p, blk, owner, true, err);
        if (st == CM_OK) {
            st = prepare_block(p, blk, depth + 1u, err);
        }
        p->nest_base = base;
        if (st != CM_OK) {
            return st;
        }
    } else if (depth + 1u + pb->height > EX_MAX_NEST) {
        return ex_op_error(p, x->op, err,
                           "calls and regions nested deeper than %d cannot be executed",
                           EX_MAX_NEST);
    }
    const sp_op *t = NULL;
    cm_status st = block_return(p, blk, x->op, ret, o->n_results, &t, err);
    if (st != CM_OK) {
        return st;
    }
    if (!same_types(m, t->operands, o->first_result, o->n_results)) {
        return ex_op_error(p, x->op, err, "%s: results do not match what %s returns", o->name,
                        what);
    }
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t));
    if (x->sub == NULL) {
        return cm_error_oom(err);
    }
    x->sub[0] = blk;
    x->n_sub = 1;
    return CM_OK;
}

/* func.call: the callee's body (prepare_callee). */
static cm_status prepare_call(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_attr *c = sp_op_attr(m, x->op, "callee");
    if (c == NULL || c->kind != SP_ATTR_SYMBOL) {
        return ex_op_error(p, x->op, err, "func.call without a callee");
    }
    uint32_t f = sp_module_func(m, c->u.sym);
    if (f == SP_NONE) {
        return ex_op_error(p, x->op, err, "func.call: no function @%s in the module", c->u.sym);
    }
    if (m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks != 1) {
        return ex_op_error(p, x->op, err,
                        "func.call: @%s has several blocks or none; it cannot be executed yet",
                        c->u.sym);
    }
    uint32_t blk = m->ops[f].regions[0].blocks[0];
    const pblock *pb = &p->pbs[blk];
    if (pb->busy) {
        return ex_op_error(p, x->op, err, "func.call: recursive call to @%s cannot be executed",
                        c->u.sym);
    }
    if (pb->done && pb->manual != p->in_manual) {
        return ex_op_error(p, x->op, err,
                        "func.call: @%s called both inside and outside sdy.manual_computation "
                        "cannot be executed yet",
                        c->u.sym);
    }
    char what[160];
    snprintf(what, sizeof what, "@%s", c->u.sym);
    return prepare_callee(p, x, blk, f, depth, SP_OP_FUNC_RETURN, what, err);
}

/* sdy.named_computation: its region, run like a called function (its
 * in/out shardings are not used: the partitioner holds the region's
 * arguments replicated, as it sees them). */
static cm_status prepare_named(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1) {
        return ex_op_error(p, x->op, err, "%s: a region with several blocks cannot be executed yet",
                        o->name);
    }
    return prepare_callee(p, x, o->regions[0].blocks[0], x->op, depth, SP_OP_SDY_RETURN,
                          "its region", err);
}

/* The regions of a while, case or if (op at index idx of block blk): each
 * one block, prepared inside the op's scope. */
static cm_status prepare_regions(prog *p, xop *x, uint32_t blk, uint32_t idx, uint32_t depth,
                                 cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    bool is_while = x->kind == SP_OP_WHILE;
    if ((is_while && (o->n_regions != 2 || o->n_operands != o->n_results)) ||
        (x->kind == SP_OP_IF && (o->n_regions != 2 || o->n_operands != 1)) ||
        (x->kind == SP_OP_CASE && (o->n_regions < 1 || o->n_operands != 1))) {
        return ex_op_error(p, x->op, err, "%s: operands or regions the executor cannot run",
                           o->name);
    }
    if (!is_while) {
        const vinfo *ix = &p->vi[o->operands[0]];
        bool ok = ix->rank == 0 &&
                  (x->kind == SP_OP_IF ? ix->elem == SP_ELEM_I1
                                       : is_int_elem(ix->elem) && ix->elem != SP_ELEM_I1);
        if (!ok) {
            return ex_op_error(p, x->op, err, "%s: the %s must be a 0-d %s tensor", o->name,
                            x->kind == SP_OP_IF ? "predicate" : "index",
                            x->kind == SP_OP_IF ? "i1" : "integer");
        }
    }
    x->n_sub = o->n_regions;
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t) * x->n_sub);
    if (x->sub == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t r = 0; r < o->n_regions; r++) {
        if (o->regions[r].n_blocks != 1) {
            return ex_op_error(p, x->op, err,
                               "%s: a region with several blocks cannot be executed yet", o->name);
        }
        x->sub[r] = o->regions[r].blocks[0];
        const sp_block *b = &m->blocks[x->sub[r]];
        bool args_ok = is_while ? b->n_args == o->n_operands &&
                                      same_types(m, o->operands, b->first_arg, b->n_args)
                                : b->n_args == 0;
        if (!args_ok) {
            return ex_op_error(p, x->op, err, "%s: region arguments do not match its operands",
                            o->name);
        }
    }
    p->nest_blk[p->n_nest] = blk;
    p->nest_idx[p->n_nest] = idx;
    p->n_nest++;
    cm_status st = CM_OK;
    for (uint32_t r = 0; r < x->n_sub && st == CM_OK; r++) {
        /* a while's condition reads the loop's values; its body takes them */
        st = prepare_args(p, x->sub[r], x->op, is_while && r == 0, err);
        if (st == CM_OK) {
            st = prepare_block(p, x->sub[r], depth + 1u, err);
        }
    }
    p->n_nest--;
    for (uint32_t r = 0; r < x->n_sub && st == CM_OK; r++) {
        bool cond = is_while && r == 0;
        const sp_op *t = NULL;
        st = block_return(p, x->sub[r], x->op, SP_OP_RETURN, cond ? 1u : o->n_results, &t, err);
        if (st != CM_OK) {
            return st;
        }
        bool ok = cond ? p->vi[t->operands[0]].rank == 0 &&
                             p->vi[t->operands[0]].elem == SP_ELEM_I1
                       : same_types(m, t->operands, o->first_result, o->n_results);
        if (!ok) {
            return ex_op_error(p, x->op, err, "%s: %s", o->name,
                            cond ? "the condition must return a 0-d i1 tensor"
                                 : "a region returns values whose types differ from the results");
        }
    }
    return st;
}

/* sdy collectives that move data between devices (reshards and constraints
 * are copies when every value is held whole). */
static bool moves_data(sp_op_kind k)
{
    return sp_op_is_sdy_collective(k) && k != SP_OP_SDY_RESHARD;
}


/* Whether axis name is one of the manual axes. */
static bool is_manual_axis(const sp_attr *axes, const char *name)
{
    for (uint32_t i = 0; i < axes->u.axes.n; i++) {
        if (strcmp(axes->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* Offsets (n_units * rank) of the manual groups' local tensors of value v
 * (global type) in sharding s, for the mesh coordinates of each unit
 * (coords: n_units * mesh axes). The manual axes must lead each dimension,
 * divide it and give the local type of body value lv. */
static cm_status manual_offsets(prog *p, const xop *x, const sp_attr *axes, const sp_mesh *mesh,
                                const sp_sharding *s, uint32_t v, uint32_t lv,
                                const int64_t *coords, uint32_t n_units, int64_t **off_out,
                                cm_error *err)
{
    const sp_type *g = sp_value_type(p->m, v), *l = sp_value_type(p->m, lv);
    const char *nm = p->m->ops[x->op].name;
    if (s == NULL || s->rank != g->rank || g->rank != l->rank || g->elem != l->elem) {
        return ex_op_error(p, x->op, err, "%s: a sharding or local type that does not match %s", nm,
                        g->text);
    }
    int64_t *off = cm_arena_zalloc(&p->arena, sizeof(int64_t) * ((size_t)n_units * g->rank + 1u));
    if (off == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t k = 0; k < g->rank; k++) {
        int64_t count = 1;
        uint32_t lead = 0;
        for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
            const sp_axis_ref *r = &s->dims[k].axes[j];
            if (!is_manual_axis(axes, r->name)) {
                continue;
            }
            int32_t ai = sp_mesh_axis_index(mesh, r->name);
            if (ai < 0 || r->pre_size > 0 || lead != j) {
                return ex_op_error(p, x->op, err,
                                "%s: manual axis %s must be a whole mesh axis leading its "
                                "dimension",
                                nm, r->name);
            }
            lead++;
            count *= mesh->axes[ai].size;
        }
        if (g->dims[k] % count != 0 || g->dims[k] / count != l->dims[k]) {
            return ex_op_error(p, x->op, err,
                               "%s: local type %s is not %s split over the manual axes", nm,
                               l->text, g->text);
        }
        for (uint32_t u = 0; u < n_units; u++) {
            int64_t idx = 0;
            for (uint32_t j = 0; j < lead; j++) {
                int32_t ai = sp_mesh_axis_index(mesh, s->dims[k].axes[j].name);
                idx = idx * mesh->axes[ai].size + coords[(size_t)u * mesh->n_axes + (uint32_t)ai];
            }
            off[(size_t)u * g->rank + k] = idx * l->dims[k];
        }
    }
    *off_out = off;
    return CM_OK;
}

/* sdy.manual_computation: the units (every device, or every manual group
 * in the reference run), the offsets of each operand and result, and the
 * body, prepared with every value held whole. */
static cm_status prepare_manual(prog *p, xop *x, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const sp_attr *in = sp_op_attr(m, x->op, "in_shardings");
    const sp_attr *out = sp_op_attr(m, x->op, "out_shardings");
    const sp_attr *axes = sp_op_attr(m, x->op, "manual_axes");
    if (p->in_manual) {
        return ex_op_error(p, x->op, err, "nested %s cannot be executed yet", o->name);
    }
    if (o->n_regions != 1 || o->regions[0].n_blocks != 1 || in == NULL ||
        in->kind != SP_ATTR_SHARDING_LIST || in->u.shardings.n != o->n_operands || out == NULL ||
        out->kind != SP_ATTR_SHARDING_LIST || out->u.shardings.n != o->n_results ||
        axes == NULL || axes->kind != SP_ATTR_AXIS_LIST ||
        m->blocks[o->regions[0].blocks[0]].n_args != o->n_operands) {
        return ex_op_error(p, x->op, err,
                           "%s: operands, shardings or region the executor cannot run", o->name);
    }
    const sp_mesh *mesh = NULL;
    for (uint32_t i = 0; i < o->n_operands + o->n_results; i++) {
        const sp_sharding *s = i < o->n_operands ? in->u.shardings.items[i]
                                                 : out->u.shardings.items[i - o->n_operands];
        const sp_mesh *sm = s != NULL ? sharding_mesh(m, s) : NULL;
        if (sm == NULL || (mesh != NULL && sm != mesh)) {
            return ex_op_error(p, x->op, err, "%s: shardings on unknown or different meshes",
                               o->name);
        }
        mesh = sm;
    }
    if (mesh == NULL) {
        return ex_op_error(p, x->op, err, "%s without operands or results", o->name);
    }
    uint32_t blk = o->regions[0].blocks[0];
    const sp_block *b = &m->blocks[blk];
    manual *mc = cm_arena_zalloc(&p->arena, sizeof(manual));
    if (mc == NULL) {
        return cm_error_oom(err);
    }
    /* Units and their mesh coordinates: each device at its mesh position,
     * or each combination of the manual axes (free axes at 0). */
    int64_t groups = 1;
    for (uint32_t a = 0; a < mesh->n_axes; a++) {
        if (is_manual_axis(axes, mesh->axes[a].name)) {
            groups *= mesh->axes[a].size;
        }
        if (groups > EX_MAX_MANUAL_GROUPS) {
            return ex_op_error(p, x->op, err, "%s: more than %d manual groups cannot be executed",
                            o->name, EX_MAX_MANUAL_GROUPS);
        }
    }
    if (!p->replicated && sp_mesh_size(mesh) != (int64_t)p->n_dev) {
        return ex_op_error(p, x->op, err,
                        "%s on a mesh whose size is not the device count cannot be executed yet",
                        o->name);
    }
    mc->n_units = p->replicated ? (uint32_t)groups : p->n_dev;
    int64_t *coords = cm_arena_zalloc(&p->arena,
                                      sizeof(int64_t) * ((size_t)mc->n_units * mesh->n_axes + 1u));
    int64_t *gid = cm_arena_zalloc(&p->arena, sizeof(int64_t) * ((size_t)mc->n_units + 1u));
    bool *seen = cm_arena_zalloc(&p->arena, (size_t)groups + 1u);
    mc->first = cm_arena_zalloc(&p->arena, (size_t)mc->n_units + 1u);
    mc->in_off = cm_arena_zalloc(&p->arena, sizeof(int64_t *) * (o->n_operands + 1u));
    mc->out_off = cm_arena_zalloc(&p->arena, sizeof(int64_t *) * (o->n_results + 1u));
    if (coords == NULL || gid == NULL || seen == NULL || mc->first == NULL ||
        mc->in_off == NULL || mc->out_off == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t u = 0; u < mc->n_units; u++) {
        int64_t *c = &coords[(size_t)u * mesh->n_axes];
        int64_t pos = p->replicated ? (int64_t)u : mesh_position(mesh, u);
        if (pos < 0) {
            return ex_op_error(p, x->op, err, "%s: device missing from its mesh", o->name);
        }
        for (uint32_t a = mesh->n_axes; a-- > 0;) {
            bool man = is_manual_axis(axes, mesh->axes[a].name);
            if (p->replicated && !man) {
                continue; /* free axes at 0; pos counts the manual axes only */
            }
            c[a] = pos % mesh->axes[a].size;
            pos /= mesh->axes[a].size;
        }
        for (uint32_t a = 0; a < mesh->n_axes; a++) {
            if (is_manual_axis(axes, mesh->axes[a].name)) {
                gid[u] = gid[u] * mesh->axes[a].size + c[a];
            }
        }
        mc->first[u] = !seen[gid[u]];
        seen[gid[u]] = true;
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < o->n_operands && st == CM_OK; i++) {
        st = manual_offsets(p, x, axes, mesh, in->u.shardings.items[i], o->operands[i],
                            b->first_arg + i, coords, mc->n_units, &mc->in_off[i], err);
    }
    x->ext = mc;
    x->sub = cm_arena_alloc(&p->arena, sizeof(uint32_t));
    if (st == CM_OK && x->sub == NULL) {
        st = cm_error_oom(err);
    }
    if (st != CM_OK) {
        return st;
    }
    x->sub[0] = blk;
    x->n_sub = 1;
    uint32_t base = p->nest_base;
    p->nest_base = p->n_nest; /* isolated from above */
    p->in_manual = true;
    st = prepare_args(p, blk, x->op, false, err);
    if (st == CM_OK) {
        st = prepare_block(p, blk, depth + 1u, err);
    }
    p->in_manual = false;
    p->nest_base = base;
    if (st != CM_OK) {
        return st;
    }
    const sp_op *t = NULL;
    mc->spmd = p->pbs[blk].spmd;
    st = block_return(p, blk, x->op, SP_OP_SDY_RETURN, o->n_results, &t, err);
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t j = 0; j < o->n_results && st == CM_OK; j++) {
        st = manual_offsets(p, x, axes, mesh, out->u.shardings.items[j], o->first_result + j,
                            t->operands[j], coords, mc->n_units, &mc->out_off[j], err);
    }
    /* A result replicated over a manual axis has every group's first device
     * write the same block; the last one's copy is the one that stays, so
     * the others are skipped (a 4-device replicated 16 MiB result was
     * copied 4 times per device). */
    mc->keep = cm_arena_zalloc(&p->arena, sizeof(bool *) * (o->n_results + 1u));
    if (st == CM_OK && mc->keep == NULL) {
        st = cm_error_oom(err);
    }
    for (uint32_t j = 0; j < o->n_results && st == CM_OK; j++) {
        uint32_t rank = p->vi[o->first_result + j].rank;
        mc->keep[j] = cm_arena_zalloc(&p->arena, (size_t)mc->n_units + 1u);
        if (mc->keep[j] == NULL) {
            st = cm_error_oom(err);
            break;
        }
        for (uint32_t u = 0; u < mc->n_units; u++) {
            bool later = false;
            const int64_t *a = &mc->out_off[j][(size_t)u * rank];
            for (uint32_t w = u + 1u; mc->first[u] && !later && w < mc->n_units; w++) {
                later = mc->first[w] &&
                        memcmp(a, &mc->out_off[j][(size_t)w * rank], sizeof(int64_t) * rank) == 0;
            }
            mc->keep[j][u] = mc->first[u] && !later;
        }
    }
    return st;
}

/* ---- StableHLO collectives inside a manual computation ------------------------------
 * Inside an sdy.manual_computation body (JAX shard_map) every device runs
 * the body on its own local tensors, and StableHLO's collectives move data
 * between those bodies as the spec's process grid says: one replica
 * (mhlo.num_replicas, when given, must be 1) of n_dev partitions, device d
 * being partition d (the partition ids of Shardy's meshes and device_ids),
 * so replica_id is 0 and partition_id is d. The process groups follow the
 * spec's strategies (cross_replica, cross_replica_and_partition,
 * cross_partition, flattened_ids), chosen by channel_handle and
 * use_global_device_ids as each op's semantics says. */

/* The channel id of op (channel_handle's handle; 0 without one). */
static int64_t channel_id(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "channel_handle");
    if (a == NULL || a->kind != SP_ATTR_PARAMS) {
        return 0;
    }
    const sp_attr *h = sp_attrs_get(a->u.params.items, a->u.params.n, "handle");
    return h != NULL && h->kind == SP_ATTR_INT ? h->u.i.v : 0;
}

/* An integer attribute of one value. */
static bool int1_attr(prog *p, uint32_t op, const char *name, int64_t *out)
{
    const int64_t *v;
    uint32_t n;
    if (!ints_attr(p, op, name, &v, &n) || n != 1) {
        return false;
    }
    *out = v[0];
    return true;
}

enum { SPMD_CROSS_REPLICA, SPMD_CROSS_PARTITION, SPMD_CROSS_REPLICA_AND_PARTITION, SPMD_FLAT };

/* Reads a 2-D integer attribute (replica_groups, source_target_pairs) into
 * rows x cols ids; an absent or empty one is 0 x 0. */
static cm_status spmd_table(prog *p, const xop *x, const char *key, const int64_t **v,
                            uint32_t *rows, uint32_t *cols, cm_error *err)
{
    const sp_module *m = p->m;
    const char *nm = m->ops[x->op].name;
    const sp_attr *a = sp_op_attr(m, x->op, key);
    *v = NULL;
    *rows = *cols = 0;
    if (a == NULL) {
        return CM_OK;
    }
    const sp_type *t = a->kind == SP_ATTR_DENSE ? &m->types[a->u.dense.type] : NULL;
    if (t == NULL || t->rank != 2 || t->dims[0] < 0 || t->dims[1] < 0 ||
        t->dims[0] > (int64_t)p->n_dev || t->dims[1] > (int64_t)p->n_dev) {
        return ex_op_error(p, x->op, err, "%s: %s is not a 2-D integer tensor of at most %u x %u",
                           nm, key, p->n_dev, p->n_dev);
    }
    size_t n = (size_t)t->dims[0] * (size_t)t->dims[1];
    if (n == 0) {
        return CM_OK;
    }
    if (a->u.dense.ints == NULL || (a->u.dense.n_ints != n && a->u.dense.n_ints != 1)) {
        return ex_op_error(p, x->op, err, "%s: %s cannot be read", nm, key);
    }
    int64_t *g = cm_arena_alloc(&p->arena, sizeof(int64_t) * n);
    if (g == NULL) {
        return cm_error_oom(err);
    }
    for (size_t i = 0; i < n; i++) { /* a splat: dense<0> : tensor<1x1xi64> */
        g[i] = a->u.dense.ints[a->u.dense.n_ints == 1 ? 0 : i];
    }
    *v = g;
    *rows = (uint32_t)t->dims[0];
    *cols = (uint32_t)t->dims[1];
    return CM_OK;
}

/* The size of the id space replica_groups names in mode: replicas,
 * partitions, or processes (flattened ids). */
static uint32_t spmd_space(const prog *p, int mode)
{
    return mode == SPMD_CROSS_PARTITION ? p->n_part
           : mode == SPMD_FLAT          ? p->n_rep * p->n_part
                                        : p->n_rep;
}

/* The process groups of collective x (not collective_permute) into
 * x->groups / grp_of / gsize over the grid of p->n_rep replicas x
 * p->n_part partitions (device r * n_part + q is process (r, q)): each
 * device in exactly one group, groups in the order the spec's strategy
 * yields them, members in group order. */
static cm_status spmd_groups(prog *p, xop *x, int mode, cm_error *err)
{
    const char *nm = p->m->ops[x->op].name;
    const int64_t *g;
    uint32_t rows, cols, n = p->n_dev, R = p->n_rep, Q = p->n_part;
    cm_status st = spmd_table(p, x, "replica_groups", &g, &rows, &cols, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t space = spmd_space(p, mode);
    if (rows == 0) { /* no groups: every id of the space in one */
        rows = 1;
        cols = space;
        g = NULL;
    }
    uint8_t *seen = cm_arena_zalloc(&p->arena, space + 1u);
    x->grp_of = cm_arena_alloc(&p->arena, sizeof(int64_t) * n);
    if (seen == NULL || x->grp_of == NULL) {
        return cm_error_oom(err);
    }
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        int64_t id = g != NULL ? g[i] : (int64_t)i;
        if (id < 0 || id >= (int64_t)space) {
            return ex_op_error(p, x->op, err, "%s: replica_groups names id %lld, outside the %u %s",
                               nm, (long long)id, space,
                               mode == SPMD_FLAT              ? "processes"
                               : mode == SPMD_CROSS_PARTITION ? "partitions"
                                                              : "replicas");
        }
        if (seen[id]++) {
            return ex_op_error(p, x->op, err, "%s: replica_groups names id %lld twice", nm,
                               (long long)id);
        }
    }
    if ((size_t)rows * cols != space) {
        return ex_op_error(p, x->op, err, "%s: replica_groups does not cover all %u ids", nm,
                           space);
    }
    /* spec.md, "process groups": cross_replica takes each row with every
     * partition, cross_partition each row with every replica,
     * cross_replica_and_partition each row times all partitions in one
     * group (partition-major), flattened ids the rows as written. */
    uint32_t ng = mode == SPMD_CROSS_REPLICA     ? rows * Q
                  : mode == SPMD_CROSS_PARTITION ? rows * R
                                                 : rows;
    x->gsize = mode == SPMD_CROSS_REPLICA_AND_PARTITION ? cols * Q : cols;
    if ((size_t)ng * x->gsize != n) {
        return ex_op_error(p, x->op, err, "%s: its process groups do not cover the %u devices", nm,
                           n);
    }
    x->groups = cm_arena_alloc(&p->arena, sizeof(int64_t) * n);
    if (x->groups == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t k = 0; k < ng; k++) {
        for (uint32_t j = 0; j < x->gsize; j++) {
            int64_t d;
            if (mode == SPMD_CROSS_REPLICA) { /* row k / Q, partition k % Q */
                int64_t r = g != NULL ? g[(size_t)(k / Q) * cols + j] : (int64_t)j;
                d = r * Q + (int64_t)(k % Q);
            } else if (mode == SPMD_CROSS_PARTITION) { /* row k / R, replica k % R */
                int64_t q = g != NULL ? g[(size_t)(k / R) * cols + j] : (int64_t)j;
                d = (int64_t)(k % R) * Q + q;
            } else if (mode == SPMD_CROSS_REPLICA_AND_PARTITION) {
                uint32_t c = j % cols;
                int64_t r = g != NULL ? g[(size_t)k * cols + c] : (int64_t)c;
                d = r * Q + (int64_t)(j / cols);
            } else {
                d = g != NULL ? g[(size_t)k * cols + j] : (int64_t)j;
            }
            x->groups[(size_t)k * x->gsize + j] = d;
            x->grp_of[d] = k;
        }
    }
    return CM_OK;
}

/* Whether every result of x has its operand's element type and, except
 * along dimension `dim` (-1: none), where the result has `mul` times (or a
 * `div`th of) the operand's extent, its shape. */
static bool spmd_shapes(const prog *p, const xop *x, int64_t dim, int64_t mul, int64_t div,
                        int64_t dim2, int64_t mul2)
{
    const sp_op *o = &p->m->ops[x->op];
    if (o->n_results != o->n_operands || o->n_operands == 0) {
        return false;
    }
    for (uint32_t i = 0; i < o->n_operands; i++) {
        const vinfo *I = &p->vi[o->operands[i]], *O = &p->vi[o->first_result + i];
        if (I->elem != O->elem || I->rank != O->rank ||
            (dim >= 0 && (dim >= (int64_t)I->rank || dim2 >= (int64_t)I->rank))) {
            return false;
        }
        for (uint32_t k = 0; k < I->rank; k++) {
            int64_t want = I->gdims[k];
            if ((int64_t)k == dim) {
                if (want % div != 0) {
                    return false;
                }
                want = want / div * mul;
            }
            if ((int64_t)k == dim2) {
                want *= mul2;
            }
            if (O->gdims[k] != want) {
                return false;
            }
        }
    }
    return true;
}

/* The source of each device for collective_permute (source_target_pairs)
 * or collective_broadcast (replica_groups, each group's first member) x in
 * mode (cross_replica: ids are replicas, paired within each partition;
 * cross_partition: partitions, within each replica) into x->groups: n_dev
 * entries, -1 for a device that receives nothing (its result stays zero). */
static cm_status spmd_sources(prog *p, xop *x, int mode, cm_error *err)
{
    const char *nm = p->m->ops[x->op].name;
    bool bcast = x->kind == SP_OP_COLLECTIVE_BROADCAST;
    const int64_t *t;
    uint32_t rows, cols, Q = p->n_part;
    cm_status st =
        spmd_table(p, x, bcast ? "replica_groups" : "source_target_pairs", &t, &rows, &cols, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t space = spmd_space(p, mode);
    x->groups = cm_arena_alloc(&p->arena, sizeof(int64_t) * p->n_dev);
    uint8_t *src_seen = cm_arena_zalloc(&p->arena, space + 1u);
    int64_t *src_of = cm_arena_alloc(&p->arena, sizeof(int64_t) * (space + 1u));
    if (x->groups == NULL || src_seen == NULL || src_of == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < space; i++) {
        /* collective_broadcast without groups: one group of every id, as
         * the interpreter's (and the other collectives') */
        src_of[i] = bcast && rows == 0 ? 0 : -1;
    }
    if (!bcast && rows > 0 && cols != 2) {
        return ex_op_error(p, x->op, err, "%s: source_target_pairs is not N x 2", nm);
    }
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        if (t[i] < 0 || t[i] >= (int64_t)space) {
            return ex_op_error(p, x->op, err, "%s: %s names id %lld, outside the %u %s", nm,
                               bcast ? "replica_groups" : "source_target_pairs", (long long)t[i],
                               space, mode == SPMD_CROSS_PARTITION ? "partitions" : "replicas");
        }
    }
    for (uint32_t i = 0; i < rows; i++) {
        if (bcast) { /* every member takes the first member's operand */
            for (uint32_t j = 0; j < cols; j++) {
                int64_t id = t[(size_t)i * cols + j];
                if (src_seen[id]++) {
                    return ex_op_error(p, x->op, err, "%s: replica_groups names id %lld twice", nm,
                                       (long long)id);
                }
                src_of[id] = t[(size_t)i * cols];
            }
            continue;
        }
        int64_t s = t[2 * i], d = t[2 * i + 1];
        if (src_seen[s]++ || src_of[d] >= 0) {
            return ex_op_error(p, x->op, err,
                               "%s: source_target_pairs names a source or target twice", nm);
        }
        src_of[d] = s;
    }
    for (uint32_t dev = 0; dev < p->n_dev; dev++) {
        uint32_t r = dev / Q, q = dev % Q;
        int64_t s = src_of[mode == SPMD_CROSS_PARTITION ? q : r];
        x->groups[dev] = s < 0                          ? -1
                         : mode == SPMD_CROSS_PARTITION ? (int64_t)r * Q + s
                                                        : s * Q + (int64_t)q;
    }
    return CM_OK;
}

/* A StableHLO collective or process id inside a manual computation's body:
 * its process groups (partitioned run; the reference run hands the whole
 * manual computation to the interpreter), dimensions and reduction. */
static cm_status prepare_spmd(prog *p, xop *x, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_op *o = &m->ops[x->op];
    const char *nm = o->name;
    if (!p->in_manual) {
        return ex_op_error(p, x->op, err,
                           "op %s outside sdy.manual_computation, in a function a manual "
                           "computation of the module may call, cannot be executed yet",
                           nm);
    }
    if (x->kind == SP_OP_PARTITION_ID || x->kind == SP_OP_REPLICA_ID) {
        const vinfo *R = &p->vi[o->first_result];
        if (o->n_results != 1 || R->rank != 0 || R->elem != SP_ELEM_UI32) {
            return ex_op_error(p, x->op, err, "op %s: a result other than tensor<ui32>", nm);
        }
        return CM_OK;
    }
    bool global = sp_op_attr(m, x->op, "use_global_device_ids") != NULL;
    int64_t ch = channel_id(m, x->op);
    bool by_channel = x->kind == SP_OP_ALL_TO_ALL || x->kind == SP_OP_COLLECTIVE_PERMUTE ||
                      x->kind == SP_OP_COLLECTIVE_BROADCAST;
    if (global && (ch <= 0 || by_channel)) {
        return ex_op_error(p, x->op, err, "op %s: use_global_device_ids without a channel id "
                                          "(or on an op that takes none)", nm);
    }
    if (x->kind == SP_OP_COLLECTIVE_BROADCAST) {
        const sp_attr *dr = sp_op_attr(m, x->op, "has_dynamic_root");
        if (dr != NULL && !(dr->kind == SP_ATTR_BOOL && !dr->u.b)) {
            return ex_op_error(p, x->op, err, "op %s with has_dynamic_root cannot be executed yet",
                               nm);
        }
    }
    int mode = by_channel ? (ch > 0 ? SPMD_CROSS_PARTITION : SPMD_CROSS_REPLICA)
               : ch <= 0  ? SPMD_CROSS_REPLICA
               : global   ? SPMD_FLAT
                          : SPMD_CROSS_REPLICA_AND_PARTITION;
    bool ok = true;
    if (x->kind == SP_OP_ALL_REDUCE || x->kind == SP_OP_REDUCE_SCATTER) {
        const sp_block *b = body_block(m, x->op);
        x->fn = b != NULL ? block_reduce_fn(m, b) : -1;
        bool args = false;
        if (x->fn >= 0) {
            const sp_op *bo = &m->ops[b->ops[0]];
            const sp_op *ret = &m->ops[b->ops[1]];
            args = b->n_args == 2 && bo->n_operands == 2 && bo->n_results == 1 &&
                   ret->n_operands == 1 && ret->operands[0] == bo->first_result &&
                   ((bo->operands[0] == b->first_arg && bo->operands[1] == b->first_arg + 1u) ||
                    (bo->operands[1] == b->first_arg && bo->operands[0] == b->first_arg + 1u));
            for (uint32_t i = 0; args && i < 2; i++) {
                const sp_type *t = sp_value_type(m, b->first_arg + i);
                args = t->kind == SP_TYPE_TENSOR && t->rank == 0 &&
                       t->elem == p->vi[o->operands[0]].elem;
            }
            if (args && (x->fn == RED_AND || x->fn == RED_OR)) {
                sp_elem e = p->vi[o->operands[0]].elem;
                args = !elem_float(e);
            }
        }
        if (!args && ex_interp_fold_ok(m, x->op)) {
            /* any other body (compare and select, several ops): the
             * interpreter evaluates it element by element (ex_coll.c) */
            x->fn = RED_BODY;
            args = true;
        }
        if (!args) {
            return ex_op_error(p, x->op, err,
                               "op %s: a body that does not take two scalars of its operand's "
                               "element type and return one cannot be executed",
                               nm);
        }
    }
    for (uint32_t i = 0; i + 1u < o->n_operands; i++) {
        ok = ok && p->vi[o->operands[i]].elem == p->vi[o->operands[i + 1u]].elem;
    }
    switch (x->kind) {
    case SP_OP_ALL_REDUCE:
        ok = ok && spmd_shapes(p, x, -1, 1, 1, -1, 1);
        break;
    case SP_OP_ALL_GATHER:
        x->dim = -1;
        if (!int1_attr(p, x->op, "all_gather_dim", &x->dim)) {
            ok = false;
        }
        break;
    case SP_OP_REDUCE_SCATTER:
        x->dim = -1;
        if (!int1_attr(p, x->op, "scatter_dimension", &x->dim)) {
            ok = false;
        }
        break;
    case SP_OP_ALL_TO_ALL: {
        int64_t cnt = -1;
        x->dim = x->cdim = -1;
        ok = ok && int1_attr(p, x->op, "split_dimension", &x->dim) &&
             int1_attr(p, x->op, "concat_dimension", &x->cdim) &&
             int1_attr(p, x->op, "split_count", &cnt) && x->dim >= 0 &&
             x->cdim >= 0 && cnt > 0 &&
             cnt <= (p->replicated ? EX_MAX_MANUAL_GROUPS : (int64_t)p->n_dev);
        x->na = ok ? (uint32_t)cnt : 0; /* split_count */
        ok = ok && spmd_shapes(p, x, x->dim, 1, cnt, x->cdim, cnt);
        break;
    }
    case SP_OP_COLLECTIVE_PERMUTE:
    case SP_OP_COLLECTIVE_BROADCAST:
        ok = ok && spmd_shapes(p, x, -1, 1, 1, -1, 1);
        break;
    default:
        ok = false;
        break;
    }
    if (!ok) {
        return ex_op_error(p, x->op, err, "op %s: attributes or types the executor cannot read",
                           nm);
    }
    if (p->replicated) {
        return CM_OK; /* the interpreter runs the body (ex_interp_manual) */
    }
    if (x->kind == SP_OP_COLLECTIVE_PERMUTE || x->kind == SP_OP_COLLECTIVE_BROADCAST) {
        return spmd_sources(p, x, mode, err);
    }
    cm_status st = spmd_groups(p, x, mode, err);
    if (st != CM_OK) {
        return st;
    }
    if (x->kind == SP_OP_ALL_GATHER) {
        ok = x->dim >= 0 && spmd_shapes(p, x, x->dim, (int64_t)x->gsize, 1, -1, 1);
    } else if (x->kind == SP_OP_REDUCE_SCATTER) {
        ok = x->dim >= 0 && spmd_shapes(p, x, x->dim, 1, (int64_t)x->gsize, -1, 1);
    } else if (x->kind == SP_OP_ALL_TO_ALL) {
        ok = x->na == x->gsize;
    }
    if (!ok) {
        return ex_op_error(p, x->op, err,
                           "op %s: its result shape does not fit its process groups of %u", nm,
                           x->gsize);
    }
    return CM_OK;
}

bool ex_is_check_op(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    if (strncmp(o->name, "check.", 6) == 0) {
        return true;
    }
    const sp_attr *t = o->kind == SP_OP_CUSTOM_CALL ? sp_op_attr(m, op, "call_target_name") : NULL;
    return t != NULL && t->kind == SP_ATTR_STRING && strncmp(t->u.str.s, "check.", 6) == 0;
}

/* A check op in block blk: in main's body it runs nothing and its operands
 * are kept to the end of the run, where the caller evaluates it on their
 * assembled values (ex_exec_opts.checks); elsewhere it is refused. */
static cm_status prepare_check(prog *p, xop *x, uint32_t blk, cm_error *err)
{
    const sp_op *o = &p->m->ops[x->op];
    if (blk != p->block || p->n_nest > 0) {
        return ex_op_error(p, x->op, err,
                           "%s inside a region, call or manual computation cannot be evaluated "
                           "on the device workers yet (only at the top level of main)",
                           o->name);
    }
    if (o->n_results > 0) {
        return ex_op_error(p, x->op, err, "%s with a result cannot be executed yet", o->name);
    }
    uint32_t *c = cm_arena_alloc(&p->arena, sizeof(uint32_t) * (p->n_checks + 1u));
    if (c == NULL) {
        return cm_error_oom(err);
    }
    if (p->n_checks > 0) {
        memcpy(c, p->checks, sizeof(uint32_t) * p->n_checks);
    }
    c[p->n_checks++] = x->op;
    p->checks = c;
    x->check = true;
    for (uint32_t j = 0; j < o->n_operands; j++) {
        p->vi[o->operands[j]].checked = true;
    }
    return CM_OK;
}

/* Prepares block blk's ops (its arguments are prepared by the caller). */
static cm_status prepare_block(prog *p, uint32_t blk, uint32_t depth, cm_error *err)
{
    const sp_module *m = p->m;
    const sp_block *b = &m->blocks[blk];
    pblock *pb = &p->pbs[blk];
    uint32_t owner = b->parent_op;
    if (depth > EX_MAX_NEST || p->n_nest >= EX_MAX_NEST) {
        return ex_op_error(p, owner, err,
                           "calls and regions nested deeper than %d cannot be executed",
                           EX_MAX_NEST);
    }
    pb->busy = true;
    pb->manual = p->in_manual;
    pb->ops = cm_arena_zalloc(&p->arena, sizeof(xop) * (b->n_ops + 1u));
    if (pb->ops == NULL) {
        return cm_error_oom(err);
    }
    pb->n_ops = b->n_ops;
    uint32_t height = 0;
    for (uint32_t i = 0; i < b->n_ops; i++) {
        /* pb stays valid: pbs is allocated once, for every block */
        xop *x = &pb->ops[i];
        x->op = b->ops[i];
        const sp_op *o = &m->ops[x->op];
        x->kind = (sp_op_kind)o->kind;
        for (uint32_t j = 0; j < o->n_operands; j++) {
            cm_status st = note_use(p, o->operands[j], blk, i, x->op, err);
            if (st != CM_OK) {
                return st;
            }
        }
        cm_status st = CM_OK;
        for (uint32_t j = 0; j < o->n_results && st == CM_OK; j++) {
            st = value_prepare(p, o->first_result + j, x->op, err);
            p->vi[o->first_result + j].home = blk;
            p->vi[o->first_result + j].def_idx = i;
        }
        bool term = x->kind == SP_OP_FUNC_RETURN || x->kind == SP_OP_RETURN ||
                    x->kind == SP_OP_SDY_RETURN;
        if (st == CM_OK && term != (i + 1u == b->n_ops)) {
            st = ex_op_error(p, x->op, err, "%s: %s", o->name,
                          term ? "a return before the end of its block"
                               : "a block that does not end with a return");
        }
        if (st != CM_OK) {
            return st;
        }
        if (x->kind == SP_OP_WHILE || x->kind == SP_OP_CASE || x->kind == SP_OP_IF) {
            st = prepare_regions(p, x, blk, i, depth, err);
        } else if (x->kind == SP_OP_FUNC_CALL) {
            st = prepare_call(p, x, depth, err);
        } else if (x->kind == SP_OP_SDY_NAMED_COMPUTATION) {
            st = prepare_named(p, x, depth, err);
        } else if (x->kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            st = prepare_manual(p, x, depth, err);
        } else if (is_spmd_op(x->kind)) {
            st = prepare_spmd(p, x, err);
            pb->spmd = true;
        } else if (ex_is_check_op(m, x->op)) {
            st = prepare_check(p, x, blk, err);
        } else if (p->in_manual && moves_data(x->kind)) {
            st = ex_op_error(p, x->op, err,
                             "op %s inside sdy.manual_computation cannot be executed yet", o->name);
        } else {
            st = prepare_op(p, x, err);
            if (st == CM_OK) {
                st = prepare_sharded(p, x, err);
            }
        }
        if (st != CM_OK) {
            return st;
        }
        for (uint32_t k = 0; k < x->n_sub; k++) {
            uint32_t h = 1u + p->pbs[x->sub[k]].height;
            height = h > height ? h : height;
            pb->spmd = pb->spmd || p->pbs[x->sub[k]].spmd;
        }
    }
    pb->height = height;
    pb->busy = false;
    pb->done = true;
    return CM_OK;
}

/* Fills each op's list of values released after it: every value that is
 * not main's argument or result, nor a while condition's argument, at its
 * last use in its home block (right after its definition when unused). */
static cm_status prepare_dead(prog *p, cm_error *err)
{
    const sp_module *m = p->m;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t v = 0; v < m->n_values; v++) {
            const vinfo *vi = &p->vi[v];
            if (!vi->live || vi->is_arg || vi->is_result || vi->checked || vi->borrowed) {
                continue;
            }
            xop *x = &p->pbs[vi->home].ops[vi->last_use != UINT32_MAX ? vi->last_use
                                                                       : vi->def_idx];
            if (pass == 0) {
                x->n_dead++;
            } else {
                x->dead[x->n_dead++] = v;
            }
        }
        for (uint32_t blk = 0; blk < m->n_blocks; blk++) {
            const pblock *pb = &p->pbs[blk];
            for (uint32_t i = 0; pass == 0 && i < pb->n_ops; i++) {
                xop *x = &pb->ops[i];
                x->dead = cm_arena_alloc(&p->arena, sizeof(uint32_t) * (x->n_dead + 1u));
                if (x->dead == NULL) {
                    return cm_error_oom(err);
                }
                x->n_dead = 0;
            }
        }
    }
    return CM_OK;
}

/* Whether the module has Shardy shardings: a manual computation, sharding
 * constraint, reshard or sdy collective, or a value with a sharding that
 * splits it (axes on a dimension, or unreduced ones); *op_out gets the
 * first such op (or main). */
static bool module_sharded(const sp_module *m, uint32_t *op_out)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op_kind k = (sp_op_kind)m->ops[i].kind;
        if (k == SP_OP_SDY_MANUAL_COMPUTATION || k == SP_OP_SDY_SHARDING_CONSTRAINT ||
            k == SP_OP_SDY_RESHARD || sp_op_is_sdy_collective(k)) {
            *op_out = i;
            return true;
        }
    }
    for (uint32_t v = 0; v < m->n_values; v++) {
        const sp_sharding *s = sp_value_sharding(m, v);
        bool splits = s != NULL && s->n_unreduced > 0;
        for (uint32_t k = 0; s != NULL && k < s->rank && !splits; k++) {
            splits = s->dims[k].n_axes > 0;
        }
        if (splits) { /* a replicated one leaves each device the whole value */
            *op_out = sp_module_func(m, "main");
            return true;
        }
    }
    return false;
}

/* A per-process main (ex_module_spmd): every device runs the whole program
 * on whole values as process (d / P, d % P) of the module's R x P grid, so
 * the run needs R * P devices, no Shardy shardings (a collective at the top
 * level of a partitioned program names processes while the partitioner
 * decides what each device holds: it has no meaning there) and the
 * interpreter as its reference (no replicated run). */
static cm_status prepare_grid(prog *p, cm_error *err)
{
    const sp_module *m = p->m;
    uint32_t R, P, at = SP_NONE, sh = SP_NONE;
    if (ex_module_spmd(m, &R, &P, &at) != CM_OK) {
        return cm_error_oom(err);
    }
    if (at == SP_NONE) {
        return CM_OK;
    }
    const char *nm = m->ops[at].name;
    if (R == 0 || P == 0 || (uint64_t)R * P > 4096) {
        return ex_op_error(p, at, err,
                           "%s: mhlo.num_replicas or mhlo.num_partitions is not an "
                           "integer in 1..4096 (or their product exceeds 4096)",
                           nm);
    }
    if (module_sharded(m, &sh)) {
        if (m->ops[at].kind == SP_OP_FUNC_FUNC) {
            return ex_op_error(p, sh, err,
                               "a module of %u replicas with Shardy shardings cannot be "
                               "executed yet (each replica would run the partitioned program)",
                               R);
        }
        return ex_op_error(p, at, err,
                           "op %s at the top level of a Shardy-sharded program has no meaning: "
                           "its process groups name processes, but each device holds the "
                           "shards the partitioner chose (put it in sdy.manual_computation)",
                           nm);
    }
    if (p->replicated) {
        return ex_op_error(p, at, err,
                           "%s: a per-process program (%u replicas x %u partitions) "
                           "has no replicated run; its reference is the "
                           "interpreter's run of every process",
                           nm, R, P);
    }
    if (p->n_dev != R * P) {
        return ex_op_error(p, at, err,
                           "%s: a program of %u replicas x %u partitions runs on "
                           "%u devices, not %u",
                           nm, R, P, R * P, p->n_dev);
    }
    p->spmd_main = true;
    p->in_manual = true; /* every device holds every value whole */
    p->n_rep = R;
    p->n_part = P;
    return CM_OK;
}

cm_status ex_prog_init(prog *p, const sp_module *m, uint32_t n_dev, bool replicated,
                       bool partial_inputs, cm_error *err)
{
    memset(p, 0, sizeof *p);
    cm_arena_init(&p->arena, 0);
    p->m = m;
    p->n_dev = n_dev;
    p->replicated = replicated;
    p->partial_inputs = partial_inputs;
    uint32_t f = sp_module_func(m, "main");
    if (f == SP_NONE) {
        return cm_error_set(err, CM_EINVAL, NULL, "the module has no function @main");
    }
    if (m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks != 1) {
        return ex_op_error(p, f, err, "%s: a main with several blocks cannot be executed yet",
                        "func.func");
    }
    p->block = m->ops[f].regions[0].blocks[0];
    const sp_block *b = &m->blocks[p->block];
    p->vi = cm_calloc(m->n_values + 1u, sizeof(vinfo));
    p->pbs = cm_calloc(m->n_blocks + 1u, sizeof(pblock));
    if (p->vi == NULL || p->pbs == NULL) {
        return cm_error_oom(err);
    }
    p->n_rep = 1;
    p->n_part = n_dev;
    /* send and recv before anything else: their tokens would be refused first */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_SEND || m->ops[i].kind == SP_OP_RECV) {
            return ex_op_error(p, i, err,
                               "op %s cannot be executed on the device workers yet: its channel "
                               "names no peer process, so workers that meet at each collective "
                               "cannot pair it (`shardplan interpret` runs it)",
                               m->ops[i].name);
        }
    }
    cm_status st = prepare_grid(p, err);
    if (st == CM_OK) {
        st = prepare_args(p, p->block, f, false, err);
    }
    if (st == CM_OK) {
        st = prepare_block(p, p->block, 0, err);
    }
    if (st != CM_OK) {
        return st;
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        p->vi[b->first_arg + i].is_arg = true;
    }
    const pblock *pb = &p->pbs[p->block];
    if (pb->n_ops == 0 || pb->ops[pb->n_ops - 1].kind != SP_OP_FUNC_RETURN) {
        return cm_error_set(err, CM_EINVAL, NULL, "main has no return");
    }
    p->ret = pb->ops[pb->n_ops - 1].op;
    const sp_op *o = &m->ops[p->ret];
    for (uint32_t j = 0; j < o->n_operands; j++) {
        p->vi[o->operands[j]].is_result = true;
    }
    return prepare_dead(p, err);
}
