/* SPDX-License-Identifier: Apache-2.0
 * planner: the IR tables — creation of values, ops, blocks, interned types,
 * attribute helpers and diagnostics. See sp_ir.h for the layout. */
#include "sp_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_ops.h"
#include "sp_diag.h"

sp_module *sp_module_create(void)
{
    sp_module *m = cm_calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    cm_arena_init(&m->arena, 1u << 16);
    cm_map_init(&m->type_ids, sizeof(uint32_t));
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
    cm_free(m->values);
    cm_free(m->ops);
    cm_free(m->blocks);
    cm_free(m->types);
    cm_map_fini(&m->type_ids);
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

/* The element types: their MLIR spelling and bytes per element (i1 and the
 * 2/4/8-bit types take a byte each), indexed by sp_elem. */
static const struct {
    const char *name; /* NULL for SP_ELEM_OTHER */
    size_t bytes;
} elems[] = {
    [SP_ELEM_OTHER] = {NULL, 0},        [SP_ELEM_I1] = {"i1", 1},
    [SP_ELEM_I2] = {"i2", 1},           [SP_ELEM_I4] = {"i4", 1},
    [SP_ELEM_I8] = {"i8", 1},           [SP_ELEM_I16] = {"i16", 2},
    [SP_ELEM_I32] = {"i32", 4},         [SP_ELEM_I64] = {"i64", 8},
    [SP_ELEM_UI2] = {"ui2", 1},         [SP_ELEM_UI4] = {"ui4", 1},
    [SP_ELEM_UI8] = {"ui8", 1},         [SP_ELEM_UI16] = {"ui16", 2},
    [SP_ELEM_UI32] = {"ui32", 4},       [SP_ELEM_UI64] = {"ui64", 8},
    [SP_ELEM_BF16] = {"bf16", 2},       [SP_ELEM_F16] = {"f16", 2},
    [SP_ELEM_F32] = {"f32", 4},         [SP_ELEM_F64] = {"f64", 8},
    [SP_ELEM_F8E4M3FN] = {"f8E4M3FN", 1}, [SP_ELEM_F8E5M2] = {"f8E5M2", 1},
    [SP_ELEM_F4E2M1FN] = {"f4E2M1FN", 1}, [SP_ELEM_F6E2M3FN] = {"f6E2M3FN", 1},
    [SP_ELEM_F6E3M2FN] = {"f6E3M2FN", 1}, [SP_ELEM_F8E3M4] = {"f8E3M4", 1},
    [SP_ELEM_F8E4M3] = {"f8E4M3", 1},     [SP_ELEM_F8E4M3B11FNUZ] = {"f8E4M3B11FNUZ", 1},
    [SP_ELEM_F8E4M3FNUZ] = {"f8E4M3FNUZ", 1}, [SP_ELEM_F8E5M2FNUZ] = {"f8E5M2FNUZ", 1},
    [SP_ELEM_F8E8M0FNU] = {"f8E8M0FNU", 1},
    [SP_ELEM_C64] = {"complex<f32>", 8}, [SP_ELEM_C128] = {"complex<f64>", 16},
    [SP_ELEM_INDEX] = {"index", 8},
};

#define N_ELEMS (sizeof elems / sizeof elems[0])

size_t sp_elem_bytes(sp_elem e)
{
    return (size_t)e < N_ELEMS ? elems[e].bytes : 0;
}

const char *sp_elem_name(sp_elem e)
{
    return (size_t)e < N_ELEMS && elems[e].name != NULL ? elems[e].name : "?";
}

sp_elem sp_elem_of_name(const char *s, size_t n)
{
    for (size_t i = 0; i < N_ELEMS; i++) {
        if (elems[i].name != NULL && strlen(elems[i].name) == n &&
            memcmp(elems[i].name, s, n) == 0) {
            return (sp_elem)i;
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
    t->elem = sp_elem_of_name(p, (size_t)(e - p));
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

/* The canonical text a type-id map entry is looked up by. */
typedef struct type_key {
    const sp_module *m;
    const char *text;
    size_t len;
} type_key;

static bool type_id_eq(const void *entry, const void *key)
{
    const type_key *k = key;
    const sp_type *t = &k->m->types[*(const uint32_t *)entry];
    return t->text_len == k->len && memcmp(t->text, k->text, k->len) == 0;
}

cm_status sp_module_intern_type(sp_module *m, const char *text, size_t len, uint32_t *id_out,
                                cm_error *err)
{
    size_t n;
    /* fast path: already canonical text is common; normalise into a temp */
    char *canon = normalize_type(&m->arena, text, len, &n);
    if (canon == NULL) {
        return cm_error_oom(err);
    }
    if (n == 0) {
        return cm_error_set(err, CM_EINVAL, NULL, "empty type");
    }
    uint64_t h = cm_hash_bytes(canon, n);
    type_key key = {m, canon, n};
    const uint32_t *found = cm_map_find(&m->type_ids, h, type_id_eq, &key);
    if (found != NULL) {
        *id_out = *found;
        return CM_OK;
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
        return st == CM_ENOMEM ? cm_error_oom(err) : st;
    }
    /* parsing may have interned nested types: the new id is the next one */
    if (CM_GROW_U32(m->types, m->cap_types, m->n_types + 1, err) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t *slot;
    if (cm_map_insert(&m->type_ids, h, (void **)&slot, err) != CM_OK) {
        return CM_ENOMEM;
    }
    uint32_t id = m->n_types++;
    m->types[id] = t;
    *slot = id;
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
    cm_status st = b.oom ? cm_error_oom(err) : sp_module_intern_type(m, b.data, b.len, id_out, err);
    cm_buf_fini(&b);
    return st;
}

/* ---- blocks, values, ops -------------------------------------------------------- */

cm_status sp_module_new_block(sp_module *m, uint32_t parent_op, uint32_t *id_out)
{
    if (CM_GROW_U32(m->blocks, m->cap_blocks, m->n_blocks + 1, NULL) != CM_OK) {
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
    if (CM_GROW_U32(m->values, m->cap_values, m->n_values + 1, NULL) != CM_OK) {
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
    if (CM_GROW_U32(b->ops, b->cap_ops, b->n_ops + 1, NULL) != CM_OK) {
        return CM_ENOMEM;
    }
    b->ops[b->n_ops++] = op;
    return CM_OK;
}

cm_status sp_module_new_op(sp_module *m, uint32_t block, const char *name,
                           const uint32_t *operands, uint32_t n_operands,
                           const uint32_t *result_types, uint32_t n_results, uint32_t *op_out)
{
    if (CM_GROW_U32(m->ops, m->cap_ops, m->n_ops + 1, NULL) != CM_OK) {
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
    if (CM_GROW_U32(b->ops, b->cap_ops, b->n_ops + 1, NULL) != CM_OK) {
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
    n->where = o->where;
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

typedef struct vmap_entry {
    uint32_t from, to;
} vmap_entry;

static bool vmap_eq(const void *entry, const void *key)
{
    return ((const vmap_entry *)entry)->from == *(const uint32_t *)key;
}

static uint64_t vmap_hash(uint32_t v)
{
    return cm_hash_u64((uint64_t)v + 1u);
}

cm_status sp_value_map_set(sp_value_map *map, uint32_t from, uint32_t to)
{
    if (map->map.elem == 0) {
        cm_map_init(&map->map, sizeof(vmap_entry));
    }
    void *e;
    if (cm_map_find_or_insert(&map->map, vmap_hash(from), vmap_eq, &from, &e, NULL, NULL) !=
        CM_OK) {
        return CM_ENOMEM;
    }
    ((vmap_entry *)e)->from = from;
    ((vmap_entry *)e)->to = to;
    return CM_OK;
}

uint32_t sp_value_map_get(const sp_value_map *map, uint32_t v)
{
    if (map->map.elem == 0 || map->map.n == 0) {
        return SP_NONE;
    }
    const vmap_entry *e = cm_map_find(&map->map, vmap_hash(v), vmap_eq, &v);
    return e != NULL ? e->to : SP_NONE;
}

void sp_value_map_free(sp_value_map *map)
{
    if (map->map.elem != 0) {
        cm_map_fini(&map->map);
    }
    memset(map, 0, sizeof *map);
}

cm_status sp_op_clone_deep(sp_module *m, uint32_t op, sp_value_map *map, uint32_t *clone_out)
{
    uint32_t types[64];
    const sp_op *o = &m->ops[op];
    if (o->n_results > 64) {
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
    for (uint32_t k = 0; k < n->n_operands; k++) {
        uint32_t t = sp_value_map_get(map, n->operands[k]);
        if (t != SP_NONE) {
            n->operands[k] = t;
        }
    }
    if (o->n_attrs > 0) {
        n->attrs = cm_arena_memdup(&m->arena, o->attrs, o->n_attrs, sizeof(sp_named_attr));
        if (n->attrs == NULL) {
            return CM_ENOMEM;
        }
        n->n_attrs = o->n_attrs;
    }
    for (uint32_t i = 0; i < o->n_results; i++) {
        if (sp_value_map_set(map, o->first_result + i, n->first_result + i) != CM_OK) {
            return CM_ENOMEM;
        }
    }
    uint32_t n_regions = o->n_regions;
    if (n_regions == 0) {
        *clone_out = c;
        return CM_OK;
    }
    if (sp_op_add_regions(m, c, n_regions) != CM_OK) {
        return CM_ENOMEM;
    }
    for (uint32_t r = 0; r < n_regions; r++) {
        for (uint32_t bi = 0; bi < m->ops[op].regions[r].n_blocks; bi++) {
            uint32_t ob = m->ops[op].regions[r].blocks[bi], nb;
            if (sp_module_new_block(m, c, &nb) != CM_OK || sp_region_add_block(m, c, r, nb) != CM_OK) {
                return CM_ENOMEM;
            }
            m->blocks[nb].label = m->blocks[ob].label;
            m->blocks[nb].arg_locs = m->blocks[ob].arg_locs;
            for (uint32_t a = 0; a < m->blocks[ob].n_args; a++) {
                uint32_t ov = m->blocks[ob].first_arg + a, nv;
                if (sp_module_add_block_arg(m, nb, m->values[ov].type, &nv) != CM_OK ||
                    sp_value_map_set(map, ov, nv) != CM_OK) {
                    return CM_ENOMEM;
                }
            }
            for (uint32_t k = 0; k < m->blocks[ob].n_ops; k++) {
                uint32_t inner;
                st = sp_op_clone_deep(m, m->blocks[ob].ops[k], map, &inner);
                if (st != CM_OK) {
                    return st;
                }
                if (sp_block_insert_op(m, nb, m->blocks[nb].n_ops, inner) != CM_OK) {
                    return CM_ENOMEM;
                }
            }
        }
    }
    *clone_out = c;
    return CM_OK;
}

/* Whether attribute names a and b are equal. Lookups run for every op at
 * every step of the passes, and names mostly differ in their first bytes or
 * are the same static string, so an inline loop beats a call to strcmp. */
static inline bool name_eq(const char *a, const char *b)
{
    if (a == b) {
        return true;
    }
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* The attribute names passes set on many ops, as static strings: an op's
 * attribute names are never freed or written, so they need no arena copy. */
static const char *known_attr_name(const char *name)
{
    static const char *const names[] = {"sdy.sharding", "sdy.sharding_rule", "sharding",
                                        "sdy.sharding_origins", "sdy.result_sharding_origins"};
    /* callers pass these very literals (merged by the linker) most often */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i] == name) {
            return names[i];
        }
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (name_eq(names[i], name)) {
            return names[i];
        }
    }
    return NULL;
}

cm_status sp_op_set_attr(sp_module *m, uint32_t opid, const char *name, sp_attr *value)
{
    sp_op *op = &m->ops[opid];
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (name_eq(op->attrs[i].name, name)) {
            op->attrs[i].value = value;
            return CM_OK;
        }
    }
    /* The list is arena-owned (reader, generator, or an earlier call here):
     * a fresh arena copy one longer. Passes add an attribute to most ops of
     * a module, so a malloc per op would dominate their cost. */
    sp_named_attr *p = cm_arena_alloc(&m->arena, sizeof *p * (op->n_attrs + 1u));
    if (p == NULL) {
        return CM_ENOMEM;
    }
    if (op->n_attrs > 0) {
        memcpy(p, op->attrs, sizeof *p * op->n_attrs);
    }
    op->attrs = p;
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
        if (name_eq(op->attrs[i].name, name)) {
            /* the arena-owned list is shortened in place */
            memmove(&op->attrs[i], &op->attrs[i + 1], sizeof op->attrs[0] * (op->n_attrs - i - 1));
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
        if (name_eq(attrs[i].name, name)) {
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

/* Attribute equality and hashing (sp_attr_equal, sp_attr_hash): rule caches
 * share one derived rule between ops whose rule-relevant attributes are
 * equal. Both stop at ATTR_MAX_DEPTH levels of nesting. */
#define ATTR_MAX_DEPTH 8

/* Folds x into h (boost's hash_combine). Inline and cheaper than
 * cm_hash_combine, which cost propagation 1.5% more instructions here (an
 * attribute hash per op); its low bits are spread enough for a map, as
 * strings come in through cm_hash_bytes. */
static uint64_t mix(uint64_t h, uint64_t x)
{
    return h ^ (x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

static uint64_t str_hash(uint64_t h, const char *s)
{
    return mix(h, s != NULL ? cm_hash_bytes(s, strlen(s)) : 0);
}

static uint64_t attr_hash(const sp_attr *a, int depth)
{
    uint64_t h = mix(0x1234, (uint64_t)a->kind);
    if (depth > ATTR_MAX_DEPTH) {
        return h;
    }
    switch (a->kind) {
    case SP_ATTR_BOOL:
        return mix(h, a->u.b);
    case SP_ATTR_INT:
        return mix(h, (uint64_t)a->u.i.v);
    case SP_ATTR_FLOAT:
        return str_hash(h, a->u.f.lit);
    case SP_ATTR_STRING:
        return mix(h, cm_hash_bytes(a->u.str.s, a->u.str.len));
    case SP_ATTR_SYMBOL:
        return str_hash(h, a->u.sym);
    case SP_ATTR_TYPE:
        return mix(h, a->u.type);
    case SP_ATTR_ARRAY:
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            h = mix(h, attr_hash(a->u.arr.items[i], depth + 1));
        }
        return h;
    case SP_ATTR_DENSE_ARRAY:
        for (uint32_t i = 0; i < a->u.darr.n; i++) {
            h = mix(h, (uint64_t)a->u.darr.v[i]);
        }
        return h;
    case SP_ATTR_DICT:
        for (uint32_t i = 0; i < a->u.dict.n; i++) {
            h = str_hash(h, a->u.dict.items[i].name);
            h = mix(h, attr_hash(a->u.dict.items[i].value, depth + 1));
        }
        return h;
    case SP_ATTR_PARAMS:
        h = str_hash(h, a->u.params.name);
        for (uint32_t i = 0; i < a->u.params.n; i++) {
            h = str_hash(h, a->u.params.items[i].name);
            h = mix(h, attr_hash(a->u.params.items[i].value, depth + 1));
        }
        return h;
    case SP_ATTR_DENSE:
        return mix(str_hash(h, a->u.dense.body), a->u.dense.type);
    case SP_ATTR_ENUM:
        return str_hash(str_hash(h, a->u.enm.kind), a->u.enm.value);
    case SP_ATTR_OPAQUE:
        return str_hash(h, a->u.opaque.text);
    default:
        return h;
    }
}

uint64_t sp_attr_hash(const sp_attr *a)
{
    return attr_hash(a, 0);
}

static bool attr_eq(const sp_attr *a, const sp_attr *b, int depth);

static bool named_eq(const sp_named_attr *x, uint32_t nx, const sp_named_attr *y, uint32_t ny,
                     int depth)
{
    if (nx != ny) {
        return false;
    }
    for (uint32_t i = 0; i < nx; i++) {
        if (strcmp(x[i].name, y[i].name) != 0 || !attr_eq(x[i].value, y[i].value, depth + 1)) {
            return false;
        }
    }
    return true;
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool attr_eq(const sp_attr *a, const sp_attr *b, int depth)
{
    if (a == b) {
        return true;
    }
    if (a->kind != b->kind || depth > ATTR_MAX_DEPTH) {
        return false;
    }
    switch (a->kind) {
    case SP_ATTR_UNIT:
        return true;
    case SP_ATTR_BOOL:
        return a->u.b == b->u.b;
    case SP_ATTR_INT:
        return a->u.i.v == b->u.i.v && str_eq(a->u.i.type, b->u.i.type);
    case SP_ATTR_FLOAT:
        return str_eq(a->u.f.lit, b->u.f.lit) && str_eq(a->u.f.type, b->u.f.type);
    case SP_ATTR_STRING:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case SP_ATTR_SYMBOL:
        return str_eq(a->u.sym, b->u.sym);
    case SP_ATTR_TYPE:
        return a->u.type == b->u.type;
    case SP_ATTR_ARRAY:
        if (a->u.arr.n != b->u.arr.n) {
            return false;
        }
        for (uint32_t i = 0; i < a->u.arr.n; i++) {
            if (!attr_eq(a->u.arr.items[i], b->u.arr.items[i], depth + 1)) {
                return false;
            }
        }
        return true;
    case SP_ATTR_DENSE_ARRAY:
        return a->u.darr.n == b->u.darr.n && str_eq(a->u.darr.elem, b->u.darr.elem) &&
               (a->u.darr.n == 0 ||
                memcmp(a->u.darr.v, b->u.darr.v, sizeof(int64_t) * a->u.darr.n) == 0);
    case SP_ATTR_DICT:
        return named_eq(a->u.dict.items, a->u.dict.n, b->u.dict.items, b->u.dict.n, depth);
    case SP_ATTR_PARAMS:
        return str_eq(a->u.params.name, b->u.params.name) &&
               named_eq(a->u.params.items, a->u.params.n, b->u.params.items, b->u.params.n, depth);
    case SP_ATTR_DENSE:
        return a->u.dense.type == b->u.dense.type && str_eq(a->u.dense.body, b->u.dense.body);
    case SP_ATTR_ENUM:
        return str_eq(a->u.enm.kind, b->u.enm.kind) && str_eq(a->u.enm.value, b->u.enm.value);
    case SP_ATTR_OPAQUE:
        return str_eq(a->u.opaque.text, b->u.opaque.text);
    default:
        return false; /* the sdy kinds: equal only as the same object (above) */
    }
}

bool sp_attr_equal(const sp_attr *a, const sp_attr *b)
{
    return attr_eq(a, b, 0);
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

const char *sp_diag_sev_name(sp_diag_sev sev)
{
    switch (sev) {
    case SP_DIAG_ERROR:
        return "error";
    case SP_DIAG_WARNING:
        return "warning";
    case SP_DIAG_REMARK:
        return "remark";
    case SP_DIAG_NOTE:
        return "note";
    }
    return "error";
}

void sp_diags_init(sp_diags *d)
{
    d->items = NULL;
    d->n = 0;
    d->cap = 0;
    d->oom = false;
    d->once = 0;
}

bool sp_diags_once(sp_diags *d, sp_diag_once key)
{
    if (d == NULL || (d->once & (uint32_t)key) != 0) {
        return false;
    }
    d->once |= (uint32_t)key;
    return true;
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
    if (CM_GROW_U32(d->items, d->cap, d->n + 1, NULL) != CM_OK) {
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

/* Item i of an array attribute, or NULL (the items are the module's, not
 * the array's: reading through a const array does not make them const). */
static sp_attr *list_item(const sp_attr *arr, uint32_t i)
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

sp_sharding *sp_value_sharding_partitioned(const sp_module *m, uint32_t v)
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
        sp_attr *it = list_item(old, i);
        if (i == idx) {
            arr->u.arr.items[i] = dict_with(m, it, key, value);
        } else if (it != NULL) {
            arr->u.arr.items[i] = it;
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

/* ---- locations ------------------------------------------------------------------ */

/* Locations nest as deep as the reader allowed (it caps them); the walks
 * below stop at 64 levels anyway, so a built cycle cannot loop. */
static const char *loc_name_at(const sp_loc *l, int depth)
{
    if (l == NULL || depth > 64) {
        return NULL;
    }
    switch (l->kind) {
    case SP_LOC_NAME:
        return l->str;
    case SP_LOC_CALLSITE:
        return l->n_kids > 0 ? loc_name_at(l->kids[0], depth + 1) : NULL;
    case SP_LOC_FUSED:
        for (uint32_t i = 0; i < l->n_kids; i++) {
            const char *s = loc_name_at(l->kids[i], depth + 1);
            if (s != NULL) {
                return s;
            }
        }
        return NULL;
    default:
        return NULL;
    }
}

const char *sp_loc_name(const sp_loc *l)
{
    return loc_name_at(l, 0);
}

static const sp_loc *loc_file_at(const sp_loc *l, int depth)
{
    if (l == NULL || depth > 64) {
        return NULL;
    }
    if (l->kind == SP_LOC_FILE) {
        return l;
    }
    for (uint32_t i = 0; i < l->n_kids; i++) {
        const sp_loc *f = loc_file_at(l->kids[i], depth + 1);
        if (f != NULL) {
            return f;
        }
    }
    return NULL;
}

const sp_loc *sp_loc_file(const sp_loc *l)
{
    return loc_file_at(l, 0);
}

const sp_loc *sp_value_loc(const sp_module *m, uint32_t v)
{
    if (v >= m->n_values) {
        return NULL;
    }
    const sp_value *val = &m->values[v];
    if (val->def != SP_NONE) {
        return m->ops[val->def].where;
    }
    if (val->block == SP_NONE) {
        return NULL;
    }
    const sp_block *b = &m->blocks[val->block];
    return b->arg_where != NULL && val->index < b->n_args ? b->arg_where[val->index] : NULL;
}

const char *sp_value_name(const sp_module *m, uint32_t v)
{
    const sp_loc *l = sp_value_loc(m, v);
    if (l == NULL) {
        return NULL;
    }
    if (m->values[v].def != SP_NONE) {
        /* an op's location names its result only when it is a bare name: JAX's
         * `"jit(f)/dot_general"(#loc3)` is the op's name stack, not a value's */
        return l->kind == SP_LOC_NAME && l->n_kids == 0 ? l->str : NULL;
    }
    return sp_loc_name(l);
}

const char *sp_func_result_name(const sp_module *m, uint32_t func, uint32_t i)
{
    const sp_attr *d = list_item(sp_op_attr(m, func, "res_attrs"), i);
    if (d == NULL || d->kind != SP_ATTR_DICT) {
        return NULL;
    }
    const sp_attr *a = sp_attrs_get(d->u.dict.items, d->u.dict.n, "jax.result_info");
    return a != NULL && a->kind == SP_ATTR_STRING && a->u.str.len > 0 ? a->u.str.s : NULL;
}

bool sp_op_source(const sp_module *m, uint32_t op, char *buf, size_t n)
{
    if (n == 0) {
        return false;
    }
    buf[0] = '\0';
    const sp_loc *f = op < m->n_ops ? sp_loc_file(m->ops[op].where) : NULL;
    if (f == NULL) {
        return false;
    }
    /* snprintf(buf, n, "%s:%u", ...) by hand (it runs per op of each plan
     * document and cost section), cut short at n - 1 bytes as snprintf is */
    char num[12];
    size_t k = sizeof num;
    unsigned line = f->line;
    do {
        num[--k] = (char)('0' + line % 10u);
        line /= 10u;
    } while (line != 0);
    num[--k] = ':';
    const char *parts[2] = {f->str != NULL ? f->str : "", num + k};
    size_t lens[2] = {strlen(parts[0]), sizeof num - k};
    size_t at = 0;
    for (int i = 0; i < 2; i++) {
        size_t c = lens[i] < n - 1 - at ? lens[i] : n - 1 - at;
        memcpy(buf + at, parts[i], c);
        at += c;
    }
    buf[at] = '\0';
    return true;
}
