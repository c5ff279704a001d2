/* SPDX-License-Identifier: Apache-2.0
 * planner: the GSPMD -> Shardy migration report (issue 20; sp_migrate.h),
 * shared by `shardplan migrate` and POST /v1/migrations: GSPMD's sharding of
 * every value (the module's mhlo.sharding strings, planner/gspmd) beside
 * Shardy's from the same user annotations, the values where they differ
 * (first first), both costs per device (planner/cost), and constraints that
 * make Shardy take GSPMD's choice, as sdy and as JAX, checked by re-planning
 * with them. */
#include "sp_migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cm_json.h"
#include "sp_cost.h"
#include "sp_diag.h"
#include "sp_gspmd.h"
#include "sp_input.h"
#include "sp_mlir.h"
#include "sp_ops.h"

/* One side of the comparison: a module and its cost. */
typedef struct side {
    sp_module *m;
    sp_cost *cost;
} side;

static void side_fini(side *s)
{
    sp_cost_destroy(s->cost);
    sp_module_destroy(s->m);
    memset(s, 0, sizeof *s);
}

/* Shardy's side: the user's annotations, constraints on the n_fix values
 * vals with the shardings fixes (GSPMD's), propagated. Value ids are the
 * GSPMD side's: both modules come from one text through the same import. */
static cm_status shardy_side(const char *text, size_t len, const uint32_t *vals,
                             const sp_sharding *const *fixes, uint32_t n_fix, side *out,
                             cm_error *err)
{
    cm_status st = sp_mlir_read(text, len, 0, &out->m, err);
    if (st == CM_OK) {
        st = sp_gspmd_import_user_annotations(out->m, err);
    }
    for (uint32_t f = 0; st == CM_OK && f < n_fix; f++) {
        sp_module *m = out->m;
        uint32_t v = vals[f], def = m->values[v].def, op;
        uint32_t type = m->values[v].type;
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
        sp_sharding *s = a != NULL ? sp_sharding_clone(&m->arena, fixes[f]) : NULL;
        if (def == SP_NONE || s == NULL ||
            sp_module_new_op(m, SP_NONE, "sdy.sharding_constraint", &v, 1, &type, 1, &op) !=
                CM_OK) {
            return cm_error_oom(err);
        }
        a->u.sharding = s;
        uint32_t nv = m->ops[op].first_result;
        for (uint32_t i = 0; i < m->n_ops; i++) {
            for (uint32_t k = 0; i != op && k < m->ops[i].n_operands; k++) {
                if (m->ops[i].operands[k] == v) {
                    m->ops[i].operands[k] = nv;
                }
            }
        }
        if (sp_op_set_attr(m, op, "sharding", a) != CM_OK ||
            sp_block_insert_op(m, m->ops[def].parent_block, sp_op_index_in_block(m, def) + 1, op) !=
                CM_OK) {
            return cm_error_oom(err);
        }
    }
    if (st == CM_OK) {
        sp_diags d;
        sp_diags_init(&d);
        st = sp_input_propagate(out->m, SP_PLAN_PIPELINE, NULL, false, NULL, &d, err);
        sp_diags_fini(&d);
    }
    return st;
}

static void put_sharding(cm_buf *b, const sp_sharding *s)
{
    if (s == NULL) {
        cm_buf_puts(b, "(none)");
        return;
    }
    sp_sharding_print(s, b);
}

/* `P('a', None, ('b', 'c'))` for s; false when a sub-axis has no spelling. */
static bool put_partition_spec(cm_buf *b, const sp_sharding *s)
{
    bool ok = true;
    cm_buf_puts(b, "P(");
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        cm_buf_puts(b, d > 0 ? ", " : "");
        if (ds->n_axes == 0) {
            cm_buf_puts(b, "None");
            continue;
        }
        cm_buf_puts(b, ds->n_axes > 1 ? "(" : "");
        for (uint32_t k = 0; k < ds->n_axes; k++) {
            ok = ok && ds->axes[k].pre_size == 0;
            cm_buf_printf(b, "%s'%s'", k > 0 ? ", " : "", ds->axes[k].name);
        }
        cm_buf_puts(b, ds->n_axes > 1 ? ")" : "");
    }
    cm_buf_putc(b, ')');
    return ok;
}

/* One row: a label and two figures, in columns. */
static void put_row(cm_buf *b, const char *label, const char *x, const char *y)
{
    cm_buf_printf(b, "  %-28s %-24s %s\n", label, x, y);
}

static void put_costs(cm_buf *b, const char *title_a, const sp_cost *a, const char *title_b,
                      const sp_cost *c)
{
    const sp_cost_summary *x = sp_cost_get_summary(a), *y = sp_cost_get_summary(c);
    char l[160], u[48], v[48];
    snprintf(l, sizeof l, "cost per device (%s)", x->profile);
    cm_buf_printf(b, "%-30s %-24s %s\n", l, title_a, title_b);
    snprintf(u, sizeof u, "%.3f MiB%s", x->peak_bytes / 1048576.0, x->fits ? "" : " (OOM)");
    snprintf(v, sizeof v, "%.3f MiB%s", y->peak_bytes / 1048576.0, y->fits ? "" : " (OOM)");
    put_row(b, "peak memory", u, v);
    snprintf(u, sizeof u, "%s", x->fits ? "yes" : "no");
    snprintf(v, sizeof v, "%s", y->fits ? "yes" : "no");
    put_row(b, "fits the profile's memory", u, v);
    snprintf(u, sizeof u, "%.0f B", x->comm_bytes);
    snprintf(v, sizeof v, "%.0f B", y->comm_bytes);
    put_row(b, "communication", u, v);
    /* per axis set: both sides' figures on one row */
    for (uint32_t pass = 0; pass < 2; pass++) {
        const sp_cost *one = pass == 0 ? a : c, *other = pass == 0 ? c : a;
        for (uint32_t i = 0; i < sp_cost_n_axes(one); i++) {
            const sp_cost_axis *ax = sp_cost_axis_at(one, i);
            const sp_cost_axis *ox = NULL;
            for (uint32_t k = 0; k < sp_cost_n_axes(other); k++) {
                if (strcmp(sp_cost_axis_at(other, k)->axes, ax->axes) == 0) {
                    ox = sp_cost_axis_at(other, k);
                }
            }
            if (pass == 1 && ox != NULL) {
                continue; /* printed with the first side */
            }
            snprintf(l, sizeof l, "  over %s", ax->axes);
            snprintf(u, sizeof u, "%.0f B", ax->bytes);
            snprintf(v, sizeof v, "%.0f B", ox != NULL ? ox->bytes : 0.0);
            put_row(b, l, pass == 0 ? u : v, pass == 0 ? v : u);
        }
    }
    snprintf(u, sizeof u, "%.6g s", x->step_s);
    snprintf(v, sizeof v, "%.6g s", y->step_s);
    put_row(b, "predicted step time", u, v);
}

/* Why Shardy sharded result r of op as it did: the propagation's recorded
 * origin of each axis (`sdy.sharding_origins`: self, input: N, output: N,
 * constraint_N, the value's own op...). */
static void put_origins(cm_buf *b, const sp_module *m, uint32_t op, uint32_t r)
{
    const sp_attr *a = sp_op_attr(m, op, "sdy.sharding_origins");
    if (a != NULL && a->kind == SP_ATTR_ARRAY) {
        a = r < a->u.arr.n ? a->u.arr.items[r] : NULL;
    }
    if (a == NULL || a->kind != SP_ATTR_DICT || a->u.dict.n == 0) {
        return;
    }
    cm_buf_puts(b, "\n       why (Shardy's origins): ");
    for (uint32_t i = 0; i < a->u.dict.n; i++) {
        const sp_attr *v = a->u.dict.items[i].value;
        cm_buf_printf(b, "%s%s from %s", i > 0 ? ", " : "", a->u.dict.items[i].name,
                      v != NULL && v->kind == SP_ATTR_STRING ? v->u.str.s : "?");
    }
}

static void put_value(cm_buf *b, const sp_module *m, uint32_t op, uint32_t r)
{
    const char *name = sp_value_name(m, m->ops[op].first_result + r);
    cm_buf_printf(b, "%s (%s", name != NULL ? name : "result", m->ops[op].name);
    if (m->ops[op].n_results > 1) {
        cm_buf_printf(b, " #%u", r);
    }
    cm_buf_printf(b, " at %u:%u)", m->ops[op].line, m->ops[op].col);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_sharding(cm_buf *b, const sp_sharding *s)
{
    if (s == NULL) {
        cm_json_put_null(b);
        return;
    }
    cm_buf t;
    cm_buf_init(&t);
    sp_sharding_print(s, &t);
    cm_json_put_str(b, t.data != NULL ? t.data : "", t.len);
    if (t.oom) {
        b->oom = true;
    }
    cm_buf_fini(&t);
}

static void json_cost(cm_buf *b, const sp_cost *c)
{
    const sp_cost_summary *x = sp_cost_get_summary(c);
    cm_buf_puts(b, "{\"peak_bytes\":");
    cm_json_put_num(b, x->peak_bytes, 17);
    cm_buf_puts(b, ",\"capacity_bytes\":");
    cm_json_put_num(b, x->capacity_bytes, 17);
    cm_buf_puts(b, ",\"fits\":");
    cm_json_put_bool(b, x->fits);
    cm_buf_puts(b, ",\"comm_bytes\":");
    cm_json_put_num(b, x->comm_bytes, 17);
    cm_buf_puts(b, ",\"per_axis\":[");
    for (uint32_t i = 0; i < sp_cost_n_axes(c); i++) {
        const sp_cost_axis *ax = sp_cost_axis_at(c, i);
        cm_buf_puts(b, i > 0 ? ",{\"axes\":" : "{\"axes\":");
        cm_json_put_cstr(b, ax->axes);
        cm_buf_puts(b, ",\"bytes\":");
        cm_json_put_num(b, ax->bytes, 17);
        cm_buf_puts(b, ",\"collectives\":");
        cm_json_put_u64(b, ax->n_colls);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\"step_s\":");
    cm_json_put_num(b, x->step_s, 9);
    cm_buf_puts(b, ",\"profile\":");
    cm_json_put_cstr(b, x->profile);
    cm_buf_putc(b, '}');
}

static void json_origins(cm_buf *b, const sp_module *m, uint32_t op, uint32_t r)
{
    const sp_attr *a = sp_op_attr(m, op, "sdy.sharding_origins");
    if (a != NULL && a->kind == SP_ATTR_ARRAY) {
        a = r < a->u.arr.n ? a->u.arr.items[r] : NULL;
    }
    cm_buf_putc(b, '{');
    for (uint32_t i = 0; a != NULL && a->kind == SP_ATTR_DICT && i < a->u.dict.n; i++) {
        const sp_attr *v = a->u.dict.items[i].value;
        cm_buf_puts(b, i > 0 ? "," : "");
        cm_json_put_cstr(b, a->u.dict.items[i].name);
        cm_buf_putc(b, ':');
        cm_json_put_cstr(b, v != NULL && v->kind == SP_ATTR_STRING ? v->u.str.s : "?");
    }
    cm_buf_putc(b, '}');
}

static void json_divergences(cm_buf *b, const sp_module *g, const sp_module *s,
                             const sp_gspmd_divergence *dv, uint32_t n)
{
    cm_buf_putc(b, '[');
    for (uint32_t i = 0; i < n; i++) {
        const sp_op *o = &g->ops[dv[i].op];
        const char *name = sp_value_name(g, o->first_result + dv[i].result);
        cm_buf_puts(b, i > 0 ? ",\n  {\"op\":" : "\n  {\"op\":");
        cm_json_put_cstr(b, o->name);
        cm_buf_printf(b, ",\"line\":%u,\"col\":%u,\"result\":%u,\"value\":", o->line, o->col,
                      dv[i].result);
        if (name != NULL) {
            cm_json_put_cstr(b, name);
        } else {
            cm_json_put_null(b);
        }
        cm_buf_puts(b, ",\"gspmd\":");
        json_sharding(b, dv[i].gspmd);
        cm_buf_puts(b, ",\"shardy\":");
        json_sharding(b, dv[i].shardy);
        cm_buf_puts(b, ",\"shardy_origins\":");
        json_origins(b, s, dv[i].op, dv[i].result);
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
}

cm_status sp_migrate_report(const char *text, size_t len, const char *file,
                            const sp_profile *profile, bool json, cm_buf *out, cm_error *err)
{
    side g = {NULL, NULL}, s = {NULL, NULL}, fix = {NULL, NULL};
    sp_gspmd_divergence *dv = NULL, *dv2 = NULL;
    uint32_t n_dv = 0, n_dv2 = 0;
    cm_buf b;
    cm_buf_init(&b);
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    if (profile != NULL) {
        co.profile = profile;
    }
    if (file == NULL) {
        file = "input";
    }
    cm_status st = sp_mlir_read(text, len, 0, &g.m, err);
    if (st != CM_OK) {
        goto out;
    }
    if (!sp_gspmd_detect(g.m)) {
        st = cm_error_set(err, CM_EINVAL, "",
                          "no GSPMD shardings (mhlo.sharding, @Sharding) to migrate from");
        goto out;
    }
    st = sp_gspmd_import(g.m, err);
    if (st == CM_OK) {
        /* what the reader of every other entry refuses, migrate refuses */
        st = sp_input_verify_mlir(g.m, err);
    }
    if (st == CM_OK) {
        st = shardy_side(text, len, NULL, NULL, 0, &s, err);
    }
    if (st == CM_OK) {
        st = sp_gspmd_divergences(g.m, s.m, &dv, &n_dv, err);
    }
    if (st == CM_OK) {
        st = sp_cost_compute(g.m, &co, &g.cost, err);
    }
    if (st == CM_OK) {
        st = sp_cost_compute(s.m, &co, &s.cost, err);
    }
    if (st != CM_OK) {
        goto out;
    }
    const sp_mesh *mesh = sp_module_mesh(g.m, "mesh");
    /* the fixes: a constraint at the first divergence, re-planned, until none
     * is left (or MAX_FIXES, or a fixed value diverges again) */
    enum { MAX_FIXES = 8 };
    uint32_t fix_v[MAX_FIXES], fix_op[MAX_FIXES], n_fix = 0;
    const sp_sharding *fix_s[MAX_FIXES];
    bool cheaper = false;
    if (n_dv > 0) {
        const sp_cost_summary *gs = sp_cost_get_summary(g.cost), *ss = sp_cost_get_summary(s.cost);
        cheaper = gs->step_s < ss->step_s || gs->peak_bytes < ss->peak_bytes;
    }
    const sp_gspmd_divergence *first = n_dv > 0 ? &dv[0] : NULL;
    while (first != NULL && first->gspmd != NULL && n_fix < MAX_FIXES) {
        uint32_t v = g.m->ops[first->op].first_result + first->result;
        bool again = false;
        for (uint32_t k = 0; k < n_fix; k++) {
            again = again || fix_v[k] == v;
        }
        if (again) {
            break;
        }
        fix_v[n_fix] = v;
        fix_op[n_fix] = first->op;
        fix_s[n_fix] = first->gspmd;
        n_fix++;
        side_fini(&fix);
        cm_free(dv2);
        dv2 = NULL;
        n_dv2 = 0;
        st = shardy_side(text, len, fix_v, fix_s, n_fix, &fix, err);
        if (st == CM_OK) {
            st = sp_gspmd_divergences(g.m, fix.m, &dv2, &n_dv2, err);
        }
        if (st == CM_OK) {
            st = sp_cost_compute(fix.m, &co, &fix.cost, err);
        }
        if (st != CM_OK) {
            goto out;
        }
        first = n_dv2 > 0 ? &dv2[0] : NULL;
    }
    cm_buf sdy_line, jax_line;
    cm_buf_init(&sdy_line);
    cm_buf_init(&jax_line);
    bool spelled[MAX_FIXES];
    size_t sdy_at[MAX_FIXES], jax_at[MAX_FIXES];
    for (uint32_t k = 0; k < n_fix; k++) {
        const char *name = sp_value_name(g.m, fix_v[k]);
        sdy_at[k] = sdy_line.len;
        jax_at[k] = jax_line.len;
        cm_buf_puts(&sdy_line, "%c = sdy.sharding_constraint %v ");
        sp_sharding_print(fix_s[k], &sdy_line);
        cm_buf_printf(&sdy_line, " : %s", sp_value_type(g.m, fix_v[k])->text);
        cm_buf_printf(&jax_line, "%s = jax.lax.with_sharding_constraint(%s, NamedSharding(mesh, ",
                      name != NULL ? name : "x", name != NULL ? name : "x");
        spelled[k] = put_partition_spec(&jax_line, fix_s[k]);
        cm_buf_puts(&jax_line, "))");
        cm_buf_putc(&sdy_line, '\0');
        cm_buf_putc(&jax_line, '\0');
    }
    if (json) {
        cm_buf_puts(&b, "{\"format\":\"shardplan.migration/v1\",\"file\":");
        cm_json_put_cstr(&b, file);
        cm_buf_puts(&b, ",\"mesh\":");
        if (mesh != NULL) {
            cm_buf t;
            cm_buf_init(&t);
            sp_mesh_print(mesh, &t);
            cm_json_put_str(&b, t.data != NULL ? t.data : "", t.len);
            cm_buf_fini(&t);
        } else {
            cm_json_put_null(&b);
        }
        cm_buf_puts(&b, ",\n\"divergences\":");
        json_divergences(&b, g.m, s.m, dv, n_dv);
        cm_buf_puts(&b, ",\n\"cost\":{\"gspmd\":");
        json_cost(&b, g.cost);
        cm_buf_puts(&b, ",\"shardy\":");
        json_cost(&b, s.cost);
        cm_buf_puts(&b, "},\n\"fix\":");
        if (n_fix == 0) {
            cm_json_put_null(&b);
        } else {
            cm_buf_puts(&b, "{\"gspmd_cheaper\":");
            cm_json_put_bool(&b, cheaper);
            cm_buf_puts(&b, ",\"constraints\":[");
            for (uint32_t k = 0; k < n_fix && !sdy_line.oom && !jax_line.oom; k++) {
                const sp_op *o = &g.m->ops[fix_op[k]];
                cm_buf_printf(&b, "%s{\"op\":", k > 0 ? "," : "");
                cm_json_put_cstr(&b, o->name);
                cm_buf_printf(&b, ",\"line\":%u,\"col\":%u,\"sdy\":", o->line, o->col);
                cm_json_put_cstr(&b, sdy_line.data + sdy_at[k]);
                cm_buf_puts(&b, ",\"jax\":");
                cm_json_put_cstr(&b, jax_line.data + jax_at[k]);
                cm_buf_puts(&b, ",\"jax_spelled\":");
                cm_json_put_bool(&b, spelled[k]);
                cm_buf_putc(&b, '}');
            }
            cm_buf_printf(&b, "],\"divergences_after\":%u,\"cost\":", n_dv2);
            json_cost(&b, fix.cost);
            cm_buf_putc(&b, '}');
        }
        cm_buf_puts(&b, "}\n");
    } else {
        cm_buf_printf(&b, "migration of %s from GSPMD to Shardy\n", file);
        if (mesh != NULL) {
            cm_buf_puts(&b, "mesh @mesh = ");
            sp_mesh_print(mesh, &b);
            cm_buf_putc(&b, '\n');
        }
        cm_buf_printf(&b, "\n%u value(s) sharded differently (first first):\n", n_dv);
        for (uint32_t i = 0; i < n_dv; i++) {
            cm_buf_printf(&b, "  %u. ", i + 1);
            put_value(&b, g.m, dv[i].op, dv[i].result);
            cm_buf_puts(&b, "\n       GSPMD:  ");
            put_sharding(&b, dv[i].gspmd);
            cm_buf_puts(&b, "\n       Shardy: ");
            put_sharding(&b, dv[i].shardy);
            put_origins(&b, s.m, dv[i].op, dv[i].result);
            cm_buf_putc(&b, '\n');
        }
        cm_buf_putc(&b, '\n');
        put_costs(&b, "GSPMD", g.cost, "Shardy", s.cost);
        if (n_fix > 0 && !sdy_line.oom && !jax_line.oom) {
            cm_buf_printf(&b,
                          "\nGSPMD's choice is %s; to make Shardy take it, add (first "
                          "divergence first):\n",
                          cheaper ? "cheaper" : "not cheaper");
            for (uint32_t k = 0; k < n_fix; k++) {
                const sp_op *o = &g.m->ops[fix_op[k]];
                cm_buf_printf(&b, "  after %s at %u:%u\n", o->name, o->line, o->col);
                cm_buf_printf(&b, "    sdy: %s\n    jax: %s\n", sdy_line.data + sdy_at[k],
                              jax_line.data + jax_at[k]);
                if (!spelled[k]) {
                    cm_buf_puts(&b, "         (a sub-axis has no PartitionSpec spelling: name "
                                    "the mesh axes so it is whole)\n");
                }
            }
            cm_buf_printf(&b, "re-planned with %s: %u value(s) sharded differently\n",
                          n_fix == 1 ? "it" : "them", n_dv2);
            put_costs(&b, "GSPMD", g.cost, "Shardy+fix", fix.cost);
        }
    }
    if (sdy_line.oom || jax_line.oom || b.oom) {
        st = cm_error_oom(err);
    } else {
        cm_buf_append(out, b.data != NULL ? b.data : "", b.len);
        st = out->oom ? cm_error_oom(err) : CM_OK;
    }
    cm_buf_fini(&sdy_line);
    cm_buf_fini(&jax_line);
out:
    cm_buf_fini(&b);
    cm_free(dv);
    cm_free(dv2);
    side_fini(&g);
    side_fini(&s);
    side_fini(&fix);
    return st;
}
