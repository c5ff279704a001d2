/* SPDX-License-Identifier: Apache-2.0
 * planner: the module passes of sp_gspmd.h. -xla-sdy-import-shardings reads
 * every `mhlo.sharding` of a module, builds one global mesh whose axes are
 * the common factors of all local meshes (as XLA's findMeshAxesAndIds) plus
 * one maximal mesh per device a maximal sharding names, and converts each
 * sharding; the loader's import then turns @Sharding custom calls into
 * sharding constraints. The export writes `mhlo.sharding` strings back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_gspmd.h"
#include "sp_gspmd_int.h"
#include "sp_ops.h"
#include "sp_pass.h"

#define MHLO_SHARDING "mhlo.sharding"
#define SDY_SHARDING  "sdy.sharding"
#define GLOBAL_MESH   "mesh"

/* ---- attribute helpers ----------------------------------------------------------- */

static const sp_attr *dict_get(const sp_attr *d, const char *key)
{
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    return sp_attrs_get(d->u.dict.items, d->u.dict.n, key);
}

static sp_attr *list_item(const sp_attr *arr, uint32_t i)
{
    if (arr == NULL || arr->kind != SP_ATTR_ARRAY || i >= arr->u.arr.n) {
        return NULL;
    }
    return arr->u.arr.items[i];
}

/* A copy of the named attributes with `drop` removed and (add, v) inserted
 * in name order (MLIR keeps dictionaries sorted); v NULL adds nothing. */
static sp_named_attr *attrs_swap(sp_module *m, const sp_named_attr *items, uint32_t n,
                                 const char *drop, const char *add, sp_attr *v, uint32_t *n_out)
{
    sp_named_attr *r = cm_arena_alloc(&m->arena, sizeof *r * (n + 1u));
    if (r == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    bool added = v == NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(items[i].name, drop) == 0 || (add != NULL && strcmp(items[i].name, add) == 0)) {
            continue;
        }
        if (!added && strcmp(items[i].name, add) > 0) {
            r[k++] = (sp_named_attr){add, v};
            added = true;
        }
        r[k++] = items[i];
    }
    if (!added) {
        r[k++] = (sp_named_attr){add, v};
    }
    *n_out = k;
    return r;
}

/* Replaces `drop` by (add, v) in entry i of op's array-of-dicts list. */
static cm_status list_swap(sp_module *m, uint32_t op, const char *list, uint32_t count, uint32_t i,
                           const char *drop, const char *add, sp_attr *v)
{
    const sp_attr *old = sp_op_attr(m, op, list);
    sp_attr *arr = sp_attr_new(m, SP_ATTR_ARRAY);
    sp_attr *d = sp_attr_new(m, SP_ATTR_DICT);
    if (arr == NULL || d == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.items = cm_arena_alloc(&m->arena, sizeof(sp_attr *) * (count + 1u));
    if (arr->u.arr.items == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.n = count;
    const sp_attr *od = list_item(old, i);
    d->u.dict.items = attrs_swap(
        m, od != NULL && od->kind == SP_ATTR_DICT ? od->u.dict.items : NULL,
        od != NULL && od->kind == SP_ATTR_DICT ? od->u.dict.n : 0, drop, add, v, &d->u.dict.n);
    if (d->u.dict.items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t k = 0; k < count; k++) {
        sp_attr *it = list_item(old, k);
        if (k == i) {
            it = d;
        } else if (it == NULL) {
            it = sp_attr_new(m, SP_ATTR_DICT);
            if (it == NULL) {
                return CM_ENOMEM;
            }
        }
        arr->u.arr.items[k] = it;
    }
    return sp_op_set_attr(m, op, list, arr);
}

static cm_status op_swap(sp_module *m, uint32_t op, const char *drop, const char *add, sp_attr *v)
{
    sp_op *o = &m->ops[op];
    uint32_t n = 0;
    sp_named_attr *r = attrs_swap(m, o->attrs, o->n_attrs, drop, add, v, &n);
    if (r == NULL) {
        return CM_ENOMEM;
    }
    o->attrs = r;
    o->n_attrs = n;
    return CM_OK;
}

static uint32_t type_rank(const sp_type *t)
{
    return t->kind == SP_TYPE_TENSOR ? t->rank : 0;
}

/* ---- the sites that carry a sharding ---------------------------------------------- */

typedef enum site_kind { SITE_ARG, SITE_RES, SITE_OP } site_kind;

typedef struct site {
    site_kind kind;
    uint32_t op;  /* the func (args, results) or the op */
    uint32_t idx; /* argument or result number */
    const sp_attr *str;
} site;

typedef cm_status (*site_fn)(sp_module *m, const site *s, void *ctx);

typedef struct walk_ctx {
    site_fn fn;
    void *ctx;
} walk_ctx;

static cm_status walk_op(sp_module *m, uint32_t op, void *vctx)
{
    walk_ctx *w = vctx;
    const sp_attr *a = sp_op_attr(m, op, MHLO_SHARDING);
    if (a == NULL || m->ops[op].kind == SP_OP_FUNC_FUNC) {
        return CM_OK;
    }
    site s = {SITE_OP, op, 0, a};
    return w->fn(m, &s, w->ctx);
}

/* Calls fn on every `mhlo.sharding` of every function of m: arguments,
 * results, then the ops of the body in program order. */
static cm_status for_each_site(sp_module *m, site_fn fn, void *ctx)
{
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < m->blocks[m->body].n_ops; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        const sp_type *ft = sp_func_type(m, f);
        for (uint32_t k = 0; ft != NULL && k < ft->n_inputs; k++) {
            const sp_attr *a = dict_get(list_item(sp_op_attr(m, f, "arg_attrs"), k), MHLO_SHARDING);
            site s = {SITE_ARG, f, k, a};
            cm_status rc = a != NULL ? fn(m, &s, ctx) : CM_OK;
            if (rc != CM_OK) {
                return rc;
            }
        }
        for (uint32_t k = 0; ft != NULL && k < ft->n_results; k++) {
            const sp_attr *a = dict_get(list_item(sp_op_attr(m, f, "res_attrs"), k), MHLO_SHARDING);
            site s = {SITE_RES, f, k, a};
            cm_status rc = a != NULL ? fn(m, &s, ctx) : CM_OK;
            if (rc != CM_OK) {
                return rc;
            }
        }
        if (m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0) {
            walk_ctx w = {fn, ctx};
            cm_status rc = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], walk_op, &w);
            if (rc != CM_OK) {
                return rc;
            }
        }
    }
    return CM_OK;
}

static void site_where(const sp_module *m, const site *s, char *buf, size_t n)
{
    const sp_attr *name = sp_op_attr(m, s->op, "sym_name");
    const char *fn = name != NULL && name->kind == SP_ATTR_STRING ? name->u.str.s : "?";
    if (s->kind == SITE_ARG) {
        snprintf(buf, n, "argument %u of @%s", s->idx, fn);
    } else if (s->kind == SITE_RES) {
        snprintf(buf, n, "result %u of @%s", s->idx, fn);
    } else {
        snprintf(buf, n, "%s", m->ops[s->op].name);
    }
}

/* err at the site's LINE:COL, naming the site and the inner error. */
static cm_status site_error(const sp_module *m, const site *s, const cm_error *inner, cm_error *err)
{
    if (inner->code == CM_ENOMEM) {
        return cm_error_oom(err);
    }
    char path[32], where[160];
    snprintf(path, sizeof path, "%u:%u", m->ops[s->op].line, m->ops[s->op].col);
    site_where(m, s, where, sizeof where);
    return cm_error_set(err, CM_EINVAL, path, "mhlo.sharding \"%.80s\" of %s: %s%s%s",
                        s->str->kind == SP_ATTR_STRING ? s->str->u.str.s : "?", where, inner->msg,
                        inner->path[0] != '\0' ? " at " : "", inner->path);
}

static cm_status site_parse(sp_module *m, const site *s, cm_arena *a, sp_hlo_sharding **out,
                            cm_error *err)
{
    cm_error e;
    cm_error_clear(&e);
    if (s->str->kind != SP_ATTR_STRING) {
        cm_error_set(&e, CM_EINVAL, NULL, "is not a string");
        return site_error(m, s, &e, err);
    }
    if (sp_hlo_sharding_parse(s->str->u.str.s, s->str->u.str.len, a, out, &e) != CM_OK) {
        return site_error(m, s, &e, err);
    }
    return CM_OK;
}

/* ---- detection -------------------------------------------------------------------------- */

static bool is_sharding_call(const sp_module *m, uint32_t op, const char *target)
{
    if (m->ops[op].kind != SP_OP_CUSTOM_CALL) {
        return false;
    }
    const sp_attr *t = sp_op_attr(m, op, "call_target_name");
    if (t == NULL) {
        return false;
    }
    const char *name = t->kind == SP_ATTR_SYMBOL   ? t->u.sym
                       : t->kind == SP_ATTR_STRING ? t->u.str.s
                                                   : NULL;
    return name != NULL && strcmp(name, target) == 0;
}

bool sp_gspmd_detect(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_SDY_MESH && m->ops[i].parent_block == m->body) {
            return false;
        }
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        if (is_sharding_call(m, i, "Sharding") || sp_op_attr(m, i, MHLO_SHARDING) != NULL) {
            return true;
        }
        const sp_type *ft = m->ops[i].kind == SP_OP_FUNC_FUNC ? sp_func_type(m, i) : NULL;
        for (uint32_t k = 0; ft != NULL && k < ft->n_inputs; k++) {
            if (dict_get(list_item(sp_op_attr(m, i, "arg_attrs"), k), MHLO_SHARDING) != NULL) {
                return true;
            }
        }
        for (uint32_t k = 0; ft != NULL && k < ft->n_results; k++) {
            if (dict_get(list_item(sp_op_attr(m, i, "res_attrs"), k), MHLO_SHARDING) != NULL) {
                return true;
            }
        }
    }
    return false;
}

/* ---- import ------------------------------------------------------------------------------ */

typedef struct collect_ctx {
    cm_arena scratch;
    int64_t axes[SP_HLO_MAX_DIMS];
    uint32_t n_axes;
    bool have_axes;
    int64_t *devices; /* maximal device ids, sorted, unique */
    uint32_t n_devices, cap_devices;
    const sp_mesh *named[64]; /* the distinct meshes of V3 shardings, first first */
    const char *named_names[64];
    uint32_t n_named;
    cm_error *err;
} collect_ctx;

static cm_status collect_leaf(sp_module *m, const site *s, const sp_hlo_sharding *h, collect_ctx *c)
{
    if (h->kind == SP_HLO_MAXIMAL) {
        for (uint32_t i = 0; i < c->n_devices; i++) {
            if (c->devices[i] == h->device) {
                return CM_OK;
            }
        }
        if (CM_GROW_U32(c->devices, c->cap_devices, c->n_devices + 1, NULL) != CM_OK) {
            return cm_error_oom(c->err);
        }
        c->devices[c->n_devices++] = h->device;
        return CM_OK;
    }
    if (h->kind == SP_HLO_NAMED) {
        for (uint32_t i = 0; i < c->n_named; i++) {
            if (sp_mesh_equal(c->named[i], h->named->mesh)) {
                return CM_OK;
            }
        }
        if (c->n_named >= 64) {
            cm_error e;
            cm_error_set(&e, CM_EINVAL, NULL, "more than 64 different meshes");
            return site_error(m, s, &e, c->err);
        }
        c->named[c->n_named++] = h->named->mesh;
        return CM_OK;
    }
    if (h->kind != SP_HLO_TILED) {
        return CM_OK;
    }
    cm_error e;
    cm_error_clear(&e);
    int64_t local[SP_HLO_MAX_DIMS];
    uint32_t n = 0;
    if (sp_hlo_local_mesh(h, local, &n, &e) != CM_OK) {
        return site_error(m, s, &e, c->err);
    }
    if (!c->have_axes) {
        memcpy(c->axes, local, sizeof *local * n);
        c->n_axes = n;
        c->have_axes = true;
        return CM_OK;
    }
    int64_t common[SP_HLO_MAX_DIMS];
    uint32_t nc = sp_hlo_common_factors(local, n, c->axes, c->n_axes, common, SP_HLO_MAX_DIMS);
    if (nc == 0) {
        cm_error_set(&e, CM_EINVAL, NULL, "%s",
                     "its device mesh has no common factorisation with the module's other "
                     "shardings");
        return site_error(m, s, &e, c->err);
    }
    memcpy(c->axes, common, sizeof *common * nc);
    c->n_axes = nc;
    return CM_OK;
}

static cm_status collect_site(sp_module *m, const site *s, void *vctx)
{
    collect_ctx *c = vctx;
    sp_hlo_sharding *h;
    cm_status rc = site_parse(m, s, &c->scratch, &h, c->err);
    if (rc != CM_OK) {
        return rc;
    }
    if (h->kind != SP_HLO_TUPLE) {
        return collect_leaf(m, s, h, c);
    }
    for (uint32_t i = 0; i < h->n_elems && rc == CM_OK; i++) {
        rc = collect_leaf(m, s, &h->elems[i], c);
    }
    return rc;
}

typedef struct convert_ctx {
    cm_arena scratch;
    const sp_mesh *mesh;
    const collect_ctx *col; /* the V3 meshes and their names */
    bool v3;                /* the V3 round trip: a V2 {replicated} is a placeholder */
    cm_error *err;
} convert_ctx;

static int cmp_devices(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static const char *maximal_name(sp_module *m, int64_t device)
{
    char buf[48];
    snprintf(buf, sizeof buf, "single_device_%lld", (long long)device);
    return sp_module_str(m, buf, strlen(buf));
}

static cm_status convert_leaf(sp_module *m, const site *s, const sp_hlo_sharding *h, uint32_t rank,
                              convert_ctx *c, sp_sharding **out)
{
    cm_error e;
    cm_error_clear(&e);
    const char *mx = h->kind == SP_HLO_MAXIMAL ? maximal_name(m, h->device) : NULL;
    if (h->kind == SP_HLO_MAXIMAL && mx == NULL) {
        return cm_error_oom(c->err);
    }
    const char *mesh_name = GLOBAL_MESH;
    for (uint32_t i = 0; h->kind == SP_HLO_NAMED && i < c->col->n_named; i++) {
        if (sp_mesh_equal(c->col->named[i], h->named->mesh)) {
            mesh_name = c->col->named_names[i];
        }
    }
    if (sp_hlo_to_sdy(h, c->mesh, mesh_name, mx, rank, false, &m->arena, out, &e) != CM_OK) {
        return site_error(m, s, &e, c->err);
    }
    return CM_OK;
}

/* A V2 sharding the V3 round trip takes for a placeholder at a function
 * boundary: {replicated}, and a maximal one not written in V3's
 * {single_device[device_id=N]} ({maximal device=N}, {maximal_mesh[...]}). */
static bool v2_placeholder(const sp_hlo_sharding *h)
{
    return h->kind == SP_HLO_REPLICATED || (h->kind == SP_HLO_MAXIMAL && !h->single_device);
}

static cm_status convert_site(sp_module *m, const site *s, void *vctx)
{
    convert_ctx *c = vctx;
    sp_hlo_sharding *h;
    cm_status rc = site_parse(m, s, &c->scratch, &h, c->err);
    if (rc != CM_OK) {
        return rc;
    }
    cm_error e;
    cm_error_clear(&e);
    if (s->kind != SITE_OP) {
        const sp_type *ft = sp_func_type(m, s->op);
        uint32_t tid = s->kind == SITE_ARG ? ft->inputs[s->idx] : ft->results[s->idx];
        if (h->kind == SP_HLO_TUPLE) {
            cm_error_set(&e, CM_EINVAL, NULL, "a tuple sharding on a function %s",
                         s->kind == SITE_ARG ? "argument" : "result");
            return site_error(m, s, &e, c->err);
        }
        if (c->v3 && v2_placeholder(h)) {
            /* the V3 round trip reads only V3 shardings at function
             * boundaries: a V2 one there is a placeholder XLA ignores */
            const sp_type *ft0 = sp_func_type(m, s->op);
            rc = list_swap(m, s->op, s->kind == SITE_ARG ? "arg_attrs" : "res_attrs",
                           s->kind == SITE_ARG ? ft0->n_inputs : ft0->n_results, s->idx,
                           MHLO_SHARDING, NULL, NULL);
            return rc == CM_OK ? CM_OK : cm_error_oom(c->err);
        }
        sp_sharding *sh;
        rc = convert_leaf(m, s, h, type_rank(&m->types[tid]), c, &sh);
        sp_attr *v = rc == CM_OK ? sp_attr_new(m, SP_ATTR_SHARDING) : NULL;
        if (rc != CM_OK) {
            return rc;
        }
        if (v == NULL) {
            return cm_error_oom(c->err);
        }
        v->u.sharding = sh;
        const sp_type *ft2 = sp_func_type(m, s->op);
        rc = list_swap(m, s->op, s->kind == SITE_ARG ? "arg_attrs" : "res_attrs",
                       s->kind == SITE_ARG ? ft2->n_inputs : ft2->n_results, s->idx, MHLO_SHARDING,
                       SDY_SHARDING, v);
        return rc == CM_OK ? CM_OK : cm_error_oom(c->err);
    }
    const sp_op *o = &m->ops[s->op];
    const sp_hlo_sharding *leaves = h->kind == SP_HLO_TUPLE ? h->elems : h;
    uint32_t n_leaves = h->kind == SP_HLO_TUPLE ? h->n_elems : 1;
    uint32_t n = o->n_results == 0 ? 1 : o->n_results;
    if (n_leaves == 0 || (o->n_results > 0 && n_leaves != o->n_results)) {
        cm_error_set(&e, CM_EINVAL, NULL, "it has %u shardings for %u results", n_leaves,
                     o->n_results);
        return site_error(m, s, &e, c->err);
    }
    sp_attr *v = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * n);
    if (v == NULL || items == NULL) {
        return cm_error_oom(c->err);
    }
    /* In the V3 round trip a V2 {replicated} holds no sharding: an op whose
     * shardings are all such has none, and in a tuple such an element is
     * fully open on the mesh of the first element that has one. */
    uint32_t n_placeholders = 0;
    for (uint32_t i = 0; c->v3 && i < n; i++) {
        n_placeholders += leaves[i].kind == SP_HLO_REPLICATED;
    }
    if (c->v3 && n_placeholders == n) {
        return op_swap(m, s->op, MHLO_SHARDING, NULL, NULL) == CM_OK ? CM_OK : cm_error_oom(c->err);
    }
    const char *sibling = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (n_placeholders > 0 && leaves[i].kind == SP_HLO_REPLICATED) {
            continue;
        }
        uint32_t rank = o->n_results == 0 ? 0 : type_rank(sp_value_type(m, o->first_result + i));
        rc = convert_leaf(m, s, &leaves[i], rank, c, &items[i]);
        if (rc != CM_OK) {
            return rc;
        }
        if (sibling == NULL) {
            sibling = items[i]->mesh_name;
        }
    }
    for (uint32_t i = 0; n_placeholders > 0 && i < n; i++) {
        if (leaves[i].kind != SP_HLO_REPLICATED) {
            continue;
        }
        uint32_t rank = o->n_results == 0 ? 0 : type_rank(sp_value_type(m, o->first_result + i));
        if (sp_hlo_to_sdy(&leaves[i], c->mesh, sibling, NULL, rank, true, &m->arena, &items[i],
                          &e) != CM_OK) {
            return site_error(m, s, &e, c->err);
        }
    }
    v->u.shardings.items = items;
    v->u.shardings.n = n;
    return op_swap(m, s->op, MHLO_SHARDING, SDY_SHARDING, v) == CM_OK ? CM_OK
                                                                      : cm_error_oom(c->err);
}

static cm_status insert_mesh(sp_module *m, uint32_t at, const char *name, sp_mesh *mesh)
{
    uint32_t op;
    sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
    const char *s = sp_module_str(m, name, strlen(name));
    if (n == NULL || ms == NULL || s == NULL ||
        sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    n->u.str.s = s;
    n->u.str.len = strlen(s);
    ms->u.mesh = mesh;
    if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK ||
        sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
        sp_block_insert_op(m, m->body, at, op) != CM_OK) {
        return CM_ENOMEM;
    }
    return CM_OK;
}

cm_status sp_gspmd_import_shardings(sp_module *m, cm_error *err)
{
    return sp_gspmd_import_shardings_as(m, "_axis_", err);
}

static cm_status import_shardings(sp_module *m, const char *axis_prefix, bool sort_devices,
                                  cm_error *err);

cm_status sp_gspmd_import_shardings_as(sp_module *m, const char *axis_prefix, cm_error *err)
{
    return import_shardings(m, axis_prefix, true, err);
}

cm_status sp_gspmd_import_shardings_in_order(sp_module *m, cm_error *err)
{
    return import_shardings(m, "_axis_", false, err);
}

/* The import; sort_devices: the single-device meshes in device order (XLA's
 * V2 import sorts them), else in the order the shardings name them (as
 * Shardy's lift of inlined meshes meets them). */
static cm_status import_shardings(sp_module *m, const char *axis_prefix, bool sort_devices,
                                  cm_error *err)
{
    collect_ctx c;
    memset(&c, 0, sizeof c);
    cm_arena_init(&c.scratch, 0);
    c.err = err;
    cm_status rc = for_each_site(m, collect_site, &c);
    if (rc != CM_OK || (c.n_axes == 0 && c.n_devices == 0 && c.n_named == 0)) {
        /* no sharding that needs a mesh: the module is left as it is */
        cm_arena_fini(&c.scratch);
        cm_free(c.devices);
        return rc;
    }
    if (sort_devices && c.n_devices > 1) {
        qsort(c.devices, c.n_devices, sizeof *c.devices, cmp_devices);
    }
    sp_mesh *mesh = cm_arena_zalloc(&m->arena, sizeof *mesh);
    if (mesh == NULL) {
        rc = cm_error_oom(err);
        goto out;
    }
    mesh->axes = cm_arena_zalloc(&m->arena, sizeof *mesh->axes * (c.n_axes + 1u));
    if (mesh->axes == NULL) {
        rc = cm_error_oom(err);
        goto out;
    }
    for (uint32_t i = 0; i < c.n_axes; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s%u", axis_prefix, i);
        mesh->axes[i].name = sp_module_str(m, nm, strlen(nm));
        mesh->axes[i].size = c.axes[i];
        if (mesh->axes[i].name == NULL) {
            rc = cm_error_oom(err);
            goto out;
        }
    }
    mesh->n_axes = c.n_axes;
    /* the global mesh when V2 shardings need it (or only maximal ones exist),
     * then one per distinct V3 mesh, then the maximal meshes */
    uint32_t at = 0;
    rc = CM_OK;
    if (c.n_axes > 0 || c.n_named == 0) {
        rc = insert_mesh(m, at++, GLOBAL_MESH, mesh);
    }
    uint32_t counter = 0;
    for (uint32_t i = 0; i < c.n_named && rc == CM_OK; i++) {
        char nm[32];
        /* named as Shardy's lift-inlined-meshes names them: an empty mesh
         * is `empty_mesh` */
        const char *base =
            c.named[i]->n_axes == 0 && c.named[i]->n_device_ids == 0 ? "empty_mesh" : GLOBAL_MESH;
        snprintf(nm, sizeof nm, "%s", base);
        while (sp_module_mesh(m, nm) != NULL || sp_module_func(m, nm) != SP_NONE) {
            snprintf(nm, sizeof nm, "%s_%u", base, counter++);
        }
        sp_mesh *copy = cm_arena_zalloc(&m->arena, sizeof *copy);
        const char *name = sp_module_str(m, nm, strlen(nm));
        if (copy == NULL || name == NULL) {
            rc = CM_ENOMEM;
            break;
        }
        *copy = *c.named[i];
        copy->axes =
            cm_arena_memdup(&m->arena, c.named[i]->axes, c.named[i]->n_axes, sizeof *copy->axes);
        copy->device_ids = cm_arena_memdup(&m->arena, c.named[i]->device_ids,
                                           c.named[i]->n_device_ids, sizeof *copy->device_ids);
        for (uint32_t k = 0; copy->axes != NULL && k < copy->n_axes; k++) {
            copy->axes[k].name = sp_module_str(m, copy->axes[k].name, strlen(copy->axes[k].name));
        }
        c.named_names[i] = name;
        rc = insert_mesh(m, at++, name, copy);
    }
    for (uint32_t i = 0; i < c.n_devices && rc == CM_OK; i++) {
        sp_mesh *mx = cm_arena_zalloc(&m->arena, sizeof *mx);
        int64_t *ids = cm_arena_alloc(&m->arena, sizeof *ids);
        char nm[48];
        snprintf(nm, sizeof nm, "single_device_%lld", (long long)c.devices[i]);
        if (mx == NULL || ids == NULL) {
            rc = CM_ENOMEM;
            break;
        }
        ids[0] = c.devices[i];
        mx->device_ids = ids;
        mx->n_device_ids = 1;
        rc = insert_mesh(m, at++, nm, mx);
    }
    if (rc != CM_OK) {
        rc = cm_error_oom(err);
        goto out;
    }
    convert_ctx v;
    memset(&v, 0, sizeof v);
    cm_arena_init(&v.scratch, 0);
    v.mesh = mesh;
    v.col = &c;
    v.v3 = !sort_devices;
    v.err = err;
    rc = for_each_site(m, convert_site, &v);
    cm_arena_fini(&v.scratch);
    if (rc == CM_OK && !sort_devices && c.n_axes == 0 && c.n_named == 0 &&
        !sp_gspmd_mesh_referenced(m, GLOBAL_MESH)) {
        /* the V3 round trip's meshes are the ones its shardings name (XLA
         * lifts them from the inlined ones): with only single-device
         * shardings there is no global mesh */
        sp_block_remove_op(m, m->body, 0);
    }
out:
    cm_arena_fini(&c.scratch);
    cm_free(c.devices);
    return rc;
}

/* ---- the sharding custom calls ------------------------------------------------------------ */

/* The dims `unspecified_dims=[1,2]` of a @Sharding call's backend_config
 * names (XLA opens them); false when the config says nothing of them. */
static bool unspecified_dims(const sp_module *m, uint32_t op, uint32_t rank, bool *open)
{
    const sp_attr *bc = sp_op_attr(m, op, "backend_config");
    if (bc == NULL || bc->kind != SP_ATTR_STRING) {
        return true;
    }
    const char *p = strstr(bc->u.str.s, "unspecified_dims=[");
    if (p == NULL) {
        return true;
    }
    p += strlen("unspecified_dims=[");
    while (*p != ']' && *p != '\0') {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || (uint32_t)d >= rank) {
            return false;
        }
        open[d] = true;
        p = end;
        while (*p == ',' || *p == ' ') {
            p++;
        }
    }
    return *p == ']';
}

/* @Sharding(x) with an sdy sharding becomes sdy.sharding_constraint x, in
 * place (its result keeps its uses), with the unspecified dims open. */
static cm_status import_sharding_call(sp_module *m, uint32_t op, void *vctx)
{
    cm_error *err = vctx;
    sp_op *o = &m->ops[op];
    if (!is_sharding_call(m, op, "Sharding") || o->n_operands != 1 || o->n_results != 1) {
        return CM_OK;
    }
    const sp_type *t = sp_value_type(m, o->first_result);
    const sp_attr *a = sp_op_attr(m, op, SDY_SHARDING);
    if (t->kind != SP_TYPE_TENSOR || a == NULL || a->kind != SP_ATTR_SHARDING_LIST ||
        a->u.shardings.n != 1) {
        return CM_OK;
    }
    sp_sharding *sh = sp_sharding_clone(&m->arena, a->u.shardings.items[0]);
    if (sh == NULL) {
        return cm_error_oom(err);
    }
    bool open[SP_MAX_RANK] = {false};
    if (sh->rank != t->rank || t->rank > SP_MAX_RANK || !unspecified_dims(m, op, t->rank, open)) {
        char path[32];
        snprintf(path, sizeof path, "%u:%u", o->line, o->col);
        return cm_error_set(err, CM_EINVAL, path,
                            "custom_call @Sharding: bad unspecified_dims in backend_config or "
                            "a sharding of the wrong rank");
    }
    for (uint32_t d = 0; d < sh->rank; d++) {
        if (open[d]) {
            sh->dims[d].is_closed = false;
        }
    }
    sp_attr *v = sp_attr_new(m, SP_ATTR_SHARDING);
    sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs);
    if (v == NULL || attrs == NULL) {
        return cm_error_oom(err);
    }
    v->u.sharding = sh;
    attrs[0] = (sp_named_attr){"sharding", v};
    o->name = "sdy.sharding_constraint";
    o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
    o->attrs = attrs;
    o->n_attrs = 1;
    return CM_OK;
}

cm_status sp_gspmd_import(sp_module *m, cm_error *err)
{
    return sp_gspmd_import_as(m, "_axis_", err);
}

cm_status sp_gspmd_import_as(sp_module *m, const char *axis_prefix, cm_error *err)
{
    cm_status rc = sp_gspmd_import_shardings_as(m, axis_prefix, err);
    if (rc == CM_OK) {
        rc = sp_gspmd_manual_import(m, err);
    }
    if (rc != CM_OK) {
        return rc;
    }
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && rc == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            rc = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], import_sharding_call, err);
        }
    }
    return rc == CM_OK ? sp_gspmd_open_while_free_vars(m, err) : rc;
}

/* ---- export ---------------------------------------------------------------------------- */

typedef struct export_ctx {
    cm_arena scratch;
    const sp_gspmd_export_opts *o;
    cm_error *err;
} export_ctx;

static sp_attr *string_of(sp_module *m, const cm_buf *b)
{
    sp_attr *v = b->oom ? NULL : sp_attr_new(m, SP_ATTR_STRING);
    if (v != NULL) {
        v->u.str.s = sp_module_str(m, b->data, b->len);
        v->u.str.len = b->len;
        if (v->u.str.s == NULL) {
            v = NULL;
        }
    }
    return v;
}

static cm_status manual_text(sp_module *m, const sp_sharding *s, const sp_attr *manual,
                             uint32_t op, export_ctx *c, cm_buf *b);

/* Appends the mhlo.sharding text of s (op's position for errors), inside
 * manual computations over the axes of manual (an axis list, or NULL). */
static cm_status sharding_text(sp_module *m, const sp_sharding *s, uint32_t op, export_ctx *c,
                               cm_buf *b)
{
    return manual_text(m, s, NULL, op, c, b);
}

static cm_status manual_text(sp_module *m, const sp_sharding *s, const sp_attr *manual,
                             uint32_t op, export_ctx *c, cm_buf *b)
{
    const sp_axis_ref *refs = NULL;
    uint32_t n_manual = 0;
    const char *names[SP_HLO_MAX_DIMS];
    if (manual != NULL && manual->kind == SP_ATTR_AXIS_LIST) {
        refs = manual->u.axes.axes;
        n_manual = manual->u.axes.n < SP_HLO_MAX_DIMS ? manual->u.axes.n : SP_HLO_MAX_DIMS;
        for (uint32_t i = 0; i < n_manual; i++) {
            names[i] = refs[i].name;
        }
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    cm_error e;
    cm_error_clear(&e);
    char path[32];
    snprintf(path, sizeof path, "%u:%u", m->ops[op].line, m->ops[op].col);
    if (mesh == NULL) {
        return cm_error_set(c->err, CM_EINVAL, path, "unknown mesh @%s",
                            s->mesh_name != NULL ? s->mesh_name : "?");
    }
    if (c->o != NULL && c->o->hlo_sharding_v3) {
        sp_hlo_v3_print(s, mesh, refs, n_manual, c->o->simplify_replicated, b);
        return CM_OK;
    }
    sp_hlo_sharding *h;
    if (sp_hlo_from_sdy(s, mesh, names, n_manual, &c->scratch, &h, &e) != CM_OK) {
        return e.code == CM_ENOMEM ? cm_error_oom(c->err)
                                   : cm_error_set(c->err, CM_EINVAL, path, "%s", e.msg);
    }
    sp_hlo_sharding_print(h, b);
    /* V2 has no reduction kind: XLA names it in the sharding's metadata */
    bool unreduced = false;
    for (uint32_t i = 0; i < h->n_subgroups; i++) {
        unreduced = unreduced || h->subgroups[i] == SP_HLO_SUB_UNREDUCED;
    }
    if (unreduced && b->len > 0 && b->data[b->len - 1] == '}') {
        static const char *const kinds[] = {"SUM", "MAX", "MIN"};
        b->len--;
        cm_buf_printf(b, " metadata={op_type=\"sdy::reduction_op\" op_name=\"%s\"}}",
                      kinds[s->reduction <= SP_REDUCTION_MIN ? s->reduction : 0]);
    }
    return CM_OK;
}

/* The text of a list of shardings: one, or a tuple with XLA's index
 * comments every fifth element. */
static cm_status list_text(sp_module *m, sp_sharding *const *items, uint32_t n, uint32_t op,
                           const sp_attr *manual, export_ctx *c, cm_buf *b)
{
    if (n == 1) {
        return manual_text(m, items[0], manual, op, c, b);
    }
    cm_buf_putc(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
            if (i % 5 == 0) {
                cm_buf_printf(b, "/*index=%u*/", i);
            }
        }
        cm_status st = manual_text(m, items[i], manual, op, c, b);
        if (st != CM_OK) {
            return st;
        }
    }
    cm_buf_putc(b, '}');
    return CM_OK;
}

/* XLA's export of the sdy ops HLO has no form for: a sharding constraint is
 * a @Sharding custom call again, an sdy.constant a stablehlo.constant. */
static cm_status export_sdy_op(sp_module *m, uint32_t op, export_ctx *c)
{
    sp_op *o = &m->ops[op];
    if (o->kind == SP_OP_SDY_CONSTANT) {
        o->name = "stablehlo.constant";
        o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
        return CM_OK;
    }
    const sp_attr *a = sp_op_attr(m, op, "sharding");
    if (o->kind != SP_OP_SDY_SHARDING_CONSTRAINT || a == NULL || a->kind != SP_ATTR_SHARDING) {
        return CM_OK;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_status rc = sharding_text(m, a->u.sharding, op, c, &b);
    sp_attr *v = rc == CM_OK ? string_of(m, &b) : NULL;
    cm_buf_fini(&b);
    if (rc != CM_OK) {
        return rc;
    }
    sp_attr *t = sp_attr_new(m, SP_ATTR_STRING);
    sp_named_attr *attrs = cm_arena_alloc(&m->arena, sizeof *attrs * 2);
    if (v == NULL || t == NULL || attrs == NULL) {
        return cm_error_oom(c->err);
    }
    t->u.str.s = "Sharding";
    t->u.str.len = strlen("Sharding");
    attrs[0] = (sp_named_attr){"call_target_name", t};
    attrs[1] = (sp_named_attr){MHLO_SHARDING, v};
    o = &m->ops[op];
    o->name = "stablehlo.custom_call";
    o->kind = (uint32_t)sp_op_kind_of(o->name, strlen(o->name));
    o->attrs = attrs;
    o->n_attrs = 2;
    return CM_OK;
}

static cm_status export_op(sp_module *m, uint32_t op, void *vctx)
{
    export_ctx *c = vctx;
    cm_status st = export_sdy_op(m, op, c);
    if (st != CM_OK) {
        return st;
    }
    const sp_attr *a = sp_op_attr(m, op, SDY_SHARDING);
    uint32_t k = m->ops[op].kind;
    if (a == NULL && c->o != NULL && c->o->control_flow &&
        (k == SP_OP_WHILE || k == SP_OP_CASE || k == SP_OP_IF) &&
        sp_op_attr(m, op, MHLO_SHARDING) == NULL) {
        /* without a sharding, HLO would not give the results a free
         * variable's sharding either: XLA marks the op replicated */
        cm_buf b;
        cm_buf_init(&b);
        cm_buf_puts(&b, c->o->hlo_sharding_v3 ? "{mesh[], replicated}" : "{replicated}");
        sp_attr *v = string_of(m, &b);
        cm_buf_fini(&b);
        return v != NULL && sp_op_set_attr(m, op, MHLO_SHARDING, v) == CM_OK ? CM_OK
                                                                          : cm_error_oom(c->err);
    }
    if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST || a->u.shardings.n == 0) {
        return CM_OK;
    }
    cm_buf b;
    cm_buf_init(&b);
    st = list_text(m, a->u.shardings.items, a->u.shardings.n, op,
                   sp_op_attr(m, op, SP_GSPMD_MANUAL_AXES), c, &b);
    sp_attr *v = st == CM_OK ? string_of(m, &b) : NULL;
    cm_buf_fini(&b);
    if (st != CM_OK) {
        return st;
    }
    if (v == NULL || op_swap(m, op, SP_GSPMD_MANUAL_AXES, NULL, NULL) != CM_OK) {
        return cm_error_oom(c->err);
    }
    /* an `mhlo.*` custom call keeps its attributes in mhlo.attributes, and
     * the sharding goes there too, as XLA's export puts it */
    const sp_attr *target = m->ops[op].kind == SP_OP_CUSTOM_CALL
                                ? sp_op_attr(m, op, "call_target_name")
                                : NULL;
    const sp_attr *ma = sp_op_attr(m, op, "mhlo.attributes");
    if (target != NULL && target->kind == SP_ATTR_STRING &&
        strncmp(target->u.str.s, "mhlo.", 5) == 0 && ma != NULL && ma->kind == SP_ATTR_DICT) {
        sp_attr *d = sp_attr_new(m, SP_ATTR_DICT);
        if (d == NULL || (d->u.dict.items = attrs_swap(m, ma->u.dict.items, ma->u.dict.n,
                                                       MHLO_SHARDING, MHLO_SHARDING, v,
                                                       &d->u.dict.n)) == NULL ||
            op_swap(m, op, SDY_SHARDING, NULL, NULL) != CM_OK ||
            sp_op_set_attr(m, op, "mhlo.attributes", d) != CM_OK) {
            return cm_error_oom(c->err);
        }
        return CM_OK;
    }
    if (op_swap(m, op, SDY_SHARDING, MHLO_SHARDING, v) != CM_OK) {
        return cm_error_oom(c->err);
    }
    return CM_OK;
}

static cm_status export_list(sp_module *m, uint32_t f, const char *list, uint32_t count,
                             export_ctx *c)
{
    for (uint32_t k = 0; k < count; k++) {
        const sp_attr *d = list_item(sp_op_attr(m, f, list), k);
        const sp_attr *a = dict_get(d, SDY_SHARDING), *manual = dict_get(d, SP_GSPMD_MANUAL_AXES);
        if (a == NULL || a->kind != SP_ATTR_SHARDING) {
            continue;
        }
        cm_buf b;
        cm_buf_init(&b);
        cm_status rc = manual_text(m, a->u.sharding, manual, f, c, &b);
        sp_attr *v = rc == CM_OK ? string_of(m, &b) : NULL;
        cm_buf_fini(&b);
        if (rc != CM_OK) {
            return rc;
        }
        if (v == NULL || list_swap(m, f, list, count, k, SDY_SHARDING, MHLO_SHARDING, v) != CM_OK ||
            (manual != NULL &&
             list_swap(m, f, list, count, k, SP_GSPMD_MANUAL_AXES, NULL, NULL) != CM_OK)) {
            return cm_error_oom(c->err);
        }
    }
    return CM_OK;
}

/* The module's sdy.parameters_shardings / sdy.output_shardings (a
 * jax.export entry's shardings) become mhlo.spmd_parameters_shardings (a
 * list) and mhlo.spmd_output_sharding (one text, a tuple for several). */
static cm_status export_module_attrs(sp_module *m, export_ctx *c)
{
    static const char *const from[2] = {"sdy.output_shardings", "sdy.parameters_shardings"};
    static const char *const to[2] = {"mhlo.spmd_output_sharding",
                                      "mhlo.spmd_parameters_shardings"};
    for (int k = 0; k < 2; k++) {
        const sp_attr *a = sp_attrs_get(m->attrs, m->n_attrs, from[k]);
        if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST) {
            continue;
        }
        sp_attr *v = NULL;
        cm_status st = CM_OK;
        if (k == 0) {
            cm_buf b;
            cm_buf_init(&b);
            st = list_text(m, a->u.shardings.items, a->u.shardings.n, m->body, NULL, c, &b);
            v = st == CM_OK ? string_of(m, &b) : NULL;
            cm_buf_fini(&b);
        } else {
            v = sp_attr_new(m, SP_ATTR_ARRAY);
            sp_attr **items = cm_arena_alloc(&m->arena, sizeof *items * (a->u.shardings.n + 1u));
            if (v == NULL || items == NULL) {
                return cm_error_oom(c->err);
            }
            v->u.arr.items = items;
            for (uint32_t i = 0; i < a->u.shardings.n && st == CM_OK; i++) {
                cm_buf b;
                cm_buf_init(&b);
                st = sharding_text(m, a->u.shardings.items[i], m->body, c, &b);
                items[i] = st == CM_OK ? string_of(m, &b) : NULL;
                cm_buf_fini(&b);
                if (st == CM_OK && items[i] == NULL) {
                    return cm_error_oom(c->err);
                }
                v->u.arr.n = i + 1;
            }
        }
        if (st != CM_OK) {
            return st;
        }
        uint32_t n = 0;
        sp_named_attr *attrs =
            v != NULL ? attrs_swap(m, m->attrs, m->n_attrs, from[k], to[k], v, &n) : NULL;
        if (attrs == NULL) {
            return cm_error_oom(c->err);
        }
        m->attrs = attrs;
        m->n_attrs = n;
    }
    return CM_OK;
}

cm_status sp_gspmd_export(sp_module *m, const sp_gspmd_export_opts *o, cm_error *err)
{
    export_ctx c;
    cm_arena_init(&c.scratch, 0);
    c.o = o;
    c.err = err;
    cm_status rc = export_module_attrs(m, &c);
    sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && rc == CM_OK; i++) {
        uint32_t f = top->ops[i];
        const sp_type *ft = sp_func_type(m, f);
        if (m->ops[f].kind != SP_OP_FUNC_FUNC || ft == NULL) {
            continue;
        }
        rc = export_list(m, f, "arg_attrs", ft->n_inputs, &c);
        if (rc == CM_OK) {
            rc = export_list(m, f, "res_attrs", ft->n_results, &c);
        }
        if (rc == CM_OK && m->ops[f].n_regions > 0 && m->ops[f].regions[0].n_blocks > 0) {
            rc = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], export_op, &c);
        }
    }
    /* the meshes go: nothing refers to them any more */
    for (uint32_t i = top->n_ops; rc == CM_OK && i-- > 0;) {
        if (m->ops[top->ops[i]].kind == SP_OP_SDY_MESH) {
            sp_block_remove_op(m, m->body, i);
        }
    }
    cm_arena_fini(&c.scratch);
    return rc;
}

cm_status sp_gspmd_export_shardings(sp_module *m, cm_error *err)
{
    return sp_gspmd_export(m, NULL, err);
}
