/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd: XLA's -xla-sdy-round-trip-import-pipeline with its options
 * (sdy_round_trip/pipelines.cc): the pre-import tuple flattening, the import
 * of the xla.sdy attributes (sp_gspmd_round_trip.c), the constants, the
 * optional lifting of inlined meshes, and the import of func calls as named
 * computations when every call is to be imported. */
#include "sp_gspmd.h"

#include "sp_gspmd_int.h"
#include "sp_import.h"

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
    if (st == CM_OK && o->lift_and_dedup_meshes) {
        st = sp_pass_lift_inlined_meshes(m, err);
    }
    if (st == CM_OK && !o->only_uninlineable_calls) {
        /* XLA's own import of func calls adds no data-flow edges */
        st = sp_pass_import_func_calls(m, false, d, err);
    }
    return st;
}
