/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-update-non-divisible-input-output-shardings (Shardy's
 * export/update_non_divisible_input_output_shardings.cc): function input and
 * output shardings keep only the axes that divide their dimensions (see
 * sp_export.h). */
#include "sp_export.h"

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
            if (room > 0 && room % sz == 0) {
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

cm_status sp_pass_update_non_divisible_io(sp_module *m, cm_error *err)
{
    return sp_pass_io_shardings_fix(m, divisible_one, err);
}
