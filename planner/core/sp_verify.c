/* SPDX-License-Identifier: Apache-2.0
 * planner: module verification, as MLIR verifies a module after parsing:
 * meshes are valid, every sharding names a known mesh and fits its tensor,
 * sharding lists have one entry per result, attached sharding rules match
 * the op's operands and results. Findings are diagnostics on the op. */
#include "sp_ir.h"

#include <stdio.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_diag.h"
#include "sp_verify_int.h"

/* Checks one type written in the input: a tensor's dimensions are sizes or
 * '?' (the reader leaves a malformed dimension list, such as "-8x16", in
 * front of the element type) and its element and byte counts fit in int64.
 * Reports at op; *seen stops a second report of a bad type. */
static void check_type(sp_module *m, uint32_t op, uint32_t type, sp_diags *d, bool *bad,
                       bool *seen)
{
    const sp_type *t = &m->types[type];
    if (t->kind != SP_TYPE_TENSOR || *seen) {
        return;
    }
    const char *p = t->text + 7; /* past "tensor<" */
    for (uint32_t i = 0; i < t->rank; i++) {
        p = strchr(p, 'x') + 1; /* the reader parsed rank "Nx" or "?x" prefixes */
    }
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '!')) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "invalid tensor type '%s': dimension sizes must be non-negative integers "
                     "or '?'",
                     t->text);
        *bad = *seen = true;
        return;
    }
    int64_t n = 1;
    bool ok = true;
    for (uint32_t i = 0; i < t->rank && ok; i++) {
        if (t->dims[i] != SP_DIM_DYNAMIC) {
            ok = cm_mul_i64(n, t->dims[i], &n);
        }
    }
    size_t eb = sp_elem_bytes(t->elem);
    if (ok) {
        ok = cm_mul_i64(n, eb > 0 ? (int64_t)eb : 1, &n);
    }
    if (!ok) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "tensor type '%s' has more elements (or bytes) than fit in 64 bits",
                     t->text);
        *bad = *seen = true;
    }
}

/* The types an op writes: its results and the arguments of its blocks. */
static void check_op_types(sp_module *m, uint32_t i, sp_diags *d, bool *bad, bool *seen)
{
    const sp_op *op = &m->ops[i];
    for (uint32_t k = 0; k < op->n_results; k++) {
        check_type(m, i, m->values[op->first_result + k].type, d, bad, seen);
    }
    for (uint32_t r = 0; r < op->n_regions; r++) {
        const sp_region *rg = &op->regions[r];
        for (uint32_t b = 0; b < rg->n_blocks; b++) {
            const sp_block *bl = &m->blocks[rg->blocks[b]];
            for (uint32_t a = 0; a < bl->n_args; a++) {
                check_type(m, i, m->values[bl->first_arg + a].type, d, bad, seen);
            }
        }
    }
}

/* A function's signature against its body: the entry block takes the inputs
 * and the func.return ending it gives the results, in number and type, as
 * MLIR's func dialect verifies. */
static void check_func_body(sp_module *m, uint32_t fi, sp_diags *d, bool *bad)
{
    const sp_op *f = &m->ops[fi];
    const sp_type *ft = sp_func_type(m, fi);
    const sp_attr *nm = sp_op_attr(m, fi, "sym_name");
    const char *name = nm != NULL && nm->kind == SP_ATTR_STRING ? nm->u.str.s : "?";
    if (ft == NULL || f->n_regions == 0 || f->regions[0].n_blocks == 0) {
        return; /* a declaration */
    }
    const sp_block *bl = &m->blocks[f->regions[0].blocks[0]];
    if (bl->n_args != ft->n_inputs) {
        sp_diags_add(d, m, fi, SP_DIAG_ERROR,
                     "'func.func' op entry block must have %u arguments to match function "
                     "signature",
                     ft->n_inputs);
        *bad = true;
        return;
    }
    for (uint32_t a = 0; a < bl->n_args; a++) {
        if (m->values[bl->first_arg + a].type != ft->inputs[a]) {
            sp_diags_add(d, m, fi, SP_DIAG_ERROR,
                         "'func.func' op type of entry block argument #%u('%s') must match "
                         "the type of the corresponding argument in function signature('%s')",
                         a, m->types[m->values[bl->first_arg + a].type].text,
                         m->types[ft->inputs[a]].text);
            *bad = true;
            return;
        }
    }
    if (bl->n_ops == 0) {
        sp_diags_add(d, m, fi, SP_DIAG_ERROR, "empty block: expect at least a terminator");
        *bad = true;
        return;
    }
    uint32_t ri = bl->ops[bl->n_ops - 1];
    const sp_op *ret = &m->ops[ri];
    if (ret->kind != SP_OP_FUNC_RETURN) {
        return;
    }
    if (ret->n_operands != ft->n_results) {
        sp_diags_add(d, m, ri, SP_DIAG_ERROR,
                     "'func.return' op has %u operands, but enclosing function (@%s) returns %u",
                     ret->n_operands, name, ft->n_results);
        *bad = true;
        return;
    }
    for (uint32_t k = 0; k < ret->n_operands; k++) {
        uint32_t t = m->values[ret->operands[k]].type;
        if (t != ft->results[k]) {
            sp_diags_add(d, m, ri, SP_DIAG_ERROR,
                         "'func.return' op type of return operand %u ('%s') doesn't match "
                         "function result type ('%s') in function @%s",
                         k, m->types[t].text, m->types[ft->results[k]].text, name);
            *bad = true;
            return;
        }
    }
}

/* The name of the first axis of s that some sdy.manual_computation around op
 * already makes manual, or NULL; *owner_out is that computation. */
static const char *bound_axis(const sp_module *m, uint32_t op, const sp_sharding *s,
                              uint32_t *owner_out)
{
    uint32_t b = m->ops[op].parent_block;
    for (int depth = 0; depth < 64 && b != SP_NONE; depth++) {
        uint32_t p = m->blocks[b].parent_op;
        if (p == SP_NONE) {
            break;
        }
        const sp_attr *ma = m->ops[p].kind == SP_OP_SDY_MANUAL_COMPUTATION
                                ? sp_op_attr(m, p, "manual_axes")
                                : NULL;
        for (uint32_t k = 0; ma != NULL && ma->kind == SP_ATTR_AXIS_LIST && k < ma->u.axes.n;
             k++) {
            const char *name = ma->u.axes.axes[k].name;
            for (uint32_t d = 0; d < s->rank; d++) {
                for (uint32_t j = 0; j < s->dims[d].n_axes; j++) {
                    if (strcmp(s->dims[d].axes[j].name, name) == 0) {
                        *owner_out = p;
                        return name;
                    }
                }
            }
            for (uint32_t j = 0; j < s->n_replicated + s->n_unreduced; j++) {
                const sp_axis_ref *r =
                    j < s->n_replicated ? &s->replicated[j] : &s->unreduced[j - s->n_replicated];
                if (strcmp(r->name, name) == 0) {
                    *owner_out = p;
                    return name;
                }
            }
        }
        b = m->ops[p].parent_block;
    }
    return NULL;
}

/* Does s name a maximal mesh (no axes, one device), or shard nothing? For
 * an op without results, Shardy then takes the one sharding as the op's. */
static bool maximal_or_replicated(const sp_module *m, const sp_sharding *s)
{
    const sp_mesh *mesh = s->mesh != NULL ? s->mesh
                                          : (s->mesh_name != NULL ? sp_module_mesh(m, s->mesh_name)
                                                                  : NULL);
    if (mesh != NULL && mesh->n_axes == 0 && mesh->n_device_ids == 1) {
        return true;
    }
    for (uint32_t k = 0; k < s->rank; k++) {
        if (s->dims[k].n_axes > 0) {
            return false;
        }
    }
    return s->n_unreduced == 0;
}

/* The message prefix Shardy gives a sharding ("'func.func' op arg 0 - ",
 * "'stablehlo.add' op result - "), formatted only for an error. */
typedef enum who_form {
    WHO_FUNC_ARG,    /* 'func.func' op arg K - */
    WHO_FUNC_RESULT, /* 'func.func' op result K - */
    WHO_RESULT,      /* 'NAME' op result - */
    WHO_RESULT_K,    /* 'NAME' op result K - */
    WHO_OP           /* 'NAME' op */
} who_form;

typedef struct who_prefix {
    who_form form;
    const char *name; /* the op's name */
    uint32_t k;
} who_prefix;

enum { WHO_LEN = 160 };

static const char *who_text(const who_prefix *w, char *buf, size_t cap)
{
    switch (w->form) {
    case WHO_FUNC_ARG:
        snprintf(buf, cap, "'func.func' op arg %u - ", w->k);
        break;
    case WHO_FUNC_RESULT:
        snprintf(buf, cap, "'func.func' op result %u - ", w->k);
        break;
    case WHO_RESULT:
        snprintf(buf, cap, "'%s' op result - ", w->name);
        break;
    case WHO_RESULT_K:
        snprintf(buf, cap, "'%s' op result %u - ", w->name, w->k);
        break;
    case WHO_OP:
        snprintf(buf, cap, "'%s' op ", w->name);
        break;
    }
    return buf;
}

/* Verifies s for a value of type t with Shardy's checks and messages; wh
 * says the message prefix. Then sp_sharding_verify, which also resolves
 * full-axis sizes for the passes. */
static void check(sp_module *m, uint32_t op, sp_sharding *s, const sp_type *t, const who_prefix *wh,
                  sp_diags *d, bool *bad)
{
    char what[WHO_LEN];
    const sp_mesh *mesh = s->mesh;
    if (mesh == NULL && s->mesh_name != NULL) {
        mesh = sp_module_mesh(m, s->mesh_name);
    }
    char msg[512];
    /* a tuple of one tensor is sharded as that tensor (Shardy's
     * verifyTensorShardingAttr); other tuples take no sharding */
    if (t != NULL && t->kind == SP_TYPE_OTHER && strncmp(t->text, "tuple<", 6) == 0 &&
        t->text_len > 7 && !(mesh != NULL && mesh->n_axes == 0)) {
        const char *in = t->text + 6;
        size_t n = t->text_len - 7;
        int depth = 0;
        bool one = true;
        for (size_t k = 0; k < n; k++) {
            depth += in[k] == '<' ? 1 : in[k] == '>' ? -1 : 0;
            one = one && !(depth == 0 && in[k] == ',');
        }
        uint32_t inner;
        if (!one) {
            sp_diags_add(d, m, op, SP_DIAG_ERROR,
                         "%sops can only have a sharding for a tuple of size 1: %s",
                         who_text(wh, what, sizeof what), t->text);
            *bad = true;
            return;
        }
        if (sp_module_intern_type(m, in, n, &inner, NULL) == CM_OK) {
            t = &m->types[inner];
        }
    }
    if (!sp_verify_sharding(s, mesh, t, msg, sizeof msg)) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s%s", who_text(wh, what, sizeof what), msg);
        *bad = true;
        return;
    }
    uint32_t owner;
    const char *axis = bound_axis(m, op, s, &owner);
    if (axis != NULL) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR,
                     "%soperates on axis \"%s\" which is already bound by a parent "
                     "sdy.manual_computation op",
                     who_text(wh, what, sizeof what), axis);
        sp_diags_add(d, m, owner, SP_DIAG_NOTE, "parent bounding this axis as manual");
        *bad = true;
        return;
    }
    if (mesh->n_axes == 0 || t == NULL || t->kind != SP_TYPE_TENSOR) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (sp_sharding_verify(s, mesh, t->rank, NULL, &e) != CM_OK) {
        sp_diags_add(d, m, op, SP_DIAG_ERROR, "%s%s", who_text(wh, what, sizeof what), e.msg);
        *bad = true;
    }
}

static sp_sharding *dict_sharding(const sp_attr *dict)
{
    if (dict == NULL || dict->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *s = sp_attrs_get(dict->u.dict.items, dict->u.dict.n, "sdy.sharding");
    return s != NULL && s->kind == SP_ATTR_SHARDING ? s->u.sharding : NULL;
}

/* Does dict hold an sdy.sharding that is not a TensorShardingAttr? */
static bool dict_sharding_wrong(const sp_attr *dict)
{
    if (dict == NULL || dict->kind != SP_ATTR_DICT) {
        return false;
    }
    const sp_attr *s = sp_attrs_get(dict->u.dict.items, dict->u.dict.n, "sdy.sharding");
    return s != NULL && s->kind != SP_ATTR_SHARDING;
}

/* Shardy's name of factor i: i, j, ..., z, then z_1, z_2, ... */
static void factor_name(uint32_t i, char *buf, size_t cap)
{
    if (i < 18) {
        snprintf(buf, cap, "%c", (char)('i' + i));
    } else {
        snprintf(buf, cap, "z_%u", i - 17);
    }
}

/* The operand or result mappings of rule r against the op's values, with the
 * checks and messages of Shardy's verifyShardingRuleMapping; used[] marks the
 * factors the mappings name. */
static bool rule_mappings_ok(sp_module *m, uint32_t opid, const sp_rule *r, bool results,
                             uint8_t *used, sp_diags *d)
{
    const sp_op *op = &m->ops[opid];
    const char *kind = results ? "result" : "operand";
    uint32_t n_values = results ? op->n_results : op->n_operands;
    uint32_t n_maps = results ? r->n_results : r->n_operands;
    const sp_tensor_mapping *maps = results ? r->results : r->operands;
    if (n_values != n_maps) {
        sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                     "'%s' op number of %ss and mappings must match: %u != %u", op->name, kind,
                     n_values, n_maps);
        return false;
    }
    if (n_maps == 0) {
        sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                     "'%s' op number of %ss mappings cannot be 0. Op sharding rules can only be "
                     "defined on operations with at least one operand and result.",
                     op->name, kind);
        return false;
    }
    for (uint32_t k = 0; k < n_maps; k++) {
        char who[64];
        if (n_maps == 1) {
            snprintf(who, sizeof who, "%s -", kind);
        } else {
            snprintf(who, sizeof who, "%s %u -", kind, k);
        }
        uint32_t v = results ? op->first_result + k : op->operands[k];
        const sp_type *t = &m->types[m->values[v].type];
        bool is_static = t->kind == SP_TYPE_TENSOR;
        for (uint32_t dd = 0; is_static && dd < t->rank; dd++) {
            is_static = t->dims[dd] >= 0;
        }
        if (!is_static) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                         "'%s' op %s expected a ranked tensor with a static shape. type: %s",
                         op->name, who, t->text);
            return false;
        }
        const sp_tensor_mapping *tm = &maps[k];
        if (tm->rank != t->rank) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR, "'%s' op %s mapping rank must match: %u != %u",
                         op->name, who, tm->rank, t->rank);
            return false;
        }
        uint8_t mine[256];
        memset(mine, 0, sizeof mine);
        for (uint32_t dd = 0; dd < tm->rank; dd++) {
            const sp_dim_mapping *dm = &tm->dims[dd];
            if (dm->n_factors == 0) {
                sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                             "'%s' op %s dim mapping must have at least one factor", op->name,
                             who);
                return false;
            }
            for (uint32_t f = 0; f < dm->n_factors; f++) {
                uint32_t fi = dm->factors[f];
                if (fi >= r->n_factors) {
                    sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                                 "'%s' op %s expecting factor indices to be within "
                                 "0<=...<num_factors; received: %u, num_factors: %u",
                                 op->name, who, fi, r->n_factors);
                    return false;
                }
                if (fi < sizeof mine && mine[fi]) {
                    sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                                 "'%s' op %s cannot reuse factors for the same tensor value",
                                 op->name, who);
                    return false;
                }
                if (r->factor_sizes[fi] == 1 && dm->n_factors > 1) {
                    sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                                 "'%s' op %s dim mapping can't have a factor of size 1 if there "
                                 "are multiple factors",
                                 op->name, who);
                    return false;
                }
                if (fi < sizeof mine) {
                    mine[fi] = 1;
                }
                used[fi] |= results ? 2 : 1;
            }
        }
    }
    return true;
}

/* Shardy's indicesSortedUniqueInBound for one special factor list. */
static bool special_list_ok(sp_module *m, uint32_t opid, const sp_rule *r, const int64_t *l,
                            uint32_t n, sp_diags *d)
{
    const char *name = m->ops[opid].name;
    if (n == 0) {
        return true;
    }
    for (uint32_t k = 1; k < n; k++) {
        if (l[k] < l[k - 1]) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                         "'%s' op indices of special factors must be sorted", name);
            return false;
        }
    }
    for (uint32_t k = 1; k < n; k++) {
        if (l[k] == l[k - 1]) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                         "'%s' op indices of special factors must be unique", name);
            return false;
        }
    }
    if (l[0] < 0) {
        sp_diags_add(d, m, opid, SP_DIAG_ERROR, "'%s' op index must be non-negative", name);
        return false;
    }
    if (l[n - 1] >= (int64_t)r->n_factors) {
        sp_diags_add(d, m, opid, SP_DIAG_ERROR, "'%s' op index must be less than %u, got: %lld",
                     name, r->n_factors, (long long)l[n - 1]);
        return false;
    }
    return true;
}

/* The special factor lists as written (the reader keeps them): each sorted,
 * unique and in range, and reduction, need_replication and permutation
 * disjoint, with Shardy's messages and in its order. */
static bool special_lists_ok(sp_module *m, uint32_t opid, const sp_rule *r, sp_diags *d)
{
    for (int w = 0; w < 3; w++) {
        if (!special_list_ok(m, opid, r, r->listed[w], r->n_listed[w], d)) {
            return false;
        }
    }
    /* sorted and in range now, so a merge finds a shared factor */
    uint32_t i[3] = {0, 0, 0};
    for (int a = 0; a < 3; a++) {
        for (int b = a + 1; b < 3; b++) {
            i[0] = 0;
            i[1] = 0;
            while (i[0] < r->n_listed[a] && i[1] < r->n_listed[b]) {
                int64_t x = r->listed[a][i[0]], y = r->listed[b][i[1]];
                if (x == y) {
                    sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                                 "'%s' op a factor can only be in one of the reduction, need "
                                 "replication, or permutation factor sets",
                                 m->ops[opid].name);
                    return false;
                }
                i[x < y ? 0 : 1]++;
            }
        }
    }
    return special_list_ok(m, opid, r, r->listed[3], r->n_listed[3], d);
}

/* Shardy's getShardingBypassingBarriers: v's sharding, looking through
 * sdy.propagation_barrier ops. */
static const sp_sharding *source_sharding(const sp_module *m, uint32_t v)
{
    for (uint32_t hops = 0; hops < m->n_ops; hops++) {
        uint32_t def = m->values[v].def;
        if (def == SP_NONE || m->ops[def].kind != SP_OP_SDY_PROPAGATION_BARRIER ||
            m->ops[def].n_operands != 1) {
            break;
        }
        v = m->ops[def].operands[0];
    }
    return sp_value_sharding_partitioned(m, v);
}

static void verify_rule(sp_module *m, uint32_t opid, const sp_rule *r, sp_diags *d, bool *bad)
{
    const sp_op *op = &m->ops[opid];
    uint8_t *used = cm_alloc(r->n_factors + 1u);
    if (used == NULL) {
        d->oom = true;
        *bad = true;
        return;
    }
    memset(used, 0, r->n_factors + 1u);
    bool ok = rule_mappings_ok(m, opid, r, false, used, d) &&
              rule_mappings_ok(m, opid, r, true, used, d);
    for (uint32_t f = 0; ok && f < r->n_factors; f++) {
        char fn[24];
        factor_name(f, fn, sizeof fn);
        if (used[f] == 0) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                         "'%s' op has factor %s=%lld that isn't used in operand and result "
                         "mappings",
                         op->name, fn, (long long)r->factor_sizes[f]);
            ok = false;
        }
    }
    ok = ok && special_lists_ok(m, opid, r, d);
    for (uint32_t f = 0; ok && f < r->n_factors; f++) {
        if (r->factor_kind[f] == SP_FACTOR_REDUCTION && (used[f] & 2) != 0) {
            sp_diags_add(d, m, opid, SP_DIAG_ERROR,
                         "'%s' op reduction factor cannot be in result mappings", op->name);
            ok = false;
        }
    }
    cm_free(used);
    if (!ok) {
        *bad = true;
    }
}

cm_status sp_module_verify(sp_module *m, sp_diags *d)
{
    bool bad = false, type_seen = false;
    /* what Shardy checks while parsing stops it before any op verifies */
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].parent_block != SP_NONE &&
            !sp_verify_propagation_edges_parsed(m, i, d, &bad)) {
            return CM_EINVAL;
        }
    }
    sp_verify_data_flow_edges(m, d, &bad);
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *op = &m->ops[i];
        if (op->parent_block == SP_NONE && i != 0 && op->kind != SP_OP_FUNC_FUNC &&
            op->kind != SP_OP_SDY_MESH) {
            continue; /* detached */
        }
        check_op_types(m, i, d, &bad, &type_seen);
        if (op->kind == SP_OP_FUNC_FUNC) {
            check_func_body(m, i, d, &bad);
        }
        if (!type_seen) {
            sp_verify_op_shapes(m, i, d, &bad);
        }
        sp_verify_collective(m, i, d, &bad);
        sp_verify_isolated(m, i, d, &bad);
        sp_verify_manual_computation(m, i, d, &bad);
        sp_verify_named_computation(m, i, d, &bad);
        if (op->kind == SP_OP_SDY_PROPAGATION_BARRIER) {
            const sp_attr *dir = sp_op_attr(m, i, "allowed_direction");
            if (dir != NULL && dir->kind == SP_ATTR_ENUM && dir->u.enm.value != NULL &&
                strcmp(dir->u.enm.value, "BOTH") == 0) {
                sp_diags_add(d, m, i, SP_DIAG_ERROR,
                             "'sdy.propagation_barrier' op cannot specify `BOTH` as the "
                             "direction. Not blocking propagation direction makes the op "
                             "redundant.");
                bad = true;
            }
        }
        if (op->kind == SP_OP_SDY_MESH) {
            const sp_attr *ms = sp_op_attr(m, i, "mesh");
            char msg[512];
            if (ms != NULL && ms->kind == SP_ATTR_MESH && !sp_verify_mesh(ms->u.mesh, msg, sizeof msg)) {
                sp_diags_add(d, m, i, SP_DIAG_ERROR, "custom op 'sdy.mesh' %s", msg);
                if (strncmp(msg, "axis size must be", 17) == 0) {
                    /* Shardy checks an axis while parsing the mesh's axes */
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "custom op 'sdy.mesh' failed to parse Sdy_Mesh parameter 'axes' "
                                 "which is to be a `::llvm::ArrayRef<MeshAxisAttr>`");
                }
                bad = true;
            }
            continue;
        }
        if (op->kind == SP_OP_FUNC_FUNC) {
            const sp_type *ft = sp_func_type(m, i);
            const sp_attr *aa = sp_op_attr(m, i, "arg_attrs");
            const sp_attr *ra = sp_op_attr(m, i, "res_attrs");
            for (uint32_t k = 0; ft != NULL && aa != NULL && aa->kind == SP_ATTR_ARRAY &&
                                 k < aa->u.arr.n && k < ft->n_inputs;
                 k++) {
                sp_sharding *s = dict_sharding(aa->u.arr.items[k]);
                if (dict_sharding_wrong(aa->u.arr.items[k])) {
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "'func.func' op arg %u - should have a sharding attribute of "
                                 "type TensorShardingAttr",
                                 k);
                    bad = true;
                }
                if (s != NULL) {
                    who_prefix wh = {.form = WHO_FUNC_ARG, .k = k};
                    check(m, i, s, &m->types[ft->inputs[k]], &wh, d, &bad);
                }
            }
            for (uint32_t k = 0; ft != NULL && ra != NULL && ra->kind == SP_ATTR_ARRAY &&
                                 k < ra->u.arr.n && k < ft->n_results;
                 k++) {
                sp_sharding *s = dict_sharding(ra->u.arr.items[k]);
                if (dict_sharding_wrong(ra->u.arr.items[k])) {
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "'func.func' op result %u - should have a sharding attribute of "
                                 "type TensorShardingAttr",
                                 k);
                    bad = true;
                }
                if (s != NULL) {
                    who_prefix wh = {.form = WHO_FUNC_RESULT, .k = k};
                    check(m, i, s, &m->types[ft->results[k]], &wh, d, &bad);
                }
            }
            continue;
        }
        for (uint32_t a = 0; a < op->n_attrs; a++) {
            const sp_attr *at = op->attrs[a].value;
            const char *name = op->attrs[a].name;
            if (!sp_verify_propagation_edges_attr(m, i, name, at, d, &bad)) {
                break;
            }
            if (strcmp(name, "sdy.sharding") == 0) {
                if (at->kind != SP_ATTR_SHARDING_LIST) {
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "'%s' op should have a sharding attribute of type "
                                 "TensorShardingPerValueAttr",
                                 op->name);
                    bad = true;
                } else if (op->n_results == 0 && at->u.shardings.n == 1 &&
                           maximal_or_replicated(m, at->u.shardings.items[0])) {
                    const sp_sharding *s0 = at->u.shardings.items[0];
                    if (s0->rank != 0 || s0->n_replicated > 0 || s0->n_unreduced > 0) {
                        sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                     "'%s' op result - a maximal sharding can only have a "
                                     "sharding with rank 0 and no replicated or unreduced axes.",
                                     op->name);
                        bad = true;
                    }
                } else if (at->u.shardings.n != op->n_results) {
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "'%s' op result shardings don't match number of values: %u "
                                 "shardings vs %u values",
                                 op->name, at->u.shardings.n, op->n_results);
                    bad = true;
                } else {
                    for (uint32_t k = 0; k < op->n_results; k++) {
                        who_prefix wh = {.form = op->n_results == 1 ? WHO_RESULT : WHO_RESULT_K,
                                         .name = op->name,
                                         .k = k};
                        check(m, i, at->u.shardings.items[k],
                              &m->types[m->values[op->first_result + k].type], &wh, d, &bad);
                    }
                }
            } else if (strcmp(name, "sharding") == 0 && at->kind == SP_ATTR_SHARDING &&
                       op->n_results == 1) {
                who_prefix wh = {.form = WHO_OP, .name = op->name};
                bool was_bad = bad;
                bad = false;
                check(m, i, at->u.sharding, &m->types[m->values[op->first_result].type], &wh, d,
                      &bad);
                if (!bad && op->n_operands == 1 &&
                    (op->kind == SP_OP_SDY_RESHARD || op->kind == SP_OP_SDY_SHARDING_CONSTRAINT)) {
                    const sp_sharding *src = source_sharding(m, op->operands[0]);
                    if (src != NULL &&
                        !sp_verify_unreduced_transition(m, i, src, at->u.sharding,
                                                        SP_REDUCTION_SUM, (int)src->reduction,
                                                        d)) {
                        bad = true;
                    }
                }
                bad = bad || was_bad;
            } else if (strcmp(name, "sdy.sharding_rule") == 0) {
                if (at->kind == SP_ATTR_RULE) {
                    verify_rule(m, i, at->u.rule, d, &bad);
                } else {
                    sp_diags_add(d, m, i, SP_DIAG_ERROR,
                                 "'%s' op should have a sharding rule attribute of type "
                                 "OpShardingRuleAttr for attr named 'sdy.sharding_rule'",
                                 op->name);
                    bad = true;
                }
            }
        }
    }
    return bad ? CM_EINVAL : CM_OK;
}
