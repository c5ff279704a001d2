/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd: XLA's -xla-sdy-round-trip-import-pipeline with its options
 * (sdy_round_trip/pipelines.cc): the pre-import tuple flattening, the import
 * of the xla.sdy attributes (sp_gspmd_round_trip.c), the constants, the
 * optional lifting of inlined meshes, and the import of func calls as named
 * computations when every call is to be imported. */
#include "sp_gspmd.h"

#include "sp_gspmd_int.h"
#include "sp_import.h"
#include "sp_ops.h"

/* Shardy's lift of inlined meshes, the new single-device meshes named as
 * XLA names them, then XLA's dedup. */
static cm_status lift_and_dedup(sp_module *m, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    const char **before = cm_alloc(sizeof *before * (body->n_ops + 1u));
    uint32_t n = 0;
    if (before == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_attr *nm = sp_op_attr(m, body->ops[i], "sym_name");
        if (m->ops[body->ops[i]].kind == SP_OP_SDY_MESH && nm != NULL &&
            nm->kind == SP_ATTR_STRING) {
            before[n++] = nm->u.str.s;
        }
    }
    cm_status st = sp_pass_lift_inlined_meshes(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_name_single_device_meshes(m, before, n, err);
    }
    cm_free(before);
    return st == CM_OK ? sp_gspmd_dedup_meshes(m, err) : st;
}

cm_status sp_gspmd_round_trip_import_pipeline(sp_module *m, const sp_gspmd_round_trip_opts *o,
                                              sp_diags *d, cm_error *err)
{
    sp_gspmd_round_trip_opts def = {true, false, false, true};
    if (o == NULL) {
        o = &def;
    }
    /* XLA flattens tuples among its pre-import passes, so that a tuple
     * through @xla.sdy.FuncResultSharding or a tuple<> callback result is
     * seen element by element */
    cm_status st = sp_gspmd_flatten_tuples(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_round_trip_import(m, o->hlo_sharding_v3, d, err);
    }
    if (st == CM_OK && o->constant_import) {
        st = sp_gspmd_import_constants(m, err);
    }
    if (st == CM_OK && (o->lift_and_dedup_meshes || o->hlo_sharding_v3)) {
        st = lift_and_dedup(m, err);
    }
    if (st == CM_OK && !o->only_uninlineable_calls) {
        /* XLA's own import of func calls adds no data-flow edges */
        st = sp_pass_import_func_calls(m, false, d, err);
    }
    return st;
}
