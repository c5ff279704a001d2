/* SPDX-License-Identifier: Apache-2.0
 * planner: sdy.manual_computation as Shardy's verifier checks it
 * (verifiers.cc, ManualComputationOp): in and out shardings are valid for
 * the global types, one per value; the region takes and returns as many
 * values as the op; manual axes come first in every dimension and divide
 * its size; the region's types are the global types divided by the manual
 * axes; the shardings share one mesh, which has the manual axes; and no
 * manual axis is already manual in an enclosing manual computation. */
#include "sp_verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_ops.h"

static void mc_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void mc_err(sp_module *m, uint32_t op, sp_diags *d, bool *bad, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_diags_add(d, m, op, SP_DIAG_ERROR, "'sdy.manual_computation' op %s", msg);
    *bad = true;
}

static bool is_manual(const sp_axis_list *manual, const char *name)
{
    for (uint32_t k = 0; manual != NULL && k < manual->n; k++) {
        if (strcmp(manual->axes[k].name, name) == 0) {
            return true;
        }
    }
    return false;
}

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s->mesh != NULL) {
        return s->mesh;
    }
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

/* The element part of tensor type t's text ("f32"), its length in *n. */
static const char *elem_text(const sp_type *t, size_t *n)
{
    const char *p = t->text + 7;
    for (uint32_t i = 0; i < t->rank; i++) {
        p = strchr(p, 'x') + 1;
    }
    const char *e = p;
    int depth = 0;
    while (*e != '\0' && !(depth == 0 && (*e == ',' || *e == '>'))) {
        depth += *e == '<' ? 1 : *e == '>' ? -1 : 0;
        e++;
    }
    *n = (size_t)(e - p);
    return p;
}

/* One side ("operand" or "result") of the op: global value types gtypes[],
 * local types ltypes[], the shardings attribute. False when reported. */
static bool side_ok(sp_module *m, uint32_t op, const char *kind, const uint32_t *gtypes,
                    uint32_t ng, const uint32_t *ltypes, uint32_t nl, const sp_attr *sh,
                    const sp_axis_list *manual, sp_diags *d, bool *bad)
{
    uint32_t ns = sh != NULL && sh->kind == SP_ATTR_SHARDING_LIST ? sh->u.shardings.n : 0;
    if (ng == 0 && nl == 0 && ns == 0) {
        return true;
    }
    if (ns != ng) {
        mc_err(m, op, d, bad, "%s shardings don't match number of values: %u shardings vs %u "
               "values", kind, ns, ng);
        return false;
    }
    for (uint32_t i = 0; i < ns; i++) {
        const sp_sharding *s = sh->u.shardings.items[i];
        char msg[512], who[32];
        if (ns == 1) {
            snprintf(who, sizeof who, "-");
        } else {
            snprintf(who, sizeof who, "%u -", i);
        }
        if (!sp_verify_sharding(s, mesh_of(m, s), &m->types[gtypes[i]], msg, sizeof msg)) {
            mc_err(m, op, d, bad, "%s %s %s", kind, who, msg);
            return false;
        }
    }
    if (ng != nl) {
        mc_err(m, op, d, bad, "number of op %ss and region %ss must match. Op has %u op %ss and "
               "%u region %ss", kind, kind, ng, kind, nl, kind);
        return false;
    }
    for (uint32_t i = 0; i < ns; i++) {
        const sp_sharding *s = sh->u.shardings.items[i];
        const sp_mesh *mesh = mesh_of(m, s);
        char b1[160], b2[160];
        for (uint32_t dim = 0; dim < s->rank; dim++) {
            const sp_dim_sharding *ds = &s->dims[dim];
            bool free_seen = false;
            for (uint32_t k = 0; k < ds->n_axes; k++) {
                bool man = is_manual(manual, ds->axes[k].name);
                if (man && free_seen) {
                    sp_verify_ref_str(&ds->axes[k], b1, sizeof b1);
                    sp_verify_ref_str(&ds->axes[k - 1], b2, sizeof b2);
                    mc_err(m, op, d, bad, "%s sharding at index %u must have all manual axes "
                           "come before free axes in its dimension sharding at index %u. Saw "
                           "manual axis %s after free axis %s", kind, i, dim, b1, b2);
                    return false;
                }
                free_seen = free_seen || !man;
            }
        }
        const sp_type *g = &m->types[gtypes[i]], *l = &m->types[ltypes[i]];
        if (g->kind != SP_TYPE_TENSOR || mesh == NULL) {
            continue;
        }
        int64_t dims[SP_MAX_RANK];
        char want[512];
        size_t k = (size_t)snprintf(want, sizeof want, "tensor<");
        for (uint32_t dim = 0; dim < g->rank; dim++) {
            int64_t f = 1;
            const sp_dim_sharding *ds = dim < s->rank ? &s->dims[dim] : NULL;
            for (uint32_t a = 0; ds != NULL && a < ds->n_axes; a++) {
                int32_t ax = sp_mesh_axis_index(mesh, ds->axes[a].name);
                if (ax >= 0 && is_manual(manual, ds->axes[a].name)) {
                    int64_t sz = ds->axes[a].pre_size == 0 ? mesh->axes[ax].size : ds->axes[a].size;
                    if (!cm_mul_i64(f, sz, &f)) {
                        f = 0;
                    }
                }
            }
            if (g->dims[dim] == SP_DIM_DYNAMIC) {
                dims[dim] = SP_DIM_DYNAMIC;
            } else if (f <= 0 || g->dims[dim] % f != 0) {
                mc_err(m, op, d, bad, "%s dimension size %lld is not divisible by the manual "
                       "axes size %lld", kind, (long long)g->dims[dim], (long long)f);
                return false;
            } else {
                dims[dim] = g->dims[dim] / f;
            }
            int w = dims[dim] == SP_DIM_DYNAMIC
                        ? snprintf(want + k, sizeof want - k, "?x")
                        : snprintf(want + k, sizeof want - k, "%lldx", (long long)dims[dim]);
            k += w > 0 && (size_t)w < sizeof want - k ? (size_t)w : 0;
        }
        size_t en;
        const char *et = elem_text(g, &en);
        snprintf(want + k, sizeof want - k, "%.*s>", (int)en, et);
        bool same = l->kind == SP_TYPE_TENSOR && l->rank == g->rank;
        for (uint32_t dim = 0; same && dim < g->rank; dim++) {
            same = l->dims[dim] == dims[dim];
        }
        if (same) {
            size_t ln;
            const char *lt = elem_text(l, &ln);
            same = ln == en && memcmp(lt, et, en) == 0;
        }
        if (!same) {
            mc_err(m, op, d, bad, "%s shape, corresponding sharding, and region %s shape at "
                   "index %u must match. Expected local shape '%s', actual local shape '%s'",
                   kind, kind, i, want, l->text);
            return false;
        }
    }
    return true;
}

void sp_verify_manual_computation(sp_module *m, uint32_t op, sp_diags *d, bool *bad)
{
    const sp_op *o = &m->ops[op];
    if (o->kind != SP_OP_SDY_MANUAL_COMPUTATION || o->n_regions != 1 ||
        o->regions[0].n_blocks != 1) {
        return;
    }
    const sp_attr *ma = sp_op_attr(m, op, "manual_axes");
    const sp_axis_list *manual = ma != NULL && ma->kind == SP_ATTR_AXIS_LIST ? &ma->u.axes : NULL;
    /* an axis already manual around this one */
    for (uint32_t b = o->parent_block, depth = 0; b != SP_NONE && depth < 64; depth++) {
        uint32_t p = m->blocks[b].parent_op;
        if (p == SP_NONE) {
            break;
        }
        const sp_attr *pa = m->ops[p].kind == SP_OP_SDY_MANUAL_COMPUTATION
                                ? sp_op_attr(m, p, "manual_axes")
                                : NULL;
        for (uint32_t k = 0; pa != NULL && pa->kind == SP_ATTR_AXIS_LIST && k < pa->u.axes.n;
             k++) {
            if (is_manual(manual, pa->u.axes.axes[k].name)) {
                mc_err(m, op, d, bad, "operates on axis \"%s\" which is already bound by a "
                       "parent sdy.manual_computation op", pa->u.axes.axes[k].name);
                sp_diags_add(d, m, p, SP_DIAG_NOTE, "parent bounding this axis as manual");
                return;
            }
        }
        b = m->ops[p].parent_block;
    }
    const sp_block *body = &m->blocks[o->regions[0].blocks[0]];
    enum { MAXV = 1024 };
    uint32_t gt[MAXV], lt[MAXV];
    uint32_t ng = o->n_operands < MAXV ? o->n_operands : MAXV;
    uint32_t nl = body->n_args < MAXV ? body->n_args : MAXV;
    for (uint32_t i = 0; i < ng; i++) {
        gt[i] = m->values[o->operands[i]].type;
    }
    for (uint32_t i = 0; i < nl; i++) {
        lt[i] = m->values[body->first_arg + i].type;
    }
    const sp_attr *ins = sp_op_attr(m, op, "in_shardings");
    const sp_attr *outs = sp_op_attr(m, op, "out_shardings");
    if (!side_ok(m, op, "operand", gt, ng, lt, nl, ins, manual, d, bad)) {
        return;
    }
    ng = o->n_results < MAXV ? o->n_results : MAXV;
    nl = 0;
    if (body->n_ops > 0) {
        const sp_op *ret = &m->ops[body->ops[body->n_ops - 1]];
        nl = ret->n_operands < MAXV ? ret->n_operands : MAXV;
        for (uint32_t i = 0; i < nl; i++) {
            lt[i] = m->values[ret->operands[i]].type;
        }
    }
    for (uint32_t i = 0; i < ng; i++) {
        gt[i] = m->values[o->first_result + i].type;
    }
    if (!side_ok(m, op, "result", gt, ng, lt, nl, outs, manual, d, bad)) {
        return;
    }
    /* one mesh for all shardings on a mesh with axes */
    const sp_mesh *common = NULL;
    const char *common_name = NULL;
    bool mixed = false;
    for (int side = 0; side < 2; side++) {
        const sp_attr *sh = side == 0 ? ins : outs;
        for (uint32_t i = 0; sh != NULL && sh->kind == SP_ATTR_SHARDING_LIST &&
                             i < sh->u.shardings.n;
             i++) {
            const sp_sharding *s = sh->u.shardings.items[i];
            const sp_mesh *mm = mesh_of(m, s);
            if (mm == NULL || mm->n_axes == 0) {
                continue;
            }
            if (common == NULL) {
                common = mm;
                common_name = s->mesh_name;
            } else if (!(common_name != NULL && s->mesh_name != NULL
                             ? strcmp(common_name, s->mesh_name) == 0
                             : sp_mesh_equal(common, mm))) {
                mixed = true;
            }
        }
    }
    if (mixed) {
        common = NULL;
    }
    /* as Shardy: no in and out shardings at all need no mesh (propagation's
     * import, -sdy-manual-axes-cleanup, checks the body then) */
    bool none = (ins == NULL || ins->kind != SP_ATTR_SHARDING_LIST || ins->u.shardings.n == 0) &&
                (outs == NULL || outs->kind != SP_ATTR_SHARDING_LIST || outs->u.shardings.n == 0);
    if (common == NULL && !none && manual != NULL && manual->n > 0) {
        mc_err(m, op, d, bad, "all in and out shardings must be bound to the same mesh or an "
               "empty mesh.");
        return;
    }
    for (uint32_t k = 0; common != NULL && manual != NULL && k < manual->n; k++) {
        if (sp_mesh_axis_index(common, manual->axes[k].name) < 0) {
            mc_err(m, op, d, bad, "unknown manual axis: \"%s\"", manual->axes[k].name);
            return;
        }
    }
}
