/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-constant-or-scalar-splitter (Shardy's
 * import/constant_or_scalar_splitter.cc). Every stablehlo.constant becomes
 * an sdy.constant (so that later folding cannot merge them). Then each
 * region (a function body, each named computation's body on its own) is
 * walked in pre-order: constant expressions (constants, iotas, and
 * broadcast / reshape / slice / element-wise ops - Shardy's element-wise
 * ops include sdy.reshard, sdy.propagation_barrier and a shape-keeping
 * bitcast_convert - or constant named computations, whose operands are all
 * constant expressions) and non-constant scalar broadcasts are
 * collected; every other op gets, for each such
 * operand, its own copy of the whole sub-computation (scalars are shared,
 * not copied), placed before the originals, together with copies of the
 * sharding groups the copied values belong to. Originals left without users
 * (other than sharding groups) are erased with their groups.
 *
 * Functions are visited callees first (Shardy's iterateFuncs, over the
 * functions there were at the start), each one's named computations (inner
 * ones first) before its body. A named computation is constant when no op
 * in it (outside terminators) is non-constant-preserving; a function
 * likewise (ops of its named computations included), known by its
 * sdy.original_func_name or name, and a call of a constant function is
 * constant-preserving. A copied call calls a copy of its callee and of
 * everything that calls, appended to the module as Shardy's
 * cloneFuncRecursively makes them (`foo_0`, ...).
 *
 * The new sdy.constant ops print their float literals as MLIR prints any
 * float (`0.0` -> `0.000000e+00`, equal elements as a splat): the module
 * printer keeps float bodies verbatim. */
#include "sp_import.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_pass.h"

enum { CLS_NONE = 0, CLS_CONST = 1, CLS_SCALAR = 2 };

typedef struct op_info {
    uint32_t before_head, before_tail; /* clones to place before this op */
    uint32_t next;                     /* next clone in its original's list */
    uint32_t walk;                     /* the walk that classified the op */
    uint32_t uses;                     /* non-group uses, counted at erase */
    uint32_t first_clone;              /* the first copy made of this op */
    uint32_t orig;                     /* for a first copy whose original goes: it */
    uint8_t cls;
    uint8_t erased;
} op_info;

typedef struct splitter {
    sp_module *m;
    op_info *info;
    uint32_t cap_info;
    uint32_t *sg_head; /* per original value: first sharding-group user */
    uint32_t *sg_next; /* per op: next sharding-group user of its operand */
    uint32_t n_values0, n_ops0;
    uint32_t walk;
    uint32_t *list; /* the current walk's classified ops, in walk order */
    uint32_t n_list, cap_list;
    const char **nonconst_nc; /* names of non-constant named computations */
    uint32_t n_nonconst, cap_nonconst;
    const char **nonconst_fn; /* original names of non-constant functions */
    uint32_t n_nonconst_fn, cap_nonconst_fn;
    uint32_t marked_fn; /* the function last listed as non-constant (SP_NONE: none) */
    uint32_t counter;   /* the symbol uniquing counter of function copies */
    cm_error *err;      /* for the errors of function copies */
    uint32_t *dirty;    /* blocks that got clones in the current walk */
    uint32_t n_dirty, cap_dirty;
} splitter;

static cm_status info_reserve(splitter *s, uint32_t n)
{
    if (n <= s->cap_info) {
        return CM_OK;
    }
    uint32_t cap = s->cap_info == 0 ? 64u : s->cap_info;
    while (cap < n) {
        if (cap > UINT32_MAX / 2u) {
            return CM_ENOMEM;
        }
        cap *= 2u;
    }
    op_info *t = cm_realloc(s->info, sizeof(op_info) * cap);
    if (t == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = s->cap_info; i < cap; i++) {
        t[i].before_head = t[i].before_tail = t[i].next = SP_NONE;
        t[i].walk = 0;
        t[i].uses = 0;
        t[i].first_clone = SP_NONE;
        t[i].orig = SP_NONE;
        t[i].cls = CLS_NONE;
        t[i].erased = 0;
    }
    s->info = t;
    s->cap_info = cap;
    return CM_OK;
}

static bool value_is_scalar(const sp_module *m, uint32_t v)
{
    const sp_type *t = sp_value_type(m, v);
    return t->kind != SP_TYPE_TENSOR || t->rank == 0;
}

static const char *nc_name(const sp_module *m, uint32_t op)
{
    const sp_attr *a = sp_op_attr(m, op, "name");
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : "";
}

static bool name_listed(const char *const *list, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(list[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static bool nc_nonconst(const splitter *s, const char *name)
{
    return name_listed(s->nonconst_nc, s->n_nonconst, name);
}

/* Adds name to a list of names unless it is there. */
static cm_status name_add(const char ***list, uint32_t *n, uint32_t *cap, const char *name)
{
    if (name_listed(*list, *n, name)) {
        return CM_OK;
    }
    if (*n == *cap) {
        uint32_t c = *cap == 0 ? 8u : *cap * 2u;
        const char **t = cm_realloc(*list, sizeof(char *) * c);
        if (t == NULL) {
            return CM_ENOMEM;
        }
        *list = t;
        *cap = c;
    }
    (*list)[(*n)++] = name;
    return CM_OK;
}

/* Shardy's getOriginalFuncName: f's sdy.original_func_name, else its name. */
static const char *func_original_name(const sp_module *m, uint32_t f)
{
    const sp_attr *a = sp_op_attr(m, f, "sdy.original_func_name");
    if (a == NULL || a->kind != SP_ATTR_STRING) {
        a = sp_op_attr(m, f, "sym_name");
    }
    return a != NULL && a->kind == SP_ATTR_STRING ? a->u.str.s : "";
}

/* The function a func.call calls, or SP_NONE. */
static uint32_t call_callee(const sp_module *m, uint32_t call)
{
    const sp_attr *a = sp_op_attr(m, call, "callee");
    return a != NULL && a->kind == SP_ATTR_SYMBOL && a->u.sym != NULL ? sp_module_func(m, a->u.sym)
                                                                      : SP_NONE;
}

static bool is_terminator(uint32_t kind)
{
    return kind == SP_OP_FUNC_RETURN || kind == SP_OP_RETURN || kind == SP_OP_SDY_RETURN;
}

/* Shardy's isConstantPreserving. */
static bool const_preserving(const splitter *s, uint32_t opid)
{
    const sp_op *op = &s->m->ops[opid];
    if (op->kind == SP_OP_FUNC_CALL) {
        uint32_t f = call_callee(s->m, opid);
        return f != SP_NONE &&
               !name_listed(s->nonconst_fn, s->n_nonconst_fn, func_original_name(s->m, f));
    }
    if (op->kind == SP_OP_SDY_NAMED_COMPUTATION) {
        return !nc_nonconst(s, nc_name(s->m, opid));
    }
    if (op->n_regions > 0) {
        return false;
    }
    if (op->kind == SP_OP_BITCAST_CONVERT) {
        /* element-wise for Shardy when the shape stays (equal bit widths) */
        if (op->n_operands != 1 || op->n_results != 1) {
            return false;
        }
        const sp_type *a = sp_value_type(s->m, op->operands[0]);
        const sp_type *b = sp_value_type(s->m, op->first_result);
        return a->kind == SP_TYPE_TENSOR && b->kind == SP_TYPE_TENSOR && a->rank == b->rank &&
               (a->rank == 0 || memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank) == 0);
    }
    /* Shardy's isElementwise also counts its pure reshard and propagation
     * barrier (a sharding constraint is not pure) */
    return op->kind == SP_OP_BROADCAST_IN_DIM || op->kind == SP_OP_RESHAPE ||
           op->kind == SP_OP_SLICE || op->kind == SP_OP_SDY_RESHARD ||
           op->kind == SP_OP_SDY_PROPAGATION_BARRIER ||
           sp_op_is_elementwise((sp_op_kind)op->kind);
}

static bool in_walk(const splitter *s, uint32_t opid, uint8_t cls)
{
    return opid != SP_NONE && opid < s->cap_info && s->info[opid].walk == s->walk &&
           (s->info[opid].cls & cls) != 0;
}

static bool const_expr(const splitter *s, uint32_t opid)
{
    const sp_op *op = &s->m->ops[opid];
    if (op->kind == SP_OP_SDY_CONSTANT || op->kind == SP_OP_CONSTANT || op->kind == SP_OP_IOTA) {
        return true;
    }
    if (!const_preserving(s, opid)) {
        return false;
    }
    for (uint32_t i = 0; i < op->n_operands; i++) {
        if (!in_walk(s, s->m->values[op->operands[i]].def, CLS_CONST)) {
            return false;
        }
    }
    return true;
}

static bool scalar_expansion(const sp_module *m, const sp_op *op)
{
    return op->kind == SP_OP_BROADCAST_IN_DIM && op->n_operands == 1 &&
           value_is_scalar(m, op->operands[0]);
}

/* Queues clone to be placed right before orig (after earlier clones). */
static cm_status place_before(splitter *s, uint32_t orig, uint32_t clone)
{
    if (info_reserve(s, s->m->n_ops) != CM_OK) {
        return CM_ENOMEM;
    }
    op_info *o = &s->info[orig];
    s->info[clone].next = SP_NONE;
    if (o->before_head == SP_NONE) {
        o->before_head = clone;
        uint32_t b = s->m->ops[orig].parent_block;
        if (CM_GROW_U32(s->dirty, s->cap_dirty, s->n_dirty + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        s->dirty[s->n_dirty++] = b;
    } else {
        s->info[o->before_tail].next = clone;
    }
    o->before_tail = clone;
    return CM_OK;
}

/* Shardy's cloneSubComputation: clones the op defining result v after its
 * operands' definitions, unless v is a scalar or already cloned. */
static cm_status clone_sub(splitter *s, uint32_t v, sp_value_map *map)
{
    sp_module *m = s->m;
    if (value_is_scalar(m, v) || sp_value_map_get(map, v) != SP_NONE) {
        return CM_OK;
    }
    uint32_t d = m->values[v].def;
    for (uint32_t i = 0; i < m->ops[d].n_operands; i++) {
        uint32_t w = m->ops[d].operands[i];
        if (m->values[w].def != SP_NONE) {
            cm_status st = clone_sub(s, w, map);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    uint32_t c;
    cm_status st = sp_op_clone_deep(m, d, map, &c);
    if (st != CM_OK || (st = place_before(s, d, c)) != CM_OK) {
        return st;
    }
    if (m->ops[c].kind == SP_OP_FUNC_CALL) {
        /* the copy calls a copy of the callee */
        uint32_t f = call_callee(m, c);
        const char *name = NULL;
        sp_attr *a = sp_attr_new(m, SP_ATTR_SYMBOL);
        if (f == SP_NONE || a == NULL) {
            return CM_ENOMEM; /* a call of an unknown function is never copied */
        }
        if ((st = sp_import_func_clone(m, f, &s->counter, &name, s->err)) != CM_OK) {
            return st;
        }
        a->u.sym = name;
        if ((st = sp_op_set_attr(m, c, "callee", a)) != CM_OK) {
            return st;
        }
    }
    if (s->info[d].first_clone == SP_NONE) {
        s->info[d].first_clone = c;
    }
    /* the sharding groups of v follow its copy */
    for (uint32_t g = v < s->n_values0 ? s->sg_head[v] : SP_NONE; g != SP_NONE; g = s->sg_next[g]) {
        uint32_t gc;
        if ((st = sp_op_clone_deep(m, g, map, &gc)) != CM_OK ||
            (st = place_before(s, d, gc)) != CM_OK) {
            return st;
        }
    }
    return CM_OK;
}

static cm_status process_op(splitter *s, uint32_t opid, uint32_t func)
{
    sp_module *m = s->m;
    const sp_op *op = &m->ops[opid];
    if (op->kind == SP_OP_FUNC_FUNC || op->kind == SP_OP_SDY_SHARDING_GROUP) {
        return CM_OK;
    }
    if (info_reserve(s, m->n_ops) != CM_OK) {
        return CM_ENOMEM;
    }
    uint8_t cls = CLS_NONE;
    if (const_expr(s, opid)) {
        cls = CLS_CONST;
    } else {
        if (!const_preserving(s, opid) && !is_terminator(op->kind)) {
            /* the nearest enclosing named computation is not constant */
            uint32_t b = op->parent_block;
            while (b != SP_NONE && m->blocks[b].parent_op != SP_NONE) {
                uint32_t p = m->blocks[b].parent_op;
                if (m->ops[p].kind == SP_OP_SDY_NAMED_COMPUTATION) {
                    if (name_add(&s->nonconst_nc, &s->n_nonconst, &s->cap_nonconst,
                                 nc_name(m, p)) != CM_OK) {
                        return CM_ENOMEM;
                    }
                    break;
                }
                b = m->ops[p].parent_block;
            }
            /* and so is the function (listed once: a module may have many) */
            if (s->marked_fn != func) {
                if (name_add(&s->nonconst_fn, &s->n_nonconst_fn, &s->cap_nonconst_fn,
                             func_original_name(m, func)) != CM_OK) {
                    return CM_ENOMEM;
                }
                s->marked_fn = func;
            }
        }
        if (scalar_expansion(m, op)) {
            cls = CLS_SCALAR;
        }
    }
    if (cls != CLS_NONE) {
        s->info[opid].cls = cls;
        s->info[opid].walk = s->walk;
        if (CM_GROW_U32(s->list, s->cap_list, s->n_list + 1, NULL) != CM_OK) {
            return CM_ENOMEM;
        }
        s->list[s->n_list++] = opid;
        return CM_OK;
    }
    /* a non-constant user: each constant or scalar-broadcast operand gets its
     * own copy of its sub-computation */
    for (uint32_t k = 0; k < m->ops[opid].n_operands; k++) {
        uint32_t v = m->ops[opid].operands[k];
        if (!in_walk(s, m->values[v].def, CLS_CONST | CLS_SCALAR) || value_is_scalar(m, v)) {
            continue;
        }
        sp_value_map map;
        memset(&map, 0, sizeof map);
        cm_status st = clone_sub(s, v, &map);
        uint32_t nv = sp_value_map_get(&map, v);
        sp_value_map_free(&map);
        if (st != CM_OK) {
            return st;
        }
        m->ops[opid].operands[k] = nv;
    }
    return CM_OK;
}

/* Pre-order walk of block's ops and their regions, not entering named
 * computations. Ops are read by index from a snapshot of the block: clones
 * are placed only after the walk. */
static cm_status walk_block(splitter *s, uint32_t block, uint32_t func)
{
    for (uint32_t i = 0; i < s->m->blocks[block].n_ops; i++) {
        uint32_t opid = s->m->blocks[block].ops[i];
        cm_status st = process_op(s, opid, func);
        if (st != CM_OK) {
            return st;
        }
        const sp_op *op = &s->m->ops[opid];
        if (op->kind == SP_OP_SDY_NAMED_COMPUTATION) {
            continue;
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t b = 0; b < s->m->ops[opid].regions[r].n_blocks; b++) {
                if ((st = walk_block(s, s->m->ops[opid].regions[r].blocks[b], func)) != CM_OK) {
                    return st;
                }
            }
        }
    }
    return CM_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Places the queued clones into their blocks. A block is queued once per op
 * that got clones before it, so the list is made unique first: rebuilding a
 * block once per queued entry would be quadratic in the block's size. */
static cm_status place_clones(splitter *s)
{
    sp_module *m = s->m;
    if (s->n_dirty > 1) {
        qsort(s->dirty, s->n_dirty, sizeof *s->dirty, cmp_u32);
        uint32_t u = 1;
        for (uint32_t i = 1; i < s->n_dirty; i++) {
            if (s->dirty[i] != s->dirty[u - 1u]) {
                s->dirty[u++] = s->dirty[i];
            }
        }
        s->n_dirty = u;
    }
    for (uint32_t di = 0; di < s->n_dirty; di++) {
        sp_block *bl = &m->blocks[s->dirty[di]];
        uint32_t n = bl->n_ops;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            for (uint32_t c = s->info[bl->ops[i]].before_head; c != SP_NONE; c = s->info[c].next) {
                n++;
            }
        }
        if (n == bl->n_ops) {
            continue; /* no clones after all */
        }
        uint32_t *ops = cm_alloc(sizeof(uint32_t) * (n + 1u));
        if (ops == NULL) {
            return CM_ENOMEM;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < bl->n_ops; i++) {
            op_info *o = &s->info[bl->ops[i]];
            for (uint32_t c = o->before_head; c != SP_NONE; c = s->info[c].next) {
                ops[k++] = c;
                m->ops[c].parent_block = s->dirty[di];
            }
            o->before_head = o->before_tail = SP_NONE;
            ops[k++] = bl->ops[i];
        }
        cm_free(bl->ops);
        bl->ops = ops;
        bl->n_ops = n;
        bl->cap_ops = n + 1u;
    }
    s->n_dirty = 0;
    return CM_OK;
}

/* Counts the non-group uses of the current walk's ops inside block. */
static void count_uses(splitter *s, uint32_t block)
{
    sp_module *m = s->m;
    for (uint32_t i = 0; i < m->blocks[block].n_ops; i++) {
        const sp_op *op = &m->ops[m->blocks[block].ops[i]];
        if (op->kind != SP_OP_SDY_SHARDING_GROUP) {
            for (uint32_t k = 0; k < op->n_operands; k++) {
                uint32_t d = m->values[op->operands[k]].def;
                if (in_walk(s, d, CLS_CONST | CLS_SCALAR)) {
                    s->info[d].uses++;
                }
            }
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t b = 0; b < op->regions[r].n_blocks; b++) {
                count_uses(s, op->regions[r].blocks[b]);
            }
        }
    }
}

/* Drops the erased ops, and sharding groups of erased values, from block
 * and the blocks under it. */
static void drop_erased(splitter *s, uint32_t block)
{
    sp_module *m = s->m;
    sp_block *bl = &m->blocks[block];
    uint32_t k = 0;
    for (uint32_t i = 0; i < bl->n_ops; i++) {
        uint32_t opid = bl->ops[i];
        const sp_op *op = &m->ops[opid];
        bool drop = opid < s->cap_info && s->info[opid].erased;
        if (op->kind == SP_OP_SDY_SHARDING_GROUP && op->n_operands == 1) {
            uint32_t d = m->values[op->operands[0]].def;
            drop = d != SP_NONE && d < s->cap_info && s->info[d].erased;
        }
        if (drop) {
            m->ops[opid].parent_block = SP_NONE;
            continue;
        }
        bl->ops[k++] = opid;
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t b = 0; b < op->regions[r].n_blocks; b++) {
                drop_erased(s, op->regions[r].blocks[b]);
            }
        }
    }
    bl->n_ops = k;
}

/* Under block: puts each original back in its first copy's place (the
 * copy leaves) and replaces operands by their images in map. */
static void restore_originals(splitter *s, uint32_t block, const sp_value_map *map)
{
    sp_module *m = s->m;
    sp_block *bl = &m->blocks[block];
    for (uint32_t i = 0; i < bl->n_ops; i++) {
        uint32_t c = bl->ops[i];
        if (c < s->cap_info && s->info[c].orig != SP_NONE) {
            uint32_t o = s->info[c].orig;
            bl->ops[i] = o;
            m->ops[o].parent_block = block;
            m->ops[o].operands = m->ops[c].operands;
            m->ops[o].attrs = m->ops[c].attrs; /* a copied call's new callee */
            m->ops[o].n_attrs = m->ops[c].n_attrs;
            m->ops[c].parent_block = SP_NONE;
            m->ops[c].operands = NULL;
            m->ops[c].n_operands = 0;
            s->info[c].orig = SP_NONE;
        }
        sp_op *op = &m->ops[bl->ops[i]];
        for (uint32_t k = 0; k < op->n_operands; k++) {
            uint32_t t = sp_value_map_get(map, op->operands[k]);
            if (t != SP_NONE) {
                op->operands[k] = t;
            }
        }
        for (uint32_t r = 0; r < op->n_regions; r++) {
            for (uint32_t b = 0; b < op->regions[r].n_blocks; b++) {
                restore_originals(s, op->regions[r].blocks[b], map);
            }
        }
    }
}

/* An erased original takes the place of its first copy, which goes: op ids
 * and value ids of the module's first ops survive the split (what-if and
 * graph documents name them), and the printed text does not change. */
static cm_status transfer_ids(splitter *s, uint32_t block)
{
    sp_module *m = s->m;
    sp_value_map map;
    memset(&map, 0, sizeof map);
    bool any = false;
    for (uint32_t j = 0; j < s->n_list; j++) {
        uint32_t o = s->list[j];
        uint32_t c = s->info[o].first_clone;
        if (!s->info[o].erased || c == SP_NONE || m->ops[c].n_results != m->ops[o].n_results ||
            m->ops[c].n_operands != m->ops[o].n_operands) {
            continue;
        }
        uint32_t r0 = m->ops[o].first_result, r1 = m->ops[c].first_result;
        for (uint32_t k = 0; k < m->ops[o].n_results; k++) {
            if (sp_value_map_set(&map, r1 + k, r0 + k) != CM_OK) {
                sp_value_map_free(&map);
                return CM_ENOMEM;
            }
        }
        s->info[o].erased = 0;
        s->info[c].orig = o;
        any = true;
    }
    if (any) {
        restore_originals(s, block, &map);
    }
    sp_value_map_free(&map);
    return CM_OK;
}

/* Shardy's walkOnRegion: the walk, then the erasure of unused originals
 * (scalar broadcasts first, then constants in reverse walk order). */
static cm_status walk_region(splitter *s, uint32_t block, uint32_t func)
{
    s->walk++;
    s->n_list = 0;
    cm_status st = walk_block(s, block, func);
    if (st != CM_OK || (st = place_clones(s)) != CM_OK || s->n_list == 0) {
        return st;
    }
    sp_module *m = s->m;
    count_uses(s, block);
    bool any = false;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t j = 0; j < s->n_list; j++) {
            uint32_t opid = pass == 0 ? s->list[j] : s->list[s->n_list - 1u - j];
            op_info *o = &s->info[opid];
            if (o->cls != (pass == 0 ? CLS_SCALAR : CLS_CONST) || o->uses != 0) {
                continue;
            }
            o->erased = 1;
            any = true;
            const sp_op *op = &m->ops[opid];
            for (uint32_t k = 0; k < op->n_operands; k++) {
                uint32_t d = m->values[op->operands[k]].def;
                if (in_walk(s, d, CLS_CONST | CLS_SCALAR) && s->info[d].uses > 0) {
                    s->info[d].uses--;
                }
            }
        }
    }
    if (any) {
        drop_erased(s, block);
        return transfer_ids(s, block);
    }
    return CM_OK;
}

/* Post-order search for named computations under block. */
static cm_status walk_named(splitter *s, uint32_t block, uint32_t func)
{
    for (uint32_t i = 0; i < s->m->blocks[block].n_ops; i++) {
        uint32_t opid = s->m->blocks[block].ops[i];
        for (uint32_t r = 0; r < s->m->ops[opid].n_regions; r++) {
            for (uint32_t b = 0; b < s->m->ops[opid].regions[r].n_blocks; b++) {
                cm_status st = walk_named(s, s->m->ops[opid].regions[r].blocks[b], func);
                if (st != CM_OK) {
                    return st;
                }
            }
        }
        if (s->m->ops[opid].kind == SP_OP_SDY_NAMED_COMPUTATION && s->m->ops[opid].n_regions == 1 &&
            s->m->ops[opid].regions[0].n_blocks > 0) {
            cm_status st = walk_region(s, s->m->ops[opid].regions[0].blocks[0], func);
            if (st != CM_OK) {
                return st;
            }
        }
    }
    return CM_OK;
}

/* stablehlo.constant -> sdy.constant everywhere, attributes kept (the
 * printer writes float literals as MLIR does, sp_mlir_print_float). */
static cm_status convert_constants(sp_module *m)
{
    const char *name = NULL;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind != SP_OP_CONSTANT) {
            continue;
        }
        if (name == NULL) {
            name = sp_op_kind_name(SP_OP_SDY_CONSTANT);
        }
        m->ops[i].kind = SP_OP_SDY_CONSTANT;
        m->ops[i].name = name;
    }
    return CM_OK;
}

cm_status sp_pass_constant_splitter(sp_module *m, cm_error *err)
{
    splitter s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.err = err;
    s.marked_fn = SP_NONE;
    uint32_t *funcs = NULL, n_funcs = 0;
    cm_status st = convert_constants(m);
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    s.n_values0 = m->n_values;
    s.n_ops0 = m->n_ops;
    s.sg_head = cm_alloc(sizeof(uint32_t) * (m->n_values + 1u));
    s.sg_next = cm_alloc(sizeof(uint32_t) * (m->n_ops + 1u));
    if (s.sg_head == NULL || s.sg_next == NULL || info_reserve(&s, m->n_ops + 1u) != CM_OK) {
        st = CM_ENOMEM;
        goto out;
    }
    memset(s.sg_head, 0xff, sizeof(uint32_t) * (m->n_values + 1u));
    /* in reverse, so each list is in program order */
    for (uint32_t i = m->n_ops; i-- > 0;) {
        s.sg_next[i] = SP_NONE;
        if (m->ops[i].kind == SP_OP_SDY_SHARDING_GROUP && m->ops[i].n_operands == 1 &&
            m->ops[i].parent_block != SP_NONE) {
            uint32_t v = m->ops[i].operands[0];
            s.sg_next[i] = s.sg_head[v];
            s.sg_head[v] = i;
        }
    }
    /* callees first, over the functions there are now: copies made on the
     * way are copies of functions already split */
    if ((st = sp_import_funcs_order(m, false, &funcs, &n_funcs, err)) != CM_OK) {
        goto out;
    }
    for (uint32_t i = 0; i < n_funcs && st == CM_OK; i++) {
        uint32_t f = funcs[i];
        if (m->ops[f].kind != SP_OP_FUNC_FUNC || m->ops[f].n_regions != 1 ||
            m->ops[f].regions[0].n_blocks == 0) {
            continue;
        }
        uint32_t entry = m->ops[f].regions[0].blocks[0];
        st = walk_named(&s, entry, f);
        if (st == CM_OK) {
            st = walk_region(&s, entry, f);
        }
    }
out:
    cm_free(funcs);
    cm_free(s.info);
    cm_free(s.sg_head);
    cm_free(s.sg_next);
    cm_free(s.list);
    cm_free(s.nonconst_nc);
    cm_free(s.nonconst_fn);
    cm_free(s.dirty);
    return st == CM_OK ? CM_OK : st == CM_ENOMEM ? cm_error_oom(err) : st;
}
