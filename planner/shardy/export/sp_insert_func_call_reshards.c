/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-insert-func-call-reshards (Shardy's
 * export/insert_func_call_reshards.cc; see sp_export.h). A call's results
 * take the callee's result shardings; where the sharding the call had
 * differs, an sdy.reshard after the call gives its users what they had. */
#include "sp_export.h"

#include "sp_export_int.h"
#include "sp_pass.h"

typedef struct cctx {
    uint32_t *calls;
    uint32_t n, cap;
} cctx;

static cm_status collect(sp_module *m, uint32_t op, void *vctx)
{
    cctx *c = vctx;
    if (m->ops[op].kind != SP_OP_FUNC_CALL) {
        return CM_OK;
    }
    if (CM_GROW_U32(c->calls, c->cap, c->n + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    c->calls[c->n++] = op;
    return CM_OK;
}

/* The shardings the call's results get: the callee's (a missing one fully
 * open on the mesh of the others), else fully closed copies of the call's
 * own; *out is NULL when neither exists. */
static cm_status target_shardings(sp_module *m, uint32_t call, uint32_t f, sp_sharding ***out)
{
    *out = NULL;
    uint32_t n = m->ops[call].n_results;
    const sp_sharding *src = sp_exp_mesh_source(m, f, false);
    const sp_attr *own = sp_op_attr(m, call, "sdy.sharding");
    if (src == NULL && (own == NULL || own->kind != SP_ATTR_SHARDING_LIST)) {
        return CM_OK;
    }
    sp_sharding **v = cm_arena_alloc(&m->arena, sizeof *v * (n + 1u));
    if (v == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (src == NULL) {
            v[i] = i < own->u.shardings.n ? sp_exp_fully_closed_like(m, own->u.shardings.items[i])
                                          : NULL;
            if (v[i] == NULL) {
                return i < own->u.shardings.n ? CM_ENOMEM : CM_EINVAL;
            }
            continue;
        }
        const sp_sharding *s = sp_exp_io_sharding(m, f, false, i);
        if (s != NULL) {
            v[i] = (sp_sharding *)(uintptr_t)s;
        } else {
            v[i] = sp_sharding_open(&m->arena, src->mesh_name, sp_exp_io_rank(m, f, false, i));
            if (v[i] == NULL) {
                return CM_ENOMEM;
            }
            v[i]->mesh = src->mesh;
        }
    }
    *out = v;
    return CM_OK;
}

static cm_status one_call(sp_module *m, uint32_t call, sp_uses *u)
{
    uint32_t f = sp_exp_callee(m, call);
    if (f == SP_NONE) {
        return CM_EINVAL;
    }
    sp_sharding **want;
    cm_status st = target_shardings(m, call, f, &want);
    if (st != CM_OK || want == NULL) {
        return st;
    }
    uint32_t n = m->ops[call].n_results;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = m->ops[call].first_result + i;
        const sp_sharding *had = sp_value_sharding(m, r);
        if (sp_sharding_equivalent(want[i], had)) {
            continue;
        }
        sp_sharding *to = had != NULL ? (sp_sharding *)(uintptr_t)had
                                      : sp_exp_fully_closed_like(m, want[i]);
        uint32_t ty = m->values[r].type, op;
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        if (to == NULL || a == NULL ||
            sp_module_new_op(m, SP_NONE, "sdy.reshard", &r, 1, &ty, 1, &op) != CM_OK) {
            return CM_ENOMEM;
        }
        a->u.sharding = to;
        uint32_t block = m->ops[call].parent_block;
        if (sp_op_set_attr(m, op, "sharding", a) != CM_OK ||
            sp_block_insert_op(m, block, sp_op_index_in_block(m, call) + 1, op) != CM_OK) {
            return CM_ENOMEM;
        }
        uint32_t nv = m->ops[op].first_result;
        for (uint32_t k = u->head[r]; k != SP_NONE; k = u->pool[k].next) {
            m->ops[u->pool[k].op].operands[u->pool[k].idx] = nv;
        }
    }
    sp_attr *list = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (list == NULL) {
        return CM_ENOMEM;
    }
    list->u.shardings.items = want;
    list->u.shardings.n = n;
    return sp_op_set_attr(m, call, "sdy.sharding", list);
}

cm_status sp_pass_insert_func_call_reshards(sp_module *m, cm_error *err)
{
    cctx c = {0};
    sp_uses u = {0};
    uint8_t *want = NULL;
    cm_status st = sp_pass_walk(m, m->body, collect, &c);
    if (st != CM_OK) {
        goto out;
    }
    want = cm_calloc(m->n_values + 1u, 1);
    if (want == NULL) {
        st = CM_ENOMEM;
        goto out;
    }
    uint32_t extra = 0;
    for (uint32_t i = 0; i < c.n; i++) {
        const sp_op *op = &m->ops[c.calls[i]];
        for (uint32_t r = 0; r < op->n_results; r++) {
            want[op->first_result + r] = 1;
        }
        extra += op->n_results;
    }
    st = sp_uses_build(m, &u, m->n_values + extra, want);
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        st = one_call(m, c.calls[i], &u);
        if (st == CM_EINVAL) {
            const sp_attr *a = sp_op_attr(m, c.calls[i], "callee");
            cm_error_set(err, CM_EINVAL, "", "Failed to lookup function: %s",
                         a != NULL && a->kind == SP_ATTR_SYMBOL ? a->u.sym : "");
            goto out;
        }
    }
out:
    if (st == CM_ENOMEM) {
        cm_error_oom(err);
    }
    sp_uses_free(&u);
    cm_free(want);
    cm_free(c.calls);
    return st;
}
