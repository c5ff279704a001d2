/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-manual-axes-cleanup (Shardy's
 * import/manual_axes_cleanup.cc; see sp_import.h). For each
 * sdy.manual_computation: the manual axes are put in mesh order, and each in
 * or out sharding of a shaped type that does not use every manual axis (or
 * every part of one, when it uses sub-axes of it) gets the unused parts in
 * its replicated list, sorted and merged, and then names the common mesh of
 * the op's shardings (the first one that has axes). A manual computation
 * without in/out shardings may only have manual axes when its body is a bare
 * sdy.return. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

/* A piece of mesh axis `axis`: the sub-axis (pre, size), full when pre is 1
 * and size the axis size. */
typedef struct piece {
    uint32_t axis;
    int64_t pre, size;
} piece;

#define MAX_PIECES 256

static uint32_t axis_index(const sp_mesh *mesh, const char *name)
{
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        if (strcmp(mesh->axes[i].name, name) == 0) {
            return i;
        }
    }
    return SP_NONE;
}

static bool to_piece(const sp_mesh *mesh, const sp_axis_ref *r, piece *out)
{
    uint32_t i = axis_index(mesh, r->name);
    if (i == SP_NONE) {
        return false;
    }
    *out = (piece){i, r->pre_size == 0 ? 1 : r->pre_size,
                   r->pre_size == 0 ? mesh->axes[i].size : r->size};
    return true;
}

/* Appends the axes of list (n of them) to ps as pieces. */
static void add_pieces(const sp_mesh *mesh, const sp_axis_ref *list, uint32_t n, piece *ps,
                       uint32_t *np)
{
    for (uint32_t i = 0; i < n && *np < MAX_PIECES; i++) {
        if (to_piece(mesh, &list[i], &ps[*np])) {
            (*np)++;
        }
    }
}

static int piece_cmp(const piece *a, const piece *b)
{
    if (a->axis != b->axis) {
        return a->axis < b->axis ? -1 : 1;
    }
    return a->pre < b->pre ? -1 : a->pre > b->pre;
}

static void pieces_sort(piece *ps, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        piece x = ps[i];
        uint32_t j = i;
        while (j > 0 && piece_cmp(&ps[j - 1], &x) > 0) {
            ps[j] = ps[j - 1];
            j--;
        }
        ps[j] = x;
    }
}

/* The parts of manual axis `axis` (of size full) that the used pieces
 * (sorted) do not cover, appended to out. */
static void unused_parts(uint32_t axis, int64_t full, const piece *used, uint32_t n_used, piece *out,
                         uint32_t *n_out)
{
    int64_t cur = 1;
    for (uint32_t i = 0; i < n_used; i++) {
        if (used[i].axis != axis || used[i].pre < cur) {
            continue;
        }
        if (used[i].pre > cur && *n_out < MAX_PIECES) {
            out[(*n_out)++] = (piece){axis, cur, used[i].pre / cur};
        }
        cur = used[i].pre * used[i].size;
    }
    if (cur < full && *n_out < MAX_PIECES) {
        out[(*n_out)++] = (piece){axis, cur, full / cur};
    }
}

/* The cleaned-up copy of s for manual axes manual (mesh indices, n_manual
 * of them), or s itself when it uses every manual axis; NULL when out of
 * memory. mesh_name/mesh: the op's common mesh. */
static sp_sharding *cleanup_one(sp_module *m, sp_sharding *s, const sp_mesh *mesh,
                                const uint32_t *manual, uint32_t n_manual, const char *mesh_name,
                                sp_mesh *inlined, bool *changed)
{
    piece used[MAX_PIECES], add[MAX_PIECES];
    uint32_t n_used = 0, n_add = 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        add_pieces(mesh, s->dims[d].axes, s->dims[d].n_axes, used, &n_used);
    }
    add_pieces(mesh, s->replicated, s->n_replicated, used, &n_used);
    add_pieces(mesh, s->unreduced, s->n_unreduced, used, &n_used);
    pieces_sort(used, n_used);
    for (uint32_t i = 0; i < n_manual; i++) {
        unused_parts(manual[i], mesh->axes[manual[i]].size, used, n_used, add, &n_add);
    }
    if (n_add == 0) {
        return s;
    }
    /* the replicated list: its own axes and the unused parts, sorted and
     * merged */
    add_pieces(mesh, s->replicated, s->n_replicated, add, &n_add);
    pieces_sort(add, n_add);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_add; i++) {
        if (k > 0 && add[k - 1].axis == add[i].axis &&
            add[k - 1].pre * add[k - 1].size == add[i].pre) {
            add[k - 1].size *= add[i].size;
        } else {
            add[k++] = add[i];
        }
    }
    sp_sharding *r = sp_sharding_clone(&m->arena, s);
    sp_axis_ref *rep = cm_arena_alloc(&m->arena, sizeof *rep * (k + 1u));
    if (r == NULL || rep == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < k; i++) {
        const sp_mesh_axis *ma = &mesh->axes[add[i].axis];
        bool whole = add[i].pre == 1 && add[i].size == ma->size;
        rep[i] = (sp_axis_ref){ma->name, whole ? 0 : add[i].pre, whole ? ma->size : add[i].size};
    }
    r->replicated = rep;
    r->n_replicated = k;
    r->mesh_name = mesh_name;
    r->mesh = inlined;
    *changed = true;
    return r;
}

/* The mesh of s: its inlined mesh or the named sdy.mesh; NULL if unknown. */
static const sp_mesh *sharding_mesh(const sp_module *m, const sp_sharding *s)
{
    return s->mesh != NULL ? s->mesh : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name) : NULL;
}

static cm_status cleanup_op(sp_module *m, uint32_t opid, sp_diags *diags, cm_error *err)
{
    const sp_op *op = &m->ops[opid];
    sp_attr *ins = (sp_attr *)(uintptr_t)sp_op_attr(m, opid, "in_shardings");
    sp_attr *outs = (sp_attr *)(uintptr_t)sp_op_attr(m, opid, "out_shardings");
    sp_attr *man = (sp_attr *)(uintptr_t)sp_op_attr(m, opid, "manual_axes");
    if (ins == NULL || outs == NULL || ins->kind != SP_ATTR_SHARDING_LIST ||
        outs->kind != SP_ATTR_SHARDING_LIST || man == NULL || man->kind != SP_ATTR_AXIS_LIST) {
        return CM_OK;
    }
    if (ins->u.shardings.n == 0 && outs->u.shardings.n == 0) {
        const sp_block *b = op->n_regions == 1 && op->regions[0].n_blocks == 1
                                ? &m->blocks[op->regions[0].blocks[0]]
                                : NULL;
        bool bare = b == NULL || b->n_ops == 0 || m->ops[b->ops[0]].kind == SP_OP_SDY_RETURN;
        if (man->u.axes.n > 0 && !bare) {
            sp_diags_add(diags, m, opid, SP_DIAG_ERROR,
                         "op has manual_axes when there are no in/out shardings and the body is "
                         "not empty. This isn't allowed at this stage, please contact the Shardy "
                         "team or file a bug.");
            return cm_error_set(err, CM_EINVAL, NULL,
                                "a manual computation without in/out shardings has manual axes");
        }
        return CM_OK;
    }
    /* the common mesh: the first in/out sharding whose mesh has axes */
    const sp_sharding *common = NULL;
    const sp_mesh *mesh = NULL;
    for (uint32_t w = 0; w < 2 && common == NULL; w++) {
        const sp_attr *l = w == 0 ? ins : outs;
        for (uint32_t i = 0; i < l->u.shardings.n && common == NULL; i++) {
            const sp_mesh *ms = sharding_mesh(m, l->u.shardings.items[i]);
            if (ms != NULL && ms->n_axes > 0) {
                common = l->u.shardings.items[i];
                mesh = ms;
            }
        }
    }
    if (mesh == NULL) {
        return CM_OK;
    }
    /* manual axes in mesh order */
    uint32_t n_manual = man->u.axes.n;
    uint32_t *manual = cm_alloc(sizeof(uint32_t) * (n_manual + 1u));
    if (manual == NULL) {
        return cm_error_oom(err);
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_manual; i++) {
        uint32_t a = axis_index(mesh, man->u.axes.axes[i].name);
        if (a != SP_NONE) {
            manual[k++] = a;
        }
    }
    n_manual = k;
    for (uint32_t i = 1; i < n_manual; i++) {
        uint32_t x = manual[i], j = i;
        while (j > 0 && manual[j - 1] > x) {
            manual[j] = manual[j - 1];
            j--;
        }
        manual[j] = x;
    }
    bool sorted = n_manual == man->u.axes.n;
    for (uint32_t i = 0; sorted && i < n_manual; i++) {
        sorted = strcmp(man->u.axes.axes[i].name, mesh->axes[manual[i]].name) == 0;
    }
    cm_status st = CM_OK;
    if (!sorted) {
        sp_attr *na = sp_attr_new(m, SP_ATTR_AXIS_LIST);
        sp_axis_ref *axes = cm_arena_alloc(&m->arena, sizeof *axes * (n_manual + 1u));
        if (na == NULL || axes == NULL) {
            st = CM_ENOMEM;
        } else {
            for (uint32_t i = 0; i < n_manual; i++) {
                axes[i] = (sp_axis_ref){mesh->axes[manual[i]].name, 0, mesh->axes[manual[i]].size};
            }
            na->u.axes.axes = axes;
            na->u.axes.n = n_manual;
            st = sp_op_set_attr(m, opid, "manual_axes", na);
        }
    }
    /* unused manual axes into each shaped in/out sharding's replicated list */
    for (uint32_t w = 0; w < 2 && st == CM_OK; w++) {
        const sp_attr *l = w == 0 ? ins : outs;
        op = &m->ops[opid];
        uint32_t n = l->u.shardings.n;
        sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
        if (items == NULL) {
            st = CM_ENOMEM;
            break;
        }
        bool changed = false;
        for (uint32_t i = 0; i < n && st == CM_OK; i++) {
            uint32_t v = w == 0 ? (i < op->n_operands ? op->operands[i] : SP_NONE)
                                : (i < op->n_results ? op->first_result + i : SP_NONE);
            const sp_type *t = v != SP_NONE ? sp_value_type(m, v) : NULL;
            items[i] = l->u.shardings.items[i];
            if (t == NULL || t->kind != SP_TYPE_TENSOR) {
                continue;
            }
            items[i] = cleanup_one(m, items[i], mesh, manual, n_manual, common->mesh_name,
                                   common->mesh, &changed);
            if (items[i] == NULL) {
                st = CM_ENOMEM;
            }
        }
        if (st == CM_OK && changed) {
            sp_attr *na = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
            if (na == NULL) {
                st = CM_ENOMEM;
                break;
            }
            na->u.shardings.items = items;
            na->u.shardings.n = n;
            st = sp_op_set_attr(m, opid, w == 0 ? "in_shardings" : "out_shardings", na);
        }
    }
    cm_free(manual);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

cm_status sp_pass_manual_axes_cleanup(sp_module *m, sp_diags *diags, cm_error *err)
{
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->n_ops && st == CM_OK; i++) {
        if (m->ops[i].kind == SP_OP_SDY_MANUAL_COMPUTATION && m->ops[i].parent_block != SP_NONE) {
            st = cleanup_op(m, i, diags, err);
        }
    }
    return st;
}
