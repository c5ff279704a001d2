/* SPDX-License-Identifier: Apache-2.0
 * planner: what the advisor's modules share (sp_advise_int.h): the one way
 * they partition and cost a module, the fix texts of findings and
 * suggestions, JSON strings and the thread pool runner. */
#include <pthread.h>
#include <string.h>

#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_input.h"
#include "sp_ops.h"

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

void sp_advise_target_of(const sp_module *m, const sp_graph *g, uint32_t v, sp_advise_target *t)
{
    t->name = g != NULL ? sp_graph_value_name(g, v) : NULL;
    if (t->name == NULL) {
        t->name = sp_value_name(m, v);
    }
    t->input = -1;
    t->logical = NULL;
    t->current = sp_value_sharding(m, v);
    const sp_value *val = &m->values[v];
    if (val->def != SP_NONE || val->block == SP_NONE) {
        return;
    }
    uint32_t fn = m->blocks[val->block].parent_op;
    if (fn == SP_NONE || m->ops[fn].kind != SP_OP_FUNC_FUNC || m->ops[fn].n_regions == 0 ||
        m->ops[fn].regions[0].n_blocks == 0 || m->ops[fn].regions[0].blocks[0] != val->block) {
        return;
    }
    const sp_attr *vis = sp_op_attr(m, fn, "sym_visibility");
    if (vis != NULL && vis->kind == SP_ATTR_STRING && strcmp(vis->u.str.s, "private") == 0) {
        return;
    }
    t->input = (int32_t)val->index;
    t->logical = g != NULL ? sp_graph_value_logical_axes(g, v) : NULL;
}

/* The i-th name of a compact JSON array of strings and nulls (as
 * sp_graph_value_logical_axes writes it) into out (n bytes); false for null
 * or past the end. */
static bool logical_at(const char *json, uint32_t i, char *out, size_t n)
{
    uint32_t k = 0;
    for (const char *c = json; *c != '\0'; c++) {
        if (*c == '"') {
            size_t w = 0;
            for (c++; *c != '\0' && *c != '"'; c++) {
                if (*c == '\\' && c[1] != '\0') {
                    c++;
                }
                if (w + 1 < n) {
                    out[w++] = *c;
                }
            }
            out[w] = '\0';
            if (k++ == i) {
                return true;
            }
            if (*c == '\0') {
                return false;
            }
        } else if (strncmp(c, "null", 4) == 0) {
            if (k++ == i) {
                return false;
            }
            c += 3;
        }
    }
    return false;
}

/* Whether the fix's dim i (k_n axes: axes[] when i == d, else s's) differs
 * from the target's current sharding there (none: replicated). */
static bool differs_from(const sp_advise_target *t, const sp_sharding *s, uint32_t i, uint32_t d,
                         const char *const *axes, uint32_t n, uint32_t k_n)
{
    if (t == NULL) {
        return i == d || (s == NULL && k_n > 0);
    }
    const sp_sharding *c = t->current;
    uint32_t c_n = c != NULL && i < c->rank ? c->dims[i].n_axes : 0;
    if (c_n != k_n) {
        return true;
    }
    for (uint32_t k = 0; k < k_n; k++) {
        const char *nm = i == d && k < n ? axes[k] : s->dims[i].axes[k].name;
        if (strcmp(nm, c->dims[i].axes[k].name) != 0) {
            return true;
        }
    }
    return false;
}

void sp_advise_fix_write(const sp_sharding *s, const char *mesh_name, uint32_t rank, uint32_t d,
                         const char *const *axes, uint32_t n, const char *token,
                         const sp_advise_target *t, cm_buf *shardy, cm_buf *jax)
{
    cm_buf_printf(shardy, "sdy.sharding_constraint %s <@%s, [", token,
                  s != NULL && s->mesh_name != NULL ? s->mesh_name
                  : mesh_name != NULL               ? mesh_name
                                                    : "mesh");
    cm_buf spec, chg; /* the NamedSharding; the changed dim's entry */
    cm_buf_init(&spec);
    cm_buf_init(&chg);
    cm_buf_puts(&spec, "NamedSharding(mesh, P(");
    uint32_t changed = SP_NONE; /* the first dim whose axes the fix changes */
    for (uint32_t i = 0; i < rank; i++) {
        cm_buf_puts(shardy, i > 0 ? ", {" : "{");
        cm_buf_puts(&spec, i > 0 ? ", " : "");
        uint32_t k_n = i == d ? n : s != NULL && i < s->rank ? s->dims[i].n_axes : 0;
        bool first_change = changed == SP_NONE && differs_from(t, s, i, d, axes, n, k_n);
        size_t at = spec.len;
        if (k_n > 1) {
            cm_buf_putc(&spec, '(');
        }
        for (uint32_t k = 0; k < k_n; k++) {
            const char *nm = i == d ? axes[k] : s->dims[i].axes[k].name;
            cm_buf_printf(shardy, "%s\"%s\"", k > 0 ? ", " : "", nm);
            cm_buf_printf(&spec, "%s'%s'", k > 0 ? ", " : "", nm);
        }
        if (k_n == 0) {
            cm_buf_puts(&spec, "None");
        } else if (k_n > 1) {
            cm_buf_putc(&spec, ')');
        }
        if (first_change && !spec.oom) {
            changed = i;
            cm_buf_append(&chg, spec.data + at, spec.len - at);
        }
        cm_buf_putc(shardy, '}');
    }
    cm_buf_puts(shardy, "]>");
    cm_buf_puts(&spec, "))");
    const char *sp = spec.data != NULL ? spec.data : "";
    const char *ch = chg.data != NULL ? chg.data : "None";
    const char *name = t != NULL ? t->name : NULL;
    if (t != NULL && t->input >= 0) {
        char lname[128];
        if (t->logical != NULL && changed != SP_NONE &&
            logical_at(t->logical, changed, lname, sizeof lname)) {
            cm_buf_printf(jax,
                          "logical_axis_rules: ('%s', %s) for dim %u of %s, whose "
                          "nn.with_logical_partitioning names are ",
                          lname, ch, changed, name != NULL ? name : "the parameter");
            sp_graph_logical_axes_py(t->logical, jax);
            cm_buf_printf(jax, " (the rule applies to every tensor with logical axis '%s'); or ",
                          lname);
        } else if (t->logical != NULL && changed != SP_NONE) {
            cm_buf_printf(jax, "nn.with_logical_partitioning: name dim %u of %s (its names are ",
                          changed, name != NULL ? name : "the parameter");
            sp_graph_logical_axes_py(t->logical, jax);
            cm_buf_printf(jax, ") and map that name to %s in logical_axis_rules; or ", ch);
        }
        cm_buf_puts(jax, "in_shardings for ");
        if (name != NULL) {
            cm_buf_printf(jax, "%s (input %d): %s", name, (int)t->input, sp);
        } else {
            cm_buf_printf(jax, "input %d: %s", (int)t->input, sp);
        }
    } else {
        cm_buf_printf(jax, "jax.lax.with_sharding_constraint(%s, %s)", name != NULL ? name : "x",
                      sp);
    }
    jax->oom = jax->oom || spec.oom || chg.oom;
    cm_buf_fini(&spec);
    cm_buf_fini(&chg);
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

const char *sp_advise_main_mesh(const sp_module *m)
{
    const sp_block *body = &m->blocks[m->body];
    const char *first = NULL;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        const sp_attr *nm = sp_op_attr(m, op, "sym_name");
        if (m->ops[op].kind != SP_OP_SDY_MESH || nm == NULL || nm->kind != SP_ATTR_STRING) {
            continue;
        }
        const sp_mesh *mesh = sp_module_mesh(m, nm->u.str.s);
        for (uint32_t k = 0; mesh != NULL && k < mesh->n_axes; k++) {
            if (mesh->axes[k].size > 1) {
                return nm->u.str.s;
            }
        }
        first = first != NULL ? first : nm->u.str.s;
    }
    return first;
}
