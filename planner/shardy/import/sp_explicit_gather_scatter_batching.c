/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-explicit-gather-scatter-batching (Shardy's
 * import/explicit_gather_scatter_batching.cc; see sp_import.h). A gather or
 * scatter without batching dimensions whose operand dimension 0 is indexed
 * by an iota along indices dimension 0 (so that row i of the indices reads
 * row i of the operand) is an implicit batch: dimension 0 of the operand and
 * of the indices become explicit batching dimensions, the iota's component
 * leaves the index vector and the start index map (scatter: the scatter
 * dims to operand dims), and operand dimension 0 leaves the collapsed
 * slice dims (inserted window dims). The op is edited in place: Shardy
 * builds an equal op with the same attributes where the old one was.
 *
 * Shardy runs its two rewrite patterns through MLIR's greedy driver, which
 * does two more things done here too: before the rewrites it uniques the
 * stablehlo.constant ops of each function (the first of equal ones, in
 * post-order, takes the others' uses) and hoists them to the front of the
 * function's entry block as its OperationFolder does; after them, the pure
 * ops (see is_pure) left without uses are erased, the old index computation
 * among them. The driver's folding of other ops is not done here. */
#include "sp_import.h"

#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

typedef struct egsb {
    sp_module *m;
    uint32_t *uses; /* per value: live uses (the DCE at the end) */
    uint32_t n_uses;
    bool changed;
} egsb;

static const sp_attr *param_of(const sp_attr *dn, const char *name)
{
    for (uint32_t i = 0; i < dn->u.params.n; i++) {
        if (strcmp(dn->u.params.items[i].name, name) == 0) {
            return dn->u.params.items[i].value;
        }
    }
    return NULL;
}

/* The integers of list parameter name of dn into v (at most SP_MAX_RANK);
 * absent is empty; false when it is not a list of integers. */
static bool list_of(const sp_attr *dn, const char *name, int64_t *v, uint32_t *n)
{
    const sp_attr *a = param_of(dn, name);
    *n = 0;
    if (a == NULL) {
        return true;
    }
    if (a->kind == SP_ATTR_DENSE_ARRAY) {
        if (a->u.darr.n > SP_MAX_RANK) {
            return false;
        }
        for (uint32_t i = 0; i < a->u.darr.n; i++) {
            v[(*n)++] = a->u.darr.v[i];
        }
        return true;
    }
    if (a->kind != SP_ATTR_ARRAY || a->u.arr.n > SP_MAX_RANK) {
        return false;
    }
    for (uint32_t i = 0; i < a->u.arr.n; i++) {
        if (a->u.arr.items[i]->kind != SP_ATTR_INT) {
            return false;
        }
        v[(*n)++] = a->u.arr.items[i]->u.i.v;
    }
    return true;
}

/* Removes the first x from v; false when v has none. */
static bool list_remove(int64_t *v, uint32_t *n, int64_t x, uint32_t *at)
{
    for (uint32_t i = 0; i < *n; i++) {
        if (v[i] == x) {
            memmove(v + i, v + i + 1, sizeof *v * (*n - i - 1u));
            (*n)--;
            if (at != NULL) {
                *at = i;
            }
            return true;
        }
    }
    return false;
}

static sp_attr *int_attr(sp_module *m, int64_t v, const char *type)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_INT);
    if (a != NULL) {
        a->u.i.v = v;
        a->u.i.type = type;
    }
    return a;
}

/* `[a, b]`: a list parameter of a dimension-numbers attribute. */
static sp_attr *list_attr(sp_module *m, const int64_t *v, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_ARRAY);
    if (a == NULL) {
        return NULL;
    }
    a->u.arr.n = n;
    a->u.arr.items = n > 0 ? cm_arena_alloc(&m->arena, sizeof(sp_attr *) * n) : NULL;
    if (n > 0 && a->u.arr.items == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        if ((a->u.arr.items[i] = int_attr(m, v[i], NULL)) == NULL) {
            return NULL;
        }
    }
    return a;
}

static sp_attr *darr_attr(sp_module *m, const int64_t *v, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE_ARRAY);
    int64_t *copy = n > 0 ? cm_arena_alloc(&m->arena, sizeof *copy * n) : NULL;
    if (a == NULL || (n > 0 && copy == NULL)) {
        return NULL;
    }
    if (n > 0) {
        memcpy(copy, v, sizeof *copy * n);
    }
    a->u.darr.elem = "i64";
    a->u.darr.v = copy;
    a->u.darr.n = n;
    return a;
}

/* Shardy's unwrapReshapes: through reshapes, broadcasts and clamps (their
 * operand), and selects (the false branch when an iota gives it, else the
 * true branch), to the value they start from. */
static uint32_t unwrap(const sp_module *m, uint32_t v)
{
    for (uint32_t guard = 0; guard < m->n_ops + 1u; guard++) {
        uint32_t d = m->values[v].def;
        if (d == SP_NONE) {
            break;
        }
        const sp_op *op = &m->ops[d];
        if ((op->kind == SP_OP_RESHAPE || op->kind == SP_OP_BROADCAST_IN_DIM) &&
            op->n_operands == 1) {
            v = op->operands[0];
        } else if (op->kind == SP_OP_CLAMP && op->n_operands == 3) {
            v = op->operands[1]; /* (min, operand, max) */
        } else if (op->kind == SP_OP_SELECT && op->n_operands == 3) {
            uint32_t f = m->values[op->operands[2]].def;
            v = f != SP_NONE && m->ops[f].kind == SP_OP_IOTA ? op->operands[2] : op->operands[1];
        } else {
            break;
        }
    }
    return v;
}

/* The concatenate defining v along dimension dim, or SP_NONE. */
static uint32_t concat_along(const sp_module *m, uint32_t v, int64_t dim)
{
    uint32_t d = m->values[v].def;
    if (d == SP_NONE || m->ops[d].kind != SP_OP_CONCATENATE) {
        return SP_NONE;
    }
    const sp_attr *a = sp_op_attr(m, d, "dimension");
    return a != NULL && a->kind == SP_ATTR_INT && a->u.i.v == dim ? d : SP_NONE;
}

/* Shardy's verifyIotaOrigin: component k of the index vector (along ivd) of
 * indices comes from an iota along dimension 0: the k-th input of a
 * concatenate along ivd, or the indices themselves, through unwrap. */
static bool iota_origin(const sp_module *m, uint32_t indices, int64_t ivd, uint32_t k)
{
    uint32_t v = indices;
    uint32_t d = m->values[v].def;
    if (d != SP_NONE && m->ops[d].kind == SP_OP_CONCATENATE) {
        if (concat_along(m, v, ivd) == SP_NONE || k >= m->ops[d].n_operands) {
            return false;
        }
        v = m->ops[d].operands[k];
    }
    v = unwrap(m, v);
    d = m->values[v].def;
    if (d == SP_NONE || m->ops[d].kind != SP_OP_IOTA) {
        return false;
    }
    const sp_attr *a = sp_op_attr(m, d, "iota_dimension");
    return a != NULL && a->kind == SP_ATTR_INT && a->u.i.v == 0;
}

/* Creates op `name` before index at of block with the given operands and
 * one result of type ty; *r is the result. */
static cm_status emit(sp_module *m, uint32_t block, uint32_t at, const char *name,
                      const uint32_t *operands, uint32_t n, uint32_t ty, const sp_op *like,
                      uint32_t *op_out, uint32_t *r)
{
    uint32_t op;
    if (sp_module_new_op(m, SP_NONE, name, operands, n, &ty, 1, &op) != CM_OK ||
        sp_block_insert_op(m, block, at, op) != CM_OK) {
        return CM_ENOMEM;
    }
    m->ops[op].loc = like->loc;
    m->ops[op].where = like->where;
    *op_out = op;
    *r = m->ops[op].first_result;
    return CM_OK;
}

/* indices (type t) with the dimension-ivd shape changed to size. */
static cm_status reshaped_type(sp_module *m, const sp_type *t, int64_t ivd, int64_t size,
                               uint32_t *ty)
{
    int64_t dims[SP_MAX_RANK];
    memcpy(dims, t->dims, sizeof(int64_t) * t->rank);
    dims[ivd] = size;
    return sp_module_tensor_type(m, t->elem, dims, t->rank, ty, NULL);
}

/* Shardy's sliceAndConcatenateIndices: indices without component k of the
 * index vector along ivd, built before index at of block (the inputs of a
 * concatenate of one-wide parts but the k-th, else slices around k). */
static cm_status indices_without(egsb *c, uint32_t block, uint32_t at, const sp_op *like,
                                 uint32_t indices, int64_t ivd, uint32_t k, uint32_t *out)
{
    sp_module *m = c->m;
    const sp_type t = *sp_value_type(m, indices);
    int64_t total = t.dims[ivd];
    uint32_t ty;
    if (reshaped_type(m, &t, ivd, total - 1, &ty) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t parts[SP_MAX_RANK + 2], n = 0;
    uint32_t cat = concat_along(m, indices, ivd);
    bool from_concat = cat != SP_NONE && (int64_t)m->ops[cat].n_operands == total;
    if (from_concat) {
        if (total - 1 > SP_MAX_RANK) {
            from_concat = false; /* more parts than we keep: slice instead */
        } else {
            for (uint32_t i = 0; i < m->ops[cat].n_operands; i++) {
                if (i != k) {
                    parts[n++] = m->ops[cat].operands[i];
                }
            }
        }
    }
    uint32_t op, r;
    if (!from_concat) {
        for (int side = 0; side < 2; side++) {
            int64_t lo = side == 0 ? 0 : (int64_t)k + 1, hi = side == 0 ? (int64_t)k : total;
            if (lo >= hi) {
                continue;
            }
            int64_t start[SP_MAX_RANK], limit[SP_MAX_RANK], strides[SP_MAX_RANK];
            for (uint32_t d = 0; d < t.rank; d++) {
                start[d] = 0;
                limit[d] = t.dims[d];
                strides[d] = 1;
            }
            start[ivd] = lo;
            limit[ivd] = hi;
            uint32_t sty;
            sp_attr *sa = darr_attr(m, start, t.rank), *la = darr_attr(m, limit, t.rank);
            sp_attr *st_a = darr_attr(m, strides, t.rank);
            if (reshaped_type(m, &t, ivd, hi - lo, &sty) != CM_OK || sa == NULL || la == NULL ||
                st_a == NULL ||
                emit(m, block, at, "stablehlo.slice", &indices, 1, sty, like, &op, &r) != CM_OK ||
                sp_op_set_attr(m, op, "start_indices", sa) != CM_OK ||
                sp_op_set_attr(m, op, "limit_indices", la) != CM_OK ||
                sp_op_set_attr(m, op, "strides", st_a) != CM_OK) {
                return CM_ENOMEM;
            }
            at++;
            parts[n++] = r;
        }
    }
    if (n == 1) {
        *out = parts[0];
        return CM_OK;
    }
    sp_attr *dim = int_attr(m, ivd, "i64");
    if (dim == NULL ||
        emit(m, block, at, "stablehlo.concatenate", parts, n, ty, like, &op, &r) != CM_OK ||
        sp_op_set_attr(m, op, "dimension", dim) != CM_OK) {
        return CM_ENOMEM;
    }
    *out = r;
    return CM_OK;
}

/* One gather (operands: operand, start_indices) or scatter (inputs,
 * scatter_indices, updates). Ops that do not match are left alone. */
static cm_status rewrite(egsb *c, uint32_t opid)
{
    sp_module *m = c->m;
    const sp_op *op = &m->ops[opid];
    bool scatter = op->kind == SP_OP_SCATTER;
    static const char *const gnames[6] = {"offset_dims",           "collapsed_slice_dims",
                                          "operand_batching_dims", "start_indices_batching_dims",
                                          "start_index_map",       "index_vector_dim"};
    static const char *const snames[6] = {
        "update_window_dims",           "inserted_window_dims",
        "input_batching_dims",          "scatter_indices_batching_dims",
        "scatter_dims_to_operand_dims", "index_vector_dim"};
    const char *const *names = scatter ? snames : gnames;
    const char *dn_name = scatter ? "scatter_dimension_numbers" : "dimension_numbers";
    uint32_t n_ops = op->n_operands;
    if (scatter ? n_ops < 3 || n_ops % 2u != 1u : n_ops != 2) {
        return CM_OK;
    }
    uint32_t idx_pos = scatter ? (n_ops - 1u) / 2u : 1u;
    const sp_attr *dn = sp_op_attr(m, opid, dn_name);
    if (dn == NULL || dn->kind != SP_ATTR_PARAMS) {
        return CM_OK;
    }
    int64_t lists[5][SP_MAX_RANK];
    uint32_t n[5];
    for (int i = 0; i < 5; i++) {
        if (!list_of(dn, names[i], lists[i], &n[i])) {
            return CM_OK;
        }
    }
    const sp_attr *ivd_a = param_of(dn, names[5]);
    int64_t ivd = 0;
    if (ivd_a != NULL) {
        if (ivd_a->kind != SP_ATTR_INT) {
            return CM_OK;
        }
        ivd = ivd_a->u.i.v;
    }
    if (n[2] != 0) {
        return CM_OK; /* explicit batching dimensions already */
    }
    uint32_t indices = op->operands[idx_pos];
    const sp_type *ot = sp_value_type(m, op->operands[0]), *it = sp_value_type(m, indices);
    if (ot->kind != SP_TYPE_TENSOR || it->kind != SP_TYPE_TENSOR || ot->rank == 0 ||
        it->rank == 0) {
        return CM_OK;
    }
    /* the index vector must keep a component; ivd 0 would be both the
     * batch dimension and the index vector (Shardy would build an invalid
     * op there) */
    if (ivd <= 0 || ivd >= (int64_t)it->rank || it->dims[ivd] <= 1 || it->dims[0] != ot->dims[0]) {
        return CM_OK;
    }
    uint32_t k;
    int64_t *map = lists[4], *collapsed = lists[1];
    uint32_t n_map = n[4], n_coll = n[1];
    if (!list_remove(map, &n_map, 0, &k) || !iota_origin(m, indices, ivd, k) ||
        !list_remove(collapsed, &n_coll, 0, NULL)) {
        return CM_OK;
    }
    /* the new dimension numbers, in StableHLO's order */
    sp_attr *nd = sp_attr_new(m, SP_ATTR_PARAMS);
    const int64_t zero = 0;
    sp_named_attr *items = cm_arena_alloc(&m->arena, sizeof(sp_named_attr) * 6);
    if (nd == NULL || items == NULL) {
        return CM_ENOMEM;
    }
    items[0] = (sp_named_attr){names[0], list_attr(m, lists[0], n[0])};
    items[1] = (sp_named_attr){names[1], list_attr(m, collapsed, n_coll)};
    items[2] = (sp_named_attr){names[2], list_attr(m, &zero, 1)};
    items[3] = (sp_named_attr){names[3], list_attr(m, &zero, 1)};
    items[4] = (sp_named_attr){names[4], list_attr(m, map, n_map)};
    items[5] = (sp_named_attr){names[5], int_attr(m, ivd, NULL)};
    for (int i = 0; i < 6; i++) {
        if (items[i].value == NULL) {
            return CM_ENOMEM;
        }
    }
    nd->u.params.name = dn->u.params.name;
    nd->u.params.items = items;
    nd->u.params.n = 6;
    uint32_t block = op->parent_block, at = sp_op_index_in_block(m, opid);
    if (block == SP_NONE || at == SP_NONE) {
        return CM_OK;
    }
    uint32_t ni;
    sp_op like = *op;
    cm_status st = indices_without(c, block, at, &like, indices, ivd, k, &ni);
    if (st != CM_OK || (st = sp_op_set_attr(m, opid, dn_name, nd)) != CM_OK) {
        return st;
    }
    m->ops[opid].operands[idx_pos] = ni;
    c->changed = true;
    return CM_OK;
}

static cm_status visit(sp_module *m, uint32_t op, void *ctx)
{
    if (m->ops[op].kind == SP_OP_GATHER || m->ops[op].kind == SP_OP_SCATTER) {
        return rewrite(ctx, op);
    }
    return CM_OK;
}

/* Ops MLIR's greedy driver would erase once unused: side-effect free and
 * without regions (what the index computations are made of). */
static bool is_pure(const sp_op *op)
{
    if (op->n_regions > 0 || op->n_results == 0) {
        return false;
    }
    switch ((sp_op_kind)op->kind) {
    case SP_OP_IOTA:
    case SP_OP_CONSTANT:
    case SP_OP_SDY_CONSTANT:
    case SP_OP_CONCATENATE:
    case SP_OP_SLICE:
    case SP_OP_RESHAPE:
    case SP_OP_BROADCAST_IN_DIM:
    case SP_OP_TRANSPOSE:
        return true;
    default:
        return sp_op_is_elementwise((sp_op_kind)op->kind);
    }
}

static cm_status count_use(sp_module *m, uint32_t op, void *ctx)
{
    egsb *c = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        uint32_t v = m->ops[op].operands[i];
        if (v < c->n_uses) {
            c->uses[v]++;
        }
    }
    return CM_OK;
}

static bool unused(const egsb *c, const sp_op *op)
{
    for (uint32_t r = 0; r < op->n_results; r++) {
        if (op->first_result + r >= c->n_uses || c->uses[op->first_result + r] != 0) {
            return false;
        }
    }
    return true;
}

/* Erases the unused pure ops of block and the blocks nested in it, last
 * first, until none is left (an erased op's operands may become unused). */
static bool dce_block(egsb *c, uint32_t block)
{
    sp_module *m = c->m;
    bool any = false;
    sp_block *b = &m->blocks[block];
    for (uint32_t i = b->n_ops; i-- > 0;) {
        uint32_t opid = b->ops[i];
        const sp_op *op = &m->ops[opid];
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t k = 0; k < op->regions[r].n_blocks; k++) {
                any |= dce_block(c, op->regions[r].blocks[k]);
            }
        }
        b = &m->blocks[block];
        if (!is_pure(op) || !unused(c, op)) {
            continue;
        }
        for (uint32_t k = 0; k < op->n_operands; k++) {
            if (op->operands[k] < c->n_uses && c->uses[op->operands[k]] > 0) {
                c->uses[op->operands[k]]--;
            }
        }
        sp_block_remove_op(m, block, i);
        any = true;
    }
    return any;
}

typedef struct consts {
    uint32_t *list; /* constants in post-order (while gathering), then the kept ones */
    uint32_t n, cap;
} consts;

/* Post-order: the ops of nested regions before their op. */
static cm_status gather_consts(sp_module *m, uint32_t block, consts *c)
{
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        uint32_t op = m->blocks[block].ops[i];
        for (uint32_t r = 0; r < m->ops[op].n_regions; r++) {
            for (uint32_t b = 0; b < m->ops[op].regions[r].n_blocks; b++) {
                cm_status st = gather_consts(m, m->ops[op].regions[r].blocks[b], c);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        if (m->ops[op].kind == SP_OP_CONSTANT && m->ops[op].n_results == 1 &&
            m->ops[op].n_operands == 0 && sp_op_attr(m, op, "value") != NULL) {
            if (CM_GROW_U32(c->list, c->cap, c->n + 1, NULL) != CM_OK) {
                return CM_ENOMEM;
            }
            c->list[c->n++] = op;
        }
    }
    return CM_OK;
}

static cm_status replace_uses(sp_module *m, uint32_t op, void *ctx)
{
    const sp_value_map *map = ctx;
    for (uint32_t i = 0; i < m->ops[op].n_operands; i++) {
        uint32_t to = sp_value_map_get(map, m->ops[op].operands[i]);
        if (to != SP_NONE) {
            m->ops[op].operands[i] = to;
        }
    }
    return CM_OK;
}

/* The OperationFolder's constant uniquing over function body block entry:
 * each constant in post-order either equals a kept one (same value and
 * type: its uses move there and it is erased) or is kept, moved to the
 * front of entry unless it is there already or follows a kept one. A
 * moved constant's location becomes unknown. */
static cm_status unique_constants(sp_module *m, uint32_t entry)
{
    consts c = {NULL, 0, 0};
    cm_status st = gather_consts(m, entry, &c);
    sp_value_map map;
    memset(&map, 0, sizeof map);
    uint8_t *kept = st == CM_OK ? cm_calloc(m->n_ops + 1u, 1) : NULL;
    uint32_t n_kept = 0;
    bool any = false;
    if (st == CM_OK && kept == NULL) {
        st = CM_ENOMEM;
    }
    for (uint32_t i = 0; i < c.n && st == CM_OK; i++) {
        uint32_t op = c.list[i];
        const sp_attr *v = sp_op_attr(m, op, "value");
        uint32_t ty = m->values[m->ops[op].first_result].type, same = SP_NONE;
        for (uint32_t k = 0; k < n_kept && same == SP_NONE; k++) {
            uint32_t o = c.list[k];
            if (m->values[m->ops[o].first_result].type == ty &&
                sp_attr_equal(sp_op_attr(m, o, "value"), v)) {
                same = o;
            }
        }
        uint32_t block = m->ops[op].parent_block, at = sp_op_index_in_block(m, op);
        if (block == SP_NONE || at == SP_NONE) {
            continue;
        }
        if (same != SP_NONE) {
            st = sp_value_map_set(&map, m->ops[op].first_result, m->ops[same].first_result);
            sp_block_remove_op(m, block, at);
            any = true;
            continue;
        }
        bool stays = block == entry && (at == 0 || kept[m->blocks[entry].ops[at - 1u]]);
        if (!stays) {
            sp_block_remove_op(m, block, at);
            if (sp_block_insert_op(m, entry, 0, op) != CM_OK) {
                st = CM_ENOMEM;
                break;
            }
            m->ops[op].loc = NULL;
            m->ops[op].where = NULL;
        }
        kept[op] = 1;
        c.list[n_kept++] = op; /* i >= n_kept: the list is rewritten behind the reader */
    }
    if (st == CM_OK && any) {
        st = sp_pass_walk(m, entry, replace_uses, &map);
    }
    sp_value_map_free(&map);
    cm_free(kept);
    cm_free(c.list);
    return st;
}

cm_status sp_pass_explicit_gather_scatter_batching(sp_module *m, cm_error *err)
{
    egsb c;
    memset(&c, 0, sizeof c);
    c.m = m;
    const sp_block *body = &m->blocks[m->body];
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < body->n_ops && st == CM_OK; i++) {
        uint32_t f = m->blocks[m->body].ops[i];
        const sp_op *fo = &m->ops[f];
        if (fo->kind != SP_OP_FUNC_FUNC || fo->n_regions != 1 || fo->regions[0].n_blocks == 0) {
            continue;
        }
        c.changed = false;
        st = unique_constants(m, m->ops[f].regions[0].blocks[0]);
        for (uint32_t b = 0; b < m->ops[f].regions[0].n_blocks && st == CM_OK; b++) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[b], visit, &c);
        }
        if (st != CM_OK) {
            break;
        }
        /* the greedy driver's erasure of unused ops */
        c.n_uses = m->n_values;
        c.uses = cm_calloc(c.n_uses + 1u, sizeof(uint32_t));
        if (c.uses == NULL) {
            st = CM_ENOMEM;
            break;
        }
        for (uint32_t b = 0; b < m->ops[f].regions[0].n_blocks && st == CM_OK; b++) {
            st = sp_pass_walk(m, m->ops[f].regions[0].blocks[b], count_use, &c);
        }
        for (uint32_t b = 0; b < m->ops[f].regions[0].n_blocks && st == CM_OK; b++) {
            while (dce_block(&c, m->ops[f].regions[0].blocks[b])) {
            }
        }
        cm_free(c.uses);
        c.uses = NULL;
    }
    return st == CM_OK ? CM_OK : cm_error_oom(err);
}
