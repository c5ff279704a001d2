/* SPDX-License-Identifier: Apache-2.0
 * planner: the building blocks of the migration report (sp_gspmd.h, issue
 * 20): a GSPMD-propagated module reduced to the annotations a user wrote
 * (function arguments, results, @Sharding constraints), so Shardy can
 * propagate from the same starting point GSPMD had, and the value-by-value
 * comparison of GSPMD's shardings with Shardy's. Both sides are read from
 * the same text, so their op ids match; both are imported with every
 * mhlo.sharding of the module, so they share one mesh. */
#include <string.h>

#include "sp_gspmd.h"
#include "sp_ops.h"
#include "sp_pass.h"

static bool is_sharding_call(const sp_module *m, uint32_t op)
{
    if (m->ops[op].kind != SP_OP_CUSTOM_CALL) {
        return false;
    }
    const sp_attr *t = sp_op_attr(m, op, "call_target_name");
    const char *name = t == NULL                   ? NULL
                       : t->kind == SP_ATTR_SYMBOL ? t->u.sym
                       : t->kind == SP_ATTR_STRING ? t->u.str.s
                                                   : NULL;
    return name != NULL && strcmp(name, "Sharding") == 0;
}

static cm_status drop_op_sharding(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    if (is_sharding_call(m, op) || m->ops[op].kind == SP_OP_FUNC_FUNC) {
        return CM_OK;
    }
    (void)sp_op_remove_attr(m, op, "sdy.sharding");
    return CM_OK;
}

cm_status sp_gspmd_import_user_annotations(sp_module *m, cm_error *err)
{
    /* the mesh from every sharding GSPMD wrote, as the GSPMD side has it */
    cm_status st = sp_gspmd_import_shardings(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_manual_import(m, err);
    }
    const sp_block *top = &m->blocks[m->body];
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (m->ops[f].kind == SP_OP_FUNC_FUNC && m->ops[f].n_regions > 0 &&
            m->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[0], drop_op_sharding, NULL);
        }
    }
    /* what is left of the ops' shardings: the @Sharding constraints */
    return st == CM_OK ? sp_gspmd_import(m, err) : st;
}

/* Same placement of axes: rank, per-dim axes (names and sub-axes),
 * unreduced axes; closedness, priorities and the replicated list do not
 * change where data lives. */
static bool same_placement(const sp_sharding *a, const sp_sharding *b)
{
    if (a == NULL || b == NULL) {
        return a == b;
    }
    if (a->rank != b->rank || a->n_unreduced != b->n_unreduced) {
        return false;
    }
    for (uint32_t d = 0; d < a->rank; d++) {
        if (a->dims[d].n_axes != b->dims[d].n_axes) {
            return false;
        }
        for (uint32_t k = 0; k < a->dims[d].n_axes; k++) {
            const sp_axis_ref *x = &a->dims[d].axes[k], *y = &b->dims[d].axes[k];
            if (strcmp(x->name, y->name) != 0 || x->pre_size != y->pre_size ||
                (x->pre_size != 0 && x->size != y->size)) {
                return false;
            }
        }
    }
    for (uint32_t k = 0; k < a->n_unreduced; k++) {
        if (strcmp(a->unreduced[k].name, b->unreduced[k].name) != 0) {
            return false;
        }
    }
    return true;
}

static bool all_replicated(const sp_sharding *s)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return false;
        }
    }
    return true;
}

typedef struct div_ctx {
    const sp_module *gspmd;
    sp_gspmd_divergence *v;
    uint32_t n, cap;
    bool oom;
} div_ctx;

static cm_status compare_op(sp_module *shardy, uint32_t op, void *vctx)
{
    div_ctx *c = vctx;
    const sp_module *g = c->gspmd;
    if (op >= g->n_ops || g->ops[op].parent_block == SP_NONE ||
        strcmp(g->ops[op].name, shardy->ops[op].name) != 0 ||
        g->ops[op].n_results != shardy->ops[op].n_results ||
        shardy->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        return CM_OK;
    }
    for (uint32_t r = 0; r < g->ops[op].n_results; r++) {
        const sp_sharding *a = sp_value_sharding(g, g->ops[op].first_result + r);
        const sp_sharding *b = sp_value_sharding(shardy, shardy->ops[op].first_result + r);
        /* no sharding and a fully replicated one place data alike */
        if (same_placement(a, b) || (all_replicated(a) && all_replicated(b))) {
            continue;
        }
        if (CM_GROW_U32(c->v, c->cap, c->n + 1, NULL) != CM_OK) {
            c->oom = true;
            return CM_ENOMEM;
        }
        c->v[c->n++] = (sp_gspmd_divergence){op, r, a, b};
    }
    return CM_OK;
}

cm_status sp_gspmd_divergences(const sp_module *gspmd, sp_module *shardy, sp_gspmd_divergence **out,
                               uint32_t *n_out, cm_error *err)
{
    div_ctx c = {gspmd, NULL, 0, 0, false};
    cm_status st = CM_OK;
    const sp_block *top = &shardy->blocks[shardy->body];
    for (uint32_t i = 0; i < top->n_ops && st == CM_OK; i++) {
        uint32_t f = top->ops[i];
        if (shardy->ops[f].kind == SP_OP_FUNC_FUNC && shardy->ops[f].n_regions > 0 &&
            shardy->ops[f].regions[0].n_blocks > 0) {
            st = sp_pass_walk(shardy, shardy->ops[f].regions[0].blocks[0], compare_op, &c);
        }
    }
    if (st != CM_OK) {
        cm_free(c.v);
        return cm_error_oom(err);
    }
    *out = c.v;
    *n_out = c.n;
    return CM_OK;
}
