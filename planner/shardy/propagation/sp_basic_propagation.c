/* SPDX-License-Identifier: Apache-2.0
 * planner: sharding propagation (see sp_prop.h and Shardy's propagation.md):
 * -sdy-basic-propagate, as Shardy's propagation/basic_propagation.cc, and
 * sp_propagate, the entry of every level. The levels above basic live in
 * their Shardy-named files (sp_aggressive_factor_propagation.c,
 * sp_op_priority_propagation.c, sp_user_priority_propagation.c); the state
 * they share is sp_prop_int.h.
 *
 * Every tensor that can carry a sharding is a "slot": values (op results,
 * block arguments) and function results. An op step gathers the slots of an
 * op, projects their dim shardings onto the factors of the op's sharding
 * rule, finds for each factor the axes to propagate, expands the factor
 * shardings and projects them back to dim shardings. Changed slots put their
 * defining op and their users back on a worklist, until a fixed point.
 *
 * Axes are handled as (axis index, pre-size, size) triples, with a full axis
 * being (i, 1, n); so prefix, overlap and coexistence of sub-axes are simple
 * arithmetic. New shardings are allocated in the module arena only when a
 * slot changes. */
#include "sp_prop_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"

/* ---- errors ------------------------------------------------------------------- */

cm_status sp_prop_oom(prop *p)
{
    if (p->st == CM_OK) {
        p->st = cm_error_oom(p->err);
    }
    return p->st;
}

/* ---- slots and attributes --------------------------------------------------------- */

static bool is_func(const sp_op *op)
{
    return op->kind == SP_OP_FUNC_FUNC;
}

static bool func_is_public(const sp_module *m, uint32_t f)
{
    const sp_attr *v = sp_op_attr(m, f, "sym_visibility");
    return v == NULL || (v->kind == SP_ATTR_STRING && strcmp(v->u.str.s, "public") == 0);
}

/* Is this slot a ranked static-shape tensor that can carry a sharding? */
static bool slot_type(const prop *p, uint32_t slot, uint32_t *rank, const int64_t **dims)
{
    const sp_type *t;
    if (slot < p->m->n_values) {
        uint32_t ty = p->m->values[slot].type;
        t = &p->m->types[ty];
        if (p->type_ok != NULL && p->type_ok[ty] != 0) {
            if (p->type_ok[ty] != 1) {
                return false;
            }
            *rank = t->rank;
            *dims = t->dims;
            return true;
        }
    } else {
        uint32_t owner = p->fres_func[slot - p->m->n_values];
        uint32_t k = p->fres_index[slot - p->m->n_values];
        if (p->m->ops[owner].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
            t = &p->m->types[p->m->values[p->m->ops[owner].operands[k]].type];
        } else {
            const sp_type *ft = sp_func_type(p->m, owner);
            if (ft == NULL) {
                return false;
            }
            t = &p->m->types[ft->results[k]];
        }
    }
    if (t->kind != SP_TYPE_TENSOR) {
        return false;
    }
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) {
            return false;
        }
    }
    *rank = t->rank;
    *dims = t->dims;
    return true;
}

/* ---- rules --------------------------------------------------------------------- */

/* Identity rule over rank dims, for constraints, barriers and edges; cached
 * per (interned dims, tensor count), as every step of such an op needs one. */
static sp_rule *identity_rule_new(prop *p, const int64_t *dims, uint32_t rank, uint32_t n_tensors);

static sp_rule *identity_rule(prop *p, const int64_t *dims, uint32_t rank, uint32_t n_tensors)
{
    uint32_t h = (uint32_t)(((uintptr_t)dims >> 3) * 2654435761u) ^ (rank * 97u) ^ n_tensors;
    uint32_t slot = h & (ID_CACHE - 1);
    struct idc *c = &p->id_cache[slot];
    if (c->rule != NULL && c->dims == dims && c->rank == rank && c->n == n_tensors) {
        return c->rule;
    }
    sp_rule *r = identity_rule_new(p, dims, rank, n_tensors);
    if (r != NULL) {
        *c = (struct idc){dims, rank, n_tensors, r};
    }
    return r;
}

static sp_rule *identity_rule_new(prop *p, const int64_t *dims, uint32_t rank, uint32_t n_tensors)
{
    cm_arena *a = &p->m->arena;
    sp_rule *r = cm_arena_zalloc(a, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->n_factors = rank;
    r->factor_sizes = cm_arena_alloc(a, sizeof(int64_t) * (rank + 1u));
    r->factor_kind = cm_arena_zalloc(a, rank + 1u);
    r->factor_blocked = cm_arena_zalloc(a, rank + 1u);
    sp_tensor_mapping *tm = cm_arena_zalloc(a, sizeof(sp_tensor_mapping) * n_tensors);
    sp_dim_mapping *dm = cm_arena_zalloc(a, sizeof(sp_dim_mapping) * (rank + 1u));
    uint32_t *fidx = cm_arena_alloc(a, sizeof(uint32_t) * (rank + 1u));
    if (r->factor_sizes == NULL || r->factor_kind == NULL || r->factor_blocked == NULL ||
        tm == NULL || dm == NULL || fidx == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < rank; d++) {
        r->factor_sizes[d] = dims[d];
        fidx[d] = d;
        dm[d].factors = &fidx[d];
        dm[d].n_factors = 1;
    }
    for (uint32_t t = 0; t < n_tensors; t++) {
        tm[t].dims = dm;
        tm[t].rank = rank;
    }
    r->operands = tm;
    r->n_operands = n_tensors / 2;
    r->results = tm + n_tensors / 2;
    r->n_results = n_tensors - n_tensors / 2;
    return r;
}

/* ---- rule cache ---------------------------------------------------------------- */

static bool rule_relevant(const char *name)
{
    if (name[0] != 's' && name[0] != 'm' && name[0] != 'j') {
        return true; /* the common case, without a string compare */
    }
    return strncmp(name, "sdy.", 4) != 0 && strncmp(name, "mhlo.sharding", 13) != 0 &&
           strncmp(name, "jax.", 4) != 0;
}

/* Ops whose rule depends on more than their kind, types and attributes
 * (defining ops of operands, region bodies) are not cached. */
static bool rule_cacheable(const sp_op *op)
{
    if (op->kind == SP_OP_CONCATENATE || op->kind == SP_OP_DYNAMIC_UPDATE_SLICE ||
        op->kind == SP_OP_DYNAMIC_SLICE || op->kind == SP_OP_UNKNOWN) {
        return false;
    }
    return op->n_regions == 0 || op->kind == SP_OP_REDUCE;
}

/* One step of FNV-1a over 64-bit words: inline, as rule_key folds a dozen
 * fields per op; cm_hash_u64 spreads the result once at the end. */
static uint64_t fold(uint64_t h, uint64_t x)
{
    return (h ^ x) * 1099511628211ull;
}

static uint64_t rule_key(const prop *p, const sp_op *op)
{
    uint64_t h = fold(14695981039346656037ull, op->kind);
    for (uint32_t i = 0; i < op->n_operands; i++) {
        h = fold(h, p->m->values[op->operands[i]].type);
    }
    h = fold(h, 0x77);
    for (uint32_t i = 0; i < op->n_results; i++) {
        h = fold(h, p->m->values[op->first_result + i].type);
    }
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (rule_relevant(op->attrs[i].name)) {
            /* names are compared on a hit */
            h = fold(h, sp_attr_hash(op->attrs[i].value));
        }
    }
    return cm_hash_u64(h);
}

static bool same_rule_inputs(const prop *p, const sp_op *a, const sp_op *b)
{
    if (a->kind != b->kind || a->n_operands != b->n_operands || a->n_results != b->n_results ||
        strcmp(a->name, b->name) != 0) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_operands; i++) {
        if (p->m->values[a->operands[i]].type != p->m->values[b->operands[i]].type) {
            return false;
        }
    }
    for (uint32_t i = 0; i < a->n_results; i++) {
        if (p->m->values[a->first_result + i].type != p->m->values[b->first_result + i].type) {
            return false;
        }
    }
    uint32_t na = 0, nb = 0;
    for (uint32_t i = 0; i < a->n_attrs; i++) {
        if (!rule_relevant(a->attrs[i].name)) {
            continue;
        }
        na++;
        const sp_attr *x = sp_attrs_get(b->attrs, b->n_attrs, a->attrs[i].name);
        if (x == NULL || !sp_attr_equal(a->attrs[i].value, x)) {
            return false;
        }
    }
    for (uint32_t i = 0; i < b->n_attrs; i++) {
        nb += rule_relevant(b->attrs[i].name);
    }
    return na == nb;
}

/* A rule-cache entry: the representative op whose rule was derived. */
struct rc {
    uint32_t op;
    sp_rule *rule;
};

/* What a rule-cache lookup compares entries with. */
typedef struct rc_key {
    const prop *p;
    const sp_op *op;
} rc_key;

static bool rc_eq(const void *entry, const void *key)
{
    const struct rc *c = entry;
    const rc_key *k = key;
    return same_rule_inputs(k->p, &k->p->m->ops[c->op], k->op);
}

static sp_rule *derive_rule(prop *p, uint32_t op);

static sp_rule *op_rule(prop *p, uint32_t op)
{
    if (p->rule_done[op]) {
        return p->rules[op];
    }
    p->rule_done[op] = 1;
    const sp_op *o = &p->m->ops[op];
    if (!rule_cacheable(o) || sp_op_attr(p->m, op, "sdy.sharding_rule") != NULL) {
        p->rules[op] = derive_rule(p, op);
        return p->rules[op];
    }
    uint64_t key = rule_key(p, o);
    rc_key k = {p, o};
    const struct rc *c = cm_map_find(&p->rule_cache, key, rc_eq, &k);
    if (c != NULL) {
        p->rules[op] = c->rule;
        if (c->rule != NULL && p->o->keep_sharding_rules) {
            sp_attr *ra = sp_attr_new(p->m, SP_ATTR_RULE);
            if (ra == NULL || sp_op_set_attr(p->m, op, "sdy.sharding_rule", ra) != CM_OK) {
                sp_prop_oom(p);
                return NULL;
            }
            ra->u.rule = c->rule;
        }
        return c->rule;
    }
    sp_rule *r = derive_rule(p, op);
    p->rules[op] = r;
    struct rc *e;
    if (cm_map_insert(&p->rule_cache, key, (void **)&e, NULL) != CM_OK) {
        sp_prop_oom(p);
        return NULL;
    }
    *e = (struct rc){op, r};
    return r;
}

static sp_rule *derive_rule(prop *p, uint32_t op)
{
    const sp_attr *a = sp_op_attr(p->m, op, "sdy.sharding_rule");
    if (a != NULL && a->kind == SP_ATTR_RULE) {
        return a->u.rule;
    }
    sp_rule_opts ro = {p->o->conservative, p->o->custom, false};
    sp_rule *r = NULL;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = sp_rule_for_op(p->m, op, &ro, &r, p->diags, &e);
    if (st == CM_ENOMEM) {
        sp_prop_oom(p);
        return NULL;
    }
    if (st != CM_OK) {
        sp_diags_add(p->diags, p->m, op, SP_DIAG_WARNING, "no sharding rule: %s", e.msg);
        r = NULL;
    }
    if (r != NULL && p->o->keep_sharding_rules) {
        sp_attr *ra = sp_attr_new(p->m, SP_ATTR_RULE);
        if (ra == NULL || sp_op_set_attr(p->m, op, "sdy.sharding_rule", ra) != CM_OK) {
            sp_prop_oom(p);
            return NULL;
        }
        ra->u.rule = r;
    }
    return r;
}

/* ---- projection -------------------------------------------------------------------- */

static int64_t prod(const ax *a, uint32_t n)
{
    int64_t x = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (!cm_mul_i64(x, a[i].size, &x)) {
            return INT64_MAX;
        }
    }
    return x;
}

/* Projects tensor t's sharding onto its factors (fs row). Returns false when
 * the sharding cannot be handled (too many axes, unknown axis). */
static bool project(const sp_mesh *mesh, const sp_rule *r, tens *t, fsh *row)
{
    return sp_sharding_project(r, t->map, t->cur, mesh, row, t->repl, &t->n_repl);
}

/* ---- projection cache ---------------------------------------------------------------------
 * Shardings are interned and rules are shared between ops of one shape, so
 * the projection of a (sharding, tensor mapping) pair repeats: it is stored
 * once, compactly (only the axes in use), and copied into the step's rows. */

typedef struct pc_entry {
    const sp_sharding *sh;
    const sp_tensor_mapping *map;
    const sp_mesh *mesh;
    const int64_t *sizes; /* the rule's factor sizes (rules of equal maps may differ) */
    uint32_t n_factors;
    uint32_t n_repl;
    struct pc_factor {
        uint8_t present, closed, minor_most, n, n_over;
    } *f;
    ax *axes;  /* per present factor: n axes then n_over overflow axes, in factor order */
    ax *repl;
} pc_entry;

/* The hash of a projection-cache key: by identity, as shardings are
 * interned and tensor mappings belong to shared rules. A multiply-xor of
 * the three addresses, cheap on a path every tensor of every step takes;
 * the rule's factor sizes only decide between entries of equal hash. */
static uint64_t pc_hash(const sp_sharding *sh, const sp_tensor_mapping *map, const sp_mesh *mesh)
{
    uint64_t h = (uint64_t)(uintptr_t)sh * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)(uintptr_t)map * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)mesh;
    return h ^ (h >> 31);
}

static bool pc_eq(const void *entry, const void *key)
{
    const pc_entry *e = *(const pc_entry *const *)entry;
    const pc_entry *k = key;
    return e->sh == k->sh && e->map == k->map && e->mesh == k->mesh &&
           e->n_factors == k->n_factors && e->sizes == k->sizes;
}

static bool project_cached(prop *p, const sp_mesh *mesh, const sp_rule *r, tens *t, fsh *row)
{
    if (t->cur == NULL || t->cur != p->sh[t->slot]) {
        /* no axes (cheap), or a one-off view hiding lower-priority dims */
        return project(mesh, r, t, row);
    }
    uint64_t h = pc_hash(t->cur, t->map, mesh);
    pc_entry key = {.sh = t->cur, .map = t->map, .mesh = mesh, .sizes = r->factor_sizes,
                    .n_factors = r->n_factors};
    pc_entry *const *found = cm_map_find(&p->pc_tab, h, pc_eq, &key);
    if (found != NULL) {
        const pc_entry *e = *found;
        const ax *a = e->axes;
        for (uint32_t f = 0; f < e->n_factors; f++) {
            fsh *x = &row[f];
            const struct pc_factor *c = &e->f[f];
            x->present = c->present;
            x->closed = c->closed;
            x->minor_most = c->minor_most;
            x->n = c->n;
            x->n_over = c->n_over;
            for (uint32_t k = 0; k < c->n; k++) {
                x->axes[k] = *a++;
            }
            for (uint32_t k = 0; k < c->n_over; k++) {
                x->over[k] = *a++;
            }
        }
        t->n_repl = e->n_repl;
        for (uint32_t k = 0; k < e->n_repl; k++) {
            t->repl[k] = e->repl[k];
        }
        return true;
    }
    if (!project(mesh, r, t, row)) {
        return false;
    }
    /* remember it (a failed allocation only costs the cache) */
    uint32_t n_ax = 0;
    for (uint32_t f = 0; f < r->n_factors; f++) {
        n_ax += row[f].n + row[f].n_over;
    }
    cm_arena *a = &p->m->arena;
    pc_entry *e = cm_arena_alloc(a, sizeof *e);
    struct pc_factor *fs = cm_arena_alloc(a, sizeof *fs * (r->n_factors + 1u));
    ax *axes = cm_arena_alloc(a, sizeof(ax) * (n_ax + t->n_repl + 1u));
    if (e == NULL || fs == NULL || axes == NULL) {
        return true;
    }
    *e = (pc_entry){t->cur, t->map, mesh, r->factor_sizes, r->n_factors, t->n_repl, fs, axes,
                    axes + n_ax};
    ax *w = axes;
    for (uint32_t f = 0; f < r->n_factors; f++) {
        const fsh *x = &row[f];
        fs[f] = (struct pc_factor){x->present, x->closed, x->minor_most, x->n, x->n_over};
        for (uint32_t k = 0; k < x->n; k++) {
            *w++ = x->axes[k];
        }
        for (uint32_t k = 0; k < x->n_over; k++) {
            *w++ = x->over[k];
        }
    }
    for (uint32_t k = 0; k < t->n_repl; k++) {
        e->repl[k] = t->repl[k];
    }
    pc_entry **slot;
    if (cm_map_insert(&p->pc_tab, h, (void **)&slot, NULL) == CM_OK) {
        *slot = e;
    }
    return true;
}

/* ---- back-projection ------------------------------------------------------------------- */

static void merge_into(ax *out, uint32_t *n, ax a)
{
    if (*n > 0) {
        ax *l = &out[*n - 1];
        if (l->axis == a.axis && l->pre * l->size == a.pre) {
            l->size *= a.size;
            return;
        }
    }
    out[(*n)++] = a;
}

/* Builds the dim axes of tensor t from its factor shardings. */
static uint32_t dim_axes(const sp_rule *r, const tens *t, const fsh *row, uint32_t d, ax *out)
{
    const sp_dim_mapping *dm = &t->map->dims[d];
    uint32_t n = 0;
    for (uint32_t k = 0; k < dm->n_factors; k++) {
        const fsh *x = &row[dm->factors[k]];
        for (uint32_t i = 0; i < x->n && n < 2 * MAXAX; i++) {
            merge_into(out, &n, x->axes[i]);
        }
        if (x->n_over > 0) {
            for (uint32_t i = 0; i < x->n_over && n < 2 * MAXAX; i++) {
                merge_into(out, &n, x->over[i]);
            }
            break;
        }
        if (k + 1 < dm->n_factors && prod(x->axes, x->n) < r->factor_sizes[dm->factors[k]]) {
            break;
        }
    }
    return n;
}

/* The current dim axes of t, as ax values (merged). */
static uint32_t cur_dim_axes(const sp_mesh *mesh, const tens *t, uint32_t d, ax *out)
{
    const sp_sharding *s = t->cur;
    uint32_t n = 0;
    if (s == NULL || d >= s->rank || mesh == NULL) {
        return 0;
    }
    for (uint32_t i = 0; i < s->dims[d].n_axes && n < 2 * MAXAX; i++) {
        ax a;
        if (ax_from_ref(mesh, &s->dims[d].axes[i], &a)) {
            merge_into(out, &n, a);
        }
    }
    return n;
}

/* Builds the new sharding of t (same mesh name rules as Shardy: the tensor
 * keeps its own mesh name, an unsharded tensor takes the op's). */
static uint64_t sharding_hash(const sp_sharding *s)
{
    uint64_t h = (uint64_t)(uintptr_t)s->mesh_name * 0x9e3779b97f4a7c15ull ^ s->rank;
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        h = (h ^ ((uint64_t)ds->is_closed << 1) ^ ((uint64_t)(uint32_t)ds->priority << 8)) *
            1099511628211ull;
        for (uint32_t i = 0; i < ds->n_axes; i++) {
            h = (h ^ (uint64_t)(uintptr_t)ds->axes[i].name ^ (uint64_t)ds->axes[i].pre_size << 20 ^
                 (uint64_t)ds->axes[i].size << 40) *
                1099511628211ull;
        }
        h = (h ^ 0xdd) * 1099511628211ull;
    }
    return h ^ ((uint64_t)s->n_replicated << 50) ^ ((uint64_t)s->n_unreduced << 56) ^
           (uint64_t)(uintptr_t)s->replicated ^ (uint64_t)(uintptr_t)s->unreduced;
}

/* An interned sharding equal to key (sharding_hash compares names by
 * address, so equal shardings also share their mesh-owned name pointers). */
static bool sh_tab_eq(const void *entry, const void *key)
{
    const sp_sharding *c = *(sp_sharding *const *)entry;
    const sp_sharding *s = key;
    return c->mesh_name == s->mesh_name && c->replicated == s->replicated &&
           c->unreduced == s->unreduced && c->n_replicated == s->n_replicated &&
           c->n_unreduced == s->n_unreduced && sp_sharding_equal(c, s);
}

/* The module-owned sharding equal to s (built in the scratch arena):
 * propagation creates few distinct shardings, so values share them. */
static sp_sharding *intern_sharding(prop *p, sp_sharding *s)
{
    uint64_t h = sharding_hash(s);
    sp_sharding *const *found = cm_map_find(&p->sh_tab, h, sh_tab_eq, s);
    if (found != NULL) {
        cm_arena_reset(&p->scratch);
        return *found;
    }
    /* copy into the module arena, keeping the (mesh-owned) name pointers */
    cm_arena *a = &p->m->arena;
    sp_sharding *k = cm_arena_memdup(a, s, 1, sizeof *s);
    if (k != NULL && s->rank > 0) {
        k->dims = cm_arena_memdup(a, s->dims, s->rank, sizeof(sp_dim_sharding));
        for (uint32_t d = 0; k->dims != NULL && d < s->rank; d++) {
            if (s->dims[d].n_axes > 0) {
                k->dims[d].axes = cm_arena_memdup(a, s->dims[d].axes, s->dims[d].n_axes,
                                                  sizeof(sp_axis_ref));
                if (k->dims[d].axes == NULL) {
                    k = NULL;
                    break;
                }
            }
        }
        if (k != NULL && k->dims == NULL) {
            k = NULL;
        }
    }
    cm_arena_reset(&p->scratch);
    sp_sharding **slot;
    if (k == NULL || cm_map_insert(&p->sh_tab, h, (void **)&slot, NULL) != CM_OK) {
        return NULL;
    }
    *slot = k;
    return k;
}

static sp_sharding *build_sharding(prop *p, const sp_mesh *mesh, const char *mesh_name,
                                   const sp_rule *r, const tens *t, const fsh *row)
{
    cm_arena *a = &p->scratch;
    sp_sharding *s = cm_arena_zalloc(a, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    const sp_sharding *c = t->cur;
    bool keep_name = c != NULL && c->mesh_name != NULL && sp_prop_mesh_of(p, c) != NULL &&
                     !sp_prop_mesh_of(p, c)->is_empty;
    s->mesh_name = keep_name ? c->mesh_name : mesh_name;
    s->rank = t->rank;
    s->dims = cm_arena_zalloc(a, sizeof(sp_dim_sharding) * (t->rank + 1u));
    if (s->dims == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        ax out[2 * MAXAX];
        uint32_t n = dim_axes(r, t, row, d, out);
        sp_dim_sharding *ds = &s->dims[d];
        ds->is_closed = c != NULL && d < c->rank && c->dims[d].is_closed;
        ds->priority = c != NULL && d < c->rank ? c->dims[d].priority : -1;
        ds->n_axes = n;
        if (n > 0) {
            ds->axes = cm_arena_alloc(a, sizeof(sp_axis_ref) * n);
            if (ds->axes == NULL) {
                return NULL;
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            const sp_mesh_axis *ma = &mesh->axes[out[i].axis];
            ds->axes[i].name = ma->name;
            if (out[i].pre == 1 && out[i].size == ma->size) {
                ds->axes[i].pre_size = 0;
                ds->axes[i].size = ma->size;
            } else {
                ds->axes[i].pre_size = out[i].pre;
                ds->axes[i].size = out[i].size;
            }
        }
    }
    if (c != NULL) {
        s->replicated = c->replicated;
        s->n_replicated = c->n_replicated;
        s->unreduced = c->unreduced;
        s->n_unreduced = c->n_unreduced;
        s->reduction = c->reduction;
    }
    /* dims hidden by the current user priority keep their real sharding */
    sp_prop_hidden_dims_restore(p, t->slot, c, s);
    return s;
}

/* ---- worklist ------------------------------------------------------------------------ */

/* Pushes op on the worklist, unless it is there already, is the op being
 * stepped (Shardy does not wake the op it just propagated through; a
 * manual computation without edges is, as its boundary takes two steps),
 * or is a return (function results are propagated before and after the
 * worklist, as Shardy's propagateFuncResults). */
static void enqueue(prop *p, uint32_t op)
{
    if (op == SP_NONE || p->queued[op] || p->m->ops[op].kind == SP_OP_FUNC_RETURN ||
        (op == p->cur_op && p->mc_first[op] == SP_NONE)) {
        return;
    }
    if (CM_GROW_U32(p->queue, p->q_cap, p->q_len + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return;
    }
    p->queue[p->q_len++] = op;
    p->queued[op] = 1;
}

static void notify(prop *p, uint32_t slot)
{
    if (slot < p->m->n_values) {
        const sp_value *v = &p->m->values[slot];
        if (v->def != SP_NONE) {
            enqueue(p, v->def);
        }
    }
    /* last user first, as MLIR walks a use list (newest use first); the
     * stack then runs the first user first */
    for (uint32_t i = p->users.start[slot + 1]; i-- > p->users.start[slot];) {
        enqueue(p, p->users.items[i]);
    }
}

/* A slot got a new sharding: wake its def and users, and give every member
 * of its sharding group the same sharding. */
static void slot_changed(prop *p, uint32_t slot)
{
    notify(p, slot);
    if (p->group_next == NULL || p->group_next[slot] == SP_NONE) {
        return;
    }
    for (uint32_t s = p->group_next[slot]; s != slot; s = p->group_next[s]) {
        if (p->sh[s] != p->sh[slot]) {
            p->sh[s] = p->sh[slot];
            sp_prop_origins_copy(p, slot, s);
            notify(p, s);
        }
    }
}

/* ---- one step over a set of tensors -------------------------------------------------------- */

static sp_sharding *edge_view_back(prop *p, const tens *t, sp_sharding *ns);

/* The axis of s that holds gained sub-axis g: g itself, or the axis it was
 * merged into with its neighbour when the dims were built (Shardy merges
 * the sub-axes of consecutive factors of a dim before recording them). */
static ax merged_axis(const sp_mesh *mesh, const sp_sharding *s, ax g)
{
    for (uint32_t d = 0; s != NULL && d < s->rank; d++) {
        for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
            ax a;
            if (ax_from_ref(mesh, &s->dims[d].axes[i], &a) && a.axis == g.axis &&
                a.pre <= g.pre && g.pre * g.size <= a.pre * a.size) {
                return a;
            }
        }
    }
    return g;
}

/* Propagates among the n tensors in p->ts along rule r. */
static void step_tensors(prop *p, uint32_t op, const sp_rule *r, uint32_t n, dir d)
{
    if (d == DIR_NONE || n == 0 || r->n_factors == 0) {
        return;
    }
    tens *ts = p->ts;
    /* the op's mesh: every tensor with a real mesh must agree */
    const meshent *me = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const meshent *e = ts[i].me;
        if (ts[i].cur != NULL && e == NULL) {
            return; /* unknown or inlined mesh */
        }
        if (e == NULL || e->is_empty) {
            continue;
        }
        if (e->is_maximal) {
            return;
        }
        if (me == NULL) {
            me = e;
        } else if (p->meshes[me->canon].mesh != p->meshes[e->canon].mesh &&
                   !sp_mesh_equal(me->mesh, e->mesh)) {
            return;
        }
    }
    if (me == NULL) {
        return;
    }
    const sp_mesh *mesh = me->mesh;
    p->step_mesh = mesh;
    if (CM_GROW(p->fs, p->fs_cap, (size_t)n * r->n_factors, NULL) != CM_OK) {
        sp_prop_oom(p);
        return;
    }
    fsh *fs = p->fs;
    for (uint32_t i = 0; i < n; i++) {
        const meshent *e = ts[i].me;
        const sp_mesh *tm = e != NULL && !e->is_empty ? mesh : NULL;
        if (!project_cached(p, tm, r, &ts[i], fs + (size_t)i * r->n_factors)) {
            return;
        }
        ts[i].changed = false;
        ts[i].n_gained = 0;
    }
    /* user priorities: hide dims whose priority is above the current one */
    /* (handled when loading shardings: see sp_prop_visible) */
    /* per factor: the compatible major axes over the source tensors, then
     * the axes each destination takes, by the basic or the aggressive
     * strategy */
    if (!sp_prop_candidates_find(p, r, n, d)) {
        return;
    }
    if (!p->aggressive) {
        sp_prop_basic_factor_propagate(p, r, n, d);
    } else {
        sp_prop_aggressive_factor_propagate(p, r, n, d, op);
    }
    /* write back changed tensors */
    bool any_written = false;
    for (uint32_t i = 0; i < n; i++) {
        if (!ts[i].changed) {
            continue;
        }
        const fsh *row = fs + (size_t)i * r->n_factors;
        const meshent *e = ts[i].me;
        const sp_mesh *tm = e != NULL && !e->is_empty ? mesh : NULL;
        bool differs = false;
        for (uint32_t dd = 0; dd < ts[i].rank && !differs; dd++) {
            ax a[2 * MAXAX], b[2 * MAXAX];
            uint32_t na = dim_axes(r, &ts[i], row, dd, a);
            uint32_t nb = cur_dim_axes(tm, &ts[i], dd, b);
            if (na != nb) {
                differs = true;
            }
            for (uint32_t k = 0; k < na && !differs; k++) {
                differs = !ax_eq(a[k], b[k]);
            }
        }
        if (!differs) {
            continue;
        }
        sp_sharding *ns = build_sharding(p, mesh, me->name, r, &ts[i], row);
        if (ns != NULL) {
            ns = intern_sharding(p, ns);
        }
        const sp_sharding *built = ns;
        if (ns != NULL && ts[i].xform != 0) {
            ns = edge_view_back(p, &ts[i], ns);
        }
        if (ns == NULL) {
            sp_prop_oom(p);
            return;
        }
        p->sh[ts[i].slot] = ns;
        for (uint32_t k = 0; k < ts[i].n_gained; k++) {
            const tens *src = &ts[ts[i].gained[k].src];
            ax g = ts[i].gained[k].a;
            if (p->org_head != NULL) {
                sp_prop_origin_add(p, ts[i].slot, merged_axis(mesh, built, g),
                                   sp_prop_origin_of(p, src->slot, g));
            }
            if (p->edge_head != NULL) {
                sp_prop_edge_add(p, op, mesh, merged_axis(mesh, built, g), src, &ts[i]);
            }
        }
        slot_changed(p, ts[i].slot);
        any_written = true;
    }
    if (any_written) {
        p->edge_step++;
    }
}

static bool add_tensor(prop *p, uint32_t *n, uint32_t slot, const sp_tensor_mapping *map,
                       bool is_result)
{
    if (CM_GROW(p->ts, p->ts_cap, (size_t)*n + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return false;
    }
    tens *t = &p->ts[*n];
    uint32_t value = slot;
    slot = sp_prop_canon_slot(p, slot);
    t->slot = slot;
    t->map = map;
    t->is_result = is_result;
    t->changed = false;
    t->n_gained = 0;
    t->n_repl = 0;
    t->xform = 0;
    t->pos = 0;
    for (uint32_t k = 0; k < *n; k++) {
        t->pos += p->ts[k].is_result == is_result;
    }
    t->updatable = true;
    if (!slot_type(p, value, &t->rank, &t->dims) || map->rank != t->rank) {
        return false;
    }
    t->cur = sp_prop_visible(p, slot);
    t->me = sp_prop_mesh_of(p, t->cur);
    (*n)++;
    return true;
}

/* The terminator of the single block of region r of op, or SP_NONE. */
static uint32_t region_terminator(const sp_module *m, const sp_op *op, uint32_t r)
{
    if (r >= op->n_regions || op->regions[r].n_blocks == 0) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[op->regions[r].blocks[op->regions[r].n_blocks - 1]];
    return b->n_ops > 0 ? b->ops[b->n_ops - 1] : SP_NONE;
}

/* Data-flow edges (propagation.md "Data flow ops"): for each result i, the
 * sources (operand i, the values region terminators return at i) and the
 * targets (result i and the block arguments aliased to it) share a sharding. */
static void step_data_flow(prop *p, uint32_t opid)
{
    const sp_op *op = &p->m->ops[opid];
    for (uint32_t i = 0; i < op->n_results; i++) {
        uint32_t rank;
        const int64_t *dims;
        if (!slot_type(p, op->first_result + i, &rank, &dims)) {
            continue;
        }
        uint32_t srcs[64];
        uint32_t ns = 0;
        if (op->kind == SP_OP_WHILE || op->kind == SP_OP_OPTIMIZATION_BARRIER) {
            if (i < op->n_operands) {
                srcs[ns++] = op->operands[i];
            }
        }
        if (op->kind != SP_OP_OPTIMIZATION_BARRIER) {
            uint32_t first_r = op->kind == SP_OP_WHILE ? 1 : 0; /* while: the body returns */
            for (uint32_t r = first_r; r < op->n_regions && ns < 63; r++) {
                uint32_t t = region_terminator(p->m, op, r);
                if (t != SP_NONE && i < p->m->ops[t].n_operands) {
                    srcs[ns++] = p->m->ops[t].operands[i];
                }
            }
        }
        sp_rule *rule = identity_rule(p, dims, rank, ns + 1);
        if (rule == NULL) {
            sp_prop_oom(p);
            return;
        }
        uint32_t n = 0;
        bool ok = true;
        for (uint32_t k = 0; k < ns && ok; k++) {
            ok = add_tensor(p, &n, srcs[k], &rule->operands[0], false);
        }
        if (!ok || !add_tensor(p, &n, op->first_result + i, &rule->results[0], true)) {
            continue;
        }
        step_tensors(p, opid, rule, n, sp_prop_op_direction(p, opid, op));
    }
}

/* ---- manual computations ----------------------------------------------------------
 * The operands meet the in_shardings (global shapes), the body sees them
 * without the manual axes (local shapes); the body's returned values meet
 * the out_shardings, which are the results' shardings. Free axes move across
 * the boundary both ways; manual axes stay fixed. */

static bool in_axis_list(const sp_attr *manual, const char *name)
{
    if (manual == NULL || manual->kind != SP_ATTR_AXIS_LIST) {
        return false;
    }
    for (uint32_t i = 0; i < manual->u.axes.n; i++) {
        if (strcmp(manual->u.axes.axes[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

static bool ref_eq(const sp_axis_ref *a, const sp_axis_ref *b)
{
    return (a->name == b->name || strcmp(a->name, b->name) == 0) && a->pre_size == b->pre_size &&
           (a->pre_size == 0 || a->size == b->size);
}

/* Number of leading manual axes of dim d. */
static uint32_t n_manual(const sp_dim_sharding *ds, const sp_attr *manual)
{
    uint32_t k = 0;
    while (k < ds->n_axes && in_axis_list(manual, ds->axes[k].name)) {
        k++;
    }
    return k;
}

/* Does b's free part strictly extend a's (every dim's axes of a a prefix of b's)? */
static bool extends(const sp_sharding *b, uint32_t b_skip_manual, const sp_sharding *a,
                    uint32_t a_skip_manual, const sp_attr *manual)
{
    if (b == NULL) {
        return false;
    }
    bool longer = false;
    for (uint32_t d = 0; d < b->rank; d++) {
        const sp_dim_sharding *db = &b->dims[d];
        uint32_t ob = b_skip_manual ? n_manual(db, manual) : 0;
        uint32_t nb = db->n_axes - ob;
        uint32_t oa = 0, na = 0;
        const sp_dim_sharding *da = NULL;
        if (a != NULL && d < a->rank) {
            da = &a->dims[d];
            oa = a_skip_manual ? n_manual(da, manual) : 0;
            na = da->n_axes - oa;
        }
        if (na > nb) {
            return false;
        }
        for (uint32_t i = 0; i < na; i++) {
            if (!ref_eq(&da->axes[oa + i], &db->axes[ob + i])) {
                return false;
            }
        }
        longer = longer || nb > na;
    }
    return longer;
}

/* A copy of s with, per dim, the manual axes of keep_manual (when given)
 * followed by the free axes of free_from; closedness from closed_from. */
static sp_sharding *merge_manual(prop *p, const sp_sharding *keep_manual, const sp_sharding *free_from,
                                 const sp_sharding *closed_from, const sp_attr *manual,
                                 const char *mesh_name)
{
    cm_arena *a = &p->m->arena;
    sp_sharding *r = cm_arena_zalloc(a, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->mesh_name = mesh_name;
    r->rank = free_from->rank;
    r->dims = cm_arena_zalloc(a, sizeof(sp_dim_sharding) * (r->rank + 1u));
    if (r->dims == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < r->rank; d++) {
        const sp_dim_sharding *f = &free_from->dims[d];
        uint32_t of = n_manual(f, manual);
        uint32_t km = 0;
        const sp_dim_sharding *k = NULL;
        if (keep_manual != NULL && d < keep_manual->rank) {
            k = &keep_manual->dims[d];
            km = n_manual(k, manual);
        }
        uint32_t n = km + f->n_axes - of;
        sp_dim_sharding *o = &r->dims[d];
        o->axes = n > 0 ? cm_arena_alloc(a, sizeof(sp_axis_ref) * n) : NULL;
        if (n > 0 && o->axes == NULL) {
            return NULL;
        }
        for (uint32_t i = 0; i < km; i++) {
            o->axes[i] = k->axes[i];
        }
        for (uint32_t i = of; i < f->n_axes; i++) {
            o->axes[km + i - of] = f->axes[i];
        }
        o->n_axes = n;
        o->priority = -1;
        o->is_closed = closed_from != NULL && d < closed_from->rank && closed_from->dims[d].is_closed;
    }
    return r;
}

/* Moves free axes between a global slot and a local value of the body. */
static void sync_boundary(prop *p, uint32_t global_slot, uint32_t local_slot, const sp_attr *manual)
{
    const sp_sharding *g = p->sh[global_slot], *l = p->sh[local_slot];
    if (g == NULL && l == NULL) {
        return;
    }
    const char *mesh = g != NULL ? g->mesh_name : l->mesh_name;
    if (g != NULL && extends(g, 1, l, 0, manual)) {
        sp_sharding *n = merge_manual(p, NULL, g, l != NULL ? l : g, manual, mesh);
        if (n == NULL) {
            sp_prop_oom(p);
            return;
        }
        p->sh[local_slot] = n;
        slot_changed(p, local_slot);
    } else if (l != NULL && extends(l, 0, g, 1, manual)) {
        sp_sharding *n = merge_manual(p, g, l, g != NULL ? g : l, manual, mesh);
        if (n == NULL) {
            sp_prop_oom(p);
            return;
        }
        p->sh[global_slot] = n;
        slot_changed(p, global_slot);
    }
}

static void step_manual(prop *p, uint32_t opid)
{
    const sp_op *op = &p->m->ops[opid];
    const sp_attr *manual = sp_op_attr(p->m, opid, "manual_axes");
    const sp_block *body = &p->m->blocks[op->regions[0].blocks[0]];
    /* operands <-> in_shardings, both global */
    for (uint32_t i = 0; i < op->n_operands; i++) {
        uint32_t rank;
        const int64_t *dims;
        uint32_t v = p->mc_first[opid] + i;
        if (!slot_type(p, v, &rank, &dims)) {
            continue;
        }
        sp_rule *r = identity_rule(p, dims, rank, 2);
        uint32_t n = 0;
        if (r == NULL) {
            sp_prop_oom(p);
            return;
        }
        if (add_tensor(p, &n, op->operands[i], &r->operands[0], false) &&
            add_tensor(p, &n, v, &r->results[0], true)) {
            step_tensors(p, opid, r, n, sp_prop_op_direction(p, opid, op));
        }
        if (i < body->n_args) {
            sync_boundary(p, v, body->first_arg + i, manual);
        }
    }
    /* the body's returned values <-> out_shardings (the results') */
    uint32_t t = region_terminator(p->m, op, 0);
    for (uint32_t j = 0; t != SP_NONE && j < op->n_results && j < p->m->ops[t].n_operands; j++) {
        sync_boundary(p, op->first_result + j, sp_prop_canon_slot(p, p->m->ops[t].operands[j]),
                      manual);
    }
}

/* ---- data-flow edges ----------------------------------------------------------------
 * An sdy.data_flow_edge (added by -sdy-add-data-flow-edges) holds the sharding
 * of its owner and of the owner's other targets (a while's block arguments),
 * which all share the edge result's slot. One step propagates, by an
 * identity rule over the edge's type, between the edge and the owner's
 * sources: a while's operand and body return, each case branch's return, an
 * optimization barrier's operand, a manual or named computation's operand
 * (for a body argument) or body return (for a result). A manual
 * computation's body-argument edge is local (no manual axes) while its
 * source is global, and its result edge is global while the returned value is
 * local: the edge is seen through the manual axes of the in or out sharding
 * (tens.xform), so that only free axes cross. */

/* s with the leading manual axes of each dim dropped, and the manual axes
 * left out of the replicated and unreduced lists (Shardy's eraseManualAxes);
 * in arena a, with new replicated and unreduced lists in arena lists (which
 * outlives a). */
static sp_sharding *mc_erase_manual(cm_arena *a, cm_arena *lists, const sp_sharding *s,
                                    const sp_attr *manual)
{
    sp_sharding *r = cm_arena_memdup(a, s, 1, sizeof *s);
    if (r == NULL) {
        return NULL;
    }
    r->dims = cm_arena_memdup(a, s->dims, s->rank + 1u, sizeof(sp_dim_sharding));
    r->replicated = cm_arena_alloc(lists, sizeof(sp_axis_ref) * (s->n_replicated + 1u));
    r->unreduced = cm_arena_alloc(lists, sizeof(sp_axis_ref) * (s->n_unreduced + 1u));
    if (r->dims == NULL || r->replicated == NULL || r->unreduced == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        uint32_t k = n_manual(&s->dims[d], manual);
        /* an empty dimension may have no axes array: no offset on NULL */
        r->dims[d].axes = k > 0 ? s->dims[d].axes + k : s->dims[d].axes;
        r->dims[d].n_axes = s->dims[d].n_axes - k;
    }
    r->n_replicated = 0;
    for (uint32_t i = 0; i < s->n_replicated; i++) {
        if (!in_axis_list(manual, s->replicated[i].name)) {
            r->replicated[r->n_replicated++] = s->replicated[i];
        }
    }
    r->n_unreduced = 0;
    for (uint32_t i = 0; i < s->n_unreduced; i++) {
        if (!in_axis_list(manual, s->unreduced[i].name)) {
            r->unreduced[r->n_unreduced++] = s->unreduced[i];
        }
    }
    if (r->n_replicated == s->n_replicated) {
        r->replicated = s->replicated;
    }
    if (r->n_unreduced == s->n_unreduced) {
        r->unreduced = s->unreduced;
    }
    return r;
}

/* The outer sharding of a manual computation's in or out entry: per dim the
 * manual axes of outer, then the axes of free (a local sharding, or NULL for
 * none), with free's openness and priority; outer's replicated and
 * unreduced axes (Shardy's addFreeAxesToManualComputationSharding); in
 * arena a. */
static sp_sharding *mc_add_free(cm_arena *a, const sp_sharding *outer, const sp_sharding *free,
                                const sp_attr *manual)
{
    sp_sharding *r = cm_arena_memdup(a, outer, 1, sizeof *outer);
    if (r == NULL) {
        return NULL;
    }
    r->dims = cm_arena_zalloc(a, sizeof(sp_dim_sharding) * (outer->rank + 1u));
    if (r->dims == NULL) {
        return NULL;
    }
    if (free != NULL && free->mesh_name != NULL) {
        r->mesh_name = free->mesh_name;
    }
    for (uint32_t d = 0; d < outer->rank; d++) {
        const sp_dim_sharding *od = &outer->dims[d];
        const sp_dim_sharding *fd = free != NULL && d < free->rank ? &free->dims[d] : NULL;
        uint32_t km = n_manual(od, manual), nf = fd != NULL ? fd->n_axes : 0;
        sp_dim_sharding *rd = &r->dims[d];
        rd->n_axes = km + nf;
        rd->axes = cm_arena_alloc(a, sizeof(sp_axis_ref) * (rd->n_axes + 1u));
        if (rd->axes == NULL) {
            return NULL;
        }
        for (uint32_t i = 0; i < km; i++) {
            rd->axes[i] = od->axes[i];
        }
        for (uint32_t i = 0; i < nf; i++) {
            rd->axes[km + i] = fd->axes[i];
        }
        rd->is_closed = fd != NULL ? fd->is_closed : false;
        rd->priority = fd != NULL ? fd->priority : -1;
    }
    return r;
}

/* Entry k of sharding-list attribute name of op, or NULL. */
static const sp_sharding *list_entry(const prop *p, uint32_t op, const char *name, uint32_t k)
{
    const sp_attr *a = sp_op_attr(p->m, op, name);
    return a != NULL && a->kind == SP_ATTR_SHARDING_LIST && k < a->u.shardings.n
               ? a->u.shardings.items[k]
               : NULL;
}

/* The owner of edge input x: its op, whether x is a body argument, and its
 * result or argument number. False when x belongs to no data-flow op. */
static bool edge_owner(const prop *p, uint32_t x, uint32_t *owner, bool *is_arg, uint32_t *k)
{
    const sp_value *v = &p->m->values[x];
    *k = v->index;
    *is_arg = v->def == SP_NONE;
    *owner = *is_arg ? p->m->blocks[v->block].parent_op : v->def;
    if (*owner == SP_NONE) {
        return false;
    }
    const sp_op *o = &p->m->ops[*owner];
    switch ((sp_op_kind)o->kind) {
    case SP_OP_WHILE:
    case SP_OP_CASE:
    case SP_OP_IF:
    case SP_OP_OPTIMIZATION_BARRIER:
        return !*is_arg;
    case SP_OP_SDY_MANUAL_COMPUTATION:
    case SP_OP_SDY_NAMED_COMPUTATION:
        return o->n_regions == 1 && o->regions[0].n_blocks == 1 &&
               (!*is_arg || p->m->values[x].block == o->regions[0].blocks[0]);
    default:
        return false;
    }
}

/* The sources of the edge whose owner is (owner, is_arg, k) into srcs
 * (at most cap); their number. */
static uint32_t edge_sources(const prop *p, uint32_t owner, bool is_arg, uint32_t k,
                             uint32_t *srcs, uint32_t cap)
{
    const sp_op *o = &p->m->ops[owner];
    uint32_t n = 0;
    if (is_arg || o->kind == SP_OP_WHILE || o->kind == SP_OP_OPTIMIZATION_BARRIER) {
        if (k < o->n_operands) {
            srcs[n++] = o->operands[k];
        }
        if (is_arg || o->kind == SP_OP_OPTIMIZATION_BARRIER) {
            return n;
        }
    }
    uint32_t first_r = o->kind == SP_OP_WHILE ? 1 : 0; /* while: the body returns */
    for (uint32_t r = first_r; r < o->n_regions && n < cap; r++) {
        uint32_t t = region_terminator(p->m, o, r);
        if (t != SP_NONE && k < p->m->ops[t].n_operands) {
            srcs[n++] = p->m->ops[t].operands[k];
        }
        if (o->kind == SP_OP_WHILE) {
            break;
        }
    }
    return n;
}

/* Does data-flow op opid have an edge on any of its owners? Then its edges
 * propagate for it and the op itself does not. */
static bool has_edges(const prop *p, uint32_t opid)
{
    const sp_op *op = &p->m->ops[opid];
    for (uint32_t i = 0; i < op->n_results; i++) {
        if (p->edge_of[op->first_result + i] != SP_NONE) {
            return true;
        }
    }
    if ((op->kind == SP_OP_SDY_MANUAL_COMPUTATION || op->kind == SP_OP_SDY_NAMED_COMPUTATION) &&
        op->n_regions == 1 && op->regions[0].n_blocks == 1) {
        const sp_block *b = &p->m->blocks[op->regions[0].blocks[0]];
        for (uint32_t i = 0; i < b->n_args; i++) {
            if (p->edge_of[b->first_arg + i] != SP_NONE) {
                return true;
            }
        }
    }
    return false;
}

static void step_edge(prop *p, uint32_t eid)
{
    const sp_op *e = &p->m->ops[eid];
    uint32_t rank, owner, k;
    const int64_t *dims;
    bool is_arg;
    if (e->n_operands != 1 || e->n_results != 1 || !slot_type(p, e->first_result, &rank, &dims) ||
        !edge_owner(p, e->operands[0], &owner, &is_arg, &k)) {
        return;
    }
    uint32_t srcs[64];
    uint32_t ns = edge_sources(p, owner, is_arg, k, srcs, 63);
    if (ns == 0) {
        return;
    }
    sp_rule *rule = identity_rule(p, dims, rank, ns + 1);
    if (rule == NULL) {
        sp_prop_oom(p);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < ns; i++) {
        if (!add_tensor(p, &n, srcs[i], &rule->operands[0], false)) {
            return;
        }
    }
    if (!add_tensor(p, &n, e->first_result, &rule->results[0], true)) {
        return;
    }
    if (p->m->ops[owner].kind == SP_OP_SDY_MANUAL_COMPUTATION) {
        tens *t = &p->ts[n - 1];
        const sp_attr *manual = sp_op_attr(p->m, owner, "manual_axes");
        const sp_sharding *outer =
            list_entry(p, owner, is_arg ? "in_shardings" : "out_shardings", k);
        if (manual != NULL && manual->kind == SP_ATTR_AXIS_LIST && manual->u.axes.n > 0 &&
            outer != NULL && outer->rank == rank) {
            t->xform = is_arg ? 1 : 2;
            t->outer = outer;
            t->manual = manual;
            if (is_arg) {
                t->cur = mc_add_free(&p->m->arena, outer, t->cur, manual);
            } else if (t->cur != NULL) {
                t->cur = mc_erase_manual(&p->m->arena, &p->m->arena, t->cur, manual);
            }
            if (t->cur == NULL && (is_arg || p->sh[t->slot] != NULL)) {
                sp_prop_oom(p);
                return;
            }
            t->me = sp_prop_mesh_of(p, t->cur);
        }
    }
    step_tensors(p, eid, rule, n, sp_prop_op_direction(p, eid, e));
}

/* An sdy.func_data_flow_edge (Shardy's PropagateFuncDataFlowEdgeOp): the
 * edge's result and its sources (p->fedge_src) share a sharding along the
 * identity rule, the sources as operands. A function argument's edge
 * without callers has nothing to propagate. */
static void step_func_edge(prop *p, uint32_t eid)
{
    const sp_op *e = &p->m->ops[eid];
    uint32_t rank;
    const int64_t *dims;
    if (e->n_operands != 1 || e->n_results != 1 || p->fedge_src.n_keys == 0 ||
        !slot_type(p, e->first_result, &rank, &dims)) {
        return;
    }
    const sp_csr *c = &p->fedge_src;
    uint32_t lo = c->start[eid], hi = c->start[eid + 1];
    if (lo == hi) {
        return;
    }
    sp_rule *rule = identity_rule(p, dims, rank, hi - lo + 1);
    if (rule == NULL) {
        sp_prop_oom(p);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = lo; i < hi; i++) {
        if (!add_tensor(p, &n, c->items[i], &rule->operands[0], false)) {
            return;
        }
    }
    if (!add_tensor(p, &n, e->first_result, &rule->results[0], true)) {
        return;
    }
    step_tensors(p, eid, rule, n, sp_prop_op_direction(p, eid, e));
}

/* A new sharding ns of a manual computation's edge, as seen through
 * t->xform, back in the edge's own terms (interned). NULL when out of
 * memory. */
static sp_sharding *edge_view_back(prop *p, const tens *t, sp_sharding *ns)
{
    sp_sharding *r = t->xform == 1 ? mc_erase_manual(&p->scratch, &p->m->arena, ns, t->manual)
                                   : mc_add_free(&p->scratch, t->outer, ns, t->manual);
    return r != NULL ? intern_sharding(p, r) : NULL;
}

static void step_op(prop *p, uint32_t opid)
{
    sp_op *op = &p->m->ops[opid];
    uint32_t n = 0;
    p->steps++;
    if (op->kind == SP_OP_FUNC_RETURN) {
        /* edges between returned values and the function's results */
        uint32_t f = p->m->blocks[op->parent_block].parent_op;
        if (f == SP_NONE || !is_func(&p->m->ops[f]) || p->func_first[f] == SP_NONE ||
            !func_is_public(p->m, f)) {
            return;
        }
        for (uint32_t i = 0; i < op->n_operands; i++) {
            uint32_t rank;
            const int64_t *dims;
            uint32_t fslot = p->func_first[f] + i;
            if (!slot_type(p, op->operands[i], &rank, &dims) || !slot_type(p, fslot, &rank, &dims)) {
                continue;
            }
            sp_rule *r = identity_rule(p, dims, rank, 2);
            if (r == NULL) {
                sp_prop_oom(p);
                return;
            }
            n = 0;
            if (!add_tensor(p, &n, op->operands[i], &r->operands[0], false) ||
                !add_tensor(p, &n, fslot, &r->results[0], true)) {
                continue;
            }
            step_tensors(p, opid, r, n, sp_prop_op_direction(p, opid, op));
        }
        return;
    }
    if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT || op->kind == SP_OP_SDY_PROPAGATION_BARRIER) {
        if (op->n_operands != 1 || op->n_results != 1) {
            return;
        }
        uint32_t rank;
        const int64_t *dims;
        if (!slot_type(p, op->first_result, &rank, &dims)) {
            return;
        }
        sp_rule *r = identity_rule(p, dims, rank, 2);
        if (r == NULL) {
            sp_prop_oom(p);
            return;
        }
        if (!add_tensor(p, &n, op->operands[0], &r->operands[0], false) ||
            !add_tensor(p, &n, op->first_result, &r->results[0], true)) {
            return;
        }
        dir d = sp_prop_op_direction(p, opid, op);
        if (op->kind == SP_OP_SDY_PROPAGATION_BARRIER) {
            const sp_attr *a = sp_op_attr(p->m, opid, "allowed_direction");
            const char *v = a != NULL && a->kind == SP_ATTR_ENUM ? a->u.enm.value : "NONE";
            d = strcmp(v, "BOTH") == 0       ? DIR_BOTH
                : strcmp(v, "FORWARD") == 0  ? DIR_FORWARD
                : strcmp(v, "BACKWARD") == 0 ? DIR_BACKWARD
                                             : DIR_NONE;
        }
        step_tensors(p, opid, r, n, d);
        return;
    }
    if (op->kind == SP_OP_SDY_DATA_FLOW_EDGE) {
        step_edge(p, opid);
        return;
    }
    if (op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE) {
        step_func_edge(p, opid);
        return;
    }
    if (op->kind == SP_OP_SDY_RESHARD) {
        return; /* no rule: a reshard holds its sharding, nothing goes through it */
    }
    if (op->kind == SP_OP_WHILE || op->kind == SP_OP_CASE || op->kind == SP_OP_IF ||
        op->kind == SP_OP_OPTIMIZATION_BARRIER) {
        if (!has_edges(p, opid)) {
            step_data_flow(p, opid);
        }
        return;
    }
    if (op->kind == SP_OP_SDY_SHARDING_GROUP) {
        return; /* groups are kept in sync in slot_changed */
    }
    if (p->mc_first[opid] != SP_NONE) {
        step_manual(p, opid);
        return;
    }
    if (op->n_regions > 0 && op->kind != SP_OP_REDUCE && op->kind != SP_OP_SCATTER &&
        op->kind != SP_OP_SORT && op->kind != SP_OP_REDUCE_WINDOW &&
        op->kind != SP_OP_SELECT_AND_SCATTER && op->kind != SP_OP_MAP &&
        op->kind != SP_OP_ALL_REDUCE && op->kind != SP_OP_REDUCE_SCATTER) {
        return; /* data-flow ops: handled by the import edges (TODO #3 follow-up) */
    }
    dir d = sp_prop_op_direction(p, opid, op);
    if (d == DIR_NONE) {
        return;
    }
    /* an op none of whose tensors is sharded has nothing to propagate */
    bool any = false;
    for (uint32_t i = 0; i < op->n_operands && !any; i++) {
        any = p->sh[sp_prop_canon_slot(p, op->operands[i])] != NULL;
    }
    for (uint32_t i = 0; i < op->n_results && !any; i++) {
        any = p->sh[sp_prop_canon_slot(p, op->first_result + i)] != NULL;
    }
    if (!any) {
        return;
    }
    /* an element-wise op whose operands and result all have the same sharding
     * is at its fixed point (identity mapping, same axes, same closedness) */
    if (sp_op_is_elementwise((sp_op_kind)op->kind) && op->n_results == 1 &&
        p->user_priority < 0) {
        const sp_sharding *rs = p->sh[sp_prop_canon_slot(p, op->first_result)];
        uint32_t rt = p->m->values[op->first_result].type;
        bool same = rs != NULL;
        for (uint32_t i = 0; i < op->n_operands && same; i++) {
            same = p->sh[sp_prop_canon_slot(p, op->operands[i])] == rs &&
                   p->m->values[op->operands[i]].type == rt;
        }
        if (same) {
            return;
        }
    }
    sp_rule *r = op_rule(p, opid);
    if (r == NULL || r->n_operands != op->n_operands || r->n_results != op->n_results) {
        return;
    }
    for (uint32_t i = 0; i < op->n_operands; i++) {
        if (!add_tensor(p, &n, op->operands[i], &r->operands[i], false)) {
            if (r->operands[i].rank == 0) {
                continue;
            }
            return;
        }
    }
    for (uint32_t i = 0; i < op->n_results; i++) {
        if (!add_tensor(p, &n, op->first_result + i, &r->results[i], true)) {
            if (r->results[i].rank == 0) {
                continue;
            }
            return;
        }
    }
    step_tensors(p, opid, r, n, d);
}

/* ---- set-up and write-back ---------------------------------------------------------------- */

static void walk_ops(const sp_module *m, uint32_t block, uint32_t *out, uint32_t *n)
{
    const sp_block *b = &m->blocks[block];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        uint32_t id = b->ops[i];
        const sp_op *op = &m->ops[id];
        if (!is_func(op) && op->kind != SP_OP_SDY_MESH) {
            out[(*n)++] = id;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < op->regions[r].n_blocks; k++) {
                walk_ops(m, op->regions[r].blocks[k], out, n);
            }
        }
    }
}

/* For a region terminator of a data-flow op (while body, case branch), the
 * op owning the edges its operands feed; SP_NONE otherwise. */
static uint32_t data_flow_owner(const sp_module *m, const sp_op *op)
{
    if (op->parent_block == SP_NONE) {
        return SP_NONE;
    }
    uint32_t parent = m->blocks[op->parent_block].parent_op;
    if (parent == SP_NONE) {
        return SP_NONE;
    }
    const sp_op *po = &m->ops[parent];
    if (po->kind != SP_OP_WHILE && po->kind != SP_OP_CASE && po->kind != SP_OP_IF &&
        po->kind != SP_OP_SDY_MANUAL_COMPUTATION && po->kind != SP_OP_SDY_NAMED_COMPUTATION) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[op->parent_block];
    if (b->n_ops == 0 || &m->ops[b->ops[b->n_ops - 1]] != op) {
        return SP_NONE;
    }
    return parent;
}

/* The users of each slot (sp_csr_edges_fn over a prop): the ops using it as
 * an operand, the data-flow op owning the edge a region terminator's operand
 * feeds, a manual computation for its in-sharding slots and body arguments,
 * and a return op for its function's result slots. */
static void users_add(sp_csr *c, void *ctx)
{
    const prop *p = ctx;
    const sp_module *m = p->m;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            sp_csr_add(c, sp_prop_canon_slot(p, op->operands[k]), i);
        }
        uint32_t owner = data_flow_owner(m, op);
        if (owner != SP_NONE) {
            /* a returned value feeds the edge of the owner's result (or,
             * without edges, the owner itself) */
            const sp_op *o = &m->ops[owner];
            for (uint32_t k = 0; k < op->n_operands; k++) {
                uint32_t e = k < o->n_results ? p->edge_of[o->first_result + k] : SP_NONE;
                sp_csr_add(c, sp_prop_canon_slot(p, op->operands[k]), e != SP_NONE ? e : owner);
            }
        }
        /* an operand of a data-flow op feeds the edge of the matching result
         * (while, optimization barrier) or body argument (manual and named
         * computations) */
        if (op->kind == SP_OP_WHILE || op->kind == SP_OP_OPTIMIZATION_BARRIER) {
            for (uint32_t k = 0; k < op->n_operands && k < op->n_results; k++) {
                uint32_t e = p->edge_of[op->first_result + k];
                if (e != SP_NONE) {
                    sp_csr_add(c, sp_prop_canon_slot(p, op->operands[k]), e);
                }
            }
        }
        if ((op->kind == SP_OP_SDY_MANUAL_COMPUTATION || op->kind == SP_OP_SDY_NAMED_COMPUTATION) &&
            op->n_regions == 1 && op->regions[0].n_blocks == 1) {
            const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
            for (uint32_t k = 0; k < op->n_operands && k < b->n_args; k++) {
                uint32_t e = p->edge_of[b->first_arg + k];
                if (e != SP_NONE) {
                    sp_csr_add(c, sp_prop_canon_slot(p, op->operands[k]), e);
                }
            }
        }
        if (p->mc_first[i] != SP_NONE) {
            const sp_block *mcb = &m->blocks[op->regions[0].blocks[0]];
            for (uint32_t k = 0; k < op->n_operands; k++) {
                sp_csr_add(c, p->mc_first[i] + k, i);
            }
            for (uint32_t k = 0; k < mcb->n_args; k++) {
                sp_csr_add(c, mcb->first_arg + k, i);
            }
        }
        if (op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE && p->fedge_src.n_keys > 0) {
            const sp_csr *fe = &p->fedge_src;
            for (uint32_t k = fe->start[i]; k < fe->start[i + 1]; k++) {
                sp_csr_add(c, sp_prop_canon_slot(p, fe->items[k]), i);
            }
        }
        if (op->kind == SP_OP_FUNC_RETURN) {
            uint32_t f = m->blocks[op->parent_block].parent_op;
            if (f != SP_NONE && p->func_first[f] != SP_NONE) {
                for (uint32_t k = 0; k < op->n_operands && p->func_first[f] + k < p->n_slots; k++) {
                    sp_csr_add(c, p->func_first[f] + k, i);
                }
            }
        }
    }
}

/* What sp_csr_build of p->fedge_src reads: per value its func data-flow
 * edge, per op the callee of a func.call (SP_NONE otherwise). */
typedef struct fedge_ctx {
    const sp_module *m;
    const uint32_t *fedge_of;
    const uint32_t *callee;
} fedge_ctx;

/* The sources of each function data-flow edge (sp_csr_edges_fn): walking
 * the calls, operand k of a call feeds the edge of its callee's argument k
 * and the callee's returned value k feeds the edge of the call's result k. */
static void fedge_add(sp_csr *c, void *vctx)
{
    const fedge_ctx *x = vctx;
    const sp_module *m = x->m;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        uint32_t f = x->callee[i];
        if (f == SP_NONE) {
            continue;
        }
        const sp_op *call = &m->ops[i];
        const sp_op *fo = &m->ops[f];
        if (fo->n_regions != 1 || fo->regions[0].n_blocks == 0) {
            continue;
        }
        const sp_block *b = &m->blocks[fo->regions[0].blocks[0]];
        for (uint32_t k = 0; k < call->n_operands && k < b->n_args; k++) {
            uint32_t e = x->fedge_of[b->first_arg + k];
            if (e != SP_NONE) {
                sp_csr_add(c, e, call->operands[k]);
            }
        }
        uint32_t ret = b->n_ops > 0 ? b->ops[b->n_ops - 1] : SP_NONE;
        if (ret == SP_NONE || m->ops[ret].kind != SP_OP_FUNC_RETURN) {
            continue;
        }
        for (uint32_t k = 0; k < call->n_results && k < m->ops[ret].n_operands; k++) {
            uint32_t e = x->fedge_of[call->first_result + k];
            if (e != SP_NONE) {
                sp_csr_add(c, e, m->ops[ret].operands[k]);
            }
        }
    }
}

/* Builds p->fedge_src when the module has function data-flow edges. */
static cm_status fedge_setup(prop *p)
{
    const sp_module *m = p->m;
    uint32_t *fedge_of = NULL, *callee = NULL;
    bool any = false;
    for (uint32_t i = 0; i < m->n_ops && !any; i++) {
        any = m->ops[i].kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE && m->ops[i].parent_block != SP_NONE;
    }
    if (!any) {
        return CM_OK;
    }
    fedge_of = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    callee = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (fedge_of == NULL || callee == NULL) {
        cm_free(fedge_of);
        cm_free(callee);
        return sp_prop_oom(p);
    }
    memset(fedge_of, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        callee[i] = SP_NONE;
        if (op->parent_block == SP_NONE) {
            continue;
        }
        if (op->kind == SP_OP_SDY_FUNC_DATA_FLOW_EDGE && op->n_operands == 1 &&
            op->n_results == 1) {
            fedge_of[op->operands[0]] = i;
        } else if (op->kind == SP_OP_FUNC_CALL) {
            const sp_attr *a = sp_op_attr(m, i, "callee");
            if (a != NULL && a->kind == SP_ATTR_SYMBOL) {
                callee[i] = sp_module_func(m, a->u.sym);
            }
        }
    }
    fedge_ctx x = {m, fedge_of, callee};
    cm_status st = sp_csr_build(&p->fedge_src, m->n_ops, fedge_add, &x, NULL);
    cm_free(fedge_of);
    cm_free(callee);
    return st != CM_OK ? sp_prop_oom(p) : CM_OK;
}

static cm_status setup(prop *p)
{
    sp_module *m = p->m;
    /* meshes */
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        if (op->kind != SP_OP_SDY_MESH) {
            continue;
        }
        const sp_attr *nm = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *ms = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (nm == NULL || ms == NULL || ms->kind != SP_ATTR_MESH || p->n_meshes >= MAXMESH) {
            continue;
        }
        meshent *e = &p->meshes[p->n_meshes];
        e->name = nm->u.str.s;
        e->mesh = ms->u.mesh;
        e->is_empty = e->mesh->n_axes == 0 && e->mesh->n_device_ids == 0;
        e->is_maximal = e->mesh->n_axes == 0 && e->mesh->n_device_ids > 0;
        e->canon = p->n_meshes;
        for (uint32_t k = 0; k < p->n_meshes; k++) {
            if (sp_mesh_equal(p->meshes[k].mesh, e->mesh)) {
                e->canon = p->meshes[k].canon;
                break;
            }
        }
        p->n_meshes++;
    }
    /* function-result slots */
    uint32_t n_fres = 0;
    p->func_first = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (p->func_first == NULL) {
        return sp_prop_oom(p);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        p->func_first[i] = SP_NONE;
        if (is_func(&m->ops[i])) {
            const sp_type *ft = sp_func_type(m, i);
            if (ft != NULL) {
                p->func_first[i] = m->n_values + n_fres;
                n_fres += ft->n_results;
            }
        }
    }
    p->edge_of = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    p->mc_first = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (p->mc_first == NULL || p->edge_of == NULL) {
        return sp_prop_oom(p);
    }
    memset(p->edge_of, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_SDY_DATA_FLOW_EDGE && op->n_operands == 1 && op->n_results == 1 &&
            op->parent_block != SP_NONE) {
            p->edge_of[op->operands[0]] = i;
        }
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        p->mc_first[i] = SP_NONE;
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_SDY_MANUAL_COMPUTATION && op->parent_block != SP_NONE &&
            op->n_regions == 1 && op->regions[0].n_blocks == 1 && !has_edges(p, i)) {
            p->mc_first[i] = m->n_values + n_fres;
            n_fres += op->n_operands;
        }
    }
    p->n_slots = m->n_values + n_fres;
    p->sh = cm_calloc(p->n_slots + 1u, sizeof(sp_sharding *));
    p->orig = cm_calloc(p->n_slots + 1u, sizeof(sp_sharding *));
    p->fres_func = cm_alloc(sizeof(uint32_t) * (n_fres + 1u));
    p->fres_index = cm_alloc(sizeof(uint32_t) * (n_fres + 1u));
    p->rules = cm_calloc(m->n_ops + 1u, sizeof(sp_rule *));
    p->rule_done = cm_calloc(m->n_ops + 1u, 1);
    p->queued = cm_calloc(m->n_ops + 1u, 1);
    if (p->sh == NULL || p->orig == NULL || p->fres_func == NULL || p->fres_index == NULL ||
        p->rules == NULL || p->rule_done == NULL || p->queued == NULL) {
        return sp_prop_oom(p);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (p->func_first[i] == SP_NONE) {
            continue;
        }
        const sp_type *ft = sp_func_type(m, i);
        for (uint32_t k = 0; k < ft->n_results; k++) {
            uint32_t s = p->func_first[i] + k - m->n_values;
            p->fres_func[s] = i;
            p->fres_index[s] = k;
            p->sh[p->func_first[i] + k] = sp_func_result_sharding(m, i, k);
        }
        const sp_op *f = &m->ops[i];
        if (f->n_regions == 1 && f->regions[0].n_blocks > 0) {
            const sp_block *entry = &m->blocks[f->regions[0].blocks[0]];
            for (uint32_t k = 0; k < entry->n_args; k++) {
                p->sh[entry->first_arg + k] = sp_value_sharding(m, entry->first_arg + k);
            }
        }
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (p->mc_first[i] == SP_NONE) {
            continue;
        }
        const sp_op *op = &m->ops[i];
        const sp_attr *in = sp_op_attr(m, i, "in_shardings");
        const sp_attr *out = sp_op_attr(m, i, "out_shardings");
        for (uint32_t k = 0; k < op->n_operands; k++) {
            uint32_t s = p->mc_first[i] + k;
            p->fres_func[s - m->n_values] = i;
            p->fres_index[s - m->n_values] = k;
            if (in != NULL && in->kind == SP_ATTR_SHARDING_LIST && k < in->u.shardings.n) {
                p->sh[s] = in->u.shardings.items[k];
            }
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            if (out != NULL && out->kind == SP_ATTR_SHARDING_LIST && k < out->u.shardings.n) {
                p->sh[op->first_result + k] = out->u.shardings.items[k];
            }
        }
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->n_results == 0 || p->mc_first[i] != SP_NONE) {
            continue;
        }
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT || op->kind == SP_OP_SDY_DATA_FLOW_EDGE ||
            op->kind == SP_OP_SDY_RESHARD) {
            const sp_attr *a = sp_op_attr(m, i, "sharding");
            p->sh[op->first_result] = a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
            continue;
        }
        const sp_attr *a = sp_op_attr(m, i, "sdy.sharding");
        if (a != NULL && a->kind == SP_ATTR_SHARDING_LIST && a->u.shardings.n == op->n_results) {
            for (uint32_t k = 0; k < op->n_results; k++) {
                p->sh[op->first_result + k] = a->u.shardings.items[k];
            }
        }
    }
    /* data-flow block arguments alias the owner's result slot */
    p->alias = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    if (p->alias == NULL) {
        return sp_prop_oom(p);
    }
    memset(p->alias, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind != SP_OP_WHILE) {
            continue;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            if (op->regions[r].n_blocks == 0) {
                continue;
            }
            const sp_block *b = &m->blocks[op->regions[r].blocks[0]];
            for (uint32_t k = 0; k < b->n_args && k < op->n_results; k++) {
                uint32_t e = p->edge_of[op->first_result + k];
                p->alias[b->first_arg + k] =
                    e != SP_NONE ? m->ops[e].first_result : op->first_result + k;
            }
        }
    }
    /* an edge's input (its owner) shares the edge's slot */
    for (uint32_t v = 0; v < m->n_values; v++) {
        if (p->edge_of[v] != SP_NONE) {
            p->alias[v] = m->ops[p->edge_of[v]].first_result;
        }
    }
    memcpy(p->orig, p->sh, sizeof(sp_sharding *) * p->n_slots);
    if (fedge_setup(p) != CM_OK) {
        return p->st;
    }
    /* the ops to wake per slot */
    if (sp_csr_build(&p->users, p->n_slots, users_add, p, NULL) != CM_OK) {
        return sp_prop_oom(p);
    }
    return sp_prop_groups_setup(p);
}

/* One result-sharding list attribute per distinct sharding of single-result
 * ops: shardings are interned and attributes are never written in place, so
 * ops with equal shardings can share one (a 1M-op module needs a few
 * thousand instead of a million). */
typedef struct attr_share {
    const sp_sharding *key;
    sp_attr *val;
} attr_share;

/* The shared attribute of sharding s in share (a map of attr_share entries
 * keyed by address), NULL when it has none yet; the pointer is valid until
 * the next call. NULL with p->st set when out of memory. */
static sp_attr **attr_share_slot(prop *p, cm_map *share, const sp_sharding *s)
{
    attr_share *e;
    bool found;
    if (cm_map_find_or_insert(share, cm_hash_ptr(s), NULL, NULL, (void **)&e, &found, NULL) !=
        CM_OK) {
        sp_prop_oom(p);
        return NULL;
    }
    if (!found) {
        e->key = s;
    }
    return &e->val;
}

/* Op results' shardings into their ops' sdy.sharding attributes. */
static cm_status write_back_results(prop *p, cm_map *share)
{
    sp_module *m = p->m;
    /* op results */
    for (uint32_t i = 0; i < m->n_ops && p->st == CM_OK; i++) {
        const sp_op *op = &m->ops[i];
        if (op->n_results == 0) {
            continue;
        }
        bool changed = false;
        const char *mesh_name = NULL;
        for (uint32_t k = 0; k < op->n_results; k++) {
            uint32_t v = op->first_result + k;
            changed = changed || p->sh[v] != p->orig[v];
            if (p->sh[v] != NULL && mesh_name == NULL) {
                mesh_name = p->sh[v]->mesh_name;
            }
        }
        if (!changed) {
            continue;
        }
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
            if (sp_value_set_sharding(m, op->first_result, p->sh[op->first_result]) != CM_OK) {
                return sp_prop_oom(p);
            }
            continue;
        }
        if (op->kind == SP_OP_SDY_DATA_FLOW_EDGE || op->kind == SP_OP_SDY_RESHARD) {
            sp_attr *a = p->sh[op->first_result] != NULL ? sp_attr_new(m, SP_ATTR_SHARDING) : NULL;
            if (a == NULL) {
                if (p->sh[op->first_result] != NULL) {
                    return sp_prop_oom(p);
                }
                continue;
            }
            a->u.sharding = p->sh[op->first_result];
            if (sp_op_set_attr(m, i, "sharding", a) != CM_OK) {
                return sp_prop_oom(p);
            }
            continue;
        }
        if (p->mc_first[i] != SP_NONE) {
            continue; /* written with the in_shardings below */
        }
        sp_attr **shared = NULL;
        if (op->n_results == 1 && p->sh[op->first_result] != NULL) {
            shared = attr_share_slot(p, share, p->sh[op->first_result]);
            if (shared == NULL) {
                return p->st;
            }
            if (*shared != NULL) {
                if (sp_op_set_attr(m, i, "sdy.sharding", *shared) != CM_OK) {
                    return sp_prop_oom(p);
                }
                continue;
            }
        }
        sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
        if (a == NULL) {
            return sp_prop_oom(p);
        }
        a->u.shardings.n = op->n_results;
        a->u.shardings.items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * op->n_results);
        if (a->u.shardings.items == NULL) {
            return sp_prop_oom(p);
        }
        if (shared != NULL) {
            *shared = a;
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            uint32_t v = op->first_result + k;
            sp_sharding *s = p->sh[v];
            if (s == NULL) {
                const sp_type *t = &m->types[m->values[v].type];
                s = sp_sharding_open(&m->arena, mesh_name, t->kind == SP_TYPE_TENSOR ? t->rank : 0);
                if (s == NULL) {
                    return sp_prop_oom(p);
                }
            }
            a->u.shardings.items[k] = s;
        }
        if (sp_op_set_attr(m, i, "sdy.sharding", a) != CM_OK) {
            return sp_prop_oom(p);
        }
    }
    return p->st;
}

static cm_status write_back(prop *p)
{
    sp_module *m = p->m;
    cm_map share;
    cm_map_init(&share, sizeof(attr_share));
    write_back_results(p, &share);
    cm_map_fini(&share);
    /* manual computations: in_shardings and out_shardings */
    for (uint32_t i = 0; i < m->n_ops && p->st == CM_OK; i++) {
        if (p->mc_first[i] == SP_NONE) {
            continue;
        }
        const sp_op *op = &m->ops[i];
        for (int which = 0; which < 2; which++) {
            uint32_t n = which == 0 ? op->n_operands : op->n_results;
            uint32_t first = which == 0 ? p->mc_first[i] : op->first_result;
            bool changed = false;
            for (uint32_t k = 0; k < n; k++) {
                changed = changed || p->sh[first + k] != p->orig[first + k];
            }
            if (!changed) {
                continue;
            }
            sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
            if (a == NULL) {
                return sp_prop_oom(p);
            }
            a->u.shardings.n = n;
            a->u.shardings.items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * (n + 1u));
            if (a->u.shardings.items == NULL) {
                return sp_prop_oom(p);
            }
            const char *mesh = NULL;
            for (uint32_t k = 0; k < n && mesh == NULL; k++) {
                mesh = p->sh[first + k] != NULL ? p->sh[first + k]->mesh_name : NULL;
            }
            for (uint32_t k = 0; k < n; k++) {
                sp_sharding *x = p->sh[first + k];
                if (x == NULL) {
                    uint32_t rank;
                    const int64_t *dims;
                    x = sp_sharding_open(&m->arena, mesh,
                                         slot_type(p, which == 0 ? op->operands[k] : first + k, &rank,
                                                   &dims)
                                             ? rank
                                             : 0);
                    if (x == NULL) {
                        return sp_prop_oom(p);
                    }
                }
                a->u.shardings.items[k] = x;
            }
            if (sp_op_set_attr(m, i, which == 0 ? "in_shardings" : "out_shardings", a) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
    }
    /* function arguments and results */
    for (uint32_t i = 0; i < m->n_ops && p->st == CM_OK; i++) {
        if (p->func_first[i] == SP_NONE) {
            continue;
        }
        const sp_type *ft = sp_func_type(m, i);
        const sp_op *f = &m->ops[i];
        if (f->n_regions == 1 && f->regions[0].n_blocks > 0) {
            const sp_block *entry = &m->blocks[f->regions[0].blocks[0]];
            for (uint32_t k = 0; k < entry->n_args; k++) {
                uint32_t v = entry->first_arg + k;
                if (p->sh[v] != p->orig[v] && sp_value_set_sharding(m, v, p->sh[v]) != CM_OK) {
                    return sp_prop_oom(p);
                }
            }
        }
        for (uint32_t k = 0; k < ft->n_results; k++) {
            uint32_t s = p->func_first[i] + k;
            if (p->sh[s] != p->orig[s] &&
                sp_func_set_result_sharding(m, i, k, p->sh[s]) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
    }
    return p->st;
}

/* Steps every function's return op once (Shardy's propagateFuncResults). */
static void returns_step(prop *p)
{
    for (uint32_t i = 0; i < p->m->n_ops && p->st == CM_OK; i++) {
        if (p->m->ops[i].kind == SP_OP_FUNC_RETURN) {
            p->cur_op = i;
            step_op(p, i);
        }
    }
    p->cur_op = SP_NONE;
}

bool sp_prop_stopped(prop *p)
{
    if (p->st == CM_OK && cm_cancelled(p->o->cancel)) {
        p->st =
            cm_error_set(p->err, CM_EIO, NULL, "propagation stopped before its end (cancelled)");
    }
    return p->st != CM_OK;
}

/* Runs the worklist to a fixed point over ops (in program order first). In
 * op-priority rounds after the first, pass-through ops start at their fixed
 * point (they do the same work in every round), so only the others are
 * pushed; any op whose tensors change is pushed again as usual. */
void sp_prop_fixed_point_run(prop *p, const uint32_t *order, uint32_t n_order, bool only_others)
{
    if (sp_prop_stopped(p)) {
        return;
    }
    /* as Shardy, function results first reach the values returned, then
     * the worklist runs in program order (the last op pushed runs first),
     * then the values returned reach the function results; returns are not
     * on the worklist */
    returns_step(p);
    for (uint32_t i = n_order; i-- > 0;) {
        if (!only_others || !sp_prop_is_pass_through(&p->m->ops[order[i]])) {
            enqueue(p, order[i]);
        }
    }
    uint64_t limit = (uint64_t)p->m->n_ops * 64u + 1024u;
    uint64_t count = 0;
    while (p->q_len > 0 && p->st == CM_OK) {
        /* LIFO, like MLIR's greedy driver: the last op pushed runs first */
        uint32_t op = p->queue[--p->q_len];
        p->queued[op] = 0;
        p->cur_op = op;
        step_op(p, op);
        if (++count % SP_PROP_POLL_STEPS == 0 && sp_prop_stopped(p)) {
            break;
        }
        if (count > limit) {
            sp_diags_add(p->diags, p->m, op, SP_DIAG_WARNING,
                         "propagation did not reach a fixed point after %llu steps; stopping",
                         (unsigned long long)count);
            break;
        }
    }
    returns_step(p);
    p->q_len = 0;
    memset(p->queued, 0, p->m->n_ops);
}

void sp_prop_opts_init(sp_prop_opts *o, sp_prop_level level)
{
    memset(o, 0, sizeof *o);
    o->level = level;
    o->aggressive_strategy = true;
    o->run_op_priority = true;
}

cm_status sp_propagate(sp_module *m, const sp_prop_opts *o, sp_diags *diags, cm_error *err)
{
    prop p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.o = o;
    p.diags = diags;
    p.err = err;
    p.op_priority = -1;
    p.np_dir = DIR_BOTH;
    p.user_priority = -1;
    p.cur_op = SP_NONE;
    cm_arena_init(&p.scratch, 4096);
    cm_arena_init(&p.views, 4096);
    cm_map_init(&p.rule_cache, sizeof(struct rc));
    cm_map_init(&p.sh_tab, sizeof(sp_sharding *));
    cm_map_init(&p.pc_tab, sizeof(pc_entry *));
    uint32_t *order = NULL;
    p.type_ok = cm_calloc(m->n_types + 1u, 1);
    if (p.type_ok == NULL) {
        sp_prop_oom(&p);
        goto out;
    }
    for (uint32_t t = 0; t < m->n_types; t++) {
        const sp_type *ty = &m->types[t];
        bool ok = ty->kind == SP_TYPE_TENSOR;
        for (uint32_t d = 0; ok && d < ty->rank; d++) {
            ok = ty->dims[d] >= 0;
        }
        p.type_ok[t] = ok ? 1 : 2;
    }
    if (sp_prop_groups_resolve(&p) != CM_OK || setup(&p) != CM_OK) {
        goto out;
    }
    order = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (order == NULL) {
        sp_prop_oom(&p);
        goto out;
    }
    uint32_t n_order = 0;
    walk_ops(m, m->body, order, &n_order);
    if (o->op_mask != NULL) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n_order; i++) {
            if (o->op_mask[order[i]]) {
                order[k++] = order[i];
            }
        }
        n_order = k;
    }
    if (sp_prop_debug_setup(&p) != CM_OK) {
        goto out;
    }
    /* the strategy of -sdy-aggressive-propagate and the levels above it */
    p.aggressive = o->level >= SP_PROP_AGGRESSIVE && o->aggressive_strategy;
    if (o->level >= SP_PROP_USER_PRIORITY) {
        sp_prop_user_priority_run(&p, order, n_order);
    } else if (o->level >= SP_PROP_OP_PRIORITY) {
        sp_prop_op_priority_run(&p, order, n_order);
    } else {
        sp_prop_fixed_point_run(&p, order, n_order, false);
    }
    if (p.st == CM_OK) {
        write_back(&p);
    }
    if (p.st == CM_OK && (o->debug_sharding_origins || o->debug_edge_source_sharding)) {
        sp_prop_debug_write(&p);
    }
out:
    cm_free(order);
    cm_free(p.sh);
    cm_free(p.orig);
    cm_free(p.fres_func);
    cm_free(p.fres_index);
    cm_free(p.func_first);
    cm_free(p.mc_first);
    sp_csr_fini(&p.users);
    sp_csr_fini(&p.fedge_src);
    cm_free(p.alias);
    cm_free(p.edge_of);
    cm_free(p.org_head);
    cm_free(p.orgs);
    cm_free(p.origin_names);
    cm_free(p.origin_self);
    cm_free(p.edge_head);
    cm_free(p.edges);
    cm_map_fini(&p.rule_cache);
    cm_map_fini(&p.sh_tab);
    cm_arena_fini(&p.scratch);
    cm_arena_fini(&p.views);
    cm_free(p.cands);
    cm_free(p.type_ok);
    cm_free(p.n_uses);
    cm_map_fini(&p.pc_tab);
    cm_free(p.group_next);
    cm_free(p.rules);
    cm_free(p.rule_done);
    cm_free(p.queue);
    cm_free(p.queued);
    cm_free(p.fs);
    cm_free(p.ts);
    return p.st;
}
