/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-sharding-group-import (Shardy's
 * import/sharding_group_import.cc): groups that share a value are merged and
 * renumbered (see sp_import.h). */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

cm_status sp_pass_sharding_group_import(sp_module *m, sp_diags *diags, cm_error *err)
{
    /* union-find over group ids through shared values */
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        n += m->ops[i].kind == SP_OP_SDY_SHARDING_GROUP && m->ops[i].parent_block != SP_NONE;
    }
    if (n == 0) {
        return CM_OK;
    }
    int64_t *ids = cm_alloc(sizeof(int64_t) * n);
    uint32_t *parent = cm_alloc(sizeof(uint32_t) * n);
    uint32_t *value_group = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    uint32_t *ops = cm_alloc(sizeof(uint32_t) * n);
    cm_status st = CM_OK;
    if (ids == NULL || parent == NULL || value_group == NULL || ops == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    memset(value_group, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    uint32_t k = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind != SP_OP_SDY_SHARDING_GROUP || op->parent_block == SP_NONE) {
            continue;
        }
        const sp_attr *g = sp_op_attr(m, i, "group_id");
        ids[k] = g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : 0;
        parent[k] = k;
        ops[k] = i;
        /* same id: union with the first op of that id */
        for (uint32_t j = 0; j < k; j++) {
            if (ids[j] == ids[k]) {
                parent[k] = j;
                break;
            }
        }
        if (op->n_operands == 1) {
            uint32_t v = op->operands[0];
            if (value_group[v] != SP_NONE) {
                uint32_t a = value_group[v], b = k;
                while (parent[a] != a) {
                    a = parent[a];
                }
                while (parent[b] != b) {
                    b = parent[b];
                }
                if (a != b) {
                    parent[b < a ? a : b] = b < a ? b : a;
                }
            } else {
                value_group[v] = k;
            }
        }
        k++;
    }
    /* renumber roots 0..N-1 in order of first appearance */
    int64_t next = 0;
    int64_t *canon = cm_alloc(sizeof(int64_t) * n);
    if (canon == NULL) {
        st = cm_error_oom(err);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = i;
        while (parent[r] != r) {
            r = parent[r];
        }
        canon[i] = r == i ? next++ : canon[r];
    }
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
        if (a == NULL) {
            st = cm_error_oom(err);
            break;
        }
        a->u.i.v = canon[i];
        a->u.i.type = "i64";
        st = sp_op_set_attr(m, ops[i], "group_id", a) == CM_OK ? CM_OK : cm_error_oom(err);
    }
    cm_free(canon);
    (void)diags;
out:
    cm_free(ids);
    cm_free(parent);
    cm_free(value_group);
    cm_free(ops);
    return st;
}
