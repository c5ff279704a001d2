/* SPDX-License-Identifier: Apache-2.0
 * planner: debug-sharding-origins and debug-edge-source-sharding (Shardy's
 * propagation/debugging/source_sharding.cc): where each axis of a sharding
 * came from (`sdy.sharding_origins`) and which step moved it along which
 * edge of an op (`sdy.propagation_edges`). See sp_prop_int.h. */
#include "sp_prop_int.h"

#include <stdio.h>
#include <string.h>

/* Sharding-group members share origins too. */
void sp_prop_origins_copy(prop *p, uint32_t from, uint32_t to)
{
    if (p->org_head == NULL) {
        return;
    }
    for (uint32_t i = p->org_head[from]; i != SP_NONE; i = p->orgs[i].next) {
        sp_prop_origin_add(p, to, p->orgs[i].axis, p->orgs[i].origin);
    }
}

uint32_t sp_prop_origin_of(const prop *p, uint32_t slot, uint32_t axis)
{
    for (uint32_t i = p->org_head[slot]; i != SP_NONE; i = p->orgs[i].next) {
        if (p->orgs[i].axis == axis) {
            return p->orgs[i].origin;
        }
    }
    return SP_NONE;
}

void sp_prop_origin_add(prop *p, uint32_t slot, uint32_t axis, uint32_t origin)
{
    if (origin == SP_NONE || sp_prop_origin_of(p, slot, axis) != SP_NONE) {
        return;
    }
    if (CM_GROW_U32(p->orgs, p->cap_orgs, p->n_orgs + 1, NULL) != CM_OK) {
        sp_prop_oom(p);
        return;
    }
    p->orgs[p->n_orgs] = (struct org){axis, origin, p->org_head[slot]};
    p->org_head[slot] = p->n_orgs++;
}

void sp_prop_edge_add(prop *p, uint32_t op, uint32_t axis, const tens *src, const tens *dst)
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
    p->edges[p->n_edges] = (struct edge){(uint32_t)p->steps, axis, sref, dref, p->edge_head[op]};
    p->edge_head[op] = p->n_edges++;
}

static uint32_t origin_name(prop *p, const char *prefix, uint32_t k)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s%u", prefix, k);
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

/* Marks every axis of slot's sharding as coming from origin. */
static void seed_origin(prop *p, uint32_t slot, uint32_t origin)
{
    const sp_sharding *s = p->sh[slot];
    const meshent *e = sp_prop_mesh_of(p, s);
    if (s == NULL || e == NULL || e->is_empty || origin == SP_NONE) {
        return;
    }
    p->origin_self[slot] = origin;
    for (uint32_t d = 0; d < s->rank; d++) {
        for (uint32_t i = 0; i < s->dims[d].n_axes; i++) {
            ax a;
            if (ax_from_ref(e->mesh, &s->dims[d].axes[i], &a)) {
                sp_prop_origin_add(p, slot, a.axis, origin);
            }
        }
    }
}

cm_status sp_prop_debug_setup(prop *p)
{
    sp_module *m = p->m;
    if (p->o->debug_edge_source_sharding) {
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
    uint32_t n_constraints = 0;
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
                if (p->sh[p->func_first[i] + k] != NULL) {
                    seed_origin(p, p->func_first[i] + k, origin_name(p, "output: ", k));
                }
            }
        } else if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && op->n_results == 1) {
            uint32_t o = origin_name(p, "constraint_", n_constraints++);
            seed_origin(p, op->first_result, o);
            /* a constraint applied to its input at import (same sharding
             * object) makes the input come from the constraint too */
            uint32_t in = sp_prop_canon_slot(p, op->operands[0]);
            if (op->n_operands == 1 && p->sh[in] != NULL && p->sh[in] == p->sh[op->first_result] &&
                p->org_head[in] == SP_NONE) {
                seed_origin(p, in, o);
                p->origin_self[in] = SP_NONE; /* it is not the constraint itself */
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
static sp_attr *origins_dict(prop *p, uint32_t slot, const sp_mesh *mesh)
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
        if (v == NULL || p->orgs[i].axis >= mesh->n_axes) {
            return NULL;
        }
        const char *o =
            p->orgs[i].origin == p->origin_self[slot] ? "self" : p->origin_names[p->orgs[i].origin];
        v->u.str.s = o;
        v->u.str.len = strlen(o);
        d->u.dict.items[--k] = (sp_named_attr){mesh->axes[p->orgs[i].axis].name, v};
    }
    d->u.dict.n = n;
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

/* `#sdy.propagation_edges<[{step_index = N, axis_entries = [{axis_name = "a",
 * source = operand-0, targets = [result-0]}]}]>` for one op. */
static sp_attr *edges_attr(prop *p, uint32_t op, const sp_mesh *mesh)
{
    if (p->edge_head[op] == SP_NONE || mesh == NULL) {
        return NULL;
    }
    /* the list is newest first: collect and walk it backwards */
    uint32_t n = 0;
    for (uint32_t i = p->edge_head[op]; i != SP_NONE; i = p->edges[i].next) {
        n++;
    }
    uint32_t *idx = cm_alloc(sizeof(uint32_t) * n);
    if (idx == NULL) {
        return NULL;
    }
    uint32_t k = n;
    for (uint32_t i = p->edge_head[op]; i != SP_NONE; i = p->edges[i].next) {
        idx[--k] = i;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#sdy.propagation_edges<[");
    for (uint32_t a = 0; a < n;) {
        uint32_t step = p->edges[idx[a]].step;
        cm_buf_puts(&b, a > 0 ? ", {step_index = " : "{step_index = ");
        cm_buf_put_i64(&b, step);
        cm_buf_puts(&b, ", axis_entries = [");
        uint32_t first = a;
        while (a < n && p->edges[idx[a]].step == step) {
            const struct edge *e = &p->edges[idx[a]];
            /* merge the targets of the same axis and source */
            if (a > first && p->edges[idx[a - 1]].axis == e->axis &&
                p->edges[idx[a - 1]].src == e->src) {
                b.len -= 2; /* reopen the targets list: drop "]}" */
                cm_buf_puts(&b, ", ");
            } else {
                cm_buf_puts(&b, a > first ? ", {axis_name = \"" : "{axis_name = \"");
                cm_buf_puts(&b, e->axis < mesh->n_axes ? mesh->axes[e->axis].name : "?");
                cm_buf_puts(&b, "\", source = ");
                edge_ref(&b, e->src);
                cm_buf_puts(&b, ", targets = [");
            }
            edge_ref(&b, e->dst);
            cm_buf_puts(&b, "]}");
            a++;
        }
        cm_buf_puts(&b, "]}");
    }
    cm_buf_puts(&b, "]>");
    cm_free(idx);
    sp_attr *at = b.oom ? NULL : sp_attr_new(p->m, SP_ATTR_OPAQUE);
    if (at != NULL) {
        at->u.opaque.text = sp_module_str(p->m, b.data, b.len);
    }
    cm_buf_fini(&b);
    return at;
}

cm_status sp_prop_debug_write(prop *p)
{
    sp_module *m = p->m;
    uint32_t n_constraints = 0;
    for (uint32_t i = 0; i < m->n_ops && p->st == CM_OK; i++) {
        const sp_op *op = &m->ops[i];
        if (p->edge_head != NULL && op->n_results > 0) {
            sp_attr *e = edges_attr(p, i, slot_mesh(p, op->first_result));
            if (e != NULL && sp_op_set_attr(m, i, "sdy.propagation_edges", e) != CM_OK) {
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
                    sp_attr *d = origins_dict(p, first + k, slot_mesh(p, first + k));
                    if (d != NULL &&
                        sp_func_set_arg_attr(m, i, k, "sdy.sharding_origins", d) != CM_OK) {
                        return sp_prop_oom(p);
                    }
                }
            }
            for (uint32_t k = 0; k < ft->n_results; k++) {
                uint32_t s = p->func_first[i] + k;
                sp_attr *d = origins_dict(p, s, slot_mesh(p, s));
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
            uint32_t v = sp_prop_canon_slot(p, op->first_result + k);
            sp_attr *d = origins_dict(p, v, slot_mesh(p, v));
            any = any || d != NULL;
            arr->u.arr.items[k] = d != NULL ? d : sp_attr_new(m, SP_ATTR_DICT);
            if (arr->u.arr.items[k] == NULL) {
                return sp_prop_oom(p);
            }
        }
        if (any) {
            sp_attr *val = op->n_results == 1 ? arr->u.arr.items[0] : arr;
            if (sp_op_set_attr(m, i, "sdy.sharding_origins", val) != CM_OK) {
                return sp_prop_oom(p);
            }
        }
    }
    return p->st;
}
