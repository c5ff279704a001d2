/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd: the mesh clean-up of XLA's sdy round-trip import
 * (sdy_round_trip/dedup_meshes.cc, whose semantics this follows): meshes with the same device count and
 * device order but other axis names or splits are folded into one main
 * mesh, the shardings on them rewritten to the main mesh's (sub-)axes; and
 * single-device meshes lifted by the import are named `single_device_N`, as
 * XLA names them. Everything lives in the module's arena. */
#include "sp_gspmd.h"

#include <stdio.h>
#include <string.h>

#include "sp_gspmd_int.h"
#include "sp_ops.h"

#define MAX_MAPPED 64 /* main (sub-)axes one target axis may map to */

/* ---- visiting every sharding -------------------------------------------------------- */

typedef cm_status (*sharding_fn)(sp_module *m, sp_sharding *s, void *ctx);

static cm_status visit_attr(sp_module *m, sp_attr *a, sharding_fn fn, void *ctx)
{
    cm_status st = CM_OK;
    switch (a->kind) {
    case SP_ATTR_SHARDING:
        return a->u.sharding != NULL ? fn(m, a->u.sharding, ctx) : CM_OK;
    case SP_ATTR_SHARDING_LIST:
        for (uint32_t i = 0; i < a->u.shardings.n && st == CM_OK; i++) {
            st = a->u.shardings.items[i] != NULL ? fn(m, a->u.shardings.items[i], ctx) : CM_OK;
        }
        return st;
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n && st == CM_OK; i++) {
            st = visit_attr(m, a->u.arr.items[i], fn, ctx);
        }
        return st;
    case SP_ATTR_DICT:
        for (uint32_t i = 0; i < a->u.dict.n && st == CM_OK; i++) {
            st = visit_attr(m, a->u.dict.items[i].value, fn, ctx);
        }
        return st;
    default:
        return CM_OK;
    }
}

/* fn on every sharding of every op of m (function argument and result
 * attributes included); a sharding shared by two ops is seen twice. */
static cm_status visit_shardings(sp_module *m, sharding_fn fn, void *ctx)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_attrs; k++) {
            cm_status st = visit_attr(m, m->ops[i].attrs[k].value, fn, ctx);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

static sp_attr *mesh_op_attr(const sp_module *m, uint32_t op, const char *key, sp_attr_kind kind)
{
    sp_attr *a = (sp_attr *)(uintptr_t)sp_op_attr(m, op, key);
    return a != NULL && a->kind == kind ? a : NULL;
}

static cm_status find_ref(sp_module *m, sp_sharding *s, void *vctx)
{
    (void)m;
    const char *name = vctx;
    return s->mesh_name != NULL && strcmp(s->mesh_name, name) == 0 ? CM_EINVAL : CM_OK;
}

bool sp_gspmd_mesh_referenced(sp_module *m, const char *name)
{
    /* the visit stops at the first sharding on the mesh */
    return visit_shardings(m, find_ref, (void *)(uintptr_t)name) != CM_OK;
}

/* ---- naming lifted single-device meshes ---------------------------------------------- */

typedef struct rename_ctx {
    const char *from, *to;
} rename_ctx;

static cm_status rename_one(sp_module *m, sp_sharding *s, void *vctx)
{
    (void)m;
    const rename_ctx *c = vctx;
    if (s->mesh == NULL && s->mesh_name != NULL && strcmp(s->mesh_name, c->from) == 0) {
        s->mesh_name = c->to;
    }
    return CM_OK;
}

cm_status sp_gspmd_name_single_device_meshes(sp_module *m, const char *const *before,
                                             uint32_t n_before, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        if (m->ops[op].kind != SP_OP_SDY_MESH) {
            continue;
        }
        sp_attr *n = mesh_op_attr(m, op, "sym_name", SP_ATTR_STRING);
        sp_attr *ms = mesh_op_attr(m, op, "mesh", SP_ATTR_MESH);
        if (n == NULL || ms == NULL || ms->u.mesh->n_axes != 0 || ms->u.mesh->n_device_ids != 1 ||
            strncmp(n->u.str.s, "maximal_mesh_", 13) != 0) {
            continue;
        }
        bool old = false;
        for (uint32_t k = 0; k < n_before && !old; k++) {
            old = strcmp(before[k], n->u.str.s) == 0;
        }
        if (old) {
            continue;
        }
        char base[48], name[64];
        snprintf(base, sizeof base, "single_device_%lld", (long long)ms->u.mesh->device_ids[0]);
        snprintf(name, sizeof name, "%s", base);
        for (uint32_t k = 0; sp_module_mesh(m, name) != NULL || sp_module_func(m, name) != SP_NONE;
             k++) {
            snprintf(name, sizeof name, "%s_%u", base, k);
        }
        const char *s = sp_module_str(m, name, strlen(name));
        if (s == NULL) {
            return cm_error_oom(err);
        }
        rename_ctx c = {n->u.str.s, s};
        (void)visit_shardings(m, rename_one, &c);
        n->u.str.s = s;
        n->u.str.len = strlen(s);
        body = &m->blocks[m->body];
    }
    return CM_OK;
}

/* ---- deduplicating meshes -------------------------------------------------------------- */

typedef struct target_map {
    const char *mesh;      /* the mesh folded away */
    const char *main;      /* the mesh it folds into */
    const sp_mesh *main_mesh;
    const char **axis;     /* per target axis mapped: its name */
    uint32_t *first, *n;   /* its main (sub-)axes: refs[first .. first+n) */
    uint32_t n_axes;
    sp_axis_ref *refs;
} target_map;

static int64_t mesh_total(const sp_mesh *x)
{
    int64_t t = 1;
    for (uint32_t i = 0; i < x->n_axes; i++) {
        t *= x->axes[i].size;
    }
    return x->n_axes == 0 ? -1 : t;
}

static bool same_devices(const sp_mesh *a, const sp_mesh *b)
{
    if (mesh_total(a) != mesh_total(b) || a->n_device_ids != b->n_device_ids) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_device_ids; i++) {
        if (a->device_ids[i] != b->device_ids[i]) {
            return false;
        }
    }
    return true;
}

static bool has_fake_axis(const sp_mesh *x)
{
    return x->n_axes > 0 && x->axes[0].name[0] == '_';
}

static uint32_t non_size_one(const sp_mesh *x)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < x->n_axes; i++) {
        n += x->axes[i].size > 1;
    }
    return n;
}

/* Maps each axis of target (size-one ones aside) to consecutive (sub-)axes
 * of main, walking both meshes major to minor; false when a size does not
 * divide the other. */
static bool map_axes(sp_module *m, const sp_mesh *target, const sp_mesh *main, target_map *t,
                     bool *oom)
{
    uint32_t cap = target->n_axes * (main->n_axes + 1) + 1;
    t->axis = cm_arena_alloc(&m->arena, sizeof *t->axis * (target->n_axes + 1));
    t->first = cm_arena_alloc(&m->arena, sizeof *t->first * (target->n_axes + 1));
    t->n = cm_arena_alloc(&m->arena, sizeof *t->n * (target->n_axes + 1));
    t->refs = cm_arena_alloc(&m->arena, sizeof *t->refs * cap);
    if (t->axis == NULL || t->first == NULL || t->n == NULL || t->refs == NULL) {
        *oom = true;
        return false;
    }
    uint32_t mi = 0, ti = 0, n_refs = 0;
    int64_t mpre = 1, mrem = 1, trem = 1;
    while (mi < main->n_axes && main->axes[mi].size == 1) {
        mi++;
    }
    while (ti < target->n_axes && target->axes[ti].size == 1) {
        ti++;
    }
    if (mi < main->n_axes) {
        mrem = main->axes[mi].size;
    }
    if (ti < target->n_axes) {
        trem = target->axes[ti].size;
    }
    t->n_axes = 0;
    while (mi < main->n_axes && ti < target->n_axes) {
        int64_t lo = mrem < trem ? mrem : trem, hi = mrem < trem ? trem : mrem;
        if (lo <= 0 || hi % lo != 0 || n_refs >= cap) {
            return false;
        }
        const sp_mesh_axis *ma = &main->axes[mi];
        if (t->n_axes == 0 || strcmp(t->axis[t->n_axes - 1], target->axes[ti].name) != 0) {
            t->axis[t->n_axes] = target->axes[ti].name;
            t->first[t->n_axes] = n_refs;
            t->n[t->n_axes++] = 0;
        }
        t->refs[n_refs++] = ma->size == lo ? (sp_axis_ref){ma->name, 0, ma->size}
                                           : (sp_axis_ref){ma->name, mpre, lo};
        t->n[t->n_axes - 1]++;
        mrem /= lo;
        trem /= lo;
        if (mrem == 1) {
            mi++;
            while (mi < main->n_axes && main->axes[mi].size == 1) {
                mi++;
            }
            mpre = 1;
            if (mi < main->n_axes) {
                mrem = main->axes[mi].size;
            }
        } else {
            mpre *= lo;
        }
        if (trem == 1) {
            ti++;
            while (ti < target->n_axes && target->axes[ti].size == 1) {
                ti++;
            }
            if (ti < target->n_axes) {
                trem = target->axes[ti].size;
            }
        }
    }
    return mi == main->n_axes && ti == target->n_axes;
}

static int64_t main_axis_size(const sp_mesh *x, const char *name)
{
    for (uint32_t i = 0; i < x->n_axes; i++) {
        if (strcmp(x->axes[i].name, name) == 0) {
            return x->axes[i].size;
        }
    }
    return 0;
}

/* Appends r to out[*n], merged with the last ref when both are consecutive
 * pieces of one axis (a merge that covers the axis makes it the full axis),
 * as Shardy's addAxisOrMerge. */
static void add_or_merge(sp_axis_ref *out, uint32_t *n, sp_axis_ref r, const sp_mesh *main)
{
    if (*n > 0) {
        sp_axis_ref *p = &out[*n - 1];
        if (p->pre_size > 0 && r.pre_size > 0 && strcmp(p->name, r.name) == 0 &&
            p->pre_size * p->size == r.pre_size) {
            p->size *= r.size;
            if (p->pre_size == 1 && p->size == main_axis_size(main, p->name)) {
                p->pre_size = 0;
            }
            return;
        }
    }
    out[(*n)++] = r;
}

/* The main (sub-)axes of old axis ref r, appended to out[*n]; false for a
 * sub-axis split in a way XLA does not support either. */
static bool map_ref(const target_map *t, const sp_axis_ref *r, sp_axis_ref *out, uint32_t *n)
{
    uint32_t a = 0;
    while (a < t->n_axes && strcmp(t->axis[a], r->name) != 0) {
        a++;
    }
    if (a == t->n_axes) {
        return true; /* a size-one axis: dropped */
    }
    const sp_axis_ref *refs = t->refs + t->first[a];
    if (r->pre_size == 0) {
        for (uint32_t i = 0; i < t->n[a]; i++) {
            add_or_merge(out, n, refs[i], t->main_mesh);
        }
        return true;
    }
    int64_t pre = r->pre_size, size = r->size;
    for (uint32_t i = 0; i < t->n[a]; i++) {
        int64_t msize = refs[i].size;
        if (pre >= msize) {
            if (pre % msize != 0) {
                return false;
            }
            pre /= msize;
            continue;
        }
        if (msize % pre != 0) {
            return false;
        }
        int64_t usable = msize / pre, used = size < usable ? size : usable;
        int64_t full = main_axis_size(t->main_mesh, refs[i].name);
        int64_t base = refs[i].pre_size > 0 ? refs[i].pre_size : 1;
        sp_axis_ref nr = used == full ? (sp_axis_ref){refs[i].name, 0, full}
                                      : (sp_axis_ref){refs[i].name, pre * base, used};
        add_or_merge(out, n, nr, t->main_mesh);
        if (size % used != 0) {
            return false;
        }
        pre = 1;
        size /= used;
        if (size == 1) {
            break;
        }
    }
    return true;
}

typedef struct dedup_ctx {
    target_map *maps;
    uint32_t n_maps;
    cm_error *err;
} dedup_ctx;

static const target_map *map_of(const dedup_ctx *c, const char *mesh)
{
    for (uint32_t i = 0; mesh != NULL && i < c->n_maps; i++) {
        if (strcmp(c->maps[i].mesh, mesh) == 0) {
            return &c->maps[i];
        }
    }
    return NULL;
}

static cm_status map_list(sp_module *m, const target_map *t, sp_axis_ref **refs, uint32_t *n,
                          cm_error *err)
{
    uint32_t cap = (*n + 1) * MAX_MAPPED, k = 0;
    sp_axis_ref *out = cm_arena_alloc(&m->arena, sizeof *out * cap);
    if (out == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < *n; i++) {
        if (t->n_axes > 0 && k + t->n_axes * MAX_MAPPED > cap) {
            return cm_error_set(err, CM_EINVAL, NULL, "too many axes to deduplicate mesh @%s",
                                t->mesh);
        }
        if (!map_ref(t, &(*refs)[i], out, &k)) {
            return cm_error_set(err, CM_EINVAL, NULL,
                                "cannot map sub-axis \"%s\" of mesh @%s onto mesh @%s",
                                (*refs)[i].name, t->mesh, t->main);
        }
    }
    *refs = out;
    *n = k;
    return CM_OK;
}

static cm_status dedup_one(sp_module *m, sp_sharding *s, void *vctx)
{
    dedup_ctx *c = vctx;
    const target_map *t = s->mesh == NULL ? map_of(c, s->mesh_name) : NULL;
    if (t == NULL) {
        return CM_OK;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        cm_status st = map_list(m, t, &s->dims[d].axes, &s->dims[d].n_axes, c->err);
        if (st != CM_OK) {
            return st;
        }
    }
    cm_status st = map_list(m, t, &s->replicated, &s->n_replicated, c->err);
    if (st == CM_OK) {
        st = map_list(m, t, &s->unreduced, &s->n_unreduced, c->err);
    }
    s->mesh_name = t->main;
    return st;
}

/* The manual axes of manual computations on a folded mesh become the main
 * mesh's; a manual sub-axis is an error, as in XLA. */
static cm_status dedup_manual(sp_module *m, dedup_ctx *c)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE || m->ops[i].kind != SP_OP_SDY_MANUAL_COMPUTATION) {
            continue;
        }
        sp_attr *in = mesh_op_attr(m, i, "in_shardings", SP_ATTR_SHARDING_LIST);
        sp_attr *out = mesh_op_attr(m, i, "out_shardings", SP_ATTR_SHARDING_LIST);
        sp_attr *ax = mesh_op_attr(m, i, "manual_axes", SP_ATTR_AXIS_LIST);
        const sp_sharding *s = in != NULL && in->u.shardings.n > 0     ? in->u.shardings.items[0]
                               : out != NULL && out->u.shardings.n > 0 ? out->u.shardings.items[0]
                                                                       : NULL;
        const target_map *t = s != NULL && s->mesh == NULL ? map_of(c, s->mesh_name) : NULL;
        if (t == NULL || ax == NULL) {
            continue;
        }
        cm_status st = map_list(m, t, &ax->u.axes.axes, &ax->u.axes.n, c->err);
        for (uint32_t k = 0; st == CM_OK && k < ax->u.axes.n; k++) {
            if (ax->u.axes.axes[k].pre_size > 0) {
                return sp_gspmd_op_error(m, i, c->err, "has a manual sub-axis after mesh dedup");
            }
        }
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

cm_status sp_gspmd_dedup_meshes(sp_module *m, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t n_mesh = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        n_mesh += m->ops[body->ops[i]].kind == SP_OP_SDY_MESH;
    }
    if (n_mesh < 2) {
        return CM_OK;
    }
    uint32_t *ids = cm_alloc(sizeof *ids * n_mesh), *main_of = cm_alloc(sizeof *ids * n_mesh);
    dedup_ctx c = {cm_arena_zalloc(&m->arena, sizeof *c.maps * n_mesh), 0, err};
    cm_status st = CM_OK;
    if (ids == NULL || main_of == NULL || c.maps == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        if (m->ops[op].kind == SP_OP_SDY_MESH && mesh_op_attr(m, op, "mesh", SP_ATTR_MESH) &&
            mesh_op_attr(m, op, "sym_name", SP_ATTR_STRING)) {
            ids[n++] = op;
        }
    }
    /* the main mesh of each device set: real axes first, then the most
     * axes of size above one, then the first */
    for (uint32_t i = 0; i < n; i++) {
        const sp_mesh *cur = mesh_op_attr(m, ids[i], "mesh", SP_ATTR_MESH)->u.mesh;
        main_of[i] = i;
        for (uint32_t k = 0; k < i; k++) {
            const sp_mesh *km = mesh_op_attr(m, ids[k], "mesh", SP_ATTR_MESH)->u.mesh;
            if (main_of[k] != k || !same_devices(cur, km)) {
                continue;
            }
            bool cf = has_fake_axis(cur), mf = has_fake_axis(km);
            bool better = !(cf && !mf) && !(cf == mf && non_size_one(cur) <= non_size_one(km));
            if (better) {
                for (uint32_t j = 0; j < i; j++) {
                    if (main_of[j] == k) {
                        main_of[j] = i;
                    }
                }
            } else {
                main_of[i] = k;
            }
            break;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (main_of[i] == i) {
            continue;
        }
        target_map *t = &c.maps[c.n_maps];
        const sp_mesh *tm = mesh_op_attr(m, ids[i], "mesh", SP_ATTR_MESH)->u.mesh;
        t->main_mesh = mesh_op_attr(m, ids[main_of[i]], "mesh", SP_ATTR_MESH)->u.mesh;
        bool oom = false;
        if (!map_axes(m, tm, t->main_mesh, t, &oom)) {
            if (oom) {
                st = cm_error_oom(err);
                goto out;
            }
            continue;
        }
        t->mesh = mesh_op_attr(m, ids[i], "sym_name", SP_ATTR_STRING)->u.str.s;
        t->main = mesh_op_attr(m, ids[main_of[i]], "sym_name", SP_ATTR_STRING)->u.str.s;
        c.n_maps++;
    }
    if (c.n_maps == 0) {
        goto out;
    }
    st = dedup_manual(m, &c);
    if (st == CM_OK) {
        st = visit_shardings(m, dedup_one, &c);
    }
    for (uint32_t i = n; st == CM_OK && i-- > 0;) {
        const sp_attr *nm = mesh_op_attr(m, ids[i], "sym_name", SP_ATTR_STRING);
        uint32_t idx = map_of(&c, nm->u.str.s) != NULL ? sp_op_index_in_block(m, ids[i]) : SP_NONE;
        if (idx != SP_NONE) {
            sp_block_remove_op(m, m->body, idx);
        }
    }
out:
    cm_free(ids);
    cm_free(main_of);
    return st;
}
