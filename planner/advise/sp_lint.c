/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan advisor's lint and collective inventory (sp_lint.h,
 * docs/advisor.md). One run: read (planner/doc/sp_input.h), check the user's
 * shardings, propagate with the plan's pass and rules (origins recorded),
 * check I/O meshes and custom calls, partition, cost the partitioned module,
 * then look for gathers that are sliced again, memory over capacity, and
 * explain every collective. The cost figures are
 * sp_cost's; nothing here recomputes them. */
#include "sp_lint.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_collectives.h"
#include "sp_graph_json.h"
#include "sp_ops.h"
#include "sp_pipeline.h"
#include "sp_profile_json.h"
#include "sp_reshard.h"
#include "sp_rules.h"
#include "sp_diag.h"
#include "sp_mlir.h"

static const char *const kind_names[SP_LINT_N_KINDS] = {
    "non_divisible",     "custom_call_no_rule", "unmatched_logical_axis",
    "rematerialisation", "mesh_mismatch",       "memory_over_capacity",
    "sub_axis_at_boundary"};
static const char *const sev_names[] = {"info", "warning", "error"};

const char *sp_lint_kind_name(sp_lint_kind k)
{
    return (unsigned)k < SP_LINT_N_KINDS ? kind_names[k] : "?";
}

const char *sp_lint_sev_name(sp_lint_sev s)
{
    return (unsigned)s <= SP_LINT_ERROR ? sev_names[s] : "?";
}

struct sp_advise {
    cm_arena arena; /* every string of findings and collectives */
    sp_input in;    /* the input as read; owns m and g */
    sp_module *m;   /* in.m */
    sp_graph *g;    /* in.g: names of a graph document, or NULL */
    sp_cost *cost;
    sp_finding *f; /* heap */
    uint32_t n_f, cap_f;
    sp_advise_coll *colls; /* heap */
    uint32_t n_colls;
    const char *mesh; /* main mesh name (arena or module), or NULL */
    double min_bytes;
    uint32_t *use_start; /* CSR of value uses: users of v are use_op[use_start[v]..[v+1]) */
    uint32_t *use_op;
    const sp_sharding **pre; /* propagated sharding of each value before partitioning */
    uint32_t n_pre;
    bool oom;
};

void sp_advise_opts_init(sp_advise_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* ---- small helpers ------------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static const char *astr(sp_advise *a, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *s = cm_arena_strdup(&a->arena, buf);
    if (s == NULL) {
        a->oom = true;
        return "";
    }
    return s;
}

static const sp_mesh *mesh_of(const sp_module *m, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    return s->mesh != NULL        ? s->mesh
           : s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                  : NULL;
}

static int64_t ref_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0 && r->size > 0) {
        return r->size;
    }
    int32_t i = mesh != NULL ? sp_mesh_axis_index(mesh, r->name) : -1;
    return i >= 0 ? mesh->axes[i].size : 1;
}

static int64_t dim_shards(const sp_mesh *mesh, const sp_dim_sharding *d)
{
    int64_t p = 1;
    for (uint32_t k = 0; k < d->n_axes; k++) {
        p *= ref_size(mesh, &d->axes[k]);
    }
    return p;
}

/* Same axes on every dimension (open/closed and priorities aside). */
static bool same_axes(const sp_sharding *a, const sp_sharding *b)
{
    uint32_t ra = a != NULL ? a->rank : 0, rb = b != NULL ? b->rank : 0;
    for (uint32_t d = 0; d < (ra > rb ? ra : rb); d++) {
        uint32_t na = d < ra ? a->dims[d].n_axes : 0, nb = d < rb ? b->dims[d].n_axes : 0;
        if (na != nb) {
            return false;
        }
        for (uint32_t k = 0; k < na; k++) {
            const sp_axis_ref *x = &a->dims[d].axes[k], *y = &b->dims[d].axes[k];
            if (strcmp(x->name, y->name) != 0 || x->pre_size != y->pre_size ||
                (x->pre_size > 0 && x->size != y->size)) {
                return false;
            }
        }
    }
    return true;
}

static bool has_axes(const sp_sharding *s)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return true;
        }
    }
    return false;
}

/* Per-device bytes of a tensor of type t under s (NULL: replicated), with
 * dimension skip (SP_NONE: none) counted whole. */
static double local_bytes(const sp_module *m, const sp_type *t, const sp_sharding *s, uint32_t skip)
{
    if (t->kind != SP_TYPE_TENSOR) {
        return 0;
    }
    const sp_mesh *mesh = mesh_of(m, s);
    double e = (double)sp_elem_bytes(t->elem);
    for (uint32_t d = 0; d < t->rank; d++) {
        double n = t->dims[d] == SP_DIM_DYNAMIC ? 1 : (double)t->dims[d];
        if (s != NULL && d < s->rank && d != skip) {
            int64_t p = dim_shards(mesh, &s->dims[d]);
            n = p > 1 ? (double)((t->dims[d] + p - 1) / p) : n;
        }
        e *= n;
    }
    return e;
}

/* How a user names v: the graph name, %argN of a function, else "result N of OP". */
static const char *vname(sp_advise *a, uint32_t v)
{
    const char *gn = a->g != NULL ? sp_graph_value_name(a->g, v) : NULL;
    if (gn != NULL) {
        return astr(a, "%%%s", gn);
    }
    const sp_value *val = &a->m->values[v];
    if (val->def == SP_NONE) {
        return astr(a, "%%arg%u", val->index);
    }
    const sp_op *op = &a->m->ops[val->def];
    if (op->n_results == 1) {
        return astr(a, "the result of %s", op->name);
    }
    return astr(a, "result %u of %s", val->index, op->name);
}

/* The token a fix uses for v: its name when it has one, else %v. */
static const char *vtoken(sp_advise *a, uint32_t v)
{
    const char *gn = a->g != NULL ? sp_graph_value_name(a->g, v) : NULL;
    if (gn != NULL) {
        return astr(a, "%%%s", gn);
    }
    const sp_value *val = &a->m->values[v];
    return val->def == SP_NONE ? astr(a, "%%arg%u", val->index) : "%v";
}

/* Shardy text of s with dimension d replaced by axes[0..n) (d = SP_NONE: as is),
 * on mesh_name when s is NULL (rank dims). */
static void fix_texts(sp_advise *a, const sp_sharding *s, const char *mesh_name, uint32_t rank,
                      uint32_t d, const char *const *axes, uint32_t n, uint32_t v,
                      const char *token, const char **shardy, const char **jax)
{
    cm_buf b, p;
    cm_buf_init(&b);
    cm_buf_init(&p);
    sp_advise_target t;
    if (v != SP_NONE) {
        sp_advise_target_of(a->m, a->g, v, &t);
    }
    sp_advise_fix_write(s, mesh_name, rank, d, axes, n, token, v != SP_NONE ? &t : NULL, &b, &p);
    if (b.oom || p.oom) {
        a->oom = true;
        *shardy = *jax = "";
    } else {
        *shardy = astr(a, "%s", b.data);
        *jax = astr(a, "%s", p.data);
    }
    cm_buf_fini(&b);
    cm_buf_fini(&p);
}

/* "model.py:14" from op's location (arena), or "". */
static const char *op_source(sp_advise *a, uint32_t op)
{
    char buf[512];
    return sp_op_source(a->m, op, buf, sizeof buf) ? astr(a, "%s", buf) : "";
}

static sp_finding *add_finding(sp_advise *a, sp_lint_kind k, sp_lint_sev sev, uint32_t op,
                               const char *value, double bytes)
{
    if (bytes < a->min_bytes && k != SP_LINT_MESH_MISMATCH && k != SP_LINT_MEMORY) {
        return NULL;
    }
    if (a->n_f == a->cap_f) {
        uint32_t cap = a->cap_f == 0 ? 16 : a->cap_f * 2;
        sp_finding *p = cm_realloc(a->f, sizeof *p * cap);
        if (p == NULL) {
            a->oom = true;
            return NULL;
        }
        a->f = p;
        a->cap_f = cap;
    }
    sp_finding *f = &a->f[a->n_f++];
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->sev = sev;
    f->value = value;
    f->bytes = bytes;
    f->op = "";
    f->loc = "";
    f->source = "";
    f->message = f->fix_shardy = f->fix_jax = "";
    if (op != SP_NONE) {
        const sp_op *o = &a->m->ops[op];
        f->op = o->name;
        f->line = o->line;
        f->loc = o->loc != NULL ? o->loc : "";
        f->source = op_source(a, op);
    }
    return f;
}

/* For a function argument v, the loc JAX gives it (its argument path) on f. */
static void arg_loc(const sp_advise *a, sp_finding *f, uint32_t v)
{
    const sp_value *val = &a->m->values[v];
    if (f == NULL || v == SP_NONE || val->def != SP_NONE || val->block == SP_NONE) {
        return;
    }
    const sp_block *b = &a->m->blocks[val->block];
    if (b->arg_locs != NULL && val->index < b->n_args && b->arg_locs[val->index] != NULL) {
        f->loc = b->arg_locs[val->index];
    }
}

/* The func.func op that owns block argument v, or SP_NONE. */
static uint32_t func_of_arg(const sp_module *m, uint32_t v)
{
    uint32_t blk = m->values[v].block;
    if (blk == SP_NONE) {
        return SP_NONE;
    }
    uint32_t p = m->blocks[blk].parent_op;
    return p != SP_NONE && m->ops[p].kind == SP_OP_FUNC_FUNC ? p : SP_NONE;
}

static uint32_t func_return(const sp_module *m, uint32_t fn)
{
    const sp_op *f = &m->ops[fn];
    if (f->n_regions != 1 || f->regions[0].n_blocks == 0) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[f->regions[0].blocks[0]];
    return b->n_ops > 0 && m->ops[b->ops[b->n_ops - 1]].kind == SP_OP_FUNC_RETURN
               ? b->ops[b->n_ops - 1]
               : SP_NONE;
}

/* ---- (a) non-divisible dimensions in the user's shardings ------------------------------ */

static void check_divisible(sp_advise *a, uint32_t op, uint32_t v, const sp_type *t,
                            const sp_sharding *s)
{
    if (s == NULL || t->kind != SP_TYPE_TENSOR || s->rank != t->rank) {
        return;
    }
    const sp_mesh *mesh = mesh_of(a->m, s);
    for (uint32_t d = 0; d < s->rank; d++) {
        int64_t dim = t->dims[d], p = dim_shards(mesh, &s->dims[d]);
        if (dim == SP_DIM_DYNAMIC || p <= 1 || dim % p == 0) {
            continue;
        }
        /* the longest prefix of the axes that divides the dimension */
        const char *keep[SP_COST_MAX_COLL_AXES];
        uint32_t n = 0;
        int64_t q = 1;
        for (uint32_t k = 0; k < s->dims[d].n_axes && n < SP_COST_MAX_COLL_AXES; k++) {
            q *= ref_size(mesh, &s->dims[d].axes[k]);
            if (dim % q != 0) {
                break;
            }
            keep[n++] = s->dims[d].axes[k].name;
        }
        double bytes = local_bytes(a->m, t, s, d) - local_bytes(a->m, t, s, SP_NONE);
        const char *name = vname(a, v);
        sp_finding *f = add_finding(a, SP_LINT_NON_DIVISIBLE, SP_LINT_WARNING, op, name, bytes);
        if (f == NULL) {
            return;
        }
        arg_loc(a, f, v);
        f->message = astr(a,
                          "dimension %u of %s has size %lld, not divisible by the %lld devices of "
                          "its axes: function inputs and outputs drop the axes "
                          "(-sdy-update-non-divisible-input-output-shardings) and other tensors "
                          "are padded",
                          d, name, (long long)dim, (long long)p);
        fix_texts(a, s, NULL, s->rank, d, keep, n, v, vtoken(a, v), &f->fix_shardy, &f->fix_jax);
    }
}

static void lint_user_shardings(sp_advise *a)
{
    sp_module *m = a->m;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_FUNC_FUNC) {
            if (op->n_regions != 1 || op->regions[0].n_blocks == 0) {
                continue;
            }
            const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
            for (uint32_t k = 0; k < b->n_args; k++) {
                uint32_t v = b->first_arg + k;
                check_divisible(a, i, v, sp_value_type(m, v), sp_value_sharding(m, v));
            }
            uint32_t ret = func_return(m, i);
            for (uint32_t k = 0; ret != SP_NONE && k < m->ops[ret].n_operands; k++) {
                uint32_t v = m->ops[ret].operands[k];
                check_divisible(a, ret, v, sp_value_type(m, v), sp_func_result_sharding(m, i, k));
            }
        } else if (op->parent_block != SP_NONE) {
            for (uint32_t r = 0; r < op->n_results; r++) {
                uint32_t v = op->first_result + r;
                check_divisible(a, i, v, sp_value_type(m, v), sp_value_sharding(m, v));
            }
        }
    }
}

/* ---- (a) custom calls without a rule ------------------------------------------------- */

static cm_status find_ruleless_calls(sp_advise *a, const sp_custom_rules *custom, uint32_t **out,
                                     uint32_t *n_out, cm_error *err)
{
    *out = NULL;
    *n_out = 0;
    sp_module *m = a->m;
    sp_rule_opts ro = {false, custom, false};
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind != SP_OP_CUSTOM_CALL || m->ops[i].parent_block == SP_NONE ||
            sp_op_attr(m, i, "sdy.sharding_rule") != NULL) {
            continue;
        }
        sp_rule *rule = NULL;
        cm_status st = sp_rule_for_op(m, i, &ro, &rule, NULL, err);
        bool none = st == CM_OK && rule == NULL; /* unknown, or a callback or kernel */
        if (st == CM_ENOMEM) {
            return st;
        }
        cm_error_clear(err);
        if (!none) {
            continue;
        }
        uint32_t *p = cm_arena_alloc(&a->arena, sizeof *p * (*n_out + 1));
        if (p == NULL) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
        }
        if (*n_out > 0) {
            memcpy(p, *out, sizeof *p * *n_out);
        }
        p[(*n_out)++] = i;
        *out = p;
    }
    return CM_OK;
}

/* True for a custom call whose partitioning is GSPMD callbacks (JAX's
 * custom_partitioning without a sharding_rule lowers to
 * @CustomSPMDPartitioning, its callbacks named by the backend config):
 * Shardy cannot run them ("Shardy is used, but sharding propagation
 * callbacks instead of sharding_rule are provided"). */
static bool has_gspmd_callbacks(const char *target)
{
    return strcmp(target, "CustomSPMDPartitioning") == 0;
}

/* The name of factor f in a candidate rule: i, j, ..., then f26, f27... */
static void put_factor(cm_buf *b, uint32_t f)
{
    static const char names[] = "ijklmnopqrstuvwxyzabcdefgh";
    if (f < sizeof names - 1) {
        cm_buf_putc(b, names[f]);
    } else {
        cm_buf_printf(b, "f%u", f);
    }
}

enum { RULE_MAX_TENSORS = 16, RULE_MAX_DIMS = 64 };

/* Appends one candidate in JAX's sharding_rule syntax ("i j, j k -> i k")
 * for the n tensors of ty (operands first, n_in of them), dimension d of
 * tensor t having factor fac[t][d]. */
static void put_rule(cm_buf *b, const sp_type *const *ty, uint32_t n, uint32_t n_in,
                     uint32_t fac[RULE_MAX_TENSORS][RULE_MAX_DIMS])
{
    cm_buf_putc(b, '"');
    for (uint32_t t = 0; t < n; t++) {
        cm_buf_puts(b, t == n_in ? " -> " : (t > 0 ? ", " : ""));
        for (uint32_t d = 0; d < ty[t]->rank; d++) {
            cm_buf_puts(b, d > 0 ? " " : "");
            put_factor(b, fac[t][d]);
        }
    }
    cm_buf_putc(b, '"');
}

/* Candidate sharding_rule strings for custom call op from its operand and
 * result shapes, appended to b as `"..." (what it assumes)`, separated by
 * "; ". Two readings: elementwise (every operand and result the same
 * shape: one factor per dimension, shared by all), and by size (a
 * dimension shares the factor of same-sized dimensions of the other
 * tensors, the k-th dimension of a size in a tensor matching the k-th of
 * that size elsewhere; sizes found only in operands are reductions, as in
 * a matmul "i j, j k -> i k"). False when the shapes give none (a
 * non-tensor, dynamic or too many dimensions). */
static bool rule_candidates(const sp_module *m, uint32_t op, cm_buf *b)
{
    const sp_op *o = &m->ops[op];
    uint32_t n = o->n_operands + o->n_results, n_in = o->n_operands;
    if (n == 0 || o->n_results == 0 || n > RULE_MAX_TENSORS) {
        return false;
    }
    const sp_type *ty[RULE_MAX_TENSORS];
    for (uint32_t t = 0; t < n; t++) {
        uint32_t v = t < n_in ? o->operands[t] : o->first_result + (t - n_in);
        ty[t] = sp_value_type(m, v);
        if (ty[t] == NULL || ty[t]->kind != SP_TYPE_TENSOR || ty[t]->rank > RULE_MAX_DIMS) {
            return false;
        }
        for (uint32_t d = 0; d < ty[t]->rank; d++) {
            if (ty[t]->dims[d] == SP_DIM_DYNAMIC) {
                return false;
            }
        }
    }
    uint32_t fac[RULE_MAX_TENSORS][RULE_MAX_DIMS];
    bool any = false;
    /* elementwise: all shapes equal */
    bool same = true;
    for (uint32_t t = 1; t < n && same; t++) {
        same = ty[t]->rank == ty[0]->rank &&
               memcmp(ty[t]->dims, ty[0]->dims, sizeof(int64_t) * ty[0]->rank) == 0;
    }
    if (same && ty[0]->rank > 0) {
        for (uint32_t t = 0; t < n; t++) {
            for (uint32_t d = 0; d < ty[t]->rank; d++) {
                fac[t][d] = d;
            }
        }
        put_rule(b, ty, n, n_in, fac);
        cm_buf_puts(b, " (elementwise)");
        any = true;
    }
    /* by size: factor of (size, k-th occurrence in its tensor) */
    int64_t key_size[RULE_MAX_TENSORS * RULE_MAX_DIMS];
    uint32_t key_occ[RULE_MAX_TENSORS * RULE_MAX_DIMS], n_keys = 0;
    bool shared = false;
    /* results first, so that their factors come first in the names */
    for (uint32_t pass = 0; pass < 2; pass++) {
        for (uint32_t t = pass == 0 ? n_in : 0; t < (pass == 0 ? n : n_in); t++) {
            for (uint32_t d = 0; d < ty[t]->rank; d++) {
                uint32_t occ = 0;
                for (uint32_t e = 0; e < d; e++) {
                    occ += ty[t]->dims[e] == ty[t]->dims[d];
                }
                uint32_t f = 0;
                while (f < n_keys && (key_size[f] != ty[t]->dims[d] || key_occ[f] != occ)) {
                    f++;
                }
                if (f == n_keys) {
                    key_size[n_keys] = ty[t]->dims[d];
                    key_occ[n_keys++] = occ;
                } else {
                    shared = true;
                }
                fac[t][d] = f;
            }
        }
    }
    if (shared && !same) {
        cm_buf_puts(b, any ? "; " : "");
        put_rule(b, ty, n, n_in, fac);
        cm_buf_puts(b, " (dimensions matched by size)");
        any = true;
    }
    return any;
}

static void lint_custom_calls(sp_advise *a, const uint32_t *ops, uint32_t n)
{
    sp_module *m = a->m;
    for (uint32_t k = 0; k < n; k++) {
        const sp_op *op = &m->ops[ops[k]];
        if (op->n_results == 0) {
            continue;
        }
        uint32_t v = op->first_result;
        double bytes = 0;
        for (uint32_t r = 0; r < op->n_results; r++) {
            bytes += local_bytes(m, sp_value_type(m, v + r), sp_value_sharding_partitioned(m, v + r), SP_NONE);
        }
        const sp_attr *tg = sp_op_attr(m, ops[k], "call_target_name");
        const char *target = tg != NULL && tg->kind == SP_ATTR_STRING ? tg->u.str.s : "?";
        sp_finding *f =
            add_finding(a, SP_LINT_CUSTOM_CALL, SP_LINT_WARNING, ops[k], vname(a, v), bytes);
        if (f == NULL) {
            continue;
        }
        cm_buf cand;
        cm_buf_init(&cand);
        if (has_gspmd_callbacks(target) && rule_candidates(m, ops[k], &cand) && !cand.oom) {
            f->message = astr(a,
                              "custom_call @%s has GSPMD sharding propagation callbacks and no "
                              "sdy.sharding_rule: Shardy cannot run the callbacks (\"Shardy is "
                              "used, but sharding propagation callbacks instead of sharding_rule "
                              "are provided\"), so propagation stops at it; give "
                              "custom_partitioning a sharding_rule, candidates from the operand "
                              "and result shapes: %s",
                              target, cand.data);
        } else {
            f->message = astr(a,
                              "custom_call @%s has no sharding rule: propagation stops at it and "
                              "its results stay as they are (replicated unless annotated); "
                              "register a rule (custom_partitioning sharding_rule=..., or "
                              "\"custom_rules\" in the graph) or constrain its result",
                              target);
        }
        cm_buf_fini(&cand);
        /* suggest the first operand's sharding when shapes agree */
        const sp_type *rt = sp_value_type(m, v);
        const sp_sharding *s = NULL;
        for (uint32_t i = 0; i < op->n_operands && s == NULL; i++) {
            const sp_type *ot = sp_value_type(m, op->operands[i]);
            const sp_sharding *os = sp_value_sharding_partitioned(m, op->operands[i]);
            if (ot->kind == SP_TYPE_TENSOR && rt->kind == SP_TYPE_TENSOR && ot->rank == rt->rank &&
                has_axes(os)) {
                s = os;
            }
        }
        fix_texts(a, s, a->mesh, rt->kind == SP_TYPE_TENSOR ? rt->rank : 0, SP_NONE, NULL, 0, v,
                  vtoken(a, v), &f->fix_shardy, &f->fix_jax);
    }
}

/* ---- (a) unmatched logical axis names -------------------------------------------------- */

static uint32_t value_named(sp_advise *a, const char *name)
{
    if (a->g == NULL || name[0] == '\0') {
        return SP_NONE;
    }
    for (uint32_t v = 0; v < a->m->n_values; v++) {
        const char *n = sp_graph_value_name(a->g, v);
        if (n != NULL && strcmp(n, name) == 0) {
            return v;
        }
    }
    return SP_NONE;
}

/* The first mesh axis not used by s that divides dimension d of t. */
static const char *free_axis(const sp_module *m, const sp_mesh *mesh, const sp_sharding *s,
                             const sp_type *t, uint32_t d)
{
    for (uint32_t i = 0; mesh != NULL && i < mesh->n_axes; i++) {
        bool used = false;
        for (uint32_t k = 0; s != NULL && k < s->rank && !used; k++) {
            for (uint32_t j = 0; j < s->dims[k].n_axes; j++) {
                used = used || strcmp(s->dims[k].axes[j].name, mesh->axes[i].name) == 0;
            }
        }
        if (!used && t->dims[d] != SP_DIM_DYNAMIC && mesh->axes[i].size > 1 &&
            t->dims[d] % mesh->axes[i].size == 0) {
            return mesh->axes[i].name;
        }
    }
    (void)m;
    return NULL;
}

/* One finding per unmatched logical name: the bytes of every tensor that
 * carries it, the first such tensor as the example and for the fix. */
static void lint_logical(sp_advise *a, const sp_logical_miss *miss, uint32_t n)
{
    sp_module *m = a->m;
    for (uint32_t i = 0; i < n; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++) {
            seen = strcmp(miss[j].logical, miss[i].logical) == 0;
        }
        if (seen) {
            continue;
        }
        double bytes = 0;
        uint32_t n_vals = 0;
        for (uint32_t j = i; j < n; j++) {
            if (strcmp(miss[j].logical, miss[i].logical) != 0) {
                continue;
            }
            uint32_t v = value_named(a, miss[j].value);
            if (v != SP_NONE) {
                bytes += local_bytes(m, sp_value_type(m, v), sp_value_sharding_partitioned(m, v), SP_NONE);
            }
            n_vals++;
        }
        uint32_t v = value_named(a, miss[i].value);
        const sp_type *t = v != SP_NONE ? sp_value_type(m, v) : NULL;
        const sp_sharding *s = v != SP_NONE ? sp_value_sharding_partitioned(m, v) : NULL;
        uint32_t op = v != SP_NONE ? m->values[v].def : SP_NONE;
        if (op == SP_NONE && v != SP_NONE) {
            op = func_of_arg(m, v);
        }
        sp_finding *f = add_finding(a, SP_LINT_LOGICAL_AXIS, SP_LINT_WARNING, op,
                                    astr(a, "%%%s", miss[i].value), bytes);
        if (f == NULL) {
            continue;
        }
        if (v != SP_NONE) {
            arg_loc(a, f, v);
        }
        const sp_mesh *mesh = a->mesh != NULL ? sp_module_mesh(m, a->mesh) : NULL;
        const char *ax = t != NULL && t->kind == SP_TYPE_TENSOR && miss[i].dim < t->rank
                             ? free_axis(m, mesh, s, t, miss[i].dim)
                             : NULL;
        f->message =
            astr(a,
                 "logical axis \"%s\" matches no logical_axis_rules entry, so %u "
                 "tensor dimension%s named by it stay replicated (first: dimension %u "
                 "of %%%s at %s); add a rule [\"%s\", \"%s\"], or [\"%s\", null] to "
                 "make the replication explicit",
                 miss[i].logical, n_vals, n_vals == 1 ? "" : "s", miss[i].dim, miss[i].value,
                 miss[i].path, miss[i].logical, ax != NULL ? ax : "<mesh axis>", miss[i].logical);
        if (t != NULL && t->kind == SP_TYPE_TENSOR) {
            fix_texts(a, s, a->mesh, t->rank, ax != NULL ? miss[i].dim : SP_NONE, &ax,
                      ax != NULL ? 1 : 0, v, astr(a, "%%%s", miss[i].value), &f->fix_shardy,
                      &f->fix_jax);
        }
    }
}

/* ---- (c) inputs and outputs on different meshes -------------------------------------- */

static bool is_root_func(const sp_module *m, uint32_t fn)
{
    const sp_attr *vis = sp_op_attr(m, fn, "sym_visibility");
    return vis == NULL || vis->kind != SP_ATTR_STRING || strcmp(vis->u.str.s, "private") != 0;
}

/* The entry block of fn when it is a root function with a body, else NULL. */
static const sp_block *root_entry(const sp_module *m, uint32_t fn)
{
    const sp_op *o = &m->ops[fn];
    if (o->kind != SP_OP_FUNC_FUNC || !is_root_func(m, fn) || o->n_regions != 1 ||
        o->regions[0].n_blocks == 0) {
        return NULL;
    }
    return &m->blocks[o->regions[0].blocks[0]];
}

static void mesh_check(sp_advise *a, uint32_t op, uint32_t v, const sp_sharding *s,
                       const char *what)
{
    if (s == NULL || s->mesh_name == NULL) {
        return;
    }
    if (a->mesh == NULL) {
        a->mesh = s->mesh_name;
        return;
    }
    if (strcmp(a->mesh, s->mesh_name) == 0) {
        return;
    }
    const sp_mesh *mm = sp_module_mesh(a->m, a->mesh), *om = mesh_of(a->m, s);
    /* shardings whose mesh has no devices to split (maximal meshes) are placements */
    if (om != NULL && om->n_axes == 0) {
        return;
    }
    const sp_type *t = sp_value_type(a->m, v);
    sp_finding *f = add_finding(a, SP_LINT_MESH_MISMATCH, SP_LINT_ERROR, op, vname(a, v),
                                local_bytes(a->m, t, s, SP_NONE));
    if (f == NULL) {
        return;
    }
    arg_loc(a, f, v);
    f->message = astr(a,
                      "%s %s is on mesh @%s while the other inputs and outputs are on @%s: "
                      "jax.export needs every input and output on one mesh",
                      what, f->value, s->mesh_name, a->mesh);
    /* keep the axes the main mesh has too */
    sp_sharding tmp = *s;
    sp_dim_sharding dims[SP_MAX_RANK];
    for (uint32_t d = 0; d < s->rank && d < SP_MAX_RANK; d++) {
        dims[d] = s->dims[d];
        bool all = true;
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            all = all && mm != NULL && sp_mesh_axis_index(mm, s->dims[d].axes[k].name) >= 0;
        }
        dims[d].n_axes = all ? dims[d].n_axes : 0;
    }
    tmp.dims = dims;
    tmp.mesh_name = a->mesh;
    fix_texts(a, &tmp, a->mesh, t->kind == SP_TYPE_TENSOR ? t->rank : 0, SP_NONE, NULL, 0, v,
              vtoken(a, v), &f->fix_shardy, &f->fix_jax);
}

static void lint_meshes(sp_advise *a)
{
    sp_module *m = a->m;
    const sp_block *body = &m->blocks[m->body];
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < body->n_ops; i++) {
            uint32_t fn = body->ops[i];
            const sp_block *b = root_entry(m, fn);
            if (b == NULL) {
                continue;
            }
            for (uint32_t k = 0; k < b->n_args; k++) {
                if (pass == 1 || a->mesh == NULL) {
                    mesh_check(a, fn, b->first_arg + k, sp_value_sharding(m, b->first_arg + k),
                               "input");
                }
            }
            uint32_t ret = func_return(m, fn);
            for (uint32_t k = 0; pass == 1 && ret != SP_NONE && k < m->ops[ret].n_operands; k++) {
                mesh_check(a, ret, m->ops[ret].operands[k], sp_func_result_sharding(m, fn, k),
                           "output");
            }
        }
    }
}

/* ---- (d) sub-axes at the function boundary ----------------------------------------------- */

/* The first sub-axis reference of s (NULL when none), its dimension in *dim. */
static const sp_axis_ref *first_sub_axis(const sp_sharding *s, uint32_t *dim)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            if (s->dims[d].axes[k].pre_size > 0) {
                *dim = d;
                return &s->dims[d].axes[k];
            }
        }
    }
    return NULL;
}

static bool has_sub_axis_of(const sp_sharding *s, const char *axis)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            if (s->dims[d].axes[k].pre_size > 0 && strcmp(s->dims[d].axes[k].name, axis) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* The reshape of block b that put the sub-axis of `axis` on v: among the
 * reshapes that v depends on (an output) or that depend on v (an input), the
 * nearest to v whose operand or result has such a sub-axis. mark is a
 * scratch bitmap over values. SP_NONE when none is found. */
static uint32_t sub_axis_reshape(const sp_module *m, const sp_block *b, uint32_t v,
                                 bool is_input, const char *axis, uint8_t *mark)
{
    memset(mark, 0, ((size_t)m->n_values + 7) / 8);
#define MARKED(x) ((mark[(x) >> 3] >> ((x) & 7)) & 1)
#define MARK(x)   (mark[(x) >> 3] |= (uint8_t)(1u << ((x) & 7)))
    MARK(v);
    uint32_t found = SP_NONE;
    for (uint32_t i = 0; i < b->n_ops; i++) {
        uint32_t op = is_input ? b->ops[i] : b->ops[b->n_ops - 1 - i];
        const sp_op *o = &m->ops[op];
        bool hit = false;
        if (is_input) {
            for (uint32_t k = 0; k < o->n_operands && !hit; k++) {
                hit = MARKED(o->operands[k]);
            }
        } else {
            for (uint32_t k = 0; k < o->n_results && !hit; k++) {
                hit = MARKED(o->first_result + k);
            }
            hit = hit || o->kind == SP_OP_FUNC_RETURN;
        }
        if (!hit) {
            continue;
        }
        if (o->kind == SP_OP_RESHAPE && o->n_operands == 1 && o->n_results == 1 &&
            (has_sub_axis_of(sp_value_sharding(m, o->operands[0]), axis) ||
             has_sub_axis_of(sp_value_sharding(m, o->first_result), axis))) {
            found = op;
            break;
        }
        if (is_input) {
            for (uint32_t k = 0; k < o->n_results; k++) {
                MARK(o->first_result + k);
            }
        } else if (o->kind != SP_OP_FUNC_RETURN) {
            for (uint32_t k = 0; k < o->n_operands; k++) {
                MARK(o->operands[k]);
            }
        }
    }
#undef MARKED
#undef MARK
    return found;
}

static void sub_axis_check(sp_advise *a, const sp_block *b, uint32_t fn, uint32_t v,
                           const sp_sharding *s, bool is_input, uint32_t idx, uint8_t *mark)
{
    uint32_t dim = 0;
    const sp_axis_ref *sub = first_sub_axis(s, &dim);
    const sp_type *t = sp_value_type(a->m, v);
    if (sub == NULL || t->kind != SP_TYPE_TENSOR || dim >= t->rank) {
        return;
    }
    const sp_mesh *mesh = mesh_of(a->m, s);
    /* the fix: every dimension keeps its full axes; an axis that was there
       only as sub-axes goes whole to the first dimension it divides, if any */
    sp_sharding fixed = *s;
    sp_dim_sharding dims[SP_MAX_RANK];
    sp_axis_ref refs[SP_MAX_RANK * 4];
    uint32_t nr = 0;
    int64_t prod[SP_MAX_RANK];
    for (uint32_t d = 0; d < s->rank && d < SP_MAX_RANK; d++) {
        dims[d] = s->dims[d];
        dims[d].axes = refs + nr;
        dims[d].n_axes = 0;
        prod[d] = 1;
        for (uint32_t k = 0; k < s->dims[d].n_axes && nr < SP_MAX_RANK * 4; k++) {
            if (s->dims[d].axes[k].pre_size == 0) {
                refs[nr++] = s->dims[d].axes[k];
                dims[d].n_axes++;
                prod[d] *= ref_size(mesh, &s->dims[d].axes[k]);
            }
        }
    }
    fixed.dims = dims;
    for (uint32_t d = 0; d < s->rank && d < SP_MAX_RANK; d++) {
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            const sp_axis_ref *r = &s->dims[d].axes[k];
            int32_t ai = mesh != NULL ? sp_mesh_axis_index(mesh, r->name) : -1;
            bool used = false;
            for (uint32_t e = 0; e < s->rank && e < SP_MAX_RANK && !used; e++) {
                for (uint32_t j = 0; j < dims[e].n_axes && !used; j++) {
                    used = strcmp(dims[e].axes[j].name, r->name) == 0;
                }
            }
            if (r->pre_size == 0 || used || ai < 0) {
                continue;
            }
            for (uint32_t e = 0; e < s->rank && e < SP_MAX_RANK; e++) {
                int64_t want = prod[e] * mesh->axes[ai].size;
                /* a dimension grows in place only when its axes end refs */
                bool at_end = dims[e].n_axes == 0 || dims[e].axes + dims[e].n_axes == refs + nr;
                if (t->dims[e] != SP_DIM_DYNAMIC && t->dims[e] % want == 0 && at_end &&
                    nr < SP_MAX_RANK * 4) {
                    if (dims[e].n_axes == 0) {
                        dims[e].axes = refs + nr;
                    }
                    refs[nr].name = r->name;
                    refs[nr].pre_size = 0;
                    refs[nr].size = mesh->axes[ai].size;
                    nr++;
                    dims[e].n_axes++;
                    prod[e] = want;
                    break;
                }
            }
        }
    }
    double now = local_bytes(a->m, t, s, SP_NONE);
    double after = local_bytes(a->m, t, &fixed, SP_NONE);
    /* only sub-axes a reshape made: the ones -sdy-update-non-divisible-input-
       output-shardings leaves are the non_divisible finding's */
    uint32_t rs = sub_axis_reshape(a->m, b, v, is_input, sub->name, mark);
    if (rs == SP_NONE) {
        return;
    }
    sp_finding *f = add_finding(a, SP_LINT_SUB_AXIS, SP_LINT_WARNING, rs, vname(a, v),
                                after > now ? after - now : 0);
    if (f == NULL) {
        return;
    }
    if (is_input) {
        arg_loc(a, f, v); /* the argument's own loc (its JAX path) when it has one */
    }
    const char *fname = "";
    const sp_attr *nm = sp_op_attr(a->m, fn, "sym_name");
    if (nm != NULL && nm->kind == SP_ATTR_STRING) {
        fname = nm->u.str.s;
    }
    cm_buf from;
    cm_buf_init(&from);
    {
        const sp_type *it = sp_value_type(a->m, a->m->ops[rs].operands[0]);
        const sp_type *ot = sp_value_type(a->m, a->m->ops[rs].first_result);
        cm_buf_printf(&from, "; it comes from the stablehlo.reshape at line %u", a->m->ops[rs].line);
        if (it->kind == SP_TYPE_TENSOR && ot->kind == SP_TYPE_TENSOR) {
            cm_buf_puts(&from, " (");
            for (uint32_t d = 0; d < it->rank; d++) {
                cm_buf_printf(&from, "%s%lld", d > 0 ? "x" : "", (long long)it->dims[d]);
            }
            cm_buf_puts(&from, " -> ");
            for (uint32_t d = 0; d < ot->rank; d++) {
                cm_buf_printf(&from, "%s%lld", d > 0 ? "x" : "", (long long)ot->dims[d]);
            }
            cm_buf_printf(&from, "), which splits or merges a dimension sharded on \"%s\"",
                          sub->name);
        }
    }
    f->message = astr(a,
                      "%s %u of @%s (%s) has dimension %u sharded on the sub-axis \"%s\":(%lld)%lld, "
                      "which a JAX PartitionSpec cannot express (jax.jit in_shardings/out_shardings, "
                      "jax.export)%s",
                      is_input ? "input" : "output", idx, fname, f->value, dim, sub->name,
                      (long long)sub->pre_size, (long long)sub->size,
                      from.oom ? "" : from.data != NULL ? from.data : "");
    cm_buf_fini(&from);
    fix_texts(a, &fixed, s->mesh_name, t->rank, SP_NONE, NULL, 0, v, vtoken(a, v), &f->fix_shardy,
              &f->fix_jax);
}

/* Root-function inputs and outputs whose propagated sharding uses a sub-axis:
 * JAX cannot write it in a PartitionSpec. */
static void lint_sub_axes(sp_advise *a)
{
    sp_module *m = a->m;
    uint8_t *mark = cm_alloc(((size_t)m->n_values + 8) / 8);
    if (mark == NULL) {
        a->oom = true;
        return;
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t fn = body->ops[i];
        const sp_block *b = root_entry(m, fn);
        if (b == NULL) {
            continue;
        }
        for (uint32_t k = 0; k < b->n_args; k++) {
            sub_axis_check(a, b, fn, b->first_arg + k, sp_value_sharding(m, b->first_arg + k),
                           true, k, mark);
        }
        uint32_t ret = func_return(m, fn);
        for (uint32_t k = 0; ret != SP_NONE && k < m->ops[ret].n_operands; k++) {
            sub_axis_check(a, b, fn, m->ops[ret].operands[k], sp_func_result_sharding(m, fn, k),
                           false, k, mark);
        }
    }
    cm_free(mark);
}

/* ---- uses ------------------------------------------------------------------------------ */

static cm_status build_uses(sp_advise *a, cm_error *err)
{
    sp_module *m = a->m;
    a->use_start = cm_calloc((size_t)m->n_values + 2, sizeof(uint32_t));
    if (a->use_start == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
    }
    size_t total = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            a->use_start[m->ops[i].operands[k] + 1]++;
            total++;
        }
    }
    for (uint32_t v = 0; v < m->n_values; v++) {
        a->use_start[v + 1] += a->use_start[v];
    }
    a->use_op = cm_alloc(sizeof(uint32_t) * (total + 1));
    uint32_t *fill = cm_alloc(sizeof(uint32_t) * ((size_t)m->n_values + 1));
    if (a->use_op == NULL || fill == NULL) {
        cm_free(fill);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
    }
    memcpy(fill, a->use_start, sizeof(uint32_t) * m->n_values);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block == SP_NONE) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[i].n_operands; k++) {
            a->use_op[fill[m->ops[i].operands[k]]++] = i;
        }
    }
    cm_free(fill);
    return CM_OK;
}

/* Walks back from v through collectives and reshards to the value they move. */
static uint32_t source_of(const sp_module *m, uint32_t v)
{
    for (int guard = 0; guard < 64; guard++) {
        uint32_t d = m->values[v].def;
        if (d == SP_NONE || !sp_op_is_sdy_collective((sp_op_kind)m->ops[d].kind) ||
            m->ops[d].n_operands == 0) {
            break;
        }
        v = m->ops[d].operands[0];
    }
    return v;
}

/* The first op using v (following collectives and reshards) that is not one. */
static uint32_t consumer_of(const sp_advise *a, uint32_t v, uint32_t *moved_out)
{
    const sp_module *m = a->m;
    *moved_out = v;
    for (int guard = 0; guard < 64; guard++) {
        if (a->use_start[v] == a->use_start[v + 1]) {
            return SP_NONE;
        }
        uint32_t u = a->use_op[a->use_start[v]];
        if (!sp_op_is_sdy_collective((sp_op_kind)m->ops[u].kind) || m->ops[u].n_results == 0) {
            *moved_out = v;
            return u;
        }
        v = m->ops[u].first_result;
    }
    return SP_NONE;
}

/* ---- (b) gathered to replicated, then sliced again ----------------------------------- */

static void lint_remat(sp_advise *a)
{
    sp_module *m = a->m;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *g = &m->ops[i];
        if (g->kind != SP_OP_SDY_ALL_GATHER || g->parent_block == SP_NONE || g->n_results == 0 ||
            has_axes(sp_value_sharding_partitioned(m, g->first_result))) {
            continue;
        }
        /* breadth-first over aliases and collectives, looking for a re-slice */
        uint32_t queue[32], nq = 0, resliced = SP_NONE;
        const sp_sharding *target = NULL;
        queue[nq++] = g->first_result;
        for (uint32_t qi = 0; qi < nq && resliced == SP_NONE; qi++) {
            uint32_t v = queue[qi];
            for (uint32_t k = a->use_start[v]; k < a->use_start[v + 1]; k++) {
                uint32_t u = a->use_op[k];
                const sp_op *uo = &m->ops[u];
                if (uo->n_results == 0) {
                    continue;
                }
                const sp_sharding *us = sp_value_sharding_partitioned(m, uo->first_result);
                if (has_axes(us) && uo->kind != SP_OP_FUNC_CALL) {
                    resliced = u;
                    target = us;
                    break;
                }
                if ((uo->kind == SP_OP_SDY_SHARDING_CONSTRAINT ||
                     sp_op_is_sdy_collective((sp_op_kind)uo->kind)) &&
                    nq < 32) {
                    queue[nq++] = uo->first_result;
                }
            }
        }
        if (resliced == SP_NONE) {
            continue;
        }
        uint32_t src = source_of(m, g->operands[0]);
        uint32_t prod = m->values[src].def != SP_NONE ? m->values[src].def : func_of_arg(m, src);
        const sp_type *t = sp_value_type(m, g->first_result);
        double bytes = local_bytes(m, t, NULL, SP_NONE);
        sp_finding *f = add_finding(a, SP_LINT_REMAT, SP_LINT_WARNING, prod, vname(a, src), bytes);
        if (f == NULL) {
            continue;
        }
        arg_loc(a, f, src);
        f->message =
            astr(a,
                 "%s is all-gathered to fully replicated (%s over every device) and "
                 "then sharded again by %s%s: the shardings on either side conflict, "
                 "so the full tensor is rematerialised on every device",
                 f->value, t->text, m->ops[resliced].name,
                 m->ops[resliced].line > 0 ? astr(a, " at line %u", m->ops[resliced].line) : "");
        fix_texts(a, target, a->mesh, target->rank, SP_NONE, NULL, 0, src, vtoken(a, src),
                  &f->fix_shardy, &f->fix_jax);
    }
}

/* ---- (d) memory over capacity ------------------------------------------------------ */

static void lint_memory(sp_advise *a)
{
    const sp_cost_summary *s = sp_cost_get_summary(a->cost);
    if (s->fits || s->capacity_bytes <= 0) {
        return;
    }
    sp_module *m = a->m;
    /* the largest function input that has a dimension a free axis divides */
    uint32_t best = SP_NONE, best_d = 0;
    const char *best_ax = NULL;
    double best_b = 0;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t fn = body->ops[i];
        const sp_block *b = root_entry(m, fn);
        if (b == NULL) {
            continue;
        }
        for (uint32_t k = 0; k < b->n_args; k++) {
            uint32_t v = b->first_arg + k;
            const sp_type *t = sp_value_type(m, v);
            const sp_sharding *sh = sp_value_sharding(m, v);
            double by = local_bytes(m, t, sh, SP_NONE);
            if (t->kind != SP_TYPE_TENSOR || by <= best_b) {
                continue;
            }
            const sp_mesh *mesh = sh != NULL        ? mesh_of(m, sh)
                                  : a->mesh != NULL ? sp_module_mesh(m, a->mesh)
                                                    : NULL;
            for (uint32_t d = 0; d < t->rank; d++) {
                if (sh != NULL && d < sh->rank && sh->dims[d].n_axes > 0) {
                    continue;
                }
                const char *ax = free_axis(m, mesh, sh, t, d);
                if (ax != NULL) {
                    best = v;
                    best_d = d;
                    best_ax = ax;
                    best_b = by;
                    break;
                }
            }
        }
    }
    char msg[128];
    sp_cost_oom_message(a->cost, msg, sizeof msg);
    uint32_t op = best != SP_NONE ? func_of_arg(m, best) : SP_NONE;
    sp_finding *f =
        add_finding(a, SP_LINT_MEMORY, SP_LINT_ERROR, op, best != SP_NONE ? vname(a, best) : "",
                    s->peak_bytes - s->capacity_bytes);
    if (f == NULL) {
        return;
    }
    if (best != SP_NONE) {
        arg_loc(a, f, best);
    }
    if (best == SP_NONE) {
        f->message = astr(a, "%s; no function input has a dimension a free mesh axis divides", msg);
        return;
    }
    const sp_type *t = sp_value_type(m, best);
    const sp_sharding *sh = sp_value_sharding(m, best);
    f->message = astr(a,
                      "%s (parameters %.0f B, inputs %.0f B, peak activations %.0f B); the "
                      "largest input %s (%.0f B per device) can be sharded on \"%s\" along "
                      "dimension %u",
                      msg, s->param_bytes, s->input_bytes, s->peak_activation_bytes, f->value,
                      best_b, best_ax, best_d);
    fix_texts(a, sh, a->mesh, t->rank, best_d, &best_ax, 1, best, vtoken(a, best), &f->fix_shardy,
              &f->fix_jax);
}

/* ---- collectives and their causes ----------------------------------------------------- */

static const sp_attr *dict_get(const sp_attr *d, const char *key)
{
    return d != NULL && d->kind == SP_ATTR_DICT ? sp_attrs_get(d->u.dict.items, d->u.dict.n, key)
                                                : NULL;
}

static const sp_attr *list_item(const sp_attr *l, uint32_t i)
{
    return l != NULL && l->kind == SP_ATTR_ARRAY && i < l->u.arr.n ? l->u.arr.items[i] : NULL;
}

/* "data: input 0 ...; model: constraint_0 (sdy.sharding_constraint at line 12)". */
static void origins_text(const sp_advise *a, uint32_t v, cm_buf *b)
{
    const sp_module *m = a->m;
    const sp_attr *d = NULL;
    const sp_value *val = &m->values[v];
    if (val->def == SP_NONE) {
        uint32_t fn = func_of_arg(m, v);
        d = fn != SP_NONE ? dict_get(list_item(sp_op_attr(m, fn, "arg_attrs"), val->index),
                                     "sdy.sharding_origins")
                          : NULL;
    } else {
        d = sp_op_attr(m, val->def, "sdy.sharding_origins");
        if (d != NULL && d->kind == SP_ATTR_ARRAY) {
            d = list_item(d, val->index);
        }
    }
    if (d == NULL || d->kind != SP_ATTR_DICT || d->u.dict.n == 0) {
        cm_buf_puts(b, "no propagation origin: annotated on the op, or replicated");
        return;
    }
    for (uint32_t i = 0; i < d->u.dict.n; i++) {
        const sp_named_attr *e = &d->u.dict.items[i];
        const char *o = e->value->kind == SP_ATTR_STRING ? e->value->u.str.s : "?";
        cm_buf_printf(b, "%s%s from %s", i > 0 ? ", " : "", e->name,
                      strcmp(o, "self") == 0 ? "its own annotation" : o);
        if (strncmp(o, "constraint_", 11) == 0) {
            for (uint32_t k = 0; k < m->n_ops; k++) {
                if (m->ops[k].kind != SP_OP_SDY_SHARDING_CONSTRAINT) {
                    continue;
                }
                const sp_attr *n = sp_op_attr(m, k, "sdy.sharding_origin_name");
                if (n != NULL && n->kind == SP_ATTR_STRING && strcmp(n->u.str.s, o) == 0) {
                    if (m->ops[k].line > 0) {
                        cm_buf_printf(b, " (sharding_constraint at line %u)", m->ops[k].line);
                    }
                    break;
                }
            }
        }
    }
}

static void sharding_text(const sp_sharding *s, cm_buf *b)
{
    if (s == NULL) {
        cm_buf_puts(b, "replicated");
    } else {
        sp_sharding_print(s, b);
    }
}

static void describe_value(sp_advise *a, uint32_t v, cm_buf *b)
{
    const sp_value *val = &a->m->values[v];
    cm_buf_puts(b, vname(a, v));
    if (val->def != SP_NONE && a->m->ops[val->def].line > 0) {
        cm_buf_printf(b, " (line %u)", a->m->ops[val->def].line);
    }
}

static cm_status explain_colls(sp_advise *a, cm_error *err)
{
    sp_module *m = a->m;
    uint32_t n = sp_cost_n_colls(a->cost);
    a->colls = cm_calloc((size_t)n + 1, sizeof *a->colls);
    if (a->colls == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
    }
    cm_buf b;
    cm_buf_init(&b);
    for (uint32_t i = 0; i < n; i++) {
        const sp_cost_coll *cc = sp_cost_coll_at(a->cost, i);
        sp_advise_coll *c = &a->colls[a->n_colls++];
        c->cost = *cc;
        const sp_op *op = &m->ops[cc->op];
        c->op = op->name;
        c->for_op = "";
        c->loc = "";
        c->source = "";
        cm_buf_reset(&b);
        uint32_t for_id = SP_NONE;
        if (cc->implied || op->n_operands == 0 || op->n_results == 0) {
            for_id = cc->op;
            cm_buf_puts(&b, "implied by the shardings of this op (module not partitioned)");
        } else if (op->kind == SP_OP_SDY_ALL_REDUCE || op->kind == SP_OP_SDY_REDUCE_SCATTER) {
            uint32_t src = source_of(m, op->operands[0]);
            for_id = m->values[src].def;
            cm_buf_puts(&b, "a reduction (contracting) dimension of ");
            describe_value(a, src, &b);
            cm_buf_puts(&b, " is sharded; its operands: ");
            const sp_op *p = for_id != SP_NONE ? &m->ops[for_id] : NULL;
            for (uint32_t k = 0; p != NULL && k < p->n_operands; k++) {
                uint32_t ov = source_of(m, p->operands[k]);
                cm_buf_printf(&b, "%s%s ", k > 0 ? "; " : "", vname(a, ov));
                sharding_text(sp_value_sharding_partitioned(m, ov), &b);
                cm_buf_puts(&b, " (");
                origins_text(a, ov, &b);
                cm_buf_putc(&b, ')');
            }
        } else {
            uint32_t src = source_of(m, op->operands[0]), moved = SP_NONE;
            uint32_t cons = consumer_of(a, op->first_result, &moved);
            for_id = cons;
            uint32_t x = m->values[src].def;
            /* a reshard back: the op's result was propagated as the sharding the
             * chain ends in, and the partitioner computed it otherwise */
            bool back = x != SP_NONE && op->operands[0] == src && src < a->n_pre &&
                        !sp_op_is_sdy_collective((sp_op_kind)m->ops[x].kind) &&
                        m->ops[x].kind != SP_OP_SDY_SHARDING_CONSTRAINT &&
                        same_axes(a->pre[src], sp_value_sharding_partitioned(m, moved)) &&
                        !same_axes(sp_value_sharding_partitioned(m, src), sp_value_sharding_partitioned(m, moved));
            if (back) {
                /* -sdy-insert-explicit-reshards computed x in a common sharding
                 * and reshards its result back to the sharding it had */
                cm_buf_printf(&b, "%s", m->ops[x].name);
                if (m->ops[x].line > 0) {
                    cm_buf_printf(&b, " (line %u)", m->ops[x].line);
                }
                cm_buf_puts(&b, " computes its result as ");
                sharding_text(sp_value_sharding_partitioned(m, op->operands[0]), &b);
                cm_buf_puts(&b, ", the sharding its operands agree on, but the result's sharding "
                                "is ");
                sharding_text(sp_value_sharding_partitioned(m, moved), &b);
                cm_buf_puts(&b, " (");
                origins_text(a, src, &b);
                cm_buf_puts(&b, ")");
                if (cons != SP_NONE) {
                    cm_buf_printf(&b, ", which %s uses", m->ops[cons].name);
                }
                for_id = x;
                goto done;
            }
            describe_value(a, src, &b);
            cm_buf_puts(&b, " is ");
            sharding_text(sp_value_sharding_partitioned(m, op->operands[0]), &b);
            cm_buf_puts(&b, " (");
            origins_text(a, src, &b);
            cm_buf_puts(&b, ") but ");
            if (cons == SP_NONE) {
                cm_buf_puts(&b, "is resharded to ");
                sharding_text(sp_value_sharding_partitioned(m, moved), &b);
            } else if (m->ops[cons].kind == SP_OP_FUNC_RETURN) {
                cm_buf_puts(&b, "the function output's annotated sharding is ");
                sharding_text(sp_value_sharding_partitioned(m, moved), &b);
            } else if (m->ops[cons].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
                cm_buf_puts(&b, "the user's sharding_constraint asks for ");
                sharding_text(sp_value_sharding_partitioned(m, moved), &b);
            } else {
                cm_buf_printf(&b, "%s needs it as ", m->ops[cons].name);
                sharding_text(sp_value_sharding_partitioned(m, moved), &b);
                if (m->ops[cons].n_results > 0) {
                    cm_buf_puts(&b, " to compute its result ");
                    sharding_text(sp_value_sharding_partitioned(m, m->ops[cons].first_result), &b);
                    cm_buf_puts(&b, " (");
                    origins_text(a, m->ops[cons].first_result, &b);
                    cm_buf_putc(&b, ')');
                }
            }
        }
    done:
        if (for_id != SP_NONE) {
            c->for_op = m->ops[for_id].name;
            c->line = m->ops[for_id].line;
            c->loc = m->ops[for_id].loc != NULL ? m->ops[for_id].loc : "";
            c->source = op_source(a, for_id);
        }
        if (b.oom) {
            cm_buf_fini(&b);
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
        }
        c->cause = cm_arena_strdup(&a->arena, b.data != NULL ? b.data : "");
        if (c->cause == NULL) {
            cm_buf_fini(&b);
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
        }
    }
    cm_buf_fini(&b);
    return CM_OK;
}

/* ---- the run ---------------------------------------------------------------------------- */

cm_status sp_advise_run(const char *text, size_t len, const sp_input_opts *in_opts,
                        const sp_advise_opts *o, sp_advise **out, cm_error *err)
{
    *out = NULL;
    sp_advise_opts defo;
    if (o == NULL) {
        sp_advise_opts_init(&defo);
        o = &defo;
    }
    sp_advise *a = cm_calloc(1, sizeof *a);
    if (a == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
    }
    cm_arena_init(&a->arena, 16384);
    a->min_bytes = o->min_bytes;
    sp_logical_miss *miss = NULL;
    uint32_t n_miss = 0, *calls = NULL, n_calls = 0;
    /* read only: the user's shardings and custom calls are checked before
     * the plan's pass runs */
    sp_input_opts io;
    if (in_opts != NULL) {
        io = *in_opts;
    } else {
        sp_input_opts_init(&io);
    }
    io.propagate = false;
    io.record_edges = false;
    cm_status st = sp_input_read(text, len, &io, &a->in, err);
    if (st == CM_OK) {
        a->m = a->in.m;
        a->g = a->in.g;
        if (a->g != NULL) {
            st = sp_advise_logical_scan(text, len, &a->arena, &miss, &n_miss, err);
        }
    }
    if (st != CM_OK) {
        goto fail;
    }
    const sp_custom_rules *custom = a->in.custom;
    if (o->mesh != NULL) {
        if (sp_module_mesh(a->m, o->mesh) == NULL) {
            st = cm_error_set(err, CM_EINVAL, "/mesh", "no mesh named \"%s\" in the module",
                              o->mesh);
            goto fail;
        }
        a->mesh = cm_arena_strdup(&a->arena, o->mesh);
    }
    bool was_partitioned = a->in.partitioned;
    if (!was_partitioned) {
        lint_user_shardings(a);
        st = find_ruleless_calls(a, custom, &calls, &n_calls, err);
        if (st != CM_OK) {
            goto fail;
        }
        sp_diags d;
        sp_diags_init(&d);
        st = sp_input_propagate(a->m, io.pass, custom, false, NULL, &d, err);
        sp_diags_fini(&d);
        if (st != CM_OK) {
            goto fail;
        }
    }
    lint_meshes(a);
    if (a->mesh == NULL) {
        const sp_block *body = &a->m->blocks[a->m->body];
        for (uint32_t i = 0; i < body->n_ops && a->mesh == NULL; i++) {
            const sp_attr *nm = sp_op_attr(a->m, body->ops[i], "sym_name");
            if (a->m->ops[body->ops[i]].kind == SP_OP_SDY_MESH && nm != NULL &&
                nm->kind == SP_ATTR_STRING) {
                a->mesh = nm->u.str.s;
            }
        }
    }
    lint_custom_calls(a, calls, n_calls);
    lint_logical(a, miss, n_miss);
    lint_sub_axes(a);
    if (!was_partitioned) {
        a->n_pre = a->m->n_values;
        a->pre = cm_alloc(sizeof *a->pre * ((size_t)a->n_pre + 1));
        if (a->pre == NULL) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
            goto fail;
        }
        for (uint32_t v = 0; v < a->n_pre; v++) {
            a->pre[v] = sp_value_sharding_partitioned(a->m, v);
        }
    }
    st = sp_advise_partition_cost(a->m, was_partitioned, o->profile, -1, custom, a->g, &a->cost,
                                  err);
    if (st == CM_OK) {
        st = build_uses(a, err);
    }
    if (st != CM_OK) {
        goto fail;
    }
    lint_remat(a);
    lint_memory(a);
    st = explain_colls(a, err);
    if (st == CM_OK && a->oom) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in the advisor");
    }
    if (st != CM_OK) {
        goto fail;
    }
    *out = a;
    return CM_OK;
fail:
    sp_advise_destroy(a);
    return st;
}

void sp_advise_destroy(sp_advise *a)
{
    if (a == NULL) {
        return;
    }
    sp_cost_destroy(a->cost);
    sp_input_fini(&a->in);
    cm_free(a->f);
    cm_free(a->colls);
    cm_free(a->use_start);
    cm_free(a->use_op);
    cm_free(a->pre);
    cm_arena_fini(&a->arena);
    cm_free(a);
}

uint32_t sp_advise_n_findings(const sp_advise *a)
{
    return a->n_f;
}

const sp_finding *sp_advise_finding_at(const sp_advise *a, uint32_t i)
{
    return i < a->n_f ? &a->f[i] : NULL;
}

uint32_t sp_advise_count(const sp_advise *a, sp_lint_kind k)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->n_f; i++) {
        n += a->f[i].kind == k;
    }
    return n;
}

uint32_t sp_advise_n_colls(const sp_advise *a)
{
    return a->n_colls;
}

const sp_advise_coll *sp_advise_coll_at(const sp_advise *a, uint32_t i)
{
    return i < a->n_colls ? &a->colls[i] : NULL;
}

const sp_cost_summary *sp_advise_summary(const sp_advise *a)
{
    return sp_cost_get_summary(a->cost);
}

/* ---- writers ------------------------------------------------------------------------------ */

void sp_advise_write_lint_json(const sp_advise *a, cm_buf *b)
{
    const sp_cost_summary *s = sp_advise_summary(a);
    cm_buf_puts(b, "{\"findings\":[");
    for (uint32_t i = 0; i < a->n_f; i++) {
        const sp_finding *f = &a->f[i];
        cm_buf_puts(b, i > 0 ? ",\n{\"kind\":" : "\n{\"kind\":");
        sp_advise_put_jstr(b, sp_lint_kind_name(f->kind));
        cm_buf_puts(b, ",\"severity\":");
        sp_advise_put_jstr(b, sp_lint_sev_name(f->sev));
        cm_buf_puts(b, ",\"op\":");
        sp_advise_put_jstr(b, f->op);
        cm_buf_printf(b, ",\"line\":%u,\"loc\":", f->line);
        sp_advise_put_jstr(b, f->loc);
        cm_buf_puts(b, ",\"source\":");
        sp_advise_put_jstr(b, f->source);
        cm_buf_puts(b, ",\"value\":");
        sp_advise_put_jstr(b, f->value);
        cm_json_put_kv_num(b, "bytes", f->bytes, 6);
        cm_buf_puts(b, ",\"message\":");
        sp_advise_put_jstr(b, f->message);
        cm_buf_puts(b, ",\"fix\":{\"shardy\":");
        sp_advise_put_jstr(b, f->fix_shardy);
        cm_buf_puts(b, ",\"jax\":");
        sp_advise_put_jstr(b, f->fix_jax);
        cm_buf_puts(b, "}}");
    }
    cm_buf_puts(b, "],\n\"counts\":{");
    for (int k = 0; k < SP_LINT_N_KINDS; k++) {
        cm_buf_printf(b, "%s\"%s\":%u", k > 0 ? "," : "", kind_names[k],
                      sp_advise_count(a, (sp_lint_kind)k));
    }
    cm_buf_puts(b, "},\"peak_bytes\":");
    cm_json_put_num(b, s->peak_bytes, 6);
    cm_json_put_kv_num(b, "capacity_bytes", s->capacity_bytes, 6);
    cm_buf_puts(b, ",\"profile\":");
    sp_advise_put_jstr(b, s->profile);
    cm_buf_puts(b, "}");
}

void sp_advise_write_lint_text(const sp_advise *a, cm_buf *b)
{
    if (a->n_f == 0) {
        cm_buf_puts(b, "no findings\n");
        return;
    }
    for (uint32_t i = 0; i < a->n_f; i++) {
        const sp_finding *f = &a->f[i];
        cm_buf_printf(b, "%s: %s", sp_lint_sev_name(f->sev), sp_lint_kind_name(f->kind));
        if (f->op[0] != '\0') {
            cm_buf_printf(b, " at %s", f->op);
        }
        if (f->line > 0) {
            cm_buf_printf(b, " (line %u)", f->line);
        }
        if (f->source[0] != '\0') {
            cm_buf_printf(b, " from %s", f->source);
        } else if (f->loc[0] != '\0') {
            cm_buf_printf(b, " loc(%s)", f->loc);
        }
        cm_buf_printf(b, ", %.0f bytes per device\n  %s\n", f->bytes, f->message);
        if (f->fix_shardy[0] != '\0') {
            cm_buf_printf(b, "  fix: %s\n       %s\n", f->fix_shardy, f->fix_jax);
        }
    }
    cm_buf_printf(b, "%u finding%s\n", a->n_f, a->n_f == 1 ? "" : "s");
}

void sp_advise_write_colls_json(const sp_advise *a, cm_buf *b)
{
    double bytes = 0, secs = 0;
    cm_buf_puts(b, "{\"collectives\":[");
    for (uint32_t i = 0; i < a->n_colls; i++) {
        const sp_advise_coll *c = &a->colls[i];
        bytes += c->cost.bytes * c->cost.count;
        secs += c->cost.time_s * c->cost.count;
        cm_buf_puts(b, i > 0 ? ",\n{\"op\":" : "\n{\"op\":");
        sp_advise_put_jstr(b, c->op);
        cm_buf_puts(b, ",\"kind\":");
        sp_advise_put_jstr(b, sp_coll_kind_name(c->cost.kind));
        cm_buf_puts(b, ",\"axes\":[");
        for (uint32_t k = 0; k < c->cost.n_axes; k++) {
            if (k > 0) {
                cm_buf_putc(b, ',');
            }
            sp_advise_put_jstr(b, c->cost.axes[k]);
        }
        cm_buf_printf(b, "],\"group\":%lld,\"tensor_bytes\":", (long long)c->cost.group);
        cm_json_put_num(b, c->cost.tensor_bytes, 6);
        cm_json_put_kv_num(b, "bytes", c->cost.bytes, 6);
        cm_json_put_kv_num(b, "seconds", c->cost.time_s, 6);
        cm_json_put_kv_num(b, "count", c->cost.count, 6);
        cm_buf_puts(b, ",\"for_op\":");
        sp_advise_put_jstr(b, c->for_op);
        cm_buf_printf(b, ",\"line\":%u,\"loc\":", c->line);
        sp_advise_put_jstr(b, c->loc);
        cm_buf_puts(b, ",\"source\":");
        sp_advise_put_jstr(b, c->source);
        cm_buf_puts(b, ",\"cause\":");
        sp_advise_put_jstr(b, c->cause);
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "],\n\"n_collectives\":");
    cm_buf_printf(b, "%u,\"bytes\":", a->n_colls);
    cm_json_put_num(b, bytes, 6);
    cm_json_put_kv_num(b, "seconds", secs, 6);
    cm_buf_puts(b, ",\"profile\":");
    sp_advise_put_jstr(b, sp_advise_summary(a)->profile);
    cm_buf_puts(b, "}");
}

void sp_advise_write_colls_text(const sp_advise *a, cm_buf *b)
{
    double bytes = 0, secs = 0;
    for (uint32_t i = 0; i < a->n_colls; i++) {
        const sp_advise_coll *c = &a->colls[i];
        bytes += c->cost.bytes * c->cost.count;
        secs += c->cost.time_s * c->cost.count;
        cm_buf_printf(b, "%-16s {", sp_coll_kind_name(c->cost.kind));
        for (uint32_t k = 0; k < c->cost.n_axes; k++) {
            cm_buf_printf(b, "%s%s", k > 0 ? "," : "", c->cost.axes[k]);
        }
        cm_buf_printf(b, "} x%lld  %.0f B  %.3g s  for %s", (long long)c->cost.group, c->cost.bytes,
                      c->cost.time_s, c->for_op[0] != '\0' ? c->for_op : "?");
        if (c->line > 0) {
            cm_buf_printf(b, " (line %u)", c->line);
        }
        cm_buf_printf(b, "\n    cause: %s\n", c->cause);
    }
    cm_buf_printf(b, "%u collectives, %.0f bytes per device, %.3g s\n", a->n_colls, bytes, secs);
}
