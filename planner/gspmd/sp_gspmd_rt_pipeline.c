/* SPDX-License-Identifier: Apache-2.0
 * planner/gspmd: XLA's -xla-sdy-round-trip-import-pipeline with its options
 * (sdy_round_trip/pipelines.cc): the pre-import tuple flattening, the import
 * of the xla.sdy attributes (sp_gspmd_round_trip.c), the constants, the
 * optional lifting of inlined meshes, and the import of func calls as named
 * computations when every call is to be imported. */
#include "sp_gspmd.h"

#include <stdio.h>
#include <string.h>

#include "sp_gspmd_int.h"
#include "sp_import.h"
#include "sp_ops.h"

#define FRONTEND "mhlo.frontend_attributes"

/* The module's frontend attributes without key (NULL when none are left);
 * *oom on allocation failure. */
static sp_attr *frontend_without(sp_module *m, const sp_attr *d, const char *key, bool *oom)
{
    sp_attr *r = sp_attr_new(m, SP_ATTR_DICT);
    sp_named_attr *items = r != NULL ? cm_arena_alloc(&m->arena, sizeof *items * (d->u.dict.n + 1u))
                                     : NULL;
    if (items == NULL) {
        *oom = true;
        return NULL;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        if (strcmp(d->u.dict.items[i].name, key) != 0) {
            items[n++] = d->u.dict.items[i];
        }
    }
    r->u.dict.items = items;
    r->u.dict.n = n;
    return n > 0 ? r : NULL;
}

/* tf2xla's `xla.sdy.tuple_args_shardings` / `xla.sdy.tuple_results_shardings`
 * module frontend attributes: the shardings of @main's arguments / results,
 * one per entry; the attribute goes. Errors: CM_EINVAL when the count does
 * not match or the text does not parse, CM_ENOMEM. */
static cm_status tuple_io_shardings(sp_module *m, bool results, cm_error *err)
{
    const char *key = results ? "xla.sdy.tuple_results_shardings" : "xla.sdy.tuple_args_shardings";
    uint32_t main = sp_module_func(m, "main");
    const sp_attr *fe = sp_attrs_get(m->attrs, m->n_attrs, FRONTEND);
    const sp_attr *v = fe != NULL && fe->kind == SP_ATTR_DICT
                           ? sp_attrs_get(fe->u.dict.items, fe->u.dict.n, key)
                           : NULL;
    const sp_type *ft = main != SP_NONE ? sp_func_type(m, main) : NULL;
    if (v == NULL || v->kind != SP_ATTR_STRING || ft == NULL) {
        return CM_OK;
    }
    sp_attr *list = NULL;
    cm_status st = sp_gspmd_parse_per_value(m, v->u.str.s, main, &list, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t want = results ? ft->n_results : ft->n_inputs;
    if (list->u.shardings.n != want) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "has %u shardings in %s for its %u %s (a mismatch XLA rejects as well)",
                 list->u.shardings.n, key, want, results ? "results" : "arguments");
        return sp_gspmd_op_error(m, main, err, msg);
    }
    for (uint32_t i = 0; i < want; i++) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        if (a == NULL) {
            return cm_error_oom(err);
        }
        a->u.sharding = list->u.shardings.items[i];
        st = results ? sp_func_set_result_attr(m, main, i, "sdy.sharding", a)
                     : sp_func_set_arg_attr(m, main, i, "sdy.sharding", a);
        if (st != CM_OK) {
            return cm_error_oom(err);
        }
    }
    bool oom = false;
    sp_attr *rest = frontend_without(m, fe, key, &oom);
    if (oom) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < m->n_attrs; i++) {
        if (strcmp(m->attrs[i].name, FRONTEND) != 0) {
            continue;
        }
        if (rest != NULL) {
            m->attrs[i].value = rest;
        } else {
            memmove(&m->attrs[i], &m->attrs[i + 1], sizeof *m->attrs * (m->n_attrs - i - 1));
            m->n_attrs--;
        }
        break;
    }
    return CM_OK;
}

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
    sp_gspmd_round_trip_opts def = {true, false, false, true, false};
    if (o == NULL) {
        o = &def;
    }
    /* XLA flattens tuples among its pre-import passes, so that a tuple
     * through @xla.sdy.FuncResultSharding or a tuple<> callback result is
     * seen element by element */
    cm_status st = sp_gspmd_flatten_tuples(m, err);
    if (st == CM_OK) {
        st = sp_gspmd_round_trip_import_as(m, o->hlo_sharding_v3, o->closed_result_constraints, d,
                                           err);
    }
    if (st == CM_OK) {
        st = tuple_io_shardings(m, false, err);
    }
    if (st == CM_OK) {
        st = tuple_io_shardings(m, true, err);
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
