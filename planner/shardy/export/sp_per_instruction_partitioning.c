/* SPDX-License-Identifier: Apache-2.0
 * planner: -sdy-per-instruction-partitioning (Shardy's
 * export/per_instruction_partitioning.cc; see sp_export.h). Each selected
 * op of a function's top-level block is partitioned on its own: it is
 * outlined into a function with its operand and result shardings (inputs
 * padded to divide), the partitioner passes turn that function into the
 * program one device runs, and its body becomes an sdy.manual_computation
 * over the op's axes in the op's place; results padded for divisibility are
 * sliced back. Shardy outlines into a temporary module; here the outlined
 * function is the only thing in the module (the meshes aside) while the
 * passes run, and the module's other ops are put back after. */
#include "sp_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_collectives.h"
#include "sp_ops.h"
#include "sp_reshard.h"

/* Shardy's FilterConfig. */
typedef struct filter {
    int64_t low, high; /* selectLow / selectHigh, -1 when absent */
    char names[16][64];
    uint32_t n_names;
    bool all;
} filter;

static const char *trim(const char *s, const char *e, const char **end)
{
    while (s < e && (*s == ' ' || *s == '\t')) {
        s++;
    }
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    *end = e;
    return s;
}

static bool parse_int(const char *s, const char *e, int64_t *out)
{
    s = trim(s, e, &e);
    if (s == e || e - s > 18) {
        return false;
    }
    char buf[24];
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (end == NULL || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

/* Shardy's parseFilter: comma-separated op name substrings, selectLow=N and
 * selectHigh=N, in any order, optionally quoted; empty selects all. */
static void parse_filter(const char *text, filter *f)
{
    memset(f, 0, sizeof *f);
    f->low = f->high = -1;
    const char *s = text != NULL ? text : "", *e = s + strlen(s);
    s = trim(s, e, &e);
    if (s == e) {
        f->all = true;
        return;
    }
    if (e - s >= 2 && ((*s == '\'' && e[-1] == '\'') || (*s == '"' && e[-1] == '"'))) {
        s = trim(s + 1, e - 1, &e);
    }
    while (s <= e) {
        const char *c = memchr(s, ',', (size_t)(e - s));
        const char *te = c != NULL ? c : e, *tend;
        const char *t = trim(s, te, &tend);
        size_t n = (size_t)(tend - t);
        if (n >= 10 && memcmp(t, "selectLow=", 10) == 0) {
            int64_t v;
            if (parse_int(t + 10, tend, &v)) {
                f->low = v;
            }
        } else if (n >= 11 && memcmp(t, "selectHigh=", 11) == 0) {
            int64_t v;
            if (parse_int(t + 11, tend, &v)) {
                f->high = v;
            }
        } else if (n > 0 && f->n_names < 16 && n < sizeof f->names[0]) {
            memcpy(f->names[f->n_names], t, n);
            f->names[f->n_names][n] = '\0';
            f->n_names++;
        }
        if (c == NULL) {
            break;
        }
        s = c + 1;
    }
}

static bool filter_matches(const filter *f, const char *op_name, int64_t seq)
{
    if (f->all) {
        return true;
    }
    if ((f->low >= 0 && seq < f->low) || (f->high >= 0 && seq > f->high)) {
        return false;
    }
    if (f->n_names == 0) {
        return true;
    }
    for (uint32_t i = 0; i < f->n_names; i++) {
        if (strstr(op_name, f->names[i]) != NULL) {
            return true;
        }
    }
    return false;
}

static bool is_sharded(const sp_sharding *s)
{
    if (s == NULL) {
        return false;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        if (s->dims[d].n_axes > 0) {
            return true;
        }
    }
    return s->n_unreduced > 0;
}

/* Is op a candidate: not a terminator, collective, edge, manual computation,
 * mesh, barrier, constraint or group, nor a Sharding custom call, and with a
 * sharded operand or result? */
static bool candidate(const sp_module *m, uint32_t op)
{
    const sp_op *o = &m->ops[op];
    switch ((sp_op_kind)o->kind) {
    case SP_OP_RETURN:
    case SP_OP_FUNC_RETURN:
    case SP_OP_SDY_RETURN:
    case SP_OP_SDY_ALL_GATHER:
    case SP_OP_SDY_ALL_REDUCE:
    case SP_OP_SDY_ALL_SLICE:
    case SP_OP_SDY_ALL_TO_ALL:
    case SP_OP_SDY_COLLECTIVE_PERMUTE:
    case SP_OP_SDY_REDUCE_SCATTER:
    case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
    case SP_OP_SDY_SHARDED_TO_UNREDUCED:
    case SP_OP_SDY_DATA_FLOW_EDGE:
    case SP_OP_SDY_MANUAL_COMPUTATION:
    case SP_OP_SDY_MESH:
    case SP_OP_SDY_PROPAGATION_BARRIER:
    case SP_OP_SDY_SHARDING_CONSTRAINT:
    case SP_OP_SDY_SHARDING_GROUP:
        return false;
    case SP_OP_CUSTOM_CALL: {
        const sp_attr *t = sp_op_attr(m, op, "call_target_name");
        if (t != NULL && t->kind == SP_ATTR_STRING &&
            (strcmp(t->u.str.s, "Sharding") == 0 || strcmp(t->u.str.s, "mhlo.sharding") == 0)) {
            return false;
        }
        break;
    }
    default:
        break;
    }
    for (uint32_t i = 0; i < o->n_operands; i++) {
        if (is_sharded(sp_value_sharding_partitioned(m, o->operands[i]))) {
            return true;
        }
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        if (is_sharded(sp_value_sharding_partitioned(m, o->first_result + i))) {
            return true;
        }
    }
    return false;
}

/* ---- one op ----------------------------------------------------------------------- */

#define MAX_VALUES 64

/* What partitioning one op needs (Shardy's InstructionShardingInfo). */
typedef struct inst {
    const char *mesh_name;
    const sp_mesh *mesh;
    sp_sharding *in[MAX_VALUES], *out[MAX_VALUES];
    const char *manual[SP_MAX_RANK * 4]; /* axis names in order of first use */
    uint32_t n_manual;
} inst;

static bool in_manual(const inst *x, const char *name)
{
    for (uint32_t i = 0; i < x->n_manual; i++) {
        if (strcmp(x->manual[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static void add_manual(inst *x, const sp_axis_ref *refs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!in_manual(x, refs[i].name) && x->n_manual < SP_MAX_RANK * 4) {
            x->manual[x->n_manual++] = refs[i].name;
        }
    }
}

/* The sharding of v, or a fully closed replicated one on the op's mesh. */
static sp_sharding *or_closed(sp_module *m, const inst *x, uint32_t v, bool clear_unreduced)
{
    const sp_sharding *s = sp_value_sharding_partitioned(m, v);
    const sp_type *t = sp_value_type(m, v);
    sp_sharding *c;
    if (s == NULL) {
        c = sp_sharding_open(&m->arena, x->mesh_name, t->kind == SP_TYPE_TENSOR ? t->rank : 0);
        for (uint32_t d = 0; c != NULL && d < c->rank; d++) {
            c->dims[d].is_closed = true;
        }
        return c;
    }
    c = sp_sharding_clone(&m->arena, s);
    if (c != NULL) {
        c->mesh_name = x->mesh_name;
        c->mesh = NULL;
        if (clear_unreduced) {
            c->n_unreduced = 0;
        }
    }
    return c;
}

static int64_t ref_size(const sp_mesh *mesh, const sp_axis_ref *r)
{
    if (r->pre_size > 0) {
        return r->size;
    }
    int32_t i = sp_mesh_axis_index(mesh, r->name);
    return i < 0 ? 1 : mesh->axes[i].size;
}

/* Shardy's getDivisiblePaddedType over the manual axes: dims[] of type t,
 * each grown to a multiple of its manual shard count; false when nothing
 * grows. */
static bool padded_dims(const inst *x, const sp_type *t, const sp_sharding *s, int64_t *dims)
{
    bool changed = false;
    for (uint32_t d = 0; d < t->rank; d++) {
        dims[d] = t->dims[d];
    }
    if (!is_sharded(s) || t->kind != SP_TYPE_TENSOR || s->rank != t->rank) {
        return false;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
        int64_t n = 1;
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            if (in_manual(x, s->dims[d].axes[k].name)) {
                n *= ref_size(x->mesh, &s->dims[d].axes[k]);
            }
        }
        if (t->dims[d] >= 0 && n > 1 && t->dims[d] % n != 0) {
            dims[d] = t->dims[d] + n - t->dims[d] % n;
            changed = true;
        }
    }
    return changed;
}

static sp_attr *darr_attr(sp_module *m, const int64_t *v, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE_ARRAY);
    int64_t *copy = cm_arena_alloc(&m->arena, sizeof *copy * (n + 1u));
    if (a == NULL || copy == NULL) {
        return NULL;
    }
    memcpy(copy, v, sizeof *copy * n);
    a->u.darr.elem = "i64";
    a->u.darr.v = copy;
    a->u.darr.n = n;
    return a;
}

static cm_status new_op(sp_module *m, uint32_t block, uint32_t at, const char *name,
                        const uint32_t *operands, uint32_t n, uint32_t ty, uint32_t like,
                        uint32_t *op_out)
{
    uint32_t op;
    cm_status st = sp_module_new_op(m, SP_NONE, name, operands, n, &ty, ty == SP_NONE ? 0 : 1, &op);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, block, at, op);
    }
    if (st == CM_OK) {
        m->ops[op].loc = m->ops[like].loc;
        m->ops[op].where = m->ops[like].where;
        *op_out = op;
    }
    return st;
}

/* A zero scalar constant of element type e at block[at]. */
static cm_status zero_const(sp_module *m, uint32_t block, uint32_t at, sp_elem e, uint32_t like,
                            uint32_t *value_out)
{
    uint32_t ty, op;
    cm_status st = sp_module_tensor_type(m, e, NULL, 0, &ty, NULL);
    if (st == CM_OK) {
        st = new_op(m, block, at, "stablehlo.constant", NULL, 0, ty, like, &op);
    }
    sp_attr *a = sp_attr_new(m, SP_ATTR_DENSE);
    int64_t *z = cm_arena_zalloc(&m->arena, sizeof *z);
    if (st != CM_OK || a == NULL || z == NULL) {
        return st != CM_OK ? st : CM_ENOMEM;
    }
    bool is_int = e >= SP_ELEM_I1 && e <= SP_ELEM_UI64;
    a->u.dense.body = e == SP_ELEM_I1 ? "false" : is_int ? "0" : "0.000000e+00";
    a->u.dense.type = ty;
    a->u.dense.ints = is_int ? z : NULL;
    a->u.dense.n_ints = is_int ? 1 : 0;
    *value_out = m->ops[op].first_result;
    return sp_op_set_attr(m, op, "value", a);
}

/* Pads value v at block[*at] at the high side to dims (sharded s). */
static cm_status pad_high(sp_module *m, uint32_t block, uint32_t *at, uint32_t v,
                          const int64_t *dims, sp_sharding *s, uint32_t like, uint32_t *out)
{
    sp_type t = *sp_value_type(m, v);
    uint32_t zero = SP_NONE, ty = SP_NONE, op = SP_NONE;
    cm_status st = zero_const(m, block, (*at)++, t.elem, like, &zero);
    if (st == CM_OK) {
        st = sp_module_tensor_type(m, t.elem, dims, t.rank, &ty, NULL);
    }
    uint32_t ops[2] = {v, zero};
    if (st == CM_OK) {
        st = new_op(m, block, (*at)++, "stablehlo.pad", ops, 2, ty, like, &op);
    }
    int64_t lo[SP_MAX_RANK] = {0}, hi[SP_MAX_RANK];
    for (uint32_t d = 0; d < t.rank; d++) {
        hi[d] = dims[d] - t.dims[d];
    }
    if (st == CM_OK) {
        st = sp_op_set_attr(m, op, "edge_padding_low", darr_attr(m, lo, t.rank));
    }
    if (st == CM_OK) {
        st = sp_op_set_attr(m, op, "edge_padding_high", darr_attr(m, hi, t.rank));
    }
    if (st == CM_OK) {
        st = sp_op_set_attr(m, op, "interior_padding", darr_attr(m, lo, t.rank));
    }
    if (st == CM_OK) {
        *out = m->ops[op].first_result;
        st = sp_value_set_sharding(m, *out, s);
    }
    return st;
}

/* The text `(a, b) -> (c)` of a function type, interned. */
static cm_status func_type(sp_module *m, const uint32_t *ins, uint32_t n_in, const uint32_t *outs,
                           uint32_t n_out, uint32_t *id_out)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '(');
    for (uint32_t i = 0; i < n_in; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, m->types[ins[i]].text);
    }
    cm_buf_puts(&b, ") -> (");
    for (uint32_t i = 0; i < n_out; i++) {
        cm_buf_puts(&b, i ? ", " : "");
        cm_buf_puts(&b, m->types[outs[i]].text);
    }
    cm_buf_putc(&b, ')');
    cm_status st = b.oom ? CM_ENOMEM : sp_module_intern_type(m, b.data, b.len, id_out, NULL);
    cm_buf_fini(&b);
    return st;
}

static sp_attr *sharding_attr(sp_module *m, sp_sharding *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
    if (a != NULL) {
        a->u.sharding = s;
    }
    return a;
}

static sp_attr *sharding_list(sp_module *m, sp_sharding *const *s, uint32_t n)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    sp_sharding **items = cm_arena_alloc(&m->arena, sizeof *items * (n + 1u));
    if (a == NULL || items == NULL) {
        return NULL;
    }
    memcpy(items, s, sizeof *items * n);
    a->u.shardings.items = items;
    a->u.shardings.n = n;
    return a;
}

/* Builds the detached function `outlined_op` (arguments of types args,
 * results of types res, with the op's shardings) holding a copy of op whose
 * results take the padded types (a slice's limits and a pad's high padding
 * widened to match). */
static cm_status outline(sp_module *m, uint32_t op, const inst *x, const uint32_t *args,
                         const uint32_t *res, uint32_t *func_out)
{
    const sp_op *o = &m->ops[op];
    uint32_t n_in = o->n_operands, n_out = o->n_results, f, blk, fty;
    sp_attr *sym = sp_attr_new(m, SP_ATTR_STRING), *vis = sp_attr_new(m, SP_ATTR_STRING);
    sp_attr *ft = sp_attr_new(m, SP_ATTR_TYPE);
    if (sym == NULL || vis == NULL || ft == NULL) {
        return CM_ENOMEM;
    }
    sym->u.str.s = "outlined_op";
    sym->u.str.len = strlen("outlined_op");
    vis->u.str.s = "private";
    vis->u.str.len = strlen("private");
    cm_status st = func_type(m, args, n_in, res, n_out, &fty);
    if (st == CM_OK) {
        st = sp_module_new_op(m, SP_NONE, "func.func", NULL, 0, NULL, 0, &f);
    }
    if (st != CM_OK) {
        return st;
    }
    ft->u.type = fty;
    if (sp_op_set_attr(m, f, "sym_name", sym) != CM_OK ||
        sp_op_set_attr(m, f, "function_type", ft) != CM_OK ||
        sp_op_set_attr(m, f, "sym_visibility", vis) != CM_OK || sp_op_add_regions(m, f, 1) != CM_OK ||
        sp_module_new_block(m, f, &blk) != CM_OK || sp_region_add_block(m, f, 0, blk) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_value_map map;
    memset(&map, 0, sizeof map);
    for (uint32_t i = 0; i < n_in && st == CM_OK; i++) {
        uint32_t v;
        st = sp_module_add_block_arg(m, blk, args[i], &v);
        if (st == CM_OK) {
            st = sp_value_map_set(&map, m->ops[op].operands[i], v);
        }
    }
    uint32_t clone = SP_NONE;
    if (st == CM_OK) {
        st = sp_op_clone_deep(m, op, &map, &clone);
    }
    sp_value_map_free(&map);
    if (st == CM_OK) {
        st = sp_block_insert_op(m, blk, 0, clone);
    }
    if (st != CM_OK) {
        return st;
    }
    /* operand i is argument i, also when two operands are one value */
    for (uint32_t i = 0; i < n_in; i++) {
        m->ops[clone].operands[i] = m->blocks[blk].first_arg + i;
    }
    for (uint32_t i = 0; i < n_in && st == CM_OK; i++) {
        sp_attr *a = sharding_attr(m, x->in[i]);
        st = a == NULL ? CM_ENOMEM : sp_func_set_arg_attr(m, f, i, "sdy.sharding", a);
    }
    for (uint32_t i = 0; i < n_out && st == CM_OK; i++) {
        st = sp_func_set_result_sharding(m, f, i, x->out[i]);
    }
    for (uint32_t i = 0; i < n_out && st == CM_OK; i++) {
        uint32_t r = m->ops[clone].first_result + i;
        uint32_t orig = m->values[r].type;
        if (orig == res[i]) {
            continue;
        }
        const sp_type *ot = &m->types[orig], *pt = &m->types[res[i]];
        uint32_t rank = ot->rank;
        const char *key = m->ops[clone].kind == SP_OP_SLICE ? "limit_indices"
                          : m->ops[clone].kind == SP_OP_PAD ? "edge_padding_high"
                                                            : NULL;
        const sp_attr *a = key != NULL ? sp_op_attr(m, clone, key) : NULL;
        if (a != NULL && a->kind == SP_ATTR_DENSE_ARRAY && a->u.darr.n == rank) {
            int64_t v[SP_MAX_RANK];
            for (uint32_t d = 0; d < rank; d++) {
                v[d] = a->u.darr.v[d] + pt->dims[d] - ot->dims[d];
            }
            st = sp_op_set_attr(m, clone, key, darr_attr(m, v, rank));
        }
        m->values[r].type = res[i];
    }
    uint32_t rets[MAX_VALUES], ret;
    for (uint32_t i = 0; i < n_out; i++) {
        rets[i] = m->ops[clone].first_result + i;
    }
    if (st == CM_OK) {
        st = sp_module_new_op(m, blk, "func.return", rets, n_out, NULL, 0, &ret);
    }
    *func_out = f;
    return st;
}

/* The partitioner of Shardy's runPartitionerPipeline on m (which holds only
 * the outlined function and the meshes). */
static cm_status run_pipeline(sp_module *m, const sp_pip_opts *o, sp_diags *d, cm_error *err)
{
    sp_rpf_opts ro = {o->enable_halo_exchange, o->replica_count, o->partition_count};
    sp_reshard_opts xo = {.full_version = true};
    sp_g2l_opts go = {o->replica_count, o->partition_count, false, false, false};
    cm_status st = sp_pass_resolve_permutation_factors(m, &ro, d, err);
    if (st == CM_OK) {
        st = sp_pass_insert_explicit_reshards(m, &xo, d, err);
    }
    if (st == CM_OK) {
        st = sp_pass_reshard_to_collectives(m, false, err);
    }
    if (st == CM_OK) {
        st = sp_pass_pad_for_divisibility(m, d, err);
    }
    if (st == CM_OK) {
        st = sp_pass_convert_global_to_local(m, &go, d, err);
    }
    if (st == CM_OK) {
        st = sp_pass_drop_sharding_and_mesh(m, err);
    }
    return st;
}

/* Runs the pipeline with f as the module's only function: the body's other
 * ops are taken out and put back in their order afterwards (the meshes the
 * pipeline drops included), and the ops made before f (ids below n_hide)
 * look detached meanwhile, for the passes that scan the op table. */
static cm_status run_alone(sp_module *m, uint32_t f, uint32_t n_hide, const sp_pip_opts *o,
                           sp_diags *d, cm_error *err)
{
    sp_block *body = &m->blocks[m->body];
    uint32_t n = body->n_ops;
    uint32_t *saved = cm_alloc(sizeof *saved * (n + 1u));
    uint32_t *parents = cm_alloc(sizeof *parents * (n_hide + 1u));
    if (saved == NULL || parents == NULL) {
        cm_free(saved);
        cm_free(parents);
        return cm_error_oom(err);
    }
    memcpy(saved, body->ops, sizeof *saved * n);
    for (uint32_t i = 0; i < n_hide; i++) {
        parents[i] = m->ops[i].parent_block;
        if (m->ops[i].kind != SP_OP_SDY_MESH || parents[i] != m->body) {
            m->ops[i].parent_block = SP_NONE;
        }
    }
    for (uint32_t i = m->blocks[m->body].n_ops; i-- > 0;) {
        uint32_t op = m->blocks[m->body].ops[i];
        if (m->ops[op].kind != SP_OP_SDY_MESH) {
            /* keeps the block's list consistent; parent_block is hidden above */
            m->blocks[m->body].ops[i] = op;
            memmove(&m->blocks[m->body].ops[i], &m->blocks[m->body].ops[i + 1],
                    sizeof(uint32_t) * (m->blocks[m->body].n_ops - i - 1));
            m->blocks[m->body].n_ops--;
        }
    }
    cm_status st = sp_block_insert_op(m, m->body, m->blocks[m->body].n_ops, f);
    if (st == CM_OK) {
        st = run_pipeline(m, o, d, err);
    } else {
        st = cm_error_oom(err);
    }
    while (m->blocks[m->body].n_ops > 0) {
        sp_block_remove_op(m, m->body, m->blocks[m->body].n_ops - 1);
    }
    for (uint32_t i = 0; i < n_hide; i++) {
        m->ops[i].parent_block = parents[i];
    }
    cm_free(parents);
    for (uint32_t i = 0; i < n; i++) {
        cm_status s2 = sp_block_insert_op(m, m->body, i, saved[i]);
        if (s2 != CM_OK && st == CM_OK) {
            st = cm_error_oom(err);
        }
    }
    cm_free(saved);
    return st;
}

/* Shardy's getOrCreateMeshSymbol for an inlined mesh: the name of an
 * sdy.mesh equal to it, else a new sdy.mesh `mesh` (`mesh_N` on a clash) at
 * the top of the module. Errors: CM_ENOMEM. */
static cm_status mesh_symbol(sp_module *m, sp_mesh *mesh, const char **name_out)
{
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t op = body->ops[i];
        const sp_attr *ma = sp_op_attr(m, op, "mesh");
        const sp_attr *na = sp_op_attr(m, op, "sym_name");
        if (m->ops[op].kind == SP_OP_SDY_MESH && ma != NULL && ma->kind == SP_ATTR_MESH &&
            na != NULL && na->kind == SP_ATTR_STRING && sp_mesh_equal(ma->u.mesh, mesh)) {
            *name_out = na->u.str.s;
            return CM_OK;
        }
    }
    char name[32] = "mesh";
    for (int k = 0; sp_module_mesh(m, name) != NULL || sp_module_func(m, name) != SP_NONE; k++) {
        snprintf(name, sizeof name, "mesh_%d", k);
    }
    uint32_t op;
    sp_attr *n = sp_attr_new(m, SP_ATTR_STRING), *ms = sp_attr_new(m, SP_ATTR_MESH);
    const char *s = sp_module_str(m, name, strlen(name));
    if (n == NULL || ms == NULL || s == NULL ||
        sp_module_new_op(m, SP_NONE, "sdy.mesh", NULL, 0, NULL, 0, &op) != CM_OK) {
        return CM_ENOMEM;
    }
    n->u.str.s = s;
    n->u.str.len = strlen(s);
    ms->u.mesh = mesh;
    if (sp_op_set_attr(m, op, "sym_name", n) != CM_OK ||
        sp_op_set_attr(m, op, "mesh", ms) != CM_OK ||
        sp_block_insert_op(m, m->body, 0, op) != CM_OK) {
        return CM_ENOMEM;
    }
    *name_out = s;
    return CM_OK;
}

/* Shardy's partitionAndWrapInstruction. */
static cm_status partition_op(sp_module *m, uint32_t op, const sp_pip_opts *o, sp_diags *d,
                              cm_error *err)
{
    sp_op *src = &m->ops[op];
    uint32_t n_in = src->n_operands, n_out = src->n_results;
    if (n_in > MAX_VALUES || n_out > MAX_VALUES) {
        return cm_error_set(err, CM_EINVAL, "", "'%s' op has too many operands to partition",
                            src->name);
    }
    inst x;
    memset(&x, 0, sizeof x);
    for (uint32_t i = 0; i < n_in + n_out && x.mesh_name == NULL; i++) {
        const sp_sharding *s = sp_value_sharding_partitioned(
            m, i < n_in ? src->operands[i] : src->first_result + i - n_in);
        if (s != NULL && s->mesh_name != NULL) {
            x.mesh_name = s->mesh_name;
        } else if (s != NULL && s->mesh != NULL) {
            cm_status st = mesh_symbol(m, s->mesh, &x.mesh_name);
            if (st != CM_OK) {
                return cm_error_oom(err);
            }
        }
    }
    x.mesh = x.mesh_name != NULL ? sp_module_mesh(m, x.mesh_name) : NULL;
    if (x.mesh == NULL) {
        return cm_error_set(err, CM_EINVAL, "", "'%s' op has no mesh to partition on", src->name);
    }
    for (uint32_t i = 0; i < n_in; i++) {
        x.in[i] = or_closed(m, &x, m->ops[op].operands[i], false);
    }
    for (uint32_t i = 0; i < n_out; i++) {
        x.out[i] = or_closed(m, &x, m->ops[op].first_result + i, true);
    }
    for (uint32_t i = 0; i < n_in + n_out; i++) {
        const sp_sharding *s = i < n_in ? x.in[i] : x.out[i - n_in];
        if (s == NULL) {
            return cm_error_oom(err);
        }
        for (uint32_t dd = 0; dd < s->rank; dd++) {
            add_manual(&x, s->dims[dd].axes, s->dims[dd].n_axes);
        }
        add_manual(&x, s->replicated, s->n_replicated);
        add_manual(&x, s->unreduced, s->n_unreduced);
    }
    /* the padded types; a reshard's operand and result share the larger */
    uint32_t args[MAX_VALUES], res[MAX_VALUES], operands[MAX_VALUES];
    int64_t dims[SP_MAX_RANK], dims2[SP_MAX_RANK];
    bool is_reshard = m->ops[op].kind == SP_OP_SDY_RESHARD && n_in == 1 && n_out == 1;
    uint32_t unified = SP_NONE;
    if (is_reshard) {
        sp_type t = *sp_value_type(m, m->ops[op].operands[0]);
        bool a = padded_dims(&x, &t, x.in[0], dims), b = padded_dims(&x, &t, x.out[0], dims2);
        if (a || b) {
            for (uint32_t dd = 0; dd < t.rank; dd++) {
                dims[dd] = dims[dd] > dims2[dd] ? dims[dd] : dims2[dd];
            }
            if (sp_module_tensor_type(m, t.elem, dims, t.rank, &unified, NULL) != CM_OK) {
                return cm_error_oom(err);
            }
        }
    }
    uint32_t block = m->ops[op].parent_block, at = sp_op_index_in_block(m, op);
    for (uint32_t i = 0; i < n_in; i++) {
        uint32_t v = m->ops[op].operands[i];
        sp_type t = *sp_value_type(m, v);
        uint32_t ty = m->values[v].type;
        if (unified != SP_NONE) {
            ty = unified;
            memcpy(dims, m->types[unified].dims, sizeof dims[0] * t.rank);
        } else if (t.kind == SP_TYPE_TENSOR && padded_dims(&x, &t, x.in[i], dims) &&
                   sp_module_tensor_type(m, t.elem, dims, t.rank, &ty, NULL) != CM_OK) {
            return cm_error_oom(err);
        }
        operands[i] = v;
        args[i] = ty;
        if (ty != m->values[v].type &&
            pad_high(m, block, &at, v, dims, x.in[i], op, &operands[i]) != CM_OK) {
            return cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; i < n_out; i++) {
        uint32_t v = m->ops[op].first_result + i;
        sp_type t = *sp_value_type(m, v);
        res[i] = m->values[v].type;
        if (unified != SP_NONE) {
            res[i] = unified;
        } else if (t.kind == SP_TYPE_TENSOR && padded_dims(&x, &t, x.out[i], dims) &&
                   sp_module_tensor_type(m, t.elem, dims, t.rank, &res[i], NULL) != CM_OK) {
            return cm_error_oom(err);
        }
    }
    uint32_t f, n_hide = m->n_ops;
    cm_status st = outline(m, op, &x, args, res, &f);
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    st = run_alone(m, f, n_hide, o, d, err);
    if (st != CM_OK) {
        return st;
    }
    /* the function's body becomes the manual computation's */
    uint32_t mc;
    if (sp_module_new_op(m, SP_NONE, "sdy.manual_computation", operands, n_in, res, n_out, &mc) !=
            CM_OK ||
        sp_block_insert_op(m, block, at, mc) != CM_OK) {
        return cm_error_oom(err);
    }
    m->ops[mc].loc = m->ops[op].loc;
    m->ops[mc].where = m->ops[op].where;
    sp_attr *axes = sp_attr_new(m, SP_ATTR_AXIS_LIST);
    sp_axis_ref *refs = cm_arena_zalloc(&m->arena, sizeof *refs * (x.n_manual + 1u));
    if (axes == NULL || refs == NULL) {
        return cm_error_oom(err);
    }
    for (uint32_t i = 0; i < x.n_manual; i++) {
        refs[i].name = x.manual[i];
    }
    axes->u.axes.axes = refs;
    axes->u.axes.n = x.n_manual;
    uint32_t fblk = m->ops[f].regions[0].blocks[0];
    if (sp_op_set_attr(m, mc, "in_shardings", sharding_list(m, x.in, n_in)) != CM_OK ||
        sp_op_set_attr(m, mc, "out_shardings", sharding_list(m, x.out, n_out)) != CM_OK ||
        sp_op_set_attr(m, mc, "manual_axes", axes) != CM_OK || sp_op_add_regions(m, mc, 1) != CM_OK ||
        sp_region_add_block(m, mc, 0, fblk) != CM_OK) {
        return cm_error_oom(err);
    }
    m->ops[f].regions[0].n_blocks = 0;
    const sp_block *fb = &m->blocks[fblk];
    if (fb->n_ops > 0) {
        sp_op *ret = &m->ops[fb->ops[fb->n_ops - 1]];
        if (ret->kind == SP_OP_FUNC_RETURN) {
            ret->name = "sdy.return";
            ret->kind = SP_OP_SDY_RETURN;
        }
    }
    /* results sliced back to their types where padded */
    uint32_t pos = sp_op_index_in_block(m, mc) + 1;
    for (uint32_t i = 0; i < n_out; i++) {
        uint32_t orig = m->ops[op].first_result + i, v = m->ops[mc].first_result + i;
        uint32_t to = v;
        if (m->values[orig].type != m->values[v].type) {
            sp_type t = m->types[m->values[orig].type];
            int64_t zero[SP_MAX_RANK] = {0}, one[SP_MAX_RANK];
            for (uint32_t dd = 0; dd < t.rank; dd++) {
                one[dd] = 1;
            }
            uint32_t sl;
            if (new_op(m, block, pos++, "stablehlo.slice", &v, 1, m->values[orig].type, op, &sl) !=
                    CM_OK ||
                sp_op_set_attr(m, sl, "start_indices", darr_attr(m, zero, t.rank)) != CM_OK ||
                sp_op_set_attr(m, sl, "limit_indices", darr_attr(m, t.dims, t.rank)) != CM_OK ||
                sp_op_set_attr(m, sl, "strides", darr_attr(m, one, t.rank)) != CM_OK ||
                sp_value_set_sharding(m, m->ops[sl].first_result, x.out[i]) != CM_OK) {
                return cm_error_oom(err);
            }
            to = m->ops[sl].first_result;
        }
        for (uint32_t k = 0; k < m->n_ops; k++) {
            sp_op *u = &m->ops[k];
            if (u->parent_block == SP_NONE) {
                continue;
            }
            for (uint32_t j = 0; j < u->n_operands; j++) {
                if (u->operands[j] == orig) {
                    u->operands[j] = to;
                }
            }
        }
    }
    sp_block_remove_op(m, block, sp_op_index_in_block(m, op));
    return CM_OK;
}

void sp_pip_opts_init(sp_pip_opts *o)
{
    memset(o, 0, sizeof *o);
    o->enable_halo_exchange = true;
    o->replica_count = 1;
    o->partition_count = 1;
}

cm_status sp_pass_per_instruction_partitioning(sp_module *m, const sp_pip_opts *o, sp_diags *d,
                                               cm_error *err)
{
    filter f;
    parse_filter(o->filter, &f);
    uint32_t *picked = NULL, n = 0, cap = 0;
    int64_t seq = 0;
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t i = 0; i < body->n_ops; i++) {
        uint32_t fn = body->ops[i];
        if (m->ops[fn].kind != SP_OP_FUNC_FUNC || m->ops[fn].n_regions == 0) {
            continue;
        }
        for (uint32_t b = 0; b < m->ops[fn].regions[0].n_blocks; b++) {
            const sp_block *blk = &m->blocks[m->ops[fn].regions[0].blocks[b]];
            for (uint32_t k = 0; k < blk->n_ops; k++) {
                uint32_t op = blk->ops[k];
                if (!candidate(m, op)) {
                    continue;
                }
                int64_t id = seq++;
                if (!filter_matches(&f, m->ops[op].name, id)) {
                    continue;
                }
                if (CM_GROW_U32(picked, cap, n + 1, NULL) != CM_OK) {
                    cm_free(picked);
                    return cm_error_oom(err);
                }
                picked[n++] = op;
            }
        }
    }
    cm_status st = CM_OK;
    for (uint32_t i = 0; i < n && st == CM_OK; i++) {
        st = partition_op(m, picked[i], o, d, err);
    }
    cm_free(picked);
    return st;
}
