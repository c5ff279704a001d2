/* SPDX-License-Identifier: Apache-2.0
 * planner: the import and export passes around propagation and the
 * -sdy-propagation-pipeline (see sp_pipeline.h). */
#include "sp_pipeline.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_diag.h"

static cm_status oom(cm_error *err)
{
    return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
}

/* Calls fn on every op of every block nested in block, in program order. */
typedef cm_status (*op_fn)(sp_module *m, uint32_t op, void *ctx);

static cm_status walk(sp_module *m, uint32_t block, op_fn fn, void *ctx)
{
    /* the block may change under fn (insertions): index by position */
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        cm_status st = fn(m, op, ctx);
        if (st != CM_OK) {
            return st;
        }
        const sp_op *o = &m->ops[op];
        for (uint32_t r = 0; r < o->n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                st = walk(m, m->ops[op].regions[r].blocks[k], fn, ctx);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

/* ---- -sdy-lift-inlined-meshes ---------------------------------------------------- */

/* The name of an sdy.mesh equal to mesh, creating one when needed. */
static const char *mesh_symbol(sp_module *m, const sp_mesh *mesh, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    uint32_t last_mesh = 0;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *op = &m->ops[body->ops[i]];
        if (op->kind != SP_OP_SDY_MESH) {
            continue;
        }
        last_mesh = i + 1;
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *ms = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (n != NULL && ms != NULL && ms->kind == SP_ATTR_MESH &&
            sp_mesh_equal(ms->u.mesh, mesh)) {
            return n->u.str.s;
        }
    }
    char name[64];
    if (mesh->n_axes == 0 && mesh->n_device_ids == 1) {
        snprintf(name, sizeof name, "maximal_mesh_%lld", (long long)mesh->device_ids[0]);
    } else {
        snprintf(name, sizeof name, "mesh");
        for (int k = -1; sp_module_mesh(m, name) != NULL; k++) {
            snprintf(name, sizeof name, "mesh_%d", k + 1);
        }
    }
    uint32_t op;
    if (sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        oom(err);
        return NULL;
    }
    sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
    const char *s = sp_module_str(m, name, strlen(name));
    if (n == NULL || ms == NULL || s == NULL) {
        oom(err);
        return NULL;
    }
    n->u.str.s = s;
    n->u.str.len = strlen(s);
    ms->u.mesh = (sp_mesh *)(uintptr_t)mesh;
    if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK || sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
        sp_block_insert_op(m, m->body, last_mesh, op) != CM_OK) {
        oom(err);
        return NULL;
    }
    return s;
}

static cm_status lift_sharding(sp_module *m, sp_sharding *s, cm_error *err)
{
    if (s == NULL || s->mesh == NULL) {
        return CM_OK;
    }
    const char *name = mesh_symbol(m, s->mesh, err);
    if (name == NULL) {
        return err != NULL ? err->code : CM_ENOMEM;
    }
    s->mesh_name = name;
    s->mesh = NULL;
    return CM_OK;
}

static cm_status lift_attr(sp_module *m, sp_attr *a, cm_error *err)
{
    cm_status st = CM_OK;
    switch (a->kind) {
    case SP_ATTR_SHARDING:
        return lift_sharding(m, a->u.sharding, err);
    case SP_ATTR_SHARDING_LIST:
        for (uint32_t i = 0; i < a->u.shardings.n && st == CM_OK; i++) {
            st = lift_sharding(m, a->u.shardings.items[i], err);
        }
        return st;
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n && st == CM_OK; i++) {
            st = lift_attr(m, a->u.arr.items[i], err);
        }
        return st;
    case SP_ATTR_DICT:
        for (uint32_t i = 0; i < a->u.dict.n && st == CM_OK; i++) {
            st = lift_attr(m, a->u.dict.items[i].value, err);
        }
        return st;
    default:
        return CM_OK;
    }
}

static cm_status lift_op(sp_module *m, uint32_t op, void *ctx)
{
    cm_error *err = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_attrs; i++) {
        cm_status st = lift_attr(m, m->ops[op].attrs[i].value, err);
        if (st != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

cm_status sp_pass_lift_inlined_meshes(sp_module *m, cm_error *err)
{
    return walk(m, m->body, lift_op, err);
}

/* ---- use lists ---------------------------------------------------------------------- */

/* Per-value uses as linked lists in a pool, so passes can add uses. */
typedef struct use {
    uint32_t op, idx, next;
} use;

typedef struct uses {
    uint32_t *head; /* per value */
    use *pool;
    uint32_t n, cap;
    uint32_t n_values;
    const uint8_t *want; /* per value: track its uses (NULL: all) */
} uses;

static cm_status uses_add(uses *u, uint32_t v, uint32_t op, uint32_t idx)
{
    if (u->want != NULL && !u->want[v]) {
        return CM_OK;
    }
    if (u->n == u->cap) {
        uint32_t cap = u->cap < 1024 ? 1024 : u->cap * 2;
        use *p = cm_realloc(u->pool, sizeof(use) * cap);
        if (p == NULL) {
            return CM_ENOMEM;
        }
        u->pool = p;
        u->cap = cap;
    }
    u->pool[u->n] = (use){op, idx, u->head[v]};
    u->head[v] = u->n++;
    return CM_OK;
}

static cm_status uses_build_op(sp_module *m, uint32_t op, void *ctx)
{
    uses *u = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        if (uses_add(u, m->ops[op].operands[i], op, i) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

/* Builds use lists with room for values created later (up to cap_values),
 * only for the values flagged in want (NULL: every value). */
static cm_status uses_build(sp_module *m, uses *u, uint32_t cap_values, const uint8_t *want)
{
    memset(u, 0, sizeof *u);
    u->n_values = cap_values;
    u->want = want;
    u->head = cm_alloc(sizeof(uint32_t) * (cap_values + 1u));
    if (u->head == NULL) {
        return CM_ENOMEM;
    }
    memset(u->head, 0xff, sizeof(uint32_t) * (cap_values + 1u));
    return walk(m, m->body, uses_build_op, u);
}

static void uses_free(uses *u)
{
    cm_free(u->head);
    cm_free(u->pool);
}

static uint32_t uses_count(const uses *u, uint32_t v)
{
    uint32_t n = 0;
    for (uint32_t i = u->head[v]; i != SP_NONE; i = u->pool[i].next) {
        n++;
    }
    return n;
}

/* Position of every op within its block (SP_NONE when detached); the caller frees. */
static uint32_t *op_positions(const sp_module *m)
{
    uint32_t *pos = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (pos == NULL) {
        return NULL;
    }
    memset(pos, 0xff, sizeof(uint32_t) * (m->n_ops + 1u));
    for (uint32_t b = 0; b < m->n_blocks; b++) {
        for (uint32_t i = 0; i < m->blocks[b].n_ops; i++) {
            pos[m->blocks[b].ops[i]] = i;
        }
    }
    return pos;
}

/* ---- -sdy-apply-sharding-constraints ---------------------------------------------------- */

static bool fully_closed(const sp_sharding *s)
{
    for (uint32_t d = 0; d < s->rank; d++) {
        if (!s->dims[d].is_closed) {
            return false;
        }
    }
    return true;
}

static bool is_constraint_like(const sp_op *op)
{
    return op->kind == SP_OP_SDY_SHARDING_CONSTRAINT || op->kind == SP_OP_SDY_MANUAL_COMPUTATION;
}

cm_status sp_pass_apply_sharding_constraints(sp_module *m, cm_error *err)
{
    uint8_t *want = cm_calloc(m->n_values + 1u, 1);
    if (want == NULL) {
        return oom(err);
    }
    bool any = false;
    for (uint32_t c = 0; c < m->n_ops; c++) {
        const sp_op *op = &m->ops[c];
        if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT && op->n_operands == 1 && op->n_results == 1) {
            want[op->operands[0]] = 1;
            want[op->first_result] = 1;
            any = true;
        }
    }
    uses u;
    memset(&u, 0, sizeof u); /* uses_free is safe when op_positions fails first */
    if (!any) {
        cm_free(want);
        return CM_OK;
    }
    uint32_t *opos = op_positions(m);
    if (opos == NULL || uses_build(m, &u, m->n_values, want) != CM_OK) {
        uses_free(&u);
        cm_free(want);
        cm_free(opos);
        return oom(err);
    }
    cm_status st = CM_OK;
    uint32_t n_ops = m->n_ops;
    for (uint32_t c = 0; c < n_ops && st == CM_OK; c++) {
        const sp_op *op = &m->ops[c];
        if (op->kind != SP_OP_SDY_SHARDING_CONSTRAINT || op->parent_block == SP_NONE ||
            op->n_operands != 1) {
            continue;
        }
        uint32_t v = op->operands[0];
        const sp_attr *a = sp_op_attr(m, c, "sharding");
        if (a == NULL || a->kind != SP_ATTR_SHARDING) {
            continue;
        }
        /* other constraint-like users of v with a different sharding forbid it */
        bool other = false;
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            const sp_op *user = &m->ops[u.pool[i].op];
            if (u.pool[i].op == c || !is_constraint_like(user)) {
                continue;
            }
            const sp_attr *b = sp_op_attr(m, u.pool[i].op, "sharding");
            if (b == NULL || b->kind != SP_ATTR_SHARDING ||
                !sp_sharding_equal(b->u.sharding, a->u.sharding)) {
                other = true;
            }
        }
        uint32_t def = m->values[v].def;
        bool is_edge_target =
            def == SP_NONE ? m->blocks[m->values[v].block].parent_op != SP_NONE &&
                                 m->ops[m->blocks[m->values[v].block].parent_op].kind !=
                                     SP_OP_FUNC_FUNC
                           : m->ops[def].kind == SP_OP_WHILE || m->ops[def].kind == SP_OP_CASE ||
                                 m->ops[def].kind == SP_OP_IF ||
                                 m->ops[def].kind == SP_OP_OPTIMIZATION_BARRIER;
        if (!other && fully_closed(a->u.sharding) && sp_value_sharding(m, v) == NULL &&
            (def == SP_NONE || m->ops[def].kind != SP_OP_SDY_SHARDING_CONSTRAINT)) {
            if (is_edge_target) {
                /* do not restrict every target of the edge: later uses read
                 * the constrained value instead */
                uint32_t pos = opos[c];
                for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
                    uint32_t user = u.pool[i].op;
                    if (user != c && m->ops[user].parent_block == op->parent_block &&
                        opos[user] > pos) {
                        m->ops[user].operands[u.pool[i].idx] = op->first_result;
                    }
                }
                continue;
            }
            st = sp_value_set_sharding(m, v, a->u.sharding);
            if (st != CM_OK) {
                break;
            }
        }
        /* the chain case: v feeds only this constraint (among constraint-like
         * users) and the constraint's result has no constraint-like users:
         * later uses of v in the same block take the constrained value */
        if (other || (m->values[v].def != SP_NONE &&
                      m->ops[m->values[v].def].kind == SP_OP_SDY_SHARDING_CONSTRAINT)) {
            continue;
        }
        uint32_t r = op->first_result;
        bool r_constrained = false;
        for (uint32_t i = u.head[r]; i != SP_NONE; i = u.pool[i].next) {
            r_constrained = r_constrained || is_constraint_like(&m->ops[u.pool[i].op]);
        }
        if (r_constrained) {
            continue;
        }
        uint32_t pos = opos[c];
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            uint32_t user = u.pool[i].op;
            const sp_op *uo = &m->ops[user];
            if (user == c || uo->kind == SP_OP_FUNC_RETURN || uo->parent_block != op->parent_block) {
                continue;
            }
            uint32_t upos = opos[user];
            if (upos != SP_NONE && pos != SP_NONE && upos > pos) {
                m->ops[user].operands[u.pool[i].idx] = r;
            }
        }
    }
    uses_free(&u);
    cm_free(want);
    cm_free(opos);
    return st == CM_ENOMEM ? oom(err) : st;
}

/* ---- -sdy-constant-or-scalar-splitter ------------------------------------------------- */

static bool is_const_root(const sp_op *op)
{
    return (op->kind == SP_OP_CONSTANT || op->kind == SP_OP_SDY_CONSTANT ||
            op->kind == SP_OP_IOTA) &&
           op->n_operands == 0;
}

static bool is_const_expr(const sp_module *m, uint32_t opid, uint8_t *memo)
{
    if (memo[opid] != 0) {
        return memo[opid] == 1;
    }
    const sp_op *op = &m->ops[opid];
    bool r;
    if (is_const_root(op)) {
        r = true;
    } else if (op->n_regions == 0 && op->n_results == 1 &&
               (op->kind == SP_OP_BROADCAST_IN_DIM || op->kind == SP_OP_RESHAPE ||
                op->kind == SP_OP_SLICE || op->kind == SP_OP_BROADCAST ||
                sp_op_is_elementwise((sp_op_kind)op->kind)) &&
               op->n_operands > 0) {
        r = true;
        for (uint32_t i = 0; i < op->n_operands && r; i++) {
            uint32_t d = m->values[op->operands[i]].def;
            r = d != SP_NONE && is_const_expr(m, d, memo);
        }
    } else {
        r = false;
    }
    memo[opid] = r ? 1 : 2;
    return r;
}

static bool is_scalar_expansion(const sp_module *m, const sp_op *op)
{
    if (op->kind != SP_OP_BROADCAST_IN_DIM || op->n_operands != 1) {
        return false;
    }
    const sp_type *t = &m->types[m->values[op->operands[0]].type];
    return t->kind == SP_TYPE_TENSOR && t->rank == 0;
}

cm_status sp_pass_constant_splitter(sp_module *m, cm_error *err)
{
    uint32_t n_ops0 = m->n_ops;
    uint8_t *memo = cm_calloc(n_ops0 * 2u + 16u, 1);
    /* every clone adds at most one value per result; reserve generously */
    uint8_t *want = cm_calloc(m->n_values * 2u + 16u, 1);
    uses u;
    memset(&u, 0, sizeof u);
    if (memo == NULL || want == NULL) {
        cm_free(memo);
        cm_free(want);
        return oom(err);
    }
    /* the candidates in program order: the split below walks them backwards,
     * and a backward walk over the whole op array is many times slower than
     * a forward one (cache misses on every op) */
    uint32_t *cands = cm_alloc(sizeof(uint32_t) * (n_ops0 + 1u));
    if (cands == NULL) {
        cm_free(memo);
        cm_free(want);
        return oom(err);
    }
    uint32_t n_cands = 0;
    for (uint32_t opid = 0; opid < n_ops0; opid++) {
        const sp_op *op = &m->ops[opid];
        if (op->parent_block != SP_NONE && op->n_results == 1 && op->kind != SP_OP_FUNC_FUNC &&
            (is_const_expr(m, opid, memo) || is_scalar_expansion(m, op))) {
            want[op->first_result] = 1;
            cands[n_cands++] = opid;
        }
    }
    bool any = n_cands > 0;
    size_t cap_ops = (size_t)n_ops0 * 2u + 16u;
    uint32_t *after_head = any ? cm_alloc(sizeof(uint32_t) * cap_ops * 3u) : NULL;
    uint8_t *dirty = any ? cm_calloc(m->n_blocks + 1u, 1) : NULL;
    if (!any || after_head == NULL || dirty == NULL ||
        uses_build(m, &u, m->n_values * 2u + 16u, want) != CM_OK) {
        cm_free(memo);
        cm_free(want);
        cm_free(cands);
        cm_free(after_head);
        cm_free(dirty);
        uses_free(&u);
        return any ? oom(err) : CM_OK;
    }
    uint32_t *after_tail = after_head + cap_ops, *after_next = after_head + 2 * cap_ops;
    memset(after_head, 0xff, sizeof(uint32_t) * cap_ops);
    cm_status st = CM_OK;
    /* reverse program order: users are split before the values they use */
    for (uint32_t ci = n_cands; ci-- > 0 && st == CM_OK;) {
        uint32_t opid = cands[ci];
        const sp_op *op = &m->ops[opid];
        uint32_t v = op->first_result;
        if (uses_count(&u, v) <= 1) {
            continue;
        }
        /* a value in a sharding group stays one value: its group decides */
        bool grouped = false;
        for (uint32_t i = u.head[v]; i != SP_NONE && !grouped; i = u.pool[i].next) {
            grouped = m->ops[u.pool[i].op].kind == SP_OP_SDY_SHARDING_GROUP;
        }
        if (grouped) {
            continue;
        }
        /* keep the first use (in program order the list is reversed: the last
         * node is the first use); give every other use its own copy */
        uint32_t first = u.head[v];
        while (u.pool[first].next != SP_NONE) {
            first = u.pool[first].next;
        }
        uint32_t block = m->ops[opid].parent_block;
        for (uint32_t i = u.head[v]; i != SP_NONE; i = u.pool[i].next) {
            if (i == first) {
                continue;
            }
            uint32_t clone;
            st = sp_op_clone_detached(m, opid, &clone);
            if (st != CM_OK) {
                break;
            }
            if (m->n_values >= u.n_values || m->n_ops >= n_ops0 * 2u + 16u) {
                st = CM_ENOMEM;
                break;
            }
            /* inserted after opid when the pass ends (one rebuild per block) */
            after_next[clone] = SP_NONE;
            if (after_head[opid] == SP_NONE) {
                after_head[opid] = clone;
            } else {
                after_next[after_tail[opid]] = clone;
            }
            after_tail[opid] = clone;
            dirty[block] = 1;
            memo[clone] = memo[opid];
            const sp_op *c = &m->ops[clone];
            for (uint32_t k = 0; k < c->n_operands && st == CM_OK; k++) {
                st = uses_add(&u, c->operands[k], clone, k);
            }
            m->ops[u.pool[i].op].operands[u.pool[i].idx] = c->first_result;
        }
        /* v now has exactly one use */
        if (st == CM_OK) {
            u.head[v] = first;
            u.pool[first].next = SP_NONE;
        }
    }
    /* place the copies: rebuild each block that got some, once */
    for (uint32_t b = 0; b < m->n_blocks && st == CM_OK; b++) {
        if (!dirty[b]) {
            continue;
        }
        sp_block *bl = &m->blocks[b];
        uint32_t n = bl->n_ops;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            for (uint32_t c = after_head[bl->ops[i]]; c != SP_NONE; c = after_next[c]) {
                n++;
            }
        }
        uint32_t *ops = cm_alloc(sizeof(uint32_t) * (n + 1u));
        if (ops == NULL) {
            st = CM_ENOMEM;
            break;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            ops[k++] = bl->ops[i];
            for (uint32_t c = after_head[bl->ops[i]]; c != SP_NONE; c = after_next[c]) {
                ops[k++] = c;
                m->ops[c].parent_block = b;
            }
        }
        cm_free(bl->ops);
        bl->ops = ops;
        bl->n_ops = n;
        bl->cap_ops = n + 1u;
    }
    cm_free(memo);
    cm_free(want);
    cm_free(cands);
    cm_free(after_head);
    cm_free(dirty);
    uses_free(&u);
    return st == CM_OK ? CM_OK : oom(err);
}

/* ---- constant merger ----------------------------------------------------------------- */

typedef struct merge_ctx {
    uint32_t *repl;   /* per value: the value that replaces it */
    uint32_t *seen;   /* candidate ops kept so far in the enclosing blocks */
    uint32_t *next;   /* per seen entry: next entry of its hash bucket */
    uint32_t n_seen, cap_seen;
    uint32_t heads[4096]; /* hash buckets of seen entries (SP_NONE: empty) */
} merge_ctx;

static bool same_attrs(const sp_op *a, const sp_op *b)
{
    if (a->n_attrs != b->n_attrs) {
        return false;
    }
    for (uint32_t i = 0; i < a->n_attrs; i++) {
        const sp_attr *x = a->attrs[i].value;
        const sp_attr *y = sp_attrs_get(b->attrs, b->n_attrs, a->attrs[i].name);
        if (y == NULL) {
            return false;
        }
        if (x == y) {
            continue;
        }
        if (x->kind == SP_ATTR_SHARDING_LIST && y->kind == SP_ATTR_SHARDING_LIST &&
            x->u.shardings.n == y->u.shardings.n) {
            for (uint32_t k = 0; k < x->u.shardings.n; k++) {
                if (!sp_sharding_equal(x->u.shardings.items[k], y->u.shardings.items[k])) {
                    return false;
                }
            }
            continue;
        }
        return false;
    }
    return true;
}

/* Consistent with same_attrs: attributes other than sharding lists are
 * equal only as the same object, so their addresses are hashed (summed, as
 * same_attrs ignores their order); sharding lists compare by value and are
 * left out. Constants of one type with different values thus land in
 * different buckets (they used to chain into one: ~0.1 s on a 34k-op
 * module). */
static uint32_t merge_hash(const sp_module *m, const sp_op *op)
{
    uint64_t h = op->kind * 0x9e3779b97f4a7c15ull ^ m->values[op->first_result].type;
    for (uint32_t k = 0; k < op->n_operands; k++) {
        h = (h ^ op->operands[k]) * 1099511628211ull;
    }
    uint64_t a = 0;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        const sp_attr *x = op->attrs[i].value;
        if (x->kind != SP_ATTR_SHARDING_LIST) {
            a += (uint64_t)(uintptr_t)x * 0x9e3779b97f4a7c15ull;
        }
    }
    h = (h ^ a ^ (a >> 31)) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 29)) & 4095u;
}

static cm_status merge_block(sp_module *m, uint32_t block, merge_ctx *c, uint8_t *memo)
{
    uint32_t seen0 = c->n_seen;
    uint32_t keep = 0; /* ops kept so far in this block (removals compacted in place) */
    sp_block *bl = &m->blocks[block];
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t opid = m->blocks[block].ops[i];
        sp_op *op = &m->ops[opid];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            op->operands[k] = c->repl[op->operands[k]];
        }
        bool removed = false;
        if (op->n_results == 1 && op->n_regions == 0 &&
            (is_const_expr(m, opid, memo) || is_scalar_expansion(m, op))) {
            uint32_t h = merge_hash(m, op);
            for (uint32_t s = c->heads[h]; s != SP_NONE; s = c->next[s]) {
                const sp_op *o = &m->ops[c->seen[s]];
                if (o->kind != op->kind || o->n_operands != op->n_operands ||
                    m->values[o->first_result].type != m->values[op->first_result].type) {
                    continue;
                }
                bool same = op->n_operands == 0 ||
                            memcmp(o->operands, op->operands, sizeof(uint32_t) * op->n_operands) == 0;
                if (same && same_attrs(o, op)) {
                    c->repl[op->first_result] = o->first_result;
                    op->parent_block = SP_NONE;
                    removed = true;
                    break;
                }
            }
            if (!removed) {
                if (c->n_seen == c->cap_seen) {
                    uint32_t cap = c->cap_seen < 64 ? 64 : c->cap_seen * 2;
                    uint32_t *p = cm_realloc(c->seen, sizeof(uint32_t) * cap);
                    uint32_t *q = p != NULL ? cm_realloc(c->next, sizeof(uint32_t) * cap) : NULL;
                    if (p == NULL || q == NULL) {
                        if (p != NULL) {
                            c->seen = p;
                        }
                        return CM_ENOMEM;
                    }
                    c->seen = p;
                    c->next = q;
                    c->cap_seen = cap;
                }
                c->seen[c->n_seen] = opid;
                c->next[c->n_seen] = c->heads[h];
                c->heads[h] = c->n_seen++;
            }
        }
        if (removed) {
            continue;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[opid].regions[r].n_blocks; k++) {
                cm_status st = merge_block(m, m->ops[opid].regions[r].blocks[k], c, memo);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        bl = &m->blocks[block];
        bl->ops[keep++] = opid;
    }
    m->blocks[block].n_ops = keep;
    /* leave this block's scope: pop its entries from their buckets */
    while (c->n_seen > seen0) {
        uint32_t s = --c->n_seen;
        uint32_t h = merge_hash(m, &m->ops[c->seen[s]]);
        c->heads[h] = c->next[s];
    }
    return CM_OK;
}

cm_status sp_pass_constant_merger(sp_module *m, cm_error *err)
{
    merge_ctx *c = cm_calloc(1, sizeof *c); /* the bucket array is big: keep it off the stack */
    uint8_t *memo = cm_calloc(m->n_ops + 1u, 1);
    if (c == NULL || memo == NULL) {
        cm_free(c);
        cm_free(memo);
        return oom(err);
    }
    memset(c->heads, 0xff, sizeof c->heads);
    c->repl = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    cm_status st = c->repl != NULL ? CM_OK : CM_ENOMEM;
    for (uint32_t v = 0; st == CM_OK && v < m->n_values; v++) {
        c->repl[v] = v;
    }
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        const sp_op *f = &m->ops[body->ops[i]];
        for (uint32_t r = 0; r < f->n_regions && st == CM_OK; r++) {
            for (uint32_t k = 0; k < f->regions[r].n_blocks && st == CM_OK; k++) {
                st = merge_block(m, f->regions[r].blocks[k], c, memo);
            }
        }
    }
    cm_free(memo);
    cm_free(c->repl);
    cm_free(c->seen);
    cm_free(c->next);
    cm_free(c);
    return st == CM_OK ? CM_OK : oom(err);
}

/* ---- sharding groups ------------------------------------------------------------------- */

cm_status sp_pass_sharding_group_import(sp_module *m, sp_diags *diags, cm_error *err)
{
    /* union-find over group ids through shared values */
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        n += m->ops[i].kind == SP_OP_SDY_SHARDING_GROUP && m->ops[i].parent_block != SP_NONE;
    }
    if (n == 0) {
        return CM_OK;
    }
    int64_t *ids = cm_alloc(sizeof(int64_t) * n);
    uint32_t *parent = cm_alloc(sizeof(uint32_t) * n);
    uint32_t *value_group = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    uint32_t *ops = cm_alloc(sizeof(uint32_t) * n);
    cm_status st = CM_OK;
    if (ids == NULL || parent == NULL || value_group == NULL || ops == NULL) {
        st = oom(err);
        goto out;
    }
    memset(value_group, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    uint32_t k = 0;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->kind != SP_OP_SDY_SHARDING_GROUP || op->parent_block == SP_NONE) {
            continue;
        }
        const sp_attr *g = sp_op_attr(m, i, "group_id");
        ids[k] = g != NULL && g->kind == SP_ATTR_INT ? g->u.i.v : 0;
        parent[k] = k;
        ops[k] = i;
        /* same id: union with the first op of that id */
        for (uint32_t j = 0; j < k; j++) {
            if (ids[j] == ids[k]) {
                parent[k] = j;
                break;
            }
        }
        if (op->n_operands == 1) {
            uint32_t v = op->operands[0];
            if (value_group[v] != SP_NONE) {
                uint32_t a = value_group[v], b = k;
                while (parent[a] != a) {
                    a = parent[a];
                }
                while (parent[b] != b) {
                    b = parent[b];
                }
                if (a != b) {
                    parent[b < a ? a : b] = b < a ? b : a;
                }
            } else {
                value_group[v] = k;
            }
        }
        k++;
    }
    /* renumber roots 0..N-1 in order of first appearance */
    int64_t next = 0;
    int64_t *canon = cm_alloc(sizeof(int64_t) * n);
    if (canon == NULL) {
        st = oom(err);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = i;
        while (parent[r] != r) {
            r = parent[r];
        }
        canon[i] = r == i ? next++ : canon[r];
    }
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
        if (a == NULL) {
            st = oom(err);
            break;
        }
        a->u.i.v = canon[i];
        a->u.i.type = "i64";
        st = sp_op_set_attr(m, ops[i], "group_id", a) == CM_OK ? CM_OK : oom(err);
    }
    cm_free(canon);
    (void)diags;
out:
    cm_free(ids);
    cm_free(parent);
    cm_free(value_group);
    cm_free(ops);
    return st;
}

static cm_status remove_groups_in(sp_module *m, uint32_t block)
{
    for (uint32_t i = 0; i < m->blocks[block].n_ops;) {
        uint32_t op = m->blocks[block].ops[i];
        if (m->ops[op].kind == SP_OP_SDY_SHARDING_GROUP) {
            sp_block_remove_op(m, block, i);
            continue;
        }
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t k = 0; k < m->ops[op].regions[r].n_blocks; k++) {
                remove_groups_in(m, m->ops[op].regions[r].blocks[k]);
            }
        }
        i++;
    }
    return CM_OK;
}

cm_status sp_pass_remove_sharding_groups(sp_module *m, cm_error *err)
{
    (void)err;
    return remove_groups_in(m, m->body);
}

/* ---- function boundary shardings --------------------------------------------------------- */

typedef sp_sharding *(*fix_fn)(sp_module *m, const sp_sharding *s, const sp_type *t);

/* Applies fix to every function input and output sharding. */
static cm_status fix_io(sp_module *m, fix_fn fix, cm_error *err)
{
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t f = body->ops[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        const sp_type *ft = sp_func_type(m, f);
        if (ft == NULL) {
            continue;
        }
        if (m->ops[f].n_regions == 1 && m->ops[f].regions[0].n_blocks > 0) {
            const sp_block *entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
            for (uint32_t k = 0; k < entry->n_args; k++) {
                uint32_t v = entry->first_arg + k;
                sp_sharding *s = sp_value_sharding(m, v);
                if (s == NULL) {
                    continue;
                }
                sp_sharding *n = fix(m, s, &m->types[m->values[v].type]);
                if (n == NULL) {
                    return oom(err);
                }
                if (n != s && sp_value_set_sharding(m, v, n) != CM_OK) {
                    return oom(err);
                }
                entry = &m->blocks[m->ops[f].regions[0].blocks[0]];
            }
        }
        for (uint32_t k = 0; k < ft->n_results; k++) {
            sp_sharding *s = sp_func_result_sharding(m, f, k);
            if (s == NULL) {
                continue;
            }
            sp_sharding *n = fix(m, s, &m->types[ft->results[k]]);
            if (n == NULL) {
                return oom(err);
            }
            if (n != s && sp_func_set_result_sharding(m, f, k, n) != CM_OK) {
                return oom(err);
            }
        }
    }
    return CM_OK;
}

static sp_sharding *close_one(sp_module *m, const sp_sharding *s, const sp_type *t)
{
    (void)t;
    bool need = s->n_replicated > 0;
    for (uint32_t d = 0; d < s->rank; d++) {
        need = need || !s->dims[d].is_closed;
    }
    if (!need) {
        return (sp_sharding *)(uintptr_t)s;
    }
    sp_sharding *c = sp_sharding_clone(&m->arena, s);
    if (c == NULL) {
        return NULL;
    }
    for (uint32_t d = 0; d < c->rank; d++) {
        c->dims[d].is_closed = true;
        if (c->dims[d].n_axes == 0) {
            c->dims[d].priority = -1;
        }
    }
    c->n_replicated = 0;
    c->replicated = NULL;
    return c;
}

cm_status sp_pass_close_shardings(sp_module *m, cm_error *err)
{
    return fix_io(m, close_one, err);
}

static int64_t axis_size(const sp_module *m, const sp_sharding *s, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh : sp_module_mesh(m, s->mesh_name);
    if (mesh == NULL) {
        return r->size > 0 ? r->size : 1;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 1 : mesh->axes[i].size;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static sp_sharding *divisible_one(sp_module *m, const sp_sharding *s, const sp_type *t)
{
    if (t->kind != SP_TYPE_TENSOR || t->rank != s->rank) {
        return (sp_sharding *)(uintptr_t)s;
    }
    sp_sharding *c = NULL;
    for (uint32_t d = 0; d < s->rank; d++) {
        int64_t room = t->dims[d];
        uint32_t keep = 0;
        int64_t last_size = 0;
        for (; keep < s->dims[d].n_axes; keep++) {
            int64_t sz = axis_size(m, s, &s->dims[d].axes[keep]);
            if (room > 0 && room % sz == 0) {
                room /= sz;
                continue;
            }
            last_size = room > 0 ? gcd(room, sz) : 1;
            break;
        }
        if (keep == s->dims[d].n_axes) {
            continue;
        }
        if (c == NULL) {
            c = sp_sharding_clone(&m->arena, s);
            if (c == NULL) {
                return NULL;
            }
        }
        sp_dim_sharding *ds = &c->dims[d];
        ds->n_axes = keep;
        if (last_size > 1) {
            /* keep the largest major sub-axis of the first non-dividing axis */
            sp_axis_ref r = s->dims[d].axes[keep];
            int64_t pre = r.pre_size > 0 ? r.pre_size : 1;
            ds->axes[keep].name = r.name;
            ds->axes[keep].pre_size = pre;
            ds->axes[keep].size = last_size;
            ds->n_axes = keep + 1;
        }
    }
    return c != NULL ? c : (sp_sharding *)(uintptr_t)s;
}

cm_status sp_pass_update_non_divisible_io(sp_module *m, cm_error *err)
{
    return fix_io(m, divisible_one, err);
}

static cm_status drop_rule_op(sp_module *m, uint32_t op, void *ctx)
{
    (void)ctx;
    sp_op_remove_attr(m, op, "sdy.sharding_rule");
    return CM_OK;
}

cm_status sp_pass_drop_sharding_rules(sp_module *m, cm_error *err)
{
    (void)err;
    return walk(m, m->body, drop_rule_op, NULL);
}

/* ---- the pipeline ---------------------------------------------------------------------- */

/* Runs one step of the pipeline, timing it when timing is on. */
#define STEP(name, call)                                                                           \
    do {                                                                                           \
        if (st == CM_OK) {                                                                         \
            double t0 = timing ? cm_now() : 0.0;                                                   \
            st = (call);                                                                           \
            if (timing) {                                                                          \
                fprintf(stderr, "  %-44s %8.3f s\n", name, cm_now() - t0);                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

cm_status sp_pass_propagation_import(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                     cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    STEP("-sdy-lift-inlined-meshes", sp_pass_lift_inlined_meshes(m, err));
    STEP("-sdy-sharding-group-import", sp_pass_sharding_group_import(m, diags, err));
    STEP("-sdy-apply-sharding-constraints", sp_pass_apply_sharding_constraints(m, err));
    STEP("-sdy-constant-or-scalar-splitter", sp_pass_constant_splitter(m, err));
    return st;
}

cm_status sp_pass_propagation_export(sp_module *m, const sp_prop_opts *o, cm_error *err)
{
    bool timing = o->timing;
    cm_status st = CM_OK;
    STEP("-sdy-remove-sharding-groups", sp_pass_remove_sharding_groups(m, err));
    STEP("-sdy-constant-or-scalar-merger", sp_pass_constant_merger(m, err));
    STEP("-sdy-update-non-divisible-input-output-shardings", sp_pass_update_non_divisible_io(m, err));
    STEP("-sdy-close-shardings", sp_pass_close_shardings(m, err));
    return st;
}

cm_status sp_pass_propagation_pipeline(sp_module *m, const sp_prop_opts *o, sp_diags *diags,
                                       cm_error *err)
{
    bool timing = o->timing;
    cm_status st = sp_pass_propagation_import(m, o, diags, err);
    sp_prop_opts po = *o;
    po.level = SP_PROP_USER_PRIORITY;
    STEP("-sdy-user-priority-propagate", sp_propagate(m, &po, diags, err));
    if (st == CM_OK) {
        st = sp_pass_propagation_export(m, o, err);
    }
    return st;
}
