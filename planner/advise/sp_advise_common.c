/* SPDX-License-Identifier: Apache-2.0
 * planner: what the advisor's modules share (sp_advise_int.h): the one way
 * they partition and cost a module, the fix texts of findings and
 * suggestions, JSON strings and the thread pool runner. */
#include <pthread.h>
#include <string.h>

#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_input.h"

cm_status sp_advise_partition_cost(sp_module *m, bool partitioned, const sp_profile *profile,
                                   double overlap, const sp_custom_rules *custom,
                                   const sp_graph *g, sp_cost **out, cm_error *err)
{
    *out = NULL;
    cm_status st = partitioned ? CM_OK : sp_module_partition(m, err);
    if (st == CM_OK) {
        sp_cost_opts co;
        sp_cost_opts_init(&co);
        co.profile = profile;
        co.overlap = overlap;
        co.mode = SP_COST_EXPLICIT;
        co.custom = custom;
        if (g != NULL) {
            co.value_names = sp_graph_value_names(g, &co.n_value_names);
        }
        st = sp_cost_compute(m, &co, out, err);
    }
    return st;
}

void sp_advise_fix_write(const sp_sharding *s, const char *mesh_name, uint32_t rank, uint32_t d,
                         const char *const *axes, uint32_t n, const char *token, cm_buf *shardy,
                         cm_buf *jax)
{
    cm_buf_printf(shardy, "sdy.sharding_constraint %s <@%s, [", token,
                  s != NULL && s->mesh_name != NULL ? s->mesh_name
                  : mesh_name != NULL               ? mesh_name
                                                    : "mesh");
    cm_buf_puts(jax, "jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(");
    for (uint32_t i = 0; i < rank; i++) {
        cm_buf_puts(shardy, i > 0 ? ", {" : "{");
        cm_buf_puts(jax, i > 0 ? ", " : "");
        uint32_t k_n = i == d ? n : s != NULL && i < s->rank ? s->dims[i].n_axes : 0;
        if (k_n > 1) {
            cm_buf_putc(jax, '(');
        }
        for (uint32_t k = 0; k < k_n; k++) {
            const char *nm = i == d ? axes[k] : s->dims[i].axes[k].name;
            cm_buf_printf(shardy, "%s\"%s\"", k > 0 ? ", " : "", nm);
            cm_buf_printf(jax, "%s'%s'", k > 0 ? ", " : "", nm);
        }
        if (k_n == 0) {
            cm_buf_puts(jax, "None");
        } else if (k_n > 1) {
            cm_buf_putc(jax, ')');
        }
        cm_buf_putc(shardy, '}');
    }
    cm_buf_puts(shardy, "]>");
    cm_buf_puts(jax, ")))");
}

void sp_advise_put_jstr(cm_buf *b, const char *s)
{
    cm_json_put_cstr(b, s != NULL ? s : "");
}

void sp_advise_threads_run(void *(*fn)(void *), void *arg, uint32_t n_threads)
{
    pthread_t th[64];
    uint32_t started = 0;
    for (uint32_t i = 1; i < n_threads && started < 64; i++) {
        if (pthread_create(&th[started], NULL, fn, arg) == 0) {
            started++;
        }
    }
    fn(arg);
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
    }
}
