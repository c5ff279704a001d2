/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-apply-sharding-constraints (Shardy's
 * import/apply_sharding_constraints.cc). Ops are visited in post-order (an
 * op after the ops of its regions). For a sharding constraint that heads a
 * chain of constraints (its input is no constraint's result, has no
 * sharding and feeds no other constraint or manual computation; each link
 * has one use, the next constraint; the tail feeds no constraint), later
 * uses of the input in the tail's block, other than returns, read the tail.
 * Then the constraint, and each operand of a manual computation with its
 * in-sharding, applies: when the value has no sharding, the sharding is
 * fully closed and no other constraint or manual computation uses the
 * value with another sharding, the value takes the sharding - unless it is
 * the target or owner of a data-flow edge: then the constraint (moved, or
 * for a manual computation created, right after the value) takes every
 * other use of the value instead, and the value (its edge, when it has
 * one) keeps the constraint's unreduced axes, which do not propagate. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct asc {
    sp_module *m;
    sp_uses u;
    uint8_t *want;
    uint32_t *opos; /* op positions in their blocks, kept current */
    uint32_t cap_ops;
    uint32_t *list; /* the ops to visit, post-order */
    uint32_t n_list, cap_list;
    bool debug_edges; /* debug-propagation-edge-sharding */
    int64_t step;     /* the next propagation step (debug edges) */
} asc;

static bool fully_closed(const sp_sharding *s)
{
    for (uint32_t d = 0; d < s->rank; d++) {
        if (!s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

static cm_status collect(asc *a, uint32_t block)
{
    sp_module *m = a->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t b = 0; b < m->ops[op].regions[r].n_blocks; b++) {
                cm_status st = collect(a, m->ops[op].regions[r].blocks[b]);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        uint32_t k = m->ops[op].kind;
        if (k == SP_OP_SDY_SHARDING_CONSTRAINT || k == SP_OP_SDY_MANUAL_COMPUTATION) {
            if (CM_GROW_U32(a->list, a->cap_list, a->n_list + 1, NULL) != CM_OK) {
                return CM_ENOMEM;
            }
            a->list[a->n_list++] = op;
        }
    }
    return CM_OK;
}

/* The sharding a constraint-like user gives operand idx, or NULL. */
static const sp_sharding *user_sharding(const sp_module *m, uint32_t op, uint32_t idx)
{
    if (m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        const sp_attr *s = sp_op_attr(m, op, "sharding");
        return s != NULL && s->kind == SP_ATTR_SHARDING ? s->u.sharding : NULL;
    }
    const sp_attr *s = sp_op_attr(m, op, "in_shardings");
    return s != NULL && s->kind == SP_ATTR_SHARDING_LIST && idx < s->u.shardings.n
               ? s->u.shardings.items[idx]
               : NULL;
}

static bool is_constraint_like(uint32_t kind)
{
    return kind == SP_OP_SDY_SHARDING_CONSTRAINT || kind == SP_OP_SDY_MANUAL_COMPUTATION;
}

/* Iterates the live uses of v (the lists keep stale entries of replaced
 * operands; they are skipped). */
#define FOR_USES(a, v, i)                                                                          \
    for (uint32_t i = (a)->u.head[v]; i != SP_NONE; i = (a)->u.pool[i].next)                       \
        if ((a)->m->ops[(a)->u.pool[i].op].parent_block != SP_NONE &&                              \
            (a)->u.pool[i].idx < (a)->m->ops[(a)->u.pool[i].op].n_operands &&                      \
            (a)->m->ops[(a)->u.pool[i].op].operands[(a)->u.pool[i].idx] == (v))

static uint32_t n_uses(asc *a, uint32_t v)
{
    uint32_t n = 0;
    FOR_USES(a, v, i)
    {
        n++;
    }
    return n;
}

static bool used_by_constraint(asc *a, uint32_t v, uint32_t excluded)
{
    FOR_USES(a, v, i)
    {
        uint32_t op = a->u.pool[i].op;
        if (op != excluded && is_constraint_like(a->m->ops[op].kind)) {
            return true;
        }
    }
    return false;
}

static cm_status set_operand(asc *a, uint32_t op, uint32_t idx, uint32_t v)
{
    a->m->ops[op].operands[idx] = v;
    return sp_uses_add(&a->u, v, op, idx);
}

static void renumber_block(asc *a, uint32_t block)
{
    const sp_block *b = &a->m->blocks[block];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        if (b->ops[i] < a->cap_ops) {
            a->opos[b->ops[i]] = i;
        }
    }
}

/* Places op (detached or not) right after value v's definition. */
static cm_status place_after_value(asc *a, uint32_t op, uint32_t v)
{
    sp_module *m = a->m;
    uint32_t cur = m->ops[op].parent_block;
    if (cur != SP_NONE) {
        uint32_t idx = sp_op_index_in_block(m, op);
        if (idx != SP_NONE) {
            sp_block_remove_op(m, cur, idx);
        }
    }
    uint32_t def = m->values[v].def, block, at;
    if (def != SP_NONE) {
        block = m->ops[def].parent_block;
        at = sp_op_index_in_block(m, def) + 1u;
    } else {
        block = m->values[v].block;
        at = 0;
    }
    if (sp_block_insert_op(m, block, at, op) != CM_OK) {
        return CM_ENOMEM;
    }
    if (cur != SP_NONE && cur != block) {
        renumber_block(a, cur);
    }
    renumber_block(a, block);
    return CM_OK;
}

/* The op owning the region of block argument v, or SP_NONE for an op
 * result or a function argument. */
static uint32_t region_owner(const sp_module *m, uint32_t v)
{
    if (m->values[v].def != SP_NONE) {
        return SP_NONE;
    }
    uint32_t p = m->blocks[m->values[v].block].parent_op;
    return p == SP_NONE || m->ops[p].kind == SP_OP_FUNC_FUNC ? SP_NONE : p;
}

static bool has_edge(asc *a, uint32_t v)
{
    if (region_owner(a->m, v) != SP_NONE) {
        return true; /* the target of its op's data-flow edge */
    }
    uint32_t def = a->m->values[v].def;
    if (def != SP_NONE && a->m->ops[def].kind == SP_OP_SDY_DATA_FLOW_EDGE) {
        return true;
    }
    /* our pipeline adds no data-flow edge ops: a data-flow op's result is
     * the owner of the edge Shardy's -sdy-add-data-flow-edges would add */
    if (def != SP_NONE && sp_op_is_data_flow((sp_op_kind)a->m->ops[def].kind)) {
        return true;
    }
    FOR_USES(a, v, i)
    {
        if (a->m->ops[a->u.pool[i].op].kind == SP_OP_SDY_DATA_FLOW_EDGE) {
            return true;
        }
    }
    return false;
}

static bool should_apply(asc *a, uint32_t v, const sp_sharding *s)
{
    sp_module *m = a->m;
    const sp_type *t = sp_value_type(m, v);
    if (t->kind != SP_TYPE_TENSOR || sp_value_sharding(m, v) != NULL || !fully_closed(s)) {
        return false;
    }
    /* a block argument of an op that is no data-flow op (a reduction body,
     * say) has no sharding of its own */
    uint32_t owner = region_owner(m, v);
    if (owner != SP_NONE && !sp_op_is_data_flow((sp_op_kind)m->ops[owner].kind)) {
        return false;
    }
    FOR_USES(a, v, i)
    {
        uint32_t op = a->u.pool[i].op;
        if (is_constraint_like(m->ops[op].kind)) {
            const sp_sharding *o = user_sharding(m, op, a->u.pool[i].idx);
            if (o == NULL || !sp_sharding_equal(o, s)) {
                return false;
            }
        }
    }
    return true;
}

/* One axis of a sharding as Shardy prints it in propagation edges:
 * "a" or "a":(1)2. */
static void put_axis(cm_buf *b, const sp_axis_ref *r)
{
    cm_buf_puts(b, "\"");
    cm_buf_puts(b, r->name);
    cm_buf_puts(b, "\"");
    if (r->pre_size != 0) {
        cm_buf_puts(b, ":(");
        cm_buf_put_i64(b, r->pre_size);
        cm_buf_puts(b, ")");
        cm_buf_put_i64(b, r->size);
    }
}

static bool ref_same(const sp_axis_ref *x, const sp_axis_ref *y)
{
    return strcmp(x->name, y->name) == 0 && x->pre_size == y->pre_size &&
           (x->pre_size == 0 || x->size == y->size);
}

/* debug-propagation-edge-sharding: constraint op giving its sharding s to
 * its input (sharded old before) is one propagation step, as in Shardy: the
 * axes each dim of the input gains came from the constraint's result, and
 * the step is saved as the constraint's sdy.propagation_edges. */
static cm_status note_edges(asc *a, uint32_t op, const sp_sharding *old, const sp_sharding *s)
{
    struct gain {
        const sp_axis_ref *ax;
    } g[64];
    uint32_t n = 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *nd = &s->dims[d];
        const sp_dim_sharding *od = old != NULL && d < old->rank ? &old->dims[d] : NULL;
        uint32_t no = od != NULL ? od->n_axes : 0, k = 0;
        while (k < no && k < nd->n_axes && ref_same(&od->axes[k], &nd->axes[k])) {
            k++;
        }
        for (uint32_t i = k; i < nd->n_axes && n < 64; i++) {
            g[n++] = (struct gain){&nd->axes[i]};
        }
    }
    a->step++;
    if (n == 0) {
        return CM_OK;
    }
    /* entries by axis name */
    for (uint32_t i = 1; i < n; i++) {
        struct gain x = g[i];
        uint32_t j = i;
        while (j > 0 && strcmp(g[j - 1].ax->name, x.ax->name) > 0) {
            g[j] = g[j - 1];
            j--;
        }
        g[j] = x;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "#sdy.propagation_edges<[{step-");
    cm_buf_put_i64(&b, a->step - 1);
    cm_buf_puts(&b, " = [");
    for (uint32_t i = 0; i < n; i++) {
        cm_buf_puts(&b, i > 0 ? ", {" : "{");
        put_axis(&b, g[i].ax);
        cm_buf_puts(&b, " = result-0 -> [operand-0]}");
    }
    cm_buf_puts(&b, "]}]>");
    sp_attr *at = b.oom ? NULL : sp_attr_new(a->m, SP_ATTR_OPAQUE);
    if (at != NULL) {
        at->u.opaque.text = sp_module_str(a->m, b.data, b.len);
    }
    cm_buf_fini(&b);
    if (at == NULL || at->u.opaque.text == NULL) {
        return CM_ENOMEM;
    }
    return sp_op_set_attr(a->m, op, "sdy.propagation_edges", at);
}

/* The sdy.data_flow_edge whose input is value w, searched in w's block
 * after w's definition; SP_NONE when there is none. */
static uint32_t edge_user(const sp_module *m, uint32_t w)
{
    uint32_t def = m->values[w].def;
    uint32_t block = def != SP_NONE ? m->ops[def].parent_block : m->values[w].block;
    if (block == SP_NONE) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[block];
    uint32_t from = def != SP_NONE ? sp_op_index_in_block(m, def) : 0;
    for (uint32_t i = from == SP_NONE ? 0 : from; i < b->n_ops; i++) {
        const sp_op *o = &m->ops[b->ops[i]];
        if (o->kind == SP_OP_SDY_DATA_FLOW_EDGE && o->n_operands == 1 && o->operands[0] == w) {
            return b->ops[i];
        }
    }
    return SP_NONE;
}

/* The edge op that holds the sharding of v, as Shardy's getShardableValue
 * finds it: v's own defining edge, else the edge on v's edge owner (v
 * itself, or for a while body argument the while's result). SP_NONE when
 * there is none. */
static uint32_t sharding_edge(const sp_module *m, uint32_t v)
{
    uint32_t def = m->values[v].def;
    if (def != SP_NONE && m->ops[def].kind == SP_OP_SDY_DATA_FLOW_EDGE) {
        return def;
    }
    uint32_t owner = v;
    uint32_t p = region_owner(m, v);
    if (p != SP_NONE && m->ops[p].kind == SP_OP_WHILE) {
        if (m->values[v].index >= m->ops[p].n_results) {
            return SP_NONE;
        }
        owner = m->ops[p].first_result + m->values[v].index;
    }
    return edge_user(m, owner);
}

/* Shardy keeps a constraint's unreduced axes on the value itself when the
 * constraint only takes the value's uses (unreduced axes do not
 * propagate): v's sharding, or a fully open one on s's mesh, with s's
 * unreduced axes and their reduction. */
static cm_status keep_unreduced(asc *a, uint32_t v, const sp_sharding *s)
{
    sp_module *m = a->m;
    if (s->n_unreduced == 0) {
        return CM_OK;
    }
    uint32_t edge = sharding_edge(m, v);
    const sp_sharding *cur = NULL;
    if (edge != SP_NONE) {
        const sp_attr *e = sp_op_attr(m, edge, "sharding");
        cur = e != NULL && e->kind == SP_ATTR_SHARDING ? e->u.sharding : NULL;
    } else {
        cur = sp_value_sharding(m, v);
    }
    const sp_type *t = sp_value_type(m, v);
    sp_sharding *n = cur != NULL ? sp_sharding_clone(&m->arena, cur)
                                 : sp_sharding_open(&m->arena, s->mesh_name,
                                                    t->kind == SP_TYPE_TENSOR ? t->rank : 0);
    if (n == NULL) {
        return CM_ENOMEM;
    }
    if (cur == NULL) {
        n->mesh = s->mesh;
    }
    n->unreduced = s->unreduced;
    n->n_unreduced = s->n_unreduced;
    n->reduction = s->reduction;
    if (edge != SP_NONE) {
        sp_attr *at = sp_attr_new(m, SP_ATTR_SHARDING);
        if (at == NULL) {
            return CM_ENOMEM;
        }
        at->u.sharding = n;
        return sp_op_set_attr(m, edge, "sharding", at);
    }
    if (m->values[v].def == SP_NONE && region_owner(m, v) != SP_NONE) {
        return CM_OK; /* a body argument without an edge has no sharding of its own */
    }
    return sp_value_set_sharding(m, v, n);
}

/* Applies sharding s of op (a constraint, or the manual computation using v
 * as operand) to v. */
static cm_status apply(asc *a, uint32_t op, uint32_t v, const sp_sharding *s, sp_attr *s_attr)
{
    sp_module *m = a->m;
    if (!should_apply(a, v, s)) {
        return CM_OK;
    }
    if (!has_edge(a, v)) {
        if (a->debug_edges && m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
            cm_status st = note_edges(a, op, sp_value_sharding(m, v), s);
            if (st != CM_OK) {
                return st;
            }
        }
        return sp_value_set_sharding(m, v, (sp_sharding *)(uintptr_t)s);
    }
    uint32_t c = op;
    if (m->ops[op].kind != SP_OP_SDY_SHARDING_CONSTRAINT) {
        uint32_t type = m->values[v].type;
        if (sp_module_new_op(m, SP_NONE, sp_op_kind_name(SP_OP_SDY_SHARDING_CONSTRAINT), &v, 1,
                             &type, 1, &c) != CM_OK ||
            sp_op_set_attr(m, c, "sharding", s_attr) != CM_OK ||
            sp_uses_add(&a->u, v, c, 0) != CM_OK) {
            return CM_ENOMEM;
        }
        if (m->ops[c].first_result >= a->u.n_values || c >= a->cap_ops) {
            return CM_ENOMEM; /* the reserve below is generous; never expected */
        }
        a->want[m->ops[c].first_result] = 1;
    }
    cm_status st = place_after_value(a, c, v);
    uint32_t r = m->ops[c].first_result;
    FOR_USES(a, v, i)
    {
        if (st == CM_OK && a->u.pool[i].op != c) {
            st = set_operand(a, a->u.pool[i].op, a->u.pool[i].idx, r);
        }
    }
    return st == CM_OK ? keep_unreduced(a, v, s) : st;
}

/* Shardy's getTailOfShardingConstraintChain, then the redirection. */
static cm_status chain(asc *a, uint32_t head)
{
    sp_module *m = a->m;
    uint32_t v = m->ops[head].operands[0];
    uint32_t def = m->values[v].def;
    if ((def != SP_NONE && m->ops[def].kind == SP_OP_SDY_SHARDING_CONSTRAINT) ||
        sp_value_sharding(m, v) != NULL || used_by_constraint(a, v, head)) {
        return CM_OK;
    }
    uint32_t tail = head;
    for (;;) {
        uint32_t r = m->ops[tail].first_result;
        if (n_uses(a, r) != 1) {
            break;
        }
        uint32_t next = SP_NONE;
        FOR_USES(a, r, i)
        {
            next = a->u.pool[i].op;
        }
        if (m->ops[next].kind != SP_OP_SDY_SHARDING_CONSTRAINT) {
            break;
        }
        tail = next;
    }
    if (tail == head || used_by_constraint(a, m->ops[tail].first_result, SP_NONE)) {
        return CM_OK;
    }
    uint32_t tb = m->ops[tail].parent_block, tpos = a->opos[tail];
    uint32_t r = m->ops[tail].first_result;
    cm_status st = CM_OK;
    FOR_USES(a, v, i)
    {
        uint32_t user = a->u.pool[i].op;
        if (st == CM_OK && user != head && m->ops[user].kind != SP_OP_FUNC_RETURN &&
            m->ops[user].parent_block == tb && user < a->cap_ops && a->opos[user] > tpos) {
            st = set_operand(a, user, a->u.pool[i].idx, r);
        }
    }
    return st;
}

cm_status sp_pass_apply_sharding_constraints(sp_module *m, cm_error *err)
{
    return sp_pass_apply_sharding_constraints_debug(m, false, err);
}

cm_status sp_pass_apply_sharding_constraints_debug(sp_module *m, bool debug_edges, cm_error *err)
{
    asc a;
    memset(&a, 0, sizeof a);
    a.m = m;
    a.debug_edges = debug_edges;
    a.step = debug_edges ? sp_prop_debug_next_step(m) : 0;
    cm_status st = collect(&a, m->body);
    if (st != CM_OK || a.n_list == 0) {
        cm_free(a.list);
        return st == CM_OK ? CM_OK : cm_error_oom(err);
    }
    /* room for one new constraint per manual computation operand */
    uint32_t extra = 0;
    for (uint32_t i = 0; i < a.n_list; i++) {
        extra += m->ops[a.list[i]].kind == SP_OP_SDY_MANUAL_COMPUTATION ? m->ops[a.list[i]].n_operands
                                                                          : 0u;
    }
    uint32_t cap_values = m->n_values + extra + 1u;
    a.cap_ops = m->n_ops + extra + 1u;
    a.want = cm_calloc(cap_values, 1);
    a.opos = sp_pass_op_positions(m);
    uint32_t *opos = a.opos != NULL ? cm_realloc(a.opos, sizeof(uint32_t) * a.cap_ops) : NULL;
    if (opos != NULL) {
        a.opos = opos;
    }
    if (a.want == NULL || opos == NULL) {
        st = CM_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < a.n_list; i++) {
        const sp_op *op = &m->ops[a.list[i]];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            a.want[op->operands[k]] = 1;
        }
        for (uint32_t k = 0; k < op->n_results; k++) {
            a.want[op->first_result + k] = 1;
        }
    }
    if (sp_uses_build(m, &a.u, cap_values, a.want) != CM_OK) {
        st = CM_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < a.n_list && st == CM_OK; i++) {
        uint32_t op = a.list[i];
        if (m->ops[op].kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
            if (m->ops[op].n_operands != 1 || m->ops[op].n_results != 1) {
                continue;
            }
            sp_attr *s = (sp_attr *)(uintptr_t)sp_op_attr(m, op, "sharding");
            if (s == NULL || s->kind != SP_ATTR_SHARDING) {
                continue;
            }
            st = chain(&a, op);
            if (st == CM_OK) {
                st = apply(&a, op, m->ops[op].operands[0], s->u.sharding, s);
            }
            continue;
        }
        const sp_attr *ins = sp_op_attr(m, op, "in_shardings");
        if (ins == NULL || ins->kind != SP_ATTR_SHARDING_LIST) {
            continue;
        }
        for (uint32_t k = 0; k < m->ops[op].n_operands && k < ins->u.shardings.n && st == CM_OK;
             k++) {
            sp_attr *one = sp_attr_new(m, SP_ATTR_SHARDING);
            if (one == NULL) {
                st = CM_ENOMEM;
                break;
            }
            one->u.sharding = ins->u.shardings.items[k];
            st = apply(&a, op, m->ops[op].operands[k], one->u.sharding, one);
        }
    }
out:
    sp_uses_free(&a.u);
    cm_free(a.want);
    cm_free(a.opos);
    cm_free(a.list);
    return st == CM_OK ? CM_OK : st == CM_ENOMEM ? cm_error_oom(err) : st;
}
