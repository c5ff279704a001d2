/* SPDX-License-Identifier: Apache-2.0
 * planner: debug-sharding-origins and debug-edge-source-sharding (Shardy's
 * propagation/debugging/source_sharding.cc): where each axis of a sharding
 * came from (`sdy.sharding_origins`) and which step moved it along which
 * edge of an op (`sdy.propagation_edges`). See sp_prop_int.h. */
#include "sp_prop_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* Sharding-group members share origins too. */
void sp_prop_origins_copy(prop *p, uint32_t from, uint32_t to)
{
    if (p->org_head == NULL) {
        return;
    }
    for (uint32_t i = p->org_head[from]; i != SP_NONE; i = p->orgs[i].next) {
        sp_prop_origin_add(p, to, p->orgs[i].a, p->orgs[i].origin);
    }
}

/* Does sub-axis a contain b? */
static bool ax_contains(ax a, ax b)
{
    return a.axis == b.axis && a.pre <= b.pre && b.pre * b.size <= a.pre * a.size;
}

uint32_t sp_prop_origin_of(const prop *p, uint32_t slot, ax a)
{
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        if (ax_eq(p->orgs[i].a, a)) {
            return p->orgs[i].origin;
        }
    }
    /* split or merged: the first recorded axis containing a or contained in
     * it (the list is newest first) */
    uint32_t found = SP_NONE;
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        if (ax_contains(p->orgs[i].a, a) || ax_contains(a, p->orgs[i].a)) {
            found = p->orgs[i].origin;
        }
    }
    return found;
}

void sp_prop_origin_add(prop *p, uint32_t slot, ax a, uint32_t origin)
{
    if (origin == SP_NONE) {
        return;
    }
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        if (ax_eq(p->orgs[i].a, a)) {
            return;
        }
    }
    if (CM_GROW_U32(p->orgs, p->cap_orgs, p->n_orgs + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return;
    }
    p->orgs[p->n_orgs] = (struct org){a, origin, p->org_head[slot]};
    p->org_head[slot] = p->n_orgs++;
}

void sp_prop_edge_add(prop *p, uint32_t op, const sp_mesh *mesh, ax a, const tens *src,
                      const tens *dst)
{
    if (op == SP_NONE) {
        return;
    }
    if (CM_GROW_U32(p->edges, p->cap_edges, p->n_edges + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return;
    }
    uint32_t sref = src->pos | (src->is_result ? 1u << 31 : 0);
    uint32_t dref = dst->pos | (dst->is_result ? 1u << 31 : 0);
    p->edges[p->n_edges] = (struct edge){a, mesh, p->edge_step, sref, dref, p->edge_head[op]};
    p->edge_head[op] = p->n_edges++;
}

static uint32_t origin_name(prop *p, const char *prefix, uint32_t k)
{
    /* snprintf(buf, sizeof buf, "%s%u", prefix, k), by hand: one per
     * annotated input and output of every plan (prefixes are short) */
    char buf[64];
    size_t n = strlen(prefix);
    assert(n + 11 <= sizeof buf);
    memcpy(buf, prefix, n);
    char num[10];
    size_t d = 0;
    do {
        num[d++] = (char)('0' + k % 10u);
        k /= 10u;
    } while (k != 0);
    while (d > 0) {
        buf[n++] = num[--d];
    }
    buf[n] = '\0';
    if (CM_GROW_U32(p->origin_names, p->cap_origin_names, p->n_origin_names + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return SP_NONE;
    }
    const char *s = sp_module_str(p->m, buf, strlen(buf));
    if (s == NULL) {
        sp_prop_oom(p);
        return SP_NONE;
    }
    p->origin_names[p->n_origin_names] = s;
    return p->n_origin_names++;
}

/* Marks every axis of s (slot's sharding, or the in/out sharding of a
 * manual computation for its edge) as coming from origin, unless the axis
 * already has one; self: origin is slot's own annotation, printed "self". */
static void seed_origin_of(prop *p, uint32_t slot, const sp_sharding *s, uint32_t origin, bool self)
{
    const meshent *e = sp_prop_mesh_of(p, s);
    if (s == NULL || e == NULL || e->is_empty || origin == SP_NONE) {
        return;
    }
    if (self) {
        p->origin_self[slot] = origin;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
            ax a;
            if (ax_from_ref(e->mesh, &s->dims[d].axes[i], &a)) {
                sp_prop_origin_add(p, slot, a, origin);
            }
        }
    }
}

/* Function f's return op, or SP_NONE. */
static uint32_t returned_op(const sp_module *m, uint32_t f)
{
    const sp_op *op = &m->ops[f];
    if (op->n_regions != 1 || op->regions[0].n_blocks == 0) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[op->regions[0].blocks[op->regions[0].n_blocks - 1]];
    if (b->n_ops == 0) {
        return SP_NONE;
    }
    uint32_t t = b->ops[b->n_ops - 1];
    return m->ops[t].kind == SP_OP_FUNC_RETURN ? t : SP_NONE;
}

/* Operand k of function f's return, or SP_NONE. */
static uint32_t returned_value(const sp_module *m, uint32_t f, uint32_t k)
{
    uint32_t t = returned_op(m, f);
    return t != SP_NONE && k < m->ops[t].n_operands ? m->ops[t].operands[k] : SP_NONE;
}

static void seed_origin(prop *p, uint32_t slot, uint32_t origin)
{
    seed_origin_of(p, slot, p->sh[slot], origin, true);
}

/* The manual computations with data-flow edges in Shardy's walk order
 * (post-order: nested ones first), numbered from *n: "mc_N". */
static void seed_manual(prop *p, uint32_t block, uint32_t *n)
{
    sp_module *m = p->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops && p->st == CM_OK; i++) {
        uint32_t id = m->blocks[block].ops[i];
        const sp_op *op = &m->ops[id];
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t b = 0; b < op->regions[r].n_blocks; b++) {
                seed_manual(p, op->regions[r].blocks[b], n);
            }
        }
        op = &m->ops[id];
        if (op->kind != SP_OP_SDY_MANUAL_COMPUTATION || op->n_regions != 1 ||
            op->regions[0].n_blocks != 1) {
            continue;
        }
        const sp_attr *ins = sp_op_attr(m, id, "in_shardings");
        const sp_attr *outs = sp_op_attr(m, id, "out_shardings");
        const sp_block *body = &m->blocks[op->regions[0].blocks[0]];
        bool any = false;
        for (uint32_t k = 0; k < body->n_args; k++) {
            any = any || p->edge_of[body->first_arg + k] != SP_NONE;
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            any = any || p->edge_of[op->first_result + k] != SP_NONE;
        }
        if (!any) {
            continue;
        }
        char prefix[48];
        for (uint32_t k = 0; k < body->n_args && k < op->n_operands; k++) {
            uint32_t e = p->edge_of[body->first_arg + k];
            if (e == SP_NONE || ins == NULL || ins->kind != SP_ATTR_SHARDING_LIST ||
                k >= ins->u.shardings.n) {
                continue;
            }
            snprintf(prefix, sizeof prefix, "mc_%u_input: ", *n);
            uint32_t o = origin_name(p, prefix, k);
            seed_origin_of(p, m->ops[e].first_result, ins->u.shardings.items[k], o, true);
            uint32_t src = sp_prop_canon_slot(p, op->operands[k]);
            seed_origin_of(p, src, p->sh[src], o, false);
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            uint32_t e = p->edge_of[op->first_result + k];
            if (e == SP_NONE || outs == NULL || outs->kind != SP_ATTR_SHARDING_LIST ||
                k >= outs->u.shardings.n) {
                continue;
            }
            snprintf(prefix, sizeof prefix, "mc_%u_output: ", *n);
            seed_origin_of(p, m->ops[e].first_result, outs->u.shardings.items[k],
                           origin_name(p, prefix, k), true);
        }
        snprintf(prefix, sizeof prefix, "mc_%u", *n);
        sp_attr *nm = sp_attr_new(m, SP_ATTR_STRING);
        if (nm == NULL || (nm->u.str.s = sp_module_str(m, prefix, strlen(prefix))) == NULL) {
            sp_prop_oom(p);
            return;
        }
        nm->u.str.len = strlen(prefix);
        if (sp_op_set_attr(m, id, "sdy.sharding_origin_name", nm) != CM_OK) {
            sp_prop_oom(p);
            return;
        }
        (*n)++;
    }
}

cm_status sp_prop_debug_setup(prop *p)
{
    sp_module *m = p->m;
    if (p->o->debug_edge_source_sharding) {
        int64_t first = sp_prop_debug_next_step(m);
        p->edge_step = first < UINT32_MAX ? (uint32_t)first : 0;
        p->edge_head = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
        if (p->edge_head == NULL) {
            return sp_prop_oom(p);
        }
        memset(p->edge_head, 0xff, sizeof(uint32_t) * (m->n_ops + 1u));
    }
    if (!p->o->debug_sharding_origins) {
        return CM_OK;
    }
    p->org_head = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    p->origin_self = cm_alloc(sizeof(uint32_t) * (p->n_slots + 1u));
    if (p->org_head == NULL || p->origin_self == NULL) {
        return sp_prop_oom(p);
    }
    memset(p->org_head, 0xff, sizeof(uint32_t) * (p->n_slots + 1u));
    memset(p->origin_self, 0xff, sizeof(uint32_t) * (p->n_slots + 1u));
    /* Shardy's order, the first origin of an axis winning: constraints
     * (and the sharded values they constrain), manual computations (their
     * edges, and the sharded values they take), function inputs and
     * outputs */
    uint32_t n_constraints = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && op->n_results == 1) {
            uint32_t o = origin_name(p, "constraint_", n_constraints++);
            seed_origin(p, op->first_result, o);
            if (op->n_operands == 1) {
                uint32_t in = sp_prop_canon_slot(p, op->operands[0]);
                seed_origin_of(p, in, p->sh[in], o, false);
            }
        }
    }
    uint32_t n_manual = 0;
    seed_manual(p, m->body, &n_manual);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (p->func_first[i] != SP_NONE) {
            const sp_type *ft = sp_func_type(m, i);
            if (op->n_regions == 1 && op->regions[0].n_blocks > 0) {
                const sp_block *entry = &m->blocks[op->regions[0].blocks[0]];
                for (uint32_t k = 0; k < entry->n_args; k++) {
                    if (p->sh[entry->first_arg + k] != NULL) {
                        seed_origin(p, entry->first_arg + k, origin_name(p, "input: ", k));
                    }
                }
            }
            for (uint32_t k = 0; k < ft->n_results; k++) {
                uint32_t fs = p->func_first[i] + k;
                if (p->sh[fs] != NULL) {
                    uint32_t o = origin_name(p, "output: ", k);
                    seed_origin(p, fs, o);
                    /* Shardy keeps a result's origins on the returned value */
                    uint32_t v = returned_value(m, i, k);
                    if (v != SP_NONE) {
                        seed_origin_of(p, sp_prop_canon_slot(p, v), p->sh[fs], o, false);
                    }
                }
            }
        }
    }
    /* sharding-group members were seeded from one annotated member */
    for (uint32_t s = 0; p->group_next != NULL && s < p->n_slots; s++) {
        if (p->group_next[s] == SP_NONE || p->org_head[s] == SP_NONE) {
            continue;
        }
        for (uint32_t t = p->group_next[s]; t != s; t = p->group_next[t]) {
            sp_prop_origins_copy(p, s, t);
        }
    }
    return p->st;
}

/* {axis = "origin", ...} for a slot, or NULL when it has no origins. */
static sp_attr *origins_dict(prop *p, uint32_t slot, uint32_t self, const sp_mesh *mesh)
{
    uint32_t n = 0;
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        n++;
    }
    if (n == 0 || mesh == NULL) {
        return NULL;
    }
    sp_attr *d = sp_attr_new(p->m, SP_ATTR_DICT);
    if (d == NULL) {
        return NULL;
    }
    d->u.dict.items = cm_arena_alloc(&p->m->arena, sizeof(sp_named_attr) * n);
    if (d->u.dict.items == NULL) {
        return NULL;
    }
    uint32_t k = n;
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        sp_attr *v = sp_attr_new(p->m, SP_ATTR_STRING);
        ax a = p->orgs[i].a;
        if (v == NULL || a.axis >= mesh->n_axes) {
            return NULL;
        }
        const char *o =
            p->orgs[i].origin == self ? "self" : p->origin_names[p->orgs[i].origin];
        v->u.str.s = o;
        v->u.str.len = strlen(o);
        /* the axis as Shardy prints it without quotes: a, or a:(2)4 */
        const char *key = mesh->axes[a.axis].name;
        if (a.pre != 1 || a.size != mesh->axes[a.axis].size) {
            char buf[160];
            snprintf(buf, sizeof buf, "%s:(%lld)%lld", key, (long long)a.pre, (long long)a.size);
            key = sp_module_str(p->m, buf, strlen(buf));
            if (key == NULL) {
                return NULL;
            }
        }
        d->u.dict.items[--k] = (sp_named_attr){key, v};
    }
    d->u.dict.n = n;
    /* a dictionary attribute lists its entries by name */
    for (uint32_t i = 1; i < n; i++) {
        sp_named_attr x = d->u.dict.items[i];
        uint32_t j = i;
        while (j > 0 && strcmp(d->u.dict.items[j - 1].name, x.name) > 0) {
            d->u.dict.items[j] = d->u.dict.items[j - 1];
            j--;
        }
        d->u.dict.items[j] = x;
    }
    return d;
}

static const sp_mesh *slot_mesh(const prop *p, uint32_t slot)
{
    const meshent *e = sp_prop_mesh_of(p, p->sh[slot]);
    return e != NULL ? e->mesh : NULL;
}

static void edge_ref(cm_buf *b, uint32_t ref)
{
    cm_buf_puts(b, (ref >> 31) ? "result-" : "operand-");
    cm_buf_put_i64(b, ref & 0x7fffffffu);
}

/* The name of (sub-)axis a as Shardy prints an axis: "c" or "c":(1)2. */
static void edge_axis(cm_buf *b, const struct edge *e)
{
    const sp_mesh_axis *ma = &e->mesh->axes[e->a.axis];
    cm_buf_puts(b, "\"");
    cm_buf_puts(b, ma->name);
    cm_buf_puts(b, "\"");
    if (e->a.pre != 1 || e->a.size != ma->size) {
        cm_buf_puts(b, ":(");
        cm_buf_put_i64(b, e->a.pre);
        cm_buf_puts(b, ")");
        cm_buf_put_i64(b, e->a.size);
    }
}

static bool edge_same_axis(const struct edge *x, const struct edge *y)
{
    return ax_eq(x->a, y->a) && strcmp(x->mesh->axes[x->a.axis].name,
                                       y->mesh->axes[y->a.axis].name) == 0;
}

/* Does edge x come before y in the printed attribute: by step, then axis
 * name, then source; targets by kind (operands first) and number. */
static bool edge_before(const struct edge *x, const struct edge *y)
{
    if (x->step != y->step) {
        return x->step < y->step;
    }
    int c = strcmp(x->mesh->axes[x->a.axis].name, y->mesh->axes[y->a.axis].name);
    if (c != 0) {
        return c < 0;
    }
    if (!ax_eq(x->a, y->a)) {
        return x->a.pre < y->a.pre || (x->a.pre == y->a.pre && x->a.size < y->a.size);
    }
    if (x->src != y->src) {
        return x->src < y->src;
    }
    return x->dst < y->dst;
}

/* `#sdy.propagation_edges<[{step-N = [{"a" = operand-0 -> [result-0]}]}]>`
 * for the edges of the ops ops[0..n_ops) (Shardy's createPropagationEdges:
 * an axis moved between the same source and target keeps its first step;
 * per step, one entry per axis and source with its targets); NULL when
 * there are none. */
/* What sp_prop_debug_write reuses from op to op: edges_attr's edge copies
 * (cap entries) and its text. */
typedef struct edge_scratch {
    struct edge *es;
    uint32_t cap;
    cm_buf txt;
} edge_scratch;

static sp_attr *edges_attr(prop *p, edge_scratch *sc, const uint32_t *ops, uint32_t n_ops)
{
    uint32_t n = 0;
    for (uint32_t o = 0; o < n_ops; o++) {
        for (uint32_t i = p->edge_head[ops[o]]; i != SP_NONE; i = p->edges[i].next) {
            n++;
        }
    }
    if (n == 0) {
        return NULL;
    }
    if (n > sc->cap) {
        struct edge *g = cm_realloc(sc->es, sizeof *g * n);
        if (g == NULL) {
            return NULL;
        }
        sc->es = g;
        sc->cap = n;
    }
    struct edge *es = sc->es;
    uint32_t k = 0;
    for (uint32_t o = 0; o < n_ops; o++) {
        for (uint32_t i = p->edge_head[ops[o]]; i != SP_NONE; i = p->edges[i].next) {
            const struct edge *e = &p->edges[i];
            /* the same axis, source and target: the earliest step */
            uint32_t j = 0;
            while (j < k && !(edge_same_axis(&es[j], e) && es[j].src == e->src &&
                              es[j].dst == e->dst)) {
                j++;
            }
            if (j == k) {
                es[k++] = *e;
            } else if (e->step < es[j].step) {
                es[j].step = e->step;
            }
        }
    }
    n = k;
    for (uint32_t i = 1; i < n; i++) {
        struct edge x = es[i];
        uint32_t j = i;
        while (j > 0 && edge_before(&x, &es[j - 1])) {
            es[j] = es[j - 1];
            j--;
        }
        es[j] = x;
    }
    cm_buf *b = &sc->txt;
    cm_buf_reset(b);
    cm_buf_puts(b, "#sdy.propagation_edges<[");
    for (uint32_t a = 0; a < n;) {
        uint32_t step = es[a].step;
        cm_buf_puts(b, a > 0 ? ", {step-" : "{step-");
        cm_buf_put_i64(b, step);
        cm_buf_puts(b, " = [");
        uint32_t first = a;
        while (a < n && es[a].step == step) {
            const struct edge *e = &es[a];
            cm_buf_puts(b, a > first ? ", {" : "{");
            edge_axis(b, e);
            cm_buf_puts(b, " = ");
            edge_ref(b, e->src);
            cm_buf_puts(b, " -> [");
            uint32_t t = a;
            while (a < n && es[a].step == step && edge_same_axis(&es[a], e) &&
                   es[a].src == e->src) {
                if (a > t) {
                    cm_buf_puts(b, ", ");
                }
                edge_ref(b, es[a].dst);
                a++;
            }
            cm_buf_puts(b, "]}");
        }
        cm_buf_puts(b, "]}");
    }
    cm_buf_puts(b, "]>");
    sp_attr *at = b->oom ? NULL : sp_attr_new(p->m, SP_ATTR_OPAQUE);
    if (at != NULL) {
        at->u.opaque.text = sp_module_str(p->m, b->data, b->len);
    }
    return at;
}

static cm_status debug_write(prop *p, edge_scratch *x)
{
    sp_module *m = p->m;
    uint32_t n_constraints = 0;
    for (uint32_t i = 0; i < m->n_ops && p->st == CM_OK; i++) {
        const sp_op *op = &m->ops[i];
        if (p->edge_head != NULL && op->n_results > 0 && op->kind != SP_OP_FUNC_RETURN) {
            sp_attr *e = edges_attr(p, x, &i, 1);
            if (e != NULL && sp_op_set_attr(m, i, "sdy.propagation_edges", e) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
        /* a function's return steps: on its result 0, as Shardy keys them
         * by the step's tensor number, which is 0 for each result */
        if (p->edge_head != NULL && p->func_first[i] != SP_NONE &&
            sp_func_type(m, i)->n_results > 0) {
            uint32_t ret = returned_op(m, i);
            sp_attr *e = ret != SP_NONE ? edges_attr(p, x, &ret, 1) : NULL;
            if (e != NULL && sp_func_set_result_attr(m, i, 0, "sdy.propagation_edges", e) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
        if (p->org_head == NULL) {
            continue;
        }
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
            char buf[32];
            snprintf(buf, sizeof buf, "constraint_%u", n_constraints++);
            sp_attr *nm = sp_attr_new(m, SP_ATTR_STRING);
            if (nm == NULL) {
                return sp_prop_oom(p);
            }
            nm->u.str.s = sp_module_str(m, buf, strlen(buf));
            nm->u.str.len = strlen(buf);
            if (nm->u.str.s == NULL ||
                sp_op_set_attr(m, i, "sdy.sharding_origin_name", nm) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
        if (p->func_first[i] != SP_NONE) {
            const sp_type *ft = sp_func_type(m, i);
            if (op->n_regions == 1 && op->regions[0].n_blocks > 0) {
                const sp_block *entry = &m->blocks[op->regions[0].blocks[0]];
                uint32_t n_args = entry->n_args, first = entry->first_arg;
                for (uint32_t k = 0; k < n_args; k++) {
                    sp_attr *d = origins_dict(p, first + k, p->origin_self[first + k],
                                              slot_mesh(p, first + k));
                    if (d != NULL &&
                        sp_func_set_arg_attr(m, i, k, "sdy.sharding_origins", d) != CM_OK) {
                        return sp_prop_oom(p);
                    }
                }
            }
            for (uint32_t k = 0; k < ft->n_results; k++) {
                /* the returned value's origins, its "output: K" shown as
                 * "self" */
                uint32_t s = p->func_first[i] + k, v = returned_value(m, i, k);
                uint32_t from = v != SP_NONE ? sp_prop_canon_slot(p, v) : s;
                sp_attr *d = origins_dict(p, from, p->origin_self[s], slot_mesh(p, s));
                if (d != NULL &&
                    sp_func_set_result_attr(m, i, k, "sdy.sharding_origins", d) != CM_OK) {
                    return sp_prop_oom(p);
                }
            }
            continue;
        }
        if (op->n_results == 0) {
            continue;
        }
        bool any = false;
        sp_attr *arr = sp_attr_new(m, SP_ATTR_ARRAY);
        if (arr == NULL) {
            return sp_prop_oom(p);
        }
        arr->u.arr.n = op->n_results;
        arr->u.arr.items = cm_arena_alloc(&m->arena, sizeof(sp_attr *) * op->n_results);
        if (arr->u.arr.items == NULL) {
            return sp_prop_oom(p);
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            /* an edge owner's origins are its edge's */
            uint32_t v = sp_prop_canon_slot(p, op->first_result + k);
            sp_attr *d = p->edge_of[op->first_result + k] != SP_NONE
                             ? NULL
                             : origins_dict(p, v, p->origin_self[v], slot_mesh(p, v));
            any = any || d != NULL;
            arr->u.arr.items[k] = d != NULL ? d : sp_attr_new(m, SP_ATTR_DICT);
            if (arr->u.arr.items[k] == NULL) {
                return sp_prop_oom(p);
            }
        }
        if (any) {
            /* a constraint or an edge holds one dictionary, any other op one
             * per result */
            bool one = op->kind == SP_OP_SDY_SHARDING_CONSTRAINT ||
                       op->kind == SP_OP_SDY_DATA_FLOW_EDGE;
            sp_attr *val = one ? arr->u.arr.items[0] : arr;
            if (sp_op_set_attr(m, i, "sdy.sharding_origins", val) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
    }
    return p->st;
}

cm_status sp_prop_debug_write(prop *p)
{
    edge_scratch x = {.es = NULL, .cap = 0};
    cm_buf_init(&x.txt);
    cm_status st = debug_write(p, &x);
    cm_free(x.es);
    cm_buf_fini(&x.txt);
    return st;
}

/* ---- sinking the edges' debug information ------------------------------------ */

/* Appends to arr (of cap entries) the debug attribute name of the edge on
 * each owner first + i (i < n; stride 1), when that edge has one (and, for
 * propagation edges, when it is not empty). */
static void edge_debug_collect(const sp_module *m, const uint32_t *edge_of, uint32_t first,
                               uint32_t n, const char *name, sp_attr **arr, uint32_t *n_arr)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t e = edge_of[first + i];
        const sp_attr *a = e != SP_NONE ? sp_op_attr(m, e, name) : NULL;
        if (a != NULL) {
            arr[(*n_arr)++] = (sp_attr *)(uintptr_t)a;
        }
    }
}

static cm_status set_array(sp_module *m, uint32_t op, const char *name, sp_attr **items,
                           uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_ARRAY);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    a->u.arr.items = cm_arena_memdup(&m->arena, items, n + 1u, sizeof *items);
    if (a->u.arr.items == NULL) {
        return CM_ENOMEM;
    }
    a->u.arr.n = n;
    return sp_op_set_attr(m, op, name, a);
}

/* The debug attributes of one data-flow op's edges onto the op. */
static cm_status sink_op_debug(sp_module *m, const uint32_t *edge_of, uint32_t opid, bool origins,
                               bool edges)
{
    const sp_op *op = &m->ops[opid];
    uint32_t arg_first = 0, n_args = 0;
    if ((op->kind == SP_OP_SDY_MANUAL_COMPUTATION || op->kind == SP_OP_SDY_NAMED_COMPUTATION) &&
        op->n_regions == 1 && op->regions[0].n_blocks == 1) {
        const sp_block *b = &m->blocks[op->regions[0].blocks[0]];
        arg_first = b->first_arg;
        n_args = b->n_args;
    }
    uint32_t cap = (n_args > op->n_results ? n_args : op->n_results) + 1u;
    sp_attr **items = cm_alloc(sizeof *items * cap);
    if (items == NULL) {
        return CM_ENOMEM;
    }
    cm_status st = CM_OK;
    static const char *const names[2][2] = {
        {"sdy.block_arg_sharding_origins", "sdy.result_sharding_origins"},
        {"sdy.block_arg_propagation_edges", "sdy.result_propagation_edges"}};
    for (int kind = 0; kind < 2 && st == CM_OK; kind++) {
        if (!(kind == 0 ? origins : edges)) {
            continue;
        }
        const char *src = kind == 0 ? "sdy.sharding_origins" : "sdy.propagation_edges";
        for (int side = 0; side < 2 && st == CM_OK; side++) {
            uint32_t n = 0;
            op = &m->ops[opid];
            if (side == 0) {
                edge_debug_collect(m, edge_of, arg_first, n_args, src, items, &n);
            } else {
                edge_debug_collect(m, edge_of, op->first_result, op->n_results, src, items, &n);
            }
            st = set_array(m, opid, names[kind][side], items, n);
        }
    }
    cm_free(items);
    if (st != CM_OK) {
        return st;
    }
    /* attribute dictionaries print by name */
    sp_op *w = &m->ops[opid];
    for (uint32_t i = 1; i < w->n_attrs; i++) {
        sp_named_attr x = w->attrs[i];
        uint32_t j = i;
        while (j > 0 && strcmp(w->attrs[j - 1].name, x.name) > 0) {
            w->attrs[j] = w->attrs[j - 1];
            j--;
        }
        w->attrs[j] = x;
    }
    return CM_OK;
}

cm_status sp_prop_debug_info_sink(sp_module *m, bool origins, bool edges, cm_error *err)
{
    if (!origins && !edges) {
        return CM_OK;
    }
    uint32_t *edge_of = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    if (edge_of == NULL) {
        return cm_error_oom(err);
    }
    memset(edge_of, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind == SP_OP_SDY_DATA_FLOW_EDGE && op->n_operands == 1 && op->n_results == 1 &&
            op->parent_block != SP_NONE) {
            edge_of[op->operands[0]] = i;
        }
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < m->n_ops && st == CM_OK; i++) {
        sp_op_kind k = (sp_op_kind)m->ops[i].kind;
        if (m->ops[i].parent_block != SP_NONE &&
            (k == SP_OP_WHILE || k == SP_OP_CASE || k == SP_OP_IF ||
             k == SP_OP_OPTIMIZATION_BARRIER || k == SP_OP_SDY_MANUAL_COMPUTATION ||
             k == SP_OP_SDY_NAMED_COMPUTATION)) {
            st = sink_op_debug(m, edge_of, i, origins, edges);
        }
    }
    cm_free(edge_of);
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}

/* ---- the step to start from ------------------------------------------------- */

/* The highest `step-N` in an sdy.propagation_edges attribute, or -1. */
static int64_t max_step_in(const sp_attr *a)
{
    int64_t best = -1;
    if (a == NULL || a->kind != SP_ATTR_OPAQUE || a->u.opaque.text == NULL) {
        return best;
    }
    for (const char *t = strstr(a->u.opaque.text, "{step-"); t != NULL;
         t = strstr(t + 1, "{step-")) {
        int64_t v = 0;
        const char *d = t + 6;
        while (*d >= '0' && *d <= '9' && v < INT64_MAX / 10) {
            v = v * 10 + (*d++ - '0');
        }
        if (v > best) {
            best = v;
        }
    }
    return best;
}

int64_t sp_prop_debug_next_step(const sp_module *m)
{
    int64_t best = -1;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        int64_t s = max_step_in(sp_attrs_get(op->attrs, op->n_attrs, "sdy.propagation_edges"));
        best = s > best ? s : best;
        const sp_attr *res = op->kind == SP_OP_FUNC_FUNC
                                 ? sp_attrs_get(op->attrs, op->n_attrs, "res_attrs")
                                 : NULL;
        for (uint32_t k = 0; res != NULL && res->kind == SP_ATTR_ARRAY && k < res->u.arr.n; k++) {
            const sp_attr *d = res->u.arr.items[k];
            if (d != NULL && d->kind == SP_ATTR_DICT) {
                s = max_step_in(sp_attrs_get(d->u.dict.items, d->u.dict.n, "sdy.propagation_edges"));
                best = s > best ? s : best;
            }
        }
    }
    return best + 1;
}
