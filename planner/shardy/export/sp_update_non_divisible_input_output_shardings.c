/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-update-non-divisible-input-output-shardings (Shardy's
 * export/update_non_divisible_input_output_shardings.cc): function input and
 * output shardings, call result shardings and manual computation edge
 * shardings keep only the axes that divide their dimensions (see
 * sp_export.h). */
#include "sp_export.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_export_int.h"
#include "sp_pass.h"

static int64_t axis_size(const sp_module *m, const sp_sharding *s, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return r->size > 0 ? r->size : 1;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 1 : mesh->axes[i].size;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static cm_status divisible_one(sp_module *m, const sp_sharding *s, const sp_type *t,
                               sp_sharding **out)
{
    *out = NULL;
    if (t->kind != SP_TYPE_TENSOR || t->rank != s->rank) {
        return CM_OK;
    }
    sp_sharding *c = NULL;
    for (uint32_t d = 0; d < s->rank; d++) {
        int64_t room = t->dims[d];
        uint32_t keep = 0;
        int64_t last_size = 0;
        for (; keep < s->dims[d].n_axes; keep++) {
            int64_t sz = axis_size(m, s, &s->dims[d].axes[keep]);
            if (room >= 0 && room % sz == 0) { /* a size-0 dimension divides by any axis */
                room /= sz;
                continue;
            }
            last_size = room > 0 ? gcd(room, sz) : 1;
            break;
        }
        if (keep == s->dims[d].n_axes) {
            continue;
        }
        if (c == NULL) {
            c = sp_sharding_clone(&m->arena, s);
            if (c == NULL) {
                return CM_ENOMEM;
            }
        }
        sp_dim_sharding *ds = &c->dims[d];
        ds->n_axes = keep;
        if (last_size > 1) {
            /* keep the largest major sub-axis of the first non-dividing axis */
            sp_axis_ref r = s->dims[d].axes[keep];
            int64_t pre = r.pre_size > 0 ? r.pre_size : 1;
            ds->axes[keep].name = r.name;
            ds->axes[keep].pre_size = pre;
            ds->axes[keep].size = last_size;
            ds->n_axes = keep + 1;
        }
    }
    *out = c;
    return CM_OK;
}

/* Entry i of a list describes value vals[i]. */
static cm_status fix_item(sp_module *m, uint32_t i, const sp_sharding *s, sp_sharding **out,
                          const void *vals)
{
    return divisible_one(m, s, sp_value_type(m, ((const uint32_t *)vals)[i]), out);
}

/* Rewrites the sharding list attribute name of op, entry i describing value
 * vals[i]; a list of another length is left alone. */
static cm_status fix_list(sp_module *m, uint32_t op, const char *name, const uint32_t *vals,
                          uint32_t n)
{
    const sp_attr *a = sp_op_attr(m, op, name);
    if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST || a->u.shardings.n != n) {
        return CM_OK;
    }
    return sp_exp_rewrite_sharding_list(m, op, name, fix_item, vals);
}

/* Call results, and the edges of manual computations (in global shapes:
 * the operands and the results), are kept divisible too. */
static cm_status fix_op(sp_module *m, uint32_t opid, void *ctx)
{
    (void)ctx;
    const sp_op *op = &m->ops[opid];
    if (op->kind != SP_OP_FUNC_CALL && op->kind != SP_OP_SDY_MANUAL_COMPUTATION) {
        return CM_OK;
    }
    uint32_t stack[64];
    uint32_t n = op->n_results > op->n_operands ? op->n_results : op->n_operands;
    uint32_t *vals = n <= 64 ? stack : cm_alloc(sizeof *vals * n);
    if (vals == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < op->n_results; i++) {
        vals[i] = op->first_result + i;
    }
    bool call = op->kind == SP_OP_FUNC_CALL;
    cm_status st = fix_list(m, opid, call ? "sdy.sharding" : "out_shardings", vals,
                            m->ops[opid].n_results);
    if (st == CM_OK && !call) {
        st = fix_list(m, opid, "in_shardings", m->ops[opid].operands, m->ops[opid].n_operands);
    }
    if (vals != stack) {
        cm_free(vals);
    }
    return st;
}

cm_status sp_pass_update_non_divisible_io(sp_module *m, cm_error *err)
{
    cm_status st = sp_pass_io_shardings_fix(m, divisible_one, err);
    if (st == CM_OK && sp_pass_walk(m, m->body, fix_op, NULL) != CM_OK) {
        st = cm_error_oom(err);
    }
    return st;
}
