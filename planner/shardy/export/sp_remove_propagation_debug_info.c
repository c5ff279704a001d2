/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-remove-propagation-debug-info (Shardy's
 * export/remove_propagation_debug_info.cc; see sp_export.h): drops the
 * attributes the debug options of propagation leave (propagation edges and
 * sharding origins, of ops, block arguments, results and function I/O). */
#include "sp_export.h"

#include "sp_export_int.h"
#include "sp_pass.h"

static const char *const debug_attrs[] = {
    "sdy.propagation_edges", "sdy.block_arg_propagation_edges", "sdy.result_propagation_edges",
    "sdy.sharding_origins",  "sdy.block_arg_sharding_origins",  "sdy.result_sharding_origins"};
#define N_DEBUG_ATTRS (sizeof debug_attrs / sizeof debug_attrs[0])

/* Does entry i of the array-of-dicts attribute list have key? */
static bool dict_has(const sp_attr *list, uint32_t i, const char *key)
{
    if (list == NULL || list->kind != SP_ATTR_ARRAY || i >= list->u.arr.n ||
        list->u.arr.items[i] == NULL || list->u.arr.items[i]->kind != SP_ATTR_DICT) {
        return false;
    }
    const sp_attr *d = list->u.arr.items[i];
    return sp_attrs_get(d->u.dict.items, d->u.dict.n, key) != NULL;
}

static cm_status strip_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    if (m->ops[op].kind != SP_OP_FUNC_FUNC) {
        for (size_t k = 0; k < N_DEBUG_ATTRS; k++) {
            sp_op_remove_attr(m, op, debug_attrs[k]);
        }
        return CM_OK;
    }
    for (int which = 0; which < 2; which++) {
        uint32_t n = sp_exp_io_count(m, op, which == 0);
        for (uint32_t i = 0; i < n; i++) {
            for (size_t k = 0; k < N_DEBUG_ATTRS; k++) {
                const sp_attr *list = sp_op_attr(m, op, which == 0 ? "arg_attrs" : "res_attrs");
                if (!dict_has(list, i, debug_attrs[k])) {
                    continue;
                }
                cm_status st = which == 0
                                   ? sp_func_set_arg_attr(m, op, i, debug_attrs[k], NULL)
                                   : sp_func_set_result_attr(m, op, i, debug_attrs[k], NULL);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

cm_status sp_pass_remove_propagation_debug_info(sp_module *m, cm_error *err)
{
    if (sp_pass_walk(m, m->body, strip_op, NULL) != CM_OK) {
        return cm_error_oom(err);
    }
    return CM_OK;
}
