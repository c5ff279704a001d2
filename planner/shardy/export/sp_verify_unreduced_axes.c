/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-verify-unreduced-axes (Shardy's
 * export/verify_unreduced_axes.cc; see sp_export.h). Unreduced axes hold
 * partial values: only a blessed op (sdy.reshard, sdy.sharding_constraint,
 * a collective with the matching combiner) may drop them, ops may add only
 * sum-unreduced axes, and a kept axis keeps its reduction kind. Each
 * function is checked on its own, ops after the ops of their regions; the
 * first finding of a function is reported and ends that function's walk. */
#include "sp_export.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sp_ax.h"
#include "sp_ops.h"

/* What the check looks at in a sharding: its mesh, unreduced axes and their
 * reduction kind. present is false for a value without a sharding. */
typedef struct unred {
    bool present;
    const sp_mesh *mesh; /* NULL when the mesh is unknown */
    const sp_axis_ref *axes;
    uint32_t n;
    sp_reduction_kind red;
} unred;

/* What a walk over one function shares. */
typedef struct vctx {
    sp_module *m;
    sp_diags *d;
    bool failed; /* this function reported its finding */
} vctx;

static const char *red_name(sp_reduction_kind r)
{
    return r == SP_REDUCTION_MAX ? "max" : r == SP_REDUCTION_MIN ? "min" : "sum";
}

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s->mesh != NULL) {
        return s->mesh;
    }
    return s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static unred unred_of(const sp_module *m, const sp_sharding *s)
{
    unred u = {false, NULL, NULL, 0, SP_REDUCTION_SUM};
    if (s != NULL) {
        u.present = true;
        u.mesh = mesh_of(m, s);
        u.axes = s->unreduced;
        u.n = s->n_unreduced;
        u.red = s->reduction;
    }
    return u;
}

static bool is_explicit_reshard(const sp_module *m, uint32_t op)
{
    return op != SP_NONE && (m->ops[op].kind == SP_OP_SDY_RESHARD ||
                             m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT);
}

/* v with sdy.propagation_barrier ops looked through. */
static uint32_t through_barriers(const sp_module *m, uint32_t v)
{
    for (int guard = 0; guard < 1 << 20; guard++) {
        uint32_t def = m->values[v].def;
        if (def == SP_NONE || m->ops[def].kind != SP_OP_SDY_PROPAGATION_BARRIER ||
            m->ops[def].n_operands == 0) {
            break;
        }
        v = m->ops[def].operands[0];
    }
    return v;
}

/* Does axis name appear among the manual axes of manual computation op? */
static bool is_manual(const sp_module *m, uint32_t op, const char *name)
{
    const sp_attr *a = sp_op_attr(m, op, "manual_axes");
    if (a == NULL || a->kind != SP_ATTR_AXIS_LIST) {
        return false;
    }
    for (uint32_t i = 0; i < a->u.axes.n; i++) {
        if (strcmp(a->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* u without the manual axes of manual computation op (Shardy's
 * eraseManualAxes, which is all the unreduced axes need). Errors:
 * CM_ENOMEM. */
static cm_status erase_manual(sp_module *m, uint32_t op, unred *u)
{
    if (!u->present || u->n == 0) {
        return CM_OK;
    }
    sp_axis_ref *kept = cm_arena_alloc(&m->arena, u->n * sizeof *kept);
    if (kept == NULL) {
        return CM_ENOMEM;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < u->n; i++) {
        if (!is_manual(m, op, u->axes[i].name)) {
            kept[n++] = u->axes[i];
        }
    }
    u->axes = kept;
    u->n = n;
    return CM_OK;
}

/* The sharding of value v as Shardy's getShardingBypassingBarriers reads it:
 * a manual computation's body argument takes its in sharding without the
 * manual axes. Errors: CM_ENOMEM. */
static cm_status sharding_of(sp_module *m, uint32_t v, unred *out)
{
    v = through_barriers(m, v);
    if (m->values[v].def == SP_NONE) {
        uint32_t owner = m->blocks[m->values[v].block].parent_op;
        if (owner != SP_NONE && m->ops[owner].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            const sp_attr *a = sp_op_attr(m, owner, "in_shardings");
            uint32_t i = m->values[v].index;
            *out = unred_of(m, a != NULL && a->kind == SP_ATTR_SHARDING_LIST &&
                                       i < a->u.shardings.n
                                   ? a->u.shardings.items[i]
                                   : NULL);
            return erase_manual(m, owner, out);
        }
    }
    *out = unred_of(m, sp_value_sharding_partitioned(m, v));
    return CM_OK;
}

/* An operand's sharding for the transition checks: none when an explicit
 * reshard defines it (the reshard was checked itself). */
static cm_status operand_sharding(sp_module *m, uint32_t v, unred *out)
{
    if (is_explicit_reshard(m, m->values[through_barriers(m, v)].def)) {
        *out = unred_of(m, NULL);
        return CM_OK;
    }
    return sharding_of(m, v, out);
}

/* ---- axis sets ----------------------------------------------------------------- */

/* Appends the unreduced axes of the n shardings in s, as atoms of mesh, to
 * out (cap entries); axes the mesh lacks are skipped. */
static uint32_t flat_axes(const unred *s, uint32_t n, const sp_mesh *mesh, ax *out, uint32_t cap)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; s[i].present && mesh != NULL && j < s[i].n && k < cap; j++) {
            if (ax_from_ref(mesh, &s[i].axes[j], &out[k])) {
                k++;
            }
        }
    }
    return k;
}

/* The parts of a[] no axis of b[] covers (Shardy's getAxisSetDiff): each
 * axis of a loses its overlaps with b, keeping what lies before and after
 * them. Writes at most cap atoms to out; returns their number. */
static uint32_t axis_set_diff(const ax *a, uint32_t na, const ax *b, uint32_t nb, ax *out,
                              uint32_t cap)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < na; i++) {
        ax cur = a[i];
        bool alive = true;
        while (alive && k < cap) {
            uint32_t hit = nb;
            for (uint32_t j = 0; j < nb && hit == nb; j++) {
                if (ax_overlap(cur, b[j])) {
                    hit = j;
                }
            }
            if (hit == nb) {
                out[k++] = cur;
                break;
            }
            ax o = b[hit];
            if (o.pre > cur.pre && o.pre % cur.pre == 0) {
                out[k++] = (ax){cur.axis, cur.pre, o.pre / cur.pre};
            }
            int64_t end = cur.pre * cur.size, oend = o.pre * o.size;
            if (oend < end && end % oend == 0 && k < cap) {
                cur = (ax){cur.axis, oend, end / oend};
            } else {
                alive = false;
            }
        }
    }
    return k;
}

static bool any_overlap(const sp_mesh *mesh, const unred *s, const ax *diff, uint32_t n)
{
    for (uint32_t j = 0; j < s->n; j++) {
        ax a;
        if (!ax_from_ref(mesh, &s->axes[j], &a)) {
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (ax_overlap(a, diff[i])) {
                return true;
            }
        }
    }
    return false;
}

#define MAX_AXES 256

/* Reports the first error of op and marks the function failed. */
static void report(vctx *c, uint32_t op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(vctx *c, uint32_t op, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_diags_add(c->d, c->m, op, SP_DIAG_ERROR, "'%s' op %s", c->m->ops[op].name, msg);
    c->failed = true;
}

/* Shardy's verifyUnreducedAxesTransition: the unreduced axes of the results
 * against those of the operands. introduce / remove say which reduction kind
 * new and dropped axes must have (NULL: none may be added / dropped).
 * Returns false after reporting. */
static bool check_transition(vctx *c, uint32_t op, const unred *in, uint32_t n_in,
                             const unred *out, uint32_t n_out, const sp_reduction_kind *introduce,
                             const sp_reduction_kind *remove)
{
    const sp_mesh *mesh = NULL;
    for (uint32_t i = 0; i < n_in + n_out; i++) {
        const unred *s = i < n_in ? &in[i] : &out[i - n_in];
        if (!s->present || s->mesh == NULL) {
            continue;
        }
        if (mesh == NULL) {
            mesh = s->mesh;
        } else if (mesh != s->mesh && !sp_mesh_equal(mesh, s->mesh)) {
            return true;
        }
    }
    if (mesh == NULL) {
        return true;
    }
    ax fin[MAX_AXES], fout[MAX_AXES], added[MAX_AXES], dropped[MAX_AXES];
    uint32_t nfi = flat_axes(in, n_in, mesh, fin, MAX_AXES);
    uint32_t nfo = flat_axes(out, n_out, mesh, fout, MAX_AXES);
    uint32_t na = axis_set_diff(fout, nfo, fin, nfi, added, MAX_AXES);
    uint32_t nd = axis_set_diff(fin, nfi, fout, nfo, dropped, MAX_AXES);
    if (na > 0) {
        if (introduce == NULL) {
            report(c, op, "cannot add new unreduced axis '%s'.", mesh->axes[added[0].axis].name);
            return false;
        }
        for (uint32_t i = 0; i < n_out; i++) {
            if (out[i].present && any_overlap(mesh, &out[i], added, na) &&
                out[i].red != *introduce) {
                report(c, op, "cannot introduce '%s' unreduced axes. Expected '%s'.",
                       red_name(out[i].red), red_name(*introduce));
                return false;
            }
        }
    }
    if (nd > 0) {
        if (remove == NULL) {
            report(c, op,
                   "dropped unreduced axis '%s' without a blessed operation (e.g., "
                   "sdy.reshard). This is an invalid transition from unreduced to reduced.",
                   mesh->axes[dropped[0].axis].name);
            return false;
        }
        for (uint32_t i = 0; i < n_in; i++) {
            if (in[i].present && any_overlap(mesh, &in[i], dropped, nd) &&
                in[i].red != *remove) {
                report(c, op, "cannot reduce '%s' unreduced axes. Expected '%s'.",
                       red_name(in[i].red), red_name(*remove));
                return false;
            }
        }
    }
    for (uint32_t i = 0; i < n_out; i++) {
        for (uint32_t j = 0; out[i].present && j < out[i].n; j++) {
            ax r;
            if (!ax_from_ref(mesh, &out[i].axes[j], &r)) {
                continue;
            }
            for (uint32_t k = 0; k < n_in; k++) {
                ax one[1] = {r};
                if (in[k].present && in[k].red != out[i].red &&
                    any_overlap(mesh, &in[k], one, 1)) {
                    report(c, op,
                           "cannot change the reduction operator of kept unreduced axes from "
                           "%s to %s.",
                           red_name(in[k].red), red_name(out[i].red));
                    return false;
                }
            }
        }
    }
    return true;
}

/* ---- the op kinds ------------------------------------------------------------- */

/* The reduction a region computes: every value its stablehlo.return returns
 * is made by one add (sum), maximum (max) or minimum (min), the same for
 * all; false otherwise. */
static bool region_reduction(const sp_module *m, uint32_t op, sp_reduction_kind *out)
{
    if (m->ops[op].n_regions == 0 || m->ops[op].regions[0].n_blocks == 0) {
        return false;
    }
    const sp_block *b = &m->blocks[m->ops[op].regions[0].blocks[0]];
    if (b->n_ops == 0) {
        return false;
    }
    const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
    if (ret->kind != SP_OP_RETURN || ret->n_operands == 0) {
        return false;
    }
    for (uint32_t i = 0; i < ret->n_operands; i++) {
        uint32_t def = m->values[ret->operands[i]].def;
        if (def == SP_NONE) {
            return false;
        }
        sp_reduction_kind k;
        switch ((sp_op_kind)m->ops[def].kind) {
        case SP_OP_ADD:
            k = SP_REDUCTION_SUM;
            break;
        case SP_OP_MAXIMUM:
            k = SP_REDUCTION_MAX;
            break;
        case SP_OP_MINIMUM:
            k = SP_REDUCTION_MIN;
            break;
        default:
            return false;
        }
        if (i > 0 && k != *out) {
            return false;
        }
        *out = k;
    }
    return true;
}

/* Operand shardings (n_in of them, from operand first_in) and result
 * shardings of op, into arena arrays. Errors: CM_ENOMEM. */
static cm_status gather(sp_module *m, uint32_t op, uint32_t first_in, uint32_t n_in, unred **in,
                        unred **out)
{
    const sp_op *o = &m->ops[op];
    *in = cm_arena_alloc(&m->arena, (n_in + 1) * sizeof **in);
    *out = cm_arena_alloc(&m->arena, (o->n_results + 1) * sizeof **out);
    if (*in == NULL || *out == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n_in; i++) {
        cm_status st = operand_sharding(m, o->operands[first_in + i], &(*in)[i]);
        if (st != CM_OK) {
            return st;
        }
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        cm_status st = sharding_of(m, o->first_result + i, &(*out)[i]);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static const sp_reduction_kind k_sum = SP_REDUCTION_SUM;

/* sdy.reshard and sdy.sharding_constraint: their own verifier's check (new
 * axes sum, dropped ones any kind the source has). */
static cm_status check_reshard(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    if (m->ops[op].n_operands == 0 || m->ops[op].n_results == 0) {
        return CM_OK;
    }
    unred src, dst;
    cm_status st = sharding_of(m, m->ops[op].operands[0], &src);
    if (st != CM_OK || !src.present) {
        return st;
    }
    dst = unred_of(m, sp_value_sharding_partitioned(m, m->ops[op].first_result));
    sp_reduction_kind rm = src.red;
    check_transition(c, op, &src, 1, &dst, 1, &k_sum, &rm);
    return CM_OK;
}

/* sdy.all_reduce and sdy.reduce_scatter: a sharded operand, and only axes of
 * the collective's own reduction kind dropped. */
static cm_status check_sdy_collective(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    if (m->ops[op].n_operands == 0 || m->ops[op].n_results == 0) {
        return CM_OK;
    }
    unred src, dst;
    cm_status st = sharding_of(m, m->ops[op].operands[0], &src);
    if (st != CM_OK) {
        return st;
    }
    if (!src.present) {
        report(c, op, "operand must be sharded.");
        return CM_OK;
    }
    dst = unred_of(m, sp_value_sharding_partitioned(m, m->ops[op].first_result));
    sp_reduction_kind rm = SP_REDUCTION_SUM;
    const sp_attr *r = sp_op_attr(m, op, "reduction_op");
    if (r != NULL && r->kind == SP_ATTR_ENUM) {
        rm = strcmp(r->u.enm.value, "max") == 0   ? SP_REDUCTION_MAX
             : strcmp(r->u.enm.value, "min") == 0 ? SP_REDUCTION_MIN
                                                  : SP_REDUCTION_SUM;
    }
    check_transition(c, op, &src, 1, &dst, 1, NULL, &rm);
    return CM_OK;
}

/* stablehlo.all_reduce and reduce_scatter: may drop the axes their body's
 * reduction combines. */
static cm_status check_stablehlo_collective(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    if (m->ops[op].n_operands == 0 || m->ops[op].n_results == 0) {
        return CM_OK;
    }
    unred src, dst;
    cm_status st = sharding_of(m, m->ops[op].operands[0], &src);
    if (st == CM_OK) {
        st = sharding_of(m, m->ops[op].first_result, &dst);
    }
    if (st != CM_OK || (!src.present && !dst.present)) {
        return st;
    }
    sp_reduction_kind rk;
    bool has = region_reduction(m, op, &rk);
    check_transition(c, op, &src, 1, &dst, 1, NULL, has ? &rk : NULL);
    return CM_OK;
}

static bool ref_eq(const sp_axis_ref *a, const sp_axis_ref *b)
{
    return strcmp(a->name, b->name) == 0 && a->pre_size == b->pre_size &&
           (a->pre_size == 0 || a->size == b->size);
}

static bool ref_in(const sp_axis_ref *r, const unred *u)
{
    for (uint32_t i = 0; u->present && i < u->n; i++) {
        if (ref_eq(r, &u->axes[i])) {
            return true;
        }
    }
    return false;
}

/* Shardy's verifyEqual: x and y hold the same set of unreduced axes, else
 * the error names the axes only one of them has (sorted, without repeats)
 * and ends with what (index i, then tail). Returns false after reporting. */
static bool check_equal(vctx *c, uint32_t op, const unred *x, const unred *y, const char *what,
                        uint32_t i, const char *tail)
{
    const char *names[MAX_AXES];
    uint32_t n = 0;
    for (int side = 0; side < 2; side++) {
        const unred *a = side == 0 ? x : y, *b = side == 0 ? y : x;
        for (uint32_t k = 0; a->present && k < a->n; k++) {
            if (ref_in(&a->axes[k], b)) {
                continue;
            }
            bool seen = false;
            for (uint32_t j = 0; j < n && !seen; j++) {
                seen = strcmp(names[j], a->axes[k].name) == 0;
            }
            if (!seen && n < MAX_AXES) {
                names[n++] = a->axes[k].name;
            }
        }
    }
    if (n == 0) {
        return true;
    }
    for (uint32_t k = 1; k < n; k++) {
        for (uint32_t j = k; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    }
    char list[256] = "";
    size_t len = 0;
    for (uint32_t k = 0; k < n && len < sizeof list; k++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s", k > 0 ? ", " : "", names[k]);
        len += w > 0 ? (size_t)w : 0;
    }
    sp_diags_add(c->d, c->m, op, SP_DIAG_ERROR, "'%s' op has unreduced axes mismatch for '%s%s %u%s",
                 c->m->ops[op].name, list, what, i, tail);
    c->failed = true;
    return false;
}

/* func.call: the unreduced axes of each operand (unless an explicit reshard
 * made it) equal those of the callee's argument, and the callee's result
 * ones those of the call's result. */
static cm_status check_call(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    const sp_attr *a = sp_op_attr(m, op, "callee");
    if (a == NULL || a->kind != SP_ATTR_SYMBOL) {
        return CM_OK;
    }
    uint32_t f = sp_module_func(m, a->u.sym);
    if (f == SP_NONE || m->ops[f].n_regions == 0 || m->ops[f].regions[0].n_blocks == 0) {
        return CM_OK;
    }
    const sp_block *body = &m->blocks[m->ops[f].regions[0].blocks[0]];
    const sp_op *o = &m->ops[op];
    for (uint32_t i = 0; i < o->n_operands && i < body->n_args; i++) {
        uint32_t v = o->operands[i];
        if (is_explicit_reshard(m, m->values[through_barriers(m, v)].def)) {
            continue;
        }
        unred x, y;
        cm_status st = sharding_of(m, v, &x);
        if (st == CM_OK) {
            st = sharding_of(m, body->first_arg + i, &y);
        }
        if (st != CM_OK) {
            return st;
        }
        if (!check_equal(c, op, &x, &y, "' at call argument", i, ".")) {
            return CM_OK;
        }
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        unred x = unred_of(m, sp_func_result_sharding(m, f, i)), y;
        cm_status st = sharding_of(m, o->first_result + i, &y);
        if (st != CM_OK) {
            return st;
        }
        if (!check_equal(c, op, &x, &y, "' at call result", i, ".")) {
            return CM_OK;
        }
    }
    return CM_OK;
}

static const char return_tail[] =
    " without a blessed operation (e.g., sdy.reshard). This is an invalid transition from "
    "unreduced to reduced.";

/* One returned value against the sharding r of what it becomes; nothing to
 * check when an explicit reshard made it or r is absent. */
static cm_status check_return_pair(vctx *c, uint32_t op, uint32_t v, const unred *r, uint32_t i)
{
    sp_module *m = c->m;
    if (!r->present || is_explicit_reshard(m, m->values[through_barriers(m, v)].def)) {
        return CM_OK;
    }
    unred x;
    cm_status st = sharding_of(m, v, &x);
    if (st == CM_OK) {
        check_equal(c, op, &x, r, "' at return value", i, return_tail);
    }
    return st;
}

/* func.return against the function's result shardings; sdy.return against
 * the results of its parent op (a manual computation's without its manual
 * axes). */
static cm_status check_terminator(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    const sp_op *o = &m->ops[op];
    uint32_t parent = m->blocks[o->parent_block].parent_op;
    if (parent == SP_NONE) {
        return CM_OK;
    }
    const sp_op *p = &m->ops[parent];
    for (uint32_t i = 0; i < o->n_operands && !c->failed; i++) {
        unred r;
        cm_status st = CM_OK;
        if (p->kind == SP_OP_FUNC_FUNC) {
            r = unred_of(m, sp_func_result_sharding(m, parent, i));
        } else if (i < p->n_results) {
            st = sharding_of(m, p->first_result + i, &r);
            if (st == CM_OK && p->kind == SP_OP_SDY_MANUAL_COMPUTATION) {
                st = erase_manual(m, parent, &r);
            }
        } else {
            break;
        }
        if (st == CM_OK) {
            st = check_return_pair(c, op, o->operands[i], &r, i);
        }
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

/* Any other op, and dot, dot_general and reduce: results may add axes of
 * kind introduce (none when NULL) and drop none; reduce looks at its inputs
 * only, not its init values. */
static cm_status check_default(vctx *c, uint32_t op, uint32_t n_in, const sp_reduction_kind *introduce)
{
    unred *in, *out;
    cm_status st = gather(c->m, op, 0, n_in, &in, &out);
    if (st == CM_OK) {
        check_transition(c, op, in, n_in, out, c->m->ops[op].n_results, introduce, NULL);
    }
    return st;
}

static cm_status check_op(vctx *c, uint32_t op)
{
    sp_module *m = c->m;
    const sp_op *o = &m->ops[op];
    switch ((sp_op_kind)o->kind) {
    case SP_OP_SDY_RESHARD:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
        return check_reshard(c, op);
    case SP_OP_REDUCE: {
        sp_reduction_kind rk;
        bool has = region_reduction(m, op, &rk);
        return check_default(c, op, o->n_operands / 2, has ? &rk : NULL);
    }
    case SP_OP_DOT:
    case SP_OP_DOT_GENERAL:
        return check_default(c, op, o->n_operands, &k_sum);
    case SP_OP_SDY_ALL_REDUCE:
    case SP_OP_SDY_REDUCE_SCATTER:
        return check_sdy_collective(c, op);
    case SP_OP_ALL_REDUCE:
    case SP_OP_REDUCE_SCATTER:
        return check_stablehlo_collective(c, op);
    case SP_OP_FUNC_CALL:
        return check_call(c, op);
    case SP_OP_FUNC_RETURN:
    case SP_OP_SDY_RETURN:
        return check_terminator(c, op);
    case SP_OP_RETURN:
    case SP_OP_FUNC_FUNC:
        /* stablehlo.return is a terminator that is not return-like */
        return CM_OK;
    default:
        return check_default(c, op, o->n_operands, &k_sum);
    }
}

/* Checks the ops of block, each after the ops of its regions, until the
 * function has a finding. */
static cm_status check_block(vctx *c, uint32_t block, int depth)
{
    if (depth > 256) {
        return CM_OK;
    }
    for (uint32_t i = 0; i < c->m->blocks[block].n_ops && !c->failed; i++) {
        uint32_t op = c->m->blocks[block].ops[i];
        const sp_op *o = &c->m->ops[op];
        for (uint32_t r = 0; r < o->n_regions && !c->failed; r++) {
            for (uint32_t k = 0; k < o->regions[r].n_blocks && !c->failed; k++) {
                cm_status st = check_block(c, o->regions[r].blocks[k], depth + 1);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        if (!c->failed) {
            cm_status st = check_op(c, op);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

cm_status sp_pass_verify_unreduced_axes(sp_module *m, sp_diags *d, cm_error *err)
{
    bool any = false;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t f = body->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        vctx c = {m, d, false};
        for (uint32_t r = 0; r < m->ops[f].n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[f].regions[r].n_blocks && !c.failed; k++) {
                cm_status st = check_block(&c, m->ops[f].regions[r].blocks[k], 0);
                if (st != CM_OK) {
                    return cm_error_oom(err);
                }
            }
        }
        any = any || c.failed;
    }
    if (any) {
        return cm_error_set(err, CM_EINVAL, "", "unreduced axes verification failed");
    }
    return CM_OK;
}
