/* SPDX-License-Identifier: Apache-2.0
 * planner: the IR tables — creation of values, ops, blocks, interned types,
 * attribute helpers and diagnostics. See sp_ir.h for the layout. */
#include "sp_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_diag.h"

/* ---- growable tables ------------------------------------------------------- */

/* Grows *items (elem bytes each) so that it holds at least need entries. */
static cm_status grow(void **items, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) {
        return CM_OK;
    }
    if (need == UINT32_MAX) {
        return CM_ENOMEM;
    }
    uint64_t ncap = *cap < 16 ? 16 : (uint64_t)*cap * 2;
    while (ncap < need) {
        ncap *= 2;
    }
    if (ncap >= UINT32_MAX) {
        ncap = UINT32_MAX - 1;
    }
    size_t bytes;
    if (!cm_mul_size((size_t)ncap, elem, &bytes)) {
        return CM_ENOMEM;
    }
    void *p = cm_realloc(*items, bytes);
    if (p == NULL) {
        return CM_ENOMEM;
    }
    *items = p;
    *cap = (uint32_t)ncap;
    return CM_OK;
}

sp_module *sp_module_create(void)
{
    sp_module *m = cm_calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    cm_arena_init(&m->arena, 1u << 16);
    m->body = SP_NONE;
    if (sp_module_new_block(m, SP_NONE, &m->body) != CM_OK) {
        sp_module_destroy(m);
        return NULL;
    }
    return m;
}

void sp_module_destroy(sp_module *m)
{
    if (m == NULL) {
        return;
    }
    for (uint32_t i = 0; i < m->n_blocks; i++) {
        cm_free(m->blocks[i].ops);
    }
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].cap_attrs > 0) {
            cm_free(m->ops[i].attrs);
        }
    }
    cm_free(m->values);
    cm_free(m->ops);
    cm_free(m->blocks);
    cm_free(m->types);
    cm_free(m->type_hash);
    cm_arena_fini(&m->arena);
    cm_free(m);
}

const char *sp_module_str(sp_module *m, const char *s, size_t len)
{
    return cm_arena_strndup(&m->arena, s, len);
}

sp_attr *sp_attr_new(sp_module *m, sp_attr_kind kind)
{
    sp_attr *a = cm_arena_zalloc(&m->arena, sizeof *a);
    if (a != NULL) {
        a->kind = kind;
    }
    return a;
}

/* ---- types ------------------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static const struct {
    const char *name;
    sp_elem elem;
    size_t bytes;
} elems[] = {
    {"i1", SP_ELEM_I1, 1},       {"i2", SP_ELEM_I2, 1},         {"i4", SP_ELEM_I4, 1},
    {"i8", SP_ELEM_I8, 1},       {"i16", SP_ELEM_I16, 2},       {"i32", SP_ELEM_I32, 4},
    {"i64", SP_ELEM_I64, 8},     {"ui2", SP_ELEM_UI2, 1},       {"ui4", SP_ELEM_UI4, 1},
    {"ui8", SP_ELEM_UI8, 1},     {"ui16", SP_ELEM_UI16, 2},     {"ui32", SP_ELEM_UI32, 4},
    {"ui64", SP_ELEM_UI64, 8},   {"bf16", SP_ELEM_BF16, 2},     {"f16", SP_ELEM_F16, 2},
    {"f32", SP_ELEM_F32, 4},     {"f64", SP_ELEM_F64, 8},       {"f8E4M3FN", SP_ELEM_F8E4M3FN, 1},
    {"f8E5M2", SP_ELEM_F8E5M2, 1}, {"complex<f32>", SP_ELEM_C64, 8},
    {"complex<f64>", SP_ELEM_C128, 16}, {"index", SP_ELEM_INDEX, 8},
};

size_t sp_elem_bytes(sp_elem e)
{
    switch (e) {
    case SP_ELEM_I16:
    case SP_ELEM_UI16:
    case SP_ELEM_BF16:
    case SP_ELEM_F16:
        return 2;
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
    case SP_ELEM_F32:
        return 4;
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
    case SP_ELEM_F64:
    case SP_ELEM_C64:
    case SP_ELEM_INDEX:
        return 8;
    case SP_ELEM_C128:
        return 16;
    case SP_ELEM_OTHER:
        return 0;
    default:
        return 1; /* i1 and the 2/4/8-bit types take a byte each */
    }
}

const char *sp_elem_name(sp_elem e)
{
    for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++) {
        if (elems[i].elem == e) {
            return elems[i].name;
        }
    }
    return "?";
}

static sp_elem elem_of(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++) {
        if (strlen(elems[i].name) == n && memcmp(elems[i].name, s, n) == 0) {
            return elems[i].elem;
        }
    }
    return SP_ELEM_OTHER;
}

/* Canonical spelling: no whitespace except one space after ',' and around '->'. */
static char *normalize_type(cm_arena *a, const char *s, size_t n, size_t *len_out)
{
    size_t cap;
    if (!cm_mul_size(n, 2, &cap) || !cm_add_size(cap, 1, &cap)) {
        return NULL;
    }
    char *out = cm_arena_alloc(a, cap);
    if (out == NULL) {
        return NULL;
    }
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            out[o++] = c;
            if (c == '\\' && i + 1 < n) {
                out[o++] = s[++i];
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        if (c == '"') {
            in_str = true;
            out[o++] = c;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else if (c == ',') {
            out[o++] = ',';
            out[o++] = ' ';
        } else if (c == '-' && i + 1 < n && s[i + 1] == '>') {
            if (o > 0 && out[o - 1] != ' ') {
                out[o++] = ' ';
            }
            out[o++] = '-';
            out[o++] = '>';
            out[o++] = ' ';
            i++;
        } else {
            out[o++] = c;
        }
    }
    while (o > 0 && out[o - 1] == ' ') {
        o--;
    }
    out[o] = '\0';
    *len_out = o;
    return out;
}

/* Splits s[0..n) at top-level commas (outside <>, (), [], {} and strings).
 * Returns the number of pieces written to starts/lens (at most max). */
static uint32_t split_top(const char *s, size_t n, size_t *starts, size_t *lens, uint32_t max)
{
    uint32_t k = 0;
    int depth = 0;
    size_t begin = 0;
    bool in_str = false;
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i <= n; i++) {
        char c = i < n ? s[i] : ',';
        if (in_str) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        if (c == '"') {
            in_str = true;
        } else if (c == '<' || c == '(' || c == '[' || c == '{') {
            depth++;
        } else if ((c == '>' && !(i > 0 && s[i - 1] == '-')) || c == ')' || c == ']' || c == '}') {
            depth--;
        } else if (c == ',' && depth == 0) {
            if (k >= max) {
                return UINT32_MAX;
            }
            size_t b = begin, e = i;
            while (b < e && s[b] == ' ') {
                b++;
            }
            starts[k] = b;
            lens[k] = e - b;
            k++;
            begin = i + 1;
        }
    }
    return k;
}

static cm_status parse_tensor(sp_module *m, sp_type *t, const char *s, size_t n, cm_error *err)
{
    /* s = "tensor<...>" */
    const char *p = s + 7, *end = s + n - 1;
    int64_t dims[SP_MAX_RANK];
    uint32_t rank = 0;
    for (;;) {
        const char *q = p;
        if (q < end && *q == '?') {
            q++;
        } else {
            while (q < end && *q >= '0' && *q <= '9') {
                q++;
            }
        }
        if (q == p || q >= end || *q != 'x') {
            break;
        }
        if (rank >= SP_MAX_RANK) {
            return cm_error_set(err, CM_EINVAL, NULL, "tensor rank exceeds %d", SP_MAX_RANK);
        }
        if (*p == '?') {
            dims[rank++] = SP_DIM_DYNAMIC;
        } else {
            int64_t v = 0;
            for (const char *d = p; d < q; d++) {
                if (v > (INT64_MAX - 9) / 10) {
                    return cm_error_set(err, CM_EINVAL, NULL, "tensor dimension too large");
                }
                v = v * 10 + (*d - '0');
            }
            dims[rank++] = v;
        }
        p = q + 1;
    }
    /* element type up to a top-level ',' (encoding) or the end */
    const char *e = p;
    int depth = 0;
    while (e < end && !(depth == 0 && *e == ',')) {
        if (*e == '<') {
            depth++;
        } else if (*e == '>') {
            depth--;
        }
        e++;
    }
    if (e == p) {
        return cm_error_set(err, CM_EINVAL, NULL, "tensor type without element type");
    }
    t->kind = SP_TYPE_TENSOR;
    t->elem = elem_of(p, (size_t)(e - p));
    t->rank = rank;
    t->dims = cm_arena_memdup(&m->arena, dims, rank, sizeof dims[0]);
    if (t->dims == NULL && rank > 0) {
        return CM_ENOMEM;
    }
    if (e < end) {
        t->encoding = cm_arena_strndup(&m->arena, e + 2, (size_t)(end - e - 2));
    }
    return CM_OK;
}

static cm_status intern_list(sp_module *m, const char *s, size_t n, const uint32_t **ids_out,
                             uint32_t *n_out, cm_error *err)
{
    enum { MAXN = 1 << 20 };
    size_t cap = 1; /* at most one more element than top-level commas */
    for (size_t i = 0; i < n && cap <= MAXN; i++) {
        cap += s[i] == ',';
    }
    cap = cap < MAXN ? cap : MAXN;
    size_t *starts = cm_alloc(sizeof(size_t) * cap * 2);
    if (starts == NULL) {
        return CM_ENOMEM;
    }
    size_t *lens = starts + cap;
    uint32_t k = split_top(s, n, starts, lens, (uint32_t)cap);
    cm_status st = CM_OK;
    if (k == UINT32_MAX) {
        st = cm_error_set(err, CM_EINVAL, NULL, "too many types in a list (max %d)", MAXN);
        goto out;
    }
    uint32_t *ids = cm_arena_alloc(&m->arena, sizeof(uint32_t) * (k + 1u));
    if (ids == NULL) {
        st = CM_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < k; i++) {
        st = sp_module_intern_type(m, s + starts[i], lens[i], &ids[i], err);
        if (st != CM_OK) {
            goto out;
        }
    }
    *ids_out = ids;
    *n_out = k;
out:
    cm_free(starts);
    return st;
}

static cm_status parse_func_type(sp_module *m, sp_type *t, const char *s, size_t n, cm_error *err)
{
    /* "(a, b) -> r" or "(a) -> (r1, r2)" */
    int depth = 0;
    size_t close = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '(' || s[i] == '<') {
            depth++;
        } else if (s[i] == ')' || (s[i] == '>' && !(i > 0 && s[i - 1] == '-'))) {
            depth--;
            if (depth == 0 && s[i] == ')') {
                close = i;
                break;
            }
        }
    }
    if (close == 0 && !(n >= 2 && s[1] == ')')) {
        if (!(n >= 2 && s[0] == '(' && s[1] == ')')) {
            return cm_error_set(err, CM_EINVAL, NULL, "malformed function type");
        }
        close = 1;
    }
    t->kind = SP_TYPE_FUNC;
    cm_status st = intern_list(m, s + 1, close - 1, &t->inputs, &t->n_inputs, err);
    if (st != CM_OK) {
        return st;
    }
    const char *r = s + close + 1;
    size_t rn = n - close - 1;
    while (rn > 0 && *r == ' ') {
        r++;
        rn--;
    }
    if (rn < 2 || r[0] != '-' || r[1] != '>') {
        return cm_error_set(err, CM_EINVAL, NULL, "function type needs '->'");
    }
    r += 2;
    rn -= 2;
    while (rn > 0 && *r == ' ') {
        r++;
        rn--;
    }
    if (rn >= 2 && r[0] == '(' && r[rn - 1] == ')') {
        /* a parenthesised list unless it is itself a function type */
        int d = 0;
        bool whole = true;
        for (size_t i = 0; i < rn; i++) {
            if (r[i] == '(') {
                d++;
            } else if (r[i] == ')') {
                d--;
                if (d == 0 && i != rn - 1) {
                    whole = false;
                }
            }
        }
        if (whole) {
            return intern_list(m, r + 1, rn - 2, &t->results, &t->n_results, err);
        }
    }
    return intern_list(m, r, rn, &t->results, &t->n_results, err);
}

static cm_status rehash_types(sp_module *m)
{
    uint32_t cap = m->type_hash_cap == 0 ? 256 : m->type_hash_cap * 2;
    uint32_t *h = cm_alloc(sizeof(uint32_t) * cap);
    if (h == NULL) {
        return CM_ENOMEM;
    }
    memset(h, 0xff, sizeof(uint32_t) * cap);
    for (uint32_t i = 0; i < m->n_types; i++) {
        uint32_t j = hash_bytes(m->types[i].text, m->types[i].text_len) & (cap - 1);
        while (h[j] != SP_NONE) {
            j = (j + 1) & (cap - 1);
        }
        h[j] = i;
    }
    cm_free(m->type_hash);
    m->type_hash = h;
    m->type_hash_cap = cap;
    return CM_OK;
}

cm_status sp_module_intern_type(sp_module *m, const char *text, size_t len, uint32_t *id_out,
                                cm_error *err)
{
    size_t n;
    /* fast path: already canonical text is common; normalise into a temp */
    char *canon = normalize_type(&m->arena, text, len, &n);
    if (canon == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    if (n == 0) {
        return cm_error_set(err, CM_EINVAL, NULL, "empty type");
    }
    if (m->type_hash_cap == 0 || (m->n_types + 1) * 2 > m->type_hash_cap) {
        if (rehash_types(m) != CM_OK) {
            return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
        }
    }
    uint32_t j = hash_bytes(canon, n) & (m->type_hash_cap - 1);
    while (m->type_hash[j] != SP_NONE) {
        const sp_type *t = &m->types[m->type_hash[j]];
        if (t->text_len == n && memcmp(t->text, canon, n) == 0) {
            *id_out = m->type_hash[j];
            return CM_OK;
        }
        j = (j + 1) & (m->type_hash_cap - 1);
    }
    if (n > UINT32_MAX / 2) {
        return cm_error_set(err, CM_EINVAL, NULL, "type text too long");
    }
    sp_type t;
    memset(&t, 0, sizeof t);
    t.text = canon;
    t.text_len = (uint32_t)n;
    t.kind = SP_TYPE_OTHER;
    cm_status st = CM_OK;
    if (n > 8 && memcmp(canon, "tensor<", 7) == 0 && canon[n - 1] == '>' && canon[7] != '*') {
        st = parse_tensor(m, &t, canon, n, err);
    } else if (strcmp(canon, "!stablehlo.token") == 0) {
        t.kind = SP_TYPE_TOKEN;
    } else if (canon[0] == '(') {
        st = parse_func_type(m, &t, canon, n, err);
    }
    if (st != CM_OK) {
        return st == CM_ENOMEM ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory") : st;
    }
    /* parsing may have interned nested types and rehashed: find the slot again */
    if ((m->n_types + 1) * 2 > m->type_hash_cap && rehash_types(m) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    if (grow((void **)&m->types, &m->cap_types, m->n_types + 1, sizeof(sp_type)) != CM_OK) {
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory");
    }
    uint32_t id = m->n_types++;
    m->types[id] = t;
    j = hash_bytes(canon, n) & (m->type_hash_cap - 1);
    while (m->type_hash[j] != SP_NONE) {
        j = (j + 1) & (m->type_hash_cap - 1);
    }
    m->type_hash[j] = id;
    *id_out = id;
    return CM_OK;
}

cm_status sp_module_tensor_type(sp_module *m, sp_elem elem, const int64_t *dims, uint32_t rank,
                                uint32_t *id_out, cm_error *err)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "tensor<");
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] == SP_DIM_DYNAMIC) {
            cm_buf_putc(&b, '?');
        } else {
            cm_buf_put_i64(&b, dims[i]);
        }
        cm_buf_putc(&b, 'x');
    }
    cm_buf_puts(&b, sp_elem_name(elem));
    cm_buf_putc(&b, '>');
    cm_status st = b.oom ? cm_error_set(err, CM_ENOMEM, NULL, "out of memory")
                         : sp_module_intern_type(m, b.data, b.len, id_out, err);
    cm_buf_fini(&b);
    return st;
}

/* ---- blocks, values, ops -------------------------------------------------------- */

cm_status sp_module_new_block(sp_module *m, uint32_t parent_op, uint32_t *id_out)
{
    if (grow((void **)&m->blocks, &m->cap_blocks, m->n_blocks + 1, sizeof(sp_block)) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_block *b = &m->blocks[m->n_blocks];
    memset(b, 0, sizeof *b);
    b->first_arg = SP_NONE;
    b->parent_op = parent_op;
    *id_out = m->n_blocks++;
    return CM_OK;
}

static cm_status new_value(sp_module *m, uint32_t type, uint32_t def, uint32_t index,
                           uint32_t block, uint32_t *id_out)
{
    if (grow((void **)&m->values, &m->cap_values, m->n_values + 1, sizeof(sp_value)) != CM_OK) {
        return CM_ENOMEM;
    }
    sp_value *v = &m->values[m->n_values];
    v->type = type;
    v->def = def;
    v->index = index;
    v->block = block;
    *id_out = m->n_values++;
    return CM_OK;
}

cm_status sp_module_add_block_arg(sp_module *m, uint32_t block, uint32_t type, uint32_t *value_out)
{
    sp_block *b = &m->blocks[block];
    uint32_t id;
    if (b->n_args > 0 && b->first_arg + b->n_args != m->n_values) {
        return CM_EINTERNAL; /* block arguments must be consecutive */
    }
    cm_status st = new_value(m, type, SP_NONE, b->n_args, block, &id);
    if (st != CM_OK) {
        return st;
    }
    b = &m->blocks[block];
    if (b->n_args == 0) {
        b->first_arg = id;
    }
    b->n_args++;
    if (value_out != NULL) {
        *value_out = id;
    }
    return CM_OK;
}

static cm_status block_append(sp_module *m, uint32_t block, uint32_t op)
{
    sp_block *b = &m->blocks[block];
    if (grow((void **)&b->ops, &b->cap_ops, b->n_ops + 1, sizeof(uint32_t)) != CM_OK) {
        return CM_ENOMEM;
    }
    b->ops[b->n_ops++] = op;
    return CM_OK;
}

cm_status sp_module_new_op(sp_module *m, uint32_t block, const char *name,
                           const uint32_t *operands, uint32_t n_operands,
                           const uint32_t *result_types, uint32_t n_results, uint32_t *op_out)
{
    if (grow((void **)&m->ops, &m->cap_ops, m->n_ops + 1, sizeof(sp_op)) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t id = m->n_ops;
    sp_op *op = &m->ops[id];
    memset(op, 0, sizeof *op);
    op->name = name;
    op->kind = (uint32_t)sp_op_kind_of(name, strlen(name));
    op->parent_block = block;
    op->first_result = m->n_values;
    op->n_results = n_results;
    if (n_operands > 0) {
        op->operands = cm_arena_memdup(&m->arena, operands, n_operands, sizeof(uint32_t));
        if (op->operands == NULL) {
            return CM_ENOMEM;
        }
    }
    op->n_operands = n_operands;
    m->n_ops++;
    for (uint32_t i = 0; i < n_results; i++) {
        uint32_t v;
        if (new_value(m, result_types[i], id, i, SP_NONE, &v) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    if (block != SP_NONE && block_append(m, block, id) != CM_OK) {
        return CM_ENOMEM;
    }
    *op_out = id;
    return CM_OK;
}

cm_status sp_block_insert_op(sp_module *m, uint32_t block, uint32_t index, uint32_t op)
{
    sp_block *b = &m->blocks[block];
    if (grow((void **)&b->ops, &b->cap_ops, b->n_ops + 1, sizeof(uint32_t)) != CM_OK) {
        return CM_ENOMEM;
    }
    if (index > b->n_ops) {
        index = b->n_ops;
    }
    memmove(&b->ops[index + 1], &b->ops[index], sizeof(uint32_t) * (b->n_ops - index));
    b->ops[index] = op;
    b->n_ops++;
    m->ops[op].parent_block = block;
    return CM_OK;
}

void sp_block_remove_op(sp_module *m, uint32_t block, uint32_t index)
{
    sp_block *b = &m->blocks[block];
    if (index >= b->n_ops) {
        return;
    }
    m->ops[b->ops[index]].parent_block = SP_NONE;
    memmove(&b->ops[index], &b->ops[index + 1], sizeof(uint32_t) * (b->n_ops - index - 1));
    b->n_ops--;
}

uint32_t sp_op_index_in_block(const sp_module *m, uint32_t op)
{
    uint32_t block = m->ops[op].parent_block;
    if (block == SP_NONE) {
        return SP_NONE;
    }
    const sp_block *b = &m->blocks[block];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        if (b->ops[i] == op) {
            return i;
        }
    }
    return SP_NONE;
}

cm_status sp_op_clone_detached(sp_module *m, uint32_t op, uint32_t *clone_out)
{
    uint32_t types[64];
    const sp_op *o = &m->ops[op];
    if (o->n_results > 64 || o->n_regions > 0) {
        return CM_EINVAL;
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        types[i] = m->values[o->first_result + i].type;
    }
    uint32_t c;
    cm_status st = sp_module_new_op(m, SP_NONE, o->name, o->operands, o->n_operands, types,
                                    o->n_results, &c);
    if (st != CM_OK) {
        return st;
    }
    o = &m->ops[op]; /* the table may have moved */
    sp_op *n = &m->ops[c];
    n->kind = o->kind;
    n->line = o->line;
    n->col = o->col;
    n->loc = o->loc;
    if (o->n_attrs > 0) {
        n->attrs = cm_arena_memdup(&m->arena, o->attrs, o->n_attrs, sizeof(sp_named_attr));
        if (n->attrs == NULL) {
            return CM_ENOMEM;
        }
        n->n_attrs = o->n_attrs;
    }
    *clone_out = c;
    return CM_OK;
}

/* The attribute names passes set on many ops, as static strings: an op's
 * attribute names are never freed or written, so they need no arena copy. */
static const char *known_attr_name(const char *name)
{
    static const char *const names[] = {"sdy.sharding", "sdy.sharding_rule", "sharding",
                                        "sdy.sharding_origins", "sdy.result_sharding_origins"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i], name) == 0) {
            return names[i];
        }
    }
    return NULL;
}

cm_status sp_op_set_attr(sp_module *m, uint32_t opid, const char *name, sp_attr *value)
{
    sp_op *op = &m->ops[opid];
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (strcmp(op->attrs[i].name, name) == 0) {
            op->attrs[i].value = value;
            return CM_OK;
        }
    }
    if (op->cap_attrs == 0) {
        /* Arena-owned list (reader, generator, or an earlier call here): a
         * fresh arena copy one longer. Passes add an attribute to most ops
         * of a module, so a malloc per op would dominate their cost. */
        sp_named_attr *p = cm_arena_alloc(&m->arena, sizeof *p * (op->n_attrs + 1u));
        if (p == NULL) {
            return CM_ENOMEM;
        }
        if (op->n_attrs > 0) {
            memcpy(p, op->attrs, sizeof *p * op->n_attrs);
        }
        op->attrs = p;
    } else if (op->n_attrs >= op->cap_attrs) {
        sp_named_attr *p = cm_realloc(op->attrs, sizeof *p * op->cap_attrs * 2u);
        if (p == NULL) {
            return CM_ENOMEM;
        }
        op->attrs = p;
        op->cap_attrs *= 2u;
    }
    const char *n = known_attr_name(name);
    if (n == NULL) {
        n = cm_arena_strdup(&m->arena, name);
    }
    if (n == NULL) {
        return CM_ENOMEM;
    }
    op->attrs[op->n_attrs].name = n;
    op->attrs[op->n_attrs].value = value;
    op->n_attrs++;
    return CM_OK;
}

const sp_attr *sp_op_attr(const sp_module *m, uint32_t op, const char *name)
{
    return sp_attrs_get(m->ops[op].attrs, m->ops[op].n_attrs, name);
}

bool sp_op_remove_attr(sp_module *m, uint32_t opid, const char *name)
{
    sp_op *op = &m->ops[opid];
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (strcmp(op->attrs[i].name, name) == 0) {
            if (op->cap_attrs == 0) {
                /* arena-owned list: copy-on-write not needed for removal */
                memmove(&op->attrs[i], &op->attrs[i + 1], sizeof op->attrs[0] * (op->n_attrs - i - 1));
            } else {
                memmove(&op->attrs[i], &op->attrs[i + 1], sizeof op->attrs[0] * (op->n_attrs - i - 1));
            }
            op->n_attrs--;
            return true;
        }
    }
    return false;
}

cm_status sp_op_add_regions(sp_module *m, uint32_t opid, uint32_t n_regions)
{
    sp_op *op = &m->ops[opid];
    sp_region *r = cm_arena_zalloc(&m->arena, sizeof(sp_region) * (op->n_regions + n_regions));
    if (r == NULL) {
        return CM_ENOMEM;
    }
    if (op->n_regions > 0) {
        memcpy(r, op->regions, sizeof(sp_region) * op->n_regions);
    }
    op->regions = r;
    op->n_regions += n_regions;
    return CM_OK;
}

cm_status sp_region_add_block(sp_module *m, uint32_t opid, uint32_t region, uint32_t block)
{
    sp_region *r = &m->ops[opid].regions[region];
    uint32_t *b = cm_arena_alloc(&m->arena, sizeof(uint32_t) * (r->n_blocks + 1u));
    if (b == NULL) {
        return CM_ENOMEM;
    }
    if (r->n_blocks > 0) {
        memcpy(b, r->blocks, sizeof(uint32_t) * r->n_blocks);
    }
    b[r->n_blocks] = block;
    r->blocks = b;
    r->n_blocks++;
    m->blocks[block].parent_op = opid;
    return CM_OK;
}

/* ---- attributes ------------------------------------------------------------------ */

const sp_attr *sp_attrs_get(const sp_named_attr *attrs, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(attrs[i].name, name) == 0) {
            return attrs[i].value;
        }
    }
    return NULL;
}

bool sp_attr_ints(const sp_attr *a, const int64_t **v_out, uint32_t *n_out, cm_arena *scratch)
{
    if (a == NULL) {
        return false;
    }
    switch (a->kind) {
    case SP_ATTR_INT: {
        *v_out = &a->u.i.v;
        *n_out = 1;
        return true;
    }
    case SP_ATTR_DENSE_ARRAY:
        *v_out = a->u.darr.v;
        *n_out = a->u.darr.n;
        return true;
    case SP_ATTR_DENSE:
        if (a->u.dense.ints == NULL && a->u.dense.n_ints > 0) {
            return false;
        }
        *v_out = a->u.dense.ints;
        *n_out = a->u.dense.n_ints;
        return a->u.dense.ints != NULL || a->u.dense.n_ints == 0;
    case SP_ATTR_ARRAY: {
        int64_t *v = cm_arena_alloc(scratch, sizeof(int64_t) * (a->u.arr.n + 1u));
        if (v == NULL) {
            return false;
        }
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            const sp_attr *e = a->u.arr.items[i];
            if (e->kind != SP_ATTR_INT) {
                return false;
            }
            v[i] = e->u.i.v;
        }
        *v_out = v;
        *n_out = a->u.arr.n;
        return true;
    }
    default:
        return false;
    }
}

/* ---- lookups ------------------------------------------------------------------------ */

const sp_mesh *sp_module_mesh(const sp_module *m, const char *name)
{
    const sp_block *b = &m->blocks[m->body];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        const sp_op *op = &m->ops[b->ops[i]];
        if (op->kind != SP_OP_SDY_MESH) {
            continue;
        }
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        const sp_attr *mesh = sp_attrs_get(op->attrs, op->n_attrs, "mesh");
        if (n != NULL && n->kind == SP_ATTR_STRING && mesh != NULL && mesh->kind == SP_ATTR_MESH &&
            strcmp(n->u.str.s, name) == 0) {
            return mesh->u.mesh;
        }
    }
    return NULL;
}

uint32_t sp_module_func(const sp_module *m, const char *name)
{
    const sp_block *b = &m->blocks[m->body];
    for (uint32_t i = 0; i < b->n_ops; i++) {
        const sp_op *op = &m->ops[b->ops[i]];
        if (op->kind != SP_OP_FUNC_FUNC) {
            continue;
        }
        const sp_attr *n = sp_attrs_get(op->attrs, op->n_attrs, "sym_name");
        if (n != NULL && n->kind == SP_ATTR_STRING && strcmp(n->u.str.s, name) == 0) {
            return b->ops[i];
        }
    }
    return SP_NONE;
}

/* ---- diagnostics --------------------------------------------------------------------- */

void sp_diags_init(sp_diags *d)
{
    d->items = NULL;
    d->n = 0;
    d->cap = 0;
    d->oom = false;
}

void sp_diags_fini(sp_diags *d)
{
    for (uint32_t i = 0; i < d->n; i++) {
        cm_free(d->items[i].msg);
    }
    cm_free(d->items);
    sp_diags_init(d);
}

void sp_diags_add(sp_diags *d, const sp_module *m, uint32_t op, sp_diag_sev sev, const char *fmt,
                  ...)
{
    if (d == NULL) {
        return;
    }
    if (grow((void **)&d->items, &d->cap, d->n + 1, sizeof(sp_diag)) != CM_OK) {
        d->oom = true;
        return;
    }
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    size_t n = strlen(tmp);
    char *msg = cm_alloc(n + 1);
    if (msg == NULL) {
        d->oom = true;
        return;
    }
    memcpy(msg, tmp, n + 1);
    sp_diag *g = &d->items[d->n++];
    g->sev = sev;
    g->op = op;
    g->msg = msg;
    g->line = 0;
    g->col = 0;
    if (op != SP_NONE && m != NULL) {
        g->line = m->ops[op].line;
        g->col = m->ops[op].col;
    }
}

/* ---- shardings attached to values --------------------------------------------------- */

static sp_sharding *dict_sharding(const sp_attr *dict)
{
    if (dict == NULL || dict->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *s = sp_attrs_get(dict->u.dict.items, dict->u.dict.n, "sdy.sharding");
    return s != NULL && s->kind == SP_ATTR_SHARDING ? s->u.sharding : NULL;
}

static const sp_attr *list_item(const sp_attr *arr, uint32_t i)
{
    if (arr == NULL || arr->kind != SP_ATTR_ARRAY || i >= arr->u.arr.n) {
        return NULL;
    }
    return arr->u.arr.items[i];
}

const sp_type *sp_func_type(const sp_module *m, uint32_t f)
{
    const sp_attr *t = sp_op_attr(m, f, "function_type");
    if (t == NULL || t->kind != SP_ATTR_TYPE || m->types[t->u.type].kind != SP_TYPE_FUNC) {
        return NULL;
    }
    return &m->types[t->u.type];
}

sp_sharding *sp_func_result_sharding(const sp_module *m, uint32_t func, uint32_t i)
{
    return dict_sharding(list_item(sp_op_attr(m, func, "res_attrs"), i));
}

sp_sharding *sp_value_sharding(const sp_module *m, uint32_t v)
{
    const sp_value *val = &m->values[v];
    if (val->def == SP_NONE) {
        uint32_t owner = m->blocks[val->block].parent_op;
        if (owner == SP_NONE || m->ops[owner].kind != SP_OP_FUNC_FUNC ||
            m->ops[owner].regions[0].blocks[0] != val->block) {
            return NULL;
        }
        return dict_sharding(list_item(sp_op_attr(m, owner, "arg_attrs"), val->index));
    }
    const sp_op *op = &m->ops[val->def];
    if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, "sharding");
        return a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
    }
    const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, "sdy.sharding");
    if (a == NULL || a->kind != SP_ATTR_SHARDING_LIST || a->u.shardings.n != op->n_results) {
        return NULL;
    }
    return a->u.shardings.items[val->index];
}

const sp_sharding *sp_value_sharding_partitioned(const sp_module *m, uint32_t v)
{
    uint32_t def = m->values[v].def;
    if (def == SP_NONE) {
        /* a while body's arguments are sharded as the while's results */
        uint32_t owner = m->blocks[m->values[v].block].parent_op;
        if (owner != SP_NONE && m->ops[owner].kind == SP_OP_WHILE &&
            m->values[v].index < m->ops[owner].n_results) {
            return sp_value_sharding(m, m->ops[owner].first_result + m->values[v].index);
        }
    }
    if (def != SP_NONE) {
        const sp_op *op = &m->ops[def];
        const char *key = NULL;
        switch ((sp_op_kind)op->kind) {
        case SP_OP_SDY_RESHARD:
            key = "sharding";
            break;
        case SP_OP_SDY_ALL_GATHER:
        case SP_OP_SDY_ALL_SLICE:
        case SP_OP_SDY_ALL_REDUCE:
        case SP_OP_SDY_ALL_TO_ALL:
        case SP_OP_SDY_COLLECTIVE_PERMUTE:
        case SP_OP_SDY_REDUCE_SCATTER:
        case SP_OP_SDY_REPLICATED_TO_UNREDUCED:
        case SP_OP_SDY_SHARDED_TO_UNREDUCED:
            key = "out_sharding";
            break;
        case SP_OP_SDY_MANUAL_COMPUTATION:
        case SP_OP_SDY_NAMED_COMPUTATION: {
            /* as in Shardy, the results are sharded as out_shardings says */
            const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, "out_shardings");
            if (a != NULL && a->kind == SP_ATTR_SHARDING_LIST &&
                m->values[v].index < a->u.shardings.n) {
                return a->u.shardings.items[m->values[v].index];
            }
            break;
        }
        default:
            break;
        }
        if (key != NULL) {
            const sp_attr *a = sp_attrs_get(op->attrs, op->n_attrs, key);
            return a != NULL && a->kind == SP_ATTR_SHARDING ? a->u.sharding : NULL;
        }
    }
    return sp_value_sharding(m, v);
}

static sp_attr *sharding_attr(sp_module *m, sp_sharding *s)
{
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING);
    if (a != NULL) {
        a->u.sharding = s;
    }
    return a;
}

/* A copy of dict with key set to value (removed when value is NULL). */
static sp_attr *dict_with(sp_module *m, const sp_attr *dict, const char *key, sp_attr *value)
{
    uint32_t n = dict != NULL && dict->kind == SP_ATTR_DICT ? dict->u.dict.n : 0;
    sp_attr *d = sp_attr_new(m, SP_ATTR_DICT);
    if (d == NULL) {
        return NULL;
    }
    d->u.dict.items = cm_arena_alloc(&m->arena, sizeof(sp_named_attr) * (n + 1u));
    if (d->u.dict.items == NULL) {
        return NULL;
    }
    uint32_t k = 0;
    bool set = false;
    for (uint32_t i = 0; i < n; i++) {
        d->u.dict.items[k] = dict->u.dict.items[i];
        if (strcmp(dict->u.dict.items[i].name, key) == 0) {
            set = true;
            if (value == NULL) {
                continue;
            }
            d->u.dict.items[k].value = value;
        }
        k++;
    }
    if (!set && value != NULL) {
        d->u.dict.items[k].name = key;
        d->u.dict.items[k].value = value;
        k++;
    }
    d->u.dict.n = k;
    return d;
}

/* Sets key in entry idx of the count-long array-of-dicts attribute list_name. */
static cm_status set_list_item(sp_module *m, uint32_t op, const char *list_name, uint32_t count,
                               uint32_t idx, const char *key, sp_attr *value)
{
    const sp_attr *old = sp_op_attr(m, op, list_name);
    sp_attr *arr = sp_attr_new(m, SP_ATTR_ARRAY);
    if (arr == NULL) {
        return CM_ENOMEM;
    }
    arr->u.arr.n = count;
    arr->u.arr.items = cm_arena_alloc(&m->arena, sizeof(sp_attr *) * (count + 1u));
    if (arr->u.arr.items == NULL) {
        return CM_ENOMEM;
    }
    for (uint32_t i = 0; i < count; i++) {
        const sp_attr *it = list_item(old, i);
        if (i == idx) {
            arr->u.arr.items[i] = dict_with(m, it, key, value);
        } else if (it != NULL) {
            arr->u.arr.items[i] = (sp_attr *)(uintptr_t)it;
        } else {
            arr->u.arr.items[i] = sp_attr_new(m, SP_ATTR_DICT);
        }
        if (arr->u.arr.items[i] == NULL) {
            return CM_ENOMEM;
        }
    }
    return sp_op_set_attr(m, op, list_name, arr);
}

cm_status sp_func_set_arg_attr(sp_module *m, uint32_t func, uint32_t i, const char *key,
                               sp_attr *value)
{
    const sp_type *ft = sp_func_type(m, func);
    if (ft == NULL || i >= ft->n_inputs) {
        return CM_EINVAL;
    }
    return set_list_item(m, func, "arg_attrs", ft->n_inputs, i, key, value);
}

cm_status sp_func_set_result_attr(sp_module *m, uint32_t func, uint32_t i, const char *key,
                                  sp_attr *value)
{
    const sp_type *ft = sp_func_type(m, func);
    if (ft == NULL || i >= ft->n_results) {
        return CM_EINVAL;
    }
    return set_list_item(m, func, "res_attrs", ft->n_results, i, key, value);
}

cm_status sp_func_set_result_sharding(sp_module *m, uint32_t func, uint32_t i, sp_sharding *s)
{
    sp_attr *a = s != NULL ? sharding_attr(m, s) : NULL;
    if (s != NULL && a == NULL) {
        return CM_ENOMEM;
    }
    return sp_func_set_result_attr(m, func, i, "sdy.sharding", a);
}

cm_status sp_value_set_sharding(sp_module *m, uint32_t v, sp_sharding *s)
{
    const sp_value *val = &m->values[v];
    if (val->def == SP_NONE) {
        uint32_t owner = m->blocks[val->block].parent_op;
        if (owner == SP_NONE || m->ops[owner].kind != SP_OP_FUNC_FUNC) {
            return CM_EINVAL;
        }
        sp_attr *a = s != NULL ? sharding_attr(m, s) : NULL;
        if (s != NULL && a == NULL) {
            return CM_ENOMEM;
        }
        return sp_func_set_arg_attr(m, owner, val->index, "sdy.sharding", a);
    }
    uint32_t opid = val->def;
    const sp_op *op = &m->ops[opid];
    if (op->kind == SP_OP_SDY_SHARDING_CONSTRAINT) {
        if (s == NULL) {
            return CM_EINVAL;
        }
        sp_attr *a = sharding_attr(m, s);
        return a == NULL ? CM_ENOMEM : sp_op_set_attr(m, opid, "sharding", a);
    }
    uint32_t idx = val->index, n = op->n_results;
    sp_attr *a = sp_attr_new(m, SP_ATTR_SHARDING_LIST);
    if (a == NULL) {
        return CM_ENOMEM;
    }
    a->u.shardings.n = n;
    a->u.shardings.items = cm_arena_alloc(&m->arena, sizeof(sp_sharding *) * n);
    if (a->u.shardings.items == NULL) {
        return CM_ENOMEM;
    }
    const sp_attr *old = sp_attrs_get(op->attrs, op->n_attrs, "sdy.sharding");
    bool have_old = old != NULL && old->kind == SP_ATTR_SHARDING_LIST && old->u.shardings.n == n;
    const char *mesh = s != NULL ? s->mesh_name : NULL;
    for (uint32_t i = 0; i < n; i++) {
        sp_sharding *x = i == idx ? s : have_old ? old->u.shardings.items[i] : NULL;
        if (x == NULL) {
            const sp_type *t = &m->types[m->values[op->first_result + i].type];
            x = sp_sharding_open(&m->arena, mesh, t->kind == SP_TYPE_TENSOR ? t->rank : 0);
            if (x == NULL) {
                return CM_ENOMEM;
            }
        }
        a->u.shardings.items[i] = x;
    }
    if (s == NULL && !have_old) {
        return CM_OK;
    }
    return sp_op_set_attr(m, opid, "sdy.sharding", a);
}

bool sp_module_is_partitioned(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (sp_op_is_sdy_collective((sp_op_kind)m->ops[i].kind)) {
            return true;
        }
    }
    return false;
}
